"""`contextfold proxy`: run an MCP server behind contextfold, which guards its oversized results.

    contextfold proxy [options] -- COMMAND [ARGS…]      an upstream server over stdio
    contextfold proxy [options] --url URL [--header K=V]  an upstream over streamable HTTP
    contextfold proxy [options] --config servers.json    several upstreams, names prefixed

The proxy itself serves MCP on stdio, or on streamable HTTP with `--http`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the parser is built for every command: it imports nothing it does not need
    from ..config import Settings

FLAG_SETTINGS = {"max_tokens": "proxy_max_tokens", "preview_tokens": "proxy_preview_tokens", "timeout": "proxy_timeout_seconds"}


def add_parser(sub: Any) -> None:
    """The `proxy` subcommand (called by cli.py)."""
    proxy = sub.add_parser(
        "proxy",
        help="run an MCP server behind contextfold, which spills its oversized results (proxy -- COMMAND ARGS…)",
        description="Serve MCP on stdio (or --http) in front of an upstream MCP server: everything passes "
        "through, except results over the limits, which are saved whole and replaced by a preview with a "
        "read_output hint. Give the upstream as `-- COMMAND [ARGS…]`, --url, or --config.",
    )
    proxy.add_argument("--url", help="the upstream's streamable HTTP endpoint instead of a command")
    proxy.add_argument(
        "--header", action="append", default=[], metavar="K=V", help="an HTTP header for --url (repeatable)"
    )
    proxy.add_argument(
        "--config",
        "--servers",
        dest="servers",
        metavar="FILE",
        help='several upstreams: a JSON file in the apps\' {"mcpServers": {...}} format, tools prefixed by server',
    )
    proxy.add_argument("--max-tokens", type=int, metavar="N", help="cut results over N tokens (proxy_max_tokens)")
    proxy.add_argument(
        "--preview-tokens", type=int, metavar="N", help="tokens a cut result keeps (proxy_preview_tokens)"
    )
    proxy.add_argument(
        "--timeout", type=float, metavar="S", help="fail requests unanswered for S seconds (proxy_timeout_seconds)"
    )
    proxy.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    proxy.add_argument("--host", default="127.0.0.1", help="with --http: bind address (default 127.0.0.1)")
    proxy.add_argument("--port", type=int, default=8766, help="with --http: port (default 8766)")
    proxy.add_argument("upstream", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]: the upstream server to run")
    proxy.set_defaults(handler="commands.proxy:proxy")


def proxy(args: argparse.Namespace, settings: Settings) -> Any:
    import logging
    import sys

    from ..cli_errors import CliError

    settings = _with_flags(args, settings)
    command = list(args.upstream)
    if command[:1] == ["--"]:
        command = command[1:]
    given = [bool(command), bool(args.url), bool(args.servers)]
    if sum(given) != 1:
        raise CliError(
            "give exactly one upstream: `contextfold proxy -- COMMAND [ARGS…]`, `--url URL` or `--config FILE`"
            + (f" (got {sum(given)})" if sum(given) else "")
        )
    if args.header and not args.url:
        raise CliError("--header goes with --url")
    headers = _headers(args.header)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    if args.http:
        from ..proxy.http import serve_proxy_http

        serve_proxy_http(settings, _spec(command, args.url, headers, args.servers), host=args.host, port=args.port)
        return 0
    return _stdio(settings, _spec(command, args.url, headers, args.servers))


def _spec(command: list[str], url: str | None, headers: dict[str, str], servers: str | None) -> Any:
    from pathlib import Path

    from ..proxy.upstream import UpstreamSpec, load_servers

    if servers:
        return load_servers(Path(servers).expanduser())
    return UpstreamSpec(command=command or None, url=url, headers=headers)


async def _stdio(settings: Settings, spec: Any) -> int:
    import asyncio
    import signal

    from ..proxy.channels import stdio_channel
    from ..proxy.upstream import run_proxy

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(signum, task.cancel)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    client = await stdio_channel(settings.max_request_bytes)
    try:
        await run_proxy(client, spec, settings)
    except asyncio.CancelledError:
        pass
    return 0


def _with_flags(args: argparse.Namespace, settings: Settings) -> Settings:
    from ..config import Settings, SettingsError

    flags = {FLAG_SETTINGS[k]: getattr(args, k) for k in FLAG_SETTINGS if getattr(args, k) is not None}
    if not flags:
        return settings
    try:
        return Settings.model_validate({**settings.model_dump(), **flags})
    except ValueError as exc:
        raise SettingsError(f"proxy: {exc}".splitlines()[0]) from exc


def _headers(pairs: list[str]) -> dict[str, str]:
    from ..cli_errors import CliError

    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--header {pair!r}: expected NAME=VALUE, e.g. --header 'Authorization=Bearer …'")
        headers[name.strip()] = value.strip()
    return headers

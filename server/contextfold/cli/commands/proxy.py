"""`contextfold proxy`: run an MCP server behind contextfold, which guards its oversized results.

    contextfold proxy [options] -- COMMAND [ARGS…]      an upstream server over stdio
    contextfold proxy [options] --url URL [--header K=V]  an upstream over streamable HTTP
    contextfold proxy [options] --config servers.json    several upstreams, names prefixed

The proxy itself serves MCP on stdio, or on streamable HTTP with `--http`, where clients are let in
as `serve --http` lets them in: bearer tokens from the same file and variable, the same per-tenant
session limits, the same 401 (`_access`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextfold.config import Settings

FLAG_SETTINGS = {
    "max_tokens": "proxy_max_tokens",
    "preview_tokens": "proxy_preview_tokens",
    "timeout": "proxy_timeout_seconds",
}


def proxy(args: argparse.Namespace, settings: Settings) -> Any:
    import logging
    import sys

    from contextfold.errors import UsageError

    settings = _with_flags(args, settings)
    command = list(args.upstream)
    if command[:1] == ["--"]:
        command = command[1:]
    given = [bool(command), bool(args.url), bool(args.servers)]
    if sum(given) != 1:
        raise UsageError(
            "give exactly one upstream: `contextfold proxy -- COMMAND [ARGS…]`, `--url URL` or `--config FILE`"
            + (f" (got {sum(given)})" if sum(given) else "")
        )
    if args.header and not args.url:
        raise UsageError("--header goes with --url")
    if args.tokens_file and not args.http:
        raise UsageError("--tokens-file goes with --http (over stdio the client is the user who started the proxy)")
    headers = _headers(args.header)
    from contextfold.cli import logs

    if not logs.configure(logging.WARNING):  # one line per record into a file; on a terminal, the message alone
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    if args.http:
        from contextfold.proxy.http import serve_proxy_http

        spec = _spec(command, args.url, headers, args.servers)
        serve_proxy_http(settings, spec, host=args.host, port=args.port, access=_access(args, settings))
        return 0
    return _stdio(settings, _spec(command, args.url, headers, args.servers))


def _access(args: argparse.Namespace, settings: Settings) -> Any:
    """Who may use `proxy --http`, exactly as for `serve --http`: its tokens (`--tokens-file`, else
    <home>/tokens if it exists, and CONTEXTFOLD_TOKENS), its session limits and its 401."""
    from contextfold.cli.commands.serve import load_tokens
    from contextfold.mcpserver.auth import SCOPE
    from contextfold.mcpserver.http import ExplainUnauthorized
    from contextfold.mcpserver.limits import SessionLimits
    from contextfold.proxy.http import Access

    tokens = load_tokens(args, settings, "it runs the upstream server for whoever connects")
    limits = SessionLimits(
        settings.http_sessions_per_tenant, settings.http_max_sessions, settings.http_session_idle_seconds
    )
    return Access(verifier=tokens or None, scope=SCOPE, limit_sessions=limits.install, explain=ExplainUnauthorized)


def _spec(command: list[str], url: str | None, headers: dict[str, str], servers: str | None) -> Any:
    from pathlib import Path

    from contextfold.proxy.spec import UpstreamSpec, load_servers

    if servers:
        return load_servers(Path(servers).expanduser())
    return UpstreamSpec(command=command or None, url=url, headers=headers)


async def _stdio(settings: Settings, spec: Any) -> int:
    import asyncio
    import signal

    from contextfold.names import LOCAL_OWNER
    from contextfold.proxy.channels import stdio_channel, terminate_upstreams
    from contextfold.proxy.run import run_proxy

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:

        def stop() -> None:  # the upstream first: the client may SIGKILL the proxy next
            terminate_upstreams()
            task.cancel()

        for signum in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(signum, stop)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    client = await stdio_channel(settings.max_request_bytes)
    try:
        await run_proxy(client, spec, settings, owner=LOCAL_OWNER)  # stdio: the local user
    except asyncio.CancelledError:
        pass
    finally:
        await client.aclose()  # while the loop runs: a pipe left to the finaliser warns, or worse
    return 0


def _with_flags(args: argparse.Namespace, settings: Settings) -> Settings:
    from contextfold.config import Settings
    from contextfold.errors import SettingsError

    flags = {FLAG_SETTINGS[k]: getattr(args, k) for k in FLAG_SETTINGS if getattr(args, k) is not None}
    if not flags:
        return settings
    try:
        return Settings.model_validate({**settings.model_dump(), **flags})
    except ValueError as exc:
        raise SettingsError(f"proxy: {exc}".splitlines()[0]) from exc


def _headers(pairs: list[str]) -> dict[str, str]:
    from contextfold.errors import UsageError

    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--header {pair!r}: expected NAME=VALUE, e.g. --header 'Authorization=Bearer …'")
        headers[name.strip()] = value.strip()
    return headers

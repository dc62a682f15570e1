"""`contextfold serve`: the MCP server on stdio, or on streamable HTTP with `--http`."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from contextfold.cli.commands.token import default_path as default_tokens_path
from contextfold.config import Settings
from contextfold.errors import SettingsError
from contextfold.mcpserver.auth import TenantTokens
from contextfold.mcpserver.tools import build_server
from contextfold.names import TOKENS_ENV

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(args: argparse.Namespace, settings: Settings) -> int:
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if getattr(args, "tools", None) else None
    if getattr(args, "database", None):
        settings.database = args.database  # validated: a path or a postgresql:// URL
    if getattr(args, "spill_url", None):
        settings.spill_url = args.spill_url
    if getattr(args, "stateless", False):
        settings.http_stateless = True
    if settings.database_url:
        from contextfold.home.opening import check_database  # reachable and migrated, or one line and exit 2

        check_database(settings)
    from contextfold.cli import logs

    logs.configure()  # one line per record when stderr is a file (before the SDK installs rich's handler)
    if not args.http:
        import anyio

        from contextfold.mcpserver.rawjson import serve_stdio  # lone surrogates repaired, parse errors answered

        if _terminal(sys.stdin):  # a person, not an app, started it: say what it waits for
            print(waiting_notice(settings), file=sys.stderr, flush=True)
        anyio.run(serve_stdio, build_server(settings, tools=tools))
        return 0
    from contextfold.mcpserver.http import serve_http  # the HTTP transport, for this branch only

    tokens = load_tokens(args, settings, "anyone who can reach it could read every session")
    server = build_server(settings, tokens=tokens or None, tools=tools)
    serve_http(server, settings, host=args.host, port=args.port)
    return 0


def load_tokens(args: argparse.Namespace, settings: Settings, exposed: str) -> TenantTokens:
    """The bearer tokens of `serve --http` or `proxy --http`; refused, saying `exposed` (what a
    stranger could do), when the address is not loopback and there are none."""
    tokens = TenantTokens.load(tokens_file(args, settings))
    if args.host not in LOOPBACK and not tokens:
        raise SettingsError(
            f"refusing to serve on {args.host} without bearer tokens: {exposed}. Create one with `contextfold "
            f"token add NAME` (kept in {default_tokens_path(settings)}, read by default; or pass --tokens-file "
            f"FILE, or set {TOKENS_ENV}), or bind 127.0.0.1"
        )
    return tokens


def tokens_file(args: argparse.Namespace, settings: Settings) -> Path | None:
    """--tokens-file (which must exist), else <home>/tokens if `token add` made one, else none."""
    if args.tokens_file:
        return Path(args.tokens_file).expanduser()
    default = default_tokens_path(settings)
    return default if default.exists() else None


def _terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def waiting_notice(settings: Settings) -> str:
    """What `serve` says when a person, not an app, started it on a terminal: it waits for an MCP
    client on stdio, and how to add it to an app instead."""
    exe = shlex.quote(_executable())
    home = shlex.quote(str(settings.home))
    return (
        "contextfold serve: waiting for an MCP client on stdio (this is the command an app starts; Ctrl-C to stop).\n"
        "To add it to an app:\n"
        "  Claude Code:  contextfold hooks install claude-code    (hooks and server; or: claude mcp add contextfold -- "
        f"{exe} serve)\n"
        "  Codex:        contextfold hooks install codex          (or: codex mcp add contextfold -- "
        f"{exe} serve)\n"
        f'  other apps:   {{"mcpServers": {{"contextfold": {{"command": "{_executable()}", "args": ["serve"]}}}}}}\n'
        f"Data home: {home}. Over HTTP instead: contextfold serve --http (http://127.0.0.1:8765/mcp)."
    )


def _executable() -> str:
    """The `contextfold` executable this process runs as, when it is one; else plain `contextfold`."""
    import shutil

    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "contextfold" and argv0.exists():
        return str(argv0.resolve())
    return shutil.which("contextfold") or "contextfold"

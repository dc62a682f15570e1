"""`contextfold ui`: the web inspector on this machine, read-only, over the data home."""

from __future__ import annotations

import argparse
import socket
import sys
import webbrowser

from contextfold.cli.commands._home import open_home
from contextfold.cli.commands.serve import LOOPBACK, load_tokens
from contextfold.config import Settings
from contextfold.errors import UsageError


def ui(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    if not settings.database_url and not settings.database_path.exists():
        raise UsageError(
            f"no sessions to show: the data home {settings.home} holds no database yet (no {settings.database_path}); "
            "import a transcript with `contextfold import FILE`, or pass --home"
        )
    if not 0 <= args.port <= 65_535:
        raise UsageError(f"--port: expected 0–65535, got {args.port}")
    # The same tokens and refusal as `serve --http`: off loopback, a stranger could read every session.
    tokens = load_tokens(args, settings, "anyone who can reach it could read every session in the inspector")
    sock = _bound(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    anyio.run(_serve, settings, tokens, sock, url, not args.no_open, args.host in LOOPBACK)
    return 0


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port") from None
    sock.listen(128)
    return sock


async def _serve(
    settings: Settings, tokens: object, sock: socket.socket, url: str, open_it: bool, loopback: bool
) -> None:
    import uvicorn
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    from contextfold.mcpserver.auth import TenantTokens
    from contextfold.web.app import build_app

    # Opened as a server opens it, not immutable as `show` reads a home no process has open: the
    # pages follow what agents append meanwhile. Nothing here writes (only GET is routed, and every
    # page calls the service's readers).
    service = await open_home(settings)
    assert isinstance(tokens, TenantTokens)
    async with service:
        app = build_app(service, tokens)
        if loopback:  # a page of another site cannot reach this one through a rebound name
            app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1"])
        print(f"contextfold ui: {url} (read-only; Ctrl-C stops it)", flush=True)
        if open_it:
            webbrowser.open(url)
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        await uvicorn.Server(config).serve(sockets=[sock])
    print("contextfold ui: stopped", file=sys.stderr)

"""`contextfold serve --http`: the SDK's streamable HTTP app on uvicorn, with four additions.

Many sessions share one event loop here, so nothing slow may run on it: a large tool call's big
strings are decoded off the loop (`bigstrings`, where the SDK would take 100 ms for 40 MB), and
the tokenizers are built in a thread at start rather than by the first request that counts.

Request bodies being read or handled are limited per tenant and in all, a big one is parsed in a
worker thread a step at a time, and a batch over `max_batch_messages` is refused as it arrives
(`bodies`). Open sessions are limited per tenant (`httplimits`), and idle ones close after
`http_session_idle_seconds`. And the SDK refuses a body over `max_request_body_size` before reading it, which is what we want, but
with a bare-text 413 that MCP clients can only report as "Server returned an error response". A
413 carrying a JSON-RPC error is surfaced by clients as the error itself, so the response is
rewritten to one that names the limit and what to do. The SDK's 401 for a missing or refused
bearer token is rewritten the same way, to say how to pass a token and how to get one.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

import anyio
from mcp.server import MCPServer

from contextfold.config import Settings
from contextfold.home.bearer import digest, fingerprint
from contextfold.mcpserver.auth import unauthorized_message
from contextfold.mcpserver.bigstrings import LargeStrings
from contextfold.mcpserver.bodies import RequestBodies
from contextfold.mcpserver.limits import SessionLimits
from contextfold.mcpserver.rawjson import RepairSurrogates
from contextfold.tokens import encodings

log = logging.getLogger(__name__)

INVALID_REQUEST = -32600
UNAUTHORIZED = -32001
"""A JSON-RPC server error (the -32000..-32099 range is the implementation's): no bearer token."""

Scope = dict[str, Any]
Message = dict[str, Any]


class _ExplainTooLarge:
    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": INVALID_REQUEST,
                    "message": f"request body exceeds max_request_bytes ({limit:,} bytes); "
                    "send fewer messages per append, spill huge outputs, or raise the setting",
                },
            }
        ).encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False

        async def explain(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
                await send({"type": "http.response.start", "status": 413, "headers": headers})
                await send({"type": "http.response.body", "body": self.body})
            elif not replaced:  # the SDK's own plain-text body is dropped
                await send(message)

        await self.app(scope, receive, explain)


def _jsonrpc_error(code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()


def _bearer(scope: Scope) -> str | None:
    """The request's bearer token, as the SDK reads it (the first Authorization header)."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            return value[7:].decode("latin-1") if value[:7].lower() == b"bearer " else None
    return None


class ExplainUnauthorized:
    """The SDK's 401 (`{"error": "invalid_token", "error_description": "Authentication required"}`)
    rewritten to a JSON-RPC error saying how to send a token and how to get one, which MCP clients
    show as the error itself. The challenge names no OAuth metadata: this server has none. Per RFC
    6750, a request without credentials gets a bare challenge, a refused token `invalid_token`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        presented = token is not None
        replaced = False

        async def explain(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 401:
                replaced = True
                # For whoever runs the server, since clients such as Claude Code show only "Failed
                # to connect": compare the fingerprint with `contextfold token list`.
                why = "no bearer token"
                if token is not None:
                    why = f"bearer token {fingerprint(digest(token))} is unknown, removed or rotated"
                log.info("refused %s %s: %s", scope.get("method"), scope.get("path"), why)
                body = _jsonrpc_error(UNAUTHORIZED, unauthorized_message(presented))
                challenge = 'Bearer realm="contextfold"'
                if presented:
                    challenge += ', error="invalid_token", error_description="bearer token unknown, removed or rotated"'
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
            elif not replaced:  # the SDK's own body is dropped
                await send(message)

        await self.app(scope, receive, explain)


def serve_http(server: MCPServer, settings: Settings, *, host: str, port: int) -> None:
    """Serve `server` over streamable HTTP until interrupted (loopback binds get DNS-rebinding checks).

    Sessions are limited per tenant (`SessionLimits`) and closed after
    `http_session_idle_seconds` without a request in flight or an open stream.
    """
    import uvicorn

    # Sessions share this event loop: build the tokenizers now, off it, rather than in the first
    # request that counts (0.4 s during which every other session would wait).
    threading.Thread(target=encodings.warm, name="contextfold-tokenizers", daemon=True).start()
    # A request takes the interpreter back from a busy worker thread (a 40 MB append being
    # measured and stored) each time its database thread answers: after 1 ms, not the default 5.
    sys.setswitchinterval(0.001)
    app = server.streamable_http_app(
        host=host,
        max_request_body_size=settings.max_request_bytes,
        session_idle_timeout=settings.http_session_idle_seconds,
        max_sessions=None,  # SessionLimits refuses first, naming the setting
        # Replicas behind a load balancer: a 2025-era client's requests may each reach another
        # process, so none keeps an MCP session (no server-to-client requests then; the
        # sessionless 2026-07-28 protocol never has them over HTTP requests anyway).
        stateless_http=settings.http_stateless,
    )
    SessionLimits(
        settings.http_sessions_per_tenant, settings.http_max_sessions, settings.http_session_idle_seconds
    ).install(server.session_manager)
    verifier = server._token_verifier  # the SDK keeps it private; None without bearer tokens
    verify = verifier.verify_token if verifier is not None else None
    # Lone surrogate escapes are repaired first, so that the SDK's parser never refuses one.
    guarded = RepairSurrogates(
        LargeStrings(app, limit=settings.max_request_bytes, verify=verify),
        limit=settings.max_request_bytes,
        verify=verify,
    )
    # Bodies in flight are bounded and big ones parsed off the loop before anything reads them.
    bodies = RequestBodies(_ExplainTooLarge(guarded, settings.max_request_bytes), settings, verify=verify)
    config = uvicorn.Config(
        ExplainUnauthorized(bodies),
        host=host,
        port=port,
        log_level=server.settings.log_level.lower(),
    )
    anyio.run(uvicorn.Server(config).serve)

"""`contextfold proxy --http`: the proxy served to clients over streamable HTTP.

The SDK's session manager, with each handshake-era session relayed to an upstream connection of
its own and recorded in a contextfold session of its own. Sessionless 2026-07-28 requests (each
POST one request) are served by the SDK's handler for them, which hands each to `_Sessionless`:
one relay for all of them, to one upstream connection opened in that era at the first such
request, with ids and progress tokens made unique on the way up and restored on the way down, so
that each request's answer and notifications reach its own POST. Their calls share one
contextfold session (they have no session of their own to follow). Channels over the SDK's
streams are `sdk.SdkChannel`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from contextfold.errors import UsageError
from contextfold.names import LOCAL_OWNER
from contextfold.proxy import wire
from contextfold.proxy.channels import Frame
from contextfold.proxy.run import run_proxy
from contextfold.proxy.sdk import SdkChannel

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.service.facade import ContextService

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve_proxy_http(settings: Settings, spec: Any, *, host: str, port: int) -> None:
    """Serve the proxy over streamable HTTP at http://host:port/mcp until interrupted."""

    if host not in LOOPBACK:
        raise UsageError(
            f"refusing to serve the proxy on {host}: it runs the upstream server for whoever connects. "
            "Bind 127.0.0.1 (the default), or serve it on stdio"
        )
    import uvicorn

    config = uvicorn.Config(build_app(settings, spec, host=host), host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


def build_app(settings: Settings, spec: Any, *, host: str = "127.0.0.1") -> Any:
    """The proxy's ASGI app: /mcp, each handshake-era session relayed to an upstream of its own."""
    from contextlib import asynccontextmanager

    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    security = None
    if host in LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = _sessions(settings, spec, security)

    @asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        from contextfold.home.opening import open_service

        service, problem = await open_service(settings)
        if problem is not None:
            log.warning("contextfold proxy: %s", problem)
        manager.service = service
        manager.sessionless.service = service
        try:
            async with manager.run():
                yield
        finally:
            await manager.sessionless.aclose()
            await service.close()

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        await manager.handle_request(scope, receive, send)

    return Starlette(routes=[Route("/mcp", endpoint=_Endpoint(endpoint))], lifespan=lifespan)


class _Endpoint:
    """A plain ASGI callable for a Starlette route (all methods)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _sessions(settings: Settings, spec: Any, security: Any) -> Any:
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
    from starlette.responses import Response

    class ProxySessions(StreamableHTTPSessionManager):
        """The SDK's session manager (sessions, idle timeout, limits, DNS-rebinding checks), with
        each session's stream pair relayed instead of served by an SDK server."""

        service: ContextService | None = None
        sessionless: _Sessionless

        async def _handle_request(self, scope: Any, receive: Any, send: Any) -> None:
            version = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), None)
            if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS and sessionless.unavailable:
                body = wire.error(None, -32601, sessionless.unavailable)
                await Response(json.dumps(body), status_code=404, media_type="application/json")(scope, receive, send)
                return
            await super()._handle_request(scope, receive, send)

        async def _serve_opening_request(self, http_transport: Any, scope: Any, receive: Any, send: Any) -> None:
            session_id = http_transport.mcp_session_id

            async def run_server(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                async with http_transport.connect() as (read_stream, write_stream):
                    task_status.started()
                    try:
                        idle_scope = http_transport.idle_scope or anyio.CancelScope()
                        with idle_scope:
                            client = SdkChannel(read_stream, write_stream, upstream=False)
                            await run_proxy(client, spec, settings, owner=LOCAL_OWNER, service=self.service)
                    except Exception:
                        log.exception("contextfold proxy: session %s failed", session_id)
                    finally:
                        await self._discard_session(session_id, http_transport)

            established = False
            try:
                assert self._task_group is not None
                await self._task_group.start(run_server)
                status: list[int] = []

                async def watch(message: Any) -> None:
                    if message["type"] == "http.response.start":
                        status.append(message["status"])
                    await send(message)

                await http_transport.handle_request(scope, receive, watch)
                established = bool(status) and status[0] < 400
            finally:
                if not established:
                    await self._discard_session(session_id, http_transport)

    sessionless = _Sessionless(settings, spec)
    app = Server("contextfold-proxy")
    app.middleware = [sessionless]  # every sessionless request is the relay's, whatever its method
    manager = ProxySessions(
        app=app,
        security_settings=security,
        max_request_body_size=settings.max_request_bytes,
        session_idle_timeout=settings.http_session_idle_seconds,
        max_sessions=settings.http_max_sessions,
    )
    manager.sessionless = sessionless
    return manager


class _Sessionless:
    """Sessionless (2026-07-28) requests over HTTP: one relay and one upstream connection for all.

    Installed as the SDK server's only middleware, so every such request comes here whatever its
    method, and its answer (result, or error) is the upstream's, relayed and guarded."""

    def __init__(self, settings: Settings, spec: Any) -> None:
        self.settings = settings
        self.spec = spec
        self.service: ContextService | None = None
        self.unavailable: str | None = None
        if isinstance(spec, list):
            self.unavailable = (
                "contextfold proxy --config serves MCP over HTTP in the handshake era (2025-11-25 and "
                "before), not 2026-07-28: start with initialize"
            )
        self._channel: _Multiplex | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def _relay(self) -> _Multiplex:
        async with self._lock:
            if self._channel is None:
                self._channel = _Multiplex()
                self._task = asyncio.create_task(
                    run_proxy(self._channel, self.spec, self.settings, owner=LOCAL_OWNER, service=self.service)
                )
            return self._channel

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        from mcp import MCPError
        from mcp_types import server_notification_adapter

        if ctx.request_id is None:  # a notification: the sessionless wire defines none from clients
            return None
        channel = await self._relay()
        message = {"jsonrpc": "2.0", "id": ctx.request_id, "method": ctx.method, "params": dict(ctx.params or {})}
        exchange = channel.submit(message)
        try:
            while True:
                item = await exchange.queue.get()
                if wire.is_response(item):
                    break
                try:
                    notification = server_notification_adapter.validate_python(item, by_name=False)
                    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
                except Exception:
                    log.debug(
                        "contextfold proxy: a notification for a sessionless request was not delivered", exc_info=True
                    )
        except BaseException:
            await channel.abandon(exchange)
            raise
        finally:
            channel.forget(exchange)
        if "error" in item:
            error = item["error"] if isinstance(item["error"], dict) else {}
            raise MCPError(
                int(error.get("code", wire.INTERNAL_ERROR)), str(error.get("message", "error")), error.get("data")
            )
        return item.get("result", {})

    async def aclose(self) -> None:
        if self._channel is not None:
            await self._channel.aclose()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=10)


@dataclass
class _Exchange:
    id: Any
    """The client's id; the relay and the upstream see `key`."""
    key: str
    token: Any
    """The client's progress token, if any; the upstream sees `key` instead."""
    method: str
    queue: asyncio.Queue[dict[str, Any]]


class _Multiplex:
    """The relay's client end for sessionless HTTP requests: many HTTP requests, one stream of
    messages. Ids and progress tokens are replaced by unique ones going up, and restored coming down."""

    def __init__(self) -> None:
        self._inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._open: dict[str, _Exchange] = {}
        self._count = 0

    def submit(self, message: dict[str, Any]) -> _Exchange:
        self._count += 1
        key = f"contextfold-http:{self._count}"
        params = dict(wire.params(message))
        meta = dict(wire.meta(message))
        token = meta.get("progressToken")
        if token is not None:
            meta["progressToken"] = key
            params["_meta"] = meta
        exchange = _Exchange(message["id"], key, token, message["method"], asyncio.Queue())
        self._open[key] = exchange
        self._inbox.put_nowait({**message, "id": key, "params": params})
        return exchange

    async def abandon(self, exchange: _Exchange) -> None:
        """The HTTP request went away: cancel its request upstream."""
        if exchange.key in self._open:
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": exchange.key}}
            await self._inbox.put(cancel)

    def forget(self, exchange: _Exchange) -> None:
        self._open.pop(exchange.key, None)

    # -- the relay's side ---------------------------------------------------------------------------------

    async def receive(self) -> Frame | None:
        message = await self._inbox.get()
        if message is None:
            return None
        raw = wire.dumps(message)
        return Frame(raw, message, len(raw))

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        data = json.loads(message) if isinstance(message, bytes) else message
        if wire.is_response(data):
            exchange = self._open.get(data["id"]) if isinstance(data["id"], str) else None
            if exchange is not None:
                exchange.queue.put_nowait({**data, "id": exchange.id})
            return
        if not wire.is_notification(data):
            return  # a request to the client: the sessionless era has no way to carry one
        params = wire.params(data)
        if data["method"] == "notifications/progress":
            token = params.get("progressToken")
            exchange = self._open.get(token) if isinstance(token, str) else None
            if exchange is not None:
                exchange.queue.put_nowait({**data, "params": {**params, "progressToken": exchange.token}})
            return
        targets = [self._open[related]] if isinstance(related, str) and related in self._open else []
        if not targets:  # list-changed and resource updates: to every open subscription stream
            targets = [e for e in self._open.values() if e.method == "subscriptions/listen"]
        for exchange in targets:
            exchange.queue.put_nowait(data)

    async def aclose(self) -> None:
        await self._inbox.put(None)

"""`contextfold proxy --http`: the proxy served to clients over streamable HTTP.

The SDK's session manager, with each handshake-era session relayed to upstreams of its own and
recorded in a contextfold session of its own. Sessionless 2026-07-28 requests (each POST one
request) are served by the SDK's handler for them, which hands each to `_Sessionless`: one relay
per tenant, to one upstream connection, with ids and progress tokens made unique on the way up and
restored on the way down, so that each request's answer and notifications reach its own POST.
Channels over the SDK's streams are `sdk.SdkChannel`.

What a client costs and sees (`launch`): each session, and each tenant's sessionless requests,
has a `Seat`. Its upstreams start at the first request that needs one, not at the handshake, and
at most `proxy_max_upstreams` run for all clients together; a request past that gets a 503 naming
the setting. A session ends when its client closes it or after `http_session_idle_seconds` idle,
and its upstreams are stopped then (its relay ends as when a client leaves; a tenant's sessionless
relay likewise once idle). A client's `read_output` reads only the outputs its own session stored.

Who may connect is decided as `serve --http` decides it (`Access`, handed over by the command line,
which builds it from the server's own pieces): bearer tokens, each naming the tenant that owns the
sessions it opens; `http_sessions_per_tenant` and `http_max_sessions`; a 401 that says how to pass
a token. Sessionless requests without tokens come from clients the proxy cannot tell apart: they
share one relay, whose `search_history` is refused rather than show one client another's calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from contextfold.errors import UsageError
from contextfold.names import LOCAL_OWNER
from contextfold.proxy import wire
from contextfold.proxy.channels import Frame
from contextfold.proxy.launch import Seat, Upstreams
from contextfold.proxy.run import run_proxy
from contextfold.proxy.sdk import SdkChannel

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.service.facade import ContextService

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PEEK_BYTES = 1 << 20
"""A body at most this large that would start an upstream while none may start is read to answer
it with a 503 (the opening of a session, a request in one); a larger one is passed on and refused
by its relay."""
SESSIONLESS_UNSEARCHABLE = (
    "search_history searches one client's own earlier calls, and this request came without an MCP session "
    "(the sessionless 2026-07-28 protocol) and without a bearer token, so this proxy cannot tell its client "
    "from others: connect with the initialize handshake (2025-11-25), or with a bearer token, to search your "
    "own calls"
)


@dataclass(frozen=True)
class Access:
    """Who may connect, as `serve --http` decides it. The command line builds it from the server's
    pieces (`mcpserver.auth`, `mcpserver.limits`, `mcpserver.http`), which the proxy may not import."""

    verifier: Any = None
    """A `TokenVerifier` (`TenantTokens`): bearer tokens to tenants. None: no tokens, every client is
    the local user."""
    scope: str = "contextfold"
    """The scope every accepted token carries."""
    limit_sessions: Callable[[Any], None] | None = None
    """Installs `http_sessions_per_tenant` and `http_max_sessions` on the session manager."""
    explain: Callable[[Any], Any] | None = field(default=None)
    """Wraps the app so that a 401 says how to pass a token and where to get one."""


def serve_proxy_http(settings: Settings, spec: Any, *, host: str, port: int, access: Access | None = None) -> None:
    """Serve the proxy over streamable HTTP at http://host:port/mcp until interrupted."""

    access = access or Access()
    if host not in LOOPBACK and access.verifier is None:
        raise UsageError(
            f"refusing to serve the proxy on {host} without bearer tokens: it runs the upstream server for "
            "whoever connects. Create one with `contextfold token add NAME`, or bind 127.0.0.1 (the default), "
            "or serve it on stdio"
        )
    import uvicorn

    app = build_app(settings, spec, host=host, access=access)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


def build_app(settings: Settings, spec: Any, *, host: str = "127.0.0.1", access: Access | None = None) -> Any:
    """The proxy's ASGI app: /mcp, each client's upstreams started when it needs them."""
    from contextlib import asynccontextmanager

    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    access = access or Access()
    security = None
    if host in LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = _sessions(settings, spec, security, access)

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

    route: Any = _Endpoint(endpoint)
    middleware: list[Any] = []
    if access.verifier is not None:  # as the SDK wires a token verifier for `serve --http`
        from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
        from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
        from starlette.middleware import Middleware
        from starlette.middleware.authentication import AuthenticationMiddleware

        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(access.verifier)),
            Middleware(AuthContextMiddleware),
        ]
        route = RequireAuthMiddleware(route, [access.scope], None)
    app = Starlette(routes=[Route("/mcp", endpoint=route)], middleware=middleware, lifespan=lifespan)
    return access.explain(app) if access.explain is not None else app


class _Endpoint:
    """A plain ASGI callable for a Starlette route (all methods)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _tenant(scope: Any) -> str:
    """The tenant of a request: its bearer token's, or the local user's without tokens."""
    token = getattr(scope.get("user"), "access_token", None)
    client_id = getattr(token, "client_id", None)
    return client_id if isinstance(client_id, str) and client_id else LOCAL_OWNER


def _replaying(first: dict[str, Any], receive: Any) -> Any:
    """A `receive` that hands the app `first` again, then what the client sends next."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return first

    return replay


def _sessions(settings: Settings, spec: Any, security: Any, access: Access) -> Any:
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
    from starlette.responses import Response

    upstreams = Upstreams(settings)
    specs = spec if isinstance(spec, list) else [spec]
    session_header = MCP_SESSION_ID_HEADER.lower().encode("latin-1")

    class ProxySessions(StreamableHTTPSessionManager):
        """The SDK's session manager (sessions, idle timeout, DNS-rebinding checks), with each
        session's stream pair relayed instead of served by an SDK server."""

        service: ContextService | None = None
        sessionless: _Sessionless
        seats: dict[str, tuple[str, Seat]]
        """Each open session's tenant and seat, by session id."""

        async def _handle_request(self, scope: Any, receive: Any, send: Any) -> None:
            headers = dict(scope["headers"])
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1") or None
            modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
            if modern and sessionless.unavailable:
                body = wire.error(None, -32601, sessionless.unavailable)
                await Response(json.dumps(body), status_code=404, media_type="application/json")(scope, receive, send)
                return
            if scope.get("method") == "POST" and await upstreams.room() == 0:
                session_id = headers.get(session_header, b"").decode("latin-1") or None
                receive, refusal = await self._without_room(scope, receive, modern, session_id)
                if refusal is not None:
                    answer = Response(json.dumps(refusal), status_code=503, media_type="application/json")
                    await answer(scope, receive, send)
                    return
            await super()._handle_request(scope, receive, send)

        async def _without_room(
            self, scope: Any, receive: Any, modern: bool, session_id: str | None
        ) -> tuple[Any, dict[str, Any] | None]:
            """Whether this request would start an upstream while none may start: the refusal (a
            JSON-RPC error for its id) or None, and a `receive` that reads the body again."""
            first = await receive()
            replay = _replaying(first, receive)
            body = first.get("body", b"") if first.get("type") == "http.request" else b""
            if first.get("more_body") or not body or len(body) > PEEK_BYTES:
                return replay, None
            try:
                message = json.loads(body)
            except (ValueError, RecursionError):
                return replay, None
            if not wire.is_request(message):
                return replay, None
            tenant = _tenant(scope)
            if modern:
                seat = sessionless.seat(tenant)
                needs = seat is None or seat.needs(message)
            elif session_id is None:  # a session's opening: a probe, unless its answer is known
                needs = message["method"] == "initialize" and not all(upstreams.greeted(s, message) for s in specs)
            else:
                owner, seat = self.seats.get(session_id, (None, None))
                needs = owner == tenant and seat is not None and seat.needs(message)
            if not needs:
                return replay, None
            text = f"{upstreams.refusal()}; {message['method']} was not sent"
            return replay, wire.error(message["id"], wire.UPSTREAM_ERROR, text)

        async def _serve_opening_request(self, http_transport: Any, scope: Any, receive: Any, send: Any) -> None:
            session_id = http_transport.mcp_session_id
            tenant = _tenant(scope)
            seat = Seat(upstreams)
            self.seats[session_id] = (tenant, seat)

            async def run_server(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                async with http_transport.connect() as (read_stream, write_stream):
                    task_status.started()
                    client = SdkChannel(read_stream, write_stream, upstream=False)
                    relay = asyncio.create_task(
                        run_proxy(client, spec, settings, owner=tenant, service=self.service, seat=seat)
                    )
                    try:
                        idle_scope = http_transport.idle_scope or anyio.CancelScope()
                        with idle_scope:
                            await asyncio.wait({relay})
                    finally:
                        # Idle, or the server stopping: the relay ends as when its client leaves and
                        # stops its upstreams (cancelled with this task, that would be cut short).
                        relay.cancel()
                        with anyio.CancelScope(shield=True):
                            await asyncio.wait({relay})
                            if not relay.cancelled() and relay.exception() is not None:
                                log.error(
                                    "contextfold proxy: session %s failed", session_id, exc_info=relay.exception()
                                )
                            self.seats.pop(session_id, None)
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
                    self.seats.pop(session_id, None)
                    await self._discard_session(session_id, http_transport)

    sessionless = _Sessionless(settings, spec, upstreams, searchable=access.verifier is not None)
    app = Server("contextfold-proxy")
    app.middleware = [sessionless]  # every sessionless request is the relay's, whatever its method
    manager = ProxySessions(
        app=app,
        security_settings=security,
        max_request_body_size=settings.max_request_bytes,
        session_idle_timeout=settings.http_session_idle_seconds,
        max_sessions=None if access.limit_sessions is not None else settings.http_max_sessions,
    )
    manager.sessionless = sessionless
    manager.seats = {}
    if access.limit_sessions is not None:
        access.limit_sessions(manager)  # refuses first, naming the setting
    return manager


@dataclass
class _Lane:
    """One tenant's sessionless requests: their relay, its channel and seat, and when last used."""

    channel: _Multiplex
    seat: Seat
    used: float
    task: asyncio.Task[None] | None = None
    reaper: asyncio.Task[None] | None = None


class _Sessionless:
    """Sessionless (2026-07-28) requests over HTTP: one relay and one upstream connection per tenant.

    Installed as the SDK server's only middleware, so every such request comes here whatever its
    method, and its answer (result, or error) is the upstream's, relayed and guarded. A tenant's relay
    ends, and stops its upstream, once no request of its has been in flight for
    `http_session_idle_seconds`; the next request starts another."""

    def __init__(self, settings: Settings, spec: Any, upstreams: Upstreams, *, searchable: bool) -> None:
        self.settings = settings
        self.spec = spec
        self.upstreams = upstreams
        self.unsearchable = None if searchable else SESSIONLESS_UNSEARCHABLE
        self.service: ContextService | None = None
        self.unavailable: str | None = None
        if isinstance(spec, list):
            self.unavailable = (
                "contextfold proxy --config serves MCP over HTTP in the handshake era (2025-11-25 and "
                "before), not 2026-07-28: start with initialize"
            )
        self._lanes: dict[str, _Lane] = {}
        self._lock = asyncio.Lock()

    def seat(self, tenant: str) -> Seat | None:
        lane = self._lanes.get(tenant)
        return lane.seat if lane is not None else None

    async def _lane(self, tenant: str) -> _Lane:
        async with self._lock:
            lane = self._lanes.get(tenant)
            if lane is None:
                lane = _Lane(_Multiplex(), Seat(self.upstreams, unsearchable=self.unsearchable), time.monotonic())
                relay = run_proxy(
                    lane.channel, self.spec, self.settings, owner=tenant, service=self.service, seat=lane.seat
                )
                lane.task = asyncio.create_task(relay)
                lane.reaper = asyncio.create_task(self._reap(tenant, lane))
                self._lanes[tenant] = lane
            lane.used = time.monotonic()
            return lane

    async def _reap(self, tenant: str, lane: _Lane) -> None:
        """End the lane's relay once it has been idle for `http_session_idle_seconds`."""
        idle = self.settings.http_session_idle_seconds
        assert lane.task is not None
        while not lane.task.done():
            await asyncio.sleep(min(idle, 1.0))
            if lane.channel.busy():
                lane.used = time.monotonic()
            elif time.monotonic() - lane.used >= idle:
                break
        if self._lanes.get(tenant) is lane:
            del self._lanes[tenant]
        await lane.channel.aclose()
        await asyncio.wait({lane.task})

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        from mcp import MCPError
        from mcp.server.auth.middleware.auth_context import get_access_token
        from mcp_types import server_notification_adapter

        if ctx.request_id is None:  # a notification: the sessionless wire defines none from clients
            return None
        token = get_access_token()
        lane = await self._lane(token.client_id if token is not None and token.client_id else LOCAL_OWNER)
        channel = lane.channel
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
            lane.used = time.monotonic()
        if "error" in item:
            error = item["error"] if isinstance(item["error"], dict) else {}
            raise MCPError(
                int(error.get("code", wire.INTERNAL_ERROR)), str(error.get("message", "error")), error.get("data")
            )
        return item.get("result", {})

    async def aclose(self) -> None:
        lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            if lane.reaper is not None:
                lane.reaper.cancel()
            await lane.channel.aclose()
        tasks = {lane.task for lane in lanes if lane.task is not None}
        if tasks:
            await asyncio.wait(tasks, timeout=10)


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

    def busy(self) -> bool:
        """Whether a request (a notification stream included) is in flight."""
        return bool(self._open)

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

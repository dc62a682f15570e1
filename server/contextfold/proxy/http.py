"""The proxy's streamable-HTTP ends: an upstream at a URL, and `--http` for clients.

Both use the MCP SDK's transports, which turn HTTP (sessions, SSE streams, resumption, the
per-request headers) into a pair of message streams; `SdkChannel` makes such a pair a `Channel`
for the relay. Messages are re-encoded here (the SDK hands over parsed models), so over HTTP a
result is equal to a direct connection's as JSON rather than byte for byte.

Upstream (`--url`): one SDK client transport per proxied connection. The relay forwards the
client's handshake as it is; this end adds the headers the SDK's client session would add
(`MCP-Protocol-Version` once a version is negotiated; for a 2026-07-28 request `Mcp-Method`,
`Mcp-Name` and the `Mcp-Param-*` headers its tool's input schema asks for).

Clients (`--http`): the SDK's session manager, with each handshake-era session relayed to an
upstream connection of its own and recorded in a contextfold session of its own. Sessionless
2026-07-28 requests (each POST one request) are served by the SDK's handler for them, which
hands each to `_Sessionless`: one relay for all of them, to one upstream connection opened in
that era at the first such request, with ids and progress tokens made unique on the way up and
restored on the way down, so that each request's answer and notifications reach its own POST.
Their calls share one contextfold session (they have no session of their own to follow).
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from contextfold.proxy import wire
from contextfold.proxy.channels import Frame

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.service.facade import ContextService
    from contextfold.proxy.channels import Channel
    from contextfold.proxy.upstream import UpstreamSpec

log = logging.getLogger(__name__)


class SdkChannel:
    """A channel over the SDK's `SessionMessage` streams (an HTTP transport's)."""

    def __init__(self, read_stream: Any, write_stream: Any, *, upstream: bool) -> None:
        self._read = read_stream
        self._write = write_stream
        self._upstream = upstream
        self._version: str | None = None
        self._initializing: set[str] = set()
        self._param_headers: dict[str, dict[tuple[str, ...], str]] = {}
        self.closed = False

    async def receive(self) -> Frame | None:
        try:
            item = await self._read.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return None
        if isinstance(item, Exception):
            return Frame(b"", None, 0, f"an unreadable message ({item})")
        data = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
        if self._upstream:
            self._learn(data)
        raw = wire.dumps(data)
        return Frame(raw, data, len(raw))

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        from mcp.shared.message import ClientMessageMetadata, ServerMessageMetadata, SessionMessage
        from mcp_types import jsonrpc_message_adapter

        if self.closed:
            raise BrokenPipeError("the channel is closed")
        data = json.loads(message) if isinstance(message, bytes) else message
        parsed = jsonrpc_message_adapter.validate_python(data, by_name=False)
        if self._upstream:
            metadata: Any = ClientMessageMetadata(headers=self._headers(data))
        else:
            metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
        try:
            await self._write.send(SessionMessage(parsed, metadata=metadata))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            self.closed = True
            raise BrokenPipeError("the channel is closed") from exc

    async def aclose(self) -> None:
        self.closed = True

    # -- what the SDK's client session would add -------------------------------------------------------

    def _headers(self, data: dict[str, Any]) -> dict[str, str] | None:
        from mcp.shared.inbound import (
            MCP_METHOD_HEADER,
            MCP_NAME_HEADER,
            MCP_PROTOCOL_VERSION_HEADER,
            NAME_BEARING_METHODS,
            encode_header_value,
            mcp_param_headers,
        )

        if not wire.is_request(data):
            return None
        method = data["method"]
        if method == "initialize":
            self._initializing.add(wire.key(data["id"]))
            return None
        modern = wire.meta(data).get(wire.PROTOCOL_VERSION_META)
        if not isinstance(modern, str):
            return {MCP_PROTOCOL_VERSION_HEADER: self._version} if self._version else None
        params = wire.params(data)
        headers = {MCP_PROTOCOL_VERSION_HEADER: modern, MCP_METHOD_HEADER: method}
        name_key = NAME_BEARING_METHODS.get(method)
        if name_key is not None and isinstance(params.get(name_key), str):
            headers[MCP_NAME_HEADER] = encode_header_value(params[name_key])
        if method == "tools/call" and isinstance(params.get("name"), str):
            header_map = self._param_headers.get(params["name"])
            arguments = params.get("arguments")
            if header_map and isinstance(arguments, dict):
                headers.update(mcp_param_headers(header_map, arguments))
        return headers

    def _learn(self, data: dict[str, Any]) -> None:
        """The negotiated version (from `initialize`'s answer) and the tools' header maps."""
        if not wire.is_response(data) or not isinstance(data.get("result"), dict):
            return
        result = data["result"]
        if wire.key(data["id"]) in self._initializing:
            self._initializing.discard(wire.key(data["id"]))
            if isinstance(result.get("protocolVersion"), str):
                self._version = result["protocolVersion"]
        tools = result.get("tools")
        if isinstance(tools, list):
            from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

            for tool in tools:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    schema = tool.get("inputSchema")
                    if find_invalid_x_mcp_header(schema) is None:
                        self._param_headers[tool["name"]] = x_mcp_header_map(schema)


async def open_http_upstream(
    spec: UpstreamSpec, settings: Settings, stack: AsyncExitStack
) -> tuple[Channel | None, str | None]:
    """A channel to the upstream at `spec.url` (the connection is made at the first message)."""
    url = spec.url or ""
    if not url.startswith(("http://", "https://")):
        return None, f"the upstream URL {url!r} is not an http:// or https:// address"
    upstream = _HttpUpstream(url)
    await upstream.start(spec.headers, settings.max_message_bytes)
    stack.push_async_callback(upstream.aclose)
    return upstream, None


class _HttpUpstream:
    """The SDK's client transport, run in a task of its own: when it fails (the server cannot be
    reached, the connection drops) the proxy is told so, instead of going down with it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.failure: str | None = None
        self._channel: SdkChannel | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, headers: dict[str, str], max_bytes: int) -> None:
        self._task = asyncio.create_task(self._run(headers, max_bytes))
        await self._ready.wait()

    async def _run(self, headers: dict[str, str], max_bytes: int) -> None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        try:
            async with create_mcp_http_client(headers=headers or None) as client:
                async with streamable_http_client(self.url, http_client=client, max_sse_event_size=max_bytes) as streams:
                    self._channel = SdkChannel(*streams, upstream=True)
                    self._ready.set()
                    await self._stop.wait()
        except Exception as exc:
            self.failure = _leaf(exc)
            log.warning("contextfold proxy: the upstream at %s failed: %s", self.url, self.failure)
        finally:
            self._ready.set()
            if self._channel is not None:
                self._channel.closed = True

    async def receive(self) -> Frame | None:
        if self._channel is None:
            return None
        return await self._channel.receive()

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        if self._channel is None:
            raise BrokenPipeError("the upstream connection is closed")
        await self._channel.send(message)

    async def wait_exit(self) -> None:
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=2)

    def describe_exit(self) -> str:
        if self.failure is not None:
            return f"the upstream server at {self.url} cannot be reached or failed ({self.failure})"
        return f"the connection to the upstream server at {self.url} ended"

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=5)


def _leaf(exc: BaseException) -> str:
    """The innermost cause of a (grouped) exception, in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


# -- serving clients over HTTP ------------------------------------------------------------------------

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve_proxy_http(settings: Settings, spec: Any, *, host: str, port: int) -> None:
    """Serve the proxy over streamable HTTP at http://host:port/mcp until interrupted."""
    from contextfold.cli.reporting import CliError

    if host not in LOOPBACK:
        raise CliError(
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
        from contextfold.home.sqlite import open_service

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

    from contextfold.proxy.upstream import run_proxy

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
                            await run_proxy(client, spec, settings, service=self.service)
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
                from contextfold.proxy.upstream import run_proxy

                self._channel = _Multiplex()
                self._task = asyncio.create_task(run_proxy(self._channel, self.spec, self.settings, service=self.service))
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
                    log.debug("contextfold proxy: a notification for a sessionless request was not delivered", exc_info=True)
        except BaseException:
            await channel.abandon(exchange)
            raise
        finally:
            channel.forget(exchange)
        if "error" in item:
            error = item["error"] if isinstance(item["error"], dict) else {}
            raise MCPError(int(error.get("code", wire.INTERNAL_ERROR)), str(error.get("message", "error")), error.get("data"))
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
            exchange = self._open.get(params.get("progressToken")) if isinstance(params.get("progressToken"), str) else None
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

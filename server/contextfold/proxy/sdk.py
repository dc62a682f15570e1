"""The MCP SDK's transports as channels, and an upstream reached at a URL.

The SDK turns HTTP (sessions, SSE streams, resumption, the per-request headers) into a pair of
message streams; `SdkChannel` makes such a pair a `Channel` for the relay. Messages are re-encoded
here (the SDK hands over parsed models), so over HTTP a result is equal to a direct connection's
as JSON rather than byte for byte.

Upstream (`--url`): one SDK client transport per proxied connection. The relay forwards the
client's handshake as it is; this end adds the headers the SDK's client session would add
(`MCP-Protocol-Version` once a version is negotiated; for a 2026-07-28 request `Mcp-Method`,
`Mcp-Name` and the `Mcp-Param-*` headers its tool's input schema asks for).
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio

from contextfold.proxy import wire
from contextfold.proxy.channels import Frame

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.proxy.channels import Channel
    from contextfold.proxy.spec import UpstreamSpec

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
                async with streamable_http_client(
                    self.url, http_client=client, max_sse_event_size=max_bytes
                ) as streams:
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

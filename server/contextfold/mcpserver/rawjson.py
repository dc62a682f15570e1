"""Raw JSON-RPC text repaired before the SDK parses it, and every parse failure answered.

A JavaScript client that cuts a string between the halves of an emoji sends the escape `\\ud83d`
with no low surrogate after it. pydantic's JSON parser, which both SDK transports use, refuses
such a message outright: over HTTP the client got a parse error instead of its answer, and over
stdio no answer at all (the SDK logs a line it cannot parse and drops it, so the client waits
forever). Here every lone surrogate escape in the raw text becomes `\\ufffd` (the replacement
character, as the README promises), before the SDK sees the text: `repair` for HTTP bodies,
`serve_stdio` for stdin lines. The escape has the same length, so a body keeps its
Content-Length. On stdio, a line that still cannot be parsed (truncated JSON, not JSON-RPC) is
answered with a JSON-RPC error with id null, as JSON-RPC asks, rather than with silence.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.shared.message import SessionMessage
from mcp.types import ErrorData, JSONRPCError

from contextfold.mcpserver.bigstrings import MIN_BODY, bearer_allowed, content_length, read_body, replaying

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

_ESCAPES = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
"""An escaped backslash (kept: what follows it is text), a surrogate pair (kept), a lone surrogate."""
_SUSPECT = re.compile(rb"\\u[dD][89a-fA-F]")
_REPLACEMENT = rb"\ufffd"


def _one(match: re.Match[bytes]) -> bytes:
    escape = match.group()
    return escape if len(escape) != 6 or escape == b"\\\\" else _REPLACEMENT


def repair(raw: bytes) -> bytes:
    """`raw` JSON with each lone UTF-16 surrogate escape replaced by `\\ufffd` (same length)."""
    if _SUSPECT.search(raw) is None:  # the common case: one fast scan, no copy
        return raw
    return _ESCAPES.sub(_one, raw)


def repair_text(line: str) -> str:
    """`repair` for a line already decoded (stdin)."""
    if "\\u" not in line:
        return line
    raw = line.encode("utf-8", "surrogatepass")
    fixed = repair(raw)
    return line if fixed is raw else fixed.decode("utf-8", "surrogatepass")


class _RepairedLines:
    """stdin as the SDK reads it (UTF-8, invalid bytes replaced), each line repaired."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer

    def readline(self) -> str:
        line: bytes = self.buffer.readline()
        return repair_text(line.decode("utf-8", "replace"))


def parse_error_reply(exc: Exception) -> SessionMessage:
    """The JSON-RPC error (id null) for a line the SDK could not turn into a message."""
    errors = getattr(exc, "errors", None)
    kinds = {e.get("type") for e in errors()} if callable(errors) else set()
    if "json_invalid" in kinds or not kinds:
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid Request: the line is not a JSON-RPC message")
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def serve_stdio(server: MCPServer) -> None:
    """Serve `server` on stdin/stdout like `MCPServer.run_stdio_async`, with stdin lines repaired
    and every line the SDK cannot parse answered.

    Relies on `mcp.server.stdio._claim_fd` and `_open_stdin_diversion` (mcp 2.3, which pyproject
    pins) to take fd 0 as the SDK does (children read EOF); fails at start-up if they moved.
    """
    from mcp.server import stdio

    for name in ("_claim_fd", "_open_stdin_diversion"):
        if not hasattr(stdio, name):
            raise RuntimeError(f"the installed mcp SDK has no mcp.server.stdio.{name}")
    buffer, release = stdio._claim_fd(0, sys.stdin, "rb", stdio._open_stdin_diversion)
    stdin: Any = anyio.wrap_file(_RepairedLines(buffer))  # type: ignore[arg-type]  # a duck-typed text file
    lowlevel = server._lowlevel_server
    try:
        async with stdio.stdio_server(stdin=stdin) as (read, write):
            forward, messages = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def relay() -> None:
                async with forward:
                    async for item in read:
                        if isinstance(item, Exception):
                            await write.send(parse_error_reply(item))
                        else:
                            await forward.send(item)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(relay)
                await lowlevel.run(messages, write, lowlevel.create_initialization_options())
                tasks.cancel_scope.cancel()
    finally:
        if release is not None:
            release()


class RepairSurrogates:
    """ASGI middleware: a POST body reaches the app with its lone surrogate escapes repaired.

    Only bodies with a Content-Length within `limit` are read here (larger ones pass through for
    the app to refuse; a chunked body, which MCP clients do not send, passes untouched). A body of
    `MIN_BODY` or more is scanned in a worker thread, and only for a bearer token `verify` accepts,
    so that the event loop never stalls and no work is done for a client the app would refuse.
    """

    def __init__(
        self, app: Any, *, limit: int, verify: Callable[[str], Awaitable[object | None]] | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.verify = verify

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        length = content_length(scope) if scope["type"] == "http" and scope.get("method") == "POST" else None
        large = length is not None and length >= MIN_BODY
        if length is None or length > self.limit or (large and not await bearer_allowed(scope, self.verify)):
            await self.app(scope, receive, send)
            return
        chunks = await read_body(receive)
        if chunks is None:  # the client went away
            return
        body = b"".join(chunks)
        body = await anyio.to_thread.run_sync(repair, body) if large else repair(body)
        await self.app(scope, replaying(body, receive), send)

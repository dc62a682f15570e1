"""Request bodies over HTTP: how many bytes are read at once, and big ones parsed off the event loop.

One `append` of 1,000,000 tiny messages is 40 MB of JSON. The SDK read such a body whole and
parsed it on the event loop (a quarter of a second in which no other client was answered, and
seconds more while the tool made it safe and validated it), built a gigabyte of Python objects,
and only then did the tool refuse it for `max_batch_messages`; four at once took a server from
186 MB to 2.9 GB. `RequestBodies` stands in front of the SDK and does three things:

- **Bytes in flight are bounded**, per tenant (`http_body_bytes_per_tenant`) and in all
  (`http_body_bytes_in_flight`): a body is counted from the moment its request arrives (its
  Content-Length; a chunked body as it comes) until it has been answered, since what was parsed
  from it lives that long. A body that would pass a limit is refused at once, `429` or `503` with
  a JSON-RPC error naming the setting: waiting would hold the client with no word of why, and
  a queue would need a limit of its own. The refused body is read to its end and dropped
  (keeping none of it), so that the client, which sends its whole body before it reads, gets
  the answer rather than a reset connection.
- **A big body is parsed in a worker thread, a step at a time** (`jsonsteps`), whatever its
  shape: from `http_body_thread_bytes` (1 MiB) on. Only a `tools/call` may be that big (no other
  message carries more than a few kilobytes); its arguments go to the tool as parsed here and
  already made safe (`safejson`), and the SDK gets the same request with the arguments replaced by
  a token, which `restore` turns back. Anything else that big is refused with `413`.
- **`max_batch_messages` is enforced while the body arrives**: at 256 KiB, 1 MiB, 4 MiB, … the
  part received so far is read through (strings not even decoded), and an `append` or
  `summarize` whose `messages` already holds more than the server's limit is refused there, with
  the error the tool itself gives and the request's id; the rest of the body is dropped as it
  arrives. A body whose id or tool name comes only after its messages is refused when read whole,
  its messages counted, never built.

Smaller bodies reach the SDK as sent, counted against the limits; one holding more objects than
`max_batch_messages` (cheap to see) is first counted in a worker thread, nothing built, so that a
hundred 900 KB batches at once cannot do what one 40 MB batch did (they took 0.9 GB). A
request with a bearer token the server refuses is not read here at all: the SDK answers it `401`
without reading its body.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from contextfold import safejson
from contextfold.config import Settings
from contextfold.errors import LimitExceeded
from contextfold.mcpserver.bigstrings import content_length, read_body, replaying
from contextfold.mcpserver.jsonsteps import LBRACE, LBRACKET, RBRACE, RBRACKET, Incomplete, Steps, Unparsable

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603

FIRST_LOOK = 256 * 1024
"""Bytes received before the first look at a big body; each next look waits for four times as many."""
PEEK = 64 * 1024
"""Bytes of a refused body kept to find its request id in."""
BATCH_TOOLS = frozenset({"append", "summarize"})
"""The tools whose `messages` `max_batch_messages` limits."""

_MARK = "\x00contextfold-arguments"
_parsed: dict[str, dict[str, Any] | LimitExceeded] = {}
"""Token → the arguments a request's body carried (made safe), or why they are refused."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Verify = Callable[[str], Awaitable[Any]]


def restore(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments a `tools/call` whose body was parsed here carried, already made safe; None
    for any other call. Raises `LimitExceeded` for a body refused here (`max_batch_messages`,
    or nesting too deep), for the tool to answer as if it had refused it itself."""
    token = arguments.get(_MARK) if len(arguments) == 1 else None
    found = _parsed.get(token) if isinstance(token, str) else None
    if isinstance(found, LimitExceeded):
        raise found
    return found


def too_many_messages(limit: int) -> LimitExceeded:
    """The tool's own refusal (`service.runtime`), for a batch counted only up to the limit."""
    return LimitExceeded(
        "messages", f"more than {limit:,} messages exceed max_batch_messages ({limit:,}); append in smaller batches"
    )


# -- what a body holds ---------------------------------------------------------------------------


@dataclass
class Request:
    """A JSON-RPC message read from a body: its top-level members but `params`, the members of
    `params` but `arguments`, and the arguments (None when absent, not an object, or not built)."""

    fields: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] | None = None
    arguments: dict[str, Any] | None = None
    over: bool = False
    """Its `arguments.messages` holds more than the limit (and was not built)."""
    messages_at: int = -1
    """Where that array starts, to build it after all if the tool turns out not to be limited."""
    is_object: bool = True

    def method(self) -> Any:
        return self.fields.get("method")

    def name(self) -> Any:
        return None if self.params is None else self.params.get("name")

    def request_id(self) -> Any:
        return self.fields.get("id")

    def refused(self) -> bool:
        """Whether it is a `tools/call` of a batch tool over the limit, id known: decided."""
        return self.over and "id" in self.fields and self.method() == "tools/call" and self.name() in BATCH_TOOLS

    def not_a_call(self) -> bool:
        """Whether it is already known not to be a `tools/call`."""
        return not self.is_object or ("method" in self.fields and self.method() != "tools/call")


class _Decided(Exception):
    pass


_ENVELOPE = ("id", "method", "jsonrpc")
"""Top-level members always built: small, and what deciding needs."""


class _Reader:
    """Reads a JSON-RPC message from a body (or the part received so far), counting the messages
    of a batch tool's call and building nothing past the limit.

    With `build`, a member is built only once the message is known to be a `tools/call` (its
    method came first, as clients write it); before that, where its value starts is noted and the
    value passed over, to be built at the end if the message turns out to be a call (`defer`).
    """

    def __init__(self, steps: Steps, max_messages: int, *, build: bool) -> None:
        self.steps = steps
        self.max_messages = max_messages
        self.build = build
        self.request = Request()
        self.deferred: list[tuple[str, str, int]] = []
        """(where, key, offset of the value) of members passed over: "fields", "params" or "arguments"."""

    def read(self) -> Request:
        """The message; stops early (the rest unread) once it is known to be refused or not a call."""
        steps, request = self.steps, self.request
        try:
            if steps.peek() != LBRACE:
                request.is_object = False
                return request
            if steps.begin(LBRACE):
                while True:
                    key = steps.key()
                    if key == "params" and steps.peek() == LBRACE:
                        self._params()
                    else:
                        if key == "params":
                            request.params = None
                        request.fields[key] = self._value("fields", key, always=key in _ENVELOPE)
                    self._check()
                    if not steps.more(RBRACE):
                        break
            steps.done()
        except _Decided:
            pass
        return request

    def _building(self) -> bool:
        return self.build and self.request.method() == "tools/call"

    def _value(self, where: str, key: str, *, always: bool = False) -> Any:
        if self.build and (always or self._building()):
            return self.steps.value()
        if self.build:
            self.steps.peek()
            self.deferred.append((where, key, self.steps.at))
        return self.steps.value(build=always)

    def _check(self) -> None:
        if self.request.refused() or self.request.not_a_call():
            raise _Decided

    def _params(self) -> None:
        steps, request = self.steps, self.request
        request.params, request.arguments, request.over = {}, None, False
        if not steps.begin(LBRACE):
            return
        while True:
            key = steps.key()
            if key == "arguments" and steps.peek() == LBRACE:
                if not self._building():
                    self.deferred.append(("params", key, steps.at))
                self.arguments(build=self._building())
            else:
                if key == "arguments":
                    request.arguments = None
                request.params[key] = self._value("params", key, always=key == "name")
            self._check()
            if not steps.more(RBRACE):
                return

    def arguments(self, *, build: bool) -> dict[str, Any]:
        """The arguments object at the cursor (its messages counted), built or passed over."""
        steps, request = self.steps, self.request
        arguments: dict[str, Any] = {}
        request.arguments, request.over = arguments, False
        if not steps.begin(LBRACE):
            return arguments
        while True:
            key = steps.key()
            if key == "messages" and steps.peek() == LBRACKET:
                request.messages_at = steps.at
                messages = self._messages(build)
                if messages is not None:
                    arguments[key] = messages
            else:
                arguments[key] = steps.value(build)
            if not steps.more(RBRACE):
                return arguments

    def _messages(self, build: bool) -> list[Any] | None:
        """The array, built up to the limit; past it, only counted on (None)."""
        steps, request = self.steps, self.request
        items: list[Any] | None = [] if build else None
        if not steps.begin(LBRACKET):
            return items
        count = 0
        while True:
            count += 1
            if count > self.max_messages and not request.over:
                request.over, items = True, None
                self._check()
            item = steps.value(build and not request.over)
            if items is not None:
                items.append(item)
            if not steps.more(RBRACKET):
                return items


def look(data: bytes | bytearray, max_messages: int) -> Request | None:
    """What the first part of a body already decides: a `tools/call` of a batch tool over the
    limit, or a message that is not a `tools/call`; None when it cannot tell yet. Builds nothing
    but the few members it needs. Runs in a worker thread."""
    try:
        request = _Reader(Steps(data, complete=False), max_messages, build=False).read()
    except (Incomplete, Unparsable):
        return None  # an error is reported when the whole body is read
    return request if request.refused() or request.not_a_call() else None


def parse(data: bytes | bytearray, max_messages: int) -> Request:
    """A whole body read as a JSON-RPC message, with its arguments built, unless it is refused or
    no `tools/call` (then only the members deciding that are). Raises `Unparsable`. Runs in a
    worker thread."""
    reader = _Reader(Steps(data), max_messages, build=True)
    request = reader.read()
    if request.method() != "tools/call" or request.refused():
        return request
    for where, key, at in reader.deferred:  # members that came before the method
        if where == "fields":
            request.fields[key] = Steps(data, at=at).value()
        elif key != "arguments" and request.params is not None:
            request.params[key] = Steps(data, at=at).value()
        elif request.params is not None:  # only the arguments the message ends with are kept
            late = _Reader(Steps(data, at=at), max_messages, build=True)
            late.request = request
            late.arguments(build=True)
    if request.over and request.arguments is not None:
        # Another tool's `messages`: not limited by max_batch_messages after all.
        request.over = False
        request.arguments["messages"] = Steps(data, at=request.messages_at).value()
    return request


def count(data: bytes | bytearray, max_messages: int) -> Request:
    """A whole body read as a JSON-RPC message to count its batch, nothing built but the few
    members a refusal needs. Raises `Unparsable`. Runs in a worker thread."""
    return _Reader(Steps(data), max_messages, build=False).read()


def peek_id(data: bytes | bytearray) -> Any:
    """The request id in the first part of a body, when it comes before anything that part cuts."""
    steps = Steps(data, complete=False)
    try:
        if not steps.begin(LBRACE):
            return None
        while True:
            key = steps.key()
            value = steps.value(build=key == "id")
            if key == "id":
                return value
            if not steps.more(RBRACE):
                return None
    except (Incomplete, Unparsable):
        return None


# -- the limits ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    status: int
    code: int
    message: str


class BodyBudget:
    """Bytes of request bodies held per tenant and in all. Used on the event loop only."""

    def __init__(self, per_tenant: int, total: int) -> None:
        self.per_tenant = per_tenant
        self.total = total
        self.held: dict[str, int] = {}
        self.all = 0

    def take(self, tenant: str, size: int) -> Refusal | None:
        """Count `size` more bytes for `tenant`, or say why not (nothing counted then)."""
        held = self.held.get(tenant, 0)
        who = f"tenant {tenant!r}" if tenant else "local clients"
        if held + size > self.per_tenant:
            now = (
                f"{who} already {'has' if tenant else 'have'} {held:,} bytes of request bodies being read or handled; "
            )
            log.warning("refusing a %d-byte body: %s holds %d (http_body_bytes_per_tenant)", size, who, held)
            return Refusal(
                429,
                INVALID_REQUEST,
                f"{now if held else ''}a body of {size:,} bytes more would pass http_body_bytes_per_tenant "
                f"({self.per_tenant:,} bytes); wait for those requests to be answered and retry, send fewer large "
                "requests at once, or raise http_body_bytes_per_tenant",
            )
        if self.all + size > self.total:
            log.warning("refusing a %d-byte body: %d bytes in flight (http_body_bytes_in_flight)", size, self.all)
            return Refusal(
                503,
                INTERNAL_ERROR,
                f"the server is reading or handling {self.all:,} bytes of request bodies; a body of {size:,} bytes "
                f"more would pass http_body_bytes_in_flight ({self.total:,} bytes); retry shortly, or ask its "
                "operator to raise http_body_bytes_in_flight",
            )
        self.held[tenant] = held + size
        self.all += size
        return None

    def give(self, tenant: str, size: int) -> None:
        """Count `size` bytes of `tenant` no more."""
        left = self.held.get(tenant, 0) - size
        if left > 0:
            self.held[tenant] = left
        else:
            self.held.pop(tenant, None)
        self.all -= size


class _Hold:
    """The bytes one request holds in a `BodyBudget`."""

    def __init__(self, budget: BodyBudget, tenant: str) -> None:
        self.budget = budget
        self.tenant = tenant
        self.size = 0

    def grow(self, size: int) -> Refusal | None:
        refusal = self.budget.take(self.tenant, size)
        if refusal is None:
            self.size += size
        return refusal

    def release(self) -> None:
        self.budget.give(self.tenant, self.size)
        self.size = 0


# -- the middleware ------------------------------------------------------------------------------


class RequestBodies:
    """ASGI middleware: POST bodies within the in-flight limits, big ones parsed in steps in a
    worker thread, batches over `max_batch_messages` refused while they arrive."""

    def __init__(self, app: Any, settings: Settings, *, verify: Verify | None = None) -> None:
        self.app = app
        self.budget = BodyBudget(settings.http_body_bytes_per_tenant, settings.http_body_bytes_in_flight)
        self.threshold = settings.http_body_thread_bytes
        self.limit = settings.max_request_bytes
        self.max_messages = settings.max_batch_messages
        self.verify = verify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        length = content_length(scope)
        tenant = await self._tenant(scope)
        if (length is not None and length > self.limit) or tenant is None:
            await self.app(scope, receive, send)  # the SDK refuses it (413, 401) without reading it
            return
        hold = _Hold(self.budget, tenant)
        try:
            refusal = hold.grow(length or 0)
            if refusal is not None:
                await self._refuse(refusal, receive, send)
            elif length is not None and length < self.threshold:
                chunks = await read_body(receive)
                if chunks is not None:  # else the client went away
                    await self._small(scope, receive, send, b"".join(chunks))
            else:
                await self._large(scope, receive, send, length, hold)
        finally:
            hold.release()

    async def _tenant(self, scope: Scope) -> str | None:
        """The request's tenant ('' without bearer tokens), or None when its token is refused."""
        if self.verify is None:
            return ""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                if value[:7].lower() != b"bearer ":
                    return None
                access = await self.verify(value[7:].decode("latin-1"))
                return None if access is None else str(getattr(access, "client_id", "") or "")
        return None

    async def _large(self, scope: Scope, receive: Receive, send: Send, length: int | None, hold: _Hold) -> None:
        body = bytearray()
        look_at = FIRST_LOOK
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk: bytes = message.get("body", b"")
            more = bool(message.get("more_body", False))
            if length is None:  # chunked: counted as it comes
                refusal = hold.grow(len(chunk))
                if refusal is None and len(body) + len(chunk) > self.limit:
                    refusal = Refusal(413, INVALID_REQUEST, _too_large(self.limit))
                if refusal is not None:
                    await self._refuse(refusal, receive, send, prefix=bytes(body[:PEEK]), more=more)
                    return
            body += chunk
            if not more:
                break
            if len(body) >= look_at:
                look_at *= 4
                decided = await anyio.to_thread.run_sync(look, body, self.max_messages)
                if decided is not None:
                    size = f"{length:,} bytes" if length is not None else f"more than {len(body):,} bytes"
                    del body
                    await _drain(receive, self.limit)
                    await self._answer(decided, scope, receive, send, size)
                    return
        if len(body) < self.threshold:  # a small chunked body
            await self._small(scope, receive, send, bytes(body))
            return
        size = f"{len(body):,} bytes"
        try:
            request = await anyio.to_thread.run_sync(parse, body, self.max_messages)
        except Unparsable as exc:
            log.info("refused a %s body that is not JSON: %s", size, exc)
            await _error(send, 400, peek_id(body[:PEEK]), PARSE_ERROR, f"Parse error: {exc}")
            return
        finally:
            del body
        await self._answer(request, scope, receive, send, size)

    async def _small(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
        """A body under `http_body_thread_bytes` reaches the SDK as sent, unless it is a batch
        over `max_batch_messages`: parsed, 900 KB of tiny messages took 40 MB until the tool
        refused it, a hundred at once 0.9 GB. More objects than the limit is the sign, cheap to
        look for; such a body is counted in a worker thread, nothing built."""
        if body.count(b"{") > self.max_messages:
            try:
                request = await anyio.to_thread.run_sync(count, body, self.max_messages)
            except Unparsable:
                request = None  # the SDK says why
            if request is not None and request.refused():
                await self._answer(request, scope, receive, send, f"{len(body):,} bytes")
                return
        await self.app(scope, replaying(body, receive), send)

    async def _answer(self, request: Request, scope: Scope, receive: Receive, send: Send, size: str) -> None:
        """Hand the SDK a `tools/call` with its arguments as a token, or refuse a message that is not one."""
        if request.not_a_call() or request.params is None or (request.arguments is None and not request.refused()):
            what = f"a {request.method()!r} message" if isinstance(request.method(), str) else "a message"
            log.info("refused %s of %s (http_body_thread_bytes)", what, size)
            await _error(
                send,
                413,
                request.request_id(),
                INVALID_REQUEST,
                f"{what} of {size} is refused: only a tools/call's arguments may take http_body_thread_bytes "
                f"({self.threshold:,} bytes) or more; send less, or raise the setting",
            )
            return
        token = secrets.token_hex(16)
        if request.refused():
            _parsed[token] = too_many_messages(self.max_messages)
            # Only what the part read holds: the members it passed over were not built.
            fields = {"jsonrpc": "2.0", "id": request.request_id(), "method": "tools/call"}
            params = {"name": request.name()}
        else:
            try:
                _parsed[token] = await anyio.to_thread.run_sync(safejson.clean, request.arguments or {}, "")
            except LimitExceeded as exc:
                _parsed[token] = exc
            fields, params = request.fields, request.params
        request.arguments = None
        small = json.dumps({**fields, "params": {**params, "arguments": {_MARK: token}}}).encode()
        try:
            if len(small) >= self.threshold:
                await _error(
                    send,
                    413,
                    request.request_id(),
                    INVALID_REQUEST,
                    f"a tools/call whose members other than its arguments take {len(small):,} bytes is refused: "
                    f"only its arguments may take http_body_thread_bytes ({self.threshold:,} bytes) or more",
                )
                return
            headers = [
                (k, v) for k, v in scope["headers"] if k.lower() not in (b"content-length", b"transfer-encoding")
            ]
            headers.append((b"content-length", str(len(small)).encode()))
            await self.app({**scope, "headers": headers}, replaying(small, receive), send)
        finally:
            _parsed.pop(token, None)

    async def _refuse(
        self, refusal: Refusal, receive: Receive, send: Send, *, prefix: bytes = b"", more: bool = True
    ) -> None:
        """Read the rest of the body, keeping only enough to find its id in, and answer `refusal`."""
        if more:
            prefix = await _drain(receive, self.limit, prefix)
        headers = [(b"retry-after", b"1")] if refusal.status in (429, 503) else []
        await _error(send, refusal.status, peek_id(prefix), refusal.code, refusal.message, headers)


def _too_large(limit: int) -> str:
    return (
        f"request body exceeds max_request_bytes ({limit:,} bytes); "
        "send fewer messages per append, spill huge outputs, or raise the setting"
    )


async def _drain(receive: Receive, limit: int, prefix: bytes = b"") -> bytes:
    """Read a body to its end (at most `limit` bytes more), keeping its first `PEEK` bytes."""
    kept = bytearray(prefix)
    read = 0
    while read <= limit:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk: bytes = message.get("body", b"")
        read += len(chunk)
        if len(kept) < PEEK:
            kept += chunk[: PEEK - len(kept)]
        if not message.get("more_body", False):
            break
    return bytes(kept)


async def _error(
    send: Send, status: int, request_id: Any, code: int, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

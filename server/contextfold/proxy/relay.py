"""The proxy's core: every message between a client and an upstream server, passed on or guarded.

The client and the upstream negotiate as if connected directly — `initialize` or the sessionless
2026-07-28 envelope, capabilities, everything — because the relay forwards each message as the
bytes it received. It never sends a request of its own, so request ids need no mapping: the
client's go up, the upstream's (sampling, elicitation, roots, ping) come down, and so do the
answers, progress, logging, list-changed and resource-updated notifications, and cancellations.

It changes only these:

- the answer to the last page of `tools/list` gains `read_output` and `search_history` (named so
  they do not collide, `tools.ToolNames`), and a `tools/call` to them is answered here;
- the result of `tools/call` (and `tasks/result`), `resources/read` and `prompts/get` goes
  through `guard`: when it is oversized its large parts are stored in the proxy's session and
  the client gets previews with the `read_output` hint; when not, the bytes go on untouched;
- `initialize` and `server/discover` answers gain a `tools` capability if the upstream has none
  (the added tools are then listed here);
- answers to ids no pending request has (after a timeout, a second answer, a made-up id) are
  dropped and logged, never passed on unguarded;
- over HTTP the upstream may be started only when a request needs it (a `Launcher`, see
  `launch`): until then `initialize` is answered as the upstream answered it before, and `ping`
  here; when it starts, the client's `initialize` and `notifications/initialized` go first;
- failures become clear JSON-RPC errors for the request they concern: an upstream that exits
  or stops answering (`proxy_timeout_seconds`), an answer over `max_message_bytes`, a malformed
  answer. The relay keeps running: the added tools keep working, and other requests get an
  error that says what happened to the upstream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from contextfold.proxy import oversize as guard
from contextfold.proxy import tools, wire
from contextfold.proxy.channels import EDGE, Channel, Frame
from contextfold.proxy.session import ProxySession

log = logging.getLogger(__name__)

ENVELOPE = "io.modelcontextprotocol/"
"""The prefix of the 2026-07-28 envelope's `_meta` keys (protocol version, client info, capabilities)."""
OWN_ID = "contextfold-proxy:"
"""The proxy's own requests (a `tools/list` for an output schema) have ids no client uses."""
GUARDED = frozenset({"tools/call", "tasks/result", "resources/read", "prompts/get"})
UNTIMED = frozenset({"subscriptions/listen"})
"""Requests that stay open by design (a 2026-07-28 notification stream)."""
THREADED_PLAN = 1 << 18
"""Results at least this large (bytes) are measured in a worker thread."""


@dataclass
class Pending:
    """A client request the upstream has not answered yet."""

    id: Any
    method: str
    tool: str | None = None
    arguments: Any = None
    first_page: bool = True
    envelope: dict[str, Any] | None = None
    """A 2026-07-28 request's envelope (`_meta` minus its per-request keys), to send the proxy's
    own request in the same era."""
    progress: Any = None
    deadline: float | None = None
    cancelled: bool = False


DRAIN_POLL = 0.02
"""Seconds between looks at what is still owed while draining (`Relay._drain`)."""


class Launcher(Protocol):
    """An upstream started on demand (`launch.Launch`)."""

    wants: Callable[[Any], bool] | None

    async def greet(self, message: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to the client's `initialize`, as it answered it before."""

    async def open(self) -> tuple[Channel | None, str | None, bool]:
        """Start it: (channel, None, False), (None, why, False), or (None, why, True) when refused for now."""


class Relay:
    def __init__(
        self,
        client: Channel,
        upstream: Channel | None,
        session: ProxySession,
        *,
        timeout: float,
        max_message_bytes: int,
        unavailable: str | None = None,
        names: tools.ToolNames | None = None,
        owns_session: bool = True,
        launch: Launcher | None = None,
        drain: float = 0.0,
    ) -> None:
        """`upstream` None means it could not be started; `unavailable` says why; or, with `launch`,
        that it starts when a request needs it. Behind `--config` the hub passes passive `names`
        and keeps the session (`owns_session` False)."""
        self.client = client
        self.upstream = upstream
        self.session = session
        self.timeout = timeout
        self.drain = drain
        """`proxy_drain_seconds`: how long answers still owed are awaited once the client's input ends."""
        self.max_message_bytes = max_message_bytes
        self.dead = unavailable if upstream is None and launch is None else None
        self.launch = launch
        if launch is not None:
            launch.wants = self.would_start
        self.names = names or tools.ToolNames()
        self.owns_session = owns_session
        self.pending: dict[str, Pending] = {}
        self.output_schemas: dict[str, Any] = {}
        self.upstream_has_tools = True
        self._listing: set[str] = set()
        self._server_info: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._own: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._own_count = 0
        self._helpers: list[asyncio.Task[None]] = []
        self._starting = asyncio.Lock()
        self._greeted: dict[str, Any] | None = None
        """The client's `initialize`, answered before the upstream started (sent to it when it does)."""

    # -- running ----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Relay until the client goes away, then stop the upstream and record what is left."""
        self._helpers.append(asyncio.create_task(self._watch()))
        if self.upstream is not None:
            self._helpers.append(asyncio.create_task(self._from_upstream()))
        try:
            await self._from_client()
            await self._drain()
        finally:
            await to_the_end(self._stop())

    async def _drain(self) -> None:
        """The client's input has ended (`proxy < requests.jsonl`, or a client closing stdin before
        reading its last answers): write the answers still owed, within `proxy_drain_seconds`, then
        answer what is left with an error, so that every request written gets its answer."""
        deadline = time.monotonic() + self.drain
        while (self.pending or self._tasks) and time.monotonic() < deadline:
            await asyncio.sleep(DRAIN_POLL)
        for key in list(self.pending):
            request = self.pending.pop(key)
            text = (
                f"no answer from the upstream server within {self.drain:g} s of the client closing its input "
                f"(proxy_drain_seconds); {request.method} was not answered"
            )
            await self._to_client(wire.error(request.id, wire.UPSTREAM_ERROR, text))

    async def _stop(self) -> None:
        for task in self._helpers:
            task.cancel()
        await asyncio.gather(*self._helpers, return_exceptions=True)
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=10)
        if self.upstream is not None:
            await self.upstream.aclose()
        if self.owns_session:
            await self.session.close()

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _to_client(self, message: bytes | dict[str, Any], related: Any = None) -> None:
        try:
            await self.client.send(message, related=related)
        except (OSError, RuntimeError) as exc:
            log.debug("contextfold proxy: the client is gone (%s)", exc)

    async def _to_upstream(self, message: bytes | dict[str, Any]) -> bool:
        if self.upstream is None or self.dead is not None:
            return False
        try:
            await self.upstream.send(message)
            return True
        except (OSError, RuntimeError) as exc:
            log.warning("contextfold proxy: cannot write to the upstream server (%s)", exc)
            return False

    # -- from the client --------------------------------------------------------------------------------

    async def _from_client(self) -> None:
        while (frame := await self.client.receive()) is not None:
            try:
                await self._client_frame(frame)
            except Exception:
                log.exception("contextfold proxy: could not relay a message from the client")

    async def _client_frame(self, frame: Frame) -> None:
        message = frame.message
        if message is None:
            await self._unreadable_from_client(frame)
        elif wire.is_request(message):
            await self._client_request(frame, message)
        elif self.upstream is None and self.launch is not None:
            # Nothing to tell an upstream not started: its `initialized` is sent when it starts.
            log.debug("contextfold proxy: %.100r is not for an upstream that has not started", frame.raw)
        elif wire.is_notification(message):
            if message["method"] == "notifications/cancelled":
                cancelled = self.pending.get(wire.key(wire.params(message).get("requestId")))
                if cancelled is not None:
                    cancelled.cancelled = True
            await self._to_upstream(frame.raw or b"")
        else:  # a response to the upstream's request (or a batch: the upstream judges it)
            await self._to_upstream(frame.raw or b"")

    async def _unreadable_from_client(self, frame: Frame) -> None:
        if frame.raw is None:  # over the size limit
            found, request_id = wire.find_id(frame.head, frame.tail)
            if found:
                text = f"{frame.problem} (max_message_bytes); send less at once"
                await self._to_client(wire.error(request_id, wire.INVALID_REQUEST, text))
            else:
                log.warning("contextfold proxy: dropped %s", frame.problem)
            return
        await self._to_client(wire.error(None, wire.PARSE_ERROR, f"Parse error: {frame.problem}"))

    async def _client_request(self, frame: Frame, message: dict[str, Any]) -> None:
        method, request_id, params = message["method"], message["id"], wire.params(message)
        if method == "tools/call":
            added = self.names.owns(params.get("name"))
            if added is not None:
                self._spawn(self._added_tool(message, added))
                return
        if method == "tools/list" and not self.upstream_has_tools and not self.names.passive:
            await self._to_client(wire.result(request_id, self._stamped(message, {"tools": self.names.definitions()})))
            return
        if self.upstream is None and self.launch is not None and self.dead is None:
            if method == "initialize" and not wire.is_modern(message):
                await self._greet(message)
                return
            if method == "ping" and not wire.is_modern(message):
                await self._to_client(wire.result(request_id, {}))
                return
            refused = await self._start()
            if refused is not None:
                await self._to_client(wire.error(request_id, wire.UPSTREAM_ERROR, f"{refused}; {method} was not sent"))
                return
        if self.dead is not None:
            await self._to_client(wire.error(request_id, wire.UPSTREAM_ERROR, f"{self.dead}; {method} was not sent"))
            return
        pending = Pending(request_id, method, progress=wire.meta(message).get("progressToken"))
        if method == "tools/call":
            pending.tool, pending.arguments = params.get("name"), params.get("arguments")
            if wire.is_modern(message):
                pending.envelope = {k: v for k, v in wire.meta(message).items() if k.startswith(ENVELOPE)}
        elif method == "tools/list":
            pending.first_page = params.get("cursor") is None
        if self.timeout and method not in UNTIMED:
            pending.deadline = time.monotonic() + self.timeout
        self.pending[wire.key(request_id)] = pending
        if not await self._to_upstream(frame.raw or b""):
            self.pending.pop(wire.key(request_id), None)
            reason = self.dead or "the upstream server cannot be written to"
            await self._to_client(wire.error(request_id, wire.UPSTREAM_ERROR, f"{reason}; {method} was not sent"))

    def _stamped(self, request: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """A result the proxy makes itself, shaped for the request's protocol era."""
        if wire.is_modern(request):
            result["resultType"] = "complete"
            if self._server_info is not None:
                result["_meta"] = {wire.SERVER_INFO_META: self._server_info}
        return result

    # -- an upstream started on demand ------------------------------------------------------------------

    def would_start(self, message: Any) -> bool:
        """Whether this client message would start the upstream now (`Launcher.wants`)."""
        if self.launch is None or self.upstream is not None or self.dead is not None or not wire.is_request(message):
            return False
        method, params = message["method"], wire.params(message)
        if method in ("initialize", "ping") and not wire.is_modern(message):
            return False
        if method == "tools/call" and self.names.owns(params.get("name")) is not None:
            return False
        return not (method == "tools/list" and not self.upstream_has_tools and not self.names.passive)

    async def _greet(self, message: dict[str, Any]) -> None:
        """Answer `initialize` as the upstream answers it, without starting one for this client."""
        assert self.launch is not None
        answer = await self.launch.greet(message)
        result = answer.get("result")
        if not isinstance(result, dict):
            error = answer.get("error")
            if not isinstance(error, dict):
                error = {"code": wire.UPSTREAM_ERROR, "message": "the upstream server did not answer initialize"}
            await self._to_client({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        self._greeted = message
        await self._to_client(wire.result(message["id"], self._with_tools(result)))

    async def _start(self) -> str | None:
        """Start the upstream for the request that needs it, and give it the client's handshake.
        None once it runs or is known dead (`self.dead`); the refusal when there is no room for it."""
        assert self.launch is not None
        async with self._starting:
            if self.upstream is not None or self.dead is not None:
                return None
            channel, problem, refused = await self.launch.open()
            if channel is None:
                if refused:
                    return problem
                self.dead = problem
                return None
            self.upstream = channel
            self._helpers.append(asyncio.create_task(self._from_upstream()))
            if self._greeted is not None:
                answer = await self._ask_upstream("initialize", wire.params(self._greeted), self.timeout or None)
                result = answer.get("result") if answer is not None else None
                if not isinstance(result, dict):
                    error = answer.get("error") if answer is not None else None
                    why = (
                        str(error.get("message"))
                        if isinstance(error, dict)
                        else f"no answer within {self.timeout:g} s (proxy_timeout_seconds)"
                    )
                    if self.dead is None:
                        self.dead = f"the upstream server, started for this client, refused its handshake ({why})"
                        log.warning("contextfold proxy: %s", self.dead)
                        await channel.aclose()  # of no use now: its place goes to another client
                    return None
                await self._to_upstream({"jsonrpc": "2.0", "method": "notifications/initialized"})
            self.session.start()  # the upstream is up: now the store and the tokenizer
            return None

    async def _added_tool(self, message: dict[str, Any], added: str) -> None:
        result = await tools.answer(self.session, added, wire.params(message).get("arguments"))
        await self._to_client(wire.result(message["id"], self._stamped(message, result)))

    # -- from the upstream ------------------------------------------------------------------------------

    async def _from_upstream(self) -> None:
        assert self.upstream is not None
        while (frame := await self.upstream.receive()) is not None:
            try:
                await self._upstream_frame(frame)
            except Exception:
                log.exception("contextfold proxy: could not relay a message from the upstream server")
        await self._upstream_gone()

    async def _upstream_gone(self) -> None:
        describe = getattr(self.upstream, "describe_exit", None)
        wait = getattr(self.upstream, "wait_exit", None)
        if wait is not None:
            await wait()
        reason = describe() if describe is not None else "the upstream server closed the connection"
        self.dead = reason
        log.warning("contextfold proxy: %s", reason)
        if self.launch is not None and self.upstream is not None:
            await self.upstream.aclose()  # its place among `proxy_max_upstreams` is free again
        for own in self._own.values():  # the proxy's own requests get no answer now either
            if not own.done():
                own.set_result(wire.error(None, wire.UPSTREAM_ERROR, reason))
        pending, self.pending = list(self.pending.values()), {}
        for request in pending:
            if not request.cancelled:
                text = f"{reason}, before it answered {self._what(request)}"
                if request.method == "tools/call":
                    self.session.record(str(request.tool), request.arguments, None, text)
                await self._to_client(wire.error(request.id, wire.UPSTREAM_ERROR, text))

    async def _upstream_frame(self, frame: Frame) -> None:
        message = frame.message
        if message is None:
            await self._unreadable_from_upstream(frame)
            return
        if wire.is_response(message):
            own = self._own.pop(wire.key(message["id"]), None)
            if own is not None:
                if not own.done():
                    own.set_result(message)
                return
            request = self.pending.pop(wire.key(message["id"]), None)
            if request is None:  # late (timed out), a second answer, or never asked: nothing guards it
                log.warning(
                    "contextfold proxy: dropped an answer from the upstream server to id %.100r, which no "
                    "pending request has (answered already, timed out, or never asked)",
                    message["id"],
                )
            elif not request.cancelled:
                await self._answer(frame, message, request)
            return
        if wire.is_request(message) or wire.is_notification(message) or isinstance(message, list):
            await self._to_client(frame.raw or b"", self._related(message))
        else:
            log.warning("contextfold proxy: dropped a malformed message from the upstream server: %.200r", frame.raw)

    def _related(self, message: Any) -> Any:
        """The client request a message from the upstream belongs to, when that can be told: the
        one its progress token names, else the only one in flight (over HTTP it then travels on
        that request's stream; over stdio it makes no difference)."""
        if wire.is_notification(message) and message["method"] == "notifications/progress":
            token = wire.params(message).get("progressToken")
            for request in self.pending.values():
                if request.progress is not None and request.progress == token:
                    if request.deadline is not None:
                        request.deadline = time.monotonic() + self.timeout
                    return request.id
            return None
        if len(self.pending) == 1:
            return next(iter(self.pending.values())).id
        return None

    async def _unreadable_from_upstream(self, frame: Frame) -> None:
        if frame.raw is not None:  # not JSON (or nested too deep): an answer still gets one, at once
            found, request_id = wire.find_id(frame.raw[:EDGE], frame.raw[-EDGE:])
            unread = self.pending.pop(wire.key(request_id), None) if found else None
            if unread is None:
                log.warning("contextfold proxy: dropped what %s", frame.problem)
                return
            text = f"the upstream server's answer to {self._what(unread)} could not be read: {frame.problem}"
            if unread.method == "tools/call":
                self.session.record(str(unread.tool), unread.arguments, None, text)
            await self._to_client(wire.error(unread.id, wire.UPSTREAM_ERROR, text))
            return
        found, request_id = wire.find_id(frame.head, frame.tail)
        request = self.pending.pop(wire.key(request_id), None) if found else None
        if request is None and len(self.pending) == 1:
            request = self.pending.pop(next(iter(self.pending)))
        if request is None:
            log.warning("contextfold proxy: dropped %s", frame.problem)
            return
        text = (
            f"the upstream server's answer to {self._what(request)} is {frame.size:,} bytes, over "
            f"max_message_bytes ({self.max_message_bytes:,}); nothing of it was passed on. Ask for less "
            "(a narrower query, a filter, a page), or raise max_message_bytes"
        )
        if request.method == "tools/call":
            self.session.record(str(request.tool), request.arguments, None, text)
        await self._to_client(wire.error(request.id, wire.UPSTREAM_ERROR, text))

    @staticmethod
    def _what(request: Pending) -> str:
        return f"{request.method} {request.tool}" if request.tool else request.method

    async def _answer(self, frame: Frame, message: dict[str, Any], request: Pending) -> None:
        if "result" not in message and "error" not in message:
            text = f"the upstream server answered {self._what(request)} with neither a result nor an error"
            await self._to_client(wire.error(request.id, wire.UPSTREAM_ERROR, text))
            return
        result = message.get("result")
        if not isinstance(result, dict):
            if request.method == "tools/call" and "error" in message:
                error = message["error"] if isinstance(message["error"], dict) else {}
                self.session.record(str(request.tool), request.arguments, None, str(error.get("message", "error")))
            await self._to_client(frame.raw or b"")
            return
        meta = result.get("_meta")
        if isinstance(meta, dict) and meta.get(wire.SERVER_INFO_META) is not None:
            self._server_info = meta[wire.SERVER_INFO_META]
        if request.method in GUARDED:
            self._spawn(self._guard(frame, message, result, request))
        elif request.method == "tools/list":
            await self._tools_listed(frame, message, result, request)
        elif request.method in ("initialize", "server/discover"):
            await self._capabilities(frame, message, result)
            self.session.start()  # the upstream is up: now the store and the tokenizer
        else:
            await self._to_client(frame.raw or b"")

    async def _tools_listed(
        self, frame: Frame, message: dict[str, Any], result: dict[str, Any], request: Pending
    ) -> None:
        listed = result.get("tools")
        if not isinstance(listed, list):
            await self._to_client(frame.raw or b"")
            return
        if request.first_page:
            self._listing = set()
        for tool in listed:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                self._listing.add(tool["name"])
                self.output_schemas[tool["name"]] = tool.get("outputSchema")
        if result.get("nextCursor"):
            await self._to_client(frame.raw or b"")
            return
        self.names.settle(self._listing)
        await self._to_client({**message, "result": {**result, "tools": [*listed, *self.names.definitions()]}})

    async def _capabilities(self, frame: Frame, message: dict[str, Any], result: dict[str, Any]) -> None:
        patched = self._with_tools(result)
        await self._to_client((frame.raw or b"") if patched is result else {**message, "result": patched})

    def _with_tools(self, result: dict[str, Any]) -> dict[str, Any]:
        """A handshake's result, with a `tools` capability for the added tools if it has none."""
        capabilities = result.get("capabilities")
        if not isinstance(capabilities, dict) or "tools" in capabilities:
            return result
        self.upstream_has_tools = False
        return {**result, "capabilities": {**capabilities, "tools": {}}}

    async def _guard(self, frame: Frame, message: dict[str, Any], result: dict[str, Any], request: Pending) -> None:
        if result.get("resultType") not in (None, "complete"):  # input_required, a task handle…
            await self._to_client(frame.raw or b"")
            return
        try:
            planned = await self._plan(frame, result)
            if planned is None:
                if request.method == "tools/call":
                    self.session.record(str(request.tool), request.arguments, result)
                await self._to_client(frame.raw or b"")
                return
            stored = {}
            for piece in planned.pieces:
                stored[piece.path] = await self.session.store(
                    piece, tool=request.tool, call_id=str(request.id), reader=self.names.read_output
                )
            counter = await self.session.counter()
            schema = await self._output_schema(request) if "structuredContent" in result else None
            guarded = guard.apply(
                result, planned, stored, count=counter.count, output_schema=schema, validate=_fits_schema
            )
        except guard.Unguardable as exc:
            text = f"contextfold proxy did not pass on the answer to {self._what(request)}: {exc}"
            if request.method == "tools/call":
                self.session.record(str(request.tool), request.arguments, None, text)
            await self._to_client(wire.error(request.id, wire.UPSTREAM_ERROR, text))
            return
        except Exception:
            log.exception("contextfold proxy: could not guard the answer to %s", self._what(request))
            text = f"contextfold proxy could not process the answer to {self._what(request)}; see its log"
            await self._to_client(wire.error(request.id, wire.INTERNAL_ERROR, text))
            return
        if request.method == "tools/call":
            self.session.record(str(request.tool), request.arguments, guarded)
        await self._to_client({**message, "result": guarded})

    async def _output_schema(self, request: Pending) -> Any:
        """The called tool's output schema; when the client called it without listing the tools
        through this proxy, the proxy lists them itself. A schema it cannot learn counts as one
        no shortened copy fits (the result then becomes an error result, valid either way)."""
        if request.tool is None:
            return {"not": {}}
        if request.tool not in self.output_schemas:
            cursor: Any = None
            for _ in range(100):
                params: dict[str, Any] = {} if request.envelope is None else {"_meta": dict(request.envelope)}
                if cursor is not None:
                    params["cursor"] = cursor
                answer = await self._ask_upstream("tools/list", params)
                result = answer.get("result") if answer is not None else None
                if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                    break
                for tool in result["tools"]:
                    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                        self.output_schemas[tool["name"]] = tool.get("outputSchema")
                cursor = result.get("nextCursor")
                if not cursor:
                    break
        return self.output_schemas.get(request.tool, {"not": {}})

    async def _ask_upstream(
        self, method: str, params: dict[str, Any], timeout: float | None = 15.0
    ) -> dict[str, Any] | None:
        """The proxy's own request to the upstream, and its answer (None if there is none in time)."""
        self._own_count += 1
        request_id = f"{OWN_ID}{self._own_count}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._own[wire.key(request_id)] = answer
        try:
            if not await self._to_upstream({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}):
                return None
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            return None
        finally:
            self._own.pop(wire.key(request_id), None)

    async def _plan(self, frame: Frame, result: dict[str, Any]) -> guard.Plan | None:
        limits = self.session.limits
        raw = frame.raw or b""
        if (
            frame.size * limits.tokens_per_byte <= limits.max_tokens
            and frame.size <= min(limits.max_bytes, limits.max_binary_bytes)
            and raw.count(b"\\n") + frame.size // 20 <= limits.max_lines
        ):
            # The whole message is smaller than any limit its parts could reach: no count needed.
            return None
        count = (await self.session.counter()).count
        if frame.size >= THREADED_PLAN:
            return await asyncio.to_thread(guard.plan, result, limits, count)
        return guard.plan(result, limits, count)

    # -- the watchdog ------------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Fail requests the upstream leaves unanswered past `proxy_timeout_seconds`."""
        if not self.timeout:
            return
        while True:
            await asyncio.sleep(min(1.0, self.timeout / 4))
            now = time.monotonic()
            late = [(k, r) for k, r in self.pending.items() if r.deadline is not None and now > r.deadline]
            for k, request in late:
                self.pending.pop(k, None)
                text = (
                    f"the upstream server did not answer {self._what(request)} within {self.timeout:g} s "
                    "(proxy_timeout_seconds); the request was cancelled"
                )
                if request.method == "tools/call":
                    self.session.record(str(request.tool), request.arguments, None, text)
                await self._to_client(wire.error(request.id, wire.UPSTREAM_ERROR, text))
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request.id, "reason": "timed out in contextfold proxy"},
                }
                await self._to_upstream(cancel)


async def to_the_end(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` (a relay's or the hub's cleanup: stop the upstream, close the store) to its end even
    when the task running it is cancelled meanwhile, then pass the cancellation on.

    A client's shutdown is "close stdin, then SIGTERM" (and SIGTERM cancels the proxy's main task):
    when the SIGTERM lands while the cleanup after the closed stdin is under way, cutting it short
    left the store's connection open, whose (non-daemon) thread then kept the process alive for good
    after its work was done, and left the upstream's pipes to be finalised after the event loop had
    closed (`RuntimeError: Event loop is closed` on stderr). Each step of the cleanup is bounded
    (`STOP_GRACE`, `KILL_GRACE`, the session's flush), so this ends; `terminate_upstreams` has
    already told the upstream to go."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                break
            cancelled = True
    if task.cancelled():
        raise asyncio.CancelledError
    error = task.exception()
    if cancelled:
        raise asyncio.CancelledError from error
    if error is not None:
        raise error


def _fits_schema(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` validates against a tool's output schema (an unusable schema: no)."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
        return bool(cls(schema).is_valid(value))
    except (SchemaError, Exception):
        return False

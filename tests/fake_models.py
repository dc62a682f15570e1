"""Fake model APIs on 127.0.0.1 for driving the real agent CLIs (Claude Code, Codex) in tests.

Two servers, each on an ephemeral port in a background thread, each scriptable per test:

- `FakeMessagesAPI`: the Anthropic Messages API as Claude Code uses it: streaming
  `POST /v1/messages?beta=true` (server-sent events), `POST /v1/messages/count_tokens`, and the
  `HEAD /` reachability probe it sends first.
- `FakeResponsesAPI`: the OpenAI Responses API as Codex uses it through a `[model_providers]`
  entry with `wire_api = "responses"`: streaming `POST /v1/responses`.

A test scripts the agent's main turns in order, each either a reply (`say`) or tool calls (`call`),
with the usage to report (a large `input_tokens` pushes the agent past its compaction limit):

    with serve_messages_api() as fake:
        fake.script(call("Bash", {"command": "seq 1 100000"}), say("done", input_tokens=190_000))
        ...
        assert "100000" in fake.turns()[1].text

When the script runs out, every further turn answers `fake.fallback` (a short reply). A step may
also be a function of the request, returning the turn (e.g. to quote an id the agent was sent).

Requests that are not main turns are recognised and answered on their own, outside the script:
the agent's compaction request (its summary prompt) gets `fake.summary`, token counting gets a
rough count, and anything else that is not a tool-using turn (titles, side queries) gets a short
reply. Every request is recorded whole (headers without credentials, the parsed JSON body) with
its `kind`, so tests can assert what the model was sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "FakeMessagesAPI",
    "FakeModelAPI",
    "FakeResponsesAPI",
    "ModelRequest",
    "ToolCall",
    "Turn",
    "call",
    "say",
    "serve_messages_api",
    "serve_responses_api",
]

_CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization", "cookie"})

RequestKind = Literal["turn", "compaction", "count_tokens", "side", "probe", "unknown"]

DEFAULT_SUMMARY = (
    "FAKE-COMPACTION-SUMMARY. The user asked for a long listing; it was produced and inspected. "
    "Nothing else is pending."
)
"""What the fake answers a compaction request with; tests find it in later requests."""

# What each agent's compaction request says (their summary prompts, as sent by the pinned versions).
_CLAUDE_COMPACT_MARKERS = (
    "Your task is to create a detailed summary of the conversation so far",
    "Your task is to create a detailed summary of this conversation",
)
_CODEX_COMPACT_MARKERS = ("CONTEXT CHECKPOINT COMPACTION",)


@dataclass(frozen=True)
class ToolCall:
    """A tool the fake model calls: its name and JSON arguments (an id is made up when absent)."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None
    namespace: str | None = None
    """Responses API only: the namespace a tool was offered in (Codex offers an MCP server's tools in
    one named `mcp__<server>`)."""


@dataclass(frozen=True)
class Turn:
    """One scripted model turn: optional text, then tool calls, and the usage to report."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 1_000
    output_tokens: int = 20

    @property
    def stops_for_tools(self) -> bool:
        return bool(self.tool_calls)


def say(text: str, *, input_tokens: int = 1_000, output_tokens: int = 20) -> Turn:
    """A turn that answers with `text` and ends (no tool call)."""
    return Turn(text=text, input_tokens=input_tokens, output_tokens=output_tokens)


def call(
    name: str,
    arguments: dict[str, Any],
    *,
    text: str | None = None,
    id: str | None = None,  # noqa: A002 (mirrors the wire field)
    namespace: str | None = None,
    input_tokens: int = 1_000,
    output_tokens: int = 20,
) -> Turn:
    """A turn that calls the tool `name` with `arguments` (after `text`, when given)."""
    return Turn(
        text=text,
        tool_calls=(ToolCall(name, arguments, id, namespace),),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


@dataclass(frozen=True)
class ModelRequest:
    """One request the fake received."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names; credentials (`x-api-key`, `authorization`, `cookie`) are left out."""
    body: Any
    """The parsed JSON body, or None when there was none or it was not JSON."""
    raw: bytes
    kind: RequestKind
    """`turn` (a main model turn, answered from the script), `compaction` (the agent's summary
    request), `count_tokens`, `side` (another model call: titles and the like), `probe`
    (a reachability check) or `unknown`."""
    received: float = 0.0
    """`time.perf_counter()` when the request had been read (gaps between requests time the agent's work)."""

    @property
    def text(self) -> str:
        """The body as text: what to search for what the model was sent."""
        return self.raw.decode("utf-8", errors="replace")

    def contains(self, needle: str) -> bool:
        """Whether `needle` is anywhere in what the model was sent, JSON escapes undone."""
        if needle in self.text:
            return True
        return needle in "\n".join(_strings(self.body))


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (keys left out)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


Step = Turn | Callable[[ModelRequest], Turn]


class FakeModelAPI:
    """What both fakes share: the script, the record of requests, the HTTP plumbing."""

    api_name = "model API"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self.requests: list[ModelRequest] = []
        self.errors: list[str] = []
        """Scripted steps that raised: each was answered with a 400, which the agents do not retry."""
        self.fallback: Turn = say("Done.")
        """The turn answered once the script has run out."""
        self.summary: str = DEFAULT_SUMMARY
        """The reply to the agent's compaction request."""
        self.compaction_input_tokens = 2_000
        """The usage reported on the compaction reply (small, so the agent does not compact again)."""

    # -- the test's side ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"the fake {self.api_name} is not serving")
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def script(self, *steps: Step) -> None:
        """Answer the next main turns with `steps` in order (then `fallback`)."""
        with self._lock:
            self._steps = list(steps)

    @property
    def pending(self) -> int:
        """Scripted steps not yet consumed."""
        with self._lock:
            return len(self._steps)

    def of_kind(self, *kinds: RequestKind) -> list[ModelRequest]:
        with self._lock:
            return [r for r in self.requests if r.kind in kinds]

    def turns(self) -> list[ModelRequest]:
        """The main turns received, in order."""
        return self.of_kind("turn")

    def compactions(self) -> list[ModelRequest]:
        return self.of_kind("compaction")

    def after_compaction(self) -> list[ModelRequest]:
        """The main turns received after the first compaction request, in order."""
        with self._lock:
            seen = False
            out = []
            for request in self.requests:
                if request.kind == "compaction":
                    seen = True
                elif seen and request.kind == "turn":
                    out.append(request)
            return out

    def kinds(self) -> list[str]:
        """The kind of every request, in order (for failure messages)."""
        with self._lock:
            return [r.kind for r in self.requests]

    # -- the server's side -------------------------------------------------------------------

    def _classify(self, method: str, path: str, body: Any, headers: dict[str, str]) -> RequestKind:
        raise NotImplementedError

    def _render(self, request: ModelRequest, turn: Turn) -> tuple[int, str, bytes]:
        """(status, content type, body) answering `request` with `turn`."""
        raise NotImplementedError

    def _render_other(self, request: ModelRequest) -> tuple[int, str, bytes]:
        return self._render_error(404, f"the fake does not serve {request.method} {request.path}")

    def _render_error(self, status: int, message: str) -> tuple[int, str, bytes]:
        kind = "invalid_request_error" if status == 400 else "not_found_error"
        return (
            status,
            "application/json",
            json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode(),
        )

    def describe(self) -> str:
        """The kinds of requests received, and any scripted step that raised (for failure messages)."""
        errors = "".join(f"\n  {e}" for e in self.errors)
        return f"the fake {self.api_name} received {self.kinds()}{errors}"

    def _next_id(self) -> int:
        return next(self._ids)

    def _answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, str, bytes]:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        kind = self._classify(method, path, body, headers)
        with self._lock:
            request = ModelRequest(len(self.requests), method, path, headers, body, raw, kind, time.perf_counter())
            self.requests.append(request)
            step: Step | None = None
            if kind == "turn":
                step = self._steps.pop(0) if self._steps else self.fallback
        if kind == "turn":
            if callable(step):
                try:
                    turn = step(request)
                except Exception as exc:  # shown to the test, and the agent stops at once
                    message = f"scripted step for request {request.index} raised {type(exc).__name__}: {exc}"
                    self.errors.append(message)
                    return self._render_error(400, message)
            else:
                turn = step
            return self._render(request, turn)
        if kind == "compaction":
            return self._render(request, say(self.summary, input_tokens=self.compaction_input_tokens))
        if kind == "side":
            return self._render(request, say("Fake side reply", input_tokens=100))
        return self._render_other(request)


# -- Anthropic Messages ----------------------------------------------------------------------------


def _event(name: str, **fields: Any) -> dict[str, Any]:
    """One server-sent event's data: its `type` is its name."""
    return {"type": name, **fields}


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _last_user_text(messages: Any) -> str:
    """The text of the last user message of a Messages request ('' when there is none)."""
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(
                    block.get("text", "")
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "text"
                )
            return ""
    return ""


class FakeMessagesAPI(FakeModelAPI):
    """The Anthropic Messages API, streaming, as Claude Code 2.1 calls it."""

    api_name = "Messages API"
    model = "claude-sonnet-4-5-20250929"

    def _classify(self, method: str, path: str, body: Any, headers: dict[str, str]) -> RequestKind:
        route = path.split("?", 1)[0].rstrip("/")
        if method == "HEAD":
            return "probe"
        if method != "POST" or not isinstance(body, dict):
            return "unknown"
        if route == "/v1/messages/count_tokens":
            return "count_tokens"
        if route != "/v1/messages":
            return "unknown"
        last = _last_user_text(body.get("messages"))
        if any(marker in last for marker in _CLAUDE_COMPACT_MARKERS):
            return "compaction"
        # Claude Code's main loop always offers tools; its side queries (titles, summaries of
        # tool use, topic checks) do not.
        return "turn" if body.get("tools") else "side"

    def _render_other(self, request: ModelRequest) -> tuple[int, str, bytes]:
        if request.kind == "probe":
            return 200, "text/plain", b""
        if request.kind == "count_tokens":
            # Roughly four characters a token: enough for the agent's own estimates.
            return 200, "application/json", json.dumps({"input_tokens": max(1, len(request.raw) // 4)}).encode()
        return super()._render_other(request)

    def _render(self, request: ModelRequest, turn: Turn) -> tuple[int, str, bytes]:
        # The whole message first; a streaming caller gets it as events, block by block.
        content: list[dict[str, Any]] = []
        if turn.text is not None:
            content.append({"type": "text", "text": turn.text})
        for tool in turn.tool_calls:
            tool_id = tool.id or f"toolu_fake{self._next_id():04d}"
            content.append({"type": "tool_use", "id": tool_id, "name": tool.name, "input": tool.arguments})
        stop_reason = "tool_use" if turn.stops_for_tools else "end_turn"
        usage = {
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message = {
            "id": f"msg_fake{self._next_id():04d}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if not (isinstance(request.body, dict) and request.body.get("stream")):
            return 200, "application/json", json.dumps(message).encode()

        opening = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        events = [_event("message_start", message=opening)]
        for index, block in enumerate(content):
            if block["type"] == "text":
                empty, delta = {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                empty = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events.append(_event("content_block_start", index=index, content_block=empty))
            events.append(_event("content_block_delta", index=index, delta=delta))
            events.append(_event("content_block_stop", index=index))
        finish = {"stop_reason": stop_reason, "stop_sequence": None}
        events.append(_event("message_delta", delta=finish, usage={"output_tokens": turn.output_tokens}))
        events.append(_event("message_stop"))
        return 200, "text/event-stream", _sse(events)


# -- OpenAI Responses ------------------------------------------------------------------------------


def _input_text(items: Any) -> str:
    """All text of the user and developer messages of a Responses request."""
    if not isinstance(items, list):
        return ""
    parts = []
    for item in items:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(c.get("text", "") for c in content if isinstance(c, dict))
    return "\n".join(parts)


class FakeResponsesAPI(FakeModelAPI):
    """The OpenAI Responses API, streaming, as Codex 0.169 calls it."""

    api_name = "Responses API"
    model = "gpt-5.1-codex"

    def _classify(self, method: str, path: str, body: Any, headers: dict[str, str]) -> RequestKind:
        route = path.split("?", 1)[0].rstrip("/")
        if method != "POST" or not isinstance(body, dict) or not route.endswith("/responses"):
            return "unknown"
        # Codex says what each request is for in a metadata header; the summary prompt is the fallback.
        try:
            metadata = json.loads(headers.get("x-codex-turn-metadata") or "{}")
        except ValueError:
            metadata = {}
        if (isinstance(metadata, dict) and metadata.get("request_kind") == "compaction") or any(
            marker in _input_text(body.get("input")) for marker in _CODEX_COMPACT_MARKERS
        ):
            return "compaction"
        return "turn" if body.get("tools") else "side"

    def _render(self, request: ModelRequest, turn: Turn) -> tuple[int, str, bytes]:
        base = {"id": f"resp_fake{self._next_id():04d}", "object": "response", "model": self.model, "output": []}
        items: list[dict[str, Any]] = []
        events = [_event("response.created", response={**base, "status": "in_progress"})]
        if turn.text is not None:
            item_id = f"msg_fake{self._next_id():04d}"
            message = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
            index = len(items)
            started = {**message, "status": "in_progress", "content": []}
            events.append(_event("response.output_item.added", output_index=index, item=started))
            events.append(
                _event(
                    "response.output_text.delta", output_index=index, content_index=0, item_id=item_id, delta=turn.text
                )
            )
            events.append(_event("response.output_item.done", output_index=index, item=message))
            items.append(message)
        for tool in turn.tool_calls:
            function_call = {
                "type": "function_call",
                "id": f"fc_fake{self._next_id():04d}",
                "call_id": tool.id or f"call_fake{self._next_id():04d}",
                "name": tool.name,
                "arguments": json.dumps(tool.arguments),
                "status": "completed",
            }
            if tool.namespace is not None:
                function_call["namespace"] = tool.namespace
            index = len(items)
            events.append(_event("response.output_item.added", output_index=index, item=function_call))
            events.append(_event("response.output_item.done", output_index=index, item=function_call))
            items.append(function_call)
        usage = {
            "input_tokens": turn.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": turn.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.input_tokens + turn.output_tokens,
        }
        done = {**base, "status": "completed", "output": items, "usage": usage}
        events.append(_event("response.completed", response=done))
        return 200, "text/event-stream", _sse(events)


# -- serving ---------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as both agents expect

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
        try:
            status, content_type, data = self.server.fake._answer(self.command, self.path, headers, raw)
        except Exception as exc:  # a broken script must show in the test, not hang the agent
            status, content_type = 500, "application/json"
            data = json.dumps({"error": {"type": "fake_error", "message": f"{type(exc).__name__}: {exc}"}}).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            if content_type == "text/event-stream":
                self.send_header("cache-control", "no-cache")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent went away

    do_POST = _handle  # noqa: N815 (http.server's naming)
    do_GET = _handle  # noqa: N815
    do_HEAD = _handle  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeModelAPI


@contextmanager
def _serve(fake: FakeModelAPI) -> Iterator[Any]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = fake
    fake._server = server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        fake._server = None


@contextmanager
def serve_messages_api() -> Iterator[FakeMessagesAPI]:
    """A fake Anthropic Messages API on 127.0.0.1 for the duration of the block."""
    with _serve(FakeMessagesAPI()) as fake:
        yield fake


@contextmanager
def serve_responses_api() -> Iterator[FakeResponsesAPI]:
    """A fake OpenAI Responses API on 127.0.0.1 for the duration of the block."""
    with _serve(FakeResponsesAPI()) as fake:
        yield fake

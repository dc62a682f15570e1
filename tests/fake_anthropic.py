"""A fake Anthropic Messages API on 127.0.0.1, for driving the real `anthropic` SDK in tests.

It serves `POST /v1/messages` from a background thread on an ephemeral port, records every
request (headers without credentials, the parsed JSON body) and answers with scripted replies:

    with serve_fake_anthropic() as fake:
        fake.script(overloaded(), message_reply(VALID_SUMMARY))   # first call 529, then success
        client = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=1)
        ...
        assert len(fake.requests) == 2

Replies are consumed in order; the last one repeats, so retries see it again. `fake.handler` can
instead compute a reply from the request. Use the `fake_anthropic` fixture in tests (import it into
the test module: `from fake_anthropic import fake_anthropic`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

_CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization"})

VALID_SUMMARY = """\
## Goal
- Make `pytest tests/test_api.py` pass on Python 3.11

## Constraints & Preferences
- Never change the public API of `server/api.py`

## Progress

### Done
- Fixed the import cycle in `server/db.py`

### In Progress
- Rewriting the retry loop in `server/client.py`

### Blocked
- (none)

## Key Decisions
- Keep `httpx` rather than `requests`: already a dependency

## Next Steps
- Run `pytest -x tests/test_api.py`

## Critical Context
- Last failure: `AssertionError: expected 200, got 503`

## Relevant Files
- `server/client.py` — retry loop being rewritten
"""


@dataclass(frozen=True)
class Reply:
    """One scripted answer. `body` is sent as JSON unless it is bytes (sent as is)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (longer than the client's timeout to force one)."""


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names; `x-api-key` and `authorization` are left out."""
    body: Any
    """The parsed JSON body, or None when it was not JSON."""
    raw: bytes
    had_api_key: bool


def message_reply(
    text: str | None = VALID_SUMMARY,
    *,
    model: str = "claude-haiku-4-5-20251001",
    stop_reason: str | None = "end_turn",
    input_tokens: int = 1200,
    output_tokens: int = 300,
    cache_read: int = 0,
    cache_write: int = 0,
    content: list[dict[str, Any]] | None = None,
) -> Reply:
    """A successful Messages API response holding `text` (or the given content blocks)."""
    blocks = content if content is not None else ([{"type": "text", "text": text}] if text is not None else [])
    return Reply(
        body={
            "id": "msg_01FakeFakeFakeFakeFakeFake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
            },
        }
    )


def error_reply(status: int, error_type: str, message: str, *, headers: dict[str, str] | None = None) -> Reply:
    """An Anthropic error response: `{"type": "error", "error": {"type", "message"}}`."""
    return Reply(
        status=status,
        body={"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_fake"},
        # Retry at once: the SDK honours `retry-after-ms`, and tests should not sleep.
        headers={"retry-after-ms": "1", **(headers or {})},
    )


def server_error(message: str = "Internal server error") -> Reply:
    return error_reply(500, "api_error", message)


def overloaded(message: str = "Overloaded") -> Reply:
    return error_reply(529, "overloaded_error", message)


def slow(delay: float, then: Reply | None = None) -> Reply:
    """`then` (a valid message by default), sent only after `delay` seconds."""
    reply = then or message_reply()
    return Reply(status=reply.status, body=reply.body, headers=reply.headers, delay=delay)


def malformed_json() -> Reply:
    """A 200 claiming JSON whose body is cut off mid-object."""
    return Reply(body=b'{"id": "msg_01", "type": "message", "content": [{"type": "te')


def no_text_block() -> Reply:
    """A 200 whose only content is a tool call: nothing to read as a summary."""
    return message_reply(
        content=[{"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}}],
        stop_reason="tool_use",
    )


def cut_off(text: str = VALID_SUMMARY[:120]) -> Reply:
    """A reply that hit `max_tokens`: the summary stops mid-way."""
    return message_reply(text, stop_reason="max_tokens")


def incomplete_summary(text: str = "## Goal\n- Fix the build\n\nThe rest is fine.\n") -> Reply:
    return message_reply(text)


class FakeAnthropic:
    """The running fake. `base_url` is what to hand the SDK."""

    def __init__(self, server: ThreadingHTTPServer, stop: threading.Event) -> None:
        self._server = server
        self._stop = stop
        self._lock = threading.Lock()
        self._replies: list[Reply] = [message_reply()]
        self.requests: list[RecordedRequest] = []
        self.handler: Callable[[RecordedRequest], Reply] | None = None
        """When set, computes every reply (the script is ignored)."""

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with `replies` in order; the last one repeats."""
        if not replies:
            raise ValueError("script at least one reply")
        with self._lock:
            self._replies = list(replies)

    @property
    def last(self) -> RecordedRequest:
        if not self.requests:
            raise AssertionError("the fake Messages API received no request")
        return self.requests[-1]

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.handler is not None:
                return self.handler(request)
            return self._replies.pop(0) if len(self._replies) > 1 else self._replies[0]

    def _wait(self, seconds: float) -> bool:
        """Sleep, but wake as soon as the fake shuts down; True when it is shutting down."""
        return self._stop.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
        had_key = any(k.lower() in _CREDENTIAL_HEADERS for k in self.headers.keys())
        request = RecordedRequest("POST", self.path, headers, body, raw, had_key)

        fake = self.server.fake
        if self.path.split("?", 1)[0] != "/v1/messages":
            self._send(error_reply(404, "not_found_error", f"the fake serves only /v1/messages, not {self.path}"))
            return
        reply = fake._next(request)
        if reply.delay and fake._wait(reply.delay):
            return  # shutting down: drop the connection
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            headers = {"content-type": "application/json", "request-id": "req_fake"}
            headers.update({name.lower(): value for name, value in reply.headers.items()})
            headers["content-length"] = str(len(data))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired) before the reply was ready

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not wait for handler threads on close: a handler may be sleeping through a scripted delay.
    block_on_close = False
    fake: FakeAnthropic


@contextmanager
def serve_fake_anthropic() -> Iterator[FakeAnthropic]:
    """Run the fake on 127.0.0.1 (an ephemeral port) for the duration of the block."""
    server = _Server(("127.0.0.1", 0), _Handler)
    stop = threading.Event()
    fake = FakeAnthropic(server, stop)
    server.fake = fake
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with serve_fake_anthropic() as fake:
        yield fake

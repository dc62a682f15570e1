"""Hostile raw JSON-RPC over the real transports: `contextfold serve` on stdio and `serve --http` on loopback.

The SDK clients cannot send these (they serialize valid JSON), and the in-memory transport of
`test_fuzz.py` never parses text at all, so the server is fed bytes here. Every payload must get
an answer: a lone surrogate escape (half an emoji, as JavaScript writes it) is repaired to U+FFFD
and the call succeeds; text that is not JSON gets a JSON-RPC error with id null; and the server
keeps answering afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _servers import serve
from _stdio import Lines

from contextfold.mcpserver import rawjson

CALL_TIMEOUT = 30.0
"""Seconds a reply may take before the test calls it a hang (generous: CI machines are busy)."""

HALF_EMOJI = rb"\ud83d"
"""The JSON escape of a lone high surrogate: the first half of U+1F600, as JavaScript cuts it."""

REPAIRED = [
    pytest.param(b"half " + HALF_EMOJI + b" an emoji", id="lone-high-surrogate"),
    pytest.param(rb"\ude00 low half first", id="lone-low-surrogate"),
    pytest.param(rb"swapped \ude00\ud83d halves", id="swapped-halves"),
    pytest.param(b"at the end " + HALF_EMOJI, id="high-surrogate-at-the-end"),
]
"""Raw JSON string contents (between the quotes) that must be stored with U+FFFD for each half."""

UNPARSABLE = [
    pytest.param(b'{"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "sta', id="truncated"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 78, "method": "ping", "params": {"x": "\xff\xfe"', id="bad-utf8-truncated"),
    pytest.param(b"not json at all", id="not-json"),
    pytest.param(b"[" * 5_000 + b"]" * 5_000, id="nested-5000"),
]


def _call(request_id: int, name: str, arguments: bytes) -> bytes:
    return b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}' % (
        request_id,
        name.encode(),
        arguments,
    )


def _append(request_id: int, session_id: str, content: bytes) -> bytes:
    return _call(
        request_id,
        "append",
        b'{"session_id": "%s", "messages": [{"role": "user", "content": "%s"}]}' % (session_id.encode(), content),
    )


def _open(request_id: int, session_id: str) -> bytes:
    return _call(request_id, "session_open", b'{"session_id": "%s"}' % session_id.encode())


def _read(request_id: int, session_id: str) -> bytes:
    return _call(request_id, "get_context", b'{"session_id": "%s"}' % session_id.encode())


def _stored_text(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False)


def _expected(raw: bytes) -> str:
    """What the server should store for `raw`: each lone half as U+FFFD."""
    return json.loads(b'"' + raw + b'"').encode("utf-16", "surrogatepass").decode("utf-16", "replace")


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "wire", "version": "0"}},
    }
).encode()
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


# -- stdio ------------------------------------------------------------------------------------------------


class Stdio:
    def __init__(self, home: Path) -> None:
        env = {**os.environ, "CONTEXTFOLD_HOME": str(home)}
        env.pop("ANTHROPIC_API_KEY", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "contextfold", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.process.stdout is not None
        self.lines = Lines(self.process.stdout, CALL_TIMEOUT)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(self.lines.next())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stdio]:
    server = Stdio(tmp_path_factory.mktemp("stdio"))
    try:
        server.send(INITIALIZE)
        assert server.reply()["id"] == 1
        server.send(INITIALIZED)
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("content", REPAIRED)
def test_lone_surrogates_over_stdio_are_repaired(stdio: Stdio, content: bytes, request: pytest.FixtureRequest) -> None:
    session = f"stdio-{request.node.callspec.id}"
    stdio.send(_open(9, session))
    assert stdio.reply()["id"] == 9
    stdio.send(_append(10, session, content))
    answer = stdio.reply()
    assert answer["id"] == 10, answer
    assert answer["result"]["isError"] is False, answer
    stdio.send(_read(11, session))
    answer = stdio.reply()
    assert answer["id"] == 11 and _expected(content) in _stored_text(answer["result"]), answer


@pytest.mark.parametrize("payload", UNPARSABLE)
def test_unparsable_lines_over_stdio_get_an_error_and_the_server_goes_on(stdio: Stdio, payload: bytes) -> None:
    stdio.send(payload)
    answer = stdio.reply()
    assert answer.get("id") is None and answer["error"]["code"] == -32700, answer
    stdio.send(_call(12, "session_open", b'{"session_id": "alive"}'))
    answer = stdio.reply()
    assert answer["id"] == 12 and answer["result"]["isError"] is False, answer


def test_a_line_that_is_json_but_not_json_rpc_gets_invalid_request_over_stdio(stdio: Stdio) -> None:
    stdio.send(b'{"hello": "world"}')
    answer = stdio.reply()
    assert answer.get("id") is None and answer["error"]["code"] == -32600, answer


def test_invalid_utf8_inside_a_string_over_stdio_is_replaced(stdio: Stdio) -> None:
    stdio.send(_open(9, "stdio-utf8"))
    assert stdio.reply()["id"] == 9
    stdio.send(_append(13, "stdio-utf8", b"bad \xff\xfe bytes"))
    answer = stdio.reply()
    assert answer["id"] == 13 and answer["result"]["isError"] is False, answer


# -- HTTP --------------------------------------------------------------------------------------------------


class Http:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx2.Client(timeout=CALL_TIMEOUT)
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        response = self.http.post(url, content=INITIALIZE, headers=self.headers)
        assert response.status_code == 200, response.text
        self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self.headers["Mcp-Protocol-Version"] = "2025-11-25"
        assert self.http.post(url, content=INITIALIZED, headers=self.headers).status_code == 202

    def post(self, body: bytes) -> dict[str, Any]:
        response = self.http.post(self.url, content=body, headers=self.headers)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            answers = [json.loads(item) for item in data if item]
            assert len(answers) == 1, response.text
            answer: dict[str, Any] = answers[0]
            return answer
        answer = response.json()
        return answer


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    with serve(tmp_path_factory.mktemp("http")) as server:
        client = Http(server.url)
        try:
            yield client
        finally:
            client.http.close()


@pytest.mark.parametrize("content", REPAIRED)
def test_lone_surrogates_over_http_are_repaired(http: Http, content: bytes, request: pytest.FixtureRequest) -> None:
    session = f"http-{request.node.callspec.id}"
    assert http.post(_open(9, session))["id"] == 9
    answer = http.post(_append(10, session, content))
    assert answer.get("id") == 10 and answer["result"]["isError"] is False, answer
    answer = http.post(_read(11, session))
    assert answer["id"] == 11 and _expected(content) in _stored_text(answer["result"]), answer


def test_an_escaped_backslash_before_u_is_text_not_a_surrogate(http: Http) -> None:
    assert http.post(_open(9, "http-backslash"))["id"] == 9
    answer = http.post(_append(14, "http-backslash", rb"path C:\\ud83d"))
    assert answer.get("id") == 14 and answer["result"]["isError"] is False, answer
    answer = http.post(_read(15, "http-backslash"))
    assert r"C:\\ud83d" in _stored_text(answer["result"]), answer


@pytest.mark.parametrize("payload", UNPARSABLE)
def test_unparsable_bodies_over_http_get_an_error_and_the_server_goes_on(http: Http, payload: bytes) -> None:
    answer = http.post(payload)
    assert answer.get("id") is None and answer["error"]["code"] in (-32700, -32600, -32602), answer
    answer = http.post(_call(12, "session_open", b'{"session_id": "alive"}'))
    assert answer["id"] == 12 and answer["result"]["isError"] is False, answer


# -- the repair itself -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "repaired"),
    [
        (rb'"\ud83d"', rb'"\ufffd"'),
        (rb'"\ud83d\ude00"', rb'"\ud83d\ude00"'),  # a pair is kept
        (rb'"\uD83D\uDE00 \uDE00"', rb'"\uD83D\uDE00 \ufffd"'),
        (rb'"\\ud83d"', rb'"\\ud83d"'),  # an escaped backslash, then text
        (rb'"\\\ud83d"', rb'"\\\ufffd"'),  # an escaped backslash, then a lone half
        (rb'"\ud83d\ud83d\ude00"', rb'"\ufffd\ud83d\ude00"'),
    ],
)
def test_repair_replaces_only_lone_halves_and_keeps_the_length(raw: bytes, repaired: bytes) -> None:
    assert rawjson.repair(raw) == repaired
    assert len(rawjson.repair(raw)) == len(raw)

"""Request bodies over real HTTP: a huge batch is refused as it arrives, bodies in flight are
bounded per tenant and in all, and big bodies are parsed off the event loop (`bodies`).

A real `contextfold serve --http` with two tenants' bearer tokens, driven with raw HTTP requests
built as bytes (a million messages through an MCP client would take the test a minute to build);
a request held half-sent is an httpx request whose body waits on an event. No timing is asserted:
memory is read from the server's own high-water mark (`VmHWM`), and order from which answers
arrive while other bodies are still unfinished.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _servers import client as _client
from _servers import serve

pytestmark = pytest.mark.anyio

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"
TOKENS = {"CONTEXTFOLD_TOKENS": f"alice={ALICE};bob={BOB}"}
PROTOCOL = "2025-11-25"
MIB = 1024**2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the held bodies use asyncio events


def peak_mib(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@functools.cache
def _messages(count: int, pad: int) -> bytes:
    one = b'{"role":"user","content":"m' + b"x" * pad + b'"},'
    return b"[" + (one * count)[:-1] + b"]"


def append_body(messages: int, request_id: Any = 7, *, id_last: bool = False, pad: int = 0) -> bytes:
    """A tools/call of append with `messages` tiny messages, built as bytes."""
    array = _messages(messages, pad)
    arguments = b'{"session_id":"s","messages":' + array + b"}"
    params = b'"params":{"name":"append","arguments":' + arguments + b"}"
    rid = json.dumps(request_id).encode()
    if id_last:
        return b'{"jsonrpc":"2.0","method":"tools/call",' + params + b',"id":' + rid + b"}"
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"tools/call",' + params + b"}"


class Tenant:
    """Raw MCP requests of one tenant over one 2025-11-25 session."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str) -> None:
        self.http, self.url, self.token = http, url, token
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
        }

    async def start(self) -> Tenant:
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        }
        answer = await self.http.post(self.url, json=hello, headers=self.headers)
        assert answer.status_code == 200, answer.text
        self.headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
        done = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        assert done.status_code == 202, done.text
        return self

    async def post(self, body: bytes | AsyncIterator[bytes], length: int | None = None) -> httpx2.Response:
        headers = dict(self.headers)
        if length is not None:
            headers["Content-Length"] = str(length)
        return await self.http.post(self.url, content=body, headers=headers)

    async def call(self, tool: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        return answer_of(await self.post(json.dumps(body).encode()))


def answer_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message a response carries (as JSON, or as the one event of an SSE stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        data = [d for d in data if d]
        assert len(data) == 1, response.text[:500]
        message: dict[str, Any] = json.loads(data[0])
        return message
    message = response.json()
    return message


def tool_error(message: dict[str, Any]) -> str:
    result = message["result"]
    assert result["isError"], result
    return str(result["content"][0]["text"])


def rpc_error(response: httpx2.Response, status: int) -> tuple[Any, str]:
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"] == "application/json"
    message = response.json()
    return message["id"], message["error"]["message"]


class Held:
    """A request sent in part and held there until `finish()`: its body arrives in two pieces."""

    def __init__(self, tenant: Tenant, body: bytes, first: int) -> None:
        self.release = asyncio.Event()
        self.sent_first = asyncio.Event()
        self.body, self.first = body, first
        self.task = asyncio.ensure_future(tenant.post(self._pieces(), len(body)))

    async def _pieces(self) -> AsyncIterator[bytes]:
        yield self.body[: self.first]
        self.sent_first.set()
        await self.release.wait()
        yield self.body[self.first :]

    async def finish(self) -> httpx2.Response:
        self.release.set()
        return await self.task


async def test_a_million_message_append_is_refused_as_it_arrives_and_the_server_stays_small(tmp_path: Path):
    huge = append_body(1_000_000)  # 30 MB of JSON
    late = append_body(1_000_000, "late-id", id_last=True)  # its id only after the messages
    with serve(tmp_path, env=TOKENS) as server:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0, read=600.0)) as http:
            alice = await Tenant(http, server.url, ALICE).start()
            opened = await alice.call("session_open", {"session_id": "s", "model": "gpt-4o"})
            assert "error" not in opened and not opened["result"].get("isError"), opened
            # What a first refusal costs once (its code paths, the tokenizers) is not what is measured.
            warm = answer_of(await alice.post(append_body(2_001)))
            assert "max_batch_messages (2,000)" in tool_error(warm)
            await alice.call("count_tokens", {"text": "warm", "model": "gpt-4o"})
            before = peak_mib(server.process.pid)

            refused = answer_of(await alice.post(huge))
            assert refused["id"] == 7
            # The tool's own refusal (counted only up to the limit: "more than 2,000 messages exceed …").
            message = tool_error(refused)
            assert message.startswith("Error executing tool append: messages: "), message
            assert message.endswith("messages exceed max_batch_messages (2,000); append in smaller batches"), message
            refused = answer_of(await alice.post(late))
            assert refused["id"] == "late-id"
            assert "max_batch_messages (2,000)" in tool_error(refused)
            # Four at once: each is refused for its size, or for the bytes its tenant has in flight.
            answers = await asyncio.gather(*(alice.post(append_body(1_000_000, 20 + i)) for i in range(4)))
            for i, response in enumerate(answers):
                if response.status_code == 429:
                    rid, message = rpc_error(response, 429)
                    assert "http_body_bytes_per_tenant" in message
                else:
                    refused = answer_of(response)
                    rid, message = refused["id"], tool_error(refused)
                    assert "max_batch_messages" in message
                assert rid == 20 + i
            # Cut into bodies too small to be parsed in steps: forty at once, each counted, never built.
            answers = await asyncio.gather(*(alice.post(append_body(30_000, 40 + i)) for i in range(40)))
            for i, response in enumerate(answers):
                refused = answer_of(response)
                assert refused["id"] == 40 + i and "max_batch_messages (2,000)" in tool_error(refused)
            grown = peak_mib(server.process.pid) - before

            # The limit is the tool's: 2,000 go in; the session holds exactly them.
            accepted = answer_of(await alice.post(append_body(2_000)))
            assert not accepted["result"].get("isError"), accepted
            status = await alice.call("status", {"session_id": "s"})
            assert status["result"]["structuredContent"]["message_count"] == 2_000
    # Before: 1,000,000 messages parsed whole took the server from 200 MB to about 1 GB.
    assert grown < 150, f"the server's peak resident set grew by {grown:.0f} MiB"


async def test_bodies_past_the_in_flight_limits_are_refused_naming_the_setting(tmp_path: Path):
    limits = {
        **TOKENS,
        "CONTEXTFOLD_HTTP_BODY_BYTES_PER_TENANT": str(3 * MIB),
        "CONTEXTFOLD_HTTP_BODY_BYTES_IN_FLIGHT": str(5 * MIB),
    }
    alices = append_body(2_000, 11, pad=1_200)  # 2.5 MB, held half-sent
    bobs = append_body(1_500, 12, pad=1_200)  # 1.9 MB, held half-sent
    probe = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping", "params": {"pad": "x" * MIB}}).encode()
    with serve(tmp_path, env=limits) as server:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0, read=600.0)) as http:
            alice = await Tenant(http, server.url, ALICE).start()
            bob = await Tenant(http, server.url, BOB).start()
            for tenant in (alice, bob):
                await tenant.call("session_open", {"session_id": "s", "model": "gpt-4o"})

            # A 1 MiB ping is refused for what it is while nothing else is in flight.
            rid, message = rpc_error(await alice.post(probe), 413)
            assert rid == 99 and "http_body_thread_bytes" in message and "'ping'" in message

            held_alice = Held(alice, alices, 100_000)
            await held_alice.sent_first.wait()
            # Once the server counts Alice's half-sent body, her next one is over her limit.
            message = await _refused_once_counted(alice, probe, 429)
            assert (
                f"a body of {len(probe):,} bytes more would pass http_body_bytes_per_tenant (3,145,728 bytes)"
                in message
            )
            assert f"tenant 'alice' already has {len(alices):,} bytes" in message

            held_bob = Held(bob, bobs, 100_000)
            await held_bob.sent_first.wait()
            # Bob is within his own limit, but not within the server's.
            message = await _refused_once_counted(bob, probe, 503)
            assert "would pass http_body_bytes_in_flight (5,242,880 bytes)" in message

            # Both bodies are still arriving, and small requests are answered meanwhile.
            for tenant in (bob, alice):
                status = await tenant.call("status", {"session_id": "s"})
                assert status["result"]["structuredContent"]["message_count"] == 0
            assert not held_alice.task.done() and not held_bob.task.done()

            # Finished, each is parsed and appended, and the bytes it held are free again.
            for held, count in ((held_alice, 2_000), (held_bob, 1_500)):
                appended = answer_of(await held.finish())
                assert not appended["result"].get("isError"), str(appended)[:500]
                assert len(appended["result"]["structuredContent"]["messages"]) == count
            rid, message = rpc_error(await alice.post(probe), 413)
            assert rid == 99 and "http_body_thread_bytes" in message


async def _refused_once_counted(tenant: Tenant, body: bytes, status: int) -> str:
    """Send `body` until the server refuses it with `status` (it is refused otherwise for being a
    ping, until the server has counted the held body: no timing, only a bound on attempts)."""
    for _ in range(400):
        response = await tenant.post(body)
        if response.status_code == status:
            rid, message = rpc_error(response, status)
            assert rid == 99
            assert response.headers["retry-after"] == "1"
            return message
        assert response.status_code == 413, response.text[:300]
        await asyncio.sleep(0.05)
    raise AssertionError(f"never refused with {status}")


async def test_big_bodies_of_every_shape_reach_the_tool_exactly(tmp_path: Path):
    # Many small strings (1.4 MB, parsed in steps), with escapes and non-ASCII text; written
    # with \u escapes, half an emoji too (the UTF-8 a client sends cannot hold one).
    filler = "lorem ipsum " * 75
    texts = [f'{i} é€😀 "quoted" \\ \n\t{filler}' for i in range(1_500)]
    expected: dict[str, list[str]] = {}
    with serve(tmp_path, env=TOKENS) as server:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0, read=600.0)) as http:
            alice = await Tenant(http, server.url, ALICE).start()
            for session, ensure_ascii in (("ascii", True), ("utf8", False)):
                sent = [t + "\ud83d" for t in texts] if ensure_ascii else texts
                expected[session] = [t.replace("\ud83d", "\ufffd") for t in sent]
                await alice.call("session_open", {"session_id": session, "model": "gpt-4o"})
                call = {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "tools/call",
                    "params": {
                        "name": "append",
                        "arguments": {
                            "session_id": session,
                            "messages": [{"role": "user", "content": t} for t in sent],
                        },
                    },
                }
                body = json.dumps(call, ensure_ascii=ensure_ascii).encode()
                assert len(body) > MIB
                appended = answer_of(await alice.post(b" \n" + body + b"\n"))
                assert appended["id"] == 5 and not appended["result"].get("isError"), str(appended)[:500]
            # Under http_body_thread_bytes with more objects than max_batch_messages, within it: as sent.
            blocks = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
            await alice.call("session_open", {"session_id": "blocks", "model": "gpt-4o"})
            appended = await alice.call("append", {"session_id": "blocks", "messages": blocks * 1_500}, request_id=6)
            assert appended["id"] == 6 and len(appended["result"]["structuredContent"]["messages"]) == 1_500
            # Not JSON: a parse error that keeps the id.
            broken = append_body(1_500, 8, pad=800)[:-2] + b"]"
            rid, message = rpc_error(await alice.post(broken), 400)
            assert rid == 8 and message.startswith("Parse error:"), message
        async with _client(server.url, ALICE) as client:
            for session, texts_sent in expected.items():
                shown = await client.call_tool("get_context", {"session_id": session, "format": "openai"})
                assert [m["content"] for m in shown.structured_content["messages"]] == texts_sent

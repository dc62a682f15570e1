"""Shared resources over real HTTP: one tenant or one request cannot lock out the others.

Sessions: `contextfold serve --http` on loopback with two tenants' bearer tokens and a small
`http_sessions_per_tenant`, opened with the 2025-11-25 handshake (the era that keeps a session per
client). Heavy work: a huge `count_tokens` runs off the event loop and is capped by
`max_count_bytes`, and a run of spaces that makes tiktoken panic no longer ends the server.
"""

from __future__ import annotations

import os
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
import pytest
from _servers import client as _client
from _servers import serve
from mcp import Client
from mcp.shared.exceptions import MCPError

from contextfold.config import load_settings
from contextfold.mcpserver.tools import build_server

pytestmark = pytest.mark.anyio

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"
LIMIT = 3


def _env(**extra: str) -> dict[str, str]:
    return {
        "CONTEXTFOLD_TOKENS": f"alice={ALICE};bob={BOB}",
        "CONTEXTFOLD_HTTP_SESSIONS_PER_TENANT": str(LIMIT),
        **extra,
    }


async def _handshake(url: str, token: str) -> httpx2.Response:
    """A bare 2025-11-25 `initialize`: opens a session and leaves it, like a client that vanished."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(timeout=30.0) as http:
        return await http.post(url, json=body, headers=headers)


def _mcp_error(error: BaseException) -> MCPError:
    """The MCPError inside (possibly nested) exception groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(error)
    return error


def _refusal(response: httpx2.Response) -> str:
    assert response.status_code == 429, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    return response.json()["error"]["message"]


async def test_a_tenant_at_its_limit_is_refused_clearly_and_the_others_still_get_in(tmp_path: Path):
    with serve(tmp_path, env=_env()) as server:
        url = server.url
        async with AsyncExitStack() as stack:
            alice = [await stack.enter_async_context(_client(url, ALICE, mode="legacy")) for _ in range(LIMIT - 1)]
            last = _client(url, ALICE, mode="legacy")
            alice.append(await last.__aenter__())
            try:
                # Alice's next handshake is refused, naming the limit and what to do.
                message = _refusal(await _handshake(url, ALICE))
                assert "tenant 'alice' already holds 3 open MCP sessions, the http_sessions_per_tenant limit" in message
                assert "HTTP DELETE" in message and "http_session_idle_seconds" in message
                with pytest.raises(BaseException) as caught:  # the SDK client wraps it in a group
                    async with _client(url, ALICE, mode="legacy"):
                        pass
                assert "http_sessions_per_tenant" in str(_mcp_error(caught.value))
                # Bob is not affected: he completes a handshake and a tool call.
                async with _client(url, BOB, mode="legacy") as bob:
                    assert bob.protocol_version == "2025-11-25"
                    counted = await bob.call_tool("count_tokens", {"text": "hello world", "model": "gpt-4o"})
                    assert counted.structured_content["tokens"] == 2
                # Alice's open sessions keep working.
                for session in alice:
                    assert not (await session.call_tool("count_tokens", {"text": "hi"})).is_error
            finally:
                await last.__aexit__(None, None, None)  # the client ends its session with a DELETE
            # One place is free again: Alice opens a session and uses it.
            async with _client(url, ALICE, mode="legacy") as again:
                assert not (await again.call_tool("count_tokens", {"text": "hi"})).is_error
                assert _refusal(await _handshake(url, ALICE))  # and the limit holds again


async def test_sessions_left_idle_close_and_free_their_places(tmp_path: Path):
    with serve(tmp_path, env=_env(CONTEXTFOLD_HTTP_SESSION_IDLE_SECONDS="1")) as server:
        url = server.url
        # Clients that open a session and vanish without a DELETE, all at once: exactly LIMIT get in.
        statuses: list[int] = []

        async def knock() -> None:
            statuses.append((await _handshake(url, ALICE)).status_code)

        async with anyio.create_task_group() as group:
            for _ in range(LIMIT + 5):
                group.start_soon(knock)
        assert sorted(statuses) == [200] * LIMIT + [429] * 5
        assert "idle ones close after 1 s (http_session_idle_seconds)" in _refusal(await _handshake(url, ALICE))
        # Once the idle sessions are closed, a handshake is admitted again (no fixed wait).
        deadline = time.monotonic() + 60
        while (response := await _handshake(url, ALICE)).status_code == 429:
            assert time.monotonic() < deadline, "idle sessions were never closed"
            await anyio.sleep(0.2)
        assert response.status_code == 200


async def test_the_server_wide_limit_names_its_own_setting(tmp_path: Path):
    with serve(tmp_path, env=_env(CONTEXTFOLD_HTTP_MAX_SESSIONS="2")) as server:
        for token in (ALICE, BOB):
            assert (await _handshake(server.url, token)).status_code == 200
        refused = await _handshake(server.url, BOB)
        assert refused.status_code == 503
        assert "the server has 2 open MCP sessions, its http_max_sessions limit" in refused.json()["error"]["message"]


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_one_clients_huge_count_does_not_hold_up_the_others(tmp_path: Path):
    size = 8_000_000  # "x" * 8 is one o200k token, so the count is size // 8
    with serve(tmp_path) as server:
        async with _client(server.url) as counting, _client(server.url) as other:
            await other.call_tool("session_open", {"session_id": "s", "model": "gpt-4o"})
            busy = _cpu_seconds(server.process.pid)
            huge: dict[str, object] = {}

            async def count_huge() -> None:
                huge["result"] = await counting.call_tool("count_tokens", {"text": "x" * size, "model": "gpt-4o"})

            async with anyio.create_task_group() as group:
                group.start_soon(count_huge)
                # Wait until the server is busy with the huge request (parsed, and counting).
                while _cpu_seconds(server.process.pid) - busy < 0.25 and "result" not in huge:
                    await anyio.sleep(0.02)
                assert "result" not in huge
                # Meanwhile the other client is answered, more than once.
                for text in ("hello world", "hello again"):
                    small = await other.call_tool("count_tokens", {"text": text, "model": "gpt-4o"})
                    assert small.structured_content["tokens"] == 2
                status = await other.call_tool("status", {"session_id": "s"})
                assert status.structured_content["state"] == "ok"
                assert "result" not in huge, "the small calls waited for the huge count"
            assert huge["result"].structured_content["tokens"] == size // 8


async def test_a_count_over_max_count_bytes_is_refused_naming_the_setting(tmp_path: Path):
    server = build_server(load_settings({"home": tmp_path, "max_count_bytes": 1_000}, environ={}))
    async with Client(server) as client:
        fits = await client.call_tool("count_tokens", {"text": "é" * 500, "model": "gpt-4o"})  # 1,000 bytes
        assert not fits.is_error
        for args in ({"text": "é" * 501}, {"messages": [{"role": "user", "content": "x" * 1_000}]}):
            refused = await client.call_tool("count_tokens", {**args, "model": "gpt-4o"})
            assert refused.is_error
            assert "is more than max_count_bytes (1,000); count it in parts" in refused.content[0].text


async def test_a_million_spaces_do_not_take_the_server_down(tmp_path: Path):
    """tiktoken panics on about a million spaces in a row; the panic used to end the server."""
    spaces = " " * 1_100_000 + "x"
    server = build_server(load_settings({"home": tmp_path}, environ={}))
    async with Client(server) as client:
        counted = await client.call_tool("count_tokens", {"text": spaces, "model": "gpt-4o"})
        assert not counted.is_error and counted.structured_content["tokens"] > 8_000
        await client.call_tool("session_open", {"session_id": "s", "model": "gpt-4o"})
        appended = await client.call_tool(
            "append",
            {
                "session_id": "s",
                "messages": [
                    {"role": "user", "content": "run it"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": spaces},
                ],
            },
        )
        assert not appended.is_error, appended.content
        assert not (await client.call_tool("status", {"session_id": "s"})).is_error

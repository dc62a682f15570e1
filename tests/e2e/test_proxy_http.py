"""`contextfold proxy` over streamable HTTP: an upstream at a URL (`--url`), and clients over HTTP
(`--http`). Real processes on loopback: tests/proxy_upstream.py serving HTTP, the proxy, and the
SDK's client.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx2
import pytest
from _proxy import UPSTREAM, listening, output_id, python_upstream, read_whole
from _servers import free_port
from mcp import Client, MCPError
from proxy_upstream import lines_text
from test_proxy import ERAS, consent, dumped, fake_llm

pytestmark = pytest.mark.anyio


def url_proxy(home: Any, port: int, *options: str) -> Any:
    command = [sys.executable, "-m", "contextfold", "proxy", "--url", f"http://127.0.0.1:{port}/mcp", *options]
    from _proxy import env
    from mcp import StdioServerParameters

    return StdioServerParameters(command=command[0], args=command[1:], env=env(home))


@pytest.mark.parametrize("mode", ERAS)
async def test_an_upstream_at_a_url_is_proxied_in_both_eras(tmp_path, mode):
    port = free_port()
    with listening([sys.executable, str(UPSTREAM), "--http", str(port)], tmp_path / "upstream", port):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode) as plain:
            upstream_tools = [dumped(t) for t in (await plain.list_tools()).tools]
            small_direct = dumped(await plain.call_tool("weather", {"city": "Oslo"}))
        params = url_proxy(tmp_path, port, "--header", "X-Team=blue")
        async with Client(params, mode=mode, sampling_callback=fake_llm, elicitation_callback=consent) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            tools = [dumped(t) for t in (await client.list_tools()).tools]
            assert tools[: len(upstream_tools)] == upstream_tools
            assert [t["name"] for t in tools[len(upstream_tools) :]] == ["read_output", "search_history"]
            assert json.loads(json.dumps(dumped(await client.call_tool("weather", {"city": "Oslo"})))) == small_direct
            assert (await client.call_tool("header", {"name": "X-Team"})).content[0].text == "blue"
            assert (await client.call_tool("ask", {"question": "why"})).content[0].text == "LLM<why>"
            if mode == "legacy":
                assert (await client.call_tool("ask_push", {"question": "how"})).content[0].text == "LLM<how>"
            cut = (await client.call_tool("big", {"lines": 5_000})).content[0].text
            assert "Full output saved as" in cut
            assert await read_whole(client, output_id(cut)) == lines_text(5_000)


async def test_an_unreachable_url_is_a_clear_error(tmp_path):
    port = free_port()  # nothing listens there
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with Client(url_proxy(tmp_path, port), mode="legacy"):
            pass
    error: BaseException = caught.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError)
    message = error.error.message
    assert f"the upstream server at http://127.0.0.1:{port}/mcp cannot be reached" in message
    assert "ConnectError" in message and "before it answered initialize" in message


async def test_clients_over_http_each_get_their_own_upstream_and_session(tmp_path):
    port = free_port()
    argv = [sys.executable, "-m", "contextfold", "proxy", "--http", "--port", str(port), "--", *python_upstream()]
    with listening(argv, tmp_path, port):
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            Client(url, mode="legacy", sampling_callback=fake_llm) as first,
            Client(url, mode="legacy") as second,
        ):
            assert first.protocol_version == second.protocol_version == "2025-11-25"
            names = [t.name for t in (await first.list_tools()).tools]
            assert names[-2:] == ["read_output", "search_history"] and "echo" in names
            assert (await first.call_tool("ask_push", {"question": "hi"})).content[0].text == "LLM<hi>"
            cuts = [
                (await c.call_tool("big", {"lines": 3_000 + n})).content[0].text for n, c in enumerate((first, second))
            ]
            for n, (c, cut) in enumerate(zip((first, second), cuts)):
                assert await read_whole(c, output_id(cut)) == lines_text(3_000 + n)
            # Each client session is its own proxy: its own history.
            await first.call_tool("echo", {"text": "only in the first"})
            found = (await second.call_tool("search_history", {"pattern": "only in the first"})).content[0].text
            assert found == "No matches."
        from test_proxy import _sessions

        assert len(_sessions(tmp_path)) == 2


async def test_sessionless_clients_over_http_share_one_upstream_connection(tmp_path):
    port = free_port()
    argv = [sys.executable, "-m", "contextfold", "proxy", "--http", "--port", str(port), "--", *python_upstream()]
    with listening(argv, tmp_path, port):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="auto", sampling_callback=fake_llm) as first, Client(url, mode="auto") as second:
            assert first.protocol_version == second.protocol_version == "2026-07-28"
            names = [t.name for t in (await first.list_tools()).tools]
            assert names[-2:] == ["read_output", "search_history"] and "echo" in names
            # Both clients number their requests alike; each answer still reaches its own request.
            echoes = await asyncio.gather(
                *(c.call_tool("echo", {"text": f"from {n}"}) for n, c in enumerate((first, second)))
            )
            assert [e.content[0].text for e in echoes] == ["from 0", "from 1"]
            progress: list[Any] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, message))

            done = await first.call_tool("count", {"n": 3}, progress_callback=on_progress)
            assert done.content[0].text == "counted 3" and progress == [(1, "step 1"), (2, "step 2"), (3, "step 3")]
            # Sampling the 2026-07-28 way: the answer asks for input, the client retries with it.
            assert (await first.call_tool("ask", {"question": "why"})).content[0].text == "LLM<why>"
            cut = (await second.call_tool("big", {"lines": 3_000})).content[0].text
            assert await read_whole(first, output_id(cut)) == lines_text(3_000)


async def test_the_sessionless_http_era_behind_several_servers_is_refused_with_a_way_forward(tmp_path):
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"py": {"command": sys.executable, "args": [str(UPSTREAM)]}}}))
    port = free_port()
    argv = [sys.executable, "-m", "contextfold", "proxy", "--http", "--port", str(port), "--config", str(servers)]
    with listening(argv, tmp_path, port):
        body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {}}}
        headers = {
            "mcp-protocol-version": "2026-07-28",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        async with httpx2.AsyncClient() as http:
            response = await http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
        assert response.status_code == 404
        assert "start with initialize" in response.json()["error"]["message"]
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="auto") as client:  # falls back to the handshake
            assert client.protocol_version == "2025-11-25"
            assert "py__echo" in [t.name for t in (await client.list_tools()).tools]

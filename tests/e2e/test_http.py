"""Streamable HTTP on loopback: `contextfold serve --http` as a real subprocess, real clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _servers import client as _client
from _servers import serve
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_full_tool_set_over_http_in_both_eras(tmp_path: Path, mode: str):
    with serve(tmp_path) as server:
        url = server.url
        async with _client(url, mode=mode) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            await client.call_tool("session_open", {"session_id": "h", "model": "gpt-4o"})
            appended = await client.call_tool(
                "append",
                {
                    "session_id": "h",
                    "messages": [
                        # An earlier turn for `compact` to summarize: the newest request and its answer
                        # always stay in view, so a one-turn session has nothing to compact (issue 13).
                        {"role": "user", "content": "Describe the project."},
                        {"role": "assistant", "content": "It is a small command-line tool. " * 100},
                        {"role": "user", "content": "list"},
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                            ],
                        },
                        {"role": "tool", "tool_call_id": "c1", "content": "x\n" * 3_000},
                    ],
                },
            )
            output_id = appended.structured_content["spilled"][0]["output_id"]
            read = await client.call_tool("read_output", {"id": output_id, "offset": 3_000, "limit": 1})
            assert read.structured_content["text"] == "3000\tx"
            for name, args in [
                ("status", {"session_id": "h"}),
                ("get_context", {"session_id": "h", "format": "anthropic", "cache_anchors": True}),
                ("select_tail", {"session_id": "h"}),
                ("prune", {"session_id": "h", "dry_run": True}),
                ("count_tokens", {"text": "hi"}),
                ("session_list", {}),
                ("compact", {"session_id": "h", "summarizer": "extractive", "dry_run": True}),
                (
                    "summarize",
                    {"messages": [{"role": "user", "content": "Never use sudo."}], "summarizer": "extractive"},
                ),
                ("spill", {"session_id": "h", "text": "short"}),
            ]:
                result = await client.call_tool(name, args)
                assert not result.is_error, (name, result.content)
            assert (await client.call_tool("session_delete", {"session_id": "h"})).structured_content["deleted"]


async def test_a_wrong_host_header_is_refused(tmp_path: Path):
    with serve(tmp_path) as server:
        url = server.url
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            bad = await http.post(url, json=body, headers={**headers, "Host": "evil.example:80"})
            assert bad.status_code == 421


def test_a_public_bind_without_tokens_refuses_to_start(tmp_path: Path):
    out = subprocess.run(
        [sys.executable, "-m", "contextfold", "serve", "--http", "--host", "0.0.0.0", "--port", "0"],
        env={**os.environ, "CONTEXTFOLD_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "refusing to serve on 0.0.0.0 without bearer tokens" in out.stderr


async def test_tenants_only_see_their_own_sessions_and_outputs(tmp_path: Path):
    tokens_file = tmp_path / "tokens"
    tokens = {}
    for tenant in ("alice", "bob"):
        out = subprocess.run(
            [sys.executable, "-m", "contextfold", "token", "add", tenant, "--tokens-file", str(tokens_file)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        tokens[tenant] = out.stdout.strip().splitlines()[-1]
    stored = tokens_file.read_text()
    assert tokens["alice"] not in stored and "sha256:" in stored  # hashed at rest
    assert tokens_file.stat().st_mode & 0o777 == 0o600

    with serve(tmp_path, "--host", "0.0.0.0", "--tokens-file", str(tokens_file)) as server:
        url = server.url
        async with httpx2.AsyncClient() as http:  # no token → 401
            response = await http.post(url, json={}, headers={"Content-Type": "application/json"})
            assert response.status_code == 401
        async with _client(url, tokens["alice"]) as alice:
            await alice.call_tool("session_open", {"session_id": "secret", "model": "gpt-4o"})
            appended = await alice.call_tool(
                "append",
                {"session_id": "secret", "messages": [{"role": "user", "content": "password is hunter2\n" * 9_000}]},
            )
            output_id = appended.structured_content["spilled"][0]["output_id"]
            assert (await alice.call_tool("read_output", {"id": output_id})).structured_content["total_lines"] == 9_000
        async with _client(url, tokens["bob"]) as bob:
            assert (await bob.call_tool("session_list", {})).structured_content["sessions"] == []
            for name, args in [
                ("status", {"session_id": "secret"}),
                ("get_context", {"session_id": "secret"}),
                ("compact", {"session_id": "secret", "summarizer": "extractive"}),
                ("prune", {"session_id": "secret"}),
                ("append", {"session_id": "secret", "messages": [{"role": "user", "content": "x"}]}),
                ("session_delete", {"session_id": "secret"}),
                ("read_output", {"id": output_id}),
                ("search_history", {"session_id": "secret", "pattern": "hunter2"}),
            ]:
                result = await bob.call_tool(name, args)
                assert result.is_error and "no " in result.content[0].text, name
                # Another tenant's id reads exactly like an id nobody uses.
                unused = await bob.call_tool(name, _renamed(args, "secret", "unused", output_id, "out_unused"))
                assert result.content[0].text == _renamed(
                    unused.content[0].text, "out_unused", output_id, "unused", "secret"
                ), name
            with pytest.raises(MCPError):
                await bob.read_resource(f"contextfold://outputs/{output_id}")
            # Session ids are per tenant: bob's "secret" is a new session of his own, and opening
            # it answers as for any unused id (it does not reveal that alice has one).
            opened = await bob.call_tool("session_open", {"session_id": "secret"})
            assert not opened.is_error and opened.structured_content["tokens_in_view"] == 0
            await bob.call_tool("append", {"session_id": "secret", "messages": [{"role": "user", "content": "b"}]})
        async with _client(url, tokens["alice"]) as alice:
            status = await alice.call_tool("status", {"session_id": "secret"})
            assert status.structured_content["message_count"] == 1  # untouched by bob
            context = await alice.call_tool("get_context", {"session_id": "secret"})
            assert "hunter2" in str(context.structured_content) and "'b'" not in str(context.structured_content)


def _renamed(value: Any, *pairs: str) -> Any:
    """`value` with each (old, new) pair of strings swapped, through JSON."""
    text = json.dumps(value) if not isinstance(value, str) else value
    for old, new in zip(pairs[::2], pairs[1::2]):
        text = text.replace(old, new)
    return text if isinstance(value, str) else json.loads(text)


async def test_a_request_body_over_the_cap_gets_413_and_writes_nothing(tmp_path: Path):
    with serve(tmp_path, env={"CONTEXTFOLD_MAX_REQUEST_BYTES": "200000"}) as server:
        async with _client(server.url) as client:
            await client.call_tool("session_open", {"session_id": "b", "model": "gpt-4o"})
            fits = {"session_id": "b", "messages": [{"role": "user", "content": "x" * 100_000}]}
            assert not (await client.call_tool("append", fits)).is_error
            too_big = {"session_id": "b", "messages": [{"role": "user", "content": "y" * 300_000}]}
            with pytest.raises(MCPError, match=r"request body exceeds max_request_bytes \(200,000 bytes\)"):
                await client.call_tool("append", too_big)
        # The body is refused before it is read: a raw POST gets the status itself.
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                server.url,
                content=b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"z" * 300_000 + b'"}}',
                headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
            )
            assert response.status_code == 413
            assert "max_request_bytes" in response.json()["error"]["message"]
        async with _client(server.url) as client:
            status = await client.call_tool("status", {"session_id": "b"})
            assert status.structured_content["message_count"] == 1

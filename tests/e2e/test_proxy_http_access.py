"""`contextfold proxy --http` under many clients: what a connection costs, who may connect, and what
each client sees. Real processes on loopback: the proxy serving HTTP in front of
tests/proxy_upstream.py (run per upstream as a child of the proxy), raw HTTP requests where the
status matters, and the SDK's client where a client's view does.

- A handshake alone starts no upstream; the upstreams running at once stay within
  `proxy_max_upstreams`, counted in /proc as children of the proxy; past it a request that needs
  one gets `503` naming the setting; a session closed or idle frees its upstream.
- Bearer tokens as `serve --http` takes them (the home's tokens file, `--tokens-file`,
  `CONTEXTFOLD_TOKENS`); `http_sessions_per_tenant` per tenant, `429` naming it.
- Each client its own record: another client's calls are not found by `search_history`, and its
  output ids (or the server's, or a hook's, on the same home) read exactly like unknown ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _proxy import env, listening, output_id, python_upstream, read_whole
from _servers import client as http_client
from _servers import free_port
from mcp import Client, StdioServerParameters
from proxy_upstream import lines_text

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts the proxy's children in /proc"),
]

ALICE, BOB = "alice-proxy-token-0123456789", "bob-proxy-token-0123456789"
CAP = 3
HANDSHAKES = 40
SECRET = "sk-secret-4242-do-not-share"
UNKNOWN = "out_01KZZZZZZZZZZZZZZZZZZZZZZZ"
"""A well-formed output id that nobody has."""


# -- the proxy and its children --------------------------------------------------------------------------


def proxy_argv(port: int, *options: str) -> list[str]:
    command = [sys.executable, "-m", "contextfold", "proxy", "--http", "--port", str(port), *options]
    return [*command, "--", *python_upstream()]


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (zombies too: a child not reaped is not freed)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def settle(pid: int, wanted: int, seconds: float = 60.0) -> int:
    """The proxy's child count once it is `wanted` (or whatever it is after `seconds`)."""
    deadline = time.monotonic() + seconds
    while (count := len(children(pid))) != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
    return count


class Watch:
    """The most children the proxy had at once, sampled in a thread for the duration of a block."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, len(children(self.pid)))
            time.sleep(0.02)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.most = max(self.most, len(children(self.pid)))


# -- raw streamable HTTP, the 2025-11-25 way ----------------------------------------------------------------


class Raw:
    """Bare POSTs to /mcp: a handshake left open, and requests on a session, with their statuses."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str | None = None) -> None:
        self.http = http
        self.url = url
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"

    async def post(self, body: dict[str, Any], session: str | None = None) -> tuple[httpx2.Response, Any]:
        headers = dict(self.headers)
        if session is not None:
            headers["Mcp-Session-Id"] = session
            headers["Mcp-Protocol-Version"] = "2025-11-25"
        response = await self.http.post(self.url, json=body, headers=headers)
        return response, answer(response)

    async def handshake(self) -> httpx2.Response:
        """`initialize` and `notifications/initialized`, then nothing: the session is left open."""
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        response, _ = await self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        if response.status_code == 200:
            session = response.headers["mcp-session-id"]
            done, _ = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            assert done.status_code == 202, done.text
        return response

    async def request(self, session: str, method: str, params: dict[str, Any] | None = None) -> tuple[int, Any]:
        response, message = await self.post(
            {"jsonrpc": "2.0", "id": 2, "method": method, "params": params or {}}, session
        )
        return response.status_code, message


def answer(response: httpx2.Response) -> Any:
    """The JSON-RPC message in a response: its JSON body, or the last message of its SSE stream."""
    if not response.content:
        return None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(d) for d in data if d]
        return messages[-1] if messages else None
    return response.json()


# -- item 1: what a connection costs --------------------------------------------------------------------------


async def test_handshakes_start_no_upstream_and_upstreams_stay_within_the_cap(tmp_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with listening(proxy_argv(port), tmp_path, port, CONTEXTFOLD_PROXY_MAX_UPSTREAMS=str(CAP)) as proxy:
        async with httpx2.AsyncClient(timeout=120.0) as http:
            raw = Raw(http, url)
            with Watch(proxy.pid) as watch:
                opened = await asyncio.gather(*(raw.handshake() for _ in range(HANDSHAKES)))
            assert [r.status_code for r in opened] == [200] * HANDSHAKES
            # Each was answered as the upstream answers, with the proxy's tools capability.
            result = answer(opened[0])["result"]
            assert result["serverInfo"]["name"] == "proxy-upstream" and "tools" in result["capabilities"]
            assert result["instructions"] == "A test server for contextfold proxy."
            assert watch.most <= CAP, f"{watch.most} upstreams at once for {HANDSHAKES} handshakes"
            assert settle(proxy.pid, 0) == 0, "a handshake alone left an upstream running"
            sessions = [r.headers["mcp-session-id"] for r in opened]
            # The proxy's own tools and ping need no upstream either.
            assert (await raw.request(sessions[0], "ping"))[0] == 200
            status, message = await raw.request(
                sessions[0], "tools/call", {"name": "search_history", "arguments": {"pattern": "x"}}
            )
            assert status == 200 and message["result"]["content"][0]["text"].startswith("Nothing recorded yet")
            assert len(children(proxy.pid)) == 0

            # Requests that need the upstream: the first CAP sessions get one, the others a 503.
            with Watch(proxy.pid) as watch:
                outcomes = [await raw.request(s, "tools/list") for s in sessions[: CAP + 3]]
            assert watch.most <= CAP
            assert [status for status, _ in outcomes] == [200] * CAP + [503] * 3
            assert all("echo" in [t["name"] for t in m["result"]["tools"]] for _, m in outcomes[:CAP])
            refusal = outcomes[CAP][1]["error"]
            assert refusal["code"] == -32000 and "proxy_max_upstreams" in refusal["message"], refusal
            assert f"{CAP} upstream servers" in refusal["message"]
            assert len(children(proxy.pid)) == CAP

            # A session that ends frees its upstream; a refused client that retries then gets in.
            gone = await http.delete(url, headers={**raw.headers, "Mcp-Session-Id": sessions[0]})
            assert gone.status_code == 200
            assert settle(proxy.pid, CAP - 1) == CAP - 1
            status, message = await raw.request(
                sessions[CAP], "tools/call", {"name": "echo", "arguments": {"text": "in"}}
            )
            assert status == 200 and message["result"]["content"][0]["text"] == "in"
            assert len(children(proxy.pid)) == CAP

            # Sessionless requests need one too: refused the same way while every place is taken.
            modern = {**raw.headers, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
            envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
            body = {"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": envelope}}
            refused = await http.post(url, json=body, headers=modern)
            assert refused.status_code == 503 and "proxy_max_upstreams" in refused.json()["error"]["message"]
            assert refused.json()["id"] == 7
            kids = children(proxy.pid)
            assert len(kids) == CAP
    # Stopping the proxy stops every upstream it runs.
    deadline = time.monotonic() + 30
    while any(alive(kid) for kid in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [kid for kid in kids if alive(kid)]


async def test_an_idle_session_frees_its_upstream(tmp_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    idle = {"CONTEXTFOLD_HTTP_SESSION_IDLE_SECONDS": "2"}
    with listening(proxy_argv(port), tmp_path, port, **idle) as proxy:
        async with httpx2.AsyncClient(timeout=120.0) as http:
            raw = Raw(http, url)
            session = (await raw.handshake()).headers["mcp-session-id"]
            assert (await raw.request(session, "tools/call", {"name": "big", "arguments": {"lines": 3_000}}))[0] == 200
            assert len(children(proxy.pid)) == 1
            assert settle(proxy.pid, 0) == 0, "an idle session kept its upstream"
            assert (await raw.request(session, "ping"))[0] == 404
        # A sessionless client's relay too, once idle.
        async with http_client(url, mode="auto") as sessionless:
            assert sessionless.protocol_version == "2026-07-28"
            assert (await sessionless.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
            assert len(children(proxy.pid)) == 1
        assert settle(proxy.pid, 0) == 0, "an idle sessionless relay kept its upstream"
    # The session's call was recorded (one message, the result attached to it) before it closed.
    from test_proxy import _sessions

    assert sorted(s["messages"] for s in _sessions(tmp_path)) == [1, 1]


# -- item 1: who may connect ------------------------------------------------------------------------------------


def token_add(home: Path, tenant: str, *options: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "token", "add", tenant, *options],
        env=env(home),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1].split()[-1]


async def test_bearer_tokens_and_the_per_tenant_limit_as_serve_has_them(tmp_path: Path):
    carol = token_add(tmp_path, "carol")  # the home's tokens file, read by default as serve reads it
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    settings = {"CONTEXTFOLD_TOKENS": f"alice={ALICE};bob={BOB}", "CONTEXTFOLD_HTTP_SESSIONS_PER_TENANT": "2"}
    with listening(proxy_argv(port), tmp_path, port, **settings) as proxy:
        async with httpx2.AsyncClient(timeout=120.0) as http:
            for token in (None, "not-a-token"):
                refused = await Raw(http, url, token).handshake()
                assert refused.status_code == 401, refused.text
                assert "bearer token" in refused.json()["error"]["message"]
                assert "contextfold token add" in refused.json()["error"]["message"]
            alice = Raw(http, url, ALICE)
            assert [(await alice.handshake()).status_code for _ in range(2)] == [200, 200]
            third = await alice.handshake()
            assert third.status_code == 429, third.text
            message = third.json()["error"]["message"]
            assert "http_sessions_per_tenant" in message and "'alice'" in message
            assert (await Raw(http, url, BOB).handshake()).status_code == 200
            assert (await Raw(http, url, carol).handshake()).status_code == 200
            assert len(children(proxy.pid)) == 0
        # Another tenant's session id is not found, as with serve.
        async with httpx2.AsyncClient(timeout=120.0) as http:
            session = (await Raw(http, url, BOB).handshake()).headers["mcp-session-id"]
            assert (await Raw(http, url, carol).request(session, "ping"))[0] == 404


async def test_a_tokens_file_option_is_taken_and_a_wide_bind_needs_one(tmp_path: Path):
    tokens = tmp_path / "team-tokens"
    dave = token_add(tmp_path, "dave", "--tokens-file", str(tokens))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with listening(proxy_argv(port, "--tokens-file", str(tokens)), tmp_path, port):
        async with httpx2.AsyncClient(timeout=120.0) as http:
            assert (await Raw(http, url).handshake()).status_code == 401
            assert (await Raw(http, url, dave).handshake()).status_code == 200
    done = subprocess.run(
        proxy_argv(free_port(), "--host", "0.0.0.0"), env=env(tmp_path / "empty"), capture_output=True, text=True
    )
    assert done.returncode == 2 and "without bearer tokens" in done.stderr, done.stderr


# -- item 7: what each client sees -----------------------------------------------------------------------------------


async def spilled_by_serve(home: Path) -> str:
    """An output spilled by `contextfold serve` (stdio) on the same home: the local user's."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "contextfold", "serve"], env=env(home))
    async with Client(params) as serve:
        opened = await serve.call_tool("session_open", {"title": "the user's own"})
        session = opened.structured_content["session_id"]
        spilled = await serve.call_tool("spill", {"session_id": session, "text": lines_text(5_000)})
        return spilled.structured_content["output_id"]


def spilled_by_hook(home: Path) -> str:
    """An output a Claude Code PostToolUse hook spilled on the same home."""
    event = {
        "session_id": "hooked",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "cat big.log"},
        "tool_response": {"stdout": lines_text(5_000), "stderr": "", "interrupted": False},
        "transcript_path": str(home / "none.jsonl"),
        "cwd": str(home),
    }
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "hook", "claude-code", "PostToolUse"],
        input=json.dumps(event),
        env=env(home),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return output_id(done.stdout)


async def unknown_reads_as(client: Any, output: str) -> str:
    """What reading `output` says, with the id itself taken out (to compare with an unknown id's)."""
    result = await client.call_tool("read_output", {"id": output})
    assert result.is_error, result.content[0].text[:300]
    return result.content[0].text.replace(output, "ID")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_clients_see_only_their_own_calls_and_outputs(tmp_path: Path, mode: str):
    served = await spilled_by_serve(tmp_path)
    hooked = spilled_by_hook(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with listening(proxy_argv(port), tmp_path, port):
        async with AsyncExitStack() as stack:
            a = await stack.enter_async_context(http_client(url, mode=mode))
            b = await stack.enter_async_context(http_client(url, mode=mode))
            assert a.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            assert (await a.call_tool("echo", {"text": f"key={SECRET}"})).content[0].text == f"key={SECRET}"
            cut = (await a.call_tool("big", {"lines": 3_000})).content[0].text
            own = output_id(cut)
            assert await read_whole(a, own) == lines_text(3_000)
            await asyncio.sleep(0)  # the calls are recorded a moment after their answers
            found = (await b.call_tool("search_history", {"pattern": SECRET})).content[0].text
            assert SECRET not in found
            unknown = await unknown_reads_as(b, UNKNOWN)
            assert "no output with id" in unknown
            for other in (served, hooked):
                assert await unknown_reads_as(a, other) == unknown
                assert await unknown_reads_as(b, other) == unknown
            if mode == "legacy":  # each handshake-era client is a session of its own
                assert await unknown_reads_as(b, own) == unknown
                mine = (await a.call_tool("search_history", {"pattern": SECRET})).content[0].text
                assert SECRET in mine
            else:  # sessionless requests have no session to search: said so, never another's calls
                assert "session" in found and "initialize" in found, found
    from test_proxy import _sessions

    proxied = [s for s in _sessions(tmp_path) if (s.get("title") or "").startswith("proxy: ")]
    assert proxied and all(s["id"].startswith("proxy_") for s in proxied), proxied


async def test_tenants_of_a_proxy_see_only_their_own(tmp_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with listening(proxy_argv(port), tmp_path, port, CONTEXTFOLD_TOKENS=f"alice={ALICE};bob={BOB}"):
        for mode in ("legacy", "auto"):
            async with AsyncExitStack() as stack:
                a = await stack.enter_async_context(http_client(url, ALICE, mode=mode))
                b = await stack.enter_async_context(http_client(url, BOB, mode=mode))
                await a.call_tool("echo", {"text": f"{mode} key={SECRET}"})
                own = output_id((await a.call_tool("big", {"lines": 3_000})).content[0].text)
                assert await read_whole(a, own) == lines_text(3_000)
                unknown = await unknown_reads_as(b, UNKNOWN)
                assert await unknown_reads_as(b, own) == unknown
                assert SECRET not in (await b.call_tool("search_history", {"pattern": SECRET})).content[0].text
                # A tenant is a client the proxy can tell apart: its sessionless calls are its own to search.
                mine = (await a.call_tool("search_history", {"pattern": f"{mode} key"})).content[0].text
                assert SECRET in mine, mine

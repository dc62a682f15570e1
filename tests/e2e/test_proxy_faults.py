"""Faults of the server behind `contextfold proxy`: it exits, hangs, writes malformed JSON-RPC, or
answers with more than the proxy accepts. The client must get a clear error for the request
concerned, the proxy must keep running (its own tools keep working) or exit cleanly, and nothing
may be left half-written in the data home.

The upstream is tests/proxy_faulty.py, a server written in raw JSON-RPC lines; the client here
speaks raw lines too, so every byte the proxy writes is checked and its process id is known.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _proxy import FAULTY, RawClient, env, proxy_command

pytestmark = pytest.mark.anyio


def faulty(*args: str) -> list[str]:
    return [sys.executable, str(FAULTY), *args]


async def start(home: Path, *upstream: str, options: tuple[str, ...] = ()) -> RawClient:
    client = await RawClient.start(proxy_command(*upstream, options=options), env(home))
    init = json.loads(await client.handshake())
    assert init["result"]["serverInfo"]["name"] == "faulty", init
    return client


async def call(
    client: RawClient, name: str, arguments: dict[str, Any] | None = None, timeout: float = 60
) -> dict[str, Any]:
    line = await client.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout=timeout)
    return json.loads(line)


def error_of(answer: dict[str, Any]) -> str:
    assert "error" in answer and "result" not in answer, answer
    assert answer["error"]["code"] == -32000, answer
    return answer["error"]["message"]


def assert_home_whole(home: Path) -> None:
    """The database is sound and every file in the spill store is one an output row points at."""
    database = home / "contextfold.db"
    if not database.exists():
        return
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "gc", "--dry-run", "--json"],
        env=env(home),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files_removed"] == 0, done.stdout


async def test_an_upstream_that_exits_mid_call_gets_a_clear_error_and_the_proxy_keeps_answering(tmp_path):
    client = await start(tmp_path, *faulty())
    try:
        big = await call(client, "huge", {"mb": 0.3})  # stored: something for read_output afterwards
        preview = big["result"]["content"][0]["text"]
        stored = preview.split("Full output saved as ")[1].split(" ")[0]
        message = error_of(await call(client, "exit"))
        assert "exited with code 3" in message and "fatal: the database connection was lost" in message
        assert "before it answered tools/call exit" in message
        after = error_of(await call(client, "echo", {"text": "hi"}))
        assert "exited with code 3" in after and "tools/call was not sent" in after
        # The proxy's own tools still work: what was stored can still be read.
        read = await call(client, "read_output", {"id": stored, "offset": 2, "limit": 1})
        assert read["result"]["content"][0]["text"].endswith("2\t0123456789abcdef" * 1 + "0123456789abcdef" * 3)
        history = await call(client, "search_history", {"pattern": "exited"})
        assert "exited with code 3" in history["result"]["content"][0]["text"]
    finally:
        assert await client.close() == 0
    assert_home_whole(tmp_path)


async def test_an_upstream_that_hangs_times_out_and_the_next_call_works(tmp_path):
    client = await start(tmp_path, *faulty(), options=("--timeout", "1"))
    try:
        message = error_of(await call(client, "hang"))
        assert "did not answer tools/call hang within 1 s (proxy_timeout_seconds)" in message
        assert (
            json.loads(await client.request("tools/call", {"name": "echo", "arguments": {"text": "ok"}}))["result"][
                "content"
            ][0]["text"]
            == "ok"
        )
    finally:
        assert await client.close() == 0


async def test_an_upstream_that_never_answers_the_handshake_times_out(tmp_path):
    client = await RawClient.start(proxy_command(*faulty("--hang-at-start"), options=("--timeout", "1")), env(tmp_path))
    try:
        answer = json.loads(
            await client.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            )
        )
        assert "did not answer initialize within 1 s" in error_of(answer)
    finally:
        assert await client.close() == 0


async def test_malformed_json_rpc_from_the_upstream_is_dropped_or_named(tmp_path):
    client = await start(tmp_path, *faulty())
    try:
        assert "with neither a result nor an error" in error_of(await call(client, "garbage"))
        assert (await call(client, "junk"))["result"]["content"][0]["text"] == "fine"
        assert client.notifications == []  # neither stray line reached the client
    finally:
        assert await client.close() == 0


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
async def test_a_result_over_the_limit_is_refused_without_reading_it_into_memory(tmp_path):
    client = await start(tmp_path, *faulty())
    try:
        await call(client, "huge", {"mb": 0.3})  # the tokenizer and the store are loaded: the baseline
        baseline = peak_rss_mb(client.process.pid)
        message = error_of(await call(client, "huge", {"mb": 100}, timeout=120))
        assert "answer to tools/call huge is 100,0" in message and "over max_message_bytes (16,777,216)" in message
        # What is kept of a line is bounded by the limit (16 MiB, plus the buffer's growth), not
        # by the line: the rest is read and dropped a block at a time.
        grown = peak_rss_mb(client.process.pid) - baseline
        assert grown < 16 * 1.5 + 8, f"the proxy's peak memory grew by {grown:.0f} MB for a refused 100 MB answer"
        assert (await call(client, "echo", {"text": "after"}))["result"]["content"][0]["text"] == "after"
    finally:
        assert await client.close() == 0
    assert_home_whole(tmp_path)


async def test_an_upstream_that_cannot_start_is_named_in_the_first_answer(tmp_path):
    client = await RawClient.start(proxy_command("no-such-mcp-server-program", "--flag"), env(tmp_path))
    try:
        answer = json.loads(
            await client.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            )
        )
        message = error_of(answer)
        assert "'no-such-mcp-server-program' was not found on PATH" in message and "initialize was not sent" in message
    finally:
        assert await client.close() == 0


async def test_sigterm_stops_the_proxy_and_its_upstream_cleanly(tmp_path):
    log = tmp_path / "proxy.log"
    with log.open("wb") as stderr:
        client = await RawClient.start(proxy_command(*faulty()), env(tmp_path), stderr=stderr)
    assert json.loads(await client.handshake())["result"]["serverInfo"]["name"] == "faulty"
    await call(client, "huge", {"mb": 0.3})
    await call(client, "echo", {"text": "recorded before the end"})
    children = subprocess.run(["pgrep", "-P", str(client.process.pid)], capture_output=True, text=True).stdout.split()
    assert children, "the upstream runs as the proxy's child"
    client.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(client.process.wait(), 20) == 0
    for child in children:
        assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()
    assert_home_whole(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "sessions", "--json"], env=env(tmp_path), capture_output=True, text=True
    )
    sessions = json.loads(done.stdout)
    sessions = sessions if isinstance(sessions, list) else sessions["sessions"]
    # Both calls were recorded before it stopped (a call and its result are one).
    assert [s["messages"] for s in sessions] == [2], (sessions, log.read_text("utf-8", "replace")[-3000:])


async def test_an_upstream_without_tools_still_gets_the_added_ones(tmp_path):
    client = await RawClient.start(proxy_command(*faulty("--no-tools")), env(tmp_path))
    try:
        init = json.loads(await client.handshake())["result"]
        assert init["capabilities"] == {"resources": {}, "tools": {}}
        listed = json.loads(await client.request("tools/list", {}))["result"]["tools"]
        assert [tool["name"] for tool in listed] == ["read_output", "search_history"]
        missing = await call(client, "read_output", {"id": "out_nope"})
        assert missing["result"]["isError"] is True
    finally:
        assert await client.close() == 0


async def test_answers_to_ids_not_pending_never_reach_the_client(tmp_path):
    """Issue 26: a late answer (after the timeout), a second answer and an answer to a made-up id
    went to the client raw, unguarded (a 1 MB late result whole). They are dropped."""
    client = await start(tmp_path, *faulty(), options=("--timeout", "1"))
    try:
        late_id = client.next_id + 1
        message = error_of(await call(client, "late", {"seconds": 2.5, "mb": 1}))
        assert "did not answer tools/call late within 1 s" in message
        answer = await call(client, "stray")
        assert answer["result"]["content"][0]["text"] == "stray"
        await asyncio.sleep(2.5)  # the late answer has come by now
        pong = json.loads(await client.request("ping"))
        assert pong["result"] == {}
        strays = [json.loads(line) for line in client.notifications]
        assert not [m for m in strays if "result" in m or "error" in m], [str(m)[:200] for m in strays]
        assert late_id not in [m.get("id") for m in strays]
    finally:
        assert await client.close() == 0


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie awaiting its reaping counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _sdk_close(process: asyncio.subprocess.Process) -> float:
    """The MCP TypeScript SDK's StdioClientTransport.close(): stdin closed, 2 s, SIGTERM, 2 s, SIGKILL."""
    started = time.monotonic()
    assert process.stdin is not None
    process.stdin.close()
    for then in (signal.SIGTERM, signal.SIGKILL):
        try:
            await asyncio.wait_for(process.wait(), 2)
            break
        except TimeoutError:
            process.send_signal(then)
    await process.wait()
    return time.monotonic() - started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("stubborn", [("--ignore-eof",), ("--ignore-eof", "--ignore-sigterm")])
async def test_no_upstream_process_outlives_a_client_disconnect(tmp_path, stubborn):
    """Issue 26: with the SDK's shutdown sequence the proxy waited 2.0 s after closing the upstream's
    stdin, exactly the client's grace; the client's SIGTERM cut that wait short and the upstream
    was left running for good (PPID 1). Now the upstream, and what it started, is gone with the proxy."""
    pids = tmp_path / "pids"
    client = await start(tmp_path, *faulty("--pid-file", str(pids), *stubborn))
    try:
        assert (await call(client, "echo", {"text": "hi"}))["result"]["content"][0]["text"] == "hi"
        upstream, child = map(int, pids.read_text().split())
        assert _alive(upstream) and _alive(child)
    finally:
        took = await _sdk_close(client.process)
    deadline = time.monotonic() + 3
    while (_alive(upstream) or _alive(child)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    left = [pid for pid in (upstream, child) if _alive(pid)]
    for pid in left:  # not to leave them behind for the next tests
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after the proxy ended ({took:.1f} s): {left}"
    assert took < 4, took  # never down to the SIGKILL


async def test_an_answer_that_cannot_be_parsed_is_answered_at_once(tmp_path):
    """Issue 26: an answer in invalid UTF-8, or nested 5,000 deep, was dropped and the client waited
    proxy_timeout_seconds. Invalid UTF-8 is read with replacement characters; the too-deep answer
    becomes an error for its request, at once."""
    client = await start(tmp_path, *faulty(), options=("--timeout", "60"))
    try:
        latin = await call(client, "unreadable", {"how": "utf8"}, timeout=10)
        assert latin["result"]["content"][0]["text"] == "caf\ufffd cr\ufffdme"
        message = error_of(await call(client, "unreadable", {"how": "deep"}, timeout=10))
        assert "answer to tools/call unreadable could not be read" in message and "not JSON" in message
        assert (await call(client, "echo", {"text": "ok"}))["result"]["content"][0]["text"] == "ok"
    finally:
        assert await client.close() == 0

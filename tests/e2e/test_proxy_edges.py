"""Issue 26, item 19: `contextfold proxy` at its edges, over real proxy processes.

Its stdin at its end from the start (`< /dev/null`, a file, closed), a `--config` server that could
not start, the proxy's exit however the client leaves (no `RuntimeError: Event loop is closed`, no
hang), and a structured result nested far too deep. The upstream is tests/proxy_faulty.py; stderr
goes to a file, so what the proxy says there is checked whole.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _proxy import FAULTY, RawClient, env, proxy_command

pytestmark = pytest.mark.anyio

INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def faulty(*args: str) -> list[str]:
    return [sys.executable, str(FAULTY), *args]


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie awaiting its reaping counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_gone(pids: Path) -> None:
    """The upstream whose pids `--pid-file` wrote, and the child it started, no longer run (when it
    was killed before it wrote them, neither ever ran)."""
    if not pids.exists() or not pids.read_text().strip():
        return
    started = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 3
    while any(map(_alive, started)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in started if _alive(pid)]
    for pid in left:  # not to leave them behind for the next tests
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after the proxy ended: {left}"


async def spawn(home: Path, argv: list[str], log: Path) -> RawClient:
    """A proxy process with its stderr in `log` (a file never fills up and blocks it, as a pipe can)."""
    with open(log, "wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env(home),
            limit=1 << 26,
        )  # fmt: skip
    return RawClient(process)


async def call(client: RawClient, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return json.loads(await client.request("tools/call", {"name": name, "arguments": arguments or {}}))


def error_of(answer: dict[str, Any]) -> str:
    assert "error" in answer and "result" not in answer, str(answer)[:500]
    return str(answer["error"]["message"])


def untroubled(text: str) -> bool:
    return not any(word in text for word in ("Traceback", "Error", "Exception", "Event loop is closed"))


# -- (a) stdin at its end from the start ----------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("stdin", ["/dev/null", "a file", "closed"])
def test_a_proxy_whose_stdin_is_at_its_end_exits_0_and_stops_its_upstream(tmp_path, stdin):
    """Issue 26: `proxy -- CMD < /dev/null` printed an asyncio PermissionError traceback (epoll
    refuses /dev/null) and hung until killed; with stdin closed it died of an AttributeError. The
    end of stdin is the client gone: the upstream (here one that ignores EOF) is stopped, exit 0."""
    pids = tmp_path / "pids"
    argv = proxy_command(*faulty("--pid-file", str(pids), "--ignore-eof"))
    source: Any = subprocess.DEVNULL
    if stdin == "a file":
        requests = tmp_path / "requests.jsonl"
        requests.write_text(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}) + "\n"
        )
        source = open(requests, "rb")  # noqa: SIM115 (closed below)
    elif stdin == "closed":
        argv = ["sh", "-c", 'exec "$@" <&-', "sh", *argv]
    try:
        done = subprocess.run(argv, stdin=source, capture_output=True, env=env(tmp_path), timeout=30)
    finally:
        if stdin == "a file":
            source.close()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert done.stderr == b"", done.stderr.decode(errors="replace")[-3000:]
    assert_gone(pids)


# -- (b) a --config server that could not start -----------------------------------------------------------


async def test_a_config_server_that_failed_to_start_is_named_with_why_in_its_calls_errors(tmp_path):
    """Issue 26: calling a tool of a `--config` server that had not started said only "no tool named
    'ghost__anything'" (the reason was on stderr alone). Now the call's error names the server and
    why, and so do the handshake's instructions; the servers that did start work as before."""
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {
        "alpha": {"command": sys.executable, "args": [str(FAULTY)]},
        "ghost": {"command": "no-such-mcp-server-program", "args": ["--flag"]},
        "crash": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('boom: no API key')"]},
    }}))  # fmt: skip
    client = await spawn(tmp_path, [sys.executable, "-m", "contextfold", "proxy", "--config", str(servers)],
                         tmp_path / "stderr.log")  # fmt: skip
    try:
        instructions = json.loads(await client.handshake())["result"]["instructions"]
        assert (
            "server 'ghost' failed to start" in instructions
            and "'no-such-mcp-server-program' was not found" in instructions
        )
        assert "server 'crash' failed to start" in instructions and "boom: no API key" in instructions
        names = [t["name"] for t in json.loads(await client.request("tools/list", {}))["result"]["tools"]]
        assert "alpha__echo" in names and not [n for n in names if n.startswith(("ghost__", "crash__"))]
        ghost = error_of(await call(client, "ghost__anything"))
        assert ghost.startswith("server 'ghost' failed to start: ") and ghost.endswith("; its tools are unavailable")
        assert "'no-such-mcp-server-program' was not found on PATH" in ghost and '"command"' in ghost
        assert "\n" not in ghost
        crash = error_of(await call(client, "crash__x"))
        assert crash.startswith("server 'crash' failed to start: ") and "exited with code 1" in crash
        assert "boom: no API key" in crash
        prompt = error_of(json.loads(await client.request("prompts/get", {"name": "ghost__p"})))
        assert prompt.startswith("server 'ghost' failed to start: ") and prompt.endswith("its prompts are unavailable")
        assert "no tool named 'alpha__nope'" in error_of(await call(client, "alpha__nope"))  # a live server's typo
        assert (await call(client, "alpha__echo", {"text": "hi"}))["result"]["content"][0]["text"] == "hi"
    finally:
        assert await client.close() == 0


# -- (c) no exit prints "Event loop is closed", none hangs ----------------------------------------------


async def _leave_while_a_big_answer_streams(home: Path, log: Path) -> tuple[int, str]:
    client = await spawn(home, proxy_command(*faulty()), log)
    await client.handshake()
    await client.send(
        {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "huge", "arguments": {"mb": 5}}}
    )
    return await client.close(), log.read_text(errors="replace")


async def _close_stdin_then_sigterm(home: Path, log: Path) -> tuple[int, str]:
    """The MCP SDK's shutdown (stdin closed, then SIGTERM), the SIGTERM landing while the proxy is
    still stopping an upstream that ignores EOF, after a call that opened the store."""
    client = await spawn(home, proxy_command(*faulty("--ignore-eof")), log)
    await client.handshake()
    assert "Full output saved as" in (await call(client, "huge", {"mb": 0.3}))["result"]["content"][0]["text"]
    assert client.process.stdin is not None
    client.process.stdin.close()
    await asyncio.sleep(0.2)  # within STOP_GRACE: the proxy is waiting for its upstream to go
    client.process.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(client.process.wait(), 20)
    except TimeoutError:
        client.process.kill()
        await client.process.wait()
        code = -999  # hung: the store's thread kept it alive
    return code, log.read_text(errors="replace")


@pytest.mark.parametrize(
    "leave,times",
    [(_leave_while_a_big_answer_streams, 6), (_close_stdin_then_sigterm, 3)],
    ids=["client-leaves-mid-answer", "stdin-closed-then-sigterm"],
)
async def test_short_proxy_lifetimes_end_with_exit_0_and_nothing_on_stderr(tmp_path, leave, times):
    """Issue 26: a proxy exit sometimes printed `RuntimeError: Event loop is closed`: an upstream
    killed mid-answer left its stdout unread, and its transport was finalised after the loop had
    closed (every time when the client left while a 5 MB answer streamed in). And a SIGTERM landing
    during the cleanup after stdin closed cut it short: the store's connection stayed open and its
    thread kept the process alive after its work was done, until SIGKILL (every time)."""
    for run in range(times):
        code, stderr = await leave(tmp_path, tmp_path / f"stderr-{run}.log")
        assert code == 0 and untroubled(stderr), f"run {run}: exit {code}\n{stderr[-3000:]}"


# -- (d) a structured result nested too deep --------------------------------------------------------------


async def test_a_structured_result_nested_too_deep_gets_a_one_line_error_and_the_proxy_goes_on(tmp_path):
    """Issue 26: a `structuredContent` nested 900 deep (with a text over the limits, so the guard
    works on it) gave a 3,000-line RecursionError on stderr and a vague internal error. Over the
    house's 100 levels (MAX_DEPTH) it is a one-line error for that request; the proxy keeps
    answering. A small one is passed on as received, whatever its depth, as it costs nothing."""
    log = tmp_path / "stderr.log"
    client = await spawn(tmp_path, proxy_command(*faulty()), log)
    try:
        await client.handshake()
        for depth in (900, 101):
            message = error_of(await call(client, "nested", {"depth": depth, "lines": 30_000}))
            assert message == (
                "contextfold proxy did not pass on the answer to tools/call nested: its structuredContent nests "
                "more than 100 levels deep, over the proxy's bound (MAX_DEPTH); ask for a flatter result"
            )
        within = (await call(client, "nested", {"depth": 100, "lines": 30_000}))["result"]
        assert "Full output saved as" in within["content"][0]["text"]
        small = (await call(client, "nested", {"depth": 900, "lines": 0}))["result"]["structuredContent"]
        assert json.dumps(small).count("[") == 899
        assert (await call(client, "echo", {"text": "still here"}))["result"]["content"][0]["text"] == "still here"
    finally:
        assert await client.close() == 0
    stderr = log.read_text(errors="replace")
    assert untroubled(stderr) and len(stderr.splitlines()) <= 2, stderr[-3000:]


def _piped(tmp_path: Path, requests: list[dict[str, Any]], **extra: str) -> dict[Any, dict[str, Any]]:
    """`contextfold proxy -- upstream < requests.jsonl`: every answer it wrote, by id."""
    from _proxy import python_upstream

    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(
        proxy_command(*python_upstream()), input=lines, capture_output=True, text=True, env=env(tmp_path, **extra),
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return {answer.get("id"): answer for answer in map(json.loads, done.stdout.splitlines()) if "id" in answer}


PIPED = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}},
    {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"name": "search_history", "arguments": {"pattern": "x"}},
    },
]


def test_requests_piped_in_are_all_answered_after_the_input_ends(tmp_path):
    """The input ends right after the last request: the proxy still writes every answer it owes
    (it used to stop at once, and wrote nothing at all)."""
    answers = _piped(tmp_path, PIPED)
    assert sorted(answers) == [1, 2, 3, 4]
    assert all("result" in a for a in answers.values()), answers
    assert answers[3]["result"]["content"][0]["text"] == "hi"


def test_answers_still_owed_past_the_drain_are_errors_naming_the_setting(tmp_path):
    answers = _piped(tmp_path, [*PIPED[:2], PIPED[2]], CONTEXTFOLD_PROXY_DRAIN_SECONDS="0")
    assert sorted(answers) == [1, 2]
    assert "proxy_drain_seconds" in answers[2]["error"]["message"], answers[2]

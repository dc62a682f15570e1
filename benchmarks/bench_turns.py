"""A long coding-agent loop over MCP stdio: the cost of each call per turn, beside its floor.

Each turn appends the agent's next step (an assistant message with its tool calls and their
results, or a user instruction), asks `status`, prunes on `soft`, compacts (extractive) on
`hard`, and reads the whole view with `get_context` — as a harness does on claude-sonnet-4-5
(200k window). The floor of a `get_context` is what shipping the whole view over a pipe costs at least:
encoding its messages to JSON once and decoding them once, timed in this process on each answer.

Three servers run the same loop, side by side:
- *before*: tool results as the MCP SDK builds them (an indented JSON copy of every result in the
  text content beside the structured one) and no frozen heap — contextfold before issue 15;
- *answer once*: structured content plus one line of text;
- *answer once + frozen heap*: the default server (`gc.freeze()` once it has loaded);
- *the same, get_context(since=version)*: the client passes back the version it holds and gets
  only the messages after it (all of them when the prefix changed: a prune, a compaction).
The first two are made by switching the change off in the server process before it starts.
Full (generation 2) collections in the server are timed with `gc.callbacks`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import ms, options, report
from _sessions import synthetic_session

MODEL = "claude-sonnet-4-5"

_SERVER = """
import gc, json, os, sys, time, atexit
pauses, started = [], [0.0]
def _timed(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        pauses.append(time.perf_counter() - started[0])
gc.callbacks.append(_timed)
import contextfold.mcpserver.tools as server
if os.environ.get("BENCH_NO_FREEZE"):
    import contextfold.cli.dispatch as cli
    cli._started = True  # the command line's own start-up freeze, off too
    server._heap_settled = True
if os.environ.get("BENCH_SDK_TEXT"):
    server._answered_once = lambda fn: fn
atexit.register(lambda: open(os.environ["BENCH_PAUSES"], "w").write(json.dumps(pauses)))
sys.argv = ["contextfold", "serve"]
from contextfold.cli.dispatch import main
main()
"""

ARMS: dict[str, tuple[dict[str, str], bool]] = {
    "before (SDK text copy, no freeze)": ({"BENCH_NO_FREEZE": "1", "BENCH_SDK_TEXT": "1"}, False),
    "answer once": ({"BENCH_NO_FREEZE": "1"}, False),
    "answer once + frozen heap": ({}, False),
    "the same, get_context(since=version)": ({}, True),
}
"""Server environment, and whether the client passes back the version it holds."""


class Stdio:
    """A server spoken to in raw JSON-RPC lines, so the bytes of each answer are known."""

    def __init__(self, home: Path, extra_env: dict[str, str], pauses: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "BENCH_"))}
        env |= {"CONTEXTFOLD_HOME": str(home), "BENCH_PAUSES": str(pauses), **extra_env}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self.next_id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"], len(line)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int, float]:
        start = time.perf_counter()
        result, size = self.request("tools/call", {"name": name, "arguments": arguments})
        seconds = time.perf_counter() - start
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result['content'][0]['text'][:300]}")
        return result["structuredContent"], size, seconds

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The messages in the batches an agent appends: a user message alone, an assistant step
    with its tool results."""
    turns: list[list[dict[str, Any]]] = []
    for message in messages:
        if message["role"] == "tool" and turns:
            turns[-1].append(message)
        else:
            turns.append([message])
    return turns


def _loop(arm: str, env: dict[str, str], since: bool, turns: list[list[dict[str, Any]]]) -> dict[str, Any]:
    times: dict[str, list[float]] = {"append": [], "status": [], "get_context": [], "prune": [], "compact": []}
    floors: list[float] = []
    answer_bytes = messages_bytes = 0
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as tmp:
        pauses_file = Path(tmp) / "pauses.json"
        server = Stdio(Path(tmp) / "home", env, pauses_file)
        wall = time.perf_counter()
        try:
            server.call("session_open", {"session_id": "loop", "model": MODEL})
            held: list[dict[str, Any]] = []
            version: str | None = None
            for batch in turns:
                times["append"].append(server.call("append", {"session_id": "loop", "messages": batch})[2])
                status, _, seconds = server.call("status", {"session_id": "loop"})
                times["status"].append(seconds)
                if status["state"] in ("hard", "overflow"):
                    times["compact"].append(
                        server.call("compact", {"session_id": "loop", "summarizer": "extractive"})[2]
                    )
                elif status["state"] == "soft":
                    times["prune"].append(server.call("prune", {"session_id": "loop"})[2])
                arguments = {"session_id": "loop", **({"since": version} if since and version else {})}
                context, size, seconds = server.call("get_context", arguments)
                times["get_context"].append(seconds)
                # The whole view the caller now holds: what it kept, then what came.
                count = int(context["version"].partition(".")[0])
                held = held[: count - len(context["messages"])] + context["messages"]
                version = context["version"]
                start = time.perf_counter()
                encoded = json.dumps(held)
                json.loads(encoded)
                floors.append(time.perf_counter() - start)
                answer_bytes += size
                messages_bytes += len(encoded)
        finally:
            server.close()
        wall = time.perf_counter() - wall
        pauses = json.loads(pauses_file.read_text()) if pauses_file.exists() else []
    return {
        "arm": arm,
        "times": times,
        "floors": floors,
        "answer_bytes": answer_bytes,
        "messages_bytes": messages_bytes,
        "pauses": pauses,
        "wall": wall,
    }


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _row(run: dict[str, Any]) -> dict[str, Any]:
    get = run["times"]["get_context"]
    floor = statistics.median(run["floors"])
    p50 = statistics.median(get)
    pauses = run["pauses"]
    total = sum(sum(v) for v in run["times"].values())
    return {
        "server": run["arm"],
        "get_context p50 ms": ms(p50),
        "p95 ms": ms(_p(get, 0.95)),
        "p95/p50": f"{_p(get, 0.95) / p50:.2f}",
        "floor p50 ms": ms(floor),
        "p50/floor": f"{p50 / floor:.2f}",
        "answer/messages bytes": f"{run['answer_bytes'] / run['messages_bytes']:.2f}",
        "get_context share": f"{sum(get) / total:.0%}",
        "full collections": str(len(pauses)),
        "median pause ms": ms(statistics.median(pauses)) if pauses else "-",
        "pauses/wall": f"{sum(pauses) / run['wall']:.1%}",
    }


def main() -> None:
    opts = options(__doc__.splitlines()[0], repeat=1)
    count = 300 if opts.quick else 4_500
    turns = _turns(synthetic_session(count))
    runs = [_loop(arm, env, since, turns) for arm, (env, since) in ARMS.items()]
    rows = [_row(run) for run in runs]
    calls = {name: len(values) for name, values in runs[-1]["times"].items()}
    report(
        "turns",
        "A coding-agent loop over MCP stdio: per-call cost beside the floor",
        rows,
        opts,
        notes=[
            f"{len(turns):,} turns ({count:,} messages, seeded), {MODEL}: per turn append, status, get_context "
            f"(openai); prune on soft, extractive compaction on hard. Calls in the last run: "
            + ", ".join(f"{n} {name}" for name, n in calls.items())
            + ".",
            "floor: json.dumps + json.loads of the whole view's messages, in the client (with since=version, "
            "the view it holds after the answer: what it kept plus what came). answer/messages bytes: the "
            "JSON-RPC answer lines over that view's JSON.",
            "Targets (issue 15): get_context p50 <= 3x the floor, p95 <= 2x its own p50, answer <= 1.3x the "
            "messages' bytes.",
        ],
        packages=("mcp",),
    )


if __name__ == "__main__":
    main()

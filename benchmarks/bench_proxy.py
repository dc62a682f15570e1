"""What `contextfold proxy` costs in front of a server, beside a direct connection, in one run.

- **Per call**: a client writes one JSON-RPC request at a time over a pipe and waits for its answer,
  to an upstream directly and to the same upstream through the proxy; the batches alternate so both
  arms see the same machine. Cases: a small tool result (passed on as the bytes received), a 20 KB
  result (under the limit, but counted to know it), and a 300 KB result (stored whole, a preview
  returned). Two upstreams: a minimal hand-written one (tests/proxy_faulty.py: its own cost is near
  zero, so the difference is the proxy's), and a server written with the MCP SDK
  (tests/proxy_upstream.py).
- **Start**: how long until the first `initialize` is answered.
- **Memory**: the proxy's peak resident memory while an upstream answers with 100 MB — refused at
  `max_message_bytes` (16 MiB, the default), and accepted and stored with the limit raised.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import ROOT, mib, ms, options, report

FAULTY = ROOT / "tests" / "proxy_faulty.py"
SDK_UPSTREAM = ROOT / "tests" / "proxy_upstream.py"
sys.path.insert(0, str(ROOT / "tests"))


class Raw:
    """A process spoken to in raw JSON-RPC lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str]) -> Raw:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=env, limit=1 << 27,
        )  # fmt: skip
        return cls(process)

    async def request(self, method: str, params: dict[str, Any]) -> bytes:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        self.process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode() + b"\n"
        )
        await self.process.stdin.drain()
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if b'"method"' not in line[:200] and json.loads(line).get("id") == self.next_id:
                return line

    async def initialize(self) -> None:
        await self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 20)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


def proxy(*upstream: str, options: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "contextfold", "proxy", *options, "--", *upstream]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def per_call(
    env: dict[str, str], upstream: list[str], call: dict[str, Any], calls: int, rounds: int
) -> dict[str, Any]:
    """Latency of `call`, direct and through the proxy, in alternating batches."""
    arms = {"direct": await Raw.start(upstream, env), "proxy": await Raw.start(proxy(*upstream), env)}
    times: dict[str, list[float]] = {name: [] for name in arms}
    try:
        for client in arms.values():
            await client.initialize()
            for _ in range(5):  # warm: the tokenizer, the store, the first spill
                await client.request("tools/call", call)
        for _ in range(rounds):
            for name, client in arms.items():
                for _ in range(calls):
                    start = time.perf_counter()
                    await client.request("tools/call", call)
                    times[name].append(time.perf_counter() - start)
    finally:
        for client in arms.values():
            await client.close()
    direct, through = times["direct"], times["proxy"]
    return {
        "direct p50 ms": ms(statistics.median(direct)),
        "proxy p50 ms": ms(statistics.median(through)),
        "added p50 ms": ms(statistics.median(through) - statistics.median(direct)),
        "direct p90 ms": ms(percentile(direct, 0.9)),
        "proxy p90 ms": ms(percentile(through, 0.9)),
        "calls": len(through),
    }


async def start_time(env: dict[str, str], upstream: list[str], repeat: int) -> dict[str, Any]:
    found: dict[str, list[float]] = {"direct": [], "proxy": []}
    for _ in range(repeat):
        for name, argv in (("direct", upstream), ("proxy", proxy(*upstream))):
            start = time.perf_counter()
            client = await Raw.start(argv, env)
            await client.initialize()
            found[name].append(time.perf_counter() - start)
            await client.close()
    return {
        "direct ms": ms(statistics.median(found["direct"])),
        "proxy ms": ms(statistics.median(found["proxy"])),
        "added ms": ms(statistics.median(found["proxy"]) - statistics.median(found["direct"])),
    }


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise ValueError(field)


async def memory_for_huge(env: dict[str, str], mb: float, limit: int | None) -> dict[str, Any]:
    """The proxy's peak resident memory above its settled size while the upstream answers with `mb` MB."""
    extra = {} if limit is None else {"CONTEXTFOLD_MAX_MESSAGE_BYTES": str(limit)}
    client = await Raw.start(proxy(sys.executable, str(FAULTY)), {**env, **extra})
    try:
        await client.initialize()
        await client.request("tools/call", {"name": "huge", "arguments": {"mb": 0.3}})  # tokenizer and store loaded
        pid = client.process.pid
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak mark starts again from now
        except OSError:
            pass
        settled = _status_kib(pid, "VmRSS")
        start = time.perf_counter()
        answer = json.loads(await client.request("tools/call", {"name": "huge", "arguments": {"mb": mb}}))
        seconds = time.perf_counter() - start
        peak = _status_kib(pid, "VmHWM")
    finally:
        await client.close()
    outcome = "refused (error)" if "error" in answer else "stored, preview returned"
    return {
        "answer": f"{mb:g} MB",
        "max_message_bytes": mib(limit or 16 * 1024**2),
        "outcome": outcome,
        "proxy settled": mib(settled * 1024),
        "peak growth": mib(max(0, peak - settled) * 1024),
        "seconds": f"{seconds:.2f}",
    }


async def main() -> None:
    opts = options(__doc__.splitlines()[0], repeat=5)
    calls, rounds = (10, 1) if opts.quick else (100, opts.repeat)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "CONTEXTFOLD_HOME": home}
        raw_server = [sys.executable, str(FAULTY)]
        sdk_server = [sys.executable, str(SDK_UPSTREAM)]
        cases = [
            (
                "hand-written",
                raw_server,
                "small result (40 B)",
                {"name": "echo", "arguments": {"text": "hello, proxy " * 3}},
            ),
            (
                "hand-written",
                raw_server,
                "20 KB result, counted, passed",
                {"name": "echo", "arguments": {"text": ("lorem ipsum dolor sit amet " * 800)}},
            ),
            ("hand-written", raw_server, "300 KB result, stored", {"name": "huge", "arguments": {"mb": 0.3}}),
            (
                "MCP SDK (Python)",
                sdk_server,
                "small result",
                {"name": "echo", "arguments": {"text": "hello, proxy " * 3}},
            ),
            ("MCP SDK (Python)", sdk_server, "300 KB result, stored", {"name": "big", "arguments": {"lines": 6_000}}),
        ]
        if opts.quick:  # the hand-written upstream only: an SDK server takes seconds to start
            cases = cases[:3]
        rows = []
        for upstream_name, upstream, what, call in cases:
            row = await per_call(env, upstream, call, calls, rounds)
            rows.append({"upstream": upstream_name, "call": what, **row})
        report(
            "proxy",
            "contextfold proxy: latency per call over stdio, direct and through the proxy, side by side",
            rows,
            opts,
            notes=[
                f"{calls} sequential calls per arm per round, {rounds} rounds alternating direct and proxy; "
                "a client in this process writes a JSON-RPC line and waits for the answer.",
                "The proxy passes a result under the limits on as the bytes it received; one that may be over "
                "them is counted (20 KB); one over them is stored whole and answered with a preview (300 KB).",
            ],
        )
        starts = [{"upstream": "hand-written", **await start_time(env, raw_server, 1 if opts.quick else opts.repeat)}]
        if not opts.quick:
            starts.append({"upstream": "MCP SDK (Python)", **await start_time(env, sdk_server, 3)})
        report("proxy_start", "contextfold proxy: time to the first initialize answer", starts, opts)
        if sys.platform.startswith("linux"):
            mb = 5 if opts.quick else 100
            memory_rows = [await memory_for_huge(env, mb, None)]
            if not opts.quick:
                memory_rows.append(await memory_for_huge(env, mb, 128 * 1024**2))
            report(
                "proxy_memory",
                "contextfold proxy: its memory while an upstream answers with a huge result",
                memory_rows,
                opts,
                notes=[
                    "Peak growth is the proxy process's resident-set high-water mark above its size after a first "
                    "(small) stored result. Over max_message_bytes, the answer is read and dropped a block at a "
                    "time, keeping only its ends to find its id; under it, the line is parsed, stored and previewed."
                ],
            )


if __name__ == "__main__":
    asyncio.run(main())

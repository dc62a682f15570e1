"""Another tenant's `status` over HTTP while one tenant sends four 40 MB many-small-strings bodies at once.

One `contextfold serve --http` with bearer tokens for two tenants (default limits). Tenant A, in a
child process, sends waves of four `append` requests at once, each 43 MB of JSON holding
1,000,000 tiny messages (2 MB and 50,000 with `--quick`), each wave as soon as the last is
answered, the body built as bytes once and streamed from memory. Tenant B, through the MCP SDK's
client, calls `status` back to back: first with nothing else going on, then for as long as A's
waves last (ten; two with `--repeat 1`). Printed side by side: B's latencies (p50, p99, max), the
server's peak resident set (`VmHWM`, reset before each phase) and its CPU, with their ratios, and
what A's bodies got back.

The server refuses each of A's bodies for `max_batch_messages` from its first 256 KiB and drops
the rest as it arrives, and one past `http_body_bytes_per_tenant` (128 MiB in flight for one
tenant) with 429 (`mcpserver/bodies.py`). To see the same load on an older server, run the script
with `PYTHONPATH` naming that server's source and `--out` a scratch directory.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from _harness import Options, ms, options, ratio, report
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ALICE, BOB = "alice-bench-token-0123456789", "bob-bench-token-0123456789"
PROTOCOL = "2025-11-25"
TARGET_P99_MS = 100
TARGET_RSS_MB = 600
BODIES_AT_ONCE = 4


@dataclass(frozen=True)
class Sizes:
    messages: int  # per body: 42 bytes each
    calls: int  # B's status calls alone, per --repeat
    waves: int  # A's waves of four bodies, per --repeat


FULL = Sizes(messages=1_000_000, calls=200, waves=2)
QUICK = Sizes(messages=50_000, calls=40, waves=1)


# -- the server ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(home: Path) -> Iterator[tuple[str, int]]:
    """`contextfold serve --http` with two tenants' tokens on a free loopback port; its URL and pid."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    env |= {"CONTEXTFOLD_HOME": str(home), "CONTEXTFOLD_TOKENS": f"alice={ALICE};bob={BOB}"}
    log = open(home / "server.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "contextfold", "serve", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited: {(home / 'server.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not start listening within 60 s") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def reset_peak(pid: int) -> None:
    """Start the process's peak resident set (VmHWM) afresh from its current size."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_mb(pid: int) -> float:
    return _status_kib(pid, "VmHWM") * 1024 / 1_000_000


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- tenant A: four big bodies at once, again and again (a child process) -------------------------


def _messages(count: int) -> bytes:
    one = b'{"role":"user","content":"message %06d"},'
    return b"[" + b"".join(one % (i % 1_000_000) for i in range(count))[:-1] + b"]"


async def _initialize(http: httpx2.AsyncClient, url: str, token: str) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL,
    }
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    }
    answer = await http.post(url, json=hello, headers=headers)
    answer.raise_for_status()
    headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def _outcome(response: httpx2.Response) -> str:
    text = response.text
    if "max_batch_messages" in text:
        return "refused: max_batch_messages"
    for setting in ("http_body_bytes_per_tenant", "http_body_bytes_in_flight", "max_request_bytes"):
        if setting in text:
            return f"{response.status_code}: {setting}"
    return f"{response.status_code}: {text[:80]!r}"


def sender(url: str, messages: int, waves: int, ready: Any, sent: Any, done: Any) -> None:
    """Send `waves` waves of `BODIES_AT_ONCE` append bodies, counting them in `sent`; report what came back.

    At the lowest CPU priority: on one machine, the cores go to the server first, as they would
    with tenant A on another machine (what is measured is the server, not this process)."""
    os.nice(19)

    async def main() -> None:
        array = _messages(messages)
        tail = b',"method":"tools/call","params":{"name":"append","arguments":{"session_id":"a","messages":'
        tail += array + b"}}}"
        timeout = httpx2.Timeout(120.0, read=600.0)
        limits = httpx2.Limits(max_connections=BODIES_AT_ONCE * 2)
        async with httpx2.AsyncClient(timeout=timeout, limits=limits) as http:
            headers = await _initialize(http, url, ALICE)
            outcomes: Counter[str] = Counter()
            seconds: list[float] = []
            next_id = 1

            async def one(request_id: int) -> None:
                head = b'{"jsonrpc":"2.0","id":%d' % request_id

                async def pieces() -> AsyncIterator[bytes]:
                    yield head
                    view = memoryview(tail)
                    for at in range(0, len(tail), 1 << 20):
                        yield bytes(view[at : at + (1 << 20)])

                start = time.perf_counter()
                response = await http.post(
                    url, content=pieces(), headers={**headers, "Content-Length": str(len(head) + len(tail))}
                )
                seconds.append(time.perf_counter() - start)
                outcomes[_outcome(response)] += 1

            ready.set()
            for _ in range(waves):
                await asyncio.gather(*(one(next_id + i) for i in range(BODIES_AT_ONCE)))
                next_id += BODIES_AT_ONCE
                sent.value += 1
            done.put({"outcomes": dict(outcomes), "body_bytes": len(tail) + 12, "median": statistics.median(seconds)})

    asyncio.run(main())


# -- tenant B ------------------------------------------------------------------------------------------


@asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0, read=600.0)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def statuses(client: Client, calls: int = 0, until: Callable[[], bool] | None = None) -> list[float]:
    """`status` back to back: `calls` times, or until `until()` is true (at least once)."""
    latencies: list[float] = []
    while len(latencies) < calls or (until is not None and not (latencies and until())):
        start = time.perf_counter()
        result = await client.call_tool("status", {"session_id": "b"})
        latencies.append(time.perf_counter() - start)
        if result.is_error:
            raise RuntimeError(f"status failed: {result.content}")
    return latencies


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _row(case: str, latencies: list[float], peak: float, cpu: float, wall: float) -> dict[str, str]:
    return {
        "tenant B's status": case,
        "calls": f"{len(latencies):,}",
        "p50 ms": ms(statistics.median(latencies)),
        "p99 ms": ms(_p99(latencies)),
        "max ms": ms(max(latencies)),
        "server peak RSS MB": f"{peak:,.0f}",
        "server CPU": f"{cpu / wall:.0%}",
    }


async def measure(opts: Options) -> None:
    sizes = QUICK if opts.quick else FULL
    calls = sizes.calls * opts.repeat
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="bench-http-bodies-") as tmp, http_server(Path(tmp)) as (url, pid):
        async with mcp_client(url, BOB) as bob:
            await bob.call_tool("session_open", {"session_id": "b", "model": "gpt-4o"})
            await bob.call_tool(
                "append",
                {
                    "session_id": "b",
                    "messages": [
                        {"role": "user", "content": "Run the tests."},
                        {"role": "assistant", "content": "All 120 tests pass."},
                    ],
                },
            )
            await bob.call_tool("count_tokens", {"text": "warm", "model": "gpt-4o"})  # the tokenizers are built
            await statuses(bob, 20)  # warm up the connection and the server's code paths
            reset_peak(pid)
            cpu, start = cpu_seconds(pid), time.perf_counter()
            alone = await statuses(bob, calls)
            alone_peak = peak_mb(pid)
            alone_cpu, alone_wall = cpu_seconds(pid) - cpu, time.perf_counter() - start

            waves = sizes.waves * opts.repeat
            ready, sent_waves, done = ctx.Event(), ctx.Value("i", 0), ctx.Queue()
            child = ctx.Process(target=sender, args=(url, sizes.messages, waves, ready, sent_waves, done))
            child.start()
            try:
                await asyncio.to_thread(ready.wait, 300)
                reset_peak(pid)
                cpu, start = cpu_seconds(pid), time.perf_counter()
                loaded = await statuses(bob, until=lambda: sent_waves.value >= waves)
                loaded_cpu, loaded_wall = cpu_seconds(pid) - cpu, time.perf_counter() - start
                sent = await asyncio.to_thread(done.get, True, 600)
                loaded_peak = peak_mb(pid)
            finally:
                child.join(timeout=60)
                if child.is_alive():
                    child.kill()
    mb = sent["body_bytes"] / 1_000_000
    rows = [
        _row("alone", alone, alone_peak, alone_cpu, alone_wall),
        _row(
            f"while A sends {BODIES_AT_ONCE} × {mb:.0f} MB bodies at once", loaded, loaded_peak, loaded_cpu, loaded_wall
        ),
        {
            "tenant B's status": "ratio (loaded ÷ alone)",
            "calls": "",
            "p50 ms": ratio(statistics.median(loaded), statistics.median(alone)),
            "p99 ms": ratio(_p99(loaded), _p99(alone)),
            "max ms": ratio(max(loaded), max(alone)),
            "server peak RSS MB": ratio(loaded_peak, alone_peak),
            "server CPU": ratio(loaded_cpu / loaded_wall, alone_cpu / alone_wall),
        },
    ]
    p99 = _p99(loaded) * 1000
    outcomes = ", ".join(f"{count:,} {what}" for what, count in sorted(sent["outcomes"].items()))
    report(
        "http_bodies",
        "Another tenant's status over HTTP: alone vs while one tenant sends four 40 MB many-small-strings bodies",
        rows,
        opts,
        notes=[
            f"Tenant A (a child process, raw HTTP) sent {waves:,} waves of {BODIES_AT_ONCE} append requests "
            f"at once, each {mb:.1f} MB of JSON holding {sizes.messages:,} tiny messages; each was answered in "
            f"{sent['median']:.2f} s (median): {outcomes}.",
            "Tenant B calls status back to back through the MCP SDK's client; the server's peak resident set "
            "(VmHWM) is reset before each phase; server CPU is its share of one core during the phase. Client, "
            "sender and server share the machine's cores; the sender runs at nice 19, so that they go to the "
            "server first, as they would with tenant A on another machine.",
            f"Targets: B's p99 under {TARGET_P99_MS} ms ({p99:,.1f} ms: {'met' if p99 < TARGET_P99_MS else 'missed'}); "
            f"server under {TARGET_RSS_MB} MB ({loaded_peak:,.0f} MB: "
            f"{'met' if loaded_peak < TARGET_RSS_MB else 'missed'}).",
        ],
        packages=("mcp",),
    )


if __name__ == "__main__":
    opts = options(__doc__.splitlines()[0], repeat=5)
    asyncio.run(measure(opts))

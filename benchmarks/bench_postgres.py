"""Append throughput and get_context latency: SQLite and PostgreSQL, one replica and three.

Four deployments of `contextfold serve --http`, measured in one run on the same machine with the
same load, through real MCP clients (the mcp SDK over streamable HTTP, sessionless 2026-07-28):

- SQLite, one server (the default: one process, one file);
- SQLite, three servers on one data home (what several agent windows on one machine do);
- PostgreSQL, one replica (`--database postgresql://…`);
- PostgreSQL, three replicas on one database, each client's requests rotated over them (what a
  load balancer in front of a team's replicas does).

The load: `clients` clients at once, each with a session of its own, first append `batches`
batches of 10 messages (append throughput: messages acknowledged per second, all clients
together, and the latency of one append), then run `turns` agent turns, each an append of two
messages followed by `get_context` of the whole view (its latency, median and 95th percentile).
With three replicas a turn's get_context usually lands on another process than its append, so
its view cache must pick up a write another process made, from the database.

PostgreSQL comes from `CONTEXTFOLD_BENCH_DATABASE` (a URL to a server you run; each deployment
gets its own new database on it), or else a throwaway cluster is started with the machine's
initdb/pg_ctl as the tests do (tests/_postgres.py). Everything runs on this one machine: the
database, the servers and the clients share its cores, so three replicas measure the cost of
sharing state, not the capacity three machines would add.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from _harness import ROOT, Options, ms, options, report
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(ROOT / "tests"))
import _postgres  # noqa: E402  (the tests' throwaway cluster)
from _servers import Server, start_server  # noqa: E402


@dataclass(frozen=True)
class Sizes:
    clients: int
    batches: int
    turns: int


FULL = Sizes(clients=8, batches=40, turns=30)
QUICK = Sizes(clients=2, batches=3, turns=3)


def _batch(k: int, i: int, n: int = 10) -> list[dict[str, Any]]:
    out = []
    for j in range(0, n, 2):
        step = i * n + j
        out.append(
            {"role": "user", "content": f"[c{k} m{step}] Please update pkg/module_{step % 40}.py for step {step}."}
        )
        out.append(
            {"role": "assistant", "content": f"[c{k} m{step + 1}] Updated pkg/module_{step % 40}.py; the tests pass."}
        )
    return out


class _Rotate(httpx2.AsyncHTTPTransport):
    """Each request to the next server's port, as a round-robin load balancer would send it."""

    def __init__(self, ports: list[int], start: int) -> None:
        super().__init__()
        self.ports = ports
        self.turn = start

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(port=self.ports[self.turn % len(self.ports)])
        self.turn += 1
        return await super().handle_async_request(request)


@asynccontextmanager
async def _client(servers: list[Server], k: int) -> AsyncIterator[Client]:
    ports = [int(s.url.rsplit(":", 1)[1].split("/")[0]) for s in servers]
    async with httpx2.AsyncClient(transport=_Rotate(ports, k), timeout=httpx2.Timeout(60.0, read=300.0)) as http:
        async with Client(streamable_http_client(servers[0].url, http_client=http)) as client:
            yield client


async def _call(client: Client, name: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(name, args)
    if result.is_error:
        raise RuntimeError(f"{name}: {result.content[0].text}")
    return result


@dataclass
class Measured:
    append_seconds: float = 0.0
    messages: int = 0
    append_latencies: list[float] | None = None
    context_latencies: list[float] | None = None
    view_messages: int = 0


async def _load(servers: list[Server], sizes: Sizes) -> Measured:
    measured = Measured(append_latencies=[], context_latencies=[])

    async def appends(k: int, client: Client) -> None:
        for i in range(sizes.batches):
            start = time.perf_counter()
            await _call(client, "append", {"session_id": f"s{k}", "messages": _batch(k, i)})
            measured.append_latencies.append(time.perf_counter() - start)

    async def turns(k: int, client: Client) -> None:
        for t in range(sizes.turns):
            await _call(client, "append", {"session_id": f"s{k}", "messages": _batch(k, sizes.batches + t, 2)})
            start = time.perf_counter()
            result = await _call(client, "get_context", {"session_id": f"s{k}"})
            measured.context_latencies.append(time.perf_counter() - start)
            measured.view_messages = len(result.structured_content["messages"])

    async def one(k: int, phase: str, ready: asyncio.Event | None = None) -> None:
        async with _client(servers, k) as client:
            if phase == "open":
                await _call(client, "session_open", {"session_id": f"s{k}", "model": "gpt-4o"})
            elif phase == "append":
                await appends(k, client)
            else:
                await turns(k, client)

    await asyncio.gather(*(one(k, "open") for k in range(sizes.clients)))
    start = time.perf_counter()
    await asyncio.gather(*(one(k, "append") for k in range(sizes.clients)))
    measured.append_seconds = time.perf_counter() - start
    measured.messages = sizes.clients * sizes.batches * 10
    await asyncio.gather(*(one(k, "turns") for k in range(sizes.clients)))
    return measured


@contextmanager
def _servers(root: Path, count: int, args: tuple[str, ...]) -> Iterator[list[Server]]:
    with ExitStack() as stack:
        servers = []
        for i in range(count):
            server = start_server(root / f"home{i if args else 0}", *args)
            stack.callback(server.stop)
            servers.append(server)
        yield servers


@contextmanager
def _postgres_databases() -> Iterator[Any]:
    """A function returning the URL of a new database, on the given server or a throwaway cluster."""
    given = os.environ.get("CONTEXTFOLD_BENCH_DATABASE")
    if given:
        import psycopg

        made: list[str] = []

        def new_on_given() -> str:
            name = f"cf_bench_{os.getpid()}_{len(made)}"
            with psycopg.connect(given, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                conn.execute(f'CREATE DATABASE "{name}"')
            made.append(name)
            return given.rsplit("/", 1)[0] + "/" + name

        yield new_on_given
        return
    cluster = _postgres.start_cluster()
    try:
        yield lambda: _postgres.create_database(cluster)
    finally:
        cluster.stop()


def _row(deployment: str, runs: list[Measured]) -> dict[str, Any]:
    """The best of the runs (the machine is shared: the best run is the least disturbed)."""

    def p95(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]

    return {
        "deployment": deployment,
        "append msgs/s": f"{max(m.messages / m.append_seconds for m in runs):,.0f}",
        "append p50 ms": ms(min(statistics.median(m.append_latencies or [0.0]) for m in runs)),
        "get_context p50 ms": ms(min(statistics.median(m.context_latencies or [0.0]) for m in runs)),
        "get_context p95 ms": ms(min(p95(m.context_latencies or [0.0]) for m in runs)),
        "messages in view": f"{runs[-1].view_messages:,}",
    }


async def measure(opts: Options) -> None:
    sizes = QUICK if opts.quick else FULL
    names = ["SQLite, 1 server", "SQLite, 3 servers, one home", "PostgreSQL, 1 replica", "PostgreSQL, 3 replicas"]
    runs: dict[str, list[Measured]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="cf-bench-pg-") as tmp, _postgres_databases() as new_database:
        root = Path(tmp)
        for round_ in range(opts.repeat):
            # Each round a fresh home or database per deployment, in the other order than the last.
            for n, name in enumerate(names if round_ % 2 == 0 else reversed(names)):
                count = 3 if "3" in name else 1
                args: tuple[str, ...] = ()
                if name.startswith("PostgreSQL"):
                    args = ("--database", new_database(), *(("--stateless",) if count == 3 else ()))
                with _servers(root / f"r{round_}d{n}", count, args) as servers:
                    runs[name].append(await _load(servers, sizes))
                print(f"measured: {name} (round {round_ + 1})", file=sys.stderr, flush=True)
    rows = [_row(name, runs[name]) for name in names]
    report(
        "bench_postgres",
        "Append throughput and get_context latency, SQLite and PostgreSQL, 1 and 3 processes",
        rows,
        opts,
        notes=[
            f"{sizes.clients} clients at once, each its own session: {sizes.batches} appends of 10 messages each, "
            f"then {sizes.turns} turns of append(2) + get_context; 2026-07-28 protocol over loopback HTTP",
            "three servers: each client's requests rotate over them (round robin); on one machine, so they share "
            "its cores with the database and the clients",
            f"best of {opts.repeat} rounds, the deployments in alternating order (the machine is shared)",
        ],
        packages=("mcp", "psycopg", "psycopg-pool"),
    )


if __name__ == "__main__":
    opts = options(__doc__.splitlines()[0], repeat=3)
    asyncio.run(measure(opts))

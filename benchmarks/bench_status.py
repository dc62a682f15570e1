"""`status` and a one-message `append` against the length of a session's history: 1k, 10k, 100k stored.

A harness calls `status` and `append` every turn for the life of a session, so neither may cost
more as history piles up behind the view. Each session here is built the way an agent loop builds
one, through the product's own paths: batches of a coding-agent loop (user request, tool call,
tool result, reply) appended to a session with a small window (48k tokens, so compaction comes
round often), compacted whenever `append` reports `hard`. Each is measured at two points, with a
session of its own for each: right after a compaction (the view at its smallest), and once in
`soft`, the state in which `status` also works out whether a prune would pay, and so reads the
rows of the view. The timed runs of all sessions are interleaved, so a busy moment of the machine
falls on every size alike.

Three kinds of session, side by side at each size:
- usage: the provider's usage reported with every append; compacted with the extractive summary;
- control: the same loop with no usage ever reported;
- removal: usage reported, compacted with the `oldest` removal strategy, which hides messages
  rather than summarizing them: its whole history stays stored, most of it out of view.

Measured per call: `status` and a one-message `append` through the library (`ContextService`),
and the same two calls over MCP stdio to a real `contextfold serve` on the same data home. The
last table gives each kind's ratio of its largest session to its smallest: flat is ≤ ~1.5×.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import Options, ms, options, ratio, report
from bench_store import call, cycle, server_params
from mcp import Client

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

MODEL = "gpt-4o"
WINDOW = 48_000
"""The sessions' context window: gpt-4o keeps 16k of it for output, leaving 31,616 usable."""
BUILD_CYCLES = 25
"""Agent-loop cycles per build append: 100 wire messages, 75 stored."""
KINDS = ("usage", "control", "removal")
POINTS = ("compacted", "soft")


@dataclass(frozen=True)
class Sizes:
    stored: tuple[int, ...]
    status_calls: int  # calls per timed run
    append_calls: int
    stdio_status_calls: int
    stdio_append_calls: int


FULL = Sizes(
    stored=(1_000, 10_000, 100_000), status_calls=50, append_calls=10, stdio_status_calls=20, stdio_append_calls=5
)
QUICK = Sizes(stored=(300, 1_500), status_calls=5, append_calls=3, stdio_status_calls=3, stdio_append_calls=2)


def usage_for(counted: int) -> dict[str, Any]:
    """What a provider reports for a request carrying `counted` tokens of history: a little more
    (tools, formatting), most of it read from the prompt cache."""
    seen = counted + 400
    return {"input_tokens": seen // 10, "cache_read_input_tokens": seen - seen // 10, "output_tokens": 200}


class Builder:
    """Build one session through the service, as an agent loop would."""

    def __init__(self, service: ContextService, session_id: str, kind: str) -> None:
        self.service = service
        self.session_id = session_id
        self.kind = kind
        self.step = 0
        self.compactions = 0

    async def build(self, stored: int) -> float:
        """Append batches until `stored` messages are stored; returns the seconds it took."""
        await self.service.open_session(self.session_id, model=MODEL, settings={"context_window": WINDOW})
        start = time.perf_counter()
        count = 0
        while count < stored:
            cycles = min(BUILD_CYCLES, max(1, -(-(stored - count) // 3)))
            count = await self._append([m for _ in range(cycles) for m in self._cycle()])
        return time.perf_counter() - start

    async def settle(self, point: str) -> None:
        """Append single cycles until `point`: "compacted" (a compaction just ran: the view at its
        smallest, `ok` after a summary, `soft` already after a removal) or "soft"."""
        compactions = self.compactions
        for _ in range(2_000):
            if point == "compacted" and self.compactions > compactions:
                return
            if point == "soft" and (await self.service.status(self.session_id)).state == "soft":
                return
            await self._append(self._cycle())
        raise AssertionError(f"{self.session_id} did not reach {point}")

    def _cycle(self) -> list[dict[str, Any]]:
        self.step += 1
        return cycle(self.step)

    async def _append(self, messages: list[dict[str, Any]]) -> int:
        usage = None
        if self.kind != "control":
            usage = usage_for((await self.service.status(self.session_id)).tokens_counted)
        result = await self.service.append(self.session_id, messages, usage=usage)
        if result.status.state in ("hard", "overflow"):
            if self.kind == "removal":
                await self.service.compact(self.session_id, strategy="oldest")
            else:
                await self.service.compact(self.session_id, summarizer="extractive")
            self.compactions += 1
        return (await self.service.status(self.session_id)).message_count


def one_message(k: list[int]) -> list[dict[str, Any]]:
    k[0] += 1
    return [{"role": "user", "content": f"Note {k[0]}: keep going with the failing test."}]


class Probe:
    """One session's four measured calls, each timed one run at a time so that every session's
    runs can be interleaved: a busy moment of the machine then falls on all sizes alike."""

    def __init__(self, service: ContextService, client: Client, session_id: str, sizes: Sizes) -> None:
        k = [0]
        self.calls: dict[str, tuple[Callable[[], Awaitable[Any]], int]] = {
            "status": (lambda: service.status(session_id), sizes.status_calls),
            "append": (lambda: service.append(session_id, one_message(k)), sizes.append_calls),
            "stdio status": (lambda: call(client, "status", {"session_id": session_id}), sizes.stdio_status_calls),
            "stdio append": (
                lambda: call(client, "append", {"session_id": session_id, "messages": one_message(k)}),
                sizes.stdio_append_calls,
            ),
        }
        self.runs: dict[str, list[float]] = {name: [] for name in self.calls}

    async def run_once(self) -> None:
        for name, (fn, calls) in self.calls.items():
            gc.collect()
            start = time.perf_counter()
            for _ in range(calls):
                await fn()
            self.runs[name].append((time.perf_counter() - start) / calls)

    def medians(self) -> dict[str, float]:
        return {name: statistics.median(runs) for name, runs in self.runs.items()}


async def describe(service: ContextService, session_id: str) -> dict[str, Any]:
    status = await service.status(session_id)
    return {
        "state": status.state,
        "stored": status.message_count,
        "in view": len((await service.session_view(session_id))[1]),
    }


Key = tuple[str, str, int]  # (kind, point, target size)


def versus_control(found: dict[Key, dict[str, Any]], kind: str, point: str, stored: int) -> str:
    """This session's status over the control's at the same size and point, when both are in one state."""
    this, control = found[(kind, point, stored)], found[("control", point, stored)]
    if this["state"] != control["state"]:
        return f"n/a ({this['state']} vs {control['state']})"
    return ratio(this["status"], control["status"])


async def measure(opts: Options) -> None:
    gc.freeze()  # the imported libraries: long-lived, and rescanned by every gc.collect() in the harness
    sizes = QUICK if opts.quick else FULL
    found: dict[Key, dict[str, Any]] = {}
    probes: dict[Key, Probe] = {}
    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp:
        home = Path(tmp)
        settings = load_settings({"home": home}, environ={})
        async with await ContextService.open(settings) as service, Client(server_params(home)) as client:
            for stored in sizes.stored:
                for kind in KINDS:
                    for point in POINTS:  # a session of its own for each point, so all are timed together
                        session_id = f"{kind}-{point}-{stored}"
                        builder = Builder(service, session_id, kind)
                        seconds = await builder.build(stored)
                        await builder.settle(point)
                        found[(kind, point, stored)] = {
                            **await describe(service, session_id),
                            "build s": seconds,
                            "compactions": builder.compactions,
                        }
                        probes[(kind, point, stored)] = Probe(service, client, session_id, sizes)
                        print(f"built {session_id}", flush=True)
            for probe in probes.values():  # warm-up
                await probe.run_once()
                probe.runs = {name: [] for name in probe.calls}
            for _ in range(opts.repeat):
                for probe in probes.values():
                    await probe.run_once()
    for key, probe in probes.items():
        found[key].update(probe.medians())
    rows = [
        {
            "session": kind,
            "measured": point,
            "state": n["state"],
            "stored msgs": f"{n['stored']:,}",
            "in view": f"{n['in view']:,}",
            "compactions": n["compactions"],
            "status ms": ms(n["status"]),
            "append ms": ms(n["append"]),
            "stdio status ms": ms(n["stdio status"]),
            "stdio append ms": ms(n["stdio append"]),
        }
        for (kind, point, _stored), n in found.items()
    ]
    small, large = sizes.stored[0], sizes.stored[-1]

    def flat(kind: str, point: str, what: str) -> str:
        return ratio(found[(kind, point, large)][what], found[(kind, point, small)][what])

    ratios = [
        {
            "session": kind,
            "measured": point,
            "status": flat(kind, point, "status"),
            "append": flat(kind, point, "append"),
            "stdio status": flat(kind, point, "stdio status"),
            "stdio append": flat(kind, point, "stdio append"),
            f"status vs control at {large:,}": versus_control(found, kind, point, large),
        }
        for kind in KINDS
        for point in POINTS
    ]
    report(
        "status",
        "status and a one-message append against stored history (library and MCP stdio)",
        rows,
        opts,
        notes=[
            f"Sessions on {MODEL} with a {WINDOW:,}-token window, built by appending {BUILD_CYCLES} agent-loop "
            "cycles at a time (4 wire messages, 3 stored, each) and compacting on hard; measured right after a "
            "compaction (ok, or soft already after a removal) and again once in soft, where status also works out whether a prune would pay.",
            f"Per call, median of {opts.repeat} runs; a run is {sizes.status_calls} status calls or "
            f"{sizes.append_calls} appends (over stdio {sizes.stdio_status_calls} and {sizes.stdio_append_calls}); "
            "each point is a session of its own, and the runs of all sessions are interleaved.",
        ],
        packages=("mcp",),
    )
    report(
        "status_ratio",
        f"Per call at {large:,} stored messages over {small:,}, per kind (flat is about 1x)",
        ratios,
        opts,
        notes=[
            "'status vs control': the same size and point, with usage reported (or history hidden) against none "
            "(n/a when the two are in different states)."
        ],
        packages=("mcp",),
    )


if __name__ == "__main__":
    asyncio.run(measure(options(__doc__.splitlines()[0])))

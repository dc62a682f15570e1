"""The store and the server: append throughput, get_context on big sessions, and MCP overhead.

SPEC § 15 asks for append throughput into SQLite (through the library and over MCP stdio),
`get_context` latency at 10k and 100k messages, and the cost of MCP itself: a tool call round
trip over stdio against the same `ContextService` call in-process. Every number here goes
through the product's own paths: the library is `ContextService` on a SQLite file, and the
server is a real `contextfold serve` subprocess driven by the mcp SDK's `Client` over stdio.

Measured, in one run:
- append throughput: the same message stream appended one message per call and in batches of
  100, through the library and over stdio (median of a few runs, each into a fresh session);
- building a 10k- and a 100k-message session by batched append, then `get_context` of the
  whole session, of its first 100 messages (`limit=100`) and `status`, through the library;
- round trips: `status`, `count_tokens` and `get_context` of the 10k session, in-process
  against over stdio in both protocol eras (2026-07-28 and the 2025-11-25 handshake; `--quick`
  starts one server and measures 2026-07-28 only).

The messages are short and realistic: a user request, an assistant tool call, the tool's result
(a `tool` message, which completes the call rather than adding a stored message) and the
assistant's reply; every tenth result is a short test log. Four wire messages store three.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import Options, Timing, ms, options, ratio, report, timed_async
from mcp import Client, StdioServerParameters

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

BATCH = 100
BUILD_BATCH = 1_000
MODEL = "gpt-4o"


@dataclass(frozen=True)
class Sizes:
    appends: int  # wire messages per throughput run
    append_runs: int
    append_warmup: int
    sessions: tuple[int, ...]  # stored messages of the get_context sessions
    round_trips: int  # calls per timed run of a fast call (status, count_tokens)
    eras: tuple[tuple[str, str], ...]  # (Client mode, protocol version it must negotiate)


MODERN = ("auto", "2026-07-28")
LEGACY = ("legacy", "2025-11-25")
FULL = Sizes(
    appends=2_000, append_runs=3, append_warmup=1, sessions=(10_000, 100_000), round_trips=100, eras=(MODERN, LEGACY)
)
QUICK = Sizes(appends=100, append_runs=1, append_warmup=0, sessions=(200, 1_000), round_trips=10, eras=(MODERN,))

COUNT_TEXT = (
    "The build failed in tests/test_parser.py::test_nested_quotes with an AssertionError: the tokenizer "
    "returned three tokens where two were expected. I will read the parser's quote handling next."
)


# -- the messages ----------------------------------------------------------------------------------


def _test_log(i: int) -> str:
    rows = [f"tests/test_mod{i % 97}.py::test_case_{k} {'PASSED' if (i + k) % 7 else 'FAILED'}" for k in range(20)]
    return "\n".join([*rows, f"{sum(1 for r in rows if r.endswith('PASSED'))} passed in 0.{i % 10}4s"])


def cycle(i: int) -> list[dict[str, Any]]:
    """One step of an agent loop: four wire messages, three stored (the result completes the call)."""
    call_id = f"call_{i:06d}"
    arguments = json.dumps({"cmd": f"pytest tests/test_mod{i % 97}.py -q"})
    result = _test_log(i) if i % 10 == 0 else f"{i % 13} passed, {i % 3} failed in 0.{i % 10}s"
    return [
        {"role": "user", "content": f"Step {i}: check module {i % 97} and fix any failing test."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
        {"role": "assistant", "content": f"Module {i % 97}: {i % 3} failures left; next I read the fixture."},
    ]


def wire_messages(count: int) -> list[dict[str, Any]]:
    """`count` wire messages: whole cycles, then plain user/assistant messages."""
    messages = [m for i in range(count // 4) for m in cycle(i)]
    for k in range(count - len(messages)):
        messages.append({"role": "user" if k % 2 == 0 else "assistant", "content": f"Note {k}: carry on."})
    return messages


def stored_messages(stored: int) -> list[dict[str, Any]]:
    """Wire messages that store exactly `stored` messages (each cycle stores three)."""
    cycles, rest = divmod(stored, 3)
    messages = [m for i in range(cycles) for m in cycle(i)]
    messages += [{"role": "user" if k % 2 == 0 else "assistant", "content": f"Note {k}."} for k in range(rest)]
    return messages


def batches(messages: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(messages), size):
        yield messages[start : start + size]


# -- appending -------------------------------------------------------------------------------------

Append = Callable[[str, list[dict[str, Any]]], Awaitable[Any]]


def library_append(service: ContextService) -> Append:
    async def append(session_id: str, messages: list[dict[str, Any]]) -> Any:
        return await service.append(session_id, messages)

    return append


def mcp_append(client: Client) -> Append:
    async def append(session_id: str, messages: list[dict[str, Any]]) -> Any:
        result = await client.call_tool("append", {"session_id": session_id, "messages": messages})
        if result.is_error:
            raise RuntimeError(f"append over MCP failed: {result.content}")
        return result

    return append


async def throughput(
    append: Append,
    open_session: Callable[[str], Awaitable[Any]],
    prefix: str,
    messages: list[dict[str, Any]],
    batch: int,
    runs: int,
    warmup: int,
) -> Timing:
    """Seconds to append `messages` in batches of `batch`, each run (warm-ups too) into a fresh session."""
    ids = [f"{prefix}-{batch}-{k}" for k in range(warmup + runs)]
    for session_id in ids:
        await open_session(session_id)
    fresh = iter(ids)

    async def run_once() -> None:
        session_id = next(fresh)
        for chunk in batches(messages, batch):
            await append(session_id, chunk)

    timing, _ = await timed_async(run_once, repeat=runs, warmup=warmup)
    return timing


def append_row(path: str, batch: int, count: int, timing: Timing) -> dict[str, Any]:
    return {
        "path": path,
        "messages per call": batch,
        "wire messages": f"{count:,}",
        "seconds": f"{timing.median:.2f}",
        "messages/s": f"{count / timing.median:,.0f}",
        "ms per call": ms(timing.median / -(-count // batch)),
    }


async def big_session(service: ContextService, session_id: str, stored: int, repeat: int, calls: int) -> dict[str, Any]:
    """Build a session of `stored` messages by batched append, then time reading it back.

    A function of its own so that the messages and the rendered context are garbage once it
    returns: kept alive, a 100k-message context makes every later collection slower.
    """
    wire = stored_messages(stored)
    start = time.perf_counter()
    for chunk in batches(wire, BUILD_BATCH):
        await service.append(session_id, chunk)
    build = time.perf_counter() - start
    status = await service.status(session_id)
    if status.message_count != stored:
        raise AssertionError(f"built {status.message_count:,} messages, wanted {stored:,}")
    full, context = await timed_async(lambda: service.get_context(session_id), repeat=repeat)
    page, _ = await timed_async(lambda: service.get_context(session_id, limit=BATCH), repeat=repeat)
    state = await per_call(lambda: service.status(session_id), calls, repeat)
    return {
        "stored messages": f"{stored:,}",
        "runs": repeat,
        "build s": f"{build:.1f}",
        "build msg/s": f"{len(wire) / build:,.0f}",
        "tokens": f"{context.tokens:,}",
        "get_context ms": ms(full.median),
        "first 100 ms": ms(page.median),
        "status ms": ms(state),
    }


# -- the server ------------------------------------------------------------------------------------


def server_params(home: Path) -> StdioServerParameters:
    """`contextfold serve` on stdio, with only the data home from the environment (as the library)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    env["CONTEXTFOLD_HOME"] = str(home)
    return StdioServerParameters(command=sys.executable, args=["-m", "contextfold", "serve"], env=env)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} over MCP failed: {result.content}")
    return result.structured_content


# -- the run ---------------------------------------------------------------------------------------


async def measure(opts: Options) -> None:
    # The imported libraries are ~200k objects that the harness's gc.collect() before every run
    # would rescan (a quarter of a second each on a busy machine); they live forever anyway.
    gc.freeze()
    sizes = QUICK if opts.quick else FULL
    runs = min(opts.repeat, sizes.append_runs)
    stream = wire_messages(sizes.appends)
    append_rows: list[dict[str, Any]] = []
    context_rows: list[dict[str, Any]] = []
    trip_rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        home = Path(tmp)
        settings = load_settings({"home": home}, environ={})
        async with await ContextService.open(settings) as service:

            async def open_local(session_id: str) -> Any:
                return await service.open_session(session_id, model=MODEL)

            # (a) library append throughput
            for batch in (1, BATCH):
                timing = await throughput(
                    library_append(service), open_local, "lib", stream, batch, runs, sizes.append_warmup
                )
                append_rows.append(append_row("library", batch, len(stream), timing))

            # (c) big sessions: build by batched append, then read them back
            big: dict[int, str] = {}
            for stored in sizes.sessions:
                big[stored] = f"big-{stored}"
                await open_local(big[stored])
                repeat = min(opts.repeat, 3) if stored >= 50_000 else opts.repeat
                context_rows.append(await big_session(service, big[stored], stored, repeat, sizes.round_trips))

            # (b) and (d) over stdio, in both protocol eras
            mid = big[sizes.sessions[0]]
            local: dict[str, Callable[[], Awaitable[Any]]] = {
                "status": lambda: service.status(mid),
                "count_tokens": _awaitable(lambda: service.count_tokens(text=COUNT_TEXT, model=MODEL)),
                f"get_context ({sizes.sessions[0]:,} msgs)": lambda: service.get_context(mid),
            }
            trips = {name: 1 if "get_context" in name else sizes.round_trips for name in local}
            library = {name: await per_call(fn, trips[name], opts.repeat) for name, fn in local.items()}
            remote: dict[str, dict[str, float]] = {}
            startup: dict[str, float] = {}
            for mode, era in sizes.eras:
                start = time.perf_counter()
                async with Client(server_params(home), mode=mode) as client:
                    startup[era] = time.perf_counter() - start
                    if client.protocol_version != era:
                        raise AssertionError(f"negotiated {client.protocol_version}, expected {era}")
                    if (mode, era) == MODERN:

                        async def open_remote(session_id: str, client: Client = client) -> Any:
                            return await call(client, "session_open", {"session_id": session_id, "model": MODEL})

                        for batch in (1, BATCH):
                            timing = await throughput(
                                mcp_append(client), open_remote, "mcp", stream, batch, runs, sizes.append_warmup
                            )
                            append_rows.append(append_row("MCP stdio", batch, len(stream), timing))
                    over_stdio: dict[str, Callable[[], Awaitable[Any]]] = {
                        "status": _bind(call, client, "status", {"session_id": mid}),
                        "count_tokens": _bind(call, client, "count_tokens", {"text": COUNT_TEXT, "model": MODEL}),
                        f"get_context ({sizes.sessions[0]:,} msgs)": _bind(
                            call, client, "get_context", {"session_id": mid}
                        ),
                    }
                    remote[era] = {
                        name: await per_call(fn, trips[name], opts.repeat) for name, fn in over_stdio.items()
                    }
            for name, lib in library.items():
                modern = remote[MODERN[1]][name]
                trip_rows.append(
                    {
                        "call": name,
                        "library ms": ms(lib),
                        **{f"stdio ms ({era})": ms(by_name[name]) for era, by_name in remote.items()},
                        "MCP overhead ms": ms(modern - lib),
                        "stdio / library": ratio(modern, lib),
                    }
                )

    report(
        "store_append",
        f"Append throughput into SQLite: library vs MCP stdio (median of {runs})",
        append_rows,
        opts,
        notes=[
            "Wire messages per second; four wire messages (user, tool call, tool result, reply) store three rows, "
            "since a tool result completes its call. Each run appends into a fresh session, one transaction per call.",
        ],
        packages=("mcp",),
    )
    report(
        "store_context",
        "Big sessions through the library: batched build, get_context and status",
        context_rows,
        opts,
        notes=[
            f"Built by append in batches of {BUILD_BATCH:,} wire messages. get_context renders the whole session "
            "(openai format); 'first 100' is get_context(limit=100), the first page. Medians of the runs shown; "
            f"a status run is {sizes.round_trips} calls. Build msg/s counts wire messages.",
        ],
    )
    report(
        "store_mcp",
        "MCP overhead: a tool call over stdio vs the same ContextService call in-process",
        trip_rows,
        opts,
        notes=[
            f"Per call, median of {opts.repeat} runs; a run of status or count_tokens is {sizes.round_trips} "
            "calls in a row, a run of get_context one call.",
            "Server start to a usable connection (not included above): "
            + ", ".join(f"{seconds:.2f} s ({era})" for era, seconds in startup.items())
            + ".",
            "MCP overhead = stdio − library at 2026-07-28: JSON-RPC over pipes, argument validation, "
            "structured output serialisation and the client's result validation.",
        ],
        packages=("mcp",),
    )


async def per_call(fn: Callable[[], Awaitable[Any]], calls: int, repeat: int) -> float:
    """Median seconds per call of `fn`, timing `calls` calls in a row per run (fast calls are
    timed in runs so that the harness's per-run garbage collection does not dominate)."""

    async def run() -> None:
        for _ in range(calls):
            await fn()

    timing, _ = await timed_async(run, repeat=repeat)
    return timing.median / calls


def _awaitable(fn: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    """A sync library call shaped like the async ones, so every case is timed the same way."""

    async def run() -> Any:
        return fn()

    return run


def _bind(fn: Callable[..., Awaitable[Any]], *args: Any) -> Callable[[], Awaitable[Any]]:
    return lambda: fn(*args)


if __name__ == "__main__":
    asyncio.run(measure(options(__doc__.splitlines()[0])))

"""Tail selection: contextfold `select_tail` on stored counts vs LangChain `trim_messages`.

What is measured, on seeded synthetic agent sessions of 5,000 and 50,000 OpenAI-shape messages
(user turns, assistant steps with tool calls, tool results of 200–20,000 characters of log, code,
test and listing text):

- latency of choosing the tail of the whole session at budgets of 20k, 100k and 200k tokens:
  contextfold's `select_tail(rows, budget, tail_turns=2)` on the counts the store already holds,
  contextfold's service path (`ContextService.select_tail`, rows read from a real SQLite file),
  and `trim_messages(strategy="last")` with an exact o200k counter, without and with
  `start_on="human"`;
- what the chosen windows look like, over many windows (the session cut at random step
  boundaries): tokens used of the budget, windows that start with a tool result whose call is not
  in the window (an orphan both APIs reject), and empty windows.

Why: SPEC §15 says stored counts should make tail selection ≥ 100× faster than re-counting with
`trim_messages`, with no orphaned tool results, where LangChain's default leaves one in ~44 % of
windows. The LangChain counter is made fair: the same tiktoken encoding, the same per-message and
per-tool-call overheads as contextfold, so both sides agree on the size of every message (checked).
"""

from __future__ import annotations

import json
import random
import tempfile
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import Options, Timing, ms, options, ratio, report, run, timed, timed_async
from _sessions import MAX_OUTPUT, MIN_OUTPUT, SEED, synthetic_session
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, trim_messages

from contextfold.config import load_settings
from contextfold.domain import MessageRow
from contextfold.formats import parse
from contextfold.policy.turns import rows as message_rows
from contextfold.policy.turns import select_tail
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import MESSAGE_OVERHEAD, TOOL_OVERHEAD, count_message, counter_for, encoding

MODEL = "gpt-4o"
BUDGETS = (20_000, 100_000, 200_000)
QUICK_BUDGETS = (2_000, 10_000, 20_000)
"""`--quick` runs a 200-message session: smaller budgets, so the budget still binds."""
TAIL_TURNS = 2
METHODS = {
    "select_tail": "contextfold select_tail on stored counts",
    "service": "contextfold ContextService.select_tail (rows read from SQLite, then select_tail)",
    "trim": 'LangChain trim_messages(strategy="last") with the exact counter',
    "trim human": 'the same with start_on="human"',
}
START_ON = {"trim": None, "trim human": "human"}


# -- the same conversation for LangChain -----------------------------------------------------------


def to_langchain(session: Sequence[dict[str, Any]]) -> list[BaseMessage]:
    result: list[BaseMessage] = []
    for m in session:
        if m["role"] == "user":
            result.append(HumanMessage(content=m["content"]))
        elif m["role"] == "assistant":
            calls = [
                {
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "args": json.loads(c["function"]["arguments"]),
                    "type": "tool_call",
                }
                for c in m.get("tool_calls") or []
            ]
            result.append(AIMessage(content=m["content"], tool_calls=calls))
        else:
            result.append(ToolMessage(content=m["content"], tool_call_id=m["tool_call_id"]))
    return result


_ENC = encoding("o200k_base")  # a plain tiktoken.Encoding (built from the packaged rank file)
CALL_OVERHEAD = TOOL_OVERHEAD - MESSAGE_OVERHEAD
"""contextfold charges 10 per call+result; here the result is a message of its own (4), so the call gets 6."""


def _count(text: str) -> int:
    return len(_ENC.encode_ordinary(text)) if text else 0


def exact_message_tokens(message: BaseMessage) -> int:
    """An exact o200k count of one LangChain message: content, tool names and arguments, overheads."""
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    tokens = MESSAGE_OVERHEAD + _count(content)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            tokens += CALL_OVERHEAD + _count(call["name"]) + _count(json.dumps(call["args"]))
    return tokens


def exact_counter(messages: list[BaseMessage]) -> int:
    """What a careful LangChain user passes as `token_counter`: every message tokenized, every call."""
    return sum(exact_message_tokens(m) for m in messages)


def cached_counter(counts: dict[int, int]) -> Callable[[list[BaseMessage]], int]:
    """The same counts looked up instead of tokenized: identical windows, for evaluating many of them."""
    return lambda messages: sum(counts[id(m)] for m in messages)


# -- windows ---------------------------------------------------------------------------------------


def orphaned(window: Sequence[BaseMessage]) -> bool:
    """A tool result whose call is not in the window (only possible at its start for a suffix)."""
    calls: set[str] = set()
    for m in window:
        if isinstance(m, AIMessage):
            calls.update(c["id"] for c in m.tool_calls if c["id"])
        elif isinstance(m, ToolMessage) and m.tool_call_id not in calls:
            return True
    return False


@dataclass
class Prepared:
    size: int
    wire: list[dict[str, Any]]
    lc: list[BaseMessage]
    rows: list[MessageRow]
    wire_of_row: list[int]
    """Index in `wire` (and `lc`) of each contextfold message."""
    lc_counts: dict[int, int]
    total_tokens: int


def prepare(size: int) -> Prepared:
    wire = synthetic_session(size)
    counter = counter_for(MODEL)
    # As the store holds them: parsed (results attached to their calls), counted once, numbered.
    batch = parse(wire, "openai")
    messages = [
        count_message(m, counter).model_copy(update={"id": f"m{i}", "seq": i + 1}) for i, m in enumerate(batch.messages)
    ]
    rows = message_rows(messages)
    wire_of_row = [i for i, m in enumerate(wire) if m["role"] != "tool"]
    lc = to_langchain(wire)
    lc_counts = {id(m): exact_message_tokens(m) for m in lc}
    total = sum(r.tokens for r in rows)
    if total != sum(lc_counts.values()):
        raise AssertionError(
            f"the two counters disagree: contextfold {total:,}, LangChain counter {sum(lc_counts.values()):,}"
        )
    return Prepared(size, wire, lc, rows, wire_of_row, lc_counts, total)


@dataclass
class WindowStats:
    windows: int = 0
    orphans: int = 0
    empty: int = 0
    used: float = 0.0
    """Sum of tokens used / budget, for the mean."""

    def add(self, window: Sequence[BaseMessage], tokens: int, budget: int) -> None:
        self.windows += 1
        self.orphans += orphaned(window)
        self.empty += not window
        self.used += tokens / budget

    def row(self) -> dict[str, str]:
        if not self.windows:
            return {"used": "", "orphans": "", "empty": ""}
        return {
            "used": f"{100 * self.used / self.windows:.0f} %",
            "orphans": f"{self.orphans}/{self.windows} ({100 * self.orphans / self.windows:.0f} %)",
            "empty": f"{self.empty}/{self.windows}",
        }


def cut_points(prep: Prepared, budget: int, count: int, rng: random.Random) -> list[int]:
    """Random ends of the session at step boundaries (every call answered) where the history
    before the end is larger than the budget, so every method has to choose."""
    tokens = 0
    ends: list[int] = []
    for e, message in enumerate(prep.lc):
        if tokens > budget and prep.wire[e]["role"] != "tool":
            ends.append(e)
        tokens += prep.lc_counts[id(message)]
    if tokens > budget:
        ends.append(len(prep.lc))
    return sorted(rng.sample(ends, min(count, len(ends))))


def evaluate_windows(prep: Prepared, budget: int, ends: Sequence[int]) -> dict[str, WindowStats]:
    counter = cached_counter(prep.lc_counts)
    stats = {name: WindowStats() for name in ("select_tail", *START_ON)}
    for end in ends:
        rows = prep.rows[: bisect_left(prep.wire_of_row, end)]
        selection = select_tail(rows, budget=budget, tail_turns=TAIL_TURNS)
        start = end if selection.tail_start_id is None else prep.wire_of_row[int(selection.tail_start_id[1:])]
        window = prep.lc[start:end]
        if counter(window) != selection.tail_tokens:
            raise AssertionError("the contextfold window and its stored count disagree")
        stats["select_tail"].add(window, selection.tail_tokens, budget)
        history = prep.lc[:end]
        for name, start_on in START_ON.items():
            trimmed = trim_messages(
                history, strategy="last", max_tokens=budget, token_counter=counter, start_on=start_on
            )
            stats[name].add(trimmed, counter(trimmed), budget)
    return stats


# -- the benchmark ---------------------------------------------------------------------------------


async def service_session(svc: ContextService, prep: Prepared) -> str:
    """Append the session in batches cut at step boundaries, as an agent would send it."""
    session_id = f"tail-{prep.size}"
    await svc.open_session(session_id, model=MODEL)
    batch: list[dict[str, Any]] = []
    for i, message in enumerate(prep.wire):
        batch.append(message)
        nxt = prep.wire[i + 1] if i + 1 < len(prep.wire) else None
        if nxt is None or (len(batch) >= 1_000 and nxt["role"] != "tool"):
            await svc.append(session_id, batch, format="openai")
            batch = []
    return session_id


@dataclass
class Outcome:
    rows: list[dict[str, Any]]
    speedups: dict[str, float]
    """The faster trim_messages variant's time ÷ each contextfold path's time."""
    orphan_free: bool


async def measure(prep: Prepared, svc: ContextService, session_id: str, budget: int, opts: Options) -> Outcome:
    calls = 200  # select_tail takes microseconds: time batches of calls
    batch, _ = timed(
        lambda: [select_tail(prep.rows, budget=budget, tail_turns=TAIL_TURNS) for _ in range(calls)], repeat=opts.repeat
    )
    timings = {"select_tail": Timing([t / calls for t in batch.runs])}
    timings["service"], _ = await timed_async(
        lambda: svc.select_tail(session_id, budget=budget, tail_turns=TAIL_TURNS), repeat=opts.repeat
    )
    # trim_messages re-tokenizes the whole session on every call: fewer runs on the big one.
    lc_repeat = 1 if prep.size > 10_000 else min(opts.repeat, 3)
    for key, start_on in START_ON.items():
        timings[key], trimmed = timed(
            lambda: trim_messages(
                prep.lc, strategy="last", max_tokens=budget, token_counter=exact_counter, start_on=start_on
            ),
            repeat=lc_repeat,
            warmup=0,
        )
        looked_up = trim_messages(
            prep.lc, strategy="last", max_tokens=budget, token_counter=cached_counter(prep.lc_counts), start_on=start_on
        )
        if [id(m) for m in looked_up] != [id(m) for m in trimmed]:
            raise AssertionError("the looked-up counts chose a different window than the exact counter")

    ends = cut_points(prep, budget, 8 if opts.quick else 50, random.Random(SEED + prep.size + budget))
    stats = evaluate_windows(prep, budget, ends)
    stats["service"] = stats["select_tail"]  # the same function on the same rows
    base = timings["select_tail"].median
    rows = [
        {
            "messages": f"{prep.size:,}",
            "budget": f"{budget / 1000:g}k",
            "method": key,
            "median ms": ms(timing.median),
            "runs": len(timing.runs),
            "× select_tail": ratio(timing.median, base),
            **stats[key].row(),
        }
        for key, timing in timings.items()
    ]
    fastest_trim = min(timings["trim"].median, timings["trim human"].median)
    speedups = {key: fastest_trim / timings[key].median for key in ("select_tail", "service")}
    return Outcome(rows, speedups, stats["select_tail"].orphans == 0)


async def main(opts: Options) -> None:
    sizes = (200,) if opts.quick else (5_000, 50_000)
    rows: list[dict[str, Any]] = []
    speedups: dict[str, list[float]] = {"select_tail": [], "service": []}
    orphan_free = True
    sessions: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-tail-") as home:
        async with await ContextService.open(load_settings({"home": Path(home)}, environ={})) as svc:
            for size in sizes:
                prep = prepare(size)
                session_id = await service_session(svc, prep)
                sessions.append(f"{size:,} messages = {prep.total_tokens:,} tokens")
                for budget in QUICK_BUDGETS if opts.quick else BUDGETS:
                    outcome = await measure(prep, svc, session_id, budget, opts)
                    rows += outcome.rows
                    orphan_free &= outcome.orphan_free
                    for key, value in outcome.speedups.items():
                        speedups[key].append(value)
                del prep
    notes = [
        f"Synthetic sessions (seed {SEED}; {'; '.join(sessions)}): OpenAI-shape messages, tool outputs "
        f"log-uniform {MIN_OUTPUT:,}–{MAX_OUTPUT:,} characters of log, code, test and listing lines.",
        *(f"{key}: {text}." for key, text in METHODS.items()),
        f"Latency: choosing the tail of the whole session (tail_turns={TAIL_TURNS}). The exact counter tokenizes "
        "content, tool names and arguments with o200k_base and adds contextfold's per-message and per-call "
        "overheads, so both sides agree on every message (checked). trim_messages: 1 run above 10,000 messages, "
        "else up to 3, no warm-up; select_tail: batches of 200 calls.",
        f"Windows: the session cut at {8 if opts.quick else 50} random step boundaries per size and budget, "
        "where the history exceeds the budget. used = mean tokens kept ÷ budget; orphans = windows that start "
        "with a tool result whose call is outside them; empty = nothing kept. The trim_messages windows are "
        "computed with the same counts looked up (identical windows; checked on the full session).",
        f"contextfold keeps at most the last {TAIL_TURNS} turns (SPEC §8), so it may use less of a large budget.",
    ]
    for key, values in speedups.items():
        worst = min(values)
        notes.append(
            f"Target: {key} ≥ 100× faster than trim_messages — {'met' if worst >= 100 else 'MISSED'} "
            f"(slowest case {worst:,.0f}×)."
        )
    notes.append(f"Target: no orphan windows for contextfold — {'met' if orphan_free else 'MISSED'}.")
    report(
        "tail",
        "Tail selection: contextfold select_tail vs LangChain trim_messages",
        rows,
        opts,
        notes=notes,
        packages=("langchain-core", "tiktoken"),
    )


if __name__ == "__main__":
    run(main, options(__doc__.splitlines()[0]))

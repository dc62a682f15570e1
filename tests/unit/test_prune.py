"""Prune (docs/design.md §4): which old tool outputs are cleared, when it is worth it, and that it is idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_files, corpus_params, needs_corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain import CompactionPart, Message, TextPart, ToolPart
from contextfold.formats import RenderOptions, parse, render
from contextfold.importers.normalized import load_normalized
from contextfold.policy.prune import (
    PrunedPart,
    PruneOptions,
    PrunePlan,
    plan_prune,
    prune_thresholds,
    remaining_counter,
)
from contextfold.tokens.counting import TOOL_OVERHEAD, count_message, count_part, counter_for

PLACEHOLDER = RenderOptions().pruned_placeholder
NOTHING_STAYS = {"placeholder_tokens": 0, "remaining_tokens": lambda part: 0}
"""Unit tests count a part's whole stored size as its output, so the arithmetic stays obvious."""

K = 1_000


def tool(tokens: int, name: str = "bash", state: str = "completed", compacted: bool = False) -> ToolPart:
    return ToolPart(
        call_id=f"call_{tokens}_{name}",
        name=name,
        input={"cmd": "x"},
        state=state,  # type: ignore[arg-type]
        output="out" if state == "completed" else None,
        error="boom" if state == "error" else None,
        compacted_at=1.0 if compacted else None,
        tokens=tokens,
    )


def user(text: str = "go") -> Message:
    return Message(role="user", parts=[TextPart(text=text)], tokens=5)


def assistant(*parts: ToolPart, summary: bool = False) -> Message:
    return Message(role="assistant", parts=list(parts) or [TextPart(text="ok")], summary=summary, tokens=5)


def session(*messages: Message) -> list[Message]:
    """Ids and seqs as the store would assign them; every call id made unique."""
    out = []
    for i, m in enumerate(messages):
        parts = [
            p.model_copy(update={"call_id": f"c{i}_{j}"}) if isinstance(p, ToolPart) else p
            for j, p in enumerate(m.parts)
        ]
        out.append(m.model_copy(update={"id": f"m{i}", "seq": i, "parts": parts}))
    return out


def recent_turns(*sizes: int) -> list[Message]:
    """Two user turns at the end, with tool outputs of `sizes` (never pruned by default)."""
    return [user("recent 1"), assistant(*(tool(s) for s in sizes)), user("recent 2"), assistant()]


def marked(plan: PrunePlan) -> list[tuple[str, int]]:
    return [(p.message_id, p.index) for p in plan.parts]


# -- the rules, one by one -----------------------------------------------------------------------


def test_protect_threshold_marks_only_beyond_the_newest_40k() -> None:
    msgs = session(user(), *(assistant(tool(10 * K)) for _ in range(10)), *recent_turns())
    plan = plan_prune(msgs, **NOTHING_STAYS)
    # Newest first: running totals 10k … 40k are protected; the 5th-newest (50k) and older go.
    assert marked(plan) == [(f"m{i}", 0) for i in range(6, 0, -1)]
    assert plan.applies and plan.tokens_freed == 60 * K and plan.to_mark == plan.parts
    assert plan.tokens_scanned == 100 * K
    assert "60,000" in plan.reason


def test_part_crossing_the_threshold_is_marked() -> None:
    msgs = session(user(), assistant(tool(30 * K)), assistant(tool(35 * K)), *recent_turns())
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m1", 0)]  # 35k protected, 35k + 30k > 40k: the 30k part goes
    assert plan.applies


def test_minimum_must_be_exceeded() -> None:
    msgs = session(user(), assistant(tool(20 * K)), assistant(tool(40 * K)), *recent_turns())
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m1", 0)] and plan.tokens_freed == 20 * K
    assert not plan.applies and plan.to_mark == []  # exactly the minimum is not more than it
    assert "minimum 20,000" in plan.reason
    plan = plan_prune(msgs, PruneOptions(minimum=19_999), **NOTHING_STAYS)
    assert plan.applies


def test_nothing_old_enough() -> None:
    msgs = session(user(), assistant(tool(10 * K)), *recent_turns())
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert plan.parts == [] and not plan.applies and "nothing to prune" in plan.reason


def test_last_two_turns_are_skipped_and_not_counted() -> None:
    old = [assistant(tool(13 * K)) for _ in range(3)]
    msgs = session(user(), *old, *recent_turns(100 * K, 100 * K))
    plan = plan_prune(msgs, **NOTHING_STAYS)
    # 200k of recent output neither gets marked nor uses up the protected 40k.
    assert plan.parts == [] and plan.tokens_scanned == 39 * K
    # With keep_turns=0 the recent outputs are fair game: the newest alone passes 40k.
    plan = plan_prune(msgs, PruneOptions(keep_turns=0), **NOTHING_STAYS)
    assert marked(plan) == [("m5", 1), ("m5", 0), ("m3", 0), ("m2", 0), ("m1", 0)]


def test_keep_turns_counts_user_turns_not_compaction_markers() -> None:
    marker = Message(role="user", parts=[CompactionPart()], tokens=8)
    msgs = session(user(), assistant(tool(60 * K)), user(), assistant(tool(1)), marker, assistant(tool(1)))
    # The marker does not open a turn: the last two turns are m2… and m0…, so nothing is old enough.
    assert plan_prune(msgs, **NOTHING_STAYS).parts == []
    assert msgs[2].starts_turn and not msgs[4].starts_turn


def test_protected_tools_case_insensitive_and_not_counted() -> None:
    msgs = session(
        user(),
        assistant(tool(50 * K, name="Skill")),
        assistant(tool(50 * K, name="skill")),
        assistant(tool(30 * K)),
        assistant(tool(30 * K)),
        *recent_turns(),
    )
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m3", 0)] and plan.tokens_scanned == 60 * K
    plan = plan_prune(msgs, PruneOptions(protected_tools=frozenset({"SKILL"})), **NOTHING_STAYS)
    assert marked(plan) == [("m3", 0)]


def test_exclude_tools() -> None:
    msgs = session(
        user(),
        assistant(tool(30 * K, name="Read")),
        assistant(tool(30 * K, name="bash")),
        assistant(tool(40 * K, name="bash")),
        *recent_turns(),
    )
    assert marked(plan_prune(msgs, **NOTHING_STAYS)) == [("m2", 0), ("m1", 0)]
    plan = plan_prune(msgs, PruneOptions(exclude_tools=frozenset({"read"})), **NOTHING_STAYS)
    assert marked(plan) == [("m2", 0)]


def test_stops_at_a_part_already_pruned() -> None:
    msgs = session(
        user(),
        assistant(tool(90 * K)),  # older than the pruned part: handled before, not looked at
        assistant(tool(50 * K, compacted=True)),
        assistant(tool(30 * K)),
        assistant(tool(40 * K)),
        *recent_turns(),
    )
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m3", 0)] and plan.applies
    assert "pruned earlier" in plan_prune(msgs[:3] + msgs[5:], **NOTHING_STAYS).reason


def test_stops_at_the_latest_summary() -> None:
    msgs = session(
        user(),
        assistant(tool(90 * K)),
        Message(role="user", parts=[CompactionPart()], tokens=8),
        assistant(summary=True),
        user(),
        assistant(tool(45 * K)),
        assistant(tool(30 * K)),
        *recent_turns(),
    )
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m5", 0)] and plan.applies
    # Without the summary the 90k output before it would be marked: the summary is the wall.
    unsummarized = [m.model_copy(update={"summary": False}) for m in msgs]
    assert ("m1", 0) in marked(plan_prune(unsummarized, **NOTHING_STAYS))
    assert "summary" in plan_prune(msgs[:4] + msgs[7:], **NOTHING_STAYS).reason


def test_keep_tool_uses_counts_every_use_from_the_newest() -> None:
    msgs = session(
        user(),
        assistant(tool(30 * K)),
        assistant(tool(30 * K)),
        assistant(tool(40 * K)),
        *recent_turns(1, 1),
    )
    assert marked(plan_prune(msgs, **NOTHING_STAYS)) == [("m2", 0), ("m1", 0)]
    # The two recent uses count toward N: with N=4, m2 is the 4th-newest use and is kept.
    plan = plan_prune(msgs, PruneOptions(keep_tool_uses=4), **NOTHING_STAYS)
    assert marked(plan) == [("m1", 0)]
    assert plan_prune(msgs, PruneOptions(keep_tool_uses=5), **NOTHING_STAYS).parts == []
    # With keep_tool_uses there is no protected window and no turn rule: the walk counts every
    # use, the two 1-token ones in the recent turns included (issue 12).
    assert plan_prune(msgs, PruneOptions(keep_tool_uses=5), **NOTHING_STAYS).tokens_scanned == 100 * K + 2


def test_clear_at_least_replaces_the_minimum() -> None:
    msgs = session(user(), assistant(tool(10 * K)), assistant(tool(40 * K)), *recent_turns())
    assert not plan_prune(msgs, **NOTHING_STAYS).applies
    plan = plan_prune(msgs, PruneOptions(clear_at_least=10 * K), **NOTHING_STAYS)
    assert plan.applies and "clear_at_least" in plan.reason
    plan = plan_prune(msgs, PruneOptions(clear_at_least=10 * K + 1, minimum=0), **NOTHING_STAYS)
    assert not plan.applies and "clear_at_least=10,001" in plan.reason


def test_pending_and_running_calls_are_never_pruned_nor_stop_the_walk() -> None:
    msgs = session(
        user(),
        assistant(tool(30 * K)),
        assistant(tool(90 * K, state="running")),
        assistant(tool(90 * K, state="pending")),
        assistant(tool(40 * K)),
        *recent_turns(),
    )
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m1", 0)] and plan.tokens_scanned == 70 * K


def test_error_results_are_pruned_too() -> None:
    msgs = session(user(), assistant(tool(30 * K, state="error")), assistant(tool(40 * K)), *recent_turns())
    assert marked(plan_prune(msgs, **NOTHING_STAYS)) == [("m1", 0)]


def test_parts_newest_first_within_a_message() -> None:
    msgs = session(user(), assistant(tool(30 * K), tool(20 * K), tool(25 * K)), *recent_turns())
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert marked(plan) == [("m1", 1), ("m1", 0)]
    assert [p.tool for p in plan.parts] == ["bash", "bash"] and plan.parts[0].call_id == "c1_1"


def test_freed_is_stored_minus_what_stays() -> None:
    msgs = session(user(), assistant(tool(30 * K)), assistant(tool(40 * K)), *recent_turns())
    plan = plan_prune(msgs, placeholder_tokens=7, remaining_tokens=lambda part: 100)
    assert plan.parts == [PrunedPart("m1", 0, "bash", 30 * K - 100 - 7, "c1_0")]
    assert not plan.estimated


def test_tiny_outputs_are_not_replaced_by_a_bigger_placeholder() -> None:
    msgs = session(user(), assistant(tool(5)), assistant(tool(25 * K)), assistant(tool(40 * K)), *recent_turns())
    plan = plan_prune(msgs, placeholder_tokens=7, remaining_tokens=lambda part: 0)
    assert marked(plan) == [("m2", 0)]  # the 5-token output would grow by clearing it


def test_exact_remaining_and_clear_inputs() -> None:
    counter = counter_for("gpt-4o")
    big_input = {"path": "/src/app.py", "content": "print('hello')\n" * 2000}
    part = ToolPart(call_id="c", name="Write", input=big_input, state="completed", output="ok " * 20_000)
    part = part.model_copy(update={"tokens": count_part(part, counter)})
    call_only = ToolPart(call_id="c", name="Write", input=big_input, state="completed", output="")
    assert remaining_counter(counter)(part) == count_part(call_only, counter)
    assert remaining_counter(counter, clear_inputs=True)(part) < 20 + TOOL_OVERHEAD

    msgs = session(user(), assistant(part), assistant(tool(40 * K)), *recent_turns())
    plain = plan_prune(msgs, placeholder_tokens=7, remaining_tokens=remaining_counter(counter))
    both = plan_prune(
        msgs,
        PruneOptions(clear_inputs=True),
        placeholder_tokens=7,
        remaining_tokens=remaining_counter(counter, clear_inputs=True),
    )
    assert marked(plain) == marked(both) == [("m1", 0)]
    assert both.inputs_cleared and not plain.inputs_cleared
    assert both.tokens_freed - plain.tokens_freed == count_part(call_only, counter) - remaining_counter(
        counter, clear_inputs=True
    )(part)


def test_without_a_counter_the_plan_is_an_estimate_that_errs_low() -> None:
    counter = counter_for("gpt-4o")
    part = ToolPart(
        call_id="c", name="Edit", input={"file_path": "/a/b.py", "old": "x = 1", "new": "x = 2"}, state="completed"
    )
    part = part.model_copy(update={"output": "line\n" * 9_000})
    part = part.model_copy(update={"tokens": count_part(part, counter)})
    msgs = session(user(), assistant(part), assistant(tool(40 * K)), *recent_turns())
    exact = plan_prune(msgs, placeholder_tokens=7, remaining_tokens=remaining_counter(counter))
    estimate = plan_prune(msgs, placeholder_tokens=7)
    assert estimate.estimated and not exact.estimated
    assert marked(estimate) == marked(exact)
    assert exact.tokens_freed * 0.95 <= estimate.tokens_freed <= exact.tokens_freed


# -- apply, and plan again -------------------------------------------------------------------------


def apply(messages: Sequence[Message], plan: PrunePlan, now: float = 2.0) -> list[Message]:
    """What the store does with a plan: set `compacted_at` on the marked parts, nothing else."""
    targets = {(p.message_id, p.index) for p in plan.to_mark}
    out = []
    for m in messages:
        parts: list[Any] = [
            p.model_copy(update={"compacted_at": now}) if (m.id, i) in targets else p for i, p in enumerate(m.parts)
        ]
        out.append(m.model_copy(update={"parts": parts}))
    return out


def _assert_placeholders_where_marked(pruned: Sequence[Message], plan: PrunePlan) -> None:
    """The rendered request holds every call and, in order, one result per call; the results that
    read as the placeholder are exactly those of the parts marked (by this plan or earlier)."""
    wire = render([], pruned, "openai")["messages"]
    parts = [(m.id, i, p) for m in pruned for i, p in enumerate(m.parts) if isinstance(p, ToolPart)]
    calls = [c["id"] for m in wire for c in m.get("tool_calls") or []]
    results = [(m["tool_call_id"], m["content"]) for m in wire if m["role"] == "tool"]
    assert calls == [p.call_id for _, _, p in parts] == [call_id for call_id, _ in results]
    shown = [(mid, i) for (mid, i, _), (_, text) in zip(parts, results) if text == PLACEHOLDER]
    marked = [(mid, i) for mid, i, p in parts if p.compacted_at is not None]
    assert shown == marked
    assert {(p.message_id, p.index) for p in plan.to_mark} <= set(marked)


def test_a_reused_call_id_keeps_one_placeholder_per_marked_call() -> None:
    # Two calls share an id (a replayed session): each is its own part, marked on its own; the
    # old count of placeholders by id saw one where there were two.
    msgs = session(user(), *(assistant(tool(10 * K)) for _ in range(10)), *recent_turns())
    reused = msgs[1].parts[0].call_id
    msgs[2] = msgs[2].model_copy(update={"parts": [msgs[2].parts[0].model_copy(update={"call_id": reused})]})
    plan = plan_prune(msgs, **NOTHING_STAYS)
    assert {(p.message_id, p.call_id) for p in plan.to_mark} >= {(msgs[1].id, reused), (msgs[2].id, reused)}
    pruned = apply(msgs, plan)
    _assert_placeholders_where_marked(pruned, plan)
    again = plan_prune(pruned, **NOTHING_STAYS)
    assert again.to_mark == []


def test_applied_plan_keeps_every_call_and_shows_the_placeholder() -> None:
    msgs = session(user(), *(assistant(tool(10 * K)) for _ in range(10)), *recent_turns())
    plan = plan_prune(msgs, **NOTHING_STAYS)
    wire = render([], apply(msgs, plan), "openai")["messages"]
    calls = [c["id"] for m in wire for c in m.get("tool_calls") or []]
    results = {m["tool_call_id"]: m["content"] for m in wire if m["role"] == "tool"}
    assert calls == [p.call_id for m in msgs for p in m.tool_parts]
    assert {cid for cid, text in results.items() if text == PLACEHOLDER} == {p.call_id for p in plan.parts}


_TOOL = st.builds(
    tool,
    st.integers(0, 30 * K),
    name=st.sampled_from(["bash", "read", "Skill", "edit"]),
    state=st.sampled_from(["completed", "completed", "completed", "error", "pending"]),
)
_MESSAGE = st.one_of(
    st.builds(user),
    st.lists(_TOOL, min_size=1, max_size=3).map(lambda parts: assistant(*parts)),
)
_OPTIONS = st.builds(
    PruneOptions,
    protect=st.sampled_from([0, 10 * K, 40 * K]),
    minimum=st.sampled_from([0, 5 * K, 20 * K]),
    keep_turns=st.integers(0, 3),
    keep_tool_uses=st.none() | st.integers(0, 5),
    clear_at_least=st.none() | st.sampled_from([0, 10 * K]),
    exclude_tools=st.sampled_from([frozenset(), frozenset({"READ"})]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_MESSAGE, max_size=25), _OPTIONS, st.integers(0, 20))
def test_prune_is_idempotent(messages: list[Message], options: PruneOptions, placeholder: int) -> None:
    msgs = session(*messages)
    kwargs: dict[str, Any] = {"placeholder_tokens": placeholder, "remaining_tokens": lambda p: 10}
    first = plan_prune(msgs, options, **kwargs)
    assert first.tokens_freed == sum(p.tokens for p in first.parts)
    assert all(p.tokens > 0 for p in first.parts)
    by_id = {m.id: m for m in msgs}
    for p in first.parts:
        part = by_id[p.message_id].parts[p.index]
        assert isinstance(part, ToolPart) and part.is_finished and part.compacted_at is None
        assert part.name.casefold() not in {"skill", *(t.casefold() for t in options.exclude_tools)}
    again = plan_prune(apply(msgs, first), options, **kwargs)
    if first.applies:
        assert again.parts == [] and not again.applies  # the newest mark stops the walk
    else:
        assert again == first  # nothing was applied, so nothing changed


# -- the corpus ------------------------------------------------------------------------------------

LONG_NAMES = [p.name for p in corpus_files("normalized/*.jsonl") if p.stat().st_size > 100_000]
LONG_SESSIONS = corpus_params("normalized/*.jsonl", where=lambda p: p.name in LONG_NAMES, id=lambda p: p.name)
COUNTER = counter_for("gpt-4o")


@cache
def corpus_session(name: str) -> tuple[Message, ...]:
    (path,) = corpus_files(f"normalized/{name}")
    batch = parse(load_normalized(path).messages, "openai")
    return tuple(_count(m.model_copy(update={"id": f"msg_{i:05d}", "seq": i})) for i, m in enumerate(batch.messages))


def _count(message: Message) -> Message:
    return count_message(message, COUNTER)


def _recent_from(msgs: Sequence[Message], keep_turns: int) -> int:
    """Index where the last `keep_turns` user turns begin (0 when there are fewer turns than that)."""
    if keep_turns == 0:
        return len(msgs)
    starts = [i for i, m in enumerate(msgs) if m.starts_turn]
    return starts[-keep_turns] if len(starts) >= keep_turns else 0


def _independent_totals(msgs: Sequence[Message], options: PruneOptions) -> dict[tuple[str, int], tuple[int, int]]:
    """(running total, clearable) newest → oldest for each part the rule counts, recomputed from scratch."""
    remaining = remaining_counter(COUNTER)
    totals, running = {}, 0
    for i in range(_recent_from(msgs, options.keep_turns) - 1, -1, -1):
        for j in range(len(msgs[i].parts) - 1, -1, -1):
            part = msgs[i].parts[j]
            if isinstance(part, ToolPart) and part.is_finished and part.name.casefold() != "skill":
                clearable = part.tokens - remaining(part)
                running += clearable
                totals[(msgs[i].id, j)] = (running, clearable)
    return totals


@needs_corpus
@pytest.mark.parametrize("path", LONG_SESSIONS)
@pytest.mark.parametrize("keep_turns", [2, 0])
def test_corpus_prune_invariants(path: Path, keep_turns: int) -> None:
    msgs = corpus_session(path.name)
    options = PruneOptions(keep_turns=keep_turns)
    placeholder = COUNTER.count(PLACEHOLDER)
    plan = plan_prune(msgs, options, placeholder_tokens=placeholder, remaining_tokens=remaining_counter(COUNTER))
    index = {m.id: i for i, m in enumerate(msgs)}
    recent_from = _recent_from(msgs, keep_turns)
    totals = _independent_totals(msgs, options)
    for p in plan.parts:
        assert index[p.message_id] < recent_from  # outside the last 2 turns
        assert totals[(p.message_id, p.index)][0] > options.protect  # beyond the newest 40,000 tokens
        part = msgs[index[p.message_id]].parts[p.index]
        assert isinstance(part, ToolPart) and part.name.casefold() != "skill"
        assert p.tokens == part.tokens - remaining_counter(COUNTER)(part) - placeholder
    # Everything beyond the protected window is marked (none of these sessions was pruned before)
    # except outputs no bigger than the placeholder.
    beyond = [clearable for running, clearable in totals.values() if running > options.protect]
    assert len(plan.parts) == sum(1 for clearable in beyond if clearable > placeholder)
    assert plan.applies == (plan.tokens_freed > options.minimum)
    if not plan.applies:
        assert plan.to_mark == []

    # Applied: every call is still in the rendered request, each with its own result, and exactly
    # the marked ones show the placeholder. Results are compared in order, not by call id: a
    # session may reuse an id (a resumed Claude Code session replays records), and a dict keyed
    # by id would count such calls once.
    pruned = apply(msgs, plan)
    _assert_placeholders_where_marked(pruned, plan)
    again = plan_prune(pruned, options, placeholder_tokens=placeholder, remaining_tokens=remaining_counter(COUNTER))
    assert again.to_mark == []


@needs_corpus
def test_corpus_protected_tools_are_never_marked() -> None:
    name = max(LONG_NAMES, key=lambda n: sum(m.tokens for m in corpus_session(n)))
    msgs = corpus_session(name)
    options = PruneOptions(keep_turns=0, protected_tools=frozenset({"skill", "read"}))
    plan = plan_prune(msgs, options, placeholder_tokens=7, remaining_tokens=remaining_counter(COUNTER))
    assert plan.parts
    assert all(p.tool.casefold() not in {"skill", "read"} for p in plan.parts)


@needs_corpus
def test_corpus_big_sessions_are_worth_pruning() -> None:
    # A session whose clearable tool output older than its last two turns (recomputed from
    # scratch, as the invariants test does) is far more than the protected 40k and the 20k
    # minimum together is always worth pruning, unless a summary stops the walk first.
    checked = []
    for name in LONG_NAMES:
        msgs = corpus_session(name)
        if any(m.summary or m.compaction is not None for m in msgs):
            continue
        totals = _independent_totals(msgs, PruneOptions())
        clearable = max((running for running, _ in totals.values()), default=0)
        if clearable > 2 * (40_000 + 20_000):
            plan = plan_prune(msgs, placeholder_tokens=7, remaining_tokens=remaining_counter(COUNTER))
            assert plan.applies, (name, clearable, plan.reason)
            checked.append(name)
    if not checked:
        pytest.skip("no long corpus session holds that much clearable tool output")


def test_reason_when_everything_beyond_protect_is_kept() -> None:
    msgs = session(user(), assistant(tool(30 * K)), assistant(tool(40 * K)), *recent_turns())
    plan = plan_prune(msgs, PruneOptions(keep_tool_uses=10), **NOTHING_STAYS)
    assert plan.parts == [] and "keep_tool_uses" in plan.reason


def test_the_seed_thresholds_stand_where_the_window_holds_them_and_scale_only_below() -> None:
    # OpenCode's 40,000 / 20,000 stand from 80,000 usable tokens up (the window holds the
    # protection twice over): gpt-4o's 128k window keeps them (before: 27,904 and 13,952). Below,
    # the protection gives way token for token (usable - 40,000, the minimum half of it) down to
    # a quarter and an eighth of usable, so a window smaller than the protection can be pruned.
    assert prune_thresholds(None) == (40 * K, 20 * K)  # unlimited window
    assert prune_thresholds(168_000) == (40 * K, 20 * K)  # claude-sonnet-4-5
    assert prune_thresholds(111_616) == (40 * K, 20 * K)  # gpt-4o, 128k window
    assert prune_thresholds(80 * K) == (40 * K, 20 * K)
    assert prune_thresholds(80 * K - 1) == (40 * K - 1, 20 * K - 1)  # continuous at the boundary
    assert prune_thresholds(60 * K) == (20 * K, 10 * K)
    assert prune_thresholds(32 * K) == (8 * K, 4 * K)  # the demo's budget: a quarter and an eighth
    assert prune_thresholds(31_616) == (7_904, 3_952)  # gpt-4o on a 48,000-token window
    assert prune_thresholds(0) == (0, 0)
    # Never decreasing with the window, never a jump bigger than the window's own step.
    previous = (0, 0)
    for usable in range(0, 200 * K, 997):
        protect, minimum = prune_thresholds(usable)
        assert previous[0] <= protect <= max(usable // 2, 40 * K) and previous[1] <= minimum <= protect // 2 + 1
        previous = (protect, minimum)
    # Values a session sets are used as given, even above the share.
    assert prune_thresholds(31_616, protect=40 * K, minimum=20 * K) == (40 * K, 20 * K)
    assert prune_thresholds(31_616, minimum=0) == (7_904, 0)


@pytest.mark.parametrize(
    ("usable", "outputs", "freed"),
    [(111_616, 65, 25 * K), (111_616, 58, 0), (32 * K, 65, 57 * K), (32 * K, 13, 5 * K)],
    ids=["128k", "128k-below-minimum", "32k", "32k-small"],
)
def test_prunes_at_a_128k_window_follow_opencode_and_a_32k_window_still_prunes(
    usable: int, outputs: int, freed: int
) -> None:
    # Older outputs of 1,000 tokens each. At gpt-4o's 128k window the newest 40,000 stand and a
    # prune applies only above 20,000 (before: 27,904 stood and 13,952 was enough, so 58
    # outputs were pruned); at a 32,000-token budget the newest 8,000 stand and more than 4,000 is enough.
    protect, minimum = prune_thresholds(usable)
    msgs = session(user(), *(assistant(tool(K)) for _ in range(outputs)), *recent_turns(30 * K))
    plan = plan_prune(msgs, PruneOptions(protect=protect, minimum=minimum), **NOTHING_STAYS)
    assert plan.tokens_scanned == outputs * K
    assert plan.tokens_freed == outputs * K - protect
    assert plan.applies == (freed > 0) and sum(p.tokens for p in plan.to_mark) == freed

"""Turns and tail selection (docs/design.md §5): budget, whole turns, splits at assistant boundaries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import overload

import pytest
from conftest import corpus_files, corpus_params, needs_corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain import CompactionPart, Message, TextPart, ToolPart
from contextfold.formats import parse, render
from contextfold.importers.normalized import load_normalized
from contextfold.policy.turns import MessageRow, TailSelection, rows, select_tail, tail_budget, turns
from contextfold.tokens.counting import count_message, counter_for


def conv(spec: str) -> list[MessageRow]:
    """Rows from a compact spec: `U10 A20 C5` = user turn start, assistant, compaction marker."""
    result = []
    for seq, item in enumerate(spec.split()):
        kind, tokens = item[0], int(item[1:])
        role = "assistant" if kind == "A" else "user"
        result.append(MessageRow(f"m{seq}", seq, role, tokens, kind == "U"))  # type: ignore[arg-type]
    return result


def start_index(selection: TailSelection) -> int | None:
    return None if selection.tail_start_id is None else int(selection.tail_start_id[1:])


# -- turns -----------------------------------------------------------------------------------------


def test_turn_start() -> None:
    assert Message(role="user", parts=[TextPart(text="hi")]).starts_turn
    assert not Message(role="assistant", parts=[TextPart(text="hi")]).starts_turn
    assert not Message(role="user", parts=[CompactionPart(auto=True)]).starts_turn


def test_rows_carry_stored_counts() -> None:
    messages = [
        Message(id="a", seq=1, role="user", parts=[TextPart(text="x")], tokens=11),
        Message(id="b", seq=2, role="assistant", parts=[ToolPart(call_id="c", name="ls")], tokens=22),
    ]
    assert rows(messages) == [MessageRow("a", 1, "user", 11, True), MessageRow("b", 2, "assistant", 22, False)]
    # A pruned message costs what it costs in the view, like the store's rows.
    pruned = messages[1].model_copy(update={"view_tokens": 7})
    assert rows([pruned])[0].tokens == 7


def test_turns_partition_rows_with_leading_partial() -> None:
    got = turns(conv("C8 A50 U1 A1 A1 U1 A1"))
    assert [(t.start, t.end, t.leading) for t in got] == [(0, 2, True), (2, 5, False), (5, 7, False)]
    assert turns([]) == []
    assert [(t.start, t.end, t.leading) for t in turns(conv("A1 A1"))] == [(0, 2, True)]


# -- the budget ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usable", "override", "expected"),
    [
        (0, None, 2_000),  # unlimited window: the minimum
        (1_000, None, 2_000),
        (20_000, None, 5_000),
        (1_000_000, None, 8_000),
        (1_000_000, 12_345, 12_345),  # the setting wins, unclamped
        (20_000, 0, 0),
    ],
)
def test_tail_budget(usable: int, override: int | None, expected: int) -> None:
    assert tail_budget(usable, override) == expected


# -- unit cases ----------------------------------------------------------------------------------


def test_last_two_turns_fit_entirely() -> None:
    sel = select_tail(conv("U100 A100 U10 A20 U30 A40"), budget=1_000)
    assert start_index(sel) == 2 and not sel.split and sel.turns_kept == 2
    assert (sel.tail_tokens, sel.head_tokens) == (100, 200)
    assert (sel.tail_start_seq, sel.head_end_seq) == (2, 1)


def test_tail_turns_one_and_three() -> None:
    spec = conv("U1 A1 U1 A1 U1 A1 U1 A1")
    assert start_index(select_tail(spec, budget=100, tail_turns=1)) == 6
    assert start_index(select_tail(spec, budget=100, tail_turns=3)) == 2
    assert select_tail(spec, budget=100, tail_turns=3).turns_kept == 3


def test_split_at_assistant_boundary() -> None:
    sel = select_tail(conv("U5 A5 U100 A100 A100 A100"), budget=250)
    # Suffixes of the last turn: 100, 200, 300 … → the longest that fits starts at index 4.
    assert start_index(sel) == 4 and sel.split and sel.turns_kept == 1
    assert sel.tail_tokens == 200 and sel.head_tokens == 210


def test_split_of_the_older_turn_after_a_whole_newer_one() -> None:
    sel = select_tail(conv("U5 A5 U50 A60 A70 U10 A10"), budget=110)
    # Last turn (20) fits; the one before (180) does not: keep A70 (70 + 20 = 90).
    assert start_index(sel) == 4 and sel.split and sel.turns_kept == 2
    assert sel.tail_tokens == 90


def test_split_puts_a_huge_user_prompt_in_the_head() -> None:
    sel = select_tail(conv("U1 A1 U9000 A50 A50 U10 A10"), budget=200)
    assert start_index(sel) == 3 and sel.split and sel.tail_tokens == 120


def test_turn_with_nothing_small_enough_is_not_kept() -> None:
    # The newest turn: its only assistant message alone is over budget → no split, no tail.
    sel = select_tail(conv("U5 A5 U10 A5000"), budget=1_000)
    assert not sel.has_tail and sel.head_tokens == 5020 and sel.tail_tokens == 0
    assert sel.head_end_seq == 3


def test_turn_of_one_huge_user_message_cannot_be_split() -> None:
    sel = select_tail(conv("U5 A5 U10 A10 U9000"), budget=1_000)
    assert not sel.has_tail and not sel.split
    # When it is the older of two, the newer whole turn stays.
    sel = select_tail(conv("U5 A5 U9000 U10 A10"), budget=1_000)
    assert start_index(sel) == 3 and not sel.split and sel.turns_kept == 1


def test_tail_at_first_message_means_no_tail() -> None:
    sel = select_tail(conv("U10 A10 U10 A10"), budget=1_000)
    assert not sel.has_tail and sel.head_tokens == 40 and sel.turns_kept == 0
    assert select_tail(conv("U10 A10 A10"), budget=1_000, tail_turns=1).tail_start_id is None


def test_leading_partial_turn_is_never_kept() -> None:
    # A previous compaction's marker and summary are carried by the next summary, not kept verbatim.
    sel = select_tail(conv("C8 A300 U10 A10"), budget=10_000, tail_turns=5)
    assert start_index(sel) == 2 and sel.turns_kept == 1 and sel.head_tokens == 308
    # …not even when the budget would allow splitting into it.
    assert start_index(select_tail(conv("A10 A10 U10 A10"), budget=25)) == 2
    assert not select_tail(conv("A10 A20"), budget=100).has_tail  # no turn at all


def test_compaction_marker_inside_a_turn_is_not_a_split_point() -> None:
    # A split starts at an assistant message, never at a (compaction) user message.
    sel = select_tail(conv("U1 A1 U10 A500 C10 A10"), budget=25)
    assert start_index(sel) == 5 and sel.split


def test_empty_zero_budget_and_zero_turns() -> None:
    assert select_tail([], budget=1_000) == TailSelection(None, None, None, 0, 0, False, 0)
    assert not select_tail(conv("U1 A1 U1 A1"), budget=0).has_tail
    assert not select_tail(conv("U1 A1 U1 A1"), budget=100, tail_turns=0).has_tail


def test_exact_fit_and_zero_token_rows() -> None:
    sel = select_tail(conv("U1 A1 U50 A50"), budget=100)
    assert start_index(sel) == 2 and not sel.split
    # The zero-token turn fits whole; the older one (2) does not, but its A1 fits what is left.
    sel = select_tail(conv("U1 A1 U0 A0 A0"), budget=1)
    assert start_index(sel) == 1 and sel.split and sel.turns_kept == 2 and sel.tail_tokens == 1


def test_total_tokens_may_be_passed_in() -> None:
    spec = conv("U100 A100 U10 A20")
    sel = select_tail(spec, budget=1_000, tail_turns=1, total_tokens=230)
    assert (sel.head_tokens, sel.tail_tokens) == (200, 30)


class CountingRows(Sequence[MessageRow]):
    """A row list that counts how many rows selection reads."""

    def __init__(self, data: list[MessageRow]) -> None:
        self.data = data
        self.reads = 0

    def __len__(self) -> int:
        return len(self.data)

    @overload
    def __getitem__(self, index: int) -> MessageRow: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MessageRow]: ...
    def __getitem__(self, index: int | slice) -> MessageRow | Sequence[MessageRow]:
        self.reads += 1
        return self.data[index]

    def __iter__(self) -> Iterator[MessageRow]:
        for row in self.data:
            self.reads += 1
            yield row


def test_selection_reads_only_the_tail_end() -> None:
    # 50,000 rows, a new turn every 5: with the total maintained by the caller, selection reads
    # the first row (the first turn start) and the ~2 turns at the end, nothing in between.
    data = conv(" ".join("U100" if i % 5 == 0 else "A100" for i in range(50_000)))
    counted = CountingRows(data)
    sel = select_tail(counted, budget=8_000, total_tokens=50_000 * 100)
    assert start_index(sel) == 49_990 and sel.turns_kept == 2
    assert counted.reads <= 20
    # Without the total, the one full pass is the sum.
    counted = CountingRows(data)
    assert select_tail(counted, budget=8_000) == sel
    assert counted.reads <= 50_000 + 20


# -- properties ----------------------------------------------------------------------------------


def reference(rows_: Sequence[MessageRow], budget: int, tail_turns: int) -> tuple[int | None, bool]:
    """OpenCode's `select` + `splitTurn` written out literally (quadratic, for comparison)."""
    starts = [i for i, r in enumerate(rows_) if r.turn_start]
    if tail_turns <= 0 or budget <= 0 or not starts:
        return None, False
    spans = [(s, starts[k + 1] if k + 1 < len(starts) else len(rows_)) for k, s in enumerate(starts)]
    total, keep, split = 0, None, False
    for start, end in reversed(spans[-tail_turns:]):
        size = sum(r.tokens for r in rows_[start:end])
        if total + size <= budget:
            total += size
            keep = start
            continue
        for cut in range(start + 1, end):
            if rows_[cut].role == "assistant" and sum(r.tokens for r in rows_[cut:end]) <= budget - total:
                keep, split = cut, True
                break
        break
    if keep is None or keep == 0:
        return None, False
    return keep, split


_ROW = st.tuples(st.sampled_from("UUAAAAC"), st.integers(0, 600))


@st.composite
def conversations(draw: st.DrawFn) -> list[MessageRow]:
    items = draw(st.lists(_ROW, max_size=40))
    return conv(" ".join(f"{kind}{tokens}" for kind, tokens in items))


@settings(max_examples=400, deadline=None)
@given(conversations(), st.integers(1, 3_000), st.integers(1, 4))
def test_tail_properties(data: list[MessageRow], budget: int, tail_turns: int) -> None:
    sel = select_tail(data, budget=budget, tail_turns=tail_turns)
    total = sum(r.tokens for r in data)
    assert sel.head_tokens + sel.tail_tokens == total
    assert (start_index(sel), sel.split) == reference(data, budget, tail_turns)
    if not sel.has_tail:
        assert sel.tail_tokens == 0 and not sel.split and sel.turns_kept == 0
        assert sel.head_end_seq == (data[-1].seq if data else None)
        return
    start = start_index(sel)
    assert start is not None and 0 < start < len(data)
    first = data[start]
    # A tail starts at a boundary that cannot orphan anything: a whole turn's user message, or
    # the assistant message where a split turn was cut.
    if sel.split:
        assert first.role == "assistant"
    else:
        assert first.turn_start
    assert sel.tail_tokens == sum(r.tokens for r in data[start:]) <= budget
    assert sel.head_end_seq == data[start - 1].seq and sel.tail_start_seq == first.seq
    assert 1 <= sel.turns_kept <= tail_turns
    # Never reaches into the rows before the first turn start.
    assert start >= next(i for i, r in enumerate(data) if r.turn_start)


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(1, 3_000))
def test_oversized_last_turn_is_split_when_it_can_be(data: list[MessageRow], budget: int) -> None:
    starts = [i for i, r in enumerate(data) if r.turn_start]
    if not starts:
        return
    last = starts[-1]
    if sum(r.tokens for r in data[last:]) <= budget:
        return
    splittable = any(
        data[i].role == "assistant" and sum(r.tokens for r in data[i:]) <= budget for i in range(last + 1, len(data))
    )
    sel = select_tail(data, budget=budget)
    assert sel.split == splittable
    if splittable:
        assert start_index(sel) is not None and start_index(sel) > last  # type: ignore[operator]
        assert sel.turns_kept == 1


# -- the corpus ------------------------------------------------------------------------------------


@cache
def corpus_session(name: str) -> tuple[Message, ...]:
    """A normalized corpus file as stored, counted messages (OpenAI wire through `parse`)."""
    (path,) = corpus_files(f"normalized/{name}")
    imported = load_normalized(path)
    batch = parse(imported.messages, "openai")
    counter = counter_for("gpt-4o")
    return tuple(
        count_message(m.model_copy(update={"id": f"msg_{i:05d}", "seq": i}), counter)
        for i, m in enumerate(batch.messages)
    )


CORPUS_NAMES = [p.name for p in corpus_files("normalized/*.jsonl")]


@pytest.mark.parametrize("path", corpus_params("normalized/*.jsonl", id=lambda p: p.name))
def test_corpus_tail_invariants(path: Path) -> None:
    messages = corpus_session(path.name)
    data = rows(messages)
    assert sum(r.tokens for r in data) == sum(m.tokens for m in messages)
    for budget in (2_000, 8_000, 20_000):
        sel = select_tail(data, budget=budget)
        assert sel.head_tokens + sel.tail_tokens == sum(r.tokens for r in data)
        assert (start_index_of(sel, data), sel.split) == reference(data, budget, 2)
        if not sel.has_tail:
            continue
        start = start_index_of(sel, data)
        assert start is not None and start > 0
        assert data[start].turn_start or data[start].role == "assistant"
        assert sel.tail_tokens <= budget
        _assert_no_orphans(list(messages[start:]))


def start_index_of(sel: TailSelection, data: Sequence[MessageRow]) -> int | None:
    if sel.tail_start_id is None:
        return None
    return next(i for i, r in enumerate(data) if r.id == sel.tail_start_id)


def _assert_no_orphans(tail: list[Message]) -> None:
    """Render the tail as an OpenAI request: every tool message answers a call made before it."""
    wire = render([], tail, "openai")["messages"]
    called: set[str] = set()
    for message in wire:
        for call in message.get("tool_calls") or []:
            called.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in called
    assert wire[0]["role"] in ("user", "assistant")


@needs_corpus
def test_corpus_some_tails_are_split() -> None:
    # The long agent sessions have few, huge turns: at 8k the newest turn must be split.
    long_ones = [n for n in CORPUS_NAMES if sum(m.tokens for m in corpus_session(n)) > 50_000]
    assert long_ones
    splits = [select_tail(rows(corpus_session(n)), budget=8_000).split for n in long_ones]
    assert any(splits)

"""Turns and tail selection (docs/design.md §5): which recent messages survive a compaction verbatim.

A turn starts at a user message that has no compaction part and runs to the next such message.
Tool results are never messages of their own in contextfold (a call and its result are one
`ToolPart` of the assistant message), so any message boundary is a safe place for the tail to
start: it cannot separate a result from its call.

Selection works on `MessageRow`s (id, seq, role, stored tokens, turn start) so a long session does
not need its parts loaded, and walks back from the newest row only as far as the budget reaches:
the cost is proportional to the tail, not to the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.domain import Message, MessageRow

MIN_PRESERVE_RECENT_TOKENS = 2_000
MAX_PRESERVE_RECENT_TOKENS = 8_000
RECENT_SHARE = 0.25
"""Without a setting, the tail gets a quarter of the usable budget, clamped to [2,000, 8,000]."""


def rows(messages: Sequence[Message]) -> list[MessageRow]:
    """The lightweight rows `select_tail` works on, in the same order.

    A row costs what its message costs in the view (a pruned output counts as its placeholder),
    as the store's own rows do: the tail is kept as the model sees it.
    """
    return [MessageRow(m.id, m.seq, m.role, m.in_view_tokens, m.starts_turn) for m in messages]


@dataclass(frozen=True, slots=True)
class Turn:
    start: int
    """Index of the first row of the turn."""
    end: int
    """Index one past its last row."""
    leading: bool = False
    """The rows before the first turn start (a compaction marker and summary, say): not a real turn."""


def turns(rows: Sequence[MessageRow]) -> list[Turn]:
    """The rows grouped into turns, oldest first; they partition `rows`."""
    starts = [i for i, row in enumerate(rows) if row.turn_start]
    result: list[Turn] = []
    if rows and (not starts or starts[0] > 0):
        result.append(Turn(0, starts[0] if starts else len(rows), leading=True))
    for k, start in enumerate(starts):
        result.append(Turn(start, starts[k + 1] if k + 1 < len(starts) else len(rows)))
    return result


def tail_budget(usable: int, preserve_recent_tokens: int | None = None) -> int:
    """Tokens the tail may hold: the setting when there is one, else 25 % of usable, clamped."""
    if preserve_recent_tokens is not None:
        return max(0, preserve_recent_tokens)
    # OpenCode floors usable × 0.25; an unlimited window (usable 0) gets the minimum.
    return min(MAX_PRESERVE_RECENT_TOKENS, max(MIN_PRESERVE_RECENT_TOKENS, int(usable * RECENT_SHARE)))


@dataclass(frozen=True)
class TailSelection:
    tail_start_id: str | None
    """First message kept verbatim; None = no tail, summarize everything."""
    tail_start_seq: int | None
    head_end_seq: int | None
    """Last seq of the head (None = empty head)."""
    head_tokens: int
    tail_tokens: int
    split: bool
    """The oldest kept turn was split: its user prompt (and anything before the cut) is in the head."""
    turns_kept: int
    """Turns represented in the tail, the split one included."""

    @property
    def has_tail(self) -> bool:
        return self.tail_start_id is not None


def select_tail(
    rows: Sequence[MessageRow],
    *,
    budget: int,
    tail_turns: int = 2,
    total_tokens: int | None = None,
) -> TailSelection:
    """Choose the recent messages to keep verbatim within `budget` tokens.

    Walks the last `tail_turns` turns newest first and keeps each whole turn that still fits. The
    first turn that does not fit is split: its longest suffix that fits and starts at an
    assistant message is kept (the user prompt goes to the head), and the walk stops. There is
    no tail when nothing fits or when the tail would start at the first row (no head to summarize).

    Rows before the first turn start (a previous compaction's marker and summary) are never
    part of the tail: they are carried forward by the next summary, not kept verbatim.

    `total_tokens`, the sum of every row's tokens, may be passed by a caller that maintains it;
    otherwise it is summed here, the only step that reads every row.
    """
    if not rows:
        return TailSelection(None, None, None, 0, 0, False, 0)
    first = _first_turn_start(rows)
    tail = None if first is None or tail_turns <= 0 or budget <= 0 else _walk(rows, first, budget, tail_turns)
    total = total_tokens if total_tokens is not None else sum(row.tokens for row in rows)
    if tail is None or tail.start == 0:
        return TailSelection(None, None, rows[-1].seq, total, 0, False, 0)
    start = rows[tail.start]
    return TailSelection(
        tail_start_id=start.id,
        tail_start_seq=start.seq,
        head_end_seq=rows[tail.start - 1].seq,
        head_tokens=total - tail.tokens,
        tail_tokens=tail.tokens,
        split=tail.split,
        turns_kept=tail.turns,
    )


@dataclass(frozen=True, slots=True)
class _Tail:
    start: int
    tokens: int
    split: bool
    turns: int


def _first_turn_start(rows: Sequence[MessageRow]) -> int | None:
    # Scans only the leading partial turn, normally the two rows of a previous compaction.
    for i, row in enumerate(rows):
        if row.turn_start:
            return i
    return None


def _walk(rows: Sequence[MessageRow], first: int, budget: int, tail_turns: int) -> _Tail | None:
    """One backward pass: whole turns while they fit, then the best split of the next one."""
    kept: _Tail | None = None
    running = 0
    # The earliest assistant row of the current turn whose suffix still fits: where a split
    # would start. Token counts are non-negative, so the running sum only grows going back and
    # every assistant row passed before the budget broke is a valid split point.
    split_at: int | None = None
    split_tokens = 0
    for i in range(len(rows) - 1, first - 1, -1):
        row = rows[i]
        running += row.tokens
        if running > budget:
            if split_at is not None:
                kept = _Tail(split_at, split_tokens, True, (kept.turns if kept else 0) + 1)
            return kept
        if row.turn_start:
            kept = _Tail(i, running, False, (kept.turns if kept else 0) + 1)
            if kept.turns >= tail_turns:
                return kept
            split_at = None
        elif row.role == "assistant":
            split_at, split_tokens = i, running
    return kept


__all__ = [
    "MAX_PRESERVE_RECENT_TOKENS",
    "MIN_PRESERVE_RECENT_TOKENS",
    "MessageRow",
    "TailSelection",
    "Turn",
    "rows",
    "select_tail",
    "tail_budget",
    "turns",
]

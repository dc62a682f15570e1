"""Removal without an LLM (docs/design.md §14): Cipher's strategies, fixed.

Cipher's context manager gives every message a priority and removes messages until the count is
under a target. Its rules, as the seed describes them (the order matters, the first match wins):
a system message is CRITICAL; a tool message is HIGH; the first and the last message are HIGH;
a long message (> 800 tokens) is HIGH; a short one (< 20 tokens) without a question mark is LOW;
a message with function calls is HIGH; anything else is NORMAL. contextfold keeps system prompts
at session level, so here compaction markers and summaries are the CRITICAL messages, and the
call check comes before the short check (a call and its result are one `ToolPart`, so a short
"call" message is the pair itself and must not go first).

What this module does differently from Cipher:

* **Order is preserved.** The plan only names messages to drop; what stays is the input minus
  those, never reordered. Removed messages are only *reported* (`removed_ids`): the caller keeps
  them in the store.
* **Removal stops at the target.** Units go one by one, lowest priority first, and the walk stops
  the moment the count is at or under the target; then every removed unit that still fits under
  the target is given back (newest-removed first). Cipher removes whole configured chunks.
* **Pairs are never split** (structurally: a call and its result are one part of one message),
  and **turns stay whole at the edges.** A turn is a user prompt and the messages up to the next
  prompt. A turn that keeps anything keeps its prompt and its last message: only the steps
  between may be dropped one by one; the prompt and the last message go together, and only once
  the steps are gone (the whole turn goes). So no reply is ever left without the prompt it
  answers, no prompt is left without its turn's final message, and a conversation that started
  with a user message still does (what a rendered Anthropic body needs).
* **Some messages never go:** compaction markers and summaries (CRITICAL), the first
  `preserve_start` and last `preserve_end` messages, the newest turn's prompt and the latest
  message (the request must still say what is being asked), and a turn's prompt and last message
  while anything else in the turn is protected.
* **`middle` really removes the middle.** Cipher's middle strategy walks its middle region from
  the oldest message, which is the oldest strategy with a protected head. Here `middle` removes,
  within each priority, the messages nearest the centre of the region between `preserve_start`
  and `preserve_end` first and widens outwards; `oldest` removes, within each priority, the
  oldest first. Both walk LOW before NORMAL before HIGH and both honour both preserved ends.

`hybrid` plans both and keeps the one with the better efficiency score (the seed's formula,
below); both see the same protected messages, so both reach the target or neither does.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from typing import Literal

from contextfold.domain import Message
from contextfold.policy.turns import rows, turns

Strategy = Literal["middle", "oldest"]

LONG_MESSAGE_TOKENS = 800
"""A message with more tokens than this is HIGH priority."""
SHORT_MESSAGE_TOKENS = 20
"""A message with fewer tokens than this and no question mark is LOW priority."""
QUESTION_MARKS = ("?", "？")
"""The ASCII question mark and its full-width form (the seed is about Chinese conversations too)."""

TOKEN_WEIGHT = Fraction(6, 10)
PRESERVATION_WEIGHT = Fraction(4, 10)
RATIO_PLACES = 3
"""The seed's worked example rounds both ratios to three decimals before weighting them."""


class Priority(IntEnum):
    LOW = 0
    NORMAL = 1
    HIGH = 2
    CRITICAL = 3


def priority(message: Message, *, index: int, count: int) -> Priority:
    """The seed's priority for the message at `index` of a conversation of `count` messages.

    Tokens are what the message costs in the view (`in_view_tokens`).
    """
    if not 0 <= index < count:
        raise ValueError(f"index {index} is outside a conversation of {count} messages")
    if message.is_compaction:
        return Priority.CRITICAL
    if message.tool_parts:
        return Priority.HIGH
    if index == 0 or index == count - 1:
        return Priority.HIGH
    tokens = message.in_view_tokens
    if tokens > LONG_MESSAGE_TOKENS:
        return Priority.HIGH
    if tokens < SHORT_MESSAGE_TOKENS and not any(q in message.text for q in QUESTION_MARKS):
        return Priority.LOW
    return Priority.NORMAL


# -- provider defaults ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderDefaults:
    threshold: float
    """Remove when the context reaches this share of the window."""
    preserve_start: int
    preserve_end: int


DEFAULT_THRESHOLD = 0.9

_DEFAULT = ProviderDefaults(DEFAULT_THRESHOLD, 4, 5)
_PROVIDERS: dict[str, ProviderDefaults] = {
    # "Balanced start and end preservation" (the seed's GPT-4 row).
    "openai": ProviderDefaults(DEFAULT_THRESHOLD, 6, 6),
    # "Keeps more end messages, suited to Anthropic's conversation style."
    "anthropic": ProviderDefaults(DEFAULT_THRESHOLD, 5, 7),
    # "Large-context models need more conservative compression" (Cipher's Gemini 1.5 row; every
    # current Gemini model has a window at least that large).
    "google": ProviderDefaults(DEFAULT_THRESHOLD, 10, 10),
    # Local models: smaller windows, fewer messages kept.
    "lmstudio": ProviderDefaults(DEFAULT_THRESHOLD, 3, 4),
    "ollama": ProviderDefaults(DEFAULT_THRESHOLD, 3, 4),
}
_OPENAI_REASONING = ProviderDefaults(DEFAULT_THRESHOLD, 8, 8)
"""OpenAI o1: "more messages kept, for models that need more context"."""


def provider_defaults(provider: str, model: str | None = None) -> ProviderDefaults:
    """Preserved message counts per provider (Cipher's numbers); the threshold is 0.9 throughout.

    `provider` is matched case-insensitively; an unknown one gets the default (4 at the start,
    5 at the end). `model` only matters for OpenAI's o1 family (8 and 8).
    """
    key = provider.strip().casefold()
    if key == "openai" and model is not None and model.strip().casefold().startswith("o1"):
        return _OPENAI_REASONING
    return _PROVIDERS.get(key, _DEFAULT)


# -- plans ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemovalPlan:
    strategy: Strategy
    removed_ids: list[str]
    """The messages to leave out of the view, in conversation order (they stay in the store)."""
    tokens_before: int
    tokens_after: int
    """What the kept messages cost in the view (`in_view_tokens`), summed."""
    messages_before: int
    messages_after: int
    reached_target: bool
    reason: str

    @property
    def tokens_freed(self) -> int:
        return self.tokens_before - self.tokens_after

    def kept(self, messages: Sequence[Message]) -> list[Message]:
        """`messages` without the removed ones, in their order."""
        removed = set(self.removed_ids)
        return [m for m in messages if m.id not in removed]


def plan_middle(
    messages: Sequence[Message],
    *,
    target_tokens: int,
    preserve_start: int,
    preserve_end: int,
    pinned: frozenset[int] = frozenset(),
) -> RemovalPlan:
    """Remove from the centre of the unpreserved region outwards, lowest priority first, to the target."""
    return _plan("middle", messages, target_tokens, preserve_start, preserve_end, pinned)


def plan_oldest(
    messages: Sequence[Message],
    *,
    target_tokens: int,
    preserve_start: int,
    preserve_end: int,
    pinned: frozenset[int] = frozenset(),
) -> RemovalPlan:
    """Remove the oldest unpreserved messages first, lowest priority first, to the target."""
    return _plan("oldest", messages, target_tokens, preserve_start, preserve_end, pinned)


# -- efficiency and hybrid --------------------------------------------------------------------------


def efficiency(*, tokens_before: int, tokens_after: int, messages_before: int, messages_after: int) -> float:
    """The seed's score: 0.6 × token reduction + 0.4 × message preservation.

    Token reduction is 1 − compression ratio (tokens after / before); message preservation is
    messages after / before. As in the seed's worked example, both ratios are rounded to three
    decimals (half up) before weighting: 6,200 of 9,000 tokens and 12 of 15 messages give
    0.311 × 0.6 + 0.8 × 0.4 = 0.5066. An empty conversation counts as nothing reduced and
    everything preserved.
    """
    for name, value in (
        ("tokens_before", tokens_before),
        ("tokens_after", tokens_after),
        ("messages_before", messages_before),
        ("messages_after", messages_after),
    ):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if tokens_after > tokens_before or messages_after > messages_before:
        raise ValueError(
            f"a removal cannot grow the context: {tokens_before} → {tokens_after} tokens, "
            f"{messages_before} → {messages_after} messages"
        )
    compression = _ratio(tokens_after, tokens_before)
    preservation = _ratio(messages_after, messages_before)
    return float(TOKEN_WEIGHT * (1 - compression) + PRESERVATION_WEIGHT * preservation)


def plan_efficiency(plan: RemovalPlan) -> float:
    """`efficiency` of a plan's before and after figures."""
    return efficiency(
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        messages_before=plan.messages_before,
        messages_after=plan.messages_after,
    )


@dataclass(frozen=True)
class HybridChoice:
    plan: RemovalPlan
    scores: dict[str, float]
    """Each strategy's efficiency, by name (`middle`, `oldest`)."""
    why: str


def plan_hybrid(
    messages: Sequence[Message],
    *,
    target_tokens: int,
    preserve_start: int,
    preserve_end: int,
    pinned: frozenset[int] = frozenset(),
) -> HybridChoice:
    """Plan `middle` and `oldest`, keep the higher efficiency; a tie goes to the plan keeping more messages.

    When the two also keep as many messages, `middle` wins (the seed compares with `>=`).
    """
    middle = plan_middle(
        messages, target_tokens=target_tokens, preserve_start=preserve_start, preserve_end=preserve_end, pinned=pinned
    )
    oldest = plan_oldest(
        messages, target_tokens=target_tokens, preserve_start=preserve_start, preserve_end=preserve_end, pinned=pinned
    )
    scores = {"middle": plan_efficiency(middle), "oldest": plan_efficiency(oldest)}
    if scores["middle"] != scores["oldest"]:
        winner, loser = (middle, oldest) if scores["middle"] > scores["oldest"] else (oldest, middle)
    elif oldest.messages_after > middle.messages_after:
        winner, loser = oldest, middle
    else:
        winner, loser = middle, oldest
    return HybridChoice(winner, scores, _why(winner, loser, scores))


def _why(winner: RemovalPlan, loser: RemovalPlan, scores: dict[str, float]) -> str:
    w, lo = winner.strategy, loser.strategy
    sw, sl = scores[w], scores[lo]
    if winner.removed_ids == loser.removed_ids:
        return f"both plans remove the same messages (score {sw:.4f}); {w}'s is used"
    kept = f"{winner.messages_after} of {winner.messages_before} messages"
    figures = (
        f"{w} {sw:.4f} ({winner.tokens_after:,} tokens, {kept} kept) vs "
        f"{lo} {sl:.4f} ({loser.tokens_after:,} tokens, {loser.messages_after} kept)"
    )
    if sw == sl:
        if winner.messages_after > loser.messages_after:
            return f"a tie at {sw:.4f}; {w} keeps more messages ({winner.messages_after} vs {loser.messages_after})"
        return f"a tie at {sw:.4f} with as many messages kept; {w} is preferred on a tie"
    cut_w, cut_l = _cut(winner), _cut(loser)
    cuts = _cuts(winner, loser)
    if winner.messages_after > loser.messages_after:
        if cut_w >= cut_l:
            because = f"it keeps more messages and frees {'more' if cut_w > cut_l else 'as many'} tokens {cuts}"
        else:
            because = (
                f"keeping {winner.messages_after} messages instead of {loser.messages_after} outweighs "
                f"{lo}'s deeper token cut {_cuts(loser, winner)}"
            )
    elif winner.messages_after == loser.messages_after and cut_w > cut_l:
        because = f"it frees more tokens {cuts} with as many messages kept"
    elif winner.messages_after < loser.messages_after and cut_w > cut_l:
        because = (
            f"its deeper token cut {cuts} outweighs keeping {winner.messages_after} messages "
            f"instead of {loser.messages_after}"
        )
    else:  # only the three-decimal rounding of the ratios separates them
        because = "the two differ only in the rounding of their ratios"
    return f"{w} scores higher: {figures}; {because}"


def _cut(plan: RemovalPlan) -> float:
    return plan.tokens_freed / plan.tokens_before if plan.tokens_before else 0.0


def _cuts(a: RemovalPlan, b: RemovalPlan) -> str:
    """The two plans' token cuts as percentages, or as tokens freed when the percentages read alike."""
    pa, pb = f"{_cut(a):.1%}", f"{_cut(b):.1%}"
    if pa != pb or a.tokens_freed == b.tokens_freed:
        return f"({pa} vs {pb})"
    return f"({a.tokens_freed:,} vs {b.tokens_freed:,} tokens freed)"


def _ratio(part: int, whole: int) -> Fraction:
    """part / whole rounded half up to `RATIO_PLACES` decimals, exactly; 1 when `whole` is 0."""
    if whole == 0:
        return Fraction(1)
    scale = 10**RATIO_PLACES
    return Fraction((2 * part * scale + whole) // (2 * whole), scale)


# -- the walk ---------------------------------------------------------------------------------------

_Why = Literal["compaction", "pinned", "preserve_start", "preserve_end", "newest turn", "held turn"]


@dataclass(frozen=True, slots=True)
class _Unit:
    """Messages that are removed together: one message, or a turn's prompt with its last message."""

    members: tuple[int, ...]
    tokens: int
    key: tuple[int, ...]
    """Removal order: lower goes first."""
    frame: int | None = None
    """For a step inside a turn: the unit of that turn's prompt and last message (None when kept)."""
    steps: int = 0
    """For a prompt-and-last unit: how many step units must go before it can."""


@dataclass(frozen=True)
class _Layout:
    units: list[_Unit]
    protected: list[_Why | None]
    """Why each message can never be removed (None: it can)."""


def _plan(
    strategy: Strategy,
    messages: Sequence[Message],
    target: int,
    preserve_start: int,
    preserve_end: int,
    pinned: frozenset[int] = frozenset(),
) -> RemovalPlan:
    if target < 0:
        raise ValueError(f"target_tokens must be >= 0, got {target}")
    if preserve_start < 0 or preserve_end < 0:
        raise ValueError(f"preserve_start and preserve_end must be >= 0, got {preserve_start}, {preserve_end}")
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids):
        raise ValueError("message ids must be unique: the plan names removed messages by id")
    tokens = [m.in_view_tokens for m in messages]
    total = sum(tokens)
    count = len(messages)
    if total <= target:
        return RemovalPlan(
            strategy=strategy,
            removed_ids=[],
            tokens_before=total,
            tokens_after=total,
            messages_before=count,
            messages_after=count,
            reached_target=True,
            reason=f"already within the target: {total:,} ≤ {target:,} tokens; nothing removed",
        )
    layout = _layout(strategy, messages, tokens, preserve_start, preserve_end, pinned)
    removed, given_back = _walk(layout.units, total, target)
    gone = sorted(i for uid in removed for i in layout.units[uid].members)
    after = total - sum(tokens[i] for i in gone)
    reached = after <= target
    if reached:
        order = "from the middle outwards" if strategy == "middle" else "oldest first"
        back = f"; {given_back} given back that fit under the target" if given_back else ""
        reason = (
            f"removed {len(gone)} of {count} messages ({total - after:,} tokens), lowest priority "
            f"first, {order}: {after:,} ≤ target {target:,} tokens{back}"
        )
    else:
        reason = _short_reason(layout, tokens, gone, after, target, preserve_start, preserve_end)
    return RemovalPlan(
        strategy=strategy,
        removed_ids=[ids[i] for i in gone],
        tokens_before=total,
        tokens_after=after,
        messages_before=count,
        messages_after=count - len(gone),
        reached_target=reached,
        reason=reason,
    )


def _layout(
    strategy: Strategy,
    messages: Sequence[Message],
    tokens: list[int],
    preserve_start: int,
    preserve_end: int,
    pinned: frozenset[int] = frozenset(),
) -> _Layout:
    count = len(messages)
    prios = [priority(m, index=i, count=count) for i, m in enumerate(messages)]
    protected: list[_Why | None] = [None] * count
    for i in range(count):
        if prios[i] is Priority.CRITICAL:
            protected[i] = "compaction"
        elif messages[i].seq in pinned:
            protected[i] = "pinned"
        elif i < preserve_start:
            protected[i] = "preserve_start"
        elif i >= count - preserve_end:
            protected[i] = "preserve_end"
        elif i == count - 1:
            protected[i] = "newest turn"
    lo = min(preserve_start, count)
    centre = lo + max(lo, count - preserve_end) - 1  # twice the centre of the unpreserved region

    def key(members: Sequence[int]) -> tuple[int, ...]:
        rank = max(prios[i] for i in members)
        first = members[0]
        if strategy == "middle":
            return (rank, min(abs(2 * i - centre) for i in members), first)
        return (rank, first)

    def unit(members: tuple[int, ...], frame: int | None = None, steps: int = 0) -> _Unit:
        return _Unit(members, sum(tokens[i] for i in members), key(members), frame, steps)

    units: list[_Unit] = []
    groups = turns(rows(messages))
    newest = next((t for t in reversed(groups) if not t.leading), None)
    for group in groups:
        if group.leading:  # before the first prompt (a compaction marker, say): no turn to keep whole
            units.extend(unit((i,)) for i in range(group.start, group.end) if protected[i] is None)
            continue
        edges = (group.start,) if group.end - group.start == 1 else (group.start, group.end - 1)
        if group is newest:
            for i in edges:
                protected[i] = protected[i] or "newest turn"
        held = any(protected[i] is not None for i in range(group.start, group.end))
        if held:
            for i in edges:
                protected[i] = protected[i] or "held turn"
        frame = None if held else len(units) + (group.end - group.start - len(edges))
        units.extend(unit((i,), frame) for i in range(group.start + 1, group.end - 1) if protected[i] is None)
        if not held:
            units.append(unit(edges, None, group.end - group.start - len(edges)))
    return _Layout(units, protected)


def _walk(units: list[_Unit], total: int, target: int) -> tuple[list[int], int]:
    """Remove units in key order until the count is at or under `target`, then give back what fits.

    Returns the removed unit indices and how many were given back. Afterwards no removed unit
    can be restored on its own without going over max(target, tokens left) or orphaning a step
    whose turn's prompt is gone.
    """
    heap = [(u.key, uid) for uid, u in enumerate(units) if u.steps == 0]
    heapq.heapify(heap)
    waiting = [u.steps for u in units]
    removed = [False] * len(units)
    order: list[int] = []
    current = total
    while current > target and heap:
        _, uid = heapq.heappop(heap)
        removed[uid] = True
        order.append(uid)
        current -= units[uid].tokens
        frame = units[uid].frame
        if frame is not None:
            waiting[frame] -= 1
            if waiting[frame] == 0:
                heapq.heappush(heap, (units[frame].key, frame))
    # A turn's prompt-and-last unit is removed after all its steps, so going back in reverse it is
    # decided before any of them: a step comes back only into a turn that is still there.
    budget = max(target, current)
    given_back = 0
    for uid in reversed(order):
        u = units[uid]
        if current + u.tokens > budget or (u.frame is not None and removed[u.frame]):
            continue
        removed[uid] = False
        current += u.tokens
        given_back += 1
    return [uid for uid in order if removed[uid]], given_back


_WHY_LABELS: dict[_Why, str] = {
    "compaction": "compaction markers and summaries",
    "pinned": "pinned messages",
    "preserve_start": "preserve_start",
    "preserve_end": "preserve_end",
    "newest turn": "the newest prompt and the latest message",
    "held turn": "prompts and last messages of turns that keep a protected message",
}


def _short_reason(
    layout: _Layout,
    tokens: list[int],
    gone: list[int],
    after: int,
    target: int,
    preserve_start: int,
    preserve_end: int,
) -> str:
    tally: dict[str, list[int]] = {}
    removed = set(gone)
    for i, why in enumerate(layout.protected):
        if why is not None and i not in removed:
            entry = tally.setdefault(why, [0, 0])
            entry[0] += 1
            entry[1] += tokens[i]
    parts = []
    for why, label in _WHY_LABELS.items():
        if why in tally:
            n, t = tally[why]
            if why == "preserve_start":
                label = f"the first {preserve_start} (preserve_start)"
            elif why == "preserve_end":
                label = f"the last {preserve_end} (preserve_end)"
            parts.append(f"{label}: {n} message{'s' if n != 1 else ''}, {t:,} tokens")
    freed = sum(tokens[i] for i in gone)
    return (
        f"target {target:,} not reached: {after:,} tokens remain, {after - target:,} over, after "
        f"removing every removable message ({len(gone)}, {freed:,} tokens); the rest is protected — " + "; ".join(parts)
    )


__all__ = [
    "DEFAULT_THRESHOLD",
    "HybridChoice",
    "LONG_MESSAGE_TOKENS",
    "Priority",
    "ProviderDefaults",
    "RemovalPlan",
    "SHORT_MESSAGE_TOKENS",
    "Strategy",
    "efficiency",
    "plan_efficiency",
    "plan_hybrid",
    "plan_middle",
    "plan_oldest",
    "priority",
    "provider_defaults",
]

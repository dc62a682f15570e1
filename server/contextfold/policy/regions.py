"""Regions: Claude Code style compaction of runs of tool calls (docs/design.md §13).

Every part of the view is pinned or not, compactable or not. System prompts, user text,
assistant text and summaries are never compactable; tool parts (a call and its result are one
`ToolPart`) and reasoning are. The newest `keep_recent_tokens` of the view are pinned: walking
newest → oldest, a part is pinned while the in-view cost of the parts newer than it is below the
budget. A *region* is a maximal run of compactable, unpinned tool parts that no region summary
covers yet, across message boundaries; a non-compactable part, a pinned part, a pending call, a
part already summarized or a compaction message ends it. Reasoning and whitespace-only text do
not end a run (they carry nothing the run would split) but are never marked: signed thinking must
be replayed byte for byte.

The plan summarizes the largest region first, asking for about a fifth of the tokens the summary
replaces (the region's, less its first call, which stays in view; `digest_budget`), until the
view costs no more than the target (`target_tokens`: under half of usable for a soft compaction,
as the seed says, leaving room for the turns to come; under usable when starting at or above the
hard threshold, so the request fits). A summary replaces a region in the view by re-marking
its parts, never by removing them, so every call keeps its id and name and pairing holds in both
wire formats: the first part shows the summary (`view_text`), the others a short pointer with
their input cleared. A part with `view_text` is never compactable again, so a summary is never
summarized. When the summarizer fails (returns None), the oldest remaining region is dropped
instead, with a visible `[Earlier turns truncated: …]` note. The summarizer is the rule-based
digest (`policy.digest`, at most `max_digest_tokens`) unless the caller passes another: the
service passes the digests an LLM wrote (`compaction.region_digest`), the rule's for any region it
did not write.

Everything here is pure: the caller applies the marks and stores them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextfold.domain import Message, Part, ReasoningPart, TextPart, ToolPart
from contextfold.policy.digest import digest
from contextfold.tokens.counting import TokenCounter, count_in_view

KEEP_RECENT_TOKENS = 20_000
"""The newest this-many tokens of the view are pinned (Claude Code's figure)."""
TARGET_FRACTION = 5
"""A region's summary is asked to fit in 1/5 of the tokens it replaces (the seed's `summarize_region`)."""
MIN_DIGEST_TOKENS = 128
"""A small region's summary may take up to this many tokens (at most half of what it replaces):
a fifth of a few hundred tokens holds no more than the header, not a line a call."""
MAX_DIGEST_TOKENS = 8_000
"""The rule-based digest of one region takes at most this many tokens (`regions_digest_max_tokens`)."""
SOFT_TARGET = 0.50
"""A compaction started below the hard threshold aims under this share of usable (the seed's soft
compaction: "get under 50 %, to leave room for the turns to come")."""
SUMMARIZED_ABOVE = "(summarized above)"
"""What the second and later parts of a summarized region show (an empty result is invalid)."""
TRUNCATED_ABOVE = "(truncated above)"
"""What the second and later parts of a dropped region show."""

Summarize = Callable[[list[ToolPart], int], "str | None"]
"""(the region's parts, the token budget) → the summary, or None when summarizing failed."""


@dataclass(frozen=True)
class Region:
    parts: list[tuple[str, int]]
    """(message id, index in `message.parts`) of each tool part, oldest first."""
    tokens: int
    """What the parts cost in the view now."""
    first_index: int
    """Position of the first part among all the view's parts (smaller = older)."""


@dataclass(frozen=True)
class RegionMark:
    message_id: str
    index: int
    part: ToolPart
    """The part as it is to be stored: `view_text` set (and, after the first, `input_cleared`)."""
    freed: int
    """Tokens the mark frees in the view; the first part of a region may free less than nothing."""


@dataclass(frozen=True)
class RegionPlan:
    marks: list[RegionMark]
    regions_summarized: int
    regions_dropped: int
    tokens_before: int
    tokens_after: int
    reached_target: bool
    reason: str


# -- regions ---------------------------------------------------------------------------------------


def find_regions(
    messages: Sequence[Message],
    *,
    keep_recent_tokens: int = KEEP_RECENT_TOKENS,
    counter: TokenCounter,
    pinned: frozenset[int] = frozenset(),
) -> list[Region]:
    """The view's regions, oldest first. `messages` are the messages in view, oldest first."""
    cutoff = _pinned_from(messages, keep_recent_tokens, counter)
    regions: list[Region] = []
    run: list[tuple[str, int]] = []
    run_tokens = 0
    run_start = 0

    def close() -> None:
        nonlocal run, run_tokens
        if run:
            regions.append(Region(run, run_tokens, run_start))
        run, run_tokens = [], 0

    position = 0
    for message in messages:
        if message.is_compaction or message.seq in pinned:  # a pinned message stays verbatim
            close()
            position += len(message.parts)
            continue
        for index, part in enumerate(message.parts):
            if position >= cutoff:
                close()
                return regions  # everything from here on is pinned
            if _compactable(part):
                if not run:
                    run_start = position
                run.append((message.id, index))
                run_tokens += count_in_view(part, counter)
            elif not _transparent(part):
                close()
            position += 1
    close()
    return regions


def _pinned_from(messages: Sequence[Message], keep: int, counter: TokenCounter) -> int:
    """Position of the oldest pinned part (the count of parts when none is pinned)."""
    position = sum(len(m.parts) for m in messages)
    if keep <= 0:
        return position
    seen = 0
    for message in reversed(messages):
        for part in reversed(message.parts):
            if seen >= keep:
                return position
            position -= 1
            seen += count_in_view(part, counter)
    return position


def _compactable(part: Part) -> bool:
    """A finished tool part no summary covers yet (pending calls have nothing to summarize)."""
    return isinstance(part, ToolPart) and part.is_finished and part.view_text is None


def _transparent(part: Part) -> bool:
    """Parts a run passes over without taking them: reasoning and whitespace-only text."""
    return isinstance(part, ReasoningPart) or (isinstance(part, TextPart) and not part.text.strip())


# -- the plan --------------------------------------------------------------------------------------


def target_tokens(usable: int, *, urgent: bool, soft_target: float = SOFT_TARGET) -> int:
    """Where a compaction aims: just below `usable` when `urgent` (the session is hard or in
    overflow: the request must fit), else just below `soft_target` of it (a soft compaction)."""
    return int(usable * (1.0 if urgent else soft_target)) - 1


def plan_regions(
    messages: Sequence[Message],
    *,
    total_tokens: int,
    target_tokens: int,
    keep_recent_tokens: int = KEEP_RECENT_TOKENS,
    counter: TokenCounter,
    now: float,
    summarize: Summarize | None = None,
    max_digest_tokens: int = MAX_DIGEST_TOKENS,
    pinned: frozenset[int] = frozenset(),
) -> RegionPlan:
    """Which parts to re-mark, largest region first, until the view costs `target_tokens` or less.

    `total_tokens` is what the view costs now (system prompt included); `now` is stamped as
    `compacted_at` on each region's first part. `summarize(parts, budget)` defaults to `digest`
    (within `max_digest_tokens`). A region whose summary would not free anything is left alone.
    """
    by_id = {m.id: m for m in messages}
    if len(by_id) != len(messages):
        raise ValueError("plan_regions needs unique message ids")
    summarize = summarize or (
        lambda parts, budget: digest(parts, budget_tokens=min(budget, max_digest_tokens), counter=counter)
    )
    remaining = find_regions(messages, keep_recent_tokens=keep_recent_tokens, counter=counter, pinned=pinned)
    found = len(remaining)
    marks: list[RegionMark] = []
    freed = 0
    summarized = dropped = failures = skipped = 0
    failed: set[int] = set()  # first_index of regions the summarizer failed on: never asked twice
    while remaining and total_tokens - freed > target_tokens:
        candidates = [r for r in remaining if r.first_index not in failed]
        text = None
        if candidates:
            region = max(candidates, key=lambda r: (r.tokens, -r.first_index))
            parts = [_part(by_id, ref) for ref in region.parts]
            text = summarize(parts, digest_budget(replaced_tokens(region, parts, counter)))
            if text is None:
                failed.add(region.first_index)
                failures += 1
        if text is None:  # the summarizer failed: the oldest region goes instead, with a note
            region = min(remaining, key=lambda r: r.first_index)
            parts = [_part(by_id, ref) for ref in region.parts]
            n = len(parts)
            text, rest = f"[Earlier turns truncated: {n} tool call{'s' if n != 1 else ''} removed]", TRUNCATED_ABOVE
        else:
            rest = SUMMARIZED_ABOVE
        remaining.remove(region)
        region_marks = _marks(region, parts, text, rest, now, counter)
        region_freed = sum(m.freed for m in region_marks)
        if region_freed <= 0:
            skipped += 1
            continue
        marks += region_marks
        freed += region_freed
        if rest == SUMMARIZED_ABOVE:
            summarized += 1
        else:
            dropped += 1
    after = total_tokens - freed
    reached = after <= target_tokens
    return RegionPlan(
        marks=marks,
        regions_summarized=summarized,
        regions_dropped=dropped,
        tokens_before=total_tokens,
        tokens_after=after,
        reached_target=reached,
        reason=_reason(found, summarized, dropped, failures, skipped, freed, after, target_tokens, reached),
    )


def digest_budget(replaced: int) -> int:
    """The tokens a summary of `replaced` tokens is asked to fit in: a fifth (the seed's
    `summarize_region`), or for a small region up to `MIN_DIGEST_TOKENS`, at most half."""
    return max(replaced // TARGET_FRACTION, min(MIN_DIGEST_TOKENS, replaced // 2))


def replaced_tokens(region: Region, parts: Sequence[ToolPart], counter: TokenCounter) -> int:
    """What a region's summary replaces: the region, less its first call as it stays in view (the
    call's name and input, with the summary as its result)."""
    stays = count_in_view(parts[0].model_copy(update={"view_text": ""}), counter) if parts else 0
    return max(0, region.tokens - stays)


def _part(by_id: dict[str, Message], ref: tuple[str, int]) -> ToolPart:
    part = by_id[ref[0]].parts[ref[1]]
    assert isinstance(part, ToolPart)
    return part


def _marks(
    region: Region, parts: list[ToolPart], text: str, rest: str, now: float, counter: TokenCounter
) -> list[RegionMark]:
    out = []
    for i, ((message_id, index), part) in enumerate(zip(region.parts, parts, strict=True)):
        if i == 0:
            marked = part.model_copy(update={"view_text": text, "compacted_at": now})
        else:
            marked = part.model_copy(update={"view_text": rest, "input_cleared": True})
        freed = count_in_view(part, counter) - count_in_view(marked, counter)
        out.append(RegionMark(message_id, index, marked, freed))
    return out


def _reason(
    found: int,
    summarized: int,
    dropped: int,
    failures: int,
    skipped: int,
    freed: int,
    after: int,
    target: int,
    reached: bool,
) -> str:
    if found == 0:
        done = "nothing to compact: no region outside the pinned recent tokens"
    else:
        bits = [f"{found} region{'s' if found != 1 else ''} found", f"{summarized} summarized"]
        if dropped or failures:
            bits.append(f"{dropped} dropped after {failures} summarizer failure{'s' if failures != 1 else ''}")
        if skipped:
            bits.append(f"{skipped} left alone (the replacement would not be smaller)")
        done = ", ".join(bits) + f"; {freed:,} tokens freed"
    where = "within" if reached else "still above"
    return f"{done}; the view is {after:,} tokens, {where} the target {target:,}"


__all__ = [
    "KEEP_RECENT_TOKENS",
    "MAX_DIGEST_TOKENS",
    "MIN_DIGEST_TOKENS",
    "Region",
    "RegionMark",
    "RegionPlan",
    "SOFT_TARGET",
    "SUMMARIZED_ABOVE",
    "TRUNCATED_ABOVE",
    "digest",
    "digest_budget",
    "find_regions",
    "plan_regions",
    "replaced_tokens",
    "target_tokens",
]

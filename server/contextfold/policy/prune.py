"""Prune: clear old tool outputs from the view, no LLM (docs/design.md §4).

OpenCode's rule: walk finished tool parts newest → oldest, leave the last two user turns alone,
let the newest 40,000 tokens of tool output stand, and mark everything older — but only when
that frees more than 20,000 tokens, so each prune is worth the prompt-cache miss it causes. The
walk stops at the latest compaction summary and at the first part already pruned: everything
older was handled by an earlier prune. Marking sets `compacted_at` (the caller does that); the
call stays in view and its output renders as a placeholder.

Anthropic's context editing (`clear_tool_uses_20250919`) is the other mode, chosen by giving
`keep_tool_uses` (Anthropic's `keep`): every tool result but the newest N tool uses is cleared,
whatever the turns and sizes, so neither the last-turns rule nor the protected window applies.
Every tool use counts toward N, protected and already-cleared ones included; protected and
excluded tools are still never cleared; a part pruned earlier is passed over, not a wall. In both
modes `clear_at_least` (Anthropic's) replaces the session's `minimum` ("at least" rather than
"more than"), `exclude_tools` adds to the protected tools and `clear_inputs` clears the calls'
inputs too (Anthropic's `clear_tool_inputs`). A region digest (`view_text`) is never cleared: it
already stands in for its outputs.

Counting: a part's stored `tokens` cover the whole call (wrapper, name, input, result). Only the
result (and, with `clear_inputs`, the input) leaves the view, and the policy counts nothing
itself, so the caller passes `remaining_tokens(part)`: what the cleared call still costs without
its placeholder. `remaining_counter` builds the exact function from a `TokenCounter`; without one
the remainder is a character estimate and the plan says so (`estimated`). A part the view already
shows cut (`view_cap`, overflow recovery) costs less than its stored count: `shown_counter` gives
what it costs as shown, so a plan never claims to free tokens the view no longer holds.

`prune_ceiling` bounds what the default rule can free from light message rows alone, so `status`
can tell that pruning cannot help without loading any part.

Small windows: OpenCode's 40,000 and 20,000 stand wherever the window holds the protection twice
over (`SEED_USABLE`, 80,000 usable tokens: gpt-4o's 128k window, 111,616 usable, keeps them). Below,
`prune_thresholds` gives up protection token for token with the window (usable − 40,000, the
minimum half of that) down to a quarter and an eighth of usable, where it stays (a 60,000-token
budget: 20,000 and 10,000; 32,000: 8,000 and 4,000). So the thresholds are continuous in the window,
and a window smaller than the protection itself can still be pruned. Values a session sets
(`prune_protect`, `prune_minimum`) are used as given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contextfold.domain import Message, MessageRow, ToolPart
from contextfold.formats.shown import tool_input_text
from contextfold.tokens.counting import (
    TOOL_OVERHEAD,
    TokenCounter,
    count_in_view,
    count_part,
    estimate_chars,
)

RemainingTokens = Callable[[ToolPart], int]
"""Tokens a part still costs in view once cleared, the placeholder not included."""
ShownTokens = Callable[[ToolPart], int]
"""Tokens a part costs in view now (its stored count unless the view shows it cut)."""


@dataclass(frozen=True)
class PruneOptions:
    protect: int = 40_000
    """The newest this-many tokens of tool output are never cleared."""
    minimum: int = 20_000
    """Apply only when more than this many tokens would be freed."""
    keep_turns: int = 2
    """The last N user turns are never touched."""
    protected_tools: frozenset[str] = frozenset({"skill"})
    """Tools whose output is never cleared and does not count toward `protect` (case-insensitive)."""
    keep_tool_uses: int | None = None
    """Anthropic's `keep`: clear every tool result but the newest N tool uses, whatever the turns
    and sizes (`keep_turns` and `protect` do not apply when this is given)."""
    clear_at_least: int | None = None
    """Anthropic's `clear_at_least`: apply only when at least this many tokens are freed (replaces `minimum`)."""
    exclude_tools: frozenset[str] = frozenset()
    """Anthropic's `exclude_tools`: like `protected_tools`, matched case-insensitively."""
    clear_inputs: bool = False
    """Clear the calls' inputs as well as their outputs."""
    pinned: frozenset[int] = frozenset()
    """Seqs of pinned messages: their outputs are never cleared (passed over, not a wall)."""


SEED_USABLE = 2 * PruneOptions.protect
"""From this many usable tokens up (80,000), the seed's 40,000 and 20,000 stand as they are."""
PROTECT_SHARE = 0.25
"""Below `SEED_USABLE`, the default protection is never less than this share of usable."""
MINIMUM_SHARE = 0.125
"""Below `SEED_USABLE`, the default minimum is never less than this share of usable."""


def prune_thresholds(usable: int | None, *, protect: int | None = None, minimum: int | None = None) -> tuple[int, int]:
    """A session's `protect` and `minimum`: each as given, else the default (`PruneOptions`) from
    `SEED_USABLE` usable tokens up (or when the window is unlimited, None); below, what the window
    holds beyond the seed's protection (the minimum: half of it), but at least a quarter (an
    eighth) of usable. Continuous in `usable`: 80,000 gives 40,000 and 20,000, 79,999 one less."""
    defaults = PruneOptions()
    if usable is None:
        scaled = defaults.protect, defaults.minimum
    else:
        beyond = usable - (SEED_USABLE - defaults.protect)  # what the window holds beyond the protection
        scaled = (
            min(defaults.protect, max(int(usable * PROTECT_SHARE), beyond)),
            min(defaults.minimum, max(int(usable * MINIMUM_SHARE), beyond // 2)),
        )
    return (scaled[0] if protect is None else protect), (scaled[1] if minimum is None else minimum)


@dataclass(frozen=True)
class PrunedPart:
    message_id: str
    index: int
    """Position of the part in `message.parts`."""
    tool: str
    tokens: int
    """Tokens freed: what the part cost minus what stays (the call, its placeholder)."""
    call_id: str = ""


@dataclass(frozen=True)
class PrunePlan:
    parts: list[PrunedPart]
    """The parts the rule selects, newest first, even when the plan does not apply (for dry runs)."""
    tokens_freed: int
    applies: bool
    """False when the amount freed is below the threshold: the caller must mark nothing."""
    reason: str
    inputs_cleared: bool = False
    """The marked parts' inputs are to be cleared too (`clear_inputs`); `tokens` include them."""
    estimated: bool = False
    """Token figures rest on a character estimate of what stays (no `remaining_tokens` given)."""
    tokens_scanned: int = 0
    """Clearable tokens of every part the walk counted, protected window (or kept uses) included."""

    @property
    def to_mark(self) -> list[PrunedPart]:
        """The parts to set `compacted_at` on: all of them when the plan applies, none otherwise."""
        return self.parts if self.applies else []


@dataclass
class _Walk:
    options: PruneOptions
    placeholder_tokens: int
    remaining: RemainingTokens
    shown: ShownTokens
    skip_tools: frozenset[str]
    total: int = 0
    uses: int = 0
    marked: list[PrunedPart] = field(default_factory=list)
    stopped: str = ""

    def visit(self, message: Message, index: int, part: ToolPart, recent: bool) -> bool:
        """Consider one tool part; False when the walk must stop here."""
        self.uses += 1  # every tool use counts toward `keep_tool_uses`, recent or not
        keep = self.options.keep_tool_uses
        if recent or message.seq in self.options.pinned:
            return True
        if part.compacted_at is not None:
            if keep is not None:  # context editing clears every older result: already done here
                return True
            # Checked before the tool filters: a mark is where the previous prune's walk ended,
            # whatever the tool (the filters may have changed since).
            self.stopped = "an output pruned earlier"
            return False
        if not part.is_finished:  # pending or running: there is no output to clear yet
            return True
        if part.view_text is not None or part.name.casefold() in self.skip_tools:
            return True
        clearable = max(0, self.shown(part) - self.remaining(part))
        self.total += clearable
        if keep is not None:
            if self.uses <= keep:
                return True
        elif self.total <= self.options.protect:
            return True
        freed = clearable - self.placeholder_tokens
        if freed > 0:  # a placeholder bigger than the output would grow the context
            self.marked.append(PrunedPart(message.id, index, part.name, freed, part.call_id))
        return True


def plan_prune(
    messages: Sequence[Message],
    options: PruneOptions = PruneOptions(),
    *,
    placeholder_tokens: int,
    remaining_tokens: RemainingTokens | None = None,
    shown_tokens: ShownTokens | None = None,
) -> PrunePlan:
    """Which tool outputs to clear, newest first, and whether clearing them is worth it.

    `messages` are the messages in view, oldest first, with stored counts. `placeholder_tokens` is
    what one placeholder costs (`[Old tool result content cleared]`); `remaining_tokens(part)` is
    what the cleared call still costs without it, `shown_tokens(part)` what it costs in view now
    (default: its stored count; see the module notes).
    """
    skip = frozenset(t.casefold() for t in options.protected_tools | options.exclude_tools)
    walk = _Walk(
        options,
        max(0, placeholder_tokens),
        remaining_tokens or _estimated_remaining(options.clear_inputs),
        shown_tokens or _stored_tokens,
        skip,
    )
    _run(walk, messages)
    freed = sum(p.tokens for p in walk.marked)
    applies, reason = _verdict(walk, freed)
    return PrunePlan(
        parts=walk.marked,
        tokens_freed=freed,
        applies=applies,
        reason=reason,
        inputs_cleared=options.clear_inputs,
        estimated=remaining_tokens is None,
        tokens_scanned=walk.total,
    )


def _run(walk: _Walk, messages: Sequence[Message]) -> None:
    turns_seen = 0
    # Context editing (`keep_tool_uses`) protects by tool use, never by turn.
    keep_turns = 0 if walk.options.keep_tool_uses is not None else walk.options.keep_turns
    for message in reversed(messages):
        if message.starts_turn:
            turns_seen += 1
        if message.summary:
            # Everything older is what that summary replaced. (OpenCode checks this only outside
            # the recent turns and so can walk into hidden history; here the summary is a wall.)
            walk.stopped = "the latest compaction summary"
            return
        # The user message that opens the Nth-newest turn is counted before this test, so the
        # last `keep_turns` turns are exactly the messages skipped.
        recent = turns_seen < keep_turns
        for index in range(len(message.parts) - 1, -1, -1):
            part = message.parts[index]
            if isinstance(part, ToolPart) and not walk.visit(message, index, part, recent):
                return


def _verdict(walk: _Walk, freed: int) -> tuple[bool, str]:
    options = walk.options
    count = len(walk.marked)
    where = f"; the walk stopped at {walk.stopped}" if walk.stopped else ""
    if count == 0 and options.keep_tool_uses is not None:
        return False, (
            f"nothing to prune: every tool output is among the newest {options.keep_tool_uses:,} tool uses "
            "kept by keep_tool_uses, protected, already cleared, or no bigger than the placeholder"
        )
    if count == 0:
        if walk.total <= options.protect:
            return False, (
                f"nothing to prune: {walk.total:,} tokens of older tool output, "
                f"within the protected newest {options.protect:,}{where}"
            )
        return False, (
            f"nothing to prune: the outputs beyond the protected newest {options.protect:,} tokens "
            f"are kept by keep_tool_uses or are no bigger than the placeholder{where}"
        )
    found = f"{count} output{'s' if count != 1 else ''} would free {freed:,} tokens"
    if options.clear_at_least is not None:
        if freed >= options.clear_at_least:
            return True, f"{found} (at least clear_at_least={options.clear_at_least:,})"
        return False, f"{found}, less than clear_at_least={options.clear_at_least:,}: not worth a cache miss"
    if freed > options.minimum:
        return True, f"{found} (more than the minimum {options.minimum:,})"
    return False, f"{found}, not more than the minimum {options.minimum:,}: not worth a cache miss"


def prune_ceiling(rows: Sequence[MessageRow], options: PruneOptions = PruneOptions()) -> int:
    """An upper bound on what the default rule (no `keep_tool_uses`) can free, from rows alone.

    `rows` are the rows in view, oldest first. The walk only clears outputs of messages older than
    the last `keep_turns` turns and newer than the latest summary, and never more than such a
    message costs in view; the protected window is left out of the bound, so it is loose but safe:
    when it is no more than the minimum, no prune can apply.
    """
    turns_seen = ceiling = 0
    for row in reversed(rows):
        if row.turn_start:
            turns_seen += 1
        if row.summary:
            break
        if turns_seen >= options.keep_turns:
            ceiling += row.tokens
    return ceiling


# -- what a cleared call still costs ---------------------------------------------------------------


def _stored_tokens(part: ToolPart) -> int:
    return part.tokens


def shown_counter(counter: TokenCounter) -> ShownTokens:
    """The exact `shown_tokens` for a model: counts only the parts the view shows cut."""

    def shown(part: ToolPart) -> int:
        return part.tokens if part.view_cap is None and not part.input_cleared else count_in_view(part, counter)

    return shown


def _cleared(part: ToolPart, clear_inputs: bool) -> ToolPart:
    update: dict[str, object] = {"output": "", "error": "", "attachments": []}
    if clear_inputs:
        update.update(input={}, raw_arguments=None)  # counted as an empty arguments object
    return part.model_copy(update=update)


def remaining_counter(counter: TokenCounter, *, clear_inputs: bool = False) -> RemainingTokens:
    """The exact `remaining_tokens` for a model: counts the call as it stays once cleared.

    For callers (the service); it counts only the call's name and input, never the history.
    """

    def remaining(part: ToolPart) -> int:
        return count_part(_cleared(part, clear_inputs), counter)

    return remaining


INPUT_ESTIMATE_FACTOR = 2.0
"""Call inputs are JSON, denser than prose: a median of 3.4 characters a token over the corpus,
down to 1.6 for short punctuation-heavy ones, where the plain estimate assumes 4. Doubling it
(≈ 2 characters a token) over-counts what stays for nearly every real call, so an estimated plan
under-reports what it frees rather than promising tokens it cannot deliver."""


def _estimated_remaining(clear_inputs: bool) -> RemainingTokens:
    """Without a counter: the wrapper plus a cautious estimate of name and input (labelled estimated)."""

    def remaining(part: ToolPart) -> int:
        text = part.name if clear_inputs else part.name + tool_input_text(part)
        return TOOL_OVERHEAD + math.ceil(estimate_chars(text) * INPUT_ESTIMATE_FACTOR)

    return remaining


__all__ = [
    "PrunePlan",
    "PruneOptions",
    "PrunedPart",
    "RemainingTokens",
    "ShownTokens",
    "plan_prune",
    "prune_ceiling",
    "prune_thresholds",
    "remaining_counter",
    "shown_counter",
]

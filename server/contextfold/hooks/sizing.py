"""How many tokens the handover after an agent's compaction may add: what the window can spare.

After Claude Code or Codex compacts, the model holds what every call reads (system prompt, tools,
memory files), the agent's summary and what the agent attaches again (Claude Code re-reads up to
five recent files); the rest of the usable window is free until the next compaction. The handover
takes a share of that free room (`hook_context_room_share`), never more than `hook_context_tokens`
and never less than `hook_context_min_tokens` (both settings): a session that left the window
crowded gets a small handover, one with room a larger one. Within that budget the handover gives
only what the agent's summary lacks (`handover.handover`), and no names further down the working
set than the budget would reach were nothing known: when the summary holds most of it, the handover
is smaller than its budget.

What is in view after the agent's compaction is estimated (`Room`):
- what every call reads: the smallest input any of the agent's calls reported (Claude Code's and
  Codex's transcripts carry each response's usage, which the import keeps); when none is reported,
  `UNREPORTED_SHARE` of usable;
- the agent's summary: its tokens when the hook has it (PostCompact, Codex's SessionStart), else
  `SUMMARY_ESTIMATE`;
- what the agent attaches again: `REATTACHED`.

Claude Code gives the hook its summary only at PostCompact, after SessionStart(compact) — the last
point where a hook adds context before the model goes on. So SessionStart, blind to the summary,
hands over `START_SHARE` of the budget (the most relevant of everything); PostCompact measures
what the summary lacks and keeps the rest of the budget for that, given with the next prompt.
Codex has its summary at its one event and spends the whole budget there.

Pure arithmetic: the runner gives it the settings and the counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.domain import Message

SUMMARY_ESTIMATE = 5_000
"""Tokens of the agent's summary when the hook does not have it yet: Claude Code's summaries on
the corpus's real compactions are 1,480 to 6,150 tokens."""
REATTACHED = 25_000
"""What the agent puts back in view after its summary: Claude Code re-reads up to five recently
read files of up to 5,000 tokens each (its documentation); on the corpus's real compactions, the
first call after one read 1,000 to 33,000 tokens more than the fixed part and the summary."""
UNREPORTED_SHARE = 0.2
"""Of usable, what every call is taken to read when no call reported its usage."""
START_SHARE = 0.8
"""Of the budget, what SessionStart(compact) gives while the summary is unknown; PostCompact has
the rest for what the summary turns out to lack. On the projects the rules were tuned on (see
benchmarks/bench_hooks.py), 2/3 and 0.8 ended equal with the next prompt's addition (97.5 %), and
0.8 kept more at SessionStart, the part the model has at once (96.6 % against 94.6 %)."""

MIN_PART = 150
"""A part of the handover smaller than this is not given: its header and closing line alone take
about 90 tokens."""


@dataclass(frozen=True)
class Room:
    """The window after the agent's compaction, in tokens."""

    usable: int
    fixed: int
    """What every call reads: system prompt, tools, memory files."""
    summary: int
    """The agent's summary (its count, or `SUMMARY_ESTIMATE`)."""
    reattached: int = REATTACHED

    @property
    def in_view(self) -> int:
        return self.fixed + self.summary + self.reattached

    @property
    def free(self) -> int:
        return max(0, self.usable - self.in_view)


def fixed_part(messages: Sequence[Message], usable: int) -> int:
    """The smallest input any call reported (each call reads at least the fixed part); a share of
    usable when no call reported one."""
    reported = [m.usage.total_input for m in messages if m.usage is not None and m.usage.total_input > 0]
    return min(reported) if reported else int(usable * UNREPORTED_SHARE)


def budget(room: Room, *, share: float, floor: int, cap: int) -> int:
    """The whole handover's budget: `share` of the free room, within [`floor`, `cap`] (the cap wins
    a floor above it)."""
    return min(cap, max(floor, int(room.free * share)))


def start_budget(whole: int, floor: int) -> int:
    """SessionStart's part while the summary is unknown: `START_SHARE` of the budget, at least
    the floor (within the budget)."""
    return min(whole, max(floor, int(whole * START_SHARE)))


def later_budget(whole: int, spent: int) -> int:
    """What is left of the budget for what the summary turned out to lack."""
    return max(0, whole - spent)


__all__ = [
    "MIN_PART",
    "REATTACHED",
    "START_SHARE",
    "SUMMARY_ESTIMATE",
    "UNREPORTED_SHARE",
    "Room",
    "budget",
    "fixed_part",
    "later_budget",
    "start_budget",
]

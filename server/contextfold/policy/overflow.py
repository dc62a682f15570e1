"""Where a session stands against its model's usable budget (docs/design.md §2).

`ok` → `soft` (prune now, compaction advised) → `hard` (compact now) → `overflow` (the next
request would not fit). A window of 0 is unlimited and never overflows. `soft` advises prune only
when the prune that would run now frees enough (the service runs its plan); otherwise compaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.names import OverflowState
from contextfold.tokens.catalog import Budget

State = OverflowState

RECOMMENDATIONS: dict[State, str] = {
    "ok": "none: keep going",
    "soft": "prune: clear old tool outputs now; compaction will be needed soon",
    "hard": "compact: summarize older history now",
    "overflow": "compact: the context no longer fits; compact before the next model call",
}


@dataclass(frozen=True)
class Assessment:
    tokens: int
    usable: int
    ratio: float
    state: State

    @property
    def recommended_action(self) -> str:
        return RECOMMENDATIONS[self.state]


def prune_falls_short(freed: int, minimum: int, *, at_most: bool) -> str:
    """The `soft` advice when the prune that would run now frees no more than `minimum` tokens.

    Agent sessions often hold one or two user turns, and the last turns are never pruned, so a
    prune can free almost nothing while the context is full: the next step that works is a
    compaction. `at_most` says `freed` is an upper bound rather than the plan's own figure.
    """
    amount = f"at most {freed:,}" if at_most else f"only {freed:,}"
    return (
        f"compact: pruning would free {amount} tokens (not more than the {minimum:,} minimum); "
        "summarize older history now"
    )


def assess(tokens: int, budget: Budget, *, soft_ratio: float = 0.70, hard_ratio: float = 0.90) -> Assessment:
    if budget.unlimited:
        return Assessment(tokens, 0, 0.0, "ok")
    usable = budget.usable
    ratio = tokens / max(usable, 1)
    if tokens >= usable:
        state: State = "overflow"
    elif ratio >= hard_ratio:
        state = "hard"
    elif ratio >= soft_ratio:
        state = "soft"
    else:
        state = "ok"
    return Assessment(tokens, usable, round(ratio, 4), state)


def calibrated_tokens(counted: int, reported: int | None) -> int:
    """Tokens in view, trusting the provider's own count where it has given one.

    `reported` is the provider's figure at its last report carried forward by our count of what
    changed since. The larger of that and our own count wins, so a tokenizer estimate can never
    talk the session out of an overflow.
    """
    return counted if reported is None else max(counted, reported)

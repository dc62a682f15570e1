"""Invariants by code: what every summary must carry, whoever wrote it (docs/design.md §10).

A model asked to keep paths, the user's rules and the error that blocks the work may paraphrase
or forget them. So after any summarizer the summary is parsed into the template (every section
present, in order) and checked against facts extracted from the head by code:

- every file edited in the head is named, with its exact path string (or that path relative to the
  project root Critical Context states), in Relevant Files;
- the user's own messages are quoted word for word in Constraints (`User [m12]: …`), newest
  first within `userwords.quote_budget` (a quote counts as there when its opening is, word for
  word, anywhere in the summary, whatever label the summarizer gave it);
- every explicit user constraint (from the head, and from the previous summary's Constraints)
  appears in Constraints, up to the newest `MAX_PINNED_CONSTRAINTS`: without a cap, a session
  whose user states many rules grows its summary by each one on every compaction until
  compaction frees nothing (older rules stay if the summarizer kept them; the report counts the
  ones not re-pinned);
- the latest unresolved error appears word for word in Blocked or Critical Context;
- the latest request (`userwords.goal`: not a greeting, an acknowledgement or a "continue") appears
  in Goal or Next Steps, or its quote in Constraints.

Whatever is missing is added, and listed in the report for the compaction history. Rejecting a
summary that is not smaller than what it replaces is the engine's job, not this one's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from contextfold.compaction import userwords
from contextfold.compaction.facts import Facts, collapse, extract_facts, names_path
from contextfold.compaction.template import (
    BLOCKED,
    CONSTRAINTS,
    CRITICAL,
    FILES,
    GOAL,
    LATEST_REQUEST,
    NEXT_STEPS,
    Summary,
    cite,
    from_root,
    parse_summary,
    stated_root,
)
from contextfold.domain import Message

__all__ = ["MAX_PINNED_CONSTRAINTS", "PinReport", "names_file", "names_path", "newest_constraints", "pin_facts"]

MAX_PINNED_CONSTRAINTS = 30
"""Constraints guaranteed a place, newest first. Real sessions state a handful."""


@dataclass(frozen=True)
class PinReport:
    added: list[str] = field(default_factory=list)
    """What had to be added, one line each (`file: …`, `user: …`, `constraint: …`, `error: …`,
    `instruction: …`)."""


def pin_facts(
    text: str, head: Sequence[Message] | Facts, *, previous: str | None = None, budget_tokens: int | None = None
) -> tuple[str, PinReport]:
    """`text` as a complete template with the pinned facts of `head` guaranteed; see the module doc.
    `head` may be its facts, already extracted (`engine.Plan.facts`).
    `budget_tokens`: the summary's budget, which sizes the user's quotes (`userwords.quote_budget`).

    A summary that already carries everything comes back as its own canonical rendering: for a
    summary rendered by `Summary.render` (as the extractive summarizer's is) that is the same text.
    """
    summary = parse_summary(text)
    facts = head if isinstance(head, Facts) else extract_facts(head)
    added: list[str] = []

    for touch in facts.edited_files:
        if not names_file(summary, touch.path):
            summary.add(FILES, f"{touch.path} — {touch.why}")
            added.append(f"file: {touch.path}")

    carried = parse_summary(previous)[CONSTRAINTS] if previous else []
    everywhere = [bullet for bullets in summary.sections.values() for bullet in bullets]
    for quote, shown in userwords.quotes(facts.said, carried, userwords.quote_budget(budget_tokens)):
        if not _contains(everywhere, quote.opening(shown)):
            summary.add(CONSTRAINTS, quote.bullet(shown))
            added.append(f"user: {quote.opening(shown)[:60]}")

    rules, older = newest_constraints([b for b in carried if userwords.parse_quote(b) is None] + facts.constraints)
    if unpinned := [r for r in older if not _contains(summary[CONSTRAINTS], r)]:
        added.append(f"constraints: {len(unpinned)} older ones not re-pinned (cap {MAX_PINNED_CONSTRAINTS})")
    for rule in rules:
        if not _contains(summary[CONSTRAINTS], rule) and summary.add(CONSTRAINTS, rule):
            added.append(f"constraint: {rule}")

    error = facts.unresolved_error
    if error is not None and not _contains(summary[BLOCKED] + summary[CRITICAL], error.text):
        summary.add(BLOCKED, f"{error.text} — {error.source} {cite([error.seq])}".rstrip())
        added.append(f"error: {error.text}")

    latest = userwords.goal(facts.said, facts.first_instruction).newest
    quoted = [b for b in summary[CONSTRAINTS] if userwords.parse_quote(b) is not None]
    if (
        latest
        and not _contains(summary[GOAL] + summary[NEXT_STEPS], latest)
        and not _contains(quoted, _opening(latest))
    ):
        summary.add(GOAL, LATEST_REQUEST + latest)
        added.append(f"instruction: {latest}")

    return summary.render(), PinReport(added)


def names_file(summary: Summary, path: str) -> bool:
    """Whether `summary`'s Relevant Files names `path`: whole, or relative to the project root its
    Critical Context states."""
    written = {path, from_root(path, stated_root(summary[CRITICAL]))}
    return any(names_path(bullet, form) for bullet in summary[FILES] for form in written)


def newest_constraints(rules: list[str]) -> tuple[list[str], list[str]]:
    """(the newest `MAX_PINNED_CONSTRAINTS` of `rules`, the older rest), `rules` being oldest first."""
    cut = max(0, len(rules) - MAX_PINNED_CONSTRAINTS)
    return rules[cut:], rules[:cut]


def _opening(text: str) -> str:
    return userwords.Quote(text, "").opening()


def _contains(bullets: list[str], text: str) -> bool:
    """Some bullet holds `text` (spacing and case aside: bullets are stored whitespace-collapsed)."""
    wanted = collapse(text).casefold()
    return any(wanted in bullet.casefold() for bullet in bullets)

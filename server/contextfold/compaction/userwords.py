"""The user's own words, quoted in every summary (Constraints & Preferences, `User [m12]: …`).

A correction the user made halfway through ("no, keep the old format") changes the work more than
any file does, and a model summarizing the history tends to fold it into its own paraphrase. So
each message the user wrote (`facts.user_words`: not tool results, not what a harness put in the
user's turn) is quoted word for word, with the stored message it came from:

- newest first, within `quote_budget` characters in all (`QUOTE_SHARE` of the summary's budget,
  at most `QUOTE_CHARS`): every message keeps at least its opening — `OPENING_CHARS`, or down to
  `MIN_OPENING_CHARS` when a long session's many messages would not fit otherwise (a user who
  wrote a hundred messages keeps the first words of each, not the whole of the newest forty) —
  then the newest ones are given their whole text up to `FULL_CHARS`; only when even the
  shortest openings do not fit do the oldest messages go;
- a previous summary's quotes are older than anything in the new history and are carried first;
- the same selection is what `pins` guarantees in a summary any model wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.compaction.agents.text import clip, collapse
from contextfold.compaction.record import Said
from contextfold.compaction.template import USER_SAID, cite

QUOTE_CHARS = 8_000
"""All quotes together at most (about 2,000 tokens of a 4,500-token summary)."""
QUOTE_SHARE = 0.45
"""Of a smaller summary budget, the share the quotes may take (`quote_budget`)."""
CHARS_PER_TOKEN = 4
FULL_CHARS = 1_000
OPENING_CHARS = 160
"""What each message keeps at least, when all of them fit so."""
MIN_OPENING_CHARS = 64
"""What each keeps at least when many messages share the budget: the words that say what was asked."""

_QUOTE = re.compile(r"^" + re.escape(USER_SAID) + r"(?: (\[[^\]]*\]))?: (.+)$", re.DOTALL)


@dataclass(frozen=True)
class Quote:
    text: str
    """The user's words, whitespace collapsed (possibly already cut by an earlier summary)."""
    citation: str
    """`[m12]`, or '' for messages that are not stored."""

    def bullet(self, limit: int) -> str:
        label = f"{USER_SAID} {self.citation}" if self.citation else USER_SAID
        return f"{label}: {clip(self.text, limit)}"

    def opening(self, limit: int = OPENING_CHARS) -> str:
        """What a summary must hold word for word for this quote to count as kept, when it is
        quoted in `limit` characters."""
        return clip(self.text, min(limit, OPENING_CHARS)).rstrip("…")


def quote_budget(summary_tokens: int | None) -> int:
    """Characters of quotes a summary of `summary_tokens` holds (None: no budget given)."""
    if summary_tokens is None:
        return QUOTE_CHARS
    return max(OPENING_CHARS, min(QUOTE_CHARS, int(summary_tokens * QUOTE_SHARE * CHARS_PER_TOKEN)))


def _opening_cap(lengths: Sequence[int], budget: int) -> int:
    """The largest opening, from `OPENING_CHARS` down to `MIN_OPENING_CHARS`, at which every
    message's opening fits in `budget` (`MIN_OPENING_CHARS` when none does: the oldest then go)."""
    if sum(min(n, OPENING_CHARS) for n in lengths) <= budget:
        return OPENING_CHARS
    low, high = MIN_OPENING_CHARS, OPENING_CHARS
    while high - low > 1:
        middle = (low + high) // 2
        if sum(min(n, middle) for n in lengths) <= budget:
            low = middle
        else:
            high = middle
    return low


def parse_quote(bullet: str) -> Quote | None:
    """The quote a `User [m12]: …` bullet holds, or None for any other bullet."""
    match = _QUOTE.match(bullet)
    if match is None:
        return None
    return Quote(match.group(2).strip(), match.group(1) or "")


def quotes(said: Sequence[Said], carried: Sequence[str] = (), budget: int = QUOTE_CHARS) -> list[tuple[Quote, int]]:
    """(quote, characters to show), oldest first: the previous summary's quote bullets (`carried`,
    other bullets ignored) and then the new history's messages, chosen newest first within
    `budget` characters as the module describes."""
    items = [q for q in map(parse_quote, carried) if q is not None]
    items += [Quote(collapse(s.text), cite(s.seqs)) for s in said]
    seen: set[str] = set()
    unique: list[Quote] = []
    for quote in reversed(items):  # newest first; a message said again is quoted where it was said last
        key = quote.text.casefold()
        if key not in seen:
            seen.add(key)
            unique.append(quote)
    cap = _opening_cap([len(q.text) for q in unique], budget)
    shown: list[int] = []
    left = budget
    for quote in unique:
        size = min(len(quote.text), cap)
        if size > left:
            break
        shown.append(size)
        left -= size
    for index, quote in enumerate(unique[: len(shown)]):
        more = min(len(quote.text), FULL_CHARS) - shown[index]
        if more > 0:
            more = min(more, left)
            shown[index] += more
            left -= more
    chosen = list(zip(unique, shown))
    chosen.reverse()
    return chosen


__all__ = [
    "FULL_CHARS",
    "MIN_OPENING_CHARS",
    "OPENING_CHARS",
    "QUOTE_CHARS",
    "Quote",
    "parse_quote",
    "quote_budget",
    "quotes",
]

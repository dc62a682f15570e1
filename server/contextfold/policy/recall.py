"""What a history search asks for, read from the words a person or a model writes: the query's
terms, and a time window ("yesterday", "last 2 hours", "2026-11-20", a timestamp).

No I/O: the service calls these and passes the results to the store. Every refusal is an
`InvalidInput` with one line naming why, and the limit a setting set.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from contextfold.errors import InvalidInput

_EDGE = "\"'`,;:!?()[]{}<>"
"""Punctuation a word loses at its ends ("(see foo.py)," is `see` and `foo.py`)."""
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')


@dataclass(frozen=True)
class Terms:
    terms: tuple[str, ...]
    any_term: bool
    """True when the query joined its terms with OR: a message with any of them matches."""


def parse_terms(text: str, *, max_chars: int, max_terms: int) -> Terms:
    """Plain words match wherever they appear, in any order, all of them; "a quoted phrase" is one
    term; OR between terms asks for any of them. Nothing a user types is query syntax beyond that,
    so no text can make the database's query parser fail."""
    if len(text) > max_chars:
        raise InvalidInput(
            "query", f"{len(text):,} characters, longer than search_max_query_chars ({max_chars:,}); shorten it"
        )
    terms: list[str] = []
    any_term = False
    for match in _TOKEN.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if word == "OR":
            any_term = True
            continue
        term = " ".join(phrase.split()) if phrase is not None else word.strip(_EDGE)
        if term and term.lower() not in (t.lower() for t in terms):
            terms.append(term)
            if len(terms) > max_terms:
                raise InvalidInput(
                    "query", f"more than search_max_terms ({max_terms}) words or phrases; keep the distinctive ones"
                )
    if not terms:
        raise InvalidInput("query", "no words to search for; give one or more words or a quoted phrase")
    if not any(len(t) >= 3 or not t.isascii() for t in terms):
        # A word of one or two Latin letters or digits matches nearly everything; one of two Chinese
        # or Japanese characters is an ordinary word, found by reading the scope (no index holds it).
        raise InvalidInput(
            "query",
            "every word is shorter than 3 characters; full-text search needs one of 3 or more (mode='regex' "
            "searches for anything)",
        )
    return Terms(tuple(terms), any_term)


_AGO = re.compile(
    r"^(?:(?:last|past)\s+)?(\d+(?:\.\d+)?|an?|one)?\s*"
    r"(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?|w|wk|weeks?)(?:\s+ago)?$"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DAYS = {"today": 0, "yesterday": 1}


def time_window(text: str, *, now: float, field: str) -> tuple[float, float]:
    """The interval (start, end) in seconds since the epoch that a phrase names, in UTC.

    A timestamp (seconds since the epoch) or an ISO time names an instant: (t, t). A date
    ("2026-11-20"), "today" and "yesterday" name that day; "last 2 hours", "past week",
    "3 days ago" reach from then until now.
    A search's `since` takes the start of its phrase and `until` the end, so since="yesterday"
    and until="yesterday" together are that one day.
    """
    phrase = " ".join(text.strip().lower().split())
    if not phrase:
        raise InvalidInput(field, "empty; give a time such as 'yesterday', 'last 2 hours' or 2026-11-20")
    if phrase == "now":
        return now, now
    try:
        number = float(phrase)
    except ValueError:
        pass
    else:
        if not math.isfinite(number) or abs(number) > 1e11:  # past year 5000: not a time
            raise InvalidInput(field, f"{text[:60]!r} is not a time (seconds since 1970)")
        return number, number
    day_start = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if phrase in _DAYS:
        start = day_start - timedelta(days=_DAYS[phrase])
        return start.timestamp(), (start + timedelta(days=1)).timestamp()
    if phrase in ("this week", "last week", "past week"):
        return now - 7 * 86400, now
    found = _AGO.match(phrase)
    if found and (found.group(1) or phrase.startswith(("last", "past"))):
        amount = found.group(1) or "1"
        count = 1.0 if amount in ("a", "an", "one") else float(amount)
        unit = found.group(2)
        seconds = _UNITS["m" if unit.startswith("mi") or unit == "m" else unit[0]]
        return now - count * seconds, now
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            field,
            f"cannot read {text[:60]!r} as a time; write a timestamp, an ISO date or time (2026-11-20, "
            "2026-11-20T14:00), 'today', 'yesterday', 'last 2 hours' or '3 days ago'",
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if len(text.strip()) <= 10:  # a date alone: the whole day
        return parsed.timestamp(), (parsed + timedelta(days=1)).timestamp()
    return parsed.timestamp(), parsed.timestamp()


def window(since: str | None, until: str | None, *, now: float) -> tuple[float | None, float | None]:
    """`since` and `until` as (start, end): the start of `since`'s phrase and the end of `until`'s."""
    lo = time_window(since, now=now, field="since")[0] if since is not None else None
    hi = time_window(until, now=now, field="until")[1] if until is not None else None
    if lo is not None and hi is not None and hi <= lo:
        raise InvalidInput("until", "is before since; nothing can be in that window")
    return lo, hi


_CITATION = re.compile(r"\[(m\d+[^\]]*)\]")
_RUN = re.compile(r"m(\d+)(?:\s*[–-]\s*m?(\d+))?")


def cited_runs(text: str) -> list[tuple[int, int]]:
    """The runs of message numbers the citations in `text` name: `[m12]`, `[m3, m9–m12]`."""
    runs: list[tuple[int, int]] = []
    for citation in _CITATION.finditer(text):
        runs += _runs(citation.group(1))
    return runs


def named_runs(text: str) -> list[tuple[int, int]]:
    """The messages `text` names, bare or as citations: "m12", "m9-m12", "[m3, m9–m12]"."""
    return _runs(text)


def _runs(text: str) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for run in _RUN.finditer(text):
        if len(run.group(1)) > 18 or (run.group(2) and len(run.group(2)) > 18):
            continue  # past any seq a store holds
        first = int(run.group(1))
        last = int(run.group(2)) if run.group(2) else first
        runs.append((min(first, last), max(first, last)))
    return runs


def snippet(text: str, terms: tuple[str, ...], chars: int) -> str:
    """About `chars` characters of `text` around the first term found, every term in it in **bold**,
    whitespace folded; the start of `text` when no term is in it (a match the index made of a
    part the snippet cannot show)."""
    flat = " ".join(text.split())
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.IGNORECASE)
    found = pattern.search(flat)
    start = 0 if found is None else max(0, found.start() - chars // 3)
    end = min(len(flat), start + chars)
    piece = flat[start:end]
    marked = pattern.sub(lambda m: f"**{m.group(0)}**", piece)
    return ("…" if start > 0 else "") + marked + ("…" if end < len(flat) else "")


# -- ranking -----------------------------------------------------------------------------------------

USER_WEIGHT = 2.0
"""How much more a hit in the user's own words counts than the same match elsewhere: what the
user asked for is the anchor of a history (`expand` reads what followed), while the assistant's
tool calls, their outputs and its replies repeat the same names and paths many times over."""
SUMMARY_WEIGHT = 0.5
"""How much a hit in a summary counts: a summary repeats what the messages it cites said, and the
hit on such a message shows the bullet citing it, so the copy yields to its source."""


class Ranked(Protocol):
    """What ranking reads of a store's hit (`store.SearchHit`)."""

    @property
    def role(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def summary(self) -> bool: ...
    @property
    def prose(self) -> bool: ...


H = TypeVar("H", bound=Ranked)


def weight(hit: Ranked) -> float:
    """The factor a hit's relevance is multiplied by: `SUMMARY_WEIGHT` for a summary,
    `USER_WEIGHT` for the user's text, 1 for the rest (assistant replies, tool calls and outputs,
    reasoning)."""
    if hit.summary:
        return SUMMARY_WEIGHT
    if hit.role == "user" and hit.prose:
        return USER_WEIGHT
    return 1.0


def ranked(hits: Sequence[H]) -> list[H]:
    """The hits of one answer best first: the store's relevance (lower scores are better, as
    SQLite's BM25 gives them) weighed by who wrote the words (`weight`). Ties keep the store's
    order, so the order is the same on every call."""

    def key(hit: H) -> float:
        w = weight(hit)
        return hit.score * w if hit.score <= 0 else hit.score / w

    return sorted(hits, key=key)

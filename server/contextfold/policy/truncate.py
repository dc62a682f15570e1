"""Truncation of tool outputs at ingest (docs/design.md §3).

A completed tool output that exceeds any limit (lines, UTF-8 bytes, characters, tokens) is cut
to a preview; the caller spills the full text and appends `hint()` so the model knows how to read
the rest. The limits are OpenCode's (2,000 lines, 50 KiB) further capped by OpenClaw's context
share, in tokens (`share_cap_tokens`, counted exactly by the caller's counter) with a character
cap (`share_cap_chars`) as the outer bound: dense text such as base64 or a minified file runs
under two characters a token, so a character cap alone lets a preview take half the window.
Pure functions: the caller does the spilling.

The preview is always original text (a prefix, a suffix, or both with one marker line between
them) and never exceeds any of the limits, the marker included. The hint is not part of the
budget: it is a fixed-size note the caller appends.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal

from contextfold.blobs.lines import READ_LIMIT_LINES

Count = Callable[[str], int]
"""Tokens of a text, as the session's model counts them (`TokenCounter.count`)."""
Direction = Literal["head", "tail", "head_tail", "auto"]
Kept = Literal["head", "tail", "head_tail"]

"""The `limit` the hint suggests for `read_output` (its default page size)."""
NEWLINE_WINDOW = 0.20
"""A cut moves back to a newline only if that newline lies in the last 20 % of the budget."""
HEAD_SHARE = 0.40
"""`head_tail` gives 40 % of the budget to the head and the rest to the tail, where errors are."""
END_LINES = 40
"""`looks_important_at_end` reads only this many lines from the end."""
_END_CHARS = 16_384
"""…and at most this many characters, so one giant last line cannot make it slow."""

_ENCODING = "utf-8"
_ERRORS = "surrogatepass"
"""Lone surrogates (from JSON `\\ud83d` escapes) are measured as the 3 bytes they would take,
instead of making `encode` raise on binary-ish output."""


# -- the context share -----------------------------------------------------------------------------


def share_cap_chars(
    context_window: int,
    *,
    share: float = 0.30,
    max_chars: int = 400_000,
    min_chars: int = 2_000,
) -> int:
    """Characters one output may keep: `share` of the window (4 chars a token), clamped.

    A window of 0 means unlimited, so only `max_chars` applies.
    """
    if context_window < 0:
        raise ValueError(f"context_window must be >= 0, got {context_window}")
    if context_window == 0:
        return max_chars
    # Decimal(str(share)) reads 0.3 as the user wrote it, so 0.3 × 128,000 × 4 is 153,600 and
    # not 153,599 from the binary float.
    share_chars = int(Decimal(str(share)) * context_window * 4)
    return max(min_chars, min(share_chars, max_chars))


def share_cap_tokens(context_window: int, *, share: float = 0.30, min_tokens: int = 500) -> int | None:
    """Tokens one output's preview may keep: `share` of the window, at least `min_tokens`.

    None for an unlimited window (0): then only the character caps apply.
    """
    if context_window < 0:
        raise ValueError(f"context_window must be >= 0, got {context_window}")
    if context_window == 0:
        return None
    return max(min_tokens, int(Decimal(str(share)) * context_window))


# -- result --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Truncation:
    preview: str
    """What stays in view: original text only, plus one marker line for `head_tail`."""
    direction: Kept
    """The direction actually used (`auto` resolved; `head_tail` may fall back to `tail`)."""
    total_lines: int
    total_bytes: int
    kept_lines: int
    """Lines with at least one character in the preview (a line cut in two counts as kept)."""
    kept_bytes: int
    """UTF-8 bytes of original text in the preview (the marker excluded)."""
    omitted_lines: int
    """Lines with no character in the preview; `kept_lines + omitted_lines == total_lines`."""
    omitted_bytes: int
    tail_start_line: int | None
    """For `head_tail` and `tail`: the 1-based line where the kept end begins."""
    resume_line: int
    """The 1-based line where reading should continue to see what the preview left out."""

    @property
    def omitted_range(self) -> tuple[int, int]:
        """First and last line (1-based) that the preview leaves out, wholly or in part."""
        if self.direction == "tail":
            return 1, max(1, (self.tail_start_line or 1) - 1)
        last = self.total_lines if self.tail_start_line is None else self.tail_start_line - 1
        return self.resume_line, max(self.resume_line, last)


# -- truncate --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Budget:
    lines: int
    bytes: int
    chars: int


def truncate(
    text: str,
    *,
    max_lines: int = 2000,
    max_bytes: int = 50 * 1024,
    max_chars: int | None = None,
    max_tokens: int | None = None,
    count: Count | None = None,
    direction: Direction = "auto",
) -> Truncation | None:
    """Cut `text` to fit every limit, or None when it already fits (nothing to spill).

    `max_tokens` caps the preview (the marker included) as `count` measures it. The text is
    counted once when it is within the other limits; a preview is cut by characters first, then
    shrunk in proportion to its excess tokens, counting only the preview.
    """
    if (max_tokens is None) != (count is None):
        raise ValueError("max_tokens and count go together")
    if min(max_lines, max_bytes, max_chars if max_chars is not None else 1, max_tokens or 0) < 0:
        raise ValueError("limits must be >= 0")
    total_bytes = _nbytes(text)
    total_lines = line_count(text)
    chars = len(text) if max_chars is None else max_chars
    budget = _Budget(max_lines, max_bytes, chars)
    fits = total_lines <= max_lines and total_bytes <= max_bytes and len(text) <= chars
    tokens = count(text) if fits and count is not None else None
    if fits and (max_tokens is None or tokens is None or tokens <= max_tokens):
        return None
    if direction == "auto":
        direction = "head_tail" if looks_important_at_end(text) else "head"
    if tokens is not None and max_tokens is not None and count is not None:
        # Only the token cap is exceeded: search down from the whole text, counted once above.
        return _within_tokens(text, budget, direction, total_lines, total_bytes, max_tokens, count, len(text), tokens)
    result = _cut(text, budget, direction, total_lines, total_bytes)
    if max_tokens is None or count is None:
        return result
    tokens = count(result.preview)
    if tokens <= max_tokens:
        return result
    return _within_tokens(
        text, budget, direction, total_lines, total_bytes, max_tokens, count, len(result.preview), tokens
    )


TOKEN_SLACK = 0.02
"""A preview within 2 % under its token cap is close enough: the search stops there."""
TOKEN_ROUNDS = 8
"""Counts the search makes at most before it settles for the best preview that fits."""


def _within_tokens(
    text: str,
    budget: _Budget,
    direction: Direction,
    total_lines: int,
    total_bytes: int,
    max_tokens: int,
    count: Count,
    over_chars: int,
    over_tokens: int,
) -> Truncation:
    """The longest preview (to within `TOKEN_SLACK`) whose tokens are at most `max_tokens`,
    given a character budget `over_chars` whose preview counts `over_tokens`, too many.

    A search on the character budget between one that fits and one that does not, each guess
    interpolated from their counts (dense and sparse stretches of one text differ, so a single
    proportional cut can undershoot by a quarter). Only previews are counted.
    """
    fit: Truncation | None = None
    fit_chars, fit_tokens = 0, 0
    aim = max_tokens * (1 - TOKEN_SLACK / 2)
    for _ in range(TOKEN_ROUNDS):
        guess = fit_chars + (over_chars - fit_chars) * (aim - fit_tokens) / (over_tokens - fit_tokens)
        chars = min(max(int(guess), fit_chars + 1), over_chars - 1)
        if chars <= fit_chars:
            break
        candidate = _cut(text, replace(budget, chars=chars), direction, total_lines, total_bytes)
        tokens = count(candidate.preview)
        if tokens <= max_tokens:
            fit, fit_chars, fit_tokens = candidate, chars, tokens
            if tokens >= max_tokens * (1 - TOKEN_SLACK):
                break
        else:
            over_chars, over_tokens = chars, tokens
    if fit is not None:
        return fit
    # Pathological density (rare): halve until it fits; an empty preview counts 0, so this ends.
    chars = over_chars
    while True:
        chars //= 2
        candidate = _cut(text, replace(budget, chars=chars), direction, total_lines, total_bytes)
        if chars == 0 or count(candidate.preview) <= max_tokens:
            return candidate


def prefix_within_tokens(text: str, *, max_chars: int, max_tokens: int, count: Count) -> int:
    """Length of the longest prefix of `text`, at most `max_chars` long, that counts at most
    `max_tokens` (to within `TOKEN_SLACK`, searched as `truncate` searches a preview; a cut
    moves back to a line end when that is close, as a preview's does)."""
    end = min(len(text), max(max_chars, 0))
    tokens = count(text[:end])
    if tokens <= max_tokens:
        return end
    lines, nbytes = line_count(text), _nbytes(text)
    budget = _Budget(10**9, 10**12, end)
    return len(_within_tokens(text, budget, "head", lines, nbytes, max_tokens, count, end, tokens).preview)


def _cut(text: str, budget: _Budget, direction: Direction, total_lines: int, total_bytes: int) -> Truncation:
    """The preview of `text` within `budget`, keeping the part `direction` names."""
    if direction == "head_tail":
        result = _head_tail(text, budget, total_lines, total_bytes)
        if result is not None:
            return result
        direction = "tail"  # the budget is too small to hold both ends and a marker
    if direction == "tail":
        return _result("tail", text, 0, _tail_start(text, budget), total_lines, total_bytes)
    if direction == "head":
        return _result("head", text, _head_end(text, budget), len(text), total_lines, total_bytes)
    raise ValueError(f"unknown direction {direction!r}; use head, tail, head_tail or auto")


def _head_tail(text: str, budget: _Budget, total_lines: int, total_bytes: int) -> Truncation | None:
    """Head and tail with a marker line between; None when the budget cannot hold all three."""
    worst = _marker(total_lines, total_lines + 1)  # the longest marker: a range of the biggest numbers
    # The marker may need a newline first (to end a head cut mid-line); reserve for both.
    reserve = _Budget(1, _nbytes(worst) + 1, len(worst) + 1)
    room = _Budget(budget.lines - reserve.lines, budget.bytes - reserve.bytes, budget.chars - reserve.chars)
    # At least one line and one character (up to 4 bytes) on each side, or it is not head_tail.
    if room.lines < 2 or room.bytes < 8 or room.chars < 2:
        return None
    head_budget = _Budget(*(max(1, int(v * HEAD_SHARE)) for v in (room.lines, room.bytes, room.chars)))
    tail_budget = _Budget(
        room.lines - head_budget.lines, room.bytes - head_budget.bytes, room.chars - head_budget.chars
    )
    head_end = _head_end(text, head_budget)
    # Both ends together are under budget and the text is over it, so they cannot overlap.
    tail_start = max(_tail_start(text, tail_budget), head_end)
    return _result("head_tail", text, head_end, tail_start, total_lines, total_bytes)


def _result(
    direction: Kept, text: str, head_end: int, tail_start: int, total_lines: int, total_bytes: int
) -> Truncation:
    """The preview keeping `text[:head_end]` and `text[tail_start:]`, with its bookkeeping."""
    head, tail = text[:head_end], text[tail_start:]
    marker = ""
    if direction == "head_tail":
        newline = "" if not head or head.endswith("\n") else "\n"
        marker = newline + _marker(_line_of(text, head_end), _line_of(text, tail_start - 1))
    head_lines = line_count(head)
    tail_line = _line_of(text, tail_start) if tail else total_lines + 1
    # One line cut at both ends (a huge single line) is one kept line, not two.
    shared = 1 if head and tail and not head.endswith("\n") and tail_line == head_lines else 0
    kept_lines = head_lines + (total_lines - tail_line + 1) - shared
    kept_bytes = _nbytes(head) + _nbytes(tail)
    return Truncation(
        preview=head + marker + tail,
        direction=direction,
        total_lines=total_lines,
        total_bytes=total_bytes,
        kept_lines=kept_lines,
        kept_bytes=kept_bytes,
        omitted_lines=total_lines - kept_lines,
        omitted_bytes=total_bytes - kept_bytes,
        tail_start_line=None if direction == "head" else tail_line,
        resume_line=1 if direction == "tail" else _resume_line(text, head_end),
    )


def _marker(first: int, last: int) -> str:
    return f"… [{_span(first, last)} omitted] …\n"


def _span(first: int, last: int) -> str:
    return f"line {first:,}" if first == last else f"lines {first:,}–{last:,}"


# -- cutting -------------------------------------------------------------------------------------


def _head_end(text: str, budget: _Budget) -> int:
    """Length of the longest prefix within `budget`, moved back to a newline when that is close."""
    n = len(text)
    end = min(n, budget.chars)
    end = _after_nth_newline(text, budget.lines, end)
    end = _prefix_within_bytes(text, end, budget.bytes)
    if 0 < end < n and _is_low_surrogate(text[end]) and _is_high_surrogate(text[end - 1]):
        end -= 1  # never separate the halves of a surrogate pair
    if end == n or end == 0 or text[end - 1] == "\n":
        return end
    newline = text.rfind("\n", 0, end)
    # Cut at the newline only when it costs at most 20 % of the budget; otherwise a long line
    # would throw away most of the preview, and mid-line is the lesser evil.
    if newline >= 0 and (end - (newline + 1)) <= NEWLINE_WINDOW * end:
        return newline + 1
    return end


def _tail_start(text: str, budget: _Budget) -> int:
    """Start of the longest suffix within `budget`, moved forward to a line start when that is close."""
    n = len(text)
    start = max(0, n - budget.chars)
    start = _before_last_n_lines(text, budget.lines, start)
    start = _suffix_within_bytes(text, start, budget.bytes)
    if 0 < start < n and _is_low_surrogate(text[start]) and _is_high_surrogate(text[start - 1]):
        start += 1
    if start == 0 or start == n or text[start - 1] == "\n":
        return start
    newline = text.find("\n", start)
    if newline >= 0 and newline + 1 < n and (newline + 1 - start) <= NEWLINE_WINDOW * (n - start):
        return newline + 1
    return start


def _after_nth_newline(text: str, count: int, limit: int) -> int:
    """Index just after the `count`-th newline, searching `text[:limit]`; `limit` if there are fewer."""
    if count <= 0:
        return 0
    pos = -1
    for _ in range(count):
        pos = text.find("\n", pos + 1, limit)
        if pos < 0:
            return limit
    return pos + 1


def _before_last_n_lines(text: str, count: int, floor: int) -> int:
    """Start index of the last `count` lines, never below `floor`."""
    n = len(text)
    if count <= 0:
        return n
    # A final newline ends the last line; it does not start another one.
    pos = n - 1 if text.endswith("\n") else n
    for _ in range(count):
        pos = text.rfind("\n", floor, pos)
        if pos < 0:
            return floor
    return pos + 1


def _prefix_within_bytes(text: str, end: int, max_bytes: int) -> int:
    """The largest `i <= end` with `text[:i]` at most `max_bytes` UTF-8 bytes, on a character boundary."""
    if end * 4 <= max_bytes:  # no character is longer than 4 bytes
        return end
    end = min(end, max_bytes)  # nor shorter than 1
    data = text[:end].encode(_ENCODING, _ERRORS)
    if len(data) <= max_bytes:
        return end
    cut = max_bytes
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # back off continuation bytes to a lead byte
        cut -= 1
    return len(data[:cut].decode(_ENCODING, _ERRORS))


def _suffix_within_bytes(text: str, start: int, max_bytes: int) -> int:
    """The smallest `j >= start` with `text[j:]` at most `max_bytes` UTF-8 bytes."""
    n = len(text)
    if (n - start) * 4 <= max_bytes:
        return start
    start = max(start, n - max_bytes)
    data = text[start:].encode(_ENCODING, _ERRORS)
    if len(data) <= max_bytes:
        return start
    cut = len(data) - max_bytes
    while cut < len(data) and data[cut] & 0xC0 == 0x80:
        cut += 1
    return n - len(data[cut:].decode(_ENCODING, _ERRORS))


# -- measuring -------------------------------------------------------------------------------------


def line_count(text: str) -> int:
    """Lines as `read_output` numbers them: a final newline does not start an extra line."""
    if not text:
        return 0
    return _newlines(text, 0, len(text)) + (0 if text.endswith("\n") else 1)


def _line_of(text: str, index: int) -> int:
    """1-based line of the character at `index`."""
    return _newlines(text, 0, max(index, 0)) + 1


_COUNT_STEP = 1 << 20


def _newlines(text: str, start: int, end: int) -> int:
    # In slices of a million characters: one count over 40 MB holds the interpreter for 20 ms,
    # which a worker thread doing it would take from the event loop.
    return sum(text.count("\n", i, min(i + _COUNT_STEP, end)) for i in range(start, end, _COUNT_STEP))


def _resume_line(text: str, head_end: int) -> int:
    """First line not shown whole after a head cut at `head_end`."""
    if head_end == 0:
        return 1
    line = _line_of(text, head_end - 1)
    return line + 1 if text[head_end - 1] == "\n" else line


def _nbytes(text: str) -> int:
    # ASCII is one byte a character; skip the copy `encode` would make of a huge output.
    return len(text) if text.isascii() else len(text.encode(_ENCODING, _ERRORS))


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _is_low_surrogate(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


# -- the hint ----------------------------------------------------------------------------------------


def hint(t: Truncation, output_id: str, *, reader: str = "read_output") -> str:
    """The note that follows a preview: what was cut, where the full text is, and how to read it
    (with the tool named `reader`, which a proxy may have had to rename)."""
    amount = _amount(t)
    ref = f'id="{output_id}"'
    search = f'or {reader}({ref}, pattern="…") to search it.'
    if t.direction == "tail":
        return (
            f"… {amount} truncated from the start ({_span(*t.omitted_range)}); above is the end of the output. "
            f"Full output saved as {output_id} — call {reader}({ref}, offset=1, limit={READ_LIMIT_LINES}) "
            f"to read from the start, {search}"
        )
    middle = f" from the middle ({_span(*t.omitted_range)})" if t.direction == "head_tail" else ""
    return (
        f"… {amount} truncated{middle} … Full output saved as {output_id} — call "
        f"{reader}({ref}, offset={t.resume_line}, limit={READ_LIMIT_LINES}) for more, {search}"
    )


def with_hint(t: Truncation, output_id: str, *, reader: str = "read_output") -> str:
    """The preview followed by its hint on a line of its own: the text the model sees."""
    separator = "" if t.preview.endswith("\n") or not t.preview else "\n"
    return f"{t.preview}{separator}\n{hint(t, output_id, reader=reader)}"


def _amount(t: Truncation) -> str:
    size = f"{t.omitted_bytes:,} bytes"
    if t.omitted_lines == 0:  # only parts of lines were cut (one very long line)
        return size
    unit = "line" if t.omitted_lines == 1 else "lines"
    return f"{t.omitted_lines:,} {unit} ({size})"


# -- does the end matter? ------------------------------------------------------------------------

# Case matters for these: "Error" and "FAILED" are signals, "error" and "failed" in prose are noise.
_SIGNALS_EXACT_CASE = [
    r"Traceback \(most recent call last\)",
    r"^\s*[\w.]*(?:Error|Exception)\b",  # `ValueError: …`, `AssertionError`
    r"\bError\b",
    r"\bERROR\b",
    r"\bFAIL(?:ED|URES?)?\b",  # pytest/unittest `FAILED`, go `FAIL`
]
_SIGNALS_ANY_CASE = [
    r"\berror\s*(?:\[[^\]\n]*\])?\s*:",  # `error:`, rustc's `error[E0308]:`
    r"\b\d+\s+(?:failed|failures?|errors?)\b",  # `3 failed`, `2 failures`, `Found 2 errors`
    r"\b(?:fatal|panic):",
    r"segmentation fault|core dumped|npm ERR!|make(?:\[\d+\])?: \*\*\*",
    # pytest's closing line: `==== 3 failed, 2 passed in 1.20s ====`
    r"^=+ .*\b(?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|no tests ran)\b.*=+\s*$",
    r"^Ran \d+ tests? in ",  # unittest
    r"^\s*(?:total|totals|summary)\b",  # `Total: …`, coverage's `TOTAL  1234  95%`, `Summary`
    r"\bsummary\s*:",
]
_IMPORTANT_EXACT = re.compile("|".join(f"(?:{p})" for p in _SIGNALS_EXACT_CASE), re.MULTILINE)
_IMPORTANT_ANY_CASE = re.compile("|".join(f"(?:{p})" for p in _SIGNALS_ANY_CASE), re.MULTILINE | re.IGNORECASE)
_EXIT = re.compile(
    r"(?:exit|return)[ _-]?(?:code|status)\D{0,3}?(-?\d+)"
    r"|exited with (?:code|status) (-?\d+)"
    r"|<returncode>\s*(-?\d+)\s*</returncode>",
    re.IGNORECASE,
)


def looks_important_at_end(text: str) -> bool:
    """True when the last lines hold an error or a result (traceback, failures, non-zero exit, totals)."""
    end = _last_lines(text, END_LINES)
    if _IMPORTANT_EXACT.search(end) or _IMPORTANT_ANY_CASE.search(end):
        return True
    for match in _EXIT.finditer(end):
        code = next(g for g in match.groups() if g is not None)
        if int(code) != 0:
            return True
    return False


def _last_lines(text: str, count: int) -> str:
    end = text[-_END_CHARS:].rstrip("\n")
    pos = len(end)
    for _ in range(count):
        pos = end.rfind("\n", 0, pos)
        if pos < 0:
            return end
    return end[pos + 1 :]


__all__ = [
    "Direction",
    "Truncation",
    "hint",
    "line_count",
    "looks_important_at_end",
    "prefix_within_tokens",
    "share_cap_chars",
    "share_cap_tokens",
    "truncate",
    "with_hint",
]

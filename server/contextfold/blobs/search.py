"""Searching a blob's lines with a regular expression, safely, on any `BlobStore`.

`grep` streams lines (`lines.LineReader`) from a line number on and returns bounded,
non-overlapping matches with context. What keeps it safe on untrusted patterns and huge blobs:
patterns that would compile into huge programs are refused (`_check_cost`); the regex engine runs
with a timeout on every call, and the whole search with a budget that grows with the text
searched; the engine releases the GIL, so a slow pattern in a worker thread does not stall the
server. What keeps it fast: plain text is matched as bytes without decoding, and a regex is first
run over blocks of whole lines (`_Skim`) so most lines are ruled out in one engine call per block.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import regex

from contextfold.blobs import lineindex
from contextfold.blobs.base import check_digest
from contextfold.blobs.lines import Line, RawLine, check_positive, decode_line, reader_at

if TYPE_CHECKING:
    from contextfold.blobs.base import BlobReader, BlobStore

__all__ = ["GrepResult", "MAX_PATTERN_CHARS", "Match", "compile_pattern", "grep"]

_GREP_WHOLE_LINE = 1 << 20
"""Lines up to this many bytes are matched whole; longer ones in overlapping windows."""
_GREP_WINDOW = 1 << 20
_GREP_OVERLAP = 1 << 16
"""A match in a window-searched line may span a window boundary by up to this many bytes."""

_GREP_SECONDS_PER_LINE = 10e-6
_GREP_SECONDS_PER_CHAR = 0.1e-6
"""Besides ``timeout`` per line, a whole search may spend ``timeout`` seconds in the regex engine
plus this much per line and per character searched: several times what a plain pattern needs
(~2 µs a line and 20 ms a MB here), so a big output can still be searched in one call, while a
pattern that backtracks on every line stops early instead of running for minutes."""
_SKIM_BYTES = 256 * 1024
_SKIM_TIMEOUT = 0.5
"""A regex is first searched across blocks of whole lines (up to this many bytes, in one engine
call each), and only the lines where the block search finds something are searched on their own.
A block search slower than ``_SKIM_TIMEOUT`` (a pattern that backtracks across lines) turns the
skimming off for the rest of the search."""
_LINE_BOUND = regex.compile(r"\\[AZzG]|\(\?<?[=!]|\(\?[a-zA-Z-]*r")
r"""What could match in a line on its own but not inside a block: ``\A``, ``\Z``, ``\z`` and
``\G`` anchor to the searched string, lookarounds may see the newline beside the line, and
``(?r)`` searches backwards. Patterns holding any of these are searched line by line."""
MAX_PATTERN_CHARS = 1_000
_MAX_EXPANSION = 200_000
"""The `regex` module compiles ``x{n}`` into n copies of ``x``: a pattern's length times the
product of its minimum repeat counts must stay under this (``a{1000000000}`` would take ~270 GB)."""


@dataclass(frozen=True)
class Match:
    """A matching line with up to ``context`` lines on each side (never repeated across matches)."""

    line: Line
    before: list[Line]
    after: list[Line]


@dataclass(frozen=True)
class GrepResult:
    """Matches in file order. ``truncated``: the match cap or the character budget stopped the
    search, so there may be more; continue with ``offset`` after the last line returned."""

    matches: list[Match]
    total_lines: int
    truncated: bool


def grep(
    blobs: BlobStore,
    digest: str,
    pattern: str,
    *,
    context: int = 0,
    max_matches: int = 50,
    ignore_case: bool = False,
    max_chars: int = 20_000,
    timeout: float = 2.0,
    offset: int = 1,
) -> GrepResult:
    """Lines matching the regular expression ``pattern`` (``regex`` module, Python syntax).

    The pattern is searched in each line separately (it never sees a newline). The blob is
    streamed from line ``offset``; to continue a truncated result, pass the number of the
    last line returned + 1. ``context`` lines are kept before and after each match; when
    two matches are close, each line is returned once: the lines between them go to the
    earlier match's ``after`` and the later match's ``before`` only holds lines not shown
    yet. ``max_chars`` bounds the text of all returned lines as in `lines.read_lines`: the search
    stops before a line that does not fit, except that the first match's line is cut to fit.
    ``timeout`` is the time the regex engine may spend on one line; a pattern that exceeds
    it (catastrophic backtracking), or that is slow on every line (see
    ``_GREP_SECONDS_PER_LINE``), raises `TimeoutError` naming the line to continue from.
    Patterns over ``MAX_PATTERN_CHARS``, with huge repeat counts, or recursive ones are refused
    with `ValueError`: they could exhaust memory before matching anything. Lines over 1 MiB
    are searched in overlapping 1 MiB windows: a match in them is found unless it is longer
    than 64 KiB, and ``$``/``\\b``/lookaheads may rarely match at a window's edge.
    """
    digest = check_digest(digest)
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    check_positive("max_matches", max_matches)
    check_positive("max_chars", max_chars)
    check_positive("offset", offset)
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    compiled = _compile(pattern, ignore_case)  # before touching the blob: bad input first
    with blobs.open(digest) as f:
        index = lineindex.verified(blobs, digest, f)
        if offset > index.total_lines:
            return GrepResult([], index.total_lines, truncated=False)
        search = _LineSearch(compiled, pattern, ignore_case, timeout, f)
        found = _Grep(context, max_matches, max_chars)
        reader = reader_at(blobs, digest, f, index, offset)
        for number, raw in enumerate(reader.lines(_GREP_WHOLE_LINE), offset):
            if found.full:  # another line exists, but nothing more could be returned
                found.stop()
                break
            found.feed(number, raw, search.matches(number, raw))
            if found.done:
                break
    return GrepResult(found.finish(), index.total_lines, found.truncated)


_REGEX_SYNTAX = frozenset("\\.^$*+?{}[]|()")


def compile_pattern(pattern: str, ignore_case: bool = False) -> regex.Pattern[str]:
    """`pattern` compiled for searching, after the checks that keep an untrusted one safe;
    ValueError saying what is wrong. Search with `timeout=` on every call."""
    return _compile(pattern, ignore_case)


def _compile(pattern: str, ignore_case: bool) -> regex.Pattern[str]:
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a string, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the pattern is {len(pattern):,} characters; at most {MAX_PATTERN_CHARS:,} are accepted")
    _check_cost(pattern)
    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except regex.error as e:
        raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None
    except (RecursionError, MemoryError, OverflowError):
        raise ValueError(f"regular expression {pattern!r} is too complex to compile; simplify it") from None


_QUANTIFIER = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_RECURSION = re.compile(r"\(\?(?:R|[-+]?\d+|&\w+|P>\w+)\)")


def _check_cost(pattern: str) -> None:
    """Refuse what `regex` would expand into too large a program: big repeat counts (it copies
    the repeated item that many times) and recursion such as ``(?R)`` (which grows until memory
    runs out). Escapes and character classes are skipped; the estimate errs on the high side."""
    product = 1
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # skip the class; a ] first in it is literal
            i += 2 if pattern.startswith("[^", i) else 1
            i += 1 if pattern.startswith("]", i) else 0
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        elif c == "(" and _RECURSION.match(pattern, i):
            raise ValueError(f"recursive patterns and calls such as (?R) or (?1) are not supported: {pattern!r}")
        elif c == "{" and (m := _QUANTIFIER.match(pattern, i)) and (m.group(1) or m.group(2)):
            product *= max(int(m.group(1) or 0), 1)
            if product * n > _MAX_EXPANSION:
                raise ValueError(
                    f"the repeat counts in {pattern!r} are too large to search with; "
                    "use a smaller count (e.g. x{3,} instead of x{100000})"
                )
            i = m.end()
            continue
        i += 1


def _literal(pattern: str, ignore_case: bool) -> bytes | None:
    """The pattern's UTF-8 bytes if a byte search of the raw line gives exactly the regex's
    answer on the decoded line; else None.

    True for a case-sensitive pattern without regex syntax: valid UTF-8 decodes to the same
    characters, and a needle never starts with a continuation byte, so a broken sequence
    before it cannot swallow part of it. A needle holding U+FFFD could match decoded garbage,
    and one holding a newline can never match a line, so both go through the regex. Case
    folding is left to the regex too (Unicode folds 'k' with the Kelvin sign, for instance).
    """
    if ignore_case or "\n" in pattern or "\ufffd" in pattern or not _REGEX_SYNTAX.isdisjoint(pattern):
        return None
    try:
        return pattern.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None


class _LineSearch:
    """Decides whether a line matches: a byte search for plain text, else the regex engine
    with its timeout on every call — after a skim of whole blocks of lines (`_Skim`), which
    answers "no" for most lines of a big output in one engine call per block."""

    def __init__(
        self, compiled: regex.Pattern[str], pattern: str, ignore_case: bool, timeout: float, f: BlobReader
    ) -> None:
        self._compiled = compiled
        self._pattern = pattern
        self._literal = _literal(pattern, ignore_case)
        self._timeout = timeout
        self._f = f  # unbuffered, so reading a window and seeking back is invisible to the reader
        self._spent = 0.0  # seconds in the regex engine so far
        self._allowed = timeout  # grows with the text searched (see _GREP_SECONDS_PER_LINE)
        self._line = 0
        self._skim: _Skim | None = None
        if self._literal is None and not _LINE_BOUND.search(pattern):
            flags = regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0)
            self._skim = _Skim(regex.compile(pattern, flags), f)

    def _search(self, number: int, text: str, pos: int = 0) -> regex.Match[str] | None:
        if number != self._line:
            self._line = number
            self._allowed += _GREP_SECONDS_PER_LINE
        started = time.monotonic()
        try:
            # concurrent=True releases the GIL while the engine runs, so a slow pattern in a
            # worker thread (asyncio.to_thread) does not freeze the server's event loop.
            found = self._compiled.search(text, pos, concurrent=True, timeout=self._timeout)
        except TimeoutError:
            raise TimeoutError(
                f"regular expression {self._pattern!r} took more than {self._timeout:g} s on "
                f"line {number}; it probably backtracks catastrophically (nested quantifiers "
                "such as (a+)+ or overlapping alternatives such as (a|aa)+): simplify it"
            ) from None
        self._charge(time.monotonic() - started, number, len(text) - pos)
        return found

    def matches(self, number: int, raw: RawLine) -> bool:
        data, start, length = raw
        if len(data) < length:
            return self._matches_windows(number, raw)
        if self._literal is not None:
            return self._literal in data
        if self._skim is not None:
            started = time.monotonic()
            try:
                candidate = self._skim.candidate(start, length)
            except TimeoutError:
                self._skim = None  # backtracks across lines: search each line on its own from here
                candidate = True
            if self._skim is not None and self._skim.searched:
                self._charge(time.monotonic() - started, number, self._skim.searched)
            if not candidate:
                return False
        return self._search(number, data.decode("utf-8", "replace")) is not None

    def _charge(self, seconds: float, number: int, chars: int) -> None:
        """Count engine time against the whole search's budget, which grows with the text searched."""
        self._spent += seconds
        self._allowed += _GREP_SECONDS_PER_CHAR * chars
        if self._spent > self._allowed:
            raise TimeoutError(
                f"regular expression {self._pattern!r} is too slow on this output: {self._spent:.1f} s "
                f"of matching by line {number}; it probably backtracks on every line (nested "
                "quantifiers such as (\\w+\\s?)+ or overlapping alternatives such as (a|aa)+): "
                f"simplify it, or search on from offset={number + 1}"
            )

    def _matches_windows(self, number: int, raw: RawLine) -> bool:
        """Search a line too long to decode whole, window by window.

        Each window decodes its core plus ``_GREP_OVERLAP`` bytes on each side, and a match
        must start in the core (the next window owns the rest). The leading overlap gives
        lookbehinds their context and, passed as ``pos``, keeps ``^`` from matching at a
        window's edge; the trailing overlap lets a match run past the core. Two approximations
        remain, both documented on `grep`: a match longer than the overlap may be
        missed, and an end-of-text assertion (``$``, ``\\b``, a lookahead) can be satisfied by
        a window's trailing edge — a rare false positive, which beats rejecting such matches
        and searching again from each later start (quadratic on patterns like ``\\d+$``).
        """
        f = self._f
        resume = f.tell()
        try:
            return self._scan_windows(number, raw[1], raw[2])
        finally:
            f.seek(resume)

    def _scan_windows(self, number: int, start: int, length: int) -> bool:
        f = self._f
        core = 0
        while core < length:
            core_end = min(length, core + _GREP_WINDOW)
            lo = max(0, core - _GREP_OVERLAP)
            hi = min(length, core_end + _GREP_OVERLAP)
            f.seek(start + lo)
            chunk = f.read(hi - lo)
            # Cut the decoded pieces at character boundaries so no replacement characters
            # appear at the core's edges (only at the window's outer edges).
            a = _char_start(chunk, core - lo)
            b = _char_start(chunk, core_end - lo) if core_end < length else len(chunk)
            before = chunk[:a].decode("utf-8", "replace")
            middle = chunk[a:b].decode("utf-8", "replace")
            text = before + middle + chunk[b:].decode("utf-8", "replace")
            m = self._search(number, text, len(before))
            if m is not None and m.start() < len(before) + len(middle):
                return True
            core = lo + b if core_end < length else length
        return False


class _Skim:
    """Which lines could match, found by searching blocks of whole lines at once.

    A block starts at a line and ends after a newline (or at the end of the file). The pattern,
    compiled with MULTILINE so that ``^`` and ``$`` still mean a line's start and end, is
    searched through the block from the line being asked about; the line where the first match
    starts is the next candidate, and every line before it cannot match: a match within a line
    is also a match in the block at the same place (`_LINE_BOUND` keeps out the patterns for
    which that is not so). A candidate may still be a false alarm (a match that runs across a
    newline), so candidates are searched on their own. Lines must be asked about in file order.
    """

    def __init__(self, compiled: regex.Pattern[str], f: BlobReader) -> None:
        self._compiled = compiled
        self._f = f
        self._raw = b""
        self._text = ""
        self._start = 0  # file offset of the block's first byte
        self._end = 0  # file offset just past the block
        self._hit: int | None = None  # file offset of the next candidate line; None: none in the block
        self._hit_char = 0  # where that line starts in self._text
        self.searched = 0  # characters searched by the last call (for the time budget)

    def candidate(self, start: int, length: int) -> bool:
        """Whether the line at file offset ``start`` (``length`` bytes) could match."""
        self.searched = 0
        past_hit = self._hit is not None and start > self._hit  # a line was skipped: start afresh
        if (start >= self._end or past_hit) and not self._load(start):
            return True  # a line longer than a block: it is searched on its own
        if self._hit is None or start < self._hit:
            return False
        # This line is the candidate; the next search starts on the line after it.
        newline = self._text.find("\n", self._hit_char)
        if newline < 0:
            self._hit = None
        else:
            self._find(newline + 1, start + length + 1)
        return True

    def _load(self, start: int) -> bool:
        f = self._f
        resume = f.tell()
        try:
            f.seek(start)
            raw = f.read(_SKIM_BYTES)
        finally:
            f.seek(resume)
        if len(raw) == _SKIM_BYTES:  # not the end of the file: stop after the last whole line
            cut = raw.rfind(b"\n")
            if cut < 0:
                return False
            raw = raw[: cut + 1]
        # Lines decode alike on their own and inside the block: a character never spans a newline.
        self._raw, self._text = raw, raw.decode("utf-8", "replace")
        self._start, self._end = start, start + len(raw)
        self._find(0, start)
        return True

    def _find(self, char: int, offset: int) -> None:
        """Search from the line at ``char`` in the block (``offset`` in the file) for the next candidate."""
        text = self._text
        self.searched += len(text) - char
        found = self._compiled.search(text, char, concurrent=True, timeout=_SKIM_TIMEOUT)
        if found is None or found.start() >= len(text):
            self._hit = None
            return
        line = text.rfind("\n", char, found.start()) + 1 or char
        if line >= len(text):
            self._hit = None
            return
        # Walk the raw bytes to the same line: replacement characters make char and byte counts differ.
        pos = offset - self._start
        for _ in range(text.count("\n", char, line)):
            pos = self._raw.index(b"\n", pos) + 1
        self._hit, self._hit_char = self._start + pos, line


def _char_start(data: bytes, i: int) -> int:
    """``i`` moved back to the first byte of the UTF-8 character it falls in (at most 3 steps)."""
    for _ in range(3):
        if 0 < i < len(data) and 0x80 <= data[i] <= 0xBF:
            i -= 1
    return i


@dataclass
class _Pending:
    """A match still collecting its ``after`` lines."""

    line: Line
    before: list[Line]
    after: list[Line] = field(default_factory=list)


class _Grep:
    """Turns a stream of (line, matched?) into bounded, non-overlapping matches with context.

    Lines are decoded only when they are returned; the ``before`` ring keeps raw bytes, cut to
    what ``max_chars`` could ever show, so a run of huge lines costs bounded memory.
    """

    def __init__(self, context: int, max_matches: int, max_chars: int) -> None:
        self._context = context
        self._max_matches = max_matches
        self._max_chars = max_chars
        self._keep = 4 * max_chars + 4  # bytes that always decode to more than max_chars
        self._remaining = max_chars
        self._ring: deque[tuple[int, bytes, int]] = deque(maxlen=context)
        self._matches: list[Match] = []
        self._pending: _Pending | None = None
        self.done = False
        self.truncated = False

    @property
    def _count(self) -> int:
        return len(self._matches) + (self._pending is not None)

    @property
    def full(self) -> bool:
        """Nothing more can be returned: the budget is spent, or the last match allowed is
        complete with its context."""
        if self._remaining <= 0:
            return True
        return self._count >= self._max_matches and (self._pending is None or len(self._pending.after) >= self._context)

    def stop(self) -> None:
        """Stop before the end of the file: there may be more."""
        self.done = True
        self.truncated = True

    def _line(self, number: int, data: bytes, length: int) -> Line:
        return decode_line(number, data, length, self._max_chars)

    def feed(self, number: int, raw: RawLine, matched: bool) -> None:
        data, _, length = raw
        if matched:
            self._match(self._line(number, data, length))
            return
        pending = self._pending
        if pending is not None and len(pending.after) < self._context:
            line = self._line(number, data, length)
            if len(line.text) > self._remaining:
                self.stop()
                return
            pending.after.append(line)
            self._remaining -= len(line.text)
        elif self._context:
            self._ring.append((number, data[: self._keep], length))

    def _match(self, line: Line) -> None:
        if self._count >= self._max_matches:  # a match inside the last allowed match's context
            self.stop()
            return
        if self._count and len(line.text) > self._remaining:
            self.stop()  # only the first match is cut to fit (read_lines does the same)
            return
        if self._pending is not None:
            self._matches.append(self._flush())
        self._remaining -= len(line.text)
        before: list[Line] = []
        # Nearest lines first: if the budget runs out, the lines next to the match survive.
        for number, data, length in reversed(self._ring):
            prev = self._line(number, data, length)
            if len(prev.text) > self._remaining:
                self.stop()
                break
            before.append(prev)
            self._remaining -= len(prev.text)
        before.reverse()
        self._ring.clear()
        self._pending = _Pending(line, before)

    def _flush(self) -> Match:
        assert self._pending is not None
        p, self._pending = self._pending, None
        return Match(p.line, p.before, p.after)

    def finish(self) -> list[Match]:
        if self._pending is not None:
            self._matches.append(self._flush())
        return self._matches

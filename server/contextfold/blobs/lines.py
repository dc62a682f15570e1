"""Reading a blob by lines, on any `BlobStore`: bounded pages, and the whole text when asked.

The line rules are `lineindex`'s. Each line is decoded as UTF-8 with ``errors="replace"``, so
binary output renders safely, while valid UTF-8 joined back with ``"\\n"`` reproduces the stored
text exactly. Reads never load a blob whole: `read_lines` seeks to the nearest indexed line and
scans forward at most one index stride, and pages are capped by a line count and a character
budget. `linesearch` streams lines with the same `LineReader`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextfold.blobs import lineindex
from contextfold.blobs.base import DamagedContent, check_digest

if TYPE_CHECKING:
    from contextfold.blobs.base import BlobReader, BlobStore

__all__ = [
    "Line",
    "LineReader",
    "LineSlice",
    "RawLine",
    "check_positive",
    "decode_line",
    "read_lines",
    "read_text",
    "reader_at",
]

_BLOCK = 1 << 16
"""Read size while scanning lines; also the granularity of memory used by a read."""

READ_LIMIT_LINES = 200
"""Lines one read of a spilled output returns at most, and the page a hint tells a model to ask for."""
READ_LIMIT_CHARS = 20_000
"""Characters one read returns at most: a page stops before a line that would not fit."""


@dataclass(frozen=True)
class Line:
    """One line: 1-based ``number``, ``text`` without its newline, ``truncated`` if cut short."""

    number: int
    text: str
    truncated: bool = False


@dataclass(frozen=True)
class LineSlice:
    """A page of lines. Continue with ``offset=next_offset`` while ``has_more``."""

    lines: list[Line]
    total_lines: int
    offset: int
    has_more: bool
    next_offset: int | None


def read_lines(
    blobs: BlobStore, digest: str, offset: int = 1, limit: int = READ_LIMIT_LINES, max_chars: int = READ_LIMIT_CHARS
) -> LineSlice:
    """Lines ``offset`` (1-based) onwards: at most ``limit`` lines and ``max_chars`` characters.

    The budget counts the text of the lines (not the newlines between them). A page stops
    before a line that does not fit in what is left of the budget, so the next page shows it
    whole; only a line longer than ``max_chars`` on its own is cut, to its first
    ``max_chars`` characters with ``truncated=True`` (the rest of such a line is not
    reachable by line reads). Every page with ``offset <= total_lines`` holds at least one
    line. Memory stays around ``4 * max_chars`` bytes plus a 64 KiB read buffer.
    """
    digest = check_digest(digest)
    check_positive("offset", offset)
    check_positive("limit", limit)
    check_positive("max_chars", max_chars)
    with blobs.open(digest) as f:
        index = lineindex.verified(blobs, digest, f)
        total = index.total_lines
        if offset > total:
            return LineSlice([], total, offset, has_more=False, next_offset=None)
        reader = reader_at(blobs, digest, f, index, offset)
        lines: list[Line] = []
        remaining = max_chars
        number = offset
        while len(lines) < limit and number <= total:
            # 4 bytes per character is the most UTF-8 (or a replacement) can take, so this
            # many bytes always decode to more than max_chars characters if the line is longer.
            raw = reader.read_line(4 * max_chars + 4)
            if raw is None:  # the blob shrank under us; blobs never do
                break
            line = decode_line(number, raw[0], raw[2], max_chars)
            if lines and len(line.text) > remaining:
                break
            lines.append(line)
            remaining -= len(line.text)
            number += 1
    has_more = number <= total
    return LineSlice(lines, total, offset, has_more, number if has_more else None)


def read_text(blobs: BlobStore, digest: str, *, max_bytes: int | None = None) -> str:
    """The whole content, decoded like lines are (invalid UTF-8 → U+FFFD).

    This one does load the blob: it is for callers that need everything at once (the full-text
    resource) and have bounded the size; ``max_bytes`` makes a larger blob a `ValueError`
    instead of a memory spike.
    """
    digest = check_digest(digest)
    with blobs.open(digest) as f:
        size = f.info().size
        if max_bytes is not None and size > max_bytes:
            raise ValueError(
                f"spilled content {digest} is {size:,} bytes, over the {max_bytes:,}-byte limit "
                "for reading it whole; read it by lines or grep instead"
            )
        data = f.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise DamagedContent(
            digest, f"its {len(data):,} bytes no longer hash to that sha256 (changed outside contextfold)"
        )
    return data.decode("utf-8", "replace")


def reader_at(blobs: BlobStore, digest: str, f: BlobReader, index: lineindex.Index, number: int) -> LineReader:
    """A reader positioned at the start of line ``number`` (1 <= number <= total)."""
    for _ in range(2):
        slot = (number - 1) // index.stride
        start = index.offsets[slot]
        # A checksum-valid index that points mid-line means it does not belong to this
        # content (or was crafted); rebuild it rather than return wrong line numbers.
        if start == 0 or _byte_at(f, start - 1) == b"\n":
            reader = LineReader(f, start)
            reader.skip_lines(number - 1 - slot * index.stride)
            return reader
        index = lineindex.verified(blobs, digest, f, rebuild=True)
    raise RuntimeError(f"line index of {digest} is inconsistent after a rebuild")  # unreachable


def check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def decode_line(number: int, data: bytes, length: int, max_chars: int) -> Line:
    """Line ``number`` from ``data``, the first bytes of a line of ``length`` bytes."""
    text = data.decode("utf-8", "replace")
    if len(text) > max_chars:
        return Line(number, text[:max_chars], truncated=True)
    if len(data) < length:
        # Only the head of the line was read (grep reads 1 MiB); its last character may be
        # a multi-byte sequence cut in half, which decodes to a spurious replacement character.
        return Line(number, text[:-1] if text.endswith("\ufffd") else text, truncated=True)
    return Line(number, text)


def _byte_at(f: BlobReader, offset: int) -> bytes:
    f.seek(offset)
    return f.read(1)


RawLine = tuple[bytes, int, int]
"""(the line's first bytes — all of it when their length equals the third item, its byte offset
in the blob, its length without the newline). A plain tuple: grep makes one per line."""


class LineReader:
    """Reads lines from a blob position in 64 KiB blocks, holding at most ``limit`` bytes of
    any one line, so a gigantic line costs no more memory than a short one."""

    def __init__(self, f: BlobReader, offset: int) -> None:
        self._f = f
        f.seek(offset)
        self._buf = b""
        self._base = offset  # blob offset of self._buf[0]
        self._i = 0  # next unread byte in self._buf

    def _fill(self) -> bool:
        self._base += len(self._buf)
        self._buf = self._f.read(_BLOCK)
        self._i = 0
        return bool(self._buf)

    def skip_lines(self, n: int) -> None:
        while n > 0:
            if self._i >= len(self._buf) and not self._fill():
                return
            count = self._buf.count(b"\n", self._i)
            if count < n:
                n -= count
                self._i = len(self._buf)
            else:
                self._i = lineindex.nth_newline(self._buf, self._i, n) + 1
                n = 0

    def read_line(self, limit: int) -> RawLine | None:
        """The next line (its first ``limit`` bytes), or None at the end of the blob."""
        start = self._base + self._i
        parts: list[bytes] = []
        kept = 0
        length = 0
        while True:
            if self._i >= len(self._buf) and not self._fill():
                if length == 0:
                    return None  # nothing after the last newline: no extra empty line
                break
            nl = self._buf.find(b"\n", self._i)
            end = nl if nl >= 0 else len(self._buf)
            if kept < limit:
                take = min(end - self._i, limit - kept)
                parts.append(self._buf[self._i : self._i + take])
                kept += take
            length += end - self._i
            self._i = end
            if nl >= 0:
                self._i += 1
                break
        return b"".join(parts), start, length

    def lines(self, limit: int) -> Iterator[RawLine]:
        """All remaining lines, like repeated `read_line`. The lines that lie whole inside a
        block are split in one C call, which is most of grep's speed on many short lines."""
        while True:
            buf, i = self._buf, self._i
            if i >= len(buf):
                if not self._fill():
                    return
                continue
            last = buf.rfind(b"\n", i)
            if last < 0:  # the next line runs into the following block(s)
                line = self.read_line(limit)
                if line is None:
                    return
                yield line
                continue
            pos = self._base + i
            self._i = last + 1  # before yielding: the consumer may stop at any line
            for data in buf[i:last].split(b"\n"):
                n = len(data)
                yield (data if n <= limit else data[:limit]), pos, n
                pos += n + 1

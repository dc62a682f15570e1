"""Content-addressed files for spilled tool outputs.

This is the filesystem layer under the spill store (SPEC § 6): it stores bytes under the
sha256 of their content and reads them back as bounded slices of lines or regex matches.
It knows nothing about output ids, sessions, tenants or SQLite; the database maps the opaque ids
a client sees to the digests used here. Every public method that names a file takes a digest
and validates it first (exactly 64 lowercase hex characters), so nothing a client sends can
ever become a path.

Layout, all inside one ``0700`` directory::

    <digest>          the content, 0600, written atomically (temp file + fsync + os.replace)
    <digest>.idx      line index: the byte offset of every ``stride``-th line start
    .tmp-*            files being written; never visible under a final name

Lines are split on ``\\n`` only (``\\r`` stays in the text), a final line without a newline
counts, a trailing newline does not start an extra empty line, and an empty file has no lines.
Each line is decoded as UTF-8 with ``errors="replace"``, so binary output renders safely, while
valid UTF-8 joined back with ``"\\n"`` reproduces the stored text exactly.

Reads never load a file whole: ``read_lines`` seeks to the nearest indexed line and scans
forward at most ``stride`` lines, ``grep`` streams line by line, and both cap what they return
by a line count and a character budget.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import sys
import tempfile
import threading
import time
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import regex

__all__ = [
    "DamagedContent",
    "GrepResult",
    "Line",
    "LineSlice",
    "Match",
    "SpillFiles",
    "SpilledFile",
    "StoredFile",
]

_DIGEST = re.compile(r"[0-9a-f]{64}")

_INDEX_STRIDE = 1_000
"""An index entry every this many lines: a deep read scans at most this many lines forward."""
_INDEX_MAX_ENTRIES = 1 << 16
"""Past this many entries the stride doubles (every other entry is dropped), so an index never
exceeds ~512 KiB however many lines a file has and can always be loaded whole."""
_INDEX_MAGIC = b"CFSPIDX2"
_INDEX_HEADER = struct.Struct("<8sQQQQQI")  # magic, mtime_ns, stride, data size, total lines, entries, crc32
"""``mtime_ns`` is the content file's mtime when its bytes were last known to hash to its digest
(written, or rehashed since): a read trusts the file while its size and mtime still match, and
rehashes it once when only the mtime moved (a touched file is fine, an edited one is damaged)."""
_INDEX_MAX_FILE = _INDEX_HEADER.size + 8 * (_INDEX_MAX_ENTRIES + 1)

_BLOCK = 1 << 16
"""Read size while scanning lines; also the granularity of memory used by a read."""
_STREAM_BLOCK = 1 << 20
"""Read size while rebuilding an index (pure sequential scan, larger is faster)."""

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

_STALE_TEMP_SECONDS = 24 * 3600
"""Temp files left by a crashed writer are removed when a store is opened after this long."""

if array("Q").itemsize != 8:  # pragma: no cover - every platform CPython supports has 8
    raise ImportError("contextfold.spill needs 8-byte unsigned array items")


# -- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpilledFile:
    """What `SpillFiles.write` stored. ``created`` is False when the content was already there."""

    digest: str
    bytes: int
    lines: int
    created: bool


@dataclass(frozen=True)
class StoredFile:
    """One stored content file, as `SpillFiles.files` lists them for retention and quota."""

    digest: str
    bytes: int
    mtime: float


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


class DamagedContent(Exception):
    """A stored file no longer holds the content its digest names (cut short or edited outside
    contextfold). Content files never change once written, so this is never a race."""

    def __init__(self, digest: str, problem: str) -> None:
        super().__init__(f"spilled content {digest} is damaged: {problem}")
        self.digest = digest
        self.problem = problem


# -- the store -------------------------------------------------------------------------------------


class SpillFiles:
    """Content-addressed storage of spilled outputs under one directory.

    Safe to share between threads of one process. Several processes may share a directory too:
    writes are atomic renames of identical content, so the worst case is a duplicated write.
    """

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.root = Path(root)
        # Serialises "is it there already? then rename into place" so two threads writing the
        # same content agree on which of them created it. Temp files are written outside it.
        self._lock = threading.Lock()
        if read_only:
            return  # a home that cannot be written (contextfold.guard): reads only, nothing to prepare
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkdir's mode is filtered by the umask and ignored for an existing directory; outputs
        # can hold secrets, so force it either way.
        os.chmod(self.root, 0o700)
        self._remove_stale_temps()

    # -- writing -----------------------------------------------------------------------------------

    def write(self, data: bytes | str) -> SpilledFile:
        """Store ``data`` (text is encoded as UTF-8, see `_encode`) and return its digest.

        Identical content is stored once: the second write returns ``created=False`` and only
        refreshes the file's mtime, so age-based retention counts from the latest write. A stored
        copy that is damaged (see `DamagedContent`) is replaced by this one.
        """
        if isinstance(data, str):
            data = _encode(data)
        elif isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        elif not isinstance(data, bytes):
            raise TypeError(f"write() takes bytes or str, not {type(data).__name__}")
        digest = hashlib.sha256(data).hexdigest()
        indexer = _Indexer()
        indexer.feed(data)
        index = indexer.finish()
        with self._lock:
            reused = self._reuse(digest, len(data), index)
        if reused is not None:
            return reused

        def _write_all(f: BinaryIO) -> None:
            f.write(data)

        return self._commit(digest, len(data), index, self._write_temp(_write_all))

    def write_stream(self, chunks: Iterable[bytes]) -> SpilledFile:
        """Store the concatenation of ``chunks`` without holding it in memory.

        The content is hashed and line-indexed while it streams into a temp file; the digest is
        known only at the end, so the temp file is renamed into place then. If the iterable
        raises, the temp file is removed and nothing is stored.
        """
        hasher = hashlib.sha256()
        indexer = _Indexer()

        def _copy(f: BinaryIO) -> None:
            for chunk in chunks:
                if isinstance(chunk, str):
                    raise TypeError("write_stream() takes bytes chunks; encode text or use write()")
                if isinstance(chunk, memoryview):
                    chunk = chunk.tobytes()  # bytes.count/find below need bytes, not a view
                if not chunk:
                    continue
                hasher.update(chunk)
                indexer.feed(chunk)
                f.write(chunk)

        temp = self._write_temp(_copy)
        try:
            digest = hasher.hexdigest()
            index = indexer.finish()
        except BaseException:
            _unlink(temp)
            raise
        return self._commit(digest, indexer.size, index, temp)

    def _write_temp(self, fill: Callable[[BinaryIO], None]) -> Path:
        """A durable temp file (0600, in the store so the final rename stays on one filesystem)."""
        fd, name = tempfile.mkstemp(prefix=".tmp-", dir=self.root)
        temp = Path(name)
        try:
            with os.fdopen(fd, "wb") as f:
                fill(f)
                f.flush()
                # The rename below must never expose a name whose data is not yet on disk.
                os.fsync(f.fileno())
        except BaseException:
            _unlink(temp)
            raise
        return temp

    def _commit(self, digest: str, size: int, index: bytes, temp: Path) -> SpilledFile:
        """Rename a finished temp file to its digest, unless another writer got there first."""
        try:
            with self._lock:
                reused = self._reuse(digest, size, index)
                if reused is None:
                    mtime_ns = os.stat(temp).st_mtime_ns  # a rename keeps it
                    os.replace(temp, self._data_path(digest))
        except BaseException:
            _unlink(temp)
            raise
        if reused is not None:
            _unlink(temp)
            return reused
        _fsync_dir(self.root)  # make the new name itself survive a crash
        self._write_index(digest, _stamped(index, mtime_ns))
        return SpilledFile(digest, size, _index_total_lines(index), created=True)

    def _reuse(self, digest: str, size: int, index: bytes) -> SpilledFile | None:
        """The stored copy of this content with its mtime refreshed, or None when there is no
        intact one (the caller then stores its own, over a damaged copy). Caller holds the lock,
        so no thread of this process deletes the file meanwhile; another process may."""
        path = self._data_path(digest)
        try:
            if not self._intact(digest, os.stat(path), size):
                return None
            os.utime(path)
            mtime_ns = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            return None
        self._write_index(digest, _stamped(index, mtime_ns))
        return SpilledFile(digest, size, _index_total_lines(index), created=False)

    def _intact(self, digest: str, st: os.stat_result, size: int) -> bool:
        """Whether the stored file holds ``size`` bytes hashing to ``digest``: trusted while its
        size and mtime are what its index recorded, else rehashed."""
        if st.st_size != size:
            return False
        index = _load_index(self._index_path(digest))
        if index is not None and index.size == size and index.mtime_ns == st.st_mtime_ns:
            return True
        with open(self._data_path(digest), "rb", buffering=0) as f:
            return _sha256_of(f) == digest

    def _write_index(self, digest: str, index: bytes) -> None:
        """Write a sidecar index atomically, best effort.

        The index is a cache: a torn one fails its checksum and one that could not be written
        (full or read-only disk) is rebuilt by the next read, so neither fsync nor failure
        matter here — only the content has to be durable.
        """
        try:
            fd, name = tempfile.mkstemp(prefix=".tmp-", dir=self.root)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(index)
            os.replace(name, self._index_path(digest))
        except OSError:
            _unlink(Path(name))
        except BaseException:
            _unlink(Path(name))
            raise

    # -- reading -----------------------------------------------------------------------------------

    def exists(self, digest: str) -> bool:
        """Whether content with this digest is stored."""
        return self._data_path(_check_digest(digest)).is_file()

    def size(self, digest: str) -> int:
        """Bytes of the stored content (one stat); `FileNotFoundError` if it is not stored."""
        return os.stat(self._data_path(_check_digest(digest))).st_size

    def read_lines(
        self, digest: str, offset: int = 1, limit: int = 200, max_chars: int = 20_000
    ) -> LineSlice:
        """Lines ``offset`` (1-based) onwards: at most ``limit`` lines and ``max_chars`` characters.

        The budget counts the text of the lines (not the newlines between them). A page stops
        before a line that does not fit in what is left of the budget, so the next page shows it
        whole; only a line longer than ``max_chars`` on its own is cut, to its first
        ``max_chars`` characters with ``truncated=True`` (the rest of such a line is not
        reachable by line reads). Every page with ``offset <= total_lines`` holds at least one
        line. Memory stays around ``4 * max_chars`` bytes plus a 64 KiB read buffer.
        """
        digest = _check_digest(digest)
        _check_positive("offset", offset)
        _check_positive("limit", limit)
        _check_positive("max_chars", max_chars)
        with self._open(digest) as f:
            index = self._index(digest, f)
            total = index.total_lines
            if offset > total:
                return LineSlice([], total, offset, has_more=False, next_offset=None)
            reader = self._reader_at(digest, f, index, offset)
            lines: list[Line] = []
            remaining = max_chars
            number = offset
            while len(lines) < limit and number <= total:
                # 4 bytes per character is the most UTF-8 (or a replacement) can take, so this
                # many bytes always decode to more than max_chars characters if the line is longer.
                raw = reader.read_line(4 * max_chars + 4)
                if raw is None:  # the file shrank under us; content files never do
                    break
                line = _decode_line(number, raw[0], raw[2], max_chars)
                if lines and len(line.text) > remaining:
                    break
                lines.append(line)
                remaining -= len(line.text)
                number += 1
        has_more = number <= total
        return LineSlice(lines, total, offset, has_more, number if has_more else None)

    def grep(
        self,
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

        The pattern is searched in each line separately (it never sees a newline). The file is
        streamed from line ``offset``; to continue a truncated result, pass the number of the
        last line returned + 1. ``context`` lines are kept before and after each match; when
        two matches are close, each line is returned once: the lines between them go to the
        earlier match's ``after`` and the later match's ``before`` only holds lines not shown
        yet. ``max_chars`` bounds the text of all returned lines as in `read_lines`: the search
        stops before a line that does not fit, except that the first match's line is cut to fit.
        ``timeout`` is the time the regex engine may spend on one line; a pattern that exceeds
        it (catastrophic backtracking), or that is slow on every line (see
        ``_GREP_SECONDS_PER_LINE``), raises `TimeoutError` naming the line to continue from.
        Patterns over ``MAX_PATTERN_CHARS``, with huge repeat counts, or recursive ones are refused
        with `ValueError`: they could exhaust memory before matching anything. Lines over 1 MiB
        are searched in overlapping 1 MiB windows: a match in them is found unless it is longer
        than 64 KiB, and ``$``/``\\b``/lookaheads may rarely match at a window's edge.
        """
        digest = _check_digest(digest)
        if context < 0:
            raise ValueError(f"context must be >= 0, got {context}")
        _check_positive("max_matches", max_matches)
        _check_positive("max_chars", max_chars)
        _check_positive("offset", offset)
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        compiled = _compile(pattern, ignore_case)  # before touching the file: bad input first
        with self._open(digest) as f:
            index = self._index(digest, f)
            if offset > index.total_lines:
                return GrepResult([], index.total_lines, truncated=False)
            search = _LineSearch(compiled, pattern, ignore_case, timeout, f)
            grep = _Grep(context, max_matches, max_chars)
            reader = self._reader_at(digest, f, index, offset)
            for number, raw in enumerate(reader.lines(_GREP_WHOLE_LINE), offset):
                if grep.full:  # another line exists, but nothing more could be returned
                    grep.stop()
                    break
                grep.feed(number, raw, search.matches(number, raw))
                if grep.done:
                    break
        return GrepResult(grep.finish(), index.total_lines, grep.truncated)

    def read_text(self, digest: str, *, max_bytes: int | None = None) -> str:
        """The whole content, decoded like lines are (invalid UTF-8 → U+FFFD).

        This one does load the file: it is for callers that need everything at once (the
        full-text resource) and have bounded the size; ``max_bytes`` makes a larger file a
        `ValueError` instead of a memory spike.
        """
        digest = _check_digest(digest)
        with self._open(digest) as f:
            size = os.fstat(f.fileno()).st_size
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

    # -- housekeeping ------------------------------------------------------------------------------

    def delete(self, digest: str) -> None:
        """Remove the content and its index. Deleting what is not there is not an error."""
        digest = _check_digest(digest)
        with self._lock:
            _unlink(self._data_path(digest))
            _unlink(self._index_path(digest))

    def files(self) -> Iterator[StoredFile]:
        """Every stored content file with its size and mtime (unordered), for gc and quotas."""
        with os.scandir(self.root) as entries:
            for entry in entries:
                if not _DIGEST.fullmatch(entry.name):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # deleted while we were listing
                    continue
                yield StoredFile(entry.name, st.st_size, st.st_mtime)

    def total_bytes(self) -> int:
        """Bytes of stored content (indexes, a few bytes per thousand lines, are not counted)."""
        return sum(f.bytes for f in self.files())

    # -- internals ---------------------------------------------------------------------------------

    def _data_path(self, digest: str) -> Path:
        return self.root / digest

    def _index_path(self, digest: str) -> Path:
        return self.root / f"{digest}.idx"

    def _open(self, digest: str) -> BinaryIO:
        try:
            return open(self._data_path(digest), "rb", buffering=0)  # we buffer ourselves
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no spilled content with sha256 {digest}: it was deleted (retention or quota) "
                "or never stored"
            ) from None

    def _index(self, digest: str, f: BinaryIO, *, rebuild: bool = False) -> _Index:
        """The file's line index: the sidecar while the file's size and mtime are what it recorded,
        else rebuilt by streaming the file, which rehashes it too.

        Raises `DamagedContent` when the bytes no longer hash to ``digest``. A file only touched
        (same bytes, new mtime) is rehashed once and its index restamped.
        """
        st = os.fstat(f.fileno())
        if not rebuild:
            index = _load_index(self._index_path(digest))
            if index is not None and index.size == st.st_size and index.mtime_ns == st.st_mtime_ns:
                return index
        hasher = hashlib.sha256()
        indexer = _Indexer()
        f.seek(0)
        while block := f.read(_STREAM_BLOCK):
            hasher.update(block)
            indexer.feed(block)
        if hasher.hexdigest() != digest:
            raise DamagedContent(
                digest, f"its {indexer.size:,} bytes no longer hash to that sha256 (changed outside contextfold)"
            )
        data = _stamped(indexer.finish(), st.st_mtime_ns)
        self._write_index(digest, data)
        index = _parse_index(data)
        assert index is not None
        return index

    def _reader_at(self, digest: str, f: BinaryIO, index: _Index, number: int) -> _LineReader:
        """A reader positioned at the start of line ``number`` (1 <= number <= total)."""
        for _ in range(2):
            slot = (number - 1) // index.stride
            start = index.offsets[slot]
            # A checksum-valid index that points mid-line means it does not belong to this
            # content (or was crafted); rebuild it rather than return wrong line numbers.
            if start == 0 or _byte_at(f, start - 1) == b"\n":
                reader = _LineReader(f, start)
                reader.skip_lines(number - 1 - slot * index.stride)
                return reader
            index = self._index(digest, f, rebuild=True)
        raise RuntimeError(f"line index of {digest} is inconsistent after a rebuild")  # unreachable

    def _remove_stale_temps(self) -> None:
        cutoff = time.time() - _STALE_TEMP_SECONDS
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.name.startswith(".tmp-"):
                    try:
                        if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                            os.unlink(entry.path)
                    except OSError:  # gone already, or not ours to remove: not worth failing for
                        pass


# -- validation and encoding -----------------------------------------------------------------------


def _check_digest(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ValueError(
            f"invalid content digest {digest!r}: expected a sha256 as 64 lowercase hex characters"
        )
    return digest


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _encode(text: str) -> bytes:
    """UTF-8, keeping lone surrogates instead of failing on them.

    ``\\udc80``-``\\udcff`` are how Python carries undecodable bytes (``surrogateescape``, as in
    ``os.fsdecode`` or subprocess output decoded that way), so they go back to those raw bytes;
    any other lone surrogate (e.g. half a pair from JSON) is kept with ``surrogatepass``.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    parts = []
    for piece in re.split("([\ud800-\udfff]+)", text):
        if piece and "\ud800" <= piece[0] <= "\udfff":
            for ch in piece:
                if "\udc80" <= ch <= "\udcff":
                    parts.append(ch.encode("utf-8", "surrogateescape"))
                else:
                    parts.append(ch.encode("utf-8", "surrogatepass"))
        else:
            parts.append(piece.encode("utf-8"))
    return b"".join(parts)


def _decode_line(number: int, data: bytes, length: int, max_chars: int) -> Line:
    """Line ``number`` from ``data``, the first bytes of a line of ``length`` bytes."""
    text = data.decode("utf-8", "replace")
    if len(text) > max_chars:
        return Line(number, text[:max_chars], truncated=True)
    if len(data) < length:
        # Only the head of the line was read (grep reads 1 MiB); its last character may be
        # a multi-byte sequence cut in half, which decodes to a spurious replacement character.
        return Line(number, text[:-1] if text.endswith("\ufffd") else text, truncated=True)
    return Line(number, text)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fsync_dir(path: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows: directories cannot be opened and fsynced
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _byte_at(f: BinaryIO, offset: int) -> bytes:
    f.seek(offset)
    return f.read(1)


# -- line index ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Index:
    stride: int
    total_lines: int
    offsets: array  # offsets[k] = byte offset where line k * stride + 1 starts
    size: int  # bytes of the content it describes
    mtime_ns: int  # the content file's mtime when it last hashed to its digest (0: never checked)


class _Indexer:
    """Counts lines and records every ``stride``-th line start while bytes stream past."""

    def __init__(self) -> None:
        self.stride = _INDEX_STRIDE
        self.offsets = array("Q", [0])  # line 1 starts at 0 (dropped again if the file is empty)
        self.newlines = 0
        self.size = 0
        self._last_byte = b"\n"

    def feed(self, chunk: bytes) -> None:
        count = chunk.count(b"\n")
        # The next entry is the line after newline number `target` (global count).
        target = self.stride * len(self.offsets)
        pos = 0
        seen = 0  # newlines of this chunk before `pos`
        while self.newlines + count >= target:
            pos = _nth_newline(chunk, pos, target - self.newlines - seen) + 1
            seen = target - self.newlines
            self.offsets.append(self.size + pos)
            if len(self.offsets) > _INDEX_MAX_ENTRIES:
                # Keep entries 0, 2, 4, …: exactly the starts of every (2 * stride)-th line.
                self.offsets = self.offsets[::2]
                self.stride *= 2
            target = self.stride * len(self.offsets)
        self.newlines += count
        self.size += len(chunk)
        if chunk:
            self._last_byte = chunk[-1:]

    @property
    def total_lines(self) -> int:
        # A final line without a newline still counts; a trailing newline opens no new line.
        return self.newlines + (self._last_byte != b"\n")

    def finish(self) -> bytes:
        """The serialised index, not stamped with a verified mtime yet (see `_stamped`)."""
        total = self.total_lines
        # An entry for the line after a trailing newline sits at the end of the file and names
        # no line; the same goes for line 1 of an empty file.
        offsets = self.offsets[: -(-total // self.stride)]
        return _pack_index(0, self.stride, self.size, total, _le_bytes(offsets))


def _pack_index(mtime_ns: int, stride: int, size: int, total: int, body: bytes) -> bytes:
    fields = (_INDEX_MAGIC, mtime_ns, stride, size, total, len(body) // 8)
    crc = zlib.crc32(body, zlib.crc32(_INDEX_HEADER.pack(*fields, 0)[:-4]))
    return _INDEX_HEADER.pack(*fields, crc) + body


def _stamped(data: bytes, mtime_ns: int) -> bytes:
    """A serialised index recording that its content file, at ``mtime_ns``, hashed to its digest."""
    _, _, stride, size, total, _, _ = _INDEX_HEADER.unpack_from(data)
    return _pack_index(mtime_ns, stride, size, total, data[_INDEX_HEADER.size :])


def _sha256_of(f: BinaryIO) -> str:
    hasher = hashlib.sha256()
    while block := f.read(_STREAM_BLOCK):
        hasher.update(block)
    return hasher.hexdigest()


def _le_bytes(values: array) -> bytes:
    if sys.byteorder == "big":  # pragma: no cover - the format is little-endian everywhere
        values = array("Q", values)
        values.byteswap()
    return values.tobytes()


def _index_total_lines(data: bytes) -> int:
    return _INDEX_HEADER.unpack_from(data)[4]


def _load_index(path: Path) -> _Index | None:
    """The index at ``path`` if it is intact (the caller compares its size and mtime), else None."""
    try:
        with open(path, "rb", buffering=0) as f:
            # read(n) allocates n bytes up front, so size the read by the file, not the cap.
            if os.fstat(f.fileno()).st_size > _INDEX_MAX_FILE:
                return None
            data = f.read()
    except FileNotFoundError:
        return None
    return _parse_index(data)


def _parse_index(data: bytes) -> _Index | None:
    if len(data) < _INDEX_HEADER.size or len(data) > _INDEX_MAX_FILE:
        return None
    magic, mtime_ns, stride, size, total, count, crc = _INDEX_HEADER.unpack_from(data)
    body = data[_INDEX_HEADER.size :]
    if (
        magic != _INDEX_MAGIC
        or stride < 1
        or count != -(-total // stride)
        or len(body) != 8 * count
        or zlib.crc32(body, zlib.crc32(data[: _INDEX_HEADER.size - 4])) != crc
    ):
        return None
    offsets = array("Q")
    offsets.frombytes(body)
    if sys.byteorder == "big":  # pragma: no cover
        offsets.byteswap()
    if count and (offsets[0] != 0 or offsets[-1] >= size):
        return None
    return _Index(stride, total, offsets, size, mtime_ns)


def _nth_newline(buf: bytes, pos: int, k: int) -> int:
    """Index of the ``k``-th newline (k >= 1) at or after ``pos``; the caller knows it exists.

    Counting in shrinking windows keeps this in C (bytes.count) instead of a Python loop of
    ``k`` finds, which matters for files of millions of short lines.
    """
    step = 1 << 16
    while True:
        end = min(pos + step, len(buf))
        n = buf.count(b"\n", pos, end)
        if n < k:
            k -= n
            pos = end
        elif step > 256:
            step >>= 1
        else:
            for _ in range(k):
                pos = buf.index(b"\n", pos) + 1
            return pos - 1


# -- streaming lines -------------------------------------------------------------------------------

_RawLine = tuple[bytes, int, int]
"""(the line's first bytes — all of it when their length equals the third item, its byte offset
in the file, its length without the newline). A plain tuple: grep makes one per line."""


class _LineReader:
    """Reads lines from a file position in 64 KiB blocks, holding at most ``limit`` bytes of
    any one line, so a gigantic line costs no more memory than a short one."""

    def __init__(self, f: BinaryIO, offset: int) -> None:
        self._f = f
        f.seek(offset)
        self._buf = b""
        self._base = offset  # file offset of self._buf[0]
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
                self._i = _nth_newline(self._buf, self._i, n) + 1
                n = 0

    def read_line(self, limit: int) -> _RawLine | None:
        """The next line (its first ``limit`` bytes), or None at the end of the file."""
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

    def lines(self, limit: int) -> Iterator[_RawLine]:
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


# -- grep ------------------------------------------------------------------------------------------

_REGEX_SYNTAX = frozenset("\\.^$*+?{}[]|()")


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
        self, compiled: regex.Pattern[str], pattern: str, ignore_case: bool, timeout: float, f: BinaryIO
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

    def matches(self, number: int, raw: _RawLine) -> bool:
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

    def _matches_windows(self, number: int, raw: _RawLine) -> bool:
        """Search a line too long to decode whole, window by window.

        Each window decodes its core plus ``_GREP_OVERLAP`` bytes on each side, and a match
        must start in the core (the next window owns the rest). The leading overlap gives
        lookbehinds their context and, passed as ``pos``, keeps ``^`` from matching at a
        window's edge; the trailing overlap lets a match run past the core. Two approximations
        remain, both documented on `SpillFiles.grep`: a match longer than the overlap may be
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

    def __init__(self, compiled: regex.Pattern[str], f: BinaryIO) -> None:
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
        return self._count >= self._max_matches and (
            self._pending is None or len(self._pending.after) >= self._context
        )

    def stop(self) -> None:
        """Stop before the end of the file: there may be more."""
        self.done = True
        self.truncated = True

    def _line(self, number: int, data: bytes, length: int) -> Line:
        return _decode_line(number, data, length, self._max_chars)

    def feed(self, number: int, raw: _RawLine, matched: bool) -> None:
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

"""The line index of a blob: where every ``stride``-th line starts, and the proof it belongs.

Lines are split on ``\\n`` only (``\\r`` stays in the text), a final line without a newline
counts, a trailing newline does not start an extra empty line, and an empty blob has no lines.
The index records the byte offset of every ``stride``-th line start, so a reader seeks to the
nearest one and scans at most ``stride`` lines forward (`lines`).

Format (little-endian): a header — magic, version, stride, content size, total lines, entry
count, crc32 — then one u64 offset per entry. ``version`` is the blob's version
(`blobs.BlobInfo.version`) when its bytes were last known to hash to its digest (put, or rehashed
since): `verified_index` trusts the content while its size and version still match, and rehashes
it once when only the version moved (a touched file is fine, an edited one is damaged).

`Intake` is what every backend's ``put`` runs over the bytes streaming in: the sha256 and the
index in one pass.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextfold.blobs.base import DamagedContent

if TYPE_CHECKING:
    from contextfold.blobs.base import BlobReader, BlobStore

__all__ = [
    "Index",
    "Indexer",
    "Intake",
    "MAX_INDEX_BYTES",
    "nth_newline",
    "parse",
    "sha256_of",
    "stamped",
    "total_lines",
    "verified",
]

_INDEX_STRIDE = 1_000
"""An index entry every this many lines: a deep read scans at most this many lines forward."""
_INDEX_MAX_ENTRIES = 1 << 16
"""Past this many entries the stride doubles (every other entry is dropped), so an index never
exceeds ~512 KiB however many lines a blob has and can always be loaded whole."""
_INDEX_MAGIC = b"CFSPIDX2"
_INDEX_HEADER = struct.Struct("<8sQQQQQI")  # magic, version, stride, data size, total lines, entries, crc32
MAX_INDEX_BYTES = _INDEX_HEADER.size + 8 * (_INDEX_MAX_ENTRIES + 1)
"""No valid index is larger: a backend reading one may refuse anything bigger unread."""

_STREAM_BLOCK = 1 << 20
"""Read size while rebuilding an index (pure sequential scan, larger is faster)."""

if array("Q").itemsize != 8:  # pragma: no cover - every platform CPython supports has 8
    raise ImportError("contextfold.blobs.lineindex needs 8-byte unsigned array items")


@dataclass(frozen=True)
class Index:
    stride: int
    total_lines: int
    offsets: array[int]  # offsets[k] = byte offset where line k * stride + 1 starts
    size: int  # bytes of the content it describes
    version: int  # the blob's version when it last hashed to its digest (0: never checked)


class Indexer:
    """Counts lines and records every ``stride``-th line start while bytes stream past."""

    def __init__(self) -> None:
        self.stride = _INDEX_STRIDE
        self.offsets = array("Q", [0])  # line 1 starts at 0 (dropped again if the blob is empty)
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
            pos = nth_newline(chunk, pos, target - self.newlines - seen) + 1
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
        """The serialised index, not stamped with a verified version yet (see `stamped`)."""
        total = self.total_lines
        # An entry for the line after a trailing newline sits at the end of the blob and names
        # no line; the same goes for line 1 of an empty blob.
        offsets = self.offsets[: -(-total // self.stride)]
        return _pack(0, self.stride, self.size, total, _le_bytes(offsets))


class Intake:
    """The sha256 and the line index of content, computed in one pass while it streams in."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._indexer = Indexer()

    def feed(self, chunk: bytes) -> None:
        self._hasher.update(chunk)
        self._indexer.feed(chunk)

    @property
    def size(self) -> int:
        return self._indexer.size

    @property
    def lines(self) -> int:
        return self._indexer.total_lines

    def digest(self) -> str:
        return self._hasher.hexdigest()

    def index(self) -> bytes:
        """The unstamped index (see `stamped`)."""
        return self._indexer.finish()


def stamped(data: bytes, version: int) -> bytes:
    """A serialised index recording that its blob, at ``version``, hashed to its digest."""
    _, _, stride, size, total, _, _ = _INDEX_HEADER.unpack_from(data)
    return _pack(version, stride, size, total, data[_INDEX_HEADER.size :])


def parse(data: bytes | None) -> Index | None:
    """The index in ``data`` if it is intact (the caller compares its size and version), else None."""
    if data is None or len(data) < _INDEX_HEADER.size or len(data) > MAX_INDEX_BYTES:
        return None
    magic, version, stride, size, total, count, crc = _INDEX_HEADER.unpack_from(data)
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
    return Index(stride, total, offsets, size, version)


def verified(blobs: BlobStore, digest: str, f: BlobReader, *, rebuild: bool = False) -> Index:
    """The line index of the blob open as ``f``: the stored one while the blob's size and version
    are what it recorded, else rebuilt by streaming the blob, which rehashes it too.

    Raises `DamagedContent` when the bytes no longer hash to ``digest``. A blob only touched (same
    bytes, new version) is rehashed once and its index restamped.
    """
    info = f.info()
    if not rebuild:
        index = parse(blobs.read_index(digest))
        if index is not None and index.size == info.size and index.version == info.version:
            return index
    intake = Intake()
    f.seek(0)
    while block := f.read(_STREAM_BLOCK):
        intake.feed(block)
    if intake.digest() != digest:
        raise DamagedContent(
            digest, f"its {intake.size:,} bytes no longer hash to that sha256 (changed outside contextfold)"
        )
    data = stamped(intake.index(), info.version)
    blobs.write_index(digest, data)
    index = parse(data)
    assert index is not None
    return index


def total_lines(data: bytes) -> int:
    """The line count a serialised index records."""
    total: int = _INDEX_HEADER.unpack_from(data)[4]
    return total


def sha256_of(f: BlobReader) -> str:
    """The sha256 of what ``f`` holds from its position on."""
    hasher = hashlib.sha256()
    while block := f.read(_STREAM_BLOCK):
        hasher.update(block)
    return hasher.hexdigest()


def nth_newline(buf: bytes, pos: int, k: int) -> int:
    """Index of the ``k``-th newline (k >= 1) at or after ``pos``; the caller knows it exists.

    Counting in shrinking windows keeps this in C (bytes.count) instead of a Python loop of
    ``k`` finds, which matters for blobs of millions of short lines.
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


def _pack(version: int, stride: int, size: int, total: int, body: bytes) -> bytes:
    fields = (_INDEX_MAGIC, version, stride, size, total, len(body) // 8)
    crc = zlib.crc32(body, zlib.crc32(_INDEX_HEADER.pack(*fields, 0)[:-4]))
    return _INDEX_HEADER.pack(*fields, crc) + body


def _le_bytes(values: array[int]) -> bytes:
    if sys.byteorder == "big":  # pragma: no cover - the format is little-endian everywhere
        values = array("Q", values)
        values.byteswap()
    return values.tobytes()

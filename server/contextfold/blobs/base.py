"""The blob store: where spilled content lives, behind one small interface.

A blob is immutable content named by the sha256 of its bytes (64 lowercase hex characters). The
database maps the opaque output ids a client sees to digests (`outputs`); the bytes live in a
`BlobStore`. Reading pages of lines (`lines`) and searching (`linesearch`) go through `open`,
which returns a seekable binary reader, so they work on any backend. The local filesystem
(`fileblobs.FileBlobs`) is the embedded default; a database or an object store is another class
with the same methods, checked by the same contract suite (tests/contract/test_blob_contract.py).

Every blob has a line index beside it (`lineindex`): `put` computes it while the content streams
in and stores it with the content. The index is a cache that readers verify against the blob's
``version`` (a number that changes whenever the stored bytes may have changed, such as a file's
mtime) and rebuild, rehashing the content, when it does not match.

Methods are synchronous and safe to call from several threads; async callers run them with
`asyncio.to_thread`. Every method that takes a digest validates it first (`check_digest`), so
nothing a client sends can become a path, a key or a query.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

__all__ = [
    "BlobInfo",
    "BlobReader",
    "BlobStore",
    "DamagedContent",
    "RangeReads",
    "StoredBlob",
    "byte_chunks",
    "check_digest",
    "encode_text",
    "is_digest",
    "missing",
]

_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class StoredBlob:
    """What `BlobStore.put` stored. ``created`` is False when the content was there already."""

    digest: str
    bytes: int
    lines: int
    created: bool
    index: builtins.bytes = field(default=b"", repr=False, compare=False)  # `bytes` is the field above
    """The line index stored with the content (`lineindex`), stamped with its version."""


@dataclass(frozen=True)
class BlobInfo:
    """One stored blob: its size, when it was last put, and its version (see the module docstring)."""

    digest: str
    size: int
    modified: float
    """Seconds since the epoch when the content was last put: retention and gc's grace count from it."""
    version: int


class BlobReader(Protocol):
    """A blob opened for reading: a seekable binary file whose ``read`` returns what is asked
    for unless the end comes first, plus `info` on the content as opened."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...

    def info(self) -> BlobInfo: ...

    def __enter__(self) -> BlobReader: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None: ...


class WindowedReader:
    """A `BlobReader` over remote storage (a database's chunks, an object's byte ranges): seek and
    read like a file, the bytes around the position fetched as they are needed, more at a time
    while reading on. A subclass says how to fetch (`_window_at`); the rest is here."""

    def __init__(self, info: BlobInfo) -> None:
        self._info = info
        self._pos = 0
        self._start = 0
        """Blob offset of `_window`."""
        self._window = b""
        self._ahead = 1
        """How many units the next fetch takes: doubles while reading on, back to 1 after a seek."""
        self.closed = False

    def _window_at(self, pos: int, ahead: int) -> tuple[int, bytes]:
        """(offset, bytes) of a window holding `pos`, about `ahead` units long; raises when the
        content is gone or cut short."""
        raise NotImplementedError

    def info(self) -> BlobInfo:
        return self._info

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0, /) -> int:
        base = {0: 0, 1: self._pos, 2: self._info.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def read(self, size: int = -1, /) -> bytes:
        if self.closed:
            raise ValueError("read of a closed blob")
        end = self._info.size if size is None or size < 0 else min(self._info.size, self._pos + size)
        out: list[bytes] = []
        while self._pos < end:
            if not self._start <= self._pos < self._start + len(self._window):
                sequential = bool(self._window) and self._pos == self._start + len(self._window)
                self._ahead = min(self._ahead * 2, 1 << 12) if sequential else 1
                self._start, self._window = self._window_at(self._pos, self._ahead)
                if not self._start <= self._pos < self._start + len(self._window):
                    raise missing(self._info.digest)  # deleted, replaced or cut short while open
            at = self._pos - self._start
            piece = self._window[at : at + (end - self._pos)]
            out.append(piece)
            self._pos += len(piece)
        return b"".join(out)

    def close(self) -> None:
        self.closed = True
        self._window = b""

    def __enter__(self) -> WindowedReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None:
        self.close()


class RangeReads:
    """`BlobStore.read_range` for every backend, through its own `open`: a file's seek and read,
    a database's chunk rows or an object's byte ranges (`WindowedReader`) fetch the bytes."""

    def open(self, digest: str) -> BlobReader:
        raise NotImplementedError

    def read_range(self, digest: str, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0:
            raise ValueError(f"a byte range needs offset >= 0 and size >= 0, got {offset} and {size}")
        with self.open(digest) as f:
            f.seek(offset)
            return f.read(size)


class BlobStore(Protocol):
    """Content-addressed storage of immutable blobs (see the module docstring)."""

    def put(self, content: bytes | Iterable[bytes]) -> StoredBlob:
        """Store ``content`` (bytes, or chunks streamed without holding them all) under its sha256.

        Content already stored intact is not stored again (``created=False``) but counts as put
        now (`BlobInfo.modified`). If the chunks raise, nothing is stored. Two threads or
        processes putting the same content at once both succeed; exactly one reports ``created``
        unless the content was there before.
        """
        ...

    def open(self, digest: str) -> BlobReader:
        """The blob for reading; `FileNotFoundError` (see `missing`) if it is not stored."""
        ...

    def read_range(self, digest: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes from byte ``offset`` (fewer at the end); `FileNotFoundError` if not stored."""
        ...

    def stat(self, digest: str) -> BlobInfo:
        """The blob's size, time and version; `FileNotFoundError` if it is not stored."""
        ...

    def delete(self, digest: str) -> None:
        """Remove the blob and its index. Deleting what is not there is not an error."""
        ...

    def list(self) -> Iterator[BlobInfo]:
        """Every stored blob (unordered), for gc and quotas."""
        ...

    def read_index(self, digest: str) -> bytes | None:
        """The line index stored beside the blob, or None (readers verify it, `lineindex`)."""
        ...

    def write_index(self, digest: str, data: bytes) -> None:
        """Replace the line index beside the blob, best effort: an index is a cache, rebuilt when missing."""
        ...


class DamagedContent(Exception):
    """A stored blob no longer holds the content its digest names (cut short or edited outside
    contextfold). Blobs never change once stored, so this is never a race."""

    def __init__(self, digest: str, problem: str) -> None:
        super().__init__(f"spilled content {digest} is damaged: {problem}")
        self.digest = digest
        self.problem = problem


def check_digest(digest: str) -> str:
    """``digest`` if it is a sha256 as 64 lowercase hex characters, else `ValueError`."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ValueError(f"invalid content digest {digest!r}: expected a sha256 as 64 lowercase hex characters")
    return digest


def is_digest(name: str) -> bool:
    return _DIGEST.fullmatch(name) is not None


def missing(digest: str) -> FileNotFoundError:
    """What every backend raises for a blob that is not stored."""
    return FileNotFoundError(
        f"no spilled content with sha256 {digest}: it was deleted (retention or quota) or never stored"
    )


def byte_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The non-empty chunks of a `put` as bytes; text is refused (encode it, see `encode_text`)."""
    for chunk in chunks:
        if isinstance(chunk, str):
            raise TypeError("put() takes bytes chunks; encode text first (or write() it whole)")
        if isinstance(chunk, (bytearray, memoryview)):
            chunk = bytes(chunk)  # hashing is fine with either; counting lines wants bytes
        elif not isinstance(chunk, bytes):
            raise TypeError(f"put() takes bytes chunks, not {type(chunk).__name__}")
        if chunk:
            yield chunk


_ENCODE_STEP = 1 << 20


def encode_text(text: str) -> bytes:
    """UTF-8, keeping lone surrogates instead of failing on them.

    ``\\udc80``-``\\udcff`` are how Python carries undecodable bytes (``surrogateescape``, as in
    ``os.fsdecode`` or subprocess output decoded that way), so they go back to those raw bytes;
    any other lone surrogate (e.g. half a pair from JSON) is kept with ``surrogatepass``.
    """
    try:
        if len(text) <= _ENCODE_STEP:
            return text.encode("utf-8")
        # A slice at a time: one call on 40 MB holds the interpreter for 50 ms, and a worker
        # thread doing it would stall the event loop that long.
        return b"".join(text[i : i + _ENCODE_STEP].encode("utf-8") for i in range(0, len(text), _ENCODE_STEP))
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

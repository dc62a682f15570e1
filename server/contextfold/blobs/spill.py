"""Spilled outputs on the local filesystem, with the reads as methods: one object for library callers.

The spill store is built from small modules over the blob-store interface (`blobs`):
`fileblobs` (the filesystem backend), `lineindex` (the line index and how a read trusts it),
`lines` (pages of lines, the whole text) and `linesearch` (regex search and its safety). The
server goes through `outputs.Outputs`, which takes any `blobs.BlobStore`. `SpillFiles` is a
`fileblobs.FileBlobs` whose methods also read and search, for callers that want one object
(scripts, tests, the benchmarks).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from contextfold.blobs import lines
from contextfold.blobs import search as linesearch
from contextfold.blobs.base import DamagedContent, StoredBlob, encode_text
from contextfold.blobs.files import FileBlobs
from contextfold.blobs.lines import READ_LIMIT_CHARS, READ_LIMIT_LINES, Line, LineSlice
from contextfold.blobs.search import GrepResult, Match

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

SpilledFile = StoredBlob
"""What `SpillFiles.write` stored: digest, bytes, lines, and whether it was new."""


@dataclass(frozen=True)
class StoredFile:
    """One stored content file, as `SpillFiles.files` lists them."""

    digest: str
    bytes: int
    mtime: float


class SpillFiles(FileBlobs):
    """Content-addressed spill files under one directory, read by lines and searched in place."""

    def write(self, data: bytes | str) -> SpilledFile:
        """Store ``data`` (text is encoded as UTF-8, see `blobs.encode_text`) and return its digest.

        Identical content is stored once: the second write returns ``created=False`` and only
        refreshes the file's mtime, so age-based retention counts from the latest write.
        """
        if isinstance(data, str):
            data = encode_text(data)
        elif not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"write() takes bytes or str, not {type(data).__name__}")
        return self.put(data)

    def write_stream(self, chunks: Iterable[bytes]) -> SpilledFile:
        """Store the concatenation of ``chunks`` without holding it in memory; if the iterable
        raises, nothing is stored."""
        return self.put(chunks)

    def size(self, digest: str) -> int:
        """Bytes of the stored content (one stat); `FileNotFoundError` if it is not stored."""
        return self.stat(digest).size

    def read_lines(
        self, digest: str, offset: int = 1, limit: int = READ_LIMIT_LINES, max_chars: int = READ_LIMIT_CHARS
    ) -> LineSlice:
        """See `lines.read_lines`."""
        return lines.read_lines(self, digest, offset, limit, max_chars)

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
        """See `linesearch.grep`."""
        return linesearch.grep(
            self,
            digest,
            pattern,
            context=context,
            max_matches=max_matches,
            ignore_case=ignore_case,
            max_chars=max_chars,
            timeout=timeout,
            offset=offset,
        )

    def read_text(self, digest: str, *, max_bytes: int | None = None) -> str:
        """See `lines.read_text`."""
        return lines.read_text(self, digest, max_bytes=max_bytes)

    def files(self) -> Iterator[StoredFile]:
        """Every stored content file with its size and mtime (unordered)."""
        for blob in self.list():
            yield StoredFile(blob.digest, blob.size, blob.modified)

    def total_bytes(self) -> int:
        """Bytes of stored content (indexes, a few bytes per thousand lines, are not counted)."""
        return sum(blob.size for blob in self.list())

"""Blobs in S3-compatible object storage (`--spill-url s3://bucket/prefix`), through obstore.

For a team whose replicas should keep spilled outputs out of the database: every replica reads
and writes the same bucket. Layout under the prefix::

    blobs/<digest>     the content, written whole (or by a multipart upload for streamed puts)
    index/<digest>     its line index (`lineindex`), version = the content's last-modified time
    tmp/<random>       a streamed put, before it is known under which digest it belongs

Credentials, region and endpoint come from the usual `AWS_*` environment variables (obstore reads
them: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for an
S3-compatible server). A streamed put uploads to ``tmp/`` while it hashes, then copies the object
to its digest and deletes the temporary one, so a failed or abandoned put never shows under a
final name. Reads fetch byte ranges: a page of lines reads one range, a search streams the object
a few megabytes per request.

Tested against moto's S3 server only (no other S3-compatible server installs on the machines this
project is built on); object stores differ in the details, such as conditional writes, which this
backend therefore does not rely on.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import NotFoundError as _ObjectMissing
from obstore.store import S3Store

from contextfold.blobs import lineindex
from contextfold.blobs.base import (
    BlobInfo,
    RangeReads,
    StoredBlob,
    WindowedReader,
    byte_chunks,
    check_digest,
    is_digest,
    missing,
)

if TYPE_CHECKING:
    from obstore.store import ClientConfig  # declared for type checkers only

__all__ = ["S3Blobs"]

_RANGE = 1 << 20
"""Bytes per ranged read; a reader moving forward asks for up to `_READAHEAD` of them at once."""
_READAHEAD = 2
_PART = 8 << 20
"""Multipart chunk size for streamed puts (S3 wants at least 5 MiB per part)."""


def _version(modified: datetime) -> int:
    return int(modified.timestamp() * 1_000_000_000)


class S3Blobs(RangeReads):
    """Content-addressed blobs in an S3 bucket (see the module docstring)."""

    def __init__(self, url: str, **config: Any) -> None:
        import os

        endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
        client: ClientConfig | None = {"allow_http": True} if endpoint.startswith("http://") else None
        self.url = url
        self._store = S3Store.from_url(url, client_options=client, **config)
        # Two threads of this process putting the same content agree on which one created it.
        self._lock = threading.Lock()

    # -- writing -----------------------------------------------------------------------------------

    def put(self, content: bytes | Iterable[bytes]) -> StoredBlob:
        intake = lineindex.Intake()
        if isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
            intake.feed(data)
            digest = intake.digest()
            with self._lock:
                info = self._head(digest)
                if info is None or info.size != len(data):
                    obstore.put(self._store, f"blobs/{digest}", data, use_multipart=len(data) > _PART)
                    created = True
                    info = self.stat(digest)
                else:
                    created = False
            return self._stored(intake, info, created)

        temp = f"tmp/{secrets.token_hex(16)}"

        def fed() -> Iterator[bytes]:
            for chunk in byte_chunks(content):
                intake.feed(chunk)
                yield chunk

        try:
            obstore.put(self._store, temp, fed(), chunk_size=_PART)
            digest = intake.digest()
            with self._lock:
                info = self._head(digest)
                created = info is None or info.size != intake.size
                if created:
                    obstore.copy(self._store, temp, f"blobs/{digest}")
                    info = self.stat(digest)
        finally:
            obstore.delete(self._store, temp)
        assert info is not None
        return self._stored(intake, info, created)

    def _stored(self, intake: lineindex.Intake, info: BlobInfo, created: bool) -> StoredBlob:
        index = lineindex.stamped(intake.index(), info.version)
        self.write_index(info.digest, index)
        return StoredBlob(info.digest, intake.size, intake.lines, created=created, index=index)

    def write_index(self, digest: str, data: bytes) -> None:
        digest = check_digest(digest)
        try:
            obstore.put(self._store, f"index/{digest}", data)
        except Exception:  # an index is a cache: the next read rebuilds it
            pass

    # -- reading -----------------------------------------------------------------------------------

    def open(self, digest: str) -> _ObjectReader:
        return _ObjectReader(self, self.stat(digest))

    def stat(self, digest: str) -> BlobInfo:
        info = self._head(check_digest(digest))
        if info is None:
            raise missing(digest)
        return info

    def _head(self, digest: str) -> BlobInfo | None:
        try:
            meta = obstore.head(self._store, f"blobs/{digest}")
        except (_ObjectMissing, FileNotFoundError):
            return None
        return BlobInfo(digest, meta["size"], meta["last_modified"].timestamp(), _version(meta["last_modified"]))

    def read_index(self, digest: str) -> bytes | None:
        digest = check_digest(digest)
        try:
            result = obstore.get(self._store, f"index/{digest}")
        except (_ObjectMissing, FileNotFoundError):
            return None
        if result.meta["size"] > lineindex.MAX_INDEX_BYTES:
            return None
        return bytes(result.bytes())

    def list(self) -> Iterator[BlobInfo]:
        for batch in obstore.list(self._store, prefix="blobs/"):
            for meta in batch:
                name = meta["path"].rsplit("/", 1)[-1]
                if is_digest(name):
                    yield BlobInfo(
                        name, meta["size"], meta["last_modified"].timestamp(), _version(meta["last_modified"])
                    )

    def _range(self, digest: str, start: int, length: int) -> bytes:
        try:
            return bytes(obstore.get_range(self._store, f"blobs/{digest}", start=start, length=length))
        except (_ObjectMissing, FileNotFoundError):
            raise missing(digest) from None

    # -- housekeeping ------------------------------------------------------------------------------

    def delete(self, digest: str) -> None:
        digest = check_digest(digest)
        with self._lock:
            obstore.delete(self._store, [f"blobs/{digest}", f"index/{digest}"])


class _ObjectReader(WindowedReader):
    """An object open for reading, fetched in byte ranges of `_RANGE` (`_READAHEAD` at most)."""

    def __init__(self, store: S3Blobs, info: BlobInfo) -> None:
        super().__init__(info)
        self._store = store

    def _window_at(self, pos: int, ahead: int) -> tuple[int, bytes]:
        start = pos - pos % _RANGE
        length = min(min(ahead, _READAHEAD) * _RANGE, self._info.size - start)
        return start, self._store._range(self._info.digest, start, length)

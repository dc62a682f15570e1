"""Blobs as files in one directory: the embedded default `BlobStore` (see `blobs`).

Layout, all inside one ``0700`` directory::

    <digest>          the content, 0600, written atomically (temp file + fsync + os.replace)
    <digest>.idx      its line index (`lineindex`), version = the content file's mtime in ns
    .tmp-*            files being written; never visible under a final name

Safe to share between threads of one process, and between processes: a write is an atomic rename
of identical content, so the worst case is a duplicated write. A content file's mtime is when it
was last put (a put of stored content refreshes it), which is what retention counts from.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from contextfold.blobs import lineindex
from contextfold.blobs.base import BlobInfo, RangeReads, StoredBlob, byte_chunks, check_digest, is_digest, missing

__all__ = ["FileBlobs"]

_STALE_TEMP_SECONDS = 24 * 3600
"""Temp files left by a crashed writer are removed when a store is opened after this long."""


class _BlobFile(io.FileIO):
    """A content file open for reading (unbuffered: readers buffer themselves)."""

    digest = ""

    def info(self) -> BlobInfo:
        st = os.fstat(self.fileno())
        return BlobInfo(self.digest, st.st_size, st.st_mtime, st.st_mtime_ns)


class FileBlobs(RangeReads):
    """Content-addressed blobs under one directory (see the module docstring)."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.root = Path(root)
        # Serialises "is it there already? then rename into place" so two threads writing the
        # same content agree on which of them created it. Temp files are written outside it.
        self._lock = threading.Lock()
        if read_only:
            return  # a home that cannot be written (contextfold.home.opening): reads only, nothing to prepare
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkdir's mode is filtered by the umask and ignored for an existing directory; outputs
        # can hold secrets, so force it either way.
        os.chmod(self.root, 0o700)
        self._remove_stale_temps()

    # -- writing -----------------------------------------------------------------------------------

    def put(self, content: bytes | Iterable[bytes]) -> StoredBlob:
        """Store ``content`` under its sha256 (see `BlobStore.put`).

        Whole bytes are hashed first, so content already stored is not written again; chunks are
        hashed and indexed while they stream into a temp file, renamed into place at the end. A
        stored copy that is damaged (`blobs.DamagedContent`) is replaced by this one.
        """
        intake = lineindex.Intake()
        if isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
            intake.feed(data)
            with self._lock:
                reused = self._reuse(intake)
            if reused is not None:
                return reused
            temp = self._write_temp(lambda f: f.write(data))
        else:

            def copy(f: BinaryIO) -> None:
                for chunk in byte_chunks(content):
                    intake.feed(chunk)
                    f.write(chunk)

            temp = self._write_temp(copy)
        return self._commit(intake, temp)

    def _write_temp(self, fill: Callable[[BinaryIO], object]) -> Path:
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

    def _commit(self, intake: lineindex.Intake, temp: Path) -> StoredBlob:
        """Rename a finished temp file to its digest, unless another writer got there first."""
        try:
            digest = intake.digest()
            with self._lock:
                reused = self._reuse(intake)
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
        index = lineindex.stamped(intake.index(), mtime_ns)
        self.write_index(digest, index)
        return StoredBlob(digest, intake.size, intake.lines, created=True, index=index)

    def _reuse(self, intake: lineindex.Intake) -> StoredBlob | None:
        """The stored copy of this content with its mtime refreshed, or None when there is no
        intact one (the caller then stores its own, over a damaged copy). Caller holds the lock,
        so no thread of this process deletes the file meanwhile; another process may."""
        digest = intake.digest()
        path = self._data_path(digest)
        try:
            if not self._intact(digest, os.stat(path), intake.size):
                return None
            os.utime(path)
            mtime_ns = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            return None
        index = lineindex.stamped(intake.index(), mtime_ns)
        self.write_index(digest, index)
        return StoredBlob(digest, intake.size, intake.lines, created=False, index=index)

    def _intact(self, digest: str, st: os.stat_result, size: int) -> bool:
        """Whether the stored file holds ``size`` bytes hashing to ``digest``: trusted while its
        size and mtime are what its index recorded, else rehashed."""
        if st.st_size != size:
            return False
        index = lineindex.parse(self.read_index(digest))
        if index is not None and index.size == size and index.version == st.st_mtime_ns:
            return True
        with self._open(digest) as f:
            return lineindex.sha256_of(f) == digest

    def write_index(self, digest: str, data: bytes) -> None:
        """Write a sidecar index atomically, best effort.

        The index is a cache: a torn one fails its checksum and one that could not be written
        (full or read-only disk) is rebuilt by the next read, so neither fsync nor failure
        matter here — only the content has to be durable.
        """
        digest = check_digest(digest)
        try:
            fd, name = tempfile.mkstemp(prefix=".tmp-", dir=self.root)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(name, self._index_path(digest))
        except OSError:
            _unlink(Path(name))
        except BaseException:
            _unlink(Path(name))
            raise

    # -- reading -----------------------------------------------------------------------------------

    def open(self, digest: str) -> _BlobFile:
        return self._open(check_digest(digest))

    def stat(self, digest: str) -> BlobInfo:
        digest = check_digest(digest)
        try:
            st = os.stat(self._data_path(digest))
        except FileNotFoundError:
            raise missing(digest) from None
        return BlobInfo(digest, st.st_size, st.st_mtime, st.st_mtime_ns)

    def exists(self, digest: str) -> bool:
        """Whether content with this digest is stored."""
        return self._data_path(check_digest(digest)).is_file()

    def read_index(self, digest: str) -> bytes | None:
        try:
            with open(self._index_path(check_digest(digest)), "rb", buffering=0) as f:
                # read(n) allocates n bytes up front, so size the read by the file, not the cap.
                if os.fstat(f.fileno()).st_size > lineindex.MAX_INDEX_BYTES:
                    return None
                return f.read()
        except FileNotFoundError:
            return None

    def list(self) -> Iterator[BlobInfo]:
        with os.scandir(self.root) as entries:
            for entry in entries:
                if not is_digest(entry.name):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # deleted while we were listing
                    continue
                yield BlobInfo(entry.name, st.st_size, st.st_mtime, st.st_mtime_ns)

    # -- housekeeping ------------------------------------------------------------------------------

    def delete(self, digest: str) -> None:
        digest = check_digest(digest)
        with self._lock:
            _unlink(self._data_path(digest))
            _unlink(self._index_path(digest))

    # -- internals ---------------------------------------------------------------------------------

    def _data_path(self, digest: str) -> Path:
        return self.root / digest

    def _index_path(self, digest: str) -> Path:
        return self.root / f"{digest}.idx"

    def _open(self, digest: str) -> _BlobFile:
        try:
            f = _BlobFile(self._data_path(digest), "rb")
        except FileNotFoundError:
            raise missing(digest) from None
        f.digest = digest
        return f

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

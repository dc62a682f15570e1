"""Blobs in PostgreSQL: the spill store every replica shares when the database is PostgreSQL.

Layout (tables made by `store.pgschema`): a row per blob in ``blobs`` — digest, size, line count,
its line index (`lineindex`) and when it was last put — and its bytes in ``blob_chunks``, split
into chunks of `CHUNK_BYTES`. A blob's ``blob_id``, drawn from a sequence when it is stored, is
its version (`blobs.BlobInfo.version`): rows are never rewritten, so the index stays valid until
the blob is deleted and stored anew under a new id.

Reads fetch only the chunks they touch: a page of lines from the middle of a 200 MB output reads
one or two chunks, found through the index; a reader moving forward fetches several chunks per
query, so a search streams the blob in a few hundred round trips. Puts stream too: the chunks are
copied in as they arrive (`COPY … FROM STDIN`), hashed and indexed on the way, and the blob row
is inserted at the end; two puts of the same content race on that row's primary key and exactly
one of them keeps its chunks.

Methods are synchronous (the spill store's interface; async callers use threads) and take a
connection from a pool for each call, so a reader holds none between reads.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from contextfold.blobs import lineindex
from contextfold.blobs.base import BlobInfo, RangeReads, StoredBlob, WindowedReader, byte_chunks, check_digest, missing
from contextfold.store.postgres import FIRST_WAIT_SECONDS, check_reachable, connect_kwargs, connection_lost

__all__ = ["CHUNK_BYTES", "PostgresBlobs"]

CHUNK_BYTES = 256 * 1024
"""Bytes per stored chunk: a page of lines reads one or two, a 200 MB blob has 800."""
_READAHEAD_CHUNKS = 8
"""A reader moving forward fetches up to this many chunks in one query (2 MiB)."""


class _Exists(Exception):
    """Raised inside a put's transaction to roll its chunks back: the content was stored meanwhile."""


class PostgresBlobs(RangeReads):
    """Content-addressed blobs in PostgreSQL (see the module docstring)."""

    def __init__(self, url: str, *, pool_size: int = 8, timeout: float = 30.0) -> None:
        from contextfold.store import pgschema

        with psycopg.connect(url, connect_timeout=max(1, int(timeout)), **connect_kwargs()) as conn:
            pgschema.migrate(conn)
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs=connect_kwargs(),
            open=False,
            timeout=timeout,
            name="contextfold-blobs",
            check=_check,
        )
        self._pool.open(wait=True, timeout=timeout)
        self._url = url
        self._timeout = timeout

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, failing within about a second when the database refuses
        connections (see `PostgresStore._connection`)."""
        try:
            conn = self._pool.getconn(timeout=min(FIRST_WAIT_SECONDS, self._timeout))
        except PoolTimeout:
            check_reachable(self._url, self._timeout)  # raises when it is unreachable
            conn = self._pool.getconn(timeout=max(FIRST_WAIT_SECONDS, self._timeout - FIRST_WAIT_SECONDS))
        try:
            with conn:  # commits, or rolls back on an error, as the pool's own does
                yield conn
        finally:
            self._pool.putconn(conn)

    # -- writing -----------------------------------------------------------------------------------

    def put(self, content: bytes | Iterable[bytes]) -> StoredBlob:
        intake = lineindex.Intake()
        if isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
            intake.feed(data)
            reused = self._reuse(intake)
            if reused is not None:
                return reused
            chunks: Iterable[bytes] = (data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES))
            fed = True
        else:
            chunks = _rechunk(byte_chunks(content))
            fed = False
        try:
            with self._connection() as conn, conn.transaction():
                next_id = conn.execute("SELECT nextval('blob_ids')").fetchone()
                assert next_id is not None  # nextval always returns its one row
                blob_id = next_id[0]
                with conn.cursor().copy("COPY blob_chunks (blob_id, n, data) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "int4", "bytea"])
                    for n, chunk in enumerate(chunks):
                        if not fed:
                            intake.feed(chunk)
                        copy.write_row((blob_id, n, chunk))
                index = lineindex.stamped(intake.index(), blob_id)
                inserted = conn.execute(
                    "INSERT INTO blobs (digest, blob_id, size, lines, chunk_size, line_index, modified) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (digest) DO NOTHING",
                    (intake.digest(), blob_id, intake.size, intake.lines, CHUNK_BYTES, index, time.time()),
                ).rowcount
                if not inserted:
                    raise _Exists
        except _Exists:
            reused = self._reuse(intake)
            if reused is None:  # deleted again in between: store it (rare; the same bytes)
                return self.put(_replay(content)) if fed else self._put_again(intake)
            return reused
        return StoredBlob(intake.digest(), intake.size, intake.lines, created=True, index=index)

    def _put_again(self, intake: lineindex.Intake) -> StoredBlob:
        raise RuntimeError(
            f"spilled content {intake.digest()} was deleted while it was being stored again; retry the request"
        )

    def _reuse(self, intake: lineindex.Intake) -> StoredBlob | None:
        """The stored copy of this content, counted as put now; None when there is none."""
        digest = intake.digest()
        with self._connection() as conn:
            row = conn.execute(
                "UPDATE blobs SET modified = %s WHERE digest = %s AND size = %s RETURNING blob_id",
                (time.time(), digest, intake.size),
            ).fetchone()
        if row is None:
            return None
        index = lineindex.stamped(intake.index(), row[0])
        return StoredBlob(digest, intake.size, intake.lines, created=False, index=index)

    def write_index(self, digest: str, data: bytes) -> None:
        digest = check_digest(digest)
        try:
            with self._connection() as conn:
                conn.execute("UPDATE blobs SET line_index = %s WHERE digest = %s", (data, digest))
        except psycopg.OperationalError:
            pass  # an index is a cache: the next read rebuilds it

    # -- reading -----------------------------------------------------------------------------------

    def open(self, digest: str) -> _BlobReader:
        return _BlobReader(self, self.stat(digest), self._chunk_size(digest))

    def stat(self, digest: str) -> BlobInfo:
        digest = check_digest(digest)
        with self._connection() as conn:
            row = conn.execute("SELECT size, modified, blob_id FROM blobs WHERE digest = %s", (digest,)).fetchone()
        if row is None:
            raise missing(digest)
        return BlobInfo(digest, row[0], row[1], row[2])

    def _chunk_size(self, digest: str) -> int:
        with self._connection() as conn:
            row = conn.execute("SELECT chunk_size FROM blobs WHERE digest = %s", (digest,)).fetchone()
        if row is None:
            raise missing(digest)
        return int(row[0])

    def read_index(self, digest: str) -> bytes | None:
        digest = check_digest(digest)
        with self._connection() as conn:
            row = conn.execute(
                "SELECT line_index FROM blobs WHERE digest = %s AND octet_length(line_index) <= %s",
                (digest, lineindex.MAX_INDEX_BYTES),
            ).fetchone()
        return bytes(row[0]) if row and row[0] is not None else None

    def list(self) -> Iterator[BlobInfo]:
        with self._connection() as conn:
            rows = conn.execute("SELECT digest, size, modified, blob_id FROM blobs").fetchall()
        for digest, size, modified, blob_id in rows:
            yield BlobInfo(digest, size, modified, blob_id)

    def _chunks(self, blob_id: int, first: int, count: int) -> builtins.list[bytes]:  # `list` is a method here
        with self._connection() as conn, conn.cursor(binary=True) as cur:
            rows = cur.execute(
                "SELECT data FROM blob_chunks WHERE blob_id = %s AND n >= %s AND n < %s ORDER BY n",
                (blob_id, first, first + count),
            ).fetchall()
        return [bytes(r[0]) for r in rows]

    # -- housekeeping ------------------------------------------------------------------------------

    def delete(self, digest: str) -> None:
        digest = check_digest(digest)
        with self._connection() as conn, conn.transaction():
            row = conn.execute("DELETE FROM blobs WHERE digest = %s RETURNING blob_id", (digest,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM blob_chunks WHERE blob_id = %s", (row[0],))


class _BlobReader(WindowedReader):
    """A blob open for reading, its chunks fetched as they are needed (`_READAHEAD_CHUNKS` at most)."""

    def __init__(self, store: PostgresBlobs, info: BlobInfo, chunk_size: int) -> None:
        super().__init__(info)
        self._store = store
        self._chunk = chunk_size

    def _window_at(self, pos: int, ahead: int) -> tuple[int, bytes]:
        first = pos // self._chunk
        chunks = self._store._chunks(self._info.version, first, min(ahead, _READAHEAD_CHUNKS))
        return first * self._chunk, b"".join(chunks)


def _check(conn: psycopg.Connection) -> None:
    if connection_lost(conn):
        conn.close()  # so the pool discards it instead of lending it again
        raise psycopg.OperationalError("the database closed this connection while it was idle")


def _rechunk(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """`chunks` regrouped into pieces of `CHUNK_BYTES` (the last one shorter)."""
    pending: list[bytes] = []
    held = 0
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            take = view[: CHUNK_BYTES - held]
            pending.append(bytes(take))
            held += len(take)
            view = view[len(take) :]
            if held == CHUNK_BYTES:
                yield b"".join(pending)
                pending, held = [], 0
    if pending:
        yield b"".join(pending)


def _replay(content: Any) -> bytes:
    return bytes(content)

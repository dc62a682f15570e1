"""The team store: PostgreSQL through psycopg 3, shared by any number of stateless replicas.

Same interface and guarantees as the SQLite store (`store.base`), with PostgreSQL's concurrency
in place of SQLite's single writer:

- **One transaction per request**, as on SQLite. A write on a session first locks the session's
  row (`SELECT … FOR NO KEY UPDATE`), so writes to one session, from any replica, run one after
  another and each sees the last one's commit; writes to different sessions run side by side.
- **Revisions** for readers keeping a view (`changed_messages`): a write takes the session's next
  revision under that row lock and stamps it on every message it inserts or changes. Revisions
  therefore commit in order, and a reader that sees revision N sees every message stamped N or
  less. (SQLite does the stamping with triggers; here the store writes it, which is one column in
  statements it runs anyway.)
- **The spill store's write lock** (`OutputTransaction`) is an advisory transaction lock
  (`pgschema.SPILL_LOCK`), taken before any output row is read to decide, added or removed; gc
  deletes blobs while holding it. Lock order is always session row, then spill lock.
- Reads outside a transaction are single statements in autocommit, each its own snapshot (as on
  SQLite); the ones that must agree are one statement (`changed_messages`).

The statements are `store.sql`'s, shared with SQLite and written with `?` placeholders, which
`_PgDb` turns into psycopg's `%s` (`_pg_sql`); this module keeps the pool, the locks, the
revision stamps and PostgreSQL's spelling of what differs.

PostgreSQL text cannot hold NUL characters, which SQLite stores: every text parameter has them
replaced by U+FFFD, on writes and on lookups alike, so an id with one still finds its row.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from contextfold.domain import Session
from contextfold.store import pgschema
from contextfold.store.base import IndexProgress, SearchHit, SearchQuery, search_timed_out
from contextfold.store.rows import KEPT, UPDATABLE, session_columns
from contextfold.store.sql import (
    PART_INSERT,
    Db,
    Row,
    SQLOutputStatements,
    SQLSessionTransaction,
    SQLStore,
    SQLTenant,
    message_insert,
    search_hit,
    search_scope,
    session_update,
    spellings,
    totals,
)

log = logging.getLogger(__name__)

__all__ = [
    "PostgresStore",
    "PostgresTenant",
    "check_reachable",
    "check_reachable_async",
    "connect_kwargs",
    "is_postgres_url",
    "redact",
]

_FLUSHED = (*UPDATABLE, "revision", "next_seq", "compaction_count", "compaction_tokens_freed")
_FLUSH = session_update(_FLUSHED)
_INSERT_MESSAGE = message_insert(("rev",))
_SESSION_TABLES = ("sessions", "messages", "parts", "compactions", "outputs", "output_tombstones")
"""What `size_bytes` counts: the sessions' data, not the spilled blobs (they have their own quota)."""
_LOCK_SPILL = "SELECT pg_advisory_xact_lock(?)"

_NUL = "\x00"

FIRST_WAIT_SECONDS = 1.0
"""How long a request waits for a pooled connection before asking whether the database answers at
all: when it refuses connections, the request fails now instead of after `database_timeout_seconds`."""
_PROBE_SECONDS = 10
"""The longest a reachability probe waits to connect (a host that drops packets answers nothing)."""
_TOO_MANY_CONNECTIONS = "53300"


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """`url` without its password, for messages and logs."""
    from contextfold.config import redact_url

    return redact_url(url)


def check_reachable(url: str, timeout: float) -> None:
    """Raise the connection's `psycopg.OperationalError` when the database at `url` cannot be
    reached (refused, unknown host, no answer, login refused); return when it answers, or when it
    is only full (a pooled connection may still come free)."""
    try:
        conn = psycopg.connect(url, connect_timeout=_probe_timeout(timeout), **connect_kwargs())
    except psycopg.OperationalError as exc:
        if exc.sqlstate != _TOO_MANY_CONNECTIONS:
            raise
        return
    conn.close()


async def check_reachable_async(url: str, timeout: float) -> None:
    """`check_reachable` without blocking the event loop."""
    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=_probe_timeout(timeout), **connect_kwargs())
    except psycopg.OperationalError as exc:
        if exc.sqlstate != _TOO_MANY_CONNECTIONS:
            raise
        return
    await conn.close()


def _probe_timeout(timeout: float) -> int:
    return max(1, int(min(timeout, _PROBE_SECONDS)))


def connect_kwargs() -> dict[str, Any]:
    """Connection options every contextfold connection uses."""
    # A name in pg_stat_activity; autocommit so a read is one statement and writes say BEGIN.
    return {"autocommit": True, "application_name": "contextfold"}


def connection_lost(conn: psycopg.Connection | psycopg.AsyncConnection) -> bool:
    """Whether the server closed this idle connection (a restart, a failover, a terminated
    backend), found without a round trip: an idle connection in autocommit is sent nothing
    unasked, so anything waiting on its socket is the server's goodbye (or its EOF)."""
    import select

    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return bool(readable)


async def _check(conn: psycopg.AsyncConnection) -> None:
    """The pool's check before lending a connection: a dead one is replaced, not lent."""
    if connection_lost(conn):
        await conn.close()  # so the pool discards it instead of lending it again
        raise psycopg.OperationalError("the database closed this connection while it was idle")


def _safe(params: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(v.replace(_NUL, "\ufffd") if isinstance(v, str) and _NUL in v else v for v in params)


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """A statement written with `?` placeholders as psycopg takes it: `%s`, and a literal `%` doubled."""
    return sql.replace("%", "%%").replace("?", "%s")


class _PgDb(Db):
    IN_VIEW = "NOT hidden"
    TRUE = "true"
    NO_LIMIT = None
    # A write locks the session's row, so writes to one session, from any replica, run one after
    # another; NO KEY, so inserting its messages (whose foreign key names the row) is not blocked.
    FOR_WRITE = " FOR NO KEY UPDATE"
    PROJECT = "(replace(metadata, '\\u0000', '\\ufffd')::jsonb ->> 'project')"

    def __init__(self, conn: psycopg.AsyncConnection[dict[str, Any]]) -> None:
        self.conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cur = await self.conn.execute(_pg_sql(sql), _safe(params))
        return cur.rowcount

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self.conn.cursor() as cur:
                await cur.executemany(_pg_sql(sql), [_safe(r) for r in rows])

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cur = await self.conn.execute(_pg_sql(sql), _safe(params))
        return list(await cur.fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        cur = await self.conn.execute(_pg_sql(sql), _safe(params))
        return await cur.fetchone()

    def any_of(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        # One array parameter, however many values.
        if values:
            yield f"{column} = ANY(?)", (list(values),)

    def text(self, value: str) -> str:
        return value.replace(_NUL, "\ufffd")


class _PgOutputTransaction(SQLOutputStatements):
    """The spill lock is an advisory transaction lock, taken before the first statement that
    reads or changes output rows (`pgschema.SPILL_LOCK`); lock order is session row, then it."""

    _spill_locked = False
    _CONTENTS = "spill_contents"  # a row per distinct content, kept by a trigger on `outputs`

    async def _lock_spill(self) -> None:
        if not self._spill_locked:
            await self._db.execute(_LOCK_SPILL, (pgschema.SPILL_LOCK,))
            self._spill_locked = True


class _PgTransaction(_PgOutputTransaction, SQLSessionTransaction):
    """Stamps the revision itself, in the statements that change messages (no triggers), and
    writes the session row once, before commit (`_flush`)."""

    _STAMPS_MESSAGES = True

    def __init__(self, db: Db, owner: str, session: Session, next_seq: int) -> None:
        super().__init__(db, owner, session, next_seq)
        self._rev: int | None = None
        self._dirty = False

    async def _stamp(self) -> None:
        """The revision this transaction stamps on what it changes: the session's next, taken
        before its first change. The row is locked by this transaction, so no other can take
        it; the row itself is written once, at the end (`_flush`)."""
        if self._rev is None:
            self._rev = self.session.revision + 1
            self.session = self.session.model_copy(update={"revision": self._rev})
            self._dirty = True

    async def _flush(self) -> None:
        """Write the session row once, before commit: the revision taken, the next seq, the
        compaction totals, and what `save_session` asked for."""
        if not self._dirty:
            return
        session = self.session
        columns = session_columns(session)
        await self._db.execute(
            _FLUSH,
            (
                *(columns[f] for f in UPDATABLE),
                session.revision,
                self._next_seq,
                session.compaction_count,
                session.compaction_tokens_freed,
                self._owner,
                session.id,
            ),
        )

    async def _update_messages(self, assignments: str, where: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._db.executemany(
            f"UPDATE messages SET rev = ?, {assignments} WHERE {where}", [(self._rev, *r) for r in rows]
        )

    async def _insert_messages(self, message_rows: list[tuple[Any, ...]], part_rows: list[tuple[Any, ...]]) -> None:
        assert isinstance(self._db, _PgDb)
        async with self._db.conn.pipeline():  # both batches in one round trip
            await self._db.executemany(_INSERT_MESSAGE, [(*row, self._rev) for row in message_rows])
            await self._db.executemany(PART_INSERT, part_rows)
        self._dirty = True  # next_seq moved

    async def _totals_changed(self) -> None:
        self._dirty = True

    async def save_session(self, session: Session) -> None:
        kept = {f: getattr(self.session, f) for f in KEPT}
        kept["revision"] = self.session.revision
        self.session = session.model_copy(update={"updated_at": time.time(), **kept})
        self._dirty = True  # written by `_flush`, with the rest of the row


class PostgresStore(SQLStore):
    """`Store` on one PostgreSQL database: every tenant, each through `tenant(owner)`."""

    _OUTPUT_TRANSACTION = _PgOutputTransaction
    _SESSION_TRANSACTION = _PgTransaction

    def __init__(self, pool: AsyncConnectionPool[Any], url: str, timeout: float = 30.0) -> None:
        self._pool = pool
        self.url = url
        self._timeout = timeout

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 10, timeout: float = 30.0) -> PostgresStore:
        """Connect, migrate (under an advisory lock, see `pgschema`) and open a pool of up to `pool_size`."""
        await asyncio.to_thread(_migrate, url, timeout)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={**connect_kwargs(), "row_factory": dict_row},
            open=False,
            timeout=timeout,
            name="contextfold",
            # A replica survives a database restart or a failover without failing the request
            # that would have met a dead connection, at no round trip per checkout.
            check=_check,
        )
        await pool.open(wait=True, timeout=timeout)
        return cls(pool, url, timeout)

    async def close(self) -> None:
        await self._pool.close()

    # -- connections and transactions ------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection, as `pool.connection()` lends one, but failing within about a second
        when the database refuses connections: the pool alone would wait the whole timeout."""
        try:
            conn = await self._pool.getconn(timeout=min(FIRST_WAIT_SECONDS, self._timeout))
        except PoolTimeout:
            await check_reachable_async(self.url, self._timeout)  # raises when it is unreachable
            conn = await self._pool.getconn(timeout=max(FIRST_WAIT_SECONDS, self._timeout - FIRST_WAIT_SECONDS))
        try:
            async with conn:  # commits, or rolls back on an error, as the pool's own does
                yield conn
        finally:
            await self._pool.putconn(conn)

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[Db]:
        # Autocommit: each statement is its own snapshot (those that must agree are one statement).
        async with self._connection() as conn:
            yield _PgDb(conn)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Db]:
        async with self._connection() as conn:
            async with conn.transaction():
                yield _PgDb(conn)

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> None:
        async with self._reading() as db:  # one statement, which autocommit commits
            await db.execute(sql, params)

    def tenant(self, owner: str) -> PostgresTenant:
        return PostgresTenant(self, owner)

    async def index_step(self, batch: int) -> IndexProgress:
        """Nothing to do: the migration that made the search index built it whole (see `pgschema`)."""
        return IndexProgress(done=0, total=0)

    # -- what only PostgreSQL answers ------------------------------------------------------------

    async def compaction_totals(self) -> tuple[int, int]:
        row = await self._fetchone(
            "SELECT COALESCE(SUM(compaction_count), 0) AS n, COALESCE(SUM(compaction_tokens_freed), 0) AS freed "
            "FROM sessions"
        )
        return totals(row)

    async def size_bytes(self) -> int:
        """Bytes the session tables take, indexes and TOAST included (not the spilled blobs,
        which `spill_quota_bytes` bounds)."""
        row = await self._fetchone(
            "SELECT COALESCE(SUM(pg_total_relation_size(to_regclass(t))), 0) AS size FROM unnest(?::text[]) AS t",
            (list(_SESSION_TABLES),),
        )
        return int(row["size"]) if row else 0


class PostgresTenant(SQLTenant):
    """`TenantStore` on a `PostgresStore`: every query is scoped to one owner (see `SQLTenant`)."""

    async def search_messages(self, query: SearchQuery) -> list[SearchHit]:
        """The parts whose text holds the terms, found through the trigram index (`pgschema` 2),
        ranked by how often they hold them (pg_trgm has no BM25): the sum over the terms of
        ln(1 + occurrences), divided by 1 + ln(1 + length / 1000), so a short message full of
        them comes before a long log that mentions them once."""
        terms = [t.lower() for t in query.terms]
        text = "contextfold_search_text(p.type, p.data)"
        forms = [spellings(t) for t in terms]
        likes = ["(" + " OR ".join(f"{text} LIKE ?" for _ in spelled) + ")" for spelled in forms]
        matches = f"({' OR '.join(likes)})" if query.any_term else " AND ".join(likes)
        patterns = ["%" + _like_escape(form) + "%" for spelled in forms for form in spelled]
        occurrences = " + ".join(
            f"ln(1 + (length({text}) - length(replace({text}, ?, ''))) / {len(t)}.0)" for t in terms
        )
        async with self._store._transaction() as db:
            if query.timeout:
                await db.execute(f"SET LOCAL statement_timeout = {max(1, int(query.timeout * 1000))}")
            where, params = search_scope(db, self.owner, query)
            try:
                rows = await db.fetchall(
                    "SELECT m.session_id, m.id, m.seq, m.role, m.created_at, m.hidden, m.summary, "
                    "bool_or(p.type = 'text') AS prose, "
                    f"MIN(-({occurrences}) / (1 + ln(1 + length({text}) / 1000.0))) AS score "
                    "FROM parts p JOIN messages m ON m.id = p.message_id "
                    f"WHERE {matches} AND {where} "
                    "GROUP BY m.id ORDER BY score, m.created_at DESC, m.id LIMIT ? OFFSET ?",
                    (*terms, *patterns, *params, query.limit, query.offset),
                )
            except psycopg.errors.QueryCanceled:
                raise search_timed_out(query.timeout or 0) from None
        return [search_hit(r) for r in rows]

    async def _lock_for_delete(self, db: Db, session_id: str) -> None:
        # The session's row first, then the spill lock (its outputs go too): the order every
        # write takes them in. No row: nothing to lock, and the DELETE says it was not found.
        if (
            await db.fetchone(
                "SELECT 1 AS found FROM sessions WHERE owner = ? AND id = ? FOR UPDATE", (self.owner, session_id)
            )
            is not None
        ):
            await db.execute(_LOCK_SPILL, (pgschema.SPILL_LOCK,))


def _migrate(url: str, timeout: float) -> None:
    def connect() -> psycopg.Connection:
        return psycopg.connect(url, connect_timeout=max(1, int(timeout)), **connect_kwargs())

    with connect() as conn:
        pgschema.migrate(conn, progress=log.info, watch=connect)


def _like_escape(term: str) -> str:
    """`term` as a LIKE pattern matches it literally (backslash is LIKE's escape character)."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

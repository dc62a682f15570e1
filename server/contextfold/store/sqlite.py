"""The embedded session store: SQLite through aiosqlite.

WAL so readers never wait for a writer, foreign keys on, a busy timeout so a second process
waits instead of failing, and `BEGIN IMMEDIATE` for every write so a transaction takes the write
lock up front rather than failing halfway. One connection per store, used by one coroutine at a
time (an asyncio lock): a connection's open transaction is visible to every statement on it.

The statements are `store.sql`'s, shared with PostgreSQL; this module keeps the connection, the
locking, SQLite's spelling of what differs (`_SQLiteDb`), and the revision stamps, which this
schema's triggers write (schema migration 7).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from contextfold.domain import Session
from contextfold.store.base import IndexProgress, SearchHit, SearchQuery, search_timed_out
from contextfold.store.rows import KEPT, UPDATABLE, session_columns
from contextfold.store.schema import migrate
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

BUSY_TIMEOUT_MS = 10_000
INDEX_LAG = 500
"""`search_index_lag`'s default, for a store opened without settings."""
_PROGRESS_STEPS = 10_000
"""SQLite VM steps between looks at a search's deadline."""
_MAX_PARAMS = 500
"""Values bound in one IN list: SQLite caps bound parameters per statement."""

_INSERT_MESSAGE = message_insert()
_UPDATE_SESSION = session_update(UPDATABLE)


class _SQLiteDb(Db):
    IN_VIEW = "hidden = 0"
    TRUE = "1"
    NO_LIMIT = -1
    # The planner otherwise walks the session's messages by seq, all of a long history.
    BY_REV = " INDEXED BY messages_by_rev"
    PROJECT = "json_extract(metadata, '$.project')"
    # FOR_WRITE: none. `BEGIN IMMEDIATE` holds the database's write lock for the whole transaction.

    def __init__(self, conn: aiosqlite.Connection, index_lag: int = 0) -> None:
        self._conn = conn
        self.index_lag = index_lag
        """Parts a write transaction may leave waiting for the search index (`search_index_lag`)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        async with self._conn.execute(sql, params) as cur:
            return cur.rowcount

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        # One trip to the database thread (a cursor would take three: execute, fetch, close).
        return list(await self._conn.execute_fetchall(sql, params))

    def any_of(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        # No arrays in SQLite: an IN list, in chunks under its parameter cap.
        for start in range(0, len(values), _MAX_PARAMS):
            chunk = tuple(values[start : start + _MAX_PARAMS])
            yield f"{column} IN ({','.join('?' * len(chunk))})", chunk


async def _enable_wal(conn: aiosqlite.Connection) -> None:
    """Switch to WAL, waiting out other processes that open the same new database right now.

    The switch needs a moment of exclusive access; when another process holds the database (it is
    creating the schema, say), SQLite answers "database is locked" at once rather than calling the
    busy handler. Once any process has switched, the mode is stored in the file and this is a no-op.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            async with conn.execute("PRAGMA journal_mode = WAL") as cur:
                row = await cur.fetchone()
            if row is not None and str(row[0]).lower() == "wal":
                return
            # Another mode came back: a connection elsewhere holds the database in rollback mode.
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(
                f"database is locked: could not switch it to WAL within {BUSY_TIMEOUT_MS / 1000:g} s; "
                "another process holds it"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


_WAITING = "(SELECT MAX(rowid) FROM parts) - (SELECT recent_upto FROM search_backfill WHERE id = 1)"
"""How many parts (at most: rowids of deleted parts count too) wait for the search index."""


async def _index_recent(db: Db) -> int:
    """Index every part stored after `recent_upto` (schema 10), in the caller's write
    transaction, which holds the write lock: what it reads stays true until it commits, so
    processes doing this at once never index a part twice. How many rowids it covered."""
    row = await db.fetchone(
        "SELECT recent_upto, (SELECT MAX(rowid) FROM parts) AS last FROM search_backfill WHERE id = 1"
    )
    if row is None or row["last"] is None or int(row["last"]) <= int(row["recent_upto"]):
        return 0
    start, last = int(row["recent_upto"]), int(row["last"])
    # One INSERT … SELECT: FTS5 gathers the batch in memory and writes it as one segment.
    await db.execute(
        "INSERT INTO search_index (rowid, body) SELECT part_rowid, body FROM search_source "
        "WHERE part_rowid > ? AND part_rowid <= ?",
        (start, last),
    )
    await db.execute("UPDATE search_backfill SET recent_upto = ? WHERE id = 1", (last,))
    return last - start


class _SQLiteTransaction(SQLSessionTransaction):
    """Writes the session row as it goes; the schema's triggers stamp the revision on every
    message whose row or parts change, and keep the compaction totals."""

    _STAMPS_MESSAGES = False

    def __init__(self, db: Db, owner: str, session: Session, next_seq: int) -> None:
        super().__init__(db, owner, session, next_seq)
        self._stamped = False

    async def _stamp(self) -> None:
        """Take the session's next revision, which the triggers stamp on every message this
        transaction changes. A transaction that changes no message takes none (and writes
        nothing: a read-only home can still answer it)."""
        if self._stamped:
            return
        self._stamped = True
        await self._db.execute(
            "UPDATE sessions SET revision = revision + 1 WHERE owner = ? AND id = ?", (self._owner, self.session.id)
        )
        self.session = self.session.model_copy(update={"revision": self.session.revision + 1})

    async def _update_messages(self, assignments: str, where: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._db.executemany(f"UPDATE messages SET {assignments} WHERE {where}", rows)

    async def _insert_messages(self, message_rows: list[tuple[Any, ...]], part_rows: list[tuple[Any, ...]]) -> None:
        await self._db.executemany(_INSERT_MESSAGE, message_rows)
        await self._db.executemany(PART_INSERT, part_rows)
        # Parts are indexed in batches (schema 10, `search_index_lag`): an FTS5 transaction
        # writes a new segment and merges old ones, which per one-message append cost 18 to 47 %
        # of the append rate; one INSERT … SELECT over hundreds of parts costs a fraction of that
        # per part. The same statement says how many parts wait (no extra round trip).
        waiting = await self._db.fetchall(
            f"UPDATE sessions SET next_seq = ? WHERE owner = ? AND id = ? RETURNING {_WAITING} AS waiting",
            (self._next_seq, self._owner, self.session.id),
        )
        assert isinstance(self._db, _SQLiteDb)
        if waiting and int(waiting[0]["waiting"] or 0) >= self._db.index_lag:
            await _index_recent(self._db)

    async def save_session(self, session: Session) -> None:
        # What the store keeps comes from its own copy: the caller's may predate `add_compaction`.
        kept = {f: getattr(self.session, f) for f in KEPT}
        session = session.model_copy(update={"updated_at": time.time(), **kept})
        columns = session_columns(session)
        await self._db.execute(_UPDATE_SESSION, (*(columns[f] for f in UPDATABLE), self._owner, session.id))
        self.session = session


class SQLiteStore(SQLStore):
    """`Store` on one SQLite file (or `:memory:`): every tenant, each through `tenant(owner)`."""

    _OUTPUT_TRANSACTION = SQLOutputStatements  # BEGIN IMMEDIATE holds the spill store's lock too
    _SESSION_TRANSACTION = _SQLiteTransaction

    def __init__(self, conn: aiosqlite.Connection, *, index_lag: int = INDEX_LAG) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._index_lag = index_lag

    @property
    def connection(self) -> aiosqlite.Connection:
        """The one database connection, for maintenance and measurement (a test's raw SQL, the
        VM-step counter); writes belong in `write` transactions, which hold the write lock."""
        return self._conn

    @classmethod
    async def open(cls, path: Path | str, *, index_lag: int = INDEX_LAG) -> SQLiteStore:
        """The store on the database at `path`, migrated. `index_lag`: parts appends may leave
        waiting for the search index (`search_index_lag`; see `_SQLiteTransaction`)."""
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Sessions hold whole transcripts: owner-only, like the spill files. SQLite gives the
            # -wal and -shm files the database file's mode, so this covers them too.
            Path(path).touch(mode=0o600)
            os.chmod(path, 0o600)
        conn = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            conn.row_factory = aiosqlite.Row
            await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await _enable_wal(conn)
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA foreign_keys = ON")
            await migrate(conn)
        except BaseException:
            await conn.close()
            raise
        return cls(conn, index_lag=index_lag)

    async def close(self) -> None:
        await self._conn.close()

    # -- connection and transactions -------------------------------------------------------------

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[Db]:
        async with self._lock:
            yield _SQLiteDb(self._conn)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Db]:
        async with self._lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SQLiteDb(self._conn, self._index_lag)
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> None:
        async with self._transaction() as db:
            await db.execute(sql, params)

    def tenant(self, owner: str) -> SQLiteTenant:
        """This database as one tenant sees it: its sessions and outputs, nobody else's."""
        return SQLiteTenant(self, owner)

    # -- the search index -------------------------------------------------------------------------

    async def index_step(self, batch: int) -> IndexProgress:
        """Bring the search index up to date: every part stored since the last batch (appends
        leave up to `search_index_lag` of them waiting, schema 10), and the next `batch` parts
        stored before the index existed (schema 9). One write transaction that reads how far the
        index is under the write lock: processes doing this at once share the work, and none
        indexes a part twice. With nothing to do it writes nothing."""
        row = await self._fetchone(f"SELECT indexed_upto, backfill_end, {_WAITING} AS waiting FROM search_backfill")
        assert row is not None
        done, end, waiting = int(row["indexed_upto"]), int(row["backfill_end"]), max(0, int(row["waiting"] or 0))
        if done >= end and not waiting:
            return IndexProgress(done=done, total=end)  # no write
        try:
            return await self._index_step(batch)
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc):
                raise
            # A home that cannot be written (a read-only mount): the index is searched as it is.
            row = await self._fetchone(
                "SELECT COUNT(*) AS n FROM parts WHERE rowid > (SELECT recent_upto FROM search_backfill WHERE id = 1)"
            )
            return IndexProgress(done=done, total=end, waiting=int(row["n"]) if row else waiting, writable=False)

    async def _index_step(self, batch: int) -> IndexProgress:
        async with self._transaction() as db:
            await _index_recent(db)
            row = await db.fetchone("SELECT indexed_upto, backfill_end FROM search_backfill WHERE id = 1")
            assert row is not None
            done, end = int(row["indexed_upto"]), int(row["backfill_end"])
            if done < end:
                last = await db.fetchone(
                    "SELECT MAX(r) AS last FROM (SELECT rowid AS r FROM parts WHERE rowid > ? AND rowid <= ? "
                    "ORDER BY rowid LIMIT ?)",
                    (done, end, batch),
                )
                upto = end if last is None or last["last"] is None else int(last["last"])
                await db.execute(
                    "INSERT INTO search_index (rowid, body) SELECT part_rowid, body FROM search_source "
                    "WHERE part_rowid > ? AND part_rowid <= ?",
                    (done, upto),
                )
                await db.execute("UPDATE search_backfill SET indexed_upto = ? WHERE id = 1", (upto,))
                done = upto
            return IndexProgress(done=done, total=end)

    # -- what only SQLite answers ------------------------------------------------------------------

    async def compaction_totals(self) -> tuple[int, int]:
        """(how many compactions, tokens freed in all) across every tenant."""
        row = await self._fetchone(
            "SELECT COUNT(*) AS n, COALESCE(SUM(json_extract(data, '$.tokens_before') - "
            "json_extract(data, '$.tokens_after')), 0) AS freed FROM compactions"
        )
        return totals(row)

    async def integrity_check(self) -> str:
        row = await self._fetchone("PRAGMA integrity_check")
        return str(row["integrity_check"]) if row else "no answer"

    async def size_bytes(self) -> int:
        """Bytes the database's live pages take (free pages, which SQLite reuses, not counted)."""
        row = await self._fetchone(
            "SELECT (p.page_count - f.freelist_count) * s.page_size AS size "
            "FROM pragma_page_count() AS p, pragma_freelist_count() AS f, pragma_page_size() AS s"
        )
        return int(row["size"]) if row else 0


FTS_MERGE_PAGES = 2_000
"""Pages of the full-text index a session's deletion merges at most (see `SQLiteTenant._after_delete`)."""


class SQLiteTenant(SQLTenant):
    """`TenantStore` on a `SQLiteStore`: every query is scoped to one owner (see `SQLTenant`)."""

    _store: SQLiteStore

    async def _after_delete(self, db: Db) -> None:
        """FTS5 deletes a session's rows from its index by writing delete markers, which take
        space until segments merge: without a merge, deleting sessions to get under
        `max_database_bytes` made the database larger. A bounded merge (`FTS_MERGE_PAGES` pages
        written at most) folds them in with the deletion."""
        await db.execute("INSERT INTO search_index (search_index, rank) VALUES ('merge', ?)", (FTS_MERGE_PAGES,))

    async def search_messages(self, query: SearchQuery) -> list[SearchHit]:
        """FTS5 over the trigram index (schema 9), ranked by BM25; a term shorter than a trigram
        is checked as a substring of the text the longer ones found.

        The plan: the MATCH first (FTS5 yields the matching parts), then each part's row and its
        message by key for the tenant, scope and time window, BM25 computed only for the rows
        that pass. Measured at a million stored parts with the pages cached, a rare word takes
        about 10 ms to match and as much again to rank (BM25 counts, once per query, the parts
        holding each word: a second pass over its lists). The index keeps positions
        (`detail=full`): `detail=column` or `none` would make the lists several times smaller,
        but SQLite refuses phrase queries on them (3.40 here), so a word of more than three
        characters, a phrase of trigrams, could not be asked, and BM25 would lose how often a
        word occurs in a part."""
        long = [t for t in query.terms if len(t) >= 3]
        short = [t.lower() for t in query.terms if len(t) < 3]
        if not long:
            return await self._scan(query, short)
        match = (" OR " if query.any_term else " ").join(_either(spellings(t)) for t in long)
        async with self._store._reading() as db:
            where, params = search_scope(db, self.owner, query)
            for term in short if not query.any_term else []:
                where += " AND instr(lower(s.body), ?) > 0"
                params.append(term)
            source = " JOIN search_source s ON s.part_rowid = f.rowid" if short and not query.any_term else ""
            rows = await self._within_time(
                db,
                query,
                "SELECT m.session_id, m.id, m.seq, m.role, m.created_at, m.hidden, m.summary, "
                "MAX(p.type = 'text') AS prose, MIN(f.rank) AS score "
                f"FROM search_index f JOIN parts p ON p.rowid = f.rowid JOIN messages m ON m.id = p.message_id"
                f"{source} WHERE search_index MATCH ? AND {where} "
                "GROUP BY m.id ORDER BY score, m.created_at DESC, m.id LIMIT ? OFFSET ?",
                (match, *params, query.limit, query.offset),
            )
        return [search_hit(r) for r in rows]

    async def _scan(self, query: SearchQuery, terms: list[str]) -> list[SearchHit]:
        """Words all shorter than a trigram (a two-character Chinese word: the parse lets only those
        through) are in no index: every part in the scope and time window is read, within
        `search_timeout_seconds`, and ranked by how often it holds them against its length."""
        if not terms:
            raise ValueError("full-text search needs a term")
        body = "lower(s.body)"
        holds = [f"instr({body}, ?) > 0" for _ in terms]
        occurrences = " + ".join(f"(length({body}) - length(replace({body}, ?, ''))) / {len(t)}.0" for t in terms)
        async with self._store._reading() as db:
            where, params = search_scope(db, self.owner, query)
            rows = await self._within_time(
                db,
                query,
                "SELECT m.session_id, m.id, m.seq, m.role, m.created_at, m.hidden, m.summary, "
                f"MAX(p.type = 'text') AS prose, MIN(-({occurrences}) / (1 + length(s.body) / 1000.0)) AS score "
                "FROM search_source s JOIN parts p ON p.rowid = s.part_rowid JOIN messages m ON m.id = p.message_id "
                f"WHERE ({(' OR ' if query.any_term else ' AND ').join(holds)}) AND {where} "
                "GROUP BY m.id ORDER BY score, m.created_at DESC, m.id LIMIT ? OFFSET ?",
                (*terms, *terms, *params, query.limit, query.offset),
            )
        return [search_hit(r) for r in rows]

    async def _within_time(self, db: Db, query: SearchQuery, sql: str, params: tuple[Any, ...]) -> list[Row]:
        """`sql`'s rows, stopped at the query's deadline (`search_timeout_seconds`): the one
        connection is this process's for every session, so a query matching most of a huge history
        is refused rather than hold up the others."""
        conn = self._store.connection
        deadline = time.monotonic() + (query.timeout or 3600.0)
        await conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
        try:
            return await db.fetchall(sql, params)
        except sqlite3.OperationalError as exc:
            if "interrupt" not in str(exc):
                raise
            raise search_timed_out(query.timeout or 3600.0) from None
        finally:
            await conn.set_progress_handler(None, 0)  # type: ignore[arg-type]  # None removes it


def _either(forms: tuple[str, ...]) -> str:
    """An FTS5 query for any of `forms`, each a phrase: `"a"`, or `("a" OR "b")`."""
    phrases = ['"' + form.replace('"', '""') + '"' for form in forms]
    return phrases[0] if len(phrases) == 1 else "(" + " OR ".join(phrases) + ")"

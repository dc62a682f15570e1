"""The embedded session store: SQLite through aiosqlite.

WAL so readers never wait for a writer, foreign keys on, a busy timeout so a second process
waits instead of failing, and `BEGIN IMMEDIATE` for every write so a transaction takes the write
lock up front rather than failing halfway. One connection per store, used by one coroutine at a
time (an asyncio lock): a connection's open transaction is visible to every statement on it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from contextfold.domain import CompactionRecord, Message, MessageRow, Part, Session, ToolPart, Usage, new_id
from contextfold.store.base import OutputRecord, PartMark, SessionPage, StoredToolPart, Tombstone
from contextfold.errors import ConflictError, NotFoundError
from contextfold.store.rows import (
    KEPT,
    SESSION_FIELDS,
    UPDATABLE,
    WRITTEN,
    decode_cursor,
    encode_cursor,
    load_part,
    message_from_row,
    messages_from_joined,
    new_message_rows,
    part_json,
    session_columns,
    session_from_row,
)
from contextfold.store.schema import migrate

BUSY_TIMEOUT_MS = 10_000

_SESSION_COLUMNS = ", ".join(SESSION_FIELDS)
_INSERT_SESSION = f"INSERT INTO sessions (owner, {', '.join(WRITTEN)}) VALUES (?, {', '.join('?' * len(WRITTEN))})"
_UPDATE_SESSION = f"UPDATE sessions SET {', '.join(f'{f} = ?' for f in UPDATABLE)} WHERE owner = ? AND id = ?"


async def _load_messages(
    db: aiosqlite.Connection,
    owner: str,
    session_id: str,
    after_seq: int,
    limit: int | None,
    *,
    hidden: bool = False,
) -> list[Message]:
    # Messages a removal strategy took out of the view are read only when asked for (full history).
    visible = "" if hidden else " AND hidden = 0"
    message_rows = list(
        await db.execute_fetchall(
            "SELECT id, seq, role, name, parent_id, summary, finish_reason, error, usage, created_at, "
            "metadata, tokens, view_tokens FROM messages WHERE owner = ? AND session_id = ? "
            f"AND seq > ?{visible} ORDER BY seq LIMIT ?",
            (owner, session_id, after_seq, -1 if limit is None else limit),
        )
    )
    if not message_rows:
        return []
    parts: dict[str, list[Part]] = {}
    # Not the parts of messages hidden in between (a removal strategy hides most of a history).
    # One trip to the database thread: iterating a cursor would cross and back every 64 rows.
    for row in await db.execute_fetchall(
        "SELECT p.message_id, p.data, p.tokens FROM parts p JOIN messages m ON m.id = p.message_id "
        f"WHERE m.owner = ? AND m.session_id = ? AND m.seq BETWEEN ? AND ?{visible.replace('hidden', 'm.hidden')} "
        "ORDER BY m.seq, p.idx",
        (owner, session_id, message_rows[0]["seq"], message_rows[-1]["seq"]),
    ):
        parts.setdefault(row["message_id"], []).append(load_part(row["data"], row["tokens"]))
    return [message_from_row(row, session_id, parts.get(row["id"], [])) for row in message_rows]


async def _load_changed(
    db: aiosqlite.Connection, owner: str, session_id: str, after_seq: int, since_rev: int
) -> tuple[list[Message], set[str]]:
    """The messages after `after_seq` stamped after `since_rev`, in view, and the ids of those
    hidden: one query (a row per part), so one snapshot and one trip to the database thread.
    Found by revision, never by walking every seq after `after_seq` (all of a history a removal
    strategy hid, on every append)."""
    rows = await db.execute_fetchall(
        "SELECT m.id, m.seq, m.role, m.name, m.parent_id, m.summary, m.finish_reason, m.error, m.usage, "
        "m.created_at, m.metadata, m.tokens, m.view_tokens, m.hidden, p.data, p.tokens AS part_tokens "
        "FROM messages m INDEXED BY messages_by_rev LEFT JOIN parts p ON p.message_id = m.id "
        "WHERE m.owner = ? AND m.session_id = ? AND m.rev > ? AND m.seq > ? ORDER BY m.seq, p.idx",
        (owner, session_id, since_rev, after_seq),
    )
    return messages_from_joined(rows, session_id)


async def _rows(db: aiosqlite.Connection, owner: str, session_id: str, after_seq: int) -> list[MessageRow]:
    async with db.execute(
        "SELECT id, seq, role, COALESCE(view_tokens, tokens) AS tokens, turn_start, summary FROM messages "
        "WHERE owner = ? AND session_id = ? AND seq > ? AND hidden = 0 ORDER BY seq",
        (owner, session_id, after_seq),
    ) as cur:
        return [MessageRow(r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5])) for r in await cur.fetchall()]


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


def _output_from_row(row: aiosqlite.Row) -> OutputRecord:
    return OutputRecord(**{key: row[key] for key in row.keys()})


class SQLiteStore:
    """`Store` on one SQLite file (or `:memory:`): every tenant, each through `tenant(owner)`."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str) -> SQLiteStore:
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
        return cls(conn)

    async def close(self) -> None:
        await self._conn.close()

    # -- transactions ------------------------------------------------------------------------

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    async def _fetchone(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Row | None:
        rows = await self._fetchall(sql, params)
        return rows[0] if rows else None

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        # One trip to the database thread (a cursor would take three: execute, fetch, close).
        async with self._lock:
            return list(await self._conn.execute_fetchall(sql, params))

    # -- one tenant ------------------------------------------------------------------------------

    def tenant(self, owner: str) -> SQLiteTenant:
        """This database as one tenant sees it: its sessions and outputs, nobody else's."""
        return SQLiteTenant(self, owner)

    # -- every tenant: spill store upkeep and totals ---------------------------------------------

    async def outputs(self) -> list[OutputRecord]:
        """Every output record, oldest first (for gc)."""
        return [_output_from_row(r) for r in await self._fetchall("SELECT * FROM outputs ORDER BY created_at, id")]

    @asynccontextmanager
    async def spill_transaction(self) -> AsyncIterator[_SQLiteOutputTransaction]:
        async with self._transaction() as db:
            yield _SQLiteOutputTransaction(db)

    async def spill_bytes(self) -> int:
        row = await self._fetchone(_SPILL_BYTES)
        return int(row[0]) if row else 0

    async def compactions(self, *, limit: int = 10) -> list[CompactionRecord]:
        """The latest compactions of every tenant, newest first (for the CLI's stats)."""
        rows = await self._fetchall(
            "SELECT data FROM compactions ORDER BY created_at DESC, id DESC LIMIT ?", (limit,)
        )
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]

    async def compaction_totals(self) -> tuple[int, int]:
        """(how many compactions, tokens freed in all) across every tenant."""
        return _totals(await self._fetchone(_COMPACTION_TOTALS.format(where=""), ()))

    async def integrity_check(self) -> str:
        row = await self._fetchone("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"

    async def size_bytes(self) -> int:
        """Bytes the database's live pages take (free pages, which SQLite reuses, not counted)."""
        row = await self._fetchone(
            "SELECT (p.page_count - f.freelist_count) * s.page_size "
            "FROM pragma_page_count() AS p, pragma_freelist_count() AS f, pragma_page_size() AS s"
        )
        return int(row[0]) if row else 0


class SQLiteTenant:
    """`TenantStore` on a `SQLiteStore`: every query is scoped to one owner.

    Session ids are per tenant: another tenant's "x" is simply not this tenant's "x", and reads
    exactly like an id nobody uses.
    """

    def __init__(self, store: SQLiteStore, owner: str) -> None:
        self._store = store
        self.owner = owner

    # -- sessions ----------------------------------------------------------------------------

    async def create_session(self, session: Session) -> Session:
        now = time.time()
        session = session.model_copy(
            update={"owner": self.owner, "created_at": now, "updated_at": now, **dict.fromkeys(KEPT, 0)}
        )
        async with self._store._transaction() as db:
            async with db.execute(
                "SELECT 1 FROM sessions WHERE owner = ? AND id = ?", (self.owner, session.id)
            ) as cur:
                if await cur.fetchone() is not None:
                    raise ConflictError(f"a session with id {session.id!r} already exists")
            await db.execute(_INSERT_SESSION, (self.owner, *session_columns(session).values()))
        return session

    async def get_session(self, session_id: str) -> Session:
        row = await self._store._fetchone(
            f"SELECT owner, {_SESSION_COLUMNS} FROM sessions WHERE owner = ? AND id = ?", (self.owner, session_id)
        )
        if row is None:
            raise NotFoundError("session", session_id, "list sessions with session_list or open one with session_open")
        return session_from_row(row)

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None) -> SessionPage:
        params: list[Any] = [self.owner]
        where = "owner = ?"
        if cursor:
            updated_at, last_id = decode_cursor(cursor)
            where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            params += [updated_at, updated_at, last_id]
        rows = await self._store._fetchall(
            f"SELECT owner, {_SESSION_COLUMNS} FROM sessions WHERE {where} "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit + 1),
        )
        sessions = [session_from_row(r) for r in rows[:limit]]
        more = len(rows) > limit
        next_cursor = encode_cursor(sessions[-1].updated_at, sessions[-1].id) if more and sessions else None
        return SessionPage(sessions, next_cursor)

    async def delete_session(self, session_id: str) -> None:
        async with self._store._transaction() as db:
            cur = await db.execute("DELETE FROM sessions WHERE owner = ? AND id = ?", (self.owner, session_id))
            if cur.rowcount == 0:
                raise NotFoundError("session", session_id)

    # -- messages ----------------------------------------------------------------------------

    @asynccontextmanager
    async def write(self, session_id: str, *, create: Session | None = None) -> AsyncIterator[_SQLiteTransaction]:
        async with self._store._transaction() as db:
            row = await self._session_row(db, session_id)
            if row is None and create is not None:
                now = time.time()
                create = create.model_copy(update={"id": session_id, "created_at": now, "updated_at": now})
                await db.execute(_INSERT_SESSION, (self.owner, *session_columns(create).values()))
                row = await self._session_row(db, session_id)
            if row is None:
                raise NotFoundError("session", session_id, "open it first with session_open")
            yield _SQLiteTransaction(db, self.owner, session_from_row(row), row["next_seq"])

    async def _session_row(self, db: aiosqlite.Connection, session_id: str) -> aiosqlite.Row | None:
        async with db.execute(
            f"SELECT owner, {_SESSION_COLUMNS}, next_seq FROM sessions WHERE owner = ? AND id = ?",
            (self.owner, session_id),
        ) as cur:
            return await cur.fetchone()

    async def load_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None, hidden: bool = False
    ) -> list[Message]:
        async with self._store._lock:
            return await _load_messages(self._store._conn, self.owner, session_id, after_seq, limit, hidden=hidden)

    async def rows(self, session_id: str, *, after_seq: int = 0) -> list[MessageRow]:
        async with self._store._lock:
            return await _rows(self._store._conn, self.owner, session_id, after_seq)

    async def changed_messages(
        self, session_id: str, *, since: int, after_seq: int = 0
    ) -> tuple[list[Message], set[str]]:
        async with self._store._lock:
            return await _load_changed(self._store._conn, self.owner, session_id, after_seq, since)

    async def recent_usages(self, session_id: str, *, limit: int = 10) -> list[Usage]:
        """The usage reports of the latest assistant messages, oldest first."""
        rows = await self._store._fetchall(
            "SELECT usage FROM messages WHERE owner = ? AND session_id = ? AND usage IS NOT NULL "
            "ORDER BY seq DESC LIMIT ?",
            (self.owner, session_id, limit),
        )
        return [Usage.model_validate_json(r["usage"]) for r in reversed(rows)]

    # -- spilled outputs ---------------------------------------------------------------------

    async def get_output(self, output_id: str) -> OutputRecord:
        row = await self._store._fetchone(
            "SELECT * FROM outputs WHERE id = ? AND owner = ?", (output_id, self.owner)
        )
        if row is None:
            raise NotFoundError("output", output_id, "it may have expired or been deleted; outputs are kept for a limited time")
        return _output_from_row(row)

    async def session_outputs(self, session_id: str) -> list[OutputRecord]:
        rows = await self._store._fetchall(
            "SELECT * FROM outputs WHERE owner = ? AND session_id = ? ORDER BY created_at, id", (self.owner, session_id)
        )
        return [_output_from_row(r) for r in rows]

    async def touch_output(self, output_id: str) -> None:
        async with self._store._transaction() as db:
            await db.execute(
                "UPDATE outputs SET last_read_at = ? WHERE id = ? AND owner = ?", (time.time(), output_id, self.owner)
            )

    async def output_tombstone(self, output_id: str) -> Tombstone | None:
        row = await self._store._fetchone(
            "SELECT id, owner, reason, removed_at FROM output_tombstones WHERE id = ? AND owner = ?",
            (output_id, self.owner),
        )
        return Tombstone(row[0], row[1], row[2], row[3]) if row else None

    # -- compaction history ------------------------------------------------------------------

    async def compactions(self, session_id: str, *, limit: int = 10) -> list[CompactionRecord]:
        rows = await self._store._fetchall(
            "SELECT data FROM compactions WHERE owner = ? AND session_id = ? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (self.owner, session_id, limit),
        )
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]

    async def compaction_totals(self, session_id: str) -> tuple[int, int]:
        row = await self._store._fetchone(
            "SELECT compaction_count, compaction_tokens_freed FROM sessions WHERE owner = ? AND id = ?",
            (self.owner, session_id),
        )
        return _totals(row)


_COMPACTION_TOTALS = (
    "SELECT COUNT(*), COALESCE(SUM(json_extract(data, '$.tokens_before') - "
    "json_extract(data, '$.tokens_after')), 0) FROM compactions {where}"
)


def _totals(row: aiosqlite.Row | None) -> tuple[int, int]:
    return (int(row[0]), int(row[1])) if row else (0, 0)


_SPILL_BYTES = "SELECT bytes FROM spill_usage WHERE id = 1"
"""Bytes of the distinct contents the output rows reference (each content file is stored once),
kept up to date by triggers on `outputs` (schema migration 6)."""


class _OutputStatements:
    """`OutputTransaction` on the connection of an open write transaction (`self._db`)."""

    _db: aiosqlite.Connection
    _added: tuple[str, ...] = ()  # outputs this transaction inserted

    async def add_output(self, record: OutputRecord) -> None:
        await self._db.execute(
            "INSERT INTO outputs (id, session_id, owner, digest, bytes, lines, tool, call_id, created_at, "
            "last_read_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                record.id,
                record.session_id,
                record.owner,
                record.digest,
                record.bytes,
                record.lines,
                record.tool,
                record.call_id,
                record.created_at,
                record.last_read_at,
            ),
        )
        self._added = (*self._added, record.id)

    async def spill_bytes(self) -> int:
        async with self._db.execute(_SPILL_BYTES) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def referenced(self, digests: Collection[str]) -> set[str]:
        wanted = sorted(set(digests))
        found: set[str] = set()
        for start in range(0, len(wanted), 500):  # SQLite caps bound parameters per statement
            chunk = wanted[start : start + 500]
            async with self._db.execute(
                f"SELECT DISTINCT digest FROM outputs WHERE digest IN ({','.join('?' * len(chunk))})", chunk
            ) as cur:
                found.update(row[0] for row in await cur.fetchall())
        return found

    async def outputs(self) -> list[OutputRecord]:
        async with self._db.execute("SELECT * FROM outputs ORDER BY created_at, id") as cur:
            rows = await cur.fetchall()
        return [_output_from_row(r) for r in rows if r["id"] not in self._added]

    async def remove_outputs(self, output_ids: Sequence[str], reason: str, at: float) -> None:
        await self._db.executemany(
            "INSERT OR REPLACE INTO output_tombstones (id, owner, reason, removed_at) "
            "SELECT id, owner, ?, ? FROM outputs WHERE id = ?",
            [(reason, at, i) for i in output_ids],
        )
        await self._db.executemany("DELETE FROM outputs WHERE id = ?", [(i,) for i in output_ids])

    async def drop_tombstones(self, before: float) -> None:
        await self._db.execute("DELETE FROM output_tombstones WHERE removed_at < ?", (before,))


class _SQLiteOutputTransaction(_OutputStatements):
    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db


class _SQLiteTransaction(_OutputStatements):
    def __init__(self, db: aiosqlite.Connection, owner: str, session: Session, next_seq: int) -> None:
        self._db = db
        self._owner = owner
        self.session = session
        self._next_seq = next_seq
        self._stamped = False

    async def _stamp(self) -> None:
        """Before the first write to a message: take the session's next revision, which the
        triggers stamp on every message this transaction changes. A transaction that changes no
        message takes none (and writes nothing: a read-only home can still answer it)."""
        if self._stamped:
            return
        self._stamped = True
        await self._db.execute(
            "UPDATE sessions SET revision = revision + 1 WHERE owner = ? AND id = ?", (self._owner, self.session.id)
        )
        self.session = self.session.model_copy(update={"revision": self.session.revision + 1})

    async def messages(self, after_seq: int = 0, *, hidden: bool = False) -> list[Message]:
        return await _load_messages(self._db, self._owner, self.session.id, after_seq, None, hidden=hidden)

    async def hide_messages(self, message_ids: Sequence[str]) -> None:
        await self._stamp()
        await self._db.executemany("UPDATE messages SET hidden = 1 WHERE id = ?", [(i,) for i in message_ids])

    async def open_calls(self, call_ids: Sequence[str]) -> dict[str, StoredToolPart]:
        wanted = sorted(set(call_ids))
        if not wanted:
            return {}
        found: dict[str, StoredToolPart] = {}
        # Chunked: SQLite caps bound parameters per statement.
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            async with self._db.execute(
                f"SELECT p.message_id, p.idx, p.call_id, p.data, p.tokens FROM parts p "
                f"JOIN messages m ON m.id = p.message_id "
                f"WHERE p.owner = ? AND p.session_id = ? AND p.call_id IN ({marks}) "
                "AND p.state IN ('pending', 'running') ORDER BY m.seq, p.idx",
                (self._owner, self.session.id, *chunk),
            ) as cur:
                async for row in cur:
                    # Later rows win: a reused call id answers its most recent call.
                    part = load_part(row["data"], row["tokens"])
                    assert isinstance(part, ToolPart)
                    found[row["call_id"]] = StoredToolPart(row["message_id"], row["idx"], part)
        return found

    async def update_part(self, stored: StoredToolPart, part: ToolPart) -> None:
        await self._stamp()
        delta = part.tokens - stored.part.tokens
        await self._db.execute(
            "UPDATE parts SET data = ?, state = ?, tokens = ? WHERE message_id = ? AND idx = ?",
            (part_json(part), part.state, part.tokens, stored.message_id, stored.index),
        )
        if delta:
            await self._db.execute(
                "UPDATE messages SET tokens = tokens + ?, view_tokens = view_tokens + ? WHERE id = ?",
                (delta, delta, stored.message_id),
            )

    async def insert_messages(self, messages: Sequence[Message]) -> list[Message]:
        await self._stamp()
        stored, message_rows, part_rows = new_message_rows(
            messages, owner=self._owner, session_id=self.session.id, first_seq=self._next_seq, now=time.time()
        )
        self._next_seq += len(stored)
        await self._db.executemany(
            "INSERT INTO messages (id, owner, session_id, seq, role, name, parent_id, summary, finish_reason, "
            "error, usage, created_at, metadata, tokens, view_tokens, turn_start) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            message_rows,
        )
        await self._db.executemany(
            "INSERT INTO parts (message_id, idx, owner, session_id, type, call_id, state, data, tokens) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            part_rows,
        )
        await self._db.execute(
            "UPDATE sessions SET next_seq = ? WHERE owner = ? AND id = ?", (self._next_seq, self._owner, self.session.id)
        )
        return stored

    async def mark_parts(self, marks: Sequence[PartMark]) -> None:
        await self._stamp()
        await self._db.executemany(
            "UPDATE parts SET data = ? WHERE message_id = ? AND idx = ?",
            [(part_json(m.part), m.message_id, m.index) for m in marks],
        )
        await self._db.executemany(
            "UPDATE messages SET view_tokens = COALESCE(view_tokens, tokens) - ? WHERE id = ?",
            [(m.freed, m.message_id) for m in marks],
        )

    async def rows(self, after_seq: int = 0) -> list[MessageRow]:
        return await _rows(self._db, self._owner, self.session.id, after_seq)

    async def add_compaction(self, record: CompactionRecord) -> CompactionRecord:
        record = record.model_copy(
            update={"id": record.id or new_id("cmp"), "session_id": self.session.id, "created_at": time.time()}
        )
        await self._db.execute(
            "INSERT INTO compactions (id, owner, session_id, created_at, data) VALUES (?,?,?,?,?)",
            (record.id, self._owner, record.session_id, record.created_at, record.model_dump_json()),
        )
        # The database keeps the totals (a trigger); keep this transaction's copy of the session in step.
        self.session = self.session.model_copy(
            update={
                "compaction_count": self.session.compaction_count + 1,
                "compaction_tokens_freed": self.session.compaction_tokens_freed + record.tokens_freed,
            }
        )
        return record

    async def replace_counts(self, messages: Sequence[Message]) -> None:
        """Store new token counts for already-stored messages (after a tokenizer change)."""
        await self._stamp()
        await self._db.executemany(
            "UPDATE messages SET tokens = ?, view_tokens = ? WHERE id = ?",
            [(m.tokens, m.view_tokens, m.id) for m in messages],
        )
        await self._db.executemany(
            "UPDATE parts SET tokens = ? WHERE message_id = ? AND idx = ?",
            [(p.tokens, m.id, i) for m in messages for i, p in enumerate(m.parts)],
        )

    async def save_session(self, session: Session) -> None:
        # What the store keeps comes from its own copy: the caller's may predate `add_compaction`.
        kept = {f: getattr(self.session, f) for f in KEPT}
        session = session.model_copy(update={"updated_at": time.time(), **kept})
        columns = session_columns(session)
        await self._db.execute(_UPDATE_SESSION, (*(columns[f] for f in UPDATABLE), self._owner, session.id))
        self.session = session

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

PostgreSQL text cannot hold NUL characters, which SQLite stores: every text parameter has them
replaced by U+FFFD, on writes and on lookups alike, so an id with one still finds its row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from contextfold.domain import CompactionRecord, Message, MessageRow, Part, Session, ToolPart, Usage, new_id
from contextfold.store import pgschema
from contextfold.store.base import OutputRecord, PartMark, SessionPage, StoredToolPart, Tombstone
from contextfold.errors import ConflictError, NotFoundError
from contextfold.store.rows import (
    KEPT,
    OUTPUT_COLUMNS,
    SESSION_FIELDS,
    UPDATABLE,
    WRITTEN,
    decode_cursor,
    encode_cursor,
    load_part,
    message_from_row,
    messages_from_joined,
    new_message_rows,
    output_from_row,
    output_values,
    part_json,
    session_columns,
    session_from_row,
)

__all__ = ["PostgresStore", "PostgresTenant", "connect_kwargs", "is_postgres_url", "redact"]

_SESSION_COLUMNS = ", ".join(SESSION_FIELDS)
_INSERT_SESSION = (
    f"INSERT INTO sessions (owner, {', '.join(WRITTEN)}) VALUES (%s, {', '.join(['%s'] * len(WRITTEN))}) "
    "ON CONFLICT (owner, id) DO NOTHING"
)
_FLUSHED = (*UPDATABLE, "revision", "next_seq", "compaction_count", "compaction_tokens_freed")
_OUTPUT_SELECT = f"SELECT {', '.join(OUTPUT_COLUMNS)} FROM outputs"
_SESSION_TABLES = ("sessions", "messages", "parts", "compactions", "outputs", "output_tombstones")
"""What `size_bytes` counts: the sessions' data, not the spilled blobs (they have their own quota)."""

_NUL = "\x00"


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """`url` without its password, for messages and logs."""
    from contextfold.config import redact_url

    return redact_url(url)


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


async def _execute(conn: psycopg.AsyncConnection, sql: str, params: Sequence[Any] = ()) -> psycopg.AsyncCursor:
    return await conn.execute(sql, _safe(params))


async def _fetchall(conn: psycopg.AsyncConnection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cur = await conn.execute(sql, _safe(params))
    return cast("list[dict[str, Any]]", await cur.fetchall())  # the pool's row_factory is dict_row


async def _fetchone(conn: psycopg.AsyncConnection, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
    cur = await conn.execute(sql, _safe(params))
    return cast("dict[str, Any] | None", await cur.fetchone())  # the pool's row_factory is dict_row


async def _executemany(conn: psycopg.AsyncConnection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    if rows:
        async with conn.cursor() as cur:
            await cur.executemany(sql, [_safe(r) for r in rows])


_MESSAGE_COLUMNS = (
    "id, seq, role, name, parent_id, summary, finish_reason, error, usage, created_at, metadata, tokens, view_tokens"
)


async def _load_messages(
    conn: psycopg.AsyncConnection,
    owner: str,
    session_id: str,
    after_seq: int,
    limit: int | None,
    *,
    hidden: bool = False,
) -> list[Message]:
    visible = "" if hidden else " AND NOT hidden"
    message_rows = await _fetchall(
        conn,
        f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE owner = %s AND session_id = %s AND seq > %s{visible} "
        "ORDER BY seq LIMIT %s",
        (owner, session_id, after_seq, limit),
    )
    if not message_rows:
        return []
    parts: dict[str, list[Part]] = {}
    for row in await _fetchall(
        conn,
        "SELECT p.message_id, p.data, p.tokens FROM parts p JOIN messages m ON m.id = p.message_id "
        f"WHERE m.owner = %s AND m.session_id = %s AND m.seq BETWEEN %s AND %s{visible.replace('hidden', 'm.hidden')} "
        "ORDER BY m.seq, p.idx",
        (owner, session_id, message_rows[0]["seq"], message_rows[-1]["seq"]),
    ):
        parts.setdefault(row["message_id"], []).append(load_part(row["data"], row["tokens"]))
    return [message_from_row(row, session_id, parts.get(row["id"], [])) for row in message_rows]


async def _load_changed(
    conn: psycopg.AsyncConnection, owner: str, session_id: str, after_seq: int, since_rev: int
) -> tuple[list[Message], set[str]]:
    """As the SQLite store's: one statement, so one snapshot, found by revision."""
    rows = await _fetchall(
        conn,
        "SELECT m.id, m.seq, m.role, m.name, m.parent_id, m.summary, m.finish_reason, m.error, m.usage, "
        "m.created_at, m.metadata, m.tokens, m.view_tokens, m.hidden, p.data, p.tokens AS part_tokens "
        "FROM messages m LEFT JOIN parts p ON p.message_id = m.id "
        "WHERE m.owner = %s AND m.session_id = %s AND m.rev > %s AND m.seq > %s ORDER BY m.seq, p.idx",
        (owner, session_id, since_rev, after_seq),
    )
    return messages_from_joined(rows, session_id)


async def _rows(conn: psycopg.AsyncConnection, owner: str, session_id: str, after_seq: int) -> list[MessageRow]:
    rows = await _fetchall(
        conn,
        "SELECT id, seq, role, COALESCE(view_tokens, tokens) AS tokens, turn_start, summary FROM messages "
        "WHERE owner = %s AND session_id = %s AND seq > %s AND NOT hidden ORDER BY seq",
        (owner, session_id, after_seq),
    )
    return [MessageRow(r["id"], r["seq"], r["role"], r["tokens"], r["turn_start"], r["summary"]) for r in rows]


class PostgresStore:
    """`Store` on one PostgreSQL database: every tenant, each through `tenant(owner)`."""

    def __init__(self, pool: AsyncConnectionPool, url: str) -> None:
        self._pool = pool
        self.url = url

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 10, timeout: float = 30.0) -> PostgresStore:
        """Connect, migrate (under an advisory lock, see `pgschema`) and open a pool of up to `pool_size`."""
        await asyncio.to_thread(_migrate, url, timeout)
        pool = AsyncConnectionPool(
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
        return cls(pool, url)

    async def close(self) -> None:
        await self._pool.close()

    # -- transactions ------------------------------------------------------------------------

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[psycopg.AsyncConnection]:
        async with self._pool.connection() as conn:
            async with conn.transaction():
                yield conn

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        async with self._pool.connection() as conn:
            yield conn

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        async with self._pool.connection() as conn:
            return await _fetchall(conn, sql, params)

    async def _fetchone(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        async with self._pool.connection() as conn:
            return await _fetchone(conn, sql, params)

    # -- one tenant ------------------------------------------------------------------------------

    def tenant(self, owner: str) -> PostgresTenant:
        return PostgresTenant(self, owner)

    # -- every tenant: spill store upkeep and totals ---------------------------------------------

    async def outputs(self) -> list[OutputRecord]:
        return [output_from_row(r) for r in await self._fetchall(f"{_OUTPUT_SELECT} ORDER BY created_at, id")]

    @asynccontextmanager
    async def spill_transaction(self) -> AsyncIterator[_PgOutputTransaction]:
        async with self._transaction() as conn:
            tx = _PgOutputTransaction(conn)
            await tx._lock_spill()
            yield tx

    async def spill_bytes(self) -> int:
        row = await self._fetchone(_SPILL_BYTES)
        return int(row["bytes"]) if row else 0

    async def compactions(self, *, limit: int = 10) -> list[CompactionRecord]:
        rows = await self._fetchall("SELECT data FROM compactions ORDER BY created_at DESC, id DESC LIMIT %s", (limit,))
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]

    async def compaction_totals(self) -> tuple[int, int]:
        row = await self._fetchone(
            "SELECT COALESCE(SUM(compaction_count), 0) AS n, COALESCE(SUM(compaction_tokens_freed), 0) AS freed "
            "FROM sessions"
        )
        return (int(row["n"]), int(row["freed"])) if row else (0, 0)

    async def size_bytes(self) -> int:
        """Bytes the session tables take, indexes and TOAST included (not the spilled blobs,
        which `spill_quota_bytes` bounds)."""
        row = await self._fetchone(
            "SELECT COALESCE(SUM(pg_total_relation_size(to_regclass(t))), 0) AS size FROM unnest(%s::text[]) AS t",
            (list(_SESSION_TABLES),),
        )
        return int(row["size"]) if row else 0


class PostgresTenant:
    """`TenantStore` on a `PostgresStore`: every query is scoped to one owner."""

    def __init__(self, store: PostgresStore, owner: str) -> None:
        self._store = store
        self.owner = owner

    # -- sessions ----------------------------------------------------------------------------

    async def create_session(self, session: Session) -> Session:
        now = time.time()
        session = session.model_copy(
            update={"owner": self.owner, "created_at": now, "updated_at": now, **dict.fromkeys(KEPT, 0)}
        )
        async with self._store._transaction() as conn:
            cur = await _execute(conn, _INSERT_SESSION, (self.owner, *session_columns(session).values()))
            if cur.rowcount == 0:
                raise ConflictError(f"a session with id {session.id!r} already exists")
        return session

    async def get_session(self, session_id: str) -> Session:
        row = await self._store._fetchone(
            f"SELECT owner, {_SESSION_COLUMNS} FROM sessions WHERE owner = %s AND id = %s", (self.owner, session_id)
        )
        if row is None:
            raise NotFoundError("session", session_id, "list sessions with session_list or open one with session_open")
        return session_from_row(row)

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None) -> SessionPage:
        params: list[Any] = [self.owner]
        where = "owner = %s"
        if cursor:
            updated_at, last_id = decode_cursor(cursor)
            where += " AND (updated_at < %s OR (updated_at = %s AND id < %s))"
            params += [updated_at, updated_at, last_id]
        rows = await self._store._fetchall(
            f"SELECT owner, {_SESSION_COLUMNS} FROM sessions WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT %s",
            (*params, limit + 1),
        )
        sessions = [session_from_row(r) for r in rows[:limit]]
        more = len(rows) > limit
        next_cursor = encode_cursor(sessions[-1].updated_at, sessions[-1].id) if more and sessions else None
        return SessionPage(sessions, next_cursor)

    async def delete_session(self, session_id: str) -> None:
        async with self._store._transaction() as conn:
            # The session's row first, then the spill lock: the order every write takes them in.
            if await _fetchone(
                conn, "SELECT 1 AS found FROM sessions WHERE owner = %s AND id = %s FOR UPDATE", (self.owner, session_id)
            ) is None:
                raise NotFoundError("session", session_id)
            await _execute(conn, "SELECT pg_advisory_xact_lock(%s)", (pgschema.SPILL_LOCK,))
            await _execute(conn, "DELETE FROM sessions WHERE owner = %s AND id = %s", (self.owner, session_id))

    # -- messages ----------------------------------------------------------------------------

    @asynccontextmanager
    async def write(self, session_id: str, *, create: Session | None = None) -> AsyncIterator[_PgTransaction]:
        async with self._store._transaction() as conn:
            row = await self._session_row(conn, session_id)
            if row is None and create is not None:
                now = time.time()
                create = create.model_copy(
                    update={"id": session_id, "created_at": now, "updated_at": now, **dict.fromkeys(KEPT, 0)}
                )
                await _execute(conn, _INSERT_SESSION, (self.owner, *session_columns(create).values()))
                row = await self._session_row(conn, session_id)  # ours, or one a concurrent request made
            if row is None:
                raise NotFoundError("session", session_id, "open it first with session_open")
            tx = _PgTransaction(conn, self.owner, session_from_row(row), row["next_seq"])
            yield tx
            await tx._flush()

    async def _session_row(self, conn: psycopg.AsyncConnection, session_id: str) -> dict[str, Any] | None:
        return await _fetchone(
            conn,
            f"SELECT owner, {_SESSION_COLUMNS}, next_seq FROM sessions WHERE owner = %s AND id = %s FOR NO KEY UPDATE",
            (self.owner, session_id),
        )

    async def load_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None, hidden: bool = False
    ) -> list[Message]:
        async with self._store._connection() as conn:
            return await _load_messages(conn, self.owner, session_id, after_seq, limit, hidden=hidden)

    async def rows(self, session_id: str, *, after_seq: int = 0) -> list[MessageRow]:
        async with self._store._connection() as conn:
            return await _rows(conn, self.owner, session_id, after_seq)

    async def changed_messages(
        self, session_id: str, *, since: int, after_seq: int = 0
    ) -> tuple[list[Message], set[str]]:
        async with self._store._connection() as conn:
            return await _load_changed(conn, self.owner, session_id, after_seq, since)

    async def recent_usages(self, session_id: str, *, limit: int = 10) -> list[Usage]:
        rows = await self._store._fetchall(
            "SELECT usage FROM messages WHERE owner = %s AND session_id = %s AND usage IS NOT NULL "
            "ORDER BY seq DESC LIMIT %s",
            (self.owner, session_id, limit),
        )
        return [Usage.model_validate_json(r["usage"]) for r in reversed(rows)]

    # -- spilled outputs ---------------------------------------------------------------------

    async def get_output(self, output_id: str) -> OutputRecord:
        row = await self._store._fetchone(f"{_OUTPUT_SELECT} WHERE id = %s AND owner = %s", (output_id, self.owner))
        if row is None:
            raise NotFoundError("output", output_id, "it may have expired or been deleted; outputs are kept for a limited time")
        return output_from_row(row)

    async def session_outputs(self, session_id: str) -> list[OutputRecord]:
        rows = await self._store._fetchall(
            f"{_OUTPUT_SELECT} WHERE owner = %s AND session_id = %s ORDER BY created_at, id", (self.owner, session_id)
        )
        return [output_from_row(r) for r in rows]

    async def touch_output(self, output_id: str) -> None:
        async with self._store._connection() as conn:
            await _execute(
                conn,
                "UPDATE outputs SET last_read_at = %s WHERE id = %s AND owner = %s",
                (time.time(), output_id, self.owner),
            )

    async def output_tombstone(self, output_id: str) -> Tombstone | None:
        row = await self._store._fetchone(
            "SELECT id, owner, reason, removed_at FROM output_tombstones WHERE id = %s AND owner = %s",
            (output_id, self.owner),
        )
        return Tombstone(row["id"], row["owner"], row["reason"], row["removed_at"]) if row else None

    # -- compaction history ------------------------------------------------------------------

    async def compactions(self, session_id: str, *, limit: int = 10) -> list[CompactionRecord]:
        rows = await self._store._fetchall(
            "SELECT data FROM compactions WHERE owner = %s AND session_id = %s ORDER BY created_at DESC, id DESC LIMIT %s",
            (self.owner, session_id, limit),
        )
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]

    async def compaction_totals(self, session_id: str) -> tuple[int, int]:
        row = await self._store._fetchone(
            "SELECT compaction_count, compaction_tokens_freed FROM sessions WHERE owner = %s AND id = %s",
            (self.owner, session_id),
        )
        return (int(row["compaction_count"]), int(row["compaction_tokens_freed"])) if row else (0, 0)


_SPILL_BYTES = "SELECT bytes FROM spill_usage WHERE id = 1"


class _OutputStatements:
    """`OutputTransaction` on the connection of an open transaction; the spill lock is taken
    before the first statement that reads or changes output rows."""

    _conn: psycopg.AsyncConnection
    _added: tuple[str, ...] = ()
    _spill_locked = False

    async def _lock_spill(self) -> None:
        if not self._spill_locked:
            await _execute(self._conn, "SELECT pg_advisory_xact_lock(%s)", (pgschema.SPILL_LOCK,))
            self._spill_locked = True

    async def add_output(self, record: OutputRecord) -> None:
        await self._lock_spill()
        await _execute(
            self._conn,
            f"INSERT INTO outputs ({', '.join(OUTPUT_COLUMNS)}) VALUES ({', '.join(['%s'] * len(OUTPUT_COLUMNS))})",
            output_values(record),
        )
        self._added = (*self._added, record.id)

    async def spill_bytes(self) -> int:
        await self._lock_spill()
        row = await _fetchone(self._conn, _SPILL_BYTES)
        return int(row["bytes"]) if row else 0

    async def referenced(self, digests: Collection[str]) -> set[str]:
        await self._lock_spill()
        rows = await _fetchall(
            self._conn, "SELECT digest FROM spill_contents WHERE digest = ANY(%s)", (sorted(set(digests)),)
        )
        return {r["digest"] for r in rows}

    async def outputs(self) -> list[OutputRecord]:
        await self._lock_spill()
        rows = await _fetchall(self._conn, f"{_OUTPUT_SELECT} ORDER BY created_at, id")
        return [output_from_row(r) for r in rows if r["id"] not in self._added]

    async def remove_outputs(self, output_ids: Sequence[str], reason: str, at: float) -> None:
        if not output_ids:
            return
        await self._lock_spill()
        ids = list(output_ids)
        await _execute(
            self._conn,
            "INSERT INTO output_tombstones (id, owner, reason, removed_at) "
            "SELECT id, owner, %s, %s FROM outputs WHERE id = ANY(%s) "
            "ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, reason = EXCLUDED.reason, "
            "removed_at = EXCLUDED.removed_at",
            (reason, at, ids),
        )
        await _execute(self._conn, "DELETE FROM outputs WHERE id = ANY(%s)", (ids,))

    async def drop_tombstones(self, before: float) -> None:
        await _execute(self._conn, "DELETE FROM output_tombstones WHERE removed_at < %s", (before,))


class _PgOutputTransaction(_OutputStatements):
    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self._conn = conn


class _PgTransaction(_OutputStatements):
    def __init__(self, conn: psycopg.AsyncConnection, owner: str, session: Session, next_seq: int) -> None:
        self._conn = conn
        self._owner = owner
        self.session = session
        self._next_seq = next_seq
        self._rev: int | None = None
        self._dirty = False

    async def _stamp(self) -> int:
        """The revision this transaction stamps on what it changes: the session's next, taken
        before its first change. The row is locked by this transaction, so no other can take
        it; the row itself is written once, at the end (`_flush`)."""
        if self._rev is None:
            self._rev = self.session.revision + 1
            self.session = self.session.model_copy(update={"revision": self._rev})
            self._dirty = True
        return self._rev

    async def _flush(self) -> None:
        """Write the session row once, before commit: the revision taken, the next seq, the
        compaction totals, and what `save_session` asked for."""
        if not self._dirty:
            return
        session = self.session
        columns = session_columns(session)
        await _execute(
            self._conn,
            f"UPDATE sessions SET {', '.join(f'{f} = %s' for f in _FLUSHED)} WHERE owner = %s AND id = %s",
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

    async def messages(self, after_seq: int = 0, *, hidden: bool = False) -> list[Message]:
        return await _load_messages(self._conn, self._owner, self.session.id, after_seq, None, hidden=hidden)

    async def hide_messages(self, message_ids: Sequence[str]) -> None:
        rev = await self._stamp()
        await _execute(
            self._conn,
            "UPDATE messages SET hidden = true, rev = %s WHERE owner = %s AND session_id = %s AND id = ANY(%s)",
            (rev, self._owner, self.session.id, list(message_ids)),
        )

    async def open_calls(self, call_ids: Sequence[str]) -> dict[str, StoredToolPart]:
        wanted = sorted({c.replace(_NUL, "\ufffd") for c in call_ids})
        if not wanted:
            return {}
        found: dict[str, StoredToolPart] = {}
        rows = await _fetchall(
            self._conn,
            "SELECT p.message_id, p.idx, p.call_id, p.data, p.tokens FROM parts p JOIN messages m ON m.id = p.message_id "
            "WHERE p.owner = %s AND p.session_id = %s AND p.call_id = ANY(%s) AND p.state IN ('pending', 'running') "
            "ORDER BY m.seq, p.idx",
            (self._owner, self.session.id, wanted),
        )
        by_clean = {c.replace(_NUL, "\ufffd"): c for c in call_ids}
        for row in rows:
            # Later rows win: a reused call id answers its most recent call.
            part = load_part(row["data"], row["tokens"])
            assert isinstance(part, ToolPart)
            found[by_clean.get(row["call_id"], row["call_id"])] = StoredToolPart(row["message_id"], row["idx"], part)
        return found

    async def update_part(self, stored: StoredToolPart, part: ToolPart) -> None:
        rev = await self._stamp()
        delta = part.tokens - stored.part.tokens
        await _execute(
            self._conn,
            "UPDATE parts SET data = %s, state = %s, tokens = %s WHERE message_id = %s AND idx = %s",
            (part_json(part), part.state, part.tokens, stored.message_id, stored.index),
        )
        await _execute(
            self._conn,
            "UPDATE messages SET tokens = tokens + %s, view_tokens = view_tokens + %s, rev = %s WHERE id = %s",
            (delta, delta, rev, stored.message_id),
        )

    async def insert_messages(self, messages: Sequence[Message]) -> list[Message]:
        rev = await self._stamp()
        stored, rows, part_rows = new_message_rows(
            messages, owner=self._owner, session_id=self.session.id, first_seq=self._next_seq, now=time.time()
        )
        self._next_seq += len(stored)
        message_rows = [(*row, rev) for row in rows]
        async with self._conn.pipeline():  # both batches in one round trip
            await _executemany(
                self._conn,
                "INSERT INTO messages (id, owner, session_id, seq, role, name, parent_id, summary, finish_reason, "
                "error, usage, created_at, metadata, tokens, view_tokens, turn_start, rev) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                message_rows,
            )
            await _executemany(
                self._conn,
                "INSERT INTO parts (message_id, idx, owner, session_id, type, call_id, state, data, tokens) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                part_rows,
            )
        self._dirty = True  # next_seq moved
        return stored

    async def mark_parts(self, marks: Sequence[PartMark]) -> None:
        rev = await self._stamp()
        await _executemany(
            self._conn,
            "UPDATE parts SET data = %s WHERE message_id = %s AND idx = %s",
            [(part_json(m.part), m.message_id, m.index) for m in marks],
        )
        await _executemany(
            self._conn,
            "UPDATE messages SET view_tokens = COALESCE(view_tokens, tokens) - %s, rev = %s WHERE id = %s",
            [(m.freed, rev, m.message_id) for m in marks],
        )

    async def rows(self, after_seq: int = 0) -> list[MessageRow]:
        return await _rows(self._conn, self._owner, self.session.id, after_seq)

    async def add_compaction(self, record: CompactionRecord) -> CompactionRecord:
        record = record.model_copy(
            update={"id": record.id or new_id("cmp"), "session_id": self.session.id, "created_at": time.time()}
        )
        await _execute(
            self._conn,
            "INSERT INTO compactions (id, owner, session_id, created_at, data) VALUES (%s, %s, %s, %s, %s)",
            (record.id, self._owner, record.session_id, record.created_at, record.model_dump_json()),
        )
        self._dirty = True
        self.session = self.session.model_copy(
            update={
                "compaction_count": self.session.compaction_count + 1,
                "compaction_tokens_freed": self.session.compaction_tokens_freed + record.tokens_freed,
            }
        )
        return record

    async def replace_counts(self, messages: Sequence[Message]) -> None:
        rev = await self._stamp()
        await _executemany(
            self._conn,
            "UPDATE messages SET tokens = %s, view_tokens = %s, rev = %s WHERE id = %s",
            [(m.tokens, m.view_tokens, rev, m.id) for m in messages],
        )
        await _executemany(
            self._conn,
            "UPDATE parts SET tokens = %s WHERE message_id = %s AND idx = %s",
            [(p.tokens, m.id, i) for m in messages for i, p in enumerate(m.parts)],
        )

    async def save_session(self, session: Session) -> None:
        kept = {f: getattr(self.session, f) for f in KEPT}
        kept["revision"] = self.session.revision
        self.session = session.model_copy(update={"updated_at": time.time(), **kept})
        self._dirty = True  # written by `_flush`, with the rest of the row


def _migrate(url: str, timeout: float) -> None:
    with psycopg.connect(url, connect_timeout=max(1, int(timeout)), **connect_kwargs()) as conn:
        pgschema.migrate(conn)

"""The statements and row handling both SQL backends share, written once.

`SQLiteStore` and `PostgresStore` store the same tables (`rows` turns domain objects into their
rows), so every statement that reads or writes them is here, written with ``?`` placeholders; a
backend's `Db` runs them on its own connection (PostgreSQL's converts them to ``%s``, in one
place). What each backend keeps for itself is how it holds its connections and its locks:

- SQLite: one connection behind an asyncio lock, `BEGIN IMMEDIATE` for every write (the whole
  database's write lock, so nothing else here locks), revisions stamped on messages by triggers.
- PostgreSQL: a pool, the session's row locked by each write on it (`Db.FOR_WRITE`), an advisory
  lock for the spill store (`SQLOutputStatements._lock_spill`), revisions written by the
  statements themselves and the session row written once per transaction (`_flush`).

Where one statement must differ between the two, the difference is a named piece of `Db` (a
partial index's predicate, an IN list) or a method a backend overrides, each saying why.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar, Protocol

from contextfold.domain import CompactionRecord, Message, MessageRow, Part, Session, ToolPart, Usage, new_id
from contextfold.errors import ConflictError, InvalidInput, NotFoundError, output_not_found
from contextfold.store.base import (
    IdleSession,
    OutputRecord,
    PartMark,
    SearchHit,
    SearchQuery,
    SessionPage,
    StoredToolPart,
    Tombstone,
)
from contextfold.store.rows import (
    KEPT,
    MESSAGE_COLUMNS,
    OUTPUT_COLUMNS,
    PART_COLUMNS,
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


class Row(Protocol):
    """A result row, read by column name (`sqlite3.Row`, or psycopg's `dict_row`)."""

    def __getitem__(self, key: str, /) -> Any: ...


def insert(table: str, columns: Sequence[str], suffix: str = "") -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}){suffix}"


SESSION_SELECT = f"SELECT owner, {', '.join(SESSION_FIELDS)} FROM sessions"
OUTPUT_SELECT = f"SELECT {', '.join(OUTPUT_COLUMNS)} FROM outputs"
SPILL_BYTES = "SELECT bytes FROM spill_usage WHERE id = 1"
"""Bytes of the distinct contents the output rows reference (each content is stored once), kept
up to date by triggers on `outputs` in both schemas."""

# Both databases take `ON CONFLICT … DO NOTHING` (SQLite since 3.24): one statement says whether
# the session was there already, under the write lock either backend holds by then.
_INSERT_SESSION = insert("sessions", ("owner", *WRITTEN), " ON CONFLICT (owner, id) DO NOTHING")
PART_INSERT = insert("parts", PART_COLUMNS)
_INSERT_OUTPUT = insert("outputs", OUTPUT_COLUMNS)
_INSERT_COMPACTION = insert("compactions", ("id", "owner", "session_id", "created_at", "data"))
_MESSAGE_FIELDS = (
    "id, seq, role, name, parent_id, summary, finish_reason, error, usage, created_at, metadata, tokens, view_tokens"
)


class Db:
    """One backend connection as the shared statements use it, and what that backend's SQL says
    differently. A backend subclasses it; its methods run on the connection it wraps."""

    IN_VIEW: ClassVar[str]
    """The predicate of the partial index `messages_in_view`, written as the index is: a planner
    uses a partial index only for a query that states its predicate the same way."""
    TRUE: ClassVar[str]
    """A true `hidden` as the schema stores it (SQLite: an integer; PostgreSQL: a boolean)."""
    NO_LIMIT: ClassVar[int | None]
    """A LIMIT that limits nothing (SQLite: -1; PostgreSQL: NULL, as it refuses a negative one)."""
    BY_REV: ClassVar[str] = ""
    """How `changed_messages` names the index it must use, where the planner needs telling."""
    FOR_WRITE: ClassVar[str] = ""
    """What locks a session's row for the rest of a write transaction, after its SELECT."""
    PROJECT: ClassVar[str]
    """A session's project root, read from its metadata (`SessionState.project`)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        raise NotImplementedError

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        raise NotImplementedError

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    def any_of(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """(a predicate that `column` is one of `values`, its parameters), as many as the backend
        needs to say them all; none for no values."""
        raise NotImplementedError

    def text(self, value: str) -> str:
        """`value` as this database stores and returns it."""
        return value


# -- reads both the tenant and an open transaction make --------------------------------------------


async def load_messages(
    db: Db, owner: str, session_id: str, after_seq: int, limit: int | None, *, hidden: bool = False
) -> list[Message]:
    # Messages a removal strategy took out of the view are read only when asked for (full history).
    visible = "" if hidden else f" AND {db.IN_VIEW}"
    message_rows = await db.fetchall(
        f"SELECT {_MESSAGE_FIELDS} FROM messages WHERE owner = ? AND session_id = ? AND seq > ?{visible} "
        "ORDER BY seq LIMIT ?",
        (owner, session_id, after_seq, db.NO_LIMIT if limit is None else limit),
    )
    if not message_rows:
        return []
    parts: dict[str, list[Part]] = {}
    # Not the parts of messages hidden in between (a removal strategy hides most of a history).
    # All in one trip: on SQLite, iterating a cursor would cross to its thread and back every 64 rows.
    for row in await db.fetchall(
        "SELECT p.message_id, p.data, p.tokens FROM parts p JOIN messages m ON m.id = p.message_id "
        f"WHERE m.owner = ? AND m.session_id = ? AND m.seq BETWEEN ? AND ?{visible.replace('hidden', 'm.hidden')} "
        "ORDER BY m.seq, p.idx",
        (owner, session_id, message_rows[0]["seq"], message_rows[-1]["seq"]),
    ):
        parts.setdefault(row["message_id"], []).append(load_part(row["data"], row["tokens"]))
    return [message_from_row(row, session_id, parts.get(row["id"], [])) for row in message_rows]


async def load_changed(
    db: Db, owner: str, session_id: str, after_seq: int, since_rev: int
) -> tuple[list[Message], set[str]]:
    """The messages after `after_seq` stamped after `since_rev`, in view, and the ids of those
    hidden: one query (a row per part), so one snapshot and one trip to the database. Found by
    revision, never by walking every seq after `after_seq` (all of a history a removal strategy
    hid, on every append)."""
    rows = await db.fetchall(
        "SELECT m.id, m.seq, m.role, m.name, m.parent_id, m.summary, m.finish_reason, m.error, m.usage, "
        "m.created_at, m.metadata, m.tokens, m.view_tokens, m.hidden, p.data, p.tokens AS part_tokens "
        f"FROM messages m{db.BY_REV} LEFT JOIN parts p ON p.message_id = m.id "
        "WHERE m.owner = ? AND m.session_id = ? AND m.rev > ? AND m.seq > ? ORDER BY m.seq, p.idx",
        (owner, session_id, since_rev, after_seq),
    )
    return messages_from_joined(rows, session_id)


async def message_rows(db: Db, owner: str, session_id: str, after_seq: int) -> list[MessageRow]:
    rows = await db.fetchall(
        "SELECT id, seq, role, COALESCE(view_tokens, tokens) AS tokens, turn_start, summary FROM messages "
        f"WHERE owner = ? AND session_id = ? AND seq > ? AND {db.IN_VIEW} ORDER BY seq",
        (owner, session_id, after_seq),
    )
    return [
        MessageRow(r["id"], r["seq"], r["role"], r["tokens"], bool(r["turn_start"]), bool(r["summary"])) for r in rows
    ]


def totals(row: Row | None) -> tuple[int, int]:
    """(how many compactions, tokens freed) from a row of them as `n` and `freed`."""
    return (int(row["n"]), int(row["freed"])) if row else (0, 0)


_ACTIVITY = (
    "SELECT s.owner, s.id, s.title, s.message_count, s.updated_at, s.metadata, "
    "(SELECT MAX(o.created_at) FROM outputs o WHERE o.owner = s.owner AND o.session_id = s.id) AS spilled_at, "
    "(SELECT MAX(o.last_read_at) FROM outputs o WHERE o.owner = s.owner AND o.session_id = s.id) AS read_at "
    "FROM sessions s"
)
"""A session's last activity: its last write (`updated_at`: every change saves the session), and
the newest spill into it and read of its outputs, which leave the session row as it is."""


def idle_session(row: Row) -> IdleSession:
    try:
        origin = json.loads(row["metadata"]).get("origin")
    except (ValueError, AttributeError):
        origin = None
    times = [row["updated_at"], row["spilled_at"] or 0.0, row["read_at"] or 0.0]
    return IdleSession(
        owner=row["owner"],
        id=row["id"],
        title=row["title"],
        origin=origin if isinstance(origin, str) else None,
        messages=int(row["message_count"]),
        last_active=float(max(times)),
    )


def search_scope(db: Db, owner: str, query: SearchQuery) -> tuple[str, list[Any]]:
    """The predicate that keeps a search's hits to one tenant, and to the query's session or
    project and time window (`p` is `parts`, `m` is `messages`): the owner is always there."""
    where = ["p.owner = ?"]
    params: list[Any] = [owner]
    if query.session_id is not None:
        where.append("p.session_id = ?")
        params.append(query.session_id)
    if query.project is not None:
        where.append(f"p.session_id IN (SELECT id FROM sessions WHERE owner = ? AND {db.PROJECT} = ?)")
        params += [owner, query.project]
    if query.since is not None:
        where.append("m.created_at >= ?")
        params.append(query.since)
    if query.until is not None:
        where.append("m.created_at < ?")
        params.append(query.until)
    return " AND ".join(where), params


def spellings(term: str) -> tuple[str, ...]:
    """`term`, and how the index holds it inside a tool call's input when that differs: the input
    is indexed as its JSON text, where a backslash is doubled and a quote escaped, so a Windows
    path typed as written (`C:\\Users\\me\\a.py`) must also be looked for as `C:\\\\Users…`."""
    escaped = json.dumps(term, ensure_ascii=False)[1:-1]
    return (term,) if escaped == term else (term, escaped)


def search_hit(row: Row) -> SearchHit:
    return SearchHit(
        session_id=row["session_id"],
        message_id=row["id"],
        seq=int(row["seq"]),
        role=row["role"],
        created_at=float(row["created_at"]),
        hidden=bool(row["hidden"]),
        score=float(row["score"]),
        summary=bool(row["summary"]),
        prose=bool(row["prose"]),
    )


# -- the store -------------------------------------------------------------------------------------


class SQLStore:
    """What `SQLiteStore` and `PostgresStore` share. A backend gives its connections (`_reading`,
    `_transaction`), its transaction classes, and what only it can answer (sizes, totals)."""

    def _reading(self) -> AbstractAsyncContextManager[Db]:
        """A connection for reads outside any transaction (several statements may run on it)."""
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Db]:
        """A write transaction: committed when the block ends, rolled back when it raises."""
        raise NotImplementedError

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> None:
        """One write statement on its own."""
        raise NotImplementedError

    _OUTPUT_TRANSACTION: ClassVar[type[SQLOutputStatements]]
    _SESSION_TRANSACTION: ClassVar[type[SQLSessionTransaction]]

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self._reading() as db:
            return await db.fetchall(sql, params)

    async def _fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        async with self._reading() as db:
            return await db.fetchone(sql, params)

    def tenant(self, owner: str) -> SQLTenant:
        """This database as one tenant sees it: its sessions and outputs, nobody else's."""
        return SQLTenant(self, owner)

    # -- every tenant: spill store upkeep and totals ---------------------------------------------

    async def outputs(self) -> list[OutputRecord]:
        """Every output record, oldest first (for gc)."""
        return [output_from_row(r) for r in await self._fetchall(f"{OUTPUT_SELECT} ORDER BY created_at, id")]

    @asynccontextmanager
    async def spill_transaction(self) -> AsyncIterator[SQLOutputStatements]:
        async with self._transaction() as db:
            tx = self._OUTPUT_TRANSACTION(db)
            await tx._lock_spill()
            yield tx

    async def spill_bytes(self) -> int:
        row = await self._fetchone(SPILL_BYTES)
        return int(row["bytes"]) if row else 0

    async def written_before(self, before: float) -> list[tuple[str, str]]:
        rows = await self._fetchall(
            "SELECT owner, id FROM sessions WHERE updated_at < ? ORDER BY updated_at, owner, id", (before,)
        )
        return [(r["owner"], r["id"]) for r in rows]

    async def idle_sessions(self, keys: Sequence[tuple[str, str]]) -> list[IdleSession]:
        by_owner: dict[str, list[str]] = {}
        for owner, session_id in keys:
            by_owner.setdefault(owner, []).append(session_id)
        found: dict[tuple[str, str], IdleSession] = {}
        async with self._reading() as db:
            for owner, ids in by_owner.items():
                for where, params in db.any_of("s.id", ids):
                    for row in await db.fetchall(f"{_ACTIVITY} WHERE s.owner = ? AND {where}", (owner, *params)):
                        found[(row["owner"], row["id"])] = idle_session(row)
        return [found[key] for key in keys if key in found]

    async def compactions(self, *, limit: int = 10) -> list[CompactionRecord]:
        """The latest compactions of every tenant, newest first (for the CLI's stats)."""
        rows = await self._fetchall("SELECT data FROM compactions ORDER BY created_at DESC, id DESC LIMIT ?", (limit,))
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]


def _id(field: str, value: str) -> str:
    """`value`, an id a caller passed, or an `InvalidInput` naming `field` if it holds a NUL.

    PostgreSQL text cannot hold NUL and stores U+FFFD in its place, so "n\\x00" and "n\\ufffd"
    would be one session there and two on SQLite: no backend accepts a NUL in an id.
    """
    if "\x00" in value:
        raise InvalidInput(field, "holds a NUL character (\\x00), which no id may contain")
    return value


class SQLTenant:
    """`TenantStore` on a `SQLStore`: every query is scoped to one owner.

    Session ids are per tenant: another tenant's "x" is simply not this tenant's "x", and reads
    exactly like an id nobody uses.
    """

    def __init__(self, store: SQLStore, owner: str) -> None:
        self._store = store
        self.owner = owner

    # -- sessions ----------------------------------------------------------------------------

    async def create_session(self, session: Session) -> Session:
        _id("session_id", session.id)
        now = time.time()
        session = session.model_copy(
            update={"owner": self.owner, "created_at": now, "updated_at": now, **dict.fromkeys(KEPT, 0)}
        )
        async with self._store._transaction() as db:
            if await db.execute(_INSERT_SESSION, (self.owner, *session_columns(session).values())) == 0:
                raise ConflictError(f"a session with id {session.id!r} already exists")
        return session

    async def get_session(self, session_id: str) -> Session:
        _id("session_id", session_id)
        row = await self._store._fetchone(f"{SESSION_SELECT} WHERE owner = ? AND id = ?", (self.owner, session_id))
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
            f"{SESSION_SELECT} WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?", (*params, limit + 1)
        )
        sessions = [session_from_row(r) for r in rows[:limit]]
        more = len(rows) > limit
        next_cursor = encode_cursor(sessions[-1].updated_at, sessions[-1].id) if more and sessions else None
        return SessionPage(sessions, next_cursor)

    async def delete_session(self, session_id: str) -> None:
        _id("session_id", session_id)
        async with self._store._transaction() as db:
            await self._lock_for_delete(db, session_id)
            if await db.execute("DELETE FROM sessions WHERE owner = ? AND id = ?", (self.owner, session_id)) == 0:
                raise NotFoundError("session", session_id)
            await self._after_delete(db)

    async def _lock_for_delete(self, db: Db, session_id: str) -> None:
        """What a backend locks before deleting a session with its outputs (see `PostgresTenant`)."""

    async def _after_delete(self, db: Db) -> None:
        """What a backend does, in the same transaction, once a session's rows are deleted (see
        `SQLiteTenant`: give its full-text index's space back)."""

    async def delete_idle_session(self, session_id: str, before: float) -> dict[str, int] | None:
        _id("session_id", session_id)
        async with self._store._transaction() as db:
            # Under the lock every writer of the session takes first (SQLite: the database's; PostgreSQL:
            # the session's row, then the spill store's), so what is read here stays true until commit.
            await self._lock_for_delete(db, session_id)
            row = await db.fetchone(f"{_ACTIVITY} WHERE s.owner = ? AND s.id = ?", (self.owner, session_id))
            if row is None or idle_session(row).last_active >= before:
                return None  # gone, or used since it was found idle
            outputs = await db.fetchall(
                "SELECT digest, MAX(bytes) AS bytes FROM outputs WHERE owner = ? AND session_id = ? GROUP BY digest",
                (self.owner, session_id),
            )
            await db.execute("DELETE FROM sessions WHERE owner = ? AND id = ?", (self.owner, session_id))
            await self._after_delete(db)
            return {r["digest"]: int(r["bytes"]) for r in outputs}

    # -- messages ----------------------------------------------------------------------------

    @asynccontextmanager
    async def write(self, session_id: str, *, create: Session | None = None) -> AsyncIterator[SQLSessionTransaction]:
        _id("session_id", session_id)
        async with self._store._transaction() as db:
            row = await self._session_row(db, session_id)
            if row is None and create is not None:
                now = time.time()
                create = create.model_copy(
                    update={"id": session_id, "created_at": now, "updated_at": now, **dict.fromkeys(KEPT, 0)}
                )
                await db.execute(_INSERT_SESSION, (self.owner, *session_columns(create).values()))
                row = await self._session_row(db, session_id)  # ours, or one a concurrent request made
            if row is None:
                raise NotFoundError("session", session_id, "open it first with session_open")
            tx = self._store._SESSION_TRANSACTION(db, self.owner, session_from_row(row), row["next_seq"])
            yield tx
            await tx._flush()

    async def _session_row(self, db: Db, session_id: str) -> Row | None:
        return await db.fetchone(
            f"SELECT owner, {', '.join(SESSION_FIELDS)}, next_seq FROM sessions WHERE owner = ? AND id = ?{db.FOR_WRITE}",
            (self.owner, session_id),
        )

    async def load_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None, hidden: bool = False
    ) -> list[Message]:
        _id("session_id", session_id)
        async with self._store._reading() as db:
            return await load_messages(db, self.owner, session_id, after_seq, limit, hidden=hidden)

    async def summaries(self, session_id: str, *, limit: int) -> list[Message]:
        """The session's newest `limit` summary messages (those a compaction wrote), oldest first."""
        _id("session_id", session_id)
        async with self._store._reading() as db:
            rows = await db.fetchall(
                f"SELECT seq FROM messages WHERE owner = ? AND session_id = ? AND summary = {db.TRUE} "
                "ORDER BY seq DESC LIMIT ?",
                (self.owner, session_id, limit),
            )
            found: list[Message] = []
            for row in reversed(rows):
                found += await load_messages(db, self.owner, session_id, int(row["seq"]) - 1, 1, hidden=True)
        return found

    async def rows(self, session_id: str, *, after_seq: int = 0) -> list[MessageRow]:
        _id("session_id", session_id)
        async with self._store._reading() as db:
            return await message_rows(db, self.owner, session_id, after_seq)

    async def changed_messages(
        self, session_id: str, *, since: int, after_seq: int = 0
    ) -> tuple[list[Message], set[str]]:
        _id("session_id", session_id)
        async with self._store._reading() as db:
            return await load_changed(db, self.owner, session_id, after_seq, since)

    async def recent_usages(self, session_id: str, *, limit: int = 10) -> list[Usage]:
        """The usage reports of the latest assistant messages, oldest first."""
        _id("session_id", session_id)
        rows = await self._store._fetchall(
            "SELECT usage FROM messages WHERE owner = ? AND session_id = ? AND usage IS NOT NULL "
            "ORDER BY seq DESC LIMIT ?",
            (self.owner, session_id, limit),
        )
        return [Usage.model_validate_json(r["usage"]) for r in reversed(rows)]

    # -- spilled outputs ---------------------------------------------------------------------

    async def get_output(self, output_id: str) -> OutputRecord:
        _id("output_id", output_id)
        row = await self._store._fetchone(f"{OUTPUT_SELECT} WHERE id = ? AND owner = ?", (output_id, self.owner))
        if row is None:
            raise output_not_found(output_id)
        return output_from_row(row)

    async def session_outputs(self, session_id: str) -> list[OutputRecord]:
        _id("session_id", session_id)
        rows = await self._store._fetchall(
            f"{OUTPUT_SELECT} WHERE owner = ? AND session_id = ? ORDER BY created_at, id", (self.owner, session_id)
        )
        return [output_from_row(r) for r in rows]

    async def touch_output(self, output_id: str) -> None:
        _id("output_id", output_id)
        await self._store._write(
            "UPDATE outputs SET last_read_at = ? WHERE id = ? AND owner = ?", (time.time(), output_id, self.owner)
        )

    async def output_tombstone(self, output_id: str) -> Tombstone | None:
        _id("output_id", output_id)
        row = await self._store._fetchone(
            "SELECT id, owner, reason, removed_at FROM output_tombstones WHERE id = ? AND owner = ?",
            (output_id, self.owner),
        )
        return Tombstone(row["id"], row["owner"], row["reason"], row["removed_at"]) if row else None

    # -- compaction history ------------------------------------------------------------------

    async def compactions(self, session_id: str, *, limit: int = 10) -> list[CompactionRecord]:
        _id("session_id", session_id)
        rows = await self._store._fetchall(
            "SELECT data FROM compactions WHERE owner = ? AND session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (self.owner, session_id, limit),
        )
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]

    async def compaction_totals(self, session_id: str) -> tuple[int, int]:
        _id("session_id", session_id)
        return totals(
            await self._store._fetchone(
                "SELECT compaction_count AS n, compaction_tokens_freed AS freed FROM sessions WHERE owner = ? AND id = ?",
                (self.owner, session_id),
            )
        )


# -- transactions --------------------------------------------------------------------------------


class SQLOutputStatements:
    """`OutputTransaction` on the connection of an open write transaction."""

    _added: tuple[str, ...] = ()  # outputs this transaction inserted

    def __init__(self, db: Db) -> None:
        self._db = db

    async def _lock_spill(self) -> None:
        """Take the spill store's write lock, before the first statement that reads or changes
        output rows. SQLite's `BEGIN IMMEDIATE` holds it already: the database's write lock."""

    async def add_output(self, record: OutputRecord) -> None:
        await self._lock_spill()
        await self._db.execute(_INSERT_OUTPUT, output_values(record))
        self._added = (*self._added, record.id)

    async def spill_bytes(self) -> int:
        await self._lock_spill()
        row = await self._db.fetchone(SPILL_BYTES)
        return int(row["bytes"]) if row else 0

    _CONTENTS: ClassVar[str] = "outputs"
    """Where `referenced` looks a digest up (PostgreSQL keeps a row per distinct content)."""

    async def referenced(self, digests: Collection[str]) -> set[str]:
        await self._lock_spill()
        found: set[str] = set()
        for where, params in self._db.any_of("digest", sorted(set(digests))):
            rows = await self._db.fetchall(f"SELECT DISTINCT digest FROM {self._CONTENTS} WHERE {where}", params)
            found.update(r["digest"] for r in rows)
        return found

    async def outputs(self) -> list[OutputRecord]:
        await self._lock_spill()
        rows = await self._db.fetchall(f"{OUTPUT_SELECT} ORDER BY created_at, id")
        return [output_from_row(r) for r in rows if r["id"] not in self._added]

    async def remove_outputs(self, output_ids: Sequence[str], reason: str, at: float) -> None:
        if not output_ids:
            return
        await self._lock_spill()
        for where, params in self._db.any_of("id", list(output_ids)):
            # Both take `ON CONFLICT … DO UPDATE` (SQLite since 3.24; its SELECT needs the WHERE).
            await self._db.execute(
                "INSERT INTO output_tombstones (id, owner, reason, removed_at) "
                f"SELECT id, owner, ?, ? FROM outputs WHERE {where} "
                "ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, reason = excluded.reason, "
                "removed_at = excluded.removed_at",
                (reason, at, *params),
            )
            await self._db.execute(f"DELETE FROM outputs WHERE {where}", params)

    async def drop_tombstones(self, before: float) -> None:
        await self._db.execute("DELETE FROM output_tombstones WHERE removed_at < ?", (before,))


class SQLSessionTransaction(SQLOutputStatements):
    """`SessionTransaction` on the connection of an open write transaction on one session.

    Every change to a message takes the session's next revision first (`_stamp`) and stamps it on
    the message; how a backend stamps and when it writes the session's row is its own."""

    _STAMPS_MESSAGES: ClassVar[bool]
    """Whether this backend's statements stamp the messages they change (PostgreSQL) rather than
    its schema's triggers (SQLite): then a changed part's message is written even when its token
    count stays, for the stamp."""

    def __init__(self, db: Db, owner: str, session: Session, next_seq: int) -> None:
        super().__init__(db)
        self._owner = owner
        self.session = session
        self._next_seq = next_seq

    async def _stamp(self) -> None:
        """Before the first change to a message: take the session's next revision."""
        raise NotImplementedError

    async def _update_messages(self, assignments: str, where: str, rows: Sequence[Sequence[Any]]) -> None:
        """`UPDATE messages SET {assignments} WHERE {where}` for each row of parameters (the
        assignments', then the predicate's), stamped with this transaction's revision."""
        raise NotImplementedError

    async def _insert_messages(self, message_rows: list[tuple[Any, ...]], part_rows: list[tuple[Any, ...]]) -> None:
        """Insert new messages' `MESSAGE_COLUMNS` rows and their parts' `PART_COLUMNS` rows, and
        move the session's next seq to `_next_seq`."""
        raise NotImplementedError

    async def _flush(self) -> None:
        """Before commit: write what the transaction kept of the session row for the end."""

    async def _totals_changed(self) -> None:
        """A compaction was added: SQLite's triggers keep the totals, PostgreSQL writes them in `_flush`."""

    async def messages(self, after_seq: int = 0, *, hidden: bool = False) -> list[Message]:
        return await load_messages(self._db, self._owner, self.session.id, after_seq, None, hidden=hidden)

    async def rows(self, after_seq: int = 0) -> list[MessageRow]:
        return await message_rows(self._db, self._owner, self.session.id, after_seq)

    async def hide_messages(self, message_ids: Sequence[str]) -> None:
        await self._stamp()
        for where, params in self._db.any_of("id", list(message_ids)):
            await self._update_messages(
                f"hidden = {self._db.TRUE}",
                f"owner = ? AND session_id = ? AND {where}",
                [(self._owner, self.session.id, *params)],
            )

    async def open_calls(self, call_ids: Sequence[str]) -> dict[str, StoredToolPart]:
        asked = {self._db.text(c): c for c in call_ids}  # the id as stored: the caller's
        found: dict[str, StoredToolPart] = {}
        for where, params in self._db.any_of("p.call_id", sorted(asked)):
            rows = await self._db.fetchall(
                "SELECT p.message_id, p.idx, p.call_id, p.data, p.tokens FROM parts p JOIN messages m ON m.id = p.message_id "
                f"WHERE p.owner = ? AND p.session_id = ? AND {where} AND p.state IN ('pending', 'running') "
                "ORDER BY m.seq, p.idx",
                (self._owner, self.session.id, *params),
            )
            for row in rows:
                # Later rows win: a reused call id answers its most recent call.
                part = load_part(row["data"], row["tokens"])
                assert isinstance(part, ToolPart)
                found[asked.get(row["call_id"], row["call_id"])] = StoredToolPart(row["message_id"], row["idx"], part)
        return found

    async def update_part(self, stored: StoredToolPart, part: ToolPart) -> None:
        await self._stamp()
        delta = part.tokens - stored.part.tokens
        await self._db.execute(
            "UPDATE parts SET data = ?, state = ?, tokens = ? WHERE message_id = ? AND idx = ?",
            (part_json(part), part.state, part.tokens, stored.message_id, stored.index),
        )
        if delta or self._STAMPS_MESSAGES:
            await self._update_messages(
                "tokens = tokens + ?, view_tokens = view_tokens + ?", "id = ?", [(delta, delta, stored.message_id)]
            )

    async def insert_messages(self, messages: Sequence[Message]) -> list[Message]:
        await self._stamp()
        stored, message_rows, part_rows = new_message_rows(
            messages, owner=self._owner, session_id=self.session.id, first_seq=self._next_seq, now=time.time()
        )
        self._next_seq += len(stored)
        await self._insert_messages(message_rows, part_rows)
        return stored

    async def mark_parts(self, marks: Sequence[PartMark]) -> None:
        await self._stamp()
        await self._db.executemany(
            "UPDATE parts SET data = ? WHERE message_id = ? AND idx = ?",
            [(part_json(m.part), m.message_id, m.index) for m in marks],
        )
        await self._update_messages(
            "view_tokens = COALESCE(view_tokens, tokens) - ?", "id = ?", [(m.freed, m.message_id) for m in marks]
        )

    async def replace_counts(self, messages: Sequence[Message]) -> None:
        """Store new token counts for already-stored messages (after a tokenizer change)."""
        await self._stamp()
        await self._update_messages(
            "tokens = ?, view_tokens = ?", "id = ?", [(m.tokens, m.view_tokens, m.id) for m in messages]
        )
        await self._db.executemany(
            "UPDATE parts SET tokens = ? WHERE message_id = ? AND idx = ?",
            [(p.tokens, m.id, i) for m in messages for i, p in enumerate(m.parts)],
        )

    async def add_compaction(self, record: CompactionRecord) -> CompactionRecord:
        record = record.model_copy(
            update={"id": record.id or new_id("cmp"), "session_id": self.session.id, "created_at": time.time()}
        )
        await self._db.execute(
            _INSERT_COMPACTION,
            (record.id, self._owner, record.session_id, record.created_at, compaction_json(record)),
        )
        # Keep this transaction's copy of the session in step with the totals the database keeps.
        self.session = self.session.model_copy(
            update={
                "compaction_count": self.session.compaction_count + 1,
                "compaction_tokens_freed": self.session.compaction_tokens_freed + record.tokens_freed,
            }
        )
        await self._totals_changed()
        return record

    async def compactions(self, *, limit: int = 10) -> list[CompactionRecord]:
        rows = await self._db.fetchall(
            "SELECT data FROM compactions WHERE owner = ? AND session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (self._owner, self.session.id, limit),
        )
        return [CompactionRecord.model_validate_json(r["data"]) for r in rows]

    async def update_compaction(self, record: CompactionRecord) -> None:
        await self._db.execute(
            "UPDATE compactions SET data = ? WHERE owner = ? AND session_id = ? AND id = ?",
            (compaction_json(record), self._owner, self.session.id, record.id),
        )

    async def save_session(self, session: Session) -> None:
        raise NotImplementedError


def compaction_json(record: CompactionRecord) -> str:
    """A compaction record as stored: defaults left out, so a record that uses nothing newer (undo,
    edits) reads the same to an older contextfold."""
    return record.model_dump_json(exclude_defaults=True)


def message_insert(extra: Sequence[str] = ()) -> str:
    """The INSERT of `MESSAGE_COLUMNS` rows, each followed by the `extra` columns."""
    return insert("messages", (*MESSAGE_COLUMNS, *extra))


def session_update(columns: Sequence[str] = UPDATABLE) -> str:
    return f"UPDATE sessions SET {', '.join(f'{f} = ?' for f in columns)} WHERE owner = ? AND id = ?"


__all__ = [
    "spellings",
    "PART_INSERT",
    "Db",
    "Row",
    "SQLOutputStatements",
    "SQLSessionTransaction",
    "SQLStore",
    "SQLTenant",
    "insert",
    "load_changed",
    "load_messages",
    "message_insert",
    "message_rows",
    "session_update",
    "totals",
]

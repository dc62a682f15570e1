"""The embedded session store: SQLite through aiosqlite.

WAL so readers never wait for a writer, foreign keys on, a busy timeout so a second process
waits instead of failing, and `BEGIN IMMEDIATE` for every write so a transaction takes the write
lock up front rather than failing halfway. One connection per store, used by one coroutine at a
time (an asyncio lock): a connection's open transaction is visible to every statement on it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from pydantic import TypeAdapter

from ..domain import Message, Part, Session, SystemPrompt, ToolPart, Usage, new_id
from .base import ConflictError, NotFoundError, SessionPage, StoredToolPart
from .schema import migrate

_PART = TypeAdapter(Part)
_SYSTEM = TypeAdapter(list[SystemPrompt])

BUSY_TIMEOUT_MS = 10_000


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _encode_cursor(updated_at: float, session_id: str) -> str:
    return base64.urlsafe_b64encode(_json([updated_at, session_id]).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return float(updated_at), str(session_id)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"cursor {cursor!r} is not one this server issued; pass next_cursor as returned") from exc


_SESSION_COLUMNS = (
    "id, title, model, settings, system, created_at, updated_at, message_count, "
    "tokens_stored, tokens_in_view, last_usage, last_usage_message_id, usage_baseline, metadata"
)


def _session_from_row(row: aiosqlite.Row) -> Session:
    return Session(
        id=row["id"],
        title=row["title"],
        model=row["model"],
        settings=json.loads(row["settings"]),
        system=_SYSTEM.validate_json(row["system"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=row["message_count"],
        tokens_stored=row["tokens_stored"],
        tokens_in_view=row["tokens_in_view"],
        last_usage=Usage.model_validate_json(row["last_usage"]) if row["last_usage"] else None,
        last_usage_message_id=row["last_usage_message_id"],
        usage_baseline=row["usage_baseline"],
        metadata=json.loads(row["metadata"]),
    )


def _part_json(part: Part) -> str:
    # Defaults are left out to keep rows small; the discriminator must stay.
    data = part.model_dump(mode="json", exclude={"tokens"}, exclude_defaults=True)
    data["type"] = part.type
    return _json(data)


def _load_part(data: str, tokens: int) -> Part:
    part = _PART.validate_json(data)
    part.tokens = tokens
    return part


async def _load_messages(
    db: aiosqlite.Connection, session_id: str, after_seq: int, limit: int | None
) -> list[Message]:
    async with db.execute(
        "SELECT id, seq, role, name, parent_id, summary, finish_reason, error, usage, created_at, "
        "metadata, tokens FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after_seq, -1 if limit is None else limit),
    ) as cur:
        message_rows = list(await cur.fetchall())
    if not message_rows:
        return []
    parts: dict[str, list[Part]] = {}
    async with db.execute(
        "SELECT p.message_id, p.data, p.tokens FROM parts p JOIN messages m ON m.id = p.message_id "
        "WHERE m.session_id = ? AND m.seq BETWEEN ? AND ? ORDER BY m.seq, p.idx",
        (session_id, message_rows[0]["seq"], message_rows[-1]["seq"]),
    ) as cur:
        async for row in cur:
            parts.setdefault(row["message_id"], []).append(_load_part(row["data"], row["tokens"]))
    return [
        Message(
            id=row["id"],
            session_id=session_id,
            seq=row["seq"],
            role=row["role"],
            parts=parts.get(row["id"], []),
            name=row["name"],
            parent_id=row["parent_id"],
            summary=bool(row["summary"]),
            finish_reason=row["finish_reason"],
            error=row["error"],
            usage=Usage.model_validate_json(row["usage"]) if row["usage"] else None,
            created_at=row["created_at"],
            metadata=json.loads(row["metadata"]),
            tokens=row["tokens"],
        )
        for row in message_rows
    ]


class SQLiteStore:
    """`SessionStore` on one SQLite file (or `:memory:`)."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str) -> SQLiteStore:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        conn = await aiosqlite.connect(str(path), isolation_level=None)
        conn.row_factory = aiosqlite.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute("PRAGMA foreign_keys = ON")
        await migrate(conn)
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
        async with self._lock:
            async with self._conn.execute(sql, params) as cur:
                return await cur.fetchone()

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        async with self._lock:
            async with self._conn.execute(sql, params) as cur:
                return list(await cur.fetchall())

    # -- sessions ----------------------------------------------------------------------------

    async def create_session(self, session: Session, owner: str = "") -> Session:
        now = time.time()
        session = session.model_copy(update={"created_at": now, "updated_at": now})
        async with self._transaction() as db:
            async with db.execute("SELECT owner FROM sessions WHERE id = ?", (session.id,)) as cur:
                if await cur.fetchone() is not None:
                    raise ConflictError(f"a session with id {session.id!r} already exists")
            await db.execute(
                f"INSERT INTO sessions (owner, {_SESSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (owner, *self._session_values(session)),
            )
        return session

    @staticmethod
    def _session_values(session: Session) -> tuple[Any, ...]:
        return (
            session.id,
            session.title,
            session.model,
            _json(session.settings),
            _SYSTEM.dump_json(session.system).decode(),
            session.created_at,
            session.updated_at,
            session.message_count,
            session.tokens_stored,
            session.tokens_in_view,
            session.last_usage.model_dump_json() if session.last_usage else None,
            session.last_usage_message_id,
            session.usage_baseline,
            _json(session.metadata),
        )

    async def get_session(self, session_id: str, owner: str = "") -> Session:
        row = await self._fetchone(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ? AND owner = ?", (session_id, owner)
        )
        if row is None:
            raise NotFoundError("session", session_id, "list sessions with session_list or open one with session_open")
        return _session_from_row(row)

    async def list_sessions(self, owner: str = "", *, limit: int = 50, cursor: str | None = None) -> SessionPage:
        params: list[Any] = [owner]
        where = "owner = ?"
        if cursor:
            updated_at, last_id = _decode_cursor(cursor)
            where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            params += [updated_at, updated_at, last_id]
        rows = await self._fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where} "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit + 1),
        )
        sessions = [_session_from_row(r) for r in rows[:limit]]
        more = len(rows) > limit
        next_cursor = _encode_cursor(sessions[-1].updated_at, sessions[-1].id) if more and sessions else None
        return SessionPage(sessions, next_cursor)

    async def delete_session(self, session_id: str, owner: str = "") -> None:
        async with self._transaction() as db:
            cur = await db.execute("DELETE FROM sessions WHERE id = ? AND owner = ?", (session_id, owner))
            if cur.rowcount == 0:
                raise NotFoundError("session", session_id)

    # -- messages ----------------------------------------------------------------------------

    @asynccontextmanager
    async def write(
        self, session_id: str, owner: str = "", *, create: Session | None = None
    ) -> AsyncIterator[_SQLiteTransaction]:
        async with self._transaction() as db:
            row = await self._session_row(db, session_id)
            if row is not None and row["owner"] != owner:
                # Another tenant's session reads exactly like a missing one.
                row = None
                if create is not None:
                    raise ConflictError(f"a session with id {session_id!r} already exists")
            if row is None and create is not None:
                now = time.time()
                create = create.model_copy(update={"id": session_id, "created_at": now, "updated_at": now})
                await db.execute(
                    f"INSERT INTO sessions (owner, {_SESSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (owner, *self._session_values(create)),
                )
                row = await self._session_row(db, session_id)
            if row is None:
                raise NotFoundError("session", session_id, "open it first with session_open")
            yield _SQLiteTransaction(db, _session_from_row(row), row["next_seq"])

    @staticmethod
    async def _session_row(db: aiosqlite.Connection, session_id: str) -> aiosqlite.Row | None:
        async with db.execute(
            f"SELECT {_SESSION_COLUMNS}, owner, next_seq FROM sessions WHERE id = ?", (session_id,)
        ) as cur:
            return await cur.fetchone()

    async def load_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        async with self._lock:
            return await _load_messages(self._conn, session_id, after_seq, limit)

    async def integrity_check(self) -> str:
        row = await self._fetchone("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"


class _SQLiteTransaction:
    def __init__(self, db: aiosqlite.Connection, session: Session, next_seq: int) -> None:
        self._db = db
        self.session = session
        self._next_seq = next_seq

    async def messages(self) -> list[Message]:
        return await _load_messages(self._db, self.session.id, 0, None)

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
                f"WHERE p.session_id = ? AND p.call_id IN ({marks}) AND p.state IN ('pending', 'running') "
                f"ORDER BY m.seq, p.idx",
                (self.session.id, *chunk),
            ) as cur:
                async for row in cur:
                    # Later rows win: a reused call id answers its most recent call.
                    part = _load_part(row["data"], row["tokens"])
                    assert isinstance(part, ToolPart)
                    found[row["call_id"]] = StoredToolPart(row["message_id"], row["idx"], part)
        return found

    async def update_part(self, stored: StoredToolPart, part: ToolPart) -> None:
        delta = part.tokens - stored.part.tokens
        await self._db.execute(
            "UPDATE parts SET data = ?, state = ?, tokens = ? WHERE message_id = ? AND idx = ?",
            (_part_json(part), part.state, part.tokens, stored.message_id, stored.index),
        )
        if delta:
            await self._db.execute(
                "UPDATE messages SET tokens = tokens + ? WHERE id = ?", (delta, stored.message_id)
            )

    async def insert_messages(self, messages: Sequence[Message]) -> list[Message]:
        now = time.time()
        stored: list[Message] = []
        message_rows: list[tuple[Any, ...]] = []
        part_rows: list[tuple[Any, ...]] = []
        for message in messages:
            seq = self._next_seq
            self._next_seq += 1
            message = message.model_copy(
                update={
                    "id": message.id or new_id("msg"),
                    "session_id": self.session.id,
                    "seq": seq,
                    "created_at": message.created_at or now,
                }
            )
            message_rows.append(
                (
                    message.id,
                    self.session.id,
                    seq,
                    message.role,
                    message.name,
                    message.parent_id,
                    int(message.summary),
                    message.finish_reason,
                    message.error,
                    message.usage.model_dump_json() if message.usage else None,
                    message.created_at,
                    _json(message.metadata),
                    message.tokens,
                )
            )
            for index, part in enumerate(message.parts):
                is_tool = isinstance(part, ToolPart)
                part_rows.append(
                    (
                        message.id,
                        index,
                        self.session.id,
                        part.type,
                        part.call_id if is_tool else None,
                        part.state if is_tool else None,
                        _part_json(part),
                        part.tokens,
                    )
                )
            stored.append(message)
        await self._db.executemany(
            "INSERT INTO messages (id, session_id, seq, role, name, parent_id, summary, finish_reason, "
            "error, usage, created_at, metadata, tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            message_rows,
        )
        await self._db.executemany(
            "INSERT INTO parts (message_id, idx, session_id, type, call_id, state, data, tokens) "
            "VALUES (?,?,?,?,?,?,?,?)",
            part_rows,
        )
        await self._db.execute("UPDATE sessions SET next_seq = ? WHERE id = ?", (self._next_seq, self.session.id))
        return stored

    async def replace_counts(self, messages: Sequence[Message]) -> None:
        """Store new token counts for already-stored messages (after a tokenizer change)."""
        await self._db.executemany(
            "UPDATE messages SET tokens = ? WHERE id = ?", [(m.tokens, m.id) for m in messages]
        )
        await self._db.executemany(
            "UPDATE parts SET tokens = ? WHERE message_id = ? AND idx = ?",
            [(p.tokens, m.id, i) for m in messages for i, p in enumerate(m.parts)],
        )

    async def save_session(self, session: Session) -> None:
        session = session.model_copy(update={"updated_at": time.time()})
        await self._db.execute(
            "UPDATE sessions SET title = ?, model = ?, settings = ?, system = ?, updated_at = ?, "
            "message_count = ?, tokens_stored = ?, tokens_in_view = ?, last_usage = ?, "
            "last_usage_message_id = ?, usage_baseline = ?, metadata = ? WHERE id = ?",
            (
                session.title,
                session.model,
                _json(session.settings),
                _SYSTEM.dump_json(session.system).decode(),
                session.updated_at,
                session.message_count,
                session.tokens_stored,
                session.tokens_in_view,
                session.last_usage.model_dump_json() if session.last_usage else None,
                session.last_usage_message_id,
                session.usage_baseline,
                _json(session.metadata),
                session.id,
            ),
        )
        self.session = session

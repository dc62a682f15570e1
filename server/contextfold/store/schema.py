"""Schema migrations, tracked with `PRAGMA user_version`.

Each entry upgrades the database from version N to N + 1 and runs in its own transaction.
Append new migrations; never edit a released one.
"""

from __future__ import annotations

import aiosqlite

MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, messages, parts
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL DEFAULT '',
        title TEXT,
        model TEXT NOT NULL,
        settings TEXT NOT NULL DEFAULT '{}',
        system TEXT NOT NULL DEFAULT '[]',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        next_seq INTEGER NOT NULL DEFAULT 1,
        message_count INTEGER NOT NULL DEFAULT 0,
        tokens_stored INTEGER NOT NULL DEFAULT 0,
        tokens_in_view INTEGER NOT NULL DEFAULT 0,
        last_usage TEXT,
        last_usage_message_id TEXT,
        usage_baseline INTEGER NOT NULL DEFAULT 0,
        metadata TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX sessions_by_owner ON sessions (owner, updated_at DESC, id DESC);

    CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        name TEXT,
        parent_id TEXT,
        summary INTEGER NOT NULL DEFAULT 0,
        finish_reason TEXT,
        error TEXT,
        usage TEXT,
        created_at REAL NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        tokens INTEGER NOT NULL DEFAULT 0,
        UNIQUE (session_id, seq)
    );

    CREATE TABLE parts (
        message_id TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        type TEXT NOT NULL,
        call_id TEXT,
        state TEXT,
        data TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (message_id, idx)
    );
    CREATE INDEX parts_by_call ON parts (session_id, call_id) WHERE call_id IS NOT NULL;
    """,
    # 2: the view (turn starts, in-view counts, compaction anchor) and spilled outputs
    """
    ALTER TABLE messages ADD COLUMN turn_start INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN view_tokens INTEGER;
    UPDATE messages SET turn_start = 1 WHERE role = 'user' AND NOT EXISTS (
        SELECT 1 FROM parts p WHERE p.message_id = messages.id AND p.type = 'compaction');
    CREATE INDEX messages_turns ON messages (session_id, turn_start, seq);
    ALTER TABLE sessions ADD COLUMN view TEXT;

    CREATE TABLE outputs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        owner TEXT NOT NULL DEFAULT '',
        digest TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        lines INTEGER NOT NULL,
        tool TEXT,
        call_id TEXT,
        created_at REAL NOT NULL,
        last_read_at REAL
    );
    CREATE INDEX outputs_by_digest ON outputs (digest);
    CREATE INDEX outputs_by_created ON outputs (created_at);
    """,
    # 3: the compaction history (audit log and source of metrics)
    """
    CREATE TABLE compactions (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        created_at REAL NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX compactions_by_session ON compactions (session_id, created_at);
    """,
    # 4: messages a removal strategy took out of the view (kept in the store)
    """
    ALTER TABLE messages ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer contextfold; refusing beats corrupting it."""


async def migrate(conn: aiosqlite.Connection) -> int:
    """Bring the database to `SCHEMA_VERSION`; returns the version it started at."""
    async with conn.execute("PRAGMA user_version") as cur:
        row = await cur.fetchone()
    start = int(row[0]) if row else 0
    if start > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"the database is at schema version {start}, newer than this contextfold ({SCHEMA_VERSION}); "
            "upgrade contextfold"
        )
    for version in range(start, SCHEMA_VERSION):
        # executescript would COMMIT on its own; run the statements inside our transaction instead.
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[version]):
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")
    return start


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]

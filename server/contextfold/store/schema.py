"""Schema migrations, tracked with `PRAGMA user_version`.

Each entry upgrades the database from version N to N + 1 and runs in its own transaction.
Append new migrations; never edit a released one.
"""

from __future__ import annotations

import sqlite3

import aiosqlite

SEARCH_TEXT = (
    "CASE {row}type WHEN 'text' THEN json_extract({row}data, '$.text') "
    "WHEN 'reasoning' THEN json_extract({row}data, '$.text') "
    "WHEN 'tool' THEN COALESCE(json_extract({row}data, '$.name'), '') || char(10) "
    "|| COALESCE(json_extract({row}data, '$.input'), '') || char(10) "
    "|| COALESCE(json_extract({row}data, '$.output'), '') || char(10) "
    "|| COALESCE(json_extract({row}data, '$.error'), '') "
    "WHEN 'file' THEN json_extract({row}data, '$.filename') END"
)
"""A part's searchable text, from its stored JSON (`{row}` is "", "NEW." or "OLD."). Indexing
and un-indexing compute it the same way, as an external-content FTS5 index requires."""
_INDEXED = (
    "({row}.rowid > (SELECT backfill_end FROM search_backfill WHERE id = 1) "
    "OR {row}.rowid <= (SELECT indexed_upto FROM search_backfill WHERE id = 1))"
)
"""Whether the part is in the search index already (see migration 9)."""
_INDEXED_NOW = (
    "(SELECT {row}.rowid <= indexed_upto OR ({row}.rowid > backfill_end AND {row}.rowid <= recent_upto) "
    "FROM search_backfill WHERE id = 1)"
)
"""Whether the part is in the search index already (see migration 10)."""


def _search_triggers(indexed: str) -> str:
    """The triggers keeping the search index in step with `parts`, for the parts `indexed` (a
    condition on `{row}`) says the index holds: migrations 9 and 10 differ only in that."""
    return _SEARCH_TRIGGERS.format(
        new_body=SEARCH_TEXT.format(row="NEW."),
        old_body=SEARCH_TEXT.format(row="OLD."),
        new_indexed=indexed.format(row="NEW"),
        old_indexed=indexed.format(row="OLD"),
    )


_SEARCH_TRIGGERS = """\
    CREATE TRIGGER search_on_insert AFTER INSERT ON parts WHEN {new_indexed}
    BEGIN
        INSERT INTO search_index (rowid, body) VALUES (NEW.rowid, {new_body});
    END;
    CREATE TRIGGER search_on_delete AFTER DELETE ON parts WHEN {old_indexed}
    BEGIN
        INSERT INTO search_index (search_index, rowid, body) VALUES ('delete', OLD.rowid, {old_body});
    END;
    CREATE TRIGGER search_on_update AFTER UPDATE OF type, data ON parts WHEN {old_indexed}
    BEGIN
        INSERT INTO search_index (search_index, rowid, body) VALUES ('delete', OLD.rowid, {old_body});
        INSERT INTO search_index (rowid, body) VALUES (NEW.rowid, {new_body});
    END;
"""


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
    # 5: session ids are per tenant: sessions keyed by (owner, id), and every child row carries
    # its owner, so two tenants may each own a session "x" and neither can learn the other's ids.
    # SQLite cannot change a primary key in place: build the new tables, copy, drop the old ones
    # children first (so no cascade fires), then rename. Renaming rewrites the references of the
    # new children to the final names. Also: why each spilled output left (read_output says
    # "evicted" or "expired" instead of guessing), and an index for the latest usage reports.
    """
    CREATE TABLE sessions_v5 (
        owner TEXT NOT NULL,
        id TEXT NOT NULL,
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
        metadata TEXT NOT NULL DEFAULT '{}',
        view TEXT,
        PRIMARY KEY (owner, id)
    );
    INSERT INTO sessions_v5 (owner, id, title, model, settings, system, created_at, updated_at, next_seq,
        message_count, tokens_stored, tokens_in_view, last_usage, last_usage_message_id, usage_baseline,
        metadata, view)
    SELECT owner, id, title, model, settings, system, created_at, updated_at, next_seq, message_count,
        tokens_stored, tokens_in_view, last_usage, last_usage_message_id, usage_baseline, metadata, view
    FROM sessions;

    CREATE TABLE messages_v5 (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        session_id TEXT NOT NULL,
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
        turn_start INTEGER NOT NULL DEFAULT 0,
        view_tokens INTEGER,
        hidden INTEGER NOT NULL DEFAULT 0,
        FOREIGN KEY (owner, session_id) REFERENCES sessions_v5 (owner, id) ON DELETE CASCADE,
        UNIQUE (owner, session_id, seq)
    );
    INSERT INTO messages_v5 (id, owner, session_id, seq, role, name, parent_id, summary, finish_reason, error,
        usage, created_at, metadata, tokens, turn_start, view_tokens, hidden)
    SELECT m.id, s.owner, m.session_id, m.seq, m.role, m.name, m.parent_id, m.summary, m.finish_reason,
        m.error, m.usage, m.created_at, m.metadata, m.tokens, m.turn_start, m.view_tokens, m.hidden
    FROM messages m JOIN sessions s ON s.id = m.session_id;

    CREATE TABLE parts_v5 (
        message_id TEXT NOT NULL REFERENCES messages_v5 (id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        owner TEXT NOT NULL,
        session_id TEXT NOT NULL,
        type TEXT NOT NULL,
        call_id TEXT,
        state TEXT,
        data TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (message_id, idx)
    );
    INSERT INTO parts_v5 (message_id, idx, owner, session_id, type, call_id, state, data, tokens)
    SELECT p.message_id, p.idx, m.owner, p.session_id, p.type, p.call_id, p.state, p.data, p.tokens
    FROM parts p JOIN messages_v5 m ON m.id = p.message_id;

    CREATE TABLE outputs_v5 (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        digest TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        lines INTEGER NOT NULL,
        tool TEXT,
        call_id TEXT,
        created_at REAL NOT NULL,
        last_read_at REAL,
        FOREIGN KEY (owner, session_id) REFERENCES sessions_v5 (owner, id) ON DELETE CASCADE
    );
    INSERT INTO outputs_v5 (id, session_id, owner, digest, bytes, lines, tool, call_id, created_at, last_read_at)
    SELECT o.id, o.session_id, s.owner, o.digest, o.bytes, o.lines, o.tool, o.call_id, o.created_at,
        o.last_read_at
    FROM outputs o JOIN sessions s ON s.id = o.session_id;

    CREATE TABLE compactions_v5 (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        session_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        data TEXT NOT NULL,
        FOREIGN KEY (owner, session_id) REFERENCES sessions_v5 (owner, id) ON DELETE CASCADE
    );
    INSERT INTO compactions_v5 (id, owner, session_id, created_at, data)
    SELECT c.id, s.owner, c.session_id, c.created_at, c.data
    FROM compactions c JOIN sessions s ON s.id = c.session_id;

    DROP TABLE parts;
    DROP TABLE compactions;
    DROP TABLE outputs;
    DROP TABLE messages;
    DROP TABLE sessions;
    ALTER TABLE sessions_v5 RENAME TO sessions;
    ALTER TABLE messages_v5 RENAME TO messages;
    ALTER TABLE parts_v5 RENAME TO parts;
    ALTER TABLE outputs_v5 RENAME TO outputs;
    ALTER TABLE compactions_v5 RENAME TO compactions;

    CREATE INDEX sessions_by_owner ON sessions (owner, updated_at DESC, id DESC);
    CREATE INDEX messages_turns ON messages (owner, session_id, turn_start, seq);
    CREATE INDEX messages_with_usage ON messages (owner, session_id, seq) WHERE usage IS NOT NULL;
    CREATE INDEX parts_by_call ON parts (owner, session_id, call_id) WHERE call_id IS NOT NULL;
    CREATE INDEX outputs_by_digest ON outputs (digest);
    CREATE INDEX outputs_by_created ON outputs (created_at);
    CREATE INDEX outputs_by_session ON outputs (owner, session_id);
    CREATE INDEX compactions_by_session ON compactions (owner, session_id, created_at);

    CREATE TABLE output_tombstones (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        reason TEXT NOT NULL CHECK (reason IN ('expired', 'evicted')),
        removed_at REAL NOT NULL
    );
    CREATE INDEX output_tombstones_by_time ON output_tombstones (removed_at);
    """,
    # 6: the spill store's size kept by the database itself. Each content file is stored once, so
    # a content's bytes count when its first output row arrives and stop counting when its last
    # row goes (cascades from a deleted session included). Every process reads one row instead
    # of summing the outputs table (52 ms at 100,000 outputs, twice per spill).
    """
    CREATE TABLE spill_usage (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        bytes INTEGER NOT NULL
    );
    INSERT INTO spill_usage (id, bytes)
    SELECT 1, COALESCE(SUM(bytes), 0) FROM (SELECT MAX(bytes) AS bytes FROM outputs GROUP BY digest);
    CREATE TRIGGER spill_usage_on_insert AFTER INSERT ON outputs
    WHEN NOT EXISTS (SELECT 1 FROM outputs WHERE digest = NEW.digest AND id != NEW.id)
    BEGIN
        UPDATE spill_usage SET bytes = bytes + NEW.bytes WHERE id = 1;
    END;
    CREATE TRIGGER spill_usage_on_delete AFTER DELETE ON outputs
    WHEN NOT EXISTS (SELECT 1 FROM outputs WHERE digest = OLD.digest)
    BEGIN
        UPDATE spill_usage SET bytes = bytes - OLD.bytes WHERE id = 1;
    END;
    """,
    # 7: revisions, so a reader can keep a session's view and read only what changed. A write
    # transaction bumps its session's revision first (the store does); these triggers stamp every
    # message it inserts or changes, a part included, with that revision, and a deleted message
    # marks the revision as one a kept copy cannot follow.
    """
    ALTER TABLE sessions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN reset_revision INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX messages_by_rev ON messages (owner, session_id, rev);
    CREATE TRIGGER messages_stamp_insert AFTER INSERT ON messages
    BEGIN
        UPDATE messages SET rev = (SELECT revision FROM sessions WHERE owner = NEW.owner AND id = NEW.session_id)
        WHERE id = NEW.id;
    END;
    CREATE TRIGGER messages_stamp_update AFTER UPDATE ON messages WHEN NEW.rev = OLD.rev
    BEGIN
        UPDATE messages SET rev = (SELECT revision FROM sessions WHERE owner = NEW.owner AND id = NEW.session_id)
        WHERE id = NEW.id;
    END;
    CREATE TRIGGER messages_stamp_delete AFTER DELETE ON messages
    BEGIN
        UPDATE sessions SET reset_revision = revision WHERE owner = OLD.owner AND id = OLD.session_id;
    END;
    CREATE TRIGGER parts_stamp_insert AFTER INSERT ON parts
    BEGIN
        UPDATE messages SET rev = (SELECT revision FROM sessions WHERE owner = NEW.owner AND id = NEW.session_id)
        WHERE id = NEW.message_id;
    END;
    CREATE TRIGGER parts_stamp_update AFTER UPDATE ON parts
    BEGIN
        UPDATE messages SET rev = (SELECT revision FROM sessions WHERE owner = NEW.owner AND id = NEW.session_id)
        WHERE id = NEW.message_id;
    END;
    CREATE TRIGGER parts_stamp_delete AFTER DELETE ON parts
    BEGIN
        UPDATE messages SET rev = (SELECT revision FROM sessions WHERE owner = OLD.owner AND id = OLD.session_id)
        WHERE id = OLD.message_id;
    END;
    """,
    # 8: what `status` reads stays the same size however long the history. A session's compaction
    # count and tokens freed live on its row, kept by triggers on `compactions` (status summed
    # every record: 442 of them at 100,000 stored messages); and an index of the messages not
    # hidden lets the view's rows be read without stepping over every message a removal strategy
    # hid (17 ms a status, 42 ms an append at 100,000 stored messages, most of them hidden; 4 and 5
    # ms with it, as at 1,000).
    """
    ALTER TABLE sessions ADD COLUMN compaction_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN compaction_tokens_freed INTEGER NOT NULL DEFAULT 0;
    UPDATE sessions SET
        compaction_count = (SELECT COUNT(*) FROM compactions c WHERE c.owner = sessions.owner
            AND c.session_id = sessions.id),
        compaction_tokens_freed = (SELECT COALESCE(SUM(json_extract(c.data, '$.tokens_before')
            - json_extract(c.data, '$.tokens_after')), 0) FROM compactions c
            WHERE c.owner = sessions.owner AND c.session_id = sessions.id);
    CREATE TRIGGER compaction_totals_on_insert AFTER INSERT ON compactions
    BEGIN
        UPDATE sessions SET compaction_count = compaction_count + 1,
            compaction_tokens_freed = compaction_tokens_freed
                + json_extract(NEW.data, '$.tokens_before') - json_extract(NEW.data, '$.tokens_after')
        WHERE owner = NEW.owner AND id = NEW.session_id;
    END;
    CREATE TRIGGER compaction_totals_on_delete AFTER DELETE ON compactions
    BEGIN
        UPDATE sessions SET compaction_count = compaction_count - 1,
            compaction_tokens_freed = compaction_tokens_freed
                - json_extract(OLD.data, '$.tokens_before') + json_extract(OLD.data, '$.tokens_after')
        WHERE owner = OLD.owner AND id = OLD.session_id;
    END;
    CREATE TRIGGER compaction_totals_on_update AFTER UPDATE ON compactions
    BEGIN
        UPDATE sessions SET compaction_count = compaction_count - 1,
            compaction_tokens_freed = compaction_tokens_freed
                - json_extract(OLD.data, '$.tokens_before') + json_extract(OLD.data, '$.tokens_after')
        WHERE owner = OLD.owner AND id = OLD.session_id;
        UPDATE sessions SET compaction_count = compaction_count + 1,
            compaction_tokens_freed = compaction_tokens_freed
                + json_extract(NEW.data, '$.tokens_before') - json_extract(NEW.data, '$.tokens_after')
        WHERE owner = NEW.owner AND id = NEW.session_id;
    END;
    CREATE INDEX messages_in_view ON messages (owner, session_id, seq) WHERE hidden = 0;
    """,
    # 9: full-text search over every stored part (`store.search`). An FTS5 index whose text is
    # read from `search_source`, a view computing each part's searchable text from its JSON (a
    # message's text, a tool call's name, input, output and error, a reasoning's text, a file's
    # name): nothing is stored twice. Triggers keep it in step with every write, in the write's
    # own transaction. The tokenizer is `trigram`: any substring of three characters or more
    # matches, so `snake_case`, `CamelCase`, `path/to/file.py`, `E1101` and CJK text (which has
    # no spaces between words) are found by any piece of them, whatever the case; BM25 ranks.
    # Parts stored before this version are indexed afterwards in short batches
    # (`search_backfill`: parts up to `indexed_upto`, and every part after `backfill_end`, are in
    # the index), so a large home upgrades without holding the write lock for minutes; the
    # triggers touch the index only for parts it holds. And an index of each session's summaries,
    # found without reading its other messages (a hit names the summary bullets citing it).
    """
    CREATE TABLE search_backfill (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        indexed_upto INTEGER NOT NULL,
        backfill_end INTEGER NOT NULL
    );
    INSERT INTO search_backfill (id, indexed_upto, backfill_end) SELECT 1, 0, COALESCE(MAX(rowid), 0) FROM parts;
    CREATE VIEW search_source AS SELECT rowid AS part_rowid, {body} AS body FROM parts;
    CREATE VIRTUAL TABLE search_index USING fts5(
        body, content = 'search_source', content_rowid = 'part_rowid', tokenize = 'trigram'
    );
    CREATE INDEX messages_summaries ON messages (owner, session_id, seq) WHERE summary = 1;
{triggers}    """.format(body=SEARCH_TEXT.format(row=""), triggers=_search_triggers(_INDEXED)),
    # 10: appends no longer index their parts one by one. An FTS5 write transaction flushes what
    # it indexed as a new segment and pays for merging segments: per one-message append that
    # cost 18 to 47 % of the append rate (measured side by side, and in separate runs). New
    # parts now wait past `recent_upto` and are indexed in batches, in the transaction of the
    # append that finds `search_index_lag` or more of them waiting, and by every search before it
    # reads the index (`SQLiteStore.index_step`), so a search never misses a stored message. Indexed now are
    # the parts up to `indexed_upto` and those after `backfill_end` up to `recent_upto` (the
    # older home's backfill of migration 9 goes on as it was). A part inserted at or below the
    # watermark (SQLite reuses the rowid of a deleted last row) is indexed at once; deleting or
    # changing a part not yet indexed writes nothing to the index.
    f"""
    ALTER TABLE search_backfill ADD COLUMN recent_upto INTEGER NOT NULL DEFAULT 0;
    UPDATE search_backfill SET recent_upto = MAX(backfill_end, (SELECT COALESCE(MAX(rowid), 0) FROM parts));
    DROP TRIGGER search_on_insert;
    DROP TRIGGER search_on_delete;
    DROP TRIGGER search_on_update;
{_search_triggers(_INDEXED_NOW)}    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer contextfold; refusing beats corrupting it."""


async def migrate(conn: aiosqlite.Connection) -> int:
    """Bring the database to `SCHEMA_VERSION`; returns the version it started at.

    Several processes may open one database at the same moment (every agent window starts its
    own server). Each step therefore takes the write lock first and reads `user_version` again
    inside that transaction: a step another process applied meanwhile is skipped, never re-run.
    """
    start = await _version(conn)
    _check_not_newer(start)
    for version in range(start, SCHEMA_VERSION):
        # executescript would COMMIT on its own; run the statements inside our transaction instead.
        await conn.execute("BEGIN IMMEDIATE")
        try:
            current = await _version(conn)
            _check_not_newer(current)
            if current <= version:
                for statement in statements(MIGRATIONS[version]):
                    await conn.execute(statement)
                await conn.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")
    return start


async def _version(conn: aiosqlite.Connection) -> int:
    async with conn.execute("PRAGMA user_version") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def _check_not_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"the database is at schema version {version}, newer than this contextfold ({SCHEMA_VERSION}); "
            "upgrade contextfold"
        )


def statements(script: str) -> list[str]:
    """The script's statements, one by one (a trigger's body keeps its own semicolons)."""
    statements: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                statements.append(pending.strip().rstrip(";").strip())
            pending = ""
    if pending.strip(" \n;"):
        statements.append(pending.strip().rstrip(";").strip())
    return statements

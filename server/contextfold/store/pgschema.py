"""PostgreSQL schema migrations, safe when several replicas start at once.

The schema is the SQLite one (`schema.py`) as it stands at its version 8, in PostgreSQL's types,
plus the blob tables of the spill store kept in the database (`pgblobs`). What SQLite keeps with
triggers the PostgreSQL store mostly writes itself (revision stamps, compaction totals: every write
that changes them goes through one transaction of the store); only the spill store's size, which
cascading deletes also change, is kept by a trigger.

Versions are recorded in `contextfold_schema`. Each replica that opens the database takes a
session-level advisory lock before reading the version, applies the missing steps (each in its
own transaction) and releases it: a second replica starting at the same moment waits, then finds
nothing left to do. Append new migrations; never edit a released one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

MIGRATION_LOCK = 0x636F_6E74_6578_0001
"""Advisory lock held while migrating (any bigint nobody else uses; 'contex' in hex)."""
SPILL_LOCK = 0x636F_6E74_6578_0002
"""Advisory transaction lock every transaction that adds or removes output rows takes first: the
spill store's write lock (`store.base.OutputTransaction`), shared by every replica."""

MIGRATIONS: tuple[str, ...] = (
    # 1: everything SQLite has at its schema 8, and the blobs of the spill store.
    """
    CREATE TABLE sessions (
        owner text NOT NULL,
        id text NOT NULL,
        title text,
        model text NOT NULL,
        settings text NOT NULL DEFAULT '{}',
        system text NOT NULL DEFAULT '[]',
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        next_seq bigint NOT NULL DEFAULT 1,
        message_count bigint NOT NULL DEFAULT 0,
        tokens_stored bigint NOT NULL DEFAULT 0,
        tokens_in_view bigint NOT NULL DEFAULT 0,
        last_usage text,
        last_usage_message_id text,
        usage_baseline bigint NOT NULL DEFAULT 0,
        metadata text NOT NULL DEFAULT '{}',
        view text,
        revision bigint NOT NULL DEFAULT 0,
        reset_revision bigint NOT NULL DEFAULT 0,
        compaction_count bigint NOT NULL DEFAULT 0,
        compaction_tokens_freed bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (owner, id)
    );
    CREATE INDEX sessions_by_owner ON sessions (owner, updated_at DESC, id DESC);

    CREATE TABLE messages (
        id text PRIMARY KEY,
        owner text NOT NULL,
        session_id text NOT NULL,
        seq bigint NOT NULL,
        role text NOT NULL CHECK (role IN ('user', 'assistant')),
        name text,
        parent_id text,
        summary boolean NOT NULL DEFAULT false,
        finish_reason text,
        error text,
        usage text,
        created_at double precision NOT NULL,
        metadata text NOT NULL DEFAULT '{}',
        tokens bigint NOT NULL DEFAULT 0,
        turn_start boolean NOT NULL DEFAULT false,
        view_tokens bigint,
        hidden boolean NOT NULL DEFAULT false,
        rev bigint NOT NULL DEFAULT 0,
        FOREIGN KEY (owner, session_id) REFERENCES sessions (owner, id) ON DELETE CASCADE,
        UNIQUE (owner, session_id, seq)
    );
    CREATE INDEX messages_by_rev ON messages (owner, session_id, rev);
    CREATE INDEX messages_in_view ON messages (owner, session_id, seq) WHERE NOT hidden;
    CREATE INDEX messages_with_usage ON messages (owner, session_id, seq) WHERE usage IS NOT NULL;

    CREATE TABLE parts (
        message_id text NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        idx integer NOT NULL,
        owner text NOT NULL,
        session_id text NOT NULL,
        type text NOT NULL,
        call_id text,
        state text,
        data text NOT NULL,
        tokens bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (message_id, idx)
    );
    CREATE INDEX parts_by_call ON parts (owner, session_id, call_id) WHERE call_id IS NOT NULL;

    CREATE TABLE compactions (
        id text PRIMARY KEY,
        owner text NOT NULL,
        session_id text NOT NULL,
        created_at double precision NOT NULL,
        data text NOT NULL,
        FOREIGN KEY (owner, session_id) REFERENCES sessions (owner, id) ON DELETE CASCADE
    );
    CREATE INDEX compactions_by_session ON compactions (owner, session_id, created_at);

    CREATE TABLE outputs (
        id text PRIMARY KEY,
        session_id text NOT NULL,
        owner text NOT NULL,
        digest text NOT NULL,
        bytes bigint NOT NULL,
        lines bigint NOT NULL,
        tool text,
        call_id text,
        created_at double precision NOT NULL,
        last_read_at double precision,
        FOREIGN KEY (owner, session_id) REFERENCES sessions (owner, id) ON DELETE CASCADE
    );
    CREATE INDEX outputs_by_digest ON outputs (digest);
    CREATE INDEX outputs_by_created ON outputs (created_at);
    CREATE INDEX outputs_by_session ON outputs (owner, session_id);

    CREATE TABLE output_tombstones (
        id text PRIMARY KEY,
        owner text NOT NULL,
        reason text NOT NULL CHECK (reason IN ('expired', 'evicted')),
        removed_at double precision NOT NULL
    );
    CREATE INDEX output_tombstones_by_time ON output_tombstones (removed_at);

    -- The spill quota counts each distinct content once: a content counts from its first output
    -- row to its last, cascades from a deleted session included. Row triggers keep a reference
    -- count per content and the total in one row, so every replica reads one row.
    CREATE TABLE spill_contents (
        digest text PRIMARY KEY,
        bytes bigint NOT NULL,
        refs bigint NOT NULL
    );
    CREATE TABLE spill_usage (
        id integer PRIMARY KEY CHECK (id = 1),
        bytes bigint NOT NULL
    );
    INSERT INTO spill_usage (id, bytes) VALUES (1, 0);
    CREATE FUNCTION contextfold_spill_usage() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        left_refs bigint;
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO spill_contents (digest, bytes, refs) VALUES (NEW.digest, NEW.bytes, 1)
            ON CONFLICT (digest) DO UPDATE SET refs = spill_contents.refs + 1
            RETURNING refs INTO left_refs;
            IF left_refs = 1 THEN
                UPDATE spill_usage SET bytes = bytes + NEW.bytes WHERE id = 1;
            END IF;
            RETURN NEW;
        END IF;
        UPDATE spill_contents SET refs = refs - 1 WHERE digest = OLD.digest RETURNING refs INTO left_refs;
        IF left_refs = 0 THEN
            DELETE FROM spill_contents WHERE digest = OLD.digest;
            UPDATE spill_usage SET bytes = bytes - OLD.bytes WHERE id = 1;
        END IF;
        RETURN OLD;
    END
    $$;
    CREATE TRIGGER outputs_spill_usage AFTER INSERT OR DELETE ON outputs
        FOR EACH ROW EXECUTE FUNCTION contextfold_spill_usage();

    -- Spilled content (pgblobs): one row per blob with its line index, its bytes in chunks.
    -- A blob's id is its version: content stored again after a delete gets a new one.
    CREATE SEQUENCE blob_ids;
    CREATE TABLE blobs (
        digest text PRIMARY KEY,
        blob_id bigint NOT NULL UNIQUE,
        size bigint NOT NULL,
        lines bigint NOT NULL,
        chunk_size integer NOT NULL,
        line_index bytea,
        modified double precision NOT NULL
    );
    CREATE TABLE blob_chunks (
        blob_id bigint NOT NULL,
        n integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (blob_id, n)
    );
    -- Chunks are read whole and are mostly already dense or short-lived: no compression pass.
    ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

    -- `contextfold migrate --to`: which sessions of a SQLite home are copied already.
    CREATE TABLE migrated_sessions (
        owner text NOT NULL,
        id text NOT NULL,
        source text NOT NULL,
        copied_at double precision NOT NULL,
        PRIMARY KEY (owner, id)
    );
    """,
    # 2: full-text search (`store.search`). pg_trgm's GIN index over each part's searchable text
    # (the SQLite schema's `search_source`, lower-cased), an expression index PostgreSQL keeps in
    # step with every write. Trigrams, not a `tsvector`: the text parser splits `snake_case` and
    # keeps `path/to/file.py` whole, so a piece of an identifier or a path would not be found,
    # where a trigram index finds any substring of three characters or more, as SQLite's FTS5
    # trigram tokenizer does: both backends answer the same queries the same way. (In a cluster
    # whose locale is C, pg_trgm makes no trigrams of non-ASCII letters: a CJK-only query is still
    # answered, by reading the tenant's parts instead of the index.)
    """
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE FUNCTION contextfold_search_text(kind text, data text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT lower(CASE kind
            WHEN 'text' THEN j ->> 'text'
            WHEN 'reasoning' THEN j ->> 'text'
            WHEN 'tool' THEN concat_ws(chr(10), j ->> 'name', j ->> 'input', j ->> 'output', j ->> 'error')
            WHEN 'file' THEN j ->> 'filename'
        END)
        FROM (SELECT replace(data, '\\u0000', '\\ufffd')::jsonb AS j) AS parsed
    $$;
    CREATE INDEX parts_search ON parts USING gin (contextfold_search_text(type, data) gin_trgm_ops);
    CREATE INDEX messages_summaries ON messages (owner, session_id, seq) WHERE summary;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


class PgSchemaTooNewError(RuntimeError):
    """The database was migrated by a newer contextfold; refusing beats corrupting it."""


LONG_STEPS = {2: "building the search index"}
"""The migrations that take a while on a large database (by the version they make), and what they
do: `migrate` says when one starts and ends, and how far its index build has come."""
PROGRESS_SECONDS = 2.0
"""How often a long step's progress is read (`pg_stat_progress_create_index`) and reported."""


def migrate(
    conn: psycopg.Connection,
    *,
    progress: Callable[[str], None] | None = None,
    watch: Callable[[], psycopg.Connection] | None = None,
    every: float = PROGRESS_SECONDS,
) -> int:
    """Bring the database behind `conn` (autocommit) to `SCHEMA_VERSION`; returns the version it
    started at. Safe to run from any number of replicas at once (see the module docstring).

    `progress` hears, one line each, that this replica waits for another one's migration, and when
    a step of `LONG_STEPS` starts and ends; given `watch` (a new autocommit connection to the same
    database), also how far that step's index build has come, every `every` seconds."""
    got = conn.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK,)).fetchone()
    if not got or not got[0]:
        if progress is not None:
            progress("waiting for another process that is migrating the database")
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS contextfold_schema (id integer PRIMARY KEY CHECK (id = 1), "
            "version integer NOT NULL)"
        )
        row = conn.execute("SELECT version FROM contextfold_schema WHERE id = 1").fetchone()
        start = int(row[0]) if row else 0
        _check_not_newer(start)
        for version in range(start, SCHEMA_VERSION):
            long = LONG_STEPS.get(version + 1) if progress is not None else None
            if long is not None and progress is not None:
                row = conn.execute("SELECT count(*) FROM parts").fetchone()
                progress(
                    f"schema {version + 1}: {long} over {int(row[0]) if row else 0:,} stored parts; other "
                    "processes opening this database wait until it is done"
                )
            started = time.monotonic()
            watcher = _Watcher(watch, conn.info.backend_pid, progress, every) if long and watch and progress else None
            with conn.transaction():
                try:
                    conn.execute(MIGRATIONS[version])
                finally:
                    if watcher is not None:
                        watcher.stop()
                conn.execute(
                    "INSERT INTO contextfold_schema (id, version) VALUES (1, %s) "
                    "ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version",
                    (version + 1,),
                )
            if long is not None and progress is not None:
                progress(f"schema {version + 1}: {long} done in {time.monotonic() - started:,.1f} s")
        return start
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


class _Watcher:
    """Reads how far the migrating connection's index build has come (`pg_stat_progress_create_index`,
    from its own connection) every `every` seconds until stopped, reporting each change."""

    def __init__(
        self, connect: Callable[[], psycopg.Connection], pid: int, progress: Callable[[str], None], every: float
    ) -> None:
        self._connect, self._pid, self._progress, self._every = connect, pid, progress, every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="contextfold-migration-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=max(5.0, self._every * 2))

    def _run(self) -> None:
        said = ""
        try:
            with self._connect() as watch:
                while not self._done.wait(self._every):
                    row = watch.execute(
                        "SELECT phase, blocks_done, blocks_total, tuples_done, tuples_total "
                        "FROM pg_stat_progress_create_index WHERE pid = %s",
                        (self._pid,),
                    ).fetchone()
                    line = _index_progress(row) if row else ""
                    if line and line != said:
                        self._progress(line)
                        said = line
        except Exception as exc:  # progress is a courtesy: the migration goes on without it
            self._progress(f"could not read the index build's progress: {type(exc).__name__}: {exc}")


def _index_progress(row: tuple[object, ...]) -> str:
    """One line from a `pg_stat_progress_create_index` row: its phase and how far it is."""
    phase, blocks_done, blocks_total, tuples_done, tuples_total = row
    of = ""
    if isinstance(blocks_total, int) and blocks_total > 0 and isinstance(blocks_done, int):
        of = f": {blocks_done:,} of {blocks_total:,} blocks ({blocks_done / blocks_total:.0%})"
    elif isinstance(tuples_total, int) and tuples_total > 0 and isinstance(tuples_done, int):
        of = f": {tuples_done:,} of {tuples_total:,} rows ({tuples_done / tuples_total:.0%})"
    return f"index build {phase}{of}"


def stored_version(conn: psycopg.Connection) -> int:
    """The schema version recorded in the database (0 when it has none)."""
    exists = conn.execute("SELECT to_regclass('contextfold_schema') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT version FROM contextfold_schema WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def _check_not_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise PgSchemaTooNewError(
            f"the PostgreSQL database is at contextfold schema {version}, newer than this contextfold "
            f"({SCHEMA_VERSION}); upgrade contextfold on every replica"
        )

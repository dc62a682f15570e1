"""`contextfold migrate --to postgresql://…`: a SQLite home's data copied into PostgreSQL.

What is copied, row for row with ids, sequence numbers, revisions and times kept: every session
with its messages and parts, its compaction history and its spilled outputs (their content from
the home's spill directory into the database's blob store), and the tombstones of outputs gc
removed. Nothing in the home is changed (a database one schema behind is first upgraded in place,
as any contextfold command that writes would).

Each session is copied in one PostgreSQL transaction that also records it in `migrated_sessions`,
with the time the session was last changed in the home. So a migration can stop anywhere (a
crash, Ctrl-C, a lost connection) and run again: sessions recorded and unchanged are skipped; one
changed in the home since it was copied is copied again, if its copy in PostgreSQL was not
changed since either; a session that exists in PostgreSQL without that record, or whose copy
moved on, is a conflict, left as it is and reported. Blobs are content-addressed, so copying one
again stores nothing. Finally the counts are compared, per session and table, between the home
and the database.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from contextfold.blobs.base import is_digest
from contextfold.blobs.files import FileBlobs
from contextfold.store import schema as sqlite_schema
from contextfold.store.postgres import connect_kwargs, redact

__all__ = ["MigrationReport", "migrate_home"]

_TABLES = ("messages", "parts", "compactions", "outputs")
_BOOLEAN = {"messages": ("summary", "turn_start", "hidden")}
_COLUMNS = {
    "sessions": (
        "owner",
        "id",
        "title",
        "model",
        "settings",
        "system",
        "created_at",
        "updated_at",
        "next_seq",
        "message_count",
        "tokens_stored",
        "tokens_in_view",
        "last_usage",
        "last_usage_message_id",
        "usage_baseline",
        "metadata",
        "view",
        "revision",
        "reset_revision",
        "compaction_count",
        "compaction_tokens_freed",
    ),
    "messages": (
        "id",
        "owner",
        "session_id",
        "seq",
        "role",
        "name",
        "parent_id",
        "summary",
        "finish_reason",
        "error",
        "usage",
        "created_at",
        "metadata",
        "tokens",
        "turn_start",
        "view_tokens",
        "hidden",
        "rev",
    ),
    "parts": ("message_id", "idx", "owner", "session_id", "type", "call_id", "state", "data", "tokens"),
    "compactions": ("id", "owner", "session_id", "created_at", "data"),
    "outputs": (
        "id",
        "session_id",
        "owner",
        "digest",
        "bytes",
        "lines",
        "tool",
        "call_id",
        "created_at",
        "last_read_at",
    ),
}
_STREAM = 1 << 20


@dataclass
class MigrationReport:
    source: str
    target: str
    sessions: int = 0
    """Sessions in the home."""
    copied: int = 0
    recopied: int = 0
    skipped: int = 0
    """Already copied and unchanged since."""
    conflicts: list[str] = field(default_factory=list)
    """Sessions left as they are in PostgreSQL (see the module docstring), one line each."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows of each table now in PostgreSQL for the home's sessions."""
    blobs: int = 0
    blob_bytes: int = 0
    """Spilled content copied in this run (content already there is not counted)."""
    missing_content: list[str] = field(default_factory=list)
    """Outputs whose content was not in the home (removed or damaged): not copied."""
    in_use: list[str] = field(default_factory=list)
    """Sessions copied before and written in PostgreSQL since (not compared: they moved on)."""
    mismatches: list[str] = field(default_factory=list)
    """What the count check found different, one line each (empty: every count matches)."""
    upgraded_from: int | None = None

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.mismatches


def migrate_home(
    database: Path,
    spill_dir: Path,
    url: str,
    *,
    spill_url: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MigrationReport:
    """Copy the SQLite home (`database`, `spill_dir`) into the PostgreSQL database at `url`, the
    spilled content into the database too, or into S3 with `spill_url` (as the replicas will read
    it); `progress(done, total)` is called after each session."""
    from contextfold.blobs.postgres import PostgresBlobs
    from contextfold.store import pgschema

    say = progress or (lambda done, total: None)
    report = MigrationReport(str(database), redact(url))
    if not database.is_file():
        raise FileNotFoundError(f"no database at {database}: nothing to migrate (pass --home, or set CONTEXTFOLD_HOME)")
    report.upgraded_from = _upgrade(database)
    files = FileBlobs(spill_dir, read_only=True)
    if spill_url:
        from contextfold.blobs.s3 import S3Blobs

        blobs: Any = S3Blobs(spill_url)
    else:
        blobs = PostgresBlobs(url, pool_size=2)
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    source.row_factory = sqlite3.Row
    try:
        with psycopg.connect(url, **connect_kwargs()) as target:
            pgschema.migrate(target)
            keys = [(r["owner"], r["id"]) for r in source.execute("SELECT owner, id FROM sessions ORDER BY owner, id")]
            report.sessions = len(keys)
            for n, (owner, session_id) in enumerate(keys, 1):
                _copy_session(source, target, blobs, files, owner, session_id, report)
                say(n, len(keys))
            _copy_tombstones(source, target)
            _verify(source, target, keys, report)
    finally:
        source.close()
        if hasattr(blobs, "close"):
            blobs.close()
    return report


def _upgrade(database: Path) -> int | None:
    """Bring an older home's schema up to date first (the copy reads the current columns)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as probe:
        version = int(probe.execute("PRAGMA user_version").fetchone()[0])
    if version == sqlite_schema.SCHEMA_VERSION:
        return None
    if version > sqlite_schema.SCHEMA_VERSION:
        raise sqlite_schema.SchemaTooNewError(
            f"the database at {database} was written by a newer contextfold (schema {version}); upgrade contextfold"
        )
    import asyncio

    from contextfold.store import SQLiteStore

    async def upgrade() -> None:
        store = await SQLiteStore.open(database)
        await store.close()

    asyncio.run(upgrade())
    return version


def _copy_session(
    source: sqlite3.Connection,
    target: psycopg.Connection,
    blobs: Any,
    files: FileBlobs,
    owner: str,
    session_id: str,
    report: MigrationReport,
) -> None:
    where = (owner, session_id)
    name = f"{owner + '/' if owner else ''}{session_id}"
    row = source.execute("SELECT * FROM sessions WHERE owner = ? AND id = ?", where).fetchone()
    if row is None:  # deleted in the home since the list was read
        return
    marker = target.execute(
        "SELECT m.source, s.updated_at AS copy_updated FROM migrated_sessions m LEFT JOIN sessions s "
        "ON s.owner = m.owner AND s.id = m.id WHERE m.owner = %s AND m.id = %s",
        where,
    ).fetchone()
    present = target.execute("SELECT updated_at FROM sessions WHERE owner = %s AND id = %s", where).fetchone()
    again = False
    if marker is not None:
        copied_version = float(marker[0])
        if present is None:
            pass  # deleted from PostgreSQL since it was copied: copy it anew
        elif copied_version == row["updated_at"]:
            report.skipped += 1
            if present[0] != copied_version:  # in use in PostgreSQL since: its counts moved on
                report.in_use.append(name)
            return
        elif present[0] != copied_version:
            report.conflicts.append(
                f"{name}: changed both in the home and in PostgreSQL since it was copied; left as it is in PostgreSQL"
            )
            return
        else:
            again = True
    elif present is not None:
        report.conflicts.append(f"{name}: PostgreSQL already has a session with this id; left as it is")
        return

    outputs = source.execute("SELECT * FROM outputs WHERE owner = ? AND session_id = ?", where).fetchall()
    kept_outputs = []
    for output in outputs:  # content first: rows must never point at content that is not there
        if _copy_blob(files, blobs, output["digest"], report):
            kept_outputs.append(output)
        else:
            report.missing_content.append(f"{name}: output {output['id']} ({output['digest'][:12]}…)")

    with target.transaction():
        if again:
            target.execute("DELETE FROM sessions WHERE owner = %s AND id = %s", where)
        _insert(target, "sessions", [row])
        messages = source.execute("SELECT * FROM messages WHERE owner = ? AND session_id = ? ORDER BY seq", where)
        _insert_stream(target, "messages", messages)
        parts = source.execute("SELECT * FROM parts WHERE owner = ? AND session_id = ? ORDER BY message_id, idx", where)
        _insert_stream(target, "parts", parts)
        _insert(
            target,
            "compactions",
            source.execute("SELECT * FROM compactions WHERE owner = ? AND session_id = ?", where).fetchall(),
        )
        if kept_outputs:
            target.execute("SELECT pg_advisory_xact_lock(%s)", (_spill_lock(),))
            _insert(target, "outputs", kept_outputs)
        target.execute(
            "INSERT INTO migrated_sessions (owner, id, source, copied_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (owner, id) DO UPDATE SET source = EXCLUDED.source, copied_at = EXCLUDED.copied_at",
            (owner, session_id, repr(float(row["updated_at"])), time.time()),
        )
    if again:
        report.recopied += 1
    else:
        report.copied += 1


def _spill_lock() -> int:
    from contextfold.store.pgschema import SPILL_LOCK

    return SPILL_LOCK


def _copy_blob(files: FileBlobs, blobs: Any, digest: str, report: MigrationReport) -> bool:
    """Store the home's content `digest` in the database; False when the home does not hold it intact."""
    if not is_digest(digest):
        return False
    try:
        blobs.stat(digest)
        return True  # stored already (an earlier run, or another session's output)
    except FileNotFoundError:
        pass
    try:
        with files.open(digest) as f:
            stored = blobs.put(iter(lambda: f.read(_STREAM), b""))
    except FileNotFoundError:
        return False
    if stored.digest != digest:  # the file was changed outside contextfold: not the content recorded
        if stored.created:
            blobs.delete(stored.digest)
        return False
    if stored.created:
        report.blobs += 1
        report.blob_bytes += stored.bytes
    return True


def _values(table: str, row: sqlite3.Row) -> tuple[Any, ...]:
    booleans = _BOOLEAN.get(table, ())
    return tuple(bool(row[c]) if c in booleans else _text(row[c]) for c in _COLUMNS[table])


def _text(value: Any) -> Any:
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def _insert(target: psycopg.Connection, table: str, rows: list[sqlite3.Row]) -> None:
    if not rows:
        return
    columns = _COLUMNS[table]
    with target.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
            [_values(table, r) for r in rows],
        )


def _insert_stream(target: psycopg.Connection, table: str, rows: sqlite3.Cursor) -> None:
    """COPY the rows in, a batch at a time (a session can hold 100,000 messages)."""
    columns = _COLUMNS[table]
    with target.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        while batch := rows.fetchmany(1_000):
            for row in batch:
                copy.write_row(_values(table, row))


def _copy_tombstones(source: sqlite3.Connection, target: psycopg.Connection) -> None:
    rows = source.execute("SELECT id, owner, reason, removed_at FROM output_tombstones").fetchall()
    if rows:
        with target.cursor() as cur:
            cur.executemany(
                "INSERT INTO output_tombstones (id, owner, reason, removed_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                [tuple(r) for r in rows],
            )


def _verify(
    source: sqlite3.Connection, target: psycopg.Connection, keys: list[tuple[str, str]], report: MigrationReport
) -> None:
    """Compare, per session and table, the rows in the home with those in PostgreSQL."""
    conflicted = {line.split(":", 1)[0] for line in report.conflicts} | set(report.in_use)
    missing: dict[str, int] = {}
    for line in report.missing_content:
        missing[line.split(":", 1)[0]] = missing.get(line.split(":", 1)[0], 0) + 1
    totals = dict.fromkeys(("sessions", *_TABLES), 0)
    home = _counts(source)
    copy = _counts(target)
    for owner, session_id in keys:
        name = f"{owner + '/' if owner else ''}{session_id}"
        if name in conflicted:
            continue
        here = home.get((owner, session_id))
        there = copy.get((owner, session_id))
        if here is None:
            continue  # deleted in the home during the run
        if there is None:
            report.mismatches.append(f"{name}: not in PostgreSQL")
            continue
        expected = dict(here, outputs=here["outputs"] - missing.get(name, 0))
        for table in _TABLES:
            if expected[table] != there[table]:
                report.mismatches.append(
                    f"{name}: {expected[table]:,} {table} in the home, {there[table]:,} in PostgreSQL"
                )
            totals[table] += there[table]
        totals["sessions"] += 1
    report.rows = totals


def _counts(conn: Any) -> dict[tuple[str, str], dict[str, int]]:
    """Rows per session and table, in one query per table."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for owner, session_id in conn.execute("SELECT owner, id FROM sessions").fetchall():
        counts[(owner, session_id)] = dict.fromkeys(_TABLES, 0)
    for table in _TABLES:
        for owner, session_id, n in conn.execute(
            f"SELECT owner, session_id, COUNT(*) FROM {table} GROUP BY owner, session_id"
        ).fetchall():
            if (owner, session_id) in counts:
                counts[(owner, session_id)][table] = int(n)
    return counts

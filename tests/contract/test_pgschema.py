"""PostgreSQL migrations: many replicas starting at once on an empty database, and a newer schema."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

from contextfold.store import pgschema


def test_replicas_migrating_at_the_same_moment_apply_each_step_once(pg_url: str) -> None:
    barrier = threading.Barrier(6)
    started: list[int] = []
    errors: list[BaseException] = []

    def replica() -> None:
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                barrier.wait()
                started.append(pgschema.migrate(conn))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=replica) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(started) == [0] + [pgschema.SCHEMA_VERSION] * 5  # one migrated, five found it done
    with psycopg.connect(pg_url) as conn:
        assert pgschema.stored_version(conn) == pgschema.SCHEMA_VERSION
        assert conn.execute("SELECT bytes FROM spill_usage").fetchall() == [(0,)]  # the seed row once


def test_a_replica_older_than_the_schema_refuses_to_start_in_one_line(tmp_path: Path, pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        pgschema.migrate(conn)
        conn.execute("UPDATE contextfold_schema SET version = %s", (pgschema.SCHEMA_VERSION + 1,))
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "serve", "--http", "--database", pg_url],
        env={**os.environ, "CONTEXTFOLD_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "was migrated by a newer contextfold" in done.stderr
    assert "upgrade contextfold" in done.stderr


def _at_version_1_with_parts(conn: psycopg.Connection, parts: int) -> None:
    """The database as contextfold 0.1 left it: schema 1, and `parts` stored tool outputs."""
    conn.execute(pgschema.MIGRATIONS[0])
    conn.execute("CREATE TABLE contextfold_schema (id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)")
    conn.execute("INSERT INTO contextfold_schema (id, version) VALUES (1, 1)")
    conn.execute("INSERT INTO sessions (owner, id, model, created_at, updated_at) VALUES ('', 's', 'gpt-4o', 0, 0)")
    for seq in range(1, parts + 1):
        conn.execute(
            "INSERT INTO messages (id, owner, session_id, seq, role, created_at) VALUES (%s, '', 's', %s, 'user', 0)",
            (f"m{seq}", seq),
        )
        conn.execute(
            "INSERT INTO parts (message_id, idx, owner, session_id, type, data) VALUES (%s, 0, '', 's', 'text', %s)",
            (f"m{seq}", json.dumps({"text": f"line {seq} of handle_request_{seq}"})),
        )


def test_building_the_search_index_on_an_older_database_says_so_and_how_long_it_took(pg_url: str) -> None:
    lines: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _at_version_1_with_parts(conn, 300)
        start = pgschema.migrate(
            conn, progress=lines.append, watch=lambda: psycopg.connect(pg_url, autocommit=True), every=0.01
        )
        assert start == 1
        found = conn.execute(
            "SELECT count(*) FROM parts WHERE contextfold_search_text(type, data) LIKE '%handle_request_17%'"
        ).fetchone()
    assert found == (11,)  # 17, 170-179: the index is there and the text is searchable
    assert lines[0].startswith("schema 2: building the search index over 300 stored parts;"), lines
    assert re.fullmatch(r"schema 2: building the search index done in [\d.,]+ s", lines[-1]), lines
    assert all(line.startswith(("schema 2", "index build ")) for line in lines), lines  # nothing failed


def test_a_replica_waiting_for_another_ones_migration_says_what_it_waits_for(pg_url: str) -> None:
    lines: list[str] = []
    done = threading.Event()
    with psycopg.connect(pg_url, autocommit=True) as holder, psycopg.connect(pg_url, autocommit=True) as conn:
        holder.execute("SELECT pg_advisory_lock(%s)", (pgschema.MIGRATION_LOCK,))  # another replica migrating
        waiting = threading.Thread(target=lambda: (pgschema.migrate(conn, progress=lines.append), done.set()))
        waiting.start()
        for _ in range(500):
            if lines:
                break
            time.sleep(0.01)
        assert lines == ["waiting for another process that is migrating the database"]
        assert not done.is_set()
        holder.execute("SELECT pg_advisory_unlock(%s)", (pgschema.MIGRATION_LOCK,))
        waiting.join(timeout=60)
    assert done.is_set() and lines[1].startswith("schema 2: building the search index over 0 stored parts")


def test_the_index_builds_progress_reads_as_one_line() -> None:
    assert pgschema._index_progress(("building index: scanning table", 40, 160, 0, 0)) == (
        "index build building index: scanning table: 40 of 160 blocks (25%)"
    )
    assert pgschema._index_progress(("building index: loading tuples in tree", 0, 0, 500, 2000)) == (
        "index build building index: loading tuples in tree: 500 of 2,000 rows (25%)"
    )
    assert pgschema._index_progress(("initializing", None, None, None, None)) == "index build initializing"

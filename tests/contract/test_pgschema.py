"""PostgreSQL migrations: many replicas starting at once on an empty database, and a newer schema."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
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

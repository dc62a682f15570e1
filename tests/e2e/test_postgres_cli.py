"""The command line on a PostgreSQL database (`CONTEXTFOLD_DATABASE`), as a team's admin uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_files


def _run(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        env={**os.environ, "CONTEXTFOLD_HOME": str(home), "CONTEXTFOLD_DATABASE": url},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_commands_work_on_a_postgresql_database(tmp_path: Path, pg_url: str) -> None:
    files = corpus_files("normalized/*.jsonl")
    if not files:
        pytest.skip("the shared corpus is absent")
    source = min(files, key=lambda f: f.stat().st_size)
    with_password = pg_url.replace("contextfold@", "contextfold:hunter2@")
    empty = _run(tmp_path, with_password, "sessions")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.strip() == f"no sessions in {with_password.replace('hunter2', '***')}"
    imported = _run(tmp_path, with_password, "import", str(source), "--session", "imp", "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["session_id"] == "imp"
    listed = _run(tmp_path, with_password, "sessions", "--json")
    assert [s["id"] for s in json.loads(listed.stdout)] == ["imp"]
    compacted = _run(tmp_path, with_password, "compact", "imp", "--summarizer", "extractive", "--json")
    assert compacted.returncode in (0, 2), compacted.stderr  # 2: nothing worth compacting in a tiny file
    shown = _run(tmp_path, with_password, "show", "imp")
    assert shown.returncode == 0 and "imp" in shown.stdout
    collected = _run(tmp_path, with_password, "gc")
    assert collected.returncode == 0 and "kept in the database at postgresql://contextfold:***@" in collected.stdout
    deleted = _run(tmp_path, with_password, "delete", "imp", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    for done in (empty, imported, listed, compacted, shown, collected, deleted):
        assert "hunter2" not in done.stdout + done.stderr
    assert not (tmp_path / "contextfold.db").exists()  # nothing went to the SQLite default

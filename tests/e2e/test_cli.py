"""The command line, run as a user would: a subprocess of `python -m contextfold`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import needs_corpus

TOOL_HEAVY = "raw/claude-code-spotter/test/fixtures/transcripts/tool_heavy.jsonl"


def run(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTEXTFOLD_HOME": str(home), "COLUMNS": "200"}  # no wrapping in rich output
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_count_from_stdin_and_file(tmp_path: Path):
    out = run(tmp_path, "count", "--model", "gpt-4o", "--json", stdin="hello world")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "tokens": 2,
        "model": "gpt-4o",
        "method": "exact",
        "encoding": "o200k_base",
        "factor": 1.0,
    }
    text = tmp_path / "t.txt"
    text.write_text("上下文" * 10, "utf-8")
    out = run(tmp_path, "count", str(text))
    assert out.returncode == 0 and "30 tokens" in out.stdout and "estimate" in out.stdout


@needs_corpus
def test_import_then_stats(tmp_path: Path, corpus: Path):
    out = run(tmp_path, "import", str(corpus / TOOL_HEAVY), "--session", "heavy", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["session_id"] == "heavy" and result["source_format"] == "claude-code"
    assert result["tool_calls"] == result["tool_results"] > 0

    out = run(tmp_path, "stats", "heavy", "--json")
    status = json.loads(out.stdout)
    assert status["message_count"] == result["messages"] and status["state"] in ("ok", "soft", "hard", "overflow")

    out = run(tmp_path, "stats")
    assert out.returncode == 0 and "heavy" in out.stdout and "1 sessions" in out.stdout
    out = run(tmp_path, "stats", "--json")
    body = json.loads(out.stdout)
    assert body["totals"]["sessions"] == 1 and body["sessions"][0]["session_id"] == "heavy"


def test_errors_are_one_line_and_exit_2(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", "utf-8")
    out = run(tmp_path, "import", str(bad))
    assert out.returncode == 2
    assert "line 1" in out.stderr and "Traceback" not in out.stderr
    # One bad line among good ones is skipped and named instead (issue 26, item 10).
    bad.write_text('{"role": "user", "content": "ok"}\n{not json\n', "utf-8")
    out = run(tmp_path, "import", str(bad))
    assert out.returncode == 0 and "could not be read and was skipped (line 2: malformed JSON" in out.stdout

    out = run(tmp_path, "stats", "missing-session")
    assert out.returncode == 2 and "no session with id 'missing-session'" in out.stderr

    out = run(tmp_path, "import", str(tmp_path / "nowhere.jsonl"))
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_demo_runs_offline_on_the_bundled_transcript(tmp_path: Path):
    out = run(tmp_path, "demo")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Tokens in view as the session grows" in text  # the replay, turn by turn over MCP
    assert " soft " in text and " overflow " in text  # the small demo window is crossed
    # The huge real tool output (868,167 characters) is spilled at ingest and read back.
    assert "Full output saved as" in text and "out_" in text  # the demo wraps at 80 columns
    assert "16587" in text and "def prepare_auth" in text
    assert "compact (extractive)" in text and "## Relevant Files" not in text.split("compact (extractive)")[0]
    assert "## Goal" in text
    assert not (tmp_path / "contextfold.db").exists()  # the demo leaves the real home alone


def test_no_command_prints_help(tmp_path: Path):
    out = run(tmp_path)
    assert out.returncode == 2 and "serve" in out.stdout


def test_gc_reports_what_it_removed(tmp_path: Path):
    out = run(tmp_path, "gc", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["dry_run"] is True
    out = run(tmp_path, "gc")
    assert out.returncode == 0 and "removed 0" in out.stdout


def test_gc_dry_run_writes_nothing_in_a_home_without_a_database(tmp_path: Path):
    """Like every command that only reads, `gc --dry-run` leaves an empty or missing home as it was."""
    empty, missing = tmp_path / "empty", tmp_path / "missing"
    empty.mkdir()
    for home in (empty, missing):
        out = run(home, "gc", "--dry-run", "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {
            "dry_run": True,
            "outputs_removed": 0,
            "files_removed": 0,
            "bytes_freed": 0,
            "bytes_kept": 0,
            "sessions_removed": 0,
            "sessions": [],
        }
        out = run(home, "gc", "--dry-run")
        assert out.returncode == 0 and "no database" in out.stdout, out.stderr
    assert list(empty.iterdir()) == [] and not missing.exists()

    assert run(empty, "gc").returncode == 0  # a real collection makes the home
    made = sorted(p.name for p in empty.iterdir())
    out = run(empty, "gc", "--dry-run")
    assert out.returncode == 0 and "would remove 0" in out.stdout, out.stderr
    assert sorted(p.name for p in empty.iterdir()) == made  # and a dry run on it adds no -wal or -shm


def run_into_closed_pipe(home: Path, *args: str, read: int = 0) -> subprocess.CompletedProcess[str]:
    """`contextfold ARGS | head -c READ`: stdout a pipe whose reader leaves after `read` bytes."""
    env = {**os.environ, "CONTEXTFOLD_HOME": str(home), "COLUMNS": "200"}
    reader, writer = os.pipe()
    with subprocess.Popen(
        [sys.executable, "-m", "contextfold", *args], stdout=writer, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            pipe.read(read)
        _, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(args, process.returncode, "", stderr)


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path: Path):
    """`contextfold demo | head` and `contextfold show … | head -c 600` exit 0 and say nothing, as git and ls do."""
    transcript = tmp_path / "t.jsonl"
    lines = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "words " * 200} for i in range(60)
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    home = tmp_path / "home"
    assert run(home, "import", str(transcript), "--session", "s").returncode == 0

    for args, read in (
        (("show", "s"), 600),
        (("show", "s"), 0),
        (("show", "s", "--format", "openai"), 600),
        (("export", "s"), 0),
        (("sessions",), 0),
        (("stats", "s", "--json"), 0),
        (("--help",), 0),
        (("demo",), 200),
    ):
        out = run_into_closed_pipe(home, *args, read=read)
        assert (out.returncode, out.stderr) == (0, ""), (args, out.stderr[-2000:])

    out = run_into_closed_pipe(home, "show", "missing")  # a real error is still reported, not hidden
    assert out.returncode == 2 and "no session with id 'missing'" in out.stderr

"""A session from the shell: `sessions`, `show`, `export`, `delete`, `prune`, `compact`, `watch`,
run as a user would (subprocesses of `python -m contextfold`) on a home the service filled.

Commands that only read leave the home as they found it, byte for byte: no database created,
no -wal or -shm file left, not even a changed modification time.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import queue
import re
import select
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_corpus

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

SESSION = "fix-flaky"
TOOL_HEAVY = "raw/claude-code-spotter/test/fixtures/transcripts/tool_heavy.jsonl"
MCP_TOOLS = re.compile(r"\b(session_(open|list|delete)|read_output|get_context)\b")
WAIT = 60
"""Seconds to wait for `watch` to print what the test waits for: a bound for a hung process, not a
measure of speed."""


def run(home: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "CONTEXTFOLD_HOME": str(home), "COLUMNS": "120", **env},
        timeout=120,
    )


def call(call_id: str, command: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


TEST_RUN = "\n".join(f"tests/test_{i // 50}.py::test_{i} PASSED" for i in range(20_000)) + "\n1 failed\n"


async def _service(home: Path) -> ContextService:
    return await ContextService.open(load_settings({"home": str(home)}))


def populate(home: Path) -> None:
    """A session with a system prompt, two tool calls — the older one's output cleared by prune,
    the newer one's spilled — and a final answer."""

    async def fill() -> None:
        async with await _service(home) as service:
            # The minimum a prune must free is set low: the spilled run's preview (about 18,000
            # tokens) is under OpenCode's 20,000 that gpt-4o's window keeps.
            await service.open_session(
                SESSION,
                model="gpt-4o",
                title="Fix the flaky test",
                system="Be brief.",
                settings={"prune_minimum": 10_000},
            )
            await service.append(
                SESSION,
                [
                    {"role": "user", "content": "Run the tests and fix what fails."},
                    {
                        "role": "assistant",
                        "content": "Reading the config first.",
                        "tool_calls": [call("c1", "cat setup.cfg")],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "[tool:pytest]\naddopts = -q\n" * 40},
                    {"role": "assistant", "content": None, "tool_calls": [call("c2", "pytest")]},
                    {"role": "tool", "tool_call_id": "c2", "content": TEST_RUN},
                    {"role": "assistant", "content": "One test fails: test_19999."},
                ],
            )
            pruned = await service.prune(SESSION, keep_tool_uses=1, clear_at_least=0)
            assert pruned.applied and pruned.parts == 1

    asyncio.run(fill())


def read(home: Path, fn: Any) -> Any:
    async def go() -> Any:
        async with await _service(home) as service:
            return await fn(service)

    return asyncio.run(go())


def snapshot(home: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and directory under `home` with its bytes and modification time."""
    entries = {".": (b"<dir>", home.stat().st_mtime_ns)}
    for path in sorted(home.rglob("*")):
        data = path.read_bytes() if path.is_file() else b"<dir>"
        entries[str(path.relative_to(home))] = (data, path.stat().st_mtime_ns)
    return entries


# -- reading leaves the home as it was ---------------------------------------------------------------


def test_reading_a_fresh_home_creates_nothing(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    before = snapshot(home)

    out = run(home, "stats")
    assert out.returncode == 0 and out.stdout.strip() == f"no sessions yet (no database at {home / 'contextfold.db'})"
    out = run(home, "sessions")
    assert out.returncode == 0 and out.stdout.strip() == f"no sessions yet (no database at {home / 'contextfold.db'})"
    assert json.loads(run(home, "sessions", "--json").stdout) == []
    out = run(home, "count", "--model", "gpt-4o", stdin="hello world")
    assert out.returncode == 0 and out.stdout.startswith("2 tokens")
    for args in (["show", "nope"], ["stats", "nope"], ["export", "nope"], ["prune", "nope"], ["watch", "nope"]):
        out = run(home, *args)
        assert out.returncode == 2, args
        assert "no session with id 'nope'" in out.stderr and "holds no database yet" in out.stderr, args

    assert snapshot(home) == before  # still empty: no database, no spill directory


def test_a_database_an_opener_never_migrated_reads_as_an_empty_home(tmp_path: Path):
    # A server killed while it created the database (a proxy whose client left at once) leaves a
    # file at schema 0: nothing was ever stored in it, so readers see an empty home, and leave it.
    home = tmp_path / "home"
    home.mkdir()
    sqlite3.connect(home / "contextfold.db").close()
    before = snapshot(home)

    out = run(home, "sessions", "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == [], out.stderr
    out = run(home, "stats")
    assert out.returncode == 0 and out.stdout.startswith("no sessions yet"), out.stderr
    assert snapshot(home) == before
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"role": "user", "content": "hello"}\n{"role": "assistant", "content": "hi"}\n')
    written = run(home, "import", str(transcript), "--session", "s", "--format", "normalized")
    assert written.returncode == 0, written.stderr  # a writer migrates it
    assert [s["id"] for s in json.loads(run(home, "sessions", "--json").stdout)] == ["s"]


def test_reading_commands_leave_a_populated_home_byte_identical(tmp_path: Path):
    populate(tmp_path)
    before = snapshot(tmp_path)
    assert "contextfold.db" in before and not any(name.endswith(("-wal", "-shm")) for name in before)

    for args in (
        ["stats"],
        ["stats", SESSION],
        ["sessions"],
        ["sessions", "--json"],
        ["show", SESSION],
        ["show", SESSION, "--format", "anthropic"],
        ["export", SESSION],
        ["export", SESSION, "--full"],
    ):
        out = run(tmp_path, *args)
        assert out.returncode == 0, (args, out.stderr)
    out = run(tmp_path, "count", stdin="hello")
    assert out.returncode == 0, out.stderr

    assert snapshot(tmp_path) == before


# -- looking at a session ------------------------------------------------------------------------------


def test_sessions_lists_each_with_its_numbers(tmp_path: Path):
    populate(tmp_path)
    status = read(tmp_path, lambda s: s.status(SESSION))

    listed = json.loads(run(tmp_path, "sessions", "--json").stdout)
    assert len(listed) == 1
    row = listed[0]
    assert (row["id"], row["title"], row["model"]) == (SESSION, "Fix the flaky test", "gpt-4o")
    assert (row["messages"], row["tokens_in_view"], row["state"]) == (
        status.message_count,
        status.tokens_in_view,
        status.state,
    )
    assert row["updated_at"] > 0

    lines = run(tmp_path, "sessions").stdout.splitlines()
    assert lines[0].split() == ["session", "title", "model", "messages", "in", "view", "used", "state", "updated"]
    assert lines[2].startswith(f"{SESSION}  Fix the flaky test  gpt-4o")
    assert f"{status.tokens_in_view:,}" in lines[2] and f" {status.state} " in lines[2]


def test_show_prints_the_view_as_the_model_sees_it(tmp_path: Path):
    populate(tmp_path)
    session, view = read(tmp_path, lambda s: s.session_view(SESSION))
    status = read(tmp_path, lambda s: s.status(SESSION))

    out = run(tmp_path, "show", SESSION)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"session {SESSION} — Fix the flaky test"
    assert lines[1].split()[:2] == ["system", str(session.system[0].tokens)] and lines[1].endswith("Be brief.")
    assert lines[2] == f"-- {len(view)} messages in view --"
    # One line per message: its number, role and tokens in view, then what it holds.
    heads = [line for line in lines if line[:4].strip().isdigit()]
    assert [h.split()[:3] for h in heads] == [[str(i), m.role, f"{m.in_view_tokens:,}"] for i, m in enumerate(view, 1)]
    assert heads[0].endswith("Run the tests and fix what fails.")
    text = out.stdout
    assert '→ bash {"command": "cat setup.cfg"}\n' in text
    assert "← [cleared by prune]\n" in text  # the older output, cleared
    spilled = view[2].tool_parts[0].spill_id
    assert spilled and f"← [spilled {spilled}] tests/test_0.py::test_0 PASSED" in text  # the newer one, spilled
    assert heads[-1].endswith("One test fails: test_19999.")
    # Then the numbers.
    assert f"tokens in view  {status.tokens_in_view:,} (exact)" in text
    assert f"messages        {status.message_count}" in text and f"state           {status.state}" in text

    # --format prints what get_context returns, as JSON.
    for fmt in ("anthropic", "openai"):
        shown = json.loads(run(tmp_path, "show", SESSION, "--format", fmt).stdout)
        assert shown == read(tmp_path, lambda s, f=fmt: s.get_context(SESSION, format=f)).model_dump()


def test_export_writes_the_view_or_the_whole_history(tmp_path: Path):
    populate(tmp_path)
    context = read(tmp_path, lambda s: s.get_context(SESSION, format="anthropic")).model_dump()

    out = run(tmp_path, "export", SESSION, "--format", "anthropic")
    assert out.returncode == 0 and json.loads(out.stdout) == context
    target = tmp_path / "out" / "view.json"
    target.parent.mkdir()
    out = run(tmp_path, "export", SESSION, "--format", "anthropic", "-o", str(target))
    assert out.returncode == 0 and out.stdout == "" and str(target) in out.stderr
    assert json.loads(target.read_text("utf-8")) == context
    assert sorted(p.name for p in target.parent.iterdir()) == ["view.json"]  # no temp file left

    history = read(tmp_path, lambda s: s.session_history(SESSION))
    full = json.loads(run(tmp_path, "export", SESSION, "--full").stdout)
    assert full["session"]["id"] == SESSION and full["format"] == "openai"
    assert full["system"] == [{"role": "system", "content": "Be brief."}]
    assert [m["id"] for m in full["messages"]] == [m.id for m in history]
    assert all(m["in_view"] for m in full["messages"])
    cleared = full["messages"][1]
    assert cleared["view_marks"] == ["c1: output cleared by prune"]
    assert cleared["content"][1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "[tool:pytest]\naddopts = -q\n" * 40,
    }


@needs_corpus
def test_compacted_history_shows_the_summary_and_exports_what_is_hidden(tmp_path: Path, corpus: Path):
    out = run(tmp_path, "import", str(corpus / TOOL_HEAVY), "--session", "heavy", "--model", "gpt-4o")
    assert out.returncode == 0, out.stderr

    dry = run(tmp_path, "compact", "heavy", "--dry-run", "--summarizer", "extractive")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("dry run: anchored would take the view from") and "## Goal" in dry.stdout
    assert "passed over" not in dry.stdout  # extractive was asked for and used
    before = read(tmp_path, lambda s: s.status("heavy"))
    assert before.compaction is None  # a dry run changes nothing

    done = json.loads(run(tmp_path, "compact", "heavy", "--summarizer", "extractive", "--json").stdout)
    assert done["compacted"] and done["tokens_after"] < done["tokens_before"]

    lines = run(tmp_path, "show", "heavy").stdout.splitlines()
    _, view = read(tmp_path, lambda s: s.session_view("heavy"))
    hidden = before.message_count + 2 - len(view)  # the marker and the summary were added
    assert lines[1] == f"-- {len(view)} messages in view, {hidden} stored out of view --"
    assert lines[2].endswith("[compaction marker] What did we do so far?")
    assert lines[3].endswith("[summary of the earlier history]") and lines[4].strip() == "## Goal"

    full = json.loads(run(tmp_path, "export", "heavy", "--full", "--format", "anthropic").stdout)
    assert len(full["messages"]) == before.message_count + 2
    assert sum(not m["in_view"] for m in full["messages"]) == hidden
    assert [m["id"] for m in full["messages"] if m["in_view"]] == sorted(m.id for m in view)


# -- changing a session --------------------------------------------------------------------------------


def test_delete_asks_for_yes(tmp_path: Path):
    populate(tmp_path)
    assert len(list((tmp_path / "outputs").iterdir())) == 2  # the spilled output and its line index
    out = run(tmp_path, "delete", SESSION)
    assert out.returncode == 2
    assert "pass --yes to confirm" in out.stderr and "4 stored messages" in out.stderr
    assert json.loads(run(tmp_path, "sessions", "--json").stdout)[0]["id"] == SESSION  # still there

    out = run(tmp_path, "delete", SESSION, "--yes")
    assert out.returncode == 0 and out.stdout.strip() == f"deleted session {SESSION} (4 messages)"
    assert json.loads(run(tmp_path, "sessions", "--json").stdout) == []
    assert list((tmp_path / "outputs").iterdir()) == []  # its spilled output went with it


def test_prune_and_its_dry_run(tmp_path: Path):
    populate(tmp_path)
    before = read(tmp_path, lambda s: s.status(SESSION))

    dry = run(tmp_path, "prune", SESSION, "--dry-run", "--keep-tool-uses", "0")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would clear 1 tool outputs from the view, freeing")
    assert read(tmp_path, lambda s: s.status(SESSION)).tokens_in_view == before.tokens_in_view

    out = json.loads(run(tmp_path, "prune", SESSION, "--keep-tool-uses", "0", "--json").stdout)
    assert out["applied"] and out["parts"] == 1
    assert out["status"]["tokens_in_view"] == before.tokens_in_view - out["tokens_freed"]
    again = run(tmp_path, "prune", SESSION, "--keep-tool-uses", "0")
    assert again.returncode == 0 and again.stdout.startswith("not pruned: ")


def test_prune_takes_the_minimum_the_tool_takes(tmp_path: Path):
    # --clear-at-least: the CLI can apply the prune the MCP tool allows (issue 26, item 22).
    populate(tmp_path)
    freeable = json.loads(run(tmp_path, "prune", SESSION, "--dry-run", "--keep-tool-uses", "0", "--json").stdout)
    assert freeable["tokens_freed"] > 0
    refused = run(
        tmp_path,
        "prune",
        SESSION,
        "--keep-tool-uses",
        "0",
        "--clear-at-least",
        str(freeable["tokens_freed"] + 1),
        "--json",
    )
    assert refused.returncode == 0 and not json.loads(refused.stdout)["applied"], refused.stderr
    applied = run(
        tmp_path, "prune", SESSION, "--keep-tool-uses", "0", "--clear-at-least", str(freeable["tokens_freed"]), "--json"
    )
    assert applied.returncode == 0 and json.loads(applied.stdout)["applied"], applied.stderr


def test_count_of_a_file_it_cannot_read_says_which_in_one_line(tmp_path: Path):
    for path in (tmp_path / "missing.txt", tmp_path):
        out = run(tmp_path / "home", "count", str(path))
        assert out.returncode == 2
        assert out.stderr.strip().count("\n") == 0 and f"{path}: cannot read it" in out.stderr, out.stderr
        assert "Errno" not in out.stderr


# -- watch ---------------------------------------------------------------------------------------------


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _watch(home: Path, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "contextfold", "watch", SESSION, "--interval", "0.05", *args],
        env={**os.environ, "CONTEXTFOLD_HOME": str(home)},
        text=True,
        **kwargs,
    )


def test_watch_prints_a_line_per_change_until_ctrl_c(tmp_path: Path):
    populate(tmp_path)
    status = read(tmp_path, lambda s: s.status(SESSION))
    process = _watch(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = _lines(process)
        first = lines.get(timeout=WAIT)
        assert (
            f"{status.tokens_in_view:,} / {status.usable:,} tokens" in first
            and f"{status.message_count} messages" in first
        )

        appended = read(tmp_path, lambda s: s.append(SESSION, [{"role": "user", "content": "And the other test?"}]))
        change = lines.get(timeout=WAIT)
        tokens = appended.status.tokens_in_view
        assert f"{tokens:,} / {status.usable:,} tokens" in change
        assert f"{tokens - status.tokens_in_view:+,} tokens, +1 messages" in change

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0
    finally:
        process.kill()
        process.wait()


def test_watch_ends_on_ctrl_c_even_started_with_sigint_ignored(tmp_path: Path):
    # As a shell starts a background job (issue 26, item 22): SIGINT ignored before exec.
    populate(tmp_path)
    process = _watch(
        tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        _lines(process).get(timeout=WAIT)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0
    finally:
        process.kill()
        process.wait()


def test_watch_ends_when_the_session_is_deleted(tmp_path: Path):
    populate(tmp_path)
    process = _watch(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = _lines(process)
        lines.get(timeout=WAIT)
        read(tmp_path, lambda s: s.delete_session(SESSION))
        assert lines.get(timeout=WAIT).strip() == f"session {SESSION} was deleted"
        assert process.wait(timeout=WAIT) == 1
    finally:
        process.kill()
        process.wait()


def test_watch_on_a_terminal_draws_a_live_table(tmp_path: Path):
    populate(tmp_path)
    status = read(tmp_path, lambda s: s.status(SESSION))
    leader, follower = pty.openpty()
    process = _watch(tmp_path, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    seen = b""
    try:
        while b"Ctrl-C to stop" not in seen:
            ready, _, _ = select.select([leader], [], [], WAIT)
            assert ready, seen.decode(errors="replace")
            seen += os.read(leader, 65536)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0
    finally:
        process.kill()
        process.wait()
        os.close(leader)
    text = seen.decode(errors="replace")
    assert f"session {SESSION} · gpt-4o" in text and "tokens in view" in text
    assert f"{status.tokens_in_view:,} (exact)" in text and "none since watching began" in text


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["stats", "show", "prune", "compact", "delete"])
def test_a_missing_session_is_named_with_cli_commands(tmp_path: Path, command: str):
    populate(tmp_path)
    out = run(tmp_path, command, "nope")
    assert out.returncode == 2
    assert out.stderr.startswith("contextfold: error: no session with id 'nope'")
    assert "`contextfold sessions`" in out.stderr and not MCP_TOOLS.search(out.stderr)


def test_a_full_database_points_at_the_delete_command(tmp_path: Path):
    populate(tmp_path)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"role": "user", "content": "hi"}\n', "utf-8")
    out = run(tmp_path, "import", str(transcript), CONTEXTFOLD_MAX_DATABASE_BYTES="1")
    assert out.returncode == 2
    assert "`contextfold delete SESSION --yes`" in out.stderr and not MCP_TOOLS.search(out.stderr)

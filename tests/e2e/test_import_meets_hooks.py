"""`contextfold import` of an agent's own session file meets the hooks in one session (issue 26, item 18).

Claude Code writes a session to `<session id>.jsonl` and hands its hooks that id; Codex's rollout
opens with a `session_meta` whose `id` its hooks get. The hooks keep the session as
`claude-code-<id>` / `codex-<id>`; `import` without `--session` picks that same id, so importing
twice, or after the hooks, reads only what the file appended, into one session. Every step is a
real `python -m contextfold` process, as a person or an agent runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from _agent_events import ClaudeTranscript, CodexRollout, run_hook


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=120,
    )


def imported(home: Path, path: Path, *args: str) -> dict:
    done = run(home, "import", str(path), "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def session_ids(home: Path) -> list[str]:
    done = run(home, "sessions", "--json")
    assert done.returncode == 0, done.stderr
    return [s["id"] for s in json.loads(done.stdout)]


def claude_session(folder: Path, turns: int) -> ClaudeTranscript:
    """A Claude Code session file where Claude Code keeps it: named after its session id."""
    session = str(uuid.uuid4())
    folder.mkdir(parents=True, exist_ok=True)
    t = ClaudeTranscript(folder / f"{session}.jsonl", cwd="/work/project", session=session)
    for i in range(turns):
        t.user(f"step {i}: run the tests")
        t.tool("Bash", {"command": "pytest -q"}, f"{i} passed")
        t.assistant(f"step {i} done")
    return t


def test_importing_a_claude_code_file_twice_makes_one_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = claude_session(tmp_path / "projects" / "-work-project", turns=3)
    first = imported(home, t.path)
    assert first["session_id"] == f"claude-code-{t.session}" and first["messages"] > 0
    again = imported(home, t.path)
    assert again["session_id"] == first["session_id"] and again["messages"] == 0
    t.user("one more")
    t.assistant("done")
    grown = imported(home, t.path)
    assert (grown["session_id"], grown["messages"]) == (first["session_id"], 2)
    assert session_ids(home) == [first["session_id"]]
    stats = json.loads(run(home, "stats", first["session_id"], "--json").stdout)
    assert stats["message_count"] == first["messages"] + 2

    explicit = imported(home, t.path, "--session", "mine")  # an explicit --session still wins
    assert explicit["session_id"] == "mine" and explicit["messages"] == stats["message_count"]
    assert sorted(session_ids(home)) == sorted([first["session_id"], "mine"])


def test_a_renamed_copy_and_a_subagent_file_find_their_session_in_the_records(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = claude_session(tmp_path / "projects" / "-work-project", turns=1)
    copy = tmp_path / "backup.jsonl"
    copy.write_bytes(t.path.read_bytes())
    assert imported(home, copy)["session_id"] == f"claude-code-{t.session}"
    assert imported(home, t.path)["messages"] == 0  # the same bytes, wherever they are: one session

    sub = tmp_path / "agent-a2898e3.jsonl"
    record = {
        "parentUuid": None,
        "isSidechain": True,
        "agentId": "a2898e3",
        "type": "user",
        "message": {"role": "user", "content": "look for the config"},
        "uuid": str(uuid.uuid4()),
        "sessionId": t.session,
    }
    sub.write_text(json.dumps(record) + "\n")
    assert imported(home, sub)["session_id"] == f"claude-code-{t.session}-agent-a2898e3"  # never its parent's


def test_hooks_then_import_meet_in_one_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = claude_session(tmp_path / "projects" / "-work-project", turns=2)
    hooked = run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto"))
    assert hooked.code == 0, hooked.stderr
    assert session_ids(home) == [f"claude-code-{t.session}"]
    stored = json.loads(run(home, "stats", f"claude-code-{t.session}", "--json").stdout)["message_count"]
    t.user("and the lint")
    t.assistant("clean")
    after = imported(home, t.path)
    assert after["session_id"] == f"claude-code-{t.session}"
    assert after["messages"] == 2 and after["already_imported_lines"] > 0  # only what was appended
    assert session_ids(home) == [f"claude-code-{t.session}"]
    stats = json.loads(run(home, "stats", f"claude-code-{t.session}", "--json").stdout)
    assert stats["message_count"] == stored + 2
    assert stats["reported_by"] == "Claude Code"  # the hooks made the session; the import says what it holds


def test_codex_hooks_import_and_reimport_meet_in_one_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    r = CodexRollout(tmp_path / "rollout-2026-11-26T17-58-57-x.jsonl", cwd="/work/project")
    r.user("list the files")
    r.command("ls", "a.py\nb.py")
    r.assistant("two files")
    hooked = run_hook(home, "codex", "PreCompact", r.event("PreCompact", trigger="auto"))
    assert hooked.code == 0, hooked.stderr
    again = imported(home, r.path)
    assert (again["session_id"], again["messages"]) == (f"codex-{r.session}", 0)
    r.user("and the tests")
    r.assistant("none yet")
    assert imported(home, r.path)["messages"] == 2
    assert session_ids(home) == [f"codex-{r.session}"]


def test_stats_labels_the_agents_reported_usage_apart_from_the_count(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = claude_session(tmp_path / "projects" / "-work-project", turns=1)  # each answer reports 1,200 input tokens
    session = imported(home, t.path)["session_id"]
    status = json.loads(run(home, "stats", session, "--json").stdout)
    assert status["tokens_reported"] > status["tokens_counted"] and status["reported_by"] == "Claude Code"
    text = run(home, "stats", session).stdout
    assert f"tokens in view  {status['tokens_in_view']:,} (reported by Claude Code)" in text, text
    assert f"tokens counted  {status['tokens_counted']:,} (estimate)" in text, text
    assert "(estimate)" not in text.split("tokens in view", 1)[1].split("\n", 1)[0]

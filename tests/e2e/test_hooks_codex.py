"""`contextfold hook codex EVENT`, driven with the inputs Codex 0.169 sends, in its order.

Codex fires PreCompact → PostCompact → SessionStart(compact); by PostCompact its rollout holds the
`compacted` record with the summary Codex wrote, so SessionStart hands over only what it lacks.
"""

from __future__ import annotations

from pathlib import Path

from _agent_events import CodexRollout, run_hook

from contextfold.tokens.counting import counter_for


def rollout(tmp_path: Path) -> CodexRollout:
    r = CodexRollout(tmp_path / "rollout-2026-11-26T17-58-57-x.jsonl", cwd=str(tmp_path / "proj"))
    r.user("Port the parser to `tomllib` in src/config_loader.py; keep Python 3.11 support.")
    r.command("sed -n 1,80p src/config_loader.py", "import toml\n\ndef load(path): ...\n")
    r.command(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/config_loader.py\n@@\n-import toml\n+import tomllib\n*** End Patch\nEOF",
        "Done",
    )
    r.command("python -m pytest -q tests/test_config_loader.py", "E   KeyError: 'defaults'\n1 failed")
    r.user("No, do not rename `load`: other modules import it.")
    r.assistant("I'll fix the `defaults` lookup next.")
    return r


def compact(tmp_path: Path, r: CodexRollout, summary: str) -> str | None:
    home = tmp_path / "home"
    first = run_hook(home, "codex", "PreCompact", r.event("PreCompact", trigger="auto", turn_id="t1"))
    assert (first.code, first.stdout) == (0, ""), first.stderr
    r.compacted(summary)
    post = run_hook(home, "codex", "PostCompact", r.event("PostCompact", trigger="auto", turn_id="t1"))
    assert (post.code, post.stdout) == (0, ""), post.stderr  # PostCompact's answer takes no context in Codex
    start = run_hook(
        home, "codex", "SessionStart", r.event("SessionStart", source="compact", permission_mode="bypassPermissions")
    )
    assert start.code == 0 and not (home / "hooks" / "hooks.log").exists(), start.stderr
    if start.answer is not None:
        assert start.answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return start.context


def test_sessionstart_after_a_codex_compaction_gives_what_the_summary_lacks(tmp_path: Path) -> None:
    r = rollout(tmp_path)
    summary = "Another language model started to solve this problem…\nPorting src/config_loader.py to tomllib; one test fails."
    text = compact(tmp_path, r, summary)
    assert text is not None
    assert "Port the parser to `tomllib` in src/config_loader.py; keep Python 3.11 support." in text
    assert "No, do not rename `load`: other modules import it." in text
    assert "KeyError: 'defaults'" in text
    assert "- src/config_loader.py\n" not in text  # the summary names the edited file already
    assert f'search_history(session_id="codex-{r.session}"' in text
    assert counter_for("gpt-5").count(text) <= 2_000


def test_a_summary_that_holds_everything_gets_a_short_handover(tmp_path: Path) -> None:
    r = rollout(tmp_path)
    summary = (
        "User asked: Port the parser to `tomllib` in src/config_loader.py; keep Python 3.11 support. "
        "Then: No, do not rename `load`: other modules import it. Blocked on KeyError: 'defaults' from "
        "tests/test_config_loader.py; next: fix the `defaults` lookup."
    )
    text = compact(tmp_path, r, summary)
    assert text is None or ("Port the parser" not in text and "do not rename" not in text)


def test_codex_posttooluse_and_other_events_answer_nothing(tmp_path: Path) -> None:
    r = rollout(tmp_path)
    event = r.event(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "seq 1 30000"},
        tool_use_id="call_1",
        turn_id="t1",
        permission_mode="bypassPermissions",
        tool_response="Warning: truncated output (original token count: 42224)\n" + "1\n" * 5000,
    )
    for name, payload in (
        ("PostToolUse", event),
        ("SessionStart", r.event("SessionStart", source="startup")),
        ("Stop", r.event("Stop", stop_hook_active=False)),
    ):
        run = run_hook(tmp_path / "home", "codex", name, payload)
        assert (run.code, run.stdout) == (0, "")
    assert not (tmp_path / "home").exists()

"""Claude Code record shapes the corpus of 2026-11-27 showed, each written here by hand.

Every test below reproduces one shape seen in real sessions of Claude Code 1.0.x – 2.1.x (the
records are made up; only their shape is copied) and failed before the importer followed it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextfold.importers import load_transcript

SESSION = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"


def _record(kind: str, uuid: str, parent: str | None, version: str = "1.0.57", **fields: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/USER/project",
        "sessionId": SESSION,
        "version": version,
        "type": kind,
        "uuid": uuid,
        "timestamp": "2025-07-22T10:00:00.000Z",
        **fields,
    }


def _user(uuid: str, parent: str | None, content: Any, **fields: Any) -> dict[str, Any]:
    return _record("user", uuid, parent, message={"role": "user", "content": content}, **fields)


def _assistant(uuid: str, parent: str | None, blocks: list[dict[str, Any]], msg: str, **fields: Any) -> dict[str, Any]:
    message = {"id": msg, "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514", "content": blocks}
    return _record("assistant", uuid, parent, message=message, **fields)


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _texts(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


SUMMARY = "This session is being continued from a previous conversation that ran out of context. Summary: ..."


def test_a_1_0_compaction_without_boundary_keeps_the_history_before_it(tmp_path: Path) -> None:
    # Claude Code 1.0.x: the summary record has no parent and there is no compact_boundary.
    records = [
        _user("u1", None, "fix the flaky test"),
        _assistant("a1", "u1", [_call("toolu_1", "pytest -q")], "msg_1"),
        _user("r1", "a1", [_result("toolu_1", "1 failed")]),
        _assistant("a2", "r1", [{"type": "text", "text": "It is a race in setup."}], "msg_2"),
        _user("s1", None, SUMMARY, isCompactSummary=True),
        _assistant("a3", "s1", [{"type": "text", "text": "Continuing with the fix."}], "msg_3"),
    ]
    transcript = load_transcript(_write(tmp_path / "s.jsonl", records), "claude-code")
    texts = [_texts(m) for m in transcript.messages]
    assert texts[0] == "fix the flaky test"
    assert transcript.metadata["skipped_records"].get("branch") is None
    assert [c.summary_index for c in transcript.compactions] == [texts.index(SUMMARY)]
    assert transcript.compactions[0].pre_tokens is None  # 1.0.x wrote no count
    assert texts.index(SUMMARY) == 4 and texts[-1] == "Continuing with the fix."


def test_a_1_0_compaction_skips_a_sidechain_written_just_before_it(tmp_path: Path) -> None:
    # The history the summary continues is the main thread's, not the subagent lines before it.
    records = [
        _user("u1", None, "review the module"),
        _assistant("a1", "u1", [_call("toolu_t", "task")], "msg_1"),
        _user("x1", None, "subagent prompt", isSidechain=True),
        _assistant("x2", "x1", [{"type": "text", "text": "subagent answer"}], "msg_x", isSidechain=True),
        _user("r1", "a1", [_result("toolu_t", "subagent answer")]),
        _user("s1", None, SUMMARY, isCompactSummary=True),
        _assistant("a3", "s1", [{"type": "text", "text": "Next step."}], "msg_3"),
    ]
    transcript = load_transcript(_write(tmp_path / "s.jsonl", records), "claude-code")
    texts = [_texts(m) for m in transcript.messages]
    assert "subagent prompt" not in texts and texts[0] == "review the module"
    assert transcript.messages[2]["content"][0]["tool_use_id"] == "toolu_t"
    assert transcript.metadata["skipped_records"] == {"sidechain": 2}

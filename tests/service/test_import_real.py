"""Importing real transcripts: what the model had, nothing lost, nothing twice, tools kept.

Synthetic Claude Code files here copy the shape of real records (the corpus sessions and public
ones): `parentUuid` chains, a warm-up sidechain, a rewind, parallel tool calls, a compaction with
its boundary and summary, a session continued from a plan. The corpus files are imported as they
are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, corpus_files, needs_corpus
from test_importers import _assert_same_lines, _expected_lines, _lines_from_openai, _normalized_for

from contextfold.config import load_settings
from contextfold.domain import Usage
from contextfold.errors import InvalidInput, TranscriptError
from contextfold.importers import load_transcript
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio

SPOTTER = "raw/claude-code-spotter/test/fixtures/transcripts"
SESSION = "0b6c2a4e-5d1f-4c3e-9a7b-2f8e1d6c4a90"
MODEL = "claude-opus-4-6"
TOOL_DOCUMENTS = [
    *corpus_files("raw/mini-swe-agent/**/*.traj.json"),
    *corpus_files("raw/swe-agent/**/*.traj"),
    *corpus_files("raw/openhands/**/*.json"),
]


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path / "home"}, environ={})) as svc:
        yield svc


# -- Claude Code records, shaped like the real ones ---------------------------------------------


def _record(kind: str, uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/USER/project",
        "sessionId": SESSION,
        "version": "2.1.39",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-02-11T21:59:13.244Z",
        **fields,
    }


def _user(uuid: str, parent: str | None, content: Any, **fields: Any) -> dict[str, Any]:
    return _record("user", uuid, parent, message={"role": "user", "content": content}, **fields)


def _assistant(uuid: str, parent: str | None, blocks: list[dict[str, Any]], msg: str, **fields: Any) -> dict[str, Any]:
    usage = fields.pop("usage", {"input_tokens": 3, "cache_read_input_tokens": 0, "output_tokens": 9})
    message = {"model": MODEL, "id": msg, "type": "message", "role": "assistant", "content": blocks, "usage": usage}
    return _record("assistant", uuid, parent, message=message, **fields)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "Bash",
        "input": {"command": command},
        "caller": {"type": "direct"},
    }


def _result(call_id: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text, **fields}


def _progress(uuid: str, parent: str) -> dict[str, Any]:
    return _record("progress", uuid, parent, data={"type": "hook_progress", "hookEvent": "PostToolUse"})


def _texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    return [content] if isinstance(content, str) else [b["text"] for b in content if b["type"] == "text"]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _exchanges(count: int, parent: str, prefix: str = "m") -> list[dict[str, Any]]:
    """`count` turns of the main thread: a prompt, a tool call, its result, an answer."""
    records = []
    for i in range(count):
        u, a, r, b = (f"{prefix}{i}-{k}" for k in "uarb")
        records += [
            _user(u, parent, f"step {i}: run the tests"),
            _assistant(a, u, [_call(f"toolu_{prefix}{i}", "pytest -q")], f"msg_{prefix}{i}a"),
            _progress(f"{prefix}{i}-p", a),
            _user(r, f"{prefix}{i}-p", [_result(f"toolu_{prefix}{i}", f"{i} passed")]),
            _assistant(b, r, [_text(f"all {i} pass")], f"msg_{prefix}{i}b"),
        ]
        parent = b
    return records


SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. The summary "
    "below covers the earlier portion of the conversation.\n\nSummary:\n1. Primary Request: fix the login bug."
)
LAST_USAGE = {
    "input_tokens": 1,
    "cache_creation_input_tokens": 7330,
    "cache_read_input_tokens": 98729,
    "output_tokens": 1,
}


def _compacted_session(path: Path) -> Path:
    before = [
        _user("u1", None, "Fix the login bug"),
        _assistant("a1", "u1", [_call("toolu_1", "grep -rn login src")], "msg_1"),
        _user("r1", "a1", [_result("toolu_1", "src/login.py:12: def login(user):\n" * 400)]),
        _assistant("a2", "r1", [_text("Found it in src/login.py.")], "msg_2"),
    ]
    compaction = [
        {
            **_record("system", "b1", None, subtype="compact_boundary", content="Conversation compacted"),
            "logicalParentUuid": "a2",
            "compactMetadata": {"trigger": "auto", "preTokens": 170251},
        },
        _user("s1", "b1", SUMMARY, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        _progress("p1", "s1"),
        _assistant("a3", "p1", [_call("toolu_2", "pytest tests/test_login.py")], "msg_3", usage=LAST_USAGE),
        _user("r3", "a3", [_result("toolu_2", "3 passed")]),
    ]
    return _write(path, before + compaction)


# -- 1. the agent's own compaction and usage ------------------------------------------------------


async def test_a_claude_code_compaction_is_replayed_and_the_last_usage_calibrates(service, tmp_path: Path):
    result = await service.import_transcript(_compacted_session(tmp_path / "s.jsonl"), session_id="s")
    context = await service.get_context("s", format="anthropic")
    rendered = json.dumps(context.messages)
    # The view is what Claude Code's model saw: its summary, then what came after; the history
    # before the compaction is stored but out of view.
    assert "Fix the login bug" not in rendered and "def login" not in rendered
    assert context.messages[0]["role"] == "user"
    assert context.messages[1]["role"] == "assistant"
    assert _texts(context.messages[1]) == [SUMMARY]
    assert "pytest tests/test_login.py" in rendered and "3 passed" in rendered

    session = await service.store.get_session("s")
    assert session.view is not None
    assert session.last_usage == Usage(input=1, cache_write=7330, cache_read=98729, output=1)
    status = await service.status("s")
    # The provider saw 106,061 tokens when it answered; only the "3 passed" result came after.
    assert 106_061 < status.tokens_reported < 106_061 + 50
    assert status.tokens_in_view == status.tokens_reported > status.tokens_counted
    assert status.tokens_stored > status.tokens_counted  # the hidden history is kept

    [record] = await service.store.compactions("s")
    assert record.summarizer == "claude-code" and record.auto
    assert record.head_messages == 3 and record.tokens_before > record.tokens_after
    assert "170,251" in record.notes[0]
    assert result.compactions == 1


@needs_corpus
async def test_the_corpus_session_from_the_issue_is_no_longer_born_in_overflow(service):
    # Imported as a whole, this session read 206,150 tokens in view and `overflow`.
    path = CORPUS / SPOTTER / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    result = await service.import_transcript(path, session_id="cc")
    status = await service.status("cc")
    # Claude Code's last report: 1 + 7,330 + 98,729 input and 1 output, nothing after it.
    assert status.tokens_reported == status.tokens_in_view == 106_061
    assert status.state != "overflow" and status.tokens_stored > 200_000
    assert result.compactions == 1
    context = await service.get_context("cc", format="openai")
    assert context.messages[1]["content"].startswith("This session is being continued from a previous conversation")


# -- 2. follow the conversation, keep what has no call, say what was left out ---------------------


async def test_a_warm_up_sidechain_first_does_not_hide_the_session(service, tmp_path: Path):
    warmup = [
        {**_user("w1", None, "Warmup"), "isSidechain": True, "agentId": "a1b2c3d"},
        {**_assistant("w2", "w1", [_text("I'm ready to help.")], "msg_w"), "isSidechain": True, "agentId": "a1b2c3d"},
    ]
    path = _write(tmp_path / "s.jsonl", warmup + _exchanges(30, None))  # type: ignore[arg-type]
    result = await service.import_transcript(path, session_id="s")
    assert result.messages == 30 * 3  # prompt, call with its result, answer
    assert result.tool_calls == result.tool_results == 30
    assert result.skipped == {"sidechain": 2}
    rendered = json.dumps((await service.get_context("s")).messages)
    assert "Warmup" not in rendered and "step 29" in rendered


async def test_a_rewound_branch_is_left_out_and_parallel_calls_are_kept(service, tmp_path: Path):
    records = [
        _user("u1", None, "Rename the module"),
        # One API response with two parallel calls: two lines, each the parent of its own result.
        _assistant("a1", "u1", [_call("toolu_a", "ls")], "msg_1"),
        _assistant("a1b", "a1", [_call("toolu_b", "git status")], "msg_1"),
        _user("r1", "a1", [_result("toolu_a", "mod.py")]),
        _user("r2", "a1b", [_result("toolu_b", "clean")]),
        _assistant("a2", "r2", [_text("Shall I rename mod.py to core.py?")], "msg_2"),
        _user("u2", "a2", "Yes, to engine.py"),  # the prompt the person then rewound and edited
        _assistant("a3", "u2", [_text("Renamed to engine.py.")], "msg_3"),
        _user("u2b", "a2", "Yes, to core.py"),
        _assistant("a3b", "u2b", [_text("Renamed to core.py.")], "msg_4"),
    ]
    result = await service.import_transcript(_write(tmp_path / "s.jsonl", records), session_id="s")
    context = await service.get_context("s")
    rendered = json.dumps(context.messages)
    assert "engine.py" not in rendered and "Renamed to core.py." in rendered
    assert result.skipped == {"branch": 2}
    calls = context.messages[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["toolu_a", "toolu_b"]
    assert [m["content"] for m in context.messages[2:4]] == ["mod.py", "clean"]


async def test_a_session_continued_from_a_plan_keeps_the_rejected_result_as_text(service, tmp_path: Path):
    rejected = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
        "edit, the new_string was NOT written to the file). STOP what you are doing."
    )
    plan = "Implement the following plan:\n\n# Add rate limiting\n\n1. Add a token bucket to the API client."
    records = [
        _user("r0", "3f0d9c1e-prev-session", [_result("toolu_01PrevExitPlanMode", rejected, is_error=True)]),
        _user("i0", "r0", [_text("[Request interrupted by user for tool use]")]),
        _user("p0", "i0", plan, planContent="# Add rate limiting"),
        *_exchanges(2, "p0"),
    ]
    result = await service.import_transcript(_write(tmp_path / "s.jsonl", records), session_id="s")
    [warning] = result.warnings
    assert "toolu_01PrevExitPlanMode" in warning and "plain user text" in warning
    first = (await service.get_context("s")).messages[0]
    assert first["role"] == "user" and "STOP what you are doing" in json.dumps(first)
    assert result.tool_calls == result.tool_results == 2


def test_the_command_line_says_what_it_left_out_and_why(tmp_path: Path):
    subagent = [{**_user(f"x{i}", f"x{i - 1}" if i else "m0-b", f"search {i}"), "isSidechain": True} for i in range(7)]
    records = _exchanges(1, None) + subagent + _exchanges(1, "m0-b", prefix="n")  # type: ignore[arg-type]
    path = _write(tmp_path / "s.jsonl", records)
    env = {**os.environ, "CONTEXTFOLD_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-m", "contextfold", "import", str(path), "--session", "s"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "left out 7 conversation records: 7 sidechain" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "contextfold", "import", str(path), "--session", "s", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    result = json.loads(out.stdout)
    assert result["messages"] == 0 and result["already_imported_lines"] == len(records)


# -- 3. importing again adds only what is new -----------------------------------------------------


async def test_importing_a_grown_file_again_adds_only_what_is_new(service, tmp_path: Path):
    records = _exchanges(3, None) + [
        _user("q", "m2-b", "now deploy"),
        _assistant("d", "q", [_call("toolu_deploy", "make deploy")], "msg_d"),
    ]
    later = [
        _user("dr", "d", [_result("toolu_deploy", "deployed")]),  # the result of a call imported before
        _assistant("done", "dr", [_text("Deployed.")], "msg_done"),
    ]
    path = _write(tmp_path / "s.jsonl", records)
    first = await service.import_transcript(path, session_id="s")
    again = await service.import_transcript(path, session_id="s")
    assert (await service.status("s")).message_count == first.messages
    assert (again.messages, again.already_imported_lines) == (0, len(records))

    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in later))
    grown = await service.import_transcript(path, session_id="s")
    assert (grown.messages, grown.tool_results, grown.already_imported_lines) == (1, 1, len(records))

    await service.import_transcript(path, session_id="whole")
    assert (await service.get_context("s")).messages == (await service.get_context("whole")).messages
    assert (await service.status("s")).tokens_stored == (await service.status("whole")).tokens_stored


async def test_a_message_typed_while_the_agent_worked_is_kept_across_imports_and_in_the_summary(
    service, tmp_path: Path
):
    # Claude Code 2.1 keeps such a message only as a `queued_command` attachment: read live (the file
    # ends with it) and then grown, it lands once, where a single import puts it.
    typed = "never touch the migrations folder, it is shared with the billing team"
    first = [
        *_exchanges(4, None),
        _user("q", "m3-b", "now deploy"),
        _assistant("d", "q", [_call("toolu_deploy", "make deploy")], "msg_d"),
        _user("dr", "d", [_result("toolu_deploy", "deployed")]),
        _record(
            "attachment", "t", "dr", attachment={"type": "queued_command", "prompt": typed, "commandMode": "prompt"}
        ),
    ]
    later = [
        _assistant("done", "t", [_text("Deployed; migrations untouched.")], "msg_done"),
        *_exchanges(4, "done", "n"),
    ]
    await _typed_lands_once_live_and_in_the_summary(service, tmp_path / "s.jsonl", first, later, typed)


async def _typed_lands_once_live_and_in_the_summary(
    service, path: Path, first: list[dict[str, Any]], later: list[dict[str, Any]], typed: str, *, queued: bool = False
) -> None:
    """`first` imported live (as the hooks do), then `later` appended and imported: the same as one
    import of the whole, `typed` stored once and quoted in the summary as the user's words.
    `queued`: `first` ends with `typed` still in Claude Code's queue, not yet in the conversation."""
    _write(path, first)
    await service.import_transcript(path, session_id="live")
    if queued:
        assert typed not in json.dumps((await service.get_context("live")).messages)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in later))
    await service.import_transcript(path, session_id="live")
    await service.import_transcript(path, session_id="whole")
    assert (await service.get_context("live")).messages == (await service.get_context("whole")).messages
    assert sum(typed in json.dumps(m) for m in (await service.get_context("whole")).messages) == 1
    assert (await service.compact("whole", summarizer="extractive")).compacted
    assert typed in await service.summary_text("whole")


async def test_a_message_queued_when_an_import_stops_is_taken_by_the_next_one(service, tmp_path: Path):
    # Claude Code 2.0 and 2.1 write a message typed while the agent works only in the queue's records:
    # the text when queued, and a bare `remove` when the turn takes it. An import that stops between
    # the two must hand the text to the next one (the import's mark keeps it).
    typed = "keep the public API as it is, only the internals change"
    queue = {"type": "queue-operation", "sessionId": "s", "timestamp": "2026-01-14T00:17:13.682Z"}
    first = [
        *_exchanges(4, None),
        _user("q", "m3-b", "refactor the parser"),
        _assistant("d", "q", [_call("toolu_t", "pytest -q")], "msg_d"),
        {**queue, "operation": "enqueue", "content": typed},
    ]
    later = [
        {**queue, "operation": "remove"},
        _user("dr", "d", [_result("toolu_t", "41 passed")]),
        _assistant("done", "dr", [_text("Only the internals move.")], "msg_done"),
        *_exchanges(4, "done", "n"),
    ]
    await _typed_lands_once_live_and_in_the_summary(service, tmp_path / "s.jsonl", first, later, typed, queued=True)
    found = await service.search_history("whole", pattern="public API as it is")
    assert found.text.splitlines()[0].endswith("user, hidden") and typed in found.text


async def test_imports_while_claude_code_writes_and_compacts_add_up_to_one_import(service, tmp_path: Path):
    whole = _compacted_session(tmp_path / "whole.jsonl")
    lines = whole.read_bytes().splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if b"compact_boundary" in line)
    path = tmp_path / "live.jsonl"
    # Read mid-write (the last line not finished), then with the compaction's boundary but not yet
    # its summary, then the rest: each import takes only what is complete and new.
    cuts = [lines[:2] + [lines[2][:100]], lines[: boundary + 1], lines]
    results = []
    for part in cuts:
        path.write_bytes(b"".join(part))
        results.append(await service.import_transcript(path, session_id="live"))
    assert any("incomplete" in w for w in results[0].warnings)
    assert [r.compactions for r in results] == [0, 0, 1]
    await service.import_transcript(whole, session_id="whole")
    assert (await service.get_context("live")).messages == (await service.get_context("whole")).messages
    live, one = await service.status("live"), await service.status("whole")
    assert (live.tokens_in_view, live.tokens_stored, live.message_count) == (
        one.tokens_in_view,
        one.tokens_stored,
        one.message_count,
    )


async def test_a_file_changed_before_the_imported_point_is_refused(service, tmp_path: Path):
    path = _write(tmp_path / "s.jsonl", _exchanges(2, None))
    await service.import_transcript(path, session_id="s")
    before = await service.status("s")
    path.write_text(path.read_text("utf-8").replace("step 0", "step 9"), "utf-8")
    with pytest.raises(InvalidInput, match="changed since.*new session"):
        await service.import_transcript(path, session_id="s")
    assert (await service.status("s")).message_count == before.message_count


# -- 4. trajectories of other agents, with their tool calls ---------------------------------------


@needs_corpus
@pytest.mark.parametrize("path", TOOL_DOCUMENTS, ids=lambda p: p.relative_to(CORPUS).as_posix())
def test_agent_trajectories_import_with_their_tool_calls(path: Path):
    transcript = load_transcript(path)
    _assert_same_lines(_lines_from_openai(transcript), _expected_lines(_normalized_for(path)))
    assert any(m.get("tool_calls") for m in transcript.messages)


@needs_corpus
@pytest.mark.parametrize(
    "pattern", ["raw/mini-swe-agent/**/*.traj.json", "raw/swe-agent/**/*.traj", "raw/openhands/**/*.json"]
)
async def test_each_agent_format_imports_into_a_session_with_tool_results(service, pattern: str):
    path = corpus_files(pattern)[0]
    result = await service.import_transcript(path, session_id="t")
    assert result.tool_calls > 0 and result.tool_results > 0
    again = await service.import_transcript(path, session_id="t")
    assert again.messages == 0


def test_an_unknown_json_document_names_the_forms_that_are_accepted(tmp_path: Path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"steps": [{"observation": "x"}]}), "utf-8")
    with pytest.raises(TranscriptError, match="mini-swe-agent .traj.json.*SWE-agent .traj.*OpenHands event list"):
        load_transcript(path)


async def test_an_instruction_sent_mid_conversation_is_imported_in_place(service, tmp_path: Path):
    # A normalized (or Codex) transcript with a developer message after the first prompt: the
    # import used to drop it (the parser took it for a system prompt that nobody stored).
    lines = [
        {"role": "user", "content": "You are a coding agent.", "name": "system"},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "<model_switch>\nuse the new model", "name": "developer"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi."},
    ]
    _write(tmp_path / "t.jsonl", lines)
    result = await service.import_transcript(tmp_path / "t.jsonl", format="normalized", session_id="t")
    context = await service.get_context(result.session_id, format="openai")
    assert [(m["role"], m["content"]) for m in context.messages] == [
        ("system", "You are a coding agent."),
        ("user", "hello"),
        ("developer", "<model_switch>\nuse the new model"),
        ("user", "hello"),
        ("assistant", "Hi."),
    ]

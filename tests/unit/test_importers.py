"""Transcript importers, checked against the corpus: every raw Claude Code session and Codex rollout
must import to exactly the conversation its normalized counterpart holds.

The normalized files flatten what the importers keep (thinking, images, block boundaries), so the
comparison helpers below mirror how those files were derived; the importers themselves stay lossless.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, corpus_files, corpus_params, needs_corpus

from contextfold.errors import TranscriptError
from contextfold.importers import IMPORT_FORMATS, ImportedTranscript, detect_import_format, load_transcript

Line = dict[str, Any]

CLAUDE_CODE_FILES = corpus_files("raw/claude-code-*/**/*.jsonl")
CODEX_FILES = corpus_files("raw/codex-*/**/*.jsonl")
NORMALIZED_FILES = corpus_files("normalized/*.jsonl")
SPOTTER = "raw/claude-code-spotter/test/fixtures/transcripts"


def _id(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()


# -- how the normalized files were derived ---------------------------------------------------
#
# Worked out from the corpus (every rule below is needed for an exact match, none is slack):
# - assistant: its text blocks joined by "\n" (a split response's parts are one message, so its
#   "\n\n" preamble and later text join as "\n\n\n…"); thinking dropped; tool_use → flat
#   {id, name, arguments}, arguments the input as JSON text (compared here as parsed JSON);
# - user: each tool_result → a `tool` line named after its call, content the string, or a list's
#   text blocks joined by "\n"; is_error leaves no trace; the remaining text blocks → one user line;
# - isMeta user records are kept; the compaction summary is a user line named `compact_summary`;
# - Codex: base instructions and the leading developer message → user lines named system/developer;
#   a message's text parts joined by "\n"; custom tool input is the raw `arguments` string.


def _expected_lines(path: Path) -> list[Line]:
    with path.open(encoding="utf-8") as handle:
        return [_comparable(json.loads(line)) for line in handle if line.strip()]


def _comparable(line: Line) -> Line:
    if "tool_calls" not in line:
        return line
    calls = [{**call, "arguments": _json_or_text(call["arguments"])} for call in line["tool_calls"]]
    return {**line, "tool_calls": calls}


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # a custom tool's free-form input


def _system_lines(transcript: ImportedTranscript) -> list[Line]:
    return [{"role": "user", "content": prompt["text"], "name": prompt["role"]} for prompt in transcript.system]


def _lines_from_anthropic(transcript: ImportedTranscript) -> list[Line]:
    lines = _system_lines(transcript)
    tool_names: dict[str, str] = {}
    summaries = set(transcript.metadata["compact_summary_indexes"])
    # What Claude Code wrote outside its message records (a message typed while the agent worked, a
    # file it attached): the import keeps it where the model saw it; the normalized files never had it.
    outside = {
        *transcript.metadata.get("queued_message_indexes", ()),
        *transcript.metadata["attachment_message_indexes"],
    }
    for index, message in enumerate(transcript.messages):
        if index in outside:
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant":
            lines.append(_assistant_line(blocks, tool_names))
        else:
            lines.extend(_user_lines(blocks, tool_names, "compact_summary" if index in summaries else None))
    return lines


def _assistant_line(blocks: list[dict[str, Any]], tool_names: dict[str, str]) -> Line:
    line: Line = {"role": "assistant", "content": "\n".join(b["text"] for b in blocks if b["type"] == "text")}
    calls = [{"id": b["id"], "name": b["name"], "arguments": b["input"]} for b in blocks if b["type"] == "tool_use"]
    tool_names.update((call["id"], call["name"]) for call in calls)
    if calls:
        line["tool_calls"] = calls
    return line


def _user_lines(blocks: list[dict[str, Any]], tool_names: dict[str, str], name: str | None) -> list[Line]:
    lines: list[Line] = [
        {
            "role": "tool",
            "content": _result_text(b),
            "tool_call_id": b["tool_use_id"],
            "name": tool_names[b["tool_use_id"]],
        }
        for b in blocks
        if b["type"] == "tool_result"
    ]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    if texts:
        line: Line = {"role": "user", "content": "\n".join(texts)}
        if name:
            line["name"] = name
        lines.append(line)
    return lines


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    return content if isinstance(content, str) else "\n".join(b["text"] for b in content if b["type"] == "text")


def _lines_from_openai(transcript: ImportedTranscript) -> list[Line]:
    lines = _system_lines(transcript)
    tool_names: dict[str, str] = {}
    for message in transcript.messages:
        role, text = message["role"], _openai_text(message.get("content"))
        if role == "assistant":
            lines.append(_openai_assistant_line(message, text, tool_names))
        elif role == "tool":
            call_id = message["tool_call_id"]
            lines.append({"role": "tool", "content": text, "tool_call_id": call_id, "name": tool_names[call_id]})
        elif role in ("system", "developer"):
            lines.append({"role": "user", "content": text, "name": role})
        else:
            lines.append({"role": "user", "content": text, **({"name": message["name"]} if "name" in message else {})})
    return lines


def _openai_assistant_line(message: dict[str, Any], text: str, tool_names: dict[str, str]) -> Line:
    line: Line = {"role": "assistant", "content": text}
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": _json_or_text(c["function"]["arguments"])}
        for c in message.get("tool_calls", [])
    ]
    tool_names.update((call["id"], call["name"]) for call in calls)
    if calls:
        line["tool_calls"] = calls
    return line


def _openai_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "text")


def _assert_same_lines(actual: list[Line], expected: list[Line]) -> None:
    # Report the first difference briefly: a full diff of a 3 MB session is unreadable and slow.
    for number, (got, want) in enumerate(zip(actual, expected, strict=False), 1):
        assert got == want, f"line {number} differs\n got:      {_short(got)}\n expected: {_short(want)}"
    assert len(actual) == len(expected), f"{len(actual)} lines imported, the normalized file has {len(expected)}"


def _short(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:600]


@cache
def _sources() -> dict[str, dict[str, Any]]:
    """Raw file (relative to raw/) → its sources.json entry."""
    entries = json.loads((CORPUS / "sources.json").read_text(encoding="utf-8"))
    return {entry["local"]: entry for entry in entries}


@cache
def _normalized_names() -> dict[str, str]:
    """Raw file (relative to raw/) → its normalized file, for the entries sources.json pairs with one.

    Only those were derived by the rules mirrored above. The sessions added on 2026-11-27 name none:
    their normalized files list records in file order (sidechains, API errors, `[image]` notes
    included), so they are checked by the properties below, not line by line.
    """
    return {local: entry["normalized"] for local, entry in _sources().items() if entry.get("normalized")}


def _paired(paths: list[Path]) -> list[Path]:
    """The raw files sources.json pairs with a normalized file ([] without the corpus)."""
    if not CORPUS.is_dir():
        return []
    return [p for p in paths if p.relative_to(CORPUS / "raw").as_posix() in _normalized_names()]


def _normalized_for(raw: Path) -> Path:
    return CORPUS / "normalized" / _normalized_names()[raw.relative_to(CORPUS / "raw").as_posix()]


def misplaced_result(path: Path) -> str | None:
    """Where a normalized file answers a call away from it, or None when every result follows its call.

    A `tool` line must come right after the assistant line making its call (or another result of
    it): no API accepts anything else. A file breaking this is itself wrong, and the tests comparing
    it with what the product renders skip it, naming the line.
    """
    lines = _expected_lines(path)
    open_calls: set[str] = set()
    for number, line in enumerate(lines, 1):
        if line["role"] == "tool":
            if line["tool_call_id"] not in open_calls:
                return _misplaced(lines, number)
            continue
        open_calls = {call["id"] for call in line.get("tool_calls", [])}
    return None


def _misplaced(lines: list[Line], number: int) -> str:
    call_id = lines[number - 1]["tool_call_id"]
    made = next((n for n, line in enumerate(lines, 1) for c in line.get("tool_calls", []) if c["id"] == call_id), None)
    if made is None:
        where = "nowhere in the file"
    elif made > number:
        where = f"later, at line {made} (records listed in file order, the result written first)"
    else:
        where = f"at line {made}, with other messages between (a subagent's sidechain inlined?)"
    return f"normalized file is wrong: line {number} answers call {call_id}, made {where}"


# -- the corpus ---------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.parametrize("path", corpus_params(_paired(CLAUDE_CODE_FILES), id=_id))
def test_claude_code_session_matches_its_normalized_file(path: Path) -> None:
    transcript = load_transcript(path, "claude-code")
    assert transcript.format == "anthropic" and transcript.source_format == "claude-code"
    _assert_same_lines(_lines_from_anthropic(transcript), _expected_lines(_normalized_for(path)))


@needs_corpus
@pytest.mark.parametrize("path", corpus_params(_paired(CODEX_FILES), id=_id))
def test_codex_rollout_matches_its_normalized_file(path: Path) -> None:
    transcript = load_transcript(path, "codex")
    assert transcript.format == "openai" and transcript.source_format == "codex"
    _assert_same_lines(_lines_from_openai(transcript), _expected_lines(_normalized_for(path)))


@needs_corpus
@pytest.mark.parametrize("path", corpus_params(NORMALIZED_FILES, id=_id))
def test_normalized_import_reproduces_its_lines(path: Path) -> None:
    if (defect := misplaced_result(path)) is not None:
        pytest.skip(defect)
    transcript = load_transcript(path, "normalized")
    assert transcript.format == "openai"
    _assert_same_lines(_lines_from_openai(transcript), _expected_lines(path))


_TRANSCRIPT_SUFFIXES = (".jsonl", ".traj", ".json")
"""The raw transcripts' file types (MANIFEST, "Formats of the raw files"); anything else is documentation."""


def _expected_detection(relative: str) -> str | None:
    """The format a corpus file should be detected as, from where it is and what sources.json says.

    A source is named after its agent (`claude-code-<project>`, `codex-<project>`, `swe-agent`, …):
    its transcripts are in that agent's format. None for files that are no transcript.
    """
    if relative.startswith("normalized/"):
        return "normalized"
    entry = _sources().get(relative.removeprefix("raw/"))
    if entry is None or not relative.endswith(_TRANSCRIPT_SUFFIXES):
        return None
    agents = [name for name in IMPORT_FORMATS if entry["source"] == name or entry["source"].startswith(f"{name}-")]
    return max(agents, key=len, default=None)


@needs_corpus
def test_detection_picks_the_right_format_for_every_corpus_file() -> None:
    wrong: dict[str, str] = {}
    files = sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name not in ("MANIFEST.md", "sources.json"))
    raw = {_id(p).removeprefix("raw/") for p in files if _id(p).startswith("raw/")}
    assert raw == set(_sources()), "sources.json and raw/ list different files"
    for path in files:
        relative = _id(path)
        expected = _expected_detection(relative)
        try:
            found = detect_import_format(path)
        except TranscriptError as exc:
            assert str(path) in str(exc)
            found = None
        if found != expected:
            wrong[relative] = f"detected {found}, expected {expected}"
    assert wrong == {}


@needs_corpus
@pytest.mark.parametrize(
    ("session", "trigger", "pre_tokens"),
    [
        ("4d5611e5-241a-462a-8d15-5122611a9569", "auto", 170251),
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "auto", 167731),
        ("ae4a77f8-aedd-4bc1-888f-c94edc91af04", "manual", 142431),
    ],
)
def test_claude_code_compaction_is_kept_and_marked(session: str, trigger: str, pre_tokens: int) -> None:
    transcript = load_transcript(CORPUS / SPOTTER / f"{session}.jsonl")
    [boundary] = transcript.metadata["compactions"]
    [summary_index] = transcript.metadata["compact_summary_indexes"]
    assert boundary["compact_metadata"] == {"trigger": trigger, "preTokens": pre_tokens}
    # The boundary sits right before the summary, and the history it summarized is still there.
    assert boundary["message_index"] == summary_index > 0
    summary = transcript.messages[summary_index]
    assert summary["role"] == "user"
    assert summary["content"].startswith("This session is being continued from a previous conversation")
    assert transcript.metadata["session_id"] == session
    assert transcript.model is not None and transcript.model.startswith("claude-")


@needs_corpus
def test_claude_code_split_response_keeps_thinking_and_every_part() -> None:
    transcript = load_transcript(CORPUS / SPOTTER / "short.jsonl")
    assert [m["role"] for m in transcript.messages] == ["user", "assistant", "user", "user"]
    response = transcript.messages[1]["content"]
    assert [b["type"] for b in response] == ["text", "thinking", "text", "tool_use", "tool_use"]
    assert response[1]["signature"]  # kept opaque so the block can be sent back
    assert all("caller" not in b for b in response)  # Claude Code's own field, not the API's
    results = transcript.messages[2]["content"]
    assert [(b["tool_use_id"], b.get("is_error")) for b in results] == [
        (response[3]["id"], True),
        (response[4]["id"], True),
    ]
    assert transcript.title == "mix phx.server doesnt seem to start"
    assert transcript.model == "claude-opus-4-6"
    assert transcript.metadata["skipped_records"] == {
        "file-history-snapshot": 1,
        "progress": 3,
        "system:local_command": 2,
    }


@needs_corpus
def test_claude_code_subagent_files_are_read_as_their_own_thread() -> None:
    for path in CLAUDE_CODE_FILES:
        metadata = load_transcript(path).metadata
        is_subagent = path.parent.name == "subagents"
        assert metadata["sidechain"] is is_subagent, path.name
        assert metadata.get("agent_id") == (path.stem.removeprefix("agent-") if is_subagent else None)
        # Claude Code up to 2.0 wrote a subagent's records into the main file too: exactly those are left out.
        assert metadata["skipped_records"].get("sidechain", 0) == _sidechain_records(path, not is_subagent), path.name
        assert "main_thread" not in metadata["skipped_records"]


def _sidechain_records(path: Path, sidechain: bool) -> int:
    """How many conversation records of `path` are (`sidechain`) or are not on a sidechain."""
    with path.open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return sum(1 for r in records if r.get("type") in ("user", "assistant") and bool(r.get("isSidechain")) is sidechain)


@needs_corpus
def test_claude_code_meta_messages_are_kept_and_listed() -> None:
    transcript = load_transcript(CORPUS / SPOTTER / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    meta = transcript.metadata["meta_message_indexes"]
    assert len(meta) == 2
    assert "Base directory for this skill" in transcript.messages[meta[0]]["content"][0]["text"]
    assert transcript.messages[meta[1]]["content"].startswith("<local-command-caveat>")


@needs_corpus
def test_codex_metadata_and_dropped_items() -> None:
    [path] = corpus_files("raw/codex-codemie/**/*.jsonl")
    transcript = load_transcript(path)
    assert transcript.model == "gpt-5.5"
    assert transcript.title == "show tools"
    assert [p["role"] for p in transcript.system] == ["system", "developer"]
    assert transcript.system[0]["text"].startswith("You are Codex")
    metadata = transcript.metadata
    assert metadata["session_id"] == "019e1625-789d-76c0-80ab-3724b5ddb799"
    assert metadata["reasoning_dropped"] == 25
    assert metadata["skipped_items"] == {"web_search_call": 3}
    assert len(metadata["custom_tool_call_ids"]) == 3
    calls = [c for m in transcript.messages for c in m.get("tool_calls", [])]
    assert len(calls) == 102 and all(c["type"] == "function" for c in calls)


@needs_corpus
def test_corpus_imports_parse_with_the_wire_parsers() -> None:
    pytest.importorskip("contextfold.formats.anthropic")
    pytest.importorskip("contextfold.formats.openai")
    from contextfold.formats import parse

    for path in [*CLAUDE_CODE_FILES, *CODEX_FILES, *NORMALIZED_FILES[:5]]:
        transcript = load_transcript(path)
        batch = parse(transcript.messages, transcript.format)
        assert batch.messages, path.name
        # Every result follows its call within the import, so none is left for the store to match.
        assert batch.results == [], path.name


# -- synthetic files: shapes the corpus lacks ------------------------------------------------------


def _write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _cc(kind: str, content: Any, **fields: Any) -> dict[str, Any]:
    """A Claude Code conversation record."""
    message: dict[str, Any] = {"role": kind, "content": content}
    for key in ("id", "model"):
        if key in fields:
            message[key] = fields.pop(key)
    return {"type": kind, "uuid": "u", "sessionId": "s1", "isSidechain": False, "message": message, **fields}


def _tool_use(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "Read",
        "input": {"file_path": f"/{call_id}"},
        "caller": {"type": "direct"},
    }


def test_claude_code_merges_a_split_response_around_its_tool_results(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    path = _write_jsonl(
        tmp_path / "session.jsonl",
        [
            _cc("user", "read both"),
            _cc("assistant", [_tool_use("t1")], id="m1", model="claude-opus-4-6"),
            _cc("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "one"}]),
            {"type": "progress", "uuid": "p"},
            _cc("assistant", [_tool_use("t2")], id="m1", model="claude-opus-4-6"),
            _cc(
                "user",
                [{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}, image]}],
            ),
            _cc("assistant", [{"type": "text", "text": "done"}], id="m2", model="claude-opus-4-6"),
        ],
    )
    transcript = load_transcript(path)
    assert transcript.messages == [
        {"role": "user", "content": "read both"},
        {"role": "assistant", "content": [_without_caller(_tool_use("t1")), _without_caller(_tool_use("t2"))]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}, image]},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    assert transcript.metadata["models"] == {"claude-opus-4-6": 2}  # counted per API response, not per line


def _without_caller(block: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key != "caller"}


def test_claude_code_skips_other_threads_api_errors_and_unknown_blocks(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "session.jsonl",
        [
            {"type": "summary", "summary": "Fix the login bug", "leafUuid": "x"},
            _cc("user", "hello"),
            {**_cc("user", "subagent prompt"), "isSidechain": True},
            _cc(
                "assistant",
                [
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                    {"type": "text", "text": "hi"},
                ],
                id="m1",
                model="claude-sonnet-4-5",
            ),
            {
                **_cc("assistant", [{"type": "text", "text": "API Error: 529"}], id="m2", model="<synthetic>"),
                "isApiErrorMessage": True,
            },
            {
                "type": "system",
                "subtype": "compact_boundary",
                "compactMetadata": {"trigger": "manual", "preTokens": 10},
                "uuid": "b",
            },
            {**_cc("user", "Summary of the conversation"), "isCompactSummary": True},
        ],
    )
    transcript = load_transcript(path)
    assert [m["content"] for m in transcript.messages] == [
        "hello",
        [{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "hi"}],
        "Summary of the conversation",
    ]
    metadata = transcript.metadata
    assert metadata["skipped_records"] == {"sidechain": 1, "api_error_message": 1}
    assert metadata["skipped_blocks"] == {"server_tool_use": 1}
    assert metadata["compactions"] == [{"message_index": 2, "compact_metadata": {"trigger": "manual", "preTokens": 10}}]
    assert metadata["compact_summary_indexes"] == [2]
    assert transcript.title == "Fix the login bug"
    assert transcript.model == "claude-sonnet-4-5"


def test_claude_code_title_falls_back_to_a_slash_command_with_its_arguments(tmp_path: Path) -> None:
    command = (
        "<command-message>fix</command-message>\n<command-name>/fix</command-name>\n"
        "<command-args>the flaky test</command-args>"
    )
    path = _write_jsonl(
        tmp_path / "s.jsonl", [_cc("user", command), _cc("assistant", [{"type": "text", "text": "ok"}], id="m")]
    )
    assert load_transcript(path).title == "/fix the flaky test"


def test_codex_shapes_beyond_the_corpus(tmp_path: Path) -> None:
    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "t", "type": "response_item", "payload": payload}

    path = _write_jsonl(
        tmp_path / "rollout.jsonl",
        [
            {"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "instructions": "Be brief."}},
            item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is this?"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                    ],
                }
            ),
            item({"type": "reasoning", "encrypted_content": "gAAA"}),
            item({"type": "local_shell_call", "call_id": "c1", "action": {"type": "exec", "command": ["ls"]}}),
            item({"type": "function_call_output", "call_id": "c1", "output": {"content": "denied", "success": False}}),
            {"timestamp": "t", "type": "compacted", "payload": {"message": "Earlier: the user asked about an image."}},
            item(
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "Plan mode is off."}],
                }
            ),
        ],
    )
    transcript = load_transcript(path)
    assert transcript.system == [{"role": "system", "text": "Be brief."}]
    assert transcript.messages == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "local_shell", "arguments": '{"type": "exec", "command": ["ls"]}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "denied"},
        {"role": "user", "content": "Earlier: the user asked about an image.", "name": "compact_summary"},
        {"role": "developer", "content": "Plan mode is off."},  # not leading: stays in place
    ]
    metadata = transcript.metadata
    assert metadata["failed_tool_call_ids"] == ["c1"]
    assert metadata["compactions"] == [{"message_index": 3}] and metadata["compact_summary_indexes"] == [3]
    assert metadata["reasoning_dropped"] == 1


def test_anthropic_request_body_passes_through(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "a.txt"}]},
    ]
    path = tmp_path / "body.json"
    path.write_text(json.dumps({"model": "claude-opus-4-6", "system": "Be brief.", "messages": messages}, indent=2))
    assert detect_import_format(path) == "anthropic"
    transcript = load_transcript(path)
    assert (transcript.format, transcript.model, transcript.title) == ("anthropic", "claude-opus-4-6", "hi")
    assert transcript.system == [{"role": "system", "text": "Be brief."}]
    assert transcript.messages == messages


@pytest.mark.parametrize("layout", ["list", "body-one-line", "jsonl"])
def test_openai_messages_pass_through(tmp_path: Path, layout: str) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "a.txt"},
    ]
    path = tmp_path / "chat.json"
    if layout == "list":
        path.write_text(json.dumps(messages))
    elif layout == "body-one-line":
        path.write_text(json.dumps({"model": "gpt-4.1", "messages": messages}))
    else:
        _write_jsonl(path, messages)
    assert detect_import_format(path) == "openai"
    transcript = load_transcript(path)
    # The system message that opens the conversation is the session's system prompt, as `append`
    # reads it: not a message of the history that compaction could fold away.
    assert transcript.format == "openai" and transcript.messages == messages[1:]
    assert transcript.system == [{"role": "system", "text": "Be brief."}]


def test_plain_chat_lines_read_as_normalized(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "chat.jsonl", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    assert detect_import_format(path) == "normalized"
    assert load_transcript(path).messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


# -- bad input ------------------------------------------------------------------------------------


def _error(path: Path, format: str | None = None) -> TranscriptError:
    with pytest.raises(TranscriptError) as caught:
        load_transcript(path, format)  # type: ignore[arg-type]
    assert str(path) in str(caught.value)
    return caught.value


def _skipped(path: Path, format: str | None = None) -> ImportedTranscript:
    """`path` read with its bad lines skipped (issue 26, item 10): one bad line must not stop every
    later import of a session."""
    transcript = load_transcript(path, format)  # type: ignore[arg-type]
    assert transcript.unreadable >= 1 and "could not be read and" in transcript.warnings[0]
    return transcript


def test_a_malformed_line_is_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(_cc("user", "hi")) + "\n\n" + '{"type": "assistant", "message": \n')
    transcript = _skipped(path)
    assert transcript.unreadable == 1 and "line 3: malformed JSON" in transcript.warnings[0]
    assert transcript.messages == [{"role": "user", "content": "hi"}]


def test_invalid_utf8_is_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(_cc("user", "hi")).encode() + b'\n{"type": "user", "x": "\xff\xfe"}\n')
    assert "line 2: invalid UTF-8" in _skipped(path).warnings[0]


def test_a_file_of_nothing_but_bad_lines_is_an_error_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "user", "message": {"role": "user", "content": "cut\n\xff\n')
    error = _error(path, "claude-code")
    assert "no conversation messages found" in str(error) and "line 1: malformed JSON" in str(error)


@pytest.mark.parametrize("content", [b"", b"\n  \n\t\n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    assert "empty" in str(_error(path))
    with pytest.raises(TranscriptError, match="empty"):
        detect_import_format(path)


def test_unknown_format_names_the_first_unrecognized_line(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "x.jsonl", [{"event": "start"}, {"event": "stop"}])
    with pytest.raises(TranscriptError, match="line 1: not a recognized transcript record") as caught:
        detect_import_format(path)
    assert caught.value.line == 1


def test_wrong_types_are_skipped_naming_the_line_and_the_field(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "s.jsonl", [_cc("user", "hi"), _cc("assistant", 5, id="m")])
    assert "line 2: message.content: expected string or array, got number" in _skipped(path).warnings[0]
    path = _write_jsonl(tmp_path / "s.jsonl", [_cc("user", "hi"), _cc("assistant", [{"type": "tool_use", "id": 7}])])
    assert "message.content[0].id: expected string, got number" in _skipped(path).warnings[0]


def test_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(_cc("user", "hi")) + "\n[1, 2]\n")
    assert "line 2: expected a JSON object, got array" in _skipped(path, "claude-code").warnings[0]


def test_records_but_no_conversation(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "s.jsonl", [{"type": "progress", "uuid": "p"}])
    assert "no conversation messages" in str(_error(path))


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    _error(path)


def test_missing_file_and_unknown_format_name(tmp_path: Path) -> None:
    assert "cannot open" in str(_error(tmp_path / "nope.jsonl", "codex"))
    path = _write_jsonl(tmp_path / "s.jsonl", [_cc("user", "hi")])
    assert "unknown import format 'gemini'" in str(_error(path, "gemini"))


@pytest.mark.parametrize("seed", range(5))
def test_binary_garbage_never_crashes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    with pytest.raises(TranscriptError):
        detect_import_format(path)
    for format in IMPORT_FORMATS:
        _error(path, format)


@needs_corpus
@pytest.mark.parametrize("format", IMPORT_FORMATS)
def test_a_corpus_file_read_as_the_wrong_format_is_a_located_error(format: str) -> None:
    # A Codex rollout fits none of the other readers; read as codex it must succeed.
    for path in CODEX_FILES:
        if format == "codex":
            assert load_transcript(path, format).messages
        else:
            _error(path, format)

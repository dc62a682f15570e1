"""Every corpus transcript goes through import → SQLite → render and comes back with nothing lost.

Normalized files are rendered in OpenAI format and compared with the file line by line; raw
Claude Code sessions are rendered in Anthropic format and compared with what the importer read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_files, corpus_params, needs_corpus
from test_importers import misplaced_result
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.compaction.engine import CONTINUE_TEXT
from contextfold.config import load_settings
from contextfold.formats import INTERRUPTED_RESULT
from contextfold.importers import load_transcript
from contextfold.service.facade import ContextService

pytestmark = [pytest.mark.anyio, needs_corpus]

NORMALIZED = corpus_files("normalized/*.jsonl")
CLAUDE_CODE = corpus_files("raw/claude-code-*/**/*.jsonl")
CODEX = corpus_files("raw/codex-*/**/*.jsonl")


@pytest.fixture
async def service(tmp_path: Path):
    # Truncation at ingest is switched off here: these tests are about the formats and the store.
    # (Spilled outputs are checked against the originals in test_ingest.py.)
    unlimited = {"max_lines": 10**9, "max_bytes": 10**12, "max_share_chars": 10**12, "context_window": 0}
    settings = load_settings({"home": tmp_path, **unlimited}, environ={})
    async with await ContextService.open(settings) as svc:
        yield svc


def _args(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _expected_openai(lines: list[dict]) -> list[dict]:
    """The normalized lines as OpenAI messages, reduced to what must survive."""
    out = []
    for line in lines:
        role = line["role"]
        if role == "user" and line.get("name") in ("system", "developer"):
            role = line["name"]
        entry: dict[str, Any] = {"role": role, "content": line["content"] or ""}
        if line.get("tool_calls"):
            entry["calls"] = [(c["id"], c["name"], _args(c["arguments"])) for c in line["tool_calls"]]
        if role == "tool":
            entry["tool_call_id"] = line["tool_call_id"]
        out.append(entry)
    return out


def _actual_openai(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p["text"] for p in content if p.get("type") == "text")
        entry: dict[str, Any] = {"role": m["role"], "content": content or ""}
        if m.get("tool_calls"):
            entry["calls"] = [
                (c["id"], c["function"]["name"], _args(c["function"]["arguments"])) for c in m["tool_calls"]
            ]
        if m["role"] == "tool":
            entry["tool_call_id"] = m["tool_call_id"]
        out.append(entry)
    return out


def _tool_runs_sorted(messages: list[dict]) -> list[dict]:
    """Results of parallel calls may come in any order (the API matches them by id): sort each run."""
    out: list[dict] = []
    run: list[dict] = []
    for m in [*messages, {"role": "end"}]:
        if m["role"] == "tool":
            run.append(m)
            continue
        out += sorted(run, key=lambda r: r["tool_call_id"])
        run = []
        out.append(m)
    return out[:-1]


def _unanswered(lines: list[dict]) -> set[str]:
    called = [c["id"] for line in lines for c in line.get("tool_calls") or []]
    answered = [line["tool_call_id"] for line in lines if line["role"] == "tool"]
    pending = list(called)
    for call_id in answered:
        pending.remove(call_id)
    return set(pending)


@pytest.mark.parametrize("path", corpus_params(NORMALIZED, id=lambda p: p.name[:60]))
async def test_normalized_file_renders_back_in_openai_format(service, path: Path):
    if (defect := misplaced_result(path)) is not None:
        pytest.skip(defect)
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    result = await service.import_transcript(path, format="normalized")
    context = await service.get_context(result.session_id, format="openai")
    assert_openai_valid({"messages": context.messages})

    actual = _actual_openai(context.messages)
    # A call the transcript never answered comes back with an "interrupted" result (both APIs
    # reject an unanswered call); those are the only additions allowed.
    unanswered = _unanswered(lines)
    added = [m for m in actual if m["role"] == "tool" and m["content"] == INTERRUPTED_RESULT]
    assert {m["tool_call_id"] for m in added} == unanswered
    actual = [m for m in actual if m not in added]
    assert _tool_runs_sorted(actual) == _tool_runs_sorted(_expected_openai(lines))

    # Every result is attached to its call: nothing is left pending but the unanswered ones.
    messages = await service.store.load_messages(result.session_id)
    pending = {p.call_id for m in messages for p in m.tool_parts if not p.is_finished}
    assert pending == unanswered


def _anthropic_blocks(messages: list[dict]) -> list[tuple]:
    """Anthropic messages as one flat list of (role, block) with what must survive of each block."""
    flat: list[tuple] = []
    for m in messages:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks:
            kind = b["type"]
            if kind == "text":
                key: tuple = ("text", b["text"])
            elif kind == "tool_use":
                key = ("tool_use", b["id"], b["name"], json.dumps(b["input"], sort_keys=True))
            elif kind == "tool_result":
                c = b.get("content", "")
                if isinstance(c, list):
                    c = [x.get("text", x.get("source", {}).get("media_type")) for x in c]
                    c = "\n".join(str(x) for x in c)
                key = ("tool_result", b["tool_use_id"], c, bool(b.get("is_error")))
            elif kind == "thinking":
                key = ("thinking", b["thinking"])
            elif kind == "redacted_thinking":
                key = ("redacted_thinking", b["data"])
            else:
                key = (kind, json.dumps(b.get("source"), sort_keys=True))
            flat.append((m["role"], key))
    return flat


@pytest.mark.parametrize("path", corpus_params(CLAUDE_CODE, id=lambda p: p.name[:50]))
async def test_claude_code_session_round_trips_in_anthropic_format(service, path: Path):
    imported = load_transcript(path)
    assert imported.format == "anthropic"
    result = await service.import_transcript(path)
    context = await service.get_context(result.session_id, format="anthropic")
    body = {"messages": context.messages, **({"system": context.system} if context.system else {})}
    assert_anthropic_valid(body)

    # Claude Code's own compaction is replayed (issue 13): the view is its last summary and what
    # followed it, after the marker (and a continue prompt when the model answered the summary).
    start = imported.compactions[-1].summary_index + 1 if imported.compactions else 0
    expected = [b for b in _anthropic_blocks(imported.messages[start:]) if not _dropped_on_render(b)]
    actual = _anthropic_blocks(context.messages)
    if imported.compactions:
        summary = ("assistant", ("text", imported.messages[start - 1]["content"]))
        actual = actual[actual.index(summary) + 1 :]
        if actual[0] == ("user", ("text", CONTINUE_TEXT)):
            actual = actual[1:]
    # A call the session never answered (the user interrupted it) is sent with an "interrupted"
    # result, as the API requires; those are the only additions allowed.
    added = [b for b in actual if b[1][0] == "tool_result" and b[1][2] == INTERRUPTED_RESULT and b not in expected]
    assert {b[1][1] for b in added} == _unanswered_calls(expected)
    actual = [b for b in actual if b not in added]
    assert _result_runs_sorted(actual) == _result_runs_sorted(expected)


def _unanswered_calls(blocks: list[tuple]) -> set[str]:
    called = {key[1] for _, key in blocks if key[0] == "tool_use"}
    return called - {key[1] for _, key in blocks if key[0] == "tool_result"}


def _result_runs_sorted(blocks: list[tuple]) -> list[tuple]:
    """Results of parallel calls may come in any order (matched by id): sort each run of them."""
    out: list[tuple] = []
    run: list[tuple] = []
    for block in [*blocks, ("end", ("end",))]:
        if block[1][0] == "tool_result":
            run.append(block)
            continue
        out += sorted(run, key=lambda b: b[1][1])
        run = []
        out.append(block)
    return out[:-1]


def _dropped_on_render(block: tuple) -> bool:
    """What the renderer leaves out on purpose because the API would reject it."""
    role, key = block
    return key[0] == "text" and not key[1].strip()


@pytest.mark.parametrize("path", corpus_params(CODEX, id=lambda p: p.name[:50]))
async def test_codex_rollout_round_trips_in_openai_format(service, path: Path):
    imported = load_transcript(path)
    result = await service.import_transcript(path)
    context = await service.get_context(result.session_id, format="openai")
    assert_openai_valid({"messages": context.messages})
    expected = [{"role": p["role"], "content": p["text"]} for p in imported.system]
    expected += _actual_openai(imported.messages)
    actual = _actual_openai(context.messages)
    assert _tool_runs_sorted(actual) == _tool_runs_sorted(expected)

"""Issue 4 end to end: anchored compaction through the service and over MCP, with every summarizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _corpus_edits import calls, edited
from conftest import corpus_files, corpus_params, needs_corpus
from fake_anthropic import VALID_SUMMARY, malformed_json, message_reply, serve_fake_anthropic, server_error, slow
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.compaction.base import SummaryOutcome, SummaryRequest
from contextfold.compaction.facts import user_instruction
from contextfold.compaction.pins import MAX_PINNED_CONSTRAINTS, names_file
from contextfold.compaction.template import FILES, GOAL, NEXT_STEPS, SECTIONS, missing_sections, parse_summary
from contextfold.compaction.userwords import QUOTE_CHARS
from contextfold.config import Settings, load_settings
from contextfold.domain import CompactionRecord
from contextfold.mcpserver.tools import build_server
from contextfold.service.facade import CompactionFailed, ContextService

MAX_ATTEMPTS = Settings.model_fields["recovery_attempts"].default

pytestmark = pytest.mark.anyio

LONG = [p for p in corpus_files("normalized/*.jsonl") if p.stat().st_size > 100_000]


@pytest.fixture(autouse=True)
def no_anthropic_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _settings(tmp_path: Path, **overrides):
    return load_settings({"home": tmp_path, **overrides}, environ={})


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(_settings(tmp_path)) as svc:
        yield svc


def _call(call_id: str, name: str, args: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


@needs_corpus
@pytest.mark.parametrize("path", corpus_params(LONG, id=lambda p: p.name[:50]))
async def test_extractive_compaction_of_long_corpus_sessions(service, path: Path):
    result = await service.import_transcript(path, format="normalized", model="gpt-4o")
    session_id = result.session_id
    compacted = await service.compact(session_id)

    assert compacted.compacted and compacted.summarizer == "extractive"
    assert any(f.startswith("anthropic: not configured") for f in compacted.fallbacks)
    status = compacted.status
    assert status.tokens_in_view < status.usable / 2, (status.tokens_in_view, status.usable)
    assert compacted.tokens_after < compacted.tokens_before

    summary = await service.summary_text(session_id)
    assert missing_sections(summary) == []
    parsed = parse_summary(summary)

    # Every file edited in the compacted part is named exactly under Relevant Files.
    messages = await service.store.load_messages(session_id)
    head_ids = set()
    tail_start = compacted.tail_start_id
    for m in messages:
        if m.id == tail_start or m.is_compaction:
            break
        head_ids.add(m.id)
    # Read off the lines in every shape real edit calls take (`_corpus_edits`); a call whose
    # result is a tool error edited nothing.
    lines = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
    head_calls = {p.call_id for m in messages if m.id in head_ids for p in m.tool_parts}
    edited_in_head = {file for call in calls(lines) if call.id in head_calls and (file := edited(call)) is not None}
    for file in edited_in_head:
        assert names_file(parsed, file), file  # whole, or relative to the root Critical Context states

    # The latest user instruction is kept: in the summary, or verbatim in the tail. (Harness
    # boilerplate in the user role, such as mini-swe-agent's format reminders, is not one.)
    context = await service.get_context(session_id, format="openai")
    instructions = [
        (m, user_instruction(m, previous=messages[i - 1] if i else None))
        for i, m in enumerate(messages)
        if not m.is_compaction
    ]
    latest, text = [(m, t) for m, t in instructions if t][-1]
    in_tail = any(latest.text == m.get("content") for m in context.messages)
    assert in_tail or text[:60] in summary

    # The view is [marker, summary, tail…] and valid for both APIs.
    system_offset = sum(1 for m in context.messages if m["role"] in ("system", "developer"))
    view = context.messages[system_offset:]
    assert view[0]["role"] == "user" and view[1]["role"] == "assistant"
    assert view[1]["content"] == summary
    assert_openai_valid({"messages": context.messages})
    anthropic = await service.get_context(session_id, format="anthropic")
    assert_anthropic_valid(
        {"messages": anthropic.messages, **({"system": anthropic.system} if anthropic.system else {})}
    )

    history = await service.store.compactions(session_id)
    assert len(history) == 1 and history[0].summarizer == "extractive"


async def _agent_turns(service: ContextService, session_id: str) -> None:
    await service.append(
        session_id,
        [
            {"role": "user", "content": "Fix the parser in src/parser.py. Never touch tests/fixtures/."},
            {
                "role": "assistant",
                "content": "I'll plan it first.",
                "tool_calls": [
                    _call(
                        "t1",
                        "TodoWrite",
                        {
                            "todos": [
                                {"content": "Fix the tokenizer bug", "status": "in_progress"},
                                {"content": "Add a regression test", "status": "pending"},
                            ]
                        },
                    ),
                    _call("e1", "Edit", {"file_path": "src/parser.py", "old_string": "a", "new_string": "b"}),
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "Todos updated"},
            {"role": "tool", "tool_call_id": "e1", "content": "The file src/parser.py has been updated."},
        ],
    )
    for i in range(6):
        await service.append(
            session_id,
            [
                {"role": "user", "content": f"Keep going, step {i}."},
                {"role": "assistant", "content": f"Working on step {i}. " + "detail " * 300},
            ],
        )


async def test_a_second_compaction_updates_the_first(tmp_path: Path):
    settings = _settings(tmp_path, preserve_recent_tokens=800)
    async with await ContextService.open(settings) as service:
        await service.open_session("s", model="gpt-4o")
        await _agent_turns(service, "s")
        first = await service.compact("s")
        assert first.compacted
        summary1 = parse_summary(await service.summary_text("s"))
        assert any("Never touch tests/fixtures/" in c for c in summary1["Constraints & Preferences"])
        assert any("Fix the tokenizer bug" in b for b in summary1["In Progress"])

        # The todo gets done; more turns; compact again.
        await service.append(
            "s",
            [
                {"role": "user", "content": "Now finish up."},
                {
                    "role": "assistant",
                    "content": "Marking it done.",
                    "tool_calls": [
                        _call(
                            "t2",
                            "TodoWrite",
                            {
                                "todos": [
                                    {"content": "Fix the tokenizer bug", "status": "completed"},
                                    {"content": "Add a regression test", "status": "in_progress"},
                                ]
                            },
                        ),
                    ],
                },
                {"role": "tool", "tool_call_id": "t2", "content": "Todos updated"},
            ],
        )
        for i in range(4):
            await service.append(
                "s",
                [
                    {"role": "user", "content": f"More, round {i}."},
                    {"role": "assistant", "content": "ok " * 300},
                ],
            )
        prepared = await service.compactor.prepare("s")
        assert prepared.plan.previous is not None and "## Goal" in prepared.plan.previous
        assert not any(m.summary or m.compaction for m in prepared.plan.head)  # the anchor is not history

        second = await service.compact("s")
        assert second.compacted
        summary2 = parse_summary(await service.summary_text("s"))
        assert any("Never touch tests/fixtures/" in c for c in summary2["Constraints & Preferences"])
        assert any("Fix the tokenizer bug" in b for b in summary2["Done"])
        assert not any("Fix the tokenizer bug" in b for b in summary2["In Progress"])
        assert any("src/parser.py" in f for f in summary2[FILES])
        assert len(await service.store.compactions("s")) == 2
        status = await service.status("s")
        assert status.compaction is not None and status.compaction.compactions == 2
        assert status.compaction.tokens_freed > 0
        assert [r.tokens_before for r in status.compaction.recent][0] > 0  # newest first, with details


async def test_a_user_stating_many_rules_does_not_grow_the_summary_without_bound(tmp_path: Path):
    """Pins re-add only the newest MAX_PINNED_CONSTRAINTS rules; before the cap every compaction
    re-pinned every rule ever stated, until compaction freed nothing. The user's messages are also
    quoted (issue 16), newest first within QUOTE_CHARS, so older quotes shrink to their openings
    and the rules said after an opening are kept as rules, under the cap."""
    settings = _settings(tmp_path, preserve_recent_tokens=0)
    async with await ContextService.open(settings) as service:
        await service.open_session("s", model="gpt-4o")
        sizes = []
        quoted = []
        for round_ in range(12):
            await service.append(
                "s",
                [
                    message
                    for i in range(5)
                    for message in (
                        {
                            "role": "user",
                            "content": f"Step {round_}.{i}: "
                            + "context " * 30
                            + f"You must keep module_{round_}_{i} backwards compatible.",
                        },
                        {"role": "assistant", "content": f"Understood, step {round_}.{i}. " + "notes " * 200},
                    )
                ],
            )
            result = await service.compact("s", summarizer="extractive")
            assert result.compacted
            constraints = parse_summary(await service.summary_text("s"))["Constraints & Preferences"]
            sizes.append(len([c for c in constraints if not c.startswith("User")]))
            quoted.append(sum(len(c) for c in constraints if c.startswith("User")))
        assert max(sizes) <= MAX_PINNED_CONSTRAINTS
        assert max(quoted) <= QUOTE_CHARS + 20 * len("User [m999]: ")
        rules = parse_summary(await service.summary_text("s"))["Constraints & Preferences"]
        assert any("module_11_4" in r for r in rules)  # the newest rule is always kept
        pinned = [p for c in await service.store.compactions("s", limit=1) for p in c.pinned]
        assert any("not re-pinned (cap 30)" in p for p in pinned)


async def test_anthropic_summarizer_through_the_real_sdk(tmp_path: Path, monkeypatch):
    with serve_fake_anthropic() as fake:
        fake.script(message_reply(VALID_SUMMARY))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        async with await ContextService.open(_settings(tmp_path, preserve_recent_tokens=800)) as service:
            await service.open_session("a", model="claude-sonnet-4-5")
            await _agent_turns(service, "a")
            result = await service.compact("a", instructions="keep the parser details")
            summary = await service.summary_text("a")
        assert "src/parser.py" in summary
        assert result.summarizer == "anthropic" and result.fallbacks == []
        body = fake.last.body
        assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] > 0
        system = body["system"] if isinstance(body["system"], str) else json.dumps(body["system"])
        for section in ("## Goal", "## Constraints & Preferences", "### Done", "## Relevant Files"):
            assert section in system
        assert "keep the parser details" in system
        assert "src/parser.py" in json.dumps(body["messages"])
        # The model's summary never named the edited file; code pinned it in.
        assert "src/parser.py" not in VALID_SUMMARY
        assert any("src/parser.py" in p for p in result.pinned)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [(server_error(), "HTTP 500"), (slow(3.0), "timed out"), (malformed_json(), "malformed")],
    ids=["500", "timeout", "malformed"],
)
async def test_anthropic_failures_fall_back_to_extractive_with_the_reason(tmp_path: Path, monkeypatch, reply, reason):
    with serve_fake_anthropic() as fake:
        fake.script(reply)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        settings = _settings(tmp_path, preserve_recent_tokens=800, anthropic_timeout=0.5, anthropic_max_retries=0)
        async with await ContextService.open(settings) as service:
            await service.open_session("f", model="gpt-4o")
            await _agent_turns(service, "f")
            result = await service.compact("f", summarizer="anthropic")
            history = await service.store.compactions("f")
        assert result.compacted and result.summarizer == "extractive"
        assert len(history) == 1 and history[0].summarizer == "extractive"
        assert any(f.startswith("anthropic:") and reason in f for f in history[0].fallbacks), history[0].fallbacks


async def _fake_llm(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
    assert "## Relevant Files" in (params.system_prompt or "")
    return CreateMessageResult(
        role="assistant", model="client-model", content=TextContent(type="text", text=VALID_SUMMARY)
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sampling_summarizer_in_both_protocol_eras(tmp_path: Path, mode: str):
    server = build_server(_settings(tmp_path, preserve_recent_tokens=800))
    async with Client(server, mode=mode, sampling_callback=_fake_llm) as client:
        await _seed_over_mcp(client)
        seen: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))

        result = await client.call_tool("compact", {"session_id": "m"}, progress_callback=on_progress)
        assert not result.is_error, result.content
        body = result.structured_content
        assert body["summarizer"] == "sampling" and body["compacted"]
        assert [p for p, _ in seen] == sorted(p for p, _ in seen) and seen[-1][0] == 1.0
        assert any("summarizing" in (m or "") for _, m in seen)
        summary = await client.read_resource("contextfold://sessions/m/summary")
        assert "## Goal" in summary.contents[0].text
        status = await client.call_tool("status", {"session_id": "m"})
        assert status.structured_content["compaction"]["compactions"] == 1


async def test_a_client_without_sampling_falls_back(tmp_path: Path):
    server = build_server(_settings(tmp_path, preserve_recent_tokens=800))
    async with Client(server) as client:
        await _seed_over_mcp(client)
        result = await client.call_tool("compact", {"session_id": "m", "summarizer": "sampling"})
        body = result.structured_content
        assert body["summarizer"] == "extractive"
        assert any(f.startswith("sampling:") for f in body["fallbacks"])
        prompt = await client.get_prompt("anchored_summary", {})
        assert "## Relevant Files" in prompt.messages[0].content.text
        summarized = await client.call_tool(
            "summarize", {"messages": [{"role": "user", "content": "Refactor src/app.py. Never break the CLI."}]}
        )
        assert not summarized.is_error, summarized.content
        assert all(
            f"## {s}" in summarized.structured_content["summary"]
            or f"### {s}" in summarized.structured_content["summary"]
            for s in SECTIONS
        )


async def _seed_over_mcp(client: Client) -> None:
    await client.call_tool("session_open", {"session_id": "m", "model": "gpt-4o"})
    for i in range(8):
        await client.call_tool(
            "append",
            {
                "session_id": "m",
                "messages": [
                    {"role": "user", "content": f"Step {i}: update src/module_{i}.py"},
                    {"role": "assistant", "content": "done " * 200},
                ],
            },
        )


def _overflowing(tmp_path: Path, **extra):
    # A small window, and no truncation at ingest, so one huge output can overflow it.
    return _settings(
        tmp_path,
        context_window=20_000,
        max_output=2_000,
        max_bytes=10**9,
        max_lines=10**9,
        context_share=1.0,
        max_share_chars=10**9,
        **extra,
    )


async def test_overflow_recovered_by_compaction(tmp_path: Path):
    async with await ContextService.open(_overflowing(tmp_path)) as service:
        await service.open_session("o", model="gpt-4o")
        for i in range(30):
            await service.append(
                "o",
                [
                    {"role": "user", "content": f"Step {i}"},
                    {"role": "assistant", "content": "words " * 600},
                ],
            )
        assert (await service.status("o")).state == "overflow"
        result = await service.compact("o")
        assert result.compacted and result.attempts == 1 and result.status.state != "overflow"


async def _huge_output_turn(service: ContextService, session_id: str, chars: int) -> None:
    await service.append(
        session_id,
        [
            {"role": "user", "content": "dump"},
            {"role": "assistant", "content": None, "tool_calls": [_call("h", "bash", {"cmd": "cat big.log"})]},
            {"role": "tool", "tool_call_id": "h", "content": "log line\n" * (chars // 9)},
        ],
    )


async def test_nothing_to_summarize_but_an_oversized_output_is_cut_once(tmp_path: Path):
    async with await ContextService.open(_overflowing(tmp_path)) as service:
        await service.open_session("c", model="gpt-4o")
        await _huge_output_turn(service, "c", 100_000)
        rows = await service.store.rows("c")
        # A tail budget that holds the huge assistant message but not the whole turn: the head is
        # one tiny user message, which no summary can beat.
        await service.open_session("c", settings={"preserve_recent_tokens": rows[1].tokens + 1})
        assert (await service.status("c")).state == "overflow"
        result = await service.compact("c")
        assert not result.compacted and result.outputs_cut == 1
        assert result.status.state != "overflow"
        messages = await service.store.load_messages("c")
        part = messages[1].tool_parts[0]
        assert part.view_cap is not None and len(part.output) > 50_000  # cut in view, kept whole
        context = await service.get_context("c")
        assert len(context.messages[-1]["content"]) < 3_000


async def test_nothing_possible_is_a_clear_error(tmp_path: Path):
    async with await ContextService.open(_overflowing(tmp_path)) as service:
        await service.open_session("n", model="gpt-4o")
        await service.append("n", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x " * 30_000}])
        rows = await service.store.rows("n")
        await service.open_session("n", settings={"preserve_recent_tokens": rows[1].tokens + 1})
        with pytest.raises(CompactionFailed, match=r"tokens in view.*usable"):
            await service.compact("n")
        assert await service.store.compactions("n") == []


class _StubbornSummarizer:
    """Writes a summary only slightly smaller than what it replaces: each compaction frees little."""

    name = "stubborn"

    async def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        replaced = sum(m.in_view_tokens for m in request.head)
        replaced += request.counter.count(request.previous) if request.previous else 0
        filler = " ".join(["detail"] * max(1, int(replaced * 0.97)))
        return SummaryOutcome(text=f"## {GOAL}\n- {filler}\n\n## {NEXT_STEPS}\n- go on\n", summarizer=self.name)


async def test_a_summarizer_that_barely_helps_stops_with_a_clear_error(tmp_path: Path, monkeypatch):
    async with await ContextService.open(_overflowing(tmp_path, preserve_recent_tokens=8_000)) as service:
        await service.open_session("l", model="gpt-4o")
        for i in range(40):
            await service.append(
                "l",
                [
                    {"role": "user", "content": f"Step {i}"},
                    {"role": "assistant", "content": "words " * 600},
                ],
            )
        monkeypatch.setattr(service, "_summarizers", lambda *a, **k: [_StubbornSummarizer()])
        with pytest.raises(CompactionFailed, match=r"tokens in view.*usable"):
            await service.compact("l")
        assert 1 <= len(await service.store.compactions("l")) <= MAX_ATTEMPTS


async def test_a_forced_loop_stops_at_the_attempt_bound(tmp_path: Path, monkeypatch):
    """Compaction that reports progress but never gets the session out of overflow."""
    async with await ContextService.open(_overflowing(tmp_path)) as service:
        await service.open_session("f", model="gpt-4o")
        await service.append("f", [{"role": "user", "content": "x " * 30_000}])
        assert (await service.status("f")).state == "overflow"
        calls = []

        async def no_real_progress(*args, **kwargs):
            calls.append(kwargs)
            record = CompactionRecord(
                summarizer="stub",
                tokens_before=30_000,
                tokens_after=29_000,
                head_messages=1,
                head_tokens=1_000,
                summary_tokens=10,
            )
            return record, "## Goal\n- x\n"

        monkeypatch.setattr(service.compactor, "compact", no_real_progress)
        with pytest.raises(CompactionFailed, match="after 3 compactions"):
            await service.compact("f")
        assert len(calls) == MAX_ATTEMPTS
        assert calls[0]["overflow"] is True


async def test_cooldown_refuses_an_automatic_loop(tmp_path: Path):
    async with await ContextService.open(_settings(tmp_path, preserve_recent_tokens=800)) as service:
        await service.open_session("cd", model="gpt-4o")
        await _agent_turns(service, "cd")
        first = await service.compact("cd", auto=True)
        assert first.compacted
        context = await service.get_context("cd")
        assert "Continue with the task" in context.messages[-1]["content"]
        with pytest.raises(CompactionFailed, match="would loop"):
            await service.compact("cd", auto=True)


async def test_dry_run_writes_nothing(service):
    await service.open_session("d", model="gpt-4o", settings={"preserve_recent_tokens": 800})
    await _agent_turns(service, "d")
    before = await service.status("d")
    result = await service.compact("d", dry_run=True)
    assert not result.compacted and result.dry_run and result.summary and "## Goal" in result.summary
    after = await service.status("d")
    assert after.message_count == before.message_count and after.tokens_in_view == before.tokens_in_view
    assert await service.store.compactions("d") == []


def _png_b64(width: int, height: int) -> str:
    import base64
    import struct

    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    return base64.b64encode(header + b"\x00" * 64).decode()


async def test_overflow_from_media_in_the_newest_message_is_replayed_with_placeholders(tmp_path: Path):
    settings = _settings(tmp_path, context_window=8_000, max_output=1_000, preserve_recent_tokens=2_000)
    async with await ContextService.open(settings) as service:
        await service.open_session("img", model="claude-sonnet-4-5")
        for i in range(6):
            await service.append(
                "img",
                [
                    {"role": "user", "content": f"Question {i} about the design of src/app_{i}.py"},
                    {"role": "assistant", "content": "answer " * 150},
                ],
            )
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": _png_b64(2_000, 2_000)},
        }
        await service.append(
            "img",
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is wrong in these screenshots?"},
                        image,
                        image,
                    ],
                }
            ],
        )
        assert (await service.status("img")).state == "overflow"

        result = await service.compact("img")
        assert result.media_omitted == 2 and result.compacted
        assert result.status.state != "overflow"
        context = await service.get_context("img", format="anthropic")
        newest = context.messages[-1]["content"]
        texts = [b["text"] for b in newest if b["type"] == "text"]
        assert "What is wrong in these screenshots?" in texts
        assert sum("too large for the context window" in t for t in texts) == 2
        assert not any(b["type"] == "image" for b in newest)
        stored = await service.store.load_messages("img")
        kept = [p for m in stored for p in m.parts if getattr(p, "type", "") == "file"]
        assert len(kept) == 2 and all(p.data for p in kept)  # originals kept


async def test_switching_models_after_a_compaction_recounts_only_the_view(tmp_path: Path):
    async with await ContextService.open(_settings(tmp_path, preserve_recent_tokens=800)) as service:
        await service.open_session("sw", model="gpt-4o")
        await _agent_turns(service, "sw")
        compacted = await service.compact("sw")
        before = await service.status("sw")
        assert before.tokens_in_view == compacted.tokens_after < before.tokens_stored
        after = await service.open_session("sw", model="claude-opus-4-1")  # another tokenizer
        assert after.tokens_stored > before.tokens_stored
        assert before.tokens_in_view < after.tokens_in_view < after.tokens_stored / 2
        context = await service.get_context("sw")
        assert context.tokens == after.tokens_in_view


async def test_an_imported_chats_opening_system_message_is_the_system_prompt_and_outlives_compaction(
    service, tmp_path: Path
):
    # An OpenAI chat saved as a file opens with its system prompt: it must reach the model after a
    # compaction, not be folded into the summary as the oldest message of the history.
    system = "You are a CTF player. Answer with exactly one shell command per turn."
    messages: list[dict] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Find the flag in ./release."},
    ]
    for i in range(24):
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [_call(f"c{i}", "bash", {"command": f"strings release | sed -n {i}p"})],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}: " + "x" * 4_000})
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": messages}))
    session_id = (await service.import_transcript(path)).session_id
    assert (await service.compact(session_id, summarizer="extractive")).compacted
    sent = (await service.get_context(session_id, format="openai")).messages
    assert sent[0] == {"role": "system", "content": system}
    assert sum(m["role"] == "system" for m in sent) == 1
    assert "Find the flag" in json.dumps(sent)  # the task, in the summary's Goal

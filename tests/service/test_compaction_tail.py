"""Issue 13, compaction that never loses the thread.

After any anchored compaction the newest request and the last answer stay in view: a tail too
big for its budget has its largest outputs cut down in view instead of being summarized away,
and a tail that starts inside a turn is preceded by the request it answers. A compaction that
frees nothing, by contextfold's own count on both sides, is refused with the numbers and writes
nothing. Both wire formats carry the same conversation after a summary, and a summarizer the
caller named but that was not used says why.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_files, needs_corpus
from fake_anthropic import VALID_SUMMARY
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.compaction.chain import Sampled
from contextfold.compaction.engine import CONTINUE_TEXT, summary_budget
from contextfold.compaction.pins import pin_facts
from contextfold.config import load_settings
from contextfold.domain import CompactionPart, Message, TextPart, ToolPart
from contextfold.formats import render
from contextfold.formats.anthropic import CONTINUATION_TEXT
from contextfold.formats.shown import COMPACTION_PROMPT
from contextfold.mcpserver.tools import build_server
from contextfold.service.facade import CompactionFailed, ContextService
from contextfold.tokens.counting import counter_for

pytestmark = pytest.mark.anyio

GPT4O = counter_for("gpt-4o")
REQUEST = "Rename the function foo to bar in utils.py, then run the tests and tell me the result."
ANSWER = "Renamed foo to bar in utils.py and its 3 callers; all 12 tests pass."


@pytest.fixture(autouse=True)
def no_anthropic_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _settings(tmp_path: Path, **overrides: Any):
    return load_settings({"home": tmp_path, **overrides}, environ={})


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(_settings(tmp_path)) as svc:
        yield svc


def _call(call_id: str, command: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": command})}}


def _dense(nbytes: int) -> str:
    return base64.b64encode(random.Random(13).randbytes(nbytes)).decode("ascii")


async def _conversation(service: ContextService, session_id: str) -> dict[str, list[tuple[str, str]]]:
    """Each format's messages as (role, text), tool traffic shown as `call:ID` and `result:ID`."""
    seen = {}
    for fmt in ("openai", "anthropic"):
        context = await service.get_context(session_id, format=fmt)
        body = {"messages": context.messages, **({"system": context.system} if context.system else {})}
        (assert_openai_valid if fmt == "openai" else assert_anthropic_valid)(body)
        seen[fmt] = [_flat(m) for m in context.messages]
    return seen


def _flat(message: dict) -> tuple[str, str]:
    content = message.get("content")
    if message["role"] == "tool":
        return "user", f"result:{message['tool_call_id']}"
    items: list[str] = []
    if isinstance(content, str):
        items.append(content)
    for block in content if isinstance(content, list) else []:
        if block["type"] == "text":
            items.append(block["text"])
        elif block["type"] == "tool_use":
            items.append(f"call:{block['id']}")
        elif block["type"] == "tool_result":
            items.append(f"result:{block['tool_use_id']}")
    items += [f"call:{c['id']}" for c in message.get("tool_calls") or []]
    return message["role"], "\n".join(items)


# -- the newest request and the last answer stay -----------------------------------------------


async def test_a_one_turn_session_is_refused_and_keeps_its_request_and_answer(service):
    # Before: the client's 148-token summary replaced both messages, [marker, summary] was all
    # the model had left, and the request and the answer were gone from its view.
    await service.open_session("one", model="gpt-4o")
    await service.append(
        "one",
        [
            {"role": "user", "content": REQUEST + " Keep the old name as an alias. " * 30},
            {"role": "assistant", "content": ANSWER + " I also checked the docs, which mention foo twice. " * 30},
        ],
    )
    before = await _conversation(service, "one")
    with pytest.raises(CompactionFailed, match=r"nothing to compact: .* all 2 messages \([\d,]+ tokens"):
        await service.compact("one", summarizer="sampling", sampled=Sampled(VALID_SUMMARY, "client-model"))
    assert await _conversation(service, "one") == before
    assert await service.store.compactions("one") == []


async def test_a_head_smaller_than_any_summary_is_refused_before_a_summarizer_runs(tmp_path: Path):
    # Before: the summarizer (here the client's model, by sampling) wrote a summary, and the engine
    # threw it away as larger than the 15 tokens it would replace.
    asked = []

    async def sampling(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(
            role="assistant", model="client-model", content=TextContent(type="text", text=VALID_SUMMARY)
        )

    server = build_server(_settings(tmp_path))
    async with Client(server, sampling_callback=sampling) as client:
        await client.call_tool("session_open", {"session_id": "small", "model": "gpt-4o"})
        turns = [("hi there, fix the bug", "ok"), ("and the test", "done"), ("thanks, now the docs", "sure")]
        for request, answer in turns:
            messages = [{"role": "user", "content": request}, {"role": "assistant", "content": answer}]
            await client.call_tool("append", {"session_id": "small", "messages": messages})
        result = await client.call_tool("compact", {"session_id": "small", "summarizer": "sampling"})
    assert result.is_error
    text = result.content[0].text
    assert "nothing to compact: the 15 tokens before the kept tail are fewer than the smallest summary (" in text, text
    assert asked == []


async def test_a_one_turn_agent_session_keeps_the_request_and_the_final_answer_verbatim(service):
    output = "\n".join(f"tests/test_utils.py::test_case_{i} PASSED" for i in range(400))
    await service.open_session("agent", model="gpt-4o")
    await service.append(
        "agent",
        [
            {"role": "user", "content": REQUEST},
            {
                "role": "assistant",
                "content": "Renaming, then running the tests.",
                "tool_calls": [_call("c1", "pytest -v")],
            },
            {"role": "tool", "tool_call_id": "c1", "content": output},
            {"role": "assistant", "content": ANSWER},
        ],
    )
    result = await service.compact("agent", summarizer="extractive")
    assert result.compacted and result.head_messages == 2 and result.tokens_after < result.tokens_before / 5
    summary = await service.summary_text("agent")
    expected = [("user", COMPACTION_PROMPT), ("assistant", summary), ("user", REQUEST), ("assistant", ANSWER)]
    seen = await _conversation(service, "agent")
    assert seen["openai"] == expected and seen["anthropic"] == expected
    stored = await service.store.load_messages("agent")
    copy = next(m for m in stored if m.metadata.get("copy_of"))
    assert copy.metadata["copy_of"] == stored[0].id and copy.text == REQUEST


async def test_a_last_turn_holding_one_huge_result_keeps_the_turn_and_cuts_the_result(service):
    # 40,960 dense characters: under every ingest cap (no spill) but 28,000 tokens, over the
    # 8,000-token tail budget. Before, nothing was kept verbatim: [marker, summary].
    output = _dense(30 * 1024)
    await service.open_session("big", model="gpt-4o")
    await service.append(
        "big",
        [
            {"role": "user", "content": "List the files and say what each one does."},
            {
                "role": "assistant",
                "content": "The package has 40 modules. " + "One of them does something useful. " * 200,
            },
            {"role": "user", "content": "Show me blob.b64."},
            {"role": "assistant", "content": None, "tool_calls": [_call("c2", "cat blob.b64")]},
            {"role": "tool", "tool_call_id": "c2", "content": output},
        ],
    )
    result = await service.compact("big", summarizer="extractive")
    assert result.outputs_cut == 1 and result.status.tokens_in_view < 2_000, result
    seen = await _conversation(service, "big")
    for fmt in ("openai", "anthropic"):
        assert seen[fmt][-3:] == [("user", "Show me blob.b64."), ("assistant", "call:c2"), ("user", "result:c2")]
    context = await service.get_context("big", format="openai")
    shown = context.messages[-1]["content"]
    assert shown.startswith(output[:500]) and "[omitted" in shown
    assert GPT4O.count(shown) <= 520
    part = next(p for m in await service.store.load_messages("big") for p in m.tool_parts)
    assert part.output == output and part.view_cap  # the store keeps it whole


async def test_a_one_turn_session_with_one_huge_result_is_cut_instead(service):
    await service.open_session("cut", model="gpt-4o")
    await service.append(
        "cut",
        [
            {"role": "user", "content": "Show me blob.b64."},
            {"role": "assistant", "content": None, "tool_calls": [_call("c3", "cat blob.b64")]},
            {"role": "tool", "tool_call_id": "c3", "content": _dense(30 * 1024)},
        ],
    )
    dry = await service.compact("cut", dry_run=True)
    assert dry.dry_run and not dry.compacted and dry.outputs_cut == 1
    assert (await service.status("cut")).tokens_in_view == dry.tokens_before
    result = await service.compact("cut")
    assert not result.compacted and result.outputs_cut == 1 and "cut 1 oversized" in (result.reason or "")
    assert result.tokens_after == dry.tokens_after == result.status.tokens_in_view < 1_000
    assert [role for role, _ in (await _conversation(service, "cut"))["openai"]] == ["user", "assistant", "user"]


async def test_a_compaction_that_frees_nothing_by_our_count_is_refused_and_not_applied(service):
    # The provider reported 50,000 tokens (its count includes tool definitions we never see);
    # measured against that, a compaction that grows our own count looked like a gain.
    await service.open_session("g", model="gpt-4o", settings={"preserve_recent_tokens": 0})
    await service.append(
        "g",
        [
            {"role": "user", "content": "Explain how the cache works. " * 20},
            # Long enough that a summary carrying the user's quoted words and the closing line about
            # the stored history (issue 16) can still be padded to just under it.
            {"role": "assistant", "content": "It keeps the newest entries and drops the oldest. " * 30},
        ],
        usage={"prompt_tokens": 50_000, "completion_tokens": 200},
    )
    head = await service.store.load_messages("g")
    replaced = sum(m.in_view_tokens for m in head)
    budget = summary_budget((await service.status("g")).usable, replaced)  # sizes the pinned quotes (issue 16)
    summary = _summary_of(replaced - 8, head, budget)  # passes the summarizer check, frees nothing with its marker
    before = await _conversation(service, "g")
    with pytest.raises(
        CompactionFailed, match=r"would not free anything: ([\d,]+) tokens in view before, [\d,]+ after"
    ):
        await service.compact("g", summarizer="sampling", sampled=Sampled(summary, "client-model"))
    assert await service.store.compactions("g") == []
    assert await _conversation(service, "g") == before


def _summary_of(tokens: int, head: list[Message], budget: int) -> str:
    """A summary with every section that counts exactly `tokens` once facts are pinned."""
    for words in range(0, 2_000):
        text = VALID_SUMMARY.replace("## Relevant Files", "## Relevant Files\n- notes:" + " more" * words)
        if GPT4O.count(pin_facts(text, head, previous=None, budget_tokens=budget)[0]) == tokens:
            return text
    raise AssertionError(f"no padding gives {tokens} tokens")


# -- what the model reads after a compaction --------------------------------------------------


def test_both_formats_carry_the_same_conversation_after_a_summary():
    call = ToolPart(call_id="c1", name="bash", input={"cmd": "ls"}, state="completed", output="a.py")
    messages = [
        Message(role="user", parts=[CompactionPart()]),
        Message(role="assistant", summary=True, parts=[TextPart(text="## Goal\n- x", synthetic=True)]),
        Message(role="assistant", parts=[TextPart(text="Picking up where I was."), call]),
        Message(role="user", parts=[TextPart(text="And now?")]),
    ]
    expected = [
        ("user", COMPACTION_PROMPT),
        ("assistant", "## Goal\n- x"),
        ("user", CONTINUATION_TEXT),
        ("assistant", "Picking up where I was.\ncall:c1"),
        ("user", "result:c1"),
        ("user", "And now?"),
    ]
    openai = render([], messages, "openai")
    anthropic = render([], messages, "anthropic")
    assert_openai_valid(openai)
    assert_anthropic_valid(anthropic)
    assert [_flat(m) for m in openai["messages"]] == expected
    # Anthropic sends a result and the next user text as one user message, as its API requires.
    assert [_flat(m) for m in anthropic["messages"]] == [*expected[:4], ("user", "result:c1\nAnd now?")]


async def _turns(service: ContextService, session_id: str, *, end_with_user: bool) -> None:
    await service.open_session(session_id, model="gpt-4o", settings={"preserve_recent_tokens": 800})
    for i in range(6):
        await service.append(
            session_id,
            [
                {"role": "user", "content": f"Step {i}: update src/module_{i}.py."},
                {"role": "assistant", "content": f"Updated src/module_{i}.py. " + "detail " * 300},
            ],
        )
    if end_with_user:
        await service.append(session_id, [{"role": "user", "content": "Now add a regression test."}])


async def test_an_automatic_compaction_asks_to_continue_only_when_the_user_is_not_waiting(service):
    await _turns(service, "a", end_with_user=False)
    await _turns(service, "b", end_with_user=True)
    for session_id in ("a", "b"):
        assert (await service.compact(session_id, auto=True)).compacted
    ended = (await _conversation(service, "a"))["openai"]
    assert ended[-1] == ("user", CONTINUE_TEXT)
    waiting = (await _conversation(service, "b"))["openai"]
    assert waiting[-1] == ("user", "Now add a regression test.")
    assert all(text != CONTINUE_TEXT for _, text in waiting)


# -- a named summarizer that was not used ---------------------------------------------------------


def _long_summary() -> str:
    return VALID_SUMMARY.replace("## Relevant Files", "## Relevant Files\n- notes:" + " more" * 3_000)


async def _oversized_sampling(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", model="client-model", content=TextContent(type="text", text=_long_summary())
    )


async def test_a_named_summarizer_that_was_not_used_says_why(tmp_path: Path):
    server = build_server(_settings(tmp_path, preserve_recent_tokens=800))
    async with Client(server, sampling_callback=_oversized_sampling) as client:
        for session_id, choice in (("named", "sampling"), ("chain", "auto")):
            await client.call_tool("session_open", {"session_id": session_id, "model": "gpt-4o"})
            for i in range(8):
                await client.call_tool(
                    "append",
                    {
                        "session_id": session_id,
                        "messages": [
                            {"role": "user", "content": f"Step {i}: update src/module_{i}.py"},
                            {"role": "assistant", "content": "done " * 200},
                        ],
                    },
                )
            result = await client.call_tool("compact", {"session_id": session_id, "summarizer": choice})
            assert not result.is_error, result.content
            body = result.structured_content
            assert body["compacted"] and body["summarizer"] == "extractive"
            assert any(f.startswith("sampling: the summary (") for f in body["fallbacks"]), body["fallbacks"]
            if choice == "sampling":
                assert body["reason"].startswith("the sampling summarizer was asked for but not used: the summary ("), (
                    body
                )
                assert "is not smaller than what it replaces" in body["reason"]
                assert body["reason"].endswith("the extractive summary was kept instead")
            else:
                assert body["reason"] is None  # auto is a chain: falling back is what it is for


# -- on real sessions -------------------------------------------------------------------------------

AGENT_SESSIONS = [
    p
    for p in corpus_files("normalized/*.jsonl")
    if p.name
    in ("claude-code-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", "mini-swe-agent__psf__requests-1142.jsonl")
]
"""Before, compacting these lost the newest request (the first) and the last answer too (the second)."""


@needs_corpus
@pytest.mark.parametrize("path", AGENT_SESSIONS, ids=lambda p: p.name[:40])
async def test_long_agent_sessions_keep_the_newest_request_and_the_last_answer(service, path: Path):
    imported = await service.import_transcript(path, format="normalized", model="gpt-4o")
    session = await service.store.get_session(imported.session_id)
    visible = await service.scope.view(session)
    request = next(m for m in reversed(visible) if m.starts_turn and m.text.strip())
    last = next(m for m in reversed(visible) if m.role == "assistant")
    result = await service.compact(imported.session_id, summarizer="extractive")
    assert result.compacted and result.status.tokens_in_view < result.tokens_before / 2
    after = await service.scope.view(await service.store.get_session(imported.session_id))
    assert any(m.role == "user" and m.text == request.text for m in after), "the newest request left the view"
    assert last.id in {m.id for m in after}, "the last answer left the view"
    assert_openai_valid(render([], after, "openai"))
    assert_anthropic_valid(render([], after, "anthropic"))

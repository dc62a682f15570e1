"""Advice that works and settings that are obeyed (issue 12).

* `status` advises prune only when the prune that would run now frees more than the minimum;
  otherwise the next step that works, compaction. Checked on every long corpus session.
* A prune frees exactly what the view loses, also for outputs the view already shows cut.
* Whether `compact` asks the client's model is decided from the session's effective settings,
  as the summarizer chain is, through a real MCP client talking to `contextfold serve`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
from conftest import corpus_files, corpus_params, needs_corpus
from fake_anthropic import VALID_SUMMARY, serve_fake_anthropic, server_error
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from contextfold.config import load_settings
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import count_message

pytestmark = pytest.mark.anyio

NORMALIZED = [p for p in corpus_files("normalized/*.jsonl") if p.stat().st_size > 100_000]
CLAUDE_CODE = [
    p for p in corpus_files("raw/claude-code-spotter/test/fixtures/transcripts/*.jsonl") if p.stat().st_size > 1_000_000
]
LONG = NORMALIZED + CLAUDE_CODE
RESERVED = 4_000


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        yield svc


def _soft(tokens: int, ratio: float = 0.8, **extra: int) -> dict[str, int]:
    """Session settings that put `tokens` at `ratio` of usable (usable = window − RESERVED)."""
    window = math.ceil(tokens / ratio) + RESERVED
    return {"context_window": window, "input_limit": window, "max_output": RESERVED, "reserved": RESERVED, **extra}


async def _advice_then_prune(service: ContextService, session_id: str) -> tuple[str, bool]:
    """Status's advice, then a real prune right after: the advice must be the one that works."""
    status = await service.status(session_id)
    assert status.state == "soft", status
    session = await service.store.get_session(session_id)
    minimum = service.scope.standing.prune_options(session, service.scope.settings_for(session)).minimum
    advice = status.recommended_action.split(":")[0]
    pruned = await service.prune(session_id)
    if advice == "prune":
        assert pruned.applied and pruned.tokens_freed >= minimum, (status.recommended_action, pruned.reason)
    else:
        assert advice == "compact", status.recommended_action
        assert not pruned.applied, (status.recommended_action, pruned.reason)
    # The status prune returns (worked out on the marked parts in memory) is the status now.
    assert pruned.status.recommended_action == (await service.status(session_id)).recommended_action
    return advice, pruned.applied


@needs_corpus
@pytest.mark.parametrize("path", corpus_params(LONG, id=lambda p: f"{p.parent.name[:4]}/{p.name[:40]}"))
async def test_status_advises_prune_only_when_a_prune_works(service, path: Path):
    claude = "claude-code" in path.name or path in CLAUDE_CODE
    imported = await service.import_transcript(
        path, format="normalized" if path in NORMALIZED else None, model="claude-sonnet-4-5" if claude else "gpt-4o"
    )
    sid = imported.session_id
    tokens = imported.status.tokens_in_view
    seen = set()
    # The session's own rule, then a looser one (no turn protection, a small window) that prunes
    # on most sessions, so both kinds of advice are checked; each prune changes what follows.
    for rule in ({}, {"prune_keep_turns": 0, "prune_protect": 5_000, "prune_minimum": 5_000}):
        await service.open_session(sid, settings=_soft(tokens, **rule))
        seen.add(await _advice_then_prune(service, sid))
        tokens = (await service.status(sid)).tokens_in_view
    if path.name.startswith("claude-code-spotter__ae4a77f8"):
        # The session: 15 outputs would free 8,519 tokens, so prune is not the advice.
        assert ("compact", False) in seen


async def test_an_agent_session_is_advised_to_compact_until_a_prune_would_work(service):
    # One user turn of tool calls fills the window: the last two turns are never pruned, so
    # prune cannot help, and status says compact.
    rule = {"prune_protect": 2_000, "prune_minimum": 5_000}
    await service.open_session("a", model="gpt-4o")
    batch: list[dict] = [{"role": "user", "content": "find the bug"}]
    for i in range(10):
        batch += _tool_turn(f"c{i}", 1_000)
    tokens = (await service.append("a", batch)).status.tokens_in_view
    brief = await service.open_session("a", settings=_soft(tokens, **rule))
    assert brief.state == "soft"
    assert brief.recommended_action.startswith("compact: pruning would free at most")
    assert await _advice_then_prune(service, "a") == ("compact", False)

    # Two more user turns put the first one outside the protected last two: now a prune works.
    for text in ("and the tests?", "thanks"):
        appended = await service.append(
            "a", [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
        )
    brief = await service.open_session("a", settings=_soft(appended.status.tokens_in_view, **rule))
    assert brief.recommended_action.startswith("prune:")
    assert await _advice_then_prune(service, "a") == ("prune", True)
    # What is left to prune after that is not worth it: back to compaction.
    brief = await service.open_session("a", settings=_soft((await service.status("a")).tokens_in_view, **rule))
    assert brief.state == "soft" and brief.recommended_action.startswith("compact: pruning would free")


async def test_a_prune_frees_only_what_the_view_still_holds(tmp_path: Path):
    # Overflow recovery cut a huge output to a preview in view; a later prune of it must take
    # away only what the view still shows, or the session would under-count its context.
    unlimited = {"max_bytes": 10**9, "max_lines": 10**9, "context_share": 1.0, "max_share_chars": 10**9}
    async with await ContextService.open(load_settings({"home": tmp_path, **unlimited}, environ={})) as service:
        await service.open_session("v", model="gpt-4o", settings={"prune_protect": 0, "prune_minimum": 0})
        await service.append("v", [{"role": "user", "content": "dump the log"}, *_tool_turn("h", 30_000)])
        for text in ("next", "and next"):
            await service.append("v", [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
        session = await service.store.get_session("v")
        settings = service.scope.settings_for(session)
        counter = service.scope.counter(session.model, settings)

        async def counted_and_fresh() -> tuple[int, int]:
            session = await service.store.get_session("v")
            view = await service.scope.view(session)
            return session.tokens_in_view, sum(count_message(m, counter).in_view_tokens for m in view)

        assert await service.compactor.cut_oversized("v", 20_000) == 1
        counted, fresh = await counted_and_fresh()
        assert counted == fresh  # the cut is counted as shown, its note of what was left out included
        pruned = await service.prune("v")
        assert pruned.applied and pruned.parts == 1
        counted, fresh = await counted_and_fresh()
        assert counted == fresh


def _tool_turn(call_id: str, words: int) -> list[dict]:
    call = {"id": call_id, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": call_id})}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": " ".join(f"w{i % 97}" for i in range(words))},
    ]


# -- the session's summarizer decides whether the client's model is asked ---------------------------


def _server(home: Path, **env: str) -> StdioServerParameters:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CONTEXTFOLD_"))}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextfold", "serve"],
        env={**environ, "CONTEXTFOLD_HOME": str(home), **env},
    )


class _ClientModel:
    """The client's model behind a sampling callback, counting the requests it gets."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.asked += 1
        return CreateMessageResult(
            role="assistant", model="client-model", content=TextContent(type="text", text=VALID_SUMMARY)
        )


async def _seed(client: Client, session_id: str, settings: dict[str, object]) -> None:
    await client.call_tool(
        "session_open",
        {
            "session_id": session_id,
            "model": "gpt-4o",
            "settings": {
                "preserve_recent_tokens": 800,
                **settings,
            },
        },
    )
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


async def test_a_session_that_chose_sampling_asks_the_client_even_with_an_anthropic_key(tmp_path: Path):
    model = _ClientModel()
    with serve_fake_anthropic() as fake:
        fake.script(server_error())
        params = _server(
            tmp_path,
            ANTHROPIC_API_KEY="sk-test-not-real",
            ANTHROPIC_BASE_URL=fake.base_url,
            CONTEXTFOLD_ANTHROPIC_MAX_RETRIES="0",
        )
        async with Client(params, sampling_callback=model) as client:
            await _seed(client, "s", {"summarizer": "sampling"})
            result = await client.call_tool("compact", {"session_id": "s"})
            body = result.structured_content
            assert not result.is_error, result.content
            assert model.asked == 1 and body["summarizer"] == "sampling" and body["fallbacks"] == [], body
            assert fake.requests == []  # the server's key was not used for this session

            # A session on the server's default (auto, with a key) tries Anthropic first and does
            # not ask the client; when Anthropic fails, the reason says the client was not asked.
            await _seed(client, "d", {})
            body = (await client.call_tool("compact", {"session_id": "d"})).structured_content
            assert model.asked == 1 and body["summarizer"] == "extractive", body
            assert any(f.startswith("anthropic:") and "500" in f for f in body["fallbacks"]), body
            assert any(f.startswith("sampling: not asked") for f in body["fallbacks"]), body


async def test_a_session_that_chose_another_summarizer_never_asks_the_client(tmp_path: Path):
    # No Anthropic key: the server's `auto` would sample, but this session chose `extractive`.
    model = _ClientModel()
    async with Client(_server(tmp_path), sampling_callback=model) as client:
        await _seed(client, "e", {"summarizer": "extractive"})
        body = (await client.call_tool("compact", {"session_id": "e"})).structured_content
        assert body["summarizer"] == "extractive" and body["fallbacks"] == [], body
        assert model.asked == 0


async def test_a_dry_run_or_a_strategy_without_a_summary_never_asks_the_client(tmp_path: Path):
    model = _ClientModel()
    async with Client(_server(tmp_path), sampling_callback=model) as client:
        await _seed(client, "q", {"summarizer": "sampling"})
        dry = await client.call_tool("compact", {"session_id": "q", "dry_run": True})
        assert not dry.is_error, dry.content
        regions = await client.call_tool("compact", {"session_id": "q", "strategy": "regions"})
        assert model.asked == 0, regions.content
        real = await client.call_tool("compact", {"session_id": "q"})
        assert not real.is_error and model.asked == 1, real.content

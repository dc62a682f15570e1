"""Removal strategies (middle / oldest / hybrid) through the service: hidden from the view, kept stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import corpus_files, corpus_params, corpus_sample, needs_corpus
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.config import load_settings
from contextfold.service.facade import CompactionFailed, ContextService

pytestmark = pytest.mark.anyio

LONG_FILES = [p for p in corpus_files("normalized/*.jsonl") if p.stat().st_size > 100_000]
LONG = corpus_params(LONG_FILES, id=lambda p: p.name[:40])


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        yield svc


@pytest.mark.parametrize("strategy", ["middle", "oldest", "hybrid"])
@pytest.mark.parametrize("path", LONG)
async def test_removal_strategies_on_long_corpus_sessions(service, path: Path, strategy: str):
    result = await service.import_transcript(path, format="normalized", model="claude-sonnet-4-5")
    sid = result.session_id
    before_ids = [m.id for m in await service.store.load_messages(sid)]
    status = await service.status(sid)
    try:
        removed = await service.compact(sid, strategy=strategy)
    except CompactionFailed as exc:
        assert "nothing removable" in str(exc)
        return
    target = int(status.usable * 0.70)
    assert removed.strategy == strategy and removed.reason
    assert removed.tokens_after < removed.tokens_before
    if removed.status.tokens_in_view > target:
        assert "not reached" in removed.reason  # says why
    # Kept in the store, gone from the view, order preserved.
    assert [m.id for m in await service.store.load_messages(sid, hidden=True)] == before_ids
    visible = [m.id for m in await service.store.load_messages(sid)]
    assert visible == [i for i in before_ids if i in set(visible)]
    assert len(visible) == len(before_ids) - removed.head_messages
    openai = await service.get_context(sid, format="openai")
    assert_openai_valid({"messages": openai.messages})
    anthropic = await service.get_context(sid, format="anthropic")
    assert_anthropic_valid(
        {"messages": anthropic.messages, **({"system": anthropic.system} if anthropic.system else {})}
    )
    history = await service.store.compactions(sid)
    assert history[0].strategy.startswith(strategy) and history[0].notes
    if strategy == "hybrid":
        assert "middle" in history[0].notes[0] and "oldest" in history[0].notes[0]


async def test_dry_run_and_unknown_strategy(service):
    await service.open_session("s", model="gpt-4o", settings={"context_window": 6_000, "max_output": 1_000})
    for i in range(20):
        await service.append(
            "s",
            [
                {"role": "user", "content": f"question {i}?"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "thanks"},
                {"role": "assistant", "content": "answer " * 300},
            ],
        )
    before = await service.status("s")
    dry = await service.compact("s", strategy="hybrid", dry_run=True)
    assert not dry.compacted and dry.tokens_after < dry.tokens_before
    assert (await service.status("s")).tokens_in_view == before.tokens_in_view
    done = await service.compact("s", strategy="oldest")
    assert done.compacted and done.status.tokens_in_view == done.tokens_after
    with pytest.raises(Exception, match="unknown strategy"):
        await service.compact("s", strategy="random")


def _count_marks(value) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_count_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_marks(v) for v in value)
    return 0


@needs_corpus
async def test_cache_anchors_are_few_valid_and_stable(service, corpus: Path):
    path = corpus / "normalized/claude-code-spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    result = await service.import_transcript(path, format="normalized", model="claude-sonnet-4-5")
    await service.open_session(result.session_id, system="You are a careful coding agent. " * 300)
    first = await service.get_context(result.session_id, format="anthropic", cache_anchors=True)
    second = await service.get_context(result.session_id, format="anthropic", cache_anchors=True)
    body = {"system": first.system, "messages": first.messages}
    assert 1 <= _count_marks(body) <= 4
    assert first.model_dump_json() == second.model_dump_json()  # stable across renders
    for message in first.messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if "cache_control" in block:
                assert block["type"] not in ("thinking", "redacted_thinking")
                assert block["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" in first.system[-1]
    with pytest.raises(Exception, match="cache_anchors"):
        await service.get_context(result.session_id, format="openai", cache_anchors=True)


async def test_status_warns_when_the_cache_keeps_missing(service):
    await service.open_session("c", model="claude-sonnet-4-5")
    for i in range(3):
        await service.append(
            "c",
            [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}],
            usage={
                "input_tokens": 5_000,
                "output_tokens": 50,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 4_000,
            },
        )
    status = await service.status("c")
    assert status.cache_warning and status.cache_hit_rate == 0.0
    await service.append(
        "c",
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        usage={"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 4_900},
    )
    status = await service.status("c")
    assert status.cache_warning is None and status.cache_hit_rate > 0


@pytest.mark.parametrize("path", LONG)
async def test_regions_strategy_on_long_corpus_sessions(service, path: Path):
    result = await service.import_transcript(path, format="normalized", model="gpt-4o")
    sid = result.session_id
    before = await service.store.load_messages(sid)
    try:
        done = await service.compact(sid, strategy="regions")
    except CompactionFailed as exc:
        assert "nothing to compact" in str(exc)
        return
    assert done.strategy == "regions" and done.tokens_after < done.tokens_before and done.reason
    assert done.status.tokens_in_view == done.tokens_after
    after = await service.store.load_messages(sid)
    # Calls all stay (paired with their results); outputs are kept whole in the store.
    assert [(p.call_id, p.output) for m in after for p in m.tool_parts] == [
        (p.call_id, p.output) for m in before for p in m.tool_parts
    ]
    summarized = [p for m in after for p in m.tool_parts if p.view_text]
    assert summarized and any(p.view_text.startswith("[Summary of") for p in summarized)
    openai = await service.get_context(sid, format="openai")
    assert_openai_valid({"messages": openai.messages})
    anthropic = await service.get_context(sid, format="anthropic")
    assert_anthropic_valid(
        {"messages": anthropic.messages, **({"system": anthropic.system} if anthropic.system else {})}
    )
    # A summary is never compacted again.
    try:
        again = await service.compact(sid, strategy="regions")
    except CompactionFailed:
        return
    now = {(m.id, p.call_id): p.view_text for m in await service.store.load_messages(sid) for p in m.tool_parts}
    first = {(m.id, p.call_id): p.view_text for m in after for p in m.tool_parts if p.view_text}
    assert all(now[key] == text for key, text in first.items())
    assert again.tokens_after < again.tokens_before


@needs_corpus
@pytest.mark.parametrize("strategy", ["anchored", "middle"])
async def test_pages_of_the_context_add_up_to_the_whole(service, strategy: str):
    """Paged reads work the view out on light rows and load only the page: same messages as one read.

    OpenAI format, because each page is rendered on its own, and the Anthropic renderer may add a
    filler turn at a page boundary to keep roles alternating."""
    result = await service.import_transcript(
        max(corpus_sample(LONG_FILES), key=lambda p: p.stat().st_size), format="normalized", model="claude-sonnet-4-5"
    )
    sid = result.session_id
    await service.compact(sid, strategy=strategy, summarizer="extractive")
    whole = await service.get_context(sid, format="openai")
    messages, tokens, cursor = [], 0, None
    while True:
        page = await service.get_context(sid, format="openai", limit=7, cursor=cursor)
        messages += page.messages
        tokens += page.tokens
        if (cursor := page.next_cursor) is None:
            break
    assert messages == whole.messages and tokens == whole.tokens

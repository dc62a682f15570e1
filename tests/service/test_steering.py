"""Steering through the service: pins survive every strategy, previews apply unchanged, undo
restores the exact view (docs/steering.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import corpus_files, needs_corpus

from contextfold.config import load_settings
from contextfold.errors import CompactionFailed, ContextfoldError, InvalidInput
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_anthropic_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture
async def service(tmp_path: Path):
    settings = load_settings(
        {"home": tmp_path, "summarizer": "extractive", "compaction_cooldown_seconds": 0}, environ={}
    )
    async with await ContextService.open(settings) as svc:
        yield svc


def turn(i: int, size: int = 400) -> list[dict]:
    output = "\n".join(f"line {j} of the listing for step {i}: src/module_{i}/file_{j}.py ok" for j in range(size))
    return [
        {"role": "user", "content": f"Step {i}: look at module_{i} and report what it holds."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls {i}"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        {"role": "assistant", "content": f"Module {i} holds {size} files; nothing failing."},
    ]


async def session_with(service: ContextService, turns: int = 12, session_id: str = "s") -> str:
    await service.open_session(session_id, model="gpt-4o")
    for i in range(turns):
        await service.append(session_id, turn(i), format="openai")
    return session_id


async def context(service: ContextService, session_id: str) -> tuple[list, str | None]:
    got = await service.get_context(session_id, format="openai")
    return got.messages, got.version


async def test_a_pinned_message_stays_verbatim_and_in_order_through_compaction(service):
    sid = await session_with(service)
    before, _ = await context(service, sid)
    pinned_tool = next(m for m in before if m.get("tool_call_id") == "c1")
    await service.pin(sid, ref="m4")  # turn i: its request m(3i+1), the call with its result, the answer
    await service.pin(sid, ref="m5..m6")
    await service.pin(sid, note="Never touch   the vendored\ndirectory.")
    result = await service.compact(sid)
    assert result.compacted
    after, _ = await context(service, sid)
    texts = [json.dumps(m, sort_keys=True) for m in after]
    # The pinned user message, the call and its result are there, whole and in order, after the summary.
    request = next(
        i for i, m in enumerate(after) if m.get("content") == "Step 1: look at module_1 and report what it holds."
    )
    assert after[request + 1]["tool_calls"][0]["id"] == "c1"
    assert after[request + 2] == pinned_tool
    assert json.dumps(pinned_tool, sort_keys=True) in texts
    summary = await service.summary_text(sid)
    assert "Pinned: Never touch the vendored directory." in summary
    status = await service.status(sid)
    assert status.pinned_tokens and status.pinned_tokens > 0
    # A second compaction keeps them too.
    for i in range(12, 20):
        await service.append(sid, turn(i), format="openai")
    await service.compact(sid)
    again, _ = await context(service, sid)
    assert after[request + 2] in again
    assert "Pinned: Never touch the vendored directory." in await service.summary_text(sid)


async def test_prune_passes_over_pinned_outputs(service):
    sid = await session_with(service, turns=16)
    await service.pin(sid, ref="m2")  # turn 0's call and its output
    result = await service.prune(sid, keep_tool_uses=1)
    assert result.applied
    messages, _ = await context(service, sid)
    kept = next(m for m in messages if m.get("tool_call_id") == "c0")
    assert "line 0 of the listing for step 0" in kept["content"]
    cleared = next(m for m in messages if m.get("tool_call_id") == "c2")
    assert "cleared" in cleared["content"]


async def test_removal_and_regions_leave_pinned_messages(service):
    sid = await session_with(service, turns=30)
    await service.pin(sid, ref="m7..m9")
    for strategy in ("oldest", "regions"):
        try:
            await service.compact(sid, strategy=strategy)
        except CompactionFailed:
            pass
        messages, _ = await context(service, sid)
        kept = next(m for m in messages if m.get("tool_call_id") == "c2")
        assert "line 0 of the listing for step 2" in kept["content"], strategy


async def test_pins_alone_over_usable_refuse_compaction_with_the_numbers(tmp_path):
    settings = load_settings({"home": tmp_path, "summarizer": "extractive"}, environ={})
    async with await ContextService.open(settings) as service:
        await service.open_session("small", model="gpt-4o", settings={"context_window": 30_000})
        for i in range(8):
            await service.append("small", turn(i, size=300), format="openai")
        await service.pin("small", ref="m1..m24")
        status = await service.status("small")
        assert status.pinned_tokens is not None and status.pinned_tokens >= status.usable
        assert "pins alone" in status.recommended_action
        with pytest.raises(CompactionFailed, match=r"the pins alone take [\d,]+ tokens and usable is [\d,]+"):
            await service.compact("small")


async def test_bad_pins_are_refused_in_one_line(service):
    sid = await session_with(service, turns=2)
    with pytest.raises(InvalidInput, match="m99 is not a stored message"):
        await service.pin(sid, ref="m99")
    with pytest.raises(InvalidInput, match="not a message reference"):
        await service.pin(sid, ref="twelve")
    with pytest.raises(ContextfoldError, match="no pin with id 'p9'"):
        await service.unpin(sid, "p9")
    listed = await service.pins(sid)
    assert listed.pins == []
    made = await service.pin(sid, ref="m2")
    assert [p.ref for p in made.pins] == ["m2"]
    assert (await service.unpin(sid, "p1")).pins == []


async def test_undo_compaction_restores_the_exact_view_and_keeps_later_appends(service):
    sid = await session_with(service)
    before, version = await context(service, sid)
    await service.compact(sid)
    compacted, _ = await context(service, sid)
    assert compacted != before
    undone = await service.undo(sid)
    assert undone.undone == "compaction"
    after, again = await context(service, sid)
    assert after == before and again == version
    assert (await service.status(sid)).tokens_in_view == (await service.status(sid)).tokens_counted
    records = await service.store.compactions(sid)
    assert records[0].undone_at is not None  # kept in the history, marked
    # Compact, append, undo: the append stays, after the restored view.
    await service.compact(sid)
    await service.append(sid, turn(99, size=3), format="openai")
    await service.undo(sid, "compaction")
    with_append, _ = await context(service, sid)
    assert with_append[: len(before)] == before
    assert with_append[len(before)]["content"].startswith("Step 99")


async def test_undo_prune_restores_the_exact_view(service):
    sid = await session_with(service, turns=16)
    before, version = await context(service, sid)
    tokens = (await service.status(sid)).tokens_in_view
    assert (await service.prune(sid, keep_tool_uses=2)).applied
    undone = await service.undo(sid)
    assert undone.undone == "prune"
    after, again = await context(service, sid)
    assert after == before and again == version
    assert (await service.status(sid)).tokens_in_view == tokens
    with pytest.raises(CompactionFailed, match="nothing to undo"):
        await service.undo(sid, "prune")


async def test_compact_preview_then_apply_writes_exactly_the_previewed_summary(service):
    sid = await session_with(service)
    await service.pin(sid, ref="m4")
    preview = await service.compact(sid, dry_run=True)
    assert preview.dry_run and preview.token and preview.summary
    assert preview.view[:3] == ["marker", "summary", "m4"]
    untouched, _ = await context(service, sid)
    assert len(untouched) > 30  # a dry run changes nothing in the view
    applied = await service.compact(sid, apply=preview.token)
    assert applied.compacted and applied.tokens_after == preview.tokens_after
    assert await service.summary_text(sid) == preview.summary
    session, shown = await service.session_view(sid)
    refs = [
        "marker" if m.compaction else "summary" if m.summary else "copy" if m.metadata.get("copy_of") else f"m{m.seq}"
        for m in shown
    ]
    assert refs == ["copy" if r.startswith("copy of") else r for r in preview.view]
    # The token is spent: the session moved on.
    with pytest.raises(CompactionFailed, match="changed since preview"):
        await service.compact(sid, apply=preview.token)


async def test_a_compact_preview_is_refused_once_the_session_changed(service):
    sid = await session_with(service)
    preview = await service.compact(sid, dry_run=True)
    await service.append(sid, turn(50, size=2), format="openai")
    with pytest.raises(CompactionFailed, match="nothing was written"):
        await service.compact(sid, apply=preview.token)
    with pytest.raises(InvalidInput, match="not this session's latest compact preview"):
        await service.compact(sid, apply="compact-000000000000-00000000")
    assert (await service.session_view(sid))[0].view is None


async def test_prune_preview_lists_what_goes_and_apply_clears_exactly_that(service):
    sid = await session_with(service, turns=16)
    preview = await service.prune(sid, dry_run=True, keep_tool_uses=3)
    assert preview.token and preview.cleared[0] == "m38 bash" and len(preview.cleared) == 13
    applied = await service.prune(sid, apply=preview.token)
    assert applied.applied and applied.parts == len(preview.cleared)
    messages, _ = await context(service, sid)
    cleared = [m["tool_call_id"] for m in messages if m.get("role") == "tool" and "cleared" in m["content"]]
    assert sorted(cleared) == sorted(f"c{i}" for i in range(13))


async def test_edit_replaces_or_amends_the_summary_and_the_next_compaction_updates_it(service):
    sid = await session_with(service)
    await service.compact(sid)
    original = await service.summary_text(sid)
    before, _ = await context(service, sid)
    amended = await service.edit_summary(
        sid, "## Key Decisions\n- Keep module_3 as it is: the user said so [m10]", by="user"
    )
    assert amended.reason == "amended Key Decisions"
    text = await service.summary_text(sid)
    assert "- Keep module_3 as it is: the user said so [m10]" in text and text.startswith("## Goal")
    after, _ = await context(service, sid)
    assert len(after) == len(before) and after[1]["content"] == text and after[2:] == before[2:]
    replaced = original.replace("## Goal\n", "## Goal\n- Corrected: the goal is to audit every module [m1]\n", 1)
    await service.edit_summary(sid, replaced, by="agent")
    assert "Corrected: the goal is to audit every module [m1]" in await service.summary_text(sid)
    records = await service.store.compactions(sid)
    assert [r.strategy for r in records[:2]] == ["edit", "edit"] and records[0].edited_by == "agent"
    # The next compaction starts from the edited text.
    await service.append(sid, turn(40), format="openai")
    prepared = await service.compactor.prepare(sid)
    assert "Corrected: the goal is to audit every module [m1]" in (prepared.plan.previous or "")
    # Undo takes the compaction back, edits included.
    await service.undo(sid, "compaction")
    restored, _ = await context(service, sid)
    assert not any("## Goal" in str(m.get("content")) for m in restored)


async def test_an_edit_with_a_bad_citation_or_heading_is_refused_naming_it(service):
    sid = await session_with(service)
    await service.compact(sid)
    original = await service.summary_text(sid)
    with pytest.raises(InvalidInput, match=r"citation \[m999\] names no stored message"):
        await service.edit_summary(sid, "## Goal\n- Do it [m999]")
    with pytest.raises(InvalidInput, match="heading 'Plan' is not one of the summary's sections"):
        await service.edit_summary(sid, "## Plan\n- Do it")
    assert await service.summary_text(sid) == original


async def test_a_range_is_summarized_in_place_and_everything_around_it_stays(service):
    sid = await session_with(service, turns=20)
    _, before = await service.session_view(sid)
    await service.pin(sid, ref="m20")
    with pytest.raises(CompactionFailed, match=r"holds pinned messages \(m20\)"):
        await service.compact_range(sid, "m10..m30")
    preview = await service.compact_range(sid, "m10..m30", keep_pins=True, dry_run=True)
    assert preview.view[8:12] == ["m9", "range marker", "range summary", "m20"]
    result = await service.compact_range(sid, "m10..m30", keep_pins=True)
    assert result.compacted and result.tokens_after < result.tokens_before
    _, after = await service.session_view(sid)
    dump = [m.model_dump() for m in after]
    assert dump[:9] == [m.model_dump() for m in before[:9]]  # m1..m9 as they were
    assert dump[12:] == [m.model_dump() for m in before[30:]]  # m31.. as they were
    assert after[9].metadata["range"] == [10, 30] and after[10].metadata["range_summary"] == [10, 30]
    assert after[11].seq == 20
    status = await service.status(sid)
    assert status.tokens_in_view == status.tokens_counted
    # A later full compaction keeps the range's place when its tail reaches it, and undo takes each back.
    await service.compact(sid)
    await service.undo(sid, "compaction")
    _, again = await service.session_view(sid)
    assert [m.model_dump() for m in again] == dump
    await service.undo(sid, "compaction")
    _, restored = await service.session_view(sid)
    assert [m.seq for m in restored] == [m.seq for m in before]


async def test_bad_ranges_are_refused_naming_why(service):
    sid = await session_with(service, turns=4)
    with pytest.raises(InvalidInput, match="no message of m50..m60 is in view"):
        await service.compact_range(sid, "m50..m60")
    await service.compact(sid)
    with pytest.raises(InvalidInput, match="not one stretch of the view"):
        await service.compact_range(sid, "m1..m20")


@needs_corpus
async def test_a_range_of_a_real_transcript_leaves_everything_outside_it_byte_identical(service):
    from contextfold import formats

    path = max(corpus_files("normalized/*.jsonl"), key=lambda p: p.stat().st_size)
    imported = await service.import_transcript(path, format="normalized", model="gpt-4o")
    sid = imported.session_id
    _, shown = await service.session_view(sid)
    start, end = shown[len(shown) // 4].seq, shown[len(shown) // 2].seq
    before = (await service.get_context(sid, format="anthropic")).messages
    inside = [m for m in shown if start <= m.seq <= end]
    outside_before = [m for m in shown if m.seq < start]
    outside_after = [m for m in shown if m.seq > end]
    result = await service.compact_range(sid, f"m{start}..m{end}")
    assert result.compacted, result
    after = (await service.get_context(sid, format="anthropic")).messages
    tail = len(formats.render([], outside_after, "anthropic")["messages"])
    head = len(formats.render([], outside_before, "anthropic")["messages"])
    # At each edge of the range one rendered message may differ: rendered alone a side gains a bridging
    # message, and in the view the edge message merges with the range's marker or summary when they
    # share a role. Every other rendered message is identical.
    assert after[-(tail - 2) :] == before[-(tail - 2) :]
    assert after[: head - 1] == before[: head - 1]
    assert len(after) < len(before) and inside
    # And as stored: every message outside the range, byte for byte, in order.
    _, now = await service.session_view(sid)
    kept = [m.model_dump() for m in now if not m.metadata.get("range") and not m.metadata.get("range_summary")]
    assert kept == [m.model_dump() for m in outside_before + outside_after]


async def test_a_handoff_carries_goal_words_pins_and_the_way_back_within_its_budget(service):
    sid = await session_with(service, turns=14)
    await service.append(sid, [{"role": "user", "content": "Never touch module_3; it is vendored."}], format="openai")
    await service.pin(sid, note="Release on Friday only.")
    await service.pin(sid, ref="m4")
    for to in ("markdown", "claude-code", "codex"):
        handed = await service.handoff(sid, to=to, tokens=2_000)
        assert handed.tokens <= 2_000
        text = handed.text
        assert "## Goal" in text and "Step 0: look at module_0" in text  # the task as first stated
        assert "Never touch module_3; it is vendored." in text  # the user's words
        assert "Pinned: Release on Friday only." in text and "[m4] user: Step 1: look at module_1" in text
        assert f'search_history(session_id="{sid}"' in text
    small = await service.handoff(sid, tokens=400)  # bullets go from the end; the pins and the way back stay
    assert small.tokens <= 400 and "Release on Friday only." in small.text and "search_history" in small.text
    with pytest.raises(InvalidInput, match="cannot hold a handoff"):
        await service.handoff(sid, tokens=100)
    with pytest.raises(InvalidInput, match="unknown target 'vim'"):
        await service.handoff(sid, to="vim")

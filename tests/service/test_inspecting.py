"""What the inspector reads through the service (`Inspecting`): sessions with their source, the
stored history with what is hidden, summaries with their compactions, spilled outputs with the
preview the model saw, and a session's life; on SQLite and on PostgreSQL, scoped to a tenant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_view_cache import _call, _result, _turns

from contextfold.config import load_settings
from contextfold.errors import NotFoundError
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
async def service(request, tmp_path: Path):
    shared = {"database": request.getfixturevalue("pg_url")} if request.param == "postgres" else {}
    svc = await ContextService.open(load_settings({"home": tmp_path, **shared}, environ={}))
    try:
        yield svc
    finally:
        await svc.close()


async def _lived(service: ContextService) -> str:
    """A session that spilled an output, was pruned, then compacted; its spilled output's id."""
    await service.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    appended = await service.append(
        "s", [{"role": "user", "content": "build"}, _call("big", "make"), _result("big", 3_000)]
    )
    await service.append("s", _turns(1, 8))
    assert (await service.prune("s", keep_tool_uses=2)).applied
    assert (await service.compact("s", summarizer="extractive")).compacted
    return appended.spilled[0].output_id


async def test_the_life_marks_the_prune_and_the_compaction_and_ends_at_status(service):
    await _lived(service)
    life = await service.life("s")
    status = await service.status("s")
    kinds = [e.kind for e in life.events]
    assert kinds == ["prune", "compaction"]
    prune, compaction = life.events
    assert prune.before - prune.after == prune.freed > 0
    assert compaction.by == "extractive" and compaction.record is not None
    assert (compaction.before, compaction.after) == (compaction.record.tokens_before, compaction.record.tokens_after)
    assert life.points[-1].tokens == status.tokens_in_view
    assert [p.seq for p in life.points[:-1]] == sorted(p.seq for p in life.points[:-1])
    assert max(p.turn for p in life.points) == 9  # the request, then eight turns


async def test_summaries_outputs_and_the_stored_history(service):
    output_id = await _lived(service)
    [(summary, record)] = await service.summaries("s")
    assert summary.summary and record is not None and record.summary_id == summary.id
    [spilled] = await service.spilled_outputs("s")
    assert spilled.record.id == output_id and spilled.seq == 2
    assert output_id in spilled.preview  # the hint the model was shown names it
    assert (await service.spilled_output(output_id)).preview == spilled.preview
    page = await service.stored_page("s", after_seq=0, limit=5)
    assert [m.seq for m, _ in page] == [1, 2, 3, 4, 5]
    assert not any(shown for _, shown in page)  # all summarized: hidden from the view, still stored


async def test_sessions_with_their_source_newest_first_and_filtered(service):
    await service.open_session("older", model="gpt-4o")
    await service.open_session("claude-code-abc", model="gpt-4o")
    await service.append("older", [{"role": "user", "content": "hi"}])
    rows = await service.inspect_sessions()
    assert [r.id for r in rows] == ["older", "claude-code-abc"]
    assert {r.id: r.source for r in rows} == {"older": "harness", "claude-code-abc": "Claude Code hook"}
    assert [r.id for r in await service.inspect_sessions(query="CLAUDE")] == ["claude-code-abc"]


async def test_a_session_the_hooks_opened_stays_theirs_once_its_transcript_is_imported(service, tmp_path):
    """The hooks open their session, then import the agent's transcript into it: the sessions page
    still says which hook writes it (a plain import says import)."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "hello"}) + "\n")
    await service.open_session("codex-abc", model="gpt-4o", origin="hook:codex")
    await service.import_transcript(transcript, session_id="codex-abc", format="normalized")
    await service.import_transcript(transcript, session_id="imported", format="normalized")
    sources = {r.id: r.source for r in await service.inspect_sessions()}
    assert sources["codex-abc"] == "Codex hook" and sources["imported"].startswith("import")


async def test_another_tenant_sees_none_of_it(service):
    output_id = await _lived(service)
    other = service.tenant("other")
    assert await other.inspect_sessions() == []
    for read in (
        other.life("s"),
        other.summaries("s"),
        other.spilled_outputs("s"),
        other.spilled_output(output_id),
        other.stored_page("s", after_seq=0, limit=5),
        other.session_record("s"),
    ):
        with pytest.raises(NotFoundError):
            await read

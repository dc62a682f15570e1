"""Tokens in view by category (`breakdown`): every token `status` reports is in exactly one
category, whatever marks the view carries (spilled, pruned, digested, summarized, reported)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_view_cache import _call, _result, _turns

from contextfold.config import load_settings
from contextfold.errors import NotFoundError
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service(tmp_path: Path):
    svc = await ContextService.open(load_settings({"home": tmp_path}, environ={}))
    try:
        yield svc
    finally:
        await svc.close()


def by_name(breakdown) -> dict[str, int]:
    return {c.name: c.tokens for c in breakdown.categories}


async def assert_sums_to_status(service: ContextService, session_id: str) -> dict[str, int]:
    breakdown = await service.breakdown(session_id)
    status = await service.status(session_id)
    assert sum(c.tokens for c in breakdown.categories) == status.tokens_in_view == breakdown.tokens_in_view
    assert breakdown.usable == status.usable and breakdown.state == status.state
    return by_name(breakdown)


async def test_a_plain_session_splits_into_system_user_assistant_calls_and_results(service):
    await service.open_session("s", model="gpt-4o", system="Be brief.")
    await service.append("s", _turns(1, 3))
    split = await assert_sums_to_status(service, "s")
    for name in ("system", "user", "assistant", "tool_calls", "tool_results"):
        assert split[name] > 0, name
    assert split["spilled_previews"] == split["cleared_outputs"] == split["summary"] == 0
    assert "unattributed" not in split and "reported_extra" not in split


async def test_a_spilled_output_counts_as_its_preview(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": "build"}, _call("big", "make"), _result("big", 30_000)])
    split = await assert_sums_to_status(service, "s")
    assert split["spilled_previews"] > 10 * split["tool_calls"] > 0
    assert split["tool_results"] == 0


async def test_pruned_outputs_count_as_their_placeholders_and_a_summary_as_summary(service):
    await service.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    await service.append("s", _turns(1, 8))
    pruned = await service.prune("s", keep_tool_uses=2)
    assert pruned.applied
    split = await assert_sums_to_status(service, "s")
    assert 0 < split["cleared_outputs"] < split["tool_results"]
    assert (await service.compact("s", summarizer="extractive")).compacted
    split = await assert_sums_to_status(service, "s")
    assert split["summary"] > 0


async def test_region_digests_have_their_own_category(service):
    await service.open_session(
        "s", model="gpt-4o", settings={"context_window": 12_000, "max_output": 1_000, "regions_keep_recent_tokens": 0}
    )
    await service.append("s", _turns(1, 10))
    assert (await service.compact("s", strategy="regions")).compacted
    split = await assert_sums_to_status(service, "s")
    assert split["digests"] > 0


async def test_a_higher_provider_report_is_a_category_of_its_own(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", _turns(1, 2))
    await service.append(
        "s", [{"role": "assistant", "content": "done"}], usage={"prompt_tokens": 9_000, "completion_tokens": 10}
    )
    split = await assert_sums_to_status(service, "s")
    status = await service.status("s")
    assert split["reported_extra"] == status.tokens_in_view - status.tokens_counted > 0


async def test_another_tenants_session_is_not_found(service):
    await service.open_session("s", model="gpt-4o")
    with pytest.raises(NotFoundError):
        await service.tenant("b").breakdown("s")

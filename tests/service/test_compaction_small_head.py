"""A small head's summary is not starved by the half-of-the-head rule (issue 27, item 3).

The summary's budget is half of what it replaces, which for the 40 % cut of a small subagent
transcript (a 1,120-token head) left 560 tokens, with the quotes and the working set shares of
that. A small head now gets up to `SMALL_HEAD_TOKENS`, within `SMALL_HEAD_SHARE` of itself. The
check is on a synthetic transcript compacted through the service: its summary is the one a roomy
budget gives, where the half-head budget had to drop what it had.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.compaction import engine
from contextfold.compaction.engine import SMALL_HEAD_SHARE, SMALL_HEAD_TOKENS, SUMMARY_MAX_TOKENS, summary_budget
from contextfold.config import load_settings
from contextfold.service.facade import ContextService

ASK = (
    "Rename the `timeout` argument to `deadline_s` in every adapter under src/, keeping the old name as a "
    "deprecated alias that logs a warning once per process. Do not change the public CLI flags, and do not touch "
    "the generated protobuf stubs. Where an adapter converts milliseconds, keep the unit in seconds and say so in "
    "the docstring. When both names are given, the new one wins and the warning says which value was used."
)
PARTS = ("client", "server", "router", "schema", "cache", "queue", "worker", "auth", "limits", "metrics")
FILES = [f"src/{kind}/{part}_adapter.py" for kind in ("http", "grpc", "cli") for part in PARTS]


def small_session() -> list[dict[str, Any]]:
    """A subagent-sized task: the user's ask, thirty edits, then a new request (the tail)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    for i, path in enumerate(FILES):
        arguments = json.dumps({"path": path, "old": "timeout", "new": "deadline_s"})
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "edit_file", "arguments": arguments}}
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"},
        ]
    return messages + [
        {"role": "user", "content": "Now run the adapter tests."},
        {"role": "assistant", "content": "Running them."},
    ]


async def compacted_summary(home: Path) -> tuple[str, int, int]:
    """The summary of the small session compacted with the extractive summarizer, its tokens, and
    the tokens of what it replaced."""
    async with await ContextService.open(load_settings({"home": home}, environ={})) as service:
        await service.open_session("s", model="gpt-4o", settings={"preserve_recent_tokens": 100, "tail_turns": 1})
        await service.append("s", small_session())
        before = (await service.status("s")).tokens_in_view
        result = await service.compact("s", summarizer="extractive")
        assert result.compacted
        return await service.summary_text("s"), result.summary_tokens, before


def test_a_small_head_gets_up_to_the_floor_within_its_share_and_big_heads_are_unchanged() -> None:
    usable = 111_616
    assert summary_budget(usable, 1_120) == int(1_120 * SMALL_HEAD_SHARE) == 896  # was 560
    assert summary_budget(usable, 2_400) == SMALL_HEAD_TOKENS  # was 1,200
    assert summary_budget(usable, 3_153) == 1_576  # half is more than the floor: as before
    assert summary_budget(usable, 60_000) == SUMMARY_MAX_TOKENS
    assert summary_budget(4_000, 2_400) == 500  # a tenth of a tiny window still bounds it
    assert summary_budget(usable, 200) == 250  # the old minimum still holds


@pytest.mark.asyncio
async def test_a_small_heads_summary_is_the_one_a_roomy_budget_gives(tmp_path: Path, monkeypatch) -> None:
    summary, tokens, before = await compacted_summary(tmp_path / "small")
    monkeypatch.setattr(engine, "summary_budget", lambda usable, replaced, *cap: SUMMARY_MAX_TOKENS)
    roomy, _, _ = await compacted_summary(tmp_path / "roomy")
    assert summary == roomy  # nothing left out for want of room
    assert before // 2 < tokens < before  # more than half the head: the old budget could not hold it
    assert ASK in summary and all(path in summary for path in FILES)

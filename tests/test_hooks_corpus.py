"""The hooks on Claude Code's three real compactions in the corpus (`benchmarks/_handover.py`).

Each raw transcript is cut just before its compaction boundary and given to `contextfold hook
claude-code` as Claude Code would (PreCompact, then SessionStart with source `compact`, each its
own process). Claude Code's own summary plus contextfold's additionalContext must name every file
edited before the compaction, keep every instruction of the user, hold at least 95 % of the facts
the agent needed next (pooled over the three; `benchmarks/_recall.py` defines the measure), and
add at most 2,000 tokens.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contextfold.tokens.counting import counter_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _handover import compacted_transcripts, replay  # noqa: E402

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def replayed() -> list:
    files = compacted_transcripts()
    if not files:
        pytest.skip("the shared corpus (with Claude Code's compactions) is not beside the repository")
    count = counter_for("claude").count
    return [replay(path, path.stem[:8], count=count) for path in files]


def test_there_are_three_real_compactions(replayed: list) -> None:
    assert len(replayed) == 3


def test_every_edited_file_and_every_instruction_survives(replayed: list) -> None:
    for r in replayed:
        assert r.with_context.edited.missed == (), (r.name, r.with_context.edited.missed)
        assert r.with_context.instructions.missed == (), (r.name, r.with_context.instructions.missed)


def test_needed_later_recall_reaches_95_percent_in_at_most_2000_tokens(replayed: list) -> None:
    wanted = sum(len(r.with_context.recall.wanted) for r in replayed)
    kept = sum(r.with_context.recall.kept for r in replayed)
    alone = sum(r.alone.recall.kept for r in replayed)
    assert kept / wanted >= 0.95, f"{kept}/{wanted} (Claude Code's summaries alone: {alone}/{wanted})"
    for r in replayed:
        assert 0 < r.context_tokens <= 2_000, (r.name, r.context_tokens)
        assert r.with_context.recall.kept >= r.alone.recall.kept


def test_what_the_summary_lacked_after_all_goes_in_with_the_next_prompt(replayed: list) -> None:
    for r in replayed:
        assert r.later_tokens <= 1_000  # half the budget: only what the summary lacked
        assert r.with_both.recall.kept >= r.with_context.recall.kept
        given = {line for line in r.context.splitlines() if line.startswith("- ") and not line.startswith("- (")}
        assert not set(r.later.splitlines()) & given  # nothing the first handover gave

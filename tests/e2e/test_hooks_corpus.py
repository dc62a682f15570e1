"""The hooks on every real Claude Code compaction in the corpus (`benchmarks/_handover.py`).

Each raw transcript is cut just before its first compaction and given to `contextfold hook
claude-code` as Claude Code would (PreCompact, then SessionStart with source `compact`, then
PostCompact with the summary Claude Code really wrote and the next UserPromptSubmit, each its own
process). The sessions are found, not listed: whatever compactions the corpus holds are replayed.

Only what must hold on every real session is asserted here: the hooks run, the handover stays
within its token budgets (SessionStart's share of hook_context_tokens, and both parts within it), Claude Code's summary plus contextfold's additionalContext names every
file edited before the compaction, contextfold never loses a fact, instruction or file that Claude
Code's summary alone kept, and the next prompt's addition repeats nothing the first handover gave.
How much recall and how many of the user's instructions the handover adds are quality figures: a
budget cannot hold every instruction of every session, so `benchmarks/bench_hooks.py` reports
them (pooled, per compaction, per project) rather than a threshold here.

Replaying a session runs four hook processes on a multi-megabyte transcript: the smallest session
runs in the fast set, the rest are marked `slow`.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

import pytest
from _handover import Replayed, compacted_transcripts, compaction_start, cut_at_boundary, replay  # noqa: E402
from conftest import CORPUS, corpus_params, corpus_source, needs_corpus

from contextfold.hooks.sizing import START_SHARE
from contextfold.tokens.counting import counter_for

pytestmark = pytest.mark.corpus

CAP = 8_000
"""The default hook_context_tokens: both parts of one compaction's handover together."""

COMPACTED = corpus_params(compacted_transcripts(), id=lambda p: f"{corpus_source(p)}/{p.stem[:8]}")


@cache
def replayed(path: Path) -> Replayed:
    return replay(path, path.stem[:8], count=counter_for("claude").count)


@needs_corpus
def test_every_claude_code_session_with_a_compaction_is_found() -> None:
    """Cross-checked against the corpus's own record (sources.json counts each file's compactions)."""
    sources = json.loads((CORPUS / "sources.json").read_text("utf-8"))
    said = {
        CORPUS / "raw" / s["local"]
        for s in sources
        if s.get("compactions") and s["source"].startswith("claude-code") and s["local"].endswith(".jsonl")
    }
    found = set(compacted_transcripts())
    assert said <= found, sorted(str(p) for p in said - found)
    assert not any("subagents" in p.parts for p in found)


@pytest.mark.parametrize("path", COMPACTED)
def test_the_cut_ends_before_the_compaction_and_its_summary_is_read(path: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        cut, summary, session, cwd = cut_at_boundary(path, Path(scratch))
        kept = [json.loads(line) for line in cut.read_text("utf-8").splitlines() if line.strip()]
    assert kept and not any(compaction_start(r) for r in kept)
    assert summary.strip() and session and cwd


@pytest.mark.parametrize("path", COMPACTED)
def test_the_handover_fits_its_budgets(path: Path) -> None:
    r = replayed(path)
    assert 0 < r.context_tokens <= CAP * START_SHARE, (r.name, r.context_tokens)  # SessionStart's part
    assert r.context_tokens + r.later_tokens <= CAP, (r.name, r.context_tokens, r.later_tokens)


@pytest.mark.parametrize("path", COMPACTED)
def test_every_edited_file_is_named(path: Path) -> None:
    r = replayed(path)
    assert r.with_context.edited.missed == (), (r.name, r.with_context.edited.missed)


@pytest.mark.parametrize("path", COMPACTED)
def test_the_handover_never_lowers_what_claude_codes_summary_kept(path: Path) -> None:
    r = replayed(path)
    for before, after in ((r.alone, r.with_context), (r.with_context, r.with_both)):
        assert set(after.recall.missed) <= set(before.recall.missed), (r.name, after.recall.missed)
        assert set(after.instructions.missed) <= set(before.instructions.missed), r.name
        assert set(after.edited.missed) <= set(before.edited.missed), r.name


@pytest.mark.parametrize("path", COMPACTED)
def test_the_next_prompt_repeats_nothing_the_first_handover_gave(path: Path) -> None:
    r = replayed(path)
    given = {line for line in r.context.splitlines() if line.startswith("- ") and not line.startswith("- (")}
    assert given, r.name  # the handover's items are "- " lines: otherwise this test checks nothing
    assert not set(r.later.splitlines()) & given, r.name

"""`prune(keep_tool_uses=N)` is Anthropic's context editing (`clear_tool_uses_20250919`), as documented.

The documented semantics (platform.claude.com, "Context editing"): once triggered, the API clears
the oldest tool results in chronological order and keeps the `keep` most recent tool use/result
pairs; `clear_at_least` is a minimum to clear, and when it cannot be reached the edit is not
applied; `exclude_tools` are never cleared; `clear_tool_inputs` clears the calls' parameters too.
Nothing there protects by user turn or by a window of recent output tokens, so with
`keep_tool_uses` neither of contextfold's default rules applies (issue 12). What contextfold adds:
protected tools (`skill`) stay protected, every tool use counts toward N, an output no bigger
than the placeholder is left as it is, and without `clear_at_least` the session's
`prune_minimum` still guards the prompt cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CORPUS, needs_corpus

from contextfold.config import load_settings
from contextfold.domain import Message, TextPart, ToolPart
from contextfold.formats import RenderOptions
from contextfold.policy.prune import PruneOptions, PrunePlan, plan_prune
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import count_message, counter_for

K = 1_000
NOTHING_STAYS = {"placeholder_tokens": 0, "remaining_tokens": lambda part: 0}
PLACEHOLDER = RenderOptions().pruned_placeholder
SPOTTER = CORPUS / "normalized/claude-code-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
"""The issue's session: claude-sonnet-4-5, 142,928 tokens in view, state `soft`."""


def _agent_session(*tools: tuple[str, int], compacted: frozenset[int] = frozenset()) -> list[Message]:
    """One user turn, then one assistant message per tool use (name, tokens), oldest first."""
    messages = [Message(id="u", seq=0, role="user", parts=[TextPart(text="fix the build")], tokens=5)]
    for i, (name, tokens) in enumerate(tools):
        part = ToolPart(
            call_id=f"c{i}",
            name=name,
            input={"i": i},
            state="completed",
            output="x",
            tokens=tokens,
            compacted_at=1.0 if i in compacted else None,
        )
        messages.append(Message(id=f"a{i}", seq=i + 1, role="assistant", parts=[part], tokens=tokens + 5))
    return messages


def _cleared(plan: PrunePlan) -> list[str]:
    """The call ids a plan clears, oldest first."""
    return sorted((p.call_id for p in plan.to_mark), key=lambda c: int(c[1:]))


def test_keep_clears_every_result_but_the_newest_n_whatever_the_turns() -> None:
    # An agent session: a single user turn, so the last-two-turns rule protected all of it, and
    # only 100k of output, so the 40k protected window kept much of the rest.
    messages = _agent_session(*[("bash", 10 * K)] * 10)
    assert plan_prune(messages, **NOTHING_STAYS).to_mark == []
    plan = plan_prune(messages, PruneOptions(keep_tool_uses=3), **NOTHING_STAYS)
    assert plan.applies and _cleared(plan) == [f"c{i}" for i in range(7)]
    assert plan.tokens_freed == 70 * K
    # keep=0 clears everything; keep ≥ the number of uses clears nothing, and says why.
    assert len(plan_prune(messages, PruneOptions(keep_tool_uses=0), **NOTHING_STAYS).to_mark) == 10
    kept = plan_prune(messages, PruneOptions(keep_tool_uses=10), **NOTHING_STAYS)
    assert kept.parts == [] and "keep_tool_uses" in kept.reason


def test_excluded_and_protected_tools_are_never_cleared_but_count_as_uses() -> None:
    messages = _agent_session(("Read", 30 * K), ("skill", 30 * K), ("bash", 30 * K), ("Read", 30 * K), ("bash", 1 * K))
    plan = plan_prune(messages, PruneOptions(keep_tool_uses=1, exclude_tools=frozenset({"read"})), **NOTHING_STAYS)
    # The newest use (c4) is kept; c3 and c0 are excluded (case-insensitively), c1 is protected.
    assert _cleared(plan) == ["c2"]
    # The protected `skill` use counts toward N: with N=3 the kept uses are c4, c3, c2.
    plan = plan_prune(messages, PruneOptions(keep_tool_uses=3, minimum=0), **NOTHING_STAYS)
    assert _cleared(plan) == ["c0"]


def test_clear_at_least_is_a_floor_and_below_it_nothing_is_cleared() -> None:
    messages = _agent_session(*[("bash", 5 * K)] * 4)
    plan = plan_prune(messages, PruneOptions(keep_tool_uses=2, clear_at_least=10 * K), **NOTHING_STAYS)
    assert plan.applies and plan.tokens_freed == 10 * K  # "at least": equal is enough
    plan = plan_prune(messages, PruneOptions(keep_tool_uses=2, clear_at_least=10 * K + 1), **NOTHING_STAYS)
    assert not plan.applies and plan.to_mark == [] and "clear_at_least=10,001" in plan.reason
    # Without clear_at_least the session's minimum still guards the cache; clear_at_least=0 lifts it.
    assert not plan_prune(messages, PruneOptions(keep_tool_uses=2), **NOTHING_STAYS).applies
    assert plan_prune(messages, PruneOptions(keep_tool_uses=2, clear_at_least=0), **NOTHING_STAYS).applies


def test_results_cleared_earlier_are_passed_over_not_a_wall() -> None:
    # c2 was cleared by an earlier prune; c0 and c1 were kept then (excluded, say). Context editing
    # clears every result older than the newest N, so they are cleared now, and a second run with
    # the same options finds nothing left.
    messages = _agent_session(*[("bash", 20 * K)] * 5, compacted=frozenset({2}))
    plan = plan_prune(messages, PruneOptions(keep_tool_uses=2), **NOTHING_STAYS)
    assert _cleared(plan) == ["c0", "c1"]
    done = [
        m.model_copy(update={"parts": [p.model_copy(update={"compacted_at": 2.0}) for p in m.parts]})
        if m.id in {"a0", "a1"}
        else m
        for m in messages
    ]
    again = plan_prune(done, PruneOptions(keep_tool_uses=2), **NOTHING_STAYS)
    assert again.parts == [] and not again.applies


def test_an_output_smaller_than_the_placeholder_is_left_alone() -> None:
    messages = _agent_session(("bash", 3), ("bash", 30 * K), ("bash", 1 * K))
    plan = plan_prune(
        messages,
        PruneOptions(keep_tool_uses=1, clear_at_least=0),
        placeholder_tokens=10,
        remaining_tokens=lambda part: 0,
    )
    assert _cleared(plan) == ["c1"]


# -- through the service ---------------------------------------------------------------------------


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        yield svc


def _turn(i: int, text: str) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"t{i}",
                    "type": "function",
                    "function": {"name": "read", "arguments": json.dumps({"path": f"f{i}.py"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"t{i}", "content": text},
    ]


@pytest.mark.anyio
async def test_clear_inputs_clears_the_calls_of_the_cleared_results_only(service) -> None:
    await service.open_session("k", model="gpt-4o")
    batch = [{"role": "user", "content": "read everything"}]
    for i in range(8):
        batch += _turn(i, f"file {i}\n" + "content line\n" * 1_500)
    await service.append("k", batch)
    before = (await service.status("k")).tokens_in_view
    result = await service.prune("k", keep_tool_uses=3, clear_inputs=True)
    assert result.applied and result.parts == 5
    assert result.status.tokens_in_view == before - result.tokens_freed
    wire = (await service.get_context("k", format="anthropic")).messages
    uses = {b["id"]: b["input"] for m in wire for b in m["content"] if isinstance(b, dict) and b["type"] == "tool_use"}
    results = {
        b["tool_use_id"]: b["content"]
        for m in wire
        for b in m["content"]
        if isinstance(b, dict) and b["type"] == "tool_result"
    }
    cleared = {cid for cid, content in results.items() if content == PLACEHOLDER}
    assert cleared == {f"t{i}" for i in range(5)}
    assert all(uses[c] == {} for c in cleared)
    assert all(uses[f"t{i}"] == {"path": f"f{i}.py"} for i in range(5, 8))


@needs_corpus
@pytest.mark.anyio
async def test_keep_5_on_the_claude_code_session_clears_all_but_the_newest_5(service) -> None:
    imported = await service.import_transcript(SPOTTER, format="normalized", model="claude-sonnet-4-5")
    assert imported.status.state == "soft"
    sid = imported.session_id
    default = await service.prune(sid, dry_run=True)
    assert not default.applied  # the default rule: the last turns protect nearly everything (8,519 tokens)
    before = await service.status(sid)
    result = await service.prune(sid, keep_tool_uses=5)
    assert result.applied and result.tokens_freed > 60_000, result.reason
    assert result.status.tokens_in_view == before.tokens_in_view - result.tokens_freed

    # In the request: the newest 5 tool uses keep their results; every other result is the
    # placeholder unless its tool is protected or it is no bigger than the placeholder.
    view = await service.scope.view(await service.store.get_session(sid))
    parts = [p for m in view for p in m.parts if isinstance(p, ToolPart)]
    newest = {p.call_id for p in parts[-5:]}
    counter = counter_for("claude-sonnet-4-5")
    for part in parts:
        cleared = part.compacted_at is not None
        if part.call_id in newest or part.name.casefold() == "skill" or not part.is_finished:
            assert not cleared, part.call_id
        elif not cleared:
            assert counter.count(part.result_text) <= counter.count(PLACEHOLDER) + 2, part.call_id
    # The counts stay exact: what the session says is in view is what a fresh count finds.
    session = await service.store.get_session(sid)
    fresh = sum(count_message(m, counter).in_view_tokens for m in view) + sum(p.tokens for p in session.system)
    assert session.tokens_in_view == fresh
    # And a second prune with the same options finds nothing more.
    again = await service.prune(sid, keep_tool_uses=5)
    assert not again.applied and again.tokens_freed == 0

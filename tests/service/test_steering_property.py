"""Random sessions under random append / pin / prune / compact / undo sequences: the view never
holds an orphan tool result, pinned messages stay in it verbatim, undo restores the exact prior
version, and the stored history only grows."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.config import load_settings
from contextfold.errors import ContextfoldError
from contextfold.service.facade import ContextService


def turn(i: int, size: int, calls: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": f"Step {i}: check part {i}."}]
    for k in range(calls):
        call_id = f"c{i}_{k}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"n": k})}}
                ],
            }
        )
        body = "\n".join(f"row {j} of {call_id}: value {j * i}" for j in range(size))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
    messages.append({"role": "assistant", "content": f"Part {i} checked."})
    return messages


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(20, 600), st.integers(0, 3)),
        st.tuples(st.just("pin"), st.integers(0, 10_000), st.integers(0, 3)),
        st.tuples(st.just("prune"), st.integers(0, 4), st.just(0)),
        st.tuples(st.just("compact"), st.just(0), st.just(0)),
        st.tuples(st.just("undo"), st.sampled_from(["last", "compaction", "prune"]), st.just(0)),
    ),
    min_size=3,
    max_size=14,
)


def _no_orphans(messages: list[dict]) -> None:
    open_calls: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or []:
            open_calls.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan result {message['tool_call_id']}"


async def _run(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as home:
        config = load_settings(
            {
                "home": Path(home),
                "summarizer": "extractive",
                "compaction_cooldown_seconds": 0,
                "preserve_recent_tokens": 2_000,
            },
            environ={},
        )
        async with await ContextService.open(config) as service:
            sid = "p"
            await service.open_session(sid, model="gpt-4o", settings={"context_window": 60_000})
            snapshots: dict[int, list] = {}  # pinned seq -> its parts when pinned
            undoable: dict[str, tuple[str | None, int]] = {}  # what -> (version before, history length)
            appended = 0
            history_ids: list[str] = []
            for op, a, b in [("append", 300, 2), *ops]:
                before = await service.get_context(sid, format="openai")
                if op == "append":
                    await service.append(sid, turn(appended, a, b), format="openai")
                    appended += 1
                    undoable.clear()  # an undo after appends keeps them: the prior version no longer applies
                elif op == "pin":
                    _, shown = await service.session_view(sid)
                    candidates = [m for m in shown if not m.is_compaction]
                    if candidates:
                        first = candidates[a % len(candidates)]
                        last = candidates[min(len(candidates) - 1, a % len(candidates) + b)]
                        try:
                            await service.pin(sid, ref=f"m{first.seq}..m{last.seq}")
                        except ContextfoldError:
                            candidates = []  # a span over messages out of view, or running backwards
                        if candidates:
                            _, shown = await service.session_view(sid)
                        for m in shown if candidates else []:
                            if first.seq <= m.seq <= last.seq and not m.is_compaction:
                                parts = [p.model_dump() for p in m.parts]
                                # Verbatim: as stored, no output cleared, cut or digested.
                                assert all(p.get("compacted_at") is None and p.get("view_cap") is None for p in parts)
                                snapshots.setdefault(m.seq, parts)
                elif op == "prune":
                    result = await service.prune(sid, keep_tool_uses=a)
                    if result.applied:
                        undoable["prune"] = (before.version, len(history_ids))
                        undoable.pop("compaction", None)
                elif op == "compact":
                    try:
                        result = await service.compact(sid)
                    except ContextfoldError:
                        result = None
                    if result is not None and result.compacted:
                        undoable["compaction"] = (before.version, len(history_ids))
                        undoable.pop("prune", None)
                elif op == "undo":
                    try:
                        done = await service.undo(sid, a)
                    except ContextfoldError:
                        done = None
                    if done is not None:
                        expected = undoable.pop(done.undone, None)
                        if expected is not None:
                            now = await service.get_context(sid, format="openai")
                            assert now.version == expected[0], f"undo {done.undone} did not restore the version"
                        undoable.clear()
                # The invariants, after every step.
                shown_context = await service.get_context(sid, format="openai")
                _no_orphans(shown_context.messages)
                session, shown = await service.session_view(sid)
                by_seq = {m.seq: m for m in shown}
                stored_seqs = {m.seq: m for m in await service.session_history(sid)}
                for seq in session.metadata.pinned_seqs():  # a pin on a request copy moves to the request on undo
                    if seq in stored_seqs and not stored_seqs[seq].is_compaction:
                        assert seq in by_seq, f"pinned m{seq} left the view"
                        if seq in snapshots:
                            assert [p.model_dump() for p in by_seq[seq].parts] == snapshots[seq], f"m{seq} changed"
                stored = [m.id for m in await service.session_history(sid)]
                assert stored[: len(history_ids)] == history_ids, "stored history lost a message"
                history_ids = stored


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_steering_sequences_keep_the_invariants(ops):
    asyncio.run(_run(ops))

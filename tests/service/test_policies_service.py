"""Issue 3 end to end through the service: spill at ingest, read_output, prune, tail, the view."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest
from conftest import corpus_files, corpus_params, corpus_sample, longest_tool_output, needs_corpus
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.config import load_settings
from contextfold.errors import NotFoundError
from contextfold.formats import INTERRUPTED_RESULT
from contextfold.service.facade import ContextService, InvalidInput

pytestmark = pytest.mark.anyio

PLACEHOLDER = "[Old tool result content cleared]"


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        yield svc


def _expected_lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _unnumbered(read_text: str) -> list[tuple[int, str]]:
    rows = []
    for row in read_text.split("\n"):
        number, _, line = row.partition("\t")
        rows.append((int(number), line))
    return rows


@needs_corpus
async def test_huge_corpus_output_is_spilled_with_a_hint_and_reads_back_exactly(service):
    path, call_id, original = longest_tool_output()  # the corpus's longest: far past the 50 KB preview
    assert len(original.encode()) > 50 * 1024, (path.name, len(original))

    result = await service.import_transcript(path, format="normalized", model="gpt-4o")
    spilled = [s for s in result.spilled if s.call_id == call_id]
    assert len(spilled) == 1
    output_id = spilled[0].output_id

    # What the model sees: a preview within the limits, ending with a hint naming the id.
    context = await service.get_context(result.session_id, format="openai")
    seen = next(m["content"] for m in context.messages if m.get("tool_call_id") == call_id)
    preview, _, hint = seen.rpartition("\n\n")
    assert len(preview.encode()) <= 50 * 1024 and preview.count("\n") < 2_000
    assert output_id in hint and "read_output" in hint
    assert original.startswith(preview)

    # read_output returns exactly the original lines for any range.
    expected = _expected_lines(original)
    rng = random.Random(1142)
    offsets = [1, 2, 1_000, len(expected) // 2, len(expected) - 5, len(expected)]
    offsets += [rng.randint(1, len(expected)) for _ in range(40)]
    for offset in offsets:
        read = await service.read_output(output_id, offset=offset, limit=50)
        assert read.total_lines == len(expected)
        rows = _unnumbered(read.text)
        assert rows == [(offset + i, expected[offset - 1 + i]) for i in range(len(rows))]
        assert read.has_more == (offset + len(rows) <= len(expected))

    # Paging through the whole output reassembles it byte for byte.
    pages, offset = [], 1
    while offset is not None:
        read = await service.read_output(output_id, offset=offset)
        pages += [line for _, line in _unnumbered(read.text)]
        offset = read.next_offset
    assert "\n".join(pages) + ("\n" if original.endswith("\n") else "") == original

    # A grep finds a known string on the right line.
    needle = "def prepare_auth(self, auth):"
    line_number = next(i for i, line in enumerate(expected, 1) if needle in line)
    found = await service.read_output(output_id, pattern=re.escape(needle))
    assert f"{line_number}:" in found.text and found.matches >= 1
    assert (await service.output_text(output_id)) == original


async def test_output_ids_reach_only_their_own_output(service, tmp_path: Path):
    await service.tenant("alice").open_session("mine", model="gpt-4o")
    spilled = await service.tenant("alice").spill("mine", "secret\n" * 10)
    assert (await service.tenant("alice").read_output(spilled.output_id)).total_lines == 10

    for bad in ["../../etc/passwd", "out_../../x", "/etc/passwd", "", "out_" + "A" * 26, "%2e%2e%2f"]:
        with pytest.raises((NotFoundError, InvalidInput)):
            await service.tenant("alice").read_output(bad)
    with pytest.raises(NotFoundError, match=spilled.output_id):
        await service.tenant("mallory").read_output(spilled.output_id)
    with pytest.raises(NotFoundError):
        await service.tenant("mallory").output_text(spilled.output_id)

    # Expired: refused at once, even before gc runs; gc then removes it.
    later = await service.tenant("alice").spill("mine", "old\n")
    await service.backend.connection.execute(
        "UPDATE outputs SET created_at = ? WHERE id = ?", (time.time() - 8 * 86_400, later.output_id)
    )
    with pytest.raises(NotFoundError, match="expired"):
        await service.tenant("alice").read_output(later.output_id)
    collected = await service.gc()
    assert collected.outputs_removed == 1
    with pytest.raises(NotFoundError):
        await service.tenant("alice").read_output(later.output_id)

    # Deleting the session deletes its outputs, files included.
    digest = (await service.tenant("alice").store.get_output(spilled.output_id)).digest
    await service.tenant("alice").delete_session("mine")
    with pytest.raises(NotFoundError):
        await service.tenant("alice").read_output(spilled.output_id)
    assert not service.outputs.files.exists(digest)


async def test_spill_files_are_private(service):
    await service.open_session("s", model="gpt-4o")
    await service.spill("s", "x\n" * 5)
    spill_dir = service.settings.spill_path
    assert spill_dir.stat().st_mode & 0o777 == 0o700
    files = [p for p in spill_dir.rglob("*") if p.is_file()]
    assert files and all(p.stat().st_mode & 0o777 == 0o600 for p in files)


async def test_identical_outputs_are_stored_once(service):
    await service.open_session("s", model="gpt-4o")
    first = await service.spill("s", "same\n" * 100)
    second = await service.spill("s", "same\n" * 100)
    assert first.output_id != second.output_id
    files = [p for p in service.settings.spill_path.rglob("*") if p.is_file() and not p.name.endswith(".idx")]
    assert len(files) == 1


async def test_bad_regex_and_offsets_are_clear_errors(service):
    await service.open_session("s", model="gpt-4o")
    out = await service.spill("s", "a\n" * 10)
    with pytest.raises(InvalidInput, match="pattern"):
        await service.read_output(out.output_id, pattern="(unclosed")
    with pytest.raises(InvalidInput, match="offset"):
        await service.read_output(out.output_id, offset=0)
    past = await service.read_output(out.output_id, offset=500)
    assert past.text == "" and not past.has_more


async def test_oversized_user_input_is_spilled_too(service):
    await service.open_session("u", model="gpt-4", settings={"min_share_chars": 2_000})  # 8k window
    pasted = "log line\n" * 5_000  # 45,000 chars > 30 % of 8,192 tokens × 4
    result = await service.append("u", [{"role": "user", "content": pasted}])
    assert len(result.spilled) == 1
    context = await service.get_context("u")
    seen = context.messages[0]["content"]
    assert result.spilled[0].output_id in seen and len(seen) < 11_000
    assert await service.output_text(result.spilled[0].output_id) == pasted


def _pending_conversation() -> list[dict]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "sleep 100"}'}}
            ],
        },
    ]


async def test_pending_calls_render_as_interrupted_in_both_formats(service):
    await service.open_session("p", model="gpt-4o")
    await service.append("p", _pending_conversation())
    openai = await service.get_context("p", format="openai")
    assert openai.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": INTERRUPTED_RESULT}
    assert_openai_valid({"messages": openai.messages})
    anthropic = await service.get_context("p", format="anthropic")
    result = anthropic.messages[-1]["content"][0]
    assert result["tool_use_id"] == "c1" and result["is_error"] is True
    assert_anthropic_valid({"messages": anthropic.messages})


LONG_FILES = [p for p in corpus_files("normalized/*.jsonl") if p.stat().st_size > 100_000]
LONG = corpus_params(LONG_FILES, id=lambda p: p.name[:50])


@pytest.mark.parametrize("path", LONG)
async def test_prune_on_long_corpus_sessions(service, path: Path):
    result = await service.import_transcript(path, format="normalized", model="gpt-4.1")
    session_id = result.session_id
    before = await service.store.load_messages(session_id)
    status_before = await service.status(session_id)

    # keep_turns 0 lets prune reach into these agent sessions, which are one or two user turns
    # long; with the default 2 turns most of them have nothing prunable at all.
    for keep_turns in (2, 0):
        await service.open_session(session_id, settings={"prune_keep_turns": keep_turns})
        dry = await service.prune(session_id, dry_run=True)
        assert not dry.applied and dry.status.tokens_in_view == status_before.tokens_in_view
        pruned = await service.prune(session_id)
        if pruned.applied:
            break

    after = await service.store.load_messages(session_id)
    assert [m.id for m in after] == [m.id for m in before]
    calls_before = [(p.call_id, p.name, p.input) for m in before for p in m.tool_parts]
    assert [(p.call_id, p.name, p.input) for m in after for p in m.tool_parts] == calls_before
    marked = [(m, p) for m in after for p in m.tool_parts if p.compacted_at is not None]

    if not pruned.applied:
        assert marked == [] and pruned.tokens_freed == 0
        assert "minimum" in pruned.reason or "nothing to prune" in pruned.reason
        return

    assert pruned.tokens_freed > 20_000 and pruned.parts == len(marked)
    assert all(p.name.lower() != "skill" for _, p in marked)
    # Only outputs beyond the newest 40,000 tokens of tool output are marked.
    newest_first = [p for m in reversed(after) for p in reversed(m.tool_parts) if p.is_finished]
    protected = 0
    for part in newest_first:
        if part.compacted_at is not None:
            assert protected > 40_000 - part.tokens
        else:
            protected += part.tokens
    # The originals are still stored; only the view changed.
    assert all(p.output is not None or p.error is not None for _, p in marked)
    status = await service.status(session_id)
    assert status.tokens_in_view == status_before.tokens_in_view - pruned.tokens_freed
    assert status.tokens_stored == status_before.tokens_stored

    # The view shows the placeholder and stays valid for both APIs.
    openai = await service.get_context(session_id, format="openai")
    assert_openai_valid({"messages": openai.messages})
    placeholders = [m for m in openai.messages if m["role"] == "tool" and m["content"] == PLACEHOLDER]
    assert len(placeholders) == len(marked)
    anthropic = await service.get_context(session_id, format="anthropic")
    assert_anthropic_valid(
        {"messages": anthropic.messages, **({"system": anthropic.system} if anthropic.system else {})}
    )

    # Idempotent: a second prune finds nothing new.
    again = await service.prune(session_id)
    assert not again.applied and again.tokens_freed == 0
    assert (await service.status(session_id)).tokens_in_view == status.tokens_in_view


@needs_corpus
@pytest.mark.parametrize("budget", [2_000, 8_000, 20_000])
async def test_select_tail_on_corpus_sessions(service, budget: int):
    for path in corpus_sample(LONG_FILES):
        result = await service.import_transcript(path, format="normalized", model="gpt-4o")
        tail = await service.select_tail(result.session_id, budget=budget)
        assert tail.tail_tokens <= budget
        assert tail.head_messages + tail.tail_messages == result.messages
        if tail.tail_start_id is not None:
            rows = await service.store.rows(result.session_id)
            start = next(r for r in rows if r.id == tail.tail_start_id)
            assert start.turn_start or start.role == "assistant"


async def test_status_recommends_pruning_then_compaction(service):
    # Each turn leaves a tool output, and the prune rule is scaled to the small window, so a prune
    # works once the session is `soft` (status advises prune only then: issue 12).
    small = {"context_window": 20_000, "max_output": 4_000, "prune_protect": 1_000, "prune_minimum": 500}
    await service.open_session("w", model="gpt-4o", settings=small)
    states = set()
    for i in range(100):
        r = await service.append(
            "w",
            [
                {"role": "user", "content": f"turn {i} " + "word " * 200},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": f"c{i}", "content": "line " * 200},
            ],
        )
        states.add((r.status.state, r.status.recommended_action.split(":")[0]))
        if r.status.state == "overflow":
            break
    assert ("soft", "prune") in states and ("hard", "compact") in states and ("overflow", "compact") in states


async def test_a_window_smaller_than_the_protection_is_pruned(service):
    # gpt-4o on a 48,000-token window: 31,616 usable, less than the 40,000 tokens of output prune
    # protects by default. The defaults scale to a quarter and an eighth of usable (7,904 and
    # 3,952), so old outputs go; before, a window this small could never be pruned.
    await service.open_session("s", model="gpt-4o", settings={"context_window": 48_000})
    batch: list[dict] = [{"role": "user", "content": "find the bug"}]
    for i in range(6):
        batch += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"chunk {i}" + " data" * 2_000},
        ]
    await service.append("s", batch)
    for text in ("and the tests?", "thanks"):  # the tool turn leaves the protected last two
        await service.append("s", [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
    assert (await service.status("s")).usable == 31_616

    dry = await service.prune("s", dry_run=True)
    assert not dry.applied and "3 outputs would free" in dry.reason, dry.reason
    assert "(more than the minimum 3,952)" in dry.reason, dry.reason
    # A session that sets the thresholds gets them as set: the 40,000 protect everything here.
    await service.open_session("s", settings={"context_window": 48_000, "prune_protect": 40_000})
    kept = await service.prune("s", dry_run=True)
    assert "within the protected newest 40,000" in kept.reason, kept.reason

    await service.open_session("s", settings={"context_window": 48_000, "prune_protect": None})
    pruned = await service.prune("s")
    assert pruned.applied and pruned.parts == 3 and pruned.tokens_freed > 3_952, pruned.reason
    context = await service.get_context("s", format="openai")
    assert sum(m.get("content") == PLACEHOLDER for m in context.messages) == 3

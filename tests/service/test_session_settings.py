"""The design's tunable constants (docs/design.md) are settings, and a session's own value is the one obeyed.

Before, the overflow cut, recovery attempts, the cooldown, the regions strategy's protected
window and the removal strategies' preserved counts were module constants: no setting, global or
per session, could change them.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

from contextfold.config import load_settings
from contextfold.errors import CompactionFailed
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import counter_for

pytestmark = pytest.mark.anyio

GPT4O = counter_for("gpt-4o")


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        yield svc


def _dense(nbytes: int) -> str:
    return base64.b64encode(random.Random(7).randbytes(nbytes)).decode("ascii")


def _tool_turn(i: int, output: str) -> list[dict]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat x"}'}}
    return [
        {"role": "user", "content": f"Step {i}: show me the file."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        {"role": "assistant", "content": f"Read it ({i})."},
    ]


async def _shown_output(service: ContextService, session_id: str) -> str:
    context = await service.get_context(session_id, format="openai")
    return next(m["content"] for m in context.messages if m["role"] == "tool")


@pytest.mark.parametrize("cut_tokens", [100, 500])
async def test_the_overflow_cut_keeps_the_sessions_cut_tokens(service, cut_tokens: int):
    await service.open_session("c", model="gpt-4o", settings={"cut_tokens": cut_tokens})
    await service.append("c", _tool_turn(1, _dense(20_000)))
    assert await service.compactor.cut_oversized("c", 1_000) == 1
    shown = GPT4O.count(await _shown_output(service, "c"))
    assert cut_tokens - 10 <= shown <= cut_tokens + 30  # the prefix, and the note of what was cut


async def test_oversized_share_decides_which_outputs_recovery_cuts(service):
    await service.open_session("s", model="gpt-4o", settings={"oversized_share": 0.9})
    await service.append("s", _tool_turn(1, _dense(10_000)))  # about 9,000 tokens: under 90 % of 20,000
    assert await service.compactor.cut_oversized("s", 20_000) == 0
    await service.open_session("s", settings={"oversized_share": 0.3})
    assert await service.compactor.cut_oversized("s", 20_000) == 1


async def test_the_cooldown_is_the_sessions(service):
    await service.open_session("w", model="gpt-4o", settings={"preserve_recent_tokens": 200})

    async def turn(i: int) -> None:
        await service.append(
            "w",
            [
                {"role": "user", "content": f"turn {i} " + "words " * 300},
                {"role": "assistant", "content": "noted " * 300},
            ],
        )

    for i in range(6):
        await turn(i)
    await service.compact("w", summarizer="extractive", auto=True)
    # A short turn: something to summarize again, but the view grew by far less than 10 %.
    await service.append("w", [{"role": "user", "content": "and?"}, {"role": "assistant", "content": "done"}])
    with pytest.raises(CompactionFailed, match="would loop"):
        await service.compact("w", summarizer="extractive", auto=True)
    await service.open_session("w", settings={"compaction_cooldown_seconds": 0})
    assert (await service.compact("w", summarizer="extractive", auto=True)).compacted


async def test_regions_protect_the_sessions_recent_window(service):
    await service.open_session("r", model="gpt-4o", settings={"context_window": 40_000})
    for i in range(6):
        await service.append("r", _tool_turn(i, "\n".join(f"line {n} of output {i}" for n in range(600))))
    # Default: the newest 20,000 output tokens are never digested.
    default = await service.compact("r", strategy="regions", dry_run=True)
    await service.open_session("r", settings={"regions_keep_recent_tokens": 0})
    none_kept = await service.compact("r", strategy="regions", dry_run=True)
    assert none_kept.head_messages > default.head_messages


async def test_removal_keeps_the_sessions_preserved_messages(service):
    await service.open_session("m", model="gpt-4o", settings={"context_window": 30_000})
    for i in range(30):
        await service.append(
            "m",
            [
                {"role": "user", "content": f"question {i} " + "w " * 400},
                {"role": "assistant", "content": f"answer {i} " + "x " * 400},
            ],
        )
    default = await service.compact("m", strategy="oldest", dry_run=True)
    await service.open_session("m", settings={"removal_preserve_start": 20})
    preserved = await service.compact("m", strategy="oldest", dry_run=True)
    # With the first 20 messages preserved, the oldest ones can no longer be the ones removed.
    assert "preserve" in preserved.reason or preserved.head_messages != default.head_messages
    assert preserved.head_messages <= 60 - 20 - 1


async def test_recovery_attempts_is_the_sessions(tmp_path: Path, monkeypatch):
    """A compaction that never gets the session out of overflow stops at the session's bound."""
    from contextfold.domain import CompactionRecord

    settings = load_settings(
        {
            "home": tmp_path,
            "context_window": 20_000,
            "max_output": 2_000,
            "max_bytes": 10**9,
            "max_lines": 10**9,
            "context_share": 1.0,
            "max_share_chars": 10**9,
        },
        environ={},
    )
    async with await ContextService.open(settings) as service:
        await service.open_session("f", model="gpt-4o", settings={"recovery_attempts": 2})
        await service.append("f", [{"role": "user", "content": "x " * 30_000}])
        assert (await service.status("f")).state == "overflow"
        calls = []

        async def no_real_progress(*args, **kwargs):
            calls.append(kwargs)
            record = CompactionRecord(
                summarizer="stub",
                tokens_before=30_000,
                tokens_after=29_000,
                head_messages=1,
                head_tokens=1_000,
                summary_tokens=10,
            )
            return record, "## Goal\n- x\n"

        monkeypatch.setattr(service.compactor, "compact", no_real_progress)
        with pytest.raises(CompactionFailed, match="after 2 compactions"):
            await service.compact("f")
        assert len(calls) == 2


# -- server-wide settings and per-session policy ------------------------------------------------


async def test_a_sessions_own_lower_request_limits_are_honoured(service):
    await service.open_session("small", model="gpt-4o", settings={"max_message_bytes": 100, "max_batch_messages": 2})
    from contextfold.errors import LimitExceeded

    with pytest.raises(LimitExceeded, match="max_message_bytes"):
        await service.append("small", [{"role": "user", "content": "x" * 5_000}])
    with pytest.raises(LimitExceeded, match="max_batch_messages"):
        await service.append("small", [{"role": "user", "content": "a"}] * 3)
    with pytest.raises(LimitExceeded, match="max_message_bytes"):
        await service.spill("small", "y" * 5_000)
    assert (await service.status("small")).message_count == 0  # nothing was written
    await service.append("small", [{"role": "user", "content": "fits"}])
    # Another session on the same server keeps the server's limits.
    await service.open_session("normal", model="gpt-4o")
    await service.append("normal", [{"role": "user", "content": "x" * 5_000}])


async def test_a_session_cannot_raise_a_request_limit_past_the_servers(tmp_path: Path):
    settings = load_settings({"home": tmp_path, "max_message_bytes": 1_000}, environ={})
    async with await ContextService.open(settings) as service:
        await service.open_session("big", model="gpt-4o", settings={"max_message_bytes": 10**9})
        from contextfold.errors import LimitExceeded

        with pytest.raises(LimitExceeded, match=r"max_message_bytes \(1,000\)"):
            await service.append("big", [{"role": "user", "content": "x" * 5_000}])


@pytest.mark.parametrize(
    "name, value",
    [
        ("max_database_bytes", 1),
        ("spill_quota_bytes", 1),
        ("spill_retention_days", 1),
        ("max_request_bytes", 1),
        ("http_sessions_per_tenant", 1),
        ("max_count_bytes", 1),
    ],
)
async def test_server_wide_settings_are_refused_per_session_with_the_reason(service, name: str, value: int):
    from contextfold.errors import SettingsError

    with pytest.raises(SettingsError, match=rf"{name} is a server-wide setting"):
        await service.open_session("s", model="gpt-4o", settings={name: value})


# -- typed session state --------------------------------------------------------------------------


async def test_session_state_is_typed_and_keeps_keys_it_does_not_know(service, tmp_path: Path):
    import sqlite3

    from contextfold.domain import LastCompaction, PruneTotals

    await service.open_session("t", model="gpt-4o", settings={"preserve_recent_tokens": 200})
    for i in range(6):
        await service.append(
            "t",
            [
                {"role": "user", "content": f"turn {i} " + "words " * 300},
                {"role": "assistant", "content": "noted " * 300},
            ],
        )
    await service.compact("t", summarizer="extractive")
    session = await service.store.get_session("t")
    assert isinstance(session.metadata.last_compaction, LastCompaction)
    assert session.metadata.prunes == PruneTotals()
    # A newer contextfold may keep more: an unknown key survives this one's writes.
    with sqlite3.connect(service.settings.database_path) as conn:
        conn.execute("""UPDATE sessions SET metadata = json_set(metadata, '$.future', 'kept') WHERE id = 't'""")
    await service.append("t", [{"role": "user", "content": "after"}])
    with sqlite3.connect(service.settings.database_path) as conn:
        (stored,) = conn.execute("SELECT json_extract(metadata, '$.future') FROM sessions WHERE id = 't'").fetchone()
    assert stored == "kept"


@pytest.mark.parametrize(
    ("settings", "usable", "minimum", "protected"),
    [({}, 111_616, 20_000, 40_000), ({"context_window": 48_384, "input_limit": 0}, 32_000, 4_000, 8_000)],
    ids=["gpt-4o-128k", "32k-budget"],
)
async def test_prune_keeps_opencode_thresholds_at_128k_and_scales_only_below(
    service, settings: dict[str, int], usable: int, minimum: int, protected: int
):
    # 70 user turns, each with a ~1,000-token tool output. gpt-4o's own window (111,616 usable)
    # holds OpenCode's 40,000 / 20,000 twice over, so they stand (before: 27,904 and 13,952); a
    # 32,000-token budget keeps a quarter and an eighth, and its prune still frees what is older.
    await service.open_session("p", model="gpt-4o", settings=settings)
    for i in range(70):
        await service.append("p", _tool_turn(i, " ".join(f"w{i}" for _ in range(500))))
    status = await service.status("p")
    assert status.usable == usable
    plan = await service.prune("p", dry_run=True)
    assert plan.applied is False and plan.dry_run and f"more than the minimum {minimum:,}" in plan.reason
    outputs = GPT4O.count(" ".join("w1" for _ in range(500)))
    older = 68 * outputs  # the last two turns are never pruned
    # What stands is the protected newest outputs (whole ones, within `protected`); the rest is freed,
    # less what each cleared call still costs (its placeholder).
    assert older - protected - 68 * 20 <= plan.tokens_freed <= older - protected + outputs
    done = await service.prune("p")
    assert done.applied and done.tokens_freed == plan.tokens_freed


async def test_a_soft_regions_compaction_ends_under_half_of_usable(service):
    # The seed's soft compaction "gets under 50 %, leaving room for the turns to come"; before,
    # regions stopped just under the soft threshold (69.x % here), so the next turns were soon
    # soft again. 60 tool turns, a window that puts them at 78 % of usable (soft).
    await service.open_session("s", model="gpt-4o")
    for i in range(60):
        await service.append("s", _tool_turn(i, "\n".join(f"row {n} of table {i}: ok" for n in range(120))))
    tokens = (await service.status("s")).tokens_in_view
    window = int(tokens / 0.78) + 4_000
    sizes = {"context_window": window, "input_limit": window, "max_output": 4_000, "reserved": 4_000}
    await service.open_session("s", settings=sizes)
    status = await service.status("s")
    assert status.state == "soft" and 0.77 <= status.ratio <= 0.79, status
    done = await service.compact("s", strategy="regions")
    assert done.status.ratio < 0.50 and done.status.state == "ok", done.reason
    assert done.tokens_after >= 0.40 * status.usable  # the largest regions first, and no further than needed
    # The share is a session setting; never above the soft threshold.
    await service.open_session("t", model="gpt-4o", settings={**sizes, "regions_soft_target": 0.65})
    for i in range(60):
        await service.append("t", _tool_turn(i, "\n".join(f"row {n} of table {i}: ok" for n in range(120))))
    lighter = await service.compact("t", strategy="regions")
    assert 0.55 <= lighter.status.ratio < 0.65
    await service.open_session("u", model="gpt-4o", settings={**sizes, "regions_soft_target": 1.0})
    for i in range(60):
        await service.append("u", _tool_turn(i, "\n".join(f"row {n} of table {i}: ok" for n in range(120))))
    capped = await service.compact("u", strategy="regions")
    assert 0.60 <= capped.status.ratio < 0.70  # min(regions_soft_target, soft_ratio)


async def test_the_rule_digest_keeps_to_the_sessions_bound(service):
    # One region of 8 calls (about 24,000 tokens): a fifth is about 4,800; the session's bound is 500.
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"cmd": "cat part_{i}.log"}}'}}
        for i in range(8)
    ]
    results = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(f"entry {n} of part {i}" for n in range(400))}
        for i in range(8)
    ]
    history = [
        {"role": "user", "content": "Read the logs."},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    for sid, settings in (("free", {}), ("bound", {"regions_digest_max_tokens": 500})):
        window = {"context_window": 48_384, "input_limit": 0}  # 32,000 usable: the view at 80 %, soft
        await service.open_session(
            sid, model="gpt-4o", settings={"regions_keep_recent_tokens": 0, **window, **settings}
        )
        await service.append(sid, [*history, *results, {"role": "assistant", "content": "Done."}])
    free = await service.compact("free", strategy="regions", summarizer="extractive", dry_run=True)
    bound = await service.compact("bound", strategy="regions", summarizer="extractive", dry_run=True)
    assert 4_000 <= free.summary_tokens <= 5_200 and 450 <= bound.summary_tokens <= 500


def _file_turn(i: int) -> list[dict]:
    path = f"src/pkg_{i}/module_{i}.py"
    call = {"id": f"r{i}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'}}
    ask = [{"role": "user", "content": f"Go on with the next ten modules from {path}."}] if i % 10 == 0 else []
    return [
        *ask,
        {"role": "assistant", "content": f"Checking `handler_{i}` against `Config{i}Loader`.", "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": f"r{i}",
            "content": f"def handler_{i}(cfg):\n    return Config{i}Loader(cfg)\n" * 40,
        },
        {"role": "assistant", "content": f"`handler_{i}` in `{path}` calls `Config{i}Loader`; it looks right."},
    ]


async def test_the_summary_keeps_to_the_sessions_summary_max_tokens(service):
    history = [m for i in range(90) for m in _file_turn(i)]
    for sid, settings in (("roomy", {}), ("tight", {"summary_max_tokens": 1_200})):
        await service.open_session(sid, model="gpt-4o", settings=settings)
        await service.append(sid, history)
    roomy = await service.compact("roomy", summarizer="extractive")
    tight = await service.compact("tight", summarizer="extractive")
    assert roomy.summary_tokens > 1_400  # under the default (2,900) the working set lists more
    assert 900 <= tight.summary_tokens <= 1_200
    kept = await service.summary_text("tight")
    assert "Config75Loader" in kept and "Config10Loader" not in kept  # the newest names stay, the oldest go
    assert "Config10Loader" in await service.summary_text("roomy")


async def test_summary_max_tokens_is_refused_out_of_range(service):
    with pytest.raises(Exception, match="summary_max_tokens"):
        await service.open_session("x", model="gpt-4o", settings={"summary_max_tokens": 50})

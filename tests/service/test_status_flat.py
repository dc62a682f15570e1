"""`status` and `append` read no more as a session's history grows (issue 15), and still report
what compaction and prune did.

What a call reads is measured in SQLite virtual-machine steps (a progress handler called on every
step), which depend on the data and the query plans alone, not on how busy the machine is: two
sessions with the same view, one with twenty times the history behind it, must cost the same.
Timings are in benchmarks/bench_status.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.config import load_settings
from contextfold.domain import CompactionRecord
from contextfold.service.facade import ContextService
from contextfold.store import SQLiteStore
from contextfold.store.schema import MIGRATIONS, SCHEMA_VERSION, statements

pytestmark = pytest.mark.anyio

USAGE = {"input_tokens": 300, "cache_read_input_tokens": 2_000, "output_tokens": 50}
SOFT = {"soft_ratio": 0.01, "hard_ratio": 0.99}
"""Any view is in `soft`, where status also bounds what a prune could free from the view's rows and,
when that bound clears the prune minimum, loads the view to run the prune plan."""


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        yield svc


async def vm_steps(service: ContextService, call: Callable[[], Awaitable[Any]]) -> int:
    """SQLite virtual-machine steps `call` takes on the service's database connection."""
    conn = service.backend.connection  # type: ignore[attr-defined]
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    await conn.set_progress_handler(step, 1)
    try:
        await call()
    finally:
        await conn.set_progress_handler(None, 1)
    return steps[0]


def _turn(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Step {i}: run the tests."}, {"role": "assistant", "content": f"Ran {i}."}]


async def session_with_history(
    service: ContextService, session_id: str, *, hidden: int, compactions: int, minimum: int
) -> None:
    """`hidden` messages with usage reported every few turns, taken out of the view the way a
    removal strategy does it, `compactions` records in its history, then the same 20-message view
    every such session has, in `soft`."""
    await service.open_session(session_id, model="gpt-4o", settings={**SOFT, "prune_minimum": minimum})
    for start in range(0, hidden // 2, 5):
        await service.append(session_id, [m for i in range(start, start + 5) for m in _turn(i)], usage=USAGE)
    async with service.store.write(session_id) as tx:
        rows = await tx.rows()
        await tx.hide_messages([r.id for r in rows])
        for _ in range(compactions):
            await tx.add_compaction(
                CompactionRecord(
                    strategy="oldest",
                    summarizer="none",
                    tokens_before=900,
                    tokens_after=500,
                    head_messages=10,
                    head_tokens=400,
                    summary_tokens=0,
                )
            )
        freed = sum(r.tokens for r in rows)
        await tx.save_session(tx.session.model_copy(update={"tokens_in_view": tx.session.tokens_in_view - freed}))
    await service.append(session_id, [m for i in range(10) for m in _turn(1_000 + i)], usage=USAGE)
    status = await service.status(session_id)
    assert status.state == "soft" and status.message_count == hidden + 20
    assert status.cache_hit_rate is not None and status.compaction.compactions == compactions


@pytest.mark.parametrize("minimum", [1_000_000, 1], ids=["rows only", "view loaded"])
async def test_status_and_append_read_the_same_with_twenty_times_the_history(service, minimum: int):
    await session_with_history(service, "short", hidden=100, compactions=12, minimum=minimum)
    await session_with_history(service, "long", hidden=2_000, compactions=240, minimum=minimum)
    for session_id in ("short", "long"):
        await service.status(session_id)  # anything read once per process is read now
    short = await vm_steps(service, lambda: service.status("short"))
    long = await vm_steps(service, lambda: service.status("long"))
    assert long <= short * 1.05, f"status: {long:,} steps with 20x the history, {short:,} without"

    def one(session_id: str) -> Callable[[], Awaitable[Any]]:
        return lambda: service.append(session_id, [{"role": "user", "content": "carry on"}])

    short = await vm_steps(service, one("short"))
    long = await vm_steps(service, one("long"))
    assert long <= short * 1.05, f"append: {long:,} steps with 20x the history, {short:,} without"
    # The view is what both show, and what both count.
    assert [m.text for m in (await service.session_view("long"))[1]][-3:] == [
        "Step 1009: run the tests.",
        "Ran 1009.",
        "carry on",
    ]


async def test_status_reports_what_compaction_and_prune_did(service):
    await service.open_session("s", model="gpt-4o", settings={"context_window": 6_000, "max_output": 1_000})
    for i in range(12):
        await service.append(
            "s",
            [
                {"role": "user", "content": f"question {i}?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"file{i}.py\n" * 150},
                {"role": "assistant", "content": "answer " * 40},
            ],
            usage=USAGE,
        )
    pruned = await service.prune("s", clear_at_least=0)
    assert pruned.tokens_freed > 0
    await service.compact("s", summarizer="extractive")
    for i in range(8):
        await service.append(
            "s", [{"role": "user", "content": f"more {i}"}, {"role": "assistant", "content": "ok " * 300}]
        )
    await service.compact("s", strategy="oldest")
    records = await service.store.compactions("s")
    session = await service.store.get_session("s")
    status = await service.status("s")
    assert len(records) == 2 and status.compaction is not None
    assert status.compaction.compactions == session.compaction_count == 2
    assert status.compaction.tokens_freed == session.compaction_tokens_freed == sum(r.tokens_freed for r in records)
    assert [(c.summarizer, c.tokens_before, c.tokens_after) for c in status.compaction.recent] == [
        (r.summarizer, r.tokens_before, r.tokens_after) for r in records
    ]
    assert (status.compaction.prunes, status.compaction.prune_tokens_freed) == (1, pruned.tokens_freed)
    # A session deleted and opened again under the same id starts with none.
    await service.delete_session("s")
    await service.open_session("s", model="gpt-4o")
    assert (await service.status("s")).compaction is None
    assert (await service.store.get_session("s")).compaction_count == 0


async def test_an_older_database_gets_its_compaction_totals_from_its_history(tmp_path: Path):
    """The migration that adds the totals fills them in from the compactions already recorded,
    with several processes opening the database at once."""
    adds_totals = next(i for i, script in enumerate(MIGRATIONS) if "compaction_count" in script)
    path = tmp_path / "contextfold.db"
    with sqlite3.connect(path) as conn:
        for script in MIGRATIONS[:adds_totals]:
            for statement in statements(script):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {adds_totals}")
        conn.executemany(
            "INSERT INTO sessions (owner, id, model, created_at, updated_at) VALUES (?, ?, 'gpt-4o', 0, 0)",
            [("", "s"), ("", "quiet"), ("bob", "s")],
        )
        for n, (owner, before, after) in enumerate([("", 1_000, 300), ("", 800, 500), ("bob", 50, 20)]):
            record = CompactionRecord(
                id=f"c{n}",
                session_id="s",
                summarizer="x",
                tokens_before=before,
                tokens_after=after,
                head_messages=1,
                head_tokens=1,
                summary_tokens=1,
            )
            conn.execute(
                "INSERT INTO compactions (id, owner, session_id, created_at, data) VALUES (?, ?, 's', ?, ?)",
                (record.id, owner, float(n), record.model_dump_json()),
            )
    stores = await asyncio.gather(*(SQLiteStore.open(path) for _ in range(3)))
    try:
        alice, bob = stores[0].tenant(""), stores[1].tenant("bob")
        migrated = await alice.get_session("s")
        assert (migrated.compaction_count, migrated.compaction_tokens_freed) == (2, 1_000)
        assert (await alice.get_session("quiet")).compaction_count == 0
        assert (await bob.get_session("s")).compaction_tokens_freed == 30
        async with stores[2].tenant("").write("s") as tx:
            await tx.add_compaction(
                CompactionRecord(
                    summarizer="x",
                    tokens_before=500,
                    tokens_after=100,
                    head_messages=1,
                    head_tokens=1,
                    summary_tokens=1,
                )
            )
        assert await alice.compaction_totals("s") == (3, 1_400)
    finally:
        for store in stores:
            await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION

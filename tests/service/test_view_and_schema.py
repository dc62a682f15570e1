"""The view after a compaction, and schema migrations on an existing database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from contextfold.config import load_settings
from contextfold.domain import MessageRow, ViewAnchor
from contextfold.policy.view import in_view, load_from
from contextfold.service.facade import ContextService
from contextfold.store.schema import MIGRATIONS, SCHEMA_VERSION, statements

pytestmark = pytest.mark.anyio


def _rows(n: int) -> list[MessageRow]:
    return [MessageRow(f"m{i}", i, "user" if i % 2 else "assistant", 10, i % 2 == 1) for i in range(1, n + 1)]


def test_view_is_marker_summary_tail_then_newer():
    rows = _rows(11)
    anchor = ViewAnchor(marker_seq=8, summary_seq=9, tail_start_seq=5)
    assert [r.seq for r in in_view(rows, anchor)] == [8, 9, 5, 6, 7, 10, 11]
    assert load_from(anchor) == 4
    no_tail = ViewAnchor(marker_seq=8, summary_seq=9)
    assert [r.seq for r in in_view(rows, no_tail)] == [8, 9, 10, 11]
    assert load_from(no_tail) == 7
    assert in_view(rows, None) == rows
    # Loading from load_from() gives the same view as loading everything.
    assert in_view(rows[load_from(anchor) :], anchor) == in_view(rows, anchor)


def test_an_earlier_marker_and_summary_inside_the_tail_stay_hidden():
    rows = _rows(12)
    rows[7] = MessageRow("m8", 8, "user", 10, False)  # first compaction's marker
    rows[8] = MessageRow("m9", 9, "assistant", 10, False, summary=True)
    second = ViewAnchor(marker_seq=11, summary_seq=12, tail_start_seq=6)
    assert [r.seq for r in in_view(rows, second)] == [11, 12, 6, 7, 10]


async def test_a_version_1_database_is_migrated_in_place(tmp_path: Path):
    db_path = tmp_path / "contextfold.db"
    with sqlite3.connect(db_path) as conn:
        for statement in statements(MIGRATIONS[0]):
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO sessions (id, model, created_at, updated_at, next_seq, message_count) "
            "VALUES ('old', 'gpt-4o', 0, 0, 3, 2)"
        )
        conn.execute(
            "INSERT INTO messages (id, session_id, seq, role, created_at, tokens) VALUES "
            "('m1', 'old', 1, 'user', 0, 7), ('m2', 'old', 2, 'assistant', 0, 9)"
        )
        conn.execute(
            "INSERT INTO parts (message_id, idx, session_id, type, data, tokens) VALUES "
            "('m1', 0, 'old', 'text', '{\"type\":\"text\",\"text\":\"hello\"}', 3), "
            "('m2', 0, 'old', 'text', '{\"type\":\"text\",\"text\":\"hi\"}', 5)"
        )
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        rows = await svc.store.rows("old")
        assert [(r.id, r.turn_start, r.tokens) for r in rows] == [("m1", True, 7), ("m2", False, 9)]
        context = await svc.get_context("old")
        assert [m["content"] for m in context.messages] == ["hello", "hi"]
    async with aiosqlite.connect(db_path) as conn:
        async with conn.execute("PRAGMA user_version") as cur:
            assert (await cur.fetchone())[0] == SCHEMA_VERSION


async def test_a_newer_database_is_refused(tmp_path: Path):
    db_path = tmp_path / "contextfold.db"
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="upgrade contextfold"):
        await ContextService.open(load_settings({"home": tmp_path}, environ={}))


async def test_the_spill_store_size_follows_every_insert_and_delete(tmp_path: Path):
    """The database keeps the spill store's size (migration 6): one content counts once, from its
    first output row to its last, through gc, shared contents and cascading session deletes."""
    settings = load_settings({"home": tmp_path, "max_lines": 5}, environ={})

    def recomputed() -> int:
        with sqlite3.connect(settings.database_path) as conn:
            return conn.execute(
                "SELECT COALESCE(SUM(bytes), 0) FROM (SELECT MAX(bytes) AS bytes FROM outputs GROUP BY digest)"
            ).fetchone()[0]

    async with await ContextService.open(settings) as service:
        sizes = []
        for session, texts in {"a": ["one\n" * 50, "two\n" * 60], "b": ["one\n" * 50, "three\n" * 70]}.items():
            await service.open_session(session, model="gpt-4o")
            for text in texts:
                await service.spill(session, text)
                sizes.append(await service.backend.spill_bytes())
        assert sizes == [200, 440, 440, 860]  # "one" is stored once although two sessions spilled it
        assert await service.backend.spill_bytes() == recomputed()
        await service.delete_session("a")  # its outputs go by cascade; "one" is still b's
        assert await service.backend.spill_bytes() == recomputed() == 200 + 420
        await service.delete_session("b")
        assert await service.backend.spill_bytes() == recomputed() == 0

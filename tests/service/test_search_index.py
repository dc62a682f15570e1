"""The SQLite search index's deferred batches (`search_index_lag`): appends leave new parts
waiting and index them in one batch once enough wait; every search indexes what waits first, so
it never misses a stored message; a part not yet indexed that is changed or deleted leaves no
trace in the index; a part that reuses a deleted part's rowid below the watermark is indexed at
once. Several real processes on one home: `tests/e2e/test_search_e2e.py`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_view_cache import _call

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio


async def _service(home: Path, lag: int) -> ContextService:
    return await ContextService.open(load_settings({"home": home, "search_index_lag": lag}, environ={}))


def _state(home: Path) -> tuple[int, int, int]:
    """(parts waiting to be indexed, parts in the index, parts stored)."""
    with sqlite3.connect(home / "contextfold.db") as conn:
        waiting = conn.execute(
            "SELECT COUNT(*) FROM parts WHERE rowid > (SELECT recent_upto FROM search_backfill)"
        ).fetchone()[0]
        indexed = conn.execute("SELECT COUNT(*) FROM search_index_docsize").fetchone()[0]  # one row a document
        stored = conn.execute("SELECT COUNT(*) FROM parts").fetchone()[0]
    return waiting, indexed, stored


def _intact(home: Path) -> None:
    """FTS5's own check of the index against the parts it indexes (every part indexed by then)."""
    with sqlite3.connect(home / "contextfold.db") as conn:
        conn.execute("INSERT INTO search_index (search_index, rank) VALUES ('integrity-check', 1)")


def _refs(page) -> list[str]:
    return [h.ref for h in page.hits]


async def test_appends_wait_until_the_lag_then_index_in_their_own_transaction(tmp_path):
    service = await _service(tmp_path, lag=5)
    try:
        await service.open_session("s", model="gpt-4o")
        for i in range(4):
            await service.append("s", [{"role": "user", "content": f"waiting message number_{i}"}])
        assert _state(tmp_path) == (4, 0, 4)
        await service.append("s", [{"role": "user", "content": "the fifth one"}])
        assert _state(tmp_path) == (0, 5, 5)  # the append that found 5 waiting indexed them all
        _intact(tmp_path)
    finally:
        await service.close()


async def test_a_search_right_after_appends_finds_them(tmp_path):
    service = await _service(tmp_path, lag=10_000)
    try:
        await service.open_session("s", model="gpt-4o")
        await service.append("s", [{"role": "user", "content": "the quokkaplan is ready"}])
        await service.append("s", [{"role": "assistant", "content": "quokkaplan noted"}])
        assert _state(tmp_path)[0] == 2
        assert sorted(_refs(await service.search("quokkaplan", session_id="s"))) == ["m1", "m2"]
        assert _state(tmp_path) == (0, 2, 2)
        await service.append("s", [{"role": "user", "content": "one more quokkaplan"}])
        assert sorted(_refs(await service.search("quokkaplan", within="all"))) == ["m1", "m2", "m3"]
        _intact(tmp_path)
    finally:
        await service.close()


async def test_waiting_parts_changed_or_deleted_leave_nothing_in_the_index(tmp_path):
    service = await _service(tmp_path, lag=10_000)
    try:
        await service.open_session("s", model="gpt-4o")
        await service.open_session("gone", model="gpt-4o")
        await service.append("gone", [{"role": "user", "content": "a doomed wombatnote"}])
        # A tool call whose result comes in a later append: its part is updated while it waits.
        await service.append("s", [_call("c1", "grep wombatnote")])
        await service.append("s", [{"role": "tool", "tool_call_id": "c1", "content": "found the platypusline"}])
        await service.delete_session("gone")
        assert _state(tmp_path)[1] == 0  # nothing indexed yet, so nothing was un-indexed either
        assert _refs(await service.search("platypusline", session_id="s")) == ["m1"]
        assert _refs(await service.search("wombatnote", within="all")) == ["m1"]  # the call's input, not "gone"
        _intact(tmp_path)
        # And once indexed, a change and a deletion go through the index as before.
        await service.append("s", [_call("c2", "ls ibisfolder")])
        await service.search("ibisfolder", session_id="s")
        await service.append("s", [{"role": "tool", "tool_call_id": "c2", "content": "kestrelfile"}])
        assert _refs(await service.search("kestrelfile", session_id="s")) == ["m2"]
        await service.delete_session("s")
        assert (await service.search("kestrelfile", within="all")).hits == []
        _intact(tmp_path)
    finally:
        await service.close()


async def test_a_part_reusing_an_indexed_rowid_is_indexed_at_once(tmp_path):
    service = await _service(tmp_path, lag=10_000)
    try:
        await service.open_session("keep", model="gpt-4o")
        await service.open_session("last", model="gpt-4o")
        await service.append("keep", [{"role": "user", "content": "the first marmotline"}])
        await service.append("last", [{"role": "user", "content": "the last row, soon deleted"}])
        await service.search("marmotline", within="all")  # both indexed: the watermark is at the last row
        await service.delete_session("last")
        # SQLite gives the next part the deleted last row's rowid, under the watermark.
        await service.append("keep", [{"role": "user", "content": "a newer cormorantnote"}])
        with sqlite3.connect(tmp_path / "contextfold.db") as conn:
            (reused,) = conn.execute(
                "SELECT MAX(rowid) <= (SELECT recent_upto FROM search_backfill) FROM parts"
            ).fetchone()
        assert reused
        assert _refs(await service.search("cormorantnote", session_id="keep")) == ["m2"]
        _intact(tmp_path)
    finally:
        await service.close()


async def test_without_a_lag_each_append_indexes_its_own_parts(tmp_path):
    service = await _service(tmp_path, lag=0)
    try:
        await service.open_session("s", model="gpt-4o")
        await service.append("s", [{"role": "user", "content": "indexed at once"}])
        assert _state(tmp_path) == (0, 1, 1)
    finally:
        await service.close()


async def test_a_read_only_home_is_searched_as_its_index_stands_and_says_what_waits(tmp_path):
    from contextfold.home.opening import open_for_reading

    service = await _service(tmp_path, lag=10_000)
    try:
        await service.open_session("s", model="gpt-4o")
        await service.append("s", [{"role": "user", "content": "an indexed heronline"}])
        await service.search("heronline", session_id="s")
        await service.append("s", [{"role": "user", "content": "a waiting heronline"}])
    finally:
        await service.close()
    reader = await open_for_reading(load_settings({"home": tmp_path}, environ={}))
    assert reader is not None
    async with reader as service:
        page = await service.search("heronline", session_id="s")
        assert _refs(page) == ["m1"] and "1 recently stored parts are not in the search index" in page.notes[0]
    assert _state(tmp_path)[0] == 1  # nothing written

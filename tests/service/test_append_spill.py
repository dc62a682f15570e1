"""An append stores its big outputs before it takes the write lock every process shares.

The blob store here is the real filesystem backend with one thing added: every `put` first
probes the database's write lock from a connection of its own (`BEGIN IMMEDIATE` with no busy
wait), as another process would. A put made inside the append's write transaction finds the lock
taken; one made before it finds the lock free. A probe can also run a callback while the lock is
free, to change the session from another service on the same home (another process) between
the append's first look at the session and its transaction.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import pytest

from contextfold.blobs.base import StoredBlob
from contextfold.blobs.files import FileBlobs
from contextfold.config import load_settings
from contextfold.errors import InvalidInput
from contextfold.service.facade import ContextService
from contextfold.store import SQLiteStore

pytestmark = pytest.mark.anyio


def _lock_is_free(database: Path) -> bool:
    conn = sqlite3.connect(database, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return False
    finally:
        conn.close()


class LockProbe(FileBlobs):
    """`FileBlobs` that notes, at every put, whether the database's write lock was free."""

    def __init__(self, root: Path, database: Path) -> None:
        super().__init__(root)
        self.database = database
        self.free: list[bool] = []
        self.while_free: Callable[[], Awaitable[None]] | None = None
        """Run once, in a loop of its own, at the first put that finds the lock free."""

    def put(self, content: bytes | Iterable[bytes]) -> StoredBlob:
        free = _lock_is_free(self.database)
        self.free.append(free)
        if free and self.while_free is not None:
            change, self.while_free = self.while_free, None
            asyncio.run(change())  # a worker thread (asyncio.to_thread): no loop runs here
        return super().put(content)


async def _service(home: Path) -> tuple[ContextService, LockProbe]:
    settings = load_settings({"home": home}, environ={})
    store = await SQLiteStore.open(settings.database_path)
    probe = LockProbe(settings.spill_path, settings.database_path)
    return ContextService(settings, store, probe), probe


def _log(lines: int, tag: str = "ok") -> str:
    return "".join(f"line {i} {tag}\n" for i in range(1, lines + 1))


def _call(call_id: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
    }


def _result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _set_from_another_process(home: Path, **settings: int) -> Callable[[], Awaitable[None]]:
    async def change() -> None:
        async with await ContextService.open(load_settings({"home": home}, environ={})) as other:
            await other.open_session("s", settings=settings)

    return change


async def test_append_stores_blobs_before_its_transaction_and_none_when_it_fails(tmp_path: Path) -> None:
    service, probe = await _service(tmp_path)
    async with service:
        await service.open_session("s", model="gpt-4o")
        await service.append("s", [_call("c1")])
        output, paste = _log(3_000), "pasted " * 30_000  # over 2,000 lines; over the window's share
        appended = await service.append("s", [_result("c1", output), {"role": "user", "content": paste}])
        assert probe.free == [True, True]
        assert sorted(s.lines for s in appended.spilled) == [1, 3_000]
        by_lines = {s.lines: s.output_id for s in appended.spilled}
        assert await service.output_text(by_lines[3_000]) == output
        assert await service.output_text(by_lines[1]) == paste
        stored = {blob.digest for blob in probe.list()}
        assert len(stored) == 2

        # A failed append leaves no blob behind: the one stored before its transaction is removed.
        with pytest.raises(InvalidInput, match="no tool call with id 'c9'"):
            await service.append("s", [_result("c9", _log(3_000, "lost"))])
        assert probe.free == [True, True, True]
        assert {blob.digest for blob in probe.list()} == stored


async def test_limits_raised_meanwhile_are_honoured_and_the_unused_blob_removed(tmp_path: Path) -> None:
    service, probe = await _service(tmp_path)
    async with service:
        await service.open_session("s", model="gpt-4o")
        await service.append("s", [_call("c1")])
        output = _log(3_000)  # 3,000 lines: over max_lines until another process raises it
        probe.while_free = _set_from_another_process(tmp_path, max_lines=10_000, max_bytes=1_000_000)
        appended = await service.append("s", [_result("c1", output)])
        assert probe.free == [True]
        assert appended.spilled == []
        context = await service.get_context("s")
        assert context.messages[-1]["content"] == output
        assert list(probe.list()) == []


async def test_limits_lowered_meanwhile_are_honoured(tmp_path: Path) -> None:
    service, probe = await _service(tmp_path)
    async with service:
        await service.open_session("s", model="gpt-4o")
        await service.append("s", [_call("c1"), _call("c2")])
        big, small = _log(3_000, "big"), _log(100, "small")  # small is under max_lines until it drops to 50
        probe.while_free = _set_from_another_process(tmp_path, max_lines=50)
        appended = await service.append("s", [_result("c1", big), _result("c2", small)])
        # The small one is spilled inside the transaction: its limit changed after the first look.
        assert probe.free == [True, False]
        assert [(s.call_id, s.lines) for s in appended.spilled] == [("c1", 3_000), ("c2", 100)]
        for spilled, text in zip(appended.spilled, (big, small), strict=True):
            assert await service.output_text(spilled.output_id) == text
        # Both previews follow the new limit: the big one was cut again, not as decided before.
        context = await service.get_context("s")
        results = [m["content"] for m in context.messages if m["role"] == "tool"]
        assert len(results) == 2
        for shown in results:
            assert len(shown.splitlines()) <= 50 + 2  # the preview, a blank line, the hint

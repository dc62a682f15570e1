"""Several `contextfold serve` processes share one spill store without losing what they acknowledged.

Setup: three real server processes (streamable HTTP on loopback) on one data home whose spill
quota holds about fifteen outputs, two real MCP clients on each. Every client spills, again and
again, texts drawn from one pool of 24 (so the processes keep storing content another one has
just evicted, the same content-addressed file), some through `spill` and some as tool results
through `append`. The store is past its eviction threshold almost all the time, so each process
evicts (gc) every few writes while the others write. After each acknowledged write the client
reads the output back at once.

It proves that, under this load:

* no write is refused: every output is far smaller than the quota, so each fits;
* every acknowledged output reads back whole, or — if enough newer outputs pushed it out of the
  store before the read — says it was evicted; never "its file is gone" or damaged;
* afterwards every output row points at a file holding exactly its content, and the store's
  referenced bytes are within the quota.

The unit tests below pin each race down deterministically with two stores (two connections, as
two processes have) on one home in one process.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import sqlite3
import string
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from _servers import Server, client, start_server
from mcp import Client

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio

SERVERS = 3
CLIENTS_PER_SERVER = 2
WRITES_PER_CLIENT = 40
POOL = 48
LINES = 50
"""Each pooled text: 50 lines of 80 characters, 4,050 bytes, one page of read_output."""
QUOTA = 64 * 1024
SEED = 20261125
CALL_TIMEOUT = 120.0
"""Only to turn a hang into a failure; no assertion is about time."""


def _pool() -> list[str]:
    rng = random.Random(SEED)
    return [
        "\n".join(f"{t:02d}:{i:03d} " + "".join(rng.choices(string.ascii_letters, k=72)) for i in range(LINES))
        for t in range(POOL)
    ]


@dataclass
class Seen:
    acked: list[tuple[str, int]] = field(default_factory=list)
    """(output id, pool index) of every acknowledged write."""
    whole: int = 0
    evicted: int = 0
    errors: list[str] = field(default_factory=list)


async def _call(c: Client, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT):
        return await c.call_tool(name, args)


def _text_of(read: dict[str, Any]) -> str:
    return "\n".join(line.split("\t", 1)[1] for line in read["text"].split("\n"))


async def _run_client(k: int, server: Server, pool: list[str], seen: Seen) -> None:
    rng = random.Random(SEED + k)
    session = f"client-{k}"
    async with client(server.url) as c:
        opened = await _call(c, "session_open", {"session_id": session, "model": "gpt-4o"})
        assert not opened.is_error, opened.content[0].text
        for n in range(WRITES_PER_CLIENT):
            t = rng.randrange(POOL)
            if n % 3 == 2:
                call = {"id": f"c{n}", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
                result = await _call(
                    c,
                    "append",
                    {
                        "session_id": session,
                        "messages": [
                            {"role": "assistant", "content": None, "tool_calls": [call]},
                            {"role": "tool", "tool_call_id": f"c{n}", "content": pool[t]},
                        ],
                    },
                )
                if result.is_error:
                    seen.errors.append(f"client {k} append {n}: {result.content[0].text}")
                    continue
                spilled = result.structured_content["spilled"]
                assert len(spilled) == 1, spilled
                output_id = spilled[0]["output_id"]
            else:
                result = await _call(c, "spill", {"session_id": session, "text": pool[t], "tool": "cat"})
                if result.is_error:
                    seen.errors.append(f"client {k} spill {n}: {result.content[0].text}")
                    continue
                output_id = result.structured_content["output_id"]
            seen.acked.append((output_id, t))
            read = await _call(c, "read_output", {"id": output_id, "limit": 200})
            if read.is_error:
                text = read.content[0].text
                if "was evicted" in text:
                    seen.evicted += 1
                else:
                    seen.errors.append(f"client {k} read {output_id} (write {n}): {text}")
                continue
            if _text_of(read.structured_content) != pool[t] or read.structured_content["has_more"]:
                seen.errors.append(f"client {k} read {output_id} (write {n}): not the text it spilled")
                continue
            seen.whole += 1


def _stored(home: Path) -> tuple[list[tuple[str, str, int]], set[str]]:
    db = sqlite3.connect(f"file:{home / 'contextfold.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT id, digest, bytes FROM outputs").fetchall()
        tombstones = {r[0] for r in db.execute("SELECT id FROM output_tombstones WHERE reason = 'evicted'")}
    finally:
        db.close()
    return rows, tombstones


async def test_servers_sharing_a_spill_store_never_lose_an_acknowledged_output(tmp_path: Path) -> None:
    pool = _pool()
    # No eviction grace: every write may evict what others just wrote, the race this test is about.
    env = {
        "CONTEXTFOLD_SPILL_QUOTA_BYTES": str(QUOTA),
        "CONTEXTFOLD_MAX_BYTES": "1024",
        "CONTEXTFOLD_SPILL_EVICTION_GRACE_SECONDS": "0",
    }
    servers: list[Server] = []
    seen = [Seen() for _ in range(SERVERS * CLIENTS_PER_SERVER)]

    async def start() -> None:
        servers.append(await anyio.to_thread.run_sync(lambda: start_server(tmp_path, env=env)))

    try:
        async with anyio.create_task_group() as tg:  # all at once: each takes a second or two to start
            for _ in range(SERVERS):
                tg.start_soon(start)
        async with anyio.create_task_group() as tg:
            for k in range(SERVERS * CLIENTS_PER_SERVER):
                tg.start_soon(_run_client, k, servers[k % SERVERS], pool, seen[k])
    finally:
        for server in servers:
            server.stop()
    logs = "\n".join(s.log_tail(100_000) for s in servers)
    assert "Traceback" not in logs, logs[-3_000:]

    errors = [e for s in seen for e in s.errors]
    assert not errors, f"{len(errors)} failures, first ones:\n" + "\n".join(errors[:10])
    acked = {output_id: t for s in seen for output_id, t in s.acked}
    assert len(acked) == SERVERS * CLIENTS_PER_SERVER * WRITES_PER_CLIENT

    # Every output still recorded has its content on disk, byte for byte; every other
    # acknowledged one was evicted (and says so); the referenced bytes are within the quota.
    rows, evicted = _stored(tmp_path)
    spill_dir = tmp_path / "outputs"
    for output_id, digest, size in rows:
        data = (spill_dir / digest).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest and len(data) == size, output_id
        assert data.decode() == pool[acked[output_id]]
    assert set(acked) == {r[0] for r in rows} | (evicted & set(acked))
    assert sum({digest: size for _id, digest, size in rows}.values()) <= QUOTA
    whole, late = sum(s.whole for s in seen), sum(s.evicted for s in seen)
    assert len(evicted) > POOL, "the store hardly evicted: the race was not exercised"
    print(
        f"{len(acked)} outputs acknowledged; {whole} read back whole at once, {late} evicted before the read; "
        f"{len(evicted)} evicted in all, {len(rows)} still stored"
    )


# -- two stores on one home, one process -----------------------------------------------------------


async def _store(home: Path, **overrides: Any) -> ContextService:
    """A store whose outputs may be evicted at once (no grace): these tests are about the races."""
    settings = {"home": home, "spill_eviction_grace_seconds": 0, **overrides}
    return await ContextService.open(load_settings(settings, environ={}))


def _noise(n: int, seed: int) -> str:
    """`n` characters of distinct lines (every text its own content file)."""
    rng = random.Random(seed)
    return "\n".join("".join(rng.choices(string.ascii_letters, k=79)) for _ in range(n // 80 + 1))[:n]


def _disk_bytes(home: Path) -> int:
    """Bytes of content files on disk, counted without the code under test."""
    return sum(p.stat().st_size for p in (home / "outputs").iterdir() if re.fullmatch("[0-9a-f]{64}", p.name))


async def _expire(service: ContextService, output_id: str) -> None:
    await service.backend.connection.execute(  # type: ignore[attr-defined]
        "UPDATE outputs SET created_at = ? WHERE id = ?", (time.time() - 8 * 86_400, output_id)
    )


async def test_a_gc_elsewhere_never_deletes_a_file_a_writer_is_recording(tmp_path: Path) -> None:
    text = _noise(5_000, 1)
    async with await _store(tmp_path) as a, await _store(tmp_path) as b:
        await a.open_session("s", model="gpt-4o")
        old = await a.spill("s", text)
        await _expire(a, old.output_id)  # gc will remove it: the last row pointing at the file
        async with a.store.write("s") as tx:
            new = await a.outputs.add(tx, text, owner="")  # the same content: the same file
            collect = asyncio.create_task(b.gc())
            # Give b's gc time to read the rows (a's new one is not committed) and reach the write
            # lock a holds. It must not decide on what it read before taking the lock.
            await asyncio.sleep(0.5)
        collected = await collect
        assert collected.outputs_removed == 1 and collected.files_removed == 0
        read = await b.read_output(new.record.id)
        assert _text_of(read.model_dump()) == text and not read.has_more


async def test_a_writer_stores_its_file_again_when_a_gc_took_it_before_its_transaction(tmp_path: Path) -> None:
    text = _noise(5_000, 2)
    async with await _store(tmp_path) as a, await _store(tmp_path) as b:
        await a.open_session("s", model="gpt-4o")
        old = await a.spill("s", text)
        await _expire(a, old.output_id)
        stored = await a.outputs.store_file(text)  # a writer's file, written before its transaction
        assert (await b.gc()).files_removed == 1  # no row points at it yet: b may delete it
        assert not a.outputs.files.exists(stored.digest)
        async with a.store.write("s") as tx:
            new = await a.outputs.add(tx, text, owner="", stored=stored)
        assert (await b.output_text(new.record.id)) == text


async def test_a_spill_that_fits_is_not_refused_on_a_stale_count(tmp_path: Path) -> None:
    """b frees the store; a's two concurrent 35 kB spills then fit a 100 kB quota with room to spare."""
    async with await _store(tmp_path, spill_quota_bytes=100_000) as a, await _store(tmp_path) as b:
        await a.open_session("gone", model="gpt-4o")
        await a.open_session("s", model="gpt-4o")
        await a.spill("gone", _noise(50_000, 3))
        await b.delete_session("gone")
        assert _disk_bytes(tmp_path) == 0
        texts = [_noise(35_000, 4), _noise(35_000, 5)]
        spilled = await asyncio.gather(*(a.spill("s", t) for t in texts))
        for result, text in zip(spilled, texts, strict=True):
            assert (await b.output_text(result.output_id)) == text
        assert await a.outputs.used_bytes() == _disk_bytes(tmp_path) == 70_000


async def test_the_quota_counts_what_every_process_stored(tmp_path: Path) -> None:
    quota = 100_000
    async with (
        await _store(tmp_path, spill_quota_bytes=quota) as a,
        await _store(tmp_path, spill_quota_bytes=quota) as b,
    ):
        await a.open_session("a", model="gpt-4o")
        await b.open_session("b", model="gpt-4o")
        await a.spill("a", _noise(10_000, 10))
        for n in range(8):
            await b.spill("b", _noise(10_000, 11 + n))
            assert _disk_bytes(tmp_path) <= quota
        last = await a.spill("a", _noise(30_000, 20))
        assert _disk_bytes(tmp_path) <= quota
        assert await b.outputs.used_bytes() == _disk_bytes(tmp_path)
        assert (await b.output_text(last.output_id)) == _noise(30_000, 20)


async def test_a_writer_evicts_in_its_own_transaction_when_others_took_the_room(tmp_path: Path) -> None:
    """Between a writer's make_room and its transaction, another process filled the store."""
    quota = 100_000
    async with await _store(tmp_path, spill_quota_bytes=quota) as a, await _store(tmp_path) as b:
        await a.open_session("s", model="gpt-4o")
        await b.open_session("b", model="gpt-4o")
        await a.outputs.make_room(20_000)  # nothing to evict yet
        older = [(await b.spill("b", _noise(10_000, 30 + n))).output_id for n in range(9)]  # b: no quota
        async with a.store.write("s") as tx:
            new = await a.outputs.add(tx, _noise(20_000, 40), owner="")
        assert (await b.output_text(new.record.id)) == _noise(20_000, 40)
        assert await b.outputs.used_bytes() == quota
        evicted = [i for i in older if await a.store.output_tombstone(i) is not None]
        assert evicted == older[:1]  # the oldest, and only as much as the new output needs
        await a.outputs.make_room(0)  # the next write first deletes their files
        assert _disk_bytes(tmp_path) == await a.outputs.used_bytes()

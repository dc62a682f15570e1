"""Spilled outputs kept in PostgreSQL, shared by replicas, with the guarantees of the filesystem store.

The storm of tests/test_spill_processes.py, on a PostgreSQL database instead of one data home:
three `serve --http --database` processes, two clients each, 240 spills and appends from 48
overlapping texts through a 64 KiB quota that evicts most of them. Then the races it pins down
with two stores in one process, on PostgreSQL: there the write lock that proves a blob
unreferenced before it is deleted is an advisory lock (store/pgschema.SPILL_LOCK), not SQLite's.
And the failures a replica can meet: a connection the server dropped is replaced before a
request uses it, and an unreachable database stops `serve` with one line, no password in it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from _servers import Server, start_server
from test_spill_processes import (
    CLIENTS_PER_SERVER,
    POOL,
    QUOTA,
    SERVERS,
    WRITES_PER_CLIENT,
    Seen,
    _noise,
    _pool,
    _run_client,
    _text_of,
)

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio


def _stored(url: str) -> tuple[list[tuple[str, str, int]], set[str], dict[str, bytes]]:
    """Output rows, evicted ids and every blob's bytes, read with plain psycopg."""
    with psycopg.connect(url) as db:
        rows = db.execute("SELECT id, digest, bytes FROM outputs").fetchall()
        evicted = {r[0] for r in db.execute("SELECT id FROM output_tombstones WHERE reason = 'evicted'")}
        blobs = {
            digest: b"".join(
                bytes(c[0])
                for c in db.execute("SELECT data FROM blob_chunks WHERE blob_id = %s ORDER BY n", (blob_id,))
            )
            for digest, blob_id in db.execute("SELECT digest, blob_id FROM blobs").fetchall()
        }
    return rows, evicted, blobs


async def test_replicas_sharing_spills_in_postgresql_never_lose_an_acknowledged_output(
    tmp_path: Path, pg_url: str
) -> None:
    pool = _pool()
    # No eviction grace: every write may evict what others just wrote, the race this test is about.
    env = {
        "CONTEXTFOLD_SPILL_QUOTA_BYTES": str(QUOTA),
        "CONTEXTFOLD_MAX_BYTES": "1024",
        "CONTEXTFOLD_SPILL_EVICTION_GRACE_SECONDS": "0",
    }
    servers: list[Server] = []
    seen = [Seen() for _ in range(SERVERS * CLIENTS_PER_SERVER)]

    async def start(i: int) -> None:
        server = await anyio.to_thread.run_sync(
            lambda: start_server(tmp_path / f"replica{i}", "--database", pg_url, env=env)
        )
        servers.append(server)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(SERVERS):
                tg.start_soon(start, i)
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

    rows, evicted, blobs = _stored(pg_url)
    for output_id, digest, size in rows:
        data = blobs[digest]
        assert hashlib.sha256(data).hexdigest() == digest and len(data) == size, output_id
        assert data.decode() == pool[acked[output_id]]
    assert set(acked) == {r[0] for r in rows} | (evicted & set(acked))
    assert sum({digest: size for _id, digest, size in rows}.values()) <= QUOTA
    assert len(evicted) > POOL, "the store hardly evicted: the race was not exercised"
    print(f"{len(acked)} outputs acknowledged across {SERVERS} replicas; {len(evicted)} evicted, {len(rows)} stored")


# -- two stores on one database, one process ---------------------------------------------------------


async def _service(tmp_path: Path, url: str, name: str, **overrides: Any) -> ContextService:
    """A replica whose outputs may be evicted at once (no grace): these tests are about the races."""
    settings = {"home": tmp_path / name, "database": url, "spill_eviction_grace_seconds": 0, **overrides}
    return await ContextService.open(load_settings(settings, environ={}))


def _expire(url: str, output_id: str) -> None:
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE outputs SET created_at = %s WHERE id = %s", (time.time() - 8 * 86_400, output_id))


def _blob_bytes(url: str) -> int:
    with psycopg.connect(url) as db:
        return int(db.execute("SELECT COALESCE(SUM(size), 0) FROM blobs").fetchone()[0])


async def test_a_gc_on_another_replica_never_deletes_a_blob_a_writer_is_recording(tmp_path: Path, pg_url: str) -> None:
    text = _noise(5_000, 1)
    async with await _service(tmp_path, pg_url, "a") as a, await _service(tmp_path, pg_url, "b") as b:
        await a.open_session("s", model="gpt-4o")
        old = await a.spill("s", text)
        _expire(pg_url, old.output_id)
        async with a.store.write("s") as tx:
            new = await a.outputs.add(tx, text, owner="")  # the same content: the same blob
            collect = asyncio.create_task(b.gc())
            await asyncio.sleep(0.5)  # b's gc waits for the spill lock a holds
            assert not collect.done()
        collected = await collect
        assert collected.outputs_removed == 1 and collected.files_removed == 0
        read = await b.read_output(new.record.id)
        assert _text_of(read.model_dump()) == text and not read.has_more


async def test_a_writer_stores_its_blob_again_when_a_gc_took_it_first(tmp_path: Path, pg_url: str) -> None:
    text = _noise(5_000, 2)
    async with await _service(tmp_path, pg_url, "a") as a, await _service(tmp_path, pg_url, "b") as b:
        await a.open_session("s", model="gpt-4o")
        old = await a.spill("s", text)
        _expire(pg_url, old.output_id)
        stored = await a.outputs.store_file(text)
        assert (await b.gc()).files_removed == 1
        with pytest.raises(FileNotFoundError):
            a.outputs.files.stat(stored.digest)
        async with a.store.write("s") as tx:
            new = await a.outputs.add(tx, text, owner="", stored=stored)
        assert (await b.output_text(new.record.id)) == text


async def test_the_quota_counts_what_every_replica_stored(tmp_path: Path, pg_url: str) -> None:
    quota = 100_000
    async with (
        await _service(tmp_path, pg_url, "a", spill_quota_bytes=quota) as a,
        await _service(tmp_path, pg_url, "b", spill_quota_bytes=quota) as b,
    ):
        await a.open_session("a", model="gpt-4o")
        await b.open_session("b", model="gpt-4o")
        await a.spill("a", _noise(10_000, 10))
        for n in range(8):
            await b.spill("b", _noise(10_000, 11 + n))
            assert await a.outputs.used_bytes() <= quota
        last = await a.spill("a", _noise(30_000, 20))
        await b.outputs.make_room(0)  # deletes the blobs of what was evicted
        assert await b.outputs.used_bytes() == _blob_bytes(pg_url) <= quota
        assert (await b.output_text(last.output_id)) == _noise(30_000, 20)
        # Deleting a session gives its content's bytes back, for every replica at once.
        await a.delete_session("a")
        await b.outputs.delete_unreferenced(
            {r.digest for r in await b.backend.outputs()} | set(info.digest for info in b.outputs.files.list())
        )
        assert await a.outputs.used_bytes() == await b.outputs.used_bytes() == _blob_bytes(pg_url)


# -- failures a replica meets --------------------------------------------------------------------------


async def test_a_dropped_connection_costs_no_request(tmp_path: Path, pg_url: str) -> None:
    async with await _service(tmp_path, pg_url, "a") as service:
        await service.open_session("s-x", model="gpt-4o", title="a title with a NUL \x00 in it")
        with psycopg.connect(pg_url, autocommit=True) as admin:  # what a failover or a restart does
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'contextfold' AND pid <> pg_backend_pid()"
            )
            for _ in range(100):  # the backends exit a moment after they are told to
                left = admin.execute(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'contextfold'"
                ).fetchone()[0]
                if not left:
                    break
                time.sleep(0.05)
            time.sleep(0.1)
        for _ in range(3):
            status = await service.status("s-x")
            assert status.message_count == 0
        session = await service.store.get_session("s-x")
        assert session.title == "a title with a NUL \ufffd in it"


def test_serve_refuses_to_start_on_an_unreachable_database_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "contextfold",
            "serve",
            "--http",
            "--database",
            "postgresql://team:hunter2@127.0.0.1:1/contextfold",
        ],
        env={**os.environ, "CONTEXTFOLD_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("contextfold: error: the PostgreSQL database at postgresql://team:***@127.0.0.1:1/")
    assert "is unreachable (Connection refused)" in lines[0] and "hunter2" not in done.stderr

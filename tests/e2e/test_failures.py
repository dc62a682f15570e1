"""Storage failures a user meets, on real filesystems, through a real `contextfold serve` and the CLI.

A full disk (a 2 MB tmpfs filled to the last page), a database written by a newer contextfold, a
damaged database file (garbage bytes, a truncated file) and a read-only data home (a read-only
bind mount, which refuses root too). In every case the server starts and answers each tool over
stdio with the real MCP client; a failure reads as one line that says why and what to do, never
a traceback or a lost connection, and nothing is half-written. `contextfold stats` says the same
in one line with exit code 2 (or, on a read-only home, works).

Mounting needs root (the tests run as root here); elsewhere those tests are skipped.
"""

from __future__ import annotations

import errno
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, CreateMessageResult, TextContent

from contextfold.config import load_settings
from contextfold.service.facade import ContextService
from contextfold.store.schema import SCHEMA_VERSION

pytestmark = pytest.mark.anyio

SESSION = "s"
SPILLED = "".join(f"line {i}: some output\n" for i in range(2_000))


# -- helpers ---------------------------------------------------------------------------------------


def _mount(*args: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or a read-only bind mount needs root")
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")


def _unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=True)  # still busy: detach it


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path))
    try:
        yield path
    finally:
        _unmount(path)


@contextmanager
def read_only_view(source: Path, path: Path) -> Iterator[Path]:
    """`source` seen read-only at `path`: writes fail with EROFS whoever makes them, root included."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(source), str(path))
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount a bind mount read-only here")
        yield path
    finally:
        _unmount(path)


def fill(directory: Path) -> Path:
    """A file that takes every free byte of `directory`'s filesystem."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1 << 9):
            block = b"\0" * chunk
            try:
                while True:
                    f.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


async def _summary(context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="a summary"), model="m")


@asynccontextmanager
async def stdio(home: Path, log: Path, *, sampling: bool = False) -> AsyncIterator[Client]:
    """The real `contextfold serve` over stdio on `home`, its stderr in `log`.

    With `sampling` the client offers its model, so `compact` asks for a summary before it runs.
    """
    env = {**os.environ, "CONTEXTFOLD_HOME": str(home)}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("CONTEXTFOLD_CONFIG", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "contextfold", "serve"], env=env)
    with open(log, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), sampling_callback=_summary if sampling else None) as c:
            yield c


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    return subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def text(result: CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def one_line_error(result: CallToolResult) -> str:
    message = text(result)
    assert result.is_error, message[:500]
    assert "\n" not in message.strip() and "Traceback" not in message, message
    return message


def assert_one_line_cli_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("contextfold: error: "), done.stderr
    for part in expected:
        assert part in lines[0], (part, lines[0])


def assert_no_traceback(log: Path) -> None:
    logged = log.read_text("utf-8", errors="replace")
    assert "Traceback" not in logged, logged[-3_000:]


async def populate(home: Path) -> str:
    """A session with two messages and a spilled output, written and closed cleanly; the output's id."""
    settings = load_settings({"home": home}, environ={})
    async with await ContextService.open(settings) as service:
        await service.open_session(SESSION, model="gpt-4o")
        await service.append(
            SESSION,
            [{"role": "user", "content": "what is in the log?"}, {"role": "assistant", "content": "let me look"}],
        )
        spilled = await service.spill(SESSION, SPILLED, tool="bash")
    return spilled.output_id


def every_tool_call(output_id: str) -> list[tuple[str, dict[str, Any]]]:
    """One call of each tool that needs the store."""
    return [
        ("session_list", {}),
        ("session_open", {"session_id": "new"}),
        ("session_delete", {"session_id": SESSION}),
        ("append", {"session_id": SESSION, "messages": [{"role": "user", "content": "hi"}]}),
        ("get_context", {"session_id": SESSION}),
        ("status", {"session_id": SESSION}),
        ("prune", {"session_id": SESSION}),
        ("select_tail", {"session_id": SESSION}),
        ("spill", {"session_id": SESSION, "text": "x\n" * 10}),
        ("read_output", {"id": output_id}),
        ("compact", {"session_id": SESSION, "summarizer": "extractive"}),
    ]


async def assert_every_tool_says(client: Client, output_id: str, *expected: str) -> None:
    for name, arguments in every_tool_call(output_id):
        message = one_line_error(await client.call_tool(name, arguments))
        for part in expected:
            assert part in message, (name, part, message)
    # What needs no store still works.
    counted = await client.call_tool("count_tokens", {"text": "hello world", "model": "gpt-4o"})
    assert not counted.is_error and counted.structured_content["tokens"] == 2, text(counted)


# -- a full disk -----------------------------------------------------------------------------------


async def append(client: Client, content: str) -> CallToolResult:
    return await client.call_tool("append", {"session_id": SESSION, "messages": [{"role": "user", "content": content}]})


async def test_a_full_disk_is_named_in_the_tool_result_and_nothing_is_half_written(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" and ENOSPC from a spill file, on a tmpfs filled to the brim."""
    log = tmp_path / "server.log"
    with tmpfs(tmp_path / "home", "2m") as home:
        async with stdio(home, log) as client:
            assert not (await client.call_tool("session_open", {"session_id": SESSION, "model": "gpt-4o"})).is_error
            first = await append(client, "one")
            assert not first.is_error, text(first)
            spilled = await client.call_tool("spill", {"session_id": SESSION, "text": SPILLED})
            output_id = spilled.structured_content["output_id"]

            filler = fill(home)
            # The database: the batch does not fit in the WAL.
            big = " ".join(f"word{i}" for i in range(4_000))
            failed = one_line_error(await append(client, big))
            for part in ("full", str(home), "contextfold gc"):
                assert part in failed, (part, failed)
            failed = one_line_error(await client.call_tool("session_open", {"session_id": "another"}))
            assert "full" in failed and str(home) in failed, failed
            # A spill file: its write fails with ENOSPC, and its temp file is gone.
            failed = one_line_error(
                await client.call_tool("spill", {"session_id": SESSION, "text": "y" * 100 + "\n" * 300_000})
            )
            assert "full" in failed and "no space left" in failed.lower() and "contextfold gc" in failed, failed
            assert [p.name for p in (home / "outputs").iterdir() if p.name.startswith(".tmp-")] == []

            # Reads still work on the full disk, and show nothing of the failed writes.
            status = await client.call_tool("status", {"session_id": SESSION})
            assert not status.is_error and status.structured_content["message_count"] == 1, text(status)
            listed = await client.call_tool("session_list", {})
            assert [s["id"] for s in listed.structured_content["sessions"]] == [SESSION], text(listed)
            read = await client.call_tool("read_output", {"id": output_id, "limit": 2})
            assert not read.is_error and "line 1: some output" in read.structured_content["text"], text(read)
            stats = cli(home, "stats")
            assert stats.returncode == 0 and SESSION in stats.stdout, stats.stderr

            # Room again: the same server writes again.
            filler.unlink()
            again = await append(client, big)
            assert not again.is_error, text(again)
            status = await client.call_tool("status", {"session_id": SESSION})
            assert status.structured_content["message_count"] == 2, text(status)
    assert_no_traceback(log)


# -- a database this contextfold cannot use ----------------------------------------------------------


async def test_a_database_from_a_newer_contextfold(tmp_path: Path) -> None:
    home = tmp_path / "home"
    output_id = await populate(home)
    database = home / "contextfold.db"
    with sqlite3.connect(database) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 2}")
    expected = (
        "newer contextfold",
        f"schema {SCHEMA_VERSION + 2}",
        f"knows {SCHEMA_VERSION}",
        str(database),
        "upgrade contextfold",
    )

    log = tmp_path / "server.log"
    async with stdio(home, log, sampling=True) as client:  # compact's request for a summary meets it first
        await assert_every_tool_says(client, output_id, *expected)
    assert_no_traceback(log)
    assert_one_line_cli_error(cli(home, "stats"), *expected)
    with sqlite3.connect(database) as db:  # left exactly as it was
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 2


def _garbage(database: Path) -> None:
    database.write_bytes(random.Random(12).randbytes(64 * 1024))


def _truncated(database: Path) -> None:
    os.truncate(database, database.stat().st_size // 2)


@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated"])
async def test_a_damaged_database(tmp_path: Path, damage: Any) -> None:
    home = tmp_path / "home"
    output_id = await populate(home)
    database = home / "contextfold.db"
    assert not Path(f"{database}-wal").exists()  # closed cleanly: everything is in the file
    damage(database)
    before = database.read_bytes()
    expected = (f"the database at {database} is damaged", "move it aside")

    log = tmp_path / "server.log"
    async with stdio(home, log) as client:
        await assert_every_tool_says(client, output_id, *expected)
    assert_no_traceback(log)
    assert_one_line_cli_error(cli(home, "stats"), *expected)
    assert database.read_bytes() == before  # nothing tried to "repair" it


# -- a read-only data home -------------------------------------------------------------------------


async def test_a_read_only_home_reads_and_refuses_writes(tmp_path: Path) -> None:
    source = tmp_path / "home"
    output_id = await populate(source)
    assert not Path(f"{source}/contextfold.db-shm").exists()  # the hard case: SQLite cannot create it
    log = tmp_path / "server.log"
    with read_only_view(source, tmp_path / "ro") as home:
        async with stdio(home, log) as client:
            listed = await client.call_tool("session_list", {})
            assert not listed.is_error, text(listed)
            assert [s["id"] for s in listed.structured_content["sessions"]] == [SESSION]
            context = await client.call_tool("get_context", {"session_id": SESSION})
            assert not context.is_error, text(context)
            assert [m["content"] for m in context.structured_content["messages"]][:2] == [
                "what is in the log?",
                "let me look",
            ]
            status = await client.call_tool("status", {"session_id": SESSION})
            assert not status.is_error and status.structured_content["message_count"] == 2, text(status)
            read = await client.call_tool("read_output", {"id": output_id, "offset": 1_000, "limit": 1})
            assert not read.is_error and "line 999: some output" in read.structured_content["text"], text(read)
            tail = await client.call_tool("select_tail", {"session_id": SESSION})
            assert not tail.is_error, text(tail)
            # A transaction that reads and finds nothing to write is not refused.
            pruned = await client.call_tool("prune", {"session_id": SESSION})
            assert not pruned.is_error and not pruned.structured_content["applied"], text(pruned)

            writes = [
                ("session_open", {"session_id": "new"}),
                ("session_delete", {"session_id": SESSION}),
                ("append", {"session_id": SESSION, "messages": [{"role": "user", "content": "hi"}]}),
                ("spill", {"session_id": SESSION, "text": "x\n" * 10}),
            ]
            for name, arguments in writes:
                message = one_line_error(await client.call_tool(name, arguments))
                assert f"the data home {home} is read-only" in message and "writes are refused" in message, message
            status = await client.call_tool("status", {"session_id": SESSION})
            assert status.structured_content["message_count"] == 2

        stats = cli(home, "stats")
        assert stats.returncode == 0 and SESSION in stats.stdout, stats.stderr
    assert_no_traceback(log)


async def test_a_read_only_home_without_a_database_says_so(tmp_path: Path) -> None:
    source = tmp_path / "empty"
    source.mkdir()
    log = tmp_path / "server.log"
    with read_only_view(source, tmp_path / "ro") as home:
        async with stdio(home, log) as client:
            await assert_every_tool_says(client, "out_x", f"the data home {home} is read-only", "no database")
        stats = cli(home, "stats")  # a command that only reads needs no database: there are no sessions yet
        assert stats.returncode == 0, stats.stderr
        assert stats.stdout.strip() == f"no sessions yet (no database at {home / 'contextfold.db'})"
    assert_no_traceback(log)
    assert list(source.iterdir()) == []


def test_a_used_up_disk_quota_reads_as_such(tmp_path: Path) -> None:
    """EDQUOT cannot be provoked without quotas on the filesystem; it takes ENOSPC's path (above)."""
    from contextfold.errors import StorageFull
    from contextfold.home.opening import storage_error

    settings = load_settings({"home": tmp_path}, environ={})
    problem = storage_error(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)), settings)
    assert isinstance(problem, StorageFull)
    assert f"disk quota on the disk holding {settings.spill_path} is used up" in str(problem)
    assert "contextfold gc" in str(problem)


async def test_a_remote_tenant_learns_why_but_not_the_servers_paths(tmp_path: Path) -> None:
    """Over HTTP with bearer tokens, a storage error says what is wrong and what to do, with the
    server's data home named as such instead of its filesystem path."""
    from _servers import client as http_client
    from _servers import serve

    home = tmp_path / "home"
    await populate(home)
    with sqlite3.connect(home / "contextfold.db") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 2}")
    tokens = tmp_path / "tokens"
    added = subprocess.run(
        [sys.executable, "-m", "contextfold", "token", "add", "alice", "--tokens-file", str(tokens)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CONTEXTFOLD_HOME": str(home)},
    )
    token = added.stdout.strip().splitlines()[-1]
    with serve(home, "--tokens-file", str(tokens)) as server:
        async with http_client(server.url, token) as alice:
            result = await alice.call_tool("status", {"session_id": "s"})
    text = result.content[0].text
    assert result.is_error and "upgrade contextfold" in text and "the server's data home" in text, text
    assert str(tmp_path) not in text

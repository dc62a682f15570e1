"""Session retention in `contextfold gc` (issue 26, item 20), on SQLite and PostgreSQL, as real processes.

Every `contextfold proxy` connection leaves a session behind (marked `origin: proxy`), and nothing
expired sessions. Now `gc` deletes a proxy session idle `proxy_session_retention_hours`, and any
session idle `session_retention_days` (off by default), with its messages, compactions and output
rows, and its files where no other output points to them; `gc --dry-run` names them first. Idle
means no write, no output spilled and none read since. Several `gc` processes racing writers
delete only sessions nobody used meanwhile, each session once, whole.

Sessions are made through the library and aged by moving their times back in the database (what
the clock would do in two days); everything after is `python -m contextfold gc` processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from _proxy import output_id, proxied, python_upstream
from mcp import Client

from contextfold.config import Settings, load_settings
from contextfold.errors import NotFoundError
from contextfold.names import PROXY_ORIGIN
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio

DAY = 86_400.0
TABLES = ("sessions", "messages", "parts", "outputs", "compactions")
SHARED = "the same big output, spilled by two sessions\n" * 50


@dataclass
class Home:
    path: Path
    url: str | None

    def env(self, **settings: str) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_"))}
        environ["CONTEXTFOLD_HOME"] = str(self.path)
        if self.url:
            environ["CONTEXTFOLD_DATABASE"] = self.url
        return {**environ, **{f"CONTEXTFOLD_{k.upper()}": v for k, v in settings.items()}}

    def settings(self) -> Settings:
        return load_settings({"home": self.path, "database": self.url}, environ={})

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.url:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as db:
                cursor = db.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
                return cursor.fetchall() if cursor.description else []
        with sqlite3.connect(self.path / "contextfold.db") as db:
            return db.execute(statement, params).fetchall()

    def rows_of(self, session_id: str) -> dict[str, int]:
        column = {"sessions": "id"}
        return {
            table: self.sql(f"SELECT COUNT(*) FROM {table} WHERE {column.get(table, 'session_id')} = ?", (session_id,))[
                0
            ][0]
            for table in TABLES
        }

    def age(self, session_ids: list[str], days: float) -> None:
        """Move the sessions' last write and their outputs' spills `days` back."""
        back = days * DAY
        for session_id in session_ids:
            self.sql("UPDATE sessions SET updated_at = updated_at - ? WHERE id = ?", (back, session_id))
            self.sql("UPDATE outputs SET created_at = created_at - ? WHERE session_id = ?", (back, session_id))

    def session_ids(self) -> set[str]:
        return {r[0] for r in self.sql("SELECT id FROM sessions")}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Home:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    return Home(tmp_path / "home", url)


def gc(home: Home, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", "gc", *args],
        env=home.env(**settings),
        capture_output=True,
        text=True,
        timeout=300,
    )


def started_gc(home: Home, **settings: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "contextfold", "gc", "--json"],
        env=home.env(**settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@dataclass
class Made:
    outputs: dict[str, list[str]]
    """Each session's output ids."""


async def make(home: Home, sessions: dict[str, str | None], *, shared: tuple[str, ...] = ()) -> Made:
    """Sessions (id → origin) with two messages and an output of their own each; those in `shared`
    also spill `SHARED`, one content file for all of them."""
    outputs: dict[str, list[str]] = {}
    async with await ContextService.open(home.settings()) as service:
        for session_id, origin in sessions.items():
            await service.open_session(session_id, model="gpt-4o", title=f"made as {session_id}", origin=origin)
            await service.append(
                session_id,
                [{"role": "user", "content": f"hello {session_id}"}, {"role": "assistant", "content": "hi"}],
                format="openai",
            )
            texts = [f"output of {session_id}\n" * 40] + ([SHARED] if session_id in shared else [])
            outputs[session_id] = [(await service.spill(session_id, text, tool="bash")).output_id for text in texts]
    return Made(outputs)


async def stored_digests(home: Home) -> tuple[set[str], set[str]]:
    """(the digests output rows reference, the digests the spill store holds)."""
    async with await ContextService.open(home.settings()) as service:
        held = {f.digest for f in await anyio.to_thread.run_sync(lambda: list(service.outputs.files.list()))}
    return {r[0] for r in home.sql("SELECT DISTINCT digest FROM outputs")}, held


async def test_gc_expires_idle_proxy_sessions_whole_and_a_dry_run_names_them_first(home: Home) -> None:
    old = [f"proxy-old-{i}" for i in range(3)]
    made = await make(
        home,
        {**dict.fromkeys(old, PROXY_ORIGIN), "proxy-read": PROXY_ORIGIN, "proxy-new": PROXY_ORIGIN, "mine-old": None},
        shared=("proxy-old-0", "mine-old"),
    )
    home.age([*old, "proxy-read", "mine-old"], days=2)
    async with await ContextService.open(home.settings()) as service:  # a client reads an output: in use
        await service.read_output(made.outputs["proxy-read"][0])
    before = {s: home.rows_of(s) for s in home.session_ids()}
    assert all(before[s]["messages"] == 2 and before[s]["outputs"] >= 1 for s in old)

    dry = gc(home, "--dry-run", "--json", proxy_session_retention_hours="24")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["sessions_removed"] == 3 and [s["session_id"] for s in report["sessions"]] == old
    assert {s["reason"] for s in report["sessions"]} == {"proxy_session_retention_hours"}
    assert {s: home.rows_of(s) for s in home.session_ids()} == before  # a dry run changes nothing
    text = gc(home, "--dry-run", proxy_session_retention_hours="24").stdout
    assert "would remove 3 sessions past their retention" in text and "[proxy_session_retention_hours]" in text

    done = gc(home, "--json", proxy_session_retention_hours="24")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["sessions_removed"] == 3 and result["files_removed"] == 3  # their own files, not the shared one
    assert home.session_ids() == {"proxy-read", "proxy-new", "mine-old"}
    for session_id in old:
        assert home.rows_of(session_id) == dict.fromkeys(TABLES, 0)
    referenced, held = await stored_digests(home)
    assert referenced == held  # no file without its row, none kept for a row that went
    async with await ContextService.open(home.settings()) as service:
        for session_id in ("proxy-read", "mine-old"):  # the shared content is still mine-old's
            for output_id in made.outputs[session_id]:
                assert (await service.read_output(output_id)).total_lines >= 40
        with pytest.raises(NotFoundError):
            await service.read_output(made.outputs["proxy-old-0"][0])
    again = json.loads(gc(home, "--json", proxy_session_retention_hours="24").stdout)
    assert again["sessions_removed"] == 0


async def test_session_retention_days_expires_any_idle_session_and_is_off_by_default(home: Home) -> None:
    await make(home, {"mine-old": None, "mine-new": None, "hooks-old": None})
    home.age(["mine-old", "hooks-old"], days=40)
    kept = json.loads(gc(home, "--json").stdout)  # defaults: sessions are kept, the proxy rule meets none here
    assert kept["sessions_removed"] == 0 and home.session_ids() == {"mine-old", "mine-new", "hooks-old"}
    done = gc(home, session_retention_days="30")
    assert done.returncode == 0, done.stderr
    assert "removed 2 sessions past their retention" in done.stdout and "[session_retention_days]" in done.stdout
    assert home.session_ids() == {"mine-new"}
    assert home.rows_of("mine-old") == dict.fromkeys(TABLES, 0)


async def test_gc_processes_racing_a_writer_delete_only_what_nobody_used_and_each_session_once(home: Home) -> None:
    """Three `gc` processes and a writer going round half of the idle sessions, appending, while they
    run: a session the writer reached stays with every message it appended, every other goes
    whole, and the gc processes together report each removed session once."""
    ids = [f"idle-{i:02d}" for i in range(40)]
    await make(home, dict.fromkeys(ids, PROXY_ORIGIN))
    home.age(ids, days=2)
    touched = ids[::2]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, json.dumps(touched)],
        env=home.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    assert writer.stdout.readline().strip() == "ready", writer.stderr and writer.stderr.read()
    collectors = [started_gc(home, proxy_session_retention_hours="24") for _ in range(3)]
    writer.stdin.write("go\n")
    writer.stdin.flush()
    results = []
    for process in collectors:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    appended: dict[str, int] = json.loads(out)
    written = {s for s, n in appended.items() if n}
    left = home.session_ids()
    assert written <= left  # every session the writer reached is still there…
    for session_id in written:
        messages = home.sql("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,))[0][0]
        assert messages == 2 + appended[session_id]  # …with every message appended to it
    gone = set(ids) - left
    assert gone == set(ids) - written  # the others went (the writer found those it tried gone)
    assert sum(r["sessions_removed"] for r in results) == len(gone)  # each counted by one process
    for session_id in gone:
        assert home.rows_of(session_id) == dict.fromkeys(TABLES, 0)
    referenced, held = await stored_digests(home)
    assert referenced == held


async def test_the_sessions_real_proxy_connections_leave_go_once_idle(tmp_path: Path) -> None:
    """The issue as seen: every `contextfold proxy` connection leaves a session. Each is marked as a
    proxy's, so `gc` lets the fresh ones be and takes them once idle past the retention."""
    home = Home(tmp_path / "home", None)
    for _ in range(5):
        async with Client(proxied(home.path, *python_upstream()), mode="legacy") as client:
            result = await client.call_tool("big", {"lines": 5_000})  # over the limits: spilled
            assert output_id(result.content[0].text)  # type: ignore[union-attr]
    await make(home, {"mine": None})
    proxies = home.session_ids() - {"mine"}
    assert len(proxies) == 5
    for session_id in proxies:
        (metadata,) = home.sql("SELECT metadata FROM sessions WHERE id = ?", (session_id,))[0]
        assert json.loads(metadata)["origin"] == "proxy"
    fresh = json.loads(gc(home, "--json").stdout)
    assert fresh["sessions_removed"] == 0 and len(home.session_ids()) == 6
    home.age([*proxies, "mine"], days=8)  # past the default 168 hours
    done = json.loads(gc(home, "--json").stdout)
    assert done["sessions_removed"] == 5 and home.session_ids() == {"mine"}


async def test_a_proxy_whose_idle_session_gc_took_carries_on_in_a_new_one(tmp_path: Path) -> None:
    home = Home(tmp_path / "home", None)
    async with Client(proxied(home.path, *python_upstream()), mode="legacy") as client:
        first = await client.call_tool("big", {"lines": 5_000})
        assert output_id(first.content[0].text)  # type: ignore[union-attr]
        (old,) = home.session_ids()
        for _ in range(400):  # the call is recorded a moment after its answer
            if home.rows_of(old)["messages"]:
                break
            await anyio.sleep(0.05)
        else:
            pytest.fail("the proxy never recorded the call")
        home.age([old], days=8)  # the client left it alone for a week
        assert json.loads(gc(home, "--json").stdout)["sessions_removed"] == 1
        again = await client.call_tool("big", {"lines": 5_000})
        spilled = output_id(again.content[0].text)  # type: ignore[union-attr]
        read = await client.call_tool("read_output", {"id": spilled, "offset": 4_999, "limit": 2})
        assert "line 5000 " in read.content[0].text  # type: ignore[union-attr]
    (new,) = home.session_ids()
    assert new != old and home.rows_of(new)["outputs"] == 1


WRITER = """
import asyncio, json, sys
from contextfold.config import load_settings
from contextfold.errors import NotFoundError
from contextfold.service.facade import ContextService

ROUNDS, PAUSE = 3, 0.04

async def main():
    ids = json.loads(sys.argv[1])
    appended = dict.fromkeys(ids, 0)
    async with await ContextService.open(load_settings()) as service:
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(ROUNDS):  # round and round while the gc processes run
            for session_id in ids:
                try:
                    await service.append(session_id, [{"role": "user", "content": "still here"}], format="openai")
                except NotFoundError:
                    continue  # a gc took it first
                appended[session_id] += 1
                await asyncio.sleep(PAUSE)
    print(json.dumps(appended))

asyncio.run(main())
"""

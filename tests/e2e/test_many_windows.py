"""Several agent windows on one machine: each starts its own `contextfold serve` over stdio, all
on one data home, at the same moment.

Every server must start and answer, on a fresh home and on a home whose database is one schema
version behind (every upgrade puts all open windows in that position). Before migrations re-read
the schema version inside their write transaction, some of these processes died at start with
`table sessions already exists`, `duplicate column name: …` or `database is locked`.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from contextfold.store.schema import MIGRATIONS, SCHEMA_VERSION, statements

pytestmark = pytest.mark.anyio

WINDOWS = 5
ROUNDS = 4


def _params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextfold", "serve"],
        env={**os.environ, "CONTEXTFOLD_HOME": str(home)},
    )


async def _window(home: Path, name: str, answers: dict[str, str]) -> None:
    """One agent window: start a server, open a session, append, read it back."""
    try:
        async with Client(_params(home)) as client:
            opened = await client.call_tool("session_open", {"session_id": name, "model": "gpt-4o"})
            assert not opened.is_error, opened.content
            appended = await client.call_tool(
                "append", {"session_id": name, "messages": [{"role": "user", "content": f"hello from {name}"}]}
            )
            assert not appended.is_error, appended.content
            status = await client.call_tool("status", {"session_id": name})
            answers[name] = f"{status.structured_content['state']}:{status.structured_content['tokens_in_view']}"
    except BaseException as exc:  # noqa: BLE001 - reported with the window's name below
        answers[name] = f"failed: {exc!r}"


async def _start_together(home: Path, prefix: str) -> dict[str, str]:
    answers: dict[str, str] = {}
    async with anyio.create_task_group() as tg:
        for i in range(WINDOWS):
            tg.start_soon(_window, home, f"{prefix}-{i}", answers)
    return answers


def _version_behind(path: Path) -> None:
    """A database as the previous release left it: schema SCHEMA_VERSION - 1, with a session in it."""
    with sqlite3.connect(path) as conn:
        for version in range(SCHEMA_VERSION - 1):
            for statement in statements(MIGRATIONS[version]):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
        _insert(
            conn,
            "sessions",
            id="old",
            owner="",
            model="gpt-4o",
            created_at=1,
            updated_at=1,
            next_seq=2,
            message_count=1,
        )
        _insert(conn, "messages", id="msg_old", owner="", session_id="old", seq=1, role="user", created_at=1, tokens=7)
        _insert(
            conn,
            "parts",
            message_id="msg_old",
            idx=0,
            owner="",
            session_id="old",
            type="text",
            data='{"type":"text","text":"kept across the upgrade"}',
        )


def _insert(conn: sqlite3.Connection, table: str, **values: object) -> None:
    """Insert the values whose columns the table has at this schema version."""
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    names = [name for name in values if name in columns]
    conn.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        [values[name] for name in names],
    )


@pytest.mark.parametrize("behind", [False, True], ids=["fresh-home", "one-version-behind"])
async def test_windows_started_together_all_start_and_answer(tmp_path: Path, behind: bool):
    for round_ in range(ROUNDS):
        home = tmp_path / f"round-{round_}"
        home.mkdir()
        if behind:
            _version_behind(home / "contextfold.db")
        answers = await _start_together(home, f"w{round_}")
        failed = {k: v for k, v in answers.items() if v.startswith("failed")}
        assert not failed and len(answers) == WINDOWS, failed
        with sqlite3.connect(home / "contextfold.db") as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == WINDOWS + behind
            if behind:
                text = conn.execute("SELECT data FROM parts WHERE message_id = 'msg_old'").fetchone()[0]
                assert "kept across the upgrade" in text


async def test_an_upgraded_database_keeps_its_rows_and_cascades(tmp_path: Path):
    """Migration 5 rebuilds the tables with per-tenant keys: rows, counts and cascades survive."""
    from contextfold.config import load_settings
    from contextfold.service.facade import ContextService

    home = tmp_path / "home"
    home.mkdir()
    _version_behind(home / "contextfold.db")
    async with await ContextService.open(load_settings({"home": home}, environ={})) as service:
        context = await service.get_context("old", format="openai")
        assert context.messages == [{"role": "user", "content": "kept across the upgrade"}]
        await service.append("old", [{"role": "assistant", "content": "and appended after it"}])
        assert (await service.status("old")).message_count == 2
        await service.delete_session("old")
    with sqlite3.connect(home / "contextfold.db") as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        for table in ("sessions", "messages", "parts"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table

"""A server keeps each session's view loaded and rendered between requests (issue 15).

The cache must never answer what the store no longer holds, whoever changed it: every check
compares a reader that keeps views with a fresh reader, after another writer (another service on
the same home, or another process) appended, attached results, pruned, compacted, hid messages,
or deleted and re-made the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": command})}}
        ],
    }


def _result(call_id: str, lines: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "".join(f"{call_id} line {i}\n" for i in range(lines))}


def _turns(start: int, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(start, start + count):
        messages += [
            {"role": "user", "content": f"Step {i}: check module m{i}."},
            _call(f"c{i}", f"cat m{i}.py"),
            _result(f"c{i}", 150),
            {"role": "assistant", "content": f"Module m{i} is fine."},
        ]
    return messages


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
async def services(request: pytest.FixtureRequest, tmp_path: Path):
    """A reader that keeps views, a writer (another process, as far as the store can tell: its
    own connection and its own cache), and a fresh reader that keeps nothing; on one SQLite home,
    or as three replicas on one PostgreSQL database."""
    shared = {"database": request.getfixturevalue("pg_url")} if request.param == "postgres" else {}
    opened = [
        await ContextService.open(load_settings({"home": tmp_path, **shared}, environ={})),
        await ContextService.open(load_settings({"home": tmp_path, **shared}, environ={})),
        await ContextService.open(load_settings({"home": tmp_path, "view_cache_sessions": 0, **shared}, environ={})),
    ]
    try:
        yield opened
    finally:
        for service in opened:
            await service.close()


async def _same(cached: ContextService, fresh: ContextService, session_id: str) -> None:
    for format in ("openai", "anthropic"):
        kept = await cached.get_context(session_id, format=format)
        truth = await fresh.get_context(session_id, format=format)
        assert kept.model_dump() == truth.model_dump(), format
    assert (await cached.status(session_id)).model_dump() == (await fresh.status(session_id)).model_dump()


async def test_a_kept_view_follows_every_change_another_writer_makes(services):
    reader, writer, fresh = services
    await writer.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    await writer.append("s", [{"role": "user", "content": "Fix the parser."}, _call("c0", "pytest")])
    await _same(reader, fresh, "s")  # the call is pending: rendered with an interrupted result
    await writer.append("s", [_result("c0", 40)])  # attaches to the call, an earlier message
    await _same(reader, fresh, "s")
    await writer.append("s", _turns(1, 12))
    await _same(reader, fresh, "s")
    assert (await writer.prune("s", keep_tool_uses=2)).applied
    await _same(reader, fresh, "s")
    assert (await writer.compact("s", summarizer="extractive")).compacted  # the anchor moves
    await _same(reader, fresh, "s")
    await writer.append("s", _turns(20, 6))
    await _same(reader, fresh, "s")
    assert (await writer.compact("s", strategy="middle")).head_messages > 0  # hides messages
    await _same(reader, fresh, "s")
    await writer.delete_session("s")
    await writer.open_session("s", model="gpt-4o")
    await writer.append("s", _turns(40, 2))
    await _same(reader, fresh, "s")


async def test_unchanged_messages_are_not_read_again(services):
    reader, writer, fresh = services
    await writer.open_session("s", model="gpt-4o")
    await writer.append("s", _turns(0, 5))
    _, before = await reader.session_view("s")
    await writer.append("s", _turns(5, 1))
    _, after = await reader.session_view("s")
    assert len(after) == len(before) + 3  # a result is stored on its call
    assert all(old is new for old, new in zip(before, after))  # the same objects: kept, not reloaded
    _, truth = await fresh.session_view("s")
    assert [m.model_dump() for m in after] == [m.model_dump() for m in truth]


async def test_a_store_stamps_what_each_transaction_changed(services):
    _, writer, _ = services
    await writer.open_session("s", model="gpt-4o")
    await writer.append("s", _turns(0, 3))
    store = writer.store
    session = await store.get_session("s")
    changed, hidden = await store.changed_messages("s", since=session.revision)
    assert (changed, hidden) == ([], set())
    await writer.append("s", [_call("late", "ls")])
    await writer.append("s", [_result("late", 3)])  # changes the call's message only
    changed, hidden = await store.changed_messages("s", since=session.revision)
    assert [m.parts[0].call_id for m in changed] == ["late"] and not hidden
    assert (await store.get_session("s")).revision == session.revision + 2


def _cli(home: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")} | {"CONTEXTFOLD_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_server_sees_what_another_process_changed(tmp_path: Path):
    reader = await ContextService.open(load_settings({"home": tmp_path}, environ={}))
    try:
        await reader.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
        await reader.append("s", _turns(0, 8))
        await reader.get_context("s")  # kept
        _cli(tmp_path, "prune", "s", "--keep-tool-uses", "2")
        kept = await reader.get_context("s")
        truth = json.loads(_cli(tmp_path, "export", "s", "--format", "openai"))
        assert kept.model_dump() == truth
        assert any(m.get("content") == "[Old tool result content cleared]" for m in truth["messages"])
    finally:
        await reader.close()


async def test_since_a_version_only_what_follows_it_is_sent(services):
    reader, writer, fresh = services
    await writer.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    await writer.append("s", _turns(0, 6), system="Be brief.")
    for format in ("openai", "anthropic"):
        held = await reader.get_context("s", format=format)
        # The same view has the same version in any process: it names the rendered bytes.
        assert (await fresh.get_context("s", format=format)).version == held.version
        assert held.version.startswith(f"{len(held.messages)}.")
    held = await reader.get_context("s")
    await writer.append("s", _turns(6, 2))
    whole = await fresh.get_context("s")
    later = await reader.get_context("s", since=held.version)
    assert later.version == whole.version and later.messages == whole.messages[len(held.messages) :]
    assert later.messages and later.tokens == whole.tokens
    # Unchanged since: nothing to send.
    assert (await reader.get_context("s", since=whole.version)).messages == []
    # The prefix changed (a prune cleared old outputs): everything comes back.
    assert (await writer.prune("s", keep_tool_uses=1)).applied
    after_prune = await reader.get_context("s", since=whole.version)
    assert after_prune.messages == (await fresh.get_context("s")).messages
    # A version from another format, or that was never issued, is no prefix of this view.
    anthropic = await reader.get_context("s", format="anthropic")
    for since in (anthropic.version, "3.00", "nonsense", "", f"{10**6}.ab"):
        assert len((await reader.get_context("s", since=since)).messages) == len(after_prune.messages), since


async def test_since_names_the_whole_view_not_a_page(services):
    reader, writer, _ = services
    await writer.open_session("s", model="gpt-4o")
    await writer.append("s", _turns(0, 2))
    page = await reader.get_context("s", limit=2)
    assert page.version is None and page.next_cursor
    with pytest.raises(Exception, match="since: a version names the whole view"):
        await reader.get_context("s", limit=2, since="1.00")

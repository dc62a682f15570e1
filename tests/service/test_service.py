"""The service over a real SQLite file: sessions, append, totals, status, and bad input."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from contextfold.config import load_settings
from contextfold.errors import NotFoundError, SettingsError
from contextfold.service.facade import ContextService, InvalidInput, LimitExceeded
from contextfold.tokens.counting import MESSAGE_OVERHEAD, counter_for

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service(tmp_path: Path):
    settings = load_settings({"home": tmp_path}, environ={})
    svc = await ContextService.open(settings)
    try:
        yield svc
    finally:
        await svc.close()


def dump(db: Path) -> list[tuple]:
    """Every row of every table, for before/after comparisons."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        # Sorted rather than by rowid: the search index's FTS5 tables include WITHOUT ROWID ones.
        return [(t, *row) for t in tables for row in sorted(conn.execute(f"SELECT * FROM {t}"), key=repr)]


def call(call_id: str, name: str = "bash", args: str = '{"cmd": "ls"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


async def recount_total(svc: ContextService, session_id: str) -> int:
    session = await svc.store.get_session(session_id)
    messages = await svc.store.load_messages(session_id)
    return sum(m.tokens for m in messages) + sum(p.tokens for p in session.system)


async def test_open_reopen_list_delete(service):
    first = await service.open_session("alpha", model="gpt-4o", title="First")
    assert first.session_id == "alpha" and first.tokens_in_view == 0 and first.state == "ok"
    await service.open_session("alpha")
    again = await service.status("alpha")
    assert again.model == "gpt-4o" and again.message_count == 0
    fresh = await service.open_session()
    assert fresh.session_id.startswith("ses_")

    for i in range(5):
        await service.open_session(f"s{i}")
    page = await service.list_sessions(limit=3)
    seen = [s.id for s in page.sessions]
    while page.next_cursor:
        page = await service.list_sessions(limit=3, cursor=page.next_cursor)
        seen += [s.id for s in page.sessions]
    assert sorted(seen) == sorted(["alpha", fresh.session_id, "s0", "s1", "s2", "s3", "s4"])
    assert len(seen) == len(set(seen))

    await service.delete_session("alpha")
    with pytest.raises(NotFoundError, match="alpha"):
        await service.status("alpha")
    with pytest.raises(NotFoundError):
        await service.delete_session("alpha")


async def test_append_attaches_results_and_keeps_totals_exact(service):
    await service.open_session("s", model="gpt-4o", system="Be brief.")
    r1 = await service.append(
        "s",
        [
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": "Listing.",
                "tool_calls": [call("c1"), call("c2", "read", '{"path": "a.py"}')],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
        ],
    )
    assert [m.role for m in r1.messages] == ["user", "assistant"]
    assert r1.results_attached == 0  # c1's result was in the same batch
    r2 = await service.append("s", [{"role": "tool", "tool_call_id": "c2", "content": "print('hi')\n" * 50}])
    assert r2.results_attached == 1 and r2.messages == []
    assert r2.status.tokens_stored == await recount_total(service, "s")
    assert r2.status.tokens_in_view == r2.status.tokens_stored

    counter = counter_for("gpt-4o")
    assert r1.messages[0].tokens == MESSAGE_OVERHEAD + counter.count("list the files")

    ctx = await service.get_context("s", format="openai")
    assert [m["role"] for m in ctx.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert ctx.messages[4]["content"] == "print('hi')\n" * 50
    assert ctx.tokens == r2.status.tokens_stored


async def test_anthropic_batches_and_error_results(service):
    await service.open_session("a", model="claude-sonnet-4-5")
    await service.append(
        "a",
        [
            {"role": "user", "content": [{"type": "text", "text": "run the tests"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "pytest"}}],
            },
        ],
        system="You are a coding agent.",
    )
    await service.append(
        "a",
        [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed", "is_error": True}],
            }
        ],
    )
    ctx = await service.get_context("a", format="anthropic")
    assert ctx.system == [{"type": "text", "text": "You are a coding agent."}]
    result = ctx.messages[2]["content"][0]
    assert result["tool_use_id"] == "t1" and result["is_error"] is True
    status = await service.status("a")
    assert status.method == "estimate"


async def test_reported_usage_calibrates_tokens_in_view(service):
    await service.open_session("u", model="gpt-4o")
    r = await service.append(
        "u",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        usage={"input_tokens": 5_000, "output_tokens": 20},
    )
    # The provider saw far more than we counted (tool schemas, say): trust it.
    assert r.status.tokens_reported == 5_020
    assert r.status.tokens_in_view == 5_020
    r = await service.append("u", [{"role": "user", "content": "and now?"}])
    added = r.messages[0].tokens
    # Carried forward by what we counted since the report.
    assert r.status.tokens_reported == 5_020 + added
    assert r.status.tokens_in_view == 5_020 + added
    assert (await service.status("u")).tokens_counted < r.status.tokens_in_view
    with pytest.raises(InvalidInput, match="usage"):
        await service.append("u", [{"role": "user", "content": "x"}], usage={"input_tokens": 1})
    with pytest.raises(InvalidInput, match=r"usage\.input_tokens"):
        await service.append("u", [{"role": "assistant", "content": "x"}], usage={"input_tokens": -1})
    with pytest.raises(InvalidInput, match=r"usage\.output_tokens: 10,000,000,000 tokens is not a plausible"):
        await service.append("u", [{"role": "assistant", "content": "x"}], usage={"output_tokens": 10**10})


async def test_status_states_follow_the_ratios(service):
    await service.open_session("w", model="gpt-4o", settings={"context_window": 10_000, "max_output": 2_000})
    status = await service.status("w")
    assert status.usable == 8_000  # context − max(max_output, reserved)
    states = []
    for _ in range(40):
        r = await service.append("w", [{"role": "user", "content": "word " * 200}])
        states.append(r.status.state)
        if r.status.state == "overflow":
            break
    assert states[0] == "ok"
    order = ["ok", "soft", "hard", "overflow"]
    assert [s for s in order if s in states] == order
    assert states == sorted(states, key=order.index)


async def test_reserved_is_honoured_in_both_branches(service):
    await service.open_session("r1", model="gpt-4o", settings={"reserved": 50_000})
    assert (await service.status("r1")).usable == 128_000 - 50_000
    await service.open_session("r2", model="gpt-5", settings={"reserved": 50_000})
    assert (await service.status("r2")).usable == 272_000 - 50_000
    await service.open_session("r3", model="gpt-5")
    assert (await service.status("r3")).usable == 272_000 - 20_000


async def test_unlimited_window_never_overflows(service):
    await service.open_session("inf", settings={"context_window": 0})
    r = await service.append("inf", [{"role": "user", "content": "x " * 10_000}])
    assert r.status.state == "ok" and r.status.usable == 0


async def test_changing_the_model_recounts(service):
    await service.open_session("m", model="gpt-4o")
    await service.append("m", [{"role": "user", "content": "hello world " * 100}])
    before = (await service.status("m")).tokens_stored
    after = await service.open_session("m", model="claude-opus-4-1")
    assert after.tokens_stored > before  # the Claude estimate carries a safety factor
    assert after.tokens_stored == await recount_total(service, "m")


async def test_pagination_of_context(service):
    await service.open_session("p", model="gpt-4o")
    await service.append("p", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(7)])
    pages, cursor = [], None
    while True:
        ctx = await service.get_context("p", limit=3, cursor=cursor)
        pages.append([m["content"] for m in ctx.messages])
        cursor = ctx.next_cursor
        if cursor is None:
            break
    assert pages == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"]]
    with pytest.raises(InvalidInput, match="cursor"):
        await service.get_context("p", cursor="nonsense")


BAD_BATCHES = [
    ([{"content": "no role"}], r"messages\[0\]\.role"),
    ([{"role": "user", "content": "ok"}, {"role": "tool", "tool_call_id": "ghost", "content": "x"}], "ghost"),
    ([{"role": "user", "content": 42}], r"messages\[0\]\.content"),
    ([{"role": "wizard", "content": "x"}], r"messages\[0\]\.role"),
    ([{"role": "assistant", "content": "x", "tool_calls": "nope"}], r"messages\[0\]\.tool_calls"),
    ("not a list", "messages"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "x"}]}], "ghost"),
]


@pytest.mark.parametrize(("batch", "field"), BAD_BATCHES)
async def test_malformed_input_names_the_field_and_writes_nothing(service, batch, field):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": "before"}])
    db = service.settings.database_path
    snapshot = dump(db)
    with pytest.raises(InvalidInput, match=field):
        await service.append("s", batch)
    assert dump(db) == snapshot


async def test_a_late_failure_rolls_back_earlier_writes_in_the_batch(service):
    """The unknown result comes after valid messages: none of them may land."""
    await service.open_session("s", model="gpt-4o")
    db = service.settings.database_path
    snapshot = dump(db)
    batch = [
        {"role": "user", "content": "valid"},
        {"role": "assistant", "content": "also valid"},
        {"role": "tool", "tool_call_id": "missing", "content": "orphan"},
    ]
    with pytest.raises(InvalidInput, match="missing"):
        await service.append("s", batch)
    assert dump(db) == snapshot


async def test_oversized_and_unknown_session_are_refused_cleanly(tmp_path):
    settings = load_settings({"home": tmp_path, "max_message_bytes": 1_000, "max_batch_messages": 3}, environ={})
    async with await ContextService.open(settings) as svc:
        await svc.open_session("s")
        snapshot = dump(settings.database_path)
        with pytest.raises(LimitExceeded, match=r"messages\[1\].*max_message_bytes"):
            await svc.append("s", [{"role": "user", "content": "ok"}, {"role": "user", "content": "x" * 2_000}])
        with pytest.raises(LimitExceeded, match="max_batch_messages"):
            await svc.append("s", [{"role": "user", "content": "x"}] * 4)
        with pytest.raises(NotFoundError, match="nope"):
            await svc.append("nope", [{"role": "user", "content": "x"}])
        assert dump(settings.database_path) == snapshot


async def test_bad_settings_are_refused_with_the_name(service):
    with pytest.raises(SettingsError, match="sofft_ratio"):
        await service.open_session("x", settings={"sofft_ratio": 0.5})
    with pytest.raises(SettingsError, match="soft_ratio"):
        await service.open_session("x", settings={"soft_ratio": 0.95, "hard_ratio": 0.9})
    with pytest.raises(SettingsError, match="database"):
        await service.open_session("x", settings={"database": "/tmp/elsewhere.db"})


async def test_owners_do_not_see_each_other(service):
    await service.tenant("alice").open_session("mine")
    with pytest.raises(NotFoundError):
        await service.tenant("bob").status("mine")
    assert [s.id for s in (await service.tenant("bob").list_sessions()).sessions] == []
    # Session ids are per tenant (issue 12): bob gets a session of his own called "mine",
    # exactly as if alice's did not exist, and neither sees the other's messages.
    await service.tenant("bob").open_session("mine")
    await service.tenant("bob").append("mine", [{"role": "user", "content": "bob's words"}])
    assert (await service.tenant("alice").status("mine")).message_count == 0
    assert (await service.tenant("bob").status("mine")).message_count == 1


async def test_schema_is_migrated_and_reopens(tmp_path):
    settings = load_settings({"home": tmp_path}, environ={})
    async with await ContextService.open(settings) as svc:
        await svc.open_session("keep", model="gpt-4o")
        await svc.append("keep", [{"role": "user", "content": "persist me"}])
    with sqlite3.connect(settings.database_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    async with await ContextService.open(settings) as svc:
        ctx = await svc.get_context("keep")
        assert ctx.messages == [{"role": "user", "content": "persist me"}]


async def test_the_database_and_its_journal_files_are_owner_only(tmp_path: Path):
    db = tmp_path / "home" / "contextfold.db"
    db.parent.mkdir()
    db.touch()
    os.chmod(db, 0o644)  # an existing file is tightened too
    async with await ContextService.open(load_settings({"home": db.parent}, environ={})) as svc:
        await svc.open_session("s")
        await svc.append("s", [{"role": "user", "content": "private"}])
        files = [db, db.with_name("contextfold.db-wal"), db.with_name("contextfold.db-shm")]
        assert all(f.exists() for f in files)
        assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}


async def test_library_callers_get_lone_surrogates_repaired_too(service):
    """The MCP layer cleans tool arguments; a direct caller must not be able to crash SQLite either."""
    opened = await service.open_session("s\ud800", model="gpt-4o", title="half an emoji \ud83d")
    assert opened.session_id == "s\ufffd"
    session = await service.store.get_session("s\ufffd")
    assert session.title == "half an emoji \ufffd"

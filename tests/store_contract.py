"""The contract every session store backend must keep, as reusable tests.

A backend's test module imports these tests and provides one fixture, `store`: an open `Store`
on a fresh database, closed after the test, and `reopen`: a second `Store` on the same database
(another process's view of it). `tests/contract/test_store_contract.py` runs them on SQLite; a PostgreSQL
backend adds a module of its own with its fixtures and the same `from store_contract import *`.

Only the interfaces in `contextfold.store.base` are used: nothing here knows about SQL.
"""

from __future__ import annotations

import time

import anyio
import pytest

from contextfold.domain import CompactionRecord, Message, Session, SessionState, TextPart, ToolPart, Usage
from contextfold.errors import ConflictError, InvalidInput, NotFoundError
from contextfold.store import OutputRecord, PartMark

pytestmark = pytest.mark.anyio


def _text(role: str, text: str, tokens: int = 5, **extra) -> Message:
    return Message(role=role, parts=[TextPart(text=text, tokens=tokens - 4)], tokens=tokens, **extra)


def _call(call_id: str, name: str = "bash") -> Message:
    return Message(
        role="assistant",
        parts=[ToolPart(call_id=call_id, name=name, input={"cmd": "ls"}, tokens=20)],
        tokens=24,
    )


def _output(output_id: str, session_id: str, owner: str, digest: str, size: int = 100) -> OutputRecord:
    return OutputRecord(
        id=output_id,
        session_id=session_id,
        owner=owner,
        digest=digest,
        bytes=size,
        lines=3,
        tool="bash",
        call_id=None,
        created_at=time.time(),
    )


async def _session(store, owner: str, session_id: str, **fields) -> Session:
    return await store.tenant(owner).create_session(Session(id=session_id, model="gpt-4o", **fields))


# -- sessions ------------------------------------------------------------------------------------


async def test_a_created_session_reads_back_with_its_owner(store):
    created = await _session(store, "alice", "s1", title="first")
    got = await store.tenant("alice").get_session("s1")
    assert got.id == "s1" and got.title == "first" and got.owner == "alice"
    assert got.created_at == created.created_at > 0


async def test_session_ids_are_per_tenant(store):
    await _session(store, "alice", "x", title="alice's")
    with pytest.raises(NotFoundError):
        await store.tenant("bob").get_session("x")
    await _session(store, "bob", "x", title="bob's")
    assert (await store.tenant("alice").get_session("x")).title == "alice's"
    assert (await store.tenant("bob").get_session("x")).title == "bob's"
    with pytest.raises(ConflictError):
        await _session(store, "alice", "x")


async def test_ids_with_a_nul_are_refused_naming_the_field(store):
    """PostgreSQL text cannot hold NUL: "n\\x00" would be stored as "n\\ufffd" and be one session with
    it, where SQLite keeps two. So no backend accepts a NUL in an id, whatever the call."""
    alice = store.tenant("alice")
    await _session(store, "alice", "n\ufffd", title="replacement")
    refused = [
        lambda: _session(store, "alice", "n\x00"),
        lambda: alice.get_session("n\x00"),
        lambda: alice.delete_session("n\x00"),
        lambda: alice.load_messages("n\x00"),
        lambda: alice.rows("n\x00"),
        lambda: alice.recent_usages("n\x00"),
        lambda: alice.session_outputs("n\x00"),
        lambda: alice.compactions("n\x00"),
        lambda: alice.compaction_totals("n\x00"),
    ]
    for call in refused:
        with pytest.raises(InvalidInput) as refusal:
            await call()
        assert refusal.value.field == "session_id" and "NUL" in str(refusal.value)
    for session_id, create in (("n\x00", Session(id="n\x00", model="gpt-4o")), ("n\x00", None)):
        with pytest.raises(InvalidInput) as refusal:
            async with alice.write(session_id, create=create):
                pass
        assert refusal.value.field == "session_id"
    for output_call in (alice.get_output, alice.touch_output, alice.output_tombstone):
        with pytest.raises(InvalidInput) as refusal:
            await output_call("out\x00")
        assert refusal.value.field == "output_id"
    assert (await alice.get_session("n\ufffd")).title == "replacement"
    assert [s.id for s in (await alice.list_sessions()).sessions] == ["n\ufffd"]


async def test_sessions_list_newest_first_in_pages(store):
    alice = store.tenant("alice")
    for i in range(5):
        await _session(store, "alice", f"s{i}")
        async with alice.write(f"s{i}") as tx:  # updated_at moves with each write
            await tx.save_session(tx.session)
    await _session(store, "bob", "other")
    first = await alice.list_sessions(limit=2)
    assert [s.id for s in first.sessions] == ["s4", "s3"] and first.next_cursor
    rest = await alice.list_sessions(limit=10, cursor=first.next_cursor)
    assert [s.id for s in rest.sessions] == ["s2", "s1", "s0"] and rest.next_cursor is None
    with pytest.raises(ValueError):
        await alice.list_sessions(cursor="not-a-cursor")


async def test_deleting_a_session_takes_its_rows_and_nothing_else(store):
    alice = store.tenant("alice")
    for name in ("gone", "kept"):
        await _session(store, "alice", name)
        async with alice.write(name) as tx:
            await tx.insert_messages([_text("user", f"in {name}")])
            await tx.add_output(_output(f"out_{name}", name, "alice", f"digest-{name}"))
            await tx.add_compaction(
                CompactionRecord(
                    summarizer="x", tokens_before=10, tokens_after=5, head_messages=1, head_tokens=5, summary_tokens=2
                )
            )
    await alice.delete_session("gone")
    with pytest.raises(NotFoundError):
        await alice.get_session("gone")
    with pytest.raises(NotFoundError):
        await alice.get_output("out_gone")
    assert await alice.compactions("gone") == []
    assert [m.text for m in await alice.load_messages("kept")] == ["in kept"]
    assert (await alice.get_output("out_kept")).digest == "digest-kept"
    with pytest.raises(NotFoundError):
        await alice.delete_session("gone")
    with pytest.raises(NotFoundError):
        await store.tenant("bob").delete_session("kept")


async def test_sessions_written_before_come_least_recently_written_first_across_tenants(store):
    for owner, name in (("alice", "a1"), ("bob", "b1"), ("alice", "a2")):
        await _session(store, owner, name, metadata=SessionState(origin="proxy" if name == "b1" else None))
        async with store.tenant(owner).write(name) as tx:
            await tx.insert_messages([_text("user", f"in {name}")])
            await tx.save_session(tx.session.model_copy(update={"message_count": 1}))
    keys = await store.written_before(time.time() + 1)
    assert keys == [("alice", "a1"), ("bob", "b1"), ("alice", "a2")]
    found = await store.idle_sessions([keys[2], keys[0], ("alice", "b1"), keys[1]])  # in the order asked
    assert [(s.owner, s.id) for s in found] == [("alice", "a2"), ("alice", "a1"), ("bob", "b1")]
    assert found[2].origin == "proxy" and found[0].origin is None and found[0].messages == 1
    first = (await store.tenant("alice").get_session("a1")).updated_at
    assert await store.written_before(first) == []  # none written before the first


async def test_an_idle_session_goes_with_all_it_owns_unless_it_was_used_since(store):
    """Retention deletes a session only if nothing happened in it since the cut-off, checked again
    inside the deleting transaction: a write, a spill or a read after it was found idle keeps it."""
    alice = store.tenant("alice")
    for name in ("idle", "written", "read", "kept"):
        await _session(store, "alice", name)
        async with alice.write(name) as tx:
            await tx.insert_messages([_text("user", f"in {name}")])
            await tx.add_output(_output(f"out_{name}", name, "alice", "shared" if name == "kept" else f"d-{name}", 70))
            await tx.add_compaction(
                CompactionRecord(
                    summarizer="x", tokens_before=10, tokens_after=5, head_messages=1, head_tokens=5, summary_tokens=2
                )
            )
    async with alice.write("idle") as tx:
        await tx.add_output(_output("out_idle_2", "idle", "alice", "shared", 70))
    found = time.time()
    assert {key[1] for key in await store.written_before(found)} == {"idle", "written", "read", "kept"}
    await anyio.sleep(0.01)
    async with alice.write("written") as tx:  # another process writes it after gc found it idle
        await tx.save_session(tx.session)
    await alice.touch_output("out_read")  # or reads one of its outputs
    assert await alice.delete_idle_session("written", found) is None
    assert await alice.delete_idle_session("read", found) is None
    assert await store.tenant("bob").delete_idle_session("idle", found) is None  # another tenant's "idle": none
    assert await alice.delete_idle_session("idle", found) == {"d-idle": 70, "shared": 70}
    assert await alice.delete_idle_session("idle", found) is None  # gone already
    with pytest.raises(NotFoundError):
        await alice.get_session("idle")
    for output_id in ("out_idle", "out_idle_2"):
        with pytest.raises(NotFoundError):
            await alice.get_output(output_id)
    assert await alice.compactions("idle") == [] and await alice.load_messages("idle") == []
    for name in ("written", "read", "kept"):
        assert [m.text for m in await alice.load_messages(name)] == [f"in {name}"]
        assert len(await alice.compactions(name)) == 1
    async with store.spill_transaction() as tx:
        assert await tx.referenced(["d-idle", "shared"]) == {"shared"}  # still the kept session's
    assert await store.spill_bytes() == 3 * 70


# -- writes --------------------------------------------------------------------------------------


async def test_write_creates_on_request_and_refuses_a_missing_session(store):
    alice = store.tenant("alice")
    with pytest.raises(NotFoundError):
        async with alice.write("new"):
            pass
    async with alice.write("new", create=Session(id="ignored", model="gpt-4o")) as tx:
        assert tx.session.id == "new"
    assert (await alice.get_session("new")).model == "gpt-4o"


async def test_messages_get_ids_seqs_and_times_in_order(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        stored = await tx.insert_messages([_text("user", "one"), _text("assistant", "two")])
    async with alice.write("s") as tx:
        stored += await tx.insert_messages([_text("user", "three")])
    assert [m.seq for m in stored] == [1, 2, 3]
    assert len({m.id for m in stored}) == 3 and all(m.created_at > 0 for m in stored)
    loaded = await alice.load_messages("s")
    assert [(m.seq, m.role, m.text) for m in loaded] == [
        (1, "user", "one"),
        (2, "assistant", "two"),
        (3, "user", "three"),
    ]
    assert [m.text for m in await alice.load_messages("s", after_seq=1, limit=1)] == ["two"]
    assert [r.seq for r in await alice.rows("s", after_seq=1)] == [2, 3]
    assert await store.tenant("bob").load_messages("s") == []


async def test_a_failed_transaction_leaves_nothing(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    with pytest.raises(RuntimeError):
        async with alice.write("s") as tx:
            await tx.insert_messages([_text("user", "half")])
            await tx.add_output(_output("out_half", "s", "alice", "digest-half"))
            await tx.save_session(tx.session.model_copy(update={"message_count": 1, "title": "changed"}))
            raise RuntimeError("the request failed midway")
    assert await alice.load_messages("s") == []
    session = await alice.get_session("s")
    assert session.message_count == 0 and session.title is None
    with pytest.raises(NotFoundError):
        await alice.get_output("out_half")
    async with alice.write("s") as tx:  # the session's seqs were not consumed either
        assert [m.seq for m in await tx.insert_messages([_text("user", "whole")])] == [1]


async def test_tool_calls_wait_for_results_and_the_latest_call_answers(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        await tx.insert_messages([_call("c1"), _call("c1")])  # a reused call id
        waiting = await tx.open_calls(["c1", "missing"])
        assert set(waiting) == {"c1"}
        stored = waiting["c1"]
        done = stored.part.model_copy(update={"state": "completed", "output": "a.txt", "tokens": 30})
        await tx.update_part(stored, done)
        assert await tx.open_calls(["c1"]) != {}  # the older call still waits
    messages = await alice.load_messages("s")
    assert messages[0].parts[0].state == "pending"
    assert messages[1].parts[0].output == "a.txt" and messages[1].parts[0].tokens == 30
    assert messages[1].tokens == 24 + 10  # the message's count moved by the part's difference


async def test_marked_parts_leave_the_view_count_not_the_store(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        (message,) = await tx.insert_messages([_call("c1")])
        part = message.parts[0].model_copy(update={"compacted_at": 1.0})
        await tx.mark_parts([PartMark(message.id, 0, part, 15)])
    (row,) = await alice.rows("s")
    (loaded,) = await alice.load_messages("s")
    assert row.tokens == 24 - 15 and loaded.tokens == 24 and loaded.in_view_tokens == 9
    assert loaded.parts[0].compacted_at == 1.0


async def test_hidden_messages_are_read_only_when_asked_for(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        first, _second = await tx.insert_messages([_text("user", "old"), _text("user", "new")])
        await tx.hide_messages([first.id])
    assert [m.text for m in await alice.load_messages("s")] == ["new"]
    assert [m.text for m in await alice.load_messages("s", hidden=True)] == ["old", "new"]
    assert [r.seq for r in await alice.rows("s")] == [2]


async def test_each_write_stamps_what_it_changed_for_readers_keeping_a_view(store, reopen):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        kept, call = await tx.insert_messages([_text("user", "kept"), _call("c1")])
    seen = await alice.get_session("s")
    assert await alice.changed_messages("s", since=seen.revision) == ([], set())
    other = await reopen()  # another process's writes are stamped just the same
    try:
        async with other.tenant("alice").write("s") as tx:
            (new,) = await tx.insert_messages([_text("user", "new")])
        async with other.tenant("alice").write("s") as tx:
            stored = (await tx.open_calls(["c1"]))["c1"]
            await tx.update_part(stored, stored.part.model_copy(update={"state": "completed", "output": "ok"}))
        changed, hidden = await alice.changed_messages("s", since=seen.revision)
        assert [m.id for m in changed] == [call.id, new.id] and not hidden
        assert changed[0].parts[0].output == "ok"
        marked = await alice.get_session("s")
        assert marked.revision == seen.revision + 2 and marked.reset_revision <= seen.revision
        async with other.tenant("alice").write("s") as tx:
            await tx.hide_messages([kept.id])
            part = new.parts[0].model_copy(update={"text": "edited"})
            await tx.mark_parts([PartMark(new.id, 0, part, 0)])
        changed, hidden = await alice.changed_messages("s", since=marked.revision)
        assert [m.text for m in changed] == ["edited"] and hidden == {kept.id}
        assert await alice.changed_messages("s", since=marked.revision, after_seq=new.seq) == ([], set())
    finally:
        await other.close()
    # Nothing another tenant does is stamped on alice's session.
    await _session(store, "bob", "s")
    async with store.tenant("bob").write("s") as tx:
        await tx.insert_messages([_text("user", "bob's")])
    assert (await alice.get_session("s")).revision == marked.revision + 1


async def test_recent_usages_are_the_latest_reports_oldest_first(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        await tx.insert_messages(
            [_text("assistant", f"a{i}", usage=Usage(input=i, output=1)) for i in range(12)]
            + [_text("user", "no usage")]
        )
    assert [u.input for u in await alice.recent_usages("s", limit=3)] == [9, 10, 11]
    assert await store.tenant("bob").recent_usages("s", limit=3) == []


async def test_compactions_newest_first_with_totals(store):
    await _session(store, "alice", "s")
    alice = store.tenant("alice")
    for before, after in ((100, 40), (90, 30)):
        async with alice.write("s") as tx:
            await tx.add_compaction(
                CompactionRecord(
                    summarizer="x",
                    tokens_before=before,
                    tokens_after=after,
                    head_messages=1,
                    head_tokens=1,
                    summary_tokens=1,
                )
            )
    records = await alice.compactions("s")
    assert [(r.tokens_before, r.tokens_after) for r in records] == [(90, 30), (100, 40)]
    assert all(r.id and r.session_id == "s" for r in records)
    assert await alice.compaction_totals("s") == (2, 120)
    assert await store.tenant("bob").compaction_totals("s") == (0, 0)


def _compaction(before: int, after: int) -> CompactionRecord:
    return CompactionRecord(
        summarizer="x", tokens_before=before, tokens_after=after, head_messages=1, head_tokens=1, summary_tokens=1
    )


async def test_the_session_carries_its_compaction_totals_kept_by_the_store(store, reopen):
    # `status` reads the totals with the session instead of summing the compaction history.
    def totals(session: Session) -> tuple[int, int]:
        return session.compaction_count, session.compaction_tokens_freed

    await _session(store, "alice", "s")
    await _session(store, "bob", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        before = tx.session
        await tx.add_compaction(_compaction(100, 40))
        assert totals(tx.session) == (1, 60)
        # The caller's copy predates the compaction: saving it must not wind the totals back.
        await tx.save_session(before.model_copy(update={"title": "renamed"}))
        assert totals(tx.session) == (1, 60)
    other = await reopen()  # another process's compactions count just the same
    try:
        async with other.tenant("alice").write("s") as tx:
            await tx.add_compaction(_compaction(90, 30))
    finally:
        await other.close()
    got = await alice.get_session("s")
    assert totals(got) == (2, 120) and got.title == "renamed"
    assert await alice.compaction_totals("s") == (2, 120)
    assert totals(await store.tenant("bob").get_session("s")) == (0, 0)
    # Totals are never taken from a session handed in, and go with the session's history.
    await alice.delete_session("s")
    claimed = Session(id="s", model="gpt-4o", compaction_count=5, compaction_tokens_freed=500)
    assert totals(await alice.create_session(claimed)) == (0, 0)
    assert totals(await alice.get_session("s")) == (0, 0)
    async with alice.write("t", create=claimed) as tx:
        assert totals(tx.session) == (0, 0)


async def test_concurrent_writers_on_two_connections_serialize(store, reopen):
    await _session(store, "alice", "s")
    other = await reopen()
    try:

        async def writer(s, tag: str) -> None:
            for i in range(10):
                async with s.tenant("alice").write("s") as tx:
                    await tx.insert_messages([_text("user", f"{tag}{i}")])
                    await tx.save_session(tx.session.model_copy(update={"message_count": tx.session.message_count + 1}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, store, "a")
            tg.start_soon(writer, other, "b")
        messages = await store.tenant("alice").load_messages("s")
        assert [m.seq for m in messages] == list(range(1, 21))
        assert (await store.tenant("alice").get_session("s")).message_count == 20
    finally:
        await other.close()


# -- spilled outputs -----------------------------------------------------------------------------


async def test_outputs_resolve_per_tenant_and_their_size_counts_each_content_once(store):
    await _session(store, "alice", "s")
    await _session(store, "bob", "s")
    async with store.tenant("alice").write("s") as tx:
        await tx.add_output(_output("out_a1", "s", "alice", "d1", 100))
        await tx.add_output(_output("out_a2", "s", "alice", "d1", 100))
        assert await tx.spill_bytes() == 100
    async with store.tenant("bob").write("s") as tx:
        await tx.add_output(_output("out_b1", "s", "bob", "d2", 40))
        assert await tx.referenced(["d1", "d2", "d3"]) == {"d1", "d2"}
    assert await store.spill_bytes() == 140
    assert (await store.tenant("alice").get_output("out_a1")).digest == "d1"
    with pytest.raises(NotFoundError):
        await store.tenant("bob").get_output("out_a1")
    await store.tenant("alice").touch_output("out_a1")
    assert (await store.tenant("alice").get_output("out_a1")).last_read_at is not None
    assert {r.id for r in await store.outputs()} == {"out_a1", "out_a2", "out_b1"}


async def test_removed_outputs_leave_a_tombstone_for_their_owner(store):
    await _session(store, "alice", "s")
    async with store.tenant("alice").write("s") as tx:
        await tx.add_output(_output("out_1", "s", "alice", "d1", 100))
    async with store.spill_transaction() as tx:
        await tx.remove_outputs(["out_1"], "evicted", 1234.5)
        assert await tx.spill_bytes() == 0
    with pytest.raises(NotFoundError):
        await store.tenant("alice").get_output("out_1")
    tombstone = await store.tenant("alice").output_tombstone("out_1")
    assert tombstone is not None and tombstone.reason == "evicted" and tombstone.removed_at == 1234.5
    assert await store.tenant("bob").output_tombstone("out_1") is None
    async with store.spill_transaction() as tx:
        await tx.drop_tombstones(before=2000.0)
    assert await store.tenant("alice").output_tombstone("out_1") is None


async def test_a_compaction_record_is_read_and_changed_inside_a_transaction(store):
    # `undo` marks a compaction undone: it stays in the history, the totals stay as they were.
    await _session(store, "alice", "s")
    await _session(store, "bob", "s")
    alice = store.tenant("alice")
    async with alice.write("s") as tx:
        first = await tx.add_compaction(_compaction(100, 40))
        second = await tx.add_compaction(_compaction(90, 30))
    async with store.tenant("bob").write("s") as tx:
        assert await tx.compactions() == []
    async with alice.write("s") as tx:
        got = await tx.compactions(limit=5)
        assert [r.id for r in got] == [second.id, first.id]
        await tx.update_compaction(got[0].model_copy(update={"undone_at": 123.0}))
    records = await alice.compactions("s")
    assert [(r.id, r.undone_at) for r in records] == [(second.id, 123.0), (first.id, None)]
    assert await alice.compaction_totals("s") == (2, 120)

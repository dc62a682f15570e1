"""SIGKILL crash safety: kill the real server mid-work, restart it on the same data, check everything.

Every kill is a real `SIGKILL` of a `contextfold serve --http` subprocess while MCP clients have
requests in flight over HTTP: no shutdown handler runs, nothing is flushed or checkpointed. After
each kill a new server opens the same home and the test checks the database read-only
(tests/_stored.py) and through the tools.

`test_sigkill_during_an_append_storm` — six clients append batches (a user message, a tool call
whose output is big enough to be spilled to a file, the answer) to a shared session and their
own, and the server is killed at three different moments: after a seeded number of
acknowledged appends, at the instant a spill file exists whose row is not committed yet (the
window between writing the file and committing its transaction), and after a seeded delay. It
proves: `PRAGMA integrity_check` is ok; every acknowledged batch is stored, whole, under the ids
the server returned, and readable through `get_context` and `read_output`; a batch whose
answer never arrived is stored whole or not at all (never a message without the others, never a
tool call without its result, never an output row without its file); nothing else is stored;
the only files without a row are outputs of batches that never committed; and after the
restart `contextfold gc` deletes exactly those orphans and keeps every file a row points to.

`test_sigkill_during_compaction` — the anthropic summarizer is pointed at a fake Messages API on
127.0.0.1 (tests/fake_anthropic.py) that can hold its answer back, which opens a deterministic
window between "compaction planned" and "compaction written". The server is killed while the
summary is awaited, while it is awaited and appends keep landing, a seeded moment after the
summary was sent back, a seeded moment into an extractive compaction, and right after a
compaction was acknowledged. It proves: integrity is ok; no half-written compaction is ever
visible — the session shows either exactly the view it had before (always, when the summary
had not arrived; appends acknowledged meanwhile follow it) or the complete new compaction with
its record, marker and summary (always, once acknowledged), and the view hides only what
compactions summarized; every acknowledged message is present, an unacknowledged batch whole or
not at all; and afterwards new compactions (anthropic, then extractive) succeed on the same data.

Crashes survived: `CRASHES_SURVIVED` (`STORM_KILLS` + `COMPACTION_KILLS`) SIGKILLs per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from _servers import Server, client, start_server
from _stored import Stored, StoredMessage, check_session, read_store, spill_files
from fake_anthropic import VALID_SUMMARY, RecordedRequest, Reply, message_reply, serve_fake_anthropic
from mcp import Client

from contextfold.service.outputs import FILE_GRACE_SECONDS

pytestmark = pytest.mark.anyio

SEED = 8_2026
STORM_CLIENTS = 6
STORM_KILL_MOMENTS = ("after-acks", "spill-window", "random-delay")
COMPACTION_KILL_MOMENTS = ("summarizing", "summarizing-with-appends", "summary-arrived", "extractive", "acknowledged")
STORM_KILLS = len(STORM_KILL_MOMENTS)
"""SIGKILLs during append storms (at least; the spill-window kill is retried if the commit won the race)."""
COMPACTION_KILLS = len(COMPACTION_KILL_MOMENTS)
"""SIGKILLs during compactions."""
CRASHES_SURVIVED = STORM_KILLS + COMPACTION_KILLS
SPILL_WINDOW_ATTEMPTS = 5
CALL_TIMEOUT = 120.0
"""Only to turn a hang into a failure; no assertion is about time."""
TRIGGER_TIMEOUT = 60.0

SHARED = "shared"
BIG = "big"
MODEL = "gpt-4o"


async def _call(c: Client, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await c.call_tool(name, args)
    assert not result.is_error, f"{name}: {result.content[0].text}"
    return result.structured_content


async def _open_sessions(server: Server, sessions: list[str]) -> None:
    async with client(server.url) as c:
        for session in sessions:
            await _call(c, "session_open", {"session_id": session, "model": MODEL})


# -- the append storm ------------------------------------------------------------------------------


@dataclass
class Batch:
    """One `append` call of the storm and what became of it."""

    round: int
    client: int
    index: int
    session: str
    output: str
    acked: bool = False
    ids: list[str] = field(default_factory=list)
    output_id: str | None = None

    @property
    def tag(self) -> str:
        return f"[r{self.round} c{self.client} b{self.index:03d}]"

    @property
    def call_id(self) -> str:
        return f"call_r{self.round}_c{self.client}_b{self.index}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.output.encode()).hexdigest()

    def wire(self) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": f"{self.tag} run the build"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": self.call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": f"make {self.call_id}"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": self.call_id, "content": self.output},
            {"role": "assistant", "content": f"{self.tag} the build output is read"},
        ]


def _new_batch(round_: int, k: int, i: int, rng: random.Random) -> Batch:
    session = SHARED if i % 2 == 0 else f"own-{k}"
    tag = f"[r{round_} c{k} b{i:03d}]"
    # Over 2,000 lines, so the output is spilled to a file; unique, so no file is shared.
    lines = 2_100 + rng.randrange(1_500)
    output = "".join(f"{tag} compiling unit {n} of {lines}: ok\n" for n in range(lines))
    return Batch(round_, k, i, session, output)


@dataclass
class Storm:
    """One round of the storm: every batch sent, how many were acknowledged, and failures."""

    batches: list[Batch] = field(default_factory=list)
    acks: int = 0
    killed: bool = False
    errors: list[str] = field(default_factory=list)


async def _storm_client(server: Server, storm: Storm, round_: int, k: int, rng: random.Random) -> None:
    """Append batch after batch until the server dies under us."""
    try:
        async with client(server.url) as c:
            for i in range(10_000):
                batch = _new_batch(round_, k, i, rng)
                storm.batches.append(batch)  # from here on it may be in flight
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await c.call_tool("append", {"session_id": batch.session, "messages": batch.wire()})
                if result.is_error:
                    storm.errors.append(f"{batch.tag}: {result.content[0].text}")
                    return
                content = result.structured_content
                batch.ids = [m["id"] for m in content["messages"]]
                batch.output_id = content["spilled"][0]["output_id"]
                batch.acked = True
                storm.acks += 1
    except Exception as exc:  # the connection died with the server; anything earlier is a failure
        if not storm.killed:
            storm.errors.append(f"client {k} failed before the kill: {exc!r}")


def _uncommitted_files(home: Path, known: set[str]) -> set[str]:
    """Spill files, other than `known`, that no committed output row points to (yet)."""
    files = spill_files(home / "outputs") - known
    if not files:
        return set()
    db = sqlite3.connect(f"file:{home / 'contextfold.db'}?mode=ro", uri=True, timeout=30)
    try:
        rows = {r[0] for r in db.execute("SELECT digest FROM outputs")}
    finally:
        db.close()
    return files - rows


async def _kill_when(storm: Storm, server: Server, moment: str, rng: random.Random, home: Path) -> None:
    """Wait for `moment`, then SIGKILL the server."""
    deadline = time.monotonic() + TRIGGER_TIMEOUT
    if moment == "after-acks":
        target = rng.randint(15, 40)
        while storm.acks < target and time.monotonic() < deadline and not storm.errors:
            await anyio.sleep(0.005)
    elif moment == "spill-window":
        target = rng.randint(5, 15)
        while storm.acks < target and time.monotonic() < deadline and not storm.errors:
            await anyio.sleep(0.005)
        known = spill_files(home / "outputs")  # earlier rounds' orphans do not count
        while time.monotonic() < deadline and not storm.errors:
            if await anyio.to_thread.run_sync(_uncommitted_files, home, known):
                break
    else:
        while storm.acks < 1 and time.monotonic() < deadline and not storm.errors:
            await anyio.sleep(0.005)
        await anyio.sleep(rng.uniform(0.2, 1.5))
    storm.killed = True
    server.kill()


async def _storm_round(server: Server, round_: int, moment: str, rng: random.Random, home: Path) -> Storm:
    storm = Storm()
    async with anyio.create_task_group() as tg:
        for k in range(STORM_CLIENTS):
            tg.start_soon(_storm_client, server, storm, round_, k, random.Random(rng.random()))
        await _kill_when(storm, server, moment, rng, home)
    assert not storm.errors, storm.errors[:3]
    assert storm.acks > 0
    return storm


def _storm_messages(stored: Stored, sessions: list[str]) -> dict[str, list[StoredMessage]]:
    """The stored messages of each batch, by batch tag (each must belong to one)."""
    by_tag: dict[str, list[StoredMessage]] = {}
    tag = re.compile(r"^\[r\d+ c\d+ b\d{3}\]")
    for session in sessions:
        for message in stored.session_messages(session):
            if message.tools:
                (part,) = message.tools
                match = re.fullmatch(r"call_r(\d+)_c(\d+)_b(\d+)", part["call_id"])
                assert match, f"unexpected tool call {part['call_id']}"
                key = f"[r{match[1]} c{match[2]} b{int(match[3]):03d}]"
            else:
                found = tag.match(message.text)
                assert found, f"a message nobody appended: {message.text[:80]!r}"
                key = found[0]
            by_tag.setdefault(key, []).append(message)
    return by_tag


def _check_storm(home: Path, batches: list[Batch], sessions: list[str]) -> tuple[Stored, set[str]]:
    """Check the database against every batch sent so far; returns it and the orphan files."""
    stored = read_store(home / "contextfold.db")
    assert stored.integrity == "ok", stored.integrity
    for session in sessions:
        check_session(stored, session)  # seqs without gaps, counters agree with the rows
    by_tag = _storm_messages(stored, sessions)
    files = spill_files(home / "outputs")
    rows_by_digest = {row["digest"]: row for row in stored.outputs.values()}
    assert len(rows_by_digest) == len(stored.outputs), "two output rows for one unique output"
    committed: set[str] = set()
    position: dict[str, int] = {}
    for batch in batches:
        messages = by_tag.pop(batch.tag, [])
        if not batch.acked and not messages:
            continue  # never committed: fine, as long as nothing of it is stored either
        assert batch.digest in rows_by_digest, f"{batch.tag}: stored without its output row"
        committed.add(batch.digest)
        assert len(messages) == 3, f"{batch.tag}: {len(messages)} of its 3 messages are stored"
        user, call, answer = messages
        position[batch.tag] = user.seq
        assert {m.session_id for m in messages} == {batch.session}
        assert [m.seq for m in messages] == [user.seq, user.seq + 1, user.seq + 2], f"{batch.tag} is not contiguous"
        assert (user.role, call.role, answer.role) == ("user", "assistant", "assistant")
        assert user.text == f"{batch.tag} run the build" and answer.text == f"{batch.tag} the build output is read"
        (part,) = call.tools
        row = rows_by_digest[batch.digest]
        assert part["state"] == "completed" and part["spill_id"] == row["id"], f"{batch.tag}: tool part incomplete"
        assert row["session_id"] == batch.session and row["bytes"] == len(batch.output.encode())
        assert batch.digest in files, f"{batch.tag}: output row without its file"
        data = (home / "outputs" / batch.digest).read_bytes()
        assert hashlib.sha256(data).hexdigest() == batch.digest, f"{batch.tag}: spill file content is wrong"
        if batch.acked:
            assert [m.id for m in messages] == batch.ids, f"{batch.tag}: ids differ from what append returned"
            assert row["id"] == batch.output_id
    assert not by_tag, f"stored messages of batches never sent: {sorted(by_tag)[:5]}"
    for session in sessions:  # each client's batches in the order it sent them
        stored_order = sorted(
            (position[b.tag], b.client, b.round, b.index) for b in batches if b.tag in position and b.session == session
        )
        for k in range(STORM_CLIENTS):
            mine = [(r, i) for _seq, kk, r, i in stored_order if kk == k]
            assert mine == sorted(mine), f"client {k}'s batches are out of order in {session}"
    assert set(rows_by_digest) == committed, "output rows of batches that are not stored"
    orphans = files - committed
    uncommitted = {b.digest for b in batches} - committed
    assert orphans <= uncommitted, "a spill file that belongs to no batch"
    return stored, orphans


async def _check_through_tools(server: Server, batches: list[Batch], sessions: list[str], round_: int) -> None:
    """After a restart: every acknowledged batch shows in `get_context`; this round's outputs read back."""
    async with client(server.url) as c:
        for session in sessions:
            context = await _call(c, "get_context", {"session_id": session})
            shown = [m["content"].removesuffix(" run the build") for m in context["messages"] if m["role"] == "user"]
            assert len(shown) == len(set(shown)), f"{session}: a batch shows twice"
            acked = {b.tag for b in batches if b.acked and b.session == session}
            assert acked <= set(shown), f"{session}: acknowledged batches missing from get_context"
        for batch in batches:
            if batch.acked and batch.round == round_:
                read = await _call(c, "read_output", {"id": batch.output_id, "offset": 2_000, "limit": 1})
                assert read["text"] == f"2000\t{batch.tag} compiling unit 1999 of {batch.output.count(chr(10))}: ok"


async def test_sigkill_during_an_append_storm(tmp_path: Path) -> None:
    """Acknowledged appends survive SIGKILL whole; the rest is all or nothing; gc removes the orphans."""
    rng = random.Random(SEED)
    sessions = [SHARED, *(f"own-{k}" for k in range(STORM_CLIENTS))]
    batches: list[Batch] = []
    kills = in_flight_committed = 0
    orphans: set[str] = set()
    server = start_server(tmp_path)
    try:
        await _open_sessions(server, sessions)
        round_ = 0
        for moment in STORM_KILL_MOMENTS:
            for _attempt in range(SPILL_WINDOW_ATTEMPTS if moment == "spill-window" else 1):
                round_ += 1
                known_orphans = orphans
                storm = await _storm_round(server, round_, moment, rng, tmp_path)
                kills += 1
                batches += storm.batches
                server = start_server(tmp_path)  # the restart on the crashed data
                stored, orphans = _check_storm(tmp_path, batches, sessions)
                digests = {row["digest"] for row in stored.outputs.values()}
                in_flight_committed += sum(1 for b in storm.batches if not b.acked and b.digest in digests)
                await _check_through_tools(server, batches, sessions, round_)
                if moment != "spill-window" or orphans - known_orphans:
                    break
            else:
                pytest.fail(f"no kill in {SPILL_WINDOW_ATTEMPTS} attempts landed between a spill and its commit")
        assert kills >= STORM_KILLS
    finally:
        server.stop()

    # gc after the crashes: only files older than the grace period go (a live transaction may still
    # commit a younger one), so age them as if the restart came later; rows are what count.
    _stored, orphans = _check_storm(tmp_path, batches, sessions)
    assert orphans, "the spill-window kill left no orphan file"
    orphans_seen = len(orphans)
    aged = time.time() - FILE_GRACE_SECONDS - 3_600
    for digest in spill_files(tmp_path / "outputs"):
        os.utime(tmp_path / "outputs" / digest, (aged, aged))
    gc = subprocess.run(
        [sys.executable, "-m", "contextfold", "gc", "--json"],
        env={**os.environ, "CONTEXTFOLD_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gc.returncode == 0, gc.stderr
    report = json.loads(gc.stdout)
    assert (report["files_removed"], report["outputs_removed"]) == (orphans_seen, 0), report
    stored, orphans = _check_storm(tmp_path, batches, sessions)
    assert not orphans
    files = set(os.listdir(tmp_path / "outputs"))
    assert {row["digest"] for row in stored.outputs.values()} == spill_files(tmp_path / "outputs")
    assert all(name[: -len(".idx")] in files for name in files if name.endswith(".idx")), "an index without content"
    server = start_server(tmp_path)
    try:
        await _check_through_tools(server, batches, sessions, round_)
    finally:
        server.stop()
    acked = sum(b.acked for b in batches)
    # A kill while a temp file was being written leaves it: never under a content name, so never
    # served, and removed by the server at start once a day old.
    temps = sum(1 for name in files if name.startswith(".tmp-"))
    print(
        f"{kills} SIGKILLs in append storms: {acked} acknowledged batches of {len(batches)} sent, "
        f"{in_flight_committed} unacknowledged but committed, {orphans_seen} orphan spill files removed by gc, "
        f"{temps} partial temp files left"
    )


# -- compaction ------------------------------------------------------------------------------------


def _pairs(start: int, count: int) -> list[dict[str, Any]]:
    """`count` user/assistant pairs numbered from `start`: a working session with one rule."""
    messages: list[dict[str, Any]] = []
    for n in range(start, start + count):
        messages.append(
            {
                "role": "user",
                "content": f"[n{n:05d}] Make step {n} of the migration pass. We must keep the public API stable.",
            }
        )
        messages.append(
            {"role": "assistant", "content": f"[n{n:05d}] Step {n} passes now: decided to keep the schema as it is."}
        )
    return messages


@dataclass
class Appends:
    """Acknowledged (and possibly in-flight) appends of numbered pairs to the big session."""

    next: int = 0
    acked: list[int] = field(default_factory=list)
    """Numbers of acknowledged pairs, in order."""
    in_flight: list[list[int]] = field(default_factory=list)
    killed: bool = False
    errors: list[str] = field(default_factory=list)

    async def append(self, c: Client, pairs: int) -> None:
        numbers = list(range(self.next, self.next + pairs))
        self.next += pairs
        self.in_flight.append(numbers)
        await _call(c, "append", {"session_id": BIG, "messages": _pairs(numbers[0], pairs)})
        self.in_flight.remove(numbers)
        self.acked += numbers


async def _append_until_killed(server: Server, appends: Appends) -> None:
    try:
        async with client(server.url) as c:
            while True:
                await appends.append(c, 3)
    except Exception as exc:
        if not appends.killed:
            appends.errors.append(repr(exc))


def _numbers(messages: list[StoredMessage] | list[dict[str, Any]]) -> list[int]:
    """The pair numbers of our messages, in order (one per pair: the user message)."""
    found = []
    for message in messages:
        text = message.text if isinstance(message, StoredMessage) else message.get("content")
        if isinstance(message, StoredMessage) and message.role != "user":
            continue
        if isinstance(message, dict) and message.get("role") != "user":
            continue
        match = re.match(r"^\[n(\d{5})\]", text) if isinstance(text, str) else None
        if match:
            found.append(int(match[1]))
    return found


def _check_big(home: Path, appends: Appends) -> tuple[Stored, int]:
    """Integrity, compaction invariants, and every acknowledged pair stored once and in order."""
    stored = read_store(home / "contextfold.db")
    assert stored.integrity == "ok", stored.integrity
    check = check_session(stored, BIG)  # no half compaction; the view hides only what was summarized
    regular = [m for m in stored.session_messages(BIG) if not m.is_compaction]
    numbers = _numbers(regular)
    assert numbers == sorted(set(numbers)), "a pair is stored twice or out of order"
    assert len(regular) == 2 * len(numbers), "a pair is stored without its other half"
    assert set(appends.acked) <= set(numbers), "an acknowledged message is lost"
    unacked = set(numbers) - set(appends.acked)
    for batch in appends.in_flight:  # a batch that was in flight at the kill: all or nothing
        assert set(batch) <= unacked or not set(batch) & unacked, f"pairs {batch} are stored in part"
    return stored, check.compactions


async def _kill_mid_compaction(
    server: Server,
    moment: str,
    rng: random.Random,
    requests: Callable[[], int],
    appends: Appends,
) -> None:
    """Start a compaction, wait for `moment`, SIGKILL the server."""
    before = requests()
    summarizer = "extractive" if moment == "extractive" else "anthropic"

    answered = anyio.Event()
    answers: list[str] = []

    async def compact() -> None:
        try:
            async with client(server.url) as c:
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await c.call_tool("compact", {"session_id": BIG, "summarizer": summarizer})
                answers.append(result.content[0].text if result.is_error else "compacted")
                answered.set()
        except Exception:
            pass  # the server died under the call; what matters is what is stored

    async def until(condition: Callable[[], bool]) -> None:
        with anyio.fail_after(TRIGGER_TIMEOUT):
            while not condition():
                await anyio.sleep(0.002)

    async with anyio.create_task_group() as tg:
        tg.start_soon(compact)
        if moment == "extractive":
            await anyio.sleep(rng.uniform(0.0, 0.4))
        elif moment == "acknowledged":
            with anyio.fail_after(CALL_TIMEOUT):
                await answered.wait()
            assert answers == ["compacted"], answers
        else:
            await until(lambda: requests() > before)  # planned: the summarizer is waiting on the fake
            if moment == "summarizing-with-appends":
                target = len(appends.acked) + 3 * rng.randint(2, 6)
                tg.start_soon(_append_until_killed, server, appends)
                await until(lambda: len(appends.acked) >= target or bool(appends.errors))
            elif moment == "summary-arrived":
                await anyio.sleep(rng.uniform(0.0, 0.2))  # the reply left the fake at once
        appends.killed = True
        server.kill()
    appends.killed = False
    assert not appends.errors, appends.errors


async def test_sigkill_during_compaction(tmp_path: Path) -> None:
    """A compaction killed at any moment is either absent or complete; the next one works."""
    rng = random.Random(SEED + 1)
    hold = {"seconds": 0.0}

    def answer(_request: RecordedRequest) -> Reply:
        reply = message_reply(VALID_SUMMARY)
        return Reply(status=reply.status, body=reply.body, delay=hold["seconds"])

    with serve_fake_anthropic() as fake:
        fake.handler = answer
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
            "ANTHROPIC_BASE_URL": fake.base_url,
            "CONTEXTFOLD_ANTHROPIC_MAX_RETRIES": "0",
        }
        appends = Appends()
        server = start_server(tmp_path, env=env)
        outcomes: list[str] = []
        try:
            await _open_sessions(server, [BIG])
            async with client(server.url) as c:
                for _ in range(20):
                    await appends.append(c, 10)
                first = await _call(c, "compact", {"session_id": BIG, "summarizer": "extractive"})
                assert first["compacted"]
            for moment in COMPACTION_KILL_MOMENTS:
                hold["seconds"] = 0.0 if moment in ("summary-arrived", "acknowledged") else 600.0
                async with client(server.url) as c:
                    for _ in range(6):
                        await appends.append(c, 5)
                    before = await _call(c, "get_context", {"session_id": BIG})
                _stored, compactions_before = _check_big(tmp_path, appends)
                acked_before = list(appends.acked)
                await _kill_mid_compaction(server, moment, rng, lambda: len(fake.requests), appends)
                server = start_server(tmp_path, env=env)  # the restart on the crashed data
                stored, compactions = _check_big(tmp_path, appends)
                async with client(server.url) as c:
                    after = await _call(c, "get_context", {"session_id": BIG})
                check = check_session(stored, BIG)
                assert _numbers(after["messages"]) == _numbers(check.in_view), "get_context is not the stored view"
                if compactions == compactions_before:
                    assert moment != "acknowledged", "an acknowledged compaction was lost"
                    outcomes.append(f"{moment}: not written")
                    arrived = [n for n in _numbers(check.in_view) if n not in acked_before]
                    if arrived:  # appends that landed while the summary was awaited stay in view, after it
                        assert after["messages"][: len(before["messages"])] == before["messages"]
                    else:
                        assert after["messages"] == before["messages"], f"{moment}: the view changed"
                else:
                    assert compactions == compactions_before + 1
                    summarized = moment not in ("summarizing", "summarizing-with-appends")
                    assert summarized, f"{moment}: a compaction was written before its summary arrived"
                    outcomes.append(f"{moment}: written whole")
                    marker, summary = after["messages"][:2]
                    assert marker["role"] == "user" and summary["role"] == "assistant"
                    assert summary["content"] == check.summary_text
            hold["seconds"] = 0.0
            async with client(server.url) as c:
                await appends.append(c, 30)
                done = await _call(c, "compact", {"session_id": BIG, "summarizer": "anthropic"})
                assert done["compacted"] and done["summarizer"] == "anthropic" and not done["fallbacks"]
                await appends.append(c, 30)
                done = await _call(c, "compact", {"session_id": BIG, "summarizer": "extractive"})
                assert done["compacted"] and done["summarizer"] == "extractive"
        finally:
            server.stop()
    _check_big(tmp_path, appends)
    print(f"{COMPACTION_KILLS} SIGKILLs during compaction: " + "; ".join(outcomes))

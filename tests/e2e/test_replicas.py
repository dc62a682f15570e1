"""Three `contextfold serve --http` replicas on loopback share one real PostgreSQL database.

Setup: a fresh database on the test cluster (tests/_postgres.py); three server processes, each
with its own data home, started with `--database <url> --stateless` and the same two tenants'
bearer tokens (`CONTEXTFOLD_TOKENS`). Sixteen real MCP clients run at once, half of them alice's
and half bob's, a quarter of them over the 2025-11-25 handshake and the rest over the sessionless
2026-07-28 protocol. Every HTTP request a client makes goes to the next replica in turn (an HTTP
transport that rotates the port), so one client's consecutive calls land on different processes.

Each client appends its messages in batches of ten, alternating between a session its tenant's
clients share (both tenants have one called "shared": session ids are per tenant) and one of its
own, and compacts both every eighth batch with the extractive summarizer. After a third of the
batches are acknowledged, one replica is SIGKILLed: the calls in flight there fail (they are
remembered as unacknowledged), the transport skips the dead port from then on, and the clients
carry on through the other two.

Afterwards the database is read directly (plain psycopg, one snapshot per tenant) and the test
asserts, as tests/test_concurrency.py does for one SQLite server:

* no call failed except the ones in flight at the kill and the documented compaction race on a
  shared session ("compacted by another request meanwhile");
* every acknowledged message is stored exactly once, under the id `append` returned, in the
  session and tenant it was sent to, and each unacknowledged batch is stored whole or not at all;
* each client's messages are in the order it sent them, in every session;
* compactions are consistent and `get_context` through a surviving replica shows exactly the
  messages no compaction summarized;
* tenants stay apart across replicas: each tenant's rows hold only its own clients' messages,
  and one tenant's session and output ids read as unknown to the other on another replica;
* an output spilled through one replica reads back, by slice and by search, through another.

This is the full scale, 16 clients × 500 messages: about 40 s on a 2-core machine
(`CONTEXTFOLD_REPLICA_MESSAGES` sets another count per client, a multiple of 10).
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _servers import Server, serve
from _stored import check_session, read_store_pg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

REPLICAS = 3
CLIENTS = 16
MESSAGES_PER_CLIENT = int(os.environ.get("CONTEXTFOLD_REPLICA_MESSAGES", "500"))
BATCH = 10
BATCHES = MESSAGES_PER_CLIENT // BATCH
COMPACT_EVERY = 8
KILL_AFTER = CLIENTS * BATCHES // 3
"""Acknowledged batches (all clients together) after which one replica is SIGKILLed."""
KILLED = 2
SHARED = "shared"
SHARED_SETTINGS = {"preserve_recent_tokens": 0}
SEED = 20261126
CALL_TIMEOUT = 180.0
TENANTS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}
TAG = re.compile(r"^\[c(\d{2}) m(\d{3})\]")
ALLOWED_SHARED_REFUSALS = ("compacted by another request meanwhile", "would not free anything", "nothing to compact")


def tenant_of(k: int) -> str:
    return "alice" if k % 2 == 0 else "bob"


def legacy(k: int) -> bool:
    return k % 4 == 3


def own(k: int) -> str:
    return f"own-{k:02d}"


def tag(k: int, n: int) -> str:
    return f"[c{k:02d} m{n:03d}]"


def batch(k: int, i: int, rng: random.Random) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for j in range(0, BATCH, 2):
        n = i * BATCH + j
        module = f"pkg/module_{k:02d}_{rng.randrange(40):02d}.py"
        messages.append(
            {
                "role": "user",
                "content": f"{tag(k, n)} Please update {module} for step {n}. We must keep the public API stable.",
            }
        )
        messages.append(
            {
                "role": "assistant",
                "content": f"{tag(k, n + 1)} Updated {module}: decided to validate inputs before step {n}. "
                "The tests for it pass now.",
            }
        )
    return messages


class RoundRobin(httpx2.AsyncHTTPTransport):
    """Sends each request to the next live replica's port. A replica that refuses the connection
    (it is dead: the request never reached it) is marked dead and the request goes to the next;
    a request that reached a replica which then died fails, as it would behind a load balancer."""

    def __init__(self, ports: list[int], dead: set[int], start: int) -> None:
        super().__init__()
        self.ports = ports
        self.dead = dead
        self.turn = start
        self.sent: dict[int, int] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        for _ in range(len(self.ports)):
            port = self.ports[self.turn % len(self.ports)]
            self.turn += 1
            if port in self.dead:
                continue
            request.url = request.url.copy_with(port=port)
            try:
                response = await super().handle_async_request(request)
            except httpx2.ConnectError:
                self.dead.add(port)
                continue
            self.sent[port] = self.sent.get(port, 0) + 1
            return response
        raise httpx2.ConnectError("no replica is up")


@dataclass
class Outcome:
    acked: dict[int, tuple[str, str]] = field(default_factory=dict)
    unacked: list[tuple[str, int]] = field(default_factory=list)
    """(session, batch number) of appends that failed with the killed replica."""
    compactions: dict[str, int] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    failures: int = 0
    sent: dict[int, int] = field(default_factory=dict)


class ClientSawError(AssertionError):
    pass


@dataclass
class Storm:
    replicas: list[Server]
    dead: set[int] = field(default_factory=set)
    acked_batches: int = 0
    killed_at: float | None = None

    @property
    def ports(self) -> list[int]:
        return [int(s.url.rsplit(":", 1)[1].split("/")[0]) for s in self.replicas]

    def maybe_kill(self) -> None:
        self.acked_batches += 1
        if self.killed_at is None and self.acked_batches >= KILL_AFTER:
            self.killed_at = time.monotonic()
            self.replicas[KILLED].kill()


def _steps(k: int) -> list[tuple[str, str, int]]:
    """Client k's calls in order: (tool, session, batch number)."""
    steps = [("session_open", SHARED, -1), ("session_open", own(k), -1)]
    for i in range(BATCHES):
        steps.append(("append", SHARED if i % 2 == 0 else own(k), i))
        if i >= COMPACT_EVERY - 1 and (i + k) % COMPACT_EVERY == COMPACT_EVERY - 1:
            steps += [("compact", own(k), i), ("compact", SHARED, i)]
    return steps


async def _run_client(k: int, storm: Storm, outcome: Outcome) -> None:
    """Client k's calls through one MCP connection; after the kill, a call that fails in
    transport ends the connection, is remembered, and the client reconnects and goes on."""
    rng = random.Random(SEED * 100 + k)
    batches = {i: batch(k, i, rng) for i in range(BATCHES)}
    transport = RoundRobin(storm.ports, storm.dead, start=k)
    steps = _steps(k)
    done = 0
    while done < len(steps):
        try:
            async with httpx2.AsyncClient(
                transport=transport,
                headers={"Authorization": f"Bearer {TENANTS[tenant_of(k)]}"},
                timeout=httpx2.Timeout(30.0, read=300.0),
            ) as http:
                async with Client(
                    streamable_http_client(storm.replicas[0].url, http_client=http),
                    mode="legacy" if legacy(k) else "auto",
                ) as c:
                    while done < len(steps):
                        await _step(c, k, steps[done], batches, storm, outcome)
                        done += 1
        except ClientSawError:
            raise
        except Exception:
            if storm.killed_at is None:
                raise  # before the kill, nothing may fail
            if done < len(steps):  # the call in flight failed with the killed replica
                tool, session, i = steps[done]
                if tool == "session_open":
                    raise
                if tool == "append":
                    outcome.unacked.append((session, i))
                outcome.failures += 1
                done += 1
    outcome.sent = dict(transport.sent)


async def _step(
    c: Client,
    k: int,
    step: tuple[str, str, int],
    batches: dict[int, list[dict[str, Any]]],
    storm: Storm,
    outcome: Outcome,
) -> None:
    tool, session, i = step
    with anyio.fail_after(CALL_TIMEOUT):
        if tool == "session_open":
            settings = SHARED_SETTINGS if session == SHARED else {}
            result = await c.call_tool(tool, {"session_id": session, "model": "gpt-4o", "settings": settings})
        elif tool == "append":
            result = await c.call_tool(tool, {"session_id": session, "messages": batches[i]})
        else:
            result = await c.call_tool(tool, {"session_id": session, "summarizer": "extractive"})
    if tool == "compact" and result.is_error:
        text = result.content[0].text
        if session == SHARED and any(reason in text for reason in ALLOWED_SHARED_REFUSALS):
            outcome.refusals.append(text)
            return
    if result.is_error:
        raise ClientSawError(f"client {k}: {tool} {session} (batch {i}): {result.content[0].text}")
    if tool == "append":
        ids = [m["id"] for m in result.structured_content["messages"]]
        assert len(ids) == BATCH
        for j, message_id in enumerate(ids):
            outcome.acked[i * BATCH + j] = (session, message_id)
        storm.maybe_kill()
    elif tool == "compact":
        outcome.compactions[session] = outcome.compactions.get(session, 0) + 1


def _tags(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    found = []
    for message in messages:
        content = message.get("content")
        match = TAG.match(content) if isinstance(content, str) else None
        if match:
            found.append((int(match[1]), int(match[2])))
    return found


async def _one_call(url: str, tenant: str, name: str, args: dict[str, Any], mode: str = "auto") -> Any:
    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TENANTS[tenant]}"}, timeout=httpx2.Timeout(30.0, read=300.0)
    ) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            with anyio.fail_after(CALL_TIMEOUT):
                return await c.call_tool(name, args)


async def test_three_replicas_share_one_postgresql_database(tmp_path: Path, pg_url: str) -> None:
    env = {"CONTEXTFOLD_TOKENS": ";".join(f"{t}={v}" for t, v in TENANTS.items())}
    args = ("--database", pg_url, "--stateless")
    outcomes = [Outcome() for _ in range(CLIENTS)]
    started = time.monotonic()
    with (
        serve(tmp_path / "r0", *args, env=env) as r0,
        serve(tmp_path / "r1", *args, env=env) as r1,
        serve(tmp_path / "r2", *args, env=env) as r2,
    ):
        storm = Storm([r0, r1, r2])
        try:
            async with anyio.create_task_group() as tg:
                for k in range(CLIENTS):
                    tg.start_soon(_run_client, k, storm, outcomes[k])
        except Exception as exc:
            logs = "\n".join(f"--- replica {i}:\n{s.log_tail()}" for i, s in enumerate(storm.replicas))
            raise AssertionError(f"a client failed: {exc!r}\n{logs}") from exc
        storm_seconds = time.monotonic() - started
        assert storm.killed_at is not None and r2.process.poll() is not None, "the replica was not killed"

        # The survivors answer; every session is read back through replica 1.
        views: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for k in range(CLIENTS):
            for session in (SHARED, own(k)):
                key = (tenant_of(k), session)
                if key in views:
                    continue
                context = await _one_call(r1.url, tenant_of(k), "get_context", {"session_id": session})
                assert not context.is_error, context.content
                assert context.structured_content["next_cursor"] is None
                views[key] = _tags(context.structured_content["messages"])

        # Tenants apart across replicas: bob cannot see alice's own session through replica 0.
        hidden = await _one_call(r0.url, "bob", "get_context", {"session_id": own(0)})
        assert hidden.is_error and "no session with id 'own-00'" in hidden.content[0].text

        # An output spilled through one replica reads back through another (and not for bob).
        log_lines = "\n".join(f"line {i}: {'FAILED test_widget' if i == 31_337 else 'ok'}" for i in range(60_000))
        spilled = await _one_call(r0.url, "alice", "spill", {"session_id": own(0), "text": log_lines, "tool": "pytest"})
        assert not spilled.is_error, spilled.content
        output_id = spilled.structured_content["output_id"]
        page = await _one_call(
            r1.url, "alice", "read_output", {"id": output_id, "offset": 45_001, "limit": 3}, mode="legacy"
        )
        assert page.structured_content["text"].splitlines() == [
            "45001\tline 45000: ok",
            "45002\tline 45001: ok",
            "45003\tline 45002: ok",
        ]
        found = await _one_call(r1.url, "alice", "read_output", {"id": output_id, "pattern": "FAILED"})
        assert found.structured_content["text"] == "31338:line 31337: FAILED test_widget"
        refused = await _one_call(r0.url, "bob", "read_output", {"id": output_id})
        assert refused.is_error and "no output with id" in refused.content[0].text
    logs = {i: s.log_tail(200_000) for i, s in enumerate(storm.replicas)}

    # 1. Nothing failed but calls in flight at the kill; compaction happened on every replica's watch.
    for i, log in logs.items():
        for needle in ("Traceback", "unexpected error", "deadlock"):
            assert needle not in log, f"replica {i}'s log mentions {needle!r}:\n{log[-3000:]}"
    failures = sum(o.failures for o in outcomes)
    assert failures <= CLIENTS, f"{failures} calls failed around the kill (at most one in flight per client)"
    for k, o in enumerate(outcomes):
        assert len(o.acked) + BATCH * len(o.unacked) == MESSAGES_PER_CLIENT
        assert len(o.sent) >= 2, f"client {k} reached only replica(s) {sorted(o.sent)}"
    assert all(len({p for o in outcomes for p in o.sent}) == REPLICAS for _ in [0])

    # 2–4, per tenant: stored once, in order, whole or nothing, compactions consistent, views exact.
    total_compactions = 0
    for tenant in TENANTS:
        clients = [k for k in range(CLIENTS) if tenant_of(k) == tenant]
        stored = read_store_pg(pg_url, tenant)
        assert stored.integrity == "ok"
        sessions = {SHARED, *(own(k) for k in clients)}
        assert set(stored.sessions) == sessions
        found: dict[tuple[int, int], tuple[str, str, int]] = {}
        for session in sessions:
            for message in stored.session_messages(session):
                if message.is_compaction:
                    continue
                match = TAG.match(message.text)
                assert match is not None, f"{tenant}/{session}: a message nobody appended: {message.text[:80]!r}"
                key = (int(match[1]), int(match[2]))
                assert tenant_of(key[0]) == tenant, f"{tenant}'s rows hold client {key[0]}'s message"
                assert key not in found, f"message {key} is stored twice"
                found[key] = (session, message.id, message.seq)
        acked = {(k, n): where for k in clients for n, where in outcomes[k].acked.items()}
        assert {key: (s, i) for key, (s, i, _seq) in found.items() if key in acked} == acked
        for k in clients:
            for session, i in outcomes[k].unacked:
                numbers = [(k, i * BATCH + j) for j in range(BATCH)]
                present = [key for key in numbers if key in found]
                assert present in ([], numbers), f"client {k}'s unacknowledged batch {i} is stored in part"
                assert all(found[key][0] == session for key in present)
        extra = set(found) - set(acked)
        assert all(any(key[1] // BATCH == i for _s, i in outcomes[key[0]].unacked) for key in extra)
        for session in sessions:
            rows = sorted((seq, key) for key, (s, _id, seq) in found.items() if s == session)
            for k in clients:
                numbers = [n for _seq, (kk, n) in rows if kk == k]
                assert numbers == sorted(numbers), f"client {k}'s messages are out of order in {tenant}/{session}"
            check = check_session(stored, session)
            total_compactions += check.compactions
            expected = [(int(m[1]), int(m[2])) for m in (TAG.match(x.text) for x in check.in_view) if m]
            assert views[(tenant, session)] == expected, f"{tenant}/{session}: get_context differs from the store"
    acknowledged = sum(sum(o.compactions.values()) for o in outcomes)
    assert acknowledged <= total_compactions <= acknowledged + failures
    assert sum(o.compactions.get(SHARED, 0) for o in outcomes) >= 3
    print(
        f"{REPLICAS} replicas, {CLIENTS} clients × {MESSAGES_PER_CLIENT} messages in {storm_seconds:.1f} s; "
        f"replica {KILLED} SIGKILLed after {KILL_AFTER} acknowledged batches, {failures} calls failed with it; "
        f"{total_compactions} compactions, {sum(len(o.refusals) for o in outcomes)} refused as racing; "
        f"requests per replica {dict(sorted((p, sum(o.sent.get(p, 0) for o in outcomes)) for p in storm.ports))}"
    )

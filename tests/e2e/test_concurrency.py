"""Sixteen real MCP clients write to one `contextfold serve --http` process at once.

Setup: one server subprocess on loopback; 16 `mcp.Client`s over streamable HTTP, all in flight
together. Each client appends 500 messages in 50 `append` calls of 10 (five user/assistant
pairs: small enough that a call is one short transaction, large enough that 800 calls finish in
reasonable time). Its batches alternate between one session all 16 share and a session of its
own: 8,000 messages in 800 calls, 4,000 of them into the shared session. Each message starts
with a tag naming its client and its number (0–499, in the order the client sent it). Every
eighth batch (staggered by client) the client compacts its own session and the shared one with
the extractive summarizer, while the others keep appending. The shared session keeps no tail
(`preserve_recent_tokens = 0`), so whatever lands while its summarizer runs must be kept in view
by the write itself — the test asserts that this race actually happened.

Afterwards the test reads every session back through `get_context`, stops the server, and reads
the database read-only. It proves that, under this load:

* no call failed: no append, read or own-session compaction returned an error or raised (so
  no "database is locked" either; the server log has no traceback); the only refusal allowed
  is the documented one for two compactions of the shared session racing each other ("compacted
  by another request meanwhile") or one left with too little to free — and enough compactions
  of the shared session still succeed;
* every acknowledged message is stored exactly once, under the id `append` returned, in the
  session it was sent to, and nothing else is stored; seqs are 1..n without gaps and the
  session counters agree with the rows;
* each client's messages appear in each session in the order it sent them;
* compactions are consistent (tests/_stored.py `check_session`): every compaction is a marker,
  a complete summary and a record; each summarized a prefix of what was not summarized yet,
  ending right before its kept tail; the messages the view hides are exactly the summarized
  ones — none appended while a summarizer ran was hidden — and `get_context` shows precisely
  the rest, in order.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from _servers import Server, client, serve
from _stored import check_session, read_store
from mcp import Client

pytestmark = pytest.mark.anyio

CLIENTS = 16
MESSAGES_PER_CLIENT = 500
BATCH = 10
"""Messages per `append` call: five user/assistant pairs."""
BATCHES = MESSAGES_PER_CLIENT // BATCH
COMPACT_EVERY = 8
"""Batches between a client's compactions (of its own session and of the shared one)."""
MIN_SHARED_COMPACTIONS = 3
SHARED = "shared"
SHARED_SETTINGS = {"preserve_recent_tokens": 0}
"""No kept tail in the shared session: its compactions summarize everything they planned, so the
messages that arrive while the summarizer runs are exactly the ones the write must keep in view
(own sessions keep the default tail)."""
SEED = 20260807
CALL_TIMEOUT = 180.0
"""Only to turn a hang into a failure; no assertion is about time."""

TAG = re.compile(r"^\[c(\d{2}) m(\d{3})\]")
ALLOWED_SHARED_REFUSALS = (
    "compacted by another request meanwhile",
    "would not free anything",
    "nothing to compact",
)


def own(k: int) -> str:
    return f"own-{k:02d}"


def tag(k: int, n: int) -> str:
    return f"[c{k:02d} m{n:03d}]"


def batch(k: int, i: int, rng: random.Random) -> list[dict[str, Any]]:
    """Ten messages of client k's batch i: user asks, assistant answers (text extractive can use)."""
    messages: list[dict[str, Any]] = []
    for j in range(0, BATCH, 2):
        n = i * BATCH + j
        module = f"pkg/module_{k:02d}_{rng.randrange(40):02d}.py"
        messages.append(
            {
                "role": "user",
                # One constraint shared by all: pinned facts carry every distinct user constraint
                # forward forever, so thousands of distinct ones would outgrow any summary.
                "content": f"{tag(k, n)} Please update {module} for step {n}. We must keep the public API stable.",
            }
        )
        messages.append(
            {
                "role": "assistant",
                "content": f"{tag(k, n + 1)} Updated {module}: decided to validate inputs before step {n}. "
                f"The tests for it pass now.",
            }
        )
    return messages


@dataclass
class Outcome:
    """What one client saw: acknowledged ids per message number, and every refusal."""

    acked: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Message number → (session, message id returned by append)."""
    compactions: dict[str, int] = field(default_factory=dict)
    """Session → compactions that succeeded."""
    refusals: list[str] = field(default_factory=list)


class ClientSawError(AssertionError):
    """A call answered with an error it must never give; the first one ends the test."""


async def _call(c: Client, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT):
        return await c.call_tool(name, args)


async def _run_client(k: int, server: Server, outcome: Outcome) -> None:
    rng = random.Random(SEED * 100 + k)
    async with client(server.url) as c:
        for session, settings in ((SHARED, SHARED_SETTINGS), (own(k), {})):
            opened = await _call(c, "session_open", {"session_id": session, "model": "gpt-4o", "settings": settings})
            if opened.is_error:
                raise ClientSawError(f"client {k}: session_open {session}: {opened.content[0].text}")
        for i in range(BATCHES):
            session = SHARED if i % 2 == 0 else own(k)
            messages = batch(k, i, rng)
            result = await _call(c, "append", {"session_id": session, "messages": messages})
            if result.is_error:
                raise ClientSawError(f"client {k}: append to {session}, batch {i}: {result.content[0].text}")
            ids = [m["id"] for m in result.structured_content["messages"]]
            assert len(ids) == BATCH
            for j, message_id in enumerate(ids):
                outcome.acked[i * BATCH + j] = (session, message_id)
            if _compacts_after(k, i):
                for target in (own(k), SHARED):
                    compacted = await _call(c, "compact", {"session_id": target, "summarizer": "extractive"})
                    if not compacted.is_error:
                        assert compacted.structured_content["compacted"]
                        outcome.compactions[target] = outcome.compactions.get(target, 0) + 1
                        continue
                    text = compacted.content[0].text
                    if target == SHARED and any(reason in text for reason in ALLOWED_SHARED_REFUSALS):
                        outcome.refusals.append(text)
                    else:
                        raise ClientSawError(f"client {k}: compact {target} after batch {i}: {text}")


def _compacts_after(k: int, i: int) -> bool:
    """Whether client k compacts after batch i: every eighth batch, staggered, once it has history."""
    return i >= COMPACT_EVERY - 1 and (i + k) % COMPACT_EVERY == COMPACT_EVERY - 1


def _tags(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(client, number) of each rendered message that is one of ours, in order."""
    found = []
    for message in messages:
        content = message.get("content")
        match = TAG.match(content) if isinstance(content, str) else None
        if match:
            found.append((int(match[1]), int(match[2])))
    return found


async def test_sixteen_clients_append_and_compact_concurrently(tmp_path: Path) -> None:
    """Concurrent appends and compactions over HTTP lose, duplicate, reorder and hide nothing."""
    outcomes = [Outcome() for _ in range(CLIENTS)]
    sessions = [SHARED, *(own(k) for k in range(CLIENTS))]
    with serve(tmp_path) as server:
        try:
            async with anyio.create_task_group() as tg:
                for k in range(CLIENTS):
                    tg.start_soon(_run_client, k, server, outcomes[k])
        except Exception as exc:  # a client saw an error or raised: show the server's side too
            raise AssertionError(f"a client failed: {exc!r}\nserver log:\n{server.log_tail()}") from exc
        views: dict[str, list[tuple[int, int]]] = {}
        async with client(server.url) as reader:
            for session in sessions:
                context = await _call(reader, "get_context", {"session_id": session})
                assert not context.is_error, context.content
                assert context.structured_content["next_cursor"] is None
                views[session] = _tags(context.structured_content["messages"])
    log = server.log_tail(200_000)

    # 1. Nobody saw an error (a client stops at its first); the only refusals are the documented
    # ones, and compaction happened.
    for needle in ("database is locked", "Traceback", "unexpected error"):
        assert needle not in log, f"server log mentions {needle!r}:\n{log[-3000:]}"
    assert sum(o.compactions.get(SHARED, 0) for o in outcomes) >= MIN_SHARED_COMPACTIONS
    for k, o in enumerate(outcomes):
        assert o.compactions.get(own(k), 0) == sum(_compacts_after(k, i) for i in range(BATCHES))
        assert len(o.acked) == MESSAGES_PER_CLIENT

    # 2. Every acknowledged message is stored exactly once, where it was sent, under its id.
    stored = read_store(tmp_path / "contextfold.db")
    assert stored.integrity == "ok"
    assert set(stored.sessions) == set(sessions)
    found: dict[tuple[int, int], tuple[str, str, int]] = {}
    untagged = []
    for session in sessions:
        for message in stored.session_messages(session):
            if message.is_compaction:
                continue
            match = TAG.match(message.text)
            if match is None:
                untagged.append(message.id)
                continue
            key = (int(match[1]), int(match[2]))
            assert key not in found, f"message {key} is stored twice"
            found[key] = (session, message.id, message.seq)
    assert not untagged, "messages nobody appended are stored"
    acked = {(k, n): where for k, o in enumerate(outcomes) for n, where in o.acked.items()}
    assert len(acked) == CLIENTS * MESSAGES_PER_CLIENT
    assert {key: (s, i) for key, (s, i, _seq) in found.items()} == acked

    # 3. Each client's messages are in the order it sent them, in every session.
    for session in sessions:
        rows = sorted((seq, key) for key, (s, _id, seq) in found.items() if s == session)
        for k in range(CLIENTS):
            numbers = [n for _seq, (kk, n) in rows if kk == k]
            assert numbers == sorted(numbers), f"client {k}'s messages are out of order in {session}"

    # 4. Compactions are consistent, and the view hides exactly what they summarized.
    compactions = arrivals = 0
    for session in sessions:
        check = check_session(stored, session)
        compactions += check.compactions
        arrivals += check.kept_arrivals
        expected = [(int(m[1]), int(m[2])) for m in (TAG.match(x.text) for x in check.in_view) if m]
        assert views[session] == expected, f"{session}: get_context does not show exactly the unsummarized messages"
    assert compactions == sum(sum(o.compactions.values()) for o in outcomes)
    assert arrivals > 0, "no message arrived while a summarizer ran: the race was not exercised"
    print(
        f"{CLIENTS} clients × {MESSAGES_PER_CLIENT} messages; {compactions} compactions "
        f"({sum(o.compactions.get(SHARED, 0) for o in outcomes)} of the shared session), "
        f"{sum(len(o.refusals) for o in outcomes)} refused as racing; "
        f"{arrivals} messages arrived while a summarizer ran and stayed in view"
    )

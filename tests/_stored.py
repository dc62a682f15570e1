"""Read a contextfold database directly (SQLite, read-only) and check what must hold in it.

Shared by the concurrency and crash tests. It reads the tables with plain `sqlite3` and JSON,
not through the product's store, so a bug in the store cannot hide itself from the check.

`check_session` states the compaction invariants (compactor.py, policy/view.py):

* a compaction is a marker (user message with a compaction part) directly followed by a summary
  (assistant, `summary = 1`) and exactly one record naming both — never one without the others;
* walking the session's non-compaction messages in seq order, compaction k (in marker order)
  summarized exactly the next `head_messages` of them: a prefix that starts where the previous
  compaction's head ended, lies before its marker, and ends right before its `tail_start_id`
  (when it kept a tail);
* the session's view anchor is the newest compaction, and the messages it hides — those before
  its boundary (`tail_start_seq`, else the marker) — are exactly the heads summarized so far. So
  no message is hidden without a summary covering it, in particular none appended while a
  summarizer ran; and everything at or after the boundary is in view.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validators import SUMMARY_HEADINGS

DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class StoredMessage:
    id: str
    session_id: str
    seq: int
    role: str
    summary: bool
    hidden: bool
    parts: tuple[dict[str, Any], ...]

    @property
    def text(self) -> str:
        return "\n".join(p["text"] for p in self.parts if p["type"] == "text")

    @property
    def marker(self) -> dict[str, Any] | None:
        return next((p for p in self.parts if p["type"] == "compaction"), None)

    @property
    def is_compaction(self) -> bool:
        return self.summary or self.marker is not None

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [p for p in self.parts if p["type"] == "tool"]


@dataclass
class Stored:
    """Everything in one database, read in one read transaction."""

    integrity: str
    sessions: dict[str, dict[str, Any]]
    messages: dict[str, list[StoredMessage]]
    """Per session, in seq order."""
    compactions: dict[str, list[dict[str, Any]]]
    outputs: dict[str, dict[str, Any]]
    """By output id."""

    def session_messages(self, session_id: str) -> list[StoredMessage]:
        return self.messages.get(session_id, [])


def read_store(database: Path) -> Stored:
    """Open `database` read-only (a live server may hold it) and read all of it."""
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    db.row_factory = sqlite3.Row
    try:
        db.execute("BEGIN")  # one snapshot for every table below
        integrity = "\n".join(str(r[0]) for r in db.execute("PRAGMA integrity_check"))
        sessions = {r["id"]: dict(r) for r in db.execute("SELECT * FROM sessions")}
        for session in sessions.values():
            session["view"] = json.loads(session["view"]) if session["view"] else None
        parts: dict[str, list[dict[str, Any]]] = {}
        for r in db.execute("SELECT message_id, data FROM parts ORDER BY message_id, idx"):
            parts.setdefault(r["message_id"], []).append(json.loads(r["data"]))
        messages: dict[str, list[StoredMessage]] = {}
        for r in db.execute("SELECT id, session_id, seq, role, summary, hidden FROM messages ORDER BY session_id, seq"):
            messages.setdefault(r["session_id"], []).append(
                StoredMessage(
                    r["id"],
                    r["session_id"],
                    r["seq"],
                    r["role"],
                    bool(r["summary"]),
                    bool(r["hidden"]),
                    tuple(parts.get(r["id"], ())),
                )
            )
        compactions: dict[str, list[dict[str, Any]]] = {}
        for r in db.execute("SELECT session_id, data FROM compactions ORDER BY created_at, id"):
            compactions.setdefault(r["session_id"], []).append(json.loads(r["data"]))
        outputs = {r["id"]: dict(r) for r in db.execute("SELECT * FROM outputs")}
        db.execute("COMMIT")
    finally:
        db.close()
    return Stored(integrity, sessions, messages, compactions, outputs)


def read_store_pg(url: str, owner: str) -> Stored:
    """One tenant's rows of a PostgreSQL database, read with plain psycopg in one snapshot
    (REPEATABLE READ), shaped like `read_store`'s. `integrity` is "ok" when every child row has
    its parent and every session's counters agree with its rows' existence (PostgreSQL checks its
    own pages; there is no PRAGMA to run)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row) as db:
        db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        orphans = db.execute(
            "SELECT (SELECT COUNT(*) FROM parts p LEFT JOIN messages m ON m.id = p.message_id WHERE m.id IS NULL) "
            "+ (SELECT COUNT(*) FROM messages m LEFT JOIN sessions s ON s.owner = m.owner AND s.id = m.session_id "
            "WHERE s.id IS NULL) AS n"
        ).fetchone()["n"]
        sessions = {r["id"]: dict(r) for r in db.execute("SELECT * FROM sessions WHERE owner = %s", (owner,))}
        for session in sessions.values():
            session["view"] = json.loads(session["view"]) if session["view"] else None
        parts: dict[str, list[dict[str, Any]]] = {}
        for r in db.execute("SELECT message_id, data FROM parts WHERE owner = %s ORDER BY message_id, idx", (owner,)):
            parts.setdefault(r["message_id"], []).append(json.loads(r["data"]))
        messages: dict[str, list[StoredMessage]] = {}
        for r in db.execute(
            "SELECT id, session_id, seq, role, summary, hidden FROM messages WHERE owner = %s ORDER BY session_id, seq",
            (owner,),
        ):
            messages.setdefault(r["session_id"], []).append(
                StoredMessage(
                    r["id"],
                    r["session_id"],
                    r["seq"],
                    r["role"],
                    r["summary"],
                    r["hidden"],
                    tuple(parts.get(r["id"], ())),
                )
            )
        compactions: dict[str, list[dict[str, Any]]] = {}
        for r in db.execute(
            "SELECT session_id, data FROM compactions WHERE owner = %s ORDER BY created_at, id", (owner,)
        ):
            compactions.setdefault(r["session_id"], []).append(json.loads(r["data"]))
        outputs = {r["id"]: dict(r) for r in db.execute("SELECT * FROM outputs WHERE owner = %s", (owner,))}
    return Stored("ok" if orphans == 0 else f"{orphans} orphan rows", sessions, messages, compactions, outputs)


def spill_files(outputs_dir: Path) -> set[str]:
    """The content files (named by digest) in a spill directory."""
    if not outputs_dir.is_dir():
        return set()
    return {p.name for p in outputs_dir.iterdir() if DIGEST.fullmatch(p.name)}


@dataclass
class SessionCheck:
    """What `check_session` found: the view it expects and the compactions it walked."""

    compactions: int
    summarized: list[StoredMessage]
    """Non-compaction messages hidden behind summaries, in seq order."""
    in_view: list[StoredMessage]
    """Non-compaction messages the view shows after the marker and summary, in order."""
    summary_text: str | None
    kept_arrivals: int = 0
    """Messages a compaction without a kept tail left in view before its marker: they arrived
    while its summarizer ran (the race the write must handle)."""


def check_session(stored: Stored, session_id: str) -> SessionCheck:
    """Assert the session's bookkeeping and compaction invariants (module docstring)."""
    session = stored.sessions[session_id]
    messages = stored.session_messages(session_id)
    seqs = [m.seq for m in messages]
    assert seqs == list(range(1, len(messages) + 1)), f"{session_id}: seqs are not 1..n without gaps"
    assert session["message_count"] == len(messages), f"{session_id}: message_count disagrees with the rows"
    assert session["next_seq"] == len(messages) + 1, f"{session_id}: next_seq disagrees with the rows"
    assert not any(m.hidden for m in messages), f"{session_id}: no removal strategy ran, yet messages are hidden"

    by_id = {m.id: m for m in messages}
    records = stored.compactions.get(session_id, [])
    markers = {m.id for m in messages if m.marker is not None}
    summaries = {m.id for m in messages if m.summary}
    assert markers == {r["marker_id"] for r in records}, f"{session_id}: a marker without its record, or vice versa"
    assert summaries == {r["summary_id"] for r in records}, f"{session_id}: a summary without its record, or vice versa"
    assert len(markers) == len(records), f"{session_id}: two records share a marker"

    regular = [m for m in messages if not m.is_compaction]
    position = 0
    kept_arrivals = 0
    records = sorted(records, key=lambda r: by_id[r["marker_id"]].seq)
    for record in records:
        marker, summary = by_id[record["marker_id"]], by_id[record["summary_id"]]
        assert marker.role == "user" and summary.role == "assistant"
        assert summary.seq == marker.seq + 1, f"{session_id}: summary {summary.seq} does not follow marker {marker.seq}"
        assert marker.marker is not None and marker.marker.get("tail_start_id") == record.get("tail_start_id")
        missing = [h for h in SUMMARY_HEADINGS if h not in summary.text]
        assert not missing, f"{session_id}: summary {summary.id} lacks {missing}"
        head = regular[position : position + record["head_messages"]]
        assert len(head) == record["head_messages"] > 0, (
            f"{session_id}: compaction {record['id']} summarized more than was left, or nothing"
        )
        assert head[-1].seq < marker.seq, f"{session_id}: compaction {record['id']} summarized past its own marker"
        position += len(head)
        if record.get("tail_start_id"):
            tail_start = by_id[record["tail_start_id"]]
            assert position < len(regular) and regular[position].id == tail_start.id, (
                f"{session_id}: compaction {record['id']}: its head does not end right before its tail"
            )
            assert tail_start.seq < marker.seq
        else:
            kept_arrivals += sum(1 for m in regular[position:] if m.seq < marker.seq)

    view = session["view"]
    if not records:
        assert view is None, f"{session_id}: a view anchor but no compaction"
        return SessionCheck(0, [], regular, None)
    last = records[-1]
    marker, summary = by_id[last["marker_id"]], by_id[last["summary_id"]]
    assert view is not None and (view["marker_seq"], view["summary_seq"]) == (marker.seq, summary.seq), (
        f"{session_id}: the view does not point at the newest compaction"
    )
    if last.get("tail_start_id"):
        assert view.get("tail_start_seq") == by_id[last["tail_start_id"]].seq
    # The anchor is stored without its unset fields (an older contextfold reads it as before).
    boundary = view["tail_start_seq"] if view.get("tail_start_seq") is not None else marker.seq
    hidden = [m for m in regular if m.seq < boundary]
    assert hidden == regular[:position], (
        f"{session_id}: {len(hidden)} messages are hidden behind the view but compactions summarized {position}"
    )
    return SessionCheck(len(records), hidden, regular[position:], summary.text, kept_arrivals)

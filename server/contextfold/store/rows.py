"""How domain objects become rows and back, for every SQL backend (SQLite, PostgreSQL).

Both backends store the same columns: JSON text for structured fields, a part as its JSON with
defaults left out, a session's fields one column each. Only the SQL around them differs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import TypeAdapter

from contextfold.domain import Message, Part, Session, ToolPart, Usage, new_id
from contextfold.store.base import OutputRecord

_PART = TypeAdapter(Part)


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_cursor(updated_at: float, session_id: str) -> str:
    return base64.urlsafe_b64encode(json_text([updated_at, session_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return float(updated_at), str(session_id)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"cursor {cursor!r} is not one this server issued; pass next_cursor as returned") from exc


SESSION_FIELDS = tuple(f for f in Session.model_fields if f != "owner")
"""Session fields map one to one onto columns of `sessions`; these are stored as JSON text."""
JSON_FIELDS = frozenset({"settings", "system", "last_usage", "view", "metadata"})
KEPT = ("compaction_count", "compaction_tokens_freed")
"""Kept by the store as compactions are recorded: read with the session, never written from one."""
WRITTEN = tuple(f for f in SESSION_FIELDS if f not in KEPT)
UPDATABLE = tuple(f for f in WRITTEN if f not in ("id", "created_at", "revision", "reset_revision"))
"""Revisions are the store's own: a transaction takes one as it starts."""


def session_columns(session: Session) -> dict[str, Any]:
    data = session.model_dump(mode="json")
    if session.view is not None:  # an older contextfold reads an anchor without pins or an edit as before
        data["view"] = session.view.model_dump(mode="json", exclude_defaults=True)
    return {f: json_text(data[f]) if f in JSON_FIELDS and data[f] is not None else data[f] for f in WRITTEN}


def session_from_row(row: Any) -> Session:
    data = {f: json.loads(row[f]) if f in JSON_FIELDS and row[f] is not None else row[f] for f in SESSION_FIELDS}
    return Session.model_validate({**data, "owner": row["owner"]})


def part_json(part: Part) -> str:
    # Defaults are left out to keep rows small; the discriminator must stay.
    data = part.model_dump(mode="json", exclude={"tokens"}, exclude_defaults=True)
    data["type"] = part.type
    return json_text(data)


def load_part(data: str, tokens: int) -> Part:
    part = _PART.validate_json(data)
    part.tokens = tokens
    return part


def message_from_row(row: Any, session_id: str, parts: list[Part]) -> Message:
    return Message(
        id=row["id"],
        session_id=session_id,
        seq=row["seq"],
        role=row["role"],
        parts=parts,
        name=row["name"],
        parent_id=row["parent_id"],
        summary=bool(row["summary"]),
        finish_reason=row["finish_reason"],
        error=row["error"],
        usage=Usage.model_validate_json(row["usage"]) if row["usage"] else None,
        created_at=row["created_at"],
        metadata=json.loads(row["metadata"]),
        tokens=row["tokens"],
        view_tokens=row["view_tokens"],
    )


def messages_from_joined(rows: Iterable[Any], session_id: str) -> tuple[list[Message], set[str]]:
    """Messages from rows of `messages` joined with their `parts` (a row per part, in seq and part
    order, with `hidden`, `data` and `part_tokens`), and the ids of the hidden ones."""
    hidden: set[str] = set()
    messages: list[Message] = []
    current: Any = None
    parts: list[Part] = []
    for row in rows:
        if row["hidden"]:
            hidden.add(row["id"])
            continue
        if current is None or row["id"] != current["id"]:
            if current is not None:
                messages.append(message_from_row(current, session_id, parts))
            current, parts = row, []
        if row["data"] is not None:
            parts.append(load_part(row["data"], row["part_tokens"]))
    if current is not None:
        messages.append(message_from_row(current, session_id, parts))
    return messages, hidden


MESSAGE_COLUMNS = (
    "id",
    "owner",
    "session_id",
    "seq",
    "role",
    "name",
    "parent_id",
    "summary",
    "finish_reason",
    "error",
    "usage",
    "created_at",
    "metadata",
    "tokens",
    "view_tokens",
    "turn_start",
)
PART_COLUMNS = ("message_id", "idx", "owner", "session_id", "type", "call_id", "state", "data", "tokens")


def new_message_rows(
    messages: Sequence[Message], *, owner: str, session_id: str, first_seq: int, now: float
) -> tuple[list[Message], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Messages about to be inserted, numbered from `first_seq`: (the messages as stored, their
    `MESSAGE_COLUMNS` rows, their parts' `PART_COLUMNS` rows)."""
    stored: list[Message] = []
    message_rows: list[tuple[Any, ...]] = []
    part_rows: list[tuple[Any, ...]] = []
    for seq, message in enumerate(messages, first_seq):
        message = message.model_copy(
            update={
                "id": message.id or new_id("msg"),
                "session_id": session_id,
                "seq": seq,
                "created_at": message.created_at or now,
            }
        )
        message_rows.append(
            (
                message.id,
                owner,
                session_id,
                seq,
                message.role,
                message.name,
                message.parent_id,
                message.summary,
                message.finish_reason,
                message.error,
                message.usage.model_dump_json() if message.usage else None,
                message.created_at,
                json_text(message.metadata),
                message.tokens,
                message.view_tokens,
                message.starts_turn,
            )
        )
        for index, part in enumerate(message.parts):
            tool = part if isinstance(part, ToolPart) else None
            part_rows.append(
                (
                    message.id,
                    index,
                    owner,
                    session_id,
                    part.type,
                    tool.call_id if tool is not None else None,
                    tool.state if tool is not None else None,
                    part_json(part),
                    part.tokens,
                )
            )
        stored.append(message)
    return stored, message_rows, part_rows


OUTPUT_COLUMNS = (
    "id",
    "session_id",
    "owner",
    "digest",
    "bytes",
    "lines",
    "tool",
    "call_id",
    "created_at",
    "last_read_at",
)


def output_from_row(row: Any) -> OutputRecord:
    return OutputRecord(**{key: row[key] for key in OUTPUT_COLUMNS})


def output_values(record: OutputRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, key) for key in OUTPUT_COLUMNS)

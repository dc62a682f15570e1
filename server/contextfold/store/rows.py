"""How domain objects become rows and back, for every SQL backend (SQLite, PostgreSQL).

Both backends store the same columns: JSON text for structured fields, a part as its JSON with
defaults left out, a session's fields one column each. Only the SQL around them differs.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pydantic import TypeAdapter

from ..domain import Message, Part, Session, Usage
from .base import OutputRecord

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


OUTPUT_COLUMNS = ("id", "session_id", "owner", "digest", "bytes", "lines", "tool", "call_id", "created_at", "last_read_at")


def output_from_row(row: Any) -> OutputRecord:
    return OutputRecord(**{key: row[key] for key in OUTPUT_COLUMNS})


def output_values(record: OutputRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, key) for key in OUTPUT_COLUMNS)

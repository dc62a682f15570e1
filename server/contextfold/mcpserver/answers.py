"""The text beside a tool's structured result: one short line, so the payload travels once.

The MCP SDK would put an indented JSON copy of every result in the text content beside the
structured one: 2.2–2.6× the bytes of a `get_context` answer's messages on the wire, and the
CPU to build and parse it. Clients that read structured content (protocol 2025-06-18 and later)
get the result there and a one-line summary as text; older clients get the result as compact
JSON text alone. Where the text *is* what a model reads (`read_output`'s lines, a summary, a
spill's preview), the summary line is followed by it.
"""

from __future__ import annotations

import json
from typing import Any

STRUCTURED_SINCE = "2025-06-18"
"""The first protocol version with `structuredContent`; versions are dates, so they sort."""

READABLE = ("text", "summary", "preview")
"""Fields whose text a model reads: written out in full after the summary line."""

_MAX_SCALAR = 120


def reads_structured(protocol_version: str | None) -> bool:
    """Whether a client that negotiated `protocol_version` reads structured content."""
    return protocol_version is None or protocol_version >= STRUCTURED_SINCE


def compact_json(data: dict[str, Any]) -> str:
    """The whole result as JSON text without indentation, for clients without structured content."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def summary_text(data: dict[str, Any]) -> str:
    """One line naming every top-level field (lists by length, objects by their scalar fields),
    then any readable text in full."""
    line = ", ".join(f"{key}={_short(value)}" for key, value in data.items() if key not in READABLE)
    bodies = [data[key] for key in READABLE if isinstance(data.get(key), str) and data[key]]
    return "\n".join([f"{line} (full result in structuredContent)", *bodies])


def _short(value: Any) -> str:
    if isinstance(value, list):
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        inner = ", ".join(f"{k}={_short(v)}" for k, v in value.items() if not isinstance(v, (list, dict)))
        return "{" + inner + "}"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _MAX_SCALAR else text[: _MAX_SCALAR - 1] + "…"

"""The corpus's normalized JSONL → OpenAI Chat wire messages.

One message a line: `{"role": "user"|"assistant"|"tool", "content": str, "tool_calls"?:
[{"id", "name", "arguments"}], "tool_call_id"?, "name"?}`. System and developer prompts are `user`
lines named `system`/`developer`; leading ones become the session's system prompts (a later one,
which the corpus never has, stays in place as a system/developer message). A `user` line named
`compact_summary` is a Claude Code compaction summary: it keeps its name and its index is listed in
metadata. The `name` on `tool` lines repeats the call's tool name and is not part of the wire format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextfold.errors import RecordError
from contextfold.importers.base import (
    START,
    ImportedCompaction,
    ImportedTranscript,
    JsonlStream,
    Resume,
    check,
    collect,
    derive_title,
    optional,
    require,
)

NORMALIZED_ROLES = frozenset({"user", "assistant", "tool"})
NORMALIZED_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
_INSTRUCTION_NAMES = frozenset({"system", "developer"})
SUMMARY_NAME = "compact_summary"


def load_normalized(path: Path, resume: Resume = START) -> ImportedTranscript:
    return collect(open_normalized(path, resume))


def open_normalized(path: Path, resume: Resume = START) -> JsonlStream:
    return JsonlStream(path, NormalizedReader(), "openai", resume, source_format="normalized")


def fits_normalized(record: dict[str, Any]) -> bool:
    """True when a line has the normalized shape (a plain OpenAI text message fits it too)."""
    role = record.get("role")
    if not isinstance(role, str) or role not in NORMALIZED_ROLES or not isinstance(record.get("content"), str):
        return False
    if not NORMALIZED_KEYS.issuperset(record):
        return False
    calls = record.get("tool_calls", [])
    return isinstance(calls, list) and all(isinstance(c, dict) and "function" not in c for c in calls)


def is_normalized_only(record: dict[str, Any]) -> bool:
    """True for a line only the normalized format writes: flat tool calls or a named instruction line."""
    if not fits_normalized(record):
        return False
    name = record.get("name")
    if record["role"] == "user" and isinstance(name, str) and name in _INSTRUCTION_NAMES | {SUMMARY_NAME}:
        return True
    return any("name" in call for call in record.get("tool_calls", []))


class NormalizedReader:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.taken = 0
        self.usage: dict[int, dict[str, Any]] = {}
        self.compactions: list[ImportedCompaction] = []  # summaries stay messages: the corpus's files replay none
        self.system: list[dict[str, str]] = []
        self._summary_indexes: list[int] = []
        self._first_prompt: str | None = None

    def feed(self, record: dict[str, Any]) -> None:
        role = require(record, "role", str, "line")
        content = require(record, "content", str, "line")
        if role == "user":
            self._user(record, content)
        elif role == "assistant":
            self._assistant(record, content)
        elif role == "tool":
            tool_call_id = require(record, "tool_call_id", str, "line")
            self.messages.append({"role": "tool", "tool_call_id": tool_call_id, "content": content})
        else:
            raise RecordError(f"line.role: expected user, assistant or tool, got {role!r}")

    def settled(self) -> int:
        return len(self.messages)

    def finish(self) -> ImportedTranscript:
        return ImportedTranscript(
            format="openai",
            messages=self.messages,
            system=self.system,
            title=derive_title(self._first_prompt),
            model=None,  # the normalized format does not record it
            source_format="normalized",
            metadata={"compact_summary_indexes": self._summary_indexes},
            usage=self.usage,
            compactions=self.compactions,
        )

    def _user(self, record: dict[str, Any], content: str) -> None:
        name = optional(record, "name", str, "line")
        if name in _INSTRUCTION_NAMES:
            if self.messages or self.taken:
                self.messages.append({"role": name, "content": content})
            else:
                self.system.append({"role": name, "text": content})
            return
        message: dict[str, Any] = {"role": "user", "content": content}
        if name is not None:
            message["name"] = name
        if name == SUMMARY_NAME:
            self._summary_indexes.append(self.taken + len(self.messages))
        elif self._first_prompt is None:
            self._first_prompt = content
        self.messages.append(message)

    def _assistant(self, record: dict[str, Any], content: str) -> None:
        calls = optional(record, "tool_calls", list, "line") or []
        wire_calls = [
            _wire_call(check(call, dict, f"line.tool_calls[{i}]"), f"line.tool_calls[{i}]")
            for i, call in enumerate(calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if wire_calls:
            message["tool_calls"] = wire_calls
            if not content:
                message["content"] = None  # the Chat API's own shape for a reply that only calls tools
        self.messages.append(message)


def _wire_call(call: dict[str, Any], where: str) -> dict[str, Any]:
    return {
        "id": require(call, "id", str, where),
        "type": "function",
        "function": {"name": require(call, "name", str, where), "arguments": require(call, "arguments", str, where)},
    }


__all__ = ["NormalizedReader", "fits_normalized", "is_normalized_only", "load_normalized"]

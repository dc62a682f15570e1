"""Codex rollout JSONL → OpenAI Chat wire messages.

A rollout holds `{timestamp, type, payload}` records. Only `response_item` payloads are the
conversation (the Responses API items Codex sent and received); `session_meta`, `turn_context` and
`event_msg` describe the session and give the metadata. How items map, and why:

- `session_meta.base_instructions` (the `instructions` of every request) is the system prompt;
  developer/system messages before the first user or assistant message are session prompts too.
  Later ones stay in the messages as `developer`/`system` messages.
- `function_call`, `custom_tool_call` and `local_shell_call` become tool calls. Calls that follow an
  assistant message (with only dropped items between) join that message's `tool_calls`, because
  they came from the same model response.
- A custom tool's free-form input is passed as the call's `arguments` string unchanged (it is not
  JSON); their ids are listed in metadata so a renderer can tell them apart.
- Encrypted `reasoning` cannot be replayed through Chat Completions: dropped and counted.
- Hosted-tool items (`web_search_call`, …) have no result message in this format: skipped and counted.
- A `compacted` record is a Codex compaction: its summary is kept as a user message named
  `compact_summary`, listed in `ImportedTranscript.compactions` (the import replays it, the
  summary anchoring the view, as for Claude Code), and the boundary is recorded in metadata.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.errors import RecordError, TranscriptError
from contextfold.importers.base import (
    START,
    ImportedCompaction,
    ImportedTranscript,
    JsonlStream,
    LineReader,
    Resume,
    check,
    collect,
    decode_record,
    derive_title,
    optional,
    require,
)

CODEX_RECORD_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_SESSION_KEYS = {
    "id": "session_id",
    "cwd": "cwd",
    "originator": "originator",
    "cli_version": "cli_version",
    "model_provider": "model_provider",
}

Part = dict[str, Any]


def load_codex(path: Path, resume: Resume = START) -> ImportedTranscript:
    return collect(open_codex(path, resume))


def open_codex(path: Path, resume: Resume = START) -> JsonlStream:
    """The rollout, read chunk by chunk once its model is known: a first pass decodes only the
    `turn_context` lines, which name it."""
    lines = LineReader(path, resume)
    models: Counter[str] = Counter()
    for line_no, raw in lines:
        if b'"turn_context"' not in raw:
            continue
        try:
            record, _ = decode_record(path, line_no, raw)
        except TranscriptError:
            continue  # the stream skips and counts it
        payload = record.get("payload")
        model = payload.get("model") if record.get("type") == "turn_context" and isinstance(payload, dict) else None
        if isinstance(model, str) and model:
            models[model] += 1
    model = models.most_common(1)[0][0] if models else None
    return JsonlStream(path, CodexReader(), "openai", resume, stop=lines.end, model=model, source_format="codex")


def looks_like_codex(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    return isinstance(kind, str) and kind in CODEX_RECORD_TYPES and isinstance(record.get("payload"), dict)


class CodexReader:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.taken = 0
        self.usage: dict[int, dict[str, Any]] = {}  # a rollout records no usage by message
        self.compactions: list[ImportedCompaction] = []
        self.system: list[dict[str, str]] = []
        self._models: Counter[str] = Counter()
        self._session: dict[str, Any] = {}
        self._first_prompt: str | None = None
        self._compactions: list[dict[str, Any]] = []
        self._summary_indexes: list[int] = []
        self._custom_call_ids: list[str] = []
        self._failed_call_ids: list[str] = []
        self._reasoning_dropped = 0
        self._skipped_records: Counter[str] = Counter()
        self._skipped_items: Counter[str] = Counter()
        self._records = 0
        self._meta_seen = False

    def feed(self, record: dict[str, Any]) -> None:
        self._records += 1
        kind = record.get("type")
        if not isinstance(kind, str) or kind not in CODEX_RECORD_TYPES:
            self._skipped_records[_record_label(record)] += 1
            return
        payload: dict[str, Any] = require(record, "payload", dict, "record")
        if kind == "response_item":
            self._item(payload)
        elif kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            self._turn_context(payload)
        elif kind == "compacted":
            self._compacted(payload)
        else:  # event_msg: what the UI showed, duplicating the items; only the typed prompt is of use
            self._skipped_records[_record_label(record)] += 1
            if payload.get("type") == "user_message" and self._first_prompt is None:
                # The text the person typed, without the AGENTS.md and environment preamble.
                self._first_prompt = optional(payload, "message", str, "payload")

    def settled(self) -> int:
        """All messages but the last: calls join the assistant message before them."""
        return max(len(self.messages) - 1, 0)

    def finish(self) -> ImportedTranscript:
        model = self._models.most_common(1)[0][0] if self._models else None
        return ImportedTranscript(
            format="openai",
            messages=self.messages,
            system=self.system,
            title=derive_title(self._first_prompt),
            model=model,
            source_format="codex",
            metadata=self._metadata(),
            compactions=self.compactions,
            usage=self.usage,
        )

    # -- session records -------------------------------------------------------------------

    def _session_meta(self, payload: dict[str, Any]) -> None:
        # A resumed or forked rollout can repeat session_meta; the first one describes this session.
        if self._meta_seen:
            return
        self._meta_seen = True
        for key, name in _SESSION_KEYS.items():
            if isinstance(payload.get(key), str):
                self._session[name] = payload[key]
        if isinstance(payload.get("git"), dict):
            self._session["git"] = payload["git"]
        instructions = _instructions_text(payload)
        if instructions:
            self.system.append({"role": "system", "text": instructions})

    def _turn_context(self, payload: dict[str, Any]) -> None:
        model = optional(payload, "model", str, "payload")
        if model:
            self._models[model] += 1
        if "cwd" not in self._session and isinstance(payload.get("cwd"), str):
            self._session["cwd"] = payload["cwd"]

    def _compacted(self, payload: dict[str, Any]) -> None:
        summary = optional(payload, "message", str, "payload")
        index = self.taken + len(self.messages)
        self._compactions.append({"message_index": index})
        if summary:
            self._summary_indexes.append(index)
            self.compactions.append(ImportedCompaction(summary_index=index))
            self.messages.append({"role": "user", "content": summary, "name": "compact_summary"})

    # -- response items --------------------------------------------------------------------

    def _item(self, item: dict[str, Any]) -> None:
        kind = require(item, "type", str, "payload")
        handler = _ITEM_HANDLERS.get(kind)
        if handler is not None:
            handler(self, item)
        elif kind == "reasoning":
            self._reasoning_dropped += 1
        else:
            self._skipped_items[kind] += 1

    def _message(self, item: dict[str, Any]) -> None:
        role = require(item, "role", str, "payload")
        content = _message_content(require(item, "content", (str, list), "payload"), "payload.content")
        if role in ("developer", "system"):
            self._instruction(role, content)
        elif role in ("user", "assistant"):
            self.messages.append({"role": role, "content": content})
        else:
            raise RecordError(f"payload.role: unknown role {role!r}")

    def _instruction(self, role: str, content: str | list[Part]) -> None:
        text = content if isinstance(content, str) else "\n".join(p["text"] for p in content if p["type"] == "text")
        if self.messages or self.taken:
            self.messages.append({"role": role, "content": content})
        else:
            self.system.append({"role": role, "text": text})

    def _function_call(self, item: dict[str, Any]) -> None:
        arguments = require(item, "arguments", str, "payload")
        self._add_call(require(item, "call_id", str, "payload"), require(item, "name", str, "payload"), arguments)

    def _custom_tool_call(self, item: dict[str, Any]) -> None:
        call_id = require(item, "call_id", str, "payload")
        self._add_call(call_id, require(item, "name", str, "payload"), require(item, "input", str, "payload"))
        self._custom_call_ids.append(call_id)

    def _local_shell_call(self, item: dict[str, Any]) -> None:
        call_id = optional(item, "call_id", str, "payload") or require(item, "id", str, "payload")
        action = require(item, "action", dict, "payload")
        self._add_call(call_id, "local_shell", json.dumps(action, ensure_ascii=False))

    def _add_call(self, call_id: str, name: str, arguments: str) -> None:
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
        else:
            self.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})

    def _call_output(self, item: dict[str, Any]) -> None:
        call_id = require(item, "call_id", str, "payload")
        output = item.get("output")
        failed = False
        if isinstance(output, dict):
            # Older rollouts wrap the output: {"content": ..., "success": bool}.
            failed = output.get("success") is False
            output = output.get("content", output.get("content_items"))
        content = _message_content(check(output, (str, list), "payload.output"), "payload.output")
        if failed:
            self._failed_call_ids.append(call_id)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def _metadata(self) -> dict[str, Any]:
        return {
            **self._session,
            "models": dict(self._models),
            "compactions": self._compactions,
            "compact_summary_indexes": self._summary_indexes,
            "custom_tool_call_ids": self._custom_call_ids,
            "failed_tool_call_ids": self._failed_call_ids,
            "reasoning_dropped": self._reasoning_dropped,
            "skipped_items": dict(self._skipped_items),
            "skipped_records": dict(self._skipped_records),
            "records": self._records,
        }


_ITEM_HANDLERS: dict[str, Callable[[CodexReader, dict[str, Any]], None]] = {
    "message": CodexReader._message,
    "function_call": CodexReader._function_call,
    "custom_tool_call": CodexReader._custom_tool_call,
    "local_shell_call": CodexReader._local_shell_call,
    "function_call_output": CodexReader._call_output,
    "custom_tool_call_output": CodexReader._call_output,
}


def _message_content(content: str | list[Any], where: str) -> str | list[Part]:
    """Responses content parts → Chat content: a plain string when it is one text part."""
    if isinstance(content, str):
        return content
    parts = [_chat_part(check(part, dict, f"{where}[{i}]"), f"{where}[{i}]") for i, part in enumerate(content)]
    if all(part["type"] == "text" for part in parts):
        # Codex splits one message into several text parts (instructions, environment, …); they
        # read as one text, joined by newlines as the corpus's normalized files did.
        texts: list[str] = [part["text"] for part in parts]
        return "\n".join(texts)
    return parts


def _chat_part(part: dict[str, Any], where: str) -> Part:
    kind = require(part, "type", str, where)
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": require(part, "text", str, where)}
    if kind == "input_image":
        return {"type": "image_url", "image_url": {"url": require(part, "image_url", str, where)}}
    if kind == "refusal":
        return {"type": "text", "text": require(part, "refusal", str, where)}
    raise RecordError(f"{where}.type: unsupported content part {kind!r}")


def _instructions_text(payload: dict[str, Any]) -> str | None:
    instructions = payload.get("base_instructions", payload.get("instructions"))
    if isinstance(instructions, dict):
        instructions = instructions.get("text")
    return instructions if isinstance(instructions, str) else None


def _record_label(record: dict[str, Any]) -> str:
    kind = record.get("type")
    if not isinstance(kind, str):
        return "untyped"
    payload = record.get("payload")
    subtype = payload.get("type") if isinstance(payload, dict) else None
    return f"{kind}:{subtype}" if isinstance(subtype, str) else kind


__all__ = ["CODEX_RECORD_TYPES", "CodexReader", "load_codex", "looks_like_codex"]

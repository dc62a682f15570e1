"""Anthropic or OpenAI messages saved as a file, passed through unchanged.

Accepted layouts: a JSON list of messages, a request body `{"model"?, "system"?, "messages": [...]}`
(one line or pretty-printed), or JSONL with one message a line. The wire parsers validate the
messages themselves; here a message only has to be an object with a `role`. An Anthropic body's
top-level `system` becomes the session's system prompts, and so do the OpenAI system/developer
messages that open the conversation (as `append` reads them); a later one stays in the messages,
where the OpenAI parser keeps it in place.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from contextfold.errors import FormatError, TranscriptError
from contextfold.formats import WireFormat, detect_format, parse
from contextfold.importers.base import (
    START,
    UTF8_BOM,
    ImportedTranscript,
    LineReader,
    Resume,
    decode_json_object,
    derive_title,
    iter_lines,
    safe_json,
    type_name,
)

Layout = Literal["document", "jsonl"]


def load_wire(path: Path, format: WireFormat | None = None, resume: Resume = START) -> ImportedTranscript:
    """Read a messages file; `format` None means guess it from the messages' shape.

    `resume` applies to JSONL only: a JSON document is always read whole.
    """
    layout = file_layout(path)
    lines = LineReader(path, resume)
    if layout == "document":
        messages, system, model = split_body(path, read_document(path))
    else:
        messages, system, model = _message_lines(path, lines), None, None
    chosen = format or guess_wire_format(messages, system is not None)
    prompts = _system_prompts(path, system)
    if chosen == "openai" and not resume.offset:
        opening = _opening_prompts(messages)
        prompts, messages = prompts + opening, messages[len(opening) :]
    if not messages and not resume.offset:
        raise TranscriptError(path, None, "no conversation messages found")
    return ImportedTranscript(
        format=chosen,
        messages=messages,
        system=prompts,
        title=derive_title(_first_user_text(messages)),
        model=model,
        source_format=chosen,
        metadata={"layout": layout},
        end_offset=lines.end if layout == "jsonl" else 0,
        end_line=lines.line if layout == "jsonl" else 0,
    )


def file_layout(path: Path) -> Layout:
    """Whether `path` holds one JSON document or JSON lines, judged from its first non-blank line.

    A document starts with `[`, or is an object printed over several lines (first line `{`), or is
    a one-line request body (an object with `messages` and no `role`). Anything else is JSONL.
    """
    first = next(iter_lines(path), None)
    if first is None:
        raise TranscriptError(path, None, "the file is empty")
    line_no, raw = first
    stripped = raw.strip()
    if stripped.startswith(b"[") or stripped == b"{":
        return "document"
    record = decode_json_object(path, line_no, raw)
    # A one-line request body, or a one-line SWE-agent trajectory.
    return "document" if ("messages" in record or "history" in record) and "role" not in record else "jsonl"


def read_document(path: Path) -> Any:
    """The whole file as one JSON value (request bodies are small enough to hold in memory)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TranscriptError(path, line, f"invalid UTF-8 (byte 0x{data[exc.start]:02x})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, exc.lineno, f"malformed JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise TranscriptError(path, None, "malformed JSON: nested too deeply") from None
    return safe_json(path, None, document)


def split_body(path: Path, document: Any) -> tuple[list[dict[str, Any]], Any, str | None]:
    """`(messages, system or None, model or None)` from a list of messages or a request body."""
    if isinstance(document, list):
        messages, system, model, label = document, None, None, "item"
    elif isinstance(document, dict) and isinstance(document.get("messages"), list):
        messages, system, model, label = document["messages"], document.get("system"), document.get("model"), "messages"
    else:
        found = f"an object with keys {sorted(document)[:8]}" if isinstance(document, dict) else type_name(document)
        raise TranscriptError(
            path, None, f"expected a list of messages or an object with a 'messages' list, got {found}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TranscriptError(path, None, f"{label}[{i}]: expected a message object with a 'role'")
    return messages, system, model if isinstance(model, str) else None


def guess_wire_format(messages: Sequence[dict[str, Any]], has_top_level_system: bool) -> WireFormat:
    # Only Anthropic request bodies put the system prompt beside the messages.
    return "anthropic" if has_top_level_system else detect_format(messages)


def _message_lines(path: Path, lines: LineReader) -> list[dict[str, Any]]:
    messages = []
    for line_no, raw in lines:
        record = decode_json_object(path, line_no, raw)
        if not isinstance(record.get("role"), str):
            raise TranscriptError(path, line_no, "expected a message object with a 'role'")
        messages.append(record)
    return messages


def _system_prompts(path: Path, system: Any) -> list[dict[str, str]]:
    """An Anthropic `system` (a string or a list of text blocks) as session prompts."""
    if system is None:
        return []
    if isinstance(system, str):
        return [{"role": "system", "text": system}] if system else []
    if isinstance(system, list) and all(isinstance(b, dict) and isinstance(b.get("text"), str) for b in system):
        return [{"role": "system", "text": block["text"]} for block in system]
    raise TranscriptError(path, None, f"system: expected a string or a list of text blocks, got {type_name(system)}")


def _opening_prompts(messages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The OpenAI system/developer messages that open the conversation, as session prompts: the
    system prompt, not messages of the history (compaction would fold them into its summary), read
    as `append` reads them. When one is malformed they all stay messages, for the import to report."""
    count = next((i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")), len(messages))
    if not count:
        return []
    try:
        batch = parse(messages[:count], "openai")
    except FormatError:
        return []
    return [{"role": prompt.role, "text": prompt.text} for prompt in batch.system or []]


def _first_user_text(messages: Sequence[dict[str, Any]]) -> str | None:
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts: list[str] = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
            if texts:
                return texts[0]
    return None


__all__ = ["file_layout", "guess_wire_format", "load_wire", "read_document", "split_body"]

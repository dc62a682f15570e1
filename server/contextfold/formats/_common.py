"""Helpers shared by the Anthropic and OpenAI formats: field checks, media payloads, call/result pairing.

Private to `formats/`: the two format modules are the public surface. What a part shows in the
view (placeholders, cuts, digests, media notes) is decided in `contextfold.formats.shown`.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from contextfold.domain import Message, SystemPrompt, ToolPart, ToolResult, complete_tool_part
from contextfold.errors import FormatError
from contextfold.formats.base import ParsedBatch

CONTINUATION_TEXT = "(conversation continues)"
"""A user message both formats send where the assistant would otherwise speak twice in a row
after a compaction summary (and Anthropic's first message, when the history starts with the
assistant)."""


def after_summary(previous: Message | None, message: Message) -> bool:
    """`message` is the assistant speaking right after a compaction summary: both formats put a
    `CONTINUATION_TEXT` user message between, so neither merges the two nor sends them in a row."""
    return previous is not None and previous.summary and message.role == "assistant" and not message.summary


# -- field checks ---------------------------------------------------------------------------------


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages ("got a number")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def expect_object(value: Any, path: str, what: str = "an object") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(path, f"expected {what}, got {json_type(value)}")
    return value


def expect_list(value: Any, path: str, what: str = "an array") -> list[Any]:
    if not isinstance(value, list):
        raise FormatError(path, f"expected {what}, got {json_type(value)}")
    return value


def require_str(obj: dict[str, Any], key: str, path: str) -> str:
    """`obj[key]` as a string; `path` is the path of `obj`."""
    if key not in obj:
        raise FormatError(f"{path}.{key}", "missing; expected a string")
    value = obj[key]
    if not isinstance(value, str):
        raise FormatError(f"{path}.{key}", f"expected a string, got {json_type(value)}")
    return value


def optional_str(obj: dict[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{path}.{key}", f"expected a string, got {json_type(value)}")
    return value


def optional_bool(obj: dict[str, Any], key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FormatError(f"{path}.{key}", f"expected true or false, got {json_type(value)}")
    return value


def block_type(block: dict[str, Any], path: str) -> str:
    """The `type` of a content block, which every block must name."""
    return require_str(block, "type", path)


# -- media ----------------------------------------------------------------------------------------


def guess_mime(name: str | None, default: str) -> str:
    """The mime type a URL or file name suggests by its extension, else `default`."""
    if name:
        guessed, _ = mimetypes.guess_type(name.split("?", 1)[0])
        if guessed:
            return guessed
    return default


def parse_data_url(url: str, path: str) -> tuple[str, str]:
    """`data:<mime>[;params][;base64],<payload>` → (mime, base64 payload)."""
    header, sep, payload = url[len("data:") :].partition(",")
    if not sep:
        raise FormatError(path, "malformed data: URL; expected data:<mime>;base64,<data>")
    params = header.split(";")
    mime = params[0] or "text/plain"
    if "base64" in params[1:]:
        return mime, payload
    # A percent-encoded data URL: store it as base64 like every other inline payload.
    return mime, base64.b64encode(unquote_to_bytes(payload)).decode("ascii")


def data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def decode_text(data: str) -> str | None:
    """A base64 payload as UTF-8 text, or None when it is not valid base64 UTF-8."""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except ValueError:  # bad base64 (binascii.Error) or bad UTF-8 (UnicodeDecodeError)
        return None


def encode_text(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


# -- parsing a batch ------------------------------------------------------------------------------


@dataclass
class BatchBuilder:
    """Collects parsed messages and pairs each tool result with its call.

    A result completes the most recent unfinished call with its id in this batch (SWE-agent reuses
    ids, so the latest open call is the one being answered). A result whose id never appeared in
    the batch is left for the caller to resolve against stored history.
    """

    batch: ParsedBatch = field(default_factory=ParsedBatch)
    _calls: dict[str, list[tuple[Message, int]]] = field(default_factory=dict)

    def add_system(self, prompt: SystemPrompt) -> None:
        if self.batch.system is None:
            self.batch.system = []
        self.batch.system.append(prompt)

    def add_message(self, message: Message) -> None:
        self.batch.messages.append(message)
        for index, part in enumerate(message.parts):
            if isinstance(part, ToolPart):
                self._calls.setdefault(part.call_id, []).append((message, index))

    def add_result(self, result: ToolResult) -> None:
        calls = self._calls.get(result.call_id)
        if not calls:
            self.batch.results.append(result)
            return
        open_calls = [(message, index) for message, index in calls if not _is_finished(message, index)]
        if not open_calls:
            raise FormatError(
                result.source,
                f"a second result for tool call {result.call_id!r}, which is already answered earlier in this batch",
            )
        # The most recent message with an open call wins; within that one message (a broken client
        # repeating an id in one turn) results answer its calls in order.
        latest = open_calls[-1][0]
        message, index = next((m, i) for m, i in open_calls if m is latest)
        part = message.parts[index]
        assert isinstance(part, ToolPart)
        message.parts[index] = complete_tool_part(part, result)


def _is_finished(message: Message, index: int) -> bool:
    part = message.parts[index]
    return isinstance(part, ToolPart) and part.is_finished

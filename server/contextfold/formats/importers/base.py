"""What every importer shares: the result type, the error type, and a streaming JSONL reader.

Readers for the line-based formats are small state machines: `feed` one record at a time, then
`finish`. `read_jsonl_with` drives one over a file and turns any problem into a `TranscriptError`
that names the file and the line, so callers never see a raw KeyError or TypeError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ... import safejson
from ...errors import LimitExceeded
from .. import WireFormat

ImportFormat = Literal["claude-code", "codex", "normalized", "anthropic", "openai"]
IMPORT_FORMATS: tuple[ImportFormat, ...] = ("claude-code", "codex", "normalized", "anthropic", "openai")

UTF8_BOM = b"\xef\xbb\xbf"
_TITLE_LIMIT = 80
_LONE_TAG = re.compile(r"</?[\w:-]+( [^<>]*)?/?>")
_KIND_NAMES: dict[type, str] = {
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


@dataclass
class ImportedTranscript:
    format: WireFormat
    """The wire format of `messages`: "anthropic" or "openai"."""
    messages: list[dict[str, Any]]
    """Wire messages, ready for `contextfold.formats.parse(messages, format)`."""
    system: list[dict[str, str]]
    """Session-level prompts, in order: `{"role": "system" | "developer", "text": ...}`."""
    title: str | None
    model: str | None
    """The model the transcript used, when the file records it."""
    source_format: ImportFormat
    metadata: dict[str, Any] = field(default_factory=dict)
    """Source session id, cwd, compaction boundaries, counts of skipped records, …"""


class TranscriptError(ValueError):
    """A transcript file that cannot be read. The message names the file and, when known, the line."""

    def __init__(self, path: Path | str, line: int | None, problem: str) -> None:
        where = f"{path}, line {line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {problem}")
        self.path = Path(path)
        self.line = line
        self.problem = problem


class RecordError(ValueError):
    """A problem inside one record; the driver adds the file and line number."""


class RecordReader(Protocol):
    def feed(self, record: dict[str, Any]) -> None: ...

    def finish(self) -> ImportedTranscript: ...


def iter_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield `(line number, raw bytes)` for each non-blank line, streaming; a leading BOM is dropped."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot open: {exc.strerror or exc}") from None
    with handle:
        for line_no, raw in enumerate(handle, 1):
            if line_no == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM) :]
            if raw.strip():
                yield line_no, raw


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(line number, object)` for each non-blank line.

    Bytes are decoded line by line so an invalid UTF-8 byte is reported on its own line instead of
    failing the whole file at open time.
    """
    for line_no, raw in iter_lines(path):
        yield line_no, decode_json_object(path, line_no, raw)


def decode_json_object(path: Path, line_no: int, raw: bytes) -> dict[str, Any]:
    """One JSONL line as a dict, or a `TranscriptError` saying what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            path, line_no, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, line_no, f"malformed JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise TranscriptError(path, line_no, "malformed JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise TranscriptError(path, line_no, f"expected a JSON object, got {type_name(value)}")
    return safe_json(path, line_no, value)


def safe_json(path: Path, line_no: int | None, value: Any) -> Any:
    """`value` with lone surrogates repaired, or a `TranscriptError` if it nests too deeply to store."""
    try:
        return safejson.clean(value, "")
    except LimitExceeded as exc:
        raise TranscriptError(path, line_no, str(exc)) from None


def read_jsonl_with(path: Path, reader: RecordReader) -> ImportedTranscript:
    """Feed every record of `path` to `reader` and return its result."""
    for line_no, record in iter_jsonl(path):
        try:
            reader.feed(record)
        except RecordError as exc:
            raise TranscriptError(path, line_no, str(exc)) from None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # A safety net: the readers validate what they use, but a record shape nobody foresaw must
            # still come out as a located, readable error rather than a traceback.
            raise TranscriptError(path, line_no, f"unexpected record shape ({type(exc).__name__}: {exc})") from exc
    result = reader.finish()
    if not result.messages:
        raise TranscriptError(path, None, "no conversation messages found")
    return result


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`obj[key]`, checked to be of `kind`; `where` names `obj` in the error (e.g. `message.content[2]`)."""
    if key not in obj:
        raise RecordError(f"{where}.{key}: missing")
    return check(obj[key], kind, f"{where}.{key}")


def optional(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`obj[key]` checked like `require`, or None when absent or null."""
    value = obj.get(key)
    return None if value is None else check(value, kind, f"{where}.{key}")


def check(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python, but a JSON true is never a valid number or text in these formats.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(dict.fromkeys(_KIND_NAMES.get(k, k.__name__) for k in kinds))
        raise RecordError(f"{where}: expected {expected}, got {type_name(value)}")
    return value


def derive_title(text: str | None) -> str | None:
    """A short title from a user's message: its first line of prose, whitespace collapsed, capped."""
    if not text:
        return None
    for line in text.splitlines():
        line = " ".join(line.split())
        # Skip a line that is only a markup tag, e.g. `<pr_description>` opening the real text.
        if line and not _LONE_TAG.fullmatch(line):
            return line if len(line) <= _TITLE_LIMIT else line[: _TITLE_LIMIT - 1].rstrip() + "…"
    return None

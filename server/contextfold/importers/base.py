"""What every importer shares: the result type, the error type, and a streaming JSONL reader.

Readers for the line-based formats are small state machines: `feed` one record at a time, then
`finish`. `read_jsonl_with` drives one over a file and turns any problem into a `TranscriptError`
that names the file and the line, so callers never see a raw KeyError or TypeError.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from contextfold import safejson
from contextfold.errors import LimitExceeded, RecordError, TranscriptError
from contextfold.formats import WireFormat
from contextfold.names import ImportFormat

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


@dataclass(frozen=True)
class Resume:
    """Where an earlier import of the same file stopped: reading continues after it."""

    offset: int = 0
    """Bytes already imported (always the end of a line)."""
    line: int = 0
    """Lines already imported, so errors still name the file's real line numbers."""
    pending_calls: frozenset[str] = frozenset()
    """Tool calls imported without a result yet: their results may arrive now."""
    tail_uuids: tuple[str, ...] = ()
    """Claude Code: the last records imported, to tell a continuation from a rewind."""


START = Resume()


@dataclass(frozen=True)
class ImportedCompaction:
    """A compaction the agent itself made: history before `summary_index` was replaced by that summary."""

    summary_index: int
    """Index in `messages` of the agent's summary message."""
    trigger: str | None = None
    """"auto" or "manual", when the file says."""
    pre_tokens: int | None = None
    """The agent's own count of the context it compacted."""


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
    compactions: list[ImportedCompaction] = field(default_factory=list)
    """Compactions the agent made, in order; importing replays each as a compaction in the store."""
    usage: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Token usage the provider reported, by index of the assistant message in `messages` (its own shape)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Conversation records left out, by reason (a subagent's sidechain, an abandoned branch, …)."""
    warnings: list[str] = field(default_factory=list)
    """What was kept in a changed form, in words a person can act on."""
    end_offset: int = 0
    """Bytes of the file read (for line-based files: a later import continues here)."""
    end_line: int = 0
    tail_uuids: tuple[str, ...] = ()
    """Claude Code: the last records read (see `Resume.tail_uuids`)."""


class RecordReader(Protocol):
    def feed(self, record: dict[str, Any]) -> None: ...

    def finish(self) -> ImportedTranscript: ...


class LineReader:
    """The non-blank lines of a file from a byte offset, streaming; a leading BOM is dropped.

    `end` and `line` follow the reading: after a full pass they are the file's size in bytes and
    lines as read, which is where a later import of the same (grown) file continues.
    """

    def __init__(self, path: Path, resume: Resume = START, stop: int | None = None) -> None:
        self.path = path
        self.end = resume.offset
        self.line = resume.line
        self.line_start = resume.offset
        """Where the line last yielded starts."""
        self._stop = stop

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise TranscriptError(self.path, None, f"cannot open: {exc.strerror or exc}") from None
        with handle:
            handle.seek(self.end)
            for raw in handle:
                if self._stop is not None and self.end >= self._stop:
                    break
                self.line_start = self.end
                self.line += 1
                self.end += len(raw)
                if self.line == 1 and raw.startswith(UTF8_BOM):
                    raw = raw[len(UTF8_BOM) :]
                if raw.strip():
                    yield self.line, raw


def iter_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield `(line number, raw bytes)` for each non-blank line, streaming; a leading BOM is dropped."""
    return iter(LineReader(path))


def iter_jsonl(path: Path, resume: Resume = START) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(line number, object)` for each non-blank line (from `resume.offset`).

    Bytes are decoded line by line so an invalid UTF-8 byte is reported on its own line instead of
    failing the whole file at open time.
    """
    for line_no, raw in LineReader(path, resume):
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
    record: dict[str, Any] = safe_json(path, line_no, value)
    return record


def decode_line(lines: LineReader, line_no: int, raw: bytes) -> dict[str, Any] | None:
    """A line of `lines` as a dict; None for a last line cut short (no newline and not JSON yet, as
    in a file still being written), after which `lines` ends before that line."""
    try:
        return decode_json_object(lines.path, line_no, raw)
    except TranscriptError:
        if raw.endswith(b"\n"):
            raise
        lines.end, lines.line = lines.line_start, line_no - 1
        return None


def incomplete_line(line_no: int) -> str:
    return f"line {line_no} is incomplete (no newline, not JSON yet): left for the next import to read"


def safe_json(path: Path, line_no: int | None, value: Any) -> Any:
    """`value` with lone surrogates repaired, or a `TranscriptError` if it nests too deeply to store."""
    try:
        return safejson.clean(value, "")
    except LimitExceeded as exc:
        raise TranscriptError(path, line_no, str(exc)) from None


def read_jsonl_with(
    path: Path,
    reader: RecordReader,
    resume: Resume = START,
    skip: Mapping[int, str] | None = None,
    stop: int | None = None,
) -> ImportedTranscript:
    """Feed every record of `path` (after `resume`, before `stop`) to `reader` and return its result.

    Lines in `skip` (line number → reason) are left out unread and counted under their reason.
    """
    lines = LineReader(path, resume, stop)
    left_out: Counter[str] = Counter()
    cut_short: int | None = None
    for line_no, raw in lines:
        if skip and line_no in skip:
            left_out[skip[line_no]] += 1
            continue
        record = decode_line(lines, line_no, raw)
        if record is None:
            cut_short = line_no
            break
        try:
            reader.feed(record)
        except RecordError as exc:
            raise TranscriptError(path, line_no, str(exc)) from None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # A safety net: the readers validate what they use, but a record shape nobody foresaw must
            # still come out as a located, readable error rather than a traceback.
            raise TranscriptError(path, line_no, f"unexpected record shape ({type(exc).__name__}: {exc})") from exc
    result = reader.finish()
    if not result.messages and not resume.offset:
        raise TranscriptError(path, None, "no conversation messages found")
    for reason, count in left_out.items():
        result.skipped[reason] = result.skipped.get(reason, 0) + count
        skipped_records = result.metadata.setdefault("skipped_records", {})
        skipped_records[reason] = skipped_records.get(reason, 0) + count
    result.end_offset, result.end_line = lines.end, lines.line
    if cut_short is not None:
        result.warnings.append(incomplete_line(cut_short))
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

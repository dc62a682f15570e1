"""What every importer shares: the result type, the error type, and a streaming JSONL reader.

Readers for the line-based formats are small state machines: `feed` one record at a time, then
`finish`. `JsonlStream` drives one over a file and hands its messages on in chunks as they are
settled, so importing a file holds a chunk of it in memory, not the whole (`read_jsonl_with`
collects the chunks into one `ImportedTranscript`).

A line that cannot be read (cut in half by a crash mid-write, invalid UTF-8, not a JSON object) or
whose record the reader cannot use is skipped and counted (`ImportedTranscript.unreadable`), with
its line number and why among the warnings: one bad line must not stop a session's imports for
good. A last line with no newline that is not JSON yet is being written: it is left for the next
import. A value nested deeper than `safejson.MAX_DEPTH` keeps its outer levels and is kept below
them as its JSON text (`DEEP_TEXT_CHARS` at most), and counted (`ImportedTranscript.deep_values`).
A file with no readable conversation at all is still a `TranscriptError` naming the file.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from contextfold import safejson
from contextfold.errors import LimitExceeded, RecordError, TranscriptError, brief
from contextfold.formats import WireFormat
from contextfold.names import ImportFormat

UTF8_BOM = b"\xef\xbb\xbf"
DEEP_TEXT_CHARS = 10_000
"""A value nested too deeply is kept as its JSON text, cut to this many characters."""
CHUNK_MESSAGES = 512
CHUNK_BYTES = 8 * 1024**2
"""An import hands messages on (to be parsed, counted and stored) once this many are settled, or
once the lines read since the last chunk reach this many bytes: what bounds its memory."""
SHOWN_PROBLEMS = 3
"""Unreadable lines named one by one in an import's warnings; the rest are counted."""
PROBLEM_CHARS = 300
"""What is said of each, at most."""
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
    queued: tuple[str, ...] = ()
    """Claude Code: messages queued while the agent worked and not yet taken (see `ClaudeCodeReader`)."""


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
    queued: tuple[str, ...] = ()
    """Claude Code: messages still queued once the file is read (see `Resume.queued`)."""
    unreadable: int = 0
    """Lines skipped because they could not be read, or their record not used (the warnings say which)."""
    deep_values: int = 0
    """Values nested too deeply, kept as their JSON text."""
    pending_calls: frozenset[str] = frozenset()
    """Calls (of this file or `Resume.pending_calls`) with no result once the file is read."""


class RecordReader(Protocol):
    def feed(self, record: dict[str, Any]) -> None: ...

    def finish(self) -> ImportedTranscript: ...


class StreamReader(RecordReader, Protocol):
    """A reader whose messages can be handed on before the file ends.

    `messages` holds the messages not handed on yet; `taken` counts those handed on before them, so
    `taken + i` is the index of `messages[i]` in the whole transcript, which `usage` and
    `compactions` use. `settled()` says how many of the first `messages` no later record can
    change any more (a later line of the same API response, a result joining its message).
    """

    messages: list[dict[str, Any]]
    taken: int
    usage: dict[int, dict[str, Any]]
    compactions: list[ImportedCompaction]
    system: list[dict[str, str]]

    def settled(self) -> int: ...


@dataclass
class Chunk:
    """Messages of a transcript handed on together, with what refers to them."""

    start: int
    """Index of `messages[0]` in the whole transcript."""
    messages: list[dict[str, Any]]
    usage: dict[int, dict[str, Any]]
    """Reported usage, by index in the whole transcript."""
    compactions: list[ImportedCompaction]
    """Compactions whose summary is in `messages`; the message after a summary is always in the
    same chunk (when the file has one), since replaying needs to know whether the model answered it."""


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
    return decode_record(path, line_no, raw)[0]


def decode_record(path: Path, line_no: int, raw: bytes) -> tuple[dict[str, Any], int]:
    """One JSONL line as a dict, and how many values in it nested too deeply to store were kept as
    their JSON text; a `TranscriptError` saying what is wrong with a line that cannot be read."""
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
    try:
        return safejson.clean(value, ""), 0
    except LimitExceeded:
        kept, deep = deep_as_text(value, 0)
        record: dict[str, Any] = safejson.clean(kept, "")
        return record, deep


def deep_as_text(value: Any, depth: int) -> tuple[Any, int]:
    """`value` with each array or object at `safejson.MAX_DEPTH` levels replaced by its JSON text
    (at most `DEEP_TEXT_CHARS`), and how many were. Recursion is bounded by MAX_DEPTH."""
    if not isinstance(value, (dict, list)):
        return value, 0
    if depth >= safejson.MAX_DEPTH:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (RecursionError, ValueError):
            text = "[a value nested too deeply to show]"
        if len(text) > DEEP_TEXT_CHARS:
            text = text[: DEEP_TEXT_CHARS - 1] + "…"
        return text, 1
    found = 0
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[key], deep = deep_as_text(item, depth + 1)
            found += deep
        return out, found
    items = []
    for item in value:
        kept, deep = deep_as_text(item, depth + 1)
        items.append(kept)
        found += deep
    return items, found


def incomplete_line(line_no: int) -> str:
    return f"line {line_no} is incomplete (no newline, not JSON yet): left for the next import to read"


def safe_json(path: Path, line_no: int | None, value: Any) -> Any:
    """`value` with lone surrogates repaired, or a `TranscriptError` if it nests too deeply to store."""
    try:
        return safejson.clean(value, "")
    except LimitExceeded as exc:
        raise TranscriptError(path, line_no, str(exc)) from None


class Problems:
    """The lines an import skipped, and the values it kept as text."""

    def __init__(self) -> None:
        self.lines = 0
        self.shown: list[str] = []
        self.deep = 0
        self.cut_short: int | None = None
        """A last line still being written, left for the next import."""

    def skip(self, line_no: int, problem: str) -> None:
        self.lines += 1
        if len(self.shown) < SHOWN_PROBLEMS:
            self.shown.append(f"line {line_no}: {brief(problem, PROBLEM_CHARS)}")  # not a 1 MB value echoed

    def warnings(self) -> list[str]:
        said: list[str] = []
        if self.lines:
            more = f"; and {self.lines - len(self.shown):,} more" if self.lines > len(self.shown) else ""
            said.append(f"{unreadable_words(self.lines)} ({'; '.join(self.shown)}{more})")
        if self.deep:
            said.append(f"{deep_words(self.deep)} (nested over {safejson.MAX_DEPTH} levels)")
        if self.cut_short is not None:
            said.append(incomplete_line(self.cut_short))
        return said


def unreadable_words(lines: int) -> str:
    """How an import says it skipped lines (`import`, `stats` and the hooks' handover alike)."""
    return (
        f"{lines:,} transcript line{'s' if lines != 1 else ''} could not be read and "
        f"{'were' if lines != 1 else 'was'} skipped"
    )


def deep_words(values: int) -> str:
    return f"{values:,} value{'s' if values != 1 else ''} nested too deeply {'were' if values != 1 else 'was'} kept as text"


def read_records(
    lines: LineReader, problems: Problems, skip: Mapping[int, str] | None = None, left_out: Counter[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of `lines`, each decoded; a line that cannot be read is skipped and counted in
    `problems`. A last line with no newline that is not JSON yet ends the reading before it (it is
    being written; `lines` then ends where it starts). Lines in `skip` (line → reason) are not
    decoded, only counted in `left_out` under their reason."""
    for line_no, raw in lines:
        if skip and line_no in skip:
            if left_out is not None:
                left_out[skip[line_no]] += 1
            continue
        try:
            record, deep = decode_record(lines.path, line_no, raw)
        except TranscriptError as exc:
            if raw.endswith(b"\n"):
                problems.skip(line_no, exc.problem)
                continue
            lines.end, lines.line = lines.line_start, line_no - 1
            problems.cut_short = line_no
            return
        problems.deep += deep
        yield line_no, record


def record_time(record: dict[str, Any]) -> float | None:
    """A record's `timestamp` (ISO 8601) in seconds since the epoch, or None."""
    value = record.get("timestamp")
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


class JsonlStream:
    """A line-based transcript read in chunks: `chunks()` feeds each record to `reader` and hands
    its settled messages on; `result()` then says the rest (title, counts, warnings, where the
    reading ended). A record the reader refuses is skipped and counted like a line that cannot be
    read. `stop`: read no further than this byte offset (where an earlier pass ended)."""

    def __init__(
        self,
        path: Path,
        reader: StreamReader,
        format: WireFormat,
        resume: Resume = START,
        *,
        skip: Mapping[int, str] | None = None,
        stop: int | None = None,
        model: str | None = None,
        source_format: ImportFormat,
    ) -> None:
        self.path, self.reader, self.format, self.resume, self.skip = path, reader, format, resume, skip
        self.model = model
        """The model, when known before reading (a new session is created with it)."""
        self.source_format: ImportFormat = source_format
        self.lines = LineReader(path, resume, stop)
        self.problems = Problems()
        self.warnings: list[str] = []
        """Said after the reading's own warnings (e.g. by an earlier pass)."""
        self.tail_uuids: tuple[str, ...] = ()
        self._result: ImportedTranscript | None = None
        self.times: dict[int, float] = {}
        """When each message was written, by index in the whole transcript: the `timestamp` of
        the record that started it (both agents write one on every record), if it had one."""

    @property
    def system(self) -> list[dict[str, str]]:
        """The session prompts; final once a first chunk is handed on."""
        return self.reader.system

    def chunks(self) -> Iterator[Chunk]:
        reader, left_out = self.reader, Counter[str]()
        since = self.lines.end
        for line_no, record in read_records(self.lines, self.problems, self.skip, left_out):
            before = reader.taken + len(reader.messages)
            try:
                reader.feed(record)
            except RecordError as exc:
                self.problems.skip(line_no, str(exc))
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                # A safety net: the readers validate what they use, but a record shape nobody foresaw must
                # still be skipped and named rather than stop the import.
                self.problems.skip(line_no, f"unexpected record shape ({type(exc).__name__}: {exc})")
            if reader.taken + len(reader.messages) > before:
                at = record_time(record)
                if at is not None:
                    for index in range(before, reader.taken + len(reader.messages)):
                        self.times[index] = at
            if len(reader.messages) >= CHUNK_MESSAGES or self.lines.end - since >= CHUNK_BYTES:
                chunk = self._take()
                if chunk is not None:
                    since = self.lines.end
                    yield chunk
        result = reader.finish()
        if not reader.taken and not result.messages and not self.resume.offset:
            problems = f"; {'; '.join(self.problems.warnings())}" if self.problems.lines else ""
            raise TranscriptError(self.path, None, f"no conversation messages found{problems}")
        for reason, count in left_out.items():
            result.skipped[reason] = result.skipped.get(reason, 0) + count
            skipped_records = result.metadata.setdefault("skipped_records", {})
            skipped_records[reason] = skipped_records.get(reason, 0) + count
        result.end_offset, result.end_line = self.lines.end, self.lines.line
        result.warnings.extend(self.problems.warnings())
        result.warnings.extend(self.warnings)
        result.unreadable, result.deep_values = self.problems.lines, self.problems.deep
        result.tail_uuids = self.tail_uuids
        last = Chunk(reader.taken, result.messages, result.usage, result.compactions)
        result.messages, result.usage, result.compactions = [], {}, []
        self._result = result
        if last.messages:
            yield last

    def _take(self) -> Chunk | None:
        """The settled messages, unless they end with a compaction's summary (its answer decides
        how it is replayed)."""
        reader = self.reader
        cut = reader.settled()
        summaries = {c.summary_index for c in reader.compactions}
        while cut > 0 and reader.taken + cut - 1 in summaries:
            cut -= 1
        if cut <= 0:
            return None
        start, end = reader.taken, reader.taken + cut
        messages = reader.messages[:cut]
        del reader.messages[:cut]
        reader.taken = end
        usage = {i: u for i, u in reader.usage.items() if i < end}
        for i in usage:
            del reader.usage[i]
        compactions = [c for c in reader.compactions if c.summary_index < end]
        reader.compactions[:] = [c for c in reader.compactions if c.summary_index >= end]
        return Chunk(start, messages, usage, compactions)

    def result(self) -> ImportedTranscript:
        """What the reading found besides the messages (`messages`, `usage` and `compactions` are
        handed on in chunks); only once `chunks()` is exhausted."""
        if self._result is None:
            raise RuntimeError("read the chunks first")
        return self._result


class Chunked(Protocol):
    def chunks(self) -> Iterator[Chunk]: ...

    def result(self) -> ImportedTranscript: ...


def collect(stream: Chunked) -> ImportedTranscript:
    """The whole transcript of `stream`, its chunks put back together (for small files and tests)."""
    messages: list[dict[str, Any]] = []
    usage: dict[int, dict[str, Any]] = {}
    compactions: list[ImportedCompaction] = []
    for chunk in stream.chunks():
        messages += chunk.messages
        usage.update(chunk.usage)
        compactions += chunk.compactions
    result = stream.result()
    result.messages, result.usage, result.compactions = messages, usage, compactions
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

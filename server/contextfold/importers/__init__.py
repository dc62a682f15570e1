"""Transcript importers: whole conversation files → wire messages for `contextfold.formats.parse`.

Reads Claude Code session JSONL (→ Anthropic messages), Codex rollout JSONL, the corpus's
normalized JSONL, mini-swe-agent and SWE-agent trajectories and OpenHands event lists (→ OpenAI
Chat messages, with their tool calls), and Anthropic/OpenAI messages saved as JSON or JSONL
(passed through). Line-based files are streamed, and can be read from where an earlier import
stopped (`Resume`). Every problem with a file is a `TranscriptError` naming the file and, when it
applies, the line.

    transcript = load_transcript(Path("session.jsonl"))
    batch = parse(transcript.messages, transcript.format)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from contextfold.errors import TranscriptError
from contextfold.formats import WireFormat
from contextfold.importers.base import (
    START,
    Chunk,
    ImportedCompaction,
    ImportedTranscript,
    JsonlStream,
    Resume,
    collect,
    deep_words,
    unreadable_words,
)
from contextfold.importers.calls import Calls, open_calls
from contextfold.importers.claude_code import open_claude_code
from contextfold.importers.codex import open_codex
from contextfold.importers.detect import detect_import_format
from contextfold.importers.mini_swe_agent import load_mini_swe_agent
from contextfold.importers.normalized import open_normalized
from contextfold.importers.openhands import load_openhands
from contextfold.importers.swe_agent import load_swe_agent
from contextfold.importers.wire import file_layout, load_wire
from contextfold.names import IMPORT_FORMATS, ImportFormat

_STREAMS: dict[ImportFormat, Callable[[Path, Resume], JsonlStream]] = {
    "claude-code": open_claude_code,
    "codex": open_codex,
    "normalized": open_normalized,
}
_LOADERS: dict[ImportFormat, Callable[[Path, Resume], ImportedTranscript]] = {
    "anthropic": lambda path, resume: load_wire(path, "anthropic", resume),
    "openai": lambda path, resume: load_wire(path, "openai", resume),
    "mini-swe-agent": lambda path, _: load_mini_swe_agent(path),
    "swe-agent": lambda path, _: load_swe_agent(path),
    "openhands": lambda path, _: load_openhands(path),
}
_DOCUMENT_FORMATS = frozenset({"mini-swe-agent", "swe-agent", "openhands"})


class TranscriptStream:
    """A transcript file read chunk by chunk (`chunks()`), then what else it said (`result()`).

    The agents' own files (Claude Code, Codex) and normalized JSONL are streamed, so importing one
    holds a chunk of it in memory, not the whole; the other formats are read whole and handed on
    as one chunk. Results whose call is not in the file become plain text, with a warning.
    """

    def __init__(self, path: Path, format: ImportFormat, resume: Resume = START) -> None:
        opener = _STREAMS.get(format)
        self._stream: JsonlStream | None = None
        self._whole: ImportedTranscript | None = None
        if opener is not None:
            self._stream = opener(path, resume)
            self.format: WireFormat = self._stream.format
            self.model = self._stream.model
        else:
            loader = _LOADERS.get(format)
            if loader is None:
                raise TranscriptError(
                    path, None, f"unknown import format {format!r}; use one of {', '.join(IMPORT_FORMATS)}"
                )
            self._whole = loader(path, resume)
            self.format, self.model = self._whole.format, self._whole.model
        self.source_format: ImportFormat = format
        self._calls = Calls(self.format, resume.pending_calls)
        self._result: ImportedTranscript | None = None

    @property
    def system(self) -> list[dict[str, str]]:
        """The session prompts; final once a first chunk is handed on."""
        return self._stream.system if self._stream is not None else self._whole.system if self._whole else []

    @property
    def times(self) -> dict[int, float]:
        """When each message was written, by index in the transcript, where the file says (`JsonlStream.times`)."""
        return self._stream.times if self._stream is not None else {}

    def chunks(self) -> Iterator[Chunk]:
        if self._stream is not None:
            for chunk in self._stream.chunks():
                self._calls.note(chunk.messages, chunk.start)
                yield chunk
            result = self._stream.result()
        else:
            assert self._whole is not None
            result = self._whole
            chunk = Chunk(0, result.messages, result.usage, result.compactions)
            result.messages, result.usage, result.compactions = [], {}, []
            self._calls.note(chunk.messages)
            if chunk.messages:
                yield chunk
        result.warnings[:0] = self._calls.warnings()
        result.pending_calls = frozenset(self._calls.waiting)
        self._result = result

    def result(self) -> ImportedTranscript:
        """Title, counts, warnings and where the reading ended; only once `chunks()` is exhausted."""
        if self._result is None:
            raise RuntimeError("read the chunks first")
        return self._result

    def collect(self) -> ImportedTranscript:
        """The whole transcript in memory (for small files and tests; an import streams)."""
        return collect(self)


def open_transcript(path: Path | str, format: ImportFormat | None = None, resume: Resume = START) -> TranscriptStream:
    """A transcript file to read chunk by chunk; `format` None means detect it from its first records.

    With `resume`, only what the file holds after `resume.offset` is read (line-based files only).
    """
    path = Path(path)
    return TranscriptStream(path, format or detect_import_format(path), resume)


def load_transcript(path: Path | str, format: ImportFormat | None = None, resume: Resume = START) -> ImportedTranscript:
    """Import a transcript file whole; `format` None means detect it from the file's first records.

    With `resume`, only what the file holds after `resume.offset` is read (line-based files only).
    A result whose call is not in the file is kept as plain text, with a warning.
    """
    return open_transcript(path, format, resume).collect()


def resumable(path: Path, format: ImportFormat) -> bool:
    """Whether a grown copy of `path` can be imported from where an earlier import stopped."""
    return format not in _DOCUMENT_FORMATS and file_layout(path) == "jsonl"


__all__ = [
    "IMPORT_FORMATS",
    "START",
    "Chunk",
    "ImportFormat",
    "ImportedCompaction",
    "ImportedTranscript",
    "Resume",
    "TranscriptError",
    "TranscriptStream",
    "deep_words",
    "detect_import_format",
    "load_transcript",
    "open_calls",
    "open_transcript",
    "resumable",
    "unreadable_words",
]

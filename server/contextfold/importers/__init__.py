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

from collections.abc import Callable
from pathlib import Path

from contextfold.errors import TranscriptError
from contextfold.importers.base import START, ImportedCompaction, ImportedTranscript, Resume
from contextfold.importers.calls import keep_orphan_results, open_calls
from contextfold.importers.claude_code import load_claude_code
from contextfold.importers.codex import load_codex
from contextfold.importers.detect import detect_import_format
from contextfold.importers.mini_swe_agent import load_mini_swe_agent
from contextfold.importers.normalized import load_normalized
from contextfold.importers.openhands import load_openhands
from contextfold.importers.swe_agent import load_swe_agent
from contextfold.importers.wire import file_layout, load_wire
from contextfold.names import IMPORT_FORMATS, ImportFormat

_LOADERS: dict[ImportFormat, Callable[[Path, Resume], ImportedTranscript]] = {
    "claude-code": load_claude_code,
    "codex": load_codex,
    "normalized": load_normalized,
    "anthropic": lambda path, resume: load_wire(path, "anthropic", resume),
    "openai": lambda path, resume: load_wire(path, "openai", resume),
    "mini-swe-agent": lambda path, _: load_mini_swe_agent(path),
    "swe-agent": lambda path, _: load_swe_agent(path),
    "openhands": lambda path, _: load_openhands(path),
}
_DOCUMENT_FORMATS = frozenset({"mini-swe-agent", "swe-agent", "openhands"})


def load_transcript(path: Path | str, format: ImportFormat | None = None, resume: Resume = START) -> ImportedTranscript:
    """Import a transcript file; `format` None means detect it from the file's first records.

    With `resume`, only what the file holds after `resume.offset` is read (line-based files only).
    A result whose call is not in the file is kept as plain text, with a warning.
    """
    path = Path(path)
    if format is None:
        format = detect_import_format(path)
    loader = _LOADERS.get(format)
    if loader is None:
        raise TranscriptError(path, None, f"unknown import format {format!r}; use one of {', '.join(IMPORT_FORMATS)}")
    transcript = loader(path, resume)
    transcript.warnings[:0] = keep_orphan_results(transcript.messages, transcript.format, resume.pending_calls)
    return transcript


def resumable(path: Path, format: ImportFormat) -> bool:
    """Whether a grown copy of `path` can be imported from where an earlier import stopped."""
    return format not in _DOCUMENT_FORMATS and file_layout(path) == "jsonl"


__all__ = [
    "IMPORT_FORMATS",
    "START",
    "ImportFormat",
    "ImportedCompaction",
    "ImportedTranscript",
    "Resume",
    "TranscriptError",
    "detect_import_format",
    "load_transcript",
    "open_calls",
    "resumable",
]

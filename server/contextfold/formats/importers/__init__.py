"""Transcript importers: whole conversation files → wire messages for `contextfold.formats.parse`.

Reads Claude Code session JSONL (→ Anthropic messages), Codex rollout JSONL and the corpus's
normalized JSONL (→ OpenAI Chat messages), and Anthropic/OpenAI messages saved as JSON or JSONL
(passed through). Line-based files are streamed. Every problem with a file is a `TranscriptError`
naming the file and, when it applies, the line.

    transcript = load_transcript(Path("session.jsonl"))
    batch = parse(transcript.messages, transcript.format)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .base import IMPORT_FORMATS, ImportedTranscript, ImportFormat, TranscriptError
from .claude_code import load_claude_code
from .codex import load_codex
from .detect import detect_import_format
from .normalized import load_normalized
from .wire import load_wire

_LOADERS: dict[ImportFormat, Callable[[Path], ImportedTranscript]] = {
    "claude-code": load_claude_code,
    "codex": load_codex,
    "normalized": load_normalized,
    "anthropic": lambda path: load_wire(path, "anthropic"),
    "openai": lambda path: load_wire(path, "openai"),
}


def load_transcript(path: Path | str, format: ImportFormat | None = None) -> ImportedTranscript:
    """Import a transcript file; `format` None means detect it from the file's first records."""
    path = Path(path)
    if format is None:
        format = detect_import_format(path)
    loader = _LOADERS.get(format)
    if loader is None:
        raise TranscriptError(path, None, f"unknown import format {format!r}; use one of {', '.join(IMPORT_FORMATS)}")
    return loader(path)


__all__ = [
    "IMPORT_FORMATS",
    "ImportFormat",
    "ImportedTranscript",
    "TranscriptError",
    "detect_import_format",
    "load_transcript",
]

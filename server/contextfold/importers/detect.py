"""Which importer a file needs, judged from its first records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextfold.errors import TranscriptError
from contextfold.formats import detect_format
from contextfold.importers.base import iter_jsonl
from contextfold.importers.claude_code import looks_like_claude_code
from contextfold.importers.codex import looks_like_codex
from contextfold.importers.mini_swe_agent import looks_like_mini_swe_agent
from contextfold.importers.normalized import fits_normalized, is_normalized_only
from contextfold.importers.openhands import looks_like_openhands
from contextfold.importers.swe_agent import looks_like_swe_agent
from contextfold.importers.wire import file_layout, guess_wire_format, read_document, split_body
from contextfold.names import ImportFormat

# Enough to get past the bookkeeping records that open a session file, few enough to stay instant.
_SNIFF_RECORDS = 50
_DOCUMENTS = (
    "a list of Anthropic/OpenAI messages, a request body with 'messages', a mini-swe-agent .traj.json "
    "(with 'trajectory_format'), a SWE-agent .traj (with 'history') or an OpenHands event list"
)
_KNOWN = (
    f"Claude Code session JSONL, Codex rollout JSONL, normalized JSONL, Anthropic/OpenAI message lines, or {_DOCUMENTS}"
)


def detect_import_format(path: Path) -> ImportFormat:
    """The format of a transcript file; `TranscriptError` when it is none of the known ones."""
    path = Path(path)
    if file_layout(path) == "document":
        return _document_format(path, read_document(path))
    return _jsonl_format(path)


def _document_format(path: Path, document: Any) -> ImportFormat:
    if looks_like_mini_swe_agent(document):
        return "mini-swe-agent"
    if looks_like_swe_agent(document):
        return "swe-agent"
    if looks_like_openhands(document):
        return "openhands"
    try:
        messages, system, _ = split_body(path, document)
    except TranscriptError as exc:
        raise TranscriptError(path, exc.line, f"{exc.problem}; a JSON transcript must be {_DOCUMENTS}") from None
    return guess_wire_format(messages, system is not None)


def _jsonl_format(path: Path) -> ImportFormat:
    messages: list[dict[str, Any]] = []  # wire-message lines seen so far
    unrecognized: int | None = None  # the first line that matched nothing, for the error
    for count, (line_no, record) in enumerate(iter_jsonl(path), 1):
        if looks_like_codex(record):
            return "codex"
        if looks_like_claude_code(record):
            return "claude-code"
        if isinstance(record.get("role"), str):
            if is_normalized_only(record):
                return "normalized"
            messages.append(record)
        elif unrecognized is None:
            unrecognized = line_no
        if count >= _SNIFF_RECORDS:
            break
    if messages:
        # Plain text lines fit both the normalized shape and OpenAI JSONL, and import the same way.
        return "normalized" if all(fits_normalized(m) for m in messages) else detect_format(messages)
    raise TranscriptError(path, unrecognized, f"not a recognized transcript record; expected {_KNOWN}")


__all__ = ["detect_import_format"]

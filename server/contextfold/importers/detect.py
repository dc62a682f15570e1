"""Which importer a file needs, judged from its first records."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeGuard

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
from contextfold.names import ImportFormat, agent_session_id

# Enough to get past the bookkeeping records that open a session file, few enough to stay instant.
_SNIFF_RECORDS = 50
# Claude Code names a session's file after the session: `<session id>.jsonl`, the id its hooks get.
_UUID = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z", re.IGNORECASE)
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


def agent_session(path: Path, format: ImportFormat) -> str | None:
    """The session id the agent's hooks keep this transcript under (`names.agent_session_id`), for
    an agent's own session file; None for other files, or when the first records do not say.

    - Claude Code: the file's name when it is a session id (Claude Code writes `<session id>.jsonl`
      and hands its hooks that id and path: a resumed session's file also holds records stamped
      with the earlier session's id, so the name is the one to trust); for a renamed copy, the
      `sessionId` of its first conversation record. A subagent's file (`agent-<id>.jsonl`, its
      records `isSidechain`) gets its own id, `claude-code-<session>-agent-<id>`, never its
      parent's session.
    - Codex: the `id` of the rollout's first `session_meta` (the thread id its hooks get).
    """
    path = Path(path)
    if format == "claude-code" and _UUID.match(path.stem):
        return agent_session_id(format, path.stem)
    try:
        return _session_in_records(path, format)
    except TranscriptError:
        return None  # a damaged first record: the import itself says what is wrong with it


def _session_in_records(path: Path, format: ImportFormat) -> str | None:
    if format == "claude-code":
        for count, (_, record) in enumerate(iter_jsonl(path), 1):
            session = record.get("sessionId")
            if record.get("type") in ("user", "assistant") and _usable(session):
                agent = record.get("agentId")
                if record.get("isSidechain") is True and _usable(agent):
                    return agent_session_id(format, f"{session}-agent-{agent}")
                return agent_session_id(format, session)
            if count >= _SNIFF_RECORDS:
                break
        return None
    if format == "codex":
        for count, (_, record) in enumerate(iter_jsonl(path), 1):
            payload = record.get("payload")
            if record.get("type") == "session_meta" and isinstance(payload, dict):
                session = payload.get("id")
                return agent_session_id(format, session) if _usable(session) else None
            if count >= _SNIFF_RECORDS:
                break
    return None


_NATIVE_ID = re.compile(r"\A[\w.:-]{1,80}\Z", re.ASCII)
"""What an agent's session id looks like (a UUID); anything else gets a fresh id, as other files do."""


def _usable(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _NATIVE_ID.match(value) is not None


__all__ = ["agent_session", "detect_import_format"]

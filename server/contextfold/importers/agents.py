"""Which agent session a transcript file is: the id the agent's own hooks keep it under.

Claude Code and Codex hand their hooks a session id, which the hooks store the session under
(`names.agent_session_id`: `claude-code-<id>`, `codex-<id>`). `import` without a session id puts
such a file in that same session, so the hooks, an import and a re-import meet in one session and
each reads only what the file appended (`importers.marks`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeGuard

from contextfold.errors import TranscriptError
from contextfold.importers.base import LineReader, decode_json_object
from contextfold.names import ImportFormat, agent_session_id

SNIFF_RECORDS = 50
"""Records read at most for the id: past the bookkeeping records that open a session file."""
_UUID = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z", re.IGNORECASE)
"""Claude Code names a session's file after the session: `<session id>.jsonl`, the id its hooks get."""


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
    if format not in ("claude-code", "codex"):
        return None
    for count, (line_no, raw) in enumerate(LineReader(path), 1):
        if count > SNIFF_RECORDS:
            break
        try:
            record = decode_json_object(path, line_no, raw)
        except TranscriptError:
            continue  # a damaged line: the import itself says what is wrong with it
        if format == "codex":
            payload = record.get("payload")
            if record.get("type") == "session_meta" and isinstance(payload, dict):
                session = payload.get("id")
                return agent_session_id(format, session) if _usable(session) else None
            continue
        session = record.get("sessionId")
        if record.get("type") in ("user", "assistant") and _usable(session):
            agent = record.get("agentId")
            if record.get("isSidechain") is True and _usable(agent):
                return agent_session_id(format, f"{session}-agent-{agent}")
            return agent_session_id(format, session)
    return None


_NATIVE_ID = re.compile(r"\A[\w.:-]{1,80}\Z", re.ASCII)
"""What an agent's session id looks like (a UUID); anything else gets a fresh id, as other files do."""


def _usable(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _NATIVE_ID.match(value) is not None


__all__ = ["SNIFF_RECORDS", "agent_session"]

"""Codex's hook events, as Codex 0.169 sends them and reads their answers.

Checked by running `codex exec` 0.169.0 against a scripted Responses server with hooks that
recorded their input, and against the JSON schemas the binary carries for each event:

- Every event carries `session_id`, `transcript_path` (the rollout JSONL), `cwd` and `model`.
- **PostToolUse** cannot change what the model sees: 0.169 has no `updatedToolOutput` and refuses
  `updatedMCPToolOutput` ("unsupported"), and it has already cut a command's output to about
  10 KB (head and tail, "Warning: truncated output (original token count: …)") before the hook
  runs; the rest is gone. So contextfold installs no PostToolUse hook for Codex, and
  `contextfold hook codex PostToolUse` answers nothing.
- **PreCompact** → **PostCompact** → **SessionStart** with `source: "compact"`, in that order; the
  rollout already holds the `compacted` record (the summary Codex wrote) at PostCompact, whose
  answer takes no context. SessionStart's `hookSpecificOutput.additionalContext` does, so that is
  where what the summary lacks goes.
- Codex runs a hook only when the user has trusted it; see `install`.
"""

from __future__ import annotations

from typing import Any

from contextfold.names import agent_session_id

AGENT = "codex"
SESSION_PREFIX = agent_session_id(AGENT, "")
MODEL = "gpt-5"


def session_id(event: dict[str, Any]) -> str | None:
    raw = event.get("session_id")
    return agent_session_id(AGENT, raw) if isinstance(raw, str) and raw else None


def additional_context(event_name: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}


__all__ = ["AGENT", "MODEL", "SESSION_PREFIX", "additional_context", "session_id"]

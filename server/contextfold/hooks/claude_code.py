"""Claude Code's hook events: what their input holds, and the output Claude Code takes back.

Checked against Claude Code 2.1.197 run headless (`claude -p`) with hooks that recorded their input:

- **PostToolUse** gets `tool_name`, `tool_input`, `tool_response` (the tool's own output object)
  and `tool_use_id`. `hookSpecificOutput.updatedToolOutput` replaces the output before the model
  sees it, for every tool since 2.1.121 (`updatedMCPToolOutput`, MCP tools only, before that); it
  must have the tool's own output shape, or Claude Code logs a mismatch and keeps the original.
  What the model would see of a big output, and what this module hands back:
  - `Bash` over 30,000 characters reaches the hook cut to 30,000, with `persistedOutputPath`
    naming the whole output on disk; the model would get its first 2 KB and the path. The whole
    file is spilled, and `stdout` becomes contextfold's preview (the persisted fields dropped, so
    Claude Code shows `stdout`).
  - an MCP result over about 25,000 tokens reaches the hook already replaced by the string
    `Error: result (N characters) exceeds maximum allowed tokens. Output has been saved to PATH.`;
    the saved file is spilled and the error becomes a real preview.
  - an MCP result under that cap (a list of content blocks) and a `Read` result
    (`{"type": "text", "file": {"content": …}}`) are spilled as they are when over the limits.
  Other tools, and outputs within the limits, get no output at all.
- **PreCompact** (`trigger`, `custom_instructions`): its stdout becomes extra instructions for
  Claude Code's summarizer, so the hook prints nothing; it imports the transcript.
- **SessionStart** with `source: "compact"` fires after the summary is written but before the
  transcript holds it: `hookSpecificOutput.additionalContext` is added to the model's context.
- **PostCompact** gets the summary (`compact_summary`) but cannot add context; what the summary
  turned out to lack goes in with the next **UserPromptSubmit** (`additionalContext`).
Order: PreCompact → SessionStart(compact) → PostCompact.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

from contextfold.names import agent_session_id

AGENT = "claude-code"
SESSION_PREFIX = agent_session_id(AGENT, "")
MODEL = "claude"
"""The model contextfold counts a Claude Code session with when the hook is not told (Claude's
window; o200k × the Claude safety factor)."""

Shape = Literal["bash", "read", "mcp_blocks", "mcp_text"]

_SAVED = re.compile(
    r"\AError: result \([^)]*\) exceeds maximum allowed tokens\. Output has been saved to (?P<path>.+?)\.\n", re.DOTALL
)
_LABEL_CHARS = 120


class ToolOutput(NamedTuple):
    """What a PostToolUse event's tool showed the model, in a shape this hook can replace.
    (A named tuple, not a dataclass: `dataclasses` costs a hook's cheap path 6 ms to import.)"""

    tool: str
    call_id: str | None
    shape: Shape
    text: str
    """The output as Claude Code gave it to the hook (cut, for a persisted one)."""
    saved: Path | None = None
    """Where Claude Code saved the whole output because it was too large to show."""
    label: str = ""
    """One line naming the call: the tool and its command, path or arguments."""


def session_id(event: dict[str, Any]) -> str | None:
    raw = event.get("session_id")
    return agent_session_id(AGENT, raw) if isinstance(raw, str) and raw else None


def tool_output(event: dict[str, Any]) -> ToolOutput | None:
    """The output of a PostToolUse event this hook knows how to replace, else None."""
    tool = event.get("tool_name")
    response = event.get("tool_response")
    if not isinstance(tool, str):
        return None
    call = event.get("tool_use_id") if isinstance(event.get("tool_use_id"), str) else None
    given = event.get("tool_input")
    arguments: dict[str, Any] = given if isinstance(given, dict) else {}
    label = _label(tool, arguments)
    if tool == "Bash" and isinstance(response, dict) and isinstance(response.get("stdout"), str):
        if response.get("isImage") or response.get("backgroundTaskId"):
            return None
        stderr = response.get("stderr") if isinstance(response.get("stderr"), str) else ""
        text = response["stdout"] + ("\n" if response["stdout"] and stderr else "") + stderr
        saved = response.get("persistedOutputPath")
        return ToolOutput(tool, call, "bash", text, Path(saved) if isinstance(saved, str) and saved else None, label)
    if tool == "Read" and isinstance(response, dict) and response.get("type") == "text":
        file = response.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return ToolOutput(tool, call, "read", file["content"], None, label)
        return None
    if tool.startswith("mcp__"):
        if isinstance(response, str):
            match = _SAVED.match(response)
            return ToolOutput(tool, call, "mcp_text", response, Path(match["path"]) if match else None, label)
        if isinstance(response, list) and response and all(_text_block(b) for b in response):
            return ToolOutput(tool, call, "mcp_blocks", "\n".join(b["text"] for b in response), None, label)
    return None


def saved_outputs(event: dict[str, Any]) -> Path | None:
    """The folder Claude Code saves this session's too-large outputs in (`persistedOutputPath`, an
    MCP result's "saved to PATH"): `tool-results` in the session's folder, which sits next to its
    transcript, `~/.claude/projects/<project>/<session id>/tool-results/` beside `<session id>.jsonl`.
    None when the event does not say."""
    transcript, raw = event.get("transcript_path"), event.get("session_id")
    if not isinstance(transcript, str) or not transcript or not isinstance(raw, str):
        return None
    if not raw or raw in (".", "..") or "/" in raw or "\\" in raw or "\0" in raw:
        return None  # not a name: it could lead out of the project's folder
    return Path(transcript).parent / raw / "tool-results"


def replacement(event: dict[str, Any], output: ToolOutput, preview: str) -> dict[str, Any]:
    """The PostToolUse answer that shows the model `preview` instead of the output, in the
    tool's own output shape (else Claude Code keeps the original)."""
    response = event.get("tool_response")
    updated: Any
    if output.shape == "bash":
        assert isinstance(response, dict)
        updated = {k: v for k, v in response.items() if k not in ("persistedOutputPath", "persistedOutputSize")}
        updated |= {"stdout": preview, "stderr": ""}
    elif output.shape == "read":
        assert isinstance(response, dict)
        file = dict(response["file"])
        lines = preview.count("\n") + (0 if preview.endswith("\n") else 1)
        file |= {"content": preview, "numLines": lines}
        updated = {**response, "file": file}
    elif output.shape == "mcp_blocks":
        updated = [{"type": "text", "text": preview}]
    else:
        updated = preview
    specific: dict[str, Any] = {"hookEventName": "PostToolUse", "updatedToolOutput": updated}
    if output.tool.startswith("mcp__"):
        specific["updatedMCPToolOutput"] = updated  # what Claude Code before 2.1.121 reads
    return {"hookSpecificOutput": specific}


def additional_context(event_name: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}


def _text_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)


def _label(tool: str, arguments: dict[str, Any]) -> str:
    for key in ("command", "file_path", "path", "url", "pattern"):
        if isinstance(arguments.get(key), str):
            detail = " ".join(arguments[key].split())
            break
    else:
        import json

        detail = json.dumps(arguments, ensure_ascii=False, separators=(",", ":")) if arguments else ""
    label = f"{tool} `{detail}`" if detail else tool
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 2] + "…`"


__all__ = [
    "AGENT",
    "MODEL",
    "SESSION_PREFIX",
    "ToolOutput",
    "additional_context",
    "replacement",
    "saved_outputs",
    "session_id",
    "tool_output",
]

"""Codex: `exec_command` (`cmd`), whose output may arrive later through `write_stdin` on the same
session id, `shell` (an argv list), `shell_command` (a command string), `apply_patch` (patch text
with `*** Update File:` lines), and `update_plan` (`plan` items with `step`); the harness puts the
environment, AGENTS.md and permission notes in the user's turn; results carry a `Process exited
with code N` header (`exec_command`) or an `Exit code: N` and `Wall time: …` one (`shell`,
`shell_command`, a free-form `apply_patch`), or are JSON (`{"output": …, "metadata":
{"exit_code": N}}`) in older versions."""

from __future__ import annotations

import json
import re

from contextfold.compaction.agents.base import AgentAdapter, Outcome, ToolCall, Walk
from contextfold.domain import ToolPart

_EXITED = re.compile(r"Process exited with code (-?\d+)")
_RUNNING = re.compile(r"Process running with session ID (\d+)")
_BODY = re.compile(r"\nOutput:\n", re.MULTILINE)
_EXIT_HEADER = re.compile(r"\AExit code: (-?\d+)\nWall time: [^\n]*\n")


class Codex(AgentAdapter):
    name = "Codex"
    shell_tools = frozenset({"exec_command", "shell", "shell_command", "local_shell", "container.exec"})
    plan_tools = frozenset({"update_plan"})
    other_tools = frozenset({"write_stdin", "apply_patch", "view_image"})
    web_tools = frozenset({"web_search"})
    injected_prefixes = (
        "<environment_context>",
        "<user_instructions>",
        "<permissions instructions>",
        "<turn_aborted>",
        "# AGENTS.md instructions",
        # Developer messages it sends mid-session that hold no rule of the session's own: its system
        # prompt again after a model switch, the skills, plugins and apps it offers. (A collaboration
        # mode's rules, `<collaboration_mode>`, do hold: the summary quotes the newest.)
        "<model_switch>",
        "<skills_instructions>",
        "<plugins_instructions>",
        "<apps_instructions>",
    )
    declined_markers = (
        "exec command rejected by user",
        "patch rejected by user",
        "user rejected MCP tool call",
        "aborted by user after ",
    )
    """What Codex answers, as the whole result, when the user turns a call down at its approval prompt
    or interrupts the turn while it runs ("aborted by user after 27.2s")."""

    def recognizes(self, call: ToolCall) -> bool:
        if call.name in ("apply_patch", "patch"):
            # The patch is the whole input (a free-form tool) or its `input` argument.
            return isinstance(call.raw, str) or (call.tool == "apply_patch" and isinstance(call.args.get("input"), str))
        return super().recognizes(call)

    def report(self, call: ToolCall, walk: Walk) -> None:
        if call.name == "write_stdin":
            walk.resume(str(call.args.get("session_id", "")), call.part)
        elif call.name == "apply_patch" or (call.name == "patch" and isinstance(call.raw, str)):
            walk.patch(call, self.patch_text(call))
        else:
            super().report(call, walk)

    def outcome(self, part: ToolPart) -> Outcome | None:
        text = part.result_text
        if text.startswith(self.declined_markers):
            return Outcome(False, None, text)  # not run: no exit code, nothing written
        if text.startswith('{"output"'):
            try:
                data = json.loads(text)
                code = int(data.get("metadata", {}).get("exit_code"))
                return Outcome(code == 0, code, str(data.get("output", "")))
            except (ValueError, TypeError, AttributeError, RecursionError):  # any text may start like that
                pass
        header = text[:400]
        if (ended := _EXIT_HEADER.match(header)) is not None:
            body_at = _BODY.search(header)
            code = int(ended.group(1))
            return Outcome(code == 0, code, text[body_at.end() :] if body_at else text[ended.end() :])
        running = _RUNNING.search(header)
        exited = _EXITED.search(header)
        if not (running or exited):
            return None
        body_at = _BODY.search(text)
        output = text[body_at.end() :] if body_at else ""
        if exited:
            code = int(exited.group(1))
            return Outcome(code == 0, code, output)
        return Outcome(None, None, output, session=running.group(1) if running else None)

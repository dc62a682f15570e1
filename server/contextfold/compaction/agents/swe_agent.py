"""SWE-agent and mini-swe-agent: `bash` with only a `command`; SWE-agent's own commands `open`,
`create`, `edit` and `insert` (`edit` and `insert` apply to the file opened last), `goto`,
`scroll_*`, `search_*`, `find_file` and `submit`, sent as function calls or as text actions in a
bash block; `str_replace_editor`. mini-swe-agent wraps a result as `<returncode>N</returncode>
<output>…</output>`; SWE-agent ends one with `(Open file: …)` and `(Current directory: …)` lines
and reports a rejected edit in prose. The assistant's turn opens with `THOUGHT:` or `DISCUSSION`."""

from __future__ import annotations

import re

from contextfold.compaction.agents.base import AgentAdapter, Outcome, ToolCall, Walk
from contextfold.compaction.agents.shell import is_path
from contextfold.domain import ToolPart

_ACTIONS = frozenset(
    {
        "open",
        "create",
        "edit",
        "insert",
        "goto",
        "scroll_down",
        "scroll_up",
        "search_file",
        "search_dir",
        "find_file",
        "submit",
    }
)
_EDIT_FAILED = "Your proposed edit has introduced new syntax error"
_RETURNCODE = re.compile(r"^\s*<returncode>(-?\d+)</returncode>\s*", re.DOTALL)
_OUTPUT_TAG = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)
_FOOTER = re.compile(
    r"\n?\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\n?(?:bash-\$|\(Interactive session[^\n]*\)\n?bash-\$)?\s*$"
)
_OPEN_FILE = re.compile(r"\[File: (.+?) \(\d+ lines total\)\]")
_THOUGHT = re.compile(r"^\s*(?:THOUGHT|DISCUSSION|Thought)\s*:\s*", re.MULTILINE)


def _file_in_output(text: str) -> str | None:
    """The file an editor window shows (`[File: path (N lines total)]`)."""
    match = _OPEN_FILE.search(text[:2000])
    return match.group(1) if match else None


class SweAgent(AgentAdapter):
    name = "SWE-agent"
    shell_tools = frozenset({"bash"})
    edit_tools = frozenset({"create", "edit", "insert"})
    read_tools = frozenset({"open", "search_file"})
    editor_tools = frozenset({"str_replace_editor"})
    other_tools = frozenset({"goto", "scroll_down", "scroll_up", "search_dir", "find_file", "submit"})
    injected_prefixes = (
        "Here is a demonstration of how to correctly accomplish this task",
        # mini-swe-agent: a reply without exactly one bash block, a command that timed out.
        "Please always provide EXACTLY ONE action",
        "The last command <command>",
        # SWE-agent: its parsers' format errors, a command it refused to run, an empty output.
        "Your output was not formatted correctly",
        "Your last output did not use any tool calls",
        "Your last output included multiple tool calls",
        "Your action could not be parsed properly",
        "Your bash command contained syntax errors and was NOT executed",
        "Your command ran successfully and did not produce any output",
    )
    """What the harness sends in the user's turn when a reply broke its format (the nag that asks
    for exactly one action) or a command misfired: the agent's to fix, not the user's words."""
    looking_commands = frozenset({"find_file", "search_file", "search_dir", "goto", "scroll_down", "scroll_up", "open"})
    failure_markers = (_EDIT_FAILED,)

    def recognizes(self, call: ToolCall) -> bool:
        if call.name in ("edit", "insert"):
            return self._on_open_file(call)
        if call.tool == "bash":
            return "description" not in call.args  # OpenCode's bash describes its command
        return super().recognizes(call)

    def _on_open_file(self, call: ToolCall) -> bool:
        """An `edit` or `insert` that names no file: it applies to the file open in the editor."""
        return self.path(call) is None and not any(
            key.casefold().endswith("path") and isinstance(value, str) and value.strip()
            for key, value in call.args.items()
        )

    def report(self, call: ToolCall, walk: Walk) -> None:
        path = self.path(call)
        if path is None and call.name in ("edit", "insert"):
            target = walk.open_file or _file_in_output(call.result)
            if target:
                walk.edit(call, target, self.edit_how(call))
            return
        if path and call.name in ("open", "create"):
            walk.open_file = path
        super().report(call, walk)

    def edit_how(self, call: ToolCall) -> str:
        return "created" if call.name == "create" else super().edit_how(call)

    def outcome(self, part: ToolPart) -> Outcome | None:
        text = part.result_text
        match = _RETURNCODE.match(text)
        if match is None:
            return None
        wrapped = _OUTPUT_TAG.search(text)
        code = int(match.group(1))
        return Outcome(code == 0, code, wrapped.group(1) if wrapped else text[match.end() :])

    def strip_output(self, text: str) -> str:
        return _FOOTER.sub("", text)

    def finished_command(self, tool: str, command: str, outcome: Outcome, walk: Walk) -> bool:
        """SWE-agent's text actions (`open`, `create`, `edit N:M` …) sent through a bash tool."""
        head = command.lstrip().split("\n", 1)[0].split()
        if not head or head[0] not in _ACTIONS or tool.casefold() not in ("bash", "shell"):
            return False
        verb, rest = head[0], head[1:]
        if verb == "open" and rest:
            path = rest[0].strip("\"'")
            walk.open_file = path
            walk.read(path, "opened")
        elif verb == "create" and rest:
            path = rest[0].strip("\"'")
            walk.open_file = path
            walk.edited(path, "created")
        elif verb in ("edit", "insert"):
            target = walk.open_file or _file_in_output(outcome.body)
            if target is None:
                return True
            if outcome.ok is False or _EDIT_FAILED in outcome.body[:500]:
                walk.error(outcome.body, f"{verb} `{target}`", target, edit=True)
            else:
                walk.edited(target, f"{verb} (SWE-agent)")
        elif verb == "search_file" and len(rest) > 1 and is_path(rest[-1]):
            walk.read(rest[-1].strip("\"'"), "searched")
        elif verb == "submit":
            walk.done("Submitted the changes (`submit`)")
        return True

    def clean_assistant_text(self, text: str) -> str:
        return _THOUGHT.sub("", text)

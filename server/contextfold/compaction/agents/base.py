"""What an agent adapter knows, and the walk it reports to.

The facts walker (`compaction.facts`) reads every agent's history the same way; what differs from
one agent to the next — tool names, where a tool puts its path or command, how the harness wraps
a result, what it injects into the user's turn — is answered by one `AgentAdapter` per agent.
The walker picks an adapter for each tool call (`registry.pick`), asks it for the plan or todo
list the call writes (`plan`), then has it `report` what the call did to the `Walk` it is given:
a shell command ran, a file was edited or read, a patch was applied, an error happened. The
walker keeps the record; adapters keep nothing between calls.

The default `report` serves most agents: it dispatches on the tool sets an adapter declares
(`shell_tools`, `edit_tools`, `read_tools`, `search_tools`, `editor_tools`, `plan_tools`), and an
adapter overrides a method only where its agent differs. Pure: no I/O, no state.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from contextfold.domain import ToolPart

COMMON_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "absolute_path", "target_file", "file")
"""Argument names tools give a file path under, in the order they are tried: Claude Code's
`file_path` and `notebook_path`, SWE-agent's and OpenHands' `path`, SWE-agent's `filename` and
`file`, Gemini CLI's `absolute_path`, Cursor's `target_file`."""

COMMON_OPTION_KEYS = frozenset(
    {"output_mode", "sandbox_permissions", "model", "shell_id", "bash_id", "task_id", "subagent_type"}
)
"""Argument names whose values are the harness's own settings or handles, not names of the work:
Claude Code's `output_mode` (`files_with_matches`), `model` (`opus`) and the ids of its background
shells and tasks (`bash_5`), Codex's `sandbox_permissions` (`require_escalated`)."""

MAX_DELEGATION_LABEL_CHARS = 120
MAX_SUBAGENT_TYPE_CHARS = 60
"""Of a subagent's task, as Done names it: its label and its kind."""

PlanStatus = Literal["completed", "in_progress", "pending"]
_PLAN_STATUS: dict[str, PlanStatus] = {
    "completed": "completed",
    "complete": "completed",
    "done": "completed",
    "in_progress": "in_progress",
    "in-progress": "in_progress",
    "active": "in_progress",
    "doing": "in_progress",
    "pending": "pending",
    "todo": "pending",
    "not_started": "pending",
    "open": "pending",
}
"""Item statuses as plan and todo tools write them (Claude Code, OpenCode and Codex use the first
of each row), mapped to the three the summary knows."""

Kind = Literal["shell", "edit", "read", "search", "editor", "plan", "other"]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as adapters see it."""

    part: ToolPart
    tool: str
    """The tool's name as the agent spells it, an MCP prefix (`mcp__server__`) removed."""
    name: str
    """`tool` casefolded."""
    args: dict[str, Any]
    """The arguments when they are an object, else empty (see `raw`)."""

    @classmethod
    def of(cls, part: ToolPart) -> ToolCall:
        tool = part.name.rsplit("__", 1)[-1]
        return cls(part, tool, tool.casefold(), part.input if isinstance(part.input, dict) else {})

    @property
    def raw(self) -> Any:
        """The arguments as sent: an object, or a string for free-form tools."""
        return self.part.input

    @property
    def result(self) -> str:
        return self.part.result_text


@dataclass
class Outcome:
    """How a tool call ended, read from its state and its result."""

    ok: bool | None
    """True succeeded, False failed, None unknown (still running)."""
    exit_code: int | None
    body: str
    """The output with the harness's wrapper (exit code lines, chunk headers) removed."""
    session: str | None = None
    """The command is still running and its output continues on this session id (Codex)."""


@dataclass(frozen=True)
class PlanItem:
    """One item of a plan or todo list a tool call writes."""

    text: str
    status: PlanStatus


@dataclass(frozen=True)
class PlanEdit:
    """One change a task tool makes to the plan, item by item (Claude Code's `TaskCreate` and
    `TaskUpdate`), where a todo tool writes the whole list at once."""

    key: str
    """The task's id, as the agent's tools name it."""
    text: str | None = None
    """The task's text when the call sets it (creating or renaming it)."""
    status: PlanStatus | None = None
    """Its new status; None: unchanged."""
    removed: bool = False
    """The task was deleted."""


@dataclass(frozen=True)
class ApprovedPlan:
    """A plan the user approved at the harness's prompt (Claude Code's plan mode), as written."""

    text: str
    """The plan, Markdown (`checklist.outline` reads its title and steps)."""
    saved: str | None = None
    """Where the harness saved it, when it says."""


@dataclass(frozen=True)
class Notification:
    """The harness telling the agent, in the user's turn, that something it started in the
    background ended (Claude Code's `<task-notification>`)."""

    handle: str
    """The id the start was answered with (`Command running in background with ID: …`, a subagent's)."""
    outcome: Outcome
    """How it ended; `body` is the report a subagent handed back, if any."""
    label: str | None = None
    """What the notice calls it (a background agent's task: `Explore the auth module`)."""
    agent: bool = False
    """A subagent's task, not a command."""


class Walk(Protocol):
    """What an adapter reports a tool call did; the walker records it."""

    open_file: str | None
    """The file open in the agent's editor, for edit commands that name none (SWE-agent)."""

    def shell(self, call: ToolCall, command: str) -> None:
        """The call ran `command` in a shell: files, tests, errors and outcome follow from it."""

    def resume(self, session: str, part: ToolPart) -> None:
        """`part` carries more output of the command still running on `session`."""

    def patch(self, call: ToolCall, patch: str) -> None:
        """The call applied `patch` (a `*** Begin Patch` envelope or a unified diff)."""

    def edit(self, call: ToolCall, path: str, how: str) -> None:
        """The call edits `path`; whether it did is judged from its outcome."""

    def edited(self, path: str, how: str) -> None:
        """`path` was changed."""

    def read(self, path: str, how: str) -> None:
        """`path` was read, searched or viewed."""

    def error(self, body: str, source: str, key: str, *, edit: bool = False) -> None:
        """A failure: `body` the output, `source` where it came from, `key` what a later success
        must repeat to resolve it (a command, a path); `edit` when a change of that file failed."""

    def done(self, item: str) -> None:
        """Something finished that no file or command records (a submission)."""

    def delegate(self, handle: str, label: str) -> None:
        """A subagent started in the background on `handle` with the task `label`: done when a
        later poll (`resume`) or a harness's notice says it finished."""


class AgentAdapter:
    """One agent's tool calls and harness formats. Subclass, declare the tool sets, override
    what differs; register the instance with `registry.register`.

    Tool names are spelled as the agent spells them: `recognizes` matches them exactly, so agents
    that share a lower-case name (`bash`, `edit`) can tell their calls apart by shape. Every other
    lookup ignores case, so a call picked by name alone (see `registry.pick`) is read the same way.
    """

    name: ClassVar[str] = "agent"
    shell_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that run a shell command (`command` or `cmd` argument, a string input, or an argv list)."""
    edit_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that change the file named by their path argument."""
    read_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that read the file named by their path argument (or each of a `paths` list)."""
    search_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that search under their path argument."""
    editor_tools: ClassVar[frozenset[str]] = frozenset()
    """One tool for viewing and editing, its `command` argument saying which (`view`, `create`,
    `str_replace`, `insert` …)."""
    plan_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that write the plan or todo list."""
    other_tools: ClassVar[frozenset[str]] = frozenset()
    """The agent's other tools: recognized as its own, they touch no file (a failure is still one)."""
    delegate_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that hand a task to a subagent, labelled by their `description` argument: one that
    finished is work done (`delegated`), though what the subagent changed is in its own transcript."""
    unfinished_delegations: ClassVar[tuple[str, ...]] = ()
    """How such a tool's result begins when the subagent has not finished (launched in the
    background, stopped by an API error)."""
    delegation_handle: ClassVar[re.Pattern[str] | None] = None
    """The id an unfinished delegation's result gives the subagent (its group 1), which a later
    poll or notice names when it ends."""
    web_tools: ClassVar[frozenset[str]] = frozenset()
    """Tools that bring back a web page or search results (others' prose, whose names count as
    in plain words); otherwise like `other_tools`."""
    path_keys: ClassVar[tuple[str, ...]] = COMMON_PATH_KEYS
    """Argument names tried, in order, for the path a file tool works on."""
    option_keys: ClassVar[frozenset[str]] = COMMON_OPTION_KEYS
    """Argument names whose values are the harness's settings or handles (see `named_input`)."""
    handles: ClassVar[re.Pattern[str] | None] = None
    """The ids the harness gives its own processes (Claude Code's background shells, `bash_5`):
    its outputs and the agent's words name them, but they are no name of the work."""
    result_notices: ClassVar[re.Pattern[str] | None] = None
    """What the harness writes into the result of one of its own tools (`other_tools`,
    `delegate_tools`) beside the tool's output (Claude Code's `agentId: a81f2c3 (for resuming …)`
    and `<usage>total_tokens: …</usage>` after a subagent's report): no names of the work are read
    from it. A file's or a command's output is left whole."""
    injected_prefixes: ClassVar[tuple[str, ...]] = ()
    """How text the harness puts in the user's turn begins: not the user's words."""
    looking_commands: ClassVar[frozenset[str]] = frozenset()
    """Commands of the agent's own that only look (navigation), for judging a shell line."""
    failure_markers: ClassVar[tuple[str, ...]] = ()
    """Text near the start of an output that means the call failed whatever else it says."""
    echo_errors: ClassVar[tuple[str, ...]] = ()
    """Error text that only echoes another call's failure (recorded there, not here)."""
    declined_markers: ClassVar[tuple[str, ...]] = ()
    """How the harness says the user declined a call: their decision, not a failure of the work."""
    refusal_prefixes: ClassVar[tuple[str, ...]] = ()
    """How the harness's refusal to run a call begins (a guard that blocks a command): the agent
    runs it another way, and once that succeeds the refusal was a routine retry, not a fix."""
    read_first_markers: ClassVar[tuple[str, ...]] = ()
    """How the harness refuses to change a file the agent has not read (or not since it changed):
    a condition the agent meets by reading it, not a failure the work must fix."""

    _names: ClassVar[frozenset[str]] = frozenset()
    _kinds: ClassVar[dict[str, Kind]] = {}
    _web: ClassVar[frozenset[str]] = frozenset()
    _delegates: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A name in two sets takes the kind listed last.
        sets: tuple[tuple[Kind, frozenset[str]], ...] = (
            ("other", cls.other_tools),
            ("other", cls.delegate_tools),
            ("other", cls.web_tools),
            ("search", cls.search_tools),
            ("read", cls.read_tools),
            ("edit", cls.edit_tools),
            ("editor", cls.editor_tools),
            ("shell", cls.shell_tools),
            ("plan", cls.plan_tools),
        )
        cls._kinds = {tool.casefold(): kind for kind, tools in sets for tool in tools}
        cls._names = frozenset(tool for _, tools in sets for tool in tools)
        cls._web = frozenset(tool.casefold() for tool in cls.web_tools)
        cls._delegates = frozenset(tool.casefold() for tool in cls.delegate_tools)

    # -- choosing the adapter --

    def recognizes(self, call: ToolCall) -> bool:
        """The call is certainly this agent's: its exact tool name (and, where agents share a
        name, its shape)."""
        return call.tool in self._names

    def knows(self, call: ToolCall) -> bool:
        """The tool's name is this agent's, in any spelling (the fallback when none recognizes it)."""
        return call.name in self._kinds

    def kind(self, call: ToolCall) -> Kind | None:
        return self._kinds.get(call.name)

    def reads_web(self, call: ToolCall) -> bool:
        """The call brings back a web page or search results (`web_tools`)."""
        return call.name in self._web

    # -- reading a call --

    def named_input(self, call: ToolCall) -> Any:
        """The arguments that may name the work: all of them but the harness's own settings and
        handles (`option_keys`), which the agent typed but are no file or identifier of the work."""
        if not call.args or self.option_keys.isdisjoint(call.args):
            return call.raw
        return {key: value for key, value in call.args.items() if key not in self.option_keys}

    def plan(self, call: ToolCall) -> list[PlanItem] | None:
        """The plan or todo list the call writes, replacing the previous one; None when it writes
        none. Any tool whose arguments hold a `todos` list writes one; a plan tool may hold it
        under `plan` instead (Codex)."""
        items = call.args.get("todos")
        if not isinstance(items, list):
            if self.kind(call) != "plan":
                return None
            items = call.args.get("plan")
            if not isinstance(items, list):
                return None
        return plan_items(items)

    def plan_edit(self, call: ToolCall) -> PlanEdit | None:
        """The change the call makes to one task of the plan, for agents whose task tools change
        one item at a time; None for any other call."""
        return None

    def approved_plan(self, call: ToolCall) -> ApprovedPlan | None:
        """The plan the call put to the user when the user approved it (leaving a plan mode);
        None for any other call, and for a plan the user turned down."""
        return None

    def report(self, call: ToolCall, walk: Walk) -> None:
        """Tell `walk` what the call did. The default dispatches on the declared tool sets."""
        command = self.command(call)
        if command is not None:
            walk.shell(call, command)
            return
        if call.name in self._delegates and call.part.state == "completed":
            self.delegated(call, walk)
            return
        kind = self.kind(call)
        path = self.path(call)
        if kind == "editor":
            if path:
                sub = str(call.args.get("command", "")).casefold()
                if sub == "view":
                    walk.read(path, f"viewed ({call.part.name})")
                else:
                    walk.edit(call, path, f"{sub or 'edited'} ({call.part.name})")
            return
        if kind == "edit":
            if path:
                walk.edit(call, path, self.edit_how(call))
            return
        if kind in ("read", "search"):
            listed = call.args.get("paths")
            paths = (
                [path]
                if path
                else [p for p in listed if isinstance(p, str) and p.strip()]
                if isinstance(listed, list)
                else []
            )
            how = f"searched ({call.name.capitalize()})" if kind == "search" else f"read ({call.part.name})"
            for each in paths:
                walk.read(each, how)
            return
        if kind == "plan":
            return  # a plan tool that sent no list
        if call.part.state == "error":
            unwrapped = self.outcome(call.part)  # the harness's words, without its markup
            walk.error(unwrapped.body if unwrapped else call.result, call.part.name, f"tool:{call.part.name}")

    def delegated(self, call: ToolCall, walk: Walk) -> None:
        """Report a subagent's task as done when the subagent finished it: `Subagent "Fix the
        login test" finished (general-purpose)`. Not when it was turned down or interrupted, or
        has not finished (`unfinished_delegations`)."""
        result = call.result.lstrip()
        label = call.args.get("description")
        if not isinstance(label, str) or not label.strip():
            return  # nothing says what the task was; its report's names still reach the working set
        kind = call.args.get("subagent_type")
        suffix = f" ({kind.strip()[:MAX_SUBAGENT_TYPE_CHARS]})" if isinstance(kind, str) and kind.strip() else ""
        task = f'"{" ".join(label.split())[:MAX_DELEGATION_LABEL_CHARS]}"'
        if not result or result.startswith(self.unfinished_delegations):
            handle = self.delegation_handle.search(result[:500]) if self.delegation_handle and result else None
            if handle is not None:
                walk.delegate(handle.group(1), f"{task} finished{suffix}")
            return
        if any(marker in result[:300] for marker in self.declined_markers):
            return
        walk.done(f"Subagent {task} finished{suffix}")

    def is_shell(self, call: ToolCall) -> bool:
        """A shell tool: one of `shell_tools`, or any tool whose name ends in `bash` or `shell`."""
        return self.kind(call) == "shell" or call.name.endswith(("bash", "shell"))

    def command(self, call: ToolCall) -> str | None:
        """The shell command of a shell tool's call, or None for any other call."""
        if not self.is_shell(call):
            return None
        value = call.args.get("command", call.args.get("cmd", call.raw if isinstance(call.raw, str) else None))
        if isinstance(value, list):
            words = [str(v) for v in value]
            # An argv list: `["bash", "-lc", "the command"]` runs the command string.
            if len(words) >= 3 and words[1] in ("-lc", "-c"):
                return words[2]
            return shlex.join(words)
        return value if isinstance(value, str) and value.strip() else None

    def path(self, call: ToolCall) -> str | None:
        """The path a file tool's call works on, exactly as written."""
        for key in self.path_keys:
            value = call.args.get(key)
            if isinstance(value, str) and value.strip():
                return value
        return None

    def edit_how(self, call: ToolCall) -> str:
        """How an edit tool's call changed its file, for the file's line in the summary."""
        return call.part.name

    def patch_text(self, call: ToolCall) -> str:
        """The patch a patch tool's call applies."""
        if isinstance(call.raw, str):
            return call.raw
        return str(call.args.get("input") or call.args.get("patch") or "")

    # -- results --

    def outcome(self, part: ToolPart) -> Outcome | None:
        """The outcome when the result is wrapped the way this agent's harness wraps results
        (an exit code line, a status header); None when it is not."""
        return None

    def strip_output(self, text: str) -> str:
        """An unwrapped result without the harness's trailing status lines."""
        return text

    def finished_command(self, tool: str, command: str, outcome: Outcome, walk: Walk) -> bool:
        """Read a finished shell command as one of the agent's own commands (SWE-agent's `open`,
        `edit` …); True when it was one, so the walker reads it no further."""
        return False

    # -- messages --

    def clean_user_text(self, text: str) -> str:
        """A user turn's text without what the harness inserts into it."""
        return text

    def answers(self, result: str) -> list[tuple[str, str]]:
        """(question, answer) for each question a harness's ask-the-user tool put and the user
        answered, read from that tool's `result`; empty when the result is not in the harness's form."""
        return []

    def notifications(self, text: str) -> list[Notification]:
        """What the harness says, in a user turn's `text`, ended in the background; [] for a turn
        that says no such thing."""
        return []

    def carried_task(self, text: str) -> str | None:
        """The user's task as the summary of an earlier conversation states it, when `text` (a user
        turn) is such a summary the harness handed in; None otherwise."""
        return None

    def slash_command(self, text: str) -> tuple[str, str] | None:
        """(command, arguments) when the user's turn is a slash command; None otherwise."""
        return None

    def clean_assistant_text(self, text: str) -> str:
        """Assistant prose without the harness's labels."""
        return text


def plan_status(value: Any) -> PlanStatus | None:
    """A plan item's status as agents write it (`done`, `in progress`, `Completed` …)."""
    return _PLAN_STATUS.get(str(value).casefold().replace(" ", "_"))


def plan_items(items: Sequence[Any]) -> list[PlanItem]:
    """Plan or todo items as agents write them: an object with `content` (Claude Code, OpenCode),
    `step` (Codex), `text` or `title`, and a `status`; anything else is skipped."""
    found: list[PlanItem] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        text = item.get("content") or item.get("step") or item.get("text") or item.get("title")
        status = plan_status(item.get("status", "pending"))
        if isinstance(text, str) and text.strip() and status is not None:
            found.append(PlanItem(text, status))
    return found

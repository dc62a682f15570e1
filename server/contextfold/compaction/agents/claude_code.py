"""Claude Code: capitalized tools (`Bash`, `PowerShell` on Windows, `Read`, `Edit`, `Write`,
`MultiEdit`, `NotebookEdit`, `Grep`, `Glob`, `LS`, `TodoWrite`, or the task tools that change the
plan one task at a time: `TaskCreate`, answered `Task #N created…`, and `TaskUpdate` with its
`taskId`); a command's result starts `Exit code N` when it failed and a refused call is
`<tool_use_error>…`; the harness adds system reminders, slash commands, hook output and its own
notices to the user's turn."""

from __future__ import annotations

import re

from contextfold.compaction.agents.base import (
    AgentAdapter,
    ApprovedPlan,
    Notification,
    Outcome,
    PlanEdit,
    ToolCall,
    Walk,
    plan_status,
)
from contextfold.domain import ToolPart

_EXIT = re.compile(r"^Exit code (-?\d+)\s*\n?")
_TOOL_USE_ERROR = re.compile(r"<tool_use_error>(.*?)(?:</tool_use_error>|\Z)", re.DOTALL)
_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>\s*(.*?)\s*</command-args>", re.DOTALL)
_TASK_CREATED = re.compile(r"^Task #(\w+) created")
_APPROVED = "User has approved your plan"
"""How `ExitPlanMode`'s result begins when the user approved the plan (and, in recent versions,
where it was saved: `Your plan has been saved to: PATH`)."""
_SAVED = re.compile(r"^Your plan has been saved to: (\S[^\n]*?)\s*$", re.MULTILINE)
_BACKGROUND = re.compile(r"^Command running in background with ID: ([\w-]{1,64})")
"""How a `Bash` call with `run_in_background` answers: its output and exit code come later, through
`BashOutput` (`bash_id`) or `TaskOutput` (`task_id`)."""
_STATUS = re.compile(r"<status>(\w{1,20})</status>")
_EXIT_TAG = re.compile(r"<exit_code>(-?\d{1,6})</exit_code>")
_STREAMS = re.compile(r"<(stdout|stderr|output)>\n?(.*?)\n?(?:</\1>|\Z)", re.DOTALL)
_NOTIFICATION = re.compile(r"<task-notification>(.*?)(?:</task-notification>|\Z)", re.DOTALL)
_TASK_ID = re.compile(r"<task-id>([\w-]{1,64})</task-id>")
_NOTICE_SUMMARY = re.compile(r"<summary>([^<]{0,800})</summary>")
_NOTICE_LABEL = re.compile(r'^(Agent|Background command) "(.{1,300}?)"')
_NOTICE_EXIT = re.compile(r"\(exit code (-?\d{1,6})\)")
_NOTICE_RESULT = re.compile(r"<result>(.*?)(?:</result>|\Z)", re.DOTALL)
MAX_NOTIFICATIONS = 20
"""Notices read from one user turn, at most."""
MAX_STATUS_HEAD = 2_000
"""Characters of a `BashOutput` or `TaskOutput` result searched for its status and exit code."""


_ANSWERED = "User has answered your questions: "
"""How `AskUserQuestion`'s result begins: then `"question"="answer"` pairs, comma-separated."""
_ANSWER = re.compile(r'"([^"\n]{1,500}?)"="(.{0,1000}?)"(?=,\s*"|\.\s*You can now continue|\s*$)', re.DOTALL)
MAX_ANSWERS_CHARS = 8_000
"""Characters of such a result read for its answers."""
_CONTINUED = "This session is being continued from a previous conversation"
"""How the summary Claude Code wrote at a compaction begins when a session goes on from it."""
_INTENT = re.compile(
    r"^(?:#+[ \t]*)?(?:\*\*)?(?:\d+\.[ \t]*)?(?:\*\*)?Primary Request and Intent(?:\*\*)?:?(?:\*\*)?[ \t]*$",
    re.MULTILINE,
)
"""Its section stating the user's requests, a heading of its own (`1. Primary Request and Intent:`,
`## 1. Primary Request and Intent`)."""
_NEXT_SECTION = re.compile(r"^(?:#+[ \t]*)?(?:\*\*)?\d+\.[ \t]+(?:\*\*)?[A-Z][^\n]{2,60}$", re.MULTILINE)
"""The next numbered heading at the start of a line (`2. Key Technical Concepts:`): the section's
own lists are indented or bulleted."""
MAX_CARRIED_SCAN = 60_000
"""Characters of such a summary searched for the section, and at most read of it."""


class ClaudeCode(AgentAdapter):
    name = "Claude Code"
    shell_tools = frozenset({"Bash", "PowerShell"})
    edit_tools = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
    read_tools = frozenset({"Read", "LS"})
    search_tools = frozenset({"Grep", "Glob"})
    plan_tools = frozenset({"TodoWrite", "TaskCreate", "TaskUpdate"})
    web_tools = frozenset({"WebFetch", "WebSearch"})
    result_notices = re.compile(
        r"agentId: \w{1,40} \([^)\n]{0,300}\)|<usage>[^<]{0,500}</usage>|^output_file: [^\n]{0,500}$", re.MULTILINE
    )
    """After a subagent's report: its id for resuming it, its token and time usage, where a
    background agent writes its output."""
    delegate_tools = frozenset({"Task", "Agent"})
    unfinished_delegations = ("Async agent launched", "API Error")
    delegation_handle = re.compile(r"agentId: (\w{1,40})")
    """A subagent started in the background (its result comes later through `TaskOutput`), or one
    the API stopped."""
    other_tools = frozenset(
        {
            "TaskOutput",
            "TaskList",
            "TaskGet",
            "BashOutput",
            "KillShell",
            "KillBash",
            "AskUserQuestion",
            "EnterPlanMode",
            "ExitPlanMode",
            "Skill",
            "SlashCommand",
        }
    )
    handles = re.compile(r"bash_\d+")
    injected_prefixes = (
        "<system-reminder>",
        "<local-command-",
        "<task-notification>",
        "[Request interrupted",
        "Base directory for this skill:",
        "Caveat: The messages below were generated",
        "This session is being continued from a previous conversation",
        "<bash-input>",
        "<bash-stdout>",
        "<bash-stderr>",
        "Unknown skill: ",
        "Unknown slash command: ",
        "Your task is to create a detailed summary of the conversation so far",
    )
    """`!cmd` runs (`<bash-input>`, `<bash-stdout>`), the notices for a slash command naming no
    installed skill or command (`Unknown skill: x`, `Unknown slash command: x`) and the compaction request Claude Code sends (in
    `agent-acompact-*` transcripts) are Claude Code's text, as are the rest."""
    echo_errors = ("Sibling tool call errored",)
    """A parallel call failed, not this one: its own error is recorded already."""
    refusal_prefixes = ("Blocked: ",)
    """Claude Code's guard on `Bash` (`Blocked: sleep 30 followed by: …`, with how to wait instead)."""
    read_first_markers = ("File has not been read yet", "File has been modified since read")
    """A `Write` or `Edit` of a file not read first, or changed since: met by a `Read` of it."""
    declined_markers = (
        "The user doesn't want to proceed with this tool use",
        "[Request interrupted by user for tool use]",
        "Interrupted by user",
    )
    """The result of a call the user turned down at the permission prompt (its text tells the model
    to stop and wait, and may end with what the user said instead), or interrupted while it ran (a
    subagent's `Task`, a `Bash` killed: `Exit code 137`; 2.0's "Interrupted by user")."""

    def edit_how(self, call: ToolCall) -> str:
        if call.name == "write" and call.result.startswith("File created"):
            return "created (Write)"
        return super().edit_how(call)

    def plan_edit(self, call: ToolCall) -> PlanEdit | None:
        if call.name == "taskcreate":
            created = _TASK_CREATED.match(call.result.lstrip())
            subject = call.args.get("subject")
            if created is None or not isinstance(subject, str) or not subject.strip():
                return None  # refused, or not yet answered: no task exists
            return PlanEdit(created.group(1), subject, "pending")
        if call.name == "taskupdate":
            key, status, subject = call.args.get("taskId"), call.args.get("status"), call.args.get("subject")
            if not isinstance(key, (str, int)) or call.result.lstrip().startswith("<tool_use_error>"):
                return None
            return PlanEdit(
                str(key),
                subject if isinstance(subject, str) and subject.strip() else None,
                plan_status(status) if status is not None else None,
                removed=str(status).casefold() == "deleted",
            )
        return None

    def approved_plan(self, call: ToolCall) -> ApprovedPlan | None:
        plan = call.args.get("plan")
        if call.name != "exitplanmode" or not isinstance(plan, str) or not plan.strip():
            return None
        result = call.result.lstrip()
        if not result.startswith(_APPROVED):
            return None  # turned down (a declined call), or not answered yet
        saved = _SAVED.search(result[:2_000])
        return ApprovedPlan(plan, saved.group(1) if saved else None)

    def report(self, call: ToolCall, walk: Walk) -> None:
        if call.name in ("bashoutput", "taskoutput"):
            handle = call.args.get("bash_id", call.args.get("task_id"))
            if isinstance(handle, str) and handle:
                walk.resume(handle, call.part)  # a background command's output and exit code
                return
        super().report(call, walk)

    def outcome(self, part: ToolPart) -> Outcome | None:
        text = part.result_text
        tool = part.name.rsplit("__", 1)[-1]
        background = _BACKGROUND.match(text.lstrip()) if tool in self.shell_tools else None
        if background is not None:
            return Outcome(None, None, "", session=background.group(1))
        if tool in ("BashOutput", "TaskOutput"):
            polled = _polled(text)
            if polled is not None:
                return polled
        tool_error = _TOOL_USE_ERROR.match(text.lstrip())
        if tool_error:
            return Outcome(False, None, tool_error.group(1).strip())
        match = _EXIT.match(text)
        if match:
            code = int(match.group(1))
            return Outcome(code == 0, code, text[match.end() :])
        return None

    def clean_user_text(self, text: str) -> str:
        return _REMINDER.sub("", text)

    def answers(self, result: str) -> list[tuple[str, str]]:
        if not result.startswith(_ANSWERED):
            return []
        return [(q.strip(), a.strip()) for q, a in _ANSWER.findall(result[len(_ANSWERED) : MAX_ANSWERS_CHARS])]

    def notifications(self, text: str) -> list[Notification]:
        if "<task-notification>" not in text:
            return []
        found: list[Notification] = []
        for block in _NOTIFICATION.findall(text)[:MAX_NOTIFICATIONS]:
            handle, status = _TASK_ID.search(block[:MAX_STATUS_HEAD]), _STATUS.search(block[:MAX_STATUS_HEAD])
            if handle is None or status is None:
                continue
            summary = _NOTICE_SUMMARY.search(block)
            said = summary.group(1) if summary else ""
            named, code = _NOTICE_LABEL.match(said), _NOTICE_EXIT.search(said)
            what, label = named.groups() if named else (None, None)
            exit_code = int(code.group(1)) if code else None
            ended = status.group(1)
            ok = None if ended == "running" else ended == "completed" and exit_code in (0, None)
            result = _NOTICE_RESULT.search(block)
            outcome = Outcome(ok, exit_code, result.group(1).strip() if result else "")
            found.append(Notification(handle.group(1), outcome, label, agent=what == "Agent"))
        return found

    def carried_task(self, text: str) -> str | None:
        if not text.startswith(_CONTINUED):
            return None
        found = _INTENT.search(text, 0, MAX_CARRIED_SCAN)
        if found is None:
            return None
        section = text[found.end() : found.end() + MAX_CARRIED_SCAN]
        heading = _NEXT_SECTION.search(section)
        return " ".join(section[: heading.start() if heading else len(section)].split()) or None

    def slash_command(self, text: str) -> tuple[str, str] | None:
        if "<command-name>" not in text:
            return None
        name, args = _COMMAND_NAME.search(text), _COMMAND_ARGS.search(text)
        return (name.group(1) if name else "", args.group(1) if args else "")


def _polled(text: str) -> Outcome | None:
    """The outcome `BashOutput` or `TaskOutput` reports of a background command: still running
    (`ok` None, the output so far), or finished with its exit code; None when it says neither."""
    head = text[:MAX_STATUS_HEAD]
    status = _STATUS.search(head)
    if status is None:
        return None
    body = "".join(m.group(2).rstrip("\n") + "\n" for m in _STREAMS.finditer(text) if m.group(2).strip())
    code = _EXIT_TAG.search(head)
    ended = status.group(1)
    if ended not in ("completed", "failed", "killed"):
        return Outcome(None, None, body)  # running, or a status it does not know
    exit_code = int(code.group(1)) if code else None
    # A subagent's task ends with no exit code; a command's with one.
    return Outcome(ended == "completed" and exit_code in (0, None), exit_code, body)

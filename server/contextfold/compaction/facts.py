"""What code can know for certain about a stretch of history, without a model.

`extract_facts` walks the messages once and collects what the extractive summarizer writes and
what `pins` guarantees in any summary: the user's own messages word for word (`user_words`: not
tool results, not what a harness put in the user's turn), their instructions and explicit
constraints, the files touched (from tool-call arguments, reported exactly as written, since paths
are identifiers that must survive compaction), commands run and their outcomes, the finished work
in order (`record.Step`), errors and whether (and by what) they were resolved, the plan (a plan
tool's list or a checklist in the assistant's text, `checklist`), the user's answers to the
assistant's questions, and sentences in which the assistant decided something. Items carry the
stored messages (`Message.seq`) they came from, for the summary's citations.

The walk is the same for every agent. What differs — tool names, where a call puts its path or
command, how the harness wraps a result or fills the user's turn — is asked of the adapter in
`agents/` that reads the call (Claude Code, Codex, OpenCode, SWE-agent and mini-swe-agent,
OpenHands, or the generic fallback), picked per call so mixed and unknown transcripts still work.
Shell commands, from any agent, are read for writes (`sed -i`, redirections, `tee`, `ed`,
`perl -i`) and reads (`cat`, `head`, `tail`, `nl`, `sed -n`, `grep`, `python script.py`) by
`agents.shell`.

Everything is bounded (see the `MAX_*` constants) so facts stay small whatever the history.
Pure and deterministic: same messages, same facts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from contextfold.compaction.agents import AgentAdapter, Outcome, PlanEdit, PlanItem, ToolCall, pick
from contextfold.compaction.agents import adapters as registered_adapters
from contextfold.compaction.agents.base import MAX_DELEGATION_LABEL_CHARS
from contextfold.compaction.agents.output import error_line, judged, suite_verdict
from contextfold.compaction.agents.shell import (
    ShellTouch,
    command_key,
    command_touches,
    commit_subject,
    is_inspection,
    is_path,
    is_plumbing,
    patch_files,
    readable,
    resolves,
    shell_touches,
    simple_commands,
    strip_heredocs,
    suite_invocation,
    suite_runner,
)
from contextfold.compaction.agents.text import MAX_ITEM_CHARS, clip, collapse
from contextfold.compaction.checklist import checklist, outline
from contextfold.compaction.prose import (
    MAX_INSTRUCTION_CHARS,
    assistant_prose,
    assistant_text,
    constraint_sentences,
    is_decision,
    is_rule,
    names_path,
    plan_steps,
    sentences,
    user_instruction,
    user_prose,
    user_words,
)
from contextfold.compaction.record import Choice, Said, Step
from contextfold.domain import Message, TextPart, ToolPart

__all__ = [
    "MAX_ITEM_CHARS",
    "DeclinedCall",
    "ErrorFact",
    "Facts",
    "FileTouch",
    "assistant_prose",
    "clip",
    "collapse",
    "command_key",
    "constraint_sentences",
    "error_line",
    "extract_facts",
    "is_decision",
    "is_path",
    "is_rule",
    "names_path",
    "resolves",
    "sentences",
    "shell_touches",
    "suite_invocation",
    "suite_runner",
    "user_instruction",
    "user_prose",
]

MAX_CONSTRAINTS = 20
MAX_CONSTRAINTS_PER_MESSAGE = 8
"""So a long task prompt full of rules cannot crowd out what the user said later."""
MAX_EDITED_FILES = 60
"""Edited files are identifiers the summary must keep; the cap only guards against runaway input."""
MAX_READ_FILES = 20
MAX_DONE = 50
MAX_ERRORS = 30
MAX_TODOS = 30
MAX_TASKS = 200
"""Tasks a history's task tools created that are remembered by id (the oldest are forgotten)."""
MAX_DECISIONS = 12
MAX_DECLINED = 3
"""The calls the user declined that are remembered (the newest)."""
MAX_DECLINED_SAID_CHARS = 300
_USER_SAID = "the user said:"
"""What Claude Code puts before the words a user typed when declining a call."""
MAX_COMMANDS = 40
_COMMITTED = re.compile(r"^\[[^\]\n]*?\b([0-9a-f]{7,40})\]", re.MULTILINE)
"""What `git commit` prints first: `[main b9288c2] subject`, `[main (root-commit) 0a1b2c3] …`."""
MAX_SAID = 200
"""The user's messages kept word for word (the summary quotes the newest of them, see `userwords`)."""
MAX_SAYINGS = 8
"""Where a repeated message was said, or a done item happened: the first and the latest few."""
MAX_CHOICES = 12
MAX_PLAN_STEP_CHARS = 100
MAX_APPROVED_PLAN_CHARS = 700
"""Of a plan the user approved: each step, and the whole line (title, steps, where it was saved)."""
MAX_STEPS = 400


@dataclass(frozen=True)
class FileTouch:
    path: str
    """Exactly as the tool call wrote it."""
    action: Literal["edited", "read"]
    why: str
    """Short: how it was touched (tool, count) and, when the assistant said so, what for."""


@dataclass(frozen=True)
class ErrorFact:
    text: str
    """The most telling line of the failure, verbatim (whitespace collapsed to single spaces)."""
    source: str
    """Where it came from: the tool and, in backticks, the command or path."""
    seq: int = 0
    """The stored message whose tool call failed (0: not stored)."""
    fix: str = ""
    """For a resolved error: what succeeded after it (a command, an edited path)."""
    fix_seq: int = 0
    routine: bool = False
    """A call the tool or the harness refused rather than ran: a change of a file the edit tool
    refused (the text to replace not found, the file changed since read), a command the harness's
    guard blocked (`refusal_prefixes`). Once a later success answers it, a routine retry, not
    something that went wrong and was fixed."""


@dataclass(frozen=True)
class DeclinedCall:
    source: str
    """The call: the tool and, in backticks, the command or path."""
    seq: int = 0
    said: str = ""
    """What the user typed when declining, if anything (collapsed, clipped)."""

    @property
    def shown(self) -> str:
        """The call and, when the user typed something, what (`Bash npm run dev` and said: "…")."""
        return f'{self.source} and said: "{self.said}"' if self.said else self.source


@dataclass(frozen=True)
class Facts:
    first_instruction: str | None = None
    latest_instruction: str | None = None
    constraints: list[str] = field(default_factory=list)
    files: list[FileTouch] = field(default_factory=list)
    """Edited files first (in order of first touch), then files only read."""
    done: list[str] = field(default_factory=list)
    errors: list[ErrorFact] = field(default_factory=list)
    unresolved_error: ErrorFact | None = None
    """The latest error not followed by a success of the same command, test or file, while the
    work stands on it: None once the user spoke after it and a command did something since (the
    work went on; the error stays among `unresolved_errors`)."""
    todos: list[tuple[str, str]] = field(default_factory=list)
    """(status, text): status is `completed`, `in_progress` or `pending`; the latest list wins."""
    decisions: list[str] = field(default_factory=list)
    latest_assistant_text: str | None = None
    commands: list[str] = field(default_factory=list)
    unresolved_errors: list[ErrorFact] = field(default_factory=list)
    """Every error not resolved later, oldest first (`unresolved_error`, if any, is the last)."""
    succeeded: list[str] = field(default_factory=list)
    """Keys of what succeeded, in order: normalized commands and edited paths. Lets an anchor's
    Blocked item be dropped when the command it names now passes."""
    plan_steps: list[str] = field(default_factory=list)
    """List items under a "next steps" style heading in the latest assistant text."""
    resolved_errors: list[ErrorFact] = field(default_factory=list)
    """Errors a later success of the same command, test run or file answered, each message once
    (the latest occurrence), oldest first: what went wrong and was fixed."""
    said: list[Said] = field(default_factory=list)
    """Every message the user wrote, word for word, oldest first (a repeated one once, where it
    was said last)."""
    steps: list[Step] = field(default_factory=list)
    """The finished work in order, for Done (see `outcomes`)."""
    choices: list[Choice] = field(default_factory=list)
    """The user's answers to the assistant's questions, oldest first."""
    sources: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """The stored messages (seqs) each todo text, decision and done item came from."""
    plan_seq: int = 0
    """The message that wrote the latest plan (a plan tool's call or a checklist in text)."""
    intent: tuple[str, int] | None = None
    """The action the assistant said last it was about to take, and its message."""
    last_seq: int = 0
    at_rest: bool = True
    """The assistant's last message made no tool call: it answered, asked or stopped, rather than
    being cut off in the middle of its work."""
    declined: list[DeclinedCall] = field(default_factory=list)
    """Calls the user declined at the harness's prompt, oldest first: not errors of the work."""
    carried_task: tuple[str, int] | None = None
    """The user's task as the summary this session went on from states it (the harness handed it
    in as the user's turn: `AgentAdapter.carried_task`), and its message; the latest such summary."""
    approved_plan: tuple[str, int] | None = None
    """The latest plan the user approved at the harness's prompt (`AgentAdapter.approved_plan`),
    as one line: its title in quotes, its numbered steps, where it was saved; and its message."""

    @property
    def edited_files(self) -> list[FileTouch]:
        return [f for f in self.files if f.action == "edited"]


# -- tool calls: outcomes -----------------------------------------------------------------------


def _outcome(part: ToolPart, adapters: Sequence[AgentAdapter]) -> Outcome:
    """How a call ended: from its state, else from the first adapter whose harness wrapped the
    result, else from what the output says. A failed call's output is unwrapped all the same
    (`<tool_use_error>…`): the summary quotes its words, not the harness's markup."""
    text = part.result_text
    if part.state in ("pending", "running"):
        return Outcome(None, None, text)
    if part.state == "error":
        unwrapped = next((o for adapter in adapters if (o := adapter.outcome(part)) is not None), None)
        return Outcome(False, None, unwrapped.body if unwrapped is not None else text)
    for adapter in adapters:
        outcome = adapter.outcome(part)
        if outcome is not None:
            return outcome
    body = text
    for adapter in adapters:
        body = adapter.strip_output(body)
    return judged(body, _marked_failed(body, adapters))


def _marked_failed(body: str, adapters: Sequence[AgentAdapter]) -> bool:
    return any(marker in body[:500] for adapter in adapters for marker in adapter.failure_markers)


# -- the walk -----------------------------------------------------------------------------------


@dataclass
class _FileState:
    action: Literal["edited", "read"]
    hows: dict[str, int]
    reason: str = ""


@dataclass
class _ErrorEvent:
    fact: ErrorFact
    key: str
    after: int
    """How many successes were logged before this error: only later ones can resolve it."""
    heard: tuple[int, int] | None = None
    """(`_Walker.ran`, `_Walker.acted`) when the user next spoke after this error; None while the
    user has not."""
    passed: bool = False
    """A whole exchange came after the error: the user spoke, the agent changed something, and the
    user spoke again."""
    read_first: bool = False
    """The harness refused a change of a file the agent had not read (or not since it changed):
    answered once the agent reads the file, whether or not it then writes."""
    settled: bool = False
    """A read of the file answered the `read_first` refusal."""


class _Walker:
    """Accumulates facts over one pass of the messages. Agent-neutral: each tool call is read by
    the adapter `agents.pick` chooses, which reports back through the `agents.Walk` methods
    (`shell`, `resume`, `patch`, `edit`, `edited`, `read`, `error`, `done`)."""

    def __init__(self, adapters: Sequence[AgentAdapter]) -> None:
        self.adapters = adapters
        self.looking = frozenset[str]().union(*(adapter.looking_commands for adapter in adapters))
        self.echoes = tuple(echo for adapter in adapters for echo in adapter.echo_errors)
        self.first_instruction: str | None = None
        self.latest_instruction: str | None = None
        self.constraints: list[str] = []
        self.files: dict[str, _FileState] = {}
        self.done_items: list[str] = []
        self.errors: list[_ErrorEvent] = []
        self.declined: list[DeclinedCall] = []
        self.declines = tuple(marker for adapter in adapters for marker in adapter.declined_markers)
        self.refusals = tuple(prefix for adapter in adapters for prefix in adapter.refusal_prefixes)
        self.read_first = tuple(marker for adapter in adapters for marker in adapter.read_first_markers)
        self.successes: list[str] = []
        """Keys that succeeded, each once, most recent last (a later failure removes it)."""
        self.success_log: list[str] = []
        """Every success in order, repeats included."""
        self.success_seqs: list[int] = []
        """The message of each success in `success_log`."""
        self.ran = 0
        """Commands that succeeded and did something (not a look around: `ls`, `grep`, `cat`)."""
        self.acted = 0
        """Those commands and the edits that succeeded."""
        self.todos: dict[str, str] = {}
        self.tasks: dict[str, str] = {}
        """Per task id (`PlanEdit.key`): the task's text in `todos`."""
        self.decisions: list[str] = []
        self.latest_assistant_text: str | None = None
        self.latest_prose = ""
        self.commands: list[str] = []
        self.open_file: str | None = None
        """The file open in the agent's editor (SWE-agent's `open`), for edits that name none."""
        self.agents: dict[str, str] = {}
        """Subagents running in the background: handle → their task, as Done will name it."""
        self.ended: dict[str, None] = {}
        """Background subagents already found finished (a poll), so a later notice adds nothing."""
        self.sessions: dict[str, tuple[ToolPart, str, str, int, int]] = {}
        """Commands still running (Codex exec sessions, Claude Code's background commands): session
        id → (part, command, output so far, where in `steps` it started, its message)."""
        self.said: list[str] = []
        """Sentences of the assistant text just before the current tool call: why it was made."""
        self.seq = 0
        """The message being read (`Message.seq`)."""
        self.words: dict[str, list[int]] = {}
        """The user's messages word for word → where each was said, in order of last saying."""
        self.steps: list[Step] = []
        self.choices: list[Choice] = []
        self.sources: dict[str, list[int]] = {}
        self.plan_seq = 0
        self.question: tuple[str, int] | None = None
        """The question the assistant's last message ended on, awaiting the user's answer."""
        self.intent: tuple[str, int] | None = None
        self.at_rest = True
        self.carried: tuple[str, int] | None = None
        self.approved: tuple[str, int] | None = None
        self.previous: Message | None = None
        """The message read last: a slash command makes the user text after it the harness's."""

    # -- messages --

    def message(self, message: Message) -> None:
        previous, self.previous = self.previous, message
        if message.summary or message.compaction is not None:
            return
        self.seq = message.seq
        if message.role == "user":
            self.user(message, previous)
            return
        prose = assistant_prose(message, self.adapters)
        self.question = None
        if prose:
            self.latest_assistant_text = clip(prose)
            self.latest_prose = prose
            said = list(sentences(prose))
            for sentence in said:
                # "So, the fix is:" announces a list; the sentence alone says nothing.
                if is_decision(sentence) and len(sentence) >= 12 and not sentence.endswith((":", "：")):
                    item = clip(sentence)
                    if item.casefold() not in {d.casefold() for d in self.decisions}:
                        self.decisions.append(item)
                    self.cite(item)
            # What it said it would do next, when it stopped there (no call after it).
            intent = next((s for s in reversed(said) if _INTENT.match(s) and not is_decision(s)), None)
            if intent is not None and not message.tool_parts:
                self.intent = (clip(_calm(intent), 200), self.seq)
            if said and said[-1].endswith(("?", "？")) and not message.tool_parts:
                self.question = (clip(said[-1], 200), self.seq)
            items = checklist(prose)
            if items:
                self.todo(items)
        self.at_rest = not message.tool_parts
        if message.tool_parts:
            self.intent = None  # whatever was announced before, the agent has acted since
        self.said = []
        for part in message.parts:
            if isinstance(part, TextPart) and not part.synthetic and part.text.strip():
                self.said = list(sentences(assistant_text(part.text, self.adapters)))[:12]
            elif isinstance(part, ToolPart):
                self.tool(part)

    def user(self, message: Message, previous: Message | None = None) -> None:
        words = user_words(message, self.adapters, previous)
        if words is None:
            self.carry(message)
            self.notified(message)
            return
        instruction = clip(words, MAX_INSTRUCTION_CHARS)
        seqs = self.words.pop(words, [])
        self.words[words] = [*seqs, self.seq][-MAX_SAYINGS:]
        if len(self.words) > MAX_SAID:
            del self.words[next(iter(self.words))]
        self.steps.append(Step("user", clip(words, 80), self.seq))
        for event in self.errors:
            if event.heard is None:
                event.heard = (self.ran, self.acted)
            elif self.acted > event.heard[1]:
                event.passed = True
        if self.question is not None:
            question, asked = self.question
            self.choices.append(Choice(question, clip(words, 200), (asked, self.seq)))
            del self.choices[:-MAX_CHOICES]
            self.question = None
        if self.first_instruction is None:
            self.first_instruction = instruction
        self.latest_instruction = instruction
        known = {c.casefold() for c in self.constraints}
        added = 0
        for sentence in constraint_sentences(user_prose(message, self.adapters, previous)):
            if sentence.casefold() not in known and added < MAX_CONSTRAINTS_PER_MESSAGE:
                self.constraints.append(sentence)
                known.add(sentence.casefold())
                added += 1

    def notified(self, message: Message) -> None:
        """What the harness says ended in the background: a command's end (its exit code) closes
        it, a subagent's finished task is done."""
        if message.role != "user":
            return
        text = message.text
        for adapter in self.adapters:
            for notice in adapter.notifications(text):
                if notice.handle in self.agents or notice.handle in self.sessions:
                    self.finish(notice.handle, notice.outcome)
                elif notice.agent and notice.outcome.ok and notice.label and notice.handle not in self.ended:
                    # A subagent this history did not see start: the notice names its task.
                    self.done(f'Subagent "{clip(notice.label, MAX_DELEGATION_LABEL_CHARS)}" finished')

    def carry(self, message: Message) -> None:
        """Keep the task a summary the harness handed in states (a session going on after a
        compaction): the user's words that set it are in an earlier conversation."""
        text = message.text.lstrip()
        for adapter in self.adapters:
            task = adapter.carried_task(text)
            if task:
                self.carried = (clip(task, MAX_INSTRUCTION_CHARS), self.seq)
                return

    # -- tools --

    def tool(self, part: ToolPart) -> None:
        call = ToolCall.of(part)
        adapter = pick(call, self.adapters)
        items = adapter.plan(call)
        if items is not None:
            self.todo(items)
            return
        edit = adapter.plan_edit(call)
        if edit is not None:
            self.task(edit)
            return
        approved = adapter.approved_plan(call)
        if approved is not None:
            title, steps = outline(approved.text)
            line = f'"{clip(title, 160)}"' if title else "(untitled)"
            if steps:
                line += ": " + "; ".join(f"{n}. {clip(step, MAX_PLAN_STEP_CHARS)}" for n, step in enumerate(steps, 1))
            saved = f" (saved to {approved.saved})" if approved.saved else ""
            self.approved = (clip(line, MAX_APPROVED_PLAN_CHARS - len(saved)) + saved, self.seq)
        if _ASKS_USER.search(call.name) and part.state == "completed" and part.result_text.strip():
            # The user answered through a tool: their choice, whatever the agent; each answer to
            # its question when the harness's form says which (Claude Code's `"question"="answer"`).
            answered = adapter.answers(part.result_text) or [(json_text(call.raw), part.result_text)]
            for question, answer in answered:
                self.choices.append(Choice(clip(question, 200), clip(answer, 300), (self.seq,)))
            del self.choices[:-MAX_CHOICES]
        adapter.report(call, self)

    def todo(self, items: list[PlanItem]) -> None:
        latest = {clip(item.text): item.status for item in items}
        # A new list replaces the old one, but work finished earlier stays on record as done.
        kept = {text: status for text, status in self.todos.items() if status == "completed" and text not in latest}
        for text, status in latest.items():
            if self.todos.get(text) != status:
                self.sources[text] = [self.seq]  # where the item got the status it has now
        self.todos = {**kept, **latest}
        self.plan_seq = self.seq

    def task(self, edit: PlanEdit) -> None:
        """One task created, updated, renamed or deleted (task tools that change the plan one item
        at a time); an update to a task this history never created is not known."""
        old = self.tasks.get(edit.key)
        text = clip(edit.text) if edit.text else old
        if text is None:
            return
        if edit.removed:
            self.todos.pop(text, None)
            self.tasks.pop(edit.key, None)
            return
        status = edit.status or self.todos.get(old or text, "pending")
        if old is not None and old != text:
            self.todos.pop(old, None)
        self.tasks[edit.key] = text
        while len(self.tasks) > MAX_TASKS:
            del self.tasks[next(iter(self.tasks))]
        if self.todos.get(text) != status:
            self.sources[text] = [self.seq]
        self.todos.pop(text, None)  # newest last, as a rewritten list would hold it
        self.todos[text] = status
        while len(self.todos) > MAX_TASKS:
            del self.todos[next(iter(self.todos))]
        self.plan_seq = self.seq

    def cite(self, item: str) -> None:
        seqs = self.sources.setdefault(item, [])
        if self.seq and self.seq not in seqs:
            seqs.append(self.seq)
            del seqs[1:-MAX_SAYINGS]

    def shell(self, call: ToolCall, command: str) -> None:
        part = call.part
        display = clip(strip_heredocs(command), 200)
        if not display:
            return
        if display in self.commands:
            self.commands.remove(display)
        self.commands.append(display)
        outcome = _outcome(part, self.adapters)
        if outcome.ok is None and outcome.session is not None:
            self.sessions[outcome.session] = (part, command, outcome.body, len(self.steps), self.seq)
            return
        self.shell_finished(part.name, command, outcome)

    def resume(self, session: str, part: ToolPart) -> None:
        if session in self.sessions or session in self.agents:
            self.finish(session, _outcome(part, self.adapters))

    def delegate(self, handle: str, label: str) -> None:
        self.agents[handle] = label
        while len(self.agents) > MAX_TASKS:
            del self.agents[next(iter(self.agents))]

    def finish(self, session: str, outcome: Outcome) -> None:
        """More of a running command's output, or its end (a poll's result, a harness's notice)."""
        if session in self.agents:
            if outcome.ok is not None:
                label = self.agents.pop(session)
                self.ended[session] = None
                if len(self.ended) > MAX_TASKS:
                    del self.ended[next(iter(self.ended))]
                if outcome.ok:
                    self.done(f"Subagent {label}")
            return
        pending = self.sessions.get(session)
        if pending is None:
            return
        started, command, so_far, at, seq = pending
        if outcome.ok is None:
            self.sessions[session] = (started, command, so_far + outcome.body, at, seq)
            return
        del self.sessions[session]
        outcome.body = so_far + outcome.body
        self.shell_finished(started.name, command, outcome)

    def shell_finished(self, tool: str, command: str, outcome: Outcome) -> None:
        key = command_key(command)
        words = simple_commands(command)
        if any(adapter.finished_command(tool, command, outcome, self) for adapter in self.adapters):
            return
        shown = readable(command)
        display = f"`{clip(shown, 160)}`"
        if outcome.ok is not True and self.was_declined(outcome.body, f"{tool} {display}"):
            return  # not run: no failing test run, no touched file
        touches = shell_touches(command)
        if outcome.ok is not True:
            # A chain that failed may have failed after its first command ran: a file written
            # there (a script created with `cat > t.py <<EOF` and then run) was written all the
            # same. A single command that failed wrote nothing.
            first = command_touches(words[0]) if len(words) > 1 else []
            touches = [t for t in touches if t.action == "edited" and t in first]
        self.record_touches(touches)
        if suite_invocation(command) is not None:
            passed, summary = suite_verdict(outcome)
            if passed is None:
                self.done(f"Ran {display}")
                self.steps.append(Step("command", shown, self.seq))
            elif passed:
                self.success(key)
                self.ran += 1
                self.acted += 1
                # One Done item per test command: the latest run's numbers replace the earlier.
                self.done_items = [d for d in self.done_items if not d.startswith(f"Tests passed: {display}")]
                self.done(f"Tests passed: {display}" + (f" ({summary})" if summary else ""))
                self.steps.append(Step("test", shown, self.seq, True, summary or ""))
            else:
                self.error(outcome.body, f"{tool} {display}", key)
                self.steps.append(Step("test", shown, self.seq, False, error_line(outcome.body)))
            return
        inspection = is_inspection(words, self.looking)
        if outcome.ok is False:
            # A search that finds nothing or a listing of a missing file is information, not a
            # failure the work is blocked on.
            if not inspection:
                self.error(outcome.body, f"{tool} {display}", key)
            return
        self.success(key)
        if not inspection:
            self.ran += 1
            self.acted += 1
        subject = commit_subject(command)
        if subject is not None:
            hashed = _COMMITTED.search(outcome.body)
            self.steps.append(Step("commit", subject, self.seq, detail=hashed.group(1) if hashed else ""))
        # Edits are on record as edits; reading commands did nothing worth a Done item.
        if not inspection and not any(t.action == "edited" for t in touches):
            self.done(f"Ran {display}")
            if subject is None and not is_plumbing(words):
                self.steps.append(Step("command", shown, self.seq))

    def record_touches(self, touches: list[ShellTouch]) -> None:
        for touch in touches:
            if touch.action == "edited":
                self.edited(touch.path, touch.how)
            elif touch.how == "removed (rm)":
                self.removed(touch.path)
            else:
                self.read(touch.path, touch.how)

    def patch(self, call: ToolCall, patch: str) -> None:
        part = call.part
        outcome = _outcome(part, self.adapters)
        files = patch_files(patch)
        if outcome.ok is False:
            target = files[0][0] if files else "patch"
            self.error(outcome.body, f"{part.name} `{target}`", target, edit=True)
            return
        for path, how in files:
            self.edited(path, how)

    def edit(self, call: ToolCall, path: str, how: str) -> None:
        part = call.part
        outcome = _outcome(part, self.adapters)
        failed = (
            outcome.ok is False
            or _marked_failed(outcome.body, self.adapters)
            or re.match(r"\s*(?:ERROR|Error)\b", outcome.body[:100])
        )
        if failed:
            if self.was_declined(outcome.body, f"{part.name} `{path}`"):
                return
            self.error(outcome.body, f"{part.name} `{path}`", path, edit=True)
            if path not in self.files:
                self.note_read(path, f"{part.name} failed")
            return
        if outcome.ok is None:
            # No result yet: still running, or the history was cut (a compaction, a crash) before
            # the result was written. The file is being changed; say so, claim no finished edit.
            self.unfinished(path, how)
            return
        self.edited(path, how)

    # -- recording --

    def edited(self, path: str, how: str) -> None:
        state = self.files.get(path)
        if state is None or state.action == "read":
            if sum(1 for s in self.files.values() if s.action == "edited") >= MAX_EDITED_FILES:
                return
            # Re-insert so edited files keep the order of their first edit.
            self.files.pop(path, None)
            state = self.files[path] = _FileState("edited", {})
            self.done(f"{'Created' if how.startswith(('created', 'added', 'File created')) else 'Edited'} `{path}`")
        state.hows[how] = state.hows.get(how, 0) + 1
        created = how.startswith(("created", "added", "File created"))
        self.steps.append(Step("create" if created else "edit", path, self.seq))
        reason = _reason(self.said, path)
        if reason:
            state.reason = reason
        self.success(path)
        self.acted += 1

    def unfinished(self, path: str, how: str) -> None:
        """An edit of `path` with no result: named among the edited files (the work in hand), with
        no Done item and no success, since nobody saw it finish."""
        state = self.files.get(path)
        if state is None or state.action == "read":
            if sum(1 for s in self.files.values() if s.action == "edited") >= MAX_EDITED_FILES:
                return
            self.files.pop(path, None)
            state = self.files[path] = _FileState("edited", {})
        key = f"{how}, no result"
        state.hows[key] = state.hows.get(key, 0) + 1

    def removed(self, path: str) -> None:
        """`rm` of a file the history already touched is worth noting on that file; an unknown
        file removed (a temp file, a build artifact) is not worth a line."""
        state = self.files.get(path)
        if state is not None:
            state.hows["removed (rm)"] = 1

    def read(self, path: str, how: str) -> None:
        """The agent read `path`: a refusal to change it until it did (`read_first`) is answered."""
        for event in self.errors:
            if event.read_first and event.key == path:
                event.settled = True  # the refusal's condition is met
        self.note_read(path, how)

    def note_read(self, path: str, how: str) -> None:
        """`path` among the files the work has seen (read, or failed to change)."""
        if path in self.files:
            return
        if sum(1 for s in self.files.values() if s.action == "read") >= MAX_READ_FILES:
            return
        self.files[path] = _FileState("read", {how: 1})

    def done(self, item: str) -> None:
        item = clip(item)
        if item in self.done_items:
            self.done_items.remove(item)
        self.done_items.append(item)
        del self.done_items[:-MAX_DONE]
        self.cite(item)
        if not item.startswith(("Edited `", "Created `", "Ran `", "Tests passed: ")):
            self.steps.append(Step("note", item, self.seq))  # an agent's own report (a submission)

    def success(self, key: str) -> None:
        self.success_log.append(key)
        self.success_seqs.append(self.seq)
        if key in self.successes:
            self.successes.remove(key)
        self.successes.append(key)

    def was_declined(self, body: str, source: str) -> bool:
        """Whether the harness says the user declined this call; if so it is remembered as such
        (with what the user said), not as an error: a summary must not tell the model that the
        work is blocked on it, nor pass on the harness's order to stop and wait."""
        if not any(marker in body[:300] for marker in self.declines):
            return False
        said = body.split(_USER_SAID, 1)[1] if _USER_SAID in body else ""
        self.declined.append(DeclinedCall(clip(source, 200), self.seq, clip(collapse(said), MAX_DECLINED_SAID_CHARS)))
        del self.declined[:-MAX_DECLINED]
        return True

    def error(self, body: str, source: str, key: str, *, edit: bool = False) -> None:
        if self.was_declined(body, source):
            return
        text = error_line(body)
        if any(echo in text for echo in self.echoes):
            return  # another call's failure, recorded there
        routine = edit or body.lstrip().startswith(self.refusals)
        fact = ErrorFact(text, clip(source, 200), self.seq, routine=routine)
        read_first = edit and any(marker in body[:300] for marker in self.read_first)
        self.errors.append(_ErrorEvent(fact, key, len(self.success_log), read_first=read_first))
        del self.errors[:-MAX_ERRORS]
        if key in self.successes:
            self.successes.remove(key)

    # -- result --

    def still_running(self) -> None:
        """The commands no later output said had finished (a dev server, a watcher, a run nobody
        polled) are Done's where they started, as commands that ran: their outcome is unknown."""
        for _, command, _, at, seq in sorted(self.sessions.values(), key=lambda s: -s[3]):
            words = simple_commands(command)
            if suite_invocation(command) is None and not is_inspection(words, self.looking) and not is_plumbing(words):
                self.steps.insert(at, Step("command", readable(command), seq))
        self.sessions.clear()

    def facts(self) -> Facts:
        edited = [(p, s) for p, s in self.files.items() if s.action == "edited"]
        read = [(p, s) for p, s in self.files.items() if s.action == "read"]
        files = [FileTouch(p, "edited", _why("edited", s)) for p, s in edited]
        files += [FileTouch(p, "read", _why("read", s)) for p, s in read]
        events = self.unresolved()
        unresolved = [event.fact for event in events]
        open_texts = {e.text for e in unresolved}
        current = events[-1] if events and not self.moved_on(events[-1]) else None
        return Facts(
            first_instruction=self.first_instruction,
            latest_instruction=self.latest_instruction,
            constraints=self.constraints[-MAX_CONSTRAINTS:],
            files=files,
            done=list(self.done_items),
            errors=[e.fact for e in self.errors],
            unresolved_error=current.fact if current is not None else None,
            todos=[(status, text) for text, status in list(self.todos.items())[-MAX_TODOS:]],
            decisions=self.decisions[-MAX_DECISIONS:],
            latest_assistant_text=self.latest_assistant_text,
            commands=self.commands[-MAX_COMMANDS:],
            unresolved_errors=unresolved,
            declined=list(self.declined),
            succeeded=list(self.successes),
            plan_steps=plan_steps(self.latest_prose),
            resolved_errors=[e for e in self.resolved() if e.text not in open_texts],
            said=[Said(text, tuple(seqs)) for text, seqs in self.words.items()],
            steps=self.steps[-MAX_STEPS:],
            choices=list(self.choices),
            sources={item: tuple(seqs) for item, seqs in self.sources.items()},
            plan_seq=self.plan_seq,
            intent=self.intent,
            last_seq=self.seq,
            at_rest=self.at_rest,
            carried_task=self.carried,
            approved_plan=self.approved,
        )

    def resolved(self) -> list[ErrorFact]:
        """Errors a later success answered, each message once at its latest occurrence."""
        found: dict[str, ErrorFact] = {}
        for event in self.errors:
            if self.answered(event):
                found.pop(event.fact.text, None)
                found[event.fact.text] = self.with_fix(event)
        return list(found.values())

    def with_fix(self, event: _ErrorEvent) -> ErrorFact:
        """The error with the first later success that answered it."""
        for index in range(event.after, len(self.success_log)):
            key = self.success_log[index]
            if key == event.key or resolves(event.key, key):
                return replace(event.fact, fix=key, fix_seq=self.success_seqs[index])
        return event.fact

    def answered(self, event: _ErrorEvent) -> bool:
        if event.settled:
            return True
        later = self.success_log[event.after :]
        return event.key in later or any(resolves(event.key, s) for s in set(later))

    def moved_on(self, event: _ErrorEvent) -> bool:
        """Whether the work went on past an error no success answered: the user spoke after it and
        then a command did something, or a whole exchange followed it (the user spoke, the agent
        changed something, the user spoke again). A fix in progress looks otherwise: the user says
        go on, the agent edits files and runs the failing command again."""
        return event.heard is not None and (self.ran > event.heard[0] or event.passed)

    def unresolved(self) -> list[_ErrorEvent]:
        """Errors with no later success of the same command, test run or file, oldest first."""
        result: list[_ErrorEvent] = []
        seen: set[tuple[str, str]] = set()
        for index, event in enumerate(self.errors):
            if self.answered(event):
                continue
            if any(e.key == event.key or e.fact.text == event.fact.text for e in self.errors[index + 1 :]):
                continue  # a later failure of the same thing (or with the same message) stands for it
            ident = (event.fact.text, event.key)
            if ident not in seen:
                seen.add(ident)
                result.append(event)
        return result


_ACTION_START = re.compile(
    r"^(?:(?:now|next|then|first|finally|ok(?:ay)?|so)\b,?\s*)?"
    r"(?:(?:let me|let's|let’s|I'll|I’ll|I will|I need to|we need to|I'm going to|we'll|time to)\s+)?"
    r"(?:add|fix|updat|implement|creat|remov|replac|refactor|extract|renam|chang|wir|handl|mov|insert|"
    r"writ|modif|pass|make|set|introduc|clean|revert|restor|adjust|convert|register|expos|support|"
    r"enabl|disabl|rewrit|simplif|split|merg|guard)",
    re.IGNORECASE,
)


_INTENT = re.compile(
    r"^(?:(?:now|next|then|first|finally|ok(?:ay)?|so|and)\b[,.]?\s*)*"
    r"(?:let me|let['’]s|I['’]ll|I will|I need to|we need to|I['’]m going to|we['’]ll|we will|time to)\s+\w",
    re.IGNORECASE,
)
_ASKS_USER = re.compile(r"ask.*(?:user|question|human)|request_user_input|ask_followup", re.IGNORECASE)


def _calm(sentence: str) -> str:
    """An announced action as a plain statement: the sentence without a closing colon."""
    return sentence.rstrip(":：").strip()


def json_text(value: object) -> str:
    """A tool's arguments as compact text (a question asked through a tool)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


def _reason(said: Sequence[str], path: str) -> str:
    """Why a file was edited, in the assistant's words: a sentence naming the file, or else one
    that announces a change ("Now let me add …"). Exclamations such as "Great!" say nothing."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    for sentence in said:
        if len(base) >= 4 and base in sentence:
            return clip(sentence, 100)
    for sentence in said:
        if _ACTION_START.match(sentence):
            return clip(sentence, 100)
    return ""


def _why(action: str, state: _FileState) -> str:
    hows = ", ".join(how if count == 1 else f"{how} ×{count}" for how, count in state.hows.items())
    why = (
        f"{action}: {hows}"
        if action == "read" and not hows.startswith(("read", "searched", "viewed", "opened", "ran"))
        else hows
    )
    if action == "edited" and not why.startswith(("edited", "created", "updated", "added", "deleted", "moved")):
        why = f"edited ({why})"
    if state.reason:
        why = f"{why} — {state.reason}"
    return clip(why, 160)


def extract_facts(messages: Sequence[Message], adapters: Sequence[AgentAdapter] | None = None) -> Facts:
    """Facts about `messages` (oldest first). Compaction markers, summaries and synthetic text
    are skipped: they are contextfold's, not the conversation's. `adapters`: the agents whose
    tool calls and formats are known, in the order they are asked (default: the registered ones,
    see `agents.register`)."""
    walker = _Walker(registered_adapters() if adapters is None else tuple(adapters))
    for message in messages:
        walker.message(message)
    walker.still_running()
    return walker.facts()

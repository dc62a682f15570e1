"""What code can know for certain about a stretch of history, without a model.

`extract_facts` walks the messages once and collects what the extractive summarizer writes and
what `pins` guarantees in any summary: the user's instructions and explicit constraints, the files
touched (from tool-call arguments, reported exactly as written, since paths are identifiers that
must survive compaction), commands run and their outcomes, errors and whether they were resolved,
todo lists, and sentences in which the assistant decided something.

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

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..domain import Message, TextPart, ToolPart
from .agents import AgentAdapter, Outcome, PlanItem, ToolCall, pick
from .agents import adapters as registered_adapters
from .agents.output import error_line, judged, suite_verdict
from .agents.shell import (
    ShellTouch,
    command_key,
    command_touches,
    is_inspection,
    is_path,
    patch_files,
    resolves,
    shell_touches,
    simple_commands,
    strip_heredocs,
    suite_invocation,
    suite_runner,
)
from .agents.text import MAX_ITEM_CHARS, clip, collapse

__all__ = [
    "MAX_ITEM_CHARS", "ErrorFact", "Facts", "FileTouch", "assistant_prose", "clip", "collapse", "command_key",
    "constraint_sentences", "error_line", "extract_facts", "is_decision", "is_path", "is_rule", "names_path",
    "resolves", "sentences", "shell_touches", "suite_invocation", "suite_runner", "user_instruction", "user_prose",
]

MAX_INSTRUCTION_CHARS = 400
MAX_CONSTRAINTS = 20
MAX_CONSTRAINTS_PER_MESSAGE = 8
"""So a long task prompt full of rules cannot crowd out what the user said later."""
MAX_EDITED_FILES = 60
"""Edited files are identifiers the summary must keep; the cap only guards against runaway input."""
MAX_READ_FILES = 20
MAX_DONE = 50
MAX_ERRORS = 30
MAX_TODOS = 30
MAX_DECISIONS = 12
MAX_COMMANDS = 40


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
    """The latest error not followed by a success of the same command, test or file."""
    todos: list[tuple[str, str]] = field(default_factory=list)
    """(status, text): status is `completed`, `in_progress` or `pending`; the latest list wins."""
    decisions: list[str] = field(default_factory=list)
    latest_assistant_text: str | None = None
    commands: list[str] = field(default_factory=list)
    unresolved_errors: list[ErrorFact] = field(default_factory=list)
    """Every error not resolved later, oldest first (`unresolved_error` is the last of them)."""
    succeeded: list[str] = field(default_factory=list)
    """Keys of what succeeded, in order: normalized commands and edited paths. Lets an anchor's
    Blocked item be dropped when the command it names now passes."""
    plan_steps: list[str] = field(default_factory=list)
    """List items under a "next steps" style heading in the latest assistant text."""
    resolved_errors: list[ErrorFact] = field(default_factory=list)
    """Errors a later success of the same command, test run or file answered, each message once
    (the latest occurrence), oldest first: what went wrong and was fixed."""

    @property
    def edited_files(self) -> list[FileTouch]:
        return [f for f in self.files if f.action == "edited"]


# -- small text helpers -------------------------------------------------------------------------


def names_path(text: str, path: str) -> bool:
    """`text` names exactly `path`: the string appears and is not part of a longer path
    (`src/a.py` is not named by `src/a.py.bak` or `lib/src/a.py`)."""
    pattern = r"(?<![\w./-])" + re.escape(collapse(path)) + r"(?![\w/-]|\.\w)"
    return re.search(pattern, text) is not None


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


def _prose(text: str) -> str:
    """Text without fenced code blocks: rules and decisions live in prose, not in code."""
    return _FENCE.sub("\n", text)


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)|(?<=[。！？；])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+•>]|\d+[.)]|#+)\s*")


def sentences(text: str) -> Iterable[str]:
    """Sentences of prose, list markers and emphasis stripped. Lines are never joined: in
    markdown a line break ends a thought as often as a full stop does."""
    for line in _prose(text).splitlines():
        line = _LIST_MARK.sub("", line).replace("**", "").strip()
        if not line:
            continue
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip()
            if sentence:
                yield sentence


# -- user text: instructions and constraints ----------------------------------------------------

_WRAPPER_TAG = re.compile(r"^\s*<([a-z_][\w-]*)>\s*|\s*</([a-z_][\w-]*)>\s*$", re.IGNORECASE)


def _user_text(message: Message, adapters: Sequence[AgentAdapter]) -> str:
    """The message's text without what harnesses insert into it (system reminders)."""
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic)
    for adapter in adapters:
        text = adapter.clean_user_text(text)
    return text


def _slash_command(text: str, adapters: Sequence[AgentAdapter]) -> tuple[str, str] | None:
    for adapter in adapters:
        command = adapter.slash_command(text)
        if command is not None:
            return command
    return None


def user_instruction(message: Message, adapters: Sequence[AgentAdapter] | None = None) -> str | None:
    """What the user asked in this message, or None when it carries no instruction of theirs."""
    if message.role != "user" or message.summary or message.compaction is not None:
        return None
    if message.name == "compact_summary":
        return None
    adapters = registered_adapters() if adapters is None else adapters
    text = _user_text(message, adapters).strip()
    if not text:
        return None
    command = _slash_command(text, adapters)
    if command is not None:
        # A slash command: only its arguments are words the user typed.
        name, args = command
        return clip(f"{name} {args}".strip(), MAX_INSTRUCTION_CHARS) if args.strip() else None
    # Text harnesses put in the user role that the user did not write: hook output, skill bodies,
    # project instruction files, interruption notices, continuation summaries, demonstrations.
    if text.startswith(tuple(prefix for adapter in adapters for prefix in adapter.injected_prefixes)):
        return None
    # A task wrapped in one tag (`<pr_description>…</pr_description>`) reads better without it.
    text = _WRAPPER_TAG.sub(" ", text)
    return clip(text, MAX_INSTRUCTION_CHARS) or None


def user_prose(message: Message, adapters: Sequence[AgentAdapter] | None = None) -> str:
    """The user's own text in a message, for constraint detection ('' for injected text)."""
    adapters = registered_adapters() if adapters is None else adapters
    if user_instruction(message, adapters) is None:
        return ""
    text = _user_text(message, adapters)
    command = _slash_command(text, adapters)
    return command[1] if command is not None else text


# Words that state a rule wherever they appear, and words that do so only in an imperative or
# addressed sentence: "Always run the linter" is a rule, "requests.get is ALWAYS sending a
# header" (from a bug report) is not.
_RULE_STRONG = re.compile(
    r"\b(?:must|mustn['’]t|avoid|make sure|ensure|prefer|preferably|do not|don['’]t|should not|shouldn['’]t)\b",
    re.IGNORECASE,
)
_RULE_WEAK = re.compile(r"\b(?:always|never|only)\b", re.IGNORECASE)
_ADDRESSED = re.compile(
    r"^(?:please\s+)?(?:always|never|only)\b"
    r"|^(?:use|keep|run|write|add|edit|change|modify|touch|call|return|put|leave|stick|target|test|import|"
    r"commit|push|install|check|read|follow|stay|work)\b"
    r"|\b(?:you|your|please|should|let['’]s)\b"
    r"|\bwe (?:must|should|need|want|will|['’]ll|have to)\b|\bI (?:want|need|['’]d like|would like)\b",
    re.IGNORECASE,
)
# "it doesn't", "they don't", "I don't know": descriptions, not rules.
_DESCRIBED = re.compile(
    r"\b(?:it|this|that|which|they|these|those|he|she|there|who|I)\s+(?:do not|don['’]t)\b(?!\s+want)",
    re.IGNORECASE,
)
# Chinese has no word boundaries, so single characters with common non-rule uses are guarded:
# 别 in 特别/区别/类别/级别/识别/分别/个别/差别/告别/性别/鉴别 or before 的/人/名/处. 总是/始终/只/仅
# and 不能 also describe ("它总是报错", "这个函数不能处理空值"), so they count only in a sentence
# addressed to someone (请/你/我们/要/应该) or opening with them.
_RULE_ZH_STRONG = re.compile(r"必须|不要|禁止|务必|优先|(?<![特区类级识分个差告性鉴辨派])别(?![的人名处])")
_RULE_ZH_WEAK = re.compile(r"总是|始终|不能|仅|(?<![一两几每三四五六七八九十])只(?!是)")
_ADDRESSED_ZH = re.compile(r"^(?:请)?(?:总是|始终|只|仅|不能)|请|你|您|我们|要|应该|需要")


def is_rule(sentence: str) -> bool:
    """Whether a user sentence states a constraint or preference."""
    if _RULE_STRONG.search(sentence) and not (
        _DESCRIBED.search(sentence) and not re.search(r"\b(?:must|avoid|make sure|ensure|prefer)", sentence, re.I)
    ):
        return True
    if _RULE_WEAK.search(sentence) and _ADDRESSED.search(sentence):
        return True
    if _RULE_ZH_STRONG.search(sentence):
        return True
    return bool(_RULE_ZH_WEAK.search(sentence) and _ADDRESSED_ZH.search(sentence))


_MIN_CONSTRAINT_CHARS = 6


def constraint_sentences(text: str) -> list[str]:
    """Sentences of user prose that state a rule or preference, in order, deduplicated."""
    found: list[str] = []
    seen: set[str] = set()
    for sentence in sentences(text):
        if len(sentence) < _MIN_CONSTRAINT_CHARS:
            continue
        if not is_rule(sentence):
            continue
        item = clip(sentence)
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            found.append(item)
    return found


# -- assistant text: decisions and plans ----------------------------------------------------------

_DECISION = re.compile(
    r"\b(?:I['’]ll use|I will use|I['’]m going to use|I['’]ll go with|let['’]s go with|let['’]s use|"
    r"we['’]ll use|we will use|going with|decided to|decide to|decision:|"
    r"the fix is|the solution is|the approach is|the right approach|I chose|we chose|opted (?:to|for)|"
    r"switch(?:ed|ing)? to)\b"
    r"|决定|改用|采用|方案是",
    re.IGNORECASE,
)
# "instead of" / "rather than" describe a choice only when someone is choosing: "`x` is a Toy
# instead of a dict" is an observation, "I'll pass the path instead of the name" a decision.
_CONTRAST = re.compile(r"\b(?:instead of|rather than)\b|而不是", re.IGNORECASE)
_CHOOSER = re.compile(
    r"\b(?:I['’]ll|I will|I['’]m going to|let['’]s|we['’]ll|we will|we should|I should|use|using|chose|choose)\b"
    r"|我们|我会|改为",
    re.IGNORECASE,
)


def is_decision(sentence: str) -> bool:
    if _DECISION.search(sentence):
        return True
    return bool(_CONTRAST.search(sentence) and _CHOOSER.search(sentence))


_PLAN_HEADING = re.compile(
    r"\b(?:next|remaining|todo|to do|plan|steps|will|then|pending)\b|下一步|接下来|计划|待办|步骤", re.IGNORECASE
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.+\S)\s*$")
MAX_PLAN_STEPS = 8


def assistant_prose(message: Message, adapters: Sequence[AgentAdapter] | None = None) -> str:
    text = _prose("\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic))
    return _assistant_text(text, registered_adapters() if adapters is None else adapters).strip()


def _assistant_text(text: str, adapters: Sequence[AgentAdapter]) -> str:
    """Assistant text without the labels harnesses put in it (`THOUGHT:`)."""
    for adapter in adapters:
        text = adapter.clean_assistant_text(text)
    return text


def _plan_steps(text: str) -> list[str]:
    """List items that follow a line announcing next steps or a plan."""
    steps: list[str] = []
    collecting = False
    for line in text.splitlines():
        item = _LIST_ITEM.match(line)
        if item and collecting:
            steps.append(clip(item.group(1).replace("**", "")))
            if len(steps) >= MAX_PLAN_STEPS:
                break
        elif not item and line.strip():
            # A heading line ("Next steps:", "## Remaining") opens a list; any other prose closes it.
            collecting = bool(_PLAN_HEADING.search(line)) and (
                line.rstrip().endswith((":", "：")) or line.lstrip().startswith("#")
            )
    return steps


# -- tool calls: outcomes -----------------------------------------------------------------------


def _outcome(part: ToolPart, adapters: Sequence[AgentAdapter]) -> Outcome:
    """How a call ended: from its state, else from the first adapter whose harness wrapped the
    result, else from what the output says."""
    text = part.result_text
    if part.state in ("pending", "running"):
        return Outcome(None, None, text)
    if part.state == "error":
        return Outcome(False, None, text)
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
        self.successes: list[str] = []
        """Keys that succeeded, each once, most recent last (a later failure removes it)."""
        self.success_log: list[str] = []
        """Every success in order, repeats included."""
        self.todos: dict[str, str] = {}
        self.decisions: list[str] = []
        self.latest_assistant_text: str | None = None
        self.latest_prose = ""
        self.commands: list[str] = []
        self.open_file: str | None = None
        """The file open in the agent's editor (SWE-agent's `open`), for edits that name none."""
        self.sessions: dict[str, tuple[ToolPart, str, str]] = {}
        """Commands still running (Codex exec sessions): session id → (part, command, output so far)."""
        self.said: list[str] = []
        """Sentences of the assistant text just before the current tool call: why it was made."""

    # -- messages --

    def message(self, message: Message) -> None:
        if message.summary or message.compaction is not None:
            return
        if message.role == "user":
            self.user(message)
            return
        prose = assistant_prose(message, self.adapters)
        if prose:
            self.latest_assistant_text = clip(prose)
            self.latest_prose = prose
            for sentence in sentences(prose):
                # "So, the fix is:" announces a list; the sentence alone says nothing.
                if is_decision(sentence) and len(sentence) >= 12 and not sentence.endswith((":", "：")):
                    item = clip(sentence)
                    if item.casefold() not in {d.casefold() for d in self.decisions}:
                        self.decisions.append(item)
        self.said = []
        for part in message.parts:
            if isinstance(part, TextPart) and not part.synthetic and part.text.strip():
                self.said = list(sentences(_assistant_text(part.text, self.adapters)))[:12]
            elif isinstance(part, ToolPart):
                self.tool(part)

    def user(self, message: Message) -> None:
        instruction = user_instruction(message, self.adapters)
        if instruction is None:
            return
        if self.first_instruction is None:
            self.first_instruction = instruction
        self.latest_instruction = instruction
        known = {c.casefold() for c in self.constraints}
        added = 0
        for sentence in constraint_sentences(user_prose(message, self.adapters)):
            if sentence.casefold() not in known and added < MAX_CONSTRAINTS_PER_MESSAGE:
                self.constraints.append(sentence)
                known.add(sentence.casefold())
                added += 1

    # -- tools --

    def tool(self, part: ToolPart) -> None:
        call = ToolCall.of(part)
        adapter = pick(call, self.adapters)
        items = adapter.plan(call)
        if items is not None:
            self.todo(items)
            return
        adapter.report(call, self)

    def todo(self, items: list[PlanItem]) -> None:
        latest = {clip(item.text): item.status for item in items}
        # A new list replaces the old one, but work finished earlier stays on record as done.
        kept = {text: status for text, status in self.todos.items() if status == "completed" and text not in latest}
        self.todos = {**kept, **latest}

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
            self.sessions[outcome.session] = (part, command, outcome.body)
            return
        self.shell_finished(part.name, command, outcome)

    def resume(self, session: str, part: ToolPart) -> None:
        pending = self.sessions.get(session)
        if pending is None:
            return
        started, command, so_far = pending
        outcome = _outcome(part, self.adapters)
        if outcome.ok is None:
            self.sessions[session] = (started, command, so_far + outcome.body)
            return
        del self.sessions[session]
        outcome.body = so_far + outcome.body
        self.shell_finished(started.name, command, outcome)

    def shell_finished(self, tool: str, command: str, outcome: Outcome) -> None:
        key = command_key(command)
        words = simple_commands(command)
        if any(adapter.finished_command(tool, command, outcome, self) for adapter in self.adapters):
            return
        display = f"`{clip(key, 160)}`"
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
            elif passed:
                self.success(key)
                # One Done item per test command: the latest run's numbers replace the earlier.
                self.done_items = [d for d in self.done_items if not d.startswith(f"Tests passed: {display}")]
                self.done(f"Tests passed: {display}" + (f" ({summary})" if summary else ""))
            else:
                self.error(outcome.body, f"{tool} {display}", key)
            return
        inspection = is_inspection(words, self.looking)
        if outcome.ok is False:
            # A search that finds nothing or a listing of a missing file is information, not a
            # failure the work is blocked on.
            if not inspection:
                self.error(outcome.body, f"{tool} {display}", key)
            return
        self.success(key)
        # Edits are on record as edits; reading commands did nothing worth a Done item.
        if not inspection and not any(t.action == "edited" for t in touches):
            self.done(f"Ran {display}")

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
            self.error(outcome.body, f"{part.name} `{target}`", target)
            return
        for path, how in files:
            self.edited(path, how)

    def edit(self, call: ToolCall, path: str, how: str) -> None:
        part = call.part
        outcome = _outcome(part, self.adapters)
        failed = outcome.ok is False or _marked_failed(outcome.body, self.adapters) or re.match(
            r"\s*(?:ERROR|Error)\b", outcome.body[:100]
        )
        if failed:
            self.error(outcome.body, f"{part.name} `{path}`", path)
            if path not in self.files:
                self.read(path, f"{part.name} failed")
            return
        if outcome.ok is None:
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
        reason = _reason(self.said, path)
        if reason:
            state.reason = reason
        self.success(path)

    def removed(self, path: str) -> None:
        """`rm` of a file the history already touched is worth noting on that file; an unknown
        file removed (a temp file, a build artifact) is not worth a line."""
        state = self.files.get(path)
        if state is not None:
            state.hows["removed (rm)"] = 1

    def read(self, path: str, how: str) -> None:
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

    def success(self, key: str) -> None:
        self.success_log.append(key)
        if key in self.successes:
            self.successes.remove(key)
        self.successes.append(key)

    def error(self, body: str, source: str, key: str) -> None:
        text = error_line(body)
        if any(echo in text for echo in self.echoes):
            return  # another call's failure, recorded there
        self.errors.append(_ErrorEvent(ErrorFact(text, clip(source, 200)), key, len(self.success_log)))
        del self.errors[:-MAX_ERRORS]
        if key in self.successes:
            self.successes.remove(key)

    # -- result --

    def facts(self) -> Facts:
        edited = [(p, s) for p, s in self.files.items() if s.action == "edited"]
        read = [(p, s) for p, s in self.files.items() if s.action == "read"]
        files = [FileTouch(p, "edited", _why("edited", s)) for p, s in edited]
        files += [FileTouch(p, "read", _why("read", s)) for p, s in read]
        unresolved = self.unresolved()
        open_texts = {e.text for e in unresolved}
        return Facts(
            first_instruction=self.first_instruction,
            latest_instruction=self.latest_instruction,
            constraints=self.constraints[-MAX_CONSTRAINTS:],
            files=files,
            done=list(self.done_items),
            errors=[e.fact for e in self.errors],
            unresolved_error=unresolved[-1] if unresolved else None,
            todos=[(status, text) for text, status in list(self.todos.items())[-MAX_TODOS:]],
            decisions=self.decisions[-MAX_DECISIONS:],
            latest_assistant_text=self.latest_assistant_text,
            commands=self.commands[-MAX_COMMANDS:],
            unresolved_errors=unresolved,
            succeeded=list(self.successes),
            plan_steps=_plan_steps(self.latest_prose),
            resolved_errors=[e for e in self.resolved() if e.text not in open_texts],
        )

    def resolved(self) -> list[ErrorFact]:
        """Errors a later success answered, each message once at its latest occurrence."""
        found: dict[str, ErrorFact] = {}
        for event in self.errors:
            if self.answered(event):
                found.pop(event.fact.text, None)
                found[event.fact.text] = event.fact
        return list(found.values())

    def answered(self, event: _ErrorEvent) -> bool:
        later = self.success_log[event.after :]
        return event.key in later or any(resolves(event.key, s) for s in set(later))

    def unresolved(self) -> list[ErrorFact]:
        """Errors with no later success of the same command, test run or file, oldest first."""
        result: list[ErrorFact] = []
        seen: set[tuple[str, str]] = set()
        for index, event in enumerate(self.errors):
            if self.answered(event):
                continue
            if any(e.key == event.key or e.fact.text == event.fact.text for e in self.errors[index + 1 :]):
                continue  # a later failure of the same thing (or with the same message) stands for it
            ident = (event.fact.text, event.key)
            if ident not in seen:
                seen.add(ident)
                result.append(event.fact)
        return result


_ACTION_START = re.compile(
    r"^(?:(?:now|next|then|first|finally|ok(?:ay)?|so)\b,?\s*)?"
    r"(?:(?:let me|let's|let’s|I'll|I’ll|I will|I need to|we need to|I'm going to|we'll|time to)\s+)?"
    r"(?:add|fix|updat|implement|creat|remov|replac|refactor|extract|renam|chang|wir|handl|mov|insert|"
    r"writ|modif|pass|make|set|introduc|clean|revert|restor|adjust|convert|register|expos|support|"
    r"enabl|disabl|rewrit|simplif|split|merg|guard)",
    re.IGNORECASE,
)


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
    why = f"{action}: {hows}" if action == "read" and not hows.startswith(("read", "searched", "viewed", "opened", "ran")) else hows
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
    return walker.facts()

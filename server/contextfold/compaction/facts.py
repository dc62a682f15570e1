"""What code can know for certain about a stretch of history, without a model.

`extract_facts` walks the messages once and collects what the extractive summarizer writes and
what `pins` guarantees in any summary: the user's instructions and explicit constraints, the files
touched (from tool-call arguments, reported exactly as written, since paths are identifiers that
must survive compaction), commands run and their outcomes, errors and whether they were resolved,
todo lists, and sentences in which the assistant decided something.

Tool calls come in each agent's own shape; the ones seen in real transcripts are read:
- Claude Code: `Read` / `Edit` / `Write` / `MultiEdit` / `NotebookEdit` (`file_path`), `Grep` /
  `Glob` (`path`), `Bash` (`command`; a failure is reported as `Exit code N` or
  `<tool_use_error>`), `TodoWrite` (`todos`);
- Codex: `apply_patch` (patch text with `*** Update File:` lines), `exec_command` (`cmd`; the exit
  code may arrive later through `write_stdin` on the same session id), `shell`, `update_plan`;
- SWE-agent: `open` / `create` / `edit` / `insert` (function calls, or the same words as text
  actions in a bash block; `edit` applies to the file opened last), `str_replace_editor`;
- OpenHands: `str_replace_editor`, `execute_bash`;
- mini-swe-agent and any other shell tool: the command line is read for writes (`sed -i`,
  redirections, `tee`, `ed`, `perl -i`) and reads (`cat`, `head`, `tail`, `nl`, `sed -n`, `grep`,
  `python script.py`), and `<returncode>N</returncode>` gives the outcome.

Everything is bounded (see the `MAX_*` constants) so facts stay small whatever the history.
Pure and deterministic: same messages, same facts.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from ..domain import Message, TextPart, ToolPart

MAX_ITEM_CHARS = 300
"""Any single extracted item (sentence, error line, command) is cut to this length."""
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
_SCAN_HEAD = 6_000
_SCAN_TAIL = 20_000
"""Outputs are scanned at the start and the end only: a command's verdict sits at the bottom, and a
megabyte of output must not make extraction slow."""


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


def collapse(text: str) -> str:
    """One line, single spaces (what `Summary.add` does to every bullet)."""
    return " ".join(text.split())


def names_path(text: str, path: str) -> bool:
    """`text` names exactly `path`: the string appears and is not part of a longer path
    (`src/a.py` is not named by `src/a.py.bak` or `lib/src/a.py`)."""
    pattern = r"(?<![\w./-])" + re.escape(collapse(path)) + r"(?![\w/-]|\.\w)"
    return re.search(pattern, text) is not None


def clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    text = collapse(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _scan_window(text: str) -> str:
    if len(text) <= _SCAN_HEAD + _SCAN_TAIL:
        return text
    return text[:_SCAN_HEAD] + "\n" + text[-_SCAN_TAIL:]


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

# Text harnesses put in the user role that the user did not write: hook output, skill bodies,
# project instruction files, interruption notices, continuation summaries, demonstrations.
_INJECTED_PREFIXES = (
    "<system-reminder>",
    "<local-command-",
    "<task-notification>",
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<turn_aborted>",
    "[Request interrupted",
    "Base directory for this skill:",
    "# AGENTS.md instructions",
    "Caveat: The messages below were generated",
    "This session is being continued from a previous conversation",
    "Here is a demonstration of how to correctly accomplish this task",
    "Please always provide EXACTLY ONE action",
)
_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>\s*(.*?)\s*</command-args>", re.DOTALL)
_WRAPPER_TAG = re.compile(r"^\s*<([a-z_][\w-]*)>\s*|\s*</([a-z_][\w-]*)>\s*$", re.IGNORECASE)


def user_instruction(message: Message) -> str | None:
    """What the user asked in this message, or None when it carries no instruction of theirs."""
    if message.role != "user" or message.summary or message.compaction is not None:
        return None
    if message.name == "compact_summary":
        return None
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic)
    text = _REMINDER.sub("", text).strip()
    if not text:
        return None
    if "<command-name>" in text:
        # A slash command: only its arguments are words the user typed.
        name, args = _COMMAND_NAME.search(text), _COMMAND_ARGS.search(text)
        if not args or not args.group(1).strip():
            return None
        return clip(f"{name.group(1) if name else ''} {args.group(1)}".strip(), MAX_INSTRUCTION_CHARS)
    if text.startswith(_INJECTED_PREFIXES):
        return None
    # A task wrapped in one tag (`<pr_description>…</pr_description>`) reads better without it.
    text = _WRAPPER_TAG.sub(" ", text)
    return clip(text, MAX_INSTRUCTION_CHARS) or None


def user_prose(message: Message) -> str:
    """The user's own text in a message, for constraint detection ('' for injected text)."""
    if user_instruction(message) is None:
        return ""
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic)
    text = _REMINDER.sub("", text)
    if "<command-name>" in text:
        args = _COMMAND_ARGS.search(text)
        return args.group(1) if args else ""
    return text


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


_THOUGHT = re.compile(r"^\s*(?:THOUGHT|DISCUSSION|Thought)\s*:\s*", re.MULTILINE)
_PLAN_HEADING = re.compile(
    r"\b(?:next|remaining|todo|to do|plan|steps|will|then|pending)\b|下一步|接下来|计划|待办|步骤", re.IGNORECASE
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.+\S)\s*$")
MAX_PLAN_STEPS = 8


def assistant_prose(message: Message) -> str:
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic)
    return _THOUGHT.sub("", _prose(text)).strip()


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


@dataclass
class _Outcome:
    ok: bool | None
    """True succeeded, False failed, None unknown (still running)."""
    exit_code: int | None
    body: str
    """The output with the harness's wrapper (exit code lines, chunk headers) removed."""
    session: str | None = None
    """Codex: the output will continue on this exec session id."""


_RETURNCODE = re.compile(r"^\s*<returncode>(-?\d+)</returncode>\s*", re.DOTALL)
_OUTPUT_TAG = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)
_CLAUDE_EXIT = re.compile(r"^Exit code (-?\d+)\s*\n?")
_CODEX_EXIT = re.compile(r"Process exited with code (-?\d+)")
_CODEX_RUNNING = re.compile(r"Process running with session ID (\d+)")
_CODEX_BODY = re.compile(r"\nOutput:\n", re.MULTILINE)
_OPENHANDS_EXIT = re.compile(r"(?:executed|completed) with exit code (-?\d+)")
_TOOL_USE_ERROR = re.compile(r"<tool_use_error>(.*?)(?:</tool_use_error>|\Z)", re.DOTALL)
_SWE_EDIT_FAILED = "Your proposed edit has introduced new syntax error"
_SWE_FOOTER = re.compile(r"\n?\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\n?(?:bash-\$|\(Interactive session[^\n]*\)\n?bash-\$)?\s*$")
_TRACEBACK = "Traceback (most recent call last)"
# Without an exit code, an output whose first line announces a failure ("Error: …", "Pre-commit
# validation failed:", "npm ERR! …", "fatal: …") is a failure: harness hooks that block a command
# report that way.
# The word must end its clause ("failed:", "Error!", "Permission denied"), so "Error rate: 0.5%"
# or "errors: 0" printed by a program that worked do not count.
_FAILED_HEADLINE = re.compile(
    r"^(?:\S+[ \t]+){0,3}(?:failed|failure|error|fatal|denied|refused|aborted)(?:\[[\w-]+\])?[ \t]*(?::|!|$)"
    r"|^npm ERR!|command not found",
    re.IGNORECASE,
)


def _outcome(part: ToolPart) -> _Outcome:
    text = part.result_text
    if part.state in ("pending", "running"):
        return _Outcome(None, None, text)
    if part.state == "error":
        return _Outcome(False, None, text)
    if text.startswith('{"output"'):
        # Codex apply_patch: {"output": "...", "metadata": {"exit_code": 0}}.
        try:
            data = json.loads(text)
            code = int(data.get("metadata", {}).get("exit_code"))
            return _Outcome(code == 0, code, str(data.get("output", "")))
        except (ValueError, TypeError, AttributeError, RecursionError):  # any text may start like that
            pass
    tool_error = _TOOL_USE_ERROR.match(text.lstrip())
    if tool_error:
        return _Outcome(False, None, tool_error.group(1).strip())
    match = _RETURNCODE.match(text)
    if match:
        wrapped = _OUTPUT_TAG.search(text)
        code = int(match.group(1))
        return _Outcome(code == 0, code, wrapped.group(1) if wrapped else text[match.end():])
    match = _CLAUDE_EXIT.match(text)
    if match:
        code = int(match.group(1))
        return _Outcome(code == 0, code, text[match.end():])
    header = text[:400]
    running = _CODEX_RUNNING.search(header)
    exited = _CODEX_EXIT.search(header)
    if running or exited:
        body_at = _CODEX_BODY.search(text)
        output = text[body_at.end():] if body_at else ""
        if exited:
            code = int(exited.group(1))
            return _Outcome(code == 0, code, output)
        return _Outcome(None, None, output, session=running.group(1) if running else None)
    match = _OPENHANDS_EXIT.search(text[-300:])
    if match:
        code = int(match.group(1))
        return _Outcome(code == 0, code, text)
    body = _SWE_FOOTER.sub("", text)
    # No exit code: judge by what the output says.
    if _SWE_EDIT_FAILED in body[:500] or _TRACEBACK in _scan_window(body):
        return _Outcome(False, None, body)
    headline = body.lstrip()[:300].split("\n", 1)[0]
    if _FAILED_HEADLINE.search(headline):
        return _Outcome(False, None, body)
    return _Outcome(True, None, body)


# -- error lines --------------------------------------------------------------------------------

_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) \S+.*$", re.MULTILINE)
_EXCEPTION_LINE = re.compile(
    r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Fault)\b(?::.*)?$"
)
_EXUNIT_TEST = re.compile(r"^\s*\d+\) test .+$", re.MULTILINE)
_JS_FAIL = re.compile(r"^\s*(?:×|✗|✕|FAIL)\s+\S.*$", re.MULTILINE)
_ERROR_LINE = re.compile(
    r"^\s*(?:error(?:\[\w+\])?:|Error:|ERROR:|fatal:|FATAL:|✘ \[ERROR\]|E\s{2,}\S|FAIL:).*$",
    re.MULTILINE,
)
_ELIXIR_CRASH = re.compile(r"^\s*\*\* \(\w+\).*$", re.MULTILINE)
_ANY_EXCEPTION = re.compile(r"^.*\b\w+(?:Error|Exception)\b: .+$", re.MULTILINE)
# Compiler and linter style: `path/to/file.ext:LINE[:COL]: message` (also dialyzer's `…:58:13:pattern_match`).
_LOCATED = re.compile(r"^[^\s:]*[\w/]\.\w{1,6}:\d+(?::\d+)?:\s*\S.*$", re.MULTILINE)
_FAILURE_SUMMARY = re.compile(
    r"^.*\b(?:[1-9]\d* failed|[1-9]\d* failures?|[1-9]\d* errors?)\b.*$", re.MULTILINE | re.IGNORECASE
)


def error_line(body: str) -> str:
    """The most telling line of a failed command's output: a failing test, the exception that
    ended a traceback, an `error:` line, a failure count, or else the first line."""
    window = _scan_window(body)
    if "\\n" in window.split("\n", 1)[0]:
        # Output that arrived JSON-escaped (a hook's message): read its `\n` as line breaks.
        window = window.replace("\\n", "\n")
    failed = _PYTEST_FAILED.findall(window)
    if failed:
        return clip(failed[0])
    if _TRACEBACK in window:
        tail = window[window.rfind(_TRACEBACK):]
        for line in reversed(tail.splitlines()):
            if _EXCEPTION_LINE.match(line.strip()):
                return clip(line)
    test = _EXUNIT_TEST.search(window)
    if test:
        return clip(test.group(0))
    crashes = _ELIXIR_CRASH.findall(window)
    if crashes:
        return clip(crashes[-1])  # the innermost `** (SomeError)` is the cause
    for pattern in (_JS_FAIL, _ERROR_LINE, _ANY_EXCEPTION, _LOCATED, _FAILURE_SUMMARY):
        found = pattern.search(window)
        if found:
            return clip(found.group(0))
    lines = [line.strip() for line in window.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    if lines[0].endswith(":") and len(lines) > 1:
        return clip(f"{lines[0]} {lines[1]}")  # "Pre-commit validation failed:" says what only on the next line
    return clip(lines[0])


# -- shell commands ----------------------------------------------------------------------------

_SHELL_TOOLS = {
    "bash", "shell", "exec_command", "execute_bash", "run_command", "run_shell_command", "terminal",
    "local_shell", "container.exec", "execute_command", "cmd", "powershell",
}
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_RUNNER_PROGRAMS = {
    "pytest": "pytest", "py.test": "pytest", "tox": "tox", "nox": "nox", "vitest": "vitest", "jest": "jest",
    "runtests.py": "runtests.py", "rspec": "rspec", "phpunit": "phpunit", "ctest": "ctest", "unittest": "unittest",
    "trial": "trial", "nosetests": "nosetests",
}
_RUNNER_SUBCOMMANDS = {
    ("mix", "test"), ("npm", "test"), ("yarn", "test"), ("pnpm", "test"), ("bun", "test"), ("go", "test"),
    ("cargo", "test"), ("make", "test"), ("make", "check"), ("deno", "test"), ("dotnet", "test"),
    ("gradle", "test"), ("gradlew", "test"), ("mvn", "test"), ("npm", "t"),
}
_LAUNCHERS = {"npx", "uvx", "bunx", "pnpx"}
_LAUNCHER_PAIRS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("bundle", "exec"), ("pdm", "run"),
                   ("hatch", "run"), ("pnpm", "exec"), ("yarn", "exec")}
_INSPECTION = {
    "ls", "cat", "head", "tail", "nl", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "find", "fd",
    "wc", "pwd", "echo", "which", "type", "file", "stat", "tree", "diff", "cmp", "test", "[", "true",
    "printf", "env", "whoami", "date", "du", "df", "find_file", "search_file", "search_dir", "goto",
    "scroll_down", "scroll_up", "open",
}
_READ_ONLY_SUBCOMMANDS = {
    "show", "status", "list", "ls", "log", "diff", "ready", "info", "view", "get", "search", "help",
    "version", "--version", "-v", "describe", "inspect", "ls-files", "branch", "remote", "rev-parse",
    "blame", "grep", "config", "outdated", "why", "tree", "check-ignore",
}


def _is_inspection(commands: list[list[str]]) -> bool:
    """Every simple command in the line only looks at things (`ls`, `sed -n`, `git status` …)."""
    if not commands:
        return True
    for raw in commands:
        words, targets = _split_redirects(raw)
        if targets:
            return False
        words = [w for w in words if "=" not in w or w.startswith("-")] or words
        verb = words[0].rsplit("/", 1)[-1] if words else ""
        if not words or verb in ("cd", "true", "set", "export"):
            continue
        if verb == "sed" and not any(w.startswith("-i") or w.startswith("--in-place") for w in words[1:]):
            continue
        if verb in _INSPECTION or verb in ("strings", "awk", "jq", "sort", "uniq", "cut", "tr", "xxd", "od", "hexdump"):
            continue
        if len(words) > 1 and words[1] in _READ_ONLY_SUBCOMMANDS:
            continue
        return False
    return True


_READ_VERBS = {"cat", "head", "tail", "nl", "less", "more", "bat", "view"}
_SEARCH_VERBS = {"grep", "egrep", "fgrep", "rg", "ag"}
_RUN_VERBS = {"python", "python3", "node", "ruby", "bash", "sh", "php", "perl"}
_SWE_COMMANDS = {"open", "create", "edit", "insert", "goto", "scroll_down", "scroll_up", "search_file",
                 "search_dir", "find_file", "submit"}
_WRAPPERS = {"sudo", "time", "timeout", "nice", "nohup", "env", "command", "exec", "xargs"}
_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
_PATHLIKE = re.compile(r"^[\w.~@+/-][\w.~@+,:/=-]*$")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def is_path(token: str) -> bool:
    """A word that names a file: no spaces, globs or variables, not an option or URL, and either a
    directory part or a file extension."""
    if not token or len(token) > 250 or token.startswith("-") or "://" in token:
        return False
    if not _PATHLIKE.match(token) or token in (".", "..", "/", "~"):
        return False
    if token.startswith("/dev/") or token.startswith("/proc/"):
        return False
    return "/" in token or bool(_EXTENSION.search(token))


def strip_heredocs(command: str) -> str:
    """The command lines without here-document bodies (the body is data, not commands)."""
    lines = command.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        for match in _HEREDOC.finditer(line):
            delimiter = match.group(2)
            while index < len(lines) and lines[index].strip() != delimiter:
                index += 1
            index += 1  # the delimiter line itself
    return "\n".join(kept)


def simple_commands(command: str) -> list[list[str]]:
    """The simple commands of a whole (possibly multi-line) command, here-documents removed."""
    return [list(words) for words in _parsed(command)]


@lru_cache(maxsize=4096)
def _parsed(command: str) -> tuple[tuple[str, ...], ...]:
    # Cached: the same command is parsed for its files, its inspection status and each time an
    # error is checked against later successes.
    return tuple(tuple(words) for line in strip_heredocs(command).split("\n") for words in _words(line))


def _words(command: str) -> list[list[str]]:
    """Simple commands (lists of words) of a shell line, split at operators; redirections kept
    as their own words. Unbalanced quotes fall back to splitting on whitespace."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    simple: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _OPERATORS:
            if current:
                simple.append(current)
            current = []
        else:
            current.append(token)
    if current:
        simple.append(current)
    return simple


@dataclass(frozen=True)
class _ShellTouch:
    path: str
    action: Literal["edited", "read"]
    how: str


def shell_touches(command: str) -> list[_ShellTouch]:
    """Files a shell command writes or reads, judged from its words alone."""
    touches: list[_ShellTouch] = []
    if "apply_patch" in command or "*** Begin Patch" in command:
        touches += [_ShellTouch(p, "edited", how) for p, how in patch_files(command)]
    for words in simple_commands(command):
        touches += _simple_command_touches(words)
    return touches


def _split_redirects(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the command's own words, the files its output is redirected into). Redirections of
    stderr (`2>`), to descriptors (`>&2`) or to /dev/null write no file worth naming."""
    plain: list[str] = []
    targets: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word in (">", ">>", ">|", "&>", "&>>"):
            stderr = bool(plain) and plain[-1].isdigit() and plain[-1] != "1"
            if stderr or (plain and plain[-1] == "1"):
                plain.pop()
            if index + 1 < len(words):
                target = words[index + 1]
                if not stderr and not target.startswith("&") and is_path(target):
                    targets.append(target)
            index += 2
            continue
        if word in ("<", "<<", "<<<", "<&", ">&", "<<-"):
            if word in (">&", "<&") and plain and plain[-1].isdigit():
                plain.pop()
            index += 2
            continue
        plain.append(word)
        index += 1
    return plain, targets


def _simple_command_touches(words: list[str]) -> list[_ShellTouch]:
    # Redirections write their target whatever the command is.
    plain, targets = _split_redirects(words)
    touches = [_ShellTouch(target, "edited", "written by shell redirect") for target in targets]
    while plain and ("=" in plain[0] and not plain[0].startswith("-") or plain[0] in _WRAPPERS):
        if plain[0] == "timeout" and len(plain) > 1:
            plain = plain[2:]
        else:
            plain = plain[1:]
    if not plain:
        return touches
    verb = plain[0].rsplit("/", 1)[-1]
    args = plain[1:]
    operands = [a for a in args if not a.startswith("-")]
    if verb == "sed":
        in_place = any(a.startswith("-i") or a.startswith("--in-place") for a in args)
        script_options = ("-e", "-f", "--expression", "--file")
        if any(a in script_options for a in args):
            # The script comes as an option's value: every other operand is a file.
            files = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in script_options)]
        else:
            # The first operand is the script (`sed -i '' 's/a/b/' f`: the empty suffix is not).
            files = [a for a in operands if a][1:]
        for path in files:
            if is_path(path):
                touches.append(_ShellTouch(path, "edited" if in_place else "read", "sed -i" if in_place else "sed"))
    elif verb == "perl" and any(a.startswith("-") and "i" in a.lstrip("-") for a in args):
        touches += [_ShellTouch(p, "edited", "perl -i") for p in operands[1:] if is_path(p)]
    elif verb == "tee":
        touches += [_ShellTouch(p, "edited", "tee") for p in operands if is_path(p)]
    elif verb in ("ed", "ex"):
        touches += [_ShellTouch(p, "edited", verb) for p in operands[:1] if is_path(p)]
    elif verb in _READ_VERBS:
        touches += [_ShellTouch(p, "read", verb) for p in operands if is_path(p)]
    elif verb == "rm":
        touches += [_ShellTouch(p, "read", "removed (rm)") for p in operands if is_path(p)]
    elif verb in _SEARCH_VERBS:
        touches += [_ShellTouch(p, "read", f"searched ({verb})") for p in operands[1:] if is_path(p)]
    elif verb in _RUN_VERBS and operands and is_path(operands[0]) and _EXTENSION.search(operands[0]):
        if "-c" not in args and "-m" not in args and "-e" not in args:
            touches.append(_ShellTouch(operands[0], "read", f"ran with {verb}"))
    return touches


_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_FILE = re.compile(r"^\+\+\+ (?:b/)?(.+?)(?:\t.*)?\s*$", re.MULTILINE)


def patch_files(patch: str) -> list[tuple[str, str]]:
    """(path, how) for each file a Codex-style patch or a unified diff changes."""
    found: list[tuple[str, str]] = []
    for action, path in _PATCH_FILE.findall(patch):
        found.append((path, {"Update": "updated", "Add": "added", "Delete": "deleted"}[action] + " (apply_patch)"))
    found += [(path, "moved here (apply_patch)") for path in _PATCH_MOVE.findall(patch)]
    if not found and ("\n+++ " in patch or patch.startswith("+++ ")):
        found += [(p, "patched") for p in _DIFF_FILE.findall(patch) if p != "/dev/null"]
    return found


_PIPE_TAIL = re.compile(r"\s*\|\s*(?:tail|head|grep|rg|less|more|cat|tee)\b.*$")
_CD_PREFIX = re.compile(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_STDERR = re.compile(r"\s*2>&1\s*")


def command_key(command: str) -> str:
    """A command with what does not change what it tests removed: here-document bodies, a `cd`
    prefix, `2>&1`, and a trailing `| tail` or `| grep` that only filters the output."""
    line = collapse(strip_heredocs(command))
    line = _CD_PREFIX.sub("", line)
    line = _STDERR.sub(" ", line)
    line = _PIPE_TAIL.sub("", line)
    return collapse(line)


def _program(words: list[str]) -> list[str]:
    """The words from the program on: environment assignments, wrappers (`sudo`, `timeout 60`)
    and launchers (`npx`, `uv run`, `python -m`) removed."""
    while words:
        verb = words[0].rsplit("/", 1)[-1]
        if "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
        elif verb == "timeout" and len(words) > 1:
            words = words[2:]
        elif verb in _WRAPPERS or verb in _LAUNCHERS:
            words = words[1:]
        elif len(words) > 1 and (verb, words[1]) in _LAUNCHER_PAIRS:
            words = words[2:]
        elif verb.startswith("python") and len(words) > 2 and words[1] == "-m":
            words = words[2:]
        else:
            return words
    return words


@lru_cache(maxsize=4096)
def suite_invocation(command: str) -> tuple[str, tuple[str, ...]] | None:
    """(runner, targets) when the command runs a test suite: `pytest tests/a.py::t` →
    ("pytest", ["tests/a.py::t"]), `cd x && mix test 2>&1 | tail` → ("mix test", [])."""
    for words in simple_commands(command):
        words = _program(words)
        if not words:
            continue
        verb = words[0].rsplit("/", 1)[-1]
        if verb in _RUNNER_PROGRAMS:
            return _RUNNER_PROGRAMS[verb], tuple(_targets(words[1:]))
        if len(words) < 2:
            continue
        sub = words[1]
        if verb in ("npm", "yarn", "pnpm", "bun") and sub == "run" and len(words) > 2 and words[2].startswith("test"):
            return f"{verb} run {words[2]}", tuple(_targets(words[3:]))
        if (verb, sub) in _RUNNER_SUBCOMMANDS:
            return f"{verb} {sub}", tuple(_targets(words[2:]))
    return None


def suite_runner(command: str) -> str | None:
    invocation = suite_invocation(command)
    return invocation[0] if invocation else None


def _targets(words: list[str]) -> list[str]:
    """Which tests a run selects: path- or id-like operands (options and their values left out)."""
    targets: list[str] = []
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
            continue
        if word.startswith("-"):
            # `-t NAME`, `-k EXPR`, `-m MARK`: the next word is the option's value.
            skip_value = word in ("-t", "-k", "-m", "-p", "-c", "--testNamePattern", "--grep", "--seed", "-n")
            continue
        if word in ("run", "--") or not ("/" in word or "::" in word or "." in word or "_" in word):
            continue
        targets.append(word)
    return targets


def resolves(error_key: str, success_key: str) -> bool:
    """Whether a later success of `success_key` answers an earlier failure of `error_key`: the
    same command, or the same test runner over the same tests or more (no target, or a target
    that is a prefix of each failing one)."""
    if error_key == success_key:
        return True
    failed = suite_invocation(error_key)
    if failed is None:
        return _retried(error_key, success_key)
    passed = suite_invocation(success_key)
    if passed is None or passed[0] != failed[0]:
        return False
    wanted, covered = failed[1], passed[1]
    if not covered:
        return True
    return all(any(w.startswith(c) for c in covered) for w in wanted) if wanted else False


def _retried(error_key: str, success_key: str) -> bool:
    """A retry of the same action with changed flags: the same program and subcommand, and either
    a file operand in common (`git add a b` failed, `git add -f b` passed) or the failed words
    extended (`git push` failed, `git push -u origin main` passed)."""
    failed, passed = _parsed(error_key), _parsed(success_key)
    if not failed or not passed:
        return False
    failed_words = [w for w in failed[0] if not w.startswith("-")]
    passed_words = [w for w in passed[0] if not w.startswith("-")]
    if len(failed_words) < 2 or failed_words[:2] != passed_words[:2]:
        return False
    shared = {w for w in failed_words[2:] if is_path(w)} & {w for w in passed_words[2:] if is_path(w)}
    return bool(shared) or passed_words[: len(failed_words)] == failed_words


_PASS_SUMMARY = re.compile(
    r"^.*(?:\b\d+ passed\b|\b\d+ tests?, 0 failures\b|Tests?\s+\d+ passed|^OK\b|\bRan \d+ tests?\b|"
    r"test result: ok|\ball tests passed\b).*$",
    re.MULTILINE | re.IGNORECASE,
)
_CRASHED = re.compile(r"^\s*\*\* \(\w+|^\s*(?:error|Error|ERROR)(?:\[\w+\])?:", re.MULTILINE)
_TEST_FAILED = re.compile(
    r"\b[1-9]\d* (?:failed|failures?|errors?)\b|^FAILED\b|^FAIL:|^FAILED \(|Tests?\s+\d+ failed", re.MULTILINE
)


def _test_verdict(outcome: _Outcome) -> tuple[bool | None, str]:
    """(passed, summary line) for a test command. Failures in the output win over a zero exit
    code (a pipe to `tail` hides the runner's own exit code); a pass needs a passing summary line
    or a known zero exit code. None: the output says neither (a run still going, a quiet runner)."""
    window = _scan_window(outcome.body)
    passed_lines = _PASS_SUMMARY.findall(window)
    summary = clip(passed_lines[-1].strip(" =-*"), 120) if passed_lines else ""
    if outcome.ok is False or _TEST_FAILED.search(window) or _CRASHED.search(window) or _TRACEBACK in window:
        return False, summary
    if passed_lines or outcome.exit_code == 0:
        return True, summary
    return None, summary


# -- the walk -----------------------------------------------------------------------------------

_EDIT_TOOLS = {
    "edit", "multiedit", "write", "notebookedit", "create", "insert", "str_replace", "write_file",
    "replace", "edit_file", "create_file", "append_file", "apply_diff", "search_replace", "patch",
}
_READ_TOOLS = {"read", "open", "view", "read_file", "cat", "glob", "grep", "ls", "list_dir", "list_directory",
               "search_file", "read_many_files", "search", "codebase_search", "file_search"}
_EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool", "text_editor"}
_TODO_TOOLS = {"todowrite", "todo_write", "update_plan", "todo", "write_todos"}
_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "absolute_path", "target_file", "file")
_STATUS = {
    "completed": "completed", "complete": "completed", "done": "completed",
    "in_progress": "in_progress", "in-progress": "in_progress", "active": "in_progress", "doing": "in_progress",
    "pending": "pending", "todo": "pending", "not_started": "pending", "open": "pending",
}


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
    """Accumulates facts over one pass of the messages."""

    def __init__(self) -> None:
        self.first_instruction: str | None = None
        self.latest_instruction: str | None = None
        self.constraints: list[str] = []
        self.files: dict[str, _FileState] = {}
        self.done: list[str] = []
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
        self.sessions: dict[str, tuple[ToolPart, str, str]] = {}
        """Codex exec sessions still running: session id → (part, command, output so far)."""
        self.said: list[str] = []
        """Sentences of the assistant text just before the current tool call: why it was made."""

    # -- messages --

    def message(self, message: Message) -> None:
        if message.summary or message.compaction is not None:
            return
        if message.role == "user":
            self.user(message)
            return
        prose = assistant_prose(message)
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
                self.said = list(sentences(_THOUGHT.sub("", part.text)))[:12]
            elif isinstance(part, ToolPart):
                self.tool(part)

    def user(self, message: Message) -> None:
        instruction = user_instruction(message)
        if instruction is None:
            return
        if self.first_instruction is None:
            self.first_instruction = instruction
        self.latest_instruction = instruction
        known = {c.casefold() for c in self.constraints}
        added = 0
        for sentence in constraint_sentences(user_prose(message)):
            if sentence.casefold() not in known and added < MAX_CONSTRAINTS_PER_MESSAGE:
                self.constraints.append(sentence)
                known.add(sentence.casefold())
                added += 1

    # -- tools --

    def tool(self, part: ToolPart) -> None:
        name = part.name.rsplit("__", 1)[-1].casefold()  # MCP tools arrive as mcp__server__tool
        args = part.input if isinstance(part.input, dict) else {}
        if name in _TODO_TOOLS or ("todos" in args and isinstance(args.get("todos"), list)):
            self.todo(args)
            return
        if name == "write_stdin":
            self.stdin(part, args)
            return
        if name == "apply_patch" or (name == "patch" and isinstance(part.input, str)):
            self.apply_patch(part)
            return
        command = _command_of(name, part.input)
        if command is not None:
            self.shell(part, name, command)
            return
        if name in _EDITOR_TOOLS:
            sub = str(args.get("command", "")).casefold()
            path = _path_of(args)
            if path:
                if sub == "view":
                    self.touch(path, "read", f"viewed ({part.name})")
                else:
                    self.edit(part, path, f"{sub or 'edited'} ({part.name})")
            return
        path = _path_of(args)
        if name in _EDIT_TOOLS:
            if name in ("create",) and path:
                self.open_file = path
            if path is None and name in ("edit", "insert"):
                path = self.open_file or _swe_file_from_output(part.result_text)
            if path:
                self.edit(part, path, _edit_how(name, part))
            return
        if name in _READ_TOOLS:
            if name == "open" and path:
                self.open_file = path
            paths = [path] if path else [p for p in args.get("paths", []) if isinstance(p, str)]
            for p in paths:
                self.touch(p, "read", {"grep": "searched (Grep)", "glob": "searched (Glob)"}.get(name, f"read ({part.name})"))
            return
        if part.state == "error":
            self.error(part.result_text, f"{part.name}", f"tool:{part.name}")

    def todo(self, args: dict[str, Any]) -> None:
        items = args.get("todos") if isinstance(args.get("todos"), list) else args.get("plan")
        if not isinstance(items, list):
            return
        latest: dict[str, str] = {}
        for item in items:
            if not isinstance(item, dict):
                continue
            text = item.get("content") or item.get("step") or item.get("text") or item.get("title")
            status = _STATUS.get(str(item.get("status", "pending")).casefold().replace(" ", "_"))
            if isinstance(text, str) and text.strip() and status is not None:
                latest[clip(text)] = status
        # A new list replaces the old one, but work finished earlier stays on record as done.
        kept = {text: status for text, status in self.todos.items() if status == "completed" and text not in latest}
        self.todos = {**kept, **latest}

    def shell(self, part: ToolPart, tool: str, command: str) -> None:
        display = clip(strip_heredocs(command), 200)
        if not display:
            return
        if display in self.commands:
            self.commands.remove(display)
        self.commands.append(display)
        outcome = _outcome(part)
        if outcome.ok is None and outcome.session is not None:
            self.sessions[outcome.session] = (part, command, outcome.body)
            return
        self.shell_finished(part.name, command, outcome)

    def stdin(self, part: ToolPart, args: dict[str, Any]) -> None:
        session = str(args.get("session_id", ""))
        pending = self.sessions.get(session)
        if pending is None:
            return
        call, command, so_far = pending
        outcome = _outcome(part)
        if outcome.ok is None:
            self.sessions[session] = (call, command, so_far + outcome.body)
            return
        del self.sessions[session]
        outcome.body = so_far + outcome.body
        self.shell_finished(call.name, command, outcome)

    def shell_finished(self, tool: str, command: str, outcome: _Outcome) -> None:
        key = command_key(command)
        words = simple_commands(command)
        swe = self.swe_command(tool, command, outcome)
        if swe:
            return
        display = f"`{clip(key, 160)}`"
        touches = shell_touches(command)
        if outcome.ok is not True:
            # A chain that failed may have failed after its first command ran: a file written
            # there (a script created with `cat > t.py <<EOF` and then run) was written all the
            # same. A single command that failed wrote nothing.
            first = _simple_command_touches(words[0]) if len(words) > 1 else []
            touches = [t for t in touches if t.action == "edited" and t in first]
        self.record_touches(touches)
        if suite_invocation(command) is not None:
            passed, summary = _test_verdict(outcome)
            if passed is None:
                self.add_done(f"Ran {display}")
            elif passed:
                self.success(key)
                # One Done item per test command: the latest run's numbers replace the earlier.
                self.done = [d for d in self.done if not d.startswith(f"Tests passed: {display}")]
                self.add_done(f"Tests passed: {display}" + (f" ({summary})" if summary else ""))
            else:
                self.error(outcome.body, f"{tool} {display}", key)
            return
        inspection = _is_inspection(words)
        if outcome.ok is False:
            # A search that finds nothing or a listing of a missing file is information, not a
            # failure the work is blocked on.
            if not inspection:
                self.error(outcome.body, f"{tool} {display}", key)
            return
        self.success(key)
        # Edits are on record as edits; reading commands did nothing worth a Done item.
        if not inspection and not any(t.action == "edited" for t in touches):
            self.add_done(f"Ran {display}")

    def record_touches(self, touches: list[_ShellTouch]) -> None:
        for touch in touches:
            if touch.action == "edited":
                self.edited(touch.path, touch.how)
            elif touch.how == "removed (rm)":
                self.removed(touch.path)
            else:
                self.touch(touch.path, "read", touch.how)

    def swe_command(self, tool: str, command: str, outcome: _Outcome) -> bool:
        """SWE-agent text actions (`open`, `create`, `edit N:M` …) sent through a bash tool."""
        head = command.lstrip().split("\n", 1)[0].split()
        if not head or head[0] not in _SWE_COMMANDS or tool.casefold() not in ("bash", "shell"):
            return False
        verb, rest = head[0], head[1:]
        if verb == "open" and rest:
            path = rest[0].strip("\"'")
            self.open_file = path
            self.touch(path, "read", "opened")
        elif verb == "create" and rest:
            path = rest[0].strip("\"'")
            self.open_file = path
            self.edited(path, "created")
        elif verb in ("edit", "insert"):
            target = self.open_file or _swe_file_from_output(outcome.body)
            if target is None:
                return True
            if outcome.ok is False or _SWE_EDIT_FAILED in outcome.body[:500]:
                self.error(outcome.body, f"{verb} `{target}`", target)
            else:
                self.edited(target, f"{verb} (SWE-agent)")
        elif verb == "search_file" and len(rest) > 1 and is_path(rest[-1]):
            self.touch(rest[-1].strip("\"'"), "read", "searched")
        elif verb == "submit":
            self.add_done("Submitted the changes (`submit`)")
        return True

    def apply_patch(self, part: ToolPart) -> None:
        patch = part.input if isinstance(part.input, str) else str(
            (part.input or {}).get("input") or (part.input or {}).get("patch") or ""
        )
        outcome = _outcome(part)
        files = patch_files(patch)
        if outcome.ok is False:
            target = files[0][0] if files else "patch"
            self.error(outcome.body, f"{part.name} `{target}`", target)
            return
        for path, how in files:
            self.edited(path, how)

    def edit(self, part: ToolPart, path: str, how: str) -> None:
        outcome = _outcome(part)
        failed = outcome.ok is False or _SWE_EDIT_FAILED in outcome.body[:500] or re.match(
            r"\s*(?:ERROR|Error)\b", outcome.body[:100]
        )
        if failed:
            self.error(outcome.body, f"{part.name} `{path}`", path)
            if path not in self.files:
                self.touch(path, "read", f"{part.name} failed")
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
            self.add_done(f"{'Created' if how.startswith(('created', 'added', 'File created')) else 'Edited'} `{path}`")
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

    def touch(self, path: str, action: Literal["read"], how: str) -> None:
        if path in self.files:
            return
        if sum(1 for s in self.files.values() if s.action == "read") >= MAX_READ_FILES:
            return
        self.files[path] = _FileState(action, {how: 1})

    def add_done(self, item: str) -> None:
        item = clip(item)
        if item in self.done:
            self.done.remove(item)
        self.done.append(item)
        del self.done[:-MAX_DONE]

    def success(self, key: str) -> None:
        self.success_log.append(key)
        if key in self.successes:
            self.successes.remove(key)
        self.successes.append(key)

    def error(self, body: str, source: str, key: str) -> None:
        text = error_line(body)
        if "Sibling tool call errored" in text:
            return  # a parallel call failed, not this one: its own error is recorded already
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
            done=list(self.done),
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


def _command_of(name: str, raw: Any) -> str | None:
    """The shell command of a shell tool call, or None for any other tool."""
    args = raw if isinstance(raw, dict) else {}
    if name not in _SHELL_TOOLS and not (name.endswith("bash") or name.endswith("shell")):
        return None
    value = args.get("command", args.get("cmd", raw if isinstance(raw, str) else None))
    if isinstance(value, list):
        words = [str(v) for v in value]
        # Codex `shell`: ["bash", "-lc", "the command"].
        if len(words) >= 3 and words[1] in ("-lc", "-c"):
            return words[2]
        return shlex.join(words)
    return value if isinstance(value, str) and value.strip() else None


def _path_of(args: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _edit_how(name: str, part: ToolPart) -> str:
    if name == "write" and part.result_text.startswith("File created"):
        return "created (Write)"
    if name == "create":
        return "created"
    return part.name


_SWE_FILE = re.compile(r"\[File: (.+?) \(\d+ lines total\)\]")


def _swe_file_from_output(text: str) -> str | None:
    match = _SWE_FILE.search(text[:2000])
    return match.group(1) if match else None


def extract_facts(messages: Sequence[Message]) -> Facts:
    """Facts about `messages` (oldest first). Compaction markers, summaries and synthetic text
    are skipped: they are contextfold's, not the conversation's."""
    walker = _Walker()
    for message in messages:
        walker.message(message)
    return walker.facts()

"""Needed-later recall and user instructions kept: what a compaction must carry across, measured.

Pure functions over a transcript's wire messages (OpenAI Chat, Anthropic Messages, or the corpus's
normalized lines with flat tool calls), a cut index `k` (messages[:k] is the compacted past) and the
text the model sees afterwards. No I/O, no contextfold imports: tests and other benchmarks use it
as is, and it judges every summarizer (ours, Claude Code's) by the same rules.

Definitions (issue 16):

- **Facts** are the working names an agent carries: file base names (`parser.py`, any path reduced
  to its last part, known source/doc/config extensions plus `Makefile`-like names), backticked
  identifiers (`` `parse_config` ``, `` `Session.view` ``; a span must look like code: an `_`, `.`,
  `:`, `/`, `-`, a digit or an inner capital — a backticked plain word is prose), test names
  (`test_x`, `TestX`) and exception names (`ValueError`, `…Exception`, `…Warning`, `…Interrupt`).
  A fact occurs in a text when the exact string stands there between non-word characters.
- **Needed facts at k**: facts the agent *used* in the `WINDOW` (60) messages from k on — in its
  own text, its tool-call arguments (decoded JSON strings) and the user's own words (see below),
  never tool outputs, thinking blocks, or harness text — that already occurred anywhere in the
  conversation before k (tool outputs included), and that are not in the system prompts (those
  survive any compaction, so carrying them is not a summary's job).
- **Recall** = the share of needed facts that occur in the text the model sees after the
  compaction (`seen`). None when nothing is needed.
- **The user's own messages**: user-role text that is not a tool result, not a named line (system
  or developer prompt, a compaction summary), and not harness text. Harness text, by rule, for any
  agent: a whole message that is one bracketed line (`[Request interrupted by user]`); a message
  holding a tagged block whose tag is a compound name (with `-` or `_`) naming a harness concern
  (system, reminder, command, stdout, stderr, caveat, notification, hook, environment, context,
  permission, instructions, example, bash): `<system-reminder>`, `<local-command-stdout>`,
  `<task-notification>`, `<environment_context>`, `<response_example>`, `<bash-input>` (a
  `<system-reminder>` block is dropped first and the rest of the message judged); a message that
  opens with text a harness writes (`HARNESS_OPENINGS`: Claude Code's local-command caveat, its
  continuation summary, a skill's base directory, `Unknown skill: …`, `Unknown slash command: …`,
  its compaction request; mini-swe-agent's and SWE-agent's format errors and command notices;
  OpenHands' headless nudge; the note an import makes of a tool result whose call is not in the file);
  the message right after a slash command (the prompt the command expands to, or its output);
  and a long message (≥ `INJECTED_MIN_CHARS`) put into the agent's running turn, right after its
  tool calls or their results (skill bodies, hook output, attachments, a subagent's prompt). A slash command (`<command-name>/x</command-name>`)
  is the user's only through its arguments: its words are `/x args`, none without arguments. A
  task wrapped in a plain tag (`<pr_description>`) is the user's. Identical openings count once.
  The same notion of harness text as `contextfold.compaction.prose.user_words`, stated here on
  its own so that the measure does not depend on the code it judges.
- **Opening** of a message: its first `OPENING_CHARS` (60) characters once markup tags and ANSI
  escapes are dropped and whitespace is collapsed. **Instructions kept** = the share of the user's
  own messages before k whose opening occurs verbatim (the same normalization applied) in `seen`.
- **Edited files**: base names of files the agent changed before k — edit/write/patch/create tool
  calls with a path argument (not `view` commands), `*** Update/Add File:` and `+++ b/` patch
  headers, and shell writes (`sed -i`, `perl -i`, `>`/`>>` redirections, `tee`). **Edited named** =
  the share whose base name occurs in `seen`.
- **Cuts**: at 40/60/80 % of the messages, the nearest boundary within a tenth of the transcript
  where the next message is the user's own; else the nearest clean step boundary (no tool call
  left unanswered, the next message not a tool result). Real compaction points are given by the
  caller (the index where the agent's own summary stood, summaries removed from the messages).

- **Noise** of the working set (issue 27): the share of the names a summary's working-set bullets
  list (`Files read/named`, `Tests`, `Identifiers`) that are not a real path or identifier of the
  session before the cut — by the rules `noise` states (well-formed, standing as a path or name in
  a call argument or a tool output, not a placeholder, sed expression, bare word, format property,
  system path nobody opened, or a run listed name by name). `SessionText` indexes a transcript once.

`measure(messages, k, seen)` gives all three shares with the lists of what was missed; `seen_text`
turns a rendered context (`get_context`'s messages and system) into the `seen` text.
"""

from __future__ import annotations

import bisect
import json
import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, Literal

WINDOW = 60
OPENING_CHARS = 60
INJECTED_MIN_CHARS = 1_000
FRACTIONS = (0.4, 0.6, 0.8)

Kind = Literal["system", "named", "user", "assistant", "call", "output"]
Message = dict[str, Any]


@dataclass(frozen=True)
class Piece:
    kind: Kind
    text: str


@dataclass(frozen=True)
class Share:
    """Which of `wanted` occur in the seen text."""

    wanted: tuple[str, ...]
    missed: tuple[str, ...]

    @property
    def kept(self) -> int:
        return len(self.wanted) - len(self.missed)

    @property
    def share(self) -> float | None:
        return self.kept / len(self.wanted) if self.wanted else None


@dataclass(frozen=True)
class CutMeasure:
    k: int
    recall: Share
    """Needed facts (in order of first use after k) and those missing from what the model sees."""
    instructions: Share
    """Openings of the user's own messages before k, and those missing."""
    edited: Share
    """Base names of files edited before k, and those not named."""


@dataclass(frozen=True)
class Cut:
    k: int
    label: str
    """"40%", or "40%,60%" when fractions meet at one boundary."""
    kind: Literal["user", "step"]
    """Whether messages[k] is the user's own message or the agent's next step."""


# -- reading messages ------------------------------------------------------------------------------


def pieces(message: Message) -> list[Piece]:
    """The message's text, by who wrote it: tool outputs, call arguments, the user's or agent's text."""
    role = message.get("role")
    name = message.get("name")
    if role in ("system", "developer") or (role == "user" and name in ("system", "developer")):
        return [Piece("system", t) for t in _texts(message.get("content"))]
    if role == "tool":
        return [Piece("output", t) for t in _texts(message.get("content"))]
    if role == "user" and isinstance(name, str):
        return [Piece("named", t) for t in _texts(message.get("content"))]
    out: list[Piece] = []
    own: Kind = "user" if role == "user" else "assistant"
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        if isinstance(block, str):
            out.append(Piece(own, block))
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "tool_result":
                out += [Piece("output", t) for t in _texts(block.get("content"))]
            elif kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
                out.append(Piece(own, block["text"]))
    for _, args in calls(message):
        out += [Piece("call", t) for t in _strings(args)]
    return out


def calls(message: Message) -> list[tuple[str, Any]]:
    """(tool name, decoded arguments) of each call the message makes; undecodable arguments stay a string."""
    found: list[tuple[str, Any]] = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        found.append((str(fn.get("name") or ""), _decode(fn.get("arguments"))))
    content = message.get("content")
    if message.get("role") == "assistant" and isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.append((str(block.get("name") or ""), block.get("input")))
    return found


def _call_ids(message: Message) -> tuple[list[str], list[str]]:
    """(ids of calls made, ids of calls answered) by this message."""
    made = [str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    answered = [str(message["tool_call_id"])] if message.get("role") == "tool" and "tool_call_id" in message else []
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                made.append(str(block.get("id")))
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                answered.append(str(block.get("tool_use_id")))
    return made, answered


def text_of(message: Message) -> str:
    """All of a message's text, whoever wrote it (a summary, a prompt, a reply)."""
    return "\n".join(p.text for p in pieces({**message, "role": "assistant", "name": None}))


def _decode(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [t for block in content for t in _texts(block.get("text") if isinstance(block, dict) else block)]
    return []


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def seen_text(messages: Sequence[Message], system: Any = None) -> str:
    """Everything a model reads in a rendered context (`get_context`'s messages and system), as text."""
    parts = [t for m in messages for t in (p.text for p in pieces(m))]
    if isinstance(system, str):
        parts.insert(0, system)
    elif isinstance(system, list):
        parts[:0] = [t for item in system for t in _texts(item.get("text") if isinstance(item, dict) else item)]
    return "\n".join(parts)


# -- facts -----------------------------------------------------------------------------------------

_EXTENSIONS = frozenset(
    "py pyi ipynb js jsx ts tsx mjs cjs json jsonl yaml yml toml ini cfg conf env md mdx rst txt html htm "
    "css scss sass less xml svg sql sh bash zsh fish ps1 bat c h cc cpp cxx hpp hh cs java kt kts scala go rs "
    "rb erb php pl swift m mm lua r jl ex exs eex heex leex erl hrl elm hs ml clj dart vue svelte astro gradle "
    "lock proto graphql gql tf hcl mk cmake patch diff csv tsv log".split()
)
_FILE = re.compile(r"(?<![\w.+-])([\w][\w.+-]*\.([A-Za-z][A-Za-z0-9]{0,9}))(?![\w(])")
_BARE_FILES = re.compile(r"(?<![\w.-])(Makefile|Dockerfile|Gemfile|Rakefile|Procfile|Justfile|Vagrantfile)(?![\w.])")
_BACKTICKED = re.compile(r"(?<!`)`([^`\n]{2,80})`(?!`)")
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->|/|-)[A-Za-z_$][\w$]*)*[!?]?")
_CODE_SHAPED = re.compile(r"[_.:/\-\d]|.[A-Z]")
_TEST = re.compile(r"(?<![\w.])(test_\w+|Test[A-Z0-9]\w*)(?!\w|\.[A-Za-z])")
_EXCEPTION = re.compile(r"(?<!\w)([A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Interrupt))(?!\w)")


def file_name(token: str) -> str | None:
    """`token`'s base name when it names a file, else None."""
    base = PurePosixPath(token.rstrip("/")).name if "/" in token else token
    match = _FILE.fullmatch(base)
    if match and match.group(2).lower() in _EXTENSIONS:
        return base
    return base if _BARE_FILES.fullmatch(base) else None


def facts_in(text: str) -> list[str]:
    """The facts `text` names, in order of appearance, each once."""
    found: dict[int, str] = {}
    for m in _FILE.finditer(text):
        if m.group(2).lower() in _EXTENSIONS:
            found.setdefault(m.start(), m.group(1))
    for m in _BARE_FILES.finditer(text):
        found.setdefault(m.start(), m.group(1))
    for m in _BACKTICKED.finditer(text.replace("```", "   ")):
        span = m.group(1).strip().lstrip("@").removesuffix("()")
        name = file_name(span)
        if name is None and _IDENTIFIER.fullmatch(span) and _CODE_SHAPED.search(span):
            name = span
        if name is not None:
            found.setdefault(m.start(), name)
    for pattern in (_TEST, _EXCEPTION):
        for m in pattern.finditer(text):
            found.setdefault(m.start(), m.group(1))
    return list(dict.fromkeys(found[i] for i in sorted(found)))


@lru_cache(maxsize=8_192)
def _bounded(fact: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(fact) + r"(?!\w)")


def occurs(fact: str, text: str) -> bool:
    """`fact` stands in `text` between non-word characters."""
    return fact in text and _bounded(fact).search(text) is not None


# -- the user's own messages -----------------------------------------------------------------------

_TAG = re.compile(r"</?[A-Za-z][\w.:-]*(?:\s[^<>]*)?/?>")
_BLOCK = re.compile(r"<([A-Za-z][\w.:-]*)(?:\s[^<>]*)?>.*?</\1\s*>", re.DOTALL)
_HARNESS_WORD = re.compile(
    r"system|reminder|command|stdout|stderr|caveat|notification|hook|environment|context|permission|instructions|"
    r"example|bash",
    re.IGNORECASE,
)
HARNESS_OPENINGS = (
    "Caveat: The messages below were generated",
    "This session is being continued from a previous conversation",
    "Base directory for this skill:",
    "Unknown skill: ",
    "Unknown slash command: ",
    "Your task is to create a detailed summary of the conversation so far",
    # mini-swe-agent and SWE-agent: format errors and command notices sent in the user's turn.
    "Please always provide EXACTLY ONE action",
    "The last command <command>",
    "Your output was not formatted correctly",
    "Your last output did not use any tool calls",
    "Your last output included multiple tool calls",
    "Your action could not be parsed properly",
    "Your bash command contained syntax errors and was NOT executed",
    "Your command ran successfully and did not produce any output",
    # OpenHands' headless runs: the nudge sent when the agent asks the user something.
    "Please continue working on the task on whatever approach you think is suitable",
    # contextfold's import of a tool result whose call is not in the file (a session continued from a plan).
    "[The result of tool call ",
    "[The error result of tool call ",
)
"""How text Claude Code, mini-swe-agent, SWE-agent and OpenHands write into the user's turn without a tag begins."""
_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>\s*(.*?)\s*</command-args>", re.DOTALL)
_NOTICE = re.compile(r"\[[^\[\]\n]{3,300}\]")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def normalize(text: str) -> str:
    """Markup tags and ANSI escapes dropped, whitespace collapsed: how openings are compared."""
    return " ".join(_TAG.sub(" ", _ANSI.sub("", text)).split())


def _harness_block(text: str) -> bool:
    return any(re.search(r"[-_]", m.group(1)) and _HARNESS_WORD.search(m.group(1)) for m in _BLOCK.finditer(text))


def _user_text(message: Message) -> str:
    return _REMINDER.sub("", "\n".join(p.text for p in pieces(message) if p.kind == "user"))


def _slash_command(text: str) -> str | None:
    """`/name args` for a slash command's message ('' without arguments), None for any other."""
    if "<command-name>" not in text:
        return None
    name, args = _COMMAND_NAME.search(text), _COMMAND_ARGS.search(text)
    if args is None or not args.group(1).strip():
        return ""
    return f"{name.group(1) if name else ''} {args.group(1)}".strip()


def _after_command(messages: Sequence[Message], i: int) -> bool:
    """messages[i] comes right after a slash command's message."""
    return i > 0 and messages[i - 1].get("role") == "user" and _slash_command(_user_text(messages[i - 1])) is not None


def _has_results(message: Message) -> bool:
    return any(p.kind == "output" for p in pieces(message))


def own_words(messages: Sequence[Message], i: int) -> str | None:
    """The user's own words in messages[i], normalized; None when it holds none (see the module doc)."""
    if messages[i].get("role") != "user":
        return None
    text = _user_text(messages[i]).strip()
    command = _slash_command(text)
    if command is not None:
        return normalize(command) or None
    if not text or _NOTICE.fullmatch(text) or text.startswith(HARNESS_OPENINGS) or _harness_block(text):
        return None
    if _after_command(messages, i):
        return None
    previous = messages[i - 1] if i > 0 else {}
    mid_turn = (
        _has_results(messages[i]) or (_has_results(previous) and not _user_text(previous)) or bool(calls(previous))
    )
    if mid_turn and len(text) >= INJECTED_MIN_CHARS:
        return None
    words = normalize(text)
    return words if any(c.isalnum() for c in words) else None


def instructions(messages: Sequence[Message], k: int | None = None) -> list[tuple[int, str]]:
    """(index, opening) of each of the user's own messages before `k`, identical openings once."""
    out: dict[str, int] = {}
    for i in range(len(messages) if k is None else k):
        words = own_words(messages, i)
        if words is not None:
            out.setdefault(words[:OPENING_CHARS].rstrip(), i)
    return [(i, opening) for opening, i in out.items()]


def opening_kept(opening: str, seen_normalized: str) -> bool:
    """The opening stands verbatim in the (normalized) seen text; a whole short message must end there too."""
    if opening not in seen_normalized:
        return False
    tail = r"(?!\w)" if len(opening) < OPENING_CHARS else ""
    return re.search(r"(?<!\w)" + re.escape(opening) + tail, seen_normalized) is not None


# -- edited files ----------------------------------------------------------------------------------

_EDIT_TOOL = re.compile(r"edit|write|patch|replace|create|insert", re.IGNORECASE)
_PATH_KEYS = ("file_path", "path", "filename", "file", "target_file", "notebook_path", "filePath")
_PATCH_HEADER = re.compile(r"^(?:\*\*\* (?:Update|Add) File: |\+\+\+ b/)(\S.*?)\s*$", re.MULTILINE)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n.*?\n\s*\2\s*(?:\n|$)", re.DOTALL)
"""A here-document: its body is data, not commands; what follows its marker on the line stays."""


def edited_files(messages: Iterable[Message]) -> list[str]:
    """Base names of the files these messages' tool calls changed, in order, each once.

    A call the agent refused before running it (Claude Code answers `<tool_use_error>File has not
    been read yet…`) changed nothing and is left out."""
    messages = list(messages)
    refused = _refused_calls(messages)
    found: list[str] = []
    for message in messages:
        for call_id, name, args in _identified_calls(message):
            if call_id is None or call_id not in refused:
                found += _edits(name, args)
    return list(dict.fromkeys(found))


def _identified_calls(message: Message) -> list[tuple[str | None, str, Any]]:
    """(call id, tool name, decoded arguments) of each call the message makes."""
    found: list[tuple[str | None, str, Any]] = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            fn = call.get("function") if isinstance(call.get("function"), dict) else call
            found.append((call.get("id"), str(fn.get("name") or ""), _decode(fn.get("arguments"))))
    content = message.get("content")
    if message.get("role") == "assistant" and isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.append((block.get("id"), str(block.get("name") or ""), block.get("input")))
    return found


def _refused_calls(messages: Iterable[Message]) -> set[str]:
    """Ids of the calls whose result is a tool error raised before the tool ran."""
    refused: set[str] = set()
    for message in messages:
        results: list[tuple[Any, Any]] = []
        if message.get("role") == "tool":
            results.append((message.get("tool_call_id"), message.get("content")))
        content = message.get("content")
        if isinstance(content, list):
            results += [
                (b.get("tool_use_id"), b.get("content"))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
        for call_id, output in results:
            text = output if isinstance(output, str) else " ".join(_strings(output))
            if isinstance(call_id, str) and text.lstrip().startswith("<tool_use_error>"):
                refused.add(call_id)
    return refused


_WINDOWS_PATH = re.compile(r"[A-Za-z]:[\\/]|\\\\")


def base_name(path: str) -> str:
    """A path's last part: after the last `/`, or, for a Windows path (`C:\\…`, `\\\\server\\…`),
    after the last `\\` or `/` as well."""
    if _WINDOWS_PATH.match(path):
        return re.split(r"[\\/]", path.rstrip("\\/"))[-1]
    return PurePosixPath(path).name


def _edits(name: str, args: Any) -> list[str]:
    out: list[str] = []
    if isinstance(args, dict) and _EDIT_TOOL.search(name) and args.get("command") != "view":
        for key in _PATH_KEYS:
            if isinstance(args.get(key), str) and args[key].strip():
                out.append(base_name(args[key].strip()))
                break
    for text in _strings(args):
        out += [base_name(m.group(1)) for m in _PATCH_HEADER.finditer(text)]
    shell = [args[k] for k in ("command", "cmd") if isinstance(args, dict) and isinstance(args.get(k), str)]
    if isinstance(args, str) and not out:
        shell.append(args)
    for command in shell:
        out += shell_writes(command)
    return out


def shell_writes(command: str) -> list[str]:
    """Base names of files a shell command writes: `sed -i`/`perl -i` targets, redirections, `tee`."""
    out: list[str] = []
    for words in _simple_commands(_HEREDOC.sub(r" \3\n", command.replace("\\\n", " "))):
        tool, rest = PurePosixPath(words[0]).name, words[1:]
        if tool in ("sed", "perl") and any(w.startswith(("-i", "-pi")) or w == "--in-place" for w in rest):
            out += [t for w in _operands(rest, script_first=tool == "sed") for t in _file_target(w)]
        elif tool == "tee":
            out += [t for w in rest if not w.startswith("-") for t in _file_target(w)]
        for i, word in enumerate(words[:-1]):
            if word in (">", ">>", "&>", ">|", "&>>"):
                out += _file_target(words[i + 1])
    return out


def _simple_commands(command: str) -> list[list[str]]:
    """The command's simple commands as shell words (quotes honoured), split at `;`, `&&`, `|`, newlines."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    try:
        for word in lexer:
            if word in (";", "&&", "||", "|", "&", "(", ")"):
                commands.append([])
            else:
                commands[-1].append(word)
    except ValueError:  # an unclosed quote: what was read so far still counts
        pass
    return [c for c in commands if c]


def _operands(words: list[str], *, script_first: bool) -> list[str]:
    """The file operands of `sed`/`perl` words: not flags, not `-e` scripts, not sed's bare script."""
    operands: list[str] = []
    scripted = False
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("-"):
            if word in ("-e", "--expression") or (len(word) > 1 and word[1] != "-" and word.endswith("e")):
                scripted = skip = True
        else:
            operands.append(word)
    return operands[1:] if script_first and not scripted else operands


def _file_target(target: str) -> list[str]:
    """[base name] when `target` looks like a file a command writes (a known extension, or a path)."""
    if not target or target.startswith(("&", "/dev/")):
        return []
    name = PurePosixPath(target).name
    return [name] if name and (file_name(name) is not None or "/" in target) else []


# -- cuts and the measure --------------------------------------------------------------------------


def cut_points(messages: Sequence[Message], fractions: Sequence[float] = FRACTIONS) -> list[Cut]:
    """Where to cut at each fraction (see the module doc); fractions that meet share one cut."""
    n = len(messages)
    valid, user = [], set()
    open_calls: set[str] = set()
    for k in range(n):
        if 0 < k and not open_calls and not _results_only(messages[k]):
            valid.append(k)
            if own_words(messages, k) is not None:
                user.add(k)
        made, answered = _call_ids(messages[k])
        open_calls.update(made)
        open_calls.difference_update(answered)
    cuts: dict[int, Cut] = {}
    for fraction in fractions:
        target = fraction * n
        near = [k for k in user if abs(k - target) <= max(1.0, n / 10)]
        pool = near or valid
        if not pool:
            continue
        k = min(pool, key=lambda c: (abs(c - target), c))
        label = f"{fraction:.0%}"
        if k in cuts:
            label = f"{cuts[k].label},{label}"
        cuts[k] = Cut(k, label, "user" if k in user else "step")
    return sorted(cuts.values(), key=lambda c: c.k)


def _results_only(message: Message) -> bool:
    if message.get("role") == "tool":
        return True
    ps = pieces(message)
    return bool(ps) and all(p.kind == "output" for p in ps)


def needed_facts(messages: Sequence[Message], k: int, window: int = WINDOW, system: Sequence[str] = ()) -> list[str]:
    """Facts used in messages[k:k+window] that occurred before k and are not in the system prompts."""
    used: list[str] = []
    for i in range(k, min(len(messages), k + window)):
        words = own_words(messages, i)
        texts = [p.text for p in pieces(messages[i]) if p.kind in ("assistant", "call")]
        for text in [*texts, *([words] if words else [])]:
            used += facts_in(text)
    before = "\n".join(p.text for m in messages[:k] for p in pieces(m) if p.kind not in ("system", "named"))
    prompts = "\n".join([*system, *(p.text for m in messages[:k] for p in pieces(m) if p.kind == "system")])
    return [f for f in dict.fromkeys(used) if occurs(f, before) and not occurs(f, prompts)]


def measure(
    messages: Sequence[Message], k: int, seen: str, *, window: int = WINDOW, system: Sequence[str] = ()
) -> CutMeasure:
    """Recall, instructions kept and edited files named at cut `k`, given what the model sees."""
    needed = needed_facts(messages, k, window, system)
    flat = normalize(seen)
    openings = [o for _, o in instructions(messages, k)]
    edited = edited_files(messages[:k])
    return CutMeasure(
        k=k,
        recall=Share(tuple(needed), tuple(f for f in needed if not occurs(f, seen))),
        instructions=Share(tuple(openings), tuple(o for o in openings if not opening_kept(o, flat))),
        edited=Share(tuple(edited), tuple(f for f in edited if not occurs(f, seen))),
    )


# -- the working set's noise (issue 27) ------------------------------------------------------------

WORKING_SET_LABELS = ("Files read: ", "Files named: ", "Tests: ", "Identifiers: ")
"""How the summary's working-set bullets begin (`contextfold.compaction.workingset`'s labels)."""
RUN_NAMES = 6
"""Names of one shape (digits aside) listed one by one beyond which the rest are a run's noise."""
RUN_MARK = " … "
_GROUP = re.compile(r"([^,{}\s]*)\{([^{}]*)\}")
"""A run of generated names written as one entry: `func_6_0 … func_6_150`."""
_PROSE: tuple[Kind, ...] = ("user", "assistant")
_SEP = "\n\x00\n"
_IDENT_GRAMMAR = re.compile(
    r"(?:--|[@$.:])?[A-Za-z_$][\w$]*(?:\(\))?(?:(?:\.|::|:|->|\?\.)[A-Za-z_$][\w$]*(?:\(\))?|-\w+)*(?:/\d+)?[!?]?"
)
_HASH = re.compile(r"[0-9a-f]{7,40}")
_ARITY = re.compile(r"[A-Za-z_][\w.?!]*/\d+(?:-\d+)?")
_PATH_PART = r"(?:[\w@+~.$-][\w@+~.$ -]*|:\w+|\[\w+\])"
"""A path's part: a name (spaces inside allowed), a route's `:param` or a directory's `[param]`."""
_PATH_GRAMMAR = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?[\\/]?(?:" + _PATH_PART + r"[\\/])*" + _PATH_PART + r"?[\\/]?")
_CAMEL_STEP = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_SED = re.compile(r"[sy]([/|#,:])(?:(?!\1).)*\1(?:(?!\1).)*\1[gimpIe\d]*")
_PLACEHOLDER = re.compile(r"(?i)(?:^|[\\/_.-])your(?:$|[\\/_.A-Z-])|_here$|(?:^|/)path/to(?:/|$)|^x{3,}$|[<>{}*]|YYYY")
_PROGRESS_SEGMENT = re.compile(r"(?=[^/\\]*[EF])(?=[^/\\]*\.)[.EFsx]{2,}(?=[\\/])")
_SYSTEM_ROOTS = (
    "/usr/",
    "/bin/",
    "/sbin/",
    "/etc/",
    "/lib/",
    "/lib64/",
    "/opt/",
    "/System/",
    "/Library/",
    "/Applications/",
    "/proc/",
    "/sys/",
    "/dev/",
    "/private/",
    "/snap/",
    "/nix/store/",
    "node:",
)
_PACKAGE_SEGMENT = re.compile(
    r"(?:^|[\\/])(?:site-packages|dist-packages|node_modules|\.venv|\.nvm|\.npm|\.cache|\.cargo|\.rustup|\.pyenv|\.m2|"
    r"\.gradle|\.rbenv|\.rvm|\.gem|\.nuget|\.pub-cache|Pods|DerivedData)(?:[\\/]|$)"
    r"|(?:^|[\\/])lib[\\/](?:python\d|ruby[\\/])|(?:^|[\\/])vendor[\\/]|(?:^|/)go/pkg/mod/"
)


@dataclass(frozen=True)
class Noise:
    """The working set's entries and those that are not a real name of the session."""

    entries: tuple[str, ...]
    noisy: tuple[str, ...]

    @property
    def share(self) -> float | None:
        return len(self.noisy) / len(self.entries) if self.entries else None


def working_set_entries(summary: str) -> list[tuple[str, str]]:
    """(name, label) of each name the summary's working-set bullets list, in order (a directory's
    group, `dir/{a, b}`, spelled out)."""
    entries: list[tuple[str, str]] = []
    for line in summary.splitlines():
        body = line.strip().removeprefix("- ")
        for label in WORKING_SET_LABELS:
            if body.startswith(label):
                # Files of one directory may share it: `src/app/{a.py, b.py}`.
                spelled = _GROUP.sub(lambda m: ", ".join(m.group(1) + n.strip() for n in m.group(2).split(",")), body)
                names = [e.strip().strip("`") for e in spelled[len(label) :].split(", ")]
                entries += [(name, label) for name in names if name]
    return entries


class SessionText:
    """A transcript's own text by kind — the user's and the agent's words (`prose`), call arguments
    (`call`), tool outputs (`output`); never system prompts or summaries — for asking where a name
    first stands, and how. Answers are cached: one transcript is measured at many cuts."""

    def __init__(self, messages: Sequence[Message]) -> None:
        parts: dict[str, list[str]] = {"prose": [], "call": [], "output": []}
        starts: dict[str, list[tuple[int, int]]] = {kind: [] for kind in parts}
        sizes = dict.fromkeys(parts, 0)
        for i, message in enumerate(messages):
            for piece in pieces(message):
                kind = "prose" if piece.kind in _PROSE else piece.kind
                if kind not in parts:
                    continue
                starts[kind].append((sizes[kind], i))
                parts[kind].append(piece.text)
                sizes[kind] += len(piece.text) + len(_SEP)
        self.text = {kind: _SEP.join(texts) for kind, texts in parts.items()}
        self.starts = starts
        self._first: dict[tuple[str, str, str], int | None] = {}

    def message_at(self, kind: str, position: int) -> int:
        starts = self.starts[kind]
        return starts[bisect.bisect_right(starts, (position, 1 << 60)) - 1][1]

    def piece_start(self, kind: str, position: int) -> int:
        """Where the piece of text (one message's words, one call, one output) holding `position` starts."""
        starts = self.starts[kind]
        return starts[bisect.bisect_right(starts, (position, 1 << 60)) - 1][0]

    def first(self, name: str, kind: str, how: str) -> int | None:
        """The message where `name` first stands in text of `kind`: `path` — as a path token (not
        inside a longer name or path, not continued by more name characters); `name` — as a name
        token (not part of a longer word, nor right after an escape's backslash); `code` — as a
        name token inside backticks or a fenced code block (prose). None when it never does."""
        key = (name, kind, how)
        if key not in self._first:
            self._first[key] = self._find(name, kind, how)
        return self._first[key]

    def _find(self, name: str, kind: str, how: str) -> int | None:
        text = self.text[kind]
        # A name right after a backslash is one only when that is not an escape (`\nFormat`); right
        # after an escape it is one (`{\n\tfw.mutex.Lock()`: code a tool printed as a string).
        before = r"(?<![\w.$-])" if how == "path" else r"(?:(?<![\w])|(?<=\\[ntr]))(?<!\\(?=[ntrbfux\d]))"
        # A path ends where no name character follows, or where a search's context line number does.
        after = r"(?:(?![\w-]|\.\w)|(?=-\d+[-:]))" if how == "path" else r"(?![\w$])"
        if how == "path" and name.startswith(("/", "\\")):
            before = r"(?<![\w.$\\/-])"
        for match in re.finditer(before + re.escape(name) + after, text) if name in text else ():
            if how == "code":
                line_start = text.rfind("\n", 0, match.start()) + 1
                fenced = text.count("```", self.piece_start(kind, match.start()), match.start()) % 2 == 1
                if not fenced and text.count("`", line_start, match.start()) % 2 == 0:
                    continue
            return self.message_at(kind, match.start())
        return None


def _is_path(entry: str, label: str = "") -> bool:
    """A path: in a file bullet, or with a separator (not an arity, `name/2`), or a file's extension."""
    if label.startswith("Files"):
        return True
    if _ARITY.fullmatch(entry):
        return False
    return "/" in entry or "\\" in entry or file_name(entry) is not None


def _code_shaped(entry: str) -> bool:
    return bool(re.search(r"[_.:/\-\d$@]|\(\)", entry) or _CAMEL_STEP.search(entry))


def _system_path(entry: str) -> bool:
    return entry.startswith(_SYSTEM_ROOTS) or _PACKAGE_SEGMENT.search(entry) is not None


def _before(index: int | None, k: int) -> bool:
    return index is not None and index < k


def real_entry(session: SessionText, k: int, entry: str, label: str = "") -> bool:
    """Whether a working-set entry is a real path or identifier of the session before cut `k`
    (the rules are in `noise`'s docstring)."""
    if RUN_MARK in entry:
        ends = entry.split(RUN_MARK)
        shaped = {re.sub(r"\d+", "#", end) for end in ends}
        return len(ends) == 2 and len(shaped) == 1 and all(real_entry(session, k, end, label) for end in ends)
    if _PLACEHOLDER.search(entry) or _SED.fullmatch(entry):
        return False
    if _is_path(entry, label):
        if not _PATH_GRAMMAR.fullmatch(entry) or "//" in entry or _PROGRESS_SEGMENT.match(entry):
            return False
        typed = _before(session.first(entry, "call", "path"), k)
        if _system_path(entry) and not typed:
            return False
        base = re.split(r"[\\/]", entry.rstrip("/\\"))[-1]
        if "." in base.strip(".") and file_name(base) is None:
            # An unknown extension that a longer name continues: cut mid-name (`adapters.p`).
            for kind in ("call", "output", "prose"):
                if re.search(re.escape(entry) + r"\w", session.text[kind]):
                    return False
        if typed or _before(session.first(entry, "output", "path"), k):
            return True
        rooted = entry.startswith(("/", "./", "../", "~/")) or re.match(r"[A-Za-z]:\\", entry) is not None
        return (rooted or file_name(base) is not None) and _before(session.first(entry, "prose", "path"), k)
    bare = entry.removesuffix("()")
    if _HASH.fullmatch(bare):
        return any(_before(session.first(bare, kind, "name"), k) for kind in ("call", "output", "prose"))
    if not _IDENT_GRAMMAR.fullmatch(bare) or not _code_shaped(bare):
        return False
    in_code = [session.first(bare, kind, "name") for kind in ("call", "output")] + [
        session.first(bare, "prose", "code")
    ]
    if not any(_before(i, k) for i in in_code):
        return False
    if re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+", bare):
        # A kebab word only ever followed by `:` is a property or key of a format (`margin-top: 0`),
        # one only ever between a property's `:` and its `;` a keyword of the style language.
        for kind in ("call", "output", "prose"):
            text = session.text[kind]
            for match in re.finditer(r"(?<![\w$-])" + re.escape(bare) + r"(?![\w-])(?!\s*:)", text):
                if session.message_at(kind, match.start()) >= k:
                    continue
                if _STYLE_BEFORE.search(text, max(0, match.start() - 200), match.start()) and _STYLE_AFTER.match(
                    text, match.end(), match.end() + 200
                ):
                    continue
                return True
        return False
    return True


_STYLE_BEFORE = re.compile(r"[a-z]\s*:(?!:)\s*[^;:{}\"'`<>\n]*$")
"""Before a word: a style property's `:` and the value so far (`justify-content: `)."""
_STYLE_AFTER = re.compile(r"[^;:{}\"'`<>\n]*[;}]")
"""After a word: the rest of a style value, to its `;` or `}`."""


def noise(session: SessionText, k: int, summary: str) -> Noise:
    """The working set's entries in `summary` (written at cut `k`) that are not a real name of the
    session. An entry is real when, by rule:

    - a path (listed as a file, or it has a `/` or `\\` — not an arity, `name/2` — or a file
      extension): well-formed (word characters, `.`, `-`, `@`, `+`, `~`, `$`, inner spaces, a
      route's `:param` or a directory's `[param]` between separators; no doubled separator; no
      leading segment of test-runner progress marks glued to it, `EE.E/usr/lib/…`); not a
      placeholder (`path/to/…`, `your_…`, `…_here`, `<file>`, `{name}`, `YYYY`, a glob's `*`); not
      a sed expression (`s/a/b/g`); not cut mid-name (an unknown extension that a longer name in
      the session continues: `adapters.p`); not a system or package path (`/usr/…`, `/opt/…`,
      `site-packages`, `node_modules`, `.venv`, …) unless a call argument holds it; and it stands
      as a path token (not inside a longer name; a search's context line, `a.js-48-`, ends it) in
      a call argument or a tool output before the cut — or in the user's or agent's words when it
      is rooted or names a file (`a/b` prose is not a path);
    - an identifier: shaped like code (an `_`, `.`, `:`, `-`, digit, `$`, `@`, `()` or a camelCase
      step: `def`, `None`, `POST` are words, not names), of identifier grammar (segments joined by
      `.`, `::`, `:`, `->`, `?.`, `-`; no spaces, quotes or markup: `<template>`, `Cmd+Shift+R`,
      `.take(limit` are not), not a placeholder; standing as a name token in a call argument, a
      tool output, or backticked or in a fenced code block in the user's or agent's words before
      the cut (a word only in plain prose is not code); a kebab-case word not only ever a property
      or key of a format (`margin-top:`) or a style declaration's value (`justify-content:
      space-between;`);
    - a run entry (`a_1 … a_150`): both ends real and of one shape.
    Beyond that, names of one shape (digits aside) listed one by one more than `RUN_NAMES` times are
    a run that should have been one entry: all but the first count as noise."""
    labelled = working_set_entries(summary)
    entries = [e for e, _ in labelled]
    noisy = [e for e, label in labelled if not real_entry(session, k, e, label)]
    shapes: dict[str, list[str]] = {}
    for entry in entries:
        shape = re.sub(r"\d+", "#", entry)
        if "#" in shape and RUN_MARK not in entry and entry not in noisy:
            shapes.setdefault(shape, []).append(entry)
    for members in shapes.values():
        if len(members) > RUN_NAMES:
            noisy += members[1:]
    return Noise(tuple(entries), tuple(dict.fromkeys(noisy)))


__all__ = [
    "FRACTIONS",
    "INJECTED_MIN_CHARS",
    "OPENING_CHARS",
    "WINDOW",
    "RUN_MARK",
    "RUN_NAMES",
    "WORKING_SET_LABELS",
    "Cut",
    "CutMeasure",
    "Noise",
    "Piece",
    "SessionText",
    "Share",
    "calls",
    "cut_points",
    "edited_files",
    "facts_in",
    "file_name",
    "instructions",
    "measure",
    "needed_facts",
    "noise",
    "normalize",
    "occurs",
    "opening_kept",
    "own_words",
    "pieces",
    "real_entry",
    "seen_text",
    "shell_writes",
    "text_of",
    "working_set_entries",
]

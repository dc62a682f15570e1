"""What people wrote, read for the summary: the user's own words, the rules they stated, and the
assistant's prose, decisions and announced plans.

`user_words` decides which user-role text the user wrote: not a tool result, not what a harness
puts in the user's turn (system reminders, hook and command output, notices, continuation
prompts, project instruction files — by each agent adapter's `injected_prefixes` and, for any
agent, a turn made only of tagged blocks named as harness output, or one bracketed line, or the
prompt a slash command expands to, which the harness puts in the turn right after the command,
or a long text put into the agent's running turn right after its tool calls), and for a slash
command only its arguments. The same notion as the recall measure's (`benchmarks/_recall.py`).
Pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from contextfold.compaction.agents import AgentAdapter
from contextfold.compaction.agents import adapters as registered_adapters
from contextfold.compaction.agents.text import clip, collapse
from contextfold.domain import FilePart, Message, TextPart
from contextfold.formats.base import instruction_role
from contextfold.names import ORPHAN_RESULT_END

MAX_INSTRUCTION_CHARS = 400


# -- small text helpers -------------------------------------------------------------------------


def names_path(text: str, path: str) -> bool:
    """`text` names exactly `path`: the string appears and is not part of a longer path
    (`src/a.py` is not named by `src/a.py.bak` or `lib/src/a.py`)."""
    pattern = r"(?<![\w./-])" + re.escape(collapse(path)) + r"(?![\w/-]|\.\w)"
    return re.search(pattern, text) is not None


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


def prose(text: str) -> str:
    """Text without fenced code blocks: rules and decisions live in prose, not in code."""
    return _FENCE.sub("\n", text)


def fenced_blocks(text: str) -> list[str]:
    """The fenced code blocks of `text`, each without its fences and language tag."""
    blocks = (block.group(0).removeprefix("```") for block in _FENCE.finditer(text))
    return [block.partition("\n")[2].removesuffix("```") for block in blocks]


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)|(?<=[。！？；])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+•>]|\d+[.)]|#+)\s*")


def sentences(text: str) -> Iterable[str]:
    """Sentences of prose, list markers and emphasis stripped. Lines are never joined: in
    markdown a line break ends a thought as often as a full stop does."""
    for line in prose(text).splitlines():
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


def user_instruction(
    message: Message, adapters: Sequence[AgentAdapter] | None = None, previous: Message | None = None
) -> str | None:
    """What the user asked in this message (clipped), or None when it carries no instruction of
    theirs. `previous`: the message just before it, when known (see `user_words`)."""
    words = user_words(message, adapters, previous)
    return clip(words, MAX_INSTRUCTION_CHARS) if words is not None else None


def expands_command(previous: Message | None, adapters: Sequence[AgentAdapter] | None = None) -> bool:
    """`previous` is a slash command the user ran (`<command-name>/review</command-name>`): the
    user-role text right after it is the prompt the command expands to (its Markdown file, a
    built-in prompt such as `/init`'s, a skill body) or its output — the harness's, not the user's."""
    if previous is None or previous.role != "user" or previous.summary or previous.compaction is not None:
        return False
    adapters = registered_adapters() if adapters is None else adapters
    return _slash_command(_user_text(previous, adapters).strip(), adapters) is not None


# A turn made only of tagged blocks the harness writes (`<system-reminder>…`, `<local-command-stdout>`,
# `<task-notification>`, `<environment_context>`): the tag names say who wrote them, whatever the
# agent. A turn that wraps prose in one task tag (`<pr_description>`, `<issue>`) is the task itself.
_TAGGED_ONLY = re.compile(r"^(?:\s*<([A-Za-z][\w -]*)(?:\s[^>]*)?>.*?</\1>)+\s*$", re.DOTALL)
_TAG_NAME = re.compile(r"<([A-Za-z][\w -]*)(?:\s[^>]*)?>")
_HARNESS_TAG = re.compile(
    r"system|reminder|command|stdout|stderr|caveat|notification|context|instructions|permissions|hook|"
    r"aborted|interrupt|^bash-",
    re.IGNORECASE,
)
_NOTICE = re.compile(r"^\[[^\[\]\n]{3,200}\]$")
"""A whole turn that is one bracketed line (`[Request interrupted by user]`): a harness notice."""
MAX_WORDS_CHARS = 4_000
"""What is kept of one message of the user's; the summary quotes less (see `userwords`)."""


def user_words(
    message: Message, adapters: Sequence[AgentAdapter] | None = None, previous: Message | None = None
) -> str | None:
    """The user's own words in this message, whitespace collapsed (at most `MAX_WORDS_CHARS`), or
    None when the message is not one the user wrote: a tool result, a summary or marker, text a
    harness put in the user's turn (reminders, hook and command output, notices, continuation
    prompts, project instruction files, the prompt a slash command expands to), or a slash command
    without arguments. `previous` is the message just before this one, when the caller walks a
    history: only it tells a command's expanded prompt from a request (`expands_command`)."""
    if message.role != "user" or message.summary or message.compaction is not None:
        return None
    if message.name in ("compact_summary", "system", "developer") or instruction_role(message) is not None:
        return None  # a summary, or a system/developer instruction sent mid-conversation
    adapters = registered_adapters() if adapters is None else adapters
    text = _user_text(message, adapters).strip()
    if not text:
        return None
    command = _slash_command(text, adapters)
    if command is not None:
        # A slash command: only its arguments are words the user typed.
        name, args = command
        return clip(f"{name} {args}".strip(), MAX_WORDS_CHARS) if args.strip() else None
    if expands_command(previous, adapters) or (len(text) >= INJECTED_MIN_CHARS and _mid_turn(previous)):
        return None
    # Text harnesses put in the user role that the user did not write: hook output, skill bodies,
    # project instruction files, interruption notices, continuation summaries, demonstrations.
    if text.startswith(tuple(prefix for adapter in adapters for prefix in adapter.injected_prefixes)):
        return None
    if _NOTICE.match(text) or _harness_blocks(text) or _orphan_result(text):
        return None
    # A task wrapped in one tag (`<pr_description>…</pr_description>`) reads better without it.
    text = _WRAPPER_TAG.sub(" ", text)
    return clip(text, MAX_WORDS_CHARS) or None


def harness_turn(message: Message, adapters: Sequence[AgentAdapter] | None = None) -> bool:
    """A user-role message the harness wrote whole, by its own shape: nothing but reminders, a
    notice, tagged harness blocks, or text opening as an adapter's `injected_prefixes` say (a
    format nag, hook output). Unlike `user_words`, it needs no neighbour: a slash command, or the
    prompt one expands to, is not one (the user asked for it)."""
    if message.role != "user" or message.summary or message.compaction is not None:
        return False
    if any(isinstance(p, FilePart) for p in message.parts):
        return False  # the user attached something
    adapters = registered_adapters() if adapters is None else adapters
    raw = "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic).strip()
    text = _user_text(message, adapters).strip()
    if not text:
        return bool(raw)  # only reminders
    if _slash_command(text, adapters) is not None:
        return False
    return (
        text.startswith(tuple(prefix for adapter in adapters for prefix in adapter.injected_prefixes))
        or bool(_NOTICE.match(text))
        or _harness_blocks(text)
        or _orphan_result(text)
    )


def _orphan_result(text: str) -> bool:
    """A tool result whose call is not in the history, kept by the import as user text."""
    return text.startswith("[The ") and text.partition("\n")[0].endswith(ORPHAN_RESULT_END)


_BLOCK = re.compile(r"\s*<([A-Za-z][\w -]*)(?:\s[^>]*)?>.*?</\1>\s*", re.DOTALL)


def _outer_tags(text: str) -> list[str] | None:
    """The names of the top-level tagged blocks the text is made of, in order; None when anything
    stands outside a block."""
    names: list[str] = []
    position = 0
    while position < len(text):
        block = _BLOCK.match(text, position)
        if block is None:
            return None
        names.append(block.group(1))
        position = block.end()
    return names


def _harness_blocks(text: str) -> bool:
    """The text is only tagged blocks, each top-level one named as harness output (see
    `_HARNESS_TAG`); the tags inside a block (`<shell-id>` in `<bash-notification>`) are its own."""
    if not text.startswith("<") or not _TAGGED_ONLY.match(text[:20_000]):
        return False
    outer = _outer_tags(text[:20_000])
    return outer is not None and bool(outer) and all(_HARNESS_TAG.search(name) for name in outer)


INJECTED_MIN_CHARS = 1_000
"""A user-role message this long, put into the agent's running turn right after its tool calls,
is the harness's (a skill body, a subagent's prompt, hook output): people type between turns."""


def _mid_turn(previous: Message | None) -> bool:
    """`previous` is the agent's message that made tool calls: what follows is inside its turn."""
    return previous is not None and previous.role == "assistant" and bool(previous.tool_parts)


def user_prose(
    message: Message, adapters: Sequence[AgentAdapter] | None = None, previous: Message | None = None
) -> str:
    """The user's own text in a message, for constraint detection ('' for injected text)."""
    adapters = registered_adapters() if adapters is None else adapters
    if user_instruction(message, adapters, previous) is None:
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


_INSTRUMENTAL = re.compile(
    r"\b(?:I['’]ll|I will|let['’]s|let me|we['’]ll|we will|I['’]m going to)\s+(?:now\s+)?use\s+(?:the\s+|a\s+|an\s+)?"
    r"(?:`[^`\n]{1,40}`|[\w.-]{1,30}(?:\s+[\w.-]{1,30})?)(?:\s+(?:command|tool|script|utility|editor|again)){0,2}"
    r"(?:\s+(?:to|for)\s+(?:see|check|find|look|locate|examine|inspect|search|view|open|read|list|print|show|"
    r"replace|edit|modify|change|rewrite|update|fix|patch|insert|remove|delete|create|write|run|execute|test|"
    r"verify|confirm|reproduce|navigate|explore|get|fetch|download|install|apply|perform)\b|(?:\s+or\s+\S+)?\s*[.!]?\s*$)",
    re.IGNORECASE,
)
"""The agent naming the tool for its next step (`Let's use find_file to see where it is.`, `I'll use
`sed` to replace the body.`, `I'll use `ed`.`): how it works, not a decision about the work."""


def is_decision(sentence: str) -> bool:
    if _DECISION.search(sentence):
        return bool(_CONTRAST.search(sentence)) or not _INSTRUMENTAL.search(sentence)
    return bool(_CONTRAST.search(sentence) and _CHOOSER.search(sentence))


_PLAN_HEADING = re.compile(
    r"\b(?:next|remaining|todo|to do|plan|steps|will|then|pending)\b|下一步|接下来|计划|待办|步骤", re.IGNORECASE
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.+\S)\s*$")
MAX_PLAN_STEPS = 8
_CHECKBOX = re.compile(r"^\[[ xX✓✔~>/-]\]\s")


def assistant_prose(message: Message, adapters: Sequence[AgentAdapter] | None = None) -> str:
    return written_prose(written(message), registered_adapters() if adapters is None else adapters)


def written(message: Message) -> str:
    """What the assistant wrote in `message` itself: its text parts, not the ones a harness added."""
    return "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.synthetic)


def written_prose(text: str, adapters: Sequence[AgentAdapter]) -> str:
    """An assistant's written text as prose: no code, no harness labels."""
    return assistant_text(prose(text), adapters).strip()


def assistant_text(text: str, adapters: Sequence[AgentAdapter]) -> str:
    """Assistant text without the labels harnesses put in it (`THOUGHT:`)."""
    for adapter in adapters:
        text = adapter.clean_assistant_text(text)
    return text


def plan_steps(text: str) -> list[str]:
    """List items that follow a line announcing next steps or a plan."""
    steps: list[str] = []
    collecting = False
    for line in text.splitlines():
        item = _LIST_ITEM.match(line)
        if item and _CHECKBOX.match(item.group(1)):
            continue  # a checklist is a plan of its own (`checklist`)
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


__all__ = [
    "MAX_INSTRUCTION_CHARS",
    "MAX_WORDS_CHARS",
    "assistant_prose",
    "assistant_text",
    "constraint_sentences",
    "expands_command",
    "fenced_blocks",
    "harness_turn",
    "is_decision",
    "is_rule",
    "names_path",
    "plan_steps",
    "prose",
    "sentences",
    "user_instruction",
    "user_prose",
    "user_words",
    "written",
    "written_prose",
]

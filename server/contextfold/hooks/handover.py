"""What an agent's own compaction summary is likely to lack, computed by code from the real history.

After Claude Code or Codex compacts, the model keeps the summary its own model wrote. Measured on
real compactions, such summaries drop edited files, the user's exact words and the names the agent
goes on to use. This builds the text a hook adds (`additionalContext`) from the session's stored
history with the compaction facts everyone shares (`compaction.facts`, `userwords`, `workingset`):

1. every file edited before the compaction, by the exact path the tool calls used;
2. the user's messages word for word, newest first (`userwords.quotes`, cited `[m12]`);
3. the latest error nothing later fixed, word for word;
4. the plan: the agent's latest todo list (or the steps it announced last);
5. the spilled outputs, one line each, with their ids for `read_output`;
6. the working set: the files, tests and identifiers the agent used, most relevant first, in
   whatever room the rest leaves;
7. one line saying the full history is searchable with `search_history` in this session;
8. what the import could not read of the transcript (`notes`: lines skipped, values kept as
   text), so the agent knows the history has a gap; never trimmed, given once.

No secret goes in: the history is read with its credentials and tokens redacted
(`compaction.secrets`), and so is the text written.

Bounded by `budget` tokens (`sizing`: a share of the window's free room after the agent's
compaction, within the `hook_context_min_tokens` and `hook_context_tokens` settings), and the
working set by `depth` (the names the whole budget would reach were nothing known, so what the
summary holds shrinks the handover instead of pulling in names further down): it takes what is left;
when even the rest does not fit, older outputs, then the plan's finished items, then the older
quotes' length, then the files' notes go, in that order. When the summary is known (`summary`),
an item it already holds is left out: a path it names, a quote whose opening it holds word for
word, a name it mentions. `sent` leaves out what an earlier handover of the same compaction gave.
Each item has a key (`Handover.keys`) so a later handover can tell what was already given.

Pure: messages in, text out; the caller counts with the session's counter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from contextfold.compaction import userwords, workingset
from contextfold.compaction.facts import Facts, collapse, extract_facts, names_path
from contextfold.compaction.secrets import redact_history
from contextfold.compaction.template import cite, from_root
from contextfold.domain import Message, Pin
from contextfold.tokens.counting import TokenCounter

HEADER = "contextfold: what the compaction summary may have left out, taken by code from this session's full history."
MAX_OUTPUTS = 12
"""Spilled outputs listed at most (the newest)."""
FILE_SHARE = 0.7
"""Of the working set's room, what files take first: file names are what an agent most often needs
again after a compaction. On the corpus's three real Claude Code compactions the summary plus the
handover kept 91 % of the needed facts with 0.4, 94 % with 0.55, 97 % with 0.7 and 0.8. Checked
again on the 15 real compactions of the six projects the budget was tuned on (issue 27), with the
SessionStart handover: 94.6 % with 0.5, 96.1 % with 0.6, 96.6 % with 0.7, 95.1 % with 0.8."""
QUOTE_SHARE = 0.35
"""Of the budget, the characters the user's words may take (4 characters a token), as in a summary."""


@dataclass(frozen=True)
class SpilledOutput:
    id: str
    label: str
    lines: int
    bytes: int


@dataclass(frozen=True)
class Handover:
    text: str
    """'' when there is nothing to add."""
    tokens: int
    keys: frozenset[str] = field(default_factory=frozenset)
    """What the text carries: `file:PATH`, `user:OPENING`, `error:TEXT`, `plan:TEXT`, `output:ID`, `name:NAME`."""
    ranked: tuple[tuple[str, str], ...] | None = None
    """The working set's ranking it chose from (`WorkingSet.ranked`), when it ranked one: a later
    handover of the same history may take it (`handover(ranked=…)`) instead of ranking again."""


@dataclass
class _Item:
    key: str
    line: str
    short: str | None = None
    """A shorter form for when the budget is tight (a file without its note, a quote's opening)."""


def handover(
    messages: Sequence[Message],
    *,
    session_id: str,
    counter: TokenCounter,
    budget: int,
    outputs: Sequence[SpilledOutput] = (),
    summary: str | None = None,
    sent: Collection[str] = (),
    root: str | None = None,
    notes: Sequence[str] = (),
    depth: int | None = None,
    ranked: Sequence[tuple[str, str]] | None = None,
) -> Handover:
    """The additional context for the compaction of `messages` (the stored history, oldest first).
    `root`: the agent's working directory; the working set names files under it relative to it.
    `notes`: what the import could not read (`importers.marks.problems`).
    `depth`: the working set's names worth handing over at all, as the tokens its most relevant
    names take when nothing is known (`DEPTH`); of those, only what the summary and `sent` lack is
    given, so what the summary holds leaves the handover smaller rather than reaching for names
    further down. None: the whole ranking.
    `ranked`: the working set's ranking of these same messages, from an earlier handover
    (`Handover.ranked`; ranking is most of a handover's time); None: rank them.
    Written from the history with its secrets redacted (`compaction.secrets`), as a summary is."""
    messages, redactor = redact_history(messages)
    facts = extract_facts(messages)
    known = _Known(summary)
    under = root.rstrip("/") + "/" if root and root.startswith("/") else None
    files = [i for i in _files(facts, under) if i.key not in sent and not known.path(i.key[5:])]
    quotes = [i for i in _quotes(facts, budget) if i.key not in sent and not known.opening(i.key[5:])]
    error = [i for i in _error(facts) if i.key not in sent and not known.text(i.key[6:])]
    declined = [i for i in _declined(facts) if i.key not in sent]
    plan = [i for i in _plan(facts) if i.key not in sent and not known.text(i.key[5:])]
    spilled = [i for i in _outputs(outputs) if i.key not in sent and not known.text(i.key[7:])]
    gaps = [_Item(f"note:{note}", f"- {note}") for note in notes]
    gaps = [i for i in gaps if i.key not in sent]
    closing = (
        f'The full history before the compaction is stored: search_history(session_id="{session_id}", '
        'query="…") finds any earlier message, hidden ones included (within="project": also this project\'s earlier sessions); read_output(id=…) reads a spilled output whole.'
    )
    sections = _Sections(files, quotes, error, declined, plan, spilled, gaps, under)
    fixed = sections.render(HEADER, closing, [])
    while counter.count(fixed) > budget and sections.trim():
        fixed = sections.render(HEADER, closing, [])
    room = budget - counter.count(fixed) - 8
    names: list[str] = []
    if room > 10:
        read = [f.path for f in facts.files if f.action == "read"]
        if ranked is None:
            ranked = workingset.working_set(messages, {f.path for f in facts.edited_files}, read).ranked
        names = _working_set(ranked, read, known, sent, counter, min(room, depth or workingset.MAX_TOKENS), root, depth)
    text = sections.render(HEADER, closing, names)
    while counter.count(text) > budget and names:
        names.pop()  # the least relevant bullet of the working set
        text = sections.render(HEADER, closing, names)
    # Only the names given are sent: a later handover may still give the ones trimmed away.
    keys = frozenset(i.key for i in sections.items()) | frozenset(_name_keys(names))
    ranking = tuple(ranked) if ranked is not None else None
    if not keys:
        return Handover("", 0, ranked=ranking)  # the summary holds it all, or it was all given already
    text = redactor.text(text)
    return Handover(text, counter.count(text), keys, ranking)


PINNED_HEADER = "contextfold: pinned in this session, word for word (the user asked that these never be forgotten):"


def pinned_block(pins: Sequence[Pin], history: Sequence[Message]) -> str:
    """The session's pins as a hook hands them back after the agent's own compaction: each note,
    and each pinned message's text (a tool call with its input and result), secrets redacted. Not
    trimmed to the handover's budget: pins are what must survive."""
    if not pins:
        return ""
    messages, redactor = redact_history(list(history))
    by_seq = {m.seq: m for m in messages}
    lines = [PINNED_HEADER]
    for pin in pins:
        if pin.first_seq is None or pin.last_seq is None:
            lines.append(f"- [{pin.id}] {redactor.text(pin.note or '')}")
            continue
        for seq in range(pin.first_seq, pin.last_seq + 1):
            message = by_seq.get(seq)
            if message is None or message.is_compaction:
                continue
            lines.append(f"- [{pin.id} {cite([seq])}] {message.role}: {_said(message)}")
    return "\n".join(lines)


def _said(message: Message) -> str:
    pieces = [message.text] if message.text.strip() else []
    for part in message.tool_parts:
        pieces.append(f"{part.name} {json.dumps(part.input, ensure_ascii=False)} → {part.result_text}")
    return "\n  ".join(pieces)


# -- items ---------------------------------------------------------------------------------------------


def _files(facts: Facts, under: str | None) -> list[_Item]:
    """The edited files, those under `under` (the working directory, with its `/`) written relative
    to it: a third of the tokens for the same files."""
    return [_Item(f"file:{touch.path}", f"- {from_root(touch.path, under or '')}") for touch in facts.edited_files]


def _quotes(facts: Facts, budget: int) -> list[_Item]:
    chars = max(userwords.OPENING_CHARS, int(budget * QUOTE_SHARE * userwords.CHARS_PER_TOKEN))
    chosen = userwords.quotes(facts.said, (), chars)
    items = []
    for quote, shown in reversed(chosen):  # newest first
        items.append(
            _Item(f"user:{quote.opening()}", "- " + quote.bullet(shown), "- " + quote.bullet(userwords.OPENING_CHARS))
        )
    return items


def _error(facts: Facts) -> list[_Item]:
    error = facts.unresolved_error
    if error is None:
        return []
    where = f" (from {error.source} {cite([error.seq])})".replace(" )", ")")
    return [_Item(f"error:{error.text}", f"- {error.text}{where}")]


def _declined(facts: Facts) -> list[_Item]:
    """The calls the user turned down, newest first: their decision (the harness's order to stop and
    wait, which came with it, is not passed on)."""
    items = []
    for declined in reversed(facts.declined):
        where = f" {cite([declined.seq])}".rstrip()
        items.append(_Item(f"declined:{declined.source}", f"- {declined.shown}{where}", f"- {declined.source}{where}"))
    return items


def _plan(facts: Facts) -> list[_Item]:
    labels = {"in_progress": "in progress", "pending": "to do", "completed": "done"}
    order = {"in_progress": 0, "pending": 1, "completed": 2}
    items = [
        _Item(f"plan:{text}", f"- [{labels.get(status, status)}] {text}")
        for status, text in sorted(facts.todos, key=lambda pair: order.get(pair[0], 3))
    ]
    if not items and facts.approved_plan is not None:
        plan, seq = facts.approved_plan
        items = [_Item(f"plan:{plan}", f"- [approved by the user] {plan} {cite([seq])}".rstrip())]
    if not items:
        items = [_Item(f"plan:{step}", f"- [to do] {step}") for step in facts.plan_steps]
    if not items and facts.intent is not None:
        items = [_Item(f"plan:{facts.intent[0]}", f"- [next] {facts.intent[0]} {cite([facts.intent[1]])}".rstrip())]
    return items


def _outputs(outputs: Sequence[SpilledOutput]) -> list[_Item]:
    newest = list(outputs)[-MAX_OUTPUTS:]
    return [
        _Item(f"output:{o.id}", f"- {o.id} — {o.label} ({o.lines:,} lines, {o.bytes:,} bytes)", f"- {o.id} — {o.label}")
        for o in reversed(newest)
    ]


def _working_set(
    ranked: Sequence[tuple[str, str]],
    read: Sequence[str],
    known: _Known,
    sent: Collection[str],
    counter: TokenCounter,
    budget: int,
    root: str | None,
    depth: int | None = None,
) -> list[str]:
    """Working-set bullets within `budget` tokens: files first (those the agent read, then those it
    named, by relevance) in `FILE_SHARE` of it, then tests and identifiers in the rest. Files under
    `root` are named relative to it (they are the longest names, and the agent works from there).
    With `depth`, only the names the first `depth` tokens of that order hold are candidates.
    `ranked`: the working set's ranking (`WorkingSet.ranked`); `read`: the files the calls read."""
    prefix = root.rstrip("/") + "/" if root and root.startswith("/") else None

    def fresh(name: str) -> bool:
        # A file under `root` is listed (and its key sent) relative to it: an earlier handover
        # gave it under that name, so it is looked up under both.
        return (
            f"name:{name}" not in sent
            and not (prefix is not None and f"name:{name.removeprefix(prefix)}" in sent)
            and not known.name(name)
        )

    files = [(path, "read") for path in read]
    files += [(n, k) for n, k in ranked if k in ("read", "file") and (n, "read") not in files]
    others = [(n, k) for n, k in ranked if k not in ("read", "file")]
    if depth is not None:
        files = _within(files, counter, int(depth * FILE_SHARE))
        others = _within(others, counter, depth - int(depth * FILE_SHARE))
    files = [(n, k) for n, k in files if fresh(n)]
    others = [(n, k) for n, k in others if fresh(n)]
    if prefix:
        files = [(n.removeprefix(prefix), k) for n, k in files]
    bullets = workingset.fit_working_set(
        workingset.WorkingSet(list(dict.fromkeys(files))), counter, int(budget * FILE_SHARE)
    )
    spent = sum(counter.count(b) for b in bullets)
    bullets += workingset.fit_working_set(workingset.WorkingSet(others), counter, max(0, budget - spent))
    if prefix and any(
        not name.startswith("/")
        for b in bullets
        for name, kind in (workingset.listed(b) or [])
        if kind in ("read", "file")
    ):
        bullets.insert(0, f"(file paths not starting with / are under {prefix})")
    return [f"- {b}" for b in bullets]


def _name_keys(bullets: Sequence[str]) -> list[str]:
    """The keys (`name:…`) of the names working-set bullets list (with or without their `- `)."""
    return [f"name:{name}" for bullet in bullets for name, _ in (workingset.listed(bullet.removeprefix("- ")) or [])]


def _within(names: list[tuple[str, str]], counter: TokenCounter, tokens: int) -> list[tuple[str, str]]:
    """The first of `names` that `tokens` hold, rendered as the working set renders them (files
    of one directory share a bullet, so a name's cost depends on its neighbours)."""
    bullets = workingset.fit_working_set(workingset.WorkingSet(list(dict.fromkeys(names))), counter, tokens)
    held = {name for bullet in bullets for name, _ in (workingset.listed(bullet) or [])}
    return [(name, kind) for name, kind in names if name in held]


# -- rendering and trimming ----------------------------------------------------------------------------


class _Sections:
    def __init__(
        self,
        files: list[_Item],
        quotes: list[_Item],
        error: list[_Item],
        declined: list[_Item],
        plan: list[_Item],
        outputs: list[_Item],
        gaps: list[_Item],
        under: str | None = None,
    ) -> None:
        self.files, self.quotes, self.error, self.declined = files, quotes, error, declined
        self.plan, self.outputs = plan, outputs
        self.under = under
        """The directory the edited files are written relative to, when some are."""
        self.gaps = gaps
        """What the import could not read: short, and never trimmed."""

    def items(self) -> list[_Item]:
        return [*self.files, *self.quotes, *self.error, *self.declined, *self.plan, *self.outputs, *self.gaps]

    def render(self, header: str, closing: str, names: list[str]) -> str:
        parts = [header]
        for title, items in (
            (self.files_title(), self.files),
            ("The user's own words, newest first (cited messages can be read back with search_history):", self.quotes),
            ("Latest error not fixed since:", self.error),
            ("Calls the user declined (their decision, not an error):", self.declined),
            ("The agent's plan:", self.plan),
            ("Outputs spilled to contextfold (read_output(id=…)):", self.outputs),
            ("What the import could not read of the transcript (the stored history has a gap there):", self.gaps),
        ):
            if items:
                parts.append(title + "\n" + "\n".join(i.line for i in items))
        if names:
            parts.append("Working set (files, tests and names used):\n" + "\n".join(names))
        parts.append(closing)
        return "\n\n".join(parts)

    def files_title(self) -> str:
        if self.under and any(not i.line.startswith("- /") for i in self.files):
            return f"Files edited before the compaction (paths not starting with / are under {self.under}):"
        return "Files edited before the compaction (exact paths):"

    def trim(self) -> bool:
        """Make the fixed part smaller by one step; False when nothing is left to take."""
        if len(self.outputs) > 3:
            self.outputs.pop()
            return True
        done = [i for i in self.plan if i.line.startswith("- [done]")]
        if done:
            self.plan.remove(done[-1])
            return True
        for item in [*reversed(self.quotes[1:]), *self.declined, *reversed(self.outputs), *reversed(self.files)]:
            if item.short is not None and item.line != item.short:
                item.line = item.short
                return True
        for items in (self.plan, self.outputs, self.declined):
            if items:
                items.pop()
                return True
        if len(self.quotes) > 1:
            self.quotes.pop()  # the oldest message
            return True
        if len(self.files) > 1:
            self.files.pop(0)  # the oldest edit; the newest are what the work is on
            return True
        return False


class _Known:
    """What the agent's summary already holds (nothing when it is not known)."""

    def __init__(self, summary: str | None) -> None:
        self.summary = summary or ""
        self.flat = collapse(self.summary).casefold()

    def path(self, path: str) -> bool:
        return bool(self.summary) and names_path(self.summary, path)

    def opening(self, opening: str) -> bool:
        return bool(self.summary) and collapse(opening).casefold() in self.flat

    def text(self, text: str) -> bool:
        return bool(self.summary) and collapse(text).casefold() in self.flat

    def name(self, name: str) -> bool:
        if not self.summary:
            return False
        return re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", self.summary) is not None


__all__ = ["HEADER", "Handover", "SpilledOutput", "handover"]

"""The rule-based digest of a run of tool calls: what each call asked and what it found.

A region's digest replaces the outputs in the view (and the calls' inputs, but the first one's),
so it has to carry what the agent would otherwise go back for: per call, the exact command, path
or pattern, what it wrote or sent (an edit's strings, a file's content, a task's prompt), and from
the result the lines that matter — an error's exact message, a test run's verdict, the matched
lines and file names of a search, the definitions and key values of a file. Each result line is
ranked:

1. errors and verdicts (`AssertionError: …`, `error[E0308]: …`, `3 failed, 12 passed`,
   `Process exited with code 2`, `Exit code 0`), the last ones of a result first, where a verdict sits;
2. search hits and file names (`src/app.py:12: def main`, `tests/test_api.py`);
3. definitions and key values (`def parse(…)`, `version = "2.3.1"`);
4. any other line with a letter or digit.

Every call gets one line, `- NAME ARGUMENT → BEST LINE`. The rest of the budget — a fifth of
what the digest replaces, as the seed's `summarize_region` asks of a model — is filled by rule:
every error and verdict first, then round-robin across the calls' sections (the result, and each
input the call line does not show), each section's next line in turn: its first and last lines
(`HEAD_TAIL_LINES` from each end), then hits, definitions and key values in their order, then the
other lines from both ends inwards. So one long search cannot crowd out another call's error, and
a long output or document shows how it began and how it ended. Kept lines are verbatim and in
their original order under their call; a line over `MAX_LINE_CHARS` comes in pieces, so a
one-line JSON reply shows its beginning and its end too, `…` marking where it is cut; `… N more
lines …` marks each stretch of lines left out. Harness wrapper lines (Codex's `Chunk ID:` /
`Wall time:` …) are never kept. The budget is counted in the caller's tokens and never exceeded;
when even one line per call does not fit, the middle calls give way to `… N more calls …`.

Deterministic and pure: the same parts and budget always give the same text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contextfold.domain import ToolPart
from contextfold.tokens.counting import TokenCounter

KEY_ARGUMENTS = (
    "command",
    "cmd",
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "url",
    "pattern",
    "query",
    "glob",
    "prompt",
    "description",
)
"""Input keys that name what a call was about, by preference."""
SEARCH_ARGUMENTS = ("pattern", "query", "glob", "regex")
"""Keys of a search: shown first, followed by ` in PATH` when the call names a path too."""
PATH_ARGUMENTS = ("path", "file_path", "directory", "dir", "cwd")
MAX_ARGUMENT_CHARS = 240
MAX_LINE_CHARS = 300
HEAD_LIMITS = ((MAX_ARGUMENT_CHARS, MAX_LINE_CHARS), (120, 120), (60, 60), (40, 0))
"""(argument, result line) characters of each call's line, tried in turn until they all fit
(0: the call alone, without its result)."""
_MAX_MISSES = 64
"""Ranked lines that did not fit, in a row, before filling stops (the rest are no shorter)."""
_PIECE_SLACK = 60
"""A long line is cut into pieces after the last space or comma within this many characters of the limit."""
HEAD_TAIL_LINES = 3
"""Lines from each end of a section taken before the rest of it (after errors and verdicts)."""

_ERROR = re.compile(
    r"^\s*(?:E\s+)?[\w.]*(?:Error|Exception|Exit|Interrupt)\b\s*(?::|$)"  # Python: `ValueError: …`
    r"|^\s*Traceback \(most recent call last\)"
    r"|^E\s{2,}\S"  # pytest's assertion details
    r"|\b(?:error|fatal|panic)(?:\[\w+\])?:"  # compilers, git, rust: `error[E0308]: …`
    r"|\b(?:FAILED|FAIL|ERROR|ERR!)\b"
    r"|No such file or directory|Permission denied|command not found|Segmentation fault"
    r"|\bnot found\b|\b[Cc]annot\b|\bUnable to\b|\bundefined reference\b"
    r"|(?:exited with|exit) (?:code|status) [1-9]|<returncode>[1-9]",
)
_TEST = re.compile(
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|tests?)\b"
    r"|^\s*(?:Ran \d+ tests?|OK(?: \(.*\))?$|FAILED \(|PASS\b|ok\s+\S|test result:|Tests?:\s+\d)"
    r"|\b(?:[Ee]xit(?:ed with)?|[Rr]eturn) (?:code|status):? ?-?\d+\b"  # an exit code, 0 included
    r"|^\s*(?:BUILD (?:SUCCESSFUL|FAILED)|Build (?:succeeded|failed)|All checks passed|Success: no issues)",
)
_HIT = re.compile(
    r"^\s*[\w@~./\\-]+\.\w{1,10}:\d+[:-]"  # grep -n / rg: `path:12:` or `path:12-`
    r"|^\s*(?:\./|/|~/)?(?:[\w@.-]+/)*[\w@.-]+\.\w{1,10}/?\s*$"  # a bare file name or path
    r"|^\s*(?:\./|/|~/)?(?:[\w@.-]+/)+\s*$",  # a directory
)
_DEFINITION = re.compile(
    r"^\s*(?:\d+\s*(?:→|\t|:|\|)\s*)?"  # a line number from a file read
    r"(?:(?:async\s+)?def|class|function|fn|func|pub\s+fn|export|interface|struct|impl|module|CREATE\s+TABLE)\b"
    r"|^\s*[\w.\"'-]+\s*[:=]\s*\S",
)
_NUMBERED = re.compile(r"^\d+(?:\s*(?:→|\t|:|\|)|$)")
_RULES = re.compile(r"^[=_*#~!-]{3,}\s*|\s*[=_*#~!-]{3,}$")
_WRAPPER = re.compile(
    r"^(?:Chunk ID|Wall time|Original token count|Process running with session ID)\b|^Output:\s*$"  # Codex
    r"|^</?output>$|^<returncode>0</returncode>$",  # mini-swe-agent (a failing return code stays)
)
_ERROR_RANK, _HIT_RANK, _VALUE_RANK, _PLAIN_RANK = 1, 2, 3, 4
_RESULT_INDENT, _INPUT_INDENT = "  ", "    "


@dataclass(frozen=True)
class _Line:
    rank: int
    position: int
    """Index among the section's lines: the kept lines are shown in this order."""
    text: str
    piece: int = 0
    """A line over `MAX_LINE_CHARS` comes in pieces of at most that many characters: its index."""
    last: bool = True
    """The line's last piece (or the whole line)."""


@dataclass
class _Section:
    """The lines of one result or one input that the digest may show, in their order."""

    label: str | None
    """None for the result (lines under the call); the argument's name for an input."""
    lines: list[_Line]
    total: int
    """Lines of the whole text, blank and repeated ones included (what `… N more lines …` counts)."""
    inline: bool = False
    """A one-line input, shown as `  NAME: VALUE`."""
    kept: list[bool] = field(default_factory=list)
    shown: int = 0
    """How many lines `kept` holds (the line on the head is never one of them)."""
    on_head: int | None = None
    """The line the call's own line shows: counted as kept between gaps, never repeated."""

    def __post_init__(self) -> None:
        self.kept = [False] * len(self.lines)

    @property
    def indent(self) -> str:
        return _RESULT_INDENT if self.label is None else _INPUT_INDENT

    def keep(self, i: int, keep: bool = True) -> None:
        if self.kept[i] != keep:
            self.kept[i] = keep
            self.shown += 1 if keep else -1

    def shows(self) -> bool:
        return self.shown > 0

    def covered(self, i: int) -> bool:
        return self.kept[i] or i == self.on_head

    def gaps_once(self, i: int) -> int:
        """The `… N more lines …` markers once line `i` is the first one shown: the stretches
        around it and the line on the head."""
        covered = sorted({i} | ({self.on_head} if self.on_head is not None else set()))
        edges = [-1, *covered, len(self.lines)]
        return sum(1 for a, b in zip(edges, edges[1:], strict=False) if b - a > 1)

    def render(self) -> list[str]:
        if not self.shows():
            return []
        if self.inline:
            return [f"{_RESULT_INDENT}{self.label}: {self.lines[0].text}"]
        out = [] if self.label is None else [f"{_RESULT_INDENT}{self.label}:"]
        last, skipped, joined = -1, False, False
        for i, line in enumerate(self.lines):
            if not self.covered(i):
                skipped = True
                continue
            if skipped and line.position - last > 1:  # whole lines left out (a cut inside one shows `…`)
                out.append(self.indent + _more(line.position - last - 1))
            shown = self.kept[i] and i != self.on_head
            if shown:
                if joined and not skipped:  # the next piece of the line just shown: verbatim, on it
                    out[-1] += line.text
                else:
                    out.append(self.indent + ("… " if line.piece else "") + line.text)
                follows = i + 1 < len(self.lines) and self.lines[i + 1].piece == line.piece + 1
                joined = follows and self._shown(i + 1)
                if not line.last and not joined:
                    out[-1] = out[-1].rstrip() + " …"
            else:
                joined = False
            last, skipped = line.position, False
        if skipped and self.total - last > 1:
            out.append(self.indent + _more(self.total - last - 1))
        return out

    def _shown(self, i: int) -> bool:
        return self.kept[i] and i != self.on_head


@dataclass
class _Call:
    head: str
    sections: list[_Section]
    """The inputs the head does not show (never the first call's: it stays in view), then the result."""


def _more(n: int) -> str:
    return f"… {n} more line{'s' if n != 1 else ''} …"


def digest(parts: Sequence[ToolPart], *, budget_tokens: int, counter: TokenCounter) -> str:
    """The digest of `parts` (one region, oldest first) in at most `budget_tokens` tokens.

    Always holds the header, then one line per call — shortened (`HEAD_LIMITS`) when they do not
    all fit, and below that the first and last calls around `… N more calls …` — then as many
    lines of the calls' results and inputs as the budget allows (see the module notes). The first
    call's input is never repeated: its call stays in view with the digest as its result.
    """
    first = header(len(parts))
    results = [_result(part.result_text) for part in parts]
    inputs = [_inputs(part.input) if i > 0 else [] for i, part in enumerate(parts)]
    for argument_chars, line_chars in HEAD_LIMITS:
        calls = [_call(p, argument_chars, line_chars, r, i) for p, r, i in zip(parts, results, inputs, strict=True)]
        heads = [c.head for c in calls]
        used = counter.count("\n".join([first, *heads]))
        if used <= budget_tokens:
            break
    else:
        return _without_middle(first, heads, budget_tokens, counter)
    taken = _fill(calls, budget_tokens - used, counter)
    text = _render(first, calls)
    # The estimates err high (a marker is priced at four digits): fill what they left, once more.
    spare = budget_tokens - counter.count(text)
    if taken and spare > 0:
        taken += _fill(calls, spare, counter)
        text = _render(first, calls)
    # Tokens do not add up exactly across line breaks: give back the last lines taken until it fits.
    over = counter.count(text) - budget_tokens
    while taken and over > 0:
        freed = 0
        while taken and freed < over:
            section, i, cost = taken.pop()
            section.keep(i, False)
            freed += max(cost, 1)
        text = _render(first, calls)
        over = counter.count(text) - budget_tokens
    return text


def header(n: int) -> str:
    """The first line of every region digest, whoever wrote it."""
    return f"[Summary of {n} tool call{'s' if n != 1 else ''}]"


def _render(first: str, calls: list[_Call]) -> str:
    out = [first]
    for call in calls:
        out.append(call.head)
        for section in call.sections:
            out.extend(section.render())
    return "\n".join(out)


def _fill(calls: list[_Call], budget: int, counter: TokenCounter) -> list[tuple[_Section, int, int]]:
    """Take lines into the sections' `kept`, best first: every error and verdict (the last ones
    of a result first), then round-robin across sections, each section's next line in its own
    order (`_order`). What a line costs includes the label of the input it opens and the
    `… N more lines …` markers it adds or removes. Returns what was taken, in order, with costs."""
    order: list[tuple[tuple[int, ...], _Section, int]] = []
    for c, call in enumerate(calls):
        for s, section in enumerate(call.sections):
            for turn, i in enumerate(_order(section)):
                rank = section.lines[i].rank
                key = (0, turn, c, s) if rank == _ERROR_RANK else (1, turn, c, s)
                order.append((key, section, i))
    order.sort(key=lambda t: t[0])
    marker = {indent: counter.count(indent + _more(9_999)) + 1 for indent in (_RESULT_INDENT, _INPUT_INDENT)}
    taken: list[tuple[_Section, int, int]] = []
    misses = 0
    for _, section, i in order:
        if section.kept[i]:
            continue
        cost = _cost(section, i, counter, marker[section.indent])
        if cost > budget:
            misses += 1
            if misses >= _MAX_MISSES:
                break
            continue
        misses = 0
        budget -= cost
        section.keep(i)
        taken.append((section, i, cost))
    return taken


def _cost(section: _Section, i: int, counter: TokenCounter, marker: int) -> int:
    """Tokens keeping line `i` adds to the digest (an estimate: the caller checks the sum)."""
    line = section.lines[i]
    if section.inline:
        return counter.count(f"{_RESULT_INDENT}{section.label}: {line.text}") + 1
    cost = counter.count(section.indent + line.text) + 1
    if not section.shows():  # the first line shown: the label, and every gap becomes a marker
        label = 0 if section.label is None else counter.count(f"{_RESULT_INDENT}{section.label}:") + 1
        return cost + label + section.gaps_once(i) * marker
    before = i > 0 and not section.covered(i - 1)
    after = i + 1 < len(section.lines) and not section.covered(i + 1)
    # A line inside a skipped stretch splits it (one marker more); one at its edge shortens it;
    # the last line of a stretch closes it (one marker less).
    return cost + (marker if before and after else -marker if not before and not after else 0)


def _order(section: _Section) -> list[int]:
    """The section's lines in the order they are taken: errors and verdicts from the end, then the
    `HEAD_TAIL_LINES` first and last, then hits, definitions and values in their order, then the
    rest from both ends inwards (the head before the tail at the same distance)."""
    n = len(section.lines)

    def key(i: int) -> tuple[int, int, int]:
        line = section.lines[i]
        if line.rank == _ERROR_RANK:
            return (0, -line.position, 0)
        distance = min(i, n - 1 - i)
        if distance < HEAD_TAIL_LINES:
            return (1, distance, i)
        if line.rank in (_HIT_RANK, _VALUE_RANK):  # a listing's or a search's lines: in their order
            return (2, i, 0)
        return (3, distance, i)

    return sorted((i for i in range(n) if i != section.on_head), key=key)


def _without_middle(top: str, heads: list[str], budget: int, counter: TokenCounter) -> str:
    """Header, the first and last calls' lines around `… N more calls …`, within `budget` if it can."""
    n = len(heads)
    costs = [counter.count(line) + 1 for line in heads]
    fixed = counter.count(top) + 1
    prefix = [0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)
    for keep in range(n - 1, -1, -1):
        first, last = (keep + 1) // 2, keep // 2
        note = f"… {n - keep} more call{'s' if n - keep != 1 else ''} …"
        estimate = fixed + prefix[first] + (prefix[n] - prefix[n - last]) + counter.count(note)
        if estimate > budget and keep:
            continue
        text = "\n".join([top, *heads[:first], note, *heads[n - last :]])
        if counter.count(text) <= budget or keep == 0:
            return text
    raise AssertionError("unreachable: keep == 0 always returns")


# -- one call --------------------------------------------------------------------------------------


def _call(part: ToolPart, argument_chars: int, line_chars: int, result: _Section, inputs: list[_Section]) -> _Call:
    """The call's line at these limits, with its sections (`result` from `_result`, `inputs` from
    `_inputs`: worked out once, whatever the limits)."""
    argument = key_argument(part.input, argument_chars)
    head = f"- {part.name} {argument}" if argument else f"- {part.name}"
    ranked = sorted(
        range(len(result.lines)),
        key=lambda i: (result.lines[i].rank, -i if result.lines[i].rank == _ERROR_RANK else i),
    )
    if part.state == "error":
        best = next((i for i in ranked if result.lines[i].rank == _ERROR_RANK), ranked[0] if ranked else None)
        found = None if best is None else result.lines[best]
        shown = f"error: {found.text if found.last else found.text.rstrip() + ' …'}" if found else "error: (no message)"
    else:
        # An error, a verdict or a hit, else the first line: what the output opens with.
        best = next((i for i in ranked if result.lines[i].rank <= _HIT_RANK), None)
        if best is None and result.lines:
            best = 0
        if best is not None:
            shown = result.lines[best].text if result.lines[best].last else result.lines[best].text.rstrip() + " …"
        elif part.attachments:
            shown = f"({len(part.attachments)} attachment{'s' if len(part.attachments) != 1 else ''})"
        else:
            shown = "(no output)"
    if line_chars == 0:
        result.on_head = None
        return _Call(head, [*inputs, result])
    result.on_head = best
    shown = _shorten(shown, line_chars)
    if part.spill_id:
        shown += f' [whole output: read_output(id="{part.spill_id}")]'
    return _Call(f"{head} → {shown}", [*inputs, result])


def _result(text: str) -> _Section:
    """The result's lines worth keeping, in order, each ranked."""
    seen: set[str] = set()
    kept: list[tuple[int, str]] = []
    raw_lines = text.splitlines()
    for position, raw in enumerate(raw_lines):
        stripped = raw.strip()
        content = _NUMBERED.sub("", stripped, count=1)
        if not any(c.isalnum() for c in content) or _WRAPPER.search(stripped) or stripped in seen:
            continue
        seen.add(stripped)
        kept.append((position, stripped))
    # A file read (most lines numbered, as `cat -n` and agents' read tools show them) is code or
    # text, not a report: its `raise ValueError` or "cannot" is content, so only definitions stand out.
    numbered = sum(1 for _, line in kept if _NUMBERED.match(line))
    rank = _file_rank if kept and numbered * 2 >= len(kept) else _rank
    lines = [piece for position, line in kept for piece in _pieces(rank(line), position, _undecorated(line))]
    return _Section(None, lines, len(raw_lines))


def _pieces(rank: int, position: int, text: str) -> list[_Line]:
    """`text` as one line, or a long one as pieces of at most `MAX_LINE_CHARS` characters that
    join back into it verbatim (cut after a space or a comma near the end where there is one), so
    a long output's beginning and end can both be shown; only the first piece keeps the rank."""
    if len(text) <= MAX_LINE_CHARS:
        return [_Line(rank, position, text)]
    chunks: list[str] = []
    start = 0
    while len(text) - start > MAX_LINE_CHARS:
        end = start + MAX_LINE_CHARS
        cut = max(text.rfind(" ", end - _PIECE_SLACK, end), text.rfind(",", end - _PIECE_SLACK, end))
        end = cut + 1 if cut > start else end
        chunks.append(text[start:end])
        start = end
    chunks.append(text[start:])
    return [
        _Line(rank if j == 0 else _PLAIN_RANK, position, chunk, j, j == len(chunks) - 1)
        for j, chunk in enumerate(chunks)
    ]


def _inputs(value: object) -> list[_Section]:
    """A section for each input the call's line does not show whole: the rest of a multi-line key
    argument (a heredoc, a prompt), and every other argument (an edit's strings, a file's content)."""
    if isinstance(value, str):
        rest = value.strip().split("\n")[1:]
        return [_input("input", rest, inline=False)] if rest else []
    if not isinstance(value, dict):
        return []
    shown = _key_fields(value)
    if not shown and len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) <= MAX_ARGUMENT_CHARS:
        return []  # the call's line shows the whole input as JSON
    out = []
    for name, item in value.items():
        if name in shown:
            rest = item.strip().split("\n")[1:] if isinstance(item, str) else []
            if rest:
                out.append(_input(str(name), rest, inline=False))
            continue
        lines = _value_lines(item)
        if lines:
            out.append(_input(str(name), lines, inline=len(lines) == 1))
    return [section for section in out if section.lines]


def _value_lines(item: object) -> list[str]:
    if item is None or item == "" or item == [] or item == {}:
        return []
    if isinstance(item, str):
        return item.strip().split("\n")
    if isinstance(item, list):
        return [_json(element) for element in item]
    if isinstance(item, dict):
        return [f"{key}: {_json(element)}" for key, element in item.items()]
    return [_json(item)]


def _json(item: object) -> str:
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def _input(label: str, raw_lines: list[str], *, inline: bool) -> _Section:
    seen: set[str] = set()
    lines: list[_Line] = []
    for position, raw in enumerate(raw_lines):
        stripped = raw.strip()
        if not any(c.isalnum() for c in stripped) or stripped in seen:
            continue
        seen.add(stripped)
        rank = _VALUE_RANK if _DEFINITION.search(stripped) else _PLAIN_RANK
        lines += _pieces(rank, position, stripped)
    return _Section(label, lines, len(raw_lines), inline and len(lines) == 1)


def _file_rank(line: str) -> int:
    """In a file read: the tool's own words (`The file … has been updated`) stand out, then definitions."""
    if not _NUMBERED.match(line):
        return _HIT_RANK
    return _VALUE_RANK if _DEFINITION.search(line) else _PLAIN_RANK


def _undecorated(line: str) -> str:
    """`line` without the rules around it (`==== 3 passed ====` → `3 passed`)."""
    return _RULES.sub("", line) or line


def _rank(line: str) -> int:
    if line.startswith("Traceback (most recent call last)"):
        return _VALUE_RANK  # the message at its end is what matters
    if _ERROR.search(line) or _TEST.search(line):
        return _ERROR_RANK
    if _HIT.search(line):
        return _HIT_RANK
    if _DEFINITION.search(line):
        return _VALUE_RANK
    return _PLAIN_RANK


def key_argument(value: object, limit: int = MAX_ARGUMENT_CHARS) -> str:
    """What a call asked, verbatim: its command or path, a search's pattern ` in PATH`; a long
    value is cut at its first line break or `limit` characters, marked `…`."""
    if isinstance(value, str):
        return _shorten(value, limit)
    if not isinstance(value, dict) or not value:
        return ""
    fields = _key_fields(value)
    if not fields:
        return _shorten(json.dumps(value, ensure_ascii=False, separators=(",", ":")), limit)
    if len(fields) == 2:  # a search ` in PATH`
        return f"{_shorten(value[fields[0]], limit)} in {_shorten(value[fields[1]], limit)}"
    return _shorten(value[fields[0]], limit)


def _key_fields(value: dict[Any, Any]) -> tuple[Any, ...]:
    """The keys `key_argument` shows: a search's pattern (and its path), else the first key
    argument, else the first named value; none when it shows the whole input as JSON."""
    search = next((k for k in SEARCH_ARGUMENTS if _named(value.get(k))), None)
    if search is not None and not any(_named(value.get(k)) for k in ("command", "cmd")):
        where = next((k for k in PATH_ARGUMENTS if _named(value.get(k))), None)
        return (search, where) if where else (search,)
    for key in KEY_ARGUMENTS:
        if _named(value.get(key)):
            return (key,)
    return next(((key,) for key, found in value.items() if _named(found)), ())


def _named(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _shorten(text: str, limit: int) -> str:
    """`text` verbatim up to its first line break and `limit` characters, `…` marking a cut."""
    text = text.strip()
    first = text.split("\n", 1)[0]
    cut = len(first) < len(text)
    if len(first) > limit:
        first, cut = first[:limit], True
    return f"{first} …" if cut else first


__all__ = ["HEAD_TAIL_LINES", "KEY_ARGUMENTS", "digest", "header", "key_argument"]

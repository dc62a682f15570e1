"""The rule-based digest of a run of tool calls: what each call asked and what it found.

A region's digest replaces the outputs in the view, so it has to carry what the agent would
otherwise go back for: per call, the exact command, path or pattern, and from the result the
lines that matter — an error's exact message, a test run's verdict, the matched lines and file
names of a search, the definitions and key values of a file. Each result line is ranked:

1. errors and test verdicts (`AssertionError: …`, `error[E0308]: …`, `3 failed, 12 passed`,
   `Process exited with code 2`), the last ones of a result first, where a verdict sits;
2. search hits and file names (`src/app.py:12: def main`, `tests/test_api.py`);
3. definitions and key values (`def parse(…)`, `version = "2.3.1"`);
4. any other line with a letter or digit, the first ones first.

Every call gets one line, `- NAME ARGUMENT → BEST LINE`; then the remaining budget goes to the
other ranked lines, best rank first and round-robin across calls within a rank, so one long
search cannot crowd out another call's error. Kept lines are shown verbatim (a long one cut at
the end, marked `…`), in their original order under their call. Harness wrapper lines (Codex's
`Chunk ID:` / `Wall time:` …) are never kept. When even one line per call does not fit, the
middle calls give way to `… N more calls …`.

Deterministic and pure: the same parts and budget always give the same text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

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
    r"|^\s*(?:Ran \d+ tests?|OK(?: \(.*\))?$|FAILED \(|PASS\b|ok\s+\S|test result:|Tests?:\s+\d)",
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


@dataclass(frozen=True)
class _Line:
    rank: int
    position: int
    """Index among the result's lines: the kept lines are shown in this order."""
    text: str


@dataclass
class _Call:
    head: str
    lines: list[_Line]
    """Ranked lines not shown in `head`, best first."""
    kept: list[_Line]


def digest(parts: Sequence[ToolPart], *, budget_tokens: int, counter: TokenCounter) -> str:
    """The digest of `parts` (one region, oldest first) in at most `budget_tokens` tokens.

    Always holds the header, then one line per call — shortened (`HEAD_LIMITS`) when they do not
    all fit, and below that the first and last calls around `… N more calls …` — then as many
    ranked result lines as the budget allows.
    """
    first = header(len(parts))
    for argument_chars, line_chars in HEAD_LIMITS:
        calls = [_call(part, argument_chars, line_chars) for part in parts]
        heads = [c.head for c in calls]
        used = counter.count("\n".join([first, *heads]))
        if used <= budget_tokens:
            break
    else:
        return _without_middle(first, heads, budget_tokens, counter)
    _fill(calls, budget_tokens - used, counter)
    text = _render(first, calls)
    # Tokens do not add up exactly across line breaks: give back the last lines taken until it fits.
    taken = sorted(
        (
            (line.rank != _ERROR_RANK, c.lines.index(line), line.rank, i, line)
            for i, c in enumerate(calls)
            for line in c.kept
        ),
        key=lambda t: t[:4],
    )
    while taken and counter.count(text) > budget_tokens:
        *_, i, line = taken.pop()
        calls[i].kept.remove(line)
        text = _render(first, calls)
    return text


def header(n: int) -> str:
    """The first line of every region digest, whoever wrote it."""
    return f"[Summary of {n} tool call{'s' if n != 1 else ''}]"


def _render(first: str, calls: list[_Call]) -> str:
    out = [first]
    for call in calls:
        out.append(call.head)
        out.extend(f"  {line.text}" for line in sorted(call.kept, key=lambda line: line.position))
    return "\n".join(out)


def _fill(calls: list[_Call], budget: int, counter: TokenCounter) -> None:
    """Take ranked lines into `kept`: every error and verdict first, then round-robin across
    calls, each call's next best line in turn."""
    order: list[tuple[bool, int, int, int, _Line]] = []
    for i, call in enumerate(calls):
        for turn, line in enumerate(call.lines):
            order.append((line.rank != _ERROR_RANK, turn, line.rank, i, line))
    order.sort(key=lambda t: t[:4])
    misses = 0
    for *_, i, line in order:
        cost = counter.count(line.text) + 2  # the line break and the indent
        if cost > budget:
            misses += 1
            if misses >= _MAX_MISSES:
                return
            continue
        misses = 0
        budget -= cost
        calls[i].kept.append(line)


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


def _call(part: ToolPart, argument_chars: int, line_chars: int) -> _Call:
    argument = key_argument(part.input, argument_chars)
    head = f"- {part.name} {argument}" if argument else f"- {part.name}"
    ranked = _ranked(part.result_text)
    if part.state == "error":
        best = next((line for line in ranked if line.rank == _ERROR_RANK), ranked[0] if ranked else None)
        shown = f"error: {best.text}" if best else "error: (no message)"
    else:
        # An error, a verdict or a hit, else the first line: what the output opens with.
        best = next((line for line in ranked if line.rank <= _HIT_RANK), None)
        best = best or min(ranked, key=lambda line: line.position, default=None)
        if best is not None:
            shown = best.text
        elif part.attachments:
            shown = f"({len(part.attachments)} attachment{'s' if len(part.attachments) != 1 else ''})"
        else:
            shown = "(no output)"
    if line_chars == 0:
        return _Call(head, ranked, [])
    rest = [line for line in ranked if line is not best]
    shown = _shorten(shown, line_chars)
    if part.spill_id:
        shown += f' [whole output: read_output(id="{part.spill_id}")]'
    return _Call(f"{head} → {shown}", rest, [])


def _ranked(text: str) -> list[_Line]:
    """The result's lines worth keeping, best first: by rank, then errors and verdicts from the
    end (where a traceback's message and a test summary sit), the others from the start."""
    seen: set[str] = set()
    kept: list[tuple[int, str]] = []
    for position, raw in enumerate(text.splitlines()):
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
    lines = [_Line(rank(line), position, _shorten(_undecorated(line), MAX_LINE_CHARS)) for position, line in kept]
    return sorted(lines, key=lambda line: (line.rank, -line.position if line.rank == _ERROR_RANK else line.position))


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
    search = next((value[k] for k in SEARCH_ARGUMENTS if _named(value.get(k))), None)
    if search is not None and not any(_named(value.get(k)) for k in ("command", "cmd")):
        where = next((value[k] for k in PATH_ARGUMENTS if _named(value.get(k))), None)
        shown = _shorten(search, limit)
        return f"{shown} in {_shorten(where, limit)}" if where else shown
    for key in KEY_ARGUMENTS:
        if _named(value.get(key)):
            return _shorten(value[key], limit)
    for found in value.values():
        if _named(found):
            return _shorten(found, limit)
    return _shorten(json.dumps(value, ensure_ascii=False, separators=(",", ":")), limit)


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


__all__ = ["KEY_ARGUMENTS", "digest", "header", "key_argument"]

"""The working set: the files, identifiers and tests the agent was working with.

After a compaction the agent goes on using names it met before: the module it was reading, the
function it grepped for, the test that failed. Those names are cheap to keep and costly to find
again, so the summary lists the ones that mattered most, within a fixed share of its budget
(`SHARE`, growing to `MAX_SHARE` when the other sections leave that room unused). Edited files
are not part of it: the summary names every one of them anyway. Paths under the project's root
are written relative to it.

Where names are found, and what one use of a name is worth:
- the user's words and the assistant's own text: a name in backticks (3), any other code-like
  word (1.5) — the agent named it;
- a tool call's arguments: paths, patterns, code (1);
- a tool's output: a name it shows, once per output (0.4; a file name 1) — seen, not yet used;
  exception names, and test names on a line that reports a failure, count as in the agent's text
  (a failing test is worth keeping, a passing one listed among hundreds is not);
- a file a tool read or searched: 2 more.
A use late in the history counts up to five times one at its start (`RECENCY`). An output showing
many names spreads its weight over them (`SPREAD_NAMES`); a name shown in most outputs is the
harness's (`exit_code`), and counts only for what the agent did with it; a name below `MIN_SCORE`
is not listed. Code-like means a path (absolute ones too, however deep), a `snake_case`,
`CamelCase`, `kebab-case` (in code), `dotted.name`, `name/2`, `UPPER_CASE` or `__dunder__` word,
or anything in backticks without spaces; ordinary words never qualify. Names the rest of the
summary already holds are not listed again.
Ties rank by first use, so the same history always gives the same list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contextfold.compaction.agents import ToolCall, pick
from contextfold.compaction.agents import adapters as registered_adapters
from contextfold.compaction.prose import assistant_prose, user_words
from contextfold.domain import Message
from contextfold.tokens.counting import TokenCounter

SHARE = 0.4
"""Of the summary's budget, what the working set always may take (1,800 tokens of 4,500): on the
corpus, 0.2 kept 86 % of the names needed later, 0.35 kept 92 %, 0.4 kept 94 %."""
MAX_SHARE = 0.7
"""What it may grow to when the other sections leave that much of the budget unused."""
MAX_TOKENS = 3_150
"""However large a budget the caller gives."""
OUTPUT_WEIGHT = 0.4
"""One tool output showing a name (counted once per output), against 1 for a use in a call."""
OUTPUT_FILE_WEIGHT = 1.0
"""A file name in an output (a listing, a search hit, a traceback) is more often opened next."""
READ_BONUS = 2.0
"""A file a tool read is one the agent opened on purpose, whatever words it used."""
RECENCY = 4.0
"""A use at the end of the history counts 1 + RECENCY times one at its start (growing with the
square of the position: what was used just before the cut matters most)."""
SPREAD_NAMES = 100
"""An output showing more names than this (a long listing, a test run's 400 `PASSED` lines) gives
each of them a share of what this many would get."""
MIN_SCORE = 0.3
"""What a name must score to be listed at all: once in a call, or in an output or two; not once
in a long listing long ago."""
MAX_OUTPUT_CHARS = 40_000
"""Of each tool output, what is read for names."""

_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_CODE_SPAN = re.compile(r"^[\w.:/@$#<>()\[\]{}*+!?=,'\"-]+$")
_WORD = re.compile(r"(?<![\w./:~<-])(?:[A-Za-z_:.]|~?/(?=[\w.]))[\w.:/-]*[\w)]|(?<![\w./:-])[A-Za-z_]\w")
_SNAKE = re.compile(r"^_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*$")
_CAMEL = re.compile(r"^[A-Z]?[a-z0-9]+(?:[A-Z][a-z0-9]+)+$|^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
_DOTTED = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+(?:\(\))?$")
_LINE_SUFFIX = re.compile(r"(?<=\w):\d+(?::\S*)?$")
"""`path.py:12` or `path.py:12:3:`: a place in a file; the name is the file's."""
_JUNK = re.compile(r"\w\.\.|//|^\.[A-Za-z0-9]+$")
"""Glued paths (`a.js../../x`), doubled slashes, a bare extension (`.json`)."""
_NOT_NAMES = frozenset({"e.g", "i.e", "etc", "vs."})
MIN_OUTPUTS_FOR_COMMON = 10
COMMON_SHARE = 0.3
"""A name in more than this share of the tool outputs is the harness's or the format's."""
_MARKUP = re.compile(r"</?[A-Za-z][\w-]*>")
"""A harness's tags around an output (`<returncode>`, `<tool_use_error>`): not the output's names."""
_KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)+$")
_ARITY = re.compile(r"^[A-Za-z_][\w.?!]*/\d+(?:-\d+)?$")
"""`name/2`: a function and its arity (Erlang, Elixir), not a path."""
_UPPER = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_DUNDER = re.compile(r"^__[A-Za-z][A-Za-z0-9_]*__$")
"""`__init__`, `__MODULE__`: a language's special names."""
_TEST = re.compile(r"\btest_\w{3,}|\b\w{3,}_test\b|\bTest[A-Z]\w+|\b[A-Z]\w+Tests?\b")
_FAILING = re.compile(r"FAIL|ERROR|Error|error:")
"""A line of output that reports a failure: the tests it names are worth keeping."""
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure)\b")
_FILE_EXTENSIONS = frozenset(
    """py pyi ex exs eex heex leex erl hrl js mjs cjs ts tsx jsx vue svelte rs go rb java kt kts scala c h
    cc cpp hpp cs swift m mm php pl sh bash zsh fish ps1 sql md rst txt json jsonl yaml yml toml ini cfg
    conf lock xml html htm css scss sass less gradle cmake mk dockerfile proto graphql tf lua r jl dart
    zig nim ml mli hs elm clj cljs edn ipynb csv tsv env""".split()
)


@dataclass(frozen=True)
class WorkingSet:
    ranked: list[tuple[str, str]]
    """(name, kind), most relevant first; kind is `file` (never an edited one), `test` or `name`."""

    def of_kind(self, kind: str) -> list[str]:
        return [name for name, k in self.ranked if k == kind]


@lru_cache(maxsize=16_384)
def is_file_name(word: str) -> bool:
    """A path, or a name whose extension is a known file type (`config.exs`, not `os.path`)."""
    if "://" in word or len(word) > 250 or not re.search(r"[A-Za-z]", word):
        return False
    base = word.rstrip("/").rsplit("/", 1)[-1]
    if "." in base and base.rsplit(".", 1)[1].casefold() in _FILE_EXTENSIONS:
        return True
    if "/" not in word or _ARITY.match(word):
        return False
    # A directory or an extensionless file: rooted, or deep enough not to be `a/b` prose.
    if word.startswith("/") and word.count("/") < 2:
        return False  # `/sessions`, `/div`: a route or a closing tag, not a file
    return word.startswith(("/", "./", "../", "~/")) or word.endswith("/") or word.count("/") >= 2


def _hit_file(word: str) -> str | None:
    """The file of a search hit or a place in it (`src/otel.erl:-spec`, `a.py:12:`), else None."""
    if ":" not in word[1:]:
        return None
    path = word.partition(":")[0]
    return path if "." in path and is_file_name(path) else None


@lru_cache(maxsize=16_384)
def _code_like(word: str, kebab: bool = False) -> bool:
    """`word` is shaped like code; `kebab`: count `kebab-case` too (in code, not in prose, where
    "read-only" is English)."""
    word = word.rstrip(".:,")
    if word.endswith(")") and not word.endswith("()"):
        word = word.rstrip(")")  # `run(__MODULE__)`: the name, not the call's closing bracket
    if len(word) < 3:
        return False
    if is_file_name(word) or _hit_file(word):
        return True  # a path may be long: a deep absolute one is often over 80 characters
    if len(word) > 80:
        return False
    core = word[:-2] if word.endswith("()") else word
    return bool(
        _DUNDER.match(core)
        or (kebab and _KEBAB.match(core))
        or _ARITY.match(core)
        or _SNAKE.match(core)
        or _CAMEL.match(core)
        or _DOTTED.match(core)
        or _UPPER.match(core)
    )


class _Scores:
    def __init__(self, size: int) -> None:
        self.size = max(size, 1)
        self.score: dict[str, float] = {}
        self.kind: dict[str, str] = {}
        self.at = 0
        self.outputs = 0
        """Tool outputs read so far."""
        self.shown: dict[str, tuple[int, float]] = {}
        """Per name: in how many outputs it stood, and what they added to its score."""

    def add(self, term: str, weight: float, kind: str | None = None, *, output: bool = False) -> None:
        term = _LINE_SUFFIX.sub("", term.strip()).rstrip(".:,;")
        term = _hit_file(term) or term
        if term.endswith(")") and not term.endswith("()"):
            term = term.rstrip(")")
        if (
            len(term) < 3
            or len(term) > (250 if is_file_name(term) else 120)
            or term.isdigit()
            or term.casefold() in _NOT_NAMES
            or _JUNK.search(term)
        ):
            return
        gain = weight * (1 + RECENCY * (self.at / self.size) ** 2)
        self.score[term] = self.score.get(term, 0.0) + gain
        if output:
            count, total = self.shown.get(term, (0, 0.0))
            self.shown[term] = (count + 1, total + gain)
        if term not in self.kind:
            self.kind[term] = kind or ("file" if is_file_name(term) else "test" if _TEST.fullmatch(term) else "name")

    def settle(self) -> None:
        """Names that stand in most tool outputs are the harness's or the format's (`exit_code`,
        `stdout`), not the work's: only what the agent did with them counts."""
        if self.outputs < MIN_OUTPUTS_FOR_COMMON:
            return
        for term, (count, total) in self.shown.items():
            if count > COMMON_SHARE * self.outputs:
                self.score[term] -= total

    def merge_paths(self) -> None:
        """One file, one name: `pane_view_live.ex`, `live/pane_view_live.ex`, `assets/` and the
        longer path ending with them are the same file when exactly one longer path does. Their uses
        add up on the longest, which is the one listed; a name several paths end with stays."""
        by_base: dict[str, list[str]] = {}
        for term, kind in self.kind.items():
            if kind in ("file", "read") and term in self.score:
                by_base.setdefault(term.rstrip("/").rsplit("/", 1)[-1], []).append(term)
        for group in by_base.values():
            alive = sorted(group, key=len, reverse=True)
            for term in list(alive):
                bare = term.rstrip("/").removeprefix("./")
                wider = [t for t in alive if t != term and (t == bare or t.rstrip("/").endswith("/" + bare))]
                if len(wider) == 1:
                    into = wider[0]
                    self.score[into] += self.score.pop(term)
                    if self.kind[term] == "read":
                        self.kind[into] = "read"
                    alive.remove(term)

    def prose(self, text: str, weight: float) -> None:
        for span in _BACKTICKED.findall(text):
            span = span.strip()
            if _CODE_SPAN.match(span) and re.search(r"[A-Za-z]", span) and _balanced(span):
                # A plain word in backticks (`threshold`) is named on purpose, but less surely a name.
                self.add(span, (3 if _code_like(span) or not span.isalpha() else 1) * weight)
        self.code(text, 1.5 * weight, kebab=False)

    def code(
        self,
        text: str,
        weight: float,
        *,
        once: bool = False,
        file_weight: float | None = None,
        kebab: bool = True,
        spread: bool = False,
    ) -> None:
        found = [w for w in _WORD.findall(text) if _code_like(w, kebab)]
        words = list(dict.fromkeys(found)) if once else found  # in order: ties rank by first use
        tests = list(dict.fromkeys(_TEST.findall(text))) if once else _TEST.findall(text)
        names = len(words) + len(tests)
        if spread and names > SPREAD_NAMES:
            # A long listing shows many names, each less surely one the work needs.
            weight *= SPREAD_NAMES / names
            file_weight = None if file_weight is None else file_weight * SPREAD_NAMES / names
        for word in words:
            self.add(word, weight if file_weight is None or not is_file_name(word) else file_weight, output=once)
        for test in tests:
            self.add(test, weight, "test", output=once)


def _balanced(span: str) -> bool:
    """No bracket left open or closed too often, and no quotes: `f(x)`, not `f(x` or `d["k"]`."""
    if any(q in span for q in "'\""):
        return False
    depth = 0
    for char in span:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth < 0:
            return False
    return depth == 0


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def working_set(messages: Sequence[Message], edited: set[str], read: Sequence[str] = ()) -> WorkingSet:
    """The names `messages` worked with, ranked (see the module doc); `edited` paths left out.
    `read`: the files the tool calls read or searched, each worth one more use in the agent's text."""
    scores = _Scores(len(messages))
    adapters = registered_adapters()
    scores.at = len(messages) // 2
    for path in read:
        scores.add(path, READ_BONUS, "read")
    for index, message in enumerate(messages):
        scores.at = index
        if message.summary or message.compaction is not None:
            continue
        if message.role == "user":
            words = user_words(message, adapters, messages[index - 1] if index else None)
            if words:
                scores.prose(words, 1.0)
            continue
        scores.prose(assistant_prose(message), 1.0)
        for part in message.tool_parts:
            call = ToolCall.of(part)
            plan = pick(call, adapters).plan(call)
            if plan is not None:
                # A plan's items are prose (and its statuses are not names).
                scores.prose("\n".join(item.text for item in plan), 1.0)
                continue
            for text in _strings(part.input):
                scores.code(text, 1.0)
            output = _MARKUP.sub(" ", part.result_text[:MAX_OUTPUT_CHARS])
            scores.outputs += 1
            scores.code(output, OUTPUT_WEIGHT, once=True, file_weight=OUTPUT_FILE_WEIGHT, spread=True)
            failing = "\n".join(line for line in output.splitlines() if _FAILING.search(line))
            for name in dict.fromkeys(_EXCEPTION.findall(output) + _TEST.findall(failing)):
                scores.add(name, 1.5)
    scores.settle()
    scores.merge_paths()
    edited_paths = {p.rstrip("/") for p in edited}
    ranked = [
        (term, scores.kind[term])
        for term in sorted(scores.score, key=lambda t: -scores.score[t])
        if scores.score[term] >= MIN_SCORE
        and (
            scores.kind[term] not in ("file", "read")
            or not any(p == term or p.endswith("/" + term.lstrip("./")) for p in edited_paths)
        )
    ]
    return WorkingSet(ranked)


READ = "Files read: "
NAMED = "Files named: "
TESTS = "Tests: "
IDENTIFIERS = "Identifiers: "
_LABELS = {"read": READ, "file": NAMED, "test": TESTS, "name": IDENTIFIERS}
CHUNK = 25
"""Names per bullet, so a summary short of room drops the least relevant names, not all of them."""


def fit_working_set(ws: WorkingSet, counter: TokenCounter, budget: int, root: str = "") -> list[str]:
    """Relevant Files bullets listing the working set within `budget` tokens, most relevant first:
    `Files read: a, b`, `Files named: …`, `Tests: …`, `Identifiers: …`, at most `CHUNK` names a
    bullet. Names are taken in order of relevance until the budget is spent. Paths under `root`
    (the project's, with a trailing `/`, which the summary states once) are written relative to it."""
    spent = 0
    chosen: dict[str, list[tuple[int, str]]] = {kind: [] for kind in _LABELS}
    for position, (item, kind) in enumerate(ws.ranked):
        if root and kind in ("file", "read") and item.startswith(root) and len(item) > len(root):
            item = item[len(root) :]
        cost = counter.count(f"{item}, ")
        if spent + cost > budget:
            if budget - spent < 3:
                break
            continue
        spent += cost
        chosen[kind].append((position, item))
    chunks: list[tuple[float, str]] = []
    for kind, items in chosen.items():
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            relevance = sum(position for position, _ in chunk) / len(chunk)
            chunks.append((relevance, _LABELS[kind] + ", ".join(item for _, item in chunk)))
    chunks.sort(key=lambda pair: pair[0])
    return [bullet for _, bullet in chunks]


def listed(bullet: str) -> list[tuple[str, str]] | None:
    """The (name, kind) pairs a working-set bullet lists, or None for another bullet."""
    for kind, label in _LABELS.items():
        if bullet.startswith(label):
            return [(name.strip("`"), kind) for name in bullet[len(label) :].split(", ") if name.strip("`")]
    return None


__all__ = [
    "IDENTIFIERS",
    "MAX_SHARE",
    "MAX_TOKENS",
    "NAMED",
    "READ",
    "SHARE",
    "TESTS",
    "WorkingSet",
    "fit_working_set",
    "is_file_name",
    "listed",
    "working_set",
]

"""The anchored summary: eight sections in a fixed order, terse bullets, `(none)` when empty.

Every summarizer's output is parsed into `Summary` and rendered back, so whatever model wrote it,
the stored summary has every section in this order and nothing else but its closing line
(`HISTORY_NOTE`), which says where the full history is.

**Citations.** A bullet may name the stored messages it came from: `[m12]`, `[m12–m15]` (a run)
or `[m3, m9–m12]`. `m12` is the session's stored message with sequence number 12 (`Message.seq`,
unique and stable within a session, kept when a compaction hides the message), so the model can
read the exact original back with `search_history(at="m12")` (the same `m<seq>` names the history
tool uses) when the summary is not enough. `cite` writes them, `cited_seqs` reads them back.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

GOAL = "Goal"
CONSTRAINTS = "Constraints & Preferences"
PROGRESS = "Progress"
DONE = "Done"
IN_PROGRESS = "In Progress"
BLOCKED = "Blocked"
DECISIONS = "Key Decisions"
NEXT_STEPS = "Next Steps"
CRITICAL = "Critical Context"
FILES = "Relevant Files"

SECTIONS: tuple[str, ...] = (GOAL, CONSTRAINTS, DONE, IN_PROGRESS, BLOCKED, DECISIONS, NEXT_STEPS, CRITICAL, FILES)
"""The bullet lists a summary holds, in order. Done / In Progress / Blocked sit under `## Progress`."""
PROGRESS_PARTS: tuple[str, ...] = (DONE, IN_PROGRESS, BLOCKED)

EMPTY = "(none)"
LEFT_OUT = "(left out for room; search_history finds them)"
"""What a section reads when it had bullets and the budget took them all: not `(none)`, which
would say there was nothing (a Done emptied for room is not a session where nothing was done).
An updated summary does not carry it over as a bullet (`extractive`)."""
LATEST_REQUEST = "Latest request: "
PINNED_NOTE = "Pinned: "
"""How a pinned note opens its bullet in Constraints (carried word for word into every summary)."""
"""Label of the Goal bullet that carries the user's latest instruction."""
PROJECT_ROOT = "Project root: "
"""How Critical Context states the project's root: `Project root: `/home/u/proj/` (…)`. Paths
under it are written relative to it everywhere in the summary."""
USER_SAID = "User"
"""Label of a Constraints bullet that quotes a message of the user's word for word:
`User [m12]: <their words>`."""
HISTORY_NOTE = (
    "The full earlier history is stored: search it with `search_history` (`query` words), or read "
    'the message a citation such as [m12] names with `search_history(at="m12")`.'
)
"""The line every summary ends with (added by `Summary.render`, dropped by `parse_summary`)."""

CITE_PREFIX = "m"
_CITATION = re.compile(r"\[(m\d+(?:[–-]m\d+)?(?:,\s*(?:…|m\d+(?:[–-]m\d+)?))*)\]")
_CITED_RUN = re.compile(r"m(\d+)(?:[–-]m(\d+))?")
MAX_CITED_RUNS = 3


def cite(seqs: Iterable[int]) -> str:
    """The citation of the stored messages numbered `seqs` (`Message.seq`; 0, unstored, is left
    out): `[m12]`, `[m12–m15]` for a run, `[m3, m9–m12]`; more than `MAX_CITED_RUNS` runs keep the
    first two and the last around `…`. '' when nothing is citable."""
    ordered = sorted({s for s in seqs if s > 0})
    if not ordered:
        return ""
    runs: list[tuple[int, int]] = []
    for seq in ordered:
        if runs and seq == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    if len(runs) > MAX_CITED_RUNS:
        runs = [*runs[: MAX_CITED_RUNS - 1], (-1, -1), runs[-1]]
    pieces = [
        "…" if first < 0 else f"{CITE_PREFIX}{first}" if first == last else f"{CITE_PREFIX}{first}–{CITE_PREFIX}{last}"
        for first, last in runs
    ]
    return "[" + ", ".join(pieces) + "]"


def stated_root(critical: Iterable[str]) -> str:
    """The project root a summary's Critical Context states (`PROJECT_ROOT`), '' when none."""
    for bullet in critical:
        if bullet.startswith(PROJECT_ROOT + "`"):
            return bullet[len(PROJECT_ROOT) + 1 :].split("`", 1)[0]
    return ""


def is_absolute(path: str) -> bool:
    """Whether `path` is written from a root: POSIX (`/…`), a drive (`C:\\…`, `C:/…`), a UNC or a
    backslash-rooted path (`\\…`), the home (`~…`) or a variable (`$HOME/…`) — what a summary never
    reads as relative to the project root."""
    return path.startswith(("/", "~", "$", "\\")) or _DRIVE.match(path) is not None


_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


def from_root(path: str, root: str) -> str:
    """`path` as a summary stating `root` writes it: relative to the root when under it."""
    return path[len(root) :] if root and path.startswith(root) and len(path) > len(root) else path


def cited_seqs(text: str) -> list[int]:
    """Every message number `text` cites, in order (a run `m3–m5` gives its two ends)."""
    found: list[int] = []
    for citation in _CITATION.finditer(text):
        for run in _CITED_RUN.finditer(citation.group(1)):
            found += [int(g) for g in run.groups() if g is not None]
    return found


def strip_citations(text: str) -> str:
    """`text` without its citations (to compare what two bullets say)."""
    return " ".join(_CITATION.sub("", text).split())


_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.*\S)\s*$")
_ALIASES = {name.casefold(): name for name in (*SECTIONS, PROGRESS)}
_ALIASES.update({"constraints": CONSTRAINTS, "preferences": CONSTRAINTS, "files": FILES, "decisions": DECISIONS})


def _bullet_key(bullet: str) -> str:
    """What two bullets share when they say the same thing: the text, case and spacing aside."""
    return " ".join(bullet.split()).casefold()


@dataclass
class Summary:
    """Bullets per section (`SECTIONS` keys). Order within a section is kept.

    Read `sections` freely; add bullets with `add`, which keeps an index of each section's keys so
    the duplicate check costs the same however long the section is.
    """

    sections: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SECTIONS})
    _keys: dict[str, Counter[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __getitem__(self, name: str) -> list[str]:
        return self.sections[name]

    def add(self, name: str, bullet: str) -> bool:
        """Append `bullet` unless the section already holds it (ignoring case and spacing); it
        replaces a lone `LEFT_OUT`, which is added only to an empty section."""
        bullet = " ".join(bullet.split())
        if not bullet or bullet == EMPTY:
            return False
        if bullet == LEFT_OUT and self.sections[name]:
            return False  # the note stands only for a section with nothing else
        if self.sections[name] == [LEFT_OUT]:
            self.sections[name] = []  # a bullet now stands where the budget left none
            self._keys.pop(name, None)
        keys = self._section_keys(name)
        key = bullet.casefold()
        if key in keys:
            return False
        keys[key] = 1
        self.sections[name].append(bullet)
        return True

    def _section_keys(self, name: str) -> Counter[str]:
        keys = self._keys.get(name)
        if keys is None:  # first use, or sections given to the constructor
            keys = self._keys[name] = Counter(_bullet_key(b) for b in self.sections[name])
        return keys

    def _continue_last(self, name: str, text: str) -> None:
        """Join a wrapped continuation line to the section's last bullet."""
        bullets, keys = self.sections[name], self._section_keys(name)
        old = _bullet_key(bullets[-1])
        keys[old] -= 1
        if not keys[old]:
            del keys[old]
        bullets[-1] += " " + text
        keys[_bullet_key(bullets[-1])] += 1

    def mentions(self, text: str) -> bool:
        """True when `text` appears in any bullet (exact substring)."""
        return any(text in bullet for bullets in self.sections.values() for bullet in bullets)

    def render(self, *, note: bool = True) -> str:
        """The Markdown; `note`: end with `HISTORY_NOTE`."""
        lines: list[str] = []
        for name in SECTIONS:
            if name == DONE:
                lines += [f"## {PROGRESS}", ""]
            heading = "###" if name in PROGRESS_PARTS else "##"
            lines.append(f"{heading} {name}")
            bullets = self.sections[name] or [EMPTY]
            lines += [f"- {b}" for b in bullets]
            lines.append("")
        if note:
            lines.append(HISTORY_NOTE)
        return "\n".join(lines).rstrip() + "\n"


_NOTE_START = HISTORY_NOTE[:40]


def parse_summary(markdown: str) -> Summary:
    """Read a summary written by any summarizer, tolerating headings at either level, numbered
    bullets and stray prose. Text outside a known section is dropped; unknown headings are
    treated as part of the section before them."""
    summary = Summary()
    current: str | None = None
    for raw in markdown.splitlines():
        heading = _HEADING.match(raw)
        if heading:
            name = _ALIASES.get(heading.group(2).strip().strip("*").casefold())
            if name == PROGRESS:
                current = IN_PROGRESS  # loose bullets straight under Progress are work in flight
            elif name is not None:
                current = name
            continue
        if current is None or raw.strip().startswith(_NOTE_START):
            continue
        bullet = _BULLET.match(raw)
        if bullet:
            summary.add(current, bullet.group(1))
        elif raw.strip() and raw.startswith(("  ", "\t")) and summary.sections[current]:
            # A wrapped continuation of the previous bullet.
            summary._continue_last(current, raw.strip())
        elif raw.strip() and not raw.strip().startswith(("```", "---")):
            summary.add(current, raw.strip())
    return summary


def missing_sections(markdown: str) -> list[str]:
    """The sections whose heading does not appear in `markdown` (for validating LLM output)."""
    found = set()
    for raw in markdown.splitlines():
        heading = _HEADING.match(raw)
        if heading:
            name = _ALIASES.get(heading.group(2).strip().strip("*").casefold())
            if name:
                found.add(name)
    return [name for name in (GOAL, CONSTRAINTS, PROGRESS, DECISIONS, NEXT_STEPS, CRITICAL, FILES) if name not in found]

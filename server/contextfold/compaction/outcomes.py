"""Done as outcomes: what the work achieved, not the commands that achieved it.

The finished steps (`Facts.steps`) are cut into stretches of work, each closed by what verifies or
records it: a test run that passes, a commit, or a new message from the user. A stretch becomes
one bullet: the files it created and edited (each once, repeated edits counted), the commands that
changed something (shell plumbing such as `cd`, `echo`, `mkdir` or `git add` is never a step), and
how it ended — `pytest tests/` passed (12 passed) after 2 failing runs; committed "feat: …". A test
run that passes again with nothing changed in between is folded into the later one. Each bullet
cites the stored messages of its stretch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextfold.compaction.agents.text import clip
from contextfold.compaction.record import Step
from contextfold.compaction.template import cite, is_absolute

MAX_FILES_NAMED = 8
MAX_COMMANDS_NAMED = 3
MAX_OUTCOMES = 30


@dataclass
class _Stretch:
    created: dict[str, int] = field(default_factory=dict)
    edited: dict[str, int] = field(default_factory=dict)
    commands: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    failed_runs: dict[str, int] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)
    end: str = ""
    """How the stretch ended: the test run that passed, the commit."""
    check: str = ""
    """The test command whose passing run ended it."""
    committed: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.created or self.edited or self.commands or self.notes)

    def add(self, step: Step) -> None:
        self.seqs.append(step.seq)
        if step.kind == "create":
            self.created[step.text] = self.created.get(step.text, 0) + 1
        elif step.kind == "edit":
            if step.text in self.created:
                self.created[step.text] += 1
            else:
                self.edited[step.text] = self.edited.get(step.text, 0) + 1
        elif step.kind == "command":
            self.commands[step.text] = self.commands.get(step.text, 0) + 1
        elif step.kind == "note":
            self.notes.append(step.text)
        elif step.kind == "test" and not step.ok:
            self.failed_runs[step.text] = self.failed_runs.get(step.text, 0) + 1

    def text(self, root: str = "") -> str:
        parts: list[str] = []
        if self.created:
            parts.append("created " + _files(self.created, root))
        if self.edited:
            parts.append("edited " + _files(self.edited, root))
        if self.commands:
            parts.append("ran " + _commands(self.commands))
        parts += self.notes
        if self.end:
            parts.append(self.end)
        text = "; ".join(parts)
        return text[:1].upper() + text[1:]


def _times(count: int) -> str:
    return f" ×{count}" if count > 1 else ""


ROOT_SHARE = 0.6
"""The project root is the deepest directory holding this share of the edited files."""


def project_root(paths: Sequence[str]) -> str:
    """The directory most of the absolute `paths` live under (with its trailing separator: `/`, or
    `\\` for a Windows path), '' when they share none deeper than two levels below the root or the
    drive: Done names files relative to it."""
    absolute = [p for p in paths if is_absolute(p)]
    if len(absolute) < 2:
        return ""
    counts: dict[str, int] = {}
    for path in absolute:
        ends = [m.end() for m in _SEPARATOR.finditer(path)]
        for depth in range(2, len(ends)):
            folder = path[: ends[depth]]
            counts[folder] = counts.get(folder, 0) + 1
    enough = [f for f, n in counts.items() if n >= ROOT_SHARE * len(absolute)]
    return max(enough, key=len) if enough else ""


_SEPARATOR = re.compile(r"[\\/]")


def files_phrase(paths: Sequence[str], root: str = "") -> str:
    """The files grouped by directory, as Done names them."""
    return _files(dict.fromkeys(paths, 1), root)


def _files(counts: dict[str, int], root: str = "") -> str:
    """`a.py` ×2, `b.py` in `src/pkg/`; `c.md`: the files by directory (`\\` separated ones too),
    under `root` relative to it, at most `MAX_FILES_NAMED`."""
    folders: dict[str, list[str]] = {}
    for path, count in list(counts.items())[:MAX_FILES_NAMED]:
        if root and path.startswith(root):
            path = path[len(root) :]
        path = path.rstrip("/\\")
        windows = path[1:3] == ":\\" or "/" not in path
        cut = max(path.rfind("/"), path.rfind("\\")) if windows else path.rfind("/")
        folder, name = path[: cut + 1], path[cut + 1 :]
        folders.setdefault(folder, []).append(f"`{name}`" + _times(count))
    groups = [", ".join(names) + (f" in `{folder}`" if folder else "") for folder, names in folders.items()]
    extra = len(counts) - MAX_FILES_NAMED
    return "; ".join(groups) + (f" and {extra} more" if extra > 0 else "")


def _commands(counts: dict[str, int]) -> str:
    """The commands, those of one program folded: `make check-1` and 6 more `make` commands."""
    programs: dict[str, list[str]] = {}
    for command, _ in counts.items():
        words = command.split()
        programs.setdefault(words[0] if words else command, []).append(command)
    named: list[str] = []
    for program, commands in list(programs.items())[:MAX_COMMANDS_NAMED]:
        first = f"`{clip(commands[0], 120)}`" + _times(counts[commands[0]])
        more = sum(counts[c] for c in commands[1:])
        named.append(first + (f" and {more} more `{program}`" if more else ""))
    extra = len(programs) - MAX_COMMANDS_NAMED
    return ", ".join(named) + (f" and {extra} more commands" if extra > 0 else "")


def outcomes(steps: Sequence[Step], root: str = "", *, open_in_progress: bool = False) -> list[tuple[str, int]]:
    """Done bullets (with citations), oldest first, at most `MAX_OUTCOMES` (the newest), each with its
    last message (where the stretch of work ended); files under `root` are named relative to it. With
    `open_in_progress` (In Progress names the files changed since the last check: the history stops
    mid-work) the last stretch, if no check closed it and it only changed files, is left out rather
    than said twice."""
    done: list[_Stretch] = []
    stretch = _Stretch()
    for step in steps:
        if step.kind == "user":
            if stretch.changed:
                done.append(stretch)
            stretch = _Stretch()
            continue
        stretch.add(step)
        if step.kind == "test" and step.ok:
            failed = stretch.failed_runs.get(step.text, 0)
            stretch.end = f"`{clip(step.text, 120)}` passed" + (f" ({step.detail})" if step.detail else "")
            if failed:
                stretch.end += f" after {failed} failing run{'s' if failed > 1 else ''}"
            stretch.check = step.text
        elif step.kind == "commit":
            stretch.end = f'committed {step.detail + " " if step.detail else ""}"{step.text}"'
        else:
            continue
        previous = done[-1] if done else None
        if not stretch.changed and previous is not None and step.kind == "test" and previous.check == step.text:
            previous.seqs += stretch.seqs  # the same tests passing again, nothing done in between
        elif not stretch.changed and previous is not None and step.kind == "commit" and not previous.committed:
            previous.seqs += stretch.seqs  # the commit of what the previous stretch did and checked
            previous.end += "; " + stretch.end
            previous.committed = True
        else:
            stretch.committed = step.kind == "commit"
            done.append(stretch)
        stretch = _Stretch()
    if stretch.changed and not (open_in_progress and not stretch.commands and not stretch.notes):
        done.append(stretch)
    return [(f"{s.text(root)} {cite(s.seqs)}".rstrip(), max(s.seqs, default=0)) for s in done[-MAX_OUTCOMES:]]


__all__ = ["files_phrase", "outcomes", "project_root"]

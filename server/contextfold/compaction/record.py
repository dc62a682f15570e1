"""What the facts walker keeps, besides the lists of `Facts`, so the summary can say where each
thing came from: the user's own messages, the work in order, the user's choices.

Every item carries the sequence numbers (`Message.seq`) of the stored messages it came from, so a
summary bullet built from it can cite them (`template.cite`). Sequence 0 means not stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StepKind = Literal["edit", "create", "test", "command", "commit", "note", "user"]


@dataclass(frozen=True)
class Said:
    """A message the user wrote, word for word (whitespace collapsed)."""

    text: str
    seqs: tuple[int, ...]
    """Every stored message that said exactly this (a repeated "continue" is one `Said`)."""


@dataclass(frozen=True)
class Step:
    """One piece of finished work, in the order it happened."""

    kind: StepKind
    """`edit`/`create` a file (`text` its path), `test` a suite run (`text` its command), `command`
    any other command that changed something, `commit` (`text` the commit's subject), `note` what an
    agent reported done (a submission), `user` a turn of the user's (it closes a stretch of work)."""
    text: str
    seq: int
    ok: bool = True
    """For a test run: whether it passed."""
    detail: str = ""
    """For a test run: its counts (`3 passed`); for a commit: its short hash when the output named it."""


@dataclass(frozen=True)
class Choice:
    """The user's answer to a question the assistant asked (or to an ask-the-user tool)."""

    question: str
    answer: str
    seqs: tuple[int, ...]


__all__ = ["Choice", "Said", "Step", "StepKind"]

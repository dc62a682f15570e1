"""What every summarizer takes and returns.

A summarizer turns the head of a conversation (the part being compacted) into an anchored
summary. When a previous summary exists it is the anchor: the summarizer updates it rather than
summarizing it as history. Summarizers raise `SummarizerError` with a reason the engine records
before it falls back to the next one in the chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from contextfold.compaction.facts import Facts
from contextfold.domain import Message, Usage
from contextfold.tokens.counting import TokenCounter


class SummarizerError(Exception):
    """The summarizer could not produce a summary; `reason` says why (recorded in history)."""

    def __init__(self, summarizer: str, reason: str) -> None:
        super().__init__(f"{summarizer}: {reason}")
        self.summarizer = summarizer
        self.reason = reason


@dataclass(frozen=True)
class SummaryRequest:
    head: Sequence[Message]
    """The messages being compacted, oldest first (never the previous summary itself)."""
    previous: str | None
    """The previous summary's Markdown: the anchor to update."""
    counter: TokenCounter
    budget_tokens: int
    """The summary must fit in this many tokens."""
    instructions: str | None = None
    """Extra instructions or a focus from the caller (e.g. "keep the API design details")."""
    earlier: Sequence[Message] = ()
    """The stored history before `head` that the previous summary stands for, when another agent
    wrote it (`engine.Plan.earlier`): a summarizer that reads history by code takes its facts
    from here too; one that sends a transcript to a model need not (pinning adds them)."""
    facts: Facts | None = None
    """The facts of `earlier` and `head`, when the caller has extracted them already."""
    tail: Sequence[Message] = ()
    """The messages kept verbatim after the summary (`engine.Plan.tail`): what the model will still
    read there need not be listed again (the extractive working set leaves out names they type)."""


@dataclass(frozen=True)
class SummaryOutcome:
    text: str
    """Markdown with the template's sections (validated and pinned by the engine afterwards)."""
    summarizer: str
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None


class Summarizer(Protocol):
    name: str

    async def summarize(self, request: SummaryRequest) -> SummaryOutcome: ...

"""The summarizer chain: which summarizers a compaction tries, in order, and running them.

Built in one place and run in one place, for a session's compaction and for the stateless
`summarize` alike. `auto` is anthropic → sampling (the client's own model) → extractive; naming
one summarizer tries it, then extractive, which cannot fail, so a chain always ends in a summary.
Each summarizer passed over leaves its reason in `fallbacks`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from contextfold.compaction.base import Summarizer, SummarizerError, SummaryOutcome, SummaryRequest
from contextfold.compaction.extractive import ExtractiveSummarizer
from contextfold.compaction.summarizers.anthropic import AnthropicSummarizer
from contextfold.compaction.template import missing_sections
from contextfold.config import Settings
from contextfold.errors import InvalidInput

SummarizerChoice = Literal["auto", "anthropic", "sampling", "extractive"]
CHOICES: tuple[SummarizerChoice, ...] = ("auto", "anthropic", "sampling", "extractive")

T = TypeVar("T")


@dataclass(frozen=True)
class Sampled:
    """What the client's model answered to the sampling request (the MCP layer fills this in)."""

    text: str | None
    model: str | None = None


class SampledSummarizer:
    """The client's own LLM, asked through MCP sampling before the tool body ran."""

    name = "sampling"

    def __init__(self, sampled: Sampled) -> None:
        self._sampled = sampled

    async def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        text = self._sampled.text
        if not text or not text.strip():
            raise SummarizerError(self.name, "the client's model returned no text")
        missing = missing_sections(text)
        if missing:
            raise SummarizerError(self.name, f"the client's summary lacks sections: {', '.join(missing)}")
        return SummaryOutcome(text=text, summarizer=self.name, model=self._sampled.model)


class Unavailable:
    """A summarizer that cannot run here; trying it records why and moves down the chain."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self._reason = reason

    async def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        raise SummarizerError(self.name, self._reason)


def wants_sampling(choice: str | None, settings: Settings) -> bool:
    """Whether a summary with `choice` (default: the settings' own) would use the client's model:
    `sampling`, or `auto` where the Anthropic summarizer is not configured under `settings`."""
    choice = choice or settings.summarizer
    return choice == "sampling" or (choice == "auto" and AnthropicSummarizer.from_env(settings) is None)


def build_chain(
    choice: str, settings: Settings, sampled: Sampled | None = None, *, offered: bool = False
) -> list[Summarizer]:
    """The summarizers `choice` tries, in order, always ending in the extractive one.

    `sampled` is the client's answer when it was asked; `offered`: the client can sample, so a
    missing answer means it was not asked.
    """
    if choice not in CHOICES:
        raise InvalidInput("summarizer", f"expected auto, anthropic, sampling or extractive, got {choice!r}")
    chain: list[Summarizer] = []
    if choice in ("auto", "anthropic"):
        anthropic = AnthropicSummarizer.from_env(settings)
        chain.append(anthropic or Unavailable("anthropic", "not configured (set ANTHROPIC_API_KEY)"))
    if choice in ("auto", "sampling"):
        if sampled is not None:
            chain.append(SampledSummarizer(sampled))
        elif offered and choice == "auto":
            chain.append(
                Unavailable("sampling", "not asked: the anthropic summarizer was configured and tried instead")
            )
        else:
            chain.append(Unavailable("sampling", "no model was offered to ask (an MCP client's sampling)"))
    chain.append(ExtractiveSummarizer())
    return chain


async def run_chain(
    chain: Sequence[Summarizer],
    request: SummaryRequest,
    accept: Callable[[SummaryOutcome], T],
    *,
    progress: Callable[[int, str], Awaitable[None]] | None = None,
) -> tuple[SummaryOutcome, T, list[str]]:
    """The first summary `accept` takes (it raises `SummarizerError` to pass one over), what it
    made of it, and why each summarizer before it was passed over. Raises `SummarizerError` when
    every one was (not with a chain from `build_chain`, whose last summarizer cannot fail)."""
    fallbacks: list[str] = []
    for i, summarizer in enumerate(chain):
        if progress is not None:
            await progress(i, summarizer.name)
        try:
            outcome = await summarizer.summarize(request)
            accepted = accept(outcome)
        except SummarizerError as exc:
            fallbacks.append(f"{summarizer.name}: {exc.reason}")
            continue
        return outcome, accepted, fallbacks
    raise SummarizerError("chain", "every summarizer failed: " + "; ".join(fallbacks))


__all__ = [
    "CHOICES",
    "Sampled",
    "SampledSummarizer",
    "SummarizerChoice",
    "Unavailable",
    "build_chain",
    "run_chain",
    "wants_sampling",
]

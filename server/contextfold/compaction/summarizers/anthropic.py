"""The `anthropic` summarizer: the anchored summary written by a small Claude model.

It renders the head as a transcript, builds the prompt (`prompt.py`), and makes one Messages API
call through the official SDK with a timeout and bounded retries (the SDK's own: it retries
connection errors, 408/409/429 and 5xx, honouring `retry-after`). Whatever goes wrong becomes a
`SummarizerError` with a short, precise reason, which the engine records before falling back to
the next summarizer. It is the only module here that reaches the network, and only when a key is
configured (`from_env` returns None without one).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from contextfold.compaction.base import SummarizerError, SummaryOutcome, SummaryRequest
from contextfold.compaction.prompt import build_prompt
from contextfold.compaction.template import missing_sections
from contextfold.compaction.transcript import render_transcript
from contextfold.domain import Usage

if TYPE_CHECKING:
    import anthropic

    from contextfold.config import Settings

log = logging.getLogger(__name__)

NAME = "anthropic"
DEFAULT_MODEL = "claude-haiku-4-5"
MAX_TOKENS_CEILING = 8_192
"""Default bound on the reply: a summary that needs more has failed at being a summary."""
MAX_TOKENS_FLOOR = 512
"""Even a tiny budget gets room for the headings and a few bullets; the engine checks the size."""
_REASON_LIMIT = 300


def _sdk() -> Any:
    """The `anthropic` package, imported on first use: importing it takes about a second, which
    every server start and CLI command would otherwise pay, key or no key."""
    import anthropic

    return anthropic


# USD per million tokens as (input, output), from Anthropic's pricing page
# (https://platform.claude.com/docs/en/about-claude/pricing), read on 2026-11-22. On every model
# here a 5-minute cache write bills at 1.25× the input price and a cache read at 0.1×; this
# summarizer sets no cache breakpoints, so those terms are normally zero. Prices change: a model
# that is not listed gets no cost (None) rather than a guessed one.
_PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4-6": (3.00, 15.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4-8": (5.00, 25.00),
    "claude-opus-4-7": (5.00, 25.00),
    "claude-opus-4-6": (5.00, 25.00),
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4-0": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
}
_CACHE_WRITE_FACTOR = 1.25
_CACHE_READ_FACTOR = 0.10
# What may follow a priced alias: nothing, or a dated snapshot (`-20251001`, `@20250514`). So
# `claude-opus-4-20250514` is Opus 4, while an unknown `claude-opus-4-9` is not priced as Opus 4.
_SNAPSHOT_SUFFIX = re.compile(r"(?:[-@]\d{8}.*|-latest)?")


def price_per_million(model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for `model` or its dated snapshot; None if unknown."""
    name = model.strip().lower()
    for alias in sorted(_PRICES, key=len, reverse=True):
        if name.startswith(alias) and _SNAPSHOT_SUFFIX.fullmatch(name[len(alias) :]):
            return _PRICES[alias]
    return None


def estimate_cost_usd(model: str, usage: Usage) -> float | None:
    """What a call with this usage cost, from the price table; None for a model not in it."""
    prices = price_per_million(model)
    if prices is None:
        return None
    input_price, output_price = prices
    total = (
        usage.input * input_price
        + usage.cache_write * input_price * _CACHE_WRITE_FACTOR
        + usage.cache_read * input_price * _CACHE_READ_FACTOR
        + usage.output * output_price
    )
    return total / 1_000_000


def default_max_tokens(budget_tokens: int) -> int:
    """The reply bound for a summary budget: 1.5× the budget (headroom for a model that overshoots
    a little), within [MAX_TOKENS_FLOOR, MAX_TOKENS_CEILING]."""
    return min(MAX_TOKENS_CEILING, max(MAX_TOKENS_FLOOR, math.ceil(budget_tokens * 1.5)))


class AnthropicSummarizer:
    """Writes the anchored summary with a Claude model through the Messages API."""

    name = NAME

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str = DEFAULT_MODEL,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_tokens: int | None = None,
    ) -> None:
        """`api_key` None lets the SDK find credentials itself (environment, profiles); `base_url`
        None means `ANTHROPIC_BASE_URL`, else the public API. `max_tokens` None derives the bound
        from each request's budget (`default_max_tokens`)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        self._api_key = api_key or None
        self.base_url = base_url or None
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        # Deliberately without the key: reprs end up in logs and tracebacks.
        return (
            f"AnthropicSummarizer(model={self.model!r}, base_url={self.base_url!r}, "
            f"timeout={self.timeout}, max_retries={self.max_retries})"
        )

    @classmethod
    def from_env(
        cls,
        settings: Settings,
        *,
        api_key: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> AnthropicSummarizer | None:
        """A summarizer configured from `settings` and the environment, or None when there is no
        key (neither `api_key` nor `ANTHROPIC_API_KEY`): without one the summarizer is unavailable
        and `auto` moves on. `ANTHROPIC_BASE_URL` redirects it (a proxy, a gateway, a test fake)."""
        environ = os.environ if environ is None else environ
        key = (api_key or environ.get("ANTHROPIC_API_KEY") or "").strip()
        if not key:
            return None
        return cls(
            api_key=key,
            base_url=(environ.get("ANTHROPIC_BASE_URL") or "").strip() or None,
            model=settings.anthropic_model,
            timeout=settings.anthropic_timeout,
            max_retries=settings.anthropic_max_retries,
        )

    async def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        transcript = render_transcript(request.head)
        system, user = build_prompt(
            transcript,
            previous=request.previous,
            instructions=request.instructions,
            budget_tokens=request.budget_tokens,
        )
        max_tokens = self.max_tokens or default_max_tokens(request.budget_tokens)
        log.debug(
            "anthropic summarizer: model=%s max_tokens=%d messages=%d transcript_chars=%d",
            self.model,
            max_tokens,
            len(request.head),
            len(transcript),
        )
        outcome = await self.complete(system, user, max_tokens=max_tokens)
        missing = missing_sections(outcome.text)
        if missing:
            raise self._error(f"summary is missing required sections: {', '.join(missing)}")
        return outcome

    async def complete(self, system: str, user: str, *, max_tokens: int) -> SummaryOutcome:
        """One Messages API call with this summarizer's model, key, timeout and retries: the reply's
        text with usage and cost. Any failure (network, HTTP, a cut-off or empty reply) raises
        `SummarizerError` with a short reason. `summarize` and the regions digest both use it."""
        anthropic = _sdk()
        try:
            async with anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
            ) as client:
                response = await client.messages.create(
                    model=self.model,
                    max_tokens=max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": user}],
                )
        except Exception as exc:  # every failure is a reason to fall back; cancellation is not caught
            raise self._error(self._describe(exc)) from exc
        return self._outcome(response, max_tokens)

    # -- reading the response ----------------------------------------------------------------------

    def _outcome(self, response: Any, max_tokens: int) -> SummaryOutcome:
        anthropic = _sdk()
        if not isinstance(response, anthropic.types.Message) or not isinstance(response.content, list):
            # The SDK hands back plain text when the body was not JSON, and a lenient model when
            # the JSON was not a message.
            got = "text" if isinstance(response, str) else "an object without content"
            raise self._error(f"malformed response: expected a message, got {got}")
        usage = _usage(response)
        model = response.model or self.model
        stop = response.stop_reason
        if stop == "max_tokens":
            written = f" ({usage.output} tokens written)" if usage else ""
            raise self._error(f"summary cut off: the reply hit max_tokens={max_tokens}{written}")
        if stop == "refusal":
            raise self._error("the model refused to write the summary (stop_reason 'refusal')")
        if stop == "model_context_window_exceeded":
            raise self._error(f"the transcript does not fit {model}'s context window")

        texts = [block.text for block in response.content if isinstance(block, anthropic.types.TextBlock)]
        text = "\n".join(t for t in texts if isinstance(t, str)).strip()
        if not text:
            kinds = ", ".join(sorted({str(getattr(b, "type", "?")) for b in response.content})) or "empty"
            raise self._error(f"response has no text block (content: {kinds}; stop_reason {stop!r})")

        cost = estimate_cost_usd(model, usage) if usage else None
        log.info(
            "anthropic summarizer: %s wrote %d chars (in=%s out=%s cost=%s)",
            model,
            len(text),
            usage.input if usage else "?",
            usage.output if usage else "?",
            f"${cost:.5f}" if cost is not None else "unknown",
        )
        return SummaryOutcome(text=text + "\n", summarizer=NAME, model=model, usage=usage, cost_usd=cost)

    # -- errors ------------------------------------------------------------------------------------

    def _describe(self, exc: Exception) -> str:
        anthropic = _sdk()
        if isinstance(exc, anthropic.APITimeoutError):
            return f"request timed out after {self.timeout:g}s (max_retries={self.max_retries})"
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f": {type(cause).__name__}: {cause}" if cause else ""
            return f"cannot reach {self.base_url or 'the Anthropic API'}{detail}"
        if isinstance(exc, anthropic.APIStatusError):
            kind = f" {exc.type}" if isinstance(exc.type, str) else ""
            message = exc.api_message if isinstance(exc.api_message, str) else _body_text(exc.body)
            return f"HTTP {exc.status_code}{kind}: {message}"
        if isinstance(exc, anthropic.APIResponseValidationError):
            return f"malformed response: {exc.message}"
        if isinstance(exc, json.JSONDecodeError):
            return f"malformed response: the body is not valid JSON ({exc})"
        return f"{type(exc).__name__}: {exc}"

    def _error(self, reason: str) -> SummarizerError:
        reason = " ".join(reason.split())
        if self._api_key:
            reason = reason.replace(self._api_key, "[redacted]")
        if len(reason) > _REASON_LIMIT:
            reason = reason[: _REASON_LIMIT - 1] + "…"
        log.info("anthropic summarizer failed: %s", reason)
        return SummarizerError(NAME, reason)


def _usage(response: anthropic.types.Message) -> Usage | None:
    usage = response.usage
    if usage is None:
        return None
    return Usage(
        input=usage.input_tokens or 0,
        output=usage.output_tokens or 0,
        cache_read=usage.cache_read_input_tokens or 0,
        cache_write=usage.cache_creation_input_tokens or 0,
    )


def _body_text(body: object) -> str:
    if body is None:
        return "(no body)"
    return str(body)


__all__ = [
    "DEFAULT_MODEL",
    "AnthropicSummarizer",
    "default_max_tokens",
    "estimate_cost_usd",
    "price_per_million",
]

"""Reported token usage in any provider's shape → `Usage`.

Anthropic: `input_tokens` excludes cache reads and writes, which come separately.
OpenAI: `prompt_tokens` includes cached tokens, so they are subtracted to get fresh input.
contextfold's own shape (`input`, `output`, `reasoning`, `cache_read`, `cache_write`) passes through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextfold.domain import Usage
from contextfold.errors import FormatError

MAX_REPORTED = 1_000_000_000
"""No request reads or writes a billion tokens (the largest windows hold a few million); a count
beyond it is a bug in the caller, and would skew every status calibrated from it."""


def _count(value: Any, path: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FormatError(path, f"expected a non-negative integer, got {value!r}")
    if value > MAX_REPORTED:
        raise FormatError(path, f"{value:,} tokens is not a plausible count for one request (at most {MAX_REPORTED:,})")
    return value


def parse_usage(raw: Any, path: str = "usage") -> Usage:
    if not isinstance(raw, Mapping):
        raise FormatError(path, f"expected an object with token counts, got {type(raw).__name__}")
    if "input_tokens" in raw or "output_tokens" in raw:
        return Usage(
            input=_count(raw.get("input_tokens"), f"{path}.input_tokens"),
            output=_count(raw.get("output_tokens"), f"{path}.output_tokens"),
            cache_read=_count(raw.get("cache_read_input_tokens"), f"{path}.cache_read_input_tokens"),
            cache_write=_count(raw.get("cache_creation_input_tokens"), f"{path}.cache_creation_input_tokens"),
        )
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        prompt = _count(raw.get("prompt_tokens"), f"{path}.prompt_tokens")
        details = raw.get("prompt_tokens_details") or {}
        completion_details = raw.get("completion_tokens_details") or {}
        if not isinstance(details, Mapping) or not isinstance(completion_details, Mapping):
            raise FormatError(path, "token details must be objects")
        cached = _count(details.get("cached_tokens"), f"{path}.prompt_tokens_details.cached_tokens")
        return Usage(
            input=max(prompt - cached, 0),
            output=_count(raw.get("completion_tokens"), f"{path}.completion_tokens"),
            reasoning=_count(
                completion_details.get("reasoning_tokens"), f"{path}.completion_tokens_details.reasoning_tokens"
            ),
            cache_read=cached,
        )
    known = set(Usage.model_fields)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise FormatError(
            path,
            f"unknown usage field(s) {', '.join(unknown)}; send the provider's usage object "
            "(Anthropic input_tokens/output_tokens or OpenAI prompt_tokens/completion_tokens)",
        )
    return Usage(**{k: _count(v, f"{path}.{k}") for k, v in raw.items()})

"""Model limits and tokenizer families.

Limits are the providers' published figures. A model id is matched by its longest known prefix,
so dated snapshots (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`) find their family.
Unknown ids get `DEFAULT` and are flagged, so callers can say the numbers are a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Tokenizer = Literal["o200k_base", "cl100k_base", "claude", "gemini", "unknown"]
Provider = Literal["anthropic", "openai", "google", "unknown"]

MAX_OUTPUT_CAP = 32_000
"""Output tokens reserved for a reply are capped here: more is rarely used and wastes the window."""


@dataclass(frozen=True)
class ModelInfo:
    id: str
    provider: Provider
    tokenizer: Tokenizer
    context: int
    """Total window (input + output). 0 means unlimited."""
    output: int
    """The provider's maximum output tokens."""
    input_limit: int | None = None
    """A separate input cap, for models whose input limit is below context − output (GPT-5)."""
    known: bool = True


def _m(
    id: str, provider: Provider, tokenizer: Tokenizer, context: int, output: int, input_limit: int | None = None
) -> ModelInfo:
    return ModelInfo(id, provider, tokenizer, context, output, input_limit)


_MODELS: tuple[ModelInfo, ...] = (
    # Anthropic (tokenizer not public: estimated, see tokens.py)
    _m("claude-opus-4-6", "anthropic", "claude", 200_000, 128_000),
    _m("claude-sonnet-4-6", "anthropic", "claude", 200_000, 64_000),
    _m("claude-opus-4-5", "anthropic", "claude", 200_000, 64_000),
    _m("claude-opus-4-1", "anthropic", "claude", 200_000, 32_000),
    _m("claude-opus-4", "anthropic", "claude", 200_000, 32_000),
    _m("claude-sonnet-4-5", "anthropic", "claude", 200_000, 64_000),
    _m("claude-sonnet-4", "anthropic", "claude", 200_000, 64_000),
    _m("claude-haiku-4-5", "anthropic", "claude", 200_000, 64_000),
    _m("claude-3-7-sonnet", "anthropic", "claude", 200_000, 64_000),
    _m("claude-3-5-haiku", "anthropic", "claude", 200_000, 8_192),
    _m("claude", "anthropic", "claude", 200_000, 32_000),
    # OpenAI
    _m("gpt-5", "openai", "o200k_base", 400_000, 128_000, input_limit=272_000),
    _m("gpt-4.1", "openai", "o200k_base", 1_047_576, 32_768),
    _m("gpt-4o", "openai", "o200k_base", 128_000, 16_384),
    _m("gpt-4.5", "openai", "o200k_base", 128_000, 16_384),
    _m("o4-mini", "openai", "o200k_base", 200_000, 100_000),
    _m("o3", "openai", "o200k_base", 200_000, 100_000),
    _m("o1", "openai", "o200k_base", 200_000, 100_000),
    _m("gpt-4-turbo", "openai", "cl100k_base", 128_000, 4_096),
    _m("gpt-4-32k", "openai", "cl100k_base", 32_768, 8_192),
    # GPT-4's 8,192 output tokens share its 8,192-token window; reserving all of it would leave
    # nothing for the conversation, so half is kept for the reply.
    _m("gpt-4", "openai", "cl100k_base", 8_192, 4_096),
    _m("gpt-3.5-turbo", "openai", "cl100k_base", 16_385, 4_096),
    _m("text-embedding-3", "openai", "cl100k_base", 8_191, 0),
    _m("text-embedding-ada-002", "openai", "cl100k_base", 8_191, 0),
    # Google (tokenizer not public: estimated)
    _m("gemini-3", "google", "gemini", 1_048_576, 65_536),
    _m("gemini-2.5", "google", "gemini", 1_048_576, 65_536),
    _m("gemini-2.0", "google", "gemini", 1_048_576, 8_192),
    _m("gemini", "google", "gemini", 1_048_576, 8_192),
)

DEFAULT = ModelInfo("default", "unknown", "unknown", 128_000, 32_000, known=False)
"""Unknown models are counted as o200k × a safety factor (tokens.py), like Claude and Gemini."""

# Longest prefix first, so `gpt-4o` wins over `gpt-4` and `claude-opus-4-1` over `claude-opus-4`.
_BY_PREFIX = sorted(_MODELS, key=lambda m: len(m.id), reverse=True)

_PROVIDER_PREFIXES = ("anthropic/", "openai/", "google/", "models/", "vertex_ai/", "bedrock/")


def lookup(model: str | None) -> ModelInfo:
    """The limits of `model`, matched by id prefix; `DEFAULT` (with `known=False`) when unknown."""
    if not model or model == "default":
        return DEFAULT
    name = model.strip().lower()
    for prefix in _PROVIDER_PREFIXES:
        name = name.removeprefix(prefix)
    # Bedrock-style ids such as `anthropic.claude-sonnet-4-5-…` and `us.anthropic.claude-…`.
    name = name.split("anthropic.", 1)[-1]
    for info in _BY_PREFIX:
        # A family id alone or followed by a variant: `gpt-4o-mini`, `o3-pro`, `gpt-5.1`.
        if name == info.id or name.startswith(info.id + "-") or name.startswith(info.id + "."):
            return replace(info, id=model)
    return replace(DEFAULT, id=model)


def known_models() -> list[ModelInfo]:
    return list(_MODELS)


@dataclass(frozen=True)
class Budget:
    """The usable input budget of a model (docs/design.md §2)."""

    context: int
    max_output: int
    reserved: int
    usable: int
    """Tokens the conversation may occupy before it overflows; 0 when the window is unlimited."""

    @property
    def unlimited(self) -> bool:
        return self.context == 0


def budget(
    info: ModelInfo,
    *,
    reserved: int | None = None,
    context: int | None = None,
    output: int | None = None,
    input_limit: int | None = None,
) -> Budget:
    """Compute `usable` for a model, honouring `reserved` whether or not it declares an input limit.

    Keyword overrides come from settings (a session may declare its own window).
    """
    context = info.context if context is None else context
    output = info.output if output is None else output
    input_limit = info.input_limit if input_limit is None else input_limit
    max_output = min(output, MAX_OUTPUT_CAP) if output > 0 else MAX_OUTPUT_CAP
    reserve = reserved if reserved is not None else min(20_000, max_output)
    if context == 0:
        return Budget(0, max_output, reserve, 0)
    if input_limit:
        usable = input_limit - reserve
    else:
        # OpenCode drops `reserved` here; a reservation larger than the output slot must still hold.
        usable = context - max(max_output, reserve)
    return Budget(context, max_output, reserve, max(usable, 0))

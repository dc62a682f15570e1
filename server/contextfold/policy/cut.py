"""Cutting an oversized tool output down in view: its first characters, within a token cap.

The store keeps the output whole; the part is marked with `view_cap` (characters), so every view
shows the same prefix followed by a note of how much was left out (`shown.cap_output`).
The cap is found in tokens with the session's counter: dense text (base64, minified code, diffs)
runs under two characters a token, so a cap in characters alone keeps up to three times what was
meant. A character cap stays as the outer bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.domain import ToolPart
from contextfold.policy.truncate import prefix_within_tokens
from contextfold.tokens.counting import TokenCounter, count_in_view

CUT_TOKENS = 500
"""What a cut output keeps in view, in tokens…"""
CUT_CHARS = 2_000
"""…and never more than this many characters."""


@dataclass(frozen=True)
class CutCaps:
    """What a cut output keeps in view (the `cut_tokens` and `cut_chars` settings)."""

    tokens: int = CUT_TOKENS
    chars: int = CUT_CHARS


def cut_in_view(
    part: ToolPart, counter: TokenCounter, *, max_tokens: int = CUT_TOKENS, max_chars: int = CUT_CHARS
) -> tuple[ToolPart, int] | None:
    """`part` shown as a prefix of at most `max_tokens` tokens, and the tokens that frees in view.

    None when cutting would free nothing, or the part is not a finished output shown whole
    (pending, pruned, replaced by a digest, or already cut).
    """
    if not part.is_finished or part.compacted_at is not None or part.view_text is not None:
        return None
    if part.view_cap is not None:
        return None
    text = part.result_text or ""
    cap = prefix_within_tokens(text, max_chars=max_chars, max_tokens=max_tokens, count=counter.count)
    if cap >= len(text):
        return None
    cut = part.model_copy(update={"view_cap": cap})
    freed = count_in_view(part, counter) - count_in_view(cut, counter)
    return (cut, freed) if freed > 0 else None


__all__ = ["CUT_CHARS", "CUT_TOKENS", "CutCaps", "cut_in_view"]

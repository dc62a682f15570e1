"""Text clipping shared by the facts walker and the agent adapters."""

from __future__ import annotations

MAX_ITEM_CHARS = 300
"""Any single extracted item (sentence, error line, command) is cut to this length."""


def collapse(text: str) -> str:
    """One line, single spaces (what `Summary.add` does to every bullet)."""
    return " ".join(text.split())


def clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    text = collapse(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

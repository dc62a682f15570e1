"""What every wire format shares: the error naming a bad field, a parsed batch, render options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from contextfold.domain import Message, SystemPrompt, ToolResult
from contextfold.errors import FormatError

__all__ = ["INTERRUPTED_RESULT", "FormatError", "ParsedBatch", "RenderOptions", "WireFormat"]

WireFormat = Literal["anthropic", "openai"]


@dataclass
class ParsedBatch:
    system: list[SystemPrompt] | None = None
    """The batch's system prompt, or None when the batch says nothing about it."""
    messages: list[Message] = field(default_factory=list)
    """New messages in order. Results for calls made in this same batch are already attached."""
    results: list[ToolResult] = field(default_factory=list)
    """Results whose call is not in this batch: the caller attaches them to stored calls."""


@dataclass(frozen=True)
class RenderOptions:
    interrupt_pending: bool = True
    """Answer a call still pending or running with an error result (both APIs reject an unanswered call)."""
    strip_media: bool = False
    """Replace images and documents with a short text placeholder."""
    pruned_placeholder: str = "[Old tool result content cleared]"
    output_cap: int | None = None
    """Cap each tool output at this many characters, with a note of how many were omitted."""


INTERRUPTED_RESULT = "[Tool execution was interrupted]"

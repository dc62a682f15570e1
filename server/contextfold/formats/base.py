"""What every wire format shares: the error naming a bad field, a parsed batch, render options."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias

from contextfold.domain import Message, SystemPrompt, ToolResult
from contextfold.errors import FormatError

__all__ = ["INTERRUPTED_RESULT", "FormatError", "JSONValue", "ParsedBatch", "RenderOptions", "SystemArg", "UsageArg", "WireFormat", "WireMessage"]

WireFormat = Literal["anthropic", "openai"]

JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
"""A value as JSON has it."""
WireMessage: TypeAlias = Mapping[str, JSONValue]
"""One message as an API sends it: Anthropic's `{role, content}` (content a string or blocks), or
OpenAI's `{role, content, tool_calls?, tool_call_id?}`. `parse` names the first field it cannot read."""
SystemArg: TypeAlias = "str | Sequence[Mapping[str, JSONValue]]"
"""A system prompt: one text, or Anthropic's list of text blocks."""
UsageArg: TypeAlias = Mapping[str, JSONValue]
"""Token usage as the API reported it for the last response (Anthropic's or OpenAI's field names)."""


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

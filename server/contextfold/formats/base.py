"""What every wire format shares: the error naming a bad field, a parsed batch, render options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from contextfold.domain import Message, SystemPrompt, TextPart, ToolResult
from contextfold.errors import FormatError

__all__ = [
    "INSTRUCTION_ROLE",
    "INTERRUPTED_RESULT",
    "FormatError",
    "JSONValue",
    "ParsedBatch",
    "RenderOptions",
    "SystemArg",
    "UsageArg",
    "WireFormat",
    "WireMessage",
    "instruction_message",
    "instruction_role",
]

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


INSTRUCTION_ROLE = "instruction_role"
"""Message metadata key: this user message was a `system`/`developer` message sent mid-conversation."""


def instruction_message(prompt: SystemPrompt) -> Message:
    """A system/developer message that came after the conversation began, kept where it was sent.

    Only the leading ones are the system prompt; a later one (Codex's `<model_switch>`) speaks at
    its place in the conversation. The domain has user and assistant roles only, so it is stored as
    a user message that remembers its role; the OpenAI renderer sends it back with that role.
    """
    return Message(role="user", parts=[TextPart(text=prompt.text)], metadata={INSTRUCTION_ROLE: prompt.role})


def instruction_role(message: Message) -> str | None:
    """`system` or `developer` for a message made by `instruction_message`, else None."""
    role = message.metadata.get(INSTRUCTION_ROLE)
    return role if role in ("system", "developer") and message.role == "user" else None

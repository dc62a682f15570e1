"""Wire formats in and out: Anthropic Messages and OpenAI Chat Completions.

`parse` turns a batch of wire messages into domain messages; `render` turns domain messages back
into a request body for either API. Both are pure functions: no I/O, no token counting.
Importers for whole transcript files (Claude Code, Codex, normalized JSONL) live in
`importers` and produce wire messages that go through `parse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from contextfold.domain import Message, SystemPrompt
from contextfold.errors import FormatError
from contextfold.formats.base import INTERRUPTED_RESULT, ParsedBatch, RenderOptions, WireFormat


def detect_format(messages: Sequence[Any]) -> WireFormat:
    """Guess the format of a batch from its shape; plain `{role, content: str}` counts as OpenAI."""
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("tool", "system", "developer") or "tool_calls" in message:
            return "openai"
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind in ("tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"):
                    return "anthropic"
                if kind in ("image_url", "input_audio", "file", "refusal"):
                    return "openai"
    return "openai"


def parse(messages: Sequence[Any], format: WireFormat | Literal["auto"] = "auto") -> ParsedBatch:
    """Read a batch of wire messages. Raises `FormatError` naming the first bad field."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise FormatError("messages", "expected a list of messages")
    chosen = detect_format(messages) if format == "auto" else format
    if chosen == "anthropic":
        from contextfold.formats.anthropic import parse_messages
    elif chosen == "openai":
        from contextfold.formats.openai import parse_messages
    else:
        raise FormatError("format", f"unknown format {format!r}; use 'anthropic', 'openai' or 'auto'")
    return parse_messages(messages)


def render(
    system: Sequence[SystemPrompt],
    messages: Sequence[Message],
    format: WireFormat,
    options: RenderOptions = RenderOptions(),
    memo: dict[str, tuple[Message, list[dict[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """A request body fragment: `{"system": …, "messages": […]}` (Anthropic) or `{"messages": […]}` (OpenAI).

    `memo` keeps each message's rendering between calls where the format renders messages one
    by one (OpenAI); Anthropic's merges neighbours and renders everything each time.
    """
    if format == "anthropic":
        from contextfold.formats.anthropic import render_messages as render_anthropic

        return render_anthropic(system, messages, options)
    if format == "openai":
        from contextfold.formats.openai import render_messages as render_openai

        return render_openai(system, messages, options, memo)
    raise FormatError("format", f"unknown format {format!r}; use 'anthropic' or 'openai'")


__all__ = [
    "INTERRUPTED_RESULT",
    "FormatError",
    "ParsedBatch",
    "RenderOptions",
    "WireFormat",
    "detect_format",
    "parse",
    "render",
]

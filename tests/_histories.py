"""Domain histories built by hand for the summary tests: messages, tool calls, store numbering."""

from __future__ import annotations

from itertools import count
from typing import Any

from contextfold.domain import Message, TextPart, ToolPart

_calls = count(1)


def user(text: str) -> Message:
    return Message(role="user", parts=[TextPart(text=text)])


def call(name: str, input: Any, output: str = "") -> ToolPart:
    return ToolPart(call_id=f"c{next(_calls)}", name=name, input=input, state="completed", output=output)


def assistant(text: str = "", *tools: ToolPart) -> Message:
    return Message(role="assistant", parts=([TextPart(text=text)] if text else []) + list(tools))


def stored(messages: list[Message]) -> list[Message]:
    """The messages numbered as a store numbers them (seq 1, 2, …)."""
    return [m.model_copy(update={"id": f"msg_{i}", "seq": i}) for i, m in enumerate(messages, 1)]

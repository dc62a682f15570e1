"""Tool calls across an imported file: results whose call is missing, and calls still waiting.

A session that continues an earlier one can open with the result of a call made in the earlier
file (Claude Code starts a plan's implementation with the rejected `ExitPlanMode` result). The
store pairs every result with its call, so such a result is kept as plain user text, with a
warning, instead of refusing the file. Calls left without a result are remembered, so a later
import of the grown file can still attach their results.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from contextfold.formats import WireFormat
from contextfold.names import ORPHAN_RESULT_END

_MEDIA = ("image", "document")


class Calls:
    """The calls waiting for a result as a file is read in order, message by message (`note`).

    Only calls still waiting are kept, so memory follows the calls in flight, not the file: a
    result whose call is not waiting (made before the file begins, or answered already) is an
    orphan, kept as user text.
    """

    def __init__(self, format: WireFormat, known: frozenset[str] = frozenset()) -> None:
        self.format = format
        self.waiting = set(known)
        self.orphans = 0
        self._first: int | None = None
        self._shown: list[str] = []

    def note(self, messages: list[dict[str, Any]], start: int = 0) -> None:
        """Read `messages` (the next ones, `start` the index of the first in the whole file),
        turning orphan results into user text in place."""
        for offset, message in enumerate(messages):
            if self.format == "anthropic":
                found = _anthropic_orphans(message, self.waiting)
            else:
                found = _openai_orphans(messages, offset, self.waiting)
                message = messages[offset]
            if found:
                self.orphans += len(found)
                self._first = start + offset if self._first is None else self._first
                self._shown.extend(found[: 4 - len(self._shown)])
            self.waiting.difference_update(_results_given(message, self.format))
            self.waiting.update(_calls_made(message, self.format))

    def warnings(self) -> list[str]:
        if not self.orphans:
            return []
        where = "at the start of the file" if self._first == 0 else f"first at message {(self._first or 0) + 1}"
        ids = ", ".join(self._shown[:3]) + (", …" if self.orphans > 3 else "")
        return [
            f"{self.orphans} tool result(s) answer a call that is not in this file ({ids}; {where}), e.g. a session "
            "continued from an earlier one; kept as plain user text"
        ]


def keep_orphan_results(messages: list[dict[str, Any]], format: WireFormat, known: frozenset[str]) -> list[str]:
    """Turn results whose call is neither waiting from earlier in `messages` nor in `known` into
    user text, in place. Returns the warnings to show (none when every result has its call)."""
    calls = Calls(format, known)
    calls.note(messages)
    return calls.warnings()


def open_calls(messages: list[dict[str, Any]], format: WireFormat, known: frozenset[str]) -> frozenset[str]:
    """Calls (from `known` or `messages`) that have no result once `messages` are read."""
    waiting = set(known)
    for message in messages:
        waiting.difference_update(_results_given(message, format))
        waiting.update(_calls_made(message, format))
    return frozenset(waiting)


def _calls_made(message: dict[str, Any], format: WireFormat) -> Iterator[str]:
    if message.get("role") != "assistant":
        return
    if format == "anthropic":
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                yield block["id"]
    else:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                yield call["id"]


def _results_given(message: dict[str, Any], format: WireFormat) -> Iterator[str]:
    if format == "anthropic":
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield str(block.get("tool_use_id"))
    elif message.get("role") == "tool":
        yield str(message.get("tool_call_id"))


def _anthropic_orphans(message: dict[str, Any], called: set[str]) -> list[str]:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    found: list[str] = []
    blocks: list[Any] = []
    for block in content:
        call_id = block.get("tool_use_id") if isinstance(block, dict) and block.get("type") == "tool_result" else None
        if not isinstance(call_id, str) or call_id in called:
            blocks.append(block)
            continue
        found.append(call_id)
        inner = block.get("content")
        parts = (
            [{"type": "text", "text": inner}] if isinstance(inner, str) else inner if isinstance(inner, list) else []
        )
        text = "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
        blocks.append({"type": "text", "text": _note(call_id, block.get("is_error") is True, text)})
        blocks.extend(p for p in parts if isinstance(p, dict) and p.get("type") in _MEDIA)
    if found:
        message["content"] = blocks
    return found


def _openai_orphans(messages: list[dict[str, Any]], index: int, called: set[str]) -> list[str]:
    message = messages[index]
    call_id = message.get("tool_call_id")
    if message.get("role") != "tool" or not isinstance(call_id, str) or call_id in called:
        return []
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    messages[index] = {"role": "user", "content": _note(call_id, False, content if isinstance(content, str) else "")}
    return [call_id]


def _note(call_id: str, is_error: bool, text: str) -> str:
    kind = "error result" if is_error else "result"
    return f"[The {kind} of tool call {call_id}{ORPHAN_RESULT_END}\n{text}"


__all__ = ["Calls", "keep_orphan_results", "open_calls"]

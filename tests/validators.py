"""Checks that a rendered request body is one the real API would accept.

They encode the API rules contextfold relies on (role order, call/result pairing, no blank text),
so any test that renders context can assert the body is sendable.
"""

from __future__ import annotations

from typing import Any

SUMMARY_HEADINGS = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
    "## Relevant Files",
)
"""The anchored summary's headings in order (docs/design.md §8–§11), written out here rather than taken from
the code, so a test cannot pass by agreeing with a template that drifted."""

_ANTHROPIC_BLOCKS = {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}
_ANTHROPIC_ASSISTANT_ONLY = {"tool_use", "thinking", "redacted_thinking"}
_ANTHROPIC_USER_ONLY = {"tool_result", "image", "document"}


def assert_anthropic_valid(body: dict[str, Any]) -> None:
    """Roles alternate from `user`; each `tool_use` is answered first thing in the next message."""
    assert set(body) <= {"system", "messages"}, f"unexpected keys {sorted(body)}"
    if "system" in body:
        assert body["system"], "an empty system list must be omitted"
        for block in body["system"]:
            _assert_text_block(block, "system")
    messages = body["messages"]
    assert isinstance(messages, list)
    seen_ids: set[str] = set()
    open_calls: list[str] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        assert set(message) == {"role", "content"}, f"{where}: keys {sorted(message)}"
        expected_role = "user" if index % 2 == 0 else "assistant"
        assert message["role"] == expected_role, f"{where}: role {message['role']!r}, expected {expected_role!r}"
        blocks = _anthropic_blocks(message["content"], where)
        answered = _assert_leading_results(blocks, open_calls, where)
        assert answered == open_calls, f"{where}: calls {open_calls} answered by {answered}"
        open_calls = []
        for position, block in enumerate(blocks):
            _assert_anthropic_block(block, message["role"], f"{where}.content[{position}]")
            if block["type"] == "tool_use":
                assert block["id"] not in seen_ids, f"{where}: tool_use id {block['id']!r} is not unique"
                seen_ids.add(block["id"])
                open_calls.append(block["id"])
    assert not open_calls, f"calls {open_calls} in the last message are never answered"


def _anthropic_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        assert content.strip(), f"{where}: blank string content"
        return [{"type": "text", "text": content}]
    assert isinstance(content, list) and content, f"{where}: content must be a non-empty list or a string"
    return content


def _assert_leading_results(blocks: list[dict[str, Any]], open_calls: list[str], where: str) -> list[str]:
    """The ids answered by the `tool_result` blocks that open this message; none may come later."""
    answered = []
    for block in blocks:
        if block["type"] != "tool_result":
            break
        answered.append(block["tool_use_id"])
    later = [b for b in blocks[len(answered) :] if b["type"] == "tool_result"]
    assert not later, f"{where}: tool_result blocks must all come before other content"
    return answered


def _assert_anthropic_block(block: dict[str, Any], role: str, where: str) -> None:
    kind = block.get("type")
    assert kind in _ANTHROPIC_BLOCKS, f"{where}: unknown block type {kind!r}"
    if kind in _ANTHROPIC_ASSISTANT_ONLY:
        assert role == "assistant", f"{where}: {kind} in a {role} message"
    if kind in _ANTHROPIC_USER_ONLY:
        assert role == "user", f"{where}: {kind} in a {role} message"
    if kind == "text":
        _assert_text_block(block, where)
    elif kind == "tool_use":
        assert isinstance(block["id"], str) and block["id"], where
        assert isinstance(block["name"], str), where
        assert isinstance(block["input"], dict), f"{where}: tool_use input must be an object"
    elif kind == "tool_result":
        _assert_tool_result(block, where)
    elif kind == "thinking":
        assert isinstance(block["thinking"], str) and isinstance(block["signature"], str), where
    elif kind == "redacted_thinking":
        assert isinstance(block["data"], str), where
    else:
        _assert_media_block(block, where)


def _assert_tool_result(block: dict[str, Any], where: str) -> None:
    assert set(block) <= {"type", "tool_use_id", "content", "is_error"}, f"{where}: keys {sorted(block)}"
    content = block.get("content", "")
    if isinstance(content, list):
        for position, item in enumerate(content):
            assert item["type"] in ("text", "image", "document"), f"{where}.content[{position}]"
            if item["type"] == "text":
                _assert_text_block(item, f"{where}.content[{position}]")
            else:
                _assert_media_block(item, f"{where}.content[{position}]")
    else:
        assert isinstance(content, str), where
    if block.get("is_error"):
        assert block["is_error"] is True, where
        assert content and (not isinstance(content, str) or content.strip()), f"{where}: an error result needs content"


def _assert_media_block(block: dict[str, Any], where: str) -> None:
    source = block["source"]
    if source["type"] == "base64":
        assert isinstance(source["media_type"], str) and isinstance(source["data"], str), where
    elif source["type"] == "url":
        assert isinstance(source["url"], str), where
    else:
        assert block["type"] == "document" and source["type"] == "text", f"{where}: source {source['type']!r}"
        assert isinstance(source["data"], str), where


def _assert_text_block(block: dict[str, Any], where: str) -> None:
    assert block.get("type") == "text", f"{where}: expected a text block"
    assert isinstance(block.get("text"), str) and block["text"].strip(), f"{where}: blank text block"


_OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}
_OPENAI_USER_PARTS = {"text", "image_url", "input_audio", "file"}


def assert_openai_valid(body: dict[str, Any]) -> None:
    """Every tool call is answered by a `tool` message before the next user or assistant message."""
    assert set(body) == {"messages"}, f"unexpected keys {sorted(body)}"
    messages = body["messages"]
    assert isinstance(messages, list)
    open_calls: list[str] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role")
        assert role in _OPENAI_ROLES, f"{where}: role {role!r}"
        if role == "tool":
            call_id = message["tool_call_id"]
            assert call_id in open_calls, f"{where}: tool result for {call_id!r}, which no open call made"
            open_calls.remove(call_id)
            assert isinstance(message["content"], str), f"{where}: tool content must be a string"
            continue
        assert not open_calls, f"{where}: calls {open_calls} are not answered before this {role} message"
        if role == "assistant":
            open_calls = _assert_openai_assistant(message, where)
        elif role == "user":
            _assert_openai_user(message, where)
        else:
            assert isinstance(message["content"], str), f"{where}: {role} content must be a string"
    assert not open_calls, f"calls {open_calls} are never answered"


def _assert_openai_assistant(message: dict[str, Any], where: str) -> list[str]:
    assert set(message) <= {"role", "content", "name", "tool_calls"}, f"{where}: keys {sorted(message)}"
    calls = message.get("tool_calls")
    content = message.get("content")
    assert content is None or isinstance(content, str), f"{where}: content must be a string or null"
    if calls is None:
        assert content is not None, f"{where}: an assistant message needs content or tool_calls"
        return []
    assert isinstance(calls, list) and calls, f"{where}: tool_calls must be omitted when empty"
    ids = []
    for position, call in enumerate(calls):
        assert call["type"] == "function", f"{where}.tool_calls[{position}]"
        assert isinstance(call["id"], str) and call["id"], f"{where}.tool_calls[{position}]"
        assert isinstance(call["function"]["name"], str), f"{where}.tool_calls[{position}]"
        assert isinstance(call["function"]["arguments"], str), f"{where}.tool_calls[{position}]"
        ids.append(call["id"])
    return ids


def _assert_openai_user(message: dict[str, Any], where: str) -> None:
    assert set(message) <= {"role", "content", "name"}, f"{where}: keys {sorted(message)}"
    content = message["content"]
    if isinstance(content, str):
        return
    assert isinstance(content, list) and content, f"{where}: content must be a string or a non-empty list"
    for position, part in enumerate(content):
        assert part["type"] in _OPENAI_USER_PARTS, f"{where}.content[{position}]: type {part['type']!r}"

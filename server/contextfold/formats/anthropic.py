"""Anthropic Messages format <-> domain messages.

Parsing reads a `messages` array (the `system` prompt travels separately in this API).
Rendering builds `{"system": [...], "messages": [...]}` that the Messages API accepts: roles
alternate starting with `user`, every `tool_use` is answered by a `tool_result` at the start of
the next message, and no text block is blank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from contextfold.domain import (
    CompactionPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    Role,
    SystemPrompt,
    TextPart,
    ToolPart,
    ToolResult,
)
from contextfold.errors import FormatError
from contextfold.formats._common import (
    CONTINUATION_TEXT,
    BatchBuilder,
    after_summary,
    block_type,
    decode_text,
    encode_text,
    expect_list,
    expect_object,
    guess_mime,
    json_type,
    optional_bool,
    optional_str,
    require_str,
)
from contextfold.formats.base import ParsedBatch, RenderOptions
from contextfold.formats.shown import (
    COMPACTION_PROMPT,
    ShownResult,
    media_placeholder,
    shown_input,
    shown_result,
    shows_media,
)

__all__ = ["COMPACTION_PROMPT", "CONTINUATION_TEXT", "EMPTY_ERROR_TEXT", "parse_messages", "render_messages"]

EMPTY_ERROR_TEXT = "(the tool failed without an error message)"
"""The API rejects an error `tool_result` with empty content, so a silent failure says this."""

_ROLES = ("user", "assistant")
_IMAGE_MIMES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_NON_OBJECT_INPUT_KEY = "input"
"""A call whose input is not an object (broken OpenAI arguments) is sent as `{"input": value}`."""

_Parsed = Part | ToolResult | None
_BlockParser = Callable[[dict[str, Any], str], _Parsed]


# -- parse ----------------------------------------------------------------------------------------


def parse_messages(messages: Sequence[Any]) -> ParsedBatch:
    """Read Anthropic `messages`. Raises `FormatError` naming the first bad field."""
    builder = BatchBuilder()
    for index, raw in enumerate(messages):
        _parse_message(raw, f"messages[{index}]", builder)
    return builder.batch


def _parse_message(raw: Any, path: str, builder: BatchBuilder) -> None:
    message = expect_object(raw, path, "a message object with role and content")
    role = _parse_role(message, path)
    items = _parse_content(message, path, role)
    parts = [item for item in items if not isinstance(item, ToolResult)]
    results = [item for item in items if isinstance(item, ToolResult)]
    for result in results:
        builder.add_result(result)
    # A user message that only carries tool results is not a user turn (domain rule).
    if parts or not results:
        builder.add_message(Message(role=role, parts=parts))


def _parse_role(message: dict[str, Any], path: str) -> Role:
    if "role" not in message:
        raise FormatError(f"{path}.role", "missing; expected 'user' or 'assistant'")
    role = message["role"]
    if role == "system":
        raise FormatError(
            f"{path}.role",
            "'system' is not a message role in the Anthropic format; pass the system prompt separately as `system`",
        )
    if role not in _ROLES:
        shown = repr(role) if isinstance(role, str) else json_type(role)
        raise FormatError(f"{path}.role", f"expected 'user' or 'assistant', got {shown}")
    return cast(Role, role)  # one of _ROLES, checked above


def _parse_content(message: dict[str, Any], path: str, role: str) -> list[Part | ToolResult]:
    if "content" not in message:
        raise FormatError(f"{path}.content", "missing; expected a string or an array of content blocks")
    content = message["content"]
    if isinstance(content, str):
        return [TextPart(text=content)]
    blocks = expect_list(content, f"{path}.content", "a string or an array of content blocks")
    items: list[Part | ToolResult] = []
    for index, raw in enumerate(blocks):
        item = _parse_block(raw, f"{path}.content[{index}]", role)
        if item is not None:
            items.append(item)
    return items


def _parse_block(raw: Any, path: str, role: str) -> _Parsed:
    block = expect_object(raw, path, "a content block object")
    kind = block_type(block, path)
    parser = _BLOCK_PARSERS.get(kind)
    if parser is None:
        known = ", ".join(_BLOCK_PARSERS)
        raise FormatError(f"{path}.type", f"unknown block type {kind!r}; expected one of {known}")
    allowed = _BLOCK_ROLES.get(kind)
    if allowed is not None and role != allowed:
        raise FormatError(f"{path}.type", f"a {kind!r} block belongs in {allowed} messages, not in a {role} message")
    return parser(block, path)


def _parse_text(block: dict[str, Any], path: str) -> _Parsed:
    return TextPart(text=require_str(block, "text", path))


def _parse_image(block: dict[str, Any], path: str) -> _Parsed:
    source = expect_object(block.get("source"), f"{path}.source", "an image source object")
    kind = require_str(source, "type", f"{path}.source")
    if kind == "base64":
        return FilePart(
            mime=require_str(source, "media_type", f"{path}.source"),
            data=require_str(source, "data", f"{path}.source"),
        )
    if kind == "url":
        url = require_str(source, "url", f"{path}.source")
        return FilePart(mime=guess_mime(url, "image/*"), url=url)
    raise FormatError(f"{path}.source.type", f"unsupported image source {kind!r}; expected 'base64' or 'url'")


def _parse_document(block: dict[str, Any], path: str) -> _Parsed:
    source = expect_object(block.get("source"), f"{path}.source", "a document source object")
    title = optional_str(block, "title", path)
    kind = require_str(source, "type", f"{path}.source")
    if kind == "base64":
        return FilePart(
            mime=require_str(source, "media_type", f"{path}.source"),
            data=require_str(source, "data", f"{path}.source"),
            filename=title,
        )
    if kind == "url":
        url = require_str(source, "url", f"{path}.source")
        return FilePart(mime=guess_mime(url, "application/pdf"), url=url, filename=title)
    if kind == "text":
        # FilePart.data is always base64, so a plain-text document is encoded to fit.
        mime = optional_str(source, "media_type", f"{path}.source") or "text/plain"
        text = require_str(source, "data", f"{path}.source")
        return FilePart(mime=mime, data=encode_text(text), filename=title)
    raise FormatError(
        f"{path}.source.type", f"unsupported document source {kind!r}; expected 'base64', 'url' or 'text'"
    )


def _parse_tool_use(block: dict[str, Any], path: str) -> _Parsed:
    if "input" not in block:
        raise FormatError(f"{path}.input", "missing; expected an object with the tool's arguments")
    arguments = expect_object(block["input"], f"{path}.input", "an object with the tool's arguments")
    return ToolPart(
        call_id=require_str(block, "id", path),
        name=require_str(block, "name", path),
        input=arguments,
        state="pending",
    )


def _parse_tool_result(block: dict[str, Any], path: str) -> _Parsed:
    call_id = require_str(block, "tool_use_id", path)
    is_error = optional_bool(block, "is_error", path)
    content = block.get("content")
    if content is None:
        return ToolResult(call_id=call_id, output="", is_error=is_error, source=path)
    if isinstance(content, str):
        return ToolResult(call_id=call_id, output=content, is_error=is_error, source=path)
    items = expect_list(content, f"{path}.content", "a string or an array of text and image blocks")
    texts: list[str] = []
    attachments: list[FilePart] = []
    for index, raw in enumerate(items):
        item_path = f"{path}.content[{index}]"
        item = expect_object(raw, item_path, "a text or image block")
        kind = block_type(item, item_path)
        if kind == "text":
            texts.append(require_str(item, "text", item_path))
        elif kind == "image":
            image = _parse_image(item, item_path)
            assert isinstance(image, FilePart)
            attachments.append(image)
        else:
            raise FormatError(
                f"{item_path}.type", f"unknown block type {kind!r} in a tool result; expected text or image"
            )
    return ToolResult(call_id=call_id, output="\n".join(texts), is_error=is_error, attachments=attachments, source=path)


def _parse_thinking(block: dict[str, Any], path: str) -> _Parsed:
    return ReasoningPart(
        text=require_str(block, "thinking", path),
        signature=optional_str(block, "signature", path),
    )


def _parse_redacted_thinking(block: dict[str, Any], path: str) -> _Parsed:
    return ReasoningPart(redacted_data=require_str(block, "data", path))


_BLOCK_PARSERS: dict[str, _BlockParser] = {
    "text": _parse_text,
    "image": _parse_image,
    "document": _parse_document,
    "tool_use": _parse_tool_use,
    "tool_result": _parse_tool_result,
    "thinking": _parse_thinking,
    "redacted_thinking": _parse_redacted_thinking,
}

_BLOCK_ROLES = {
    "tool_use": "assistant",
    "thinking": "assistant",
    "redacted_thinking": "assistant",
    "tool_result": "user",
}


# -- render ---------------------------------------------------------------------------------------

_Block = dict[str, Any]


def render_messages(
    system: Sequence[SystemPrompt], messages: Sequence[Message], options: RenderOptions
) -> dict[str, Any]:
    """A Messages API body fragment: `{"system": [...], "messages": [...]}` (no `system` when empty)."""
    turns: list[dict[str, Any]] = []
    ids = _CallIds()
    previous: Message | None = None
    for message in messages:
        if after_summary(previous, message):
            _append(turns, "user", [_text_block(CONTINUATION_TEXT)])
        previous = message
        if message.role == "assistant":
            blocks, results = _assistant_blocks(message, options, ids)
            _append(turns, "assistant", blocks)
            _append(turns, "user", results)
        else:
            _append(turns, "user", _user_blocks(message, options))
    if turns and turns[0]["role"] == "assistant":
        # Design choice: the API requires the first message to be `user`. When the view starts
        # with the assistant (e.g. history began mid-conversation), we prepend a short synthetic
        # user message rather than drop the assistant's words.
        turns.insert(0, {"role": "user", "content": [_text_block(CONTINUATION_TEXT)]})
    body: dict[str, Any] = {}
    system_blocks = [_text_block(prompt.text) for prompt in system if prompt.text.strip()]
    if system_blocks:
        body["system"] = system_blocks
    body["messages"] = [_collapse(turn) for turn in turns]
    return body


def _append(turns: list[dict[str, Any]], role: str, blocks: list[_Block]) -> None:
    """Add blocks as a message, merged into the previous one when it has the same role."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": list(blocks)})


def _collapse(turn: dict[str, Any]) -> dict[str, Any]:
    """A message holding one plain text block is sent as a string, as it most likely arrived."""
    content = turn["content"]
    if len(content) == 1 and content[0].keys() == {"type", "text"} and content[0]["type"] == "text":
        return {"role": turn["role"], "content": content[0]["text"]}
    return turn


def _text_block(text: str) -> _Block:
    return {"type": "text", "text": text}


def _text_blocks(text: str) -> list[_Block]:
    """A text block, or none: the API rejects blank text blocks."""
    return [_text_block(text)] if text.strip() else []


def _user_blocks(message: Message, options: RenderOptions) -> list[_Block]:
    blocks: list[_Block] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.extend(_text_blocks(part.text))
        elif isinstance(part, FilePart):
            blocks.append(_file_block(part, options))
        elif isinstance(part, CompactionPart):
            blocks.append(_text_block(COMPACTION_PROMPT))
        # Reasoning and tool calls belong to assistant messages; a user message never sends them.
    return blocks


def _assistant_blocks(message: Message, options: RenderOptions, ids: _CallIds) -> tuple[list[_Block], list[_Block]]:
    """The assistant's blocks and the `tool_result` blocks that must follow them, in call order."""
    blocks: list[_Block] = []
    results: list[_Block] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.extend(_text_blocks(part.text))
        elif isinstance(part, ReasoningPart):
            blocks.extend(_reasoning_blocks(part))
        elif isinstance(part, ToolPart):
            result = shown_result(part, options)
            if result is None:
                continue  # an unanswered call is left out together with its (missing) result
            call_id = ids.wire_id(part.call_id)
            blocks.append(_tool_use_block(part, call_id))
            results.append(_tool_result_block(call_id, result, options))
        elif isinstance(part, FilePart):
            # The API takes media from the user only; the assistant's attachment becomes a note.
            blocks.append(_text_block(media_placeholder(part)))
        elif isinstance(part, CompactionPart):
            blocks.append(_text_block(COMPACTION_PROMPT))
    return blocks, results


def _reasoning_blocks(part: ReasoningPart) -> list[_Block]:
    if part.redacted_data is not None:
        return [{"type": "redacted_thinking", "data": part.redacted_data}]
    if part.signature is not None:
        return [{"type": "thinking", "thinking": part.text, "signature": part.signature}]
    return []  # unsigned thinking (e.g. from another provider) is rejected by the API


def _tool_use_block(part: ToolPart, call_id: str) -> _Block:
    shown = shown_input(part)
    arguments = shown if isinstance(shown, dict) else {_NON_OBJECT_INPUT_KEY: shown}
    return {"type": "tool_use", "id": call_id, "name": part.name, "input": arguments}


def _tool_result_block(call_id: str, result: ShownResult, options: RenderOptions) -> _Block:
    block: _Block = {"type": "tool_result", "tool_use_id": call_id}
    text = result.text
    if result.is_error:
        block["is_error"] = True
        if not text.strip():
            text = EMPTY_ERROR_TEXT
    if result.attachments:
        block["content"] = _text_blocks(text) + [_file_block(file, options) for file in result.attachments]
    elif text:
        block["content"] = text
    # An empty successful result omits `content`, which the API reads as empty.
    return block


def _file_block(part: FilePart, options: RenderOptions) -> _Block:
    """An image or document block, or a text placeholder for media the API cannot take here."""
    block = _media_block(part) if shows_media(part, options) else None
    return block if block is not None else _text_block(media_placeholder(part))


def _media_block(part: FilePart) -> _Block | None:
    if part.mime.startswith("image/"):
        if part.data is not None and part.mime in _IMAGE_MIMES:
            return {"type": "image", "source": {"type": "base64", "media_type": part.mime, "data": part.data}}
        if part.url is not None:
            return {"type": "image", "source": {"type": "url", "url": part.url}}
        return None
    source = _document_source(part)
    if source is None:
        return None
    block: _Block = {"type": "document", "source": source}
    if part.filename:
        block["title"] = part.filename
    return block


def _document_source(part: FilePart) -> dict[str, Any] | None:
    if part.mime == "application/pdf":
        if part.data is not None:
            return {"type": "base64", "media_type": part.mime, "data": part.data}
        if part.url is not None:
            return {"type": "url", "url": part.url}
        return None
    if part.mime.startswith("text/") and part.data is not None:
        text = decode_text(part.data)
        if text is not None:
            return {"type": "text", "media_type": "text/plain", "data": text}
    return None


class _CallIds:
    """Wire ids for tool calls, unique within one rendered body.

    The API rejects a body in which two `tool_use` blocks share an id, but some agents
    (SWE-agent) reuse ids for different calls. The first use keeps its id; later ones get a
    numbered suffix, and the matching `tool_result` uses the same renamed id.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def wire_id(self, call_id: str) -> str:
        candidate, n = call_id, 1
        while candidate in self._seen:
            n += 1
            candidate = f"{call_id}_{n}"
        self._seen.add(candidate)
        return candidate

"""OpenAI Chat Completions messages <-> domain messages.

Parsing reads a `messages` array: the leading `system`/`developer` messages become the batch's system
prompt, later ones stay in place (`instruction_message`), `tool` messages complete the calls of
earlier assistant messages. Rendering builds
`{"messages": [...]}` with the system prompt first and each assistant message followed directly
by one `tool` message per call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

from contextfold import safejson
from contextfold.domain import (
    CompactionPart,
    FilePart,
    Message,
    Part,
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
    data_url,
    expect_list,
    expect_object,
    guess_mime,
    json_type,
    optional_str,
    parse_data_url,
    require_str,
)
from contextfold.formats.base import ParsedBatch, RenderOptions, instruction_message, instruction_role
from contextfold.formats.shown import (
    COMPACTION_PROMPT,
    ShownResult,
    media_placeholder,
    shown_input,
    shown_raw_arguments,
    shown_result,
    shows_media,
)

__all__ = ["COMPACTION_PROMPT", "CONTINUATION_TEXT", "parse_messages", "render_messages"]

_ROLES = ("system", "developer", "user", "assistant", "tool")
_AUDIO_MIMES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}

_PartParser = Callable[[dict[str, Any], str], Part]


# -- parse ----------------------------------------------------------------------------------------


def parse_messages(messages: Sequence[Any]) -> ParsedBatch:
    """Read Chat Completions `messages`. Raises `FormatError` naming the first bad field."""
    builder = BatchBuilder()
    for index, raw in enumerate(messages):
        path = f"messages[{index}]"
        message = expect_object(raw, path, "a message object with role and content")
        role = _parse_role(message, path)
        name = optional_str(message, "name", path)
        if role in ("system", "developer"):
            prompt = SystemPrompt(role=role, text=_text_content(message, path))
            if builder.batch.messages:
                builder.add_message(instruction_message(prompt))
            else:
                builder.add_system(prompt)
        elif role == "user":
            builder.add_message(Message(role="user", parts=_user_parts(message, path), name=name))
        elif role == "assistant":
            builder.add_message(Message(role="assistant", parts=_assistant_parts(message, path), name=name))
        else:
            # `name` on a tool message repeats the tool's name (older clients); the call has it.
            builder.add_result(_tool_result(message, path))
    return builder.batch


_Role = Literal["system", "developer", "user", "assistant", "tool"]


def _parse_role(message: dict[str, Any], path: str) -> _Role:
    if "role" not in message:
        raise FormatError(f"{path}.role", f"missing; expected one of {', '.join(_ROLES)}")
    role = message["role"]
    if role == "function":
        raise FormatError(
            f"{path}.role",
            "the legacy 'function' role is not supported; send the result as role 'tool' with its tool_call_id",
        )
    if role not in _ROLES:
        shown = repr(role) if isinstance(role, str) else json_type(role)
        raise FormatError(f"{path}.role", f"expected one of {', '.join(_ROLES)}, got {shown}")
    return cast(_Role, role)  # one of _ROLES, checked above


def _text_content(message: dict[str, Any], path: str) -> str:
    """Content that may only be text: a string or an array of text parts (joined by newlines)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    items = expect_list(content, f"{path}.content", "a string or an array of text parts")
    texts = []
    for index, raw in enumerate(items):
        item_path = f"{path}.content[{index}]"
        item = expect_object(raw, item_path, "a text part")
        kind = block_type(item, item_path)
        if kind != "text":
            raise FormatError(f"{item_path}.type", f"unsupported part type {kind!r} here; expected 'text'")
        texts.append(require_str(item, "text", item_path))
    return "\n".join(texts)


def _user_parts(message: dict[str, Any], path: str) -> list[Part]:
    content = message.get("content")
    if isinstance(content, str):
        return [TextPart(text=content)]
    items = expect_list(content, f"{path}.content", "a string or an array of content parts")
    parts: list[Part] = []
    for index, raw in enumerate(items):
        item_path = f"{path}.content[{index}]"
        item = expect_object(raw, item_path, "a content part object")
        kind = block_type(item, item_path)
        parser = _USER_PART_PARSERS.get(kind)
        if parser is None:
            known = ", ".join(_USER_PART_PARSERS)
            raise FormatError(f"{item_path}.type", f"unknown content part type {kind!r}; expected one of {known}")
        parts.append(parser(item, item_path))
    return parts


def _parse_text(item: dict[str, Any], path: str) -> Part:
    return TextPart(text=require_str(item, "text", path))


def _parse_image_url(item: dict[str, Any], path: str) -> Part:
    image = expect_object(item.get("image_url"), f"{path}.image_url", "an object with a url")
    url = require_str(image, "url", f"{path}.image_url")
    if url.startswith("data:"):
        mime, data = parse_data_url(url, f"{path}.image_url.url")
        return FilePart(mime=mime, data=data)
    return FilePart(mime=guess_mime(url, "image/*"), url=url)


def _parse_input_audio(item: dict[str, Any], path: str) -> Part:
    audio = expect_object(item.get("input_audio"), f"{path}.input_audio", "an object with data and format")
    data = require_str(audio, "data", f"{path}.input_audio")
    audio_format = require_str(audio, "format", f"{path}.input_audio")
    return FilePart(mime=_AUDIO_MIMES.get(audio_format, f"audio/{audio_format}"), data=data)


def _parse_file(item: dict[str, Any], path: str) -> Part:
    file = expect_object(item.get("file"), f"{path}.file", "an object with file_data and filename")
    filename = optional_str(file, "filename", f"{path}.file")
    file_data = optional_str(file, "file_data", f"{path}.file")
    if file_data is None:
        if file.get("file_id") is not None:
            raise FormatError(
                f"{path}.file.file_id", "uploaded file references are not supported; send the content as file_data"
            )
        raise FormatError(f"{path}.file.file_data", "missing; expected the file as a base64 data: URL")
    if file_data.startswith("data:"):
        mime, data = parse_data_url(file_data, f"{path}.file.file_data")
    else:
        # Some clients send bare base64; the file name is the only hint of its type.
        mime, data = guess_mime(filename, "application/octet-stream"), file_data
    return FilePart(mime=mime, data=data, filename=filename)


_USER_PART_PARSERS: dict[str, _PartParser] = {
    "text": _parse_text,
    "image_url": _parse_image_url,
    "input_audio": _parse_input_audio,
    "file": _parse_file,
}


def _assistant_parts(message: dict[str, Any], path: str) -> list[Part]:
    if message.get("function_call") is not None:
        raise FormatError(
            f"{path}.function_call",
            "the legacy function_call field is not supported; send the call in tool_calls with an id",
        )
    parts: list[Part] = [TextPart(text=text) for text in _assistant_texts(message, path)]
    raw_calls = message.get("tool_calls")
    if raw_calls is not None:
        calls = expect_list(raw_calls, f"{path}.tool_calls", "an array of tool calls")
        parts.extend(_parse_tool_call(raw, f"{path}.tool_calls[{index}]") for index, raw in enumerate(calls))
    return parts


def _assistant_texts(message: dict[str, Any], path: str) -> list[str]:
    """The assistant's words: `content` (string, null or text/refusal parts) and any `refusal`."""
    content = message.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif content is not None:
        items = expect_list(content, f"{path}.content", "a string, null or an array of text parts")
        for index, raw in enumerate(items):
            item_path = f"{path}.content[{index}]"
            item = expect_object(raw, item_path, "a text or refusal part")
            kind = block_type(item, item_path)
            if kind not in ("text", "refusal"):
                raise FormatError(f"{item_path}.type", f"unsupported part type {kind!r}; expected 'text' or 'refusal'")
            texts.append(require_str(item, kind, item_path))
    refusal = optional_str(message, "refusal", path)
    if refusal:
        texts.append(refusal)
    return texts


def _parse_tool_call(raw: Any, path: str) -> ToolPart:
    call = expect_object(raw, path, "a tool call object")
    call_type = call.get("type", "function")
    if call_type != "function":
        shown = repr(call_type) if isinstance(call_type, str) else json_type(call_type)
        raise FormatError(f"{path}.type", f"unsupported tool call type {shown}; expected 'function'")
    function = expect_object(call.get("function"), f"{path}.function", "an object with name and arguments")
    if "arguments" not in function:
        raise FormatError(f"{path}.function.arguments", "missing; expected the arguments as a JSON string")
    arguments = function["arguments"]
    if not isinstance(arguments, str):
        raise FormatError(
            f"{path}.function.arguments",
            f"expected the arguments as a JSON-encoded string, got {json_type(arguments)}",
        )
    return ToolPart(
        call_id=require_str(call, "id", path),
        name=require_str(function, "name", f"{path}.function"),
        input=_decode_arguments(arguments),
        raw_arguments=arguments,
        state="pending",
    )


def _decode_arguments(arguments: str) -> Any:
    """The arguments as JSON, or the raw string when the model emitted broken JSON (kept as is).

    JSON nested deeper than `safejson.MAX_DEPTH` is kept as the raw string too: decoded, it would
    break the serializers downstream.
    """
    try:
        return safejson.clean(json.loads(arguments), "arguments")
    except (ValueError, RecursionError):  # safejson's LimitExceeded is a ValueError
        return arguments


def _tool_result(message: dict[str, Any], path: str) -> ToolResult:
    # OpenAI has no error flag on tool results: a failure is just text.
    return ToolResult(
        call_id=require_str(message, "tool_call_id", path),
        output=_text_content(message, path),
        source=path,
    )


# -- render ---------------------------------------------------------------------------------------

_Wire = dict[str, Any]


def render_messages(
    system: Sequence[SystemPrompt],
    messages: Sequence[Message],
    options: RenderOptions,
    memo: dict[str, tuple[Message, list[_Wire]]] | None = None,
) -> dict[str, Any]:
    """A Chat Completions body fragment: `{"messages": [...]}`, system prompts first.

    Each message renders on its own, so `memo` (message id → the message object and what it
    rendered to) can keep renderings between calls: a message is rendered again only when it is
    not the same object as the one memoized. Renderings are shared, never to be modified.
    """
    wire: list[_Wire] = [{"role": prompt.role, "content": prompt.text} for prompt in system]
    previous: Message | None = None
    for message in messages:
        if after_summary(previous, message):
            wire.append({"role": "user", "content": CONTINUATION_TEXT})  # as the Anthropic format sends it
        previous = message
        known = memo.get(message.id) if memo is not None else None
        if known is not None and known[0] is message:
            wire.extend(known[1])
            continue
        rendered = (
            _render_assistant(message, options) if message.role == "assistant" else _render_user(message, options)
        )
        if memo is not None:
            memo[message.id] = (message, rendered)
        wire.extend(rendered)
    return {"messages": wire}


def _render_user(message: Message, options: RenderOptions) -> list[_Wire]:
    role = instruction_role(message)
    if role is not None:
        return [{"role": role, "content": "\n".join(p.text for p in message.parts if isinstance(p, TextPart))}]
    parts: list[_Wire] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append(_text_part(part.text))
        elif isinstance(part, FilePart):
            parts.append(_file_part(part, options))
        elif isinstance(part, CompactionPart):
            parts.append(_text_part(COMPACTION_PROMPT))
        # Reasoning and tool calls belong to assistant messages; a user message never sends them.
    if not parts:
        return []
    if all(part["type"] == "text" for part in parts):
        content: str | list[_Wire] = "\n".join(part["text"] for part in parts)
    else:
        content = parts
    return [_with_name({"role": "user", "content": content}, message)]


def _render_assistant(message: Message, options: RenderOptions) -> list[_Wire]:
    texts: list[str] = []
    calls: list[_Wire] = []
    results: list[_Wire] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ToolPart):
            result = shown_result(part, options)
            if result is None:
                continue  # an unanswered call is left out together with its (missing) result
            calls.append(_tool_call(part))
            results.append(_tool_message(part.call_id, result))
        elif isinstance(part, FilePart):
            texts.append(media_placeholder(part))  # assistant content can only be text
        elif isinstance(part, CompactionPart):
            texts.append(COMPACTION_PROMPT)
        # Reasoning is dropped: Chat Completions has no field to replay it.
    if not texts and not calls:
        return []
    wire = _with_name({"role": "assistant", "content": "\n".join(texts) if texts else None}, message)
    if calls:
        wire["tool_calls"] = calls
    return [wire, *results]


def _with_name(wire: _Wire, message: Message) -> _Wire:
    if message.name is not None:
        wire["name"] = message.name
    return wire


def _tool_call(part: ToolPart) -> _Wire:
    arguments = shown_raw_arguments(part)
    if arguments is None:
        arguments = json.dumps(shown_input(part), ensure_ascii=False)
    return {"id": part.call_id, "type": "function", "function": {"name": part.name, "arguments": arguments}}


def _tool_message(call_id: str, result: ShownResult) -> _Wire:
    # Tool messages carry text only, so anything the tool attached is named in a note.
    notes = [media_placeholder(file) for file in result.attachments]
    content = "\n".join([result.text, *notes]) if notes else result.text
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _text_part(text: str) -> _Wire:
    return {"type": "text", "text": text}


def _file_part(part: FilePart, options: RenderOptions) -> _Wire:
    """An image, audio or file part, or a text placeholder when media is stripped or unsendable."""
    wire = _media_part(part) if shows_media(part, options) else None
    return wire if wire is not None else _text_part(media_placeholder(part))


def _media_part(part: FilePart) -> _Wire | None:
    if part.mime.startswith("image/"):
        url = data_url(part.mime, part.data) if part.data is not None else part.url
        return {"type": "image_url", "image_url": {"url": url}} if url is not None else None
    if part.data is None:
        return None  # only images may be sent by URL
    if part.mime.startswith("audio/"):
        audio_format = _AUDIO_FORMATS.get(part.mime, part.mime.split("/", 1)[1])
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": audio_format}}
    file: _Wire = {"file_data": data_url(part.mime, part.data)}
    if part.filename is not None:
        file["filename"] = part.filename
    return {"type": "file", "file": file}

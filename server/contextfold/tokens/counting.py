"""Token counting: exact BPE counts offline, labelled estimates everywhere else.

The two OpenAI rank files ship gzipped inside the package (`_data/`). tiktoken would download
them on first use; we hand it the packaged bytes instead, after checking them against the
sha256 that tiktoken's own `tiktoken_ext.openai_public` expects. Nothing here touches the network.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from contextfold.config import Settings
from contextfold.domain import (
    CompactionPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    SystemPrompt,
    TextPart,
    ToolPart,
)
from contextfold.errors import LimitExceeded
from contextfold.formats.shown import (
    media_placeholder,
    shown_input_text,
    shown_output,
    shows_as_stored,
    tool_input_text,
)
from contextfold.results import TokenCount
from contextfold.tokens import windows as tokenwindows
from contextfold.tokens.catalog import ModelInfo, lookup
from contextfold.tokens.encodings import Encoding, encoding

Method = Literal["exact", "estimate"]

MESSAGE_OVERHEAD = 4
"""Role markers and separators each message costs in the prompt."""
TOOL_OVERHEAD = 10
"""The wrapper around a tool call and its result (ids, type tags, block delimiters)."""
IMAGE_TOKENS = 1_600
"""An image of unknown size (Anthropic's figure for a full-size image)."""
PDF_PAGE_TOKENS = 2_000
PDF_BYTES_PER_PAGE = 50_000
"""Pages of a PDF we cannot open are guessed from its size."""
COMPACTION_MARKER_TOKENS = 8

DEFAULT_FACTORS = {"claude": 1.20, "gemini": 1.15, "unknown": 1.20}
"""Safety factors over o200k for tokenizers that are not public (and for models we do not know).
They err high on purpose: over-counting costs one early compaction, under-counting fails the request."""

# -- counters ------------------------------------------------------------------------------------

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3200-\u33ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)


def estimate_chars(text: str) -> int:
    """A character estimate that does not undercount Chinese, Japanese or Korean.

    Latin-script text runs about 4 characters a token; CJK about one character a token, so the
    usual `len / 4` would undercount it fourfold.
    """
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


@dataclass(frozen=True)
class TokenCounter:
    """Counts text for one model: exact for OpenAI encodings, an estimate otherwise."""

    model: str
    method: Method
    encoding: Encoding | None
    """The BPE used (for estimates, the one the factor is applied to)."""
    factor: float = 1.0
    char_floor: bool = False
    """Never below the CJK-aware character estimate: for models whose tokenizer we do not know,
    whose CJK text may cost more than o200k says."""

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.encoding is None:
            return estimate_chars(text)
        exact = tokenwindows.count(encoding(self.encoding), text)
        tokens = exact if self.factor == 1.0 else math.ceil(exact * self.factor)
        return max(tokens, estimate_chars(text)) if self.char_floor else tokens


def counter_for(model: str | ModelInfo | None, factors: dict[str, float] | None = None) -> TokenCounter:
    """The counter for a model id (or catalogue entry).

    Unknown models are estimated like Claude and Gemini, o200k times a safety factor, and never
    below the CJK-aware character estimate: characters alone undercount code and dense text.
    """
    info = model if isinstance(model, ModelInfo) else lookup(model)
    factors = {**DEFAULT_FACTORS, **(factors or {})}
    if info.tokenizer in ("o200k_base", "cl100k_base"):
        return TokenCounter(info.id, "exact", info.tokenizer)
    if info.tokenizer in ("claude", "gemini"):
        return TokenCounter(info.id, "estimate", "o200k_base", factors[info.tokenizer])
    return TokenCounter(info.id, "estimate", "o200k_base", factors["unknown"], char_floor=True)


# -- media -----------------------------------------------------------------------------------------


def _image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF or JPEG header; None when the format is not recognised."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            length = struct.unpack(">H", data[i + 2 : i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):  # start of frame: height then width
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return width, height
            i += 2 + length
    return None


def _image_tokens(width: int, height: int) -> int:
    # Anthropic resizes so the long edge is at most 1568 px, then charges width × height / 750.
    scale = min(1.0, 1568 / max(width, height, 1))
    return max(1, math.ceil((width * scale) * (height * scale) / 750))


def _decoded_prefix(b64: str, size: int = 64 * 1024) -> bytes:
    """Decode the start of a base64 payload: enough for a header, cheap for a large file."""
    head = b64[: size - size % 4]
    try:
        return base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return b""


def media_tokens(part: FilePart) -> int:
    """A fixed estimate for an attachment: exact image dimensions when the header tells them."""
    if part.mime.startswith("image/"):
        size = _image_size(_decoded_prefix(part.data)) if part.data else None
        return _image_tokens(*size) if size else IMAGE_TOKENS
    if part.mime == "application/pdf":
        nbytes = len(part.data) * 3 // 4 if part.data else 0
        return PDF_PAGE_TOKENS * max(1, math.ceil(nbytes / PDF_BYTES_PER_PAGE))
    return IMAGE_TOKENS


# -- parts and messages ------------------------------------------------------------------------


def count_part(part: Part, counter: TokenCounter) -> int:
    """Tokens one part costs in a prompt, full output included (pruning is the view's business)."""
    match part:
        case TextPart():
            return counter.count(part.text)
        case ReasoningPart():
            if part.redacted_data:
                return math.ceil(len(part.redacted_data) / 4)
            return counter.count(part.text)
        case ToolPart():
            return (
                TOOL_OVERHEAD
                + counter.count(part.name)
                + counter.count(tool_input_text(part))
                + counter.count(part.result_text)
                + sum(media_tokens(a) for a in part.attachments)
            )
        case FilePart():
            return media_tokens(part)
        case CompactionPart():
            return COMPACTION_MARKER_TOKENS
    raise TypeError(f"not a part: {part!r}")


def count_message(message: Message, counter: TokenCounter) -> Message:
    """Return `message` with every part's count and the message total filled in.

    `view_tokens` is set too when a part is shown differently in the view (pruned, cut, omitted).
    """
    parts = [p.model_copy(update={"tokens": count_part(p, counter)}) for p in message.parts]
    total = MESSAGE_OVERHEAD + sum(p.tokens for p in parts)
    in_view = MESSAGE_OVERHEAD + sum(count_in_view(p, counter) for p in parts)
    return message.model_copy(
        update={"parts": parts, "tokens": total, "view_tokens": None if in_view == total else in_view}
    )


def count_in_view(part: Part, counter: TokenCounter) -> int:
    """Tokens `part` costs as the view shows it (`shown`): a pruned output as its placeholder, a
    cut output as its first characters and a note, a digested one as its digest, cleared
    arguments as `{}`, an omitted attachment as its note. A part shown as stored costs its count."""
    if isinstance(part, ToolPart):
        if part.tokens and shows_as_stored(part):
            return part.tokens
        output = shown_output(part)
        return (
            TOOL_OVERHEAD
            + counter.count(part.name)
            + counter.count(shown_input_text(part))
            + counter.count(output.text)
            + sum(_attachment_in_view(file, counter) for file in output.attachments)
        )
    if isinstance(part, FilePart) and part.omitted:
        return _attachment_in_view(part, counter)
    return part.tokens or count_part(part, counter)


def _attachment_in_view(file: FilePart, counter: TokenCounter) -> int:
    """An attachment shown costs its media estimate; one left out, the note that names it."""
    return counter.count(media_placeholder(file)) if file.omitted else media_tokens(file)


def count_system(prompts: Iterable[SystemPrompt], counter: TokenCounter) -> list[SystemPrompt]:
    return [p.model_copy(update={"tokens": MESSAGE_OVERHEAD + counter.count(p.text)}) for p in prompts]


# -- a count asked for -------------------------------------------------------------------------------


def check_count_size(field: str, value: Any, limit: int) -> None:
    """Refuse a text (or messages) over `limit` UTF-8 bytes (`max_count_bytes`) before counting it.

    Measured without recursion, so a value nested thousands deep is measured too (its depth is
    refused later, by the parser, with the field that is too deep)."""
    size = _utf8_size(value, limit)
    if size > limit:
        raise LimitExceeded(
            field,
            f"{size:,} bytes is more than max_count_bytes ({limit:,}); "
            "count it in parts (split at line breaks) and add them up, or raise max_count_bytes",
        )


def _utf8_size(value: Any, limit: int) -> int:
    """The UTF-8 bytes of every string in `value` (keys too), other scalars by their text; the
    walk stops once past `limit`."""
    total = 0
    pending = [value]
    while pending and total <= limit:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, dict):
            for key, inner in item.items():
                pending += (key, inner)
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif item is not None:
            total += len(str(item))
    return total


def count_text(text: str, model: str | None, settings: Settings) -> TokenCount:
    """The tokens of `text` for `model` (the default model when None), within `max_count_bytes`."""
    check_count_size("text", text, settings.max_count_bytes)
    model = model or settings.default_model
    counter = counter_for(model, settings.token_factors)
    return TokenCount(
        tokens=counter.count(text), model=model, method=counter.method, encoding=counter.encoding, factor=counter.factor
    )

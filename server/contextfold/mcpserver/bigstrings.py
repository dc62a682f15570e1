"""Large strings in an HTTP request, decoded off the event loop.

Over HTTP the SDK decodes a request's JSON body on the event loop in one call: 65 ms for 40 MB,
and about 105 ms with what it does next, while every other session's request waits. A body that
large is almost always one huge string (a tool's output being appended), so `LargeStrings`
reads such a body first, decodes each large string literal in a worker thread a piece at a time
(the GIL is free between pieces, so the loop keeps running), and hands the SDK the same body
with each of those literals replaced by a short token. `restore` puts the strings back into a
tool's arguments before they are validated, so a tool sees exactly what the client sent.

The rewrite is all-or-nothing and conservative: only a `tools/call` whose large strings all lie
inside its arguments is rewritten; anything else (another method, a large key, JSON that does
not decode, a bearer token the server refuses) reaches the SDK untouched, which then behaves as
it always did. Tokens are unguessable and live only while their request is handled.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread

from contextfold import safejson

MIN_BODY = 4 * 1024**2
"""Bodies smaller than this are left alone: the SDK decodes them in a few milliseconds."""
MIN_LITERAL = 256 * 1024
"""A string literal at least this long (in the body's bytes) is decoded off the loop."""
PIECE = 1024**2
"""Bytes of a literal decoded per step; one step holds the GIL for about 2 ms."""

_PREFIX = "\x00contextfold-string:"
_strings: dict[str, str] = {}
"""Token → decoded string, for the requests being handled by this process."""

_BACKSLASH = 0x5C


def restore(arguments: dict[str, Any], strings: dict[str, str] | None = None) -> dict[str, Any]:
    """`arguments` with every token in place of a string replaced by that string (from `strings`,
    by default those of the requests this process is handling).

    Unknown tokens (a client that sends one itself) stay as they are. Nesting is bounded by the
    caller's `safejson.clean`, so recursion is safe.
    """
    strings = _strings if strings is None else strings
    if not strings:
        return arguments
    restored: dict[str, Any] = _restored(arguments, strings)
    return restored


def _restored(value: Any, strings: dict[str, str]) -> Any:
    if isinstance(value, str):
        if value.startswith(_PREFIX):
            return strings.get(value[len(_PREFIX) :], value)
        return value
    if isinstance(value, dict):
        return {key: _restored(item, strings) for key, item in value.items()}
    if isinstance(value, list):
        return [_restored(item, strings) for item in value]
    return value


class LargeStrings:
    """ASGI middleware: a large `tools/call` body reaches the app with its large strings as tokens.

    `limit` is the largest body the app accepts (larger ones pass through for it to refuse);
    `verify`, when the server requires bearer tokens, checks one, so that no work is done for a
    client the app would refuse.
    """

    def __init__(
        self, app: Any, *, limit: int, verify: Callable[[str], Awaitable[object | None]] | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.verify = verify

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        length = _content_length(scope)
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or length is None
            or not MIN_BODY <= length <= self.limit
            or not await self._allowed(scope)
        ):
            await self.app(scope, receive, send)
            return
        chunks = await read_body(receive)
        if chunks is None:  # the client went away
            return
        body, tokens = await anyio.to_thread.run_sync(_rewrite, chunks)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        try:
            await self.app({**scope, "headers": headers}, replaying(body, receive), send)
        finally:
            for token in tokens:
                _strings.pop(token, None)

    async def _allowed(self, scope: dict[str, Any]) -> bool:
        return await bearer_allowed(scope, self.verify)


async def read_body(receive: Any) -> list[bytes] | None:
    """A request body's chunks, read whole; None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks


def replaying(body: bytes, receive: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
    """A `receive` that hands the app `body` whole, then passes on what the client sends next
    (a disconnect, for a response stream)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            message: dict[str, Any] = await receive()
            return message
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def bearer_allowed(scope: dict[str, Any], verify: Callable[[str], Awaitable[object | None]] | None) -> bool:
    """Whether the app would accept the request's bearer token (always, without `verify`)."""
    if verify is None:
        return True
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            if value[:7].lower() != b"bearer ":
                return False
            return await verify(value[7:].decode("latin-1")) is not None
    return False


def content_length(scope: dict[str, Any]) -> int | None:
    """The request's Content-Length, or None when it has none (chunked) or a bad one."""
    return _content_length(scope)


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _rewrite(chunks: list[bytes]) -> tuple[bytes, list[str]]:
    """The body with its large literals as tokens (registered in `_strings`), and the tokens;
    the body unchanged and no tokens when it does not qualify. Runs in a worker thread."""
    body = b"".join(chunks)
    rewritten, strings = extract(body)
    if not strings:
        return body, []
    _strings.update(strings)
    return rewritten, list(strings)


def extract(body: bytes, min_literal: int = MIN_LITERAL, piece: int = PIECE) -> tuple[bytes, dict[str, str]]:
    """`body` with each value string literal of at least `min_literal` bytes replaced by a token,
    and token → decoded string; `(body, {})` when the body is not a `tools/call` whose large
    strings all lie in its arguments, or when one of them does not decode.

    Decoded strings are as `json.loads` and `safejson.clean` would leave them: a lone surrogate
    becomes U+FFFD, a pair the character it encodes.
    """
    spans = _large_literals(body, min_literal)
    if not spans:
        return body, {}
    parts: list[bytes] = []
    strings: dict[str, str] = {}
    at = 0
    for start, end in spans:
        text = decode_literal(body, start + 1, end - 1, piece)
        if text is None:
            return body, {}
        token = secrets.token_hex(16)
        strings[token] = text
        parts += [body[at:start], json.dumps(_PREFIX + token).encode()]
        at = end
    parts.append(body[at:])
    rewritten = b"".join(parts)
    if not _all_in_arguments(rewritten, len(strings)):
        return body, {}
    return rewritten, strings


def _all_in_arguments(body: bytes, expected: int) -> bool:
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(request, dict) or request.get("method") != "tools/call":
        return False
    params = request.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if not isinstance(arguments, dict):
        return False
    found = 0
    stack: list[Any] = [arguments]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found += item.startswith(_PREFIX)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found == expected


def _large_literals(body: bytes, min_literal: int) -> list[tuple[int, int]]:
    """(start, end) of each string literal of at least `min_literal` bytes that is not an object
    key, quotes included. Assumes JSON: outside strings, a quote always opens one."""
    spans: list[tuple[int, int]] = []
    opening = body.find(b'"')
    while opening != -1:
        closing = opening + 1
        while True:
            closing = body.find(b'"', closing)
            if closing == -1:
                return spans  # unterminated: the SDK will say so
            run = closing - 1
            while body[run] == _BACKSLASH:
                run -= 1
            if (closing - 1 - run) % 2 == 0:  # an even run of backslashes: not escaped
                break
            closing += 1
        if closing - opening - 1 >= min_literal and not _is_key(body, closing + 1):
            spans.append((opening, closing + 1))
        opening = body.find(b'"', closing + 1)
    return spans


def _is_key(body: bytes, after: int) -> bool:
    rest = body[after : after + 64].lstrip(b" \t\r\n")
    return rest[:1] == b":"


def decode_literal(body: bytes, start: int, end: int, piece: int) -> str | None:
    """The JSON string whose escaped content is `body[start:end]`, decoded `piece` bytes at a
    time, or None when it does not decode (or cannot be cut into pieces)."""
    pieces: list[str] = []
    surrogates = False
    while start < end:
        cut = _cut(body, start, min(start + piece, end), end)
        if cut is None:
            return None
        try:
            text: str = json.loads(b'"' + body[start:cut] + b'"')
        except ValueError:
            return None
        surrogates = surrogates or safejson.has_surrogate(text)
        pieces.append(text)
        start = cut
    text = "".join(pieces)
    if surrogates:  # a pair cut in two joins again here; a lone half becomes U+FFFD
        text = safejson.clean(text, "")
    return text


def _cut(body: bytes, start: int, at: int, end: int) -> int | None:
    """A position at or before `at`, after `start`, that is neither inside a UTF-8 sequence
    nor inside an escape; None when there is none."""
    if at >= end:
        return end
    while at > start and body[at] & 0xC0 == 0x80:
        at -= 1
    backslash = body.rfind(b"\\", max(start, at - 6), at)  # the longest escape is \uXXXX
    if backslash != -1:
        at = backslash
        while at > start and body[at - 1] == _BACKSLASH:
            at -= 1
        # The run of backslashes starts right after a character that is not one, so an
        # escape starts here; a run that reaches back to `start` is not worth handling.
    return at if at > start else None

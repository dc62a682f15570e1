"""JSON parsed a short step at a time, so that a worker thread parsing a large body never holds
the interpreter for long.

`json.loads` and pydantic parse a whole document in one C call that holds the GIL: 40 MB of small
strings takes a quarter of a second during which the event loop cannot run, whichever thread
makes the call. `Steps` parses the same text a value at a time: an array or object of up to
64 KiB of text in one call of the standard library's decoder, anything larger member by member,
a long string in 1 MiB pieces (`bigstrings`). Between steps the interpreter may switch threads,
so no step holds it for more than about a millisecond, and the values built are what `json.loads`
builds (NaN and Infinity, which are not JSON, are refused as pydantic refuses them).

`Steps` also reads the first part of a body still arriving (`complete=False`): whatever would
need bytes past the end raises `Incomplete`, so a caller can decide from a prefix (that it holds
too many messages, say) without waiting for the rest or keeping it. With `build=False` a value is
checked and passed over instead of built: its strings are not even decoded.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, NoReturn, cast

from contextfold.mcpserver.bigstrings import MIN_LITERAL, PIECE, decode_literal

WINDOWS = (512, 8 * 1024, 64 * 1024)
"""Bytes of text one call of the C decoder may take for an array or object, tried in turn: most
values are small, and a failed try costs at most its own size."""
STEP = 1024**2
"""Bytes one regular-expression call scans at most (whitespace, the inside of a string)."""
MAX_DEPTH = 200
"""How deep arrays and objects parsed member by member may nest, as deep as pydantic's parser
goes. (`safejson` refuses more than 100 levels anyway, naming where, before a tool reads them.)"""

QUOTE, COMMA, COLON = 0x22, 0x2C, 0x3A
LBRACE, RBRACE, LBRACKET, RBRACKET = 0x7B, 0x7D, 0x5B, 0x5D

_WHITESPACE = re.compile(rb"[ \t\n\r]*")
_STRING_BODY = re.compile(rb'(?s)[^"\\]*(?:\\.[^"\\]*)*')
"""The inside of a string literal: up to its closing quote, escapes skipped whole."""
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(rb"-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][-+]?[0-9]*)?")
"""What a number may be while its bytes are still arriving (matched whole, to the end of the data)."""
_LITERALS = ((b"true", True), (b"false", False), (b"null", None))


class Incomplete(Exception):
    """The text ends before the value does: a prefix that cannot decide yet."""


class Unparsable(ValueError):
    """Not JSON; the message says what and where."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_BIG = object()
"""What `Steps._small` returns for a value it did not parse in one call."""


class _Frame:
    """An array or object being parsed member by member."""

    __slots__ = ("closer", "key", "started", "value")

    def __init__(self, value: Any, closer: int) -> None:
        self.value = value
        self.closer = closer
        self.key = ""
        self.started = False


class Steps:
    """A cursor over JSON text (`data`, UTF-8 bytes) that parses it in short steps.

    `at` is the byte offset of the next thing to read. Methods that read advance it past what
    they read; on failure they raise `Unparsable` (or `Incomplete`, for a prefix) and leave it
    anywhere.
    """

    def __init__(
        self,
        data: bytes | bytearray,
        *,
        complete: bool = True,
        at: int = 0,
        windows: tuple[int, ...] = WINDOWS,
        min_literal: int = MIN_LITERAL,
        piece: int = PIECE,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.data = data
        self.complete = complete
        self.at = at
        self.windows = windows
        self.min_literal = min_literal
        self.piece = piece
        self.max_depth = max_depth

    # -- the cursor ------------------------------------------------------------------------------

    def peek(self) -> int:
        """The next byte that is not whitespace (the cursor stops before it)."""
        self._skip_whitespace()
        if self.at >= len(self.data):
            self._ended("a value")
        return self.data[self.at]

    def begin(self, opener: int) -> bool:
        """Read `{` or `[` (`opener`); False when the object or array is empty (its end read too)."""
        if self.peek() != opener:
            self._unexpected("{" if opener == LBRACE else "[")
        self.at += 1
        closer = RBRACE if opener == LBRACE else RBRACKET
        if self.peek() == closer:
            self.at += 1
            return False
        return True

    def key(self) -> str:
        """Read an object's key and the colon after it."""
        if self.peek() != QUOTE:
            self._unexpected("a key")
        key = self._string(build=True)
        if self.peek() != COLON:
            self._unexpected("':'")
        self.at += 1
        return str(key)

    def more(self, closer: int) -> bool:
        """After a member or element: True on a comma (another follows), False on `closer`."""
        byte = self.peek()
        if byte == COMMA:
            self.at += 1
            return True
        if byte == closer:
            self.at += 1
            return False
        self._unexpected(f"',' or {chr(closer)!r}")

    def done(self) -> None:
        """After the top-level value: only whitespace may follow."""
        self._skip_whitespace()
        if self.at < len(self.data):
            raise Unparsable(f"unexpected data after the JSON value at byte {self.at:,}")

    def value(self, build: bool = True) -> Any:
        """Read one value; built when `build`, else checked (strings only delimited) and None."""
        byte = self.peek()
        if byte == QUOTE:
            return self._string(build)
        if byte in (LBRACE, LBRACKET):
            small = self._small()
            if small is not _BIG:
                return small if build else None
            return self._walk(build)
        return self._scalar()

    # -- values ----------------------------------------------------------------------------------

    def _small(self) -> Any:
        """The array or object at the cursor parsed in one call of the C decoder, if its text fits
        in one of `windows`; else `_BIG`, the cursor unmoved."""
        data, at = self.data, self.at
        for size in self.windows:
            stop = min(at + size, len(data))
            try:
                text, _ = codecs.utf_8_decode(data[at:stop], "strict", False)
            except UnicodeDecodeError:
                return _BIG  # member by member, the string that does not decode is named
            try:
                value, end = _DECODER.raw_decode(text)
            except (ValueError, RecursionError):
                if stop >= len(data):
                    return _BIG
                continue
            self.at = at + (end if text.isascii() else len(text[:end].encode("utf-8")))
            return value
        return _BIG

    def _walk(self, build: bool) -> Any:
        """The array or object at the cursor, member by member, without recursion."""
        stack: list[_Frame] = [self._open(build)]
        while True:
            frame = stack[-1]
            ended = not self.more(frame.closer) if frame.started else self._closes(frame.closer)
            frame.started = True
            if ended:
                stack.pop()
                if not stack:
                    return frame.value
                self._attach(stack[-1], frame.value)
                continue
            if frame.closer == RBRACE:
                frame.key = self.key()
            byte = self.peek()
            if byte in (LBRACE, LBRACKET):
                item = self._small()
                if item is _BIG:
                    if len(stack) >= self.max_depth:
                        raise Unparsable(f"arrays and objects nest more than {self.max_depth} levels deep")
                    stack.append(self._open(build))
                    continue
            elif byte == QUOTE:
                item = self._string(build)
            else:
                item = self._scalar()
            if build:
                self._attach(frame, item)

    def _open(self, build: bool) -> _Frame:
        opener = self.data[self.at]
        self.at += 1
        if opener == LBRACE:
            return _Frame({} if build else None, RBRACE)
        return _Frame([] if build else None, RBRACKET)

    def _closes(self, closer: int) -> bool:
        if self.peek() == closer:
            self.at += 1
            return True
        return False

    @staticmethod
    def _attach(frame: _Frame, item: Any) -> None:
        if frame.value is None:  # not building
            return
        if frame.closer == RBRACE:
            frame.value[frame.key] = item
        else:
            frame.value.append(item)

    def _string(self, build: bool) -> str | None:
        start = self.at
        end = self._string_end(start)
        self.at = end
        if not build:
            return None
        if end - start - 2 >= self.min_literal:
            # It reads bytearrays as well (indexing, find, slicing).
            text = decode_literal(cast(bytes, self.data), start + 1, end - 1, self.piece)
            if text is not None:
                return text
        try:
            value: str = _DECODER.raw_decode(bytes(self.data[start:end]).decode("utf-8"))[0]
        except ValueError as exc:  # UnicodeDecodeError is one
            raise Unparsable(f"the string at byte {start:,} is not valid JSON text ({exc})") from None
        return value

    def _string_end(self, start: int) -> int:
        """The offset just past the closing quote of the string literal opening at `start`."""
        data, at = self.data, start + 1
        while True:
            stop = min(at + STEP, len(data))
            end = _STRING_BODY.match(data, at, stop).end()  # type: ignore[union-attr]  # it matches the empty string
            if end < stop and data[end] == QUOTE:
                return end + 1
            if stop >= len(data):
                self._ended("a string")  # no closing quote, or a backslash at the very end
            # The step ended, or a backslash was its last byte: go on from there.
            at = end

    def _scalar(self) -> Any:
        data, at = self.data, self.at
        if not self.complete and _NUMBER_PREFIX.fullmatch(data, at):
            raise Incomplete  # a number cut short: after its sign, its point or its exponent's mark
        number = _NUMBER.match(data, at)
        if number is not None and number.end() > at:
            end = number.end()
            if end >= len(data) and not self.complete:
                raise Incomplete
            try:
                value: Any = float(data[at:end]) if number.group(1) or number.group(2) else int(data[at:end])
            except ValueError as exc:
                raise Unparsable(f"the number at byte {at:,} cannot be read ({exc})") from None
            self.at = end
            return value
        for literal, value in _LITERALS:
            if data.startswith(literal, at):
                self.at = at + len(literal)
                return value
            if not self.complete and literal.startswith(bytes(data[at : at + len(literal)])):
                raise Incomplete
        self._unexpected("a value")

    # -- failures --------------------------------------------------------------------------------

    def _skip_whitespace(self) -> None:
        data = self.data
        while True:
            stop = min(self.at + STEP, len(data))
            self.at = _WHITESPACE.match(data, self.at, stop).end()  # type: ignore[union-attr]  # it matches the empty string
            if self.at < stop or stop >= len(data):
                return

    def _ended(self, what: str) -> NoReturn:
        if not self.complete:
            raise Incomplete
        raise Unparsable(f"the body ends inside {what}")

    def _unexpected(self, expected: str) -> NoReturn:
        if self.at >= len(self.data):
            self._ended(expected)
        found = chr(self.data[self.at])
        raise Unparsable(f"expected {expected} at byte {self.at:,}, found {found!r}")


def loads(data: bytes | bytearray, **options: Any) -> Any:
    """The JSON document `data`, parsed in steps (what `json.loads` gives, or `Unparsable`)."""
    steps = Steps(data, **options)
    value = steps.value()
    steps.done()
    return value

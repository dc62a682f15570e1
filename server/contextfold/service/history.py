"""A session's whole stored past, searchable and readable (issue 16).

Compaction, pruning and the removal strategies hide history from the view; none deletes it. This
searches every stored message of a session, hidden ones included, or reads them from a given
one on, with what `read_output` promises: a pattern is checked before it runs (size, repeat
counts, recursion), the regex engine runs in a worker thread with a timeout on every call and a
budget for the whole search, and an answer is bounded (hits, lines per hit, characters).

A message is referred to as `m<seq>` (its place in the session, as summaries cite it) or by its
stored id. The text searched is the message as stored: its text, each tool call with its input
and its whole stored output (a spilled output's preview; `read_output` searches the rest).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio.to_thread
import regex

from contextfold.blobs.search import compile_pattern
from contextfold.domain import CompactionPart, FilePart, Message, ReasoningPart, TextPart, ToolPart
from contextfold.errors import InvalidInput
from contextfold.results import HistoryPage
from contextfold.service.runtime import Scope

MAX_HITS_DEFAULT = 20
MAX_HITS = 50
MAX_CHARS = 20_000
"""Characters of text in one answer, like a `read_output` page."""
LINES_PER_HIT = 3
LINE_CHARS = 400
MESSAGE_CHARS = 4_000
"""A message read whole (no pattern) is cut after this many characters."""
_CHUNK = 500
"""Messages loaded per step: memory stays bounded however long the history."""
_TIMEOUT = 2.0
_BUDGET = 20.0


def ref(message: Message | int) -> str:
    """How a message is named to a model: `m<seq>`."""
    return f"m{message if isinstance(message, int) else message.seq}"


class History:
    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def search_history(
        self,
        session_id: str,
        *,
        pattern: str | None = None,
        at: str | None = None,
        limit: int = 20,
        ignore_case: bool = False,
    ) -> HistoryPage:
        """Search the session's stored messages, hidden ones included, or read them from `at`."""
        if pattern is None and at is None:
            raise InvalidInput("pattern", "give a pattern to search for, or at=<message> to read from a message")
        if not 1 <= limit <= MAX_HITS:
            raise InvalidInput("limit", f"expected 1 to {MAX_HITS}, got {limit}")
        store = self._scope.store
        session = await store.get_session(session_id)  # not found reads as not found, for any tenant
        compiled = None
        if pattern is not None:
            try:
                compiled = compile_pattern(pattern, ignore_case)
            except ValueError as exc:
                raise InvalidInput("pattern", str(exc)) from None
        after = await self._start(session_id, at)
        blocks: list[str] = []
        chars = 0
        deadline = time.monotonic() + _BUDGET
        shown = {m.id for m in await self._scope.view(session)}
        while True:
            batch = await store.load_messages(session_id, after_seq=after, limit=_CHUNK, hidden=True)
            if not batch:
                return HistoryPage(text="\n".join(blocks), next_at=None)
            for message in batch:
                if len(blocks) >= limit or chars >= MAX_CHARS:
                    return HistoryPage(text="\n".join(blocks), next_at=ref(message))
                if compiled is None:
                    body = _capped(_text_of(message), MESSAGE_CHARS)
                else:
                    found = await anyio.to_thread.run_sync(_matching_lines, compiled, _text_of(message), deadline)
                    if not found:
                        continue
                    body = "\n".join(found)
                header = f"{ref(message)} {message.role}" + ("" if message.id in shown else ", hidden")
                block = f"{header}\n{body}"[: max(MAX_CHARS - chars, 0)]
                chars += len(block)
                blocks.append(block)
            after = batch[-1].seq

    async def _start(self, session_id: str, at: str | None) -> int:
        """The `after_seq` to read from: just before `at`, or the session's start."""
        if at is None:
            return 0
        if at.startswith("m") and at[1:].isdigit():
            if len(at) > 19:  # past any seq a store can hold
                raise InvalidInput("at", f"no message {at!r} in session {session_id!r}")
            return int(at[1:]) - 1
        after = 0
        while batch := await self._scope.store.load_messages(session_id, after_seq=after, limit=_CHUNK, hidden=True):
            for message in batch:  # by id: a chunk at a time, as a search reads
                if message.id == at:
                    return message.seq - 1
            after = batch[-1].seq
        raise InvalidInput("at", f"no message {at!r} in session {session_id!r}; name one as m<number> or by its id")


def _matching_lines(compiled: regex.Pattern[str], text: str, deadline: float) -> list[str]:
    found: list[str] = []
    for line in text.splitlines():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InvalidInput("pattern", "the search took too long; use a more specific pattern")
        try:
            if compiled.search(line, timeout=min(_TIMEOUT, remaining)) is None:
                continue
        except TimeoutError:
            raise InvalidInput("pattern", "the pattern is too slow on this history; simplify it") from None
        found.append(_capped(line, LINE_CHARS))
        if len(found) >= LINES_PER_HIT:
            break
    return found


def _text_of(message: Message) -> str:
    return "\n".join(_part_lines(message))


def _part_lines(message: Message) -> Iterator[str]:
    for part in message.parts:
        if isinstance(part, TextPart):
            yield part.text
        elif isinstance(part, ToolPart):
            yield f"[{part.name}] {_arguments(part.input)}"
            result = part.error if part.state == "error" else part.output
            if result:
                yield result
        elif isinstance(part, ReasoningPart):
            yield part.text
        elif isinstance(part, FilePart):
            yield f"[file {part.filename or part.mime}]"
        elif isinstance(part, CompactionPart):
            yield "[compaction]"


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _capped(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"

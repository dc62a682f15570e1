"""Spilled outputs for one tenant: store a large text whole, read it back by slice or search."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextfold.blobs.lines import READ_LIMIT_LINES
from contextfold.errors import InvalidInput, LimitExceeded
from contextfold.policy.truncate import Direction, with_hint
from contextfold.results import OutputRead, SpillResult
from contextfold.service.ingest import PreviewCaps

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


@dataclass(frozen=True)
class PreviewLimits:
    """A preview's own limits, for a caller that wants one smaller than the session's ingest
    limits (the proxy), and the name of the tool its hint tells the model to call."""

    tokens: int | None
    lines: int
    bytes: int
    reader: str = "read_output"
    direction: Direction | None = None
    """Which end the preview keeps; the session's `truncate_direction` when None."""


class Spilling:
    """Spill and read back one tenant's outputs."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def spill(
        self,
        session_id: str,
        text: str,
        *,
        tool: str | None = None,
        call_id: str | None = None,
        preview: PreviewLimits | None = None,
    ) -> SpillResult:
        """Store a large text whole; return the preview to put in context and the id to read it by.

        The preview is cut to the session's limits, or to `preview`'s when given."""
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self._scope.settings.max_message_bytes:
            raise LimitExceeded(
                "text", f"{size:,} bytes exceed max_message_bytes ({self._scope.settings.max_message_bytes:,})"
            )
        await self._scope.make_room(size)
        # The file first, outside the write lock every process shares; the transaction records it.
        stored = await self._scope.outputs.store_file(text)
        try:
            async with self._scope.store.write(session_id) as tx:
                settings = self._scope.settings_for(tx.session)
                if size > settings.max_message_bytes:  # the session's own, lower limit
                    raise LimitExceeded(
                        "text",
                        f"{size:,} bytes exceed this session's max_message_bytes ({settings.max_message_bytes:,})",
                    )
                new = await self._scope.outputs.add(
                    tx, text, owner=self._scope.owner, tool=tool, call_id=call_id, stored=stored
                )
        except Exception:
            await self._scope.outputs.discard(stored)  # e.g. no such session: leave no orphan file behind
            raise
        count = self._scope.counter(tx.session.model, settings).count
        caps = PreviewCaps.of(settings, self._scope.budget(tx.session, settings).context, count)
        lines, nbytes, reader, direction = (
            settings.max_lines,
            settings.max_bytes,
            "read_output",
            settings.truncate_direction,
        )
        if preview is not None:
            caps = PreviewCaps(caps.max_chars, preview.tokens, count if preview.tokens is not None else None)
            lines, nbytes, reader = preview.lines, preview.bytes, preview.reader
            direction = preview.direction or direction
        # Counting and cutting a big text is CPU work: a worker thread keeps the event loop serving.
        cut = await asyncio.to_thread(caps.truncate, text, max_lines=lines, max_bytes=nbytes, direction=direction)
        return SpillResult(
            output_id=new.record.id,
            bytes=new.file.bytes,
            lines=new.file.lines,
            truncated=cut is not None,
            preview=text if cut is None else with_hint(cut, new.record.id, reader=reader),
        )

    async def read_output(
        self,
        output_id: str,
        *,
        offset: int = 1,
        limit: int = READ_LIMIT_LINES,
        pattern: str | None = None,
        context: int = 0,
        ignore_case: bool = False,
        max_matches: int = 50,
    ) -> OutputRead:
        if offset < 1:
            raise InvalidInput("offset", f"lines are numbered from 1, got {offset}")
        if limit < 1:
            raise InvalidInput("limit", f"expected a positive number of lines, got {limit}")
        if not 0 <= context <= 20:
            raise InvalidInput("context", f"expected 0–20 lines of context, got {context}")
        try:
            return await self._scope.outputs.read(
                output_id,
                owner=self._scope.owner,
                offset=offset,
                limit=limit,
                pattern=pattern,
                context=context,
                ignore_case=ignore_case,
                max_matches=max_matches,
            )
        except TimeoutError as exc:
            raise InvalidInput("pattern", f"{exc}; use a simpler pattern or a literal string") from exc
        except InvalidInput:  # already names its field (an id with a NUL)
            raise
        except ValueError as exc:
            raise InvalidInput("pattern" if pattern is not None else "output_id", str(exc)) from exc

    async def output_text(self, output_id: str) -> str:
        try:
            return await self._scope.outputs.full_text(
                output_id, owner=self._scope.owner, max_bytes=self._scope.settings.max_message_bytes
            )
        except InvalidInput:
            raise
        except ValueError as exc:
            raise InvalidInput("output_id", str(exc)) from exc

"""Truncation at ingest: what enters a session is capped before it is stored in the view.

A finished tool output over the limits (2,000 lines, 50 KiB, and the context share: 30 % of the
window in tokens, counted with the session's counter, within 30 % × 4 characters) is spilled
whole and replaced by a preview whose last line names the output id and how to read the rest.
User text too large for the window is spilled the same way. The model is never silently cut off.

Cutting a big text and writing its blob take time, and the write transaction holds a lock every
process on the store shares. So an append first runs `Prespill` on the session as read before the
transaction: it cuts every big text in a worker thread and stores the blobs of those that must be
spilled. Inside the transaction `Ingest` reuses those cuts while the session's model and settings
are still the ones they were made for (else it cuts again), and always reuses the blobs, which
hold the same content whatever decided to store them. The transaction then only records rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from contextfold.blobs.base import StoredBlob
from contextfold.config import Settings
from contextfold.domain import Message, Session, TextPart, ToolPart, ToolResult
from contextfold.policy.truncate import (
    Count,
    Direction,
    Truncation,
    share_cap_chars,
    share_cap_tokens,
    truncate,
    with_hint,
)
from contextfold.results import SpilledOutput
from contextfold.service.outputs import Outputs
from contextfold.store import SessionTransaction
from contextfold.tokens.counting import counter_for

Kind = Literal["tool", "user"]
"""Tool output (the ingest limits) or a person's text (only the window's share limits it)."""

PREPARE_CHARS = 8_192
"""Texts at least this long are cut, and their blobs stored, before the write transaction; shorter
ones cost little enough to decide inside it."""


@dataclass(frozen=True)
class PreviewCaps:
    """The context share one preview may take: tokens (counted by the session's counter) when
    the window is limited, within a character cap that always applies."""

    max_chars: int
    max_tokens: int | None = None
    count: Count | None = None

    @classmethod
    def of(cls, settings: Settings, context_window: int, count: Count | None) -> PreviewCaps:
        max_chars = share_cap_chars(
            context_window,
            share=settings.context_share,
            max_chars=settings.max_share_chars,
            min_chars=settings.min_share_chars,
        )
        max_tokens = share_cap_tokens(
            context_window, share=settings.context_share, min_tokens=settings.min_share_chars // 4
        )
        if count is None or max_tokens is None:
            return cls(max_chars)
        return cls(max_chars, max_tokens, count)

    def truncate(self, text: str, *, max_lines: int, max_bytes: int, direction: Direction) -> Truncation | None:
        return truncate(
            text,
            max_lines=max_lines,
            max_bytes=max_bytes,
            max_chars=self.max_chars,
            max_tokens=self.max_tokens,
            count=self.count,
            direction=direction,
        )


def _cut(caps: PreviewCaps, settings: Settings, kind: Kind, text: str) -> Truncation | None:
    if kind == "tool":
        return caps.truncate(
            text, max_lines=settings.max_lines, max_bytes=settings.max_bytes, direction=settings.truncate_direction
        )
    # A person may paste a long file: only the window's share limits user text, not 50 KiB.
    return caps.truncate(text, max_lines=10**9, max_bytes=10**12, direction="head")


def big_texts(messages: Sequence[Message], results: Sequence[ToolResult]) -> list[tuple[Kind, str]]:
    """The texts of a batch that `Ingest` may cut and that are worth a `Prespill` (`PREPARE_CHARS`):
    finished tool outputs, results for earlier calls, and user text, each once."""
    found: list[tuple[Kind, str]] = [("tool", r.output) for r in results]
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolPart) and part.is_finished and not part.spill_id:
                found.append(("tool", (part.error if part.state == "error" else part.output) or ""))
            elif isinstance(part, TextPart) and message.role == "user" and not part.synthetic:
                found.append(("user", part.text))
    # Told apart by identity: hashing a 40 MB text would hold the event loop (the worker thread does it).
    unique = {(kind, id(text)): (kind, text) for kind, text in found if len(text) >= PREPARE_CHARS}
    return list(unique.values())


@dataclass
class Prespill:
    """The big texts of a batch, cut and (if over the limits) stored before the write transaction.

    Made from the session as read before the transaction (see the module docstring); `release`
    afterwards removes the blobs no output ended up recording (a changed setting, a failed append).
    """

    model: str
    settings: Settings
    context_window: int
    cuts: dict[tuple[Kind, str], Truncation | None]
    blobs: dict[str, StoredBlob]
    recorded: set[str]
    """Digests the transaction recorded outputs for."""

    @classmethod
    async def of(
        cls,
        outputs: Outputs,
        session: Session,
        settings: Settings,
        *,
        context_window: int,
        texts: Sequence[tuple[Kind, str]],
    ) -> Prespill:
        """Cut `texts` (from `big_texts`) for `session` as it is now, and store what must be spilled."""
        caps = PreviewCaps.of(settings, context_window, counter_for(session.model, settings.token_factors).count)
        # Counting and cutting megabytes is CPU work: a worker thread keeps the event loop serving.
        cuts = await asyncio.to_thread(lambda: {key: _cut(caps, settings, *key) for key in texts})
        prepared = cls(session.model, settings, context_window, cuts, {}, set())
        try:
            for (_, text), cut in cuts.items():
                if cut is not None and text not in prepared.blobs:
                    prepared.blobs[text] = await outputs.store_file(text)
        except BaseException:
            await prepared.release(outputs, committed=False)
            raise
        return prepared

    def holds_for(self, session: Session, settings: Settings, context_window: int) -> bool:
        """Whether the cuts were made for what the session is now (a concurrent change re-decides)."""
        return (session.model, context_window, settings) == (self.model, self.context_window, self.settings)

    async def release(self, outputs: Outputs, *, committed: bool) -> None:
        """After the transaction: remove the blobs this stored that no committed output points to.

        `Outputs.discard` deletes a blob only once it has proven, under the write lock, that no
        row points to it, so content another append recorded meanwhile stays."""
        for blob in self.blobs.values():
            if not committed or blob.digest not in self.recorded:
                await outputs.discard(blob)


class Ingest:
    def __init__(
        self,
        tx: SessionTransaction,
        outputs: Outputs,
        settings: Settings,
        *,
        context_window: int,
        owner: str,
        count: Count | None = None,
        prepared: Prespill | None = None,
    ) -> None:
        """`count` measures previews; by default the counter of the session's model. `prepared`
        holds the cuts and blobs made before the transaction, if any."""
        self._tx = tx
        self._outputs = outputs
        self._settings = settings
        self._owner = owner
        if count is None:
            count = counter_for(tx.session.model, settings.token_factors).count
        self._caps = PreviewCaps.of(settings, context_window, count)
        self._prepared = prepared
        self._cuts: dict[tuple[Kind, str], Truncation | None] = {}
        if prepared is not None and prepared.holds_for(tx.session, settings, context_window):
            self._cuts = prepared.cuts
        self.spilled: list[SpilledOutput] = []

    async def message(self, message: Message) -> Message:
        parts = []
        for part in message.parts:
            if isinstance(part, ToolPart):
                part = await self.tool(part)
            elif isinstance(part, TextPart) and message.role == "user" and not part.synthetic:
                part = await self._user_text(part)
            parts.append(part)
        return message.model_copy(update={"parts": parts})

    async def tool(self, part: ToolPart) -> ToolPart:
        if not part.is_finished or part.spill_id:
            return part
        field = "error" if part.state == "error" else "output"
        text = getattr(part, field) or ""
        cut = self._cut("tool", text)
        if cut is None:
            return part
        output_id = await self._spill(text, tool=part.name, call_id=part.call_id)
        return part.model_copy(update={field: with_hint(cut, output_id), "spill_id": output_id})

    async def _user_text(self, part: TextPart) -> TextPart:
        cut = self._cut("user", part.text)
        if cut is None:
            return part
        output_id = await self._spill(part.text, tool=None, call_id=None)
        return part.model_copy(update={"text": with_hint(cut, output_id), "spill_id": output_id})

    def _cut(self, kind: Kind, text: str) -> Truncation | None:
        key = (kind, text)
        if key in self._cuts:
            return self._cuts[key]
        return _cut(self._caps, self._settings, kind, text)

    async def _spill(self, text: str, *, tool: str | None, call_id: str | None) -> str:
        # A blob stored before the transaction holds this content whatever decided to store it.
        stored = self._prepared.blobs.get(text) if self._prepared is not None else None
        new = await self._outputs.add(self._tx, text, owner=self._owner, tool=tool, call_id=call_id, stored=stored)
        if self._prepared is not None:
            self._prepared.recorded.add(new.file.digest)
        self.spilled.append(
            SpilledOutput(output_id=new.record.id, call_id=call_id, bytes=new.file.bytes, lines=new.file.lines)
        )
        return new.record.id

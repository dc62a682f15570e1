"""Truncation at ingest: what enters a session is capped before it is stored in the view.

A finished tool output over the limits (2,000 lines, 50 KiB, and the context share: 30 % of the
window in tokens, counted with the session's counter, within 30 % × 4 characters) is spilled
whole and replaced by a preview whose last line names the output id and how to read the rest.
User text too large for the window is spilled the same way. The model is never silently cut off.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import Settings
from .domain import Message, TextPart, ToolPart
from .outputs import Outputs
from .policy.truncate import Count, Direction, Truncation, share_cap_chars, share_cap_tokens, truncate, with_hint
from .results import SpilledOutput
from .store import SessionTransaction
from .tokens import counter_for


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
    ) -> None:
        """`count` measures previews; by default the counter of the session's model."""
        self._tx = tx
        self._outputs = outputs
        self._settings = settings
        self._owner = owner
        if count is None:
            count = counter_for(tx.session.model, settings.token_factors).count
        self._caps = PreviewCaps.of(settings, context_window, count)
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
        cut = self._caps.truncate(
            text,
            max_lines=self._settings.max_lines,
            max_bytes=self._settings.max_bytes,
            direction=self._settings.truncate_direction,
        )
        if cut is None:
            return part
        output_id = await self._spill(text, tool=part.name, call_id=part.call_id)
        return part.model_copy(update={field: with_hint(cut, output_id), "spill_id": output_id})

    async def _user_text(self, part: TextPart) -> TextPart:
        # A person may paste a long file: only the window's share limits user text, not 50 KiB.
        cut = self._caps.truncate(part.text, max_lines=10**9, max_bytes=10**12, direction="head")
        if cut is None:
            return part
        output_id = await self._spill(part.text, tool=None, call_id=None)
        return part.model_copy(update={"text": with_hint(cut, output_id), "spill_id": output_id})

    async def _spill(self, text: str, *, tool: str | None, call_id: str | None) -> str:
        new = await self._outputs.add(self._tx, text, owner=self._owner, tool=tool, call_id=call_id)
        self.spilled.append(
            SpilledOutput(output_id=new.record.id, call_id=call_id, bytes=new.file.bytes, lines=new.file.lines)
        )
        return new.record.id

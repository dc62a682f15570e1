"""Pruning: clear old tool outputs from the view (marks only; the outputs stay stored)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.domain import LastPrune, Message, Part, Preview, PruneTotals, ToolPart
from contextfold.errors import CompactionFailed, InvalidInput
from contextfold.policy import view
from contextfold.results import Brief, PruneResult
from contextfold.service.steering import fingerprint, preview_token, take_preview
from contextfold.store import PartMark

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Pruning:
    """Prune one tenant's sessions."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def prune(
        self,
        session_id: str,
        *,
        dry_run: bool = False,
        keep_tool_uses: int | None = None,
        clear_at_least: int | None = None,
        exclude_tools: Sequence[str] = (),
        clear_inputs: bool = False,
        apply: str | None = None,
    ) -> PruneResult:
        """Clear old tool outputs from the view (marks only; the outputs stay stored).

        With `keep_tool_uses` this is Anthropic's context editing: every tool result but the newest
        N tool uses is cleared, whatever the turns (see policy/prune.py).
        """
        for name, value in (("keep_tool_uses", keep_tool_uses), ("clear_at_least", clear_at_least)):
            if value is not None and value < 0:
                raise InvalidInput(name, f"expected a non-negative number, got {value}")
        if apply is not None and dry_run:
            raise InvalidInput("apply", "apply clears what a preview listed: leave out dry_run")
        cleared: list[str] = []
        token = None
        async with self._scope.store.write(session_id) as tx:
            session = tx.session
            preview = take_preview(session, apply, "prune") if apply is not None else None
            if preview is not None:  # the preview's own options, whatever this call passed
                keep_tool_uses = preview.options.get("keep_tool_uses")
                clear_at_least = preview.options.get("clear_at_least")
                exclude_tools = preview.options.get("exclude_tools", [])
                clear_inputs = bool(preview.options.get("clear_inputs", False))
            settings = self._scope.settings_for(session)
            counter = self._scope.counter(session.model, settings)
            visible: list[Message] = await view.visible(tx.messages, session.view)
            options = self._scope.standing.prune_options(
                session,
                settings,
                keep_tool_uses=keep_tool_uses,
                clear_at_least=clear_at_least,
                exclude_tools=frozenset(t.lower() for t in exclude_tools),
                clear_inputs=clear_inputs,
            )
            plan = self._scope.standing.plan_prune(visible, options, counter)
            parts = [(p.message_id, p.index) for p in plan.to_mark]
            if preview is not None and parts != preview.parts:
                raise CompactionFailed(f"prune preview {apply} no longer matches the view; nothing was cleared")
            if dry_run:
                seqs = {m.id: m.seq for m in visible}
                cleared = [f"m{seqs[p.message_id]} {p.tool}" for p in plan.to_mark]
                planned = fingerprint(session)
                token = preview_token("prune", planned, json.dumps(parts))
                kept = Preview(
                    token=token,
                    kind="prune",
                    fingerprint=planned,
                    parts=parts,
                    options={
                        "keep_tool_uses": keep_tool_uses,
                        "clear_at_least": clear_at_least,
                        "exclude_tools": list(exclude_tools),
                        "clear_inputs": clear_inputs,
                    },
                )
                await tx.save_session(
                    session.model_copy(update={"metadata": session.metadata.model_copy(update={"preview": kept})})
                )
            if plan.applies and not dry_run:
                now = time.time()
                by_id = {m.id: m for m in visible}
                marks = []
                for pruned in plan.to_mark:
                    part = by_id[pruned.message_id].parts[pruned.index]
                    assert isinstance(part, ToolPart)
                    marks.append(
                        PartMark(pruned.message_id, pruned.index, _cleared(part, now, clear_inputs), pruned.tokens)
                    )
                await tx.mark_parts(marks)
                visible = _with_marks(visible, marks)
                done = session.metadata.prunes
                prunes = PruneTotals(count=done.count + 1, tokens_freed=done.tokens_freed + plan.tokens_freed)
                last = LastPrune(at=now, marks=[(m.message_id, m.index, m.freed) for m in marks])
                session = session.model_copy(
                    update={
                        "tokens_in_view": session.tokens_in_view - plan.tokens_freed,
                        "metadata": session.metadata.model_copy(update={"prunes": prunes, "last_prune": last}),
                    }
                )
                await tx.save_session(session)
                session = tx.session
        applied = plan.applies and not dry_run
        return PruneResult(
            applied=applied,
            dry_run=dry_run,
            reason=plan.reason,
            parts=len(plan.parts) if plan.applies else 0,
            tokens_freed=plan.tokens_freed if plan.applies else 0,
            status=Brief.of(await self._scope.status(session, visible)),
            cleared=cleared,
            token=token,
        )


def _cleared(part: ToolPart, when: float, clear_inputs: bool) -> ToolPart:
    # Marks only: the output and input stay stored; the renderers show placeholders.
    return part.model_copy(update={"compacted_at": when, "input_cleared": clear_inputs})


def _with_marks(messages: Sequence[Message], marks: Sequence[PartMark]) -> list[Message]:
    """`messages` as they read once `marks` are stored (for the status that follows, without a reload)."""
    by_message: dict[str, list[PartMark]] = {}
    for mark in marks:
        by_message.setdefault(mark.message_id, []).append(mark)
    out = []
    for message in messages:
        mine = by_message.get(message.id)
        if mine:
            changed: dict[int, Part] = {m.index: m.part for m in mine}
            parts = [changed.get(i, part) for i, part in enumerate(message.parts)]
            in_view = message.in_view_tokens - sum(m.freed for m in mine)  # as the store's mark_parts does
            message = message.model_copy(update={"parts": parts, "view_tokens": in_view})
        out.append(message)
    return out

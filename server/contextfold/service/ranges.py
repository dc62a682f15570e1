"""Compacting a range: summarize `m10..m80` only, the summary placed where the range was
(docs/steering.md).

What comes before and after the range stays in the view as it was. The range is taken as the view
shows it: stored messages in view, one after another, no compaction marker or summary among them.
A tool call and its result are one stored part, so no range can part them. A range holding pinned
messages is refused unless `keep_pins`: then they stay in view, after the range's summary. The
summary is written by the same chain as any compaction (anthropic → sampling → extractive), pinned
with the range's facts and its secrets redacted, and is refused if it would not be smaller.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.compaction.base import SummarizerError, SummaryRequest
from contextfold.compaction.chain import Sampled, SummarizerChoice, build_chain, run_chain
from contextfold.compaction.engine import Plan, accept, summary_budget
from contextfold.compaction.secrets import redact_history
from contextfold.domain import CompactionRecord, Message, Splice, TextPart, ViewAnchor
from contextfold.errors import CompactionFailed, ConflictError, InvalidInput
from contextfold.policy.turns import TailSelection
from contextfold.results import Brief, CompactResult
from contextfold.service.steering import parse_ref
from contextfold.tokens.counting import count_message

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope

RANGE_MARKER = (
    "[contextfold: messages {first}–{last} are summarized below; they stay stored, and "
    'search_history(at="{first}") reads them]'
)
NO_COMPACTION = ViewAnchor(marker_seq=0, summary_seq=0)
"""The anchor of a view no anchored compaction has moved: everything is shown."""


def range_of(visible: Sequence[Message], first: int, last: int, anchor: ViewAnchor | None) -> list[Message]:
    """The messages of `m{first}..m{last}` as the view shows them, or a refusal saying why not."""
    own = {seq for s in (anchor.splices if anchor else []) for seq in (s.marker_seq, s.summary_seq)}
    at = [i for i, m in enumerate(visible) if first <= m.seq <= last]
    if not at:
        raise InvalidInput("range", f"no message of m{first}..m{last} is in view")
    span = list(visible[at[0] : at[-1] + 1])
    stray = next((m for m in span if not first <= m.seq <= last or m.is_compaction or m.seq in own), None)
    if stray is not None:
        raise InvalidInput(
            "range",
            f"m{first}..m{last} is not one stretch of the view: m{stray.seq} (a summary or a message shown out of "
            "order) stands inside it; compact a range within one stretch",
        )
    if span[0].seq != first or span[-1].seq != last:
        raise InvalidInput(
            "range", f"m{first}..m{last} must start and end at messages in view (m{span[0].seq}..m{span[-1].seq} are)"
        )
    return span


class Ranges:
    """Range compaction in one tenant's sessions."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def compact_range(
        self,
        session_id: str,
        ref: str,
        *,
        keep_pins: bool = False,
        summarizer: SummarizerChoice | None = None,
        instructions: str | None = None,
        sampled: Sampled | None = None,
        sampling_offered: bool = False,
        dry_run: bool = False,
    ) -> CompactResult:
        """Summarize the messages `ref` (`m10..m80`) names, in place."""
        first, last = parse_ref(ref)
        scope = self._scope
        session = await scope.store.get_session(session_id)
        settings = scope.settings_for(session)
        usable = scope.budget(session, settings).usable
        counter = scope.counter(session.model, settings)
        visible = await scope.view(session)
        span = range_of(visible, first, last, session.view)
        pinned = session.metadata.pinned_seqs()
        kept = [m for m in span if m.seq in pinned]
        if kept and not keep_pins:
            names = ", ".join(f"m{m.seq}" for m in kept[:5])
            raise CompactionFailed(
                f"m{first}..m{last} holds pinned messages ({names}); unpin them, or keep them inside the range (keep_pins)"
            )
        head = [m for m in span if m.seq not in pinned]
        if not head:
            raise CompactionFailed(f"m{first}..m{last} holds nothing to summarize: every message in it is pinned")
        replaced = sum(m.in_view_tokens for m in head)
        redacted, redactor = redact_history(head)
        budget = summary_budget(usable or replaced * 2, replaced, settings.summary_max_tokens)
        plan = Plan(
            head=redacted,
            tail=[],
            previous=None,
            replaced_tokens=replaced,
            tail_tokens=0,
            selection=TailSelection(None, None, None, replaced, 0, False, 0),
            summary_budget=budget,
            redactor=redactor,
        )
        request = SummaryRequest(
            head=plan.head, previous=None, counter=counter, budget_tokens=budget, instructions=instructions
        )
        chain = build_chain(summarizer or settings.summarizer, settings, sampled, offered=sampling_offered)
        try:
            outcome, (text, report, summary_tokens), fallbacks = await run_chain(
                chain, request, lambda o: accept(o.text, plan, counter)
            )
        except SummarizerError as exc:
            raise CompactionFailed(f"m{first}..m{last}: {exc.reason}; nothing was changed") from exc
        marker = count_message(
            Message(
                role="user",
                parts=[TextPart(text=RANGE_MARKER.format(first=f"m{first}", last=f"m{last}"), synthetic=True)],
                metadata={"range": [first, last]},
            ),
            counter,
        )
        summary = count_message(
            Message(
                role="assistant",
                parts=[TextPart(text=text, synthetic=True)],
                finish_reason="stop",
                metadata={"range_summary": [first, last]},
            ),
            counter,
        )
        before = session.tokens_in_view
        after = before - replaced + marker.in_view_tokens + summary.in_view_tokens
        shown = [*visible[: visible.index(span[0])], marker, summary, *kept, *visible[visible.index(span[-1]) + 1 :]]
        result = CompactResult(
            compacted=not dry_run,
            dry_run=dry_run,
            strategy="range",
            summarizer=outcome.summarizer,
            fallbacks=fallbacks,
            tokens_before=before,
            tokens_after=after,
            summary_tokens=summary_tokens,
            head_messages=len(head),
            pinned=report.added,
            summary=text if dry_run else None,
            view=[f"m{m.seq}" if m.seq else ("range marker" if m is marker else "range summary") for m in shown]
            if dry_run
            else None,
            status=Brief.of(await scope.status(session)),
        )
        if dry_run:
            return result
        async with scope.store.write(session_id) as tx:
            current = tx.session
            if current.view != session.view or current.tokens_in_view != before:
                raise ConflictError(
                    "the session changed while the range was summarized; nothing was written, try again"
                )
            stored = await tx.insert_messages([marker, summary])
            anchor = current.view or NO_COMPACTION
            splice = Splice(
                first_seq=first,
                last_seq=last,
                marker_seq=stored[0].seq,
                summary_seq=stored[1].seq,
                kept=[m.seq for m in kept],
            )
            anchor = anchor.model_copy(update={"splices": [*anchor.splices, splice]})
            await tx.add_compaction(
                CompactionRecord(
                    strategy="range",
                    summarizer=outcome.summarizer,
                    fallbacks=fallbacks,
                    tokens_before=before,
                    tokens_after=after,
                    head_messages=len(head),
                    head_tokens=replaced,
                    summary_tokens=summary_tokens,
                    marker_id=stored[0].id,
                    summary_id=stored[1].id,
                    pinned=report.added,
                    model=outcome.model,
                    usage=outcome.usage,
                    cost_usd=outcome.cost_usd,
                    notes=[f"m{first}..m{last}" + (f", {len(kept)} pinned kept" if kept else "")],
                    view_before=current.view,
                    written_ids=[m.id for m in stored],
                )
            )
            await tx.save_session(
                tx.session.model_copy(
                    update={
                        "view": anchor,
                        "tokens_in_view": after,
                        "message_count": tx.session.message_count + len(stored),
                        "tokens_stored": tx.session.tokens_stored + sum(m.tokens for m in stored),
                        "updated_at": time.time(),
                    }
                )
            )
        status = await scope.status(await scope.store.get_session(session_id))
        return result.model_copy(update={"status": Brief.of(status)})


__all__ = ["NO_COMPACTION", "RANGE_MARKER", "Ranges", "range_of"]

"""Compaction as the service runs it: read, summarize outside any lock, write in one transaction.

The summarizer may be a network call of many seconds, so it never runs inside a store
transaction. The write re-reads the session and refuses if another compaction moved the view in
between. The summarizer chain is anthropic → sampling → extractive (`auto`), each failure
recorded; the extractive summarizer cannot fail, so a compaction always produces a summary — but
one that frees nothing (by our own count on both sides) is refused with the numbers, and nothing
is written. When the caller named a summarizer and another one's summary was kept, the result
says why. The newest request and the last answer always stay in view (compaction/thread.py);
with nothing older to summarize, the kept tail's oversized outputs are cut down in view instead.
On overflow, the compaction a request asks for becomes a recovery: the newest attachments shown
as placeholders, up to `recovery_attempts` compactions, and once, tool outputs over
`oversized_share` of usable cut down in view to `cut_tokens` (at most `cut_chars`). An automatic
compaction within `compaction_cooldown_seconds` of the last, the view grown by less than
`compaction_cooldown_growth`, is refused rather than looping (all settings, see config.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from contextfold.compaction.base import Summarizer, SummarizerError, SummaryOutcome, SummaryRequest
from contextfold.compaction.chain import run_chain
from contextfold.compaction.engine import (
    NothingToCompact,
    Plan,
    accept,
    anchor_for,
    compacted,
    compaction_messages,
    is_continue,
    plan_compaction,
)
from contextfold.compaction.prompt import build_prompt
from contextfold.compaction.summarizers.anthropic import default_max_tokens
from contextfold.compaction.template import PINNED_NOTE
from contextfold.compaction.transcript import render_transcript
from contextfold.config import Settings
from contextfold.domain import CompactionRecord, FilePart, LastCompaction, Message, Session, ToolPart
from contextfold.errors import CompactionFailed, ConflictError
from contextfold.formats.shown import media_placeholder
from contextfold.policy import view
from contextfold.policy.cut import CutCaps, cut_in_view
from contextfold.policy.turns import tail_budget
from contextfold.results import Brief, CompactResult, Status
from contextfold.store import PartMark, SessionTransaction, TenantStore
from contextfold.tokens.counting import TokenCounter

Progress = Callable[[float, str], Awaitable[None]]


@dataclass(frozen=True)
class SessionAccess:
    """The store, and what the service knows about a session: its settings, tokenizer, usable
    budget and status. The service passes this in, so compaction never imports the service."""

    store: TenantStore
    settings_for: Callable[[Session], Settings]
    counter_for: Callable[[Session, Settings], TokenCounter]
    usable_for: Callable[[Session, Settings], int]
    status_for: Callable[[Session], Awaitable[Status]]

    def counter(self, session: Session) -> TokenCounter:
        return self.counter_for(session, self.settings_for(session))

    async def status(self, session_id: str) -> Status:
        """The session's status as it is now, read afresh."""
        return await self.status_for(await self.store.get_session(session_id))


@dataclass(frozen=True)
class Given:
    """A summary a preview accepted, written as it is by `apply`."""

    summary: str
    summarizer: str
    pinned: list[str]


@dataclass(frozen=True)
class Prepared:
    session: Session
    settings: Settings
    counter: TokenCounter
    plan: Plan
    usable: int
    last_seq: int
    """The newest message when the plan was made; anything later arrived while summarizing."""
    pinned_tokens: int = 0
    """What the session's pins cost in view: pinned messages, and the notes in the summary."""


async def _no_progress(_fraction: float, _message: str) -> None:
    return None


class Compactor:
    def __init__(self, access: SessionAccess) -> None:
        self._access = access
        self._store = access.store

    # -- planning --------------------------------------------------------------------------------

    async def prepare(self, session_id: str) -> Prepared:
        session = await self._store.get_session(session_id)
        settings = self._access.settings_for(session)
        usable = self._access.usable_for(session, settings)
        messages = await self._store.load_messages(session.id, after_seq=view.load_from(session.view))
        counter = self._access.counter_for(session, settings)
        state = session.metadata
        visible = view.in_view(messages, session.view)
        pinned = state.pinned_seqs()
        pinned_tokens = pinned_cost(visible, pinned, state.pinned_notes(), counter)
        if pinned_tokens >= usable > 0:
            raise CompactionFailed(
                f"the pins alone take {pinned_tokens:,} tokens and usable is {usable:,}: no compaction can fit "
                "them; unpin some (contextfold pins SESSION lists them)"
            )
        plan = _plan(
            visible,
            settings,
            usable,
            counter,
            pinned=pinned,
            notes=state.pinned_notes(),
        )
        if plan.foreign_previous:
            # Another agent's summary paraphrases: read the stored history it stands for.
            plan = plan.with_earlier(await self._store.load_messages(session.id, hidden=True))
        last_seq = max((m.seq for m in messages), default=0)
        return Prepared(session, settings, counter, plan, usable, last_seq, pinned_tokens)

    @staticmethod
    def sampling_prompt(prepared: Prepared, instructions: str | None) -> tuple[str, str, int]:
        """(system, user, max_tokens) for asking the client's model; deterministic for a session."""
        plan = prepared.plan
        system, user = build_prompt(
            render_transcript(plan.head),
            previous=plan.previous,
            instructions=instructions,
            budget_tokens=plan.summary_budget,
        )
        return system, user, default_max_tokens(plan.summary_budget)

    # -- the pipeline ------------------------------------------------------------------------------

    async def compact(
        self,
        session_id: str,
        *,
        summarizers: Sequence[Summarizer],
        instructions: str | None = None,
        auto: bool = False,
        overflow: bool = False,
        dry_run: bool = False,
        progress: Progress | None = None,
        tokens_before: int | None = None,
        check_cooldown: bool = False,
        requested: str | None = None,
        given: Given | None = None,
        prepared: Prepared | None = None,
    ) -> tuple[CompactionRecord, str]:
        """Summarize the head and write the compaction; `requested` is the summarizer the caller
        named (a note says why when another one's summary was kept). `given`: write this summary,
        as a preview accepted it, instead of running the summarizers (`prepared`: its plan)."""
        progress = progress or _no_progress
        await progress(0.05, "selecting the tail")
        prepared = prepared or await self.prepare(session_id)
        session, plan, counter = prepared.session, prepared.plan, prepared.counter
        before = session.tokens_in_view if tokens_before is None else tokens_before
        if check_cooldown:
            self._check_cooldown(session, self._access.settings_for(session))
        request = SummaryRequest(
            head=plan.head,
            earlier=plan.earlier,
            facts=plan.facts,
            previous=plan.previous,
            counter=counter,
            budget_tokens=plan.summary_budget,
            instructions=instructions,
            tail=plan.tail,
        )

        async def trying(i: int, name: str) -> None:
            await progress(0.15 + 0.6 * i / max(len(summarizers), 1), f"summarizing with {name}")

        if given is not None:
            outcome = SummaryOutcome(given.summary, given.summarizer)
            fallbacks: list[str] = []
            text, summary_tokens, pinned = given.summary, counter.count(given.summary), given.pinned
        else:
            try:
                outcome, (text, report, summary_tokens), fallbacks = await run_chain(
                    summarizers, request, lambda outcome: accept(outcome.text, plan, counter), progress=trying
                )
            except SummarizerError as exc:
                raise _failed(exc.reason, plan) from exc
            pinned = report.added
        new = compaction_messages(plan, text, counter, auto=auto, overflow=overflow)
        system_tokens = sum(p.tokens for p in session.system)
        after = system_tokens + sum(m.in_view_tokens for m in new) + plan.pinned_tokens + plan.tail_tokens
        record = CompactionRecord(
            summarizer=outcome.summarizer,
            fallbacks=fallbacks,
            auto=auto,
            overflow=overflow,
            tokens_before=before,
            tokens_after=after,
            head_messages=len(plan.head),
            head_tokens=plan.replaced_tokens,
            summary_tokens=summary_tokens,
            tail_start_id=plan.tail_start.id if plan.tail_start else None,
            pinned=pinned,
            model=outcome.model,
            usage=outcome.usage,
            cost_usd=outcome.cost_usd,
            notes=_not_used(requested, outcome.summarizer, fallbacks),
            outputs_cut=len(plan.cuts),
            view_before=session.view,
        )
        # Our own count on both sides: a provider's report (which also counts tool definitions)
        # must not make a compaction that frees nothing look like one that does.
        counted = min(before, session.tokens_in_view)
        if after >= counted:
            copy = f", the request again {new[2].in_view_tokens:,}" if plan.prompt is not None else ""
            cuts = f", {len(plan.cuts)} output(s) cut" if plan.cuts else ""
            kept = f", pinned {plan.pinned_tokens:,}" if plan.pinned else ""
            raise _failed(
                f"compaction would not free anything: {counted:,} tokens in view before, {after:,} after "
                f"(summary {summary_tokens:,}{kept}, tail {plan.tail_tokens:,}{copy}{cuts}); nothing was changed",
                plan,
            )
        if dry_run:
            await progress(1.0, "dry run: nothing written")
            return record, text
        await progress(0.85, "writing the summary")
        record = await self._write(prepared, new, record)
        await progress(1.0, "done")
        return record, text

    async def _write(self, prepared: Prepared, new: list[Message], record: CompactionRecord) -> CompactionRecord:
        read, plan = prepared.session, prepared.plan
        async with self._store.write(read.id) as tx:
            session = tx.session
            if session.view != read.view:
                raise ConflictError("the session was compacted by another request meanwhile; try again")
            # Messages appended while the summarizer ran stay in view, after the kept tail.
            arrived = await tx.rows(after_seq=prepared.last_seq)
            written = sum(m.in_view_tokens for m in new)
            if arrived and arrived[-1].role == "user":
                new = [m for m in new if not is_continue(m)]  # the user's own message is the one to answer
            caps = CutCaps(prepared.settings.cut_tokens, prepared.settings.cut_chars)
            cuts = await self._recut(tx, plan, prepared.counter, caps) if plan.cuts else []
            stored = await tx.insert_messages(new)
            if cuts:
                await tx.mark_parts(cuts)
            anchor = anchor_for(stored, plan, session.view)
            if arrived and anchor.tail_start_seq is None:
                anchor = anchor.model_copy(update={"tail_start_seq": arrived[0].seq})
            after = (
                record.tokens_after
                - (written - sum(m.in_view_tokens for m in stored))
                + sum(c.freed for c in plan.cuts)
                - sum(c.freed for c in cuts)
                + sum(r.tokens for r in arrived)
            )
            record = record.model_copy(
                update={
                    "tokens_after": after,
                    "marker_id": stored[0].id,
                    "summary_id": stored[1].id,
                    "outputs_cut": len(cuts),
                    "view_before": session.view,
                    "written_ids": [m.id for m in stored],
                    "cut_marks": [(c.message_id, c.index, c.freed) for c in cuts],
                }
            )
            record = await tx.add_compaction(record)
            metadata = session.metadata.model_copy(
                update={"last_compaction": LastCompaction(at=time.time(), tokens_after=after)}
            )
            session = compacted(session, anchor, stored, after).model_copy(update={"metadata": metadata})
            await tx.save_session(session)
        return record

    @staticmethod
    async def _recut(tx: SessionTransaction, plan: Plan, counter: TokenCounter, caps: CutCaps) -> list[PartMark]:
        """The plan's cuts made again on the parts as they are now (a prune may have marked one)."""
        first = plan.tail_start.seq if plan.tail_start else 0
        current = {m.id: m for m in await tx.messages(first - 1)}
        marks = []
        for planned in plan.cuts:
            message = current.get(planned.message_id)
            part = message.parts[planned.index] if message and planned.index < len(message.parts) else None
            cut = (
                cut_in_view(part, counter, max_tokens=caps.tokens, max_chars=caps.chars)
                if isinstance(part, ToolPart)
                else None
            )
            if cut is not None:
                marks.append(PartMark(planned.message_id, planned.index, *cut))
        return marks

    @staticmethod
    def _check_cooldown(session: Session, settings: Settings) -> None:
        last = session.metadata.last_compaction
        if last is None:
            return
        elapsed = time.time() - last.at
        grown_enough = session.tokens_in_view > last.tokens_after * settings.compaction_cooldown_growth
        cooldown = settings.compaction_cooldown_seconds
        if elapsed < cooldown and not grown_enough:
            raise CompactionFailed(
                f"the session was compacted {elapsed:.0f} s ago and has grown only to "
                f"{session.tokens_in_view:,} tokens since ({last.tokens_after:,} after that compaction); "
                f"another automatic compaction now would loop — wait {cooldown - elapsed:.0f} s or compact manually"
            )

    # -- overflow recovery -----------------------------------------------------------------------

    async def compact_with_recovery(
        self,
        session: Session,
        *,
        summarizers: Sequence[Summarizer],
        instructions: str | None,
        dry_run: bool,
        auto: bool,
        progress: Progress | None,
        requested: str | None = None,
        prepared: Prepared | None = None,
    ) -> CompactResult:
        """One anchored compaction as a request asks for it; on overflow, recover (docs/design.md §12).

        With nothing to summarize but a kept tail over its budget, the tail's oversized outputs
        are cut down in view instead. `requested` is the summarizer the caller named.
        """
        session_id = session.id
        status = await self._access.status_for(session)
        overflow = status.state == "overflow"
        # Recovering from an overflow is an automatic compaction: the model gets a continue message.
        auto = auto or overflow
        media_omitted = 0
        if overflow and not dry_run:
            # Attachments in the newest message can be what broke the window: show them as
            # placeholders with a note, then compact the history before them as usual.
            media_omitted = await self.omit_newest_media(session_id, self._access.counter(session))
            if media_omitted:
                status = await self._access.status(session_id)
        attempts = 0
        outputs_cut = 0
        cut_done = tail_cut = False
        while True:
            attempts += 1
            try:
                record, summary = await self.compact(
                    session_id,
                    summarizers=summarizers,
                    instructions=instructions,
                    auto=auto,
                    overflow=overflow,
                    dry_run=dry_run,
                    progress=progress,
                    tokens_before=status.tokens_in_view,
                    check_cooldown=auto and attempts == 1,
                    requested=requested,
                    prepared=prepared if attempts == 1 else None,
                )
            except (NothingToCompact, CompactionFailed) as exc:
                if isinstance(exc, NothingToCompact) and exc.cuts and not tail_cut:
                    # No summary worth writing, but the kept tail is over its budget: cut its largest outputs.
                    tail_cut = True
                    before = status.tokens_in_view
                    if dry_run:
                        after = before - sum(c.freed for c in exc.cuts)
                        return _cut_only(before, attempts, len(exc.cuts), status, str(exc), after=after)
                    cut = await self.cut_tail(session_id)
                    if cut:
                        outputs_cut += cut
                        status = await self._access.status(session_id)
                        if not overflow or status.state != "overflow":
                            return _cut_only(before, attempts, outputs_cut, status, str(exc))
                        attempts = 0
                        continue
                if overflow and not dry_run and not cut_done:
                    # Nothing left to summarize: cut oversized outputs in view once, then retry.
                    cut_done = True
                    cut = await self.cut_oversized(session_id, status.usable)
                    outputs_cut += cut
                    if cut:
                        before = status.tokens_in_view
                        status = await self._access.status(session_id)
                        if status.state != "overflow":
                            return _cut_only(before, attempts, outputs_cut, status, str(exc))
                        attempts = 0
                        continue
                raise CompactionFailed(
                    f"{exc} ({status.tokens_in_view:,} tokens in view, {status.usable:,} usable)"
                ) from exc
            status = await self._access.status(session_id)
            if dry_run or status.state != "overflow" or not overflow:
                break
            if attempts >= self._access.settings_for(session).recovery_attempts:
                raise CompactionFailed(
                    f"still over the limit after {attempts} compactions: {status.tokens_in_view:,} tokens in view, "
                    f"{status.usable:,} usable; the kept tail alone is too large — lower preserve_recent_tokens "
                    "or prune tool outputs"
                )
        return result_of(
            record,
            status,
            compacted=not dry_run,
            dry_run=dry_run,
            attempts=attempts,
            outputs_cut=outputs_cut + record.outputs_cut,
            media_omitted=media_omitted,
            reason="; ".join(record.notes) or None,
            summary=summary if dry_run else None,
        )

    async def omit_newest_media(self, session_id: str, counter: TokenCounter) -> int:
        """Leave the newest user message's attachments out of the view, with a note (marks only)."""
        async with self._store.write(session_id) as tx:
            session = tx.session
            messages = await view.visible(tx.messages, session.view)
            newest = next((m for m in reversed(messages) if m.starts_turn), None)
            if newest is None:
                return 0
            marks: list[PartMark] = []
            for index, part in enumerate(newest.parts):
                if isinstance(part, FilePart) and part.is_media and not part.omitted:
                    omitted = part.model_copy(update={"omitted": True})
                    freed = part.tokens - counter.count(media_placeholder(omitted))
                    marks.append(PartMark(newest.id, index, omitted, max(freed, 0)))
            if marks:
                await tx.mark_parts(marks)
                freed_total = sum(m.freed for m in marks)
                await tx.save_session(
                    session.model_copy(update={"tokens_in_view": session.tokens_in_view - freed_total})
                )
        return len(marks)

    async def cut_tail(self, session_id: str) -> int:
        """When no summary is worth writing, cut the kept tail's largest outputs down in view until
        it fits its budget (planned again under the write lock; marks only)."""
        async with self._store.write(session_id) as tx:
            session = tx.session
            settings = self._access.settings_for(session)
            usable = self._access.usable_for(session, settings)
            visible = await view.visible(tx.messages, session.view)
            try:
                counter = self._access.counter_for(session, settings)
                marks = list(_plan(visible, settings, usable, counter, pinned=session.metadata.pinned_seqs()).cuts)
            except NothingToCompact as exc:
                marks = list(exc.cuts)
            if marks:
                await tx.mark_parts(marks)
                freed = sum(m.freed for m in marks)
                await tx.save_session(session.model_copy(update={"tokens_in_view": session.tokens_in_view - freed}))
        return len(marks)

    async def cut_oversized(self, session_id: str, usable: int) -> int:
        """Cut tool outputs bigger than `oversized_share` of usable down to a preview of at most
        `cut_tokens` tokens in view (once; marks only)."""
        async with self._store.write(session_id) as tx:
            session = tx.session
            settings = self._access.settings_for(session)
            counter = self._access.counter_for(session, settings)
            threshold = max(settings.cut_chars // 4, int(usable * settings.oversized_share))
            messages = await view.visible(tx.messages, session.view)
            marks: list[PartMark] = []
            pinned = session.metadata.pinned_seqs()
            for message in messages:
                if message.seq in pinned:
                    continue  # a pinned message stays verbatim
                for index, part in enumerate(message.parts):
                    if not isinstance(part, ToolPart) or part.tokens <= threshold:
                        continue
                    # Capped in tokens (dense text runs under 2 characters a token) within the
                    # character cap; the freed count is as the view shows it, note included.
                    cut = cut_in_view(part, counter, max_tokens=settings.cut_tokens, max_chars=settings.cut_chars)
                    if cut is not None:
                        marks.append(PartMark(message.id, index, *cut))
            if marks:
                await tx.mark_parts(marks)
                freed_total = sum(m.freed for m in marks)
                await tx.save_session(
                    session.model_copy(update={"tokens_in_view": session.tokens_in_view - freed_total})
                )
        return len(marks)


def _plan(
    visible: Sequence[Message],
    settings: Settings,
    usable: int,
    counter: TokenCounter,
    *,
    pinned: frozenset[int] = frozenset(),
    notes: Sequence[str] = (),
) -> Plan:
    return plan_compaction(
        visible,
        tail_budget=tail_budget(usable, settings.preserve_recent_tokens),
        tail_turns=settings.tail_turns,
        usable=usable,
        counter=counter,
        caps=CutCaps(settings.cut_tokens, settings.cut_chars),
        pinned=pinned,
        notes=notes,
        summary_max_tokens=settings.summary_max_tokens,
    )


def outline(plan: Plan, *, auto: bool = False) -> list[str]:
    """The view a compaction of `plan` leaves, one entry a message, in order (messages appended
    meanwhile would follow): the marker, the summary, the pinned messages, the request copy, the tail."""
    cut = {c.message_id for c in plan.cuts}
    out = ["marker", "summary", *(f"m{m.seq}" for m in plan.pinned)]
    if plan.prompt is not None:
        out.append(f"copy of m{plan.prompt.seq}")
    out += [f"m{m.seq}" + (" (output cut)" if m.id in cut else "") for m in plan.tail]
    if auto and (not plan.tail or plan.tail[-1].role != "user"):
        out.append("continue note")
    return out


def pinned_cost(visible: Sequence[Message], pinned: frozenset[int], notes: Sequence[str], counter: TokenCounter) -> int:
    """What the pins cost in view: the pinned messages shown, and each note's bullet."""
    shown = sum(m.in_view_tokens for m in visible if m.seq in pinned)
    return shown + sum(counter.count(PINNED_NOTE + note) for note in notes)


def _failed(message: str, plan: Plan) -> Exception:
    """No summary worth writing. When the kept tail has outputs to cut, say so: the caller may
    cut them instead (NothingToCompact carries them); otherwise the compaction failed."""
    if plan.cuts:
        return NothingToCompact(message, plan.cuts)
    return CompactionFailed(message)


def _not_used(requested: str | None, used: str, fallbacks: Sequence[str]) -> list[str]:
    """A note when the summarizer the caller named is not the one whose summary was kept."""
    if requested in (None, "auto") or requested == used:
        return []
    why = next((f[len(requested) + 2 :] for f in fallbacks if f.startswith(f"{requested}: ")), "it did not run")
    return [f"the {requested} summarizer was asked for but not used: {why}; the {used} summary was kept instead"]


def result_of(
    record: CompactionRecord,
    status: Status,
    *,
    compacted: bool,
    reason: str | None,
    dry_run: bool = False,
    attempts: int = 1,
    outputs_cut: int | None = None,
    media_omitted: int = 0,
    summary: str | None = None,
) -> CompactResult:
    """What a caller is told of the compaction `record` wrote: its summarizer, tokens, head and
    pins, and the session's `status` after it. `outputs_cut`: all the outputs cut down (the
    record's by default)."""
    return CompactResult(
        compacted=compacted,
        dry_run=dry_run,
        summarizer=record.summarizer,
        fallbacks=record.fallbacks,
        tokens_before=record.tokens_before,
        tokens_after=record.tokens_after,
        summary_tokens=record.summary_tokens,
        head_messages=record.head_messages,
        tail_start_id=record.tail_start_id,
        pinned=record.pinned,
        attempts=attempts,
        outputs_cut=record.outputs_cut if outputs_cut is None else outputs_cut,
        media_omitted=media_omitted,
        reason=reason,
        summary=summary,
        status=Brief.of(status),
    )


def _cut_only(
    before: int, attempts: int, cut: int, status: Status, why: str, *, after: int | None = None
) -> CompactResult:
    """A compaction that cut oversized outputs in view and wrote no summary (`after` given: a dry
    run, which only says what the cut would leave)."""
    return CompactResult(
        compacted=False,
        dry_run=after is not None,
        fallbacks=[f"no summary: {why}"],
        tokens_before=before,
        tokens_after=status.tokens_in_view if after is None else after,
        attempts=attempts,
        outputs_cut=cut,
        reason=f"{'would cut' if after is not None else 'cut'} {cut} oversized tool output(s) down in view "
        "(the store keeps them whole); no summary",
        status=Brief.of(status),
    )


__all__ = [
    "Compactor",
    "result_of",
    "Given",
    "NothingToCompact",
    "Prepared",
    "outline",
    "pinned_cost",
    "SessionAccess",
]

"""Where a session stands: its status, the advice that goes with it, and compaction metrics.

`status` is read on every prune as well as on its own, and every append answers with its `brief`;
in the `soft` state both run the prune plan that `prune` would run, so the advice they give is one
that works. Neither reads more as history grows: the compaction totals come with the session, and
the rows read are the view's, or the latest few usage reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from contextfold.compaction.template import PINNED_NOTE
from contextfold.config import Settings
from contextfold.domain import Message, MessageRow, Session
from contextfold.formats import RenderOptions
from contextfold.names import AGENT_NAMES
from contextfold.policy import view
from contextfold.policy.cache import cache_health
from contextfold.policy.overflow import (
    RECOMMENDATIONS,
    Assessment,
    assess,
    calibrated_tokens,
    prune_falls_short,
)
from contextfold.policy.prune import (
    PruneOptions,
    PrunePlan,
    plan_prune,
    prune_ceiling,
    prune_thresholds,
    remaining_counter,
    shown_counter,
)
from contextfold.results import Brief, CompactionMetrics, CompactionSummary, Status
from contextfold.store import TenantStore
from contextfold.tokens import catalog
from contextfold.tokens.counting import TokenCounter


class Scope(Protocol):
    """What standing needs of a tenant's scope (`runtime.Scope` is one): no more, so it imports none."""

    @property
    def store(self) -> TenantStore: ...

    def settings_for(self, session: Session) -> Settings: ...

    def budget(self, session: Session, settings: Settings) -> catalog.Budget: ...

    def counter(self, model: str, settings: Settings) -> TokenCounter: ...

    async def view(self, session: Session) -> list[Message]: ...


@dataclass(frozen=True)
class _Standing:
    """What `status` and `brief` share: the calibrated count, the verdict and the advice."""

    context_window: int
    reported: int | None
    in_view: int
    verdict: Assessment
    counter: TokenCounter
    action: str


def reporter(session: Session) -> str:
    """Who reported the usage a session is calibrated with: the agent whose transcript it imported
    (the usage in a Claude Code or Codex file is what that agent was told), else the provider."""
    return AGENT_NAMES.get(session.metadata.source_format or "", "the provider")


class Standing:
    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def status(self, session: Session, visible: Sequence[Message] | None = None) -> Status:
        """Where `session` stands and what to do next; `visible` is its view when the caller has it loaded."""
        standing = await self._standing(session, visible)
        health = cache_health(await self._scope.store.recent_usages(session.id)) if session.last_usage else None
        pinned = await self.pinned_tokens(session, standing.counter) if session.metadata.pins else None
        action = standing.action
        if pinned is not None and pinned >= standing.verdict.usable > 0:
            action = (
                f"the pins alone take {pinned:,} tokens of {standing.verdict.usable:,} usable: no compaction can "
                "make room; unpin some"
            )
        return Status(
            session_id=session.id,
            model=session.model,
            model_known=catalog.lookup(session.model).known,
            method=standing.counter.method,
            tokens_in_view=standing.in_view,
            tokens_counted=session.tokens_in_view,
            tokens_reported=standing.reported,
            usable=standing.verdict.usable,
            context_window=standing.context_window,
            ratio=standing.verdict.ratio,
            state=standing.verdict.state,
            recommended_action=action,
            message_count=session.message_count,
            tokens_stored=session.tokens_stored,
            compaction=await self._compaction_metrics(session),
            cache_hit_rate=round(health.hit_rate, 4) if health and health.requests else None,
            cache_warning=health.warning if health else None,
            reported_by=reporter(session) if standing.reported is not None else None,
            pinned_tokens=pinned,
        )

    async def pinned_tokens(self, session: Session, counter: TokenCounter) -> int:
        """What the session's pins cost in view: the pinned messages still shown (from the light
        rows), and each note's bullet in the summary."""
        pinned = session.metadata.pinned_seqs()
        shown = 0
        if pinned:
            stored = await self._scope.store.rows(session.id, after_seq=view.load_from(session.view))
            shown = sum(r.tokens for r in view.in_view(stored, session.view) if r.seq in pinned)
        return shown + sum(counter.count(PINNED_NOTE + note) for note in session.metadata.pinned_notes())

    async def brief(self, session: Session, visible: Sequence[Message] | None = None) -> Brief:
        """`Brief.of(status)` without reading what a brief leaves out (cache health, compactions):
        what every append answers with."""
        standing = await self._standing(session, visible)
        return Brief(
            session_id=session.id,
            tokens_in_view=standing.in_view,
            tokens_reported=standing.reported,
            tokens_stored=session.tokens_stored,
            usable=standing.verdict.usable,
            ratio=standing.verdict.ratio,
            state=standing.verdict.state,
            recommended_action=standing.action,
        )

    async def _standing(self, session: Session, visible: Sequence[Message] | None) -> _Standing:
        settings = self._scope.settings_for(session)
        budget = self._scope.budget(session, settings)
        reported = None
        if session.last_usage is not None:
            # What the provider saw at its last report, plus what our count says changed since.
            seen = session.last_usage.total_input + session.last_usage.output
            reported = seen + session.tokens_in_view - session.usage_baseline
        in_view = calibrated_tokens(session.tokens_in_view, reported)
        verdict = assess(in_view, budget, soft_ratio=settings.soft_ratio, hard_ratio=settings.hard_ratio)
        counter = self._scope.counter(session.model, settings)
        action = (
            await self._soft_advice(session, settings, counter, visible)
            if verdict.state == "soft"
            else verdict.recommended_action
        )
        return _Standing(budget.context, reported, in_view, verdict, counter, action)

    async def _soft_advice(
        self, session: Session, settings: Settings, counter: TokenCounter, visible: Sequence[Message] | None
    ) -> str:
        """Advise prune only if the prune `prune` would run now frees more than the minimum.

        Runs on every status and append in the `soft` state, so it first bounds what a prune can
        free from the light rows; only when that bound clears the minimum does it load the view
        (unless the caller passed it) and run the real plan. Both paths give the same advice
        for the same view, whoever asks.
        """
        options = self.prune_options(session, settings)
        if visible is None:
            stored = await self._scope.store.rows(session.id, after_seq=view.load_from(session.view))
            rows = view.in_view(stored, session.view)
        else:
            rows = [MessageRow(m.id, m.seq, m.role, m.in_view_tokens, m.starts_turn, m.summary) for m in visible]
        ceiling = prune_ceiling(rows, options)
        if ceiling <= options.minimum:
            return prune_falls_short(ceiling, options.minimum, at_most=True)
        if visible is None:
            visible = await self._scope.view(session)
        plan = self.plan_prune(visible, options, counter)
        if plan.applies:
            return RECOMMENDATIONS["soft"]
        return prune_falls_short(plan.tokens_freed, options.minimum, at_most=False)

    async def _compaction_metrics(self, session: Session) -> CompactionMetrics | None:
        # The totals come with the session (the store keeps them); only the latest records are read.
        prunes = session.metadata.prunes
        if not session.compaction_count and not prunes.count:
            return None
        recent = await self._scope.store.compactions(session.id, limit=10) if session.compaction_count else []
        return CompactionMetrics(
            compactions=session.compaction_count,
            tokens_freed=session.compaction_tokens_freed,
            prunes=prunes.count,
            prune_tokens_freed=prunes.tokens_freed,
            recent=[
                CompactionSummary(
                    at=r.created_at,
                    summarizer=r.summarizer,
                    fallbacks=r.fallbacks,
                    tokens_before=r.tokens_before,
                    tokens_after=r.tokens_after,
                    auto=r.auto,
                    overflow=r.overflow,
                )
                for r in recent
            ],
        )

    def prune_options(self, session: Session, settings: Settings, **anthropic: Any) -> PruneOptions:
        """The session's prune rule, with any of Anthropic's context-editing options given; unless
        set, the protection and minimum scale down with a small window (`prune_thresholds`)."""
        budget = self._scope.budget(session, settings)
        protect, minimum = prune_thresholds(
            budget.usable if budget.context else None, protect=settings.prune_protect, minimum=settings.prune_minimum
        )
        return PruneOptions(
            protect=protect,
            minimum=minimum,
            keep_turns=settings.prune_keep_turns,
            protected_tools=frozenset(t.lower() for t in settings.prune_protected_tools),
            pinned=session.metadata.pinned_seqs(),
            **anthropic,
        )

    def plan_prune(self, visible: Sequence[Message], options: PruneOptions, counter: TokenCounter) -> PrunePlan:
        """The plan `prune` runs, exactly counted; `status` runs the same one for its advice."""
        return plan_prune(
            visible,
            options,
            placeholder_tokens=counter.count(RenderOptions().pruned_placeholder),
            remaining_tokens=remaining_counter(counter, clear_inputs=options.clear_inputs),
            shown_tokens=shown_counter(counter),
        )

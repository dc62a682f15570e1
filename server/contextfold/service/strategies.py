"""The compaction strategies other than the anchored summary, as the service runs them.

`regions` replaces the largest runs of tool calls with digests of about a fifth of their tokens,
Claude Code–style, written by the configured summarizer when one is available
(`compaction.region_digest`) and by rule otherwise (`policy.digest`); `middle`, `oldest` and
`hybrid` take low-priority messages out of the view, Cipher-style, without an LLM. Each plans with
a pure policy (`policy.regions`, `policy.removal`) and writes marks, never deletions, in one
transaction; an LLM runs before it, outside any transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from contextfold.compaction.chain import Sampled, wants_sampling
from contextfold.compaction.region_digest import (
    NO_LLM,
    RegionAsk,
    batches,
    build_region_prompt,
    region_key,
    write_digests,
)
from contextfold.compaction.secrets import redact, redact_parts
from contextfold.config import Settings
from contextfold.domain import CompactionRecord, Message, Session, ToolPart
from contextfold.errors import CompactionFailed
from contextfold.formats.shown import tool_input_text
from contextfold.names import REMOVAL_STRATEGIES
from contextfold.policy import view
from contextfold.policy.digest import digest
from contextfold.policy.regions import RegionPlan, plan_regions, target_tokens
from contextfold.policy.removal import plan_hybrid, plan_middle, plan_oldest, provider_defaults
from contextfold.results import Brief, CompactResult, Status
from contextfold.service.anchored import SessionAccess
from contextfold.store import PartMark
from contextfold.tokens import catalog
from contextfold.tokens.counting import TokenCounter


@dataclass(frozen=True)
class _Read:
    session: Session
    settings: Settings
    counter: TokenCounter
    visible: list[Message]


class Strategies:
    """`regions` and the removal strategies, each one transaction that writes marks."""

    def __init__(self, access: SessionAccess) -> None:
        self._access = access
        self._store = access.store

    async def regions(
        self,
        session_id: str,
        *,
        dry_run: bool,
        summarizer: str | None = None,
        instructions: str | None = None,
        sampled: Sampled | None = None,
        sampling_offered: bool = False,
    ) -> CompactResult:
        """Claude Code–style: replace the largest runs of tool calls with digests of about a fifth
        of their tokens, written by the summarizer `summarizer` (default: the session's) picks when
        it is available, by rule otherwise. The LLM runs outside any transaction; the write plans
        again on the view as it is then, and a region the LLM did not digest gets the rule's."""
        status = await self._access.status(session_id)
        read = await self._read(session_id)
        choice = summarizer or read.settings.summarizer
        written = await write_digests(
            self._asks(read, status),
            choice=choice,
            settings=read.settings,
            counter=read.counter,
            sampled=sampled,
            offered=sampling_offered,
            instructions=instructions,
        )
        async with self._store.write(session_id) as tx:
            session = tx.session
            settings = self._access.settings_for(session)
            counter = self._access.counter_for(session, settings)
            visible = await view.visible(tx.messages, session.view)

            by_llm_texts: set[str] = set()

            def summarize(parts: list[ToolPart], budget: int) -> str:
                # A digest shows the model what the outputs held, never a secret they held.
                sources = [text for p in parts for text in (tool_input_text(p), p.result_text)]
                written_digest = written.digests.get(region_key(parts))
                if written_digest is None:
                    # Written from the parts redacted: a long line cut into pieces cannot hide a secret.
                    ruled = digest(
                        redact_parts(parts),
                        budget_tokens=min(budget, settings.regions_digest_max_tokens),
                        counter=counter,
                    )
                    return redact(ruled, sources)
                by_llm_texts.add(text := redact(written_digest, sources))
                return text

            plan = self._plan(
                visible, session.tokens_in_view, settings, status, counter, summarize, session.metadata.pinned_seqs()
            )
            by_llm = sum(1 for m in plan.marks if m.part.view_text in by_llm_texts)
            used = written.summarizer if by_llm else NO_LLM
            reason = plan.reason
            if by_llm:
                by_rule = plan.regions_summarized - by_llm
                reason += f"; digests written by {used} ({by_llm})" + (f" and by rule ({by_rule})" if by_rule else "")
            digest_tokens = sum(
                counter.count(m.part.view_text)
                for m in plan.marks
                if m.part.compacted_at is not None and m.part.view_text
            )
            if plan.marks and not dry_run:
                await tx.mark_parts([PartMark(m.message_id, m.index, m.part, m.freed) for m in plan.marks])
                await tx.add_compaction(
                    CompactionRecord(
                        strategy="regions",
                        summarizer=used,
                        fallbacks=written.fallbacks,
                        tokens_before=plan.tokens_before,
                        tokens_after=plan.tokens_after,
                        head_messages=len({m.message_id for m in plan.marks}),
                        head_tokens=plan.tokens_before - plan.tokens_after,
                        summary_tokens=digest_tokens,
                        model=written.model if by_llm else None,
                        usage=written.usage if by_llm else None,
                        cost_usd=written.cost_usd if by_llm else None,
                        notes=[reason],
                    )
                )
                await tx.save_session(session.model_copy(update={"tokens_in_view": plan.tokens_after}))
        if not plan.marks:
            raise CompactionFailed(f"regions: nothing to compact — {plan.reason}")
        return CompactResult(
            compacted=not dry_run,
            dry_run=dry_run,
            strategy="regions",
            summarizer=used,
            fallbacks=written.fallbacks,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_after,
            summary_tokens=digest_tokens,
            head_messages=len({m.message_id for m in plan.marks}),
            reason=reason,
            status=Brief.of(await self._access.status(session_id)),
        )

    async def regions_sampling_prompt(
        self, session_id: str, *, summarizer: str | None = None, instructions: str | None = None
    ) -> tuple[str, str, int] | None:
        """(system, user, max_tokens) asking the client's model for the largest regions' digests, or
        None when this session's `regions` compaction would not use it or has nothing to digest."""
        read = await self._read(session_id)
        if not wants_sampling(summarizer, read.settings):
            return None
        groups = batches(self._asks(read, await self._access.status(session_id)))
        return build_region_prompt(groups[0], instructions=instructions) if groups else None

    async def _read(self, session_id: str) -> _Read:
        """The session and its view as they are now, read outside any transaction."""
        session = await self._store.get_session(session_id)
        settings = self._access.settings_for(session)
        messages = await self._store.load_messages(session.id, after_seq=view.load_from(session.view))
        return _Read(
            session, settings, self._access.counter_for(session, settings), view.in_view(messages, session.view)
        )

    def _asks(self, read: _Read, status: Status) -> list[RegionAsk]:
        """The regions a plan with rule-based digests would digest, largest first."""
        asks: list[RegionAsk] = []

        def recording(parts: list[ToolPart], budget: int) -> str:
            asks.append(RegionAsk(tuple(parts), budget))
            cap = read.settings.regions_digest_max_tokens
            return digest(parts, budget_tokens=min(budget, cap), counter=read.counter)

        pinned = read.session.metadata.pinned_seqs()
        self._plan(read.visible, read.session.tokens_in_view, read.settings, status, read.counter, recording, pinned)
        return asks

    @staticmethod
    def _plan(
        visible: list[Message],
        total: int,
        settings: Settings,
        status: Status,
        counter: TokenCounter,
        summarize: Callable[[list[ToolPart], int], str | None],
        pinned: frozenset[int] = frozenset(),
    ) -> RegionPlan:
        # On hard, make the request fit; otherwise get under half of usable, as the seed's soft
        # compaction does (and in any case under the soft threshold).
        target = target_tokens(
            status.usable,
            urgent=status.state in ("hard", "overflow"),
            soft_target=min(settings.regions_soft_target, settings.soft_ratio),
        )
        return plan_regions(
            visible,
            total_tokens=total,
            target_tokens=target,
            counter=counter,
            now=time.time(),
            keep_recent_tokens=settings.regions_keep_recent_tokens,
            summarize=summarize,
            pinned=pinned,
        )

    async def remove(self, session_id: str, strategy: str, *, dry_run: bool) -> CompactResult:
        """Cipher-style removal: take low-priority messages out of the view until the target (no LLM)."""
        async with self._store.write(session_id) as tx:
            session = tx.session
            settings = self._access.settings_for(session)
            usable = self._access.usable_for(session, settings)
            visible = await view.visible(tx.messages, session.view)
            system_tokens = sum(p.tokens for p in session.system)
            target = max(int(usable * settings.soft_ratio) - system_tokens, 0)
            defaults = provider_defaults(catalog.lookup(session.model).provider, session.model)
            options = {
                "target_tokens": target,
                "preserve_start": _or(settings.removal_preserve_start, defaults.preserve_start),
                "preserve_end": _or(settings.removal_preserve_end, defaults.preserve_end),
            }
            pinned = session.metadata.pinned_seqs()
            if strategy == "hybrid":
                choice = plan_hybrid(visible, **options, pinned=pinned)
                scores = ", ".join(f"{name} {score:.4f}" for name, score in sorted(choice.scores.items()))
                plan, reason = (
                    choice.plan,
                    f"chose {choice.plan.strategy} ({scores}): {choice.why}; {choice.plan.reason}",
                )
            else:
                plan = (plan_middle if strategy == "middle" else plan_oldest)(visible, **options, pinned=pinned)
                reason = plan.reason
            before = session.tokens_in_view
            after = before - plan.tokens_freed
            if plan.removed_ids and not dry_run:
                await tx.hide_messages(plan.removed_ids)
                await tx.add_compaction(
                    CompactionRecord(
                        strategy=plan.strategy if strategy != "hybrid" else f"hybrid:{plan.strategy}",
                        summarizer="none",
                        tokens_before=before,
                        tokens_after=after,
                        head_messages=len(plan.removed_ids),
                        head_tokens=plan.tokens_freed,
                        summary_tokens=0,
                        notes=[reason],
                    )
                )
                await tx.save_session(session.model_copy(update={"tokens_in_view": after}))
        if not plan.removed_ids:
            raise CompactionFailed(f"{strategy}: nothing removable — {reason}")
        return CompactResult(
            compacted=not dry_run,
            dry_run=dry_run,
            strategy=strategy,
            tokens_before=before,
            tokens_after=after,
            head_messages=len(plan.removed_ids),
            reason=reason,
            status=Brief.of(await self._access.status(session_id)),
        )


def _or(setting: int | None, default: int) -> int:
    return default if setting is None else setting


__all__ = ["REMOVAL_STRATEGIES", "Strategies"]

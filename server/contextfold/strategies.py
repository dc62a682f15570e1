"""The compaction strategies that need no summarizer, as the service runs them against the store.

`regions` replaces the largest runs of tool calls with short digests, Claude Code–style;
`middle`, `oldest` and `hybrid` take low-priority messages out of the view, Cipher-style. Each
plans with a pure policy (`policy.regions`, `policy.removal`) and writes marks, never deletions,
in one transaction.
"""

from __future__ import annotations

import time

from . import catalog
from .compactor import SessionAccess
from .domain import CompactionRecord
from .errors import CompactionFailed
from .names import REMOVAL_STRATEGIES
from .policy import view
from .policy.regions import plan_regions
from .policy.removal import plan_hybrid, plan_middle, plan_oldest, provider_defaults
from .results import Brief, CompactResult
from .store import PartMark


class Strategies:
    """`regions` and the removal strategies, each one transaction that writes marks (no LLM)."""

    def __init__(self, access: SessionAccess) -> None:
        self._access = access
        self._store = access.store

    async def regions(self, session_id: str, *, dry_run: bool) -> CompactResult:
        """Claude Code–style: replace the largest runs of tool calls with short digests (no LLM)."""
        status = await self._access.status(session_id)
        async with self._store.write(session_id) as tx:
            session = tx.session
            settings = self._access.settings_for(session)
            visible = await view.visible(tx.messages, session.view)
            # On hard, make the request fit; otherwise get back under the soft threshold.
            ratio = 1.0 if status.state in ("hard", "overflow") else settings.soft_ratio
            plan = plan_regions(
                visible,
                total_tokens=session.tokens_in_view,
                target_tokens=int(status.usable * ratio) - 1,
                counter=self._access.counter_for(session, settings),
                now=time.time(),
                keep_recent_tokens=settings.regions_keep_recent_tokens,
            )
            if plan.marks and not dry_run:
                await tx.mark_parts([PartMark(m.message_id, m.index, m.part, m.freed) for m in plan.marks])
                await tx.add_compaction(
                    CompactionRecord(
                        strategy="regions",
                        summarizer="digest",
                        tokens_before=plan.tokens_before,
                        tokens_after=plan.tokens_after,
                        head_messages=len({m.message_id for m in plan.marks}),
                        head_tokens=plan.tokens_before - plan.tokens_after,
                        summary_tokens=0,
                        notes=[plan.reason],
                    )
                )
                await tx.save_session(session.model_copy(update={"tokens_in_view": plan.tokens_after}))
        if not plan.marks:
            raise CompactionFailed(f"regions: nothing to compact — {plan.reason}")
        return CompactResult(
            compacted=not dry_run,
            dry_run=dry_run,
            strategy="regions",
            summarizer="digest",
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_after,
            head_messages=len({m.message_id for m in plan.marks}),
            reason=plan.reason,
            status=Brief.of(await self._access.status(session_id)),
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
            if strategy == "hybrid":
                choice = plan_hybrid(visible, **options)
                scores = ", ".join(f"{name} {score:.4f}" for name, score in sorted(choice.scores.items()))
                plan, reason = choice.plan, f"chose {choice.plan.strategy} ({scores}): {choice.why}; {choice.plan.reason}"
            else:
                plan = (plan_middle if strategy == "middle" else plan_oldest)(visible, **options)
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

"""Compaction: the anchored summary (with the summarizer chain), the strategies without an LLM,
and what the client's model is asked when it writes the summary (MCP sampling)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextfold.compaction.base import Summarizer
from contextfold.compaction.chain import Sampled, SummarizerChoice, build_chain, wants_sampling
from contextfold.compaction.engine import NothingToCompact
from contextfold.config import Settings
from contextfold.domain import Preview
from contextfold.errors import CompactionFailed, InvalidInput, NotFoundError
from contextfold.results import CompactResult
from contextfold.service.anchored import Given, Prepared, Progress, outline, result_of
from contextfold.service.steering import fingerprint, preview_token, take_preview
from contextfold.service.strategies import REMOVAL_STRATEGIES

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Compacting:
    """Compact one tenant's sessions."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def _summarizers(
        self, choice: SummarizerChoice, settings: Settings, sampled: Sampled | None, offered: bool = False
    ) -> list[Summarizer]:
        """The chain `compact` runs for `choice` (`compaction.chain`)."""
        return build_chain(choice, settings, sampled, offered=offered)

    async def sampling_prompt(
        self,
        session_id: str,
        *,
        summarizer: str | None = None,
        instructions: str | None = None,
        strategy: str = "anchored",
    ) -> tuple[str, str, int] | None:
        """The prompt for the client's model, or None when this session's compaction would not use
        it (decided from the session's effective settings, as `compact` decides its chain) or there
        is nothing to compact. `regions` asks for the largest regions' digests."""
        if strategy == "regions":
            try:
                return await self._scope.strategies.regions_sampling_prompt(
                    session_id, summarizer=summarizer, instructions=instructions
                )
            except NotFoundError:
                return None
        try:
            session = await self._scope.store.get_session(session_id)
            # The session's effective settings decide, as they decide the chain `compact` runs.
            if not wants_sampling(summarizer, self._scope.settings_for(session)):
                return None
            prepared = await self._scope.compactor.prepare(session_id)
        except (NothingToCompact, NotFoundError):
            return None
        return self._scope.compactor.sampling_prompt(prepared, instructions)

    async def compact(
        self,
        session_id: str,
        *,
        strategy: str = "anchored",
        summarizer: SummarizerChoice | None = None,
        instructions: str | None = None,
        dry_run: bool = False,
        auto: bool = False,
        sampled: Sampled | None = None,
        sampling_offered: bool = False,
        progress: Progress | None = None,
        apply: str | None = None,
    ) -> CompactResult:
        """Summarize older history into the anchored summary; on overflow, recover (docs/design.md §12).

        An anchored `dry_run` returns the summary and the view applying would write, with a token;
        `apply=<token>` then writes exactly that summary, or refuses if the session changed."""
        if apply is not None:
            if dry_run or strategy != "anchored":
                raise InvalidInput("apply", "apply writes an anchored preview as it is: leave out dry_run and strategy")
            return await self._apply(session_id, apply, progress)
        if strategy in REMOVAL_STRATEGIES:
            return await self._scope.strategies.remove(session_id, strategy, dry_run=dry_run)
        if strategy == "regions":
            return await self._scope.strategies.regions(
                session_id,
                dry_run=dry_run,
                summarizer=summarizer,
                instructions=instructions,
                sampled=sampled,
                sampling_offered=sampling_offered,
            )
        if strategy != "anchored":
            raise InvalidInput(
                "strategy",
                f"unknown strategy {strategy!r}; available: anchored, regions, {', '.join(REMOVAL_STRATEGIES)}",
            )
        session = await self._scope.store.get_session(session_id)
        settings = self._scope.settings_for(session)
        chain = self._summarizers(summarizer or settings.summarizer, settings, sampled, sampling_offered)
        prepared = None
        if dry_run:
            try:
                prepared = await self._scope.compactor.prepare(session_id)
            except (NothingToCompact, CompactionFailed):
                prepared = None  # the compaction below meets it again and answers as it always does
        result = await self._scope.compactor.compact_with_recovery(
            session,
            summarizers=chain,
            instructions=instructions,
            dry_run=dry_run,
            auto=auto,
            progress=progress,
            requested=summarizer or settings.summarizer,
            prepared=prepared,
        )
        if dry_run and prepared is not None and result.summary is not None and result.summarizer is not None:
            result = await self._keep_preview(prepared, result)
        return result

    async def _keep_preview(self, prepared: Prepared, result: CompactResult) -> CompactResult:
        """Keep a dry run's summary for `apply`, and say what view it would leave."""
        assert result.summary is not None and result.summarizer is not None
        planned = fingerprint(prepared.session)
        token = preview_token("compact", planned, result.summary)
        preview = Preview(
            token=token,
            kind="compact",
            fingerprint=planned,
            summary=result.summary,
            summarizer=result.summarizer,
            pinned=result.pinned,
        )
        async with self._scope.store.write(prepared.session.id) as tx:
            metadata = tx.session.metadata.model_copy(update={"preview": preview})
            await tx.save_session(tx.session.model_copy(update={"metadata": metadata}))
        return result.model_copy(update={"token": token, "view": outline(prepared.plan)})

    async def _apply(self, session_id: str, token: str, progress: Progress | None) -> CompactResult:
        """Write the summary preview `token` holds, unchanged, if the session still stands where it was."""
        compactor = self._scope.compactor
        session = await self._scope.store.get_session(session_id)
        preview = take_preview(session, token, "compact")
        assert preview.summary is not None and preview.summarizer is not None
        prepared = await compactor.prepare(session_id)
        take_preview(prepared.session, token, "compact")  # nothing moved while planning
        given = Given(preview.summary, preview.summarizer, preview.pinned)
        record, text = await compactor.compact(
            session_id, summarizers=[], given=given, prepared=prepared, progress=progress
        )
        status = await self._scope.status(await self._scope.store.get_session(session_id))
        return result_of(record, status, compacted=True, reason=f"applied preview {token}")

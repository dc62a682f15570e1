"""Sessions: open (or reopen and change), list and delete; totals across a tenant's sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextfold import safejson
from contextfold.config import Settings, check_session_overrides
from contextfold.domain import Session, SessionState, SystemPrompt, new_id
from contextfold.errors import InvalidInput
from contextfold.formats.base import SystemArg
from contextfold.policy import view
from contextfold.results import Brief, Deleted, SessionInfo, SessionList
from contextfold.service.runtime import system_prompts
from contextfold.store import SessionTransaction
from contextfold.tokens.counting import TokenCounter, count_message, count_system

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Sessions:
    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def open_session(
        self,
        session_id: str | None = None,
        *,
        model: str | None = None,
        title: str | None = None,
        settings: dict[str, Any] | None = None,
        system: SystemArg | None = None,
        origin: str | None = None,
    ) -> Brief:
        """Create a session, or reopen one by id (changing its model, title or settings if given).
        `origin`: what makes a new session when no client named it (`SessionState.origin`)."""
        # Library callers get what the MCP layer gives tool calls: no lone surrogates reach SQLite.
        session_id, model, title, settings, system = safejson.clean(
            [session_id, model, title, settings, system], "session_open"
        )
        if settings:
            check_session_overrides(settings)
            self._scope.settings.for_session(settings)  # validate values now, not at first use
        prompts = system_prompts(system) if system is not None else None
        fresh = Session(
            id=session_id or new_id("ses"),
            model=model or self._scope.settings.default_model,
            title=title,
            settings=settings or {},
            metadata=SessionState(origin=origin),
        )
        async with self._scope.store.write(fresh.id, create=fresh) as tx:
            session = tx.session
            changes: dict[str, Any] = {}
            if title is not None and title != session.title:
                changes["title"] = title
            if settings:
                changes["settings"] = {**session.settings, **settings}
            if changes:
                session = session.model_copy(update=changes)
            effective = self._scope.settings.for_session(session.settings)
            if model is not None and model != session.model:
                session = await self._recount(tx, session.model_copy(update={"model": model}), effective)
            if prompts is not None:
                session = with_system(session, prompts, self._scope.counter(session.model, effective))
            if session != tx.session:
                await tx.save_session(session)
                session = tx.session
        return Brief.of(await self._scope.status(session))

    async def _recount(self, tx: SessionTransaction, session: Session, settings: Settings) -> Session:
        """Count every stored message again for a new model: the tokenizer may have changed."""
        counter = self._scope.counter(session.model, settings)
        recounted = [count_message(m, counter) for m in await tx.messages(hidden=True)]
        await tx.replace_counts(recounted)
        system = sum(p.tokens for p in count_system(session.system, counter))
        visible = await view.visible(tx.messages, session.view)
        by_id = {m.id: m for m in recounted}
        return session.model_copy(
            update={
                "system": count_system(session.system, counter),
                "tokens_stored": system + sum(m.tokens for m in recounted),
                "tokens_in_view": system + sum(by_id[m.id].in_view_tokens for m in visible),
            }
        )

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None) -> SessionList:
        if not 1 <= limit <= 500:
            raise InvalidInput("limit", f"expected 1–500, got {limit}")
        try:
            page = await self._scope.store.list_sessions(limit=limit, cursor=cursor)
        except ValueError as exc:
            raise InvalidInput("cursor", str(exc)) from exc
        return SessionList(
            sessions=[
                SessionInfo(
                    id=s.id,
                    title=s.title,
                    model=s.model,
                    message_count=s.message_count,
                    tokens_in_view=s.tokens_in_view,
                    updated_at=s.updated_at,
                )
                for s in page.sessions
            ],
            next_cursor=page.next_cursor,
        )

    async def delete_session(self, session_id: str) -> Deleted:
        await self._scope.store.get_session(session_id)  # not found → error before anything is touched
        digests = await self._scope.outputs.session_digests(session_id, self._scope.owner)
        await self._scope.store.delete_session(session_id)  # its output records go with it (cascade)
        await self._scope.outputs.delete_unreferenced(digests)
        return Deleted(session_id=session_id, deleted=True)

    async def totals(self) -> dict[str, int]:
        """Across all of an owner's sessions: how many, and what compaction and pruning freed."""
        sessions = (await self._scope.store.list_sessions(limit=10_000)).sessions
        compactions = freed = prunes = pruned = 0
        for session in sessions:
            count, tokens = await self._scope.store.compaction_totals(session.id)
            compactions, freed = compactions + count, freed + tokens
            prunes += session.metadata.prunes.count
            pruned += session.metadata.prunes.tokens_freed
        return {
            "sessions": len(sessions),
            "messages": sum(s.message_count for s in sessions),
            "tokens_in_view": sum(s.tokens_in_view for s in sessions),
            "compactions": compactions,
            "compaction_tokens_freed": freed,
            "prunes": prunes,
            "prune_tokens_freed": pruned,
        }


def with_system(session: Session, prompts: list[SystemPrompt], counter: TokenCounter) -> Session:
    """`session` with new system prompts, counted, its totals moved by the difference."""
    counted = count_system(prompts, counter)
    delta = sum(p.tokens for p in counted) - sum(p.tokens for p in session.system)
    return session.model_copy(
        update={
            "system": counted,
            "tokens_stored": session.tokens_stored + delta,
            "tokens_in_view": session.tokens_in_view + delta,
        }
    )

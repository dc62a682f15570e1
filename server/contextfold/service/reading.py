"""Reading a session: the model-ready context, its status, the tail that fits, its summary."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from contextfold import formats
from contextfold.domain import Message, MessageRow, Session
from contextfold.errors import InvalidInput, NotFoundError
from contextfold.formats import RenderOptions
from contextfold.policy import view
from contextfold.policy.cache import place_cache_anchors
from contextfold.policy.turns import select_tail, tail_budget
from contextfold.results import Context, Status, TailResult
from contextfold.service.runtime import parse_cursor

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Reading:
    """Read one tenant's sessions; nothing here writes."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def _load_page(self, session: Session, rows: list[MessageRow]) -> list[Message]:
        if not rows:
            return []
        first, last = min(r.seq for r in rows), max(r.seq for r in rows)
        loaded = {
            m.id: m
            for m in await self._scope.store.load_messages(session.id, after_seq=first - 1, limit=last - first + 1)
        }
        return [loaded[r.id] for r in rows if r.id in loaded]  # a compaction in between may hide some

    async def get_context(
        self,
        session_id: str,
        *,
        format: Literal["anthropic", "openai"] = "openai",
        limit: int | None = None,
        cursor: str | None = None,
        strip_media: bool = False,
        cache_anchors: bool = False,
        since: str | None = None,
    ) -> Context:
        session = await self._scope.store.get_session(session_id)
        if cache_anchors and format != "anthropic":
            raise InvalidInput("cache_anchors", "cache_control breakpoints exist only in the anthropic format")
        if since is not None and (limit is not None or cursor is not None):
            raise InvalidInput("since", "a version names the whole view; leave out limit and cursor")
        start = parse_cursor(cursor)
        if limit is not None and limit < 1:
            raise InvalidInput("limit", f"expected a positive number of messages, got {limit}")
        if limit is None:
            visible: list[Any] = await self._scope.view(session)
            page = visible[start:]
        else:
            # A page loads only its own messages: the view is worked out on the light rows.
            visible = view.in_view(
                await self._scope.store.rows(session.id, after_seq=view.load_from(session.view)),
                session.view,
            )
            page = await self._load_page(session, visible[start : start + limit])
        system = session.system if start == 0 else []
        options = RenderOptions(strip_media=strip_media)
        # The whole view renders from the renderings kept beside it: only new messages render.
        memo = await self._scope.rendered(session, (format, options)) if limit is None else None
        body = formats.render(system, page, format, options, memo)
        if cache_anchors:
            body = self._with_cache_anchors(body, session)
        end = start + len(page)
        messages, version, resumed = body["messages"], None, 0
        if limit is None and start == 0:  # the whole view has a version; a caller may hold part of it
            chain = await self._scope.chain(session, (format, options, cache_anchors))
            chain.update(format, body.get("system"), messages)
            version = chain.version
            if since is not None:
                resumed = chain.resume_at(since)
                messages = messages[resumed:]
        # Built from what this module rendered: validating thousands of rendered messages again
        # would cost more than loading them from the cache did.
        return Context.model_construct(
            format=format,
            system=body.get("system"),
            messages=messages,
            tokens=sum(m.in_view_tokens for m in page) + sum(p.tokens for p in system),
            next_cursor=str(end) if end < len(visible) else None,
            version=version,
        )

    def _with_cache_anchors(self, body: dict[str, Any], session: Session) -> dict[str, Any]:
        # Rendered messages can merge domain messages, so each is counted as sent; this runs only
        # when anchors are asked for.
        counter = self._scope.counter(session.model, self._scope.settings_for(session))
        counts = [counter.count(json.dumps(m["content"], ensure_ascii=False)) for m in body["messages"]]
        marked, _anchors = place_cache_anchors(
            body, token_counts=counts, system_tokens=sum(p.tokens for p in session.system)
        )
        return marked

    async def session_view(self, session_id: str) -> tuple[Session, list[Message]]:
        """The session and the messages its model sees now, in order, as stored (read-only)."""
        session = await self._scope.store.get_session(session_id)
        return session, await self._scope.view(session)

    async def session_history(self, session_id: str) -> list[Message]:
        """Every stored message of the session in order, those out of view included (read-only)."""
        session = await self._scope.store.get_session(session_id)
        return await self._scope.store.load_messages(session.id, hidden=True)

    async def status(self, session_id: str) -> Status:
        return await self._scope.status(await self._scope.store.get_session(session_id))

    async def select_tail(
        self, session_id: str, *, budget: int | None = None, tail_turns: int | None = None
    ) -> TailResult:
        """Which recent messages fit the tail budget (read-only; compaction summarizes the rest)."""
        session = await self._scope.store.get_session(session_id)
        settings = self._scope.settings_for(session)
        stored = await self._scope.store.rows(session.id, after_seq=view.load_from(session.view))
        rows = view.in_view(stored, session.view)
        if budget is None:
            budget = tail_budget(self._scope.budget(session, settings).usable, settings.preserve_recent_tokens)
        if budget < 0:
            raise InvalidInput("budget", f"expected a non-negative number of tokens, got {budget}")
        selection = select_tail(rows, budget=budget, tail_turns=tail_turns or settings.tail_turns)
        head = (
            len(rows)
            if selection.tail_start_id is None
            else next(i for i, r in enumerate(rows) if r.id == selection.tail_start_id)
        )
        return TailResult(
            tail_start_id=selection.tail_start_id,
            head_messages=head,
            tail_messages=len(rows) - head,
            head_tokens=selection.head_tokens,
            tail_tokens=selection.tail_tokens,
            budget=budget,
            split=selection.split,
        )

    async def summary_text(self, session_id: str) -> str:
        """The session's current summary (the anchor of the view)."""
        session = await self._scope.store.get_session(session_id)
        if session.view is None or session.view.summary_seq == 0:  # 0: only ranges were compacted
            raise NotFoundError("summary", session_id, "the session has not been compacted yet")
        messages = await self._scope.store.load_messages(session.id, after_seq=session.view.summary_seq - 1, limit=1)
        return messages[0].text

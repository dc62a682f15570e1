"""Appending messages: tool results complete stored calls, big outputs spill before the write
transaction, and the whole batch lands in one transaction or not at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from contextfold import safejson
from contextfold.domain import Message, Session, ToolResult, Usage, complete_tool_part
from contextfold.errors import FormatError, InvalidInput, NotFoundError
from contextfold.formats import ParsedBatch
from contextfold.formats.base import SystemArg, UsageArg, WireMessage
from contextfold.formats.usage import parse_usage
from contextfold.results import AppendedMessage, AppendResult
from contextfold.service.ingest import Ingest, Prespill, big_texts
from contextfold.service.runtime import FormatArg, system_prompts, title_from
from contextfold.service.sessions import with_system
from contextfold.store import SessionTransaction
from contextfold.tokens.counting import TokenCounter, count_message, count_part

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Appending:
    """Append messages to one tenant's sessions."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def append(
        self,
        session_id: str,
        messages: Sequence[WireMessage],
        *,
        format: FormatArg = "auto",
        usage: UsageArg | None = None,
        system: SystemArg | None = None,
    ) -> AppendResult:
        """Add messages (and tool results for earlier calls) to a session in one transaction."""
        # Measuring and parsing megabytes is CPU work: a worker thread keeps other clients served.
        batch, size = await asyncio.to_thread(self._scope.batch, messages, format)
        return await self._append(session_id, batch, size, usage=usage, system=system, raw=messages)

    async def _append(
        self,
        session_id: str,
        batch: ParsedBatch,
        size: int,
        *,
        usage: Any = None,
        system: Any = None,
        create: Session | None = None,
        raw: Any = None,
    ) -> AppendResult:
        """`raw`: the messages as the caller sent them, checked again against the session's own
        request limits when it set lower ones than the server's."""
        try:
            reported = parse_usage(safejson.clean(usage, "usage")) if usage is not None else None
        except FormatError as exc:
            raise InvalidInput(exc.path, exc.problem) from exc
        prompts = system_prompts(safejson.clean(system, "system")) if system is not None else batch.system
        await self._scope.make_room(size)
        prespill = self._prespill(session_id, batch, create=create)
        async with prespill as prepared, self._scope.store.write(session_id, create=create) as tx:
            session = tx.session
            settings = self._scope.settings_for(session)
            if raw is not None and settings is not self._scope.settings:
                self._scope.check_session_limits(raw, settings)
            counter = self._scope.counter(session.model, settings)
            ingest = Ingest(
                tx,
                self._scope.outputs,
                settings,
                context_window=self._scope.budget(session, settings).context,
                owner=self._scope.owner,
                prepared=prepared,
            )
            attached, delta = await self.attach_results(tx, batch.results, counter, ingest)
            new = [count_message(await ingest.message(m), counter) for m in batch.messages]
            if reported is not None:
                new = self._with_usage(new, reported)
            stored = await tx.insert_messages(new)
            added = sum(m.tokens for m in stored) + delta
            session = session.model_copy(
                update={
                    "message_count": session.message_count + len(stored),
                    "tokens_stored": session.tokens_stored + added,
                    "tokens_in_view": session.tokens_in_view + added,
                    "title": session.title or title_from(stored),
                }
            )
            if prompts is not None:
                session = with_system(session, prompts, counter)
            if reported is not None:
                last = next(m for m in reversed(stored) if m.role == "assistant")
                session = session.model_copy(
                    update={
                        "last_usage": reported,
                        "last_usage_message_id": last.id,
                        "usage_baseline": session.tokens_in_view,
                    }
                )
            await tx.save_session(session)
        return AppendResult(
            messages=[AppendedMessage(id=m.id, role=m.role, tokens=m.tokens) for m in stored],
            results_attached=attached,
            spilled=ingest.spilled,
            system_updated=prompts is not None,
            status=await self._scope.standing.brief(tx.session),
        )

    @asynccontextmanager
    async def _prespill(
        self, session_id: str, batch: ParsedBatch, *, create: Session | None
    ) -> AsyncIterator[Prespill | None]:
        """Cut the batch's big texts and store their blobs before the write transaction, from the
        session as it is now (`ingest.Prespill`); once the transaction is over, remove the blobs
        no output recorded. Enter it before the transaction and leave it after."""
        texts = big_texts(batch.messages, batch.results)
        session = create
        if texts:
            try:
                session = await self._scope.store.get_session(session_id)
            except NotFoundError:
                pass  # created by the transaction (from `create`), or not found there either
        if not texts or session is None:
            yield None
            return
        settings = self._scope.settings_for(session)
        context_window = self._scope.budget(session, settings).context
        prepared = await Prespill.of(self._scope.outputs, session, settings, context_window=context_window, texts=texts)
        committed = False
        try:
            yield prepared
            committed = True
        finally:
            await prepared.release(self._scope.outputs, committed=committed)

    @staticmethod
    def _with_usage(messages: list[Message], reported: Usage) -> list[Message]:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].role == "assistant":
                messages[i] = messages[i].model_copy(update={"usage": reported})
                return messages
        raise InvalidInput("usage", "reported usage belongs to an assistant message, and this batch has none")

    async def attach_results(
        self, tx: SessionTransaction, results: Sequence[ToolResult], counter: TokenCounter, ingest: Ingest
    ) -> tuple[int, int]:
        """Complete stored calls with their results; returns (how many, token delta)."""
        if not results:
            return 0, 0
        open_calls = await tx.open_calls([r.call_id for r in results])
        delta = 0
        for result in results:
            stored = open_calls.pop(result.call_id, None)
            if stored is None:
                raise InvalidInput(
                    f"{result.source}.call_id" if result.source else "tool_call_id",
                    f"no tool call with id {result.call_id!r} is waiting for a result in this session; "
                    "append the assistant message that made the call first (or in the same batch)",
                )
            part = await ingest.tool(complete_tool_part(stored.part, result))
            part.tokens = count_part(part, counter)
            await tx.update_part(stored, part)
            delta += part.tokens - stored.part.tokens
        return len(results), delta

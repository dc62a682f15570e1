"""The facade the MCP server and the CLI call: one tenant's view of every capability.

The capabilities live in `contextfold.app`, one module each (sessions, appending, reading and
status, pruning, spilled outputs, compaction), over one tenant-scoped store: a `Tenant` is what a
request may do as its owner, and nothing it calls takes an owner argument. `ContextService` is the
process-wide service — it opens the store, counts tokens, writes stateless summaries and collects
spilled outputs — and, for callers on this machine (the CLI, a library user), it is itself the
local tenant (owner `""`). The MCP server asks it for `tenant(owner)` per request over HTTP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from contextfold.tokens import catalog
from contextfold.service.appending import Appending
from contextfold.service.compacting import Compacting
from contextfold.service.history import History
from contextfold.service.pruning import Pruning
from contextfold.service.reading import Reading
from contextfold.service.runtime import FormatArg, Runtime, Scope
from contextfold.service.sessions import Sessions, with_system
from contextfold.service.spilling import PreviewLimits, Spilling
from contextfold.compaction.summarizers.anthropic import default_max_tokens
from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.chain import Sampled, SummarizerChoice, build_chain, run_chain
from contextfold.compaction.chain import wants_sampling as chain_wants_sampling
from contextfold.compaction.engine import summary_budget
from contextfold.compaction.pins import pin_facts
from contextfold.compaction.prompt import build_prompt
from contextfold.compaction.transcript import render_transcript
from contextfold.service.backends import open_backends
from contextfold.service.compactor import Compactor, Progress
from contextfold.config import Settings, load_settings
from contextfold.domain import Message, Session
from contextfold.errors import USER_ERRORS, CompactionFailed, ContextfoldError, InvalidInput, LimitExceeded
from contextfold.service.outputs import Outputs
from contextfold.blobs.base import BlobStore
from contextfold.results import (
    AppendResult,
    Brief,
    CompactResult,
    Context,
    Deleted,
    GcResult,
    HistoryPage,
    ImportResult,
    OutputRead,
    PruneResult,
    SessionList,
    SpillResult,
    Status,
    SummarizeResult,
    TailResult,
    TokenCount,
)
from contextfold.store import Store, TenantStore
from contextfold.tokens.counting import TOOL_OVERHEAD, TokenCounter, count_message, count_system

LOCAL_OWNER = ""
"""The tenant of callers on this machine (stdio, the CLI, a library user)."""


class Tenant:
    """Everything one tenant may do: each method is one capability's, scoped to `owner`."""

    def __init__(self, runtime: Runtime, owner: str) -> None:
        self._runtime = runtime
        self._scope = Scope(runtime, runtime.store.tenant(owner))
        self._sessions = Sessions(self._scope)
        self._appending = Appending(self._scope)
        self._reading = Reading(self._scope)
        self._pruning = Pruning(self._scope)
        self._spilling = Spilling(self._scope)
        self._compacting = Compacting(self._scope)
        self._history = History(self._scope)

    @property
    def owner(self) -> str:
        return self._scope.owner

    @property
    def settings(self) -> Settings:
        return self._runtime.settings

    @property
    def store(self) -> TenantStore:
        """This tenant's store."""
        return self._scope.store

    @property
    def compactor(self) -> Compactor:
        return self._scope.compactor

    # -- sessions --------------------------------------------------------------------------------

    async def open_session(
        self,
        session_id: str | None = None,
        *,
        model: str | None = None,
        title: str | None = None,
        settings: dict[str, Any] | None = None,
        system: Any = None,
    ) -> Brief:
        """Create a session, or reopen one by id (changing its model, title or settings if given)."""
        return await self._sessions.open_session(session_id, model=model, title=title, settings=settings, system=system)

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None) -> SessionList:
        return await self._sessions.list_sessions(limit=limit, cursor=cursor)

    async def delete_session(self, session_id: str) -> Deleted:
        return await self._sessions.delete_session(session_id)

    async def totals(self) -> dict[str, int]:
        return await self._sessions.totals()

    # -- messages and the view -------------------------------------------------------------------

    async def append(
        self, session_id: str, messages: Any, *, format: FormatArg = "auto", usage: Any = None, system: Any = None
    ) -> AppendResult:
        """Add messages (and tool results for earlier calls) to a session in one transaction."""
        return await self._appending.append(session_id, messages, format=format, usage=usage, system=system)

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
        return await self._reading.get_context(
            session_id,
            format=format,
            limit=limit,
            cursor=cursor,
            strip_media=strip_media,
            cache_anchors=cache_anchors,
            since=since,
        )

    async def status(self, session_id: str) -> Status:
        return await self._reading.status(session_id)

    async def search_history(
        self,
        session_id: str,
        *,
        pattern: str | None = None,
        at: str | None = None,
        limit: int = 20,
        ignore_case: bool = False,
    ) -> HistoryPage:
        """Search the session's stored messages, hidden ones included, or read them from `at`."""
        return await self._history.search(session_id, pattern=pattern, at=at, limit=limit, ignore_case=ignore_case)

    async def session_view(self, session_id: str) -> tuple[Session, list[Message]]:
        return await self._reading.session_view(session_id)

    async def session_history(self, session_id: str) -> list[Message]:
        return await self._reading.session_history(session_id)

    async def select_tail(
        self, session_id: str, *, budget: int | None = None, tail_turns: int | None = None
    ) -> TailResult:
        return await self._reading.select_tail(session_id, budget=budget, tail_turns=tail_turns)

    async def summary_text(self, session_id: str) -> str:
        return await self._reading.summary_text(session_id)

    # -- prune and compaction --------------------------------------------------------------------

    async def prune(
        self,
        session_id: str,
        *,
        dry_run: bool = False,
        keep_tool_uses: int | None = None,
        clear_at_least: int | None = None,
        exclude_tools: Any = (),
        clear_inputs: bool = False,
    ) -> PruneResult:
        return await self._pruning.prune(
            session_id,
            dry_run=dry_run,
            keep_tool_uses=keep_tool_uses,
            clear_at_least=clear_at_least,
            exclude_tools=exclude_tools,
            clear_inputs=clear_inputs,
        )

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
    ) -> CompactResult:
        return await self._compacting.compact(
            session_id,
            strategy=strategy,
            summarizer=summarizer,
            instructions=instructions,
            dry_run=dry_run,
            auto=auto,
            sampled=sampled,
            sampling_offered=sampling_offered,
            progress=progress,
        )

    async def sampling_prompt(
        self,
        session_id: str,
        *,
        summarizer: str | None = None,
        instructions: str | None = None,
        strategy: str = "anchored",
    ) -> tuple[str, str, int] | None:
        return await self._compacting.sampling_prompt(
            session_id, summarizer=summarizer, instructions=instructions, strategy=strategy
        )

    # -- spilled outputs -------------------------------------------------------------------------

    async def spill(
        self,
        session_id: str,
        text: str,
        *,
        tool: str | None = None,
        call_id: str | None = None,
        preview: PreviewLimits | None = None,
    ) -> SpillResult:
        return await self._spilling.spill(session_id, text, tool=tool, call_id=call_id, preview=preview)

    async def read_output(
        self,
        output_id: str,
        *,
        offset: int = 1,
        limit: int = 200,
        pattern: str | None = None,
        context: int = 0,
        ignore_case: bool = False,
        max_matches: int = 50,
    ) -> OutputRead:
        return await self._spilling.read_output(
            output_id,
            offset=offset,
            limit=limit,
            pattern=pattern,
            context=context,
            ignore_case=ignore_case,
            max_matches=max_matches,
        )

    async def output_text(self, output_id: str) -> str:
        return await self._spilling.output_text(output_id)

    # -- import ----------------------------------------------------------------------------------

    async def import_transcript(
        self, path: Path, *, session_id: str | None = None, format: str | None = None, model: str | None = None
    ) -> ImportResult:
        """Read a transcript file into a session (created if needed) in one transaction.

        The agent's own compactions are replayed and its last reported usage calibrates the count
        (see `importing`). Importing a file into a session again reads only what it appended since.
        """
        from contextfold.service.importing import ImportTools, import_file

        runtime = self._runtime
        tools = ImportTools(
            store=self._scope.store,
            outputs=runtime.outputs,
            default_model=runtime.settings.default_model,
            settings_for=runtime.settings_for,
            counter_for=runtime.counter,
            context_for=lambda session, settings: runtime.budget(session, settings).context,
            make_room=runtime.make_room,
            attach_results=self._appending.attach_results,
            with_system=with_system,
            status=self._scope.status,
        )
        return await import_file(
            tools, Path(path), session_id=session_id, format=format, model=model, owner=self.owner
        )


class ContextService(Tenant):
    """The process-wide service, and the local tenant for callers on this machine."""

    def __init__(self, settings: Settings, store: Store, files: BlobStore) -> None:
        outputs = Outputs(
            store, files, retention_days=settings.spill_retention_days, quota_bytes=settings.spill_quota_bytes
        )
        super().__init__(Runtime(settings, store, outputs), LOCAL_OWNER)

    @classmethod
    async def open(cls, settings: Settings | None = None) -> ContextService:
        settings = settings or load_settings()
        store, blobs = await open_backends(settings)
        return cls(settings, store, blobs)

    async def close(self) -> None:
        await self._runtime.store.close()
        close_files = getattr(self._runtime.outputs.files, "close", None)
        if close_files is not None:  # a blob store holding connections (PostgreSQL)
            await asyncio.to_thread(close_files)

    async def __aenter__(self) -> ContextService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def tenant(self, owner: str) -> Tenant:
        """What `owner` may do: its own sessions and outputs, and nothing of anyone else's."""
        return self if owner == self.owner else Tenant(self._runtime, owner)

    @property
    def backend(self) -> Store:
        """The store across tenants (upkeep: gc, sizes, totals for the CLI)."""
        return self._runtime.store

    @property
    def outputs(self) -> Outputs:
        return self._runtime.outputs

    async def gc(self, *, dry_run: bool = False) -> GcResult:
        return await self._runtime.outputs.gc(dry_run=dry_run)

    # -- stateless -------------------------------------------------------------------------------

    def count_tokens(
        self,
        *,
        text: str | None = None,
        messages: Any = None,
        model: str | None = None,
        format: FormatArg = "auto",
    ) -> TokenCount:
        if (text is None) == (messages is None):
            raise InvalidInput("text", "pass exactly one of text or messages")
        model = model or self._runtime.settings.default_model
        counter = self._runtime.counter(model, self._runtime.settings)
        if text is not None:
            tokens = counter.count(text)
        else:
            batch, _ = self._runtime.batch(messages, format, limits=False)
            tokens = sum(count_message(m, counter).tokens for m in batch.messages)
            tokens += sum(p.tokens for p in count_system(batch.system or [], counter))
            tokens += sum(TOOL_OVERHEAD + counter.count(r.output) for r in batch.results)
        return TokenCount(
            tokens=tokens,
            model=model,
            method=counter.method,
            encoding=counter.encoding,
            factor=counter.factor,
        )

    def wants_sampling(self, choice: str | None, settings: Settings | None = None) -> bool:
        """Whether a stateless summary with `choice` would use the client's model."""
        return chain_wants_sampling(choice, settings or self._runtime.settings)

    async def summarize(
        self,
        messages: Any,
        *,
        previous_summary: str | None = None,
        format: FormatArg = "auto",
        summarizer: SummarizerChoice | None = None,
        instructions: str | None = None,
        model: str | None = None,
        sampled: Sampled | None = None,
    ) -> SummarizeResult:
        """A stateless anchored summary of `messages` (nothing is stored)."""
        head, counter, budget = self._summarize_input(messages, previous_summary, format, model)
        request = SummaryRequest(
            head=head, previous=previous_summary, counter=counter, budget_tokens=budget, instructions=instructions
        )
        chain = build_chain(summarizer or self._runtime.settings.summarizer, self._runtime.settings, sampled)
        outcome, text, fallbacks = await run_chain(
            chain, request, lambda outcome: pin_facts(outcome.text, head, previous=previous_summary)[0]
        )
        return SummarizeResult(
            summary=text, summarizer=outcome.summarizer, fallbacks=fallbacks, tokens=counter.count(text)
        )

    def summarize_prompt(self, messages: Any, *, previous_summary: str | None = None) -> tuple[str, str, int]:
        """(system, user, max_tokens) for asking the client's model to summarize `messages`."""
        head, _counter, budget = self._summarize_input(messages, previous_summary, "auto", None)
        system, user = build_prompt(
            render_transcript(head), previous=previous_summary, instructions=None, budget_tokens=budget
        )
        return system, user, default_max_tokens(budget)

    def _summarize_input(
        self, messages: Any, previous_summary: str | None, format: FormatArg, model: str | None
    ) -> tuple[list[Message], TokenCounter, int]:
        batch, _ = self._runtime.batch(messages, format)
        model = model or self._runtime.settings.default_model
        counter = self._runtime.counter(model, self._runtime.settings)
        head = [count_message(m, counter) for m in batch.messages]
        replaced = sum(m.tokens for m in head) + (counter.count(previous_summary) if previous_summary else 0)
        usable = catalog.budget(catalog.lookup(model)).usable
        return head, counter, summary_budget(usable, replaced)


__all__ = [
    "LOCAL_OWNER",
    "USER_ERRORS",
    "CompactionFailed",
    "ContextService",
    "ContextfoldError",
    "InvalidInput",
    "LimitExceeded",
    "Tenant",
]

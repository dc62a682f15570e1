"""What the MCP server, the CLI, the hooks and a library caller call: the service and its tenants.

The capabilities live beside this module, one each (sessions, appending, reading and status,
pruning, spilled outputs, compaction, history), over one tenant-scoped store: a `Tenant` is all of
them for one owner, and nothing it calls takes an owner argument. `ContextService` is the
process-wide service — it opens the store, counts tokens, writes stateless summaries and collects
spilled outputs — and, for callers on this machine (the CLI, a library user), it is itself the
local tenant (owner `""`). The MCP server asks it for `tenant(owner)` per request over HTTP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextfold.blobs.base import BlobStore
from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.chain import Sampled, SummarizerChoice, build_chain, run_chain
from contextfold.compaction.chain import wants_sampling as chain_wants_sampling
from contextfold.compaction.engine import summary_budget
from contextfold.compaction.pins import pin_facts
from contextfold.compaction.prompt import build_prompt
from contextfold.compaction.secrets import redact_history
from contextfold.compaction.summarizers.anthropic import default_max_tokens
from contextfold.compaction.transcript import render_transcript
from contextfold.config import Settings, load_settings
from contextfold.domain import Message
from contextfold.errors import USER_ERRORS, CompactionFailed, ContextfoldError, InvalidInput, LimitExceeded
from contextfold.formats.base import WireMessage
from contextfold.names import LOCAL_OWNER
from contextfold.results import (
    GcResult,
    ImportResult,
    SummarizeResult,
    TokenCount,
)
from contextfold.service.anchored import Compactor
from contextfold.service.appending import Appending
from contextfold.service.backends import open_backends
from contextfold.service.compacting import Compacting
from contextfold.service.handoff import Handoffs
from contextfold.service.history import History
from contextfold.service.inspecting import Inspecting
from contextfold.service.outputs import Outputs
from contextfold.service.pruning import Pruning
from contextfold.service.ranges import Ranges
from contextfold.service.reading import Reading
from contextfold.service.runtime import FormatArg, Runtime, Scope
from contextfold.service.search import Recall
from contextfold.service.sessions import Sessions, with_system
from contextfold.service.spilling import Spilling
from contextfold.service.steering import Steering
from contextfold.store import Store, TenantStore
from contextfold.tokens import catalog
from contextfold.tokens.counting import (
    TOOL_OVERHEAD,
    TokenCounter,
    check_count_size,
    count_message,
    count_system,
    count_text,
)


class Tenant(
    Sessions,
    Appending,
    Reading,
    Pruning,
    Spilling,
    Compacting,
    History,
    Steering,
    Ranges,
    Handoffs,
    Inspecting,
    Recall,
):
    """Everything one tenant may do, scoped to `owner`.

    Each capability is one class over the tenant's `Scope` (`service/sessions.py`,
    `appending.py`, `reading.py`, `pruning.py`, `spilling.py`, `compacting.py`, `history.py`,
    `steering.py`, `ranges.py`, `handoff.py`);
    a tenant is all of them at once, so each method and its parameters are declared once, in
    its capability, and nothing here forwards.
    """

    def __init__(self, runtime: Runtime, owner: str) -> None:
        self._runtime = runtime
        self._scope = Scope(runtime, runtime.store.tenant(owner))

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
    def scope(self) -> Scope:
        """The tenant's scope: per-session settings, counters, budgets and the cached view."""
        return self._scope

    @property
    def compactor(self) -> Compactor:
        return self._scope.compactor

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
            attach_results=self.attach_results,
            with_system=with_system,
            status=self._scope.status,
        )
        return await import_file(tools, Path(path), session_id=session_id, format=format, model=model, owner=self.owner)


class ContextService(Tenant):
    """The process-wide service, and the local tenant for callers on this machine."""

    def __init__(self, settings: Settings, store: Store, files: BlobStore) -> None:
        outputs = Outputs(
            store,
            files,
            retention_days=settings.spill_retention_days,
            quota_bytes=settings.spill_quota_bytes,
            eviction_grace=settings.spill_eviction_grace_seconds,
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
        """Expire sessions past their retention (`retention`), then spilled outputs and files."""
        from contextfold.service.retention import expire_sessions

        runtime = self._runtime
        now = time.time()
        expired = await expire_sessions(runtime.store, runtime.outputs, runtime.settings, dry_run=dry_run, now=now)
        result = await runtime.outputs.gc(dry_run=dry_run, now=now)
        return result.model_copy(
            update={
                "sessions_removed": expired.removed,
                "sessions": expired.listed,
                "files_removed": result.files_removed + expired.files,
                "bytes_freed": result.bytes_freed + expired.bytes,
            }
        )

    # -- stateless -------------------------------------------------------------------------------

    def count_tokens(
        self,
        *,
        text: str | None = None,
        messages: Sequence[WireMessage] | None = None,
        model: str | None = None,
        format: FormatArg = "auto",
    ) -> TokenCount:
        if (text is None) == (messages is None):
            raise InvalidInput("text", "pass exactly one of text or messages")
        settings = self._runtime.settings
        if text is not None:
            return count_text(text, model, settings)
        check_count_size("messages", messages, settings.max_count_bytes)
        model = model or settings.default_model
        counter = self._runtime.counter(model, settings)
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
        messages: Sequence[WireMessage],
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
        # What a summary is written from, its secrets redacted (the caller's messages are not changed).
        head, redactor = redact_history(head, previous_summary)
        previous = redactor.text(previous_summary) if previous_summary is not None else None
        request = SummaryRequest(
            head=head, previous=previous, counter=counter, budget_tokens=budget, instructions=instructions
        )
        chain = build_chain(summarizer or self._runtime.settings.summarizer, self._runtime.settings, sampled)
        outcome, text, fallbacks = await run_chain(
            chain, request, lambda outcome: redactor.text(pin_facts(outcome.text, head, previous=previous)[0])
        )
        return SummarizeResult(
            summary=text, summarizer=outcome.summarizer, fallbacks=fallbacks, tokens=counter.count(text)
        )

    def summarize_prompt(
        self, messages: Sequence[WireMessage], *, previous_summary: str | None = None
    ) -> tuple[str, str, int]:
        """(system, user, max_tokens) for asking the client's model to summarize `messages`."""
        head, _counter, budget = self._summarize_input(messages, previous_summary, "auto", None)
        head, redactor = redact_history(head, previous_summary)
        previous = redactor.text(previous_summary) if previous_summary is not None else None
        system, user = build_prompt(render_transcript(head), previous=previous, instructions=None, budget_tokens=budget)
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
        return head, counter, summary_budget(usable, replaced, self._runtime.settings.summary_max_tokens)


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

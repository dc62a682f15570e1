"""The one facade that the MCP server and the CLI both call.

It composes the store (I/O) with the pure core (formats, tokens, policies). Requests flow one
way: arguments → validation → one store transaction → a result model. Every method that writes
does so in a single transaction, so a request that fails leaves the database as it was.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from . import catalog, formats, safejson
from .config import SESSION_LIMITS, Settings, check_session_overrides, load_settings
from .domain import (
    Message,
    MessageRow,
    Part,
    PruneTotals,
    Session,
    SystemPrompt,
    ToolPart,
    ToolResult,
    Usage,
    complete_tool_part,
    new_id,
)
from .formats import FormatError, ParsedBatch, RenderOptions
from .formats.usage import parse_usage
from .policy import view
from .policy.overflow import RECOMMENDATIONS, assess, calibrated_tokens, prune_falls_short
from .policy.cache import cache_health, place_cache_anchors
from .policy.prune import (
    PruneOptions,
    PrunePlan,
    plan_prune,
    prune_ceiling,
    prune_thresholds,
    remaining_counter,
    shown_counter,
)
from .policy.truncate import with_hint
from .policy.turns import select_tail, tail_budget
from .results import (
    AppendedMessage,
    AppendResult,
    Brief,
    CompactionMetrics,
    CompactionSummary,
    CompactResult,
    Context,
    Deleted,
    GcResult,
    ImportResult,
    OutputRead,
    PruneResult,
    SessionInfo,
    SessionList,
    SpillResult,
    Status,
    SummarizeResult,
    TailResult,
    TokenCount,
)
from .compaction.anthropic import default_max_tokens
from .compaction.base import Summarizer, SummaryRequest
from .compaction.engine import NothingToCompact, summary_budget
from .compaction.pins import pin_facts
from .compaction.prompt import build_prompt
from .compaction.transcript import render_transcript
from .compaction.chain import Sampled, SummarizerChoice, build_chain, run_chain
from .compaction.chain import wants_sampling as chain_wants_sampling
from .compactor import Compactor, Progress, SessionAccess
from .errors import USER_ERRORS, CompactionFailed, ContextfoldError, InvalidInput, LimitExceeded
from .ingest import Ingest, PreviewCaps
from .outputs import Outputs
from .spill import SpillFiles
from .store import NotFoundError, PartMark, SessionStore, SessionTransaction, SQLiteStore
from .strategies import REMOVAL_STRATEGIES, Strategies
from .tokens import (
    TOOL_OVERHEAD,
    TokenCounter,
    count_message,
    count_part,
    count_system,
    counter_for,
)

FormatArg = Literal["anthropic", "openai", "auto"]

TITLE_CHARS = 80



_JSON_SLICE = 1 << 20
"""Strings longer than this many characters are measured a slice at a time (see `_json_size`)."""


def _json_size(value: Any) -> int:
    """Bytes of `value` as JSON (UTF-8; a lone surrogate counts the 3 bytes it takes).

    JSON escapes every character on its own, so a long string measured slice by slice adds up
    exactly; measuring it that way in a worker thread hands the interpreter back to the event
    loop between slices, where one `json.dumps` of a 40 MB output would hold it for 150 ms.
    """
    long: list[str] = []
    _long_strings(value, long)
    if long:
        value = _without(value, {id(text) for text in long})
    total = len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    for text in long:  # each is "" in `value`: its quotes are counted there already
        for start in range(0, len(text), _JSON_SLICE):
            piece = json.dumps(text[start : start + _JSON_SLICE], ensure_ascii=False)
            total += len(piece.encode("utf-8", "surrogatepass")) - 2
    return total


def _long_strings(value: Any, found: list[str]) -> None:
    if isinstance(value, str):
        if len(value) > _JSON_SLICE:
            found.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _long_strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _long_strings(item, found)


def _without(value: Any, long: set[int]) -> Any:
    """`value` with the strings whose ids are in `long` replaced by ""."""
    if isinstance(value, str):
        return "" if id(value) in long else value
    if isinstance(value, dict):
        return {key: _without(item, long) for key, item in value.items()}
    if isinstance(value, list):
        return [_without(item, long) for item in value]
    return value


def _system_prompts(system: Any, path: str = "system") -> list[SystemPrompt]:
    """An Anthropic-style `system` (string or text blocks) or a list of `{role, text}` objects."""
    if isinstance(system, str):
        return [SystemPrompt(text=system)] if system else []
    if not isinstance(system, list):
        raise InvalidInput(path, f"expected a string or a list of text blocks, got {type(system).__name__}")
    prompts: list[SystemPrompt] = []
    for i, block in enumerate(system):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            role = block.get("role", "system")
            if role not in ("system", "developer"):
                raise InvalidInput(f"{path}[{i}].role", f"expected 'system' or 'developer', got {role!r}")
            prompts.append(SystemPrompt(role=role, text=block["text"]))
        else:
            raise InvalidInput(f"{path}[{i}]", "expected a text block such as {\"type\": \"text\", \"text\": \"…\"}")
    return prompts


def _title_from(messages: Sequence[Message]) -> str | None:
    for message in messages:
        if message.role == "user":
            text = message.text.strip()
            if text:
                line = text.splitlines()[0].strip()
                return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return None


class ContextService:
    def __init__(self, settings: Settings, store: SessionStore, files: SpillFiles) -> None:
        self.settings = settings
        self.store = store
        self.outputs = Outputs(
            store, files, retention_days=settings.spill_retention_days, quota_bytes=settings.spill_quota_bytes
        )
        access = SessionAccess(
            store,
            settings_for=self._session_settings,
            counter_for=lambda session, settings: self._counter(session.model, settings),
            usable_for=lambda session, settings: self._budget(session, settings).usable,
            status_for=self._status,
        )
        self.compactor = Compactor(access)
        self.strategies = Strategies(access)

    @classmethod
    async def open(cls, settings: Settings | None = None) -> ContextService:
        settings = settings or load_settings()
        store = await SQLiteStore.open(settings.database_path)
        return cls(settings, store, SpillFiles(settings.spill_path))

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> ContextService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- helpers ---------------------------------------------------------------------------------

    def _session_settings(self, session: Session) -> Settings:
        return self.settings.for_session(session.settings)

    def _counter(self, model: str, settings: Settings) -> TokenCounter:
        return counter_for(model, settings.token_factors)

    @staticmethod
    def _budget(session: Session, settings: Settings) -> catalog.Budget:
        return catalog.budget(
            catalog.lookup(session.model),
            reserved=settings.reserved,
            context=settings.context_window,
            output=settings.max_output,
            input_limit=settings.input_limit,
        )

    def _batch(self, messages: Any, format: FormatArg, *, limits: bool = True) -> tuple[ParsedBatch, int]:
        """Messages from a caller, made safe (`safejson`), checked against the hard caps and parsed;
        with their size in bytes (0 when `limits` is off)."""
        messages = safejson.clean(messages, "messages")  # before measuring: json cannot measure too deep a value
        size = self._check_limits(messages, self.settings) if limits else 0
        return self._parse(messages, format), size

    @staticmethod
    def _parse(messages: Any, format: FormatArg) -> ParsedBatch:
        try:
            return formats.parse(messages, format)
        except FormatError as exc:
            raise InvalidInput(exc.path, exc.problem) from exc

    def _check_session_limits(self, messages: Any, settings: Settings) -> None:
        """Refuse a batch over limits the session set below the server's (`SESSION_LIMITS`)."""
        if any(getattr(settings, name) < getattr(self.settings, name) for name in SESSION_LIMITS):
            self._check_limits(messages, settings)

    def _check_limits(self, messages: Any, settings: Settings) -> int:
        """Refuse a batch over the hard caps; return its size in bytes."""
        if not isinstance(messages, list):
            raise InvalidInput("messages", f"expected a list of messages, got {type(messages).__name__}")
        if len(messages) > settings.max_batch_messages:
            raise LimitExceeded(
                "messages",
                f"{len(messages):,} messages exceed max_batch_messages ({settings.max_batch_messages:,}); "
                "append in smaller batches",
            )
        total = 0
        for i, message in enumerate(messages):
            size = _json_size(message)
            if size > settings.max_message_bytes:
                raise LimitExceeded(
                    f"messages[{i}]",
                    f"{size:,} bytes exceed max_message_bytes ({settings.max_message_bytes:,}); "
                    "store huge outputs with the spill tool and send its preview, or raise the setting",
                )
            total += size
        if total > settings.max_batch_bytes:
            raise LimitExceeded(
                "messages",
                f"{total:,} bytes exceed max_batch_bytes ({settings.max_batch_bytes:,}); append in smaller batches",
            )
        return total

    # -- tokens ----------------------------------------------------------------------------------

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
        model = model or self.settings.default_model
        counter = self._counter(model, self.settings)
        if text is not None:
            tokens = counter.count(text)
        else:
            batch, _ = self._batch(messages, format, limits=False)
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

    # -- sessions --------------------------------------------------------------------------------

    async def open_session(
        self,
        session_id: str | None = None,
        *,
        model: str | None = None,
        title: str | None = None,
        settings: dict[str, Any] | None = None,
        system: Any = None,
        owner: str = "",
    ) -> Brief:
        """Create a session, or reopen one by id (changing its model, title or settings if given)."""
        # Library callers get what the MCP layer gives tool calls: no lone surrogates reach SQLite.
        session_id, model, title, settings, system = safejson.clean(
            [session_id, model, title, settings, system], "session_open"
        )
        if settings:
            check_session_overrides(settings)
            self.settings.for_session(settings)  # validate values now, not at first use
        prompts = _system_prompts(system) if system is not None else None
        fresh = Session(
            id=session_id or new_id("ses"),
            model=model or self.settings.default_model,
            title=title,
            settings=settings or {},
        )
        async with self.store.write(fresh.id, owner, create=fresh) as tx:
            session = tx.session
            changes: dict[str, Any] = {}
            if title is not None and title != session.title:
                changes["title"] = title
            if settings:
                changes["settings"] = {**session.settings, **settings}
            if changes:
                session = session.model_copy(update=changes)
            effective = self.settings.for_session(session.settings)
            if model is not None and model != session.model:
                session = await self._recount(tx, session.model_copy(update={"model": model}), effective)
            if prompts is not None:
                session = self._with_system(session, prompts, self._counter(session.model, effective))
            if session != tx.session:
                await tx.save_session(session)
                session = tx.session
        return Brief.of(await self._status(session))

    async def _recount(self, tx: SessionTransaction, session: Session, settings: Settings) -> Session:
        """Count every stored message again for a new model: the tokenizer may have changed."""
        counter = self._counter(session.model, settings)
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

    @staticmethod
    def _with_system(session: Session, prompts: list[SystemPrompt], counter: TokenCounter) -> Session:
        counted = count_system(prompts, counter)
        delta = sum(p.tokens for p in counted) - sum(p.tokens for p in session.system)
        return session.model_copy(
            update={
                "system": counted,
                "tokens_stored": session.tokens_stored + delta,
                "tokens_in_view": session.tokens_in_view + delta,
            }
        )

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None, owner: str = "") -> SessionList:
        if not 1 <= limit <= 500:
            raise InvalidInput("limit", f"expected 1–500, got {limit}")
        try:
            page = await self.store.list_sessions(owner, limit=limit, cursor=cursor)
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

    async def delete_session(self, session_id: str, *, owner: str = "") -> Deleted:
        await self.store.get_session(session_id, owner)  # not found → error before anything is touched
        digests = await self.outputs.session_digests(session_id, owner)
        await self.store.delete_session(session_id, owner)  # its output records go with it (cascade)
        await self.outputs.delete_unreferenced(digests)
        return Deleted(session_id=session_id, deleted=True)

    # -- append ----------------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        messages: Any,
        *,
        format: FormatArg = "auto",
        usage: Any = None,
        system: Any = None,
        owner: str = "",
    ) -> AppendResult:
        """Add messages (and tool results for earlier calls) to a session in one transaction."""
        # Measuring and parsing megabytes is CPU work: a worker thread keeps other clients served.
        batch, size = await asyncio.to_thread(self._batch, messages, format)
        return await self._append(session_id, batch, size, usage=usage, system=system, owner=owner, raw=messages)

    async def _append(
        self,
        session_id: str,
        batch: ParsedBatch,
        size: int,
        *,
        usage: Any = None,
        system: Any = None,
        owner: str = "",
        create: Session | None = None,
        raw: Any = None,
    ) -> AppendResult:
        """`raw`: the messages as the caller sent them, checked again against the session's own
        request limits when it set lower ones than the server's."""
        try:
            reported = parse_usage(safejson.clean(usage, "usage")) if usage is not None else None
        except FormatError as exc:
            raise InvalidInput(exc.path, exc.problem) from exc
        prompts = _system_prompts(safejson.clean(system, "system")) if system is not None else batch.system
        await self._make_room(size)
        async with self.store.write(session_id, owner, create=create) as tx:
            session = tx.session
            settings = self._session_settings(session)
            if raw is not None and settings is not self.settings:
                self._check_session_limits(raw, settings)
            counter = self._counter(session.model, settings)
            ingest = Ingest(
                tx,
                self.outputs,
                settings,
                context_window=self._budget(session, settings).context,
                owner=owner,
            )
            attached, delta = await self._attach_results(tx, batch.results, counter, ingest)
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
                    "title": session.title or _title_from(stored),
                }
            )
            if prompts is not None:
                session = self._with_system(session, prompts, counter)
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
            status=Brief.of(await self._status(tx.session)),
        )

    async def _make_room(self, incoming: int) -> None:
        """Before a write of up to `incoming` bytes: refuse past the database quota, evict old spills."""
        limit = self.settings.max_database_bytes
        if limit and (size := await self.store.size_bytes()) >= limit:
            raise LimitExceeded(
                "database",
                f"the database holds {size:,} bytes, at its max_database_bytes limit ({limit:,}); "
                "delete sessions you no longer need (session_delete) or raise max_database_bytes",
            )
        await self.outputs.make_room(incoming)

    @staticmethod
    def _with_usage(messages: list[Message], reported: Usage) -> list[Message]:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].role == "assistant":
                messages[i] = messages[i].model_copy(update={"usage": reported})
                return messages
        raise InvalidInput("usage", "reported usage belongs to an assistant message, and this batch has none")

    async def _attach_results(
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

    # -- reading ---------------------------------------------------------------------------------

    async def _view(self, session: Session) -> list[Message]:
        """The messages the model sees now, in the order it sees them."""
        messages = await self.store.load_messages(
            session.id, owner=session.owner, after_seq=view.load_from(session.view)
        )
        return view.in_view(messages, session.view)

    async def _load_page(self, session: Session, rows: list[MessageRow]) -> list[Message]:
        if not rows:
            return []
        first, last = min(r.seq for r in rows), max(r.seq for r in rows)
        loaded = {
            m.id: m
            for m in await self.store.load_messages(
                session.id, owner=session.owner, after_seq=first - 1, limit=last - first + 1
            )
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
        owner: str = "",
    ) -> Context:
        session = await self.store.get_session(session_id, owner)
        if cache_anchors and format != "anthropic":
            raise InvalidInput("cache_anchors", "cache_control breakpoints exist only in the anthropic format")
        start = _parse_cursor(cursor)
        if limit is not None and limit < 1:
            raise InvalidInput("limit", f"expected a positive number of messages, got {limit}")
        if limit is None:
            visible: list[Any] = await self._view(session)
            page = visible[start:]
        else:
            # A page loads only its own messages: the view is worked out on the light rows.
            visible = view.in_view(
                await self.store.rows(session.id, owner=session.owner, after_seq=view.load_from(session.view)),
                session.view,
            )
            page = await self._load_page(session, visible[start : start + limit])
        system = session.system if start == 0 else []
        body = formats.render(system, page, format, RenderOptions(strip_media=strip_media))
        if cache_anchors:
            body = self._with_cache_anchors(body, session)
        end = start + len(page)
        return Context(
            format=format,
            system=body.get("system"),
            messages=body["messages"],
            tokens=sum(m.in_view_tokens for m in page) + sum(p.tokens for p in system),
            next_cursor=str(end) if end < len(visible) else None,
        )

    def _with_cache_anchors(self, body: dict[str, Any], session: Session) -> dict[str, Any]:
        # Rendered messages can merge domain messages, so each is counted as sent; this runs only
        # when anchors are asked for.
        counter = self._counter(session.model, self._session_settings(session))
        counts = [counter.count(json.dumps(m["content"], ensure_ascii=False)) for m in body["messages"]]
        marked, _anchors = place_cache_anchors(
            body, token_counts=counts, system_tokens=sum(p.tokens for p in session.system)
        )
        return marked

    async def session_view(self, session_id: str, *, owner: str = "") -> tuple[Session, list[Message]]:
        """The session and the messages its model sees now, in order, as stored (read-only)."""
        session = await self.store.get_session(session_id, owner)
        return session, await self._view(session)

    async def session_history(self, session_id: str, *, owner: str = "") -> list[Message]:
        """Every stored message of the session in order, those out of view included (read-only)."""
        session = await self.store.get_session(session_id, owner)
        return await self.store.load_messages(session.id, owner=session.owner, hidden=True)

    async def status(self, session_id: str, *, owner: str = "") -> Status:
        return await self._status(await self.store.get_session(session_id, owner))

    async def _status(self, session: Session, visible: Sequence[Message] | None = None) -> Status:
        """Where `session` stands and what to do next; `visible` is its view when the caller has it loaded."""
        settings = self._session_settings(session)
        budget = self._budget(session, settings)
        reported = None
        if session.last_usage is not None:
            # What the provider saw at its last report, plus what our count says changed since.
            seen = session.last_usage.total_input + session.last_usage.output
            reported = seen + session.tokens_in_view - session.usage_baseline
        in_view = calibrated_tokens(session.tokens_in_view, reported)
        verdict = assess(in_view, budget, soft_ratio=settings.soft_ratio, hard_ratio=settings.hard_ratio)
        counter = self._counter(session.model, settings)
        health = (
            cache_health(await self.store.recent_usages(session.id, owner=session.owner))
            if session.last_usage
            else None
        )
        return Status(
            session_id=session.id,
            model=session.model,
            model_known=catalog.lookup(session.model).known,
            method=counter.method,
            tokens_in_view=in_view,
            tokens_counted=session.tokens_in_view,
            tokens_reported=reported,
            usable=verdict.usable,
            context_window=budget.context,
            ratio=verdict.ratio,
            state=verdict.state,
            recommended_action=(
                await self._soft_advice(session, settings, counter, visible)
                if verdict.state == "soft"
                else verdict.recommended_action
            ),
            message_count=session.message_count,
            tokens_stored=session.tokens_stored,
            compaction=await self._compaction_metrics(session),
            cache_hit_rate=round(health.hit_rate, 4) if health and health.requests else None,
            cache_warning=health.warning if health else None,
        )

    async def totals(self, *, owner: str = "") -> dict[str, int]:
        """Across all of an owner's sessions: how many, and what compaction and pruning freed."""
        sessions = (await self.store.list_sessions(owner, limit=10_000)).sessions
        compactions = freed = prunes = pruned = 0
        for session in sessions:
            count, tokens = await self.store.compaction_totals(session.id, owner=owner)
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

    async def _compaction_metrics(self, session: Session) -> CompactionMetrics | None:
        count, freed = await self.store.compaction_totals(session.id, owner=session.owner)
        prunes = session.metadata.prunes
        if not count and not prunes.count:
            return None
        recent = await self.store.compactions(session.id, owner=session.owner, limit=10)
        return CompactionMetrics(
            compactions=count,
            tokens_freed=freed,
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

    # -- policies --------------------------------------------------------------------------------

    async def prune(
        self,
        session_id: str,
        *,
        dry_run: bool = False,
        keep_tool_uses: int | None = None,
        clear_at_least: int | None = None,
        exclude_tools: Sequence[str] = (),
        clear_inputs: bool = False,
        owner: str = "",
    ) -> PruneResult:
        """Clear old tool outputs from the view (marks only; the outputs stay stored).

        With `keep_tool_uses` this is Anthropic's context editing: every tool result but the newest
        N tool uses is cleared, whatever the turns (see policy/prune.py).
        """
        for name, value in (("keep_tool_uses", keep_tool_uses), ("clear_at_least", clear_at_least)):
            if value is not None and value < 0:
                raise InvalidInput(name, f"expected a non-negative number, got {value}")
        async with self.store.write(session_id, owner) as tx:
            session = tx.session
            settings = self._session_settings(session)
            counter = self._counter(session.model, settings)
            visible: list[Message] = await view.visible(tx.messages, session.view)
            options = self._prune_options(
                session,
                settings,
                keep_tool_uses=keep_tool_uses,
                clear_at_least=clear_at_least,
                exclude_tools=frozenset(t.lower() for t in exclude_tools),
                clear_inputs=clear_inputs,
            )
            plan = self._plan_prune(visible, options, counter)
            if plan.applies and not dry_run:
                now = time.time()
                by_id = {m.id: m for m in visible}
                marks = []
                for pruned in plan.to_mark:
                    part = by_id[pruned.message_id].parts[pruned.index]
                    assert isinstance(part, ToolPart)
                    marks.append(PartMark(pruned.message_id, pruned.index, _cleared(part, now, clear_inputs), pruned.tokens))
                await tx.mark_parts(marks)
                visible = _with_marks(visible, marks)
                done = session.metadata.prunes
                prunes = PruneTotals(count=done.count + 1, tokens_freed=done.tokens_freed + plan.tokens_freed)
                session = session.model_copy(
                    update={
                        "tokens_in_view": session.tokens_in_view - plan.tokens_freed,
                        "metadata": session.metadata.model_copy(update={"prunes": prunes}),
                    }
                )
                await tx.save_session(session)
                session = tx.session
        applied = plan.applies and not dry_run
        return PruneResult(
            applied=applied,
            dry_run=dry_run,
            reason=plan.reason,
            parts=len(plan.parts) if plan.applies else 0,
            tokens_freed=plan.tokens_freed if plan.applies else 0,
            status=Brief.of(await self._status(session, visible)),
        )

    def _prune_options(self, session: Session, settings: Settings, **anthropic: Any) -> PruneOptions:
        """The session's prune rule, with any of Anthropic's context-editing options given; unless
        set, the protection and minimum scale down with a small window (`prune_thresholds`)."""
        budget = self._budget(session, settings)
        protect, minimum = prune_thresholds(
            budget.usable if budget.context else None, protect=settings.prune_protect, minimum=settings.prune_minimum
        )
        return PruneOptions(
            protect=protect,
            minimum=minimum,
            keep_turns=settings.prune_keep_turns,
            protected_tools=frozenset(t.lower() for t in settings.prune_protected_tools),
            **anthropic,
        )

    def _plan_prune(self, visible: Sequence[Message], options: PruneOptions, counter: TokenCounter) -> PrunePlan:
        """The plan `prune` runs, exactly counted; `status` runs the same one for its advice."""
        return plan_prune(
            visible,
            options,
            placeholder_tokens=counter.count(RenderOptions().pruned_placeholder),
            remaining_tokens=remaining_counter(counter, clear_inputs=options.clear_inputs),
            shown_tokens=shown_counter(counter),
        )

    async def _soft_advice(
        self, session: Session, settings: Settings, counter: TokenCounter, visible: Sequence[Message] | None
    ) -> str:
        """Advise prune only if the prune `prune` would run now frees more than the minimum.

        Runs on every status and append in the `soft` state, so it first bounds what a prune can
        free from the light rows; only when that bound clears the minimum does it load the view
        (unless the caller passed it) and run the real plan. Both paths give the same advice
        for the same view, whoever asks.
        """
        options = self._prune_options(session, settings)
        if visible is None:
            stored = await self.store.rows(session.id, owner=session.owner, after_seq=view.load_from(session.view))
            rows = view.in_view(stored, session.view)
        else:
            rows = [MessageRow(m.id, m.seq, m.role, m.in_view_tokens, m.starts_turn, m.summary) for m in visible]
        ceiling = prune_ceiling(rows, options)
        if ceiling <= options.minimum:
            return prune_falls_short(ceiling, options.minimum, at_most=True)
        if visible is None:
            visible = await self._view(session)
        plan = self._plan_prune(visible, options, counter)
        if plan.applies:
            return RECOMMENDATIONS["soft"]
        return prune_falls_short(plan.tokens_freed, options.minimum, at_most=False)

    async def select_tail(
        self, session_id: str, *, budget: int | None = None, tail_turns: int | None = None, owner: str = ""
    ) -> TailResult:
        """Which recent messages fit the tail budget (read-only; compaction summarizes the rest)."""
        session = await self.store.get_session(session_id, owner)
        settings = self._session_settings(session)
        stored = await self.store.rows(session.id, owner=session.owner, after_seq=view.load_from(session.view))
        rows = view.in_view(stored, session.view)
        if budget is None:
            budget = tail_budget(self._budget(session, settings).usable, settings.preserve_recent_tokens)
        if budget < 0:
            raise InvalidInput("budget", f"expected a non-negative number of tokens, got {budget}")
        selection = select_tail(rows, budget=budget, tail_turns=tail_turns or settings.tail_turns)
        head = len(rows) if selection.tail_start_id is None else next(
            i for i, r in enumerate(rows) if r.id == selection.tail_start_id
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

    # -- compaction ------------------------------------------------------------------------------

    def _summarizers(
        self, choice: SummarizerChoice, settings: Settings, sampled: Sampled | None, offered: bool = False
    ) -> list[Summarizer]:
        """The chain for `choice` (`compaction.chain`); a bad choice is an error naming the field."""
        try:
            return build_chain(choice, settings, sampled, offered=offered)
        except ValueError as exc:
            raise InvalidInput("summarizer", str(exc)) from exc

    def wants_sampling(self, choice: str | None, settings: Settings | None = None) -> bool:
        """Whether a summary with this choice would use the client's model (asked before it runs).

        `settings` are the effective settings of the session being compacted; without a session
        (stateless `summarize`) the server's settings decide.
        """
        return chain_wants_sampling(choice, settings or self.settings)

    async def sampling_prompt(
        self,
        session_id: str,
        *,
        summarizer: str | None = None,
        instructions: str | None = None,
        owner: str = "",
    ) -> tuple[str, str, int] | None:
        """The prompt for the client's model, or None when this session's compaction would not use
        it (decided from the session's effective settings, as `compact` decides its chain) or there
        is nothing to compact."""
        try:
            session = await self.store.get_session(session_id, owner)
            if not self.wants_sampling(summarizer, self._session_settings(session)):
                return None
            prepared = await self.compactor.prepare(session_id, owner)
        except (NothingToCompact, NotFoundError):
            return None
        return self.compactor.sampling_prompt(prepared, instructions)

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
        owner: str = "",
    ) -> CompactResult:
        """Summarize older history into the anchored summary; on overflow, recover (SPEC §10)."""
        if strategy in REMOVAL_STRATEGIES:
            return await self.strategies.remove(session_id, strategy, dry_run=dry_run, owner=owner)
        if strategy == "regions":
            return await self.strategies.regions(session_id, dry_run=dry_run, owner=owner)
        if strategy != "anchored":
            raise InvalidInput(
                "strategy",
                f"unknown strategy {strategy!r}; available: anchored, regions, {', '.join(REMOVAL_STRATEGIES)}",
            )
        session = await self.store.get_session(session_id, owner)
        settings = self._session_settings(session)
        chain = self._summarizers(summarizer or settings.summarizer, settings, sampled, sampling_offered)
        return await self.compactor.compact_with_recovery(
            session,
            owner=owner,
            summarizers=chain,
            instructions=instructions,
            dry_run=dry_run,
            auto=auto,
            progress=progress,
            requested=summarizer or settings.summarizer,
        )

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
        chain = self._summarizers(summarizer or self.settings.summarizer, self.settings, sampled)
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
        batch, _ = self._batch(messages, format)
        model = model or self.settings.default_model
        counter = self._counter(model, self.settings)
        head = [count_message(m, counter) for m in batch.messages]
        replaced = sum(m.tokens for m in head) + (counter.count(previous_summary) if previous_summary else 0)
        usable = catalog.budget(catalog.lookup(model)).usable
        return head, counter, summary_budget(usable, replaced)

    async def summary_text(self, session_id: str, *, owner: str = "") -> str:
        """The session's current summary (the anchor of the view)."""
        session = await self.store.get_session(session_id, owner)
        if session.view is None:
            raise NotFoundError("summary", session_id, "the session has not been compacted yet")
        messages = await self.store.load_messages(
            session.id, owner=session.owner, after_seq=session.view.summary_seq - 1, limit=1
        )
        return messages[0].text

    # -- spilled outputs -------------------------------------------------------------------------

    async def spill(
        self,
        session_id: str,
        text: str,
        *,
        tool: str | None = None,
        call_id: str | None = None,
        owner: str = "",
    ) -> SpillResult:
        """Store a large text whole; return the preview to put in context and the id to read it by."""
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.settings.max_message_bytes:
            raise LimitExceeded(
                "text", f"{size:,} bytes exceed max_message_bytes ({self.settings.max_message_bytes:,})"
            )
        await self._make_room(size)
        # The file first, outside the write lock every process shares; the transaction records it.
        stored = await self.outputs.store_file(text)
        try:
            async with self.store.write(session_id, owner) as tx:
                settings = self._session_settings(tx.session)
                if size > settings.max_message_bytes:  # the session's own, lower limit
                    raise LimitExceeded(
                        "text", f"{size:,} bytes exceed this session's max_message_bytes ({settings.max_message_bytes:,})"
                    )
                new = await self.outputs.add(tx, text, owner=owner, tool=tool, call_id=call_id, stored=stored)
        except Exception:
            await self.outputs.discard(stored)  # e.g. no such session: leave no orphan file behind
            raise
        caps = PreviewCaps.of(
            settings, self._budget(tx.session, settings).context, self._counter(tx.session.model, settings).count
        )
        cut = caps.truncate(
            text, max_lines=settings.max_lines, max_bytes=settings.max_bytes, direction=settings.truncate_direction
        )
        return SpillResult(
            output_id=new.record.id,
            bytes=new.file.bytes,
            lines=new.file.lines,
            truncated=cut is not None,
            preview=text if cut is None else with_hint(cut, new.record.id),
        )

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
        owner: str = "",
    ) -> OutputRead:
        if offset < 1:
            raise InvalidInput("offset", f"lines are numbered from 1, got {offset}")
        if limit < 1:
            raise InvalidInput("limit", f"expected a positive number of lines, got {limit}")
        if not 0 <= context <= 20:
            raise InvalidInput("context", f"expected 0–20 lines of context, got {context}")
        try:
            return await self.outputs.read(
                output_id,
                owner=owner,
                offset=offset,
                limit=limit,
                pattern=pattern,
                context=context,
                ignore_case=ignore_case,
                max_matches=max_matches,
            )
        except TimeoutError as exc:
            raise InvalidInput("pattern", f"{exc}; use a simpler pattern or a literal string") from exc
        except ValueError as exc:
            raise InvalidInput("pattern" if pattern is not None else "output_id", str(exc)) from exc

    async def output_text(self, output_id: str, *, owner: str = "") -> str:
        try:
            return await self.outputs.full_text(output_id, owner=owner, max_bytes=self.settings.max_message_bytes)
        except ValueError as exc:
            raise InvalidInput("output_id", str(exc)) from exc

    async def gc(self, *, dry_run: bool = False) -> GcResult:
        return await self.outputs.gc(dry_run=dry_run)

    # -- import ----------------------------------------------------------------------------------

    async def import_transcript(
        self,
        path: Path,
        *,
        session_id: str | None = None,
        format: str | None = None,
        model: str | None = None,
        owner: str = "",
    ) -> ImportResult:
        """Read a transcript file into a session (created if needed) in one transaction.

        The agent's own compactions are replayed and its last reported usage calibrates the count
        (see `importing`). Importing a file into a session again reads only what it appended since.
        """
        from .importing import ImportTools, import_file

        tools = ImportTools(
            store=self.store,
            outputs=self.outputs,
            default_model=self.settings.default_model,
            settings_for=self._session_settings,
            counter_for=self._counter,
            context_for=lambda session, settings: self._budget(session, settings).context,
            make_room=self._make_room,
            attach_results=self._attach_results,
            with_system=self._with_system,
            status=self._status,
        )
        return await import_file(tools, Path(path), session_id=session_id, format=format, model=model, owner=owner)


def _cleared(part: ToolPart, when: float, clear_inputs: bool) -> ToolPart:
    # Marks only: the output and input stay stored; the renderers show placeholders.
    return part.model_copy(update={"compacted_at": when, "input_cleared": clear_inputs})


def _with_marks(messages: Sequence[Message], marks: Sequence[PartMark]) -> list[Message]:
    """`messages` as they read once `marks` are stored (for the status that follows, without a reload)."""
    by_message: dict[str, list[PartMark]] = {}
    for mark in marks:
        by_message.setdefault(mark.message_id, []).append(mark)
    out = []
    for message in messages:
        mine = by_message.get(message.id)
        if mine:
            changed: dict[int, Part] = {m.index: m.part for m in mine}
            parts = [changed.get(i, part) for i, part in enumerate(message.parts)]
            in_view = message.in_view_tokens - sum(m.freed for m in mine)  # as the store's mark_parts does
            message = message.model_copy(update={"parts": parts, "view_tokens": in_view})
        out.append(message)
    return out


def _parse_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        value = int(cursor)
    except ValueError:
        raise InvalidInput("cursor", f"{cursor!r} is not a cursor this server issued; pass next_cursor as returned") from None
    if value < 0:
        raise InvalidInput("cursor", "must not be negative")
    return value


__all__ = [
    "USER_ERRORS",
    "CompactionFailed",
    "ContextService",
    "ContextfoldError",
    "InvalidInput",
    "LimitExceeded",
]

"""The one facade that the MCP server and the CLI both call.

It composes the store (I/O) with the pure core (formats, tokens, policies). Requests flow one
way: arguments → validation → one store transaction → a result model. Every method that writes
does so in a single transaction, so a request that fails leaves the database as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from . import catalog, formats
from .config import Settings, SettingsError, check_session_overrides, load_settings
from .domain import Message, Session, SystemPrompt, ToolResult, Usage, complete_tool_part, new_id
from .formats import FormatError, ParsedBatch, RenderOptions
from .formats.usage import parse_usage
from .policy.overflow import assess, calibrated_tokens
from .results import (
    AppendedMessage,
    AppendResult,
    Context,
    Deleted,
    ImportResult,
    SessionInfo,
    SessionList,
    Status,
    TokenCount,
)
from .store import ConflictError, NotFoundError, SessionStore, SessionTransaction, SQLiteStore
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


class ContextfoldError(Exception):
    """An error the caller can act on; the message says what was wrong and what to do."""


class InvalidInput(ContextfoldError, ValueError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class LimitExceeded(InvalidInput):
    pass


USER_ERRORS = (ContextfoldError, FormatError, SettingsError, NotFoundError, ConflictError)
"""Errors that describe a bad request rather than a bug; the server returns them as tool errors."""


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))


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
    def __init__(self, settings: Settings, store: SessionStore) -> None:
        self.settings = settings
        self.store = store

    @classmethod
    async def open(cls, settings: Settings | None = None) -> ContextService:
        settings = settings or load_settings()
        store = await SQLiteStore.open(settings.database_path)
        return cls(settings, store)

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
    def _parse(messages: Any, format: FormatArg) -> ParsedBatch:
        try:
            return formats.parse(messages, format)
        except FormatError as exc:
            raise InvalidInput(exc.path, exc.problem) from exc

    def _check_limits(self, messages: Any, settings: Settings) -> None:
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
            batch = self._parse(messages, format)
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
    ) -> Status:
        """Create a session, or reopen one by id (changing its model, title or settings if given)."""
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
        return await self._status(session)

    async def _recount(self, tx: SessionTransaction, session: Session, settings: Settings) -> Session:
        """Count every stored message again for a new model: the tokenizer may have changed."""
        counter = self._counter(session.model, settings)
        messages = await tx.messages()
        recounted = [count_message(m, counter) for m in messages]
        await tx.replace_counts(recounted)
        system = count_system(session.system, counter)
        total = sum(m.tokens for m in recounted) + sum(p.tokens for p in system)
        return session.model_copy(update={"system": system, "tokens_stored": total, "tokens_in_view": total})

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
        await self.store.delete_session(session_id, owner)
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
        self._check_limits(messages, self.settings)
        batch = self._parse(messages, format)
        return await self._append(session_id, batch, usage=usage, system=system, owner=owner)

    async def _append(
        self,
        session_id: str,
        batch: ParsedBatch,
        *,
        usage: Any = None,
        system: Any = None,
        owner: str = "",
        create: Session | None = None,
    ) -> AppendResult:
        try:
            reported = parse_usage(usage) if usage is not None else None
        except FormatError as exc:
            raise InvalidInput(exc.path, exc.problem) from exc
        prompts = _system_prompts(system) if system is not None else batch.system
        async with self.store.write(session_id, owner, create=create) as tx:
            session = tx.session
            settings = self._session_settings(session)
            counter = self._counter(session.model, settings)
            attached, delta = await self._attach_results(tx, batch.results, counter)
            new = [count_message(m, counter) for m in batch.messages]
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
            system_updated=prompts is not None,
            status=await self._status(tx.session),
        )

    @staticmethod
    def _with_usage(messages: list[Message], reported: Usage) -> list[Message]:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].role == "assistant":
                messages[i] = messages[i].model_copy(update={"usage": reported})
                return messages
        raise InvalidInput("usage", "reported usage belongs to an assistant message, and this batch has none")

    async def _attach_results(
        self, tx: SessionTransaction, results: Sequence[ToolResult], counter: TokenCounter
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
            part = complete_tool_part(stored.part, result)
            part.tokens = count_part(part, counter)
            await tx.update_part(stored, part)
            delta += part.tokens - stored.part.tokens
        return len(results), delta

    # -- reading ---------------------------------------------------------------------------------

    async def get_context(
        self,
        session_id: str,
        *,
        format: Literal["anthropic", "openai"] = "openai",
        limit: int | None = None,
        cursor: str | None = None,
        strip_media: bool = False,
        owner: str = "",
    ) -> Context:
        session = await self.store.get_session(session_id, owner)
        after = _parse_cursor(cursor)
        if limit is not None and limit < 1:
            raise InvalidInput("limit", f"expected a positive number of messages, got {limit}")
        messages = await self.store.load_messages(session.id, after_seq=after, limit=limit)
        system = session.system if after == 0 else []
        body = formats.render(system, messages, format, RenderOptions(strip_media=strip_media))
        more = limit is not None and len(messages) == limit and messages[-1].seq < session.message_count
        tokens = sum(m.tokens for m in messages) + sum(p.tokens for p in system)
        return Context(
            format=format,
            system=body.get("system"),
            messages=body["messages"],
            tokens=tokens,
            next_cursor=str(messages[-1].seq) if more else None,
        )

    async def status(self, session_id: str, *, owner: str = "") -> Status:
        return await self._status(await self.store.get_session(session_id, owner))

    async def _status(self, session: Session) -> Status:
        settings = self._session_settings(session)
        info = catalog.lookup(session.model)
        budget = catalog.budget(
            info,
            reserved=settings.reserved,
            context=settings.context_window,
            output=settings.max_output,
            input_limit=settings.input_limit,
        )
        reported = None
        if session.last_usage is not None:
            # What the provider saw at its last report, plus what our count says changed since.
            seen = session.last_usage.total_input + session.last_usage.output
            reported = seen + session.tokens_in_view - session.usage_baseline
        in_view = calibrated_tokens(session.tokens_in_view, reported)
        verdict = assess(in_view, budget, soft_ratio=settings.soft_ratio, hard_ratio=settings.hard_ratio)
        counter = self._counter(session.model, settings)
        return Status(
            session_id=session.id,
            model=session.model,
            model_known=info.known,
            method=counter.method,
            tokens_in_view=in_view,
            tokens_counted=session.tokens_in_view,
            tokens_reported=reported,
            usable=verdict.usable,
            context_window=budget.context,
            ratio=verdict.ratio,
            state=verdict.state,
            recommended_action=verdict.recommended_action,
            message_count=session.message_count,
            tokens_stored=session.tokens_stored,
        )

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
        """Read a transcript file into a session (created if needed) in one transaction."""
        from .formats.importers import load_transcript

        transcript = load_transcript(Path(path), format)  # type: ignore[arg-type]
        batch = self._parse(transcript.messages, transcript.format)
        session_id = session_id or new_id("ses")
        create = Session(
            id=session_id,
            model=model or transcript.model or self.settings.default_model,
            title=transcript.title,
            metadata={"imported_from": Path(path).name, "source_format": transcript.source_format},
        )
        system = [{"role": p["role"], "text": p["text"]} for p in transcript.system] or None
        result = await self._append(session_id, batch, system=system, owner=owner, create=create)
        calls = [p for m in batch.messages for p in m.tool_parts]
        return ImportResult(
            session_id=session_id,
            source_format=transcript.source_format,
            messages=len(result.messages),
            tool_calls=len(calls),
            tool_results=sum(1 for p in calls if p.is_finished) + result.results_attached,
            status=result.status,
        )


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
    "ContextService",
    "ContextfoldError",
    "InvalidInput",
    "LimitExceeded",
]

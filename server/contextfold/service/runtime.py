"""What every capability of the service shares: the settings, the store, the spilled outputs, and
how a session's settings, tokenizer and budget are worked out.

`Runtime` is process-wide (one per server or CLI process). `Scope` is the runtime as one tenant
uses it: the tenant's store (`Store.tenant(owner)`) plus the helpers every capability calls, so
no capability takes an owner argument and none can reach another tenant's data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from contextfold import formats, safejson
from contextfold.config import SESSION_LIMITS, Settings
from contextfold.domain import Message, Session, SystemPrompt
from contextfold.errors import REMEDY, FormatError, InvalidInput, LimitExceeded, Remedy
from contextfold.formats import ParsedBatch
from contextfold.formats.versions import Chain
from contextfold.policy import view
from contextfold.results import Status
from contextfold.service.anchored import Compactor, SessionAccess
from contextfold.service.outputs import Outputs
from contextfold.service.standing import Standing
from contextfold.service.strategies import Strategies
from contextfold.service.viewcache import Rendered, ViewCache
from contextfold.store import Store, TenantStore
from contextfold.tokens import catalog
from contextfold.tokens.counting import TokenCounter, counter_for

FormatArg = Literal["anthropic", "openai", "auto"]

TITLE_CHARS = 80

_JSON_SLICE = 1 << 20
"""Strings longer than this many characters are measured a slice at a time (see `json_size`)."""


class Runtime:
    """The settings, the store and the spill store of one process."""

    def __init__(self, settings: Settings, store: Store, outputs: Outputs) -> None:
        self.settings = settings
        self.store = store
        self.outputs = outputs
        self.views = ViewCache(settings.view_cache_sessions)

    def settings_for(self, session: Session) -> Settings:
        """The session's effective settings: the server's with the session's overrides."""
        return self.settings.for_session(session.settings)

    @staticmethod
    def counter(model: str, settings: Settings) -> TokenCounter:
        return counter_for(model, settings.token_factors)

    def counter_for(self, session: Session, settings: Settings) -> TokenCounter:
        return self.counter(session.model, settings)

    @staticmethod
    def budget(session: Session, settings: Settings) -> catalog.Budget:
        return catalog.budget(
            catalog.lookup(session.model),
            reserved=settings.reserved,
            context=settings.context_window,
            output=settings.max_output,
            input_limit=settings.input_limit,
        )

    def usable_for(self, session: Session, settings: Settings) -> int:
        return self.budget(session, settings).usable

    def batch(self, messages: Any, format: FormatArg, *, limits: bool = True) -> tuple[ParsedBatch, int]:
        """Messages from a caller, made safe (`safejson`), checked against the hard caps and parsed;
        with their size in bytes (0 when `limits` is off)."""
        messages = safejson.clean(messages, "messages")  # before measuring: json cannot measure too deep a value
        size = self.check_limits(messages, self.settings) if limits else 0
        return self.parse(messages, format), size

    @staticmethod
    def parse(messages: Any, format: FormatArg) -> ParsedBatch:
        try:
            return formats.parse(messages, format)
        except FormatError as exc:
            raise InvalidInput(exc.path, exc.problem) from exc

    def check_session_limits(self, messages: Any, settings: Settings) -> None:
        """Refuse a batch over limits the session set below the server's (`SESSION_LIMITS`)."""
        if any(getattr(settings, name) < getattr(self.settings, name) for name in SESSION_LIMITS):
            self.check_limits(messages, settings)

    def check_limits(self, messages: Any, settings: Settings) -> int:
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
            size = json_size(message)
            if size > settings.max_message_bytes:
                raise LimitExceeded(
                    f"messages[{i}]",
                    f"{size:,} bytes exceed max_message_bytes ({settings.max_message_bytes:,}); "
                    f"{REMEDY}, or raise the setting",
                    remedy=Remedy.SPILL_FIRST,
                )
            total += size
        if total > settings.max_batch_bytes:
            raise LimitExceeded(
                "messages",
                f"{total:,} bytes exceed max_batch_bytes ({settings.max_batch_bytes:,}); append in smaller batches",
            )
        return total

    async def make_room(self, incoming: int) -> None:
        """Before a write of up to `incoming` bytes: refuse past the database quota, evict old spills."""
        limit = self.settings.max_database_bytes
        if limit and (size := await self.store.size_bytes()) >= limit:
            raise LimitExceeded(
                "database",
                f"the database holds {size:,} bytes, at its max_database_bytes limit ({limit:,}); "
                f"{REMEDY} or raise max_database_bytes",
                remedy=Remedy.DELETE_SESSIONS,
            )
        await self.outputs.make_room(incoming)


@dataclass
class Scope:
    """The runtime as one tenant uses it: every capability of the service works through this."""

    runtime: Runtime
    store: TenantStore
    standing: Standing = field(init=False)
    compactor: Compactor = field(init=False)
    strategies: Strategies = field(init=False)

    def __post_init__(self) -> None:
        self.standing = Standing(self)
        access = SessionAccess(
            self.store,
            settings_for=self.runtime.settings_for,
            counter_for=self.runtime.counter_for,
            usable_for=self.runtime.usable_for,
            status_for=self.status,
        )
        self.compactor = Compactor(access)
        self.strategies = Strategies(access)

    @property
    def owner(self) -> str:
        return self.store.owner

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def outputs(self) -> Outputs:
        return self.runtime.outputs

    def settings_for(self, session: Session) -> Settings:
        return self.runtime.settings_for(session)

    def counter(self, model: str, settings: Settings) -> TokenCounter:
        return self.runtime.counter(model, settings)

    def budget(self, session: Session, settings: Settings) -> catalog.Budget:
        return self.runtime.budget(session, settings)

    def batch(self, messages: Any, format: FormatArg, *, limits: bool = True) -> tuple[ParsedBatch, int]:
        return self.runtime.batch(messages, format, limits=limits)

    def check_session_limits(self, messages: Any, settings: Settings) -> None:
        self.runtime.check_session_limits(messages, settings)

    async def make_room(self, incoming: int) -> None:
        await self.runtime.make_room(incoming)

    async def status(self, session: Session, visible: Sequence[Message] | None = None) -> Status:
        return await self.standing.status(session, visible)

    async def view(self, session: Session) -> list[Message]:
        """The messages the model sees now, in the order it sees them (for readers: the messages
        are shared with later calls through the view cache and must not be modified)."""
        return view.in_view(await self.runtime.views.messages(self.store, session), session.view)

    async def rendered(self, session: Session, key: tuple[Any, ...]) -> Rendered:
        """Renderings kept beside the session's cached view, for `key` (format and options)."""
        return await self.runtime.views.rendered(self.store, session, key)

    async def chain(self, session: Session, key: tuple[Any, ...]) -> Chain:
        """The version chain kept beside the session's cached view, for `key`."""
        return await self.runtime.views.chain(self.store, session, key)


def json_size(value: Any) -> int:
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


def system_prompts(system: Any, path: str = "system") -> list[SystemPrompt]:
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
            raise InvalidInput(f"{path}[{i}]", 'expected a text block such as {"type": "text", "text": "…"}')
    return prompts


def title_from(messages: Sequence[Message]) -> str | None:
    for message in messages:
        if message.role == "user":
            text = message.text.strip()
            if text:
                line = text.splitlines()[0].strip()
                return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return None


def parse_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        value = int(cursor)
    except ValueError:
        raise InvalidInput(
            "cursor", f"{cursor!r} is not a cursor this server issued; pass next_cursor as returned"
        ) from None
    if value < 0:
        raise InvalidInput("cursor", "must not be negative")
    return value

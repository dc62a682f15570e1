"""Looking inside a session, read-only: tokens in view by category, its spilled outputs, its
compactions and prunes over time. What `show --breakdown`, `contextfold ui` and the HTML export read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextfold.domain import CompactionRecord, Message, Session, ToolPart
from contextfold.names import AGENT_NAMES, HOOK_ORIGIN, PROXY_ORIGIN
from contextfold.policy.breakdown import CATEGORIES, split_view
from contextfold.results import Breakdown, BreakdownCategory, Status
from contextfold.store.base import OutputRecord
from contextfold.tokens.counting import TokenCounter, count_in_view

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Inspecting:
    """Read one tenant's sessions for a person to look at; nothing here writes."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def breakdown(self, session_id: str) -> Breakdown:
        """The view's tokens by category, adding up to `status(session_id).tokens_in_view`."""
        session = await self._scope.store.get_session(session_id)
        visible = await self._scope.view(session)
        status = await self._scope.status(session, visible)
        settings = self._scope.settings_for(session)
        budget = self._scope.budget(session, settings)
        split = split_view(session.system, visible, self._scope.counter(session.model, settings))
        # The stored total of the view is what `status` counts; a difference from its messages
        # (none, unless a total drifted) is shown, never spread over the categories.
        split.add("unattributed", status.tokens_counted - split.total)
        split.add("reported_extra", status.tokens_in_view - status.tokens_counted)
        return Breakdown(
            session_id=session.id,
            model=session.model,
            method=status.method,
            tokens_in_view=status.tokens_in_view,
            tokens_counted=status.tokens_counted,
            tokens_reported=status.tokens_reported,
            context_window=budget.context,
            reserved=budget.reserved,
            usable=status.usable,
            soft_threshold=int(status.usable * settings.soft_ratio),
            hard_threshold=int(status.usable * settings.hard_ratio),
            state=status.state,
            messages_in_view=len(visible),
            categories=[
                BreakdownCategory(name=name, label=label, tokens=split.tokens[name], known=name != "tool_definitions")
                for name, label in CATEGORIES
                if name not in ("reported_extra", "unattributed") or split.tokens[name]
            ],
        )

    # -- what the inspector shows beside the breakdown -------------------------------------------

    async def inspect_sessions(self, *, query: str = "") -> list[SessionRow]:
        """Every session of the tenant with where it stands, most recently active first; `query`
        keeps those whose id, title, model or source contains it (case-insensitive)."""
        rows: list[SessionRow] = []
        cursor: str | None = None
        wanted = query.strip().lower()
        while True:
            page = await self._scope.store.list_sessions(limit=500, cursor=cursor)
            for session in page.sessions:
                row = SessionRow(session, source_of(session), await self._scope.status(session))
                if not wanted or any(wanted in (v or "").lower() for v in (row.id, row.title, row.model, row.source)):
                    rows.append(row)
            if not (cursor := page.next_cursor):
                break
        rows.sort(key=lambda r: r.session.updated_at, reverse=True)
        return rows

    def session_counter(self, session: Session) -> TokenCounter:
        """The tokenizer the session is counted with."""
        return self._scope.counter(session.model, self._scope.settings_for(session))

    async def session_record(self, session_id: str) -> Session:
        """The session as stored (read-only): its settings, system prompt, counts and anchor."""
        return await self._scope.store.get_session(session_id)

    async def stored_page(self, session_id: str, *, after_seq: int, limit: int) -> list[tuple[Message, bool]]:
        """Stored messages after `after_seq`, hidden ones included, each with whether it is in view."""
        session = await self._scope.store.get_session(session_id)
        shown = {m.id for m in await self._scope.view(session)}
        batch = await self._scope.store.load_messages(session.id, after_seq=max(after_seq, 0), limit=limit, hidden=True)
        return [(m, m.id in shown) for m in batch]

    async def summaries(self, session_id: str) -> list[tuple[Message, CompactionRecord | None]]:
        """Every summary the session has had, oldest first, with the compaction that wrote it."""
        session = await self._scope.store.get_session(session_id)
        settings = self._scope.settings_for(session)
        records = {
            r.summary_id: r
            for r in await self._scope.store.compactions(session.id, limit=settings.ui_timeline_events)
            if r.summary_id
        }
        found: list[tuple[Message, CompactionRecord | None]] = []
        async for message in self._history(session.id):
            if message.summary:
                found.append((message, records.get(message.id)))
        return found[-settings.ui_timeline_events :]

    async def spilled_outputs(self, session_id: str) -> list[SpilledRow]:
        """The session's spilled outputs, oldest first, each with the preview the model was shown."""
        session = await self._scope.store.get_session(session_id)
        records = await self._scope.store.session_outputs(session.id)
        wanted = {r.id for r in records}
        previews: dict[str, tuple[int, str]] = {}
        async for message in self._history(session.id):
            for part in message.parts:
                spill = getattr(part, "spill_id", None)
                if spill in wanted and spill not in previews:
                    text = part.result_text if isinstance(part, ToolPart) else getattr(part, "text", "")
                    previews[spill] = (message.seq, text)
        return [
            SpilledRow(r, *previews.get(r.id, (None, ""))) for r in sorted(records, key=lambda r: (r.created_at, r.id))
        ]

    async def spilled_output(self, output_id: str) -> SpilledRow:
        """One spilled output of this tenant, with the preview the model was shown."""
        record = await self._scope.store.get_output(output_id)
        for row in await self.spilled_outputs(record.session_id):
            if row.record.id == record.id:
                return row
        return SpilledRow(record, None, "")

    async def life(self, session_id: str) -> Life:
        """Tokens in view turn by turn over the whole stored history, with every compaction and
        prune, reconstructed from the stored counts (see `Life`)."""
        session = await self._scope.store.get_session(session_id)
        settings = self._scope.settings_for(session)
        records = await self._scope.store.compactions(session.id, limit=settings.ui_timeline_events)
        by_marker = {r.marker_id: r for r in records if r.marker_id}
        counter = self._scope.counter(session.model, settings)
        points: list[LifePoint] = []
        events: list[LifeEvent] = []
        running = sum(p.tokens for p in session.system)
        turn = 0
        pending: dict[float, int] = {}  # prunes seen but not yet placed: when → tokens freed

        def place(at: float, seq: int) -> None:
            nonlocal running
            freed = pending.pop(at)
            events.append(LifeEvent("prune", seq, turn, at, running, running - freed, freed, "prune"))
            running -= freed

        async for message in self._history(session.id):
            for at in sorted(a for a in pending if a <= message.created_at):
                place(at, message.seq)
            record = by_marker.get(message.id)
            if record is not None:
                running = record.tokens_after
                events.append(
                    LifeEvent(
                        "compaction",
                        message.seq,
                        turn,
                        record.created_at,
                        record.tokens_before,
                        record.tokens_after,
                        record.tokens_freed,
                        record.summarizer,
                        record,
                    )
                )
            elif not message.is_compaction:  # a summary is counted in its record's `tokens_after`
                running += message.tokens
            for part in message.tool_parts:
                if part.compacted_at is not None:
                    freed = max(part.tokens - count_in_view(part, counter), 0)
                    pending[part.compacted_at] = pending.get(part.compacted_at, 0) + freed
            if message.starts_turn:
                turn += 1
            points.append(LifePoint(turn, message.seq, running))
        last = points[-1].seq if points else 0
        for at in sorted(pending):
            place(at, last)
        now = (await self._scope.status(session)).tokens_in_view
        points.append(LifePoint(turn, last, now))
        return Life(points, events[-settings.ui_timeline_events :])

    async def _history(self, session_id: str) -> AsyncIterator[Message]:
        """Every stored message, hidden ones included, a chunk at a time (memory follows a chunk)."""
        after = 0
        while batch := await self._scope.store.load_messages(session_id, after_seq=after, limit=_CHUNK, hidden=True):
            for message in batch:
                yield message
            after = batch[-1].seq


_CHUNK = 500


def source_of(session: Session) -> str:
    """Who writes the session: an import (of which agent's file), a hook, the proxy, or a harness."""
    meta = session.metadata
    if meta.origin == PROXY_ORIGIN:
        return "proxy"
    if meta.origin and meta.origin.startswith(HOOK_ORIGIN):  # its transcript is imported too: still the hooks'
        return f"{AGENT_NAMES.get(meta.origin.removeprefix(HOOK_ORIGIN), 'agent')} hook"
    agent = AGENT_NAMES.get(meta.source_format or "")
    if meta.imports or meta.imported_from:
        return f"import ({agent})" if agent else "import"
    if session.id.startswith("claude-code-"):
        return "Claude Code hook"
    if session.id.startswith("codex-"):
        return "Codex hook"
    return "harness"


@dataclass(frozen=True)
class SessionRow:
    session: Session
    source: str
    status: Status

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def title(self) -> str | None:
        return self.session.title

    @property
    def model(self) -> str:
        return self.session.model

    @property
    def root(self) -> str | None:
        """The project the session worked in, when its source said (the hooks and imports record
        the agent's working directory; older sessions may carry it among their metadata)."""
        if self.session.metadata.project:
            return self.session.metadata.project
        extra = self.session.metadata.model_extra or {}
        for key in ("cwd", "root", "project_root"):
            if isinstance(extra.get(key), str):
                return str(extra[key])
        return None


@dataclass(frozen=True)
class SpilledRow:
    record: OutputRecord
    seq: int | None
    """The stored message whose part was spilled (None when no part names it any more)."""
    preview: str
    """What the model was shown in its place: the preview and the hint."""


@dataclass(frozen=True)
class LifePoint:
    turn: int
    seq: int
    """The message after which the view held `tokens` (the last point: now)."""
    tokens: int


@dataclass(frozen=True)
class LifeEvent:
    kind: str
    """"compaction" or "prune"."""
    seq: int
    turn: int
    at: float
    before: int
    after: int
    freed: int
    by: str
    """The summarizer that wrote a compaction's summary (an agent's own: "claude_code", "codex")."""
    record: CompactionRecord | None = None


@dataclass(frozen=True)
class Life:
    """A session's tokens in view message by message (each point knows its turn). Reconstructed: each message adds its stored count, a
    compaction sets the count it recorded after, a prune takes off what its parts freed (their
    stored counts less the placeholder's) when the next message arrives; the last point is now."""

    points: list[LifePoint]
    events: list[LifeEvent]

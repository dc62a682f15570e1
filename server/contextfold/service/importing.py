"""Importing a transcript file into a session, so the session holds what the model had.

One import is one transaction. The file's messages are stored in order. Each compaction the agent
made is replayed as a compaction of the session: a marker and the agent's own summary are stored
(the summary becomes the anchored summary), the view moves past them (`Session.view`), the
history before stays stored but hidden, and a `CompactionRecord` notes the agent's own count.
The usage the provider reported last (after the last compaction) calibrates the count, exactly as
an `append` with `usage` does. A mark in the session's metadata (`import_marks`) remembers what
was read, so importing the grown file again reads and stores only what is new.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from contextfold.compaction.engine import CONTINUE_TEXT, compacted
from contextfold.config import Settings
from contextfold.domain import (
    CompactionPart,
    CompactionRecord,
    Message,
    Session,
    SessionState,
    SystemPrompt,
    TextPart,
    ToolPart,
    ToolResult,
    Usage,
    ViewAnchor,
    new_id,
)
from contextfold.errors import ConflictError, FormatError, InvalidInput, NotFoundError
from contextfold.formats import parse
from contextfold.formats.base import instruction_message
from contextfold.formats.usage import parse_usage
from contextfold.importers import (
    START,
    ImportedCompaction,
    ImportedTranscript,
    ImportFormat,
    detect_import_format,
    load_transcript,
    open_calls,
    resumable,
)
from contextfold.importers.agents import agent_session
from contextfold.importers.marks import ImportMark, find_mark, marks_in, new_mark, with_mark
from contextfold.policy import view
from contextfold.results import Brief, ImportResult, Status
from contextfold.service.ingest import Ingest
from contextfold.service.outputs import Outputs
from contextfold.store import SessionTransaction, TenantStore
from contextfold.tokens.counting import TokenCounter, count_message

ATTEMPTS = 3
"""Imports into one session that race are retried: the later one then reads only what is new."""
_MESSAGE_INDEX = re.compile(r"^messages\[(\d+)\]")


@dataclass(frozen=True)
class ImportTools:
    """What the service lends an import (as `SessionAccess` does for compaction)."""

    store: TenantStore
    outputs: Outputs
    default_model: str
    settings_for: Callable[[Session], Settings]
    counter_for: Callable[[str, Settings], TokenCounter]
    context_for: Callable[[Session, Settings], int]
    make_room: Callable[[int], Awaitable[None]]
    attach_results: Callable[
        [SessionTransaction, Sequence[ToolResult], TokenCounter, Ingest], Awaitable[tuple[int, int]]
    ]
    with_system: Callable[[Session, list[SystemPrompt], TokenCounter], Session]
    status: Callable[[Session], Awaitable[Status]]


class _MarksMoved(Exception):
    """Another import into the session finished between reading its marks and writing."""


async def import_file(
    tools: ImportTools,
    path: Path,
    *,
    session_id: str | None,
    format: str | None,
    model: str | None,
    owner: str,
) -> ImportResult:
    chosen = cast(ImportFormat, format or detect_import_format(path))
    # An agent's own session file goes where its hooks keep that session, so importing it again,
    # or after the hooks, adds only what is new to one session.
    session_id = session_id or agent_session(path, chosen)
    for _ in range(ATTEMPTS):
        try:
            return await _import_once(tools, path, session_id=session_id, format=chosen, model=model, owner=owner)
        except _MarksMoved:
            continue
    raise ConflictError(f"other imports into session {session_id!r} kept running meanwhile; run the import again")


async def _import_once(
    tools: ImportTools, path: Path, *, session_id: str | None, format: str | None, model: str | None, owner: str
) -> ImportResult:
    chosen = cast(ImportFormat, format or detect_import_format(path))
    existing = await _existing(tools.store, session_id)
    marks = marks_in(existing.metadata) if existing else []
    mark, prefix = find_mark(path, chosen, marks, session_id or "")
    size = path.stat().st_size
    if mark is not None and size == mark.bytes and existing is not None:
        return _nothing_new(existing, mark, chosen, await tools.status(existing))
    if mark is not None and not resumable(path, chosen):
        raise InvalidInput(
            "file",
            f"{path.name} was imported into session {session_id!r} before and has changed since; a JSON document "
            "cannot be imported in parts, so import it into a new session (give another session id)",
        )
    resume = mark.resume() if mark is not None else START
    transcript = load_transcript(path, chosen, resume)
    end = transcript.end_offset or size  # a JSON document is read whole
    new = new_mark(
        path,
        chosen,
        prefix,
        end=end,
        lines=transcript.end_line,
        pending_calls=open_calls(transcript.messages, transcript.format, resume.pending_calls),
        tail_uuids=transcript.tail_uuids or resume.tail_uuids,
    )
    await tools.make_room(max(end - resume.offset, 0))
    session_id = session_id or new_id("ses")
    create = Session(
        id=session_id,
        model=model or transcript.model or tools.default_model,
        title=transcript.title,
        metadata=SessionState(imported_from=path.name, source_format=transcript.source_format),
    )
    async with tools.store.write(session_id, create=create) as tx:
        if marks_in(tx.session.metadata) != marks:
            raise _MarksMoved
        writer = _Writer.start(tools, tx, owner, transcript, path.name)
        await writer.write()
        session = writer.session.model_copy(update={"metadata": with_mark(writer.session.metadata, mark, new)})
        await tx.save_session(session)
    return ImportResult(
        session_id=session_id,
        source_format=transcript.source_format,
        messages=len(writer.stored),
        tool_calls=writer.tool_calls,
        tool_results=writer.tool_results,
        spilled=writer.ingest.spilled,
        status=Brief.of(await tools.status(session)),
        compactions=writer.compactions,
        already_imported_lines=resume.line,
        skipped=dict(transcript.skipped),
        warnings=[*transcript.warnings, *writer.warnings],
    )


def _nothing_new(session: Session, mark: ImportMark, format: str, status: Status) -> ImportResult:
    return ImportResult(
        session_id=session.id,
        source_format=format,
        messages=0,
        tool_calls=0,
        tool_results=0,
        spilled=[],
        status=Brief.of(status),
        already_imported_lines=mark.lines,
    )


async def _existing(store: TenantStore, session_id: str | None) -> Session | None:
    if not session_id:
        return None
    try:
        return await store.get_session(session_id)
    except NotFoundError:
        return None


@dataclass
class _LastUsage:
    usage: Usage
    message_id: str
    after: int = 0
    """Tokens that reached the view after the report: later messages, and results of its own calls."""


@dataclass
class _Writer:
    tools: ImportTools
    tx: SessionTransaction
    session: Session
    transcript: ImportedTranscript
    file: str
    settings: Settings
    counter: TokenCounter
    ingest: Ingest
    stored: list[Message] = field(default_factory=list)
    tool_calls: int = 0
    tool_results: int = 0
    compactions: int = 0
    warnings: list[str] = field(default_factory=list)
    _last: _LastUsage | None = None

    @classmethod
    def start(
        cls, tools: ImportTools, tx: SessionTransaction, owner: str, transcript: ImportedTranscript, file: str
    ) -> _Writer:
        session = tx.session
        settings = tools.settings_for(session)
        ingest = Ingest(tx, tools.outputs, settings, context_window=tools.context_for(session, settings), owner=owner)
        counter = tools.counter_for(session.model, settings)
        return cls(tools, tx, session, transcript, file, settings, counter, ingest)

    def _same_tokenizer(self, model: str) -> bool:
        """Whether `model` counts like the session's model (a report from another tokenizer would mislead)."""
        return model == self.session.model or _tokenizer(self.tools.counter_for(model, self.settings)) == _tokenizer(
            self.counter
        )

    async def write(self) -> None:
        transcript = self.transcript
        if transcript.system:
            prompts = [SystemPrompt(role=p["role"], text=p["text"]) for p in transcript.system]  # type: ignore[arg-type]
            self.session = self.tools.with_system(self.session, prompts, self.counter)
        start = 0
        for compaction in transcript.compactions:
            await self._messages(start, compaction.summary_index)
            await self._compaction(compaction)
            start = compaction.summary_index + 1
        await self._messages(start, len(transcript.messages))
        self._calibrate()
        if not self.session.title and transcript.title:
            self.session = self.session.model_copy(update={"title": transcript.title})

    async def _messages(self, lo: int, hi: int) -> None:
        wire = self.transcript.messages[lo:hi]
        if not wire:
            return
        try:
            batch = parse(wire, self.transcript.format)
        except FormatError as exc:
            at = _MESSAGE_INDEX.sub(lambda m: f"messages[{int(m.group(1)) + lo}]", exc.path)
            raise InvalidInput(at, exc.problem) from exc
        attached, delta = await self.tools.attach_results(self.tx, batch.results, self.counter, self.ingest)
        # The transcript's system prompt is `transcript.system` (see `write`): an instruction opening
        # this slice of its messages was sent mid-conversation, so it stays in place.
        instructions = [instruction_message(prompt) for prompt in batch.system or []]
        new = [count_message(await self.ingest.message(m), self.counter) for m in [*instructions, *batch.messages]]
        reported = self._usages(new, wire, lo)
        stored = await self.tx.insert_messages(new)
        added = sum(m.tokens for m in stored) + delta
        if self._last is not None:
            self._last.after += added
        if reported is not None:
            index, usage = reported
            message = stored[index]
            self._last = _LastUsage(usage, message.id, sum(m.tokens for m in stored[index + 1 :]))
            self._last.after += message.tokens - count_message(_as_sent(message), self.counter).tokens
        self.session = self.session.model_copy(
            update={
                "message_count": self.session.message_count + len(stored),
                "tokens_stored": self.session.tokens_stored + added,
                "tokens_in_view": self.session.tokens_in_view + added,
            }
        )
        self.stored.extend(stored)
        calls = [p for m in stored for p in m.tool_parts]
        self.tool_calls += len(calls)
        self.tool_results += sum(1 for p in calls if p.is_finished) + attached

    def _usages(self, new: list[Message], wire: list[dict[str, Any]], lo: int) -> tuple[int, Usage] | None:
        """Put the reported usage on its assistant messages; the newest one, as (index in `new`, usage)."""
        sent = [lo + i for i, m in enumerate(wire) if m.get("role") == "assistant"]
        parsed = [i for i, m in enumerate(new) if m.role == "assistant"]
        newest = None
        for wire_index, index in zip(sent, parsed, strict=False):
            raw = self.transcript.usage.get(wire_index)
            if raw is None:
                continue
            try:
                usage = parse_usage(raw, f"messages[{wire_index}].usage")
            except FormatError as exc:
                self.warnings.append(f"reported usage ignored: {exc}")
                continue
            new[index] = new[index].model_copy(update={"usage": usage})
            newest = (index, usage)
        return newest

    async def _compaction(self, compaction: ImportedCompaction) -> None:
        """Replay the agent's compaction: its summary anchors the view; what came before is hidden."""
        session = self.session
        rows = view.in_view(await self.tx.rows(view.load_from(session.view)), session.view)
        head = [r for r in rows if not r.is_compaction]
        messages = self.transcript.messages
        following = messages[compaction.summary_index + 1] if compaction.summary_index + 1 < len(messages) else None
        auto = compaction.trigger == "auto"
        source = {"imported_from": self.transcript.source_format}
        new = [
            Message(role="user", parts=[CompactionPart(auto=auto)], metadata=source),
            Message(
                role="assistant",
                summary=True,
                parts=[TextPart(text=_text(messages[compaction.summary_index]), synthetic=True)],
                finish_reason="stop",
                metadata=source,
            ),
        ]
        if following.get("role") == "assistant" if following is not None else auto:
            # The model answered the summary directly (an automatic compaction continues the task
            # unprompted, also when its answer is not in the file yet): keep the roles alternating.
            new.append(Message(role="user", parts=[TextPart(text=CONTINUE_TEXT, synthetic=True)], metadata=source))
        stored = await self.tx.insert_messages([count_message(m, self.counter) for m in new])
        after = sum(p.tokens for p in session.system) + sum(m.tokens for m in stored)
        note = f"made by {self.transcript.source_format} ({compaction.trigger or 'trigger unknown'}), imported from {self.file}"
        if compaction.pre_tokens is not None:
            note += f"; the agent counted {compaction.pre_tokens:,} tokens before it"
        await self.tx.add_compaction(
            CompactionRecord(
                summarizer=self.transcript.source_format,
                auto=auto,
                tokens_before=session.tokens_in_view,
                tokens_after=after,
                head_messages=len(head),
                head_tokens=sum(r.tokens for r in head),
                summary_tokens=stored[1].tokens,
                marker_id=stored[0].id,
                summary_id=stored[1].id,
                notes=[note],
            )
        )
        anchor = ViewAnchor(marker_seq=stored[0].seq, summary_seq=stored[1].seq)
        self.session = compacted(session, anchor, stored, after)
        self._last = None
        self.stored.extend(stored)
        self.compactions += 1

    def _calibrate(self) -> None:
        """Trust the provider's last report as `append` does: `tokens_in_view` then was the baseline."""
        last = self._last
        if last is None:
            return
        measured_for = self.transcript.model
        if measured_for and not self._same_tokenizer(measured_for):
            self.warnings.append(
                f"the usage the file reports was measured by {measured_for}'s tokenizer, not {self.session.model}'s: "
                "it does not calibrate the count"
            )
            return
        self.session = self.session.model_copy(
            update={
                "last_usage": last.usage,
                "last_usage_message_id": last.message_id,
                "usage_baseline": self.session.tokens_in_view - last.after,
            }
        )


def _tokenizer(counter: TokenCounter) -> tuple[object, ...]:
    return (counter.method, counter.encoding, counter.factor)


def _as_sent(message: Message) -> Message:
    """`message` as the model produced it: its tool calls without the results that came later."""
    parts = [
        p.model_copy(update={"state": "pending", "output": None, "error": None, "attachments": []})
        if isinstance(p, ToolPart)
        else p
        for p in message.parts
    ]
    return message.model_copy(update={"parts": parts})


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


__all__ = ["ImportMark", "ImportTools", "import_file"]

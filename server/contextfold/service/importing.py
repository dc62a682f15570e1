"""Importing a transcript file into a session, so the session holds what the model had.

One import is one transaction. The file's messages are stored in order, a chunk at a time as the
file is read (`importers.TranscriptStream`): memory holds a chunk, not the file, and a failure
anywhere rolls the whole import back, so it is still all or nothing. Each compaction the agent
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
    Chunk,
    ImportedCompaction,
    ImportedTranscript,
    ImportFormat,
    TranscriptStream,
    detect_import_format,
    open_transcript,
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
    # Reading the file starts here (a Claude Code file's thread is picked in a first pass); its
    # messages are read, converted and stored chunk by chunk inside the transaction.
    stream = open_transcript(path, chosen, resume)
    await tools.make_room(max(size - resume.offset, 0))
    session_id = session_id or new_id("ses")
    create = Session(
        id=session_id,
        model=model or stream.model or tools.default_model,
        metadata=SessionState(imported_from=path.name, source_format=stream.source_format),
    )
    async with tools.store.write(session_id, create=create) as tx:
        if marks_in(tx.session.metadata) != marks:
            raise _MarksMoved
        writer = _Writer.start(tools, tx, owner, stream, path.name)
        transcript = await writer.write()
        new = new_mark(
            path,
            chosen,
            prefix,
            end=transcript.end_offset or size,  # a JSON document is read whole
            lines=transcript.end_line,
            pending_calls=transcript.pending_calls,
            tail_uuids=transcript.tail_uuids or resume.tail_uuids,
            queued=transcript.queued,
            unreadable=(mark.unreadable if mark else 0) + transcript.unreadable,
            deep_values=(mark.deep_values if mark else 0) + transcript.deep_values,
        )
        session = writer.session.model_copy(update={"metadata": with_mark(writer.session.metadata, mark, new)})
        cwd = transcript.metadata.get("cwd")
        if isinstance(cwd, str) and cwd and not session.metadata.project:  # what `search` calls its project
            session = session.model_copy(update={"metadata": session.metadata.model_copy(update={"project": cwd})})
        await tx.save_session(session)
    return ImportResult(
        session_id=session_id,
        source_format=transcript.source_format,
        messages=writer.stored,
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


def _stamp(
    messages: list[Message], wire: list[dict[str, Any]], first: int, times: dict[int, float], format: str
) -> None:
    """Give each parsed message the time its transcript record was written (`JsonlStream.times`),
    so a search by time finds an imported session when it happened, not when it was imported.
    A wire message carrying only tool results makes no message of its own; when the count still
    does not add up, the messages keep the time of the import."""
    if not times:
        return
    producing = [first + i for i, w in enumerate(wire) if _makes_message(w, format)]
    if len(producing) != len(messages):
        return
    for message, index in zip(messages, producing):
        at = times.get(index)
        if at is not None and not message.created_at:
            message.created_at = at


def _makes_message(wire: dict[str, Any], format: str) -> bool:
    if format == "openai":
        return wire.get("role") != "tool"
    content = wire.get("content")
    if not isinstance(content, list) or not content:
        return True
    return any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content)


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
    stream: TranscriptStream
    file: str
    settings: Settings
    counter: TokenCounter
    ingest: Ingest
    stored: int = 0
    """Messages stored (counted, not kept: an import holds a chunk of the file at a time)."""
    tool_calls: int = 0
    tool_results: int = 0
    compactions: int = 0
    warnings: list[str] = field(default_factory=list)
    _last: _LastUsage | None = None

    @classmethod
    def start(
        cls, tools: ImportTools, tx: SessionTransaction, owner: str, stream: TranscriptStream, file: str
    ) -> _Writer:
        session = tx.session
        settings = tools.settings_for(session)
        ingest = Ingest(tx, tools.outputs, settings, context_window=tools.context_for(session, settings), owner=owner)
        counter = tools.counter_for(session.model, settings)
        return cls(tools, tx, session, stream, file, settings, counter, ingest)

    def _same_tokenizer(self, model: str) -> bool:
        """Whether `model` counts like the session's model (a report from another tokenizer would mislead)."""
        return model == self.session.model or _tokenizer(self.tools.counter_for(model, self.settings)) == _tokenizer(
            self.counter
        )

    async def write(self) -> ImportedTranscript:
        """Read the stream and store it chunk by chunk; what it said besides the messages."""
        prompted = False
        for chunk in self.stream.chunks():
            if not prompted:
                prompted = True
                self._system()  # final once the first chunk is read
            start = 0
            for compaction in chunk.compactions:
                await self._messages(chunk, start, compaction.summary_index - chunk.start)
                await self._compaction(chunk, compaction)
                start = compaction.summary_index - chunk.start + 1
            await self._messages(chunk, start, len(chunk.messages))
        transcript = self.stream.result()
        if not prompted:
            self._system()
        self._calibrate(transcript.model)
        if not self.session.title and transcript.title:
            self.session = self.session.model_copy(update={"title": transcript.title})
        return transcript

    def _system(self) -> None:
        if self.stream.system:
            prompts = [SystemPrompt(role=p["role"], text=p["text"]) for p in self.stream.system]  # type: ignore[arg-type]
            self.session = self.tools.with_system(self.session, prompts, self.counter)

    async def _messages(self, chunk: Chunk, lo: int, hi: int) -> None:
        wire = chunk.messages[lo:hi]
        if not wire:
            return
        first = chunk.start + lo  # the index of wire[0] in the whole transcript
        try:
            batch = parse(wire, self.stream.format)
        except FormatError as exc:
            at = _MESSAGE_INDEX.sub(lambda m: f"messages[{int(m.group(1)) + first}]", exc.path)
            raise InvalidInput(at, exc.problem) from exc
        attached, delta = await self.tools.attach_results(self.tx, batch.results, self.counter, self.ingest)
        # The transcript's system prompt is `transcript.system` (see `write`): an instruction opening
        # this slice of its messages was sent mid-conversation, so it stays in place.
        instructions = [instruction_message(prompt) for prompt in batch.system or []]
        _stamp(batch.messages, wire, first, self.stream.times, self.stream.format)
        new = [count_message(await self.ingest.message(m), self.counter) for m in [*instructions, *batch.messages]]
        reported = self._usages(new, wire, first, chunk.usage)
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
        self.stored += len(stored)
        calls = [p for m in stored for p in m.tool_parts]
        self.tool_calls += len(calls)
        self.tool_results += sum(1 for p in calls if p.is_finished) + attached

    def _usages(
        self, new: list[Message], wire: list[dict[str, Any]], first: int, reports: dict[int, dict[str, Any]]
    ) -> tuple[int, Usage] | None:
        """Put the reported usage on its assistant messages; the newest one, as (index in `new`, usage).
        `first`: the index of `wire[0]` in the whole transcript, by which `reports` are keyed."""
        sent = [first + i for i, m in enumerate(wire) if m.get("role") == "assistant"]
        parsed = [i for i, m in enumerate(new) if m.role == "assistant"]
        newest = None
        for wire_index, index in zip(sent, parsed, strict=False):
            raw = reports.get(wire_index)
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

    async def _compaction(self, chunk: Chunk, compaction: ImportedCompaction) -> None:
        """Replay the agent's compaction: its summary anchors the view; what came before is hidden."""
        session = self.session
        rows = view.in_view(await self.tx.rows(view.load_from(session.view)), session.view)
        head = [r for r in rows if not r.is_compaction]
        messages, at = chunk.messages, compaction.summary_index - chunk.start
        # The chunk holds the message after the summary whenever the file does (see `Chunk`).
        following = messages[at + 1] if at + 1 < len(messages) else None
        auto = compaction.trigger == "auto"
        source_format = self.stream.source_format
        source = {"imported_from": source_format}
        new = [
            Message(role="user", parts=[CompactionPart(auto=auto)], metadata=source),
            Message(
                role="assistant",
                summary=True,
                parts=[TextPart(text=_text(messages[at]), synthetic=True)],
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
        note = f"made by {source_format} ({compaction.trigger or 'trigger unknown'}), imported from {self.file}"
        if compaction.pre_tokens is not None:
            note += f"; the agent counted {compaction.pre_tokens:,} tokens before it"
        await self.tx.add_compaction(
            CompactionRecord(
                summarizer=source_format,
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
        self.stored += len(stored)
        self.compactions += 1

    def _calibrate(self, measured_for: str | None) -> None:
        """Trust the provider's last report as `append` does: `tokens_in_view` then was the baseline.
        `measured_for`: the model the file says it used."""
        last = self._last
        if last is None:
            return
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

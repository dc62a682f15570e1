"""The conversation as contextfold stores it: sessions, messages and their parts.

These types are format-neutral. `formats/` translates Anthropic and OpenAI messages to and from
them; `store/` persists them; the policies read them. A tool call and its result are one
`ToolPart`: a result arriving later completes the part of the earlier assistant message.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant"]
ToolState = Literal["pending", "running", "completed", "error"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str
    synthetic: bool = False
    """Written by contextfold itself (a continue message, a note), not by the user or model."""
    spill_id: str | None = None
    """Set when the text was too large for the window: `text` is a preview, the whole is spilled."""
    tokens: int = 0


class ReasoningPart(_Model):
    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    signature: str | None = None
    """Opaque provider signature, kept byte for byte so the block can be replayed."""
    redacted_data: str | None = None
    """Set for Anthropic `redacted_thinking`: the encrypted payload, opaque."""
    tokens: int = 0


class FilePart(_Model):
    """An image, PDF or other attachment ("media")."""

    type: Literal["file"] = "file"
    mime: str
    filename: str | None = None
    data: str | None = None
    """Base64 payload, when the attachment was sent inline."""
    url: str | None = None
    spill_id: str | None = None
    omitted: bool = False
    """Overflow recovery left this attachment out of the view (kept in the store)."""
    tokens: int = 0

    @property
    def is_media(self) -> bool:
        return self.mime.startswith("image/") or self.mime == "application/pdf"


class ToolPart(_Model):
    """A tool call and, once it arrives, its result."""

    type: Literal["tool"] = "tool"
    call_id: str
    name: str
    input: Any = Field(default_factory=dict)
    """The call's arguments as a JSON value (normally an object)."""
    raw_arguments: str | None = None
    """The exact arguments string when the call came as OpenAI JSON text, so it renders back unchanged."""
    state: ToolState = "pending"
    output: str | None = None
    error: str | None = None
    """The error text of a failed call (state `error`)."""
    attachments: list[FilePart] = Field(default_factory=list)
    """Media returned by the tool alongside its text output."""
    spill_id: str | None = None
    compacted_at: float | None = None
    """When prune cleared this output from the view (epoch seconds); the output itself is kept."""
    input_cleared: bool = False
    """Prune cleared the call's input from the view too; `input` itself is kept."""
    view_cap: int | None = None
    """Overflow recovery cut this output to its first `view_cap` characters in the view (kept whole)."""
    view_text: str | None = None
    """The `regions` strategy shows this summary of a run of tool calls instead of the output."""
    tokens: int = 0

    @property
    def is_finished(self) -> bool:
        return self.state in ("completed", "error")

    @property
    def result_text(self) -> str:
        """The text the model sees as this call's result."""
        if self.state == "error":
            return self.error if self.error is not None else (self.output or "")
        return self.output or ""


class CompactionPart(_Model):
    """Marks the point where older history was replaced by a summary."""

    type: Literal["compaction"] = "compaction"
    auto: bool = False
    overflow: bool = False
    tail_start_id: str | None = None
    tokens: int = 0


Part = Annotated[
    TextPart | ReasoningPart | FilePart | ToolPart | CompactionPart,
    Field(discriminator="type"),
]


class Usage(_Model):
    """Token usage a provider reported for one model call."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total_input(self) -> int:
        """Everything the model read: fresh input plus cache reads and writes."""
        return self.input + self.cache_read + self.cache_write


class Message(_Model):
    id: str = ""
    """Assigned by the store when the message is appended; sortable within a session."""
    session_id: str = ""
    seq: int = 0
    role: Role
    parts: list[Part] = Field(default_factory=list)
    name: str | None = None
    """The sender name some formats carry (OpenAI `name`)."""
    parent_id: str | None = None
    summary: bool = False
    """This assistant message is a compaction summary."""
    finish_reason: str | None = None
    error: str | None = None
    usage: Usage | None = None
    created_at: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    tokens: int = 0
    """Stored count: the parts plus the per-message overhead."""
    view_tokens: int | None = None
    """What the message costs in the view (pruned outputs replaced by a placeholder); None = `tokens`."""

    @property
    def in_view_tokens(self) -> int:
        return self.tokens if self.view_tokens is None else self.view_tokens

    @property
    def is_compaction(self) -> bool:
        """A compaction marker or summary: replaced, never kept as history, by the next compaction."""
        return self.summary or self.compaction is not None

    @property
    def starts_turn(self) -> bool:
        """A user message that is not a compaction marker starts a turn (results never form messages)."""
        return self.role == "user" and self.compaction is None

    @property
    def tool_parts(self) -> list[ToolPart]:
        return [p for p in self.parts if isinstance(p, ToolPart)]

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def compaction(self) -> CompactionPart | None:
        return next((p for p in self.parts if isinstance(p, CompactionPart)), None)


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A message without its parts: enough for turn and tail arithmetic on huge sessions."""

    id: str
    seq: int
    role: Role
    tokens: int
    """What the message costs in the view (pruned outputs as placeholders); never recounted."""
    turn_start: bool
    """A user message that is not a compaction marker: it opens a turn."""
    summary: bool = False

    @property
    def is_compaction(self) -> bool:
        """A compaction marker or summary: replaced, never kept as history, by the next compaction."""
        return self.summary or (self.role == "user" and not self.turn_start)


class Splice(_Model):
    """A range compaction: messages `first_seq`..`last_seq` shown as a marker and a summary
    (`marker_seq`, `summary_seq`), in the place the range had; `kept` are pinned messages inside
    the range, still shown after the summary."""

    first_seq: int
    last_seq: int
    marker_seq: int
    summary_seq: int
    kept: list[int] = Field(default_factory=list)


class ViewAnchor(_Model):
    """Where the latest compaction put the start of the view (sequence numbers in the session)."""

    marker_seq: int
    summary_seq: int
    tail_start_seq: int | None = None
    """First message kept verbatim from before the marker; None = nothing kept."""
    prompt_seq: int | None = None
    """A copy of the request the kept tail answers, written with the summary and shown between
    the summary and the tail (the tail starts inside the request's turn); None = no copy."""
    after_seq: int | None = None
    """Set once the summary was edited (`summary_seq` then names the edited copy): what came after
    the original summary, which is the part of the view that follows the tail."""
    splices: list[Splice] = Field(default_factory=list)
    """Range compactions in the view, oldest first. A session whose only compactions are ranges has
    an anchor with `marker_seq` and `summary_seq` 0 (no such message: everything is shown)."""
    pinned_seqs: list[int] = Field(default_factory=list)
    """Pinned messages from before the tail, shown verbatim and in order between the summary and
    the request copy: a compaction never summarizes a pinned message away."""


class CompactionRecord(_Model):
    """One compaction, as the audit log keeps it."""

    id: str = ""
    session_id: str = ""
    created_at: float = 0.0
    strategy: str = "anchored"
    summarizer: str
    """The summarizer whose summary was kept."""
    fallbacks: list[str] = Field(default_factory=list)
    """Why each summarizer tried before it was passed over (`anthropic: HTTP 500 …`)."""
    auto: bool = False
    overflow: bool = False
    tokens_before: int
    tokens_after: int
    head_messages: int
    head_tokens: int
    summary_tokens: int
    tail_start_id: str | None = None
    marker_id: str | None = None
    summary_id: str | None = None
    pinned: list[str] = Field(default_factory=list)
    """Facts code had to add to the summarizer's text."""
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    notes: list[str] = Field(default_factory=list)
    outputs_cut: int = 0
    """Tool outputs of the kept tail cut down in view so the tail fits its budget (kept whole)."""
    view_before: ViewAnchor | None = None
    """The view before this compaction (None: the whole history was in view): what undo restores."""
    written_ids: list[str] = Field(default_factory=list)
    """Every message this compaction wrote (marker, summary, request copy, continue note)."""
    cut_marks: list[tuple[str, int, int]] = Field(default_factory=list)
    """(message id, part index, tokens freed) of each tail output it cut down in view."""
    undone_at: float | None = None
    """When `undo` took this compaction back (it stays in the history, marked)."""
    edited_by: str | None = None
    """Set on an edit of the summary (strategy "edit"): who made it."""

    @property
    def tokens_freed(self) -> int:
        return self.tokens_before - self.tokens_after


class SystemPrompt(_Model):
    """A session-level instruction block (OpenAI `system` / `developer`, Anthropic `system`)."""

    role: Literal["system", "developer"] = "system"
    text: str
    tokens: int = 0


class PruneTotals(_Model):
    """What prune has done to a session so far (for `status`)."""

    count: int = 0
    tokens_freed: int = 0


class LastCompaction(_Model):
    """When the latest anchored compaction ran and what it left (the cooldown reads it)."""

    at: float
    tokens_after: int


class Pin(_Model):
    """Something a person or an agent pinned to a session: stored messages (`first_seq` to
    `last_seq`, one message when equal) that stay verbatim in the view, or a note carried word
    for word into every summary's Constraints."""

    id: str
    first_seq: int | None = None
    last_seq: int | None = None
    note: str | None = None
    created_at: float = 0.0
    by: str | None = None
    """Who pinned it (a free label: "user", "agent", a CLI user)."""

    def covers(self, seq: int) -> bool:
        return self.first_seq is not None and self.last_seq is not None and self.first_seq <= seq <= self.last_seq

    @property
    def reference(self) -> str:
        """`m12`, `m10..m20` or the note."""
        if self.first_seq is None or self.last_seq is None:
            return self.note or ""
        return f"m{self.first_seq}" if self.first_seq == self.last_seq else f"m{self.first_seq}..m{self.last_seq}"


class LastPrune(_Model):
    """What the latest prune marked, so `undo` can take it back exactly."""

    at: float
    marks: list[tuple[str, int, int]] = Field(default_factory=list)
    """(message id, part index, tokens freed) of each output it cleared."""
    undone_at: float | None = None


class Preview(_Model):
    """The latest dry run's outcome, kept so `apply` can write exactly it (`service/steering.py`)."""

    token: str
    kind: Literal["compact", "prune"]
    fingerprint: str
    """The view it was planned on (`steering.fingerprint`): apply refuses once this changed."""
    summary: str | None = None
    summarizer: str | None = None
    pinned: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)
    """Prune: the options it ran with (keep_tool_uses, clear_at_least, exclude_tools, clear_inputs)."""
    parts: list[tuple[str, int]] = Field(default_factory=list)
    """Prune: (message id, part index) of each output it would clear."""


class SessionState(BaseModel):
    """What contextfold keeps about a session beyond its counts: typed, stored as one JSON value.

    Unknown keys are kept as they are, so a database a newer contextfold wrote loses nothing.
    """

    model_config = ConfigDict(extra="allow")

    prunes: PruneTotals = Field(default_factory=PruneTotals)
    last_compaction: LastCompaction | None = None
    pins: list[Pin] = Field(default_factory=list)
    """What is pinned to the session, oldest first (`service/steering.py`)."""
    pins_made: int = 0
    """Pins ever made: the next pin's id is `p<pins_made + 1>`."""
    last_prune: LastPrune | None = None
    """What the latest prune marked (`undo` takes it back)."""
    preview: Preview | None = None
    """The latest dry run of `compact` or `prune`, for `apply`."""
    imports: list[dict[str, Any]] = Field(default_factory=list)
    """One mark per transcript file imported into the session (`import_marks.ImportMark`)."""
    imported_from: str | None = None
    """The file name the session was first imported from, and its format."""
    source_format: str | None = None
    project: str | None = None
    """The project root (the agent's working directory) the session ran in, when its hooks or an
    import of its transcript said: `search(within="project")` searches the sessions sharing it."""
    origin: str | None = None
    """What made the session when no client asked for it by name: "proxy" for the record of a
    `contextfold proxy` connection (`names.PROXY_ORIGIN`), which `gc` expires once idle
    `proxy_session_retention_hours`."""

    def pinned_seqs(self) -> frozenset[int]:
        """Every message seq a pin covers."""
        seqs: set[int] = set()
        for pin in self.pins:
            if pin.first_seq is not None and pin.last_seq is not None:
                seqs.update(range(pin.first_seq, pin.last_seq + 1))
        return frozenset(seqs)

    def pinned_notes(self) -> list[str]:
        """The pinned notes, oldest first."""
        return [pin.note for pin in self.pins if pin.note is not None and pin.first_seq is None]


class Session(_Model):
    id: str
    owner: str = Field(default="", exclude=True)
    """The tenant that owns the session ('' locally); set by the store, never shown to clients.
    Session ids are per owner: two tenants may each have a session called "x"."""
    title: str | None = None
    model: str = "default"
    settings: dict[str, Any] = Field(default_factory=dict)
    """Per-session overrides of any setting (see `config.Settings`)."""
    system: list[SystemPrompt] = Field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    message_count: int = 0
    tokens_stored: int = 0
    """Every stored message's count plus the system prompt: the whole history."""
    tokens_in_view: int = 0
    """What the model would be sent now: the system prompt plus the messages in view."""
    last_usage: Usage | None = None
    last_usage_message_id: str | None = None
    usage_baseline: int = 0
    """`tokens_in_view` as counted when `last_usage` was reported; what changed since is counted."""
    view: ViewAnchor | None = None
    """Set by compaction: the model sees the marker, the summary, the kept tail and what came after."""
    metadata: SessionState = Field(default_factory=SessionState)
    revision: int = 0
    """Kept by the store: each write transaction on the session takes the next revision, and every
    message it inserts or changes (a part included) is stamped with it (`changed_messages`)."""
    reset_revision: int = 0
    """Kept by the store: the revision of the last transaction that deleted a message, which a
    reader holding an older copy of the view cannot follow message by message."""
    compaction_count: int = 0
    """Kept by the store as compactions are recorded (`add_compaction`): how many the session has had."""
    compaction_tokens_freed: int = 0
    """Kept by the store with `compaction_count`: the tokens those compactions freed in all."""


class ToolResult(_Model):
    """A tool result as it arrives, before it is attached to its call."""

    call_id: str
    output: str
    is_error: bool = False
    attachments: list[FilePart] = Field(default_factory=list)
    source: str = ""
    """Where in the request it came from (e.g. `messages[3].content[0]`), for error messages."""


def complete_tool_part(part: ToolPart, result: ToolResult) -> ToolPart:
    """Return `part` with `result` attached (a new object; the input is not modified)."""
    update: dict[str, Any] = {"attachments": list(result.attachments)}
    if result.is_error:
        update.update(state="error", error=result.output, output=None)
    else:
        update.update(state="completed", output=result.output, error=None)
    return part.model_copy(update=update)


# -- identifiers ---------------------------------------------------------------------------------

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class _MonotonicUlid:
    """ULID-style ids: 48-bit milliseconds + 80 random bits, strictly increasing in one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def __call__(self) -> str:
        with self._lock:
            value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
            if value <= self._last:
                value = self._last + 1
            self._last = value
        chars = []
        for _ in range(26):
            value, digit = divmod(value, 32)
            chars.append(_CROCKFORD[digit])
        return "".join(reversed(chars))


new_ulid = _MonotonicUlid()


def new_id(prefix: str) -> str:
    """A new sortable id such as `msg_01J…`."""
    return f"{prefix}_{new_ulid()}"

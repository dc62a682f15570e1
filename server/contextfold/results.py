"""What the service returns. These models are also the MCP tools' output schemas, so they stay
lean: every field here is read by a model on every `tools/list`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from .policy.overflow import State


class TokenCount(BaseModel):
    tokens: int
    model: str
    method: Literal["exact", "estimate"]
    encoding: str | None
    factor: float = 1.0


class Status(BaseModel):
    session_id: str
    model: str
    model_known: bool
    method: Literal["exact", "estimate"]
    tokens_in_view: int
    tokens_counted: int
    tokens_reported: int | None
    usable: int
    context_window: int
    ratio: float
    state: State
    recommended_action: str
    message_count: int
    tokens_stored: int


class SessionInfo(BaseModel):
    id: str
    title: str | None
    model: str
    message_count: int
    tokens_in_view: int
    updated_at: float


class SessionList(BaseModel):
    sessions: list[SessionInfo]
    next_cursor: str | None


class Deleted(BaseModel):
    session_id: str
    deleted: bool


class AppendedMessage(BaseModel):
    id: str
    role: str
    tokens: int


class SpilledOutput(BaseModel):
    output_id: str
    call_id: str | None
    bytes: int
    lines: int


class AppendResult(BaseModel):
    messages: list[AppendedMessage]
    results_attached: int
    """Tool results that completed calls from earlier appends."""
    spilled: list[SpilledOutput]
    """Outputs too large for the context: stored whole, replaced in view by a preview with a hint."""
    system_updated: bool
    status: Status


class Context(BaseModel):
    format: Literal["anthropic", "openai"]
    system: list[dict[str, Any]] | None
    messages: list[dict[str, Any]]
    tokens: int
    next_cursor: str | None


class ImportResult(BaseModel):
    session_id: str
    source_format: str
    messages: int
    tool_calls: int
    tool_results: int
    spilled: list[SpilledOutput]
    status: Status


class SpillResult(BaseModel):
    output_id: str
    bytes: int
    lines: int
    truncated: bool
    preview: str
    """The text to put in the context: the whole text when it is small, else a preview and a hint."""


class OutputRead(BaseModel):
    output_id: str
    total_lines: int
    text: str
    """Numbered lines (`N<TAB>line`), or grep-style matches (`N:match`, `N-context`, `--` between groups)."""
    matches: int | None = None
    has_more: bool
    next_offset: int | None = None


class PruneResult(BaseModel):
    applied: bool
    dry_run: bool
    reason: str
    parts: int
    tokens_freed: int
    status: Status


class TailResult(BaseModel):
    tail_start_id: str | None
    head_messages: int
    tail_messages: int
    head_tokens: int
    tail_tokens: int
    budget: int
    split: bool


class GcResult(BaseModel):
    dry_run: bool
    outputs_removed: int
    files_removed: int
    bytes_freed: int
    bytes_kept: int

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


class AppendResult(BaseModel):
    messages: list[AppendedMessage]
    results_attached: int
    """Tool results that completed calls from earlier appends."""
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
    status: Status

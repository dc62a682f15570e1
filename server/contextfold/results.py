"""What the service returns. These models are also the MCP tools' output schemas, so they stay
lean: every field here is read by a model on every `tools/list`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from contextfold.names import OverflowState as State


class TokenCount(BaseModel):
    tokens: int
    model: str
    method: Literal["exact", "estimate"]
    encoding: str | None
    factor: float = 1.0


class CompactionSummary(BaseModel):
    at: float
    summarizer: str
    fallbacks: list[str]
    tokens_before: int
    tokens_after: int
    auto: bool
    overflow: bool


class CompactionMetrics(BaseModel):
    compactions: int
    tokens_freed: int
    prunes: int = 0
    prune_tokens_freed: int = 0
    recent: list[CompactionSummary]
    """The last compactions, newest first (at most 10)."""


class Status(BaseModel):
    session_id: str
    model: str
    model_known: bool
    method: Literal["exact", "estimate"]
    tokens_in_view: int
    """What the budget is judged on: the larger of `tokens_counted` and `tokens_reported`."""
    tokens_counted: int
    """contextfold's own count of the view (`method`: exact, or an estimate for the model)."""
    tokens_reported: int | None
    """The provider's own count at its last usage report, plus what was counted since (None: no report)."""
    usable: int
    context_window: int
    ratio: float
    state: State
    recommended_action: str
    message_count: int
    tokens_stored: int
    compaction: CompactionMetrics | None = None
    """Present once the session has been compacted or pruned."""
    cache_hit_rate: float | None = None
    """Cache reads over total input in the reported usage (None until usage is reported)."""
    cache_warning: str | None = None
    pinned_tokens: int | None = None
    """What the session's pins cost in view (None: nothing pinned); counted in `tokens_in_view`."""
    reported_by: str | None = None
    """Who made the usage report behind `tokens_reported`: the agent whose transcript was imported
    ("Claude Code", "Codex"), else "the provider" (None with no report)."""


class Brief(BaseModel):
    """The session's standing after a change: enough to decide the next action (see `status`)."""

    session_id: str
    tokens_in_view: int
    tokens_reported: int | None
    tokens_stored: int
    usable: int
    ratio: float
    state: State
    recommended_action: str

    @classmethod
    def of(cls, status: Status) -> Brief:
        return cls.model_validate(status.model_dump(include=set(cls.model_fields)))


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
    status: Brief


class Context(BaseModel):
    format: Literal["anthropic", "openai"]
    system: list[dict[str, Any]] | None
    messages: list[dict[str, Any]]
    tokens: int
    """Of the whole view (or page), whatever part of it `messages` carries."""
    next_cursor: str | None
    version: str | None = None
    """Names the whole view's rendered messages (None for a page): `N.digest`, N messages. Passed
    back as `since`, the answer carries only the messages after the prefix it names when the
    view still starts with it; `messages` are always the last ones of the view `version` names."""


class ImportResult(BaseModel):
    session_id: str
    source_format: str
    messages: int
    """Messages stored by this import, the marker and summary of each replayed compaction included."""
    tool_calls: int
    tool_results: int
    spilled: list[SpilledOutput]
    status: Brief
    compactions: int = 0
    """Compactions the agent made, replayed: the view starts at the last one's summary."""
    already_imported_lines: int = 0
    """Lines of the file an earlier import into this session already read; only what follows was read."""
    skipped: dict[str, int] = {}
    """Conversation records left out, by reason (sidechain, branch, api_error_message, …)."""
    warnings: list[str] = []


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


class HistoryPage(BaseModel):
    text: str
    """One block per message found or read: a header `m<seq> <role>` (`, hidden` when out of
    view), then its matching lines or, reading from `at`, its text (cut when long)."""
    next_at: str | None
    """Where to continue (pass as `at`), when the answer stopped at its bound."""


class FoundMessage(BaseModel):
    """One message a history search found, or read back with `expand`."""

    session_id: str
    ref: str
    """`m<seq>`: how summaries cite it and how `expand` names it."""
    message_id: str
    role: str
    created_at: float
    hidden: bool
    """Out of the session's view (compacted, pruned or removed); still stored."""
    text: str
    """A snippet with the matching words in **bold**; the message itself when expanded."""
    cited_by: list[str] = Field(default_factory=list)
    """The summary bullets citing it, each as `m<summary seq>: <bullet>`."""


class SearchPage(BaseModel):
    """A history search's answer: the hits best first (or the expanded messages in order), and
    the same rendered as text for a model, bounded by `search_answer_tokens`."""

    text: str
    hits: list[FoundMessage]
    next_offset: int | None = None
    """Pass as `offset` for the next page; None when there is none."""
    next_at: str | None = None
    """Regex mode and reading from `at`: where to go on (pass as `at`), when the answer stopped."""
    notes: list[str] = Field(default_factory=list)
    """What the answer should say about itself: fell back to any word, index still building, cut."""


class PruneResult(BaseModel):
    applied: bool
    dry_run: bool
    reason: str
    parts: int
    tokens_freed: int
    status: Brief
    cleared: list[str] = []
    """Dry runs: the outputs that would go (`m12 bash`); every other output stays."""
    token: str | None = None
    """Dry runs: pass as `apply` to clear exactly these, if the view has not changed."""


class TailResult(BaseModel):
    tail_start_id: str | None
    head_messages: int
    tail_messages: int
    head_tokens: int
    tail_tokens: int
    budget: int
    split: bool


class GcSession(BaseModel):
    """A session gc removed (or, in a dry run, would remove), and why."""

    session_id: str
    owner: str
    """Its tenant ('' locally): gc runs across every tenant of the home."""
    title: str | None
    reason: Literal["session_retention_days", "proxy_session_retention_hours"]
    """The setting it fell under: idle past `session_retention_days`, or a proxy connection's
    session idle past `proxy_session_retention_hours`."""
    last_active: float
    messages: int


class GcResult(BaseModel):
    dry_run: bool
    outputs_removed: int
    files_removed: int
    bytes_freed: int
    bytes_kept: int
    sessions_removed: int = 0
    """Sessions deleted (or that would be) for retention, with all they owned."""
    sessions: list[GcSession] = []
    """The first of them (at most `retention.LISTED`), least recently active first."""


class CompactResult(BaseModel):
    compacted: bool
    """A summary was written (false for dry runs, and when cutting outputs alone made it fit)."""
    dry_run: bool = False
    strategy: str = "anchored"
    summarizer: str | None = None
    fallbacks: list[str] = []
    """Why each summarizer before the one used was passed over."""
    tokens_before: int
    tokens_after: int
    summary_tokens: int = 0
    head_messages: int = 0
    """Messages summarized (anchored), or touched (regions), or removed from view (middle/oldest/hybrid)."""
    tail_start_id: str | None = None
    pinned: list[str] = []
    """Facts code added to the summary (edited files, constraints, the open error)."""
    attempts: int = 1
    outputs_cut: int = 0
    """Oversized tool outputs cut down in view (kept whole in the store): the kept tail's, so it
    fits its budget, and in overflow recovery any over a tenth of usable."""
    media_omitted: int = 0
    """Attachments of the newest user message left out of the view because they overflowed it."""
    reason: str | None = None
    """For regions and removal strategies: what was done and, for hybrid, why that strategy won.
    For anchored: why the summarizer the caller named was not used, or that outputs were cut
    instead of writing a summary."""
    summary: str | None = None
    """The summary text (dry runs only; otherwise read it with get_context or the summary resource)."""
    status: Brief
    view: list[str] | None = None
    """Dry runs: the view applying would leave, one entry a message (`summary`, `m12`, `copy of m40`)."""
    token: str | None = None
    """Dry runs: pass as `apply` to write exactly this summary, if the view has not changed."""


class PinInfo(BaseModel):
    id: str
    ref: str | None
    """`m12` or `m10..m20`; None for a note."""
    note: str | None
    tokens: int
    """What the pin costs in view now (0 for a message no longer in view)."""
    by: str | None = None
    at: float


class PinList(BaseModel):
    session_id: str
    pins: list[PinInfo]
    pinned_tokens: int
    usable: int


class HandoffResult(BaseModel):
    session_id: str
    to: str
    """markdown, claude-code or codex."""
    text: str
    """The message to start the fresh session or the other agent with."""
    tokens: int
    budget: int


class UndoResult(BaseModel):
    session_id: str
    undone: Literal["compaction", "prune"]
    tokens_before: int
    tokens_after: int
    status: Brief


class SummarizeResult(BaseModel):
    summary: str
    summarizer: str
    fallbacks: list[str]
    tokens: int


class BreakdownCategory(BaseModel):
    name: str
    label: str
    tokens: int
    known: bool = True
    """False for what contextfold is not told (tool definitions): `tokens` is then 0."""


class Breakdown(BaseModel):
    """Tokens in view by category; the categories' tokens add up to `tokens_in_view` exactly."""

    session_id: str
    model: str
    method: Literal["exact", "estimate"]
    tokens_in_view: int
    """As `status` reports it: the larger of our count and the provider's report."""
    tokens_counted: int
    tokens_reported: int | None
    context_window: int
    reserved: int
    usable: int
    soft_threshold: int
    """Tokens at which the state turns `soft` (`soft_ratio` of usable); 0 when unlimited."""
    hard_threshold: int
    state: State
    messages_in_view: int
    categories: list[BreakdownCategory]

"""Settings: the tunable constants of docs/design.md, each with its documented default.

Precedence, highest first: CLI flags → `CONTEXTFOLD_*` environment variables → the TOML file
(`$CONTEXTFOLD_CONFIG`, else `config.toml` in the data home) → defaults. Settings are of two
kinds: server-wide ones (`PROCESS_SETTINGS`: paths and the limits that guard the whole process or
data home) are set only there; every other one is per-session policy that `session_open(settings=…)`
may override, the request limits (`SESSION_LIMITS`) only downwards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from contextfold.errors import SettingsError

ENV_PREFIX = "CONTEXTFOLD_"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def default_home() -> Path:
    env = os.environ.get("CONTEXTFOLD_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs  # only when no home is given: a command's start-up pays for what it uses

    return Path(platformdirs.user_data_dir("contextfold", appauthor=False))


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # -- where data lives (not overridable per session) ------------------------------------------
    home: Path = Field(default_factory=default_home, description="Data home: database and spilled outputs.")
    database: Path | str | None = Field(
        None, description="SQLite file (default <home>/contextfold.db), or a postgresql:// URL for a team."
    )
    spill_dir: Path | None = Field(None, description="Spilled outputs; default <home>/outputs.")
    spill_url: str | None = Field(
        None,
        description="Spilled outputs in S3-compatible storage, s3://bucket/prefix (AWS_* variables for credentials "
        "and endpoint); default: in the database when it is PostgreSQL, else in spill_dir.",
    )
    claude_projects_dir: Path | None = Field(
        None,
        description="Where Claude Code keeps its transcripts, <dir>/<project>/<session id>.jsonl, for `contextfold "
        "import SESSION_ID`; default $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects.",
    )
    codex_sessions_dir: Path | None = Field(
        None,
        description="Where Codex keeps its rollouts, <dir>/YYYY/MM/DD/rollout-<time>-<session id>.jsonl, for "
        "`contextfold import SESSION_ID`; default $CODEX_HOME/sessions, else ~/.codex/sessions.",
    )
    database_pool_size: int = Field(
        10, ge=1, description="PostgreSQL: connections each server process keeps at most for sessions."
    )
    database_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="PostgreSQL: how long a request waits for a free connection (after 1 s it checks that the "
        "database answers at all, and fails at once when it does not).",
    )

    # -- models and counting ---------------------------------------------------------------------
    default_model: str = Field("default", description="Model of sessions opened without one.")
    claude_token_factor: float = Field(1.20, ge=1.0, description="Safety factor over o200k for Claude.")
    gemini_token_factor: float = Field(1.15, ge=1.0, description="Safety factor over o200k for Gemini.")
    unknown_token_factor: float = Field(
        1.20, ge=1.0, description="Safety factor over o200k for models not in the catalogue."
    )
    context_window: int | None = Field(None, ge=0, description="Override the model's window (0 = unlimited).")
    max_output: int | None = Field(None, ge=0, description="Override the model's output limit.")
    input_limit: int | None = Field(None, ge=0, description="Override the model's input limit.")
    reserved: int | None = Field(None, ge=0, description="Tokens kept free; default min(20000, max_output).")

    # -- overflow states ---------------------------------------------------------------------------
    soft_ratio: float = Field(0.70, gt=0, le=1, description="Share of usable at which to prune.")
    hard_ratio: float = Field(0.90, gt=0, le=1, description="Share of usable at which to compact.")

    # -- truncation and spill at ingest ------------------------------------------------------------
    max_lines: int = Field(2_000, ge=1, description="A tool output over this many lines is spilled.")
    max_bytes: int = Field(50 * 1024, ge=1, description="A tool output over this many bytes is spilled.")
    context_share: float = Field(0.30, gt=0, le=1, description="Max share of the window one output may take.")
    max_share_chars: int = Field(
        400_000, ge=1, description="Upper clamp of the window-share cap in characters (context_share × 4 × window)."
    )
    min_share_chars: int = Field(
        2_000, ge=1, description="Lower clamp of the window-share cap in characters (and ÷ 4 in tokens)."
    )
    truncate_direction: Literal["head", "tail", "head_tail", "auto"] = Field(
        "auto",
        description="What a preview keeps: head, tail, head_tail, or auto (head_tail when the end holds errors).",
    )
    spill_retention_days: float = Field(7.0, gt=0, description="Days a spilled output is kept; gc removes it after.")
    spill_quota_bytes: int = Field(
        2 * 1024**3, ge=0, description="Spill store size; past 90 % the oldest outputs are evicted. 0 = no quota."
    )
    spill_eviction_grace_seconds: float = Field(
        60.0, ge=0, description="An output this young is never evicted: its client has yet to read it."
    )

    # -- session retention (`contextfold gc`) --------------------------------------------------------
    session_retention_days: float = Field(
        0.0,
        ge=0,
        description="gc deletes a session with no activity (no write, no output spilled or read) for this many "
        "days, with everything it owns. 0 = never: sessions are their users' history, kept until deleted.",
    )
    proxy_session_retention_hours: float = Field(
        168.0,
        ge=0,
        description="gc deletes the session of a `contextfold proxy` connection idle this long (its outputs are "
        "kept spill_retention_days, 7 days by default, anyway). 0 = never.",
    )

    # -- prune and tail ----------------------------------------------------------------------------
    prune_protect: int | None = Field(
        None,
        ge=0,
        description="Newest tool output prune never clears; default 40000 from 80000 usable up, below "
        "max(usable - 40000, usable / 4).",
    )
    prune_minimum: int | None = Field(
        None,
        ge=0,
        description="Tokens a prune must free to apply; default 20000 from 80000 usable up, below "
        "max((usable - 40000) / 2, usable / 8).",
    )
    prune_keep_turns: int = Field(2, ge=0, description="Newest user turns whose tool outputs prune never clears.")
    prune_protected_tools: list[str] = Field(
        default_factory=lambda: ["skill"], description="Tools whose outputs prune never clears."
    )
    tail_turns: int = Field(2, ge=1, description="Newest user turns select_tail and compaction try to keep verbatim.")
    preserve_recent_tokens: int | None = Field(
        None, ge=0, description="Token budget of the verbatim tail; default a quarter of usable, within 2,000–8,000."
    )
    summary_max_tokens: int = Field(
        2_900,
        ge=200,
        le=32_000,
        description="Largest summary a compaction writes (a tenth of usable and half of what it replaces, when "
        "less). Higher keeps more: on the corpus, needed-later recall 95.9 % at 2,900, 97.2 % at 3,800.",
    )

    # -- hard limits on requests -----------------------------------------------------------------
    max_message_bytes: int = Field(16 * 1024**2, ge=1, description="Largest single message accepted.")
    max_batch_messages: int = Field(2_000, ge=1, description="Most messages one append accepts.")
    max_batch_bytes: int = Field(
        64 * 1024**2, ge=1, description="Most bytes one append accepts, all messages together."
    )
    max_request_bytes: int = Field(
        96 * 1024**2, ge=1, description="Largest HTTP request body; bigger ones get 413 before they are parsed."
    )
    max_database_bytes: int = Field(
        10 * 1024**3, ge=0, description="Database size past which appends are refused. 0 = no limit."
    )
    max_count_bytes: int = Field(
        16 * 1024**2, ge=1, description="Largest input count_tokens accepts (UTF-8 text, or messages as JSON)."
    )

    # -- history search (`search_history`, `contextfold search`) -----------------------------------
    search_max_query_chars: int = Field(
        1_000, ge=1, description="Longest full-text query or regex pattern accepted; longer ones are refused."
    )
    search_max_terms: int = Field(
        24, ge=1, description="Most words and quoted phrases one full-text query may hold (an OR chain included)."
    )
    search_answer_tokens: int = Field(
        4_000, ge=200, description="Tokens one search answer may take (hits, snippets, expanded messages)."
    )
    search_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="Longest a full-text query may run (words so common they match most of a huge history); "
        "past it the search is refused, asking for a more specific word, and other sessions go on.",
    )
    search_index_batch: int = Field(
        2_000,
        ge=1,
        description="Parts indexed per write transaction when an older home's history is indexed for search.",
    )
    search_index_lag: int = Field(
        500,
        ge=0,
        description="Stored parts (a message's text, a tool call, ...) that may wait for the SQLite search index: "
        "an append indexes them in one batch once this many wait, and every search indexes what waits before it "
        "reads the index, so none is ever missed. 0 indexes each append's parts in its own transaction "
        "(slower appends). PostgreSQL's index has no lag.",
    )

    # -- the HTTP transport (`serve --http`) -------------------------------------------------------
    http_sessions_per_tenant: int = Field(
        64, ge=1, description="Open MCP sessions (2025-era handshakes) one tenant may hold; more get 429."
    )
    http_max_sessions: int = Field(
        10_000, ge=1, description="Open MCP sessions all tenants together may hold; more get 503."
    )
    http_session_idle_seconds: float = Field(
        600.0, gt=0, description="A session with no request in flight and no open stream this long is closed."
    )
    http_body_bytes_per_tenant: int = Field(
        128 * 1024**2,
        ge=1,
        description="Bytes of request bodies one tenant may have being read or handled at once; more get 429.",
    )
    http_body_bytes_in_flight: int = Field(
        256 * 1024**2,
        ge=1,
        description="Bytes of request bodies all tenants together may have being read or handled at once; more get 503.",
    )
    http_body_thread_bytes: int = Field(
        1024**2,
        ge=1,
        description="A request body this large is parsed in a worker thread, a piece at a time, and must be a "
        "tools/call: other messages this large get 413.",
    )
    http_stateless: bool = Field(
        False,
        description="Answer 2025-era (handshake) clients without MCP sessions, so any replica serves any request.",
    )
    view_cache_sessions: int = Field(
        16,
        ge=0,
        description="Sessions whose view a server keeps loaded and rendered between requests (0: none).",
    )

    # -- `contextfold proxy` ------------------------------------------------------------------------
    proxy_max_tokens: int = Field(
        10_000, ge=100, description="A result whose text is over this many tokens (or max_lines, max_bytes) is cut."
    )
    proxy_preview_tokens: int = Field(
        2_000, ge=100, description="What the previews of one cut result take together, at most."
    )
    proxy_max_binary_bytes: int = Field(
        5 * 1024**2, ge=0, description="An image, audio clip or blob over this many bytes is saved, not passed on."
    )
    proxy_max_result_blocks: int = Field(
        100_000,
        ge=1,
        description="A result with more content blocks than this is refused before it is walked (ask for less).",
    )
    proxy_timeout_seconds: float = Field(
        600.0,
        ge=0,
        description="A request the upstream leaves unanswered this long fails (progress restarts it; 0 = never).",
    )
    proxy_drain_seconds: float = Field(
        30.0,
        ge=0,
        description="When the client closes its input (`proxy < requests.jsonl`), answers still owed are awaited "
        "this long, then each is answered with an error.",
    )
    proxy_max_upstreams: int = Field(
        16,
        ge=1,
        description="`proxy --http`: upstream servers running at once, for all clients; past it a request that "
        "needs one more gets 503.",
    )

    # -- `contextfold ui` and the HTML export ------------------------------------------------------
    ui_page_messages: int = Field(
        200,
        ge=10,
        le=5_000,
        description="`contextfold ui`: messages one page of a session's view or stored history shows.",
    )
    ui_timeline_events: int = Field(
        1_000,
        ge=1,
        description="`contextfold ui` and the HTML export: compactions a session's life plots and lists, newest kept.",
    )
    ui_export_output_chars: int = Field(
        2_000_000,
        ge=0,
        description="`export --html`: characters of each spilled output the file holds (the preview is always whole).",
    )
    ui_poll_seconds: float = Field(
        2.0, gt=0, description="`contextfold ui`: how often an open session page asks whether the session changed."
    )

    # -- compaction, recovery and the strategies without an LLM -----------------------------------
    recovery_attempts: int = Field(3, ge=1, description="Compactions overflow recovery tries before giving up.")
    compaction_cooldown_seconds: float = Field(
        30.0, ge=0, description="An automatic compaction this soon after the last, view barely grown, is refused."
    )
    compaction_cooldown_growth: float = Field(
        1.10, ge=1.0, description="Growth of the view since the last compaction that lifts the cooldown."
    )
    oversized_share: float = Field(
        0.10, gt=0, le=1, description="Overflow recovery cuts tool outputs over this share of usable, once."
    )
    cut_tokens: int = Field(500, ge=1, description="Tokens of an output kept in view when it is cut.")
    cut_chars: int = Field(2_000, ge=1, description="Characters of an output kept in view when it is cut.")
    regions_keep_recent_tokens: int = Field(
        20_000, ge=0, description="regions: the newest tool output tokens never digested."
    )
    regions_digest_max_tokens: int = Field(
        8_000,
        ge=100,
        description="regions: the rule-based digest of one region takes at most this many tokens (a fifth of "
        "what it replaces below that).",
    )
    regions_soft_target: float = Field(
        0.50,
        gt=0,
        le=1,
        description="regions: a compaction started below hard digests until the view is under this share of "
        "usable (never above soft_ratio).",
    )
    removal_preserve_start: int | None = Field(
        None, ge=0, description="middle/oldest/hybrid: first messages never removed (default: per provider)."
    )
    removal_preserve_end: int | None = Field(
        None, ge=0, description="middle/oldest/hybrid: last messages never removed (default: per provider)."
    )

    # -- steering: pins, previews, undo (`service/steering.py`, docs/steering.md) -------------------
    max_pins: int = Field(50, ge=1, le=10_000, description="Pins a session may hold (messages, spans and notes).")
    max_pin_note_chars: int = Field(
        2_000, ge=10, le=100_000, description="Characters of one pinned note (carried into every summary)."
    )
    handoff_tokens: int = Field(
        6_000, ge=300, le=100_000, description="Tokens a handoff message (contextfold handoff) may take at most."
    )
    max_pin_span: int = Field(500, ge=1, le=1_000_000, description="Messages one span pin (m10..m80) may cover.")

    # -- summarizers -------------------------------------------------------------------------------
    summarizer: Literal["auto", "anthropic", "sampling", "extractive"] = Field(
        "auto",
        description="Who writes summaries: auto (anthropic with ANTHROPIC_API_KEY, else the client's model over "
        "MCP sampling, else extractive), anthropic, sampling or extractive (offline).",
    )
    anthropic_model: str = Field("claude-haiku-4-5", description="Model of the anthropic summarizer.")
    anthropic_timeout: float = Field(60.0, gt=0, description="Seconds the anthropic summarizer waits for a reply.")
    anthropic_max_retries: int = Field(2, ge=0, description="Retries of the anthropic summarizer.")

    # -- agent hooks (`contextfold hook`, `contextfold hooks install`) ---------------------------
    hook_preview_bytes: int = Field(
        8_000,
        ge=1_000,
        le=28_000,
        description="Most of a spilled output a hook puts in the agent's context: head and tail, about 2,000 "
        "tokens, where Claude Code alone shows a 2 KB head (under its 30,000-character inline cap, so it never "
        "persists the preview again); read_output reads the rest.",
    )
    hook_context_tokens: int = Field(
        8_000,
        ge=100,
        description="Most tokens the handover after an agent's compaction adds, all of it (Claude Code: the "
        "SessionStart handover and what the next prompt gets once the summary is known, together).",
    )
    hook_context_min_tokens: int = Field(
        500,
        ge=0,
        description="The handover after an agent's compaction may take this many tokens however little room "
        "the window has left (never more than hook_context_tokens).",
    )
    hook_context_room_share: float = Field(
        0.05,
        gt=0,
        le=1,
        description="Of the window's free room after an agent's compaction (usable less what is in view: what "
        "every call reads, the agent's summary, what it attaches again), the share the handover may take.",
    )

    @model_validator(mode="after")
    def _ratios_ordered(self) -> Settings:
        if self.soft_ratio > self.hard_ratio:
            raise ValueError(f"soft_ratio ({self.soft_ratio}) must not exceed hard_ratio ({self.hard_ratio})")
        return self

    @field_validator("database")
    @classmethod
    def _database(cls, value: Path | str | None) -> Path | str | None:
        if isinstance(value, str) and not value.startswith(_POSTGRES_SCHEMES):
            if "://" in value:
                scheme = value.split("://", 1)[0]
                raise ValueError(
                    f"{scheme}:// is not a database contextfold knows; give a SQLite file path or a "
                    "postgresql://user:password@host:port/dbname URL"
                )
            return Path(value).expanduser()
        return value

    @field_validator("spill_url")
    @classmethod
    def _spill_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("s3://"):
            raise ValueError(f"expected s3://bucket/prefix, got {value!r}")
        return value

    @property
    def database_url(self) -> str | None:
        """The PostgreSQL URL when the database is PostgreSQL, else None (SQLite)."""
        return self.database if isinstance(self.database, str) else None

    @property
    def database_name(self) -> str:
        """Where the sessions are, to show a person: the SQLite file, or the URL without its password."""
        return redact_url(self.database_url) if self.database_url else str(self.database_path)

    @property
    def spill_name(self) -> str:
        """Where spilled outputs are, to show a person."""
        if self.spill_url:
            return self.spill_url
        return f"the database at {self.database_name}" if self.database_url else str(self.spill_path)

    @property
    def database_path(self) -> Path:
        """The SQLite file (with a PostgreSQL database, where it would be: nothing uses it)."""
        return self.database if isinstance(self.database, Path) else self.home / "contextfold.db"

    @property
    def spill_path(self) -> Path:
        return self.spill_dir or self.home / "outputs"

    @property
    def token_factors(self) -> dict[str, float]:
        return {
            "claude": self.claude_token_factor,
            "gemini": self.gemini_token_factor,
            "unknown": self.unknown_token_factor,
        }

    def for_session(self, overrides: Mapping[str, Any]) -> Settings:
        """These settings with a session's overrides applied (validated).

        A session may lower the request limits (`SESSION_LIMITS`), never raise them past the
        server's; a value stored before the server's limit was lowered is capped here too.
        """
        if not overrides:
            return self
        check_session_overrides(overrides)
        try:
            merged = self.model_validate({**self.model_dump(), **overrides})
        except ValidationError as exc:
            raise SettingsError(_describe(exc)) from exc
        capped = {name: getattr(self, name) for name in SESSION_LIMITS if getattr(merged, name) > getattr(self, name)}
        return merged.model_copy(update=capped) if capped else merged


PATH_SETTINGS = frozenset({"home", "database", "spill_dir", "spill_url", "claude_projects_dir", "codex_sessions_dir"})
PROCESS_SETTINGS = PATH_SETTINGS | frozenset(
    {
        "database_pool_size",
        "database_timeout_seconds",
        "max_request_bytes",
        "max_database_bytes",
        "max_count_bytes",
        "spill_quota_bytes",
        "spill_eviction_grace_seconds",
        "spill_retention_days",
        "session_retention_days",
        "proxy_session_retention_hours",
        "http_sessions_per_tenant",
        "http_max_sessions",
        "http_session_idle_seconds",
        "http_body_bytes_per_tenant",
        "http_body_bytes_in_flight",
        "http_body_thread_bytes",
        "http_stateless",
        "view_cache_sessions",
        "proxy_max_tokens",
        "proxy_preview_tokens",
        "proxy_max_binary_bytes",
        "proxy_max_result_blocks",
        "proxy_timeout_seconds",
        "proxy_drain_seconds",
        "proxy_max_upstreams",
        "ui_page_messages",
        "ui_timeline_events",
        "ui_poll_seconds",
        "ui_export_output_chars",
        "search_max_query_chars",
        "search_max_terms",
        "search_answer_tokens",
        "search_index_batch",
        "search_index_lag",
        "search_timeout_seconds",
    }
)
"""Server-wide: where data lives and the limits that guard the whole process or data home (one
quota, one retention, one HTTP transport). Set in the server's configuration, never per session."""
SESSION_LIMITS = frozenset({"max_message_bytes", "max_batch_messages", "max_batch_bytes"})
"""Request limits a session may lower for itself but not raise past the server's."""
SESSION_SETTINGS = frozenset(Settings.model_fields) - PROCESS_SETTINGS
"""Per-session policy: every other setting, overridable with `session_open(settings=…)`."""


def redact_url(url: str) -> str:
    """A database URL without its password, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:
        return "postgresql://…"


def check_session_overrides(overrides: Mapping[str, Any]) -> None:
    server_wide = sorted(set(overrides) & PROCESS_SETTINGS)
    if server_wide:
        raise SettingsError(
            f"{', '.join(server_wide)} {'is a server-wide setting' if len(server_wide) == 1 else 'are server-wide settings'}"
            " (they guard the whole process or data home); set them in the server's configuration "
            "(config.toml in the data home or CONTEXTFOLD_… variables), not per session"
        )
    unknown = sorted(set(overrides) - SESSION_SETTINGS)
    if unknown:
        raise SettingsError(
            f"unknown session setting(s) {', '.join(unknown)}; allowed: {', '.join(sorted(SESSION_SETTINGS))}"
        )


def _describe(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors())


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in Settings.model_fields:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        # Lists come as JSON (`["skill","todo"]`) or comma-separated; pydantic coerces scalars.
        if name == "prune_protected_tools":
            values[name] = (
                json.loads(raw) if raw.lstrip().startswith("[") else [t.strip() for t in raw.split(",") if t.strip()]
            )
        else:
            values[name] = raw
    return values


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Settings from flags (`overrides`), the environment, and the TOML file, in that order."""
    environ = os.environ if environ is None else environ
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    env_values = _from_env(environ)
    home = Path(overrides.get("home") or env_values.get("home") or default_home()).expanduser()
    path = config_file or (Path(environ["CONTEXTFOLD_CONFIG"]) if "CONTEXTFOLD_CONFIG" in environ else None)
    file_values: dict[str, Any] = {}
    candidate = path or home / "config.toml"
    if candidate.is_file():
        import tomllib  # only when there is a file to read

        try:
            file_values = tomllib.loads(candidate.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{candidate}: not valid TOML ({exc})") from exc
    elif path is not None:
        raise SettingsError(f"config file {path} does not exist")
    merged = {**file_values, **env_values, **overrides, "home": home}
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from exc

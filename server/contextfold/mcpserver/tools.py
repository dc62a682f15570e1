"""MCP wiring: each tool translates its arguments into one `ContextService` call.

No logic lives here. Errors that describe a bad request become `isError` results whose text says
what to fix; anything else is a bug and is logged with its traceback before the SDK reports it.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Annotated, Any, Literal, cast

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, Resolve, Sample
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.types import (
    CallToolResult,
    CreateMessageResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import AnyHttpUrl, BaseModel, Field, ValidationError

from contextfold import __version__, safejson
from contextfold.blobs.lines import READ_LIMIT_LINES
from contextfold.compaction.chain import Sampled
from contextfold.compaction.prompt import anchored_summary_prompt
from contextfold.config import Settings, load_settings
from contextfold.errors import (
    MAX_MESSAGE_CHARS,
    ContextfoldError,
    LimitExceeded,
    Remedy,
    SettingsError,
    StorageError,
    brief,
)
from contextfold.home.opening import open_service
from contextfold.mcpserver import answers, bigstrings, bodies
from contextfold.mcpserver.auth import SCOPE, TenantTokens
from contextfold.mcpserver.schemas import inline_defs, lean, shallow
from contextfold.results import (
    AppendResult,
    Brief,
    CompactResult,
    Deleted,
    HandoffResult,
    OutputRead,
    PinList,
    PruneResult,
    SearchPage,
    SessionList,
    SpillResult,
    Status,
    SummarizeResult,
    TailResult,
    TokenCount,
)
from contextfold.results import Context as RenderedContext
from contextfold.service.facade import USER_ERRORS, ContextService, Tenant

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
contextfold keeps this conversation's context. Each turn: append the new messages (with the usage \
the provider reported), read `status`, act on its recommended_action, then `get_context` for the \
messages to send. Token counts are exact for OpenAI models and labelled estimates otherwise."""

AGENT_INSTRUCTIONS = """\
contextfold keeps this agent's whole history and the large tool outputs its hooks spilled. A preview \
that ends with an output id (out_…) can be read on with `read_output`; after a compaction, \
`search_history` finds anything said or done before it (`query` words), in the session the handover \
names or, `within="project"`, in earlier sessions of the same project."""
"""For `serve --tools` (what `contextfold hooks install` starts for Claude Code and Codex): the agent
keeps its own history, so the harness loop above does not apply to it."""

TOOLS = (
    "count_tokens",
    "session_open",
    "session_list",
    "session_delete",
    "append",
    "get_context",
    "status",
    "prune",
    "select_tail",
    "spill",
    "search_history",
    "read_output",
    "compact",
    "summarize",
    "pin",
    "handoff",
)
"""Every tool the server offers (`tests/e2e/test_hooks_install.py` holds it equal to `tools/list`)."""

SessionId = Annotated[str, Field(min_length=1, max_length=200)]
WireMessages = Annotated[
    list[dict[str, Any]],
    Field(description="Anthropic or OpenAI messages; tool results complete earlier calls."),
]
FormatArg = Literal["anthropic", "openai", "auto"]


def _annotations(*, read_only: bool = False, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    """The hints that say something: `readOnlyHint` and `idempotentHint` when true (false is their
    default), `destructiveHint` on every tool that writes (the protocol reads it only when
    `readOnlyHint` is false), and `openWorldHint: false` everywhere (its default is true). Each
    hint costs context on every `tools/list`. The title lives on the tool itself (`Tool.title`)."""
    return ToolAnnotations(
        read_only_hint=True if read_only else None,
        destructive_hint=None if read_only else destructive,
        idempotent_hint=True if idempotent else None,
        open_world_hint=False,
    )


def _owner() -> str:
    """The tenant making the request: the bearer token's client over HTTP, '' locally."""
    token = get_access_token()
    return token.client_id if token is not None and token.client_id else ""


TOOL_WORDS: dict[Remedy, str] = {
    Remedy.DELETE_SESSIONS: "delete sessions you no longer need (session_delete)",
    Remedy.READ_IN_PARTS: "use the read_output tool with offset/limit or pattern",
    Remedy.SPILL_FIRST: "store huge outputs with the spill tool and send its preview",
}
"""An error's way forward as an MCP client reads it: the tools that take it."""


def tool_words(exc: BaseException) -> str:
    return exc.worded(TOOL_WORDS) if isinstance(exc, ContextfoldError) else str(exc)


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except USER_ERRORS as exc:
        raise ToolError(tool_words(exc)) from exc
    except Exception:
        log.exception("unexpected error in a tool")
        raise


GC_INTERVAL_SECONDS = 3_600


async def _collect_garbage(service: ContextService) -> None:
    """Expire sessions past their retention, and expire and evict spilled outputs, now and then,
    for as long as the server runs."""
    while True:
        try:
            result = await service.gc()
            if result.outputs_removed or result.files_removed or result.sessions_removed:
                log.info(
                    "gc removed %d sessions, %d outputs, %d files",
                    result.sessions_removed,
                    result.outputs_removed,
                    result.files_removed,
                )
        except Exception:
            log.exception("spill gc failed; will retry")
        await asyncio.sleep(GC_INTERVAL_SECONDS)


def _service(ctx: Context) -> ContextService:
    # What `_lifespan` yields; the SDK's unparametrised Context types it as a dict.
    return cast(ContextService, ctx.request_context.lifespan_context)


def _tenant(ctx: Context) -> Tenant:
    """What this request may do: its bearer token's tenant over HTTP, the local one otherwise."""
    return _service(ctx).tenant(_owner())


def build_server(
    settings: Settings | None = None, *, tokens: TenantTokens | None = None, tools: Sequence[str] | None = None
) -> MCPServer:
    """The contextfold MCP server; each connection (or the HTTP process) opens the store once.

    With `tokens` (HTTP only) every request needs a bearer token, and the token's tenant owns
    what the request sees: sessions and outputs of other tenants read as not found. `tools`: offer
    only these tools (an agent that keeps its own history needs `read_output` and `search_history`,
    not the harness's fourteen), with instructions for such an agent.
    """
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[ContextService]:
        # A home that is read-only, or a database this server cannot use, does not stop it: every
        # tool that needs the store then answers the one line that says why (contextfold.home.opening).
        service, problem = await open_service(settings)
        if problem is not None:
            log.warning("%s", problem)
        _settle_heap()
        collector = asyncio.create_task(_collect_garbage(service)) if problem is None else None
        try:
            yield service
        finally:
            if collector is not None:
                collector.cancel()
                with suppress(asyncio.CancelledError):
                    await collector
            await service.close()

    auth: dict[str, Any] = {}
    if tokens:
        auth = {
            "token_verifier": tokens,
            # Static bearer tokens from `contextfold token add`, no OAuth. Without a
            # resource_server_url the SDK serves no /.well-known/oauth-protected-resource and its
            # 401 has no `resource_metadata`: that metadata would name an authorization server that
            # does not exist, and OAuth clients (Claude Code) would chase it and report only "Failed
            # to connect". It also keeps the SDK from warning that `validate_token_resource` is unset.
            # `issuer_url` is required by AuthSettings but unused without an auth server provider.
            "auth": AuthSettings(
                issuer_url=AnyHttpUrl("http://127.0.0.1"), resource_server_url=None, required_scopes=[SCOPE]
            ),
        }
    if tools is not None and (unknown := sorted(set(tools) - set(TOOLS))):
        raise SettingsError(f"no tool named {', '.join(unknown)}; contextfold's tools are {', '.join(TOOLS)}")
    instructions = INSTRUCTIONS if tools is None else AGENT_INSTRUCTIONS
    mcp = _CompactSchemas("contextfold", version=__version__, instructions=instructions, lifespan=lifespan, **auth)
    private = dict.fromkeys((str(settings.home), str(settings.database_path), str(settings.spill_path)), _DATA_HOME)
    if settings.database_url:  # a remote tenant learns neither the database's address nor its password
        for name in (settings.database_url, settings.database_name):
            private[f"the PostgreSQL database at {name}"] = _DATABASE
            private[name] = _DATABASE
    mcp.private_names = tuple(sorted(private.items(), key=lambda item: len(item[0]), reverse=True))

    @mcp.tool(title="Count tokens", annotations=_annotations(read_only=True, idempotent=True))
    async def count_tokens(
        ctx: Context,
        text: str | None = None,
        messages: Annotated[list[dict[str, Any]] | None, Field(description="Instead of text.")] = None,
        model: Annotated[str | None, Field(description="Model id, e.g. gpt-4o.")] = None,
        format: FormatArg = "auto",
    ) -> TokenCount:
        """Call to check text or messages you have not appended fit a model: exact for OpenAI
        encodings, a labelled estimate otherwise."""
        with _user_errors():
            # Counting megabytes takes seconds of CPU: a worker thread keeps other clients served.
            return await asyncio.to_thread(
                _service(ctx).count_tokens, text=text, messages=messages, model=model, format=format
            )

    @mcp.tool(title="Open session", annotations=_annotations())
    async def session_open(
        ctx: Context,
        session_id: Annotated[str | None, Field(description="Reopen (or create) this id.", max_length=200)] = None,
        model: Annotated[str | None, Field(description="Model id; sets limits and tokenizer.")] = None,
        title: str | None = None,
        system: Annotated[str | None, Field(description="System prompt.")] = None,
        settings: Annotated[dict[str, Any] | None, Field(description="Per-session setting overrides.")] = None,
    ) -> Brief:
        """Call once when a conversation starts, or to resume one by id, before append; returns its status."""
        with _user_errors():
            return await _tenant(ctx).open_session(
                session_id, model=model, title=title, settings=settings, system=system
            )

    @mcp.tool(title="List sessions", annotations=_annotations(read_only=True, idempotent=True))
    async def session_list(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Field(description="The previous page's next_cursor.")] = None,
    ) -> SessionList:
        """Call to find a session to resume: most recently updated first."""
        with _user_errors():
            return await _tenant(ctx).list_sessions(limit=limit, cursor=cursor)

    @mcp.tool(
        title="Delete session",
        annotations=_annotations(destructive=True, idempotent=True),
    )
    async def session_delete(ctx: Context, session_id: SessionId) -> Deleted:
        """Call only when the user asks to erase a conversation: deletes it and all its messages for good."""
        with _user_errors():
            return await _tenant(ctx).delete_session(session_id)

    @mcp.tool(title="Append messages", annotations=_annotations())
    async def append(
        ctx: Context,
        session_id: SessionId,
        messages: WireMessages,
        format: FormatArg = "auto",
        usage: Annotated[
            dict[str, Any] | None,
            Field(description="Provider usage of the batch's last assistant message."),
        ] = None,
        system: Annotated[str | None, Field(description="Replace the system prompt.")] = None,
    ) -> AppendResult:
        """Call after every model reply and tool result: stores the messages atomically; returns their
        counts and the status to act on."""
        with _user_errors():
            return await _tenant(ctx).append(session_id, messages, format=format, usage=usage, system=system)

    @mcp.tool(title="Get context", annotations=_annotations(read_only=True, idempotent=True))
    async def get_context(
        ctx: Context,
        session_id: SessionId,
        format: Literal["anthropic", "openai"] = "openai",
        limit: Annotated[int | None, Field(ge=1, description="Messages per page; default all.")] = None,
        cursor: str | None = None,
        strip_media: bool = False,
        cache_anchors: Annotated[bool, Field(description="anthropic: add cache_control breakpoints.")] = False,
        since: Annotated[str | None, Field(description="A version you hold: only messages after it.")] = None,
    ) -> RenderedContext:
        """Call before each model request: the messages to send, in the API format (`since`: only what changed)."""
        with _user_errors():
            return await _tenant(ctx).get_context(
                session_id,
                format=format,
                limit=limit,
                cursor=cursor,
                strip_media=strip_media,
                cache_anchors=cache_anchors,
                since=since,
            )

    @mcp.tool(title="Session status", annotations=_annotations(read_only=True, idempotent=True))
    async def status(ctx: Context, session_id: SessionId) -> Status:
        """Call when deciding whether to prune or compact: tokens in view vs usable, pins, the state and the
        recommended action."""
        with _user_errors():
            return await _tenant(ctx).status(session_id)

    @mcp.tool(title="Prune old tool outputs", annotations=_annotations(idempotent=True))
    async def prune(
        ctx: Context,
        session_id: SessionId,
        dry_run: bool = False,
        keep_tool_uses: Annotated[int | None, Field(ge=0, description="Keep only the newest N tool results.")] = None,
        clear_at_least: Annotated[int | None, Field(ge=0, description="Apply only if this many tokens free.")] = None,
        exclude_tools: Annotated[list[str] | None, Field(description="Tools whose outputs stay.")] = None,
        clear_inputs: bool = False,
        apply: Annotated[str | None, Field(description="A dry run's token: clear exactly what it listed.")] = None,
        undo: Annotated[bool, Field(description="Take the last prune back.")] = False,
    ) -> PruneResult:
        """Call when status recommends prune: clears old tool outputs from view (kept stored). dry_run
        lists what would go and gives a token for apply."""
        with _user_errors():
            tenant = _tenant(ctx)
            if undo:
                undone = await tenant.undo(session_id, "prune")
                return PruneResult(
                    applied=True,
                    dry_run=False,
                    reason=f"undid the last prune: {undone.tokens_after - undone.tokens_before:,} tokens back in view",
                    parts=0,
                    tokens_freed=undone.tokens_before - undone.tokens_after,
                    status=undone.status,
                )
            return await tenant.prune(
                session_id,
                dry_run=dry_run,
                keep_tool_uses=keep_tool_uses,
                clear_at_least=clear_at_least,
                exclude_tools=exclude_tools or (),
                clear_inputs=clear_inputs,
                apply=apply,
            )

    @mcp.tool(title="Select tail", annotations=_annotations(read_only=True, idempotent=True))
    async def select_tail(
        ctx: Context,
        session_id: SessionId,
        budget: Annotated[int | None, Field(ge=0, description="Tokens; default from usable.")] = None,
        tail_turns: Annotated[int | None, Field(ge=1)] = None,
    ) -> TailResult:
        """Call before summarizing a session yourself: which recent messages fit the tail budget (the rest is
        what compact would summarize)."""
        with _user_errors():
            return await _tenant(ctx).select_tail(session_id, budget=budget, tail_turns=tail_turns)

    @mcp.tool(title="Spill output", annotations=_annotations())
    async def spill(
        ctx: Context,
        session_id: SessionId,
        text: str,
        tool: str | None = None,
        call_id: str | None = None,
    ) -> SpillResult:
        """Call before appending a tool output too large to keep: stores it whole; returns a preview to use
        instead and an id for read_output."""
        with _user_errors():
            return await _tenant(ctx).spill(session_id, text, tool=tool, call_id=call_id)

    @mcp.tool(title="Search history", annotations=_annotations(read_only=True, idempotent=True))
    async def search_history(
        ctx: Context,
        session_id: SessionId | None = None,
        query: Annotated[
            str | None, Field(description='Words (all, any order), "a phrase", or words joined by OR. Ranked.')
        ] = None,
        within: Annotated[
            Literal["session", "project", "all"] | None,
            Field(description="session (default with session_id); project: earlier sessions in this project; all."),
        ] = None,
        since: Annotated[str | None, Field(description="e.g. yesterday, last 2 hours, 2026-11-20.")] = None,
        until: Annotated[str | None, Field(description="Same forms; a day counts to its end.")] = None,
        expand: Annotated[
            str | None, Field(description="Read back m12 and its neighbours, or a citation [m3, m9–m12].")
        ] = None,
        offset: Annotated[int, Field(ge=0, description="Next page: the next_offset given.")] = 0,
        pattern: Annotated[str | None, Field(description="Regex over one session instead of query.")] = None,
        at: Annotated[str | None, Field(description="Read from this message, e.g. m12.", max_length=100)] = None,
    ) -> SearchPage:
        """Search every stored message, compacted ones included, of this session or earlier ones."""
        with _user_errors():
            return await _tenant(ctx).search(
                pattern if pattern is not None else query,
                session_id=session_id,
                within=within,
                since=since,
                until=until,
                mode="regex" if pattern is not None else "text",
                offset=offset,
                expand=expand,
                at=at,
            )

    @mcp.tool(title="Read output", annotations=_annotations(read_only=True, idempotent=True))
    async def read_output(
        ctx: Context,
        id: Annotated[str, Field(description="Output id from a truncated result.", max_length=100)],
        offset: Annotated[int, Field(ge=1)] = 1,
        limit: Annotated[int, Field(ge=1, le=READ_LIMIT_LINES)] = READ_LIMIT_LINES,
        pattern: Annotated[str | None, Field(description="Regex: return matching lines instead.")] = None,
        context: Annotated[int, Field(ge=0, le=20, description="Lines around each match.")] = 0,
        ignore_case: bool = False,
    ) -> OutputRead:
        """Call when a result ends with an output id (out_…) and you need what was cut: numbered lines from
        offset, or regex matches."""
        with _user_errors():
            return await _tenant(ctx).read_output(
                id,
                offset=offset,
                limit=limit,
                pattern=pattern,
                context=context,
                ignore_case=ignore_case,
            )

    @mcp.resource("contextfold://outputs/{output_id}", mime_type="text/plain", title="Spilled output")
    async def output_resource(output_id: str, ctx: Context) -> str:
        """The full text of a spilled output."""
        try:
            return await _tenant(ctx).output_text(output_id)
        except USER_ERRORS as exc:
            raise ResourceNotFoundError(tool_words(exc)) from exc

    @mcp.tool(title="Compact history", annotations=_annotations())
    async def compact(
        ctx: Context,
        session_id: SessionId,
        summary: Annotated[CreateMessageResult | None, Resolve(_sampling_for_compact)],
        summarizer: Annotated[
            Literal["auto", "anthropic", "sampling", "extractive"] | None,
            Field(description="auto: anthropic, then your model (sampling), then offline extractive."),
        ] = None,
        instructions: Annotated[str | None, Field(description="Extra instructions or focus for the summary.")] = None,
        strategy: Annotated[
            Literal["anchored", "regions", "middle", "oldest", "hybrid"],
            Field(description="anchored: summarize; regions: digest tool runs; middle/oldest/hybrid: drop messages."),
        ] = "anchored",
        dry_run: bool = False,
        apply: Annotated[str | None, Field(description="A dry run's token: write exactly its summary.")] = None,
        undo: Annotated[bool, Field(description="Take the last compaction back.")] = False,
        edit: Annotated[
            str | None, Field(description="Correct the summary: its full text, or just the sections to add to.")
        ] = None,
        range: Annotated[str | None, Field(description="Summarize only m10..m80, in place.", max_length=100)] = None,
        keep_pins: Annotated[bool, Field(description="range: keep pinned messages inside it.")] = False,
    ) -> CompactResult:
        """Call when status recommends compact: summarizes older history, keeping the recent tail and pins.
        dry_run returns the exact summary and view, and a token for apply."""

        async def progress(fraction: float, message: str) -> None:
            await ctx.report_progress(fraction, total=1.0, message=message)

        with _user_errors():
            tenant = _tenant(ctx)
            if edit is not None:
                return await tenant.edit_summary(session_id, edit, by="mcp")
            if range is not None:
                return await tenant.compact_range(
                    session_id,
                    range,
                    keep_pins=keep_pins,
                    summarizer=summarizer,
                    instructions=instructions,
                    dry_run=dry_run,
                )
            if undo:
                undone = await tenant.undo(session_id, "compaction")
                return CompactResult(
                    compacted=False,
                    tokens_before=undone.tokens_before,
                    tokens_after=undone.tokens_after,
                    reason="undid the last compaction: the view is as it was before it",
                    status=undone.status,
                )
            return await tenant.compact(
                session_id,
                strategy=strategy,
                summarizer=summarizer,
                instructions=instructions,
                dry_run=dry_run,
                sampled=_sampled(summary),
                sampling_offered=_can_sample(ctx),
                progress=progress,
                apply=apply,
            )

    @mcp.tool(title="Summarize messages", annotations=_annotations(read_only=True))
    async def summarize(
        ctx: Context,
        messages: WireMessages,
        summary: Annotated[CreateMessageResult | None, Resolve(_sampling_for_summarize)],
        previous_summary: Annotated[str | None, Field(description="An earlier summary to update.")] = None,
        summarizer: Literal["auto", "anthropic", "sampling", "extractive"] | None = None,
        format: FormatArg = "auto",
    ) -> SummarizeResult:
        """Call to summarize messages you hold yourself (nothing is stored); for a stored session use compact."""
        with _user_errors():
            return await _service(ctx).summarize(
                messages,
                previous_summary=previous_summary,
                format=format,
                summarizer=summarizer,
                sampled=_sampled(summary),
            )

    @mcp.tool(title="Pin", annotations=_annotations())
    async def pin(
        ctx: Context,
        session_id: SessionId,
        ref: Annotated[str | None, Field(description="m12 or m10..m80: kept verbatim in view.", max_length=100)] = None,
        note: Annotated[str | None, Field(description="A fact every summary must carry.")] = None,
        unpin: Annotated[str | None, Field(description="A pin id to remove.", max_length=100)] = None,
    ) -> PinList:
        """Call when the user says something must not be forgotten, or before compacting past a message you
        must keep: no compaction or prune takes a pin away. No arguments: list pins."""
        with _user_errors():
            tenant = _tenant(ctx)
            if unpin is not None:
                return await tenant.unpin(session_id, unpin)
            if ref is None and note is None:
                return await tenant.pins(session_id)
            return await tenant.pin(session_id, ref=ref, note=note, by="mcp")

    @mcp.tool(title="Hand off", annotations=_annotations(read_only=True, idempotent=True))
    async def handoff(
        ctx: Context,
        session_id: SessionId,
        to: Literal["markdown", "claude-code", "codex"] = "markdown",
        tokens: Annotated[int | None, Field(ge=300, description="At most this many tokens.")] = None,
    ) -> HandoffResult:
        """Call when the task moves to a fresh session or another agent: one message with the goal, the
        user's words, the plan, the working set, open errors and how to reach the history."""
        with _user_errors():
            return await _tenant(ctx).handoff(session_id, to=to, tokens=tokens)

    @mcp.prompt(name="anchored_summary", title="Anchored summary")
    def anchored_summary(previous_summary: str | None = None) -> str:
        """The anchored summary template and instructions, for clients that summarize with their own model."""
        return anchored_summary_prompt(previous_summary)

    @mcp.resource("contextfold://sessions/{session_id}/summary", mime_type="text/markdown", title="Session summary")
    async def summary_resource(session_id: str, ctx: Context) -> str:
        """The session's current anchored summary."""
        try:
            return await _tenant(ctx).summary_text(session_id)
        except USER_ERRORS as exc:
            raise ResourceNotFoundError(tool_words(exc)) from exc

    if tools is not None:
        for name in sorted(set(TOOLS) - set(tools)):
            mcp.remove_tool(name)
    return mcp


async def _sampling_for_compact(
    session_id: str,
    summarizer: str | None,
    instructions: str | None,
    ctx: Context,
    strategy: str = "anchored",
    dry_run: bool = False,
    apply: str | None = None,
    undo: bool = False,
    edit: str | None = None,
    range: str | None = None,
) -> Sample | None:
    """Ask the client's model for the summary before `compact` runs (both protocol eras).

    Whether to ask is the session's call: its effective settings choose the summarizer, exactly
    as they choose the chain `compact` then runs; `regions` asks for its largest regions' digests.
    A dry run, applying a preview, an undo, an edit, a range and the strategies that write no summary
    never cost the client a model call.
    """
    if (
        dry_run
        or apply is not None
        or undo
        or edit is not None
        or range is not None
        or strategy not in ("anchored", "regions")
        or not _can_sample(ctx)
    ):
        return None
    try:
        prompt = await _tenant(ctx).sampling_prompt(
            session_id, summarizer=summarizer, instructions=instructions, strategy=strategy
        )
    except USER_ERRORS:
        return None  # the tool body meets the same error and reports it in one line
    return _sample(prompt) if prompt else None


async def _sampling_for_summarize(
    messages: list[dict[str, Any]], previous_summary: str | None, summarizer: str | None, ctx: Context
) -> Sample | None:
    service = _service(ctx)
    if not service.wants_sampling(summarizer) or not _can_sample(ctx):
        return None
    try:
        prompt = service.summarize_prompt(messages, previous_summary=previous_summary)
    except USER_ERRORS:
        return None  # the tool body reports the bad input
    return _sample(prompt)


_heap_settled = False


def _settle_heap() -> None:
    """Once per process, when a server has loaded: what exists now (the SDK, the schemas, the
    tokenizer tables once built) lives as long as the process, so it is moved out of the cyclic
    collector's reach. Full collections then no longer walk it: their median pause under a long
    agent loop fell from 56 ms to a few (issue 15; `benchmarks/bench_turns.py` measures it)."""
    global _heap_settled
    if not _heap_settled:
        _heap_settled = True
        gc.collect()
        gc.freeze()


def _answered_once(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`fn` answering with its result once: structured, beside a one-line text (`answers`)."""

    @functools.wraps(fn)  # the SDK reads the signature and return type through `__wrapped__`
    async def answer(*args: Any, **kwargs: Any) -> Any:
        result = await fn(*args, **kwargs)
        if not isinstance(result, BaseModel):
            return result
        if isinstance(result, RenderedContext):
            # Its fields hold JSON already (rendered messages): dumping would copy every message.
            data = {name: getattr(result, name) for name in RenderedContext.model_fields}
        else:
            data = result.model_dump(mode="json", by_alias=True)
        ctx = kwargs.get("ctx")
        version = ctx.protocol_version if isinstance(ctx, Context) else None
        text = answers.summary_text(data) if answers.reads_structured(version) else answers.compact_json(data)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    return answer


class _CompactSchemas(MCPServer):
    """`tools/list` without schema noise (`schemas.lean`): the model reads it on each request.

    Every tool call also passes `call_tool` first, where arguments are made safe (`safejson`), the
    large strings an HTTP request carried are put back (`bigstrings`), or a big HTTP body's arguments,
    parsed off the event loop, taken as they are (`bodies`), and a validation failure becomes `field: problem` pairs instead of pydantic's report. A storage
    error answered to a remote tenant names "the server's data home" rather than its paths.
    """

    private_names: tuple[tuple[str, str], ...] = ()
    """The server's own paths and database address, each with what a remote tenant reads instead,
    longest first."""

    def tool(self, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        """The SDK's decorator, registering the tool to answer once (`_answered_once`)."""
        register = super().tool(*args, **kwargs)

        def decorator(fn: Any) -> Any:
            register(_answered_once(fn))
            return fn

        return decorator

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            parsed = bodies.restore(arguments)  # a big HTTP body's, parsed and made safe already
            arguments = parsed if parsed is not None else bigstrings.restore(safejson.clean(arguments, ""))
        except LimitExceeded as exc:
            raise ToolError(f"Error executing tool {name}: {exc}") from exc
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                # Keep the ValidationError as the cause: the SDK then logs only the field names.
                raise ToolError(f"Error executing tool {name}: {_invalid_arguments(cause)}") from cause
            if _owner() and _caused_by(exc, StorageError):
                # A tenant over HTTP learns what is wrong and what to do, not the server's layout.
                raise ToolError(self._redacted(str(exc))) from cause
            if len(str(exc)) > MAX_MESSAGE_CHARS:  # it echoes a huge argument
                raise ToolError(brief(str(exc))) from cause
            raise

    def _redacted(self, message: str) -> str:
        for name, instead in self.private_names:
            message = message.replace(name, instead)
        return message

    async def list_tools(self) -> list[Tool]:
        return [
            tool.model_copy(
                update={
                    "input_schema": lean(inline_defs(tool.input_schema), output=False),
                    "output_schema": shallow(lean(inline_defs(tool.output_schema), output=True))
                    if tool.output_schema
                    else None,
                }
            )
            for tool in await super().list_tools()
        ]


_MAX_PROBLEMS = 5
_DATA_HOME = "the server's data home"
_DATABASE = "the server's database"


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` was raised from a `kind` (through the SDK's own wrapping)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, kind):
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


def _invalid_arguments(error: ValidationError) -> str:
    """pydantic's errors as `field: problem` pairs, without its URLs or echoes of the input."""
    problems = [
        f"{_location(e['loc']) or 'arguments'}: {e['msg']}"
        for e in error.errors(include_url=False, include_input=False, include_context=False)
    ]
    if len(problems) > _MAX_PROBLEMS:
        problems = [*problems[:_MAX_PROBLEMS], f"and {len(problems) - _MAX_PROBLEMS} more"]
    return "invalid arguments: " + "; ".join(problems)


def _location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _can_sample(ctx: Context) -> bool:
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.sampling is not None


def _sample(prompt: tuple[str, str, int]) -> Sample:
    system, user, max_tokens = prompt
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=user))],
        max_tokens=max_tokens,
        system_prompt=system,
    )


def _sampled(result: CreateMessageResult | None) -> Sampled | None:
    if result is None:
        return None
    content = result.content
    text = content.text if isinstance(content, TextContent) else None
    return Sampled(text=text, model=result.model)

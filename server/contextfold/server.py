"""MCP wiring: each tool translates its arguments into one `ContextService` call.

No logic lives here. Errors that describe a bad request become `isError` results whose text says
what to fix; anything else is a bug and is logged with its traceback before the SDK reports it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from . import __version__
from .config import Settings, load_settings
from .results import AppendResult, Deleted, SessionList, Status, TokenCount
from .results import Context as RenderedContext
from .service import USER_ERRORS, ContextService

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
contextfold keeps this conversation's context. Each turn: append the new messages (with the usage \
the provider reported), read `status`, act on its recommended_action, then `get_context` for the \
messages to send. Token counts are exact for OpenAI models and labelled estimates otherwise."""

SessionId = Annotated[str, Field(description="Session id from session_open.", min_length=1, max_length=200)]
WireMessages = Annotated[
    list[dict[str, Any]],
    Field(description="Anthropic Messages or OpenAI Chat messages; tool results complete earlier calls."),
]
FormatArg = Annotated[
    Literal["anthropic", "openai", "auto"], Field(description="Message format; auto detects it.")
]

def _annotations(title: str, *, read_only: bool = False, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def _owner() -> str:
    """The tenant making the request: the bearer token's client over HTTP, '' locally."""
    token = get_access_token()
    return token.client_id if token is not None and token.client_id else ""


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except USER_ERRORS as exc:
        raise ToolError(str(exc)) from exc
    except Exception:
        log.exception("unexpected error in a tool")
        raise


def _service(ctx: Context) -> ContextService:
    return ctx.request_context.lifespan_context


def build_server(settings: Settings | None = None) -> MCPServer:
    """The contextfold MCP server; each connection (or the HTTP process) opens the store once."""
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[ContextService]:
        service = await ContextService.open(settings)
        try:
            yield service
        finally:
            await service.close()

    mcp = MCPServer("contextfold", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)

    @mcp.tool(title="Count tokens", annotations=_annotations("Count tokens", read_only=True, idempotent=True))
    async def count_tokens(
        ctx: Context,
        text: Annotated[str | None, Field(description="Text to count.")] = None,
        messages: Annotated[list[dict[str, Any]] | None, Field(description="Messages to count instead.")] = None,
        model: Annotated[str | None, Field(description="Model id, e.g. gpt-4o, claude-sonnet-4-5.")] = None,
        format: FormatArg = "auto",
    ) -> TokenCount:
        """Count tokens for a model: exact for OpenAI encodings, a labelled estimate otherwise."""
        with _user_errors():
            return _service(ctx).count_tokens(text=text, messages=messages, model=model, format=format)

    @mcp.tool(title="Open session", annotations=_annotations("Open session"))
    async def session_open(
        ctx: Context,
        session_id: Annotated[str | None, Field(description="Reopen (or create) this id.", max_length=200)] = None,
        model: Annotated[str | None, Field(description="Model id; sets limits and tokenizer.")] = None,
        title: str | None = None,
        system: Annotated[str | None, Field(description="System prompt.")] = None,
        settings: Annotated[dict[str, Any] | None, Field(description="Per-session setting overrides.")] = None,
    ) -> Status:
        """Create a session, or reopen one by id; returns its status."""
        with _user_errors():
            return await _service(ctx).open_session(
                session_id, model=model, title=title, settings=settings, system=system, owner=_owner()
            )

    @mcp.tool(title="List sessions", annotations=_annotations("List sessions", read_only=True, idempotent=True))
    async def session_list(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None,
    ) -> SessionList:
        """Sessions, most recently updated first."""
        with _user_errors():
            return await _service(ctx).list_sessions(limit=limit, cursor=cursor, owner=_owner())

    @mcp.tool(
        title="Delete session",
        annotations=_annotations("Delete session", destructive=True, idempotent=True),
    )
    async def session_delete(ctx: Context, session_id: SessionId) -> Deleted:
        """Delete a session and all its messages. Cannot be undone."""
        with _user_errors():
            return await _service(ctx).delete_session(session_id, owner=_owner())

    @mcp.tool(title="Append messages", annotations=_annotations("Append messages"))
    async def append(
        ctx: Context,
        session_id: SessionId,
        messages: WireMessages,
        format: FormatArg = "auto",
        usage: Annotated[
            dict[str, Any] | None,
            Field(description="Provider-reported usage of the last assistant message in the batch."),
        ] = None,
        system: Annotated[str | None, Field(description="Replace the system prompt.")] = None,
    ) -> AppendResult:
        """Append messages in one transaction; returns their ids and token counts and the session status."""
        with _user_errors():
            return await _service(ctx).append(
                session_id, messages, format=format, usage=usage, system=system, owner=_owner()
            )

    @mcp.tool(title="Get context", annotations=_annotations("Get context", read_only=True, idempotent=True))
    async def get_context(
        ctx: Context,
        session_id: SessionId,
        format: Literal["anthropic", "openai"] = "openai",
        limit: Annotated[int | None, Field(ge=1, description="Messages per page; default all.")] = None,
        cursor: str | None = None,
        strip_media: bool = False,
    ) -> RenderedContext:
        """For harnesses: the model-ready messages of a session in the chosen API format."""
        with _user_errors():
            return await _service(ctx).get_context(
                session_id, format=format, limit=limit, cursor=cursor, strip_media=strip_media, owner=_owner()
            )

    @mcp.tool(title="Session status", annotations=_annotations("Session status", read_only=True, idempotent=True))
    async def status(ctx: Context, session_id: SessionId) -> Status:
        """Tokens in view against the model's usable budget, the state and the recommended action."""
        with _user_errors():
            return await _service(ctx).status(session_id, owner=_owner())

    return mcp

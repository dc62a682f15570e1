"""Open MCP sessions over HTTP, limited per tenant, so one tenant cannot lock out the others.

The SDK's session manager keeps every stateful (2025-era) session until the client deletes it or
it idles out, and refuses new ones with a bare 503 once `max_sessions` are open in all. One tenant
opening thousands therefore locked every other tenant out. Here a new session is admitted only
while its tenant holds fewer than `http_sessions_per_tenant` and the server fewer than
`http_max_sessions`; a refusal is a JSON-RPC error that names the limit and what to do, which MCP
clients surface as the error itself.

The count is taken from the manager's own table of open sessions, under its creation lock, at the
moment it would admit one: sessions that ended (DELETE, idle timeout, crash) are already gone from
it, and two handshakes at once cannot both take the last place. Sessionless (2026-07-28) requests
never open one and are not limited here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)

INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603


class SessionRefused(Exception):
    """A new session was not admitted: the HTTP status and the message to send."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _tenant(owner: Any) -> str:
    """The tenant of a session's owner (the SDK's AuthorizationContext); '' without tokens."""
    return (owner.get("client_id") or "") if isinstance(owner, dict) else ""


class SessionLimits:
    """Admits new MCP sessions within the per-tenant and total limits."""

    def __init__(self, per_tenant: int, total: int, idle_seconds: float) -> None:
        self.per_tenant = per_tenant
        self.total = total
        self.idle_seconds = idle_seconds

    def install(self, manager: StreamableHTTPSessionManager) -> None:
        """Check every admission `manager` makes, and answer its refusals.

        Relies on the manager's `_admit_session`, `_server_instances` and `_session_owners`
        (mcp 2.3, which pyproject pins); fails at start-up, not at the first handshake, if they moved.
        """
        for name in ("_admit_session", "_server_instances", "_session_owners", "asgi_app"):
            if not hasattr(manager, name):
                raise RuntimeError(f"the installed mcp SDK has no StreamableHTTPSessionManager.{name}")
        admit: Callable[[Any], Any] = manager._admit_session

        def admit_within_limits(requestor: Any) -> Any:
            self.check(manager._server_instances, manager._session_owners, _tenant(requestor))
            return admit(requestor)

        manager._admit_session = admit_within_limits  # type: ignore[method-assign]
        manager.asgi_app = _AnswerRefusals(manager.asgi_app)  # type: ignore[assignment]  # the SDK types the attribute as its own middleware class; any ASGI app serves

    def check(self, transports: dict[str, Any], owners: dict[str, Any], tenant: str) -> None:
        """Raise `SessionRefused` if `tenant` may not open another session now.

        `transports` and `owners` map session ids to the manager's transports and owners; a
        transport already terminated (its DELETE answered) no longer counts.
        """
        idle = f"idle ones close after {self.idle_seconds:g} s (http_session_idle_seconds)"
        open_sessions = [sid for sid, transport in transports.items() if not transport.is_terminated]
        if len(open_sessions) >= self.total:
            log.warning("refusing a new MCP session: %d open in all (http_max_sessions)", len(open_sessions))
            raise SessionRefused(
                503,
                INTERNAL_ERROR,
                f"the server has {self.total:,} open MCP sessions, its http_max_sessions limit; "
                f"retry later ({idle}) or ask its operator to raise http_max_sessions",
            )
        held = sum(1 for session_id in open_sessions if _tenant(owners.get(session_id)) == tenant)
        if held >= self.per_tenant:
            who = f"tenant {tenant!r} already holds" if tenant else "local clients already hold"
            log.warning("refusing a new MCP session: %s %d (http_sessions_per_tenant)", who, held)
            raise SessionRefused(
                429,
                INVALID_REQUEST,
                f"{who} {held:,} open MCP sessions, the http_sessions_per_tenant limit; "
                f"close sessions you no longer use (HTTP DELETE with their Mcp-Session-Id), wait until "
                f"{idle}, or raise http_sessions_per_tenant",
            )


class _AnswerRefusals:
    """ASGI: a `SessionRefused` raised while admitting becomes its status and a JSON-RPC error.

    Admission happens before the request is answered, so no response has started yet.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except SessionRefused as refused:
            body = json.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": refused.code, "message": str(refused)}}
            ).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": refused.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

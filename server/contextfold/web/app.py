"""The inspector as a Starlette application: read-only pages over one data home, per tenant.

On a loopback address with no tokens configured every page is the local tenant's. With bearer
tokens (which `contextfold ui` requires on any other address, as `serve --http` does) each request
names its tenant by `Authorization: Bearer <token>` or, for a browser, the `contextfold_token`
cookie the sign-in page sets; the token is checked by `TenantTokens`, the same object and rule
the MCP server uses. A tenant sees only its own sessions: another tenant's session, output or
search answers exactly as an id nobody has (`not_found`). Only GET and HEAD are routed.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from contextfold.errors import InvalidInput, NotFoundError
from contextfold.mcpserver.auth import TenantTokens, unauthorized_message
from contextfold.names import LOCAL_OWNER
from contextfold.service.facade import ContextService, Tenant
from contextfold.web import pages

COOKIE = "contextfold_token"

Page = Callable[[Request, Tenant], Awaitable[Response]]

HEADERS = {
    # Everything is inlined and nothing is fetched: the policy says so to the browser too.
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def not_found(kind: str) -> HTMLResponse:
    """The one answer for an id this tenant cannot see, whether nobody has it or another tenant
    does: the same bytes for any id (the page does not even repeat it)."""
    body = pages.render("notfound.html", kind=kind, links=pages.Links(), title="Not found")
    return HTMLResponse(body, status_code=404, headers=HEADERS)


def build_app(service: ContextService, tokens: TenantTokens | None = None) -> Starlette:
    """The inspector over `service`'s home; `tokens` given (and configured), every request needs one."""
    settings = service.settings
    links = pages.Links()
    dropped: dict[tuple[str, str, str], str] = {}

    def tenant_of(request: Request) -> Tenant | None:
        if tokens is None or not tokens.configured:
            return service.tenant(LOCAL_OWNER)
        header = request.headers.get("authorization", "")
        token = header[7:] if header[:7].lower() == "bearer " else request.cookies.get(COOKIE)
        owner = tokens.tenant_of(token) if token else None
        return service.tenant(owner) if owner else None

    def page(handler: Page) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            tenant = tenant_of(request)
            if tenant is None:
                presented = bool(request.headers.get("authorization") or request.cookies.get(COOKIE))
                body = pages.render(
                    "signin.html", message=unauthorized_message(presented), links=links, title="Sign in"
                )
                return HTMLResponse(
                    body, status_code=401, headers={**HEADERS, "www-authenticate": 'Bearer realm="contextfold"'}
                )
            try:
                return await handler(request, tenant)
            except NotFoundError as exc:
                return not_found("output" if exc.kind == "output" else "session")
            except InvalidInput as exc:
                return html_page("error.html", 400, title="bad request", message=str(exc))

        return endpoint

    def html_page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(
            pages.render(name, links=links, poll=settings.ui_poll_seconds, **context),
            status_code=status,
            headers=HEADERS,
        )

    async def sessions(request: Request, tenant: Tenant) -> Response:
        query = request.query_params.get("q", "")
        state = request.query_params.get("state", "")
        rows = await tenant.inspect_sessions(query=query)
        if state:
            rows = [r for r in rows if r.status.state == state]
        return html_page("sessions.html", rows=rows, q=query, state=state, title="Sessions")

    async def session(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        data = await pages.session_now(tenant, sid, _int(request, "page", 1), settings.ui_page_messages)
        return html_page("session.html", sid=sid, tab="now", title=f"{sid} — now", live=True, **data)

    async def live(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        record = await tenant.session_record(sid)
        status = await tenant.status(sid)
        return JSONResponse(
            {
                "revision": record.revision,
                "tokens_in_view": status.tokens_in_view,
                "state": status.state,
                "messages": status.message_count,
            },
            headers=HEADERS,
        )

    async def history(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        at = request.query_params.get("at", "m1")
        try:
            seq = int(at[1:]) if at.startswith("m") else int(at)
        except ValueError:
            seq = 1
        per = settings.ui_page_messages
        start = max(seq - 3, 0)
        rows = await tenant.stored_page(sid, after_seq=start, limit=per)
        session = await tenant.session_record(sid)
        return html_page(
            "history.html",
            sid=sid,
            tab="history",
            title=f"{sid} — history",
            session=session,
            rows=[(m, shown, pages.shown_parts(m, stored=True)) for m, shown in rows],
            at=seq,
            earlier=max(start - per + 3, 1) if start > 0 else None,
            later=rows[-1][0].seq + 1 if len(rows) == per else None,
        )

    async def summary(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        found = await pages.with_dropped(tenant, sid, await tenant.summaries(sid), dropped)
        session = await tenant.session_record(sid)
        return html_page(
            "summary.html",
            sid=sid,
            tab="summary",
            title=f"{sid} — summary",
            session=session,
            summaries=found,
            live=True,
        )

    async def life(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        lived = await tenant.life(sid)
        session = await tenant.session_record(sid)
        return html_page(
            "life.html",
            sid=sid,
            tab="life",
            title=f"{sid} — life",
            session=session,
            life=lived,
            plot=pages.plot(lived),
            live=True,
        )

    async def outputs(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        found = await tenant.spilled_outputs(sid)
        session = await tenant.session_record(sid)
        return html_page(
            "outputs.html", sid=sid, tab="outputs", title=f"{sid} — outputs", session=session, outputs=found, live=True
        )

    async def output(request: Request, tenant: Tenant) -> Response:
        oid = request.path_params["oid"]
        row = await tenant.spilled_output(oid)
        q = request.query_params
        pattern = q.get("pattern") or None
        error = None
        read = None
        try:
            read = await tenant.read_output(
                oid,
                offset=_int(request, "offset", 1),
                limit=_int(request, "limit", 200),
                pattern=pattern,
                context=_int(request, "context", 2 if pattern else 0),
                ignore_case=q.get("ignore_case") == "1",
            )
        except InvalidInput as exc:
            error = str(exc)
        session = await tenant.session_record(row.record.session_id)
        return html_page(
            "output.html",
            400 if error else 200,
            sid=session.id,
            tab="outputs",
            title=f"output {oid}",
            session=session,
            row=row,
            read=read,
            error=error,
            q={k: q.get(k, "") for k in ("offset", "limit", "pattern", "context", "ignore_case")},
        )

    async def search(request: Request, tenant: Tenant) -> Response:
        sid = request.path_params["sid"]
        pattern = request.query_params.get("pattern", "")
        at = request.query_params.get("at") or None
        ignore_case = request.query_params.get("ignore_case") == "1"
        session = await tenant.session_record(sid)
        hits: list[dict[str, Any]] = []
        next_at = None
        error = None
        if pattern:
            try:
                page_ = await tenant.search_history(sid, pattern=pattern, at=at, limit=50, ignore_case=ignore_case)
                hits = _hits(page_.text)
                next_at = page_.next_at
            except InvalidInput as exc:
                error = str(exc)
        return html_page(
            "search.html",
            400 if error else 200,
            sid=sid,
            tab="search",
            title=f"{sid} — search",
            session=session,
            pattern=pattern,
            ignore_case=ignore_case,
            hits=hits,
            next_at=next_at,
            error=error,
        )

    async def refuse(request: Request) -> Response:
        return Response("the inspector is read-only\n", status_code=405, headers={"allow": "GET, HEAD"})

    routes = [
        Route("/", page(sessions)),
        Route("/s/{sid}", page(session)),
        Route("/s/{sid}/live", page(live)),
        Route("/s/{sid}/history", page(history)),
        Route("/s/{sid}/summary", page(summary)),
        Route("/s/{sid}/life", page(life)),
        Route("/s/{sid}/outputs", page(outputs)),
        Route("/s/{sid}/search", page(search)),
        Route("/o/{oid}", page(output)),
    ]
    return Starlette(routes=routes)


def _int(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise InvalidInput(name, f"expected a whole number, got {value[:40]!r}") from None


_HEADER = re.compile(r"^m(\d+) (user|assistant)(, hidden)?$")


def _hits(text: str) -> list[dict[str, Any]]:
    """`search_history`'s blocks (a header `m12 user, hidden`, then lines) as hits to link."""
    hits: list[dict[str, Any]] = []
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            seq = int(header.group(1))
            hits.append(
                {"seq": seq, "ref": f"m{seq}", "role": header.group(2), "hidden": bool(header.group(3)), "lines": []}
            )
        elif hits:
            hits[-1]["lines"].append(line)
    for hit in hits:
        hit["lines"] = "\n".join(hit["lines"])
    return hits


__all__ = ["COOKIE", "build_app", "not_found"]

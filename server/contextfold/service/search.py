"""Recall over a tenant's whole stored history: full-text search ranked by relevance, in one
session, a project's sessions or all of them, within a time window; and `expand`, which reads
back the messages around a hit or every message a summary bullet cites.

This is the one entry point the MCP tool `search_history`, the CLI's `contextfold search` and the
web inspector call. The index is the database's (`store.search_messages`); the words a caller
writes are read by `policy.recall`, so nothing typed can reach the database's query syntax.
The regex mode is `History.search_history`, unchanged: one session, with its time limits.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal

from contextfold.domain import Message, Session
from contextfold.errors import InvalidInput
from contextfold.policy import view
from contextfold.policy.recall import cited_runs, named_runs, parse_terms, ranked, snippet, window
from contextfold.results import FoundMessage, SearchPage
from contextfold.service.history import History, _text_of, ref
from contextfold.service.runtime import Scope
from contextfold.store import SearchHit, SearchQuery

Mode = Literal["text", "regex"]
Within = Literal["session", "project", "all"]

MAX_HITS = 50
"""Hits one page may ask for (`limit`)."""
MAX_EXPAND = 50
"""Messages one `expand` reads at most (a bullet citing a long run gets its first ones)."""
MAX_AROUND = 10
SNIPPET_CHARS = 240
RANK_POOL = 100
"""The store's best hits that ranking reorders (`policy.recall.ranked`); hits past them follow
in the store's order."""
SUMMARIES_READ = 20
"""A session's newest summaries searched for bullets citing a hit."""
INDEX_SECONDS = 1.0
"""Time one search spends indexing older history while the index is still being built."""


async def search(
    scope: Scope,
    query: str | None = None,
    *,
    session_id: str | None = None,
    within: Within | None = None,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
    mode: Mode = "text",
    limit: int = 10,
    offset: int = 0,
    expand: str | None = None,
    around: int = 2,
    at: str | None = None,
    now: float | None = None,
) -> SearchPage:
    """Search the tenant's stored messages, hidden ones included, or read some back (`expand`).

    `at` (one session): read the session's messages from that one on, or go on with a regex
    search from it (as `next_at` said)."""
    settings = scope.settings
    if not 1 <= limit <= MAX_HITS:
        raise InvalidInput("limit", f"expected 1 to {MAX_HITS}, got {limit}")
    if offset < 0:
        raise InvalidInput("offset", f"expected 0 or more, got {offset}")
    if expand is not None:
        if session_id is None:
            raise InvalidInput("session_id", "expand reads messages of one session: give its session_id")
        return await _expand(scope, session_id, expand, around)
    if at is not None and (query is None or mode == "regex"):
        if session_id is None:
            raise InvalidInput("session_id", "at reads messages of one session: give its session_id")
        return await _regex(scope, query, session_id, within, since, until, limit, at)
    if query is None or not query.strip():
        raise InvalidInput("query", "give words to search for (or expand=<m12 or a citation> to read messages)")
    if mode == "regex":
        return await _regex(scope, query, session_id, within, since, until, limit, None)
    if mode != "text":
        raise InvalidInput("mode", f"expected 'text' or 'regex', got {mode!r}")
    terms = parse_terms(query, max_chars=settings.search_max_query_chars, max_terms=settings.search_max_terms)
    lo, hi = window(since, until, now=time.time() if now is None else now)
    within = within or ("session" if session_id else "all")
    wanted = SearchQuery(
        terms=terms.terms,
        any_term=terms.any_term,
        since=lo,
        until=hi,
        limit=limit + 1,  # one more says whether there is a next page
        offset=offset,
        timeout=settings.search_timeout_seconds,
        **await _where(scope, within, session_id, project),
    )
    notes = await _index(scope)
    if all(len(term) < 3 for term in terms.terms):
        notes.append(
            "no index holds words under 3 characters: every message in scope was read (narrow it with "
            "within, session_id or since if that is slow)"
        )
    found = await _ranked(scope, wanted, limit, notes)
    more = len(found) > limit
    sessions: dict[str, Session] = {}
    hits = [hit for hit in [await _found(scope, h, terms.terms, sessions) for h in found[:limit]] if hit is not None]
    await _cite(scope, hits)
    return _page(scope, hits, notes, offset=offset, more=more, what="hit")


async def _ranked(scope: Scope, wanted: SearchQuery, limit: int, notes: list[str]) -> list[SearchHit]:
    """The page `wanted` asks for (`offset`, `limit`), in the order `policy.recall.ranked` gives
    the store's best `RANK_POOL` hits; past them, in the store's order. Every hit is on one page:
    the pool is the same set whatever the page, and what follows it is the store's own sequence.

    When fewer messages than a page (`limit`) hold every word of several, the messages holding
    some of them follow (ranked the same way, at most `RANK_POOL`), and a note says so: a word
    written differently there (`migration` for `migrations`) no longer hides the message."""
    store = scope.store
    end = wanted.offset + wanted.limit
    pool = ranked(await store.search_messages(replace(wanted, limit=RANK_POOL, offset=0)))
    if len(pool) < limit and len(wanted.terms) > 1 and not wanted.any_term:
        every = {hit.message_id for hit in pool}
        some = ranked(await store.search_messages(replace(wanted, any_term=True, limit=RANK_POOL, offset=0)))
        some = [hit for hit in some if hit.message_id not in every]
        if some:
            notes.append(
                "no message holds every word; these hold some of them"
                if not pool
                else "1 message holds every word and comes first; the hits after it hold some of them"
                if len(pool) == 1
                else f"{len(pool)} messages hold every word and come first; the hits after them hold some of them"
            )
        return (pool + some)[wanted.offset : end]
    page = pool[wanted.offset : end]
    if len(pool) == RANK_POOL and len(page) < wanted.limit:
        start = max(wanted.offset, RANK_POOL)
        page += await store.search_messages(replace(wanted, limit=end - start, offset=start))
    return page


async def _where(scope: Scope, within: str, session_id: str | None, project: str | None) -> dict[str, str | None]:
    """The store's scope for `within`: the session, the project's sessions, or everything."""
    if within == "session":
        if session_id is None:
            raise InvalidInput("session_id", "within='session' searches one session: give its session_id")
        await scope.store.get_session(session_id)  # not found reads as not found, for any tenant
        return {"session_id": session_id}
    if within == "project":
        if project is None:
            if session_id is None:
                raise InvalidInput("project", "within='project' needs a project root, or a session_id to take it from")
            session = await scope.store.get_session(session_id)
            project = session.metadata.project
            if not project:
                raise InvalidInput(
                    "within",
                    f"session {session_id!r} has no project root recorded (sessions an agent's hooks or an "
                    "import of its transcript made have one); search within='all' or give project",
                )
        return {"project": project}
    if within == "all":
        return {}
    raise InvalidInput("within", f"expected 'session', 'project' or 'all', got {within!r}")


async def _index(scope: Scope) -> list[str]:
    """Index older history for a while if the index is still being built; a note saying so."""
    store = scope.runtime.store
    deadline = time.monotonic() + INDEX_SECONDS
    progress = await store.index_step(scope.settings.search_index_batch)
    while not progress.complete and progress.writable and time.monotonic() < deadline:
        progress = await store.index_step(scope.settings.search_index_batch)
    if progress.waiting:
        return [
            f"the home is open only to read: {progress.waiting:,} recently stored parts are not in the search index"
        ]
    if progress.complete:
        return []
    return [
        f"the search index is still being built over older history ({progress.done:,} of {progress.total:,} "
        "stored parts); older messages may be missing from these hits"
    ]


async def _shown(scope: Scope, session_id: str, views: dict[str, set[str]]) -> set[str]:
    """The ids of the session's messages in its view (compaction and removal hide the others)."""
    if session_id not in views:
        views[session_id] = {m.id for m in await scope.view(await scope.store.get_session(session_id))}
    return views[session_id]


async def _found(
    scope: Scope, hit: SearchHit, terms: tuple[str, ...], sessions: dict[str, Session]
) -> FoundMessage | None:
    loaded = await scope.store.load_messages(hit.session_id, after_seq=hit.seq - 1, limit=1, hidden=True)
    if not loaded:
        return None  # deleted since the search read the index
    if hit.session_id not in sessions:
        sessions[hit.session_id] = await scope.store.get_session(hit.session_id)
    # Out of the view: taken out by a removal strategy, or behind the session's compaction anchor
    # (`in_view` decides one message as it decides the whole view, without reading the rest).
    shown = not hit.hidden and bool(view.in_view(loaded, sessions[hit.session_id].view))
    return FoundMessage(
        session_id=hit.session_id,
        ref=ref(hit.seq),
        message_id=hit.message_id,
        role=hit.role,
        created_at=hit.created_at,
        hidden=not shown,
        text=snippet(_text_of(loaded[0]), terms, SNIPPET_CHARS),
    )


async def _cite(scope: Scope, hits: list[FoundMessage]) -> None:
    """Fill each hit's `cited_by`: the bullets of its session's summaries that cite it."""
    bullets: dict[str, list[tuple[str, list[tuple[int, int]]]]] = {}
    for hit in hits:
        if hit.session_id not in bullets:
            lines: list[tuple[str, list[tuple[int, int]]]] = []
            for summary in await scope.store.summaries(hit.session_id, limit=SUMMARIES_READ):
                for line in _text_of(summary).splitlines():
                    runs = cited_runs(line)
                    if runs:
                        lines.append((f"{ref(summary)}: {' '.join(line.split())}", runs))
            bullets[hit.session_id] = lines
        seq = int(hit.ref[1:])
        hit.cited_by = [text for text, runs in bullets[hit.session_id] if any(a <= seq <= b for a, b in runs)][:3]


async def _expand(scope: Scope, session_id: str, expand: str, around: int) -> SearchPage:
    if not 0 <= around <= MAX_AROUND:
        raise InvalidInput("around", f"expected 0 to {MAX_AROUND}, got {around}")
    if len(expand) > scope.settings.search_max_query_chars:
        raise InvalidInput("expand", f"longer than search_max_query_chars ({scope.settings.search_max_query_chars})")
    runs = named_runs(expand)
    if not runs:
        raise InvalidInput(
            "expand", "names no message: write m12 (with the messages around it) or a citation [m3, m9–m12]"
        )
    if len(runs) == 1 and runs[0][0] == runs[0][1] and "[" not in expand:
        seq = runs[0][0]
        runs = [(max(1, seq - around), seq + around)]
    await scope.store.get_session(session_id)
    messages: list[Message] = []
    for first, last in runs:
        room = MAX_EXPAND - len(messages)
        if room <= 0:
            break
        messages += await scope.store.load_messages(
            session_id, after_seq=max(first, 1) - 1, limit=min(last - max(first, 1) + 1, room), hidden=True
        )
    if not messages:
        raise InvalidInput("expand", f"no message {expand!r} in session {session_id!r}")
    shown = await _shown(scope, session_id, {})
    hits = [
        FoundMessage(
            session_id=session_id,
            ref=ref(m),
            message_id=m.id,
            role=m.role,
            created_at=m.created_at,
            hidden=m.id not in shown,
            text=_text_of(m),
        )
        for m in messages
    ]
    await _cite(scope, hits)
    notes = (
        [f"read the first {MAX_EXPAND} messages named; expand the rest separately"]
        if len(messages) >= MAX_EXPAND
        else []
    )
    return _page(scope, hits, notes, offset=0, more=False, what="message")


async def _regex(
    scope: Scope,
    pattern: str | None,
    session_id: str | None,
    within: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    at: str | None,
) -> SearchPage:
    if session_id is None or within not in (None, "session"):
        raise InvalidInput("mode", "regex mode searches one session: give its session_id (mode='text' searches more)")
    if since is not None or until is not None:
        raise InvalidInput("mode", "regex mode takes no since/until; mode='text' searches a time window")
    if pattern is not None and len(pattern) > scope.settings.search_max_query_chars:
        raise InvalidInput(
            "query",
            f"{len(pattern):,} characters, longer than search_max_query_chars "
            f"({scope.settings.search_max_query_chars:,}); shorten it",
        )
    page = await History(scope).search_history(session_id, pattern=pattern, at=at, limit=min(limit, 50))
    notes = [f"more: call again with at={page.next_at}"] if page.next_at else []
    return SearchPage(text=page.text or "no match", hits=[], next_offset=None, next_at=page.next_at, notes=notes)


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _page(
    scope: Scope, hits: list[FoundMessage], notes: list[str], *, offset: int, more: bool, what: str
) -> SearchPage:
    """The answer as text, cut to `search_answer_tokens` (counted, not guessed)."""
    settings = scope.settings
    counter = scope.counter(settings.default_model, settings)
    budget = settings.search_answer_tokens
    blocks: list[str] = []
    kept: list[FoundMessage] = []
    used = sum(counter.count(n) for n in notes) + 20
    for hit in hits:
        lines = [
            f"{hit.ref} in session {hit.session_id} · {_when(hit.created_at)} · {hit.role}"
            + (" (hidden from the view)" if hit.hidden else "")
        ]
        lines += [f"  {line}" for line in hit.text.splitlines()]
        lines += [f"  cited by {bullet}" for bullet in hit.cited_by]
        block = "\n".join(lines)
        cost = counter.count(block) + 1
        if used + cost > budget:
            if not kept:  # the first one, cut to fit: an answer always shows something
                room = max(budget - used, 50)
                block = block[: room * 3] + "…"
                blocks.append(block)
                kept.append(hit.model_copy(update={"text": hit.text[: room * 3]}))
            notes.append(f"cut at search_answer_tokens ({budget:,}); page on with offset={offset + len(kept)}")
            more = True
            break
        used += cost
        blocks.append(block)
        kept.append(hit)
    header = [f"note: {n}" for n in notes]
    body = "\n".join(blocks) if blocks else f"no {what} found"
    return SearchPage(
        text="\n".join([*header, body]),
        hits=kept,
        next_offset=offset + len(kept) if more else None,
        notes=notes,
    )


class Recall:
    """The tenant's history search (`search`), a capability of `facade.Tenant`."""

    _scope: Scope

    async def search(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        within: Within | None = None,
        project: str | None = None,
        since: str | None = None,
        until: str | None = None,
        mode: Mode = "text",
        limit: int = 10,
        offset: int = 0,
        expand: str | None = None,
        around: int = 2,
        at: str | None = None,
    ) -> SearchPage:
        """Full-text search over the tenant's stored messages (see the module docstring)."""
        return await search(
            self._scope,
            query,
            session_id=session_id,
            within=within,
            project=project,
            since=since,
            until=until,
            mode=mode,
            limit=limit,
            offset=offset,
            expand=expand,
            around=around,
            at=at,
        )

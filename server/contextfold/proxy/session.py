"""The proxy's session in the data home: where its outputs are stored and its calls recorded.

Each proxy instance (each client session, over HTTP) has one contextfold session, made on first
use, so a proxy that is only started and listed (as clients do to check a server) leaves nothing
behind. Its id starts `proxy_` and its title `proxy: `, so that upkeep can tell proxy sessions
from an agent's. Over HTTP a session is one client's among others': `read_output` then reads only
the outputs this session stored (any other id reads exactly as an unknown one), and a session
shared by clients the proxy cannot tell apart does not search its history for them. Outputs go through the service's `spill`, with its file store, quota, retention and
per-owner ids, so `contextfold gc`, `sessions`, `show` and several processes on one home treat
them like any other. Every tool call and what the client received of it is appended to the
session after the answer has gone out (a queue and one writer task, batched), which is what
`search_history` searches.

The data home is opened in the background once the upstream has answered its first message, and
the tokenizer loaded, so the handshake is not held up by them. If the home cannot be used, the proxy still
relays everything; a result too large to return is then cut in place, with a note saying why
it could not be saved.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from contextfold.domain import new_id
from contextfold.errors import USER_ERRORS, NotFoundError, UsageError, brief, output_not_found
from contextfold.names import PROXY_ORIGIN
from contextfold.proxy.oversize import Limits, Piece, Stored

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.service.facade import ContextService, Tenant
    from contextfold.tokens.counting import TokenCounter

log = logging.getLogger(__name__)
T = TypeVar("T")

QUEUE = 1_000
"""Calls waiting to be recorded; past this, new ones are dropped (logged), never the relay slowed."""
BATCH = 200
"""Calls recorded in one append, at most."""
GATHER_SECONDS = 0.25
"""How long the writer waits for more calls to record with the first."""
FLUSH_SECONDS = 5.0


OPEN_GRACE_SECONDS = 10.0
"""How long closing waits for the data home still being opened (and perhaps migrated) to be done."""


class ProxySession:
    def __init__(
        self,
        settings: Settings,
        *,
        title: str,
        owner: str,
        service: ContextService | None = None,
        own_outputs_only: bool = False,
        unsearchable: str | None = None,
    ) -> None:
        """`service`: one already open (the HTTP server shares one); else the session opens its own.
        `own_outputs_only`: `read_output` reads only the outputs this session stored (a client over
        HTTP, among others); `unsearchable`: why `search_history` is refused (a session several
        clients share that the proxy cannot tell apart)."""
        self.settings = settings
        self._given = service
        self.title = title[:200]
        self.owner = owner
        self.own_outputs_only = own_outputs_only
        self.unsearchable = unsearchable
        self._stored: set[str] = set()
        """The outputs this session stored, which are all `read_output` reads when `own_outputs_only`."""
        self.limits = Limits(
            max_tokens=settings.proxy_max_tokens,
            max_lines=settings.max_lines,
            max_bytes=settings.max_bytes,
            preview_tokens=settings.proxy_preview_tokens,
            preview_lines=max(10, settings.max_lines // 10),
            preview_bytes=max(1024, settings.max_bytes // 4),
            max_binary_bytes=settings.proxy_max_binary_bytes,
            max_blocks=settings.proxy_max_result_blocks,
            tokens_per_byte=max(1.0, *settings.token_factors.values()),
        )
        self.session_id: str | None = None
        self._opening: asyncio.Task[ContextService] | None = None
        self._counter: asyncio.Task[TokenCounter] | None = None
        self._made = asyncio.Lock()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE)
        self._writer: asyncio.Task[None] | None = None
        self._owns_service = True
        self._calls = 0

    def start(self) -> None:
        """Open the data home and load the tokenizer in the background. The relay calls it once the
        upstream has answered its first message (so both do not start up at once on a busy machine);
        anything that needs the store calls it too."""
        if self._opening is None:
            self._owns_service = self._given is None
            self._opening = asyncio.create_task(self._open(self._given))
            self._counter = asyncio.create_task(asyncio.to_thread(self._load_counter))
            self._writer = asyncio.create_task(self._write_records())

    async def _open(self, service: ContextService | None) -> ContextService:
        if service is not None:
            return service
        # The store's modules take a few hundred milliseconds to import: in a worker thread, so
        # that the client's first messages are relayed meanwhile.
        await asyncio.to_thread(importlib.import_module, "contextfold.home.opening")
        from contextfold.home.opening import open_service

        opened, problem = await open_service(self.settings)
        if problem is not None:
            log.warning("contextfold proxy: %s", problem)
        return opened

    def _load_counter(self) -> TokenCounter:
        from contextfold.tokens.counting import counter_for

        counter = counter_for(self.settings.default_model, self.settings.token_factors)
        counter.count("warm up")
        return counter

    async def counter(self) -> TokenCounter:
        self.start()
        assert self._counter is not None
        return await self._counter

    async def service(self) -> ContextService:
        self.start()
        assert self._opening is not None
        return await self._opening

    async def _tenant(self) -> Tenant:
        service = await self.service()
        return service.tenant(self.owner)

    async def session(self) -> str:
        """The session's id, making the session on first use."""
        if self.session_id is not None:
            return self.session_id
        async with self._made:
            if self.session_id is None:
                tenant = await self._tenant()
                brief_ = await tenant.open_session(new_id("proxy"), title=self.title, origin=PROXY_ORIGIN)
                self.session_id = brief_.session_id
                log.info("contextfold proxy: session %s (%s)", self.session_id, self.title)
        return self.session_id

    async def _in_session(self, call: Callable[[str], Awaitable[T]]) -> T:
        """`call` on the session; once more on a new one if `contextfold gc` expired it meanwhile
        (idle past proxy_session_retention_hours while this connection lived on)."""
        session_id = await self.session()
        try:
            return await call(session_id)
        except NotFoundError as exc:
            if exc.kind != "session":
                raise
            async with self._made:
                if self.session_id == session_id:
                    self.session_id = None
            return await call(await self.session())

    # -- storing pieces of results ------------------------------------------------------------------

    async def store(self, piece: Piece, *, tool: str | None, call_id: str | None, reader: str) -> Stored:
        """Store one piece whole; its preview and hint, or, when it cannot be stored, a cut and why."""
        from contextfold.service.spilling import PreviewLimits

        try:
            tenant = await self._tenant()
            preview = PreviewLimits(
                max(piece.preview_tokens, 1), max(piece.preview_lines, 1), max(piece.preview_bytes, 1), reader
            )
            spilled = await self._in_session(
                lambda session_id: tenant.spill(session_id, piece.text, tool=tool, call_id=call_id, preview=preview)
            )
        except USER_ERRORS as exc:
            return Stored(await self._unsaved(piece, brief(str(exc))), None)
        except Exception as exc:  # the store failed in a way it does not describe: still answer
            log.exception("contextfold proxy: could not store an output")
            return Stored(await self._unsaved(piece, f"{type(exc).__name__}: {exc}"), None)
        self._stored.add(spilled.output_id)
        if piece.kind == "binary":
            shown = f'Saved whole (base64) as {spilled.output_id}; {reader}(id="{spilled.output_id}") reads it.'
            return Stored(shown, spilled.output_id)
        return Stored(spilled.preview, spilled.output_id)

    async def _unsaved(self, piece: Piece, reason: str) -> str:
        if piece.kind == "binary":
            return f"It could not be saved: {reason}."
        from contextfold.policy.truncate import truncate

        counter = await self.counter()
        cut = await asyncio.to_thread(
            truncate,
            piece.text,
            max_lines=max(piece.preview_lines, 1),
            max_bytes=max(piece.preview_bytes, 1),
            max_tokens=max(piece.preview_tokens, 1),
            count=counter.count,
            direction="auto",
        )
        shown = piece.text if cut is None else cut.preview
        omitted = "" if cut is None else f"{cut.omitted_bytes:,} bytes were cut and "
        return f"{shown}\n… {omitted}the full output could not be saved: {reason}"

    # -- the added tools --------------------------------------------------------------------------------

    async def read_output(self, *, output_id: str, offset: int, limit: int, pattern: str | None, context: int) -> str:
        if self.own_outputs_only and output_id not in self._stored:
            raise output_not_found(output_id)  # another client's, the server's, a hook's: as if nobody had it
        tenant = await self._tenant()
        read = await tenant.read_output(output_id, offset=offset, limit=limit, pattern=pattern, context=context)
        if read.matches is not None:
            head = f"{read.output_id}: {read.matches} matching line{'s' if read.matches != 1 else ''} of {read.total_lines:,}"
        else:
            head = f"{read.output_id}: {read.total_lines:,} lines"
        if read.has_more and read.next_offset is not None:
            head += f"; more from offset={read.next_offset}"
        return f"{head}\n{read.text}"

    async def search_history(self, *, pattern: str | None, at: str | None) -> str:
        if self.unsearchable is not None:
            raise UsageError(self.unsearchable)
        if self.session_id is None:
            return "Nothing recorded yet: no tool of this server has been called through this connection."
        await self.flush()
        tenant = await self._tenant()
        page = await tenant.search_history(self.session_id, pattern=pattern, at=at)
        if not page.text:
            return "No matches."
        return page.text + (f'\n… more from at="{page.next_at}"' if page.next_at else "")

    # -- recording calls --------------------------------------------------------------------------------

    def record(self, tool: str, arguments: Any, result: dict[str, Any] | None, error: str | None = None) -> None:
        """Queue a call and what the client received of it, to append to the session later."""
        self.start()
        self._calls += 1
        call_id = f"call_{self._calls}"
        text, failed = (error, True) if result is None else result_text(result)
        item = {
            "call": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": tool,
                        "input": arguments if isinstance(arguments, dict) else {},
                    }
                ],
            },
            "result": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text or "", "is_error": failed}],
            },
        }
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            log.warning("contextfold proxy: %d calls are waiting to be recorded; this one is not", QUEUE)

    async def _write_records(self) -> None:
        while True:
            items = [await self._queue.get()]
            # Calls come in bursts: gathering them a moment makes one transaction of many.
            deadline = asyncio.get_running_loop().time() + GATHER_SECONDS
            while len(items) < BATCH:
                wait = deadline - asyncio.get_running_loop().time()
                if wait <= 0:
                    break
                try:
                    items.append(await asyncio.wait_for(self._queue.get(), wait))
                except TimeoutError:
                    break
            try:
                tenant = await self._tenant()
                messages = [m for item in items for m in (item["call"], item["result"])]
                await self._in_session(partial(tenant.append, messages=messages, format="anthropic"))
            except USER_ERRORS as exc:
                log.warning("contextfold proxy: %d calls not recorded: %s", len(items), brief(str(exc)))
            except Exception:
                log.exception("contextfold proxy: %d calls not recorded", len(items))
            finally:
                for _ in items:
                    self._queue.task_done()

    async def flush(self, timeout: float = FLUSH_SECONDS) -> None:
        """Wait (a while) until every queued call is recorded."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            log.warning("contextfold proxy: %d calls were still waiting to be recorded", self._queue.qsize())

    async def close(self) -> None:
        if self._opening is None:
            return
        await self.flush()
        if self._writer is not None:
            self._writer.cancel()
        if not self._opening.done():
            # Opening may be migrating a new database: cancelled between two steps, it would leave
            # the home half upgraded (which reading commands then refuse). Let it finish, bounded.
            await asyncio.wait({self._opening}, timeout=OPEN_GRACE_SECONDS)
        for task in (self._opening, self._counter):
            if task is not None and not task.done():
                task.cancel()
        if not self._owns_service:
            return
        if self._opening.done() and not self._opening.cancelled() and self._opening.exception() is None:
            await self._opening.result().close()


def result_text(result: dict[str, Any]) -> tuple[str, bool]:
    """What a tool result says, as one text (for the session's record), and whether it is an error."""
    lines: list[str] = []
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            lines.append(block["text"])
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            text = resource.get("text")
            lines.append(text if isinstance(text, str) else f"[resource {resource.get('uri')}]")
        elif kind == "resource_link":
            lines.append(f"[resource link {block.get('uri')}]")
        elif kind in ("image", "audio"):
            lines.append(f"[{kind} {block.get('mimeType', '')}]")
    if not lines and result.get("structuredContent") is not None:
        lines.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(lines), bool(result.get("isError"))

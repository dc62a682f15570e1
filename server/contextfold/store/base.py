"""The session store's interface.

Policies and the service talk to this, never to SQL, so another backend (PostgreSQL for a team
deployment) can sit behind it. Every write to a session happens inside one `SessionTransaction`:
all of it lands, or none of it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from contextfold.domain import CompactionRecord, Message, MessageRow, Part, Session, ToolPart, Usage
from contextfold.errors import InvalidInput


@dataclass(frozen=True)
class StoredToolPart:
    message_id: str
    index: int
    part: ToolPart


@dataclass(frozen=True)
class OutputRecord:
    """A spilled output as the database knows it: the opaque id is the only handle clients get."""

    id: str
    session_id: str
    owner: str
    digest: str
    bytes: int
    lines: int
    tool: str | None
    call_id: str | None
    created_at: float
    last_read_at: float | None = None


@dataclass(frozen=True)
class Tombstone:
    """Why and when an output left the store: `reason` is "expired" (past retention) or "evicted"
    (to keep the spill store under its quota)."""

    id: str
    owner: str
    reason: str
    removed_at: float


class OutputTransaction(Protocol):
    """Spilled-output rows under the store's write lock, which every process on the store shares.

    What is read here cannot change before commit, so a content file that no row references can
    be deleted inside one without racing a writer: a writer that reuses the file inserts its row
    and checks the file is there under the same lock.
    """

    async def spill_bytes(self) -> int:
        """Bytes of the distinct contents output rows reference: what the spill quota counts."""
        ...

    async def referenced(self, digests: Collection[str]) -> set[str]:
        """Those of `digests` that some output row references."""
        ...

    async def outputs(self) -> list[OutputRecord]:
        """Every output but those this transaction added, oldest first (for retention and eviction)."""
        ...

    async def remove_outputs(self, output_ids: Sequence[str], reason: str, at: float) -> None:
        """Delete output rows, leaving a tombstone saying why (`Tombstone.reason`) and when."""
        ...

    async def drop_tombstones(self, before: float) -> None:
        """Forget outputs removed before `before` (the tombstone table stays bounded)."""
        ...


@dataclass(frozen=True)
class IdleSession:
    """A session as session retention sees it (`Store.idle_sessions`)."""

    owner: str
    id: str
    title: str | None
    origin: str | None
    """What made it, when not a client (`SessionState.origin`: "proxy")."""
    messages: int
    last_active: float
    """Its last write, or the last time one of its outputs was spilled or read, whichever is latest."""


@dataclass(frozen=True)
class PartMark:
    """A part re-marked in place (pruned, cut, omitted): `freed` tokens leave the view, none the store."""

    message_id: str
    index: int
    part: Part
    freed: int


@dataclass(frozen=True)
class SearchHit:
    """A stored message a full-text search found (`TenantStore.search_messages`)."""

    session_id: str
    message_id: str
    seq: int
    role: str
    created_at: float
    hidden: bool
    score: float
    """Lower is better (SQLite's BM25 sign); comparable only within one answer."""
    summary: bool = False
    """The message is a summary (it repeats what the messages it cites said)."""
    prose: bool = False
    """The words were found in a text part (what someone wrote), not only in tool calls, their
    outputs, reasoning or file names."""


@dataclass(frozen=True)
class SearchQuery:
    """What `search_messages` looks for: terms matched as case-insensitive substrings, all of
    them (or any, with `any_term`), in one session, a project's sessions or all of the tenant's,
    between two times (seconds since the epoch, `until` excluded)."""

    terms: tuple[str, ...]
    any_term: bool = False
    session_id: str | None = None
    project: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 20
    offset: int = 0
    timeout: float | None = None
    """Seconds the query may run; past them, `InvalidInput` naming `search_timeout_seconds`."""


def search_timed_out(timeout: float) -> InvalidInput:
    return InvalidInput(
        "query",
        f"matched too much to rank within search_timeout_seconds ({timeout:g} s); add a more specific word, "
        "or narrow the scope or the time window",
    )


@dataclass(frozen=True)
class IndexProgress:
    """How far the search index is built over parts stored before it existed (`done` of
    `total`). On a home that cannot be written (`writable` false) nothing more is indexed, and
    `waiting` parts stored since the last batch are not in the index (on any other home every
    search indexes them first)."""

    done: int
    total: int
    waiting: int = 0
    writable: bool = True

    @property
    def complete(self) -> bool:
        return self.done >= self.total


@dataclass(frozen=True)
class SessionPage:
    sessions: list[Session]
    next_cursor: str | None


class SessionTransaction(OutputTransaction, Protocol):
    session: Session
    """The session as stored when the transaction began; change it and call `save_session`."""

    async def messages(self, after_seq: int = 0, *, hidden: bool = False) -> list[Message]:
        """The session's stored messages after `after_seq`, in order, read inside this transaction
        (those a removal strategy hid only with `hidden=True`)."""
        ...

    async def hide_messages(self, message_ids: Sequence[str]) -> None:
        """Take messages out of the view; they stay stored. The caller adjusts the session's counts."""
        ...

    async def open_calls(self, call_ids: Sequence[str]) -> dict[str, StoredToolPart]:
        """For each id, the latest stored call with that id that has no result yet."""
        ...

    async def update_part(self, stored: StoredToolPart, part: ToolPart) -> None:
        """Replace a stored part; its message's token count moves by the difference."""
        ...

    async def insert_messages(self, messages: Sequence[Message]) -> list[Message]:
        """Append messages after the session's last; returns them with id, seq and time assigned."""
        ...

    async def mark_parts(self, marks: Sequence[PartMark]) -> None:
        """Store pruned parts; each message's in-view count drops by what its parts freed."""
        ...

    async def rows(self, after_seq: int = 0) -> list[MessageRow]:
        """The session's message rows after `after_seq`, in order, read inside this transaction."""
        ...

    async def add_output(self, record: OutputRecord) -> None: ...

    async def add_compaction(self, record: CompactionRecord) -> CompactionRecord: ...

    async def compactions(self, *, limit: int = 10) -> list[CompactionRecord]:
        """The session's latest compaction records, newest first, read inside this transaction."""
        ...

    async def update_compaction(self, record: CompactionRecord) -> None:
        """Store a changed record (marked undone); the totals stay as they are."""
        ...

    async def replace_counts(self, messages: Sequence[Message]) -> None:
        """Store new token counts for already-stored messages (after a tokenizer change)."""
        ...

    async def save_session(self, session: Session) -> None: ...


class TenantStore(Protocol):
    """One tenant's sessions and outputs. Every read and write is scoped to `owner`: another
    tenant's session or output id reads exactly like an id nobody uses."""

    owner: str

    async def create_session(self, session: Session) -> Session:
        """Store a new session (ConflictError if this tenant has one with its id)."""
        ...

    async def get_session(self, session_id: str) -> Session: ...

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None) -> SessionPage:
        """Most recently updated first; ValueError for a cursor this store did not issue."""
        ...

    async def delete_session(self, session_id: str) -> None:
        """Delete the session with its messages, outputs and compaction history."""
        ...

    async def summaries(self, session_id: str, *, limit: int) -> list[Message]:
        """The session's newest `limit` summary messages, oldest first."""
        ...

    async def search_messages(self, query: SearchQuery) -> list[SearchHit]:
        """Full-text search over this tenant's stored messages, hidden ones included: best first."""
        ...

    async def delete_idle_session(self, session_id: str, before: float) -> dict[str, int] | None:
        """`delete_session`, in one write transaction, only if nothing happened in the session
        since `before` (no write, no output spilled or read), checked again under the lock a
        writer of the session takes: the digests and sizes of the outputs it had, or None when it
        was used meanwhile or is gone."""
        ...

    def write(
        self, session_id: str, *, create: Session | None = None
    ) -> AbstractAsyncContextManager[SessionTransaction]:
        """A transaction on one session; with `create`, the session is created if it does not exist."""
        ...

    async def load_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None, hidden: bool = False
    ) -> list[Message]: ...

    async def rows(self, session_id: str, *, after_seq: int = 0) -> list[MessageRow]: ...

    async def changed_messages(
        self, session_id: str, *, since: int, after_seq: int = 0
    ) -> tuple[list[Message], set[str]]:
        """What changed after revision `since` among the messages after `after_seq`, read in one
        snapshot: the ones in view now (as `load_messages` reads them), and the ids of those
        hidden since. A message deleted after `since` shows only as `Session.reset_revision`."""
        ...

    async def recent_usages(self, session_id: str, *, limit: int = 10) -> list[Usage]:
        """The usage reports of the latest assistant messages, oldest first."""
        ...

    async def get_output(self, output_id: str) -> OutputRecord: ...

    async def session_outputs(self, session_id: str) -> list[OutputRecord]: ...

    async def touch_output(self, output_id: str) -> None: ...

    async def output_tombstone(self, output_id: str) -> Tombstone | None:
        """Why and when this tenant's output left, if it did (kept a limited time)."""
        ...

    async def compactions(self, session_id: str, *, limit: int = 10) -> list[CompactionRecord]:
        """The session's latest compactions, newest first."""
        ...

    async def compaction_totals(self, session_id: str) -> tuple[int, int]:
        """(how many compactions, tokens freed in all) for the session."""
        ...


class Store(Protocol):
    """A backend: one database holding every tenant. Requests work through `tenant(owner)`; the
    rest is upkeep across tenants (spill gc and quota, sizes, totals for the CLI)."""

    def tenant(self, owner: str) -> TenantStore: ...

    async def index_step(self, batch: int) -> IndexProgress:
        """Index up to `batch` parts stored before the search index existed (one short write
        transaction, safe from several processes at once); how far it is then."""
        ...

    async def outputs(self) -> list[OutputRecord]:
        """Every output record, oldest first (for gc)."""
        ...

    def spill_transaction(self) -> AbstractAsyncContextManager[OutputTransaction]:
        """A write transaction over spilled outputs alone (gc, eviction, deleting files)."""
        ...

    async def spill_bytes(self) -> int:
        """`OutputTransaction.spill_bytes` as of now, outside any transaction."""
        ...

    async def written_before(self, before: float) -> list[tuple[str, str]]:
        """(owner, id) of every tenant's sessions last written before `before`, least recently
        written first: one pass over the sessions, keys only."""
        ...

    async def idle_sessions(self, keys: Sequence[tuple[str, str]]) -> list[IdleSession]:
        """Those of the sessions `keys` names that still exist, in that order, with their last
        activity (which may be later than their last write: an output spilled or read since)."""
        ...

    async def size_bytes(self) -> int:
        """Bytes the stored data takes, for the database quota."""
        ...

    async def compactions(self, *, limit: int = 10) -> list[CompactionRecord]:
        """The latest compactions of every tenant, newest first."""
        ...

    async def compaction_totals(self) -> tuple[int, int]:
        """(how many compactions, tokens freed in all) across every tenant."""
        ...

    async def close(self) -> None: ...

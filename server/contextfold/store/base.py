"""The session store's interface.

Policies and the service talk to this, never to SQL, so another backend (PostgreSQL for a team
deployment) can sit behind it. Every write to a session happens inside one `SessionTransaction`:
all of it lands, or none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from ..domain import Message, Session, ToolPart


class StoreError(Exception):
    """Base class of store errors."""


class NotFoundError(StoreError, LookupError):
    def __init__(self, kind: str, key: str, hint: str = "") -> None:
        message = f"no {kind} with id {key!r}"
        super().__init__(f"{message}; {hint}" if hint else message)
        self.kind = kind
        self.key = key


class ConflictError(StoreError):
    """The write conflicts with what is stored (e.g. a session id that already exists)."""


@dataclass(frozen=True)
class StoredToolPart:
    message_id: str
    index: int
    part: ToolPart


@dataclass(frozen=True)
class SessionPage:
    sessions: list[Session]
    next_cursor: str | None


class SessionTransaction(Protocol):
    session: Session
    """The session as stored when the transaction began; change it and call `save_session`."""

    async def messages(self) -> list[Message]:
        """Every stored message of the session, in order, read inside this transaction."""
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

    async def replace_counts(self, messages: Sequence[Message]) -> None:
        """Store new token counts for already-stored messages (after a tokenizer change)."""
        ...

    async def save_session(self, session: Session) -> None: ...


class SessionStore(Protocol):
    async def create_session(self, session: Session, owner: str = "") -> Session: ...

    async def get_session(self, session_id: str, owner: str = "") -> Session: ...

    async def list_sessions(self, owner: str = "", *, limit: int = 50, cursor: str | None = None) -> SessionPage: ...

    async def delete_session(self, session_id: str, owner: str = "") -> None: ...

    def write(
        self, session_id: str, owner: str = "", *, create: Session | None = None
    ) -> AbstractAsyncContextManager[SessionTransaction]:
        """A transaction on one session; with `create`, the session is created if it does not exist."""
        ...

    async def load_messages(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[Message]: ...

    async def close(self) -> None: ...

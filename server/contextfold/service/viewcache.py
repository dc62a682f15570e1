"""Each session's view kept loaded and rendered between requests; a turn pays for what is new.

The store stamps every message with the session revision at which it, or one of its parts, last
changed, and keeps the session's revision and the revision of its last deleted message. A cached
view is exact for the revision it was loaded at. The next request reads only the messages
stamped after it and splices them in: an append costs its own messages, a prune the ones it
marked. Everything is loaded again when the view's anchor moved (a compaction), a message was
deleted, or the session is not the one cached (deleted and made again). Nothing else is trusted:
any process may have written meanwhile, and the stamps are in the database.

Rendered messages are kept per format beside the loaded ones, tied to the message objects they
came from: a spliced-in message is a new object, so it alone is rendered again; so is each
format's version chain (`versions`), which then hashes only the new renderings. The cache holds a
bounded number of sessions, least recently used first out. Only readers use it (`get_context`,
`status`); a write reads its messages inside its own transaction.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from contextfold.domain import Message, Session, ViewAnchor
from contextfold.formats.versions import Chain
from contextfold.policy import view
from contextfold.store import TenantStore

Rendered = dict[str, tuple[Message, list[dict[str, Any]]]]
"""Message id → the message object rendered and what it rendered to."""


@dataclass
class _Entry:
    created_at: float
    anchor: ViewAnchor | None
    revision: int
    messages: list[Message]
    """After `view.load_from(anchor)`, none hidden, in seq order."""
    rendered: dict[tuple[Any, ...], Rendered] = field(default_factory=dict)
    chains: dict[tuple[Any, ...], Chain] = field(default_factory=dict)

    def holds(self, session: Session) -> bool:
        return (
            self.created_at == session.created_at
            and self.anchor == session.view
            and session.reset_revision <= self.revision <= session.revision
        )


class ViewCache:
    """The loaded views of the `capacity` sessions read most recently in this process."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()

    async def messages(self, store: TenantStore, session: Session) -> list[Message]:
        """The session's messages from `view.load_from(session.view)` on, none hidden, in seq
        order — the same as `store.load_messages` would read now."""
        return list((await self._entry(store, session)).messages)

    async def rendered(self, store: TenantStore, session: Session, key: tuple[Any, ...]) -> Rendered:
        """The rendered messages kept for `key` (format and options) beside the session's view."""
        return (await self._entry(store, session)).rendered.setdefault(key, {})

    async def chain(self, store: TenantStore, session: Session, key: tuple[Any, ...]) -> Chain:
        """The version chain kept for `key` (format and options) beside the session's view."""
        return (await self._entry(store, session)).chains.setdefault(key, Chain())

    async def _entry(self, store: TenantStore, session: Session) -> _Entry:
        key = (store.owner, session.id)
        entry = self._entries.pop(key, None)
        after = view.load_from(session.view)
        if entry is None or not entry.holds(session):
            loaded = await store.load_messages(session.id, after_seq=after)
            entry = _Entry(session.created_at, session.view, session.revision, loaded)
        elif entry.revision < session.revision:
            changed, hidden = await store.changed_messages(session.id, since=entry.revision, after_seq=after)
            entry.messages = _spliced(entry.messages, changed, hidden)
            entry.revision = session.revision
            _prune_rendered(entry)
        if self.capacity > 0:
            self._entries[key] = entry
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return entry


def _spliced(messages: list[Message], changed: list[Message], hidden: set[str]) -> list[Message]:
    """`messages` with `changed` ones replaced or added (in seq order) and `hidden` ones removed."""
    if not changed and not hidden:
        return messages
    replaced = {m.id: m for m in changed}
    last = messages[-1].seq if messages else -1
    kept = [replaced.pop(m.id, m) for m in messages if m.id not in hidden]
    added = sorted(replaced.values(), key=lambda m: m.seq)
    if added and added[0].seq > last:
        return kept + added  # the usual case: appended after everything cached
    return sorted(kept + added, key=lambda m: m.seq)


def _prune_rendered(entry: _Entry) -> None:
    """Drop renderings of messages no longer in the view (or replaced), so memory follows it."""
    current = {m.id: m for m in entry.messages}
    for rendered in entry.rendered.values():
        for message_id in [i for i, (m, _) in rendered.items() if current.get(i) is not m]:
            del rendered[message_id]

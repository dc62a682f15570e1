"""Session retention: `gc` deletes the sessions nobody has used for a while.

Two server-wide settings decide. `session_retention_days` applies to every session; its default,
0, keeps sessions until someone deletes them: they are their users' history (imported
transcripts, what the hooks stored, agents' own sessions), and `max_database_bytes` bounds them
already. `proxy_session_retention_hours` applies to the sessions `contextfold proxy` connections
make (`SessionState.origin` "proxy"): one per connection, written only while it lives, so they pile
up (19 after 20 short connections); 168 hours by default, the default `spill_retention_days`, after
which the outputs such a session holds have expired anyway.

A session's last activity is its last write or the last time one of its outputs was spilled or
read (`IdleSession.last_active`). The candidates, sessions last written before the latest
cut-off, are found in one pass, keys only, least recently written first; their activity is then
read `PAGE` at a time, so time stays linear and memory small however many there are. Each goes in a write transaction of
its own (`TenantStore.delete_idle_session`), which checks its activity again under the lock its
writers take: a session any process wrote, spilled into or read meanwhile stays. Its messages,
compactions and output rows go with it; its files then go as gc deletes files
(`Outputs.delete_unreferenced`), only those no other output points to. A gc killed between the
two leaves files no row references, which the next gc removes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contextfold.config import Settings
from contextfold.names import PROXY_ORIGIN
from contextfold.results import GcSession
from contextfold.service.outputs import Outputs
from contextfold.store import IdleSession, Store

PAGE = 500
"""Candidate sessions whose activity is read at once."""
LISTED = 50
"""Sessions a gc result names; it counts all of them."""
DAY, HOUR = 86_400.0, 3_600.0


@dataclass
class Expired:
    removed: int = 0
    listed: list[GcSession] = field(default_factory=list)
    files: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class Rules:
    """The cut-off times: a session last active before one of them goes."""

    everyone: float | None
    proxies: float | None

    @classmethod
    def of(cls, settings: Settings, now: float) -> Rules:
        days, hours = settings.session_retention_days, settings.proxy_session_retention_hours
        return cls(now - days * DAY if days > 0 else None, now - hours * HOUR if hours > 0 else None)

    @property
    def latest(self) -> float | None:
        """The latest cut-off: no session written since can go."""
        cuts = [c for c in (self.everyone, self.proxies) if c is not None]
        return max(cuts) if cuts else None

    def verdict(self, session: IdleSession) -> tuple[float, GcSession] | None:
        """(its cut-off, what a gc result says of it) if `session` goes, else None."""
        if self.everyone is not None and session.last_active < self.everyone:
            return self.everyone, _shown(session, "session_retention_days")
        if self.proxies is not None and session.origin == PROXY_ORIGIN and session.last_active < self.proxies:
            return self.proxies, _shown(session, "proxy_session_retention_hours")
        return None


async def expire_sessions(store: Store, outputs: Outputs, settings: Settings, *, dry_run: bool, now: float) -> Expired:
    rules = Rules.of(settings, now)
    done = Expired()
    before = rules.latest
    if before is None:
        return done
    keys = await store.written_before(before)
    for start in range(0, len(keys), PAGE):
        for session in await store.idle_sessions(keys[start : start + PAGE]):
            verdict = rules.verdict(session)
            if verdict is None:
                continue
            cut, shown = verdict
            if not dry_run:
                owned = await store.tenant(session.owner).delete_idle_session(session.id, cut)
                if owned is None:
                    continue  # written, spilled into or read since it was found idle: it stays
                gone = await outputs.delete_unreferenced(owned)
                done.files += len(gone)
                done.bytes += sum(owned[d] for d in gone)
            done.removed += 1
            if len(done.listed) < LISTED:
                done.listed.append(shown)
    return done


def _shown(session: IdleSession, reason: str) -> GcSession:
    return GcSession.model_validate(
        {
            "session_id": session.id,
            "owner": session.owner,
            "title": session.title,
            "reason": reason,
            "last_active": session.last_active,
            "messages": session.messages,
        }
    )


__all__ = ["LISTED", "PAGE", "Expired", "Rules", "expire_sessions"]

"""Opening the data home for a command, to read or to change it, and listing its sessions."""

from __future__ import annotations

from contextfold.config import Settings
from contextfold.errors import UsageError
from contextfold.home.opening import open_for_reading, open_service
from contextfold.results import SessionInfo, Status
from contextfold.service.facade import ContextService


async def open_home(settings: Settings) -> ContextService:
    """The service on the data home. A home it cannot use normally (read-only, a damaged or newer
    database) still opens: the first call that needs the store raises one line saying why."""
    service, _ = await open_service(settings)
    return service


async def read_session(settings: Settings, session_id: str) -> ContextService:
    """The service for a command that only reads `session_id`: nothing in the home is created or
    changed (see `guard.open_for_reading`)."""
    service = await open_for_reading(settings)
    if service is None:
        raise no_database(settings, session_id)
    return service


async def open_session(settings: Settings, session_id: str) -> ContextService:
    """The service for a command that changes `session_id`; a home without a database gets none."""
    if not settings.database_url and not settings.database_path.exists():
        raise no_database(settings, session_id)
    return await open_home(settings)


def no_database(settings: Settings, session_id: str) -> UsageError:
    return UsageError(
        f"no session with id {session_id!r}: the data home {settings.home} holds no database yet (no "
        f"{settings.database_path}); import a transcript with `contextfold import FILE`, or pass --home"
    )


async def all_sessions(service: ContextService) -> list[tuple[SessionInfo, Status]]:
    """Every session, newest first, with where it stands."""
    infos: list[SessionInfo] = []
    cursor: str | None = None
    while True:
        page = await service.list_sessions(limit=500, cursor=cursor)
        infos += page.sessions
        if not (cursor := page.next_cursor):
            break
    return [(info, await service.status(info.id)) for info in infos]

"""Opening a PostgreSQL deployment, and its failures as the one line that says why.

`guard` calls this only when the database setting is a postgresql:// URL, so psycopg is imported
by PostgreSQL deployments alone. The URL's password never appears in a message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import psycopg_pool

from contextfold.config import Settings
from contextfold.errors import ReadOnlyHome, StorageError, StorageFull, StoreUnavailable
from contextfold.store.pgschema import PgSchemaTooNewError
from contextfold.store.postgres import PostgresStore, redact

__all__ = ["check_database", "open_postgres", "postgres_problem"]

_DISK_FULL = "53100"
_OUT_OF_MEMORY = "53200"
_TOO_MANY_CONNECTIONS = "53300"
_READ_ONLY = "25006"
_ADMIN_SHUTDOWN = ("57P01", "57P02", "57P03")


async def open_postgres(settings: Settings) -> tuple[PostgresStore, Any]:
    """The session store and the blob store on the settings' PostgreSQL database, migrated."""
    from contextfold.blobs.postgres import PostgresBlobs

    url = settings.database_url
    assert url is not None
    try:
        store = await PostgresStore.open(url, pool_size=settings.database_pool_size)
    except Exception as exc:
        raise _opening_problem(exc, url) from exc
    try:
        if settings.spill_url:  # spilled outputs in S3 instead of the database
            from contextfold.blobs.s3 import S3Blobs

            try:
                files = await asyncio.to_thread(S3Blobs, settings.spill_url)
            except Exception as exc:
                raise StoreUnavailable(f"could not open the spill store at {settings.spill_url}: {_first_line(exc)}") from exc
        else:
            files = await asyncio.to_thread(PostgresBlobs, url, pool_size=settings.database_pool_size)
    except BaseException as exc:
        await store.close()
        if isinstance(exc, StorageError):
            raise
        if isinstance(exc, Exception):
            raise _opening_problem(exc, url) from exc
        raise
    return store, files


def check_database(settings: Settings) -> None:
    """Connect once and migrate, or raise the `StorageError` that says why (for `serve`, before it
    starts listening: a replica that cannot reach its database should not come up)."""
    from contextfold.store import pgschema
    from contextfold.store.postgres import connect_kwargs

    url = settings.database_url
    assert url is not None
    try:
        with psycopg.connect(url, connect_timeout=30, **connect_kwargs()) as conn:
            pgschema.migrate(conn)
    except Exception as exc:
        raise _opening_problem(exc, url) from exc


def _opening_problem(exc: Exception, url: str) -> StorageError:
    problem = postgres_problem(exc, url, "restart contextfold")
    if problem is None:
        return StoreUnavailable(f"could not open the PostgreSQL database at {redact(url)}: {_first_line(exc)}")
    return problem


def postgres_problem(exc: BaseException, url: str, then: str = "retry") -> StorageError | None:
    """`exc` as the `StorageError` that says why, when PostgreSQL caused it; else None."""
    where = f"the PostgreSQL database at {redact(url)}"
    if isinstance(exc, PgSchemaTooNewError):
        return StoreUnavailable(f"{where} was migrated by a newer contextfold ({exc}); upgrade contextfold")
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StoreUnavailable(
            f"no connection to {where} came free in time ({_first_line(exc)}); the server is overloaded or the "
            f"database is unreachable: {then}, or raise database_pool_size"
        )
    if not isinstance(exc, psycopg.Error):
        return None
    state = exc.sqlstate or ""
    reason = _first_line(exc)
    if state == _DISK_FULL:
        return StorageFull(f"the disk of {where} is full ({reason}); nothing was saved. Free space there and {then}")
    if state == _READ_ONLY:
        return ReadOnlyHome(
            f"{where} is read-only ({reason}), a standby perhaps: reads work, writes are refused; point "
            "contextfold at the primary"
        )
    if state == _TOO_MANY_CONNECTIONS:
        return StoreUnavailable(
            f"{where} refuses more connections ({reason}); lower database_pool_size on each replica or raise the "
            f"server's max_connections, then {then}"
        )
    if state == _OUT_OF_MEMORY:
        return StoreUnavailable(f"{where} is out of memory ({reason}); {then}")
    if isinstance(exc, psycopg.OperationalError) or state in _ADMIN_SHUTDOWN:
        return StoreUnavailable(
            f"{where} cannot be reached ({reason}); check that it is running and that the URL, user and "
            f"password are right, then {then}"
        )
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

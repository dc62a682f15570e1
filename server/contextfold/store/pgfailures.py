"""PostgreSQL's failures as the one line that says why and what to do.

The URL's password never appears in a message (`redact`). Imported only by PostgreSQL
deployments: psycopg is loaded with it.
"""

from __future__ import annotations

import psycopg
import psycopg_pool

from contextfold.errors import ReadOnlyHome, StorageError, StorageFull, StoreUnavailable
from contextfold.store.pgschema import PgSchemaTooNewError
from contextfold.store.postgres import redact

__all__ = ["opening_problem", "postgres_problem"]

_DISK_FULL = "53100"
_OUT_OF_MEMORY = "53200"
_TOO_MANY_CONNECTIONS = "53300"
_READ_ONLY = "25006"
_ADMIN_SHUTDOWN = ("57P01", "57P02", "57P03")


def opening_problem(exc: Exception, url: str) -> StorageError:
    problem = postgres_problem(exc, url, "restart contextfold")
    if problem is None:
        return StoreUnavailable(f"could not open the PostgreSQL database at {redact(url)}: {first_line(exc)}")
    return problem


def postgres_problem(exc: BaseException, url: str, then: str = "retry") -> StorageError | None:
    """`exc` as the `StorageError` that says why, when PostgreSQL caused it; else None."""
    where = f"the PostgreSQL database at {redact(url)}"
    if isinstance(exc, PgSchemaTooNewError):
        return StoreUnavailable(f"{where} was migrated by a newer contextfold ({exc}); upgrade contextfold")
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StoreUnavailable(
            f"no connection to {where} came free in time ({first_line(exc)}); the server is overloaded or the "
            f"database is unreachable: {then}, or raise database_pool_size"
        )
    if not isinstance(exc, psycopg.Error):
        return None
    state = exc.sqlstate or ""
    reason = first_line(exc)
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
            f"{where} is unreachable ({_last_clause(reason)}); check that it is running and that the URL, user "
            f"and password are right, then {then}"
        )
    return None


def _last_clause(reason: str) -> str:
    """libpq's "connection failed: connection to server at "10.0.0.5", port 5432 failed: Connection
    refused" as "Connection refused": the address is in the URL the message names already."""
    return reason.rsplit(" failed: ", 1)[-1].strip() or reason


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

"""A PostgreSQL deployment checked before a server starts: one connection, migrated, or one line.

Imported only when the database setting is a postgresql:// URL, so psycopg is loaded by
PostgreSQL deployments alone. The URL's password never appears in a message.
"""

from __future__ import annotations

import psycopg

from contextfold.config import Settings
from contextfold.store.pgfailures import opening_problem, postgres_problem

__all__ = ["check_database", "postgres_problem"]


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
        raise opening_problem(exc, url) from exc

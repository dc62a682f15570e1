"""A data home's two stores, chosen by the settings: sessions and spilled outputs.

SQLite and files by default; PostgreSQL for both with `database_url`; S3-compatible storage for
spilled outputs with `spill_url`, beside either. psycopg and obstore are imported only when
their setting asks for them. The one place that chooses: `ContextService.open` and the data
home's guarded opening (`contextfold.home`) both come here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from contextfold.blobs.base import BlobStore
from contextfold.blobs.files import FileBlobs
from contextfold.config import Settings
from contextfold.errors import StorageError, StoreUnavailable
from contextfold.store import SQLiteStore, Store

__all__ = ["open_backends", "open_postgres"]


async def open_backends(settings: Settings) -> tuple[Store, BlobStore]:
    """The session store and the blob store `settings` name, opened (and migrated)."""
    if settings.database_url:
        return await open_postgres(settings)
    store = await SQLiteStore.open(settings.database_path, index_lag=settings.search_index_lag)
    if not settings.spill_url:
        return store, FileBlobs(settings.spill_path)
    from contextfold.blobs.s3 import S3Blobs

    try:
        return store, await asyncio.to_thread(S3Blobs, settings.spill_url)
    except BaseException:
        await store.close()
        raise


async def open_postgres(settings: Settings) -> tuple[Any, Any]:
    """The session store and the blob store on the settings' PostgreSQL database, migrated."""
    from contextfold.blobs.postgres import PostgresBlobs
    from contextfold.store.pgfailures import first_line, opening_problem
    from contextfold.store.postgres import PostgresStore

    url = settings.database_url
    assert url is not None
    try:
        store = await PostgresStore.open(
            url, pool_size=settings.database_pool_size, timeout=settings.database_timeout_seconds
        )
    except Exception as exc:
        raise opening_problem(exc, url) from exc
    files: BlobStore
    try:
        if settings.spill_url:  # spilled outputs in S3 instead of the database
            from contextfold.blobs.s3 import S3Blobs

            try:
                files = await asyncio.to_thread(S3Blobs, settings.spill_url)
            except Exception as exc:
                raise StoreUnavailable(
                    f"could not open the spill store at {settings.spill_url}: {first_line(exc)}"
                ) from exc
        else:
            files = await asyncio.to_thread(
                PostgresBlobs, url, pool_size=settings.database_pool_size, timeout=settings.database_timeout_seconds
            )
    except BaseException as exc:
        await store.close()
        if isinstance(exc, StorageError):
            raise
        if isinstance(exc, Exception):
            raise opening_problem(exc, url) from exc
        raise
    return store, files

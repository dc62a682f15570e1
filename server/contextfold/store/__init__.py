"""Persistence behind a narrow interface; SQLite is the embedded default."""

from contextfold.store.base import (
    ConflictError,
    NotFoundError,
    OutputRecord,
    OutputTransaction,
    PartMark,
    SessionPage,
    SessionTransaction,
    Store,
    StoredToolPart,
    StoreError,
    TenantStore,
    Tombstone,
)
from contextfold.store.sqlite import SQLiteStore, SQLiteTenant

__all__ = [
    "ConflictError",
    "NotFoundError",
    "OutputRecord",
    "OutputTransaction",
    "PartMark",
    "SQLiteStore",
    "SQLiteTenant",
    "SessionPage",
    "SessionTransaction",
    "Store",
    "StoreError",
    "StoredToolPart",
    "TenantStore",
    "Tombstone",
]

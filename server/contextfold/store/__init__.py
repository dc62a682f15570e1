"""Persistence behind a narrow interface; SQLite is the embedded default."""

from contextfold.store.base import (
    IdleSession,
    OutputRecord,
    OutputTransaction,
    PartMark,
    SessionPage,
    SessionTransaction,
    Store,
    StoredToolPart,
    TenantStore,
    Tombstone,
)
from contextfold.store.sqlite import SQLiteStore, SQLiteTenant

__all__ = [
    "IdleSession",
    "OutputRecord",
    "OutputTransaction",
    "PartMark",
    "SQLiteStore",
    "SQLiteTenant",
    "SessionPage",
    "SessionTransaction",
    "Store",
    "StoredToolPart",
    "TenantStore",
    "Tombstone",
]

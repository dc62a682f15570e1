"""Persistence behind a narrow interface; SQLite is the embedded default."""

from contextfold.store.base import (
    IdleSession,
    IndexProgress,
    OutputRecord,
    OutputTransaction,
    PartMark,
    SearchHit,
    SearchQuery,
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
    "IndexProgress",
    "OutputRecord",
    "OutputTransaction",
    "PartMark",
    "SQLiteStore",
    "SQLiteTenant",
    "SearchHit",
    "SearchQuery",
    "SessionPage",
    "SessionTransaction",
    "Store",
    "StoredToolPart",
    "TenantStore",
    "Tombstone",
]

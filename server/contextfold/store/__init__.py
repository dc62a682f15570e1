"""Persistence behind a narrow interface; SQLite is the embedded default."""

from .base import (
    ConflictError,
    NotFoundError,
    OutputRecord,
    OutputTransaction,
    PartMark,
    SessionPage,
    SessionStore,
    SessionTransaction,
    StoredToolPart,
    StoreError,
    Tombstone,
)
from .sqlite import SQLiteStore

__all__ = [
    "ConflictError",
    "NotFoundError",
    "OutputRecord",
    "OutputTransaction",
    "PartMark",
    "SQLiteStore",
    "SessionPage",
    "SessionStore",
    "SessionTransaction",
    "StoreError",
    "StoredToolPart",
    "Tombstone",
]

"""Persistence behind a narrow interface; SQLite is the embedded default."""

from .base import (
    ConflictError,
    NotFoundError,
    OutputRecord,
    PartMark,
    SessionPage,
    SessionStore,
    SessionTransaction,
    StoredToolPart,
    StoreError,
)
from .sqlite import SQLiteStore

__all__ = [
    "ConflictError",
    "NotFoundError",
    "OutputRecord",
    "PartMark",
    "SQLiteStore",
    "SessionPage",
    "SessionStore",
    "SessionTransaction",
    "StoreError",
    "StoredToolPart",
]

"""Persistence behind a narrow interface; SQLite is the embedded default."""

from .base import (
    ConflictError,
    NotFoundError,
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
    "SQLiteStore",
    "SessionPage",
    "SessionStore",
    "SessionTransaction",
    "StoreError",
    "StoredToolPart",
]

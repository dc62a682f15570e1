"""Errors a caller can act on. Each message says what was wrong and what to do about it."""

from __future__ import annotations


MAX_MESSAGE_CHARS = 2_000
"""Error text lands in a model's context (or a terminal): one that echoes a huge input is cut."""


def brief(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message`, its middle elided when longer than `limit`.

    Messages name the field first and say what was expected last; an echoed value sits between,
    so both ends are kept.
    """
    if len(message) <= limit:
        return message
    head = limit * 2 // 3
    tail = limit - head
    return f"{message[:head]} … [{len(message) - head - tail:,} characters omitted] … {message[-tail:]}"


class ContextfoldError(Exception):
    """An error the caller can act on; the message says what was wrong and what to do."""


class InvalidInput(ContextfoldError, ValueError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class LimitExceeded(InvalidInput):
    pass


class CompactionFailed(ContextfoldError):
    """Compaction could not make the context fit, or would free nothing; the message has the numbers."""


class StorageError(ContextfoldError):
    """The data home could not do what was asked; the message names the path and the remedy.

    Nothing of the failed call was stored (its transaction rolled back). See `contextfold.guard`.
    """


class StorageFull(StorageError):
    """The disk (or the user's quota) holding the database or the spill files is full."""


class ReadOnlyHome(StorageError):
    """The data home cannot be written: reads work, writes are refused."""


class StoreUnavailable(StorageError):
    """The database cannot be used at all: written by a newer contextfold, damaged, or unreadable."""

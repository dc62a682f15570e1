"""Errors a caller can act on. Each message says what was wrong and what to do about it.

One hierarchy: every error a request can end in derives from `ContextfoldError`, and the MCP
server and the CLI turn exactly these into a tool error or a one-line message (`USER_ERRORS`);
anything else is a bug, logged with its traceback.

    ContextfoldError
    ├── InvalidInput (also ValueError): a bad argument, named     ── LimitExceeded
    ├── FormatError (formats), SettingsError (config), TranscriptError and RecordError (import),
    │   TokenFileError (tokens file): bad input of a kind, each also a ValueError
    ├── StoreError (store): NotFoundError (also LookupError), ConflictError
    ├── StorageError: StorageFull, ReadOnlyHome, StoreUnavailable (the data home; see guard)
    ├── CompactionFailed, OutputDamaged
    └── UsageError (a command or its configuration used wrongly)
"""

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


USER_ERRORS: tuple[type[Exception], ...] = (ContextfoldError,)
"""What a request may end in as a clear error (a tool error, a CLI line) rather than a bug."""


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

    Nothing of the failed call was stored (its transaction rolled back). See `contextfold.home.opening`.
    """


class StorageFull(StorageError):
    """The disk (or the user's quota) holding the database or the spill files is full."""


class ReadOnlyHome(StorageError):
    """The data home cannot be written: reads work, writes are refused."""


class StoreUnavailable(StorageError):
    """The database cannot be used at all: written by a newer contextfold, damaged, or unreadable."""


class UsageError(ContextfoldError):
    """A command (or a file it was given) used wrongly, refused before any work; the message says what to do."""

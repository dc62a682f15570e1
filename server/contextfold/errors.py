"""Errors a caller can act on. Each message says what was wrong and what to do about it.

One hierarchy, all of it in this module: every error a request can end in derives from
`ContextfoldError`, and the MCP server and the CLI turn exactly these into a tool error or a
one-line message (`USER_ERRORS`); anything else is a bug, logged with its traceback.

    ContextfoldError
    ├── InvalidInput (also ValueError): a bad argument, named     ── LimitExceeded
    ├── FormatError (a wire message), SettingsError (a setting), TranscriptError and RecordError
    │   (a transcript file), TokenFileError (the bearer tokens file): bad input of a kind, each
    │   also a ValueError
    ├── StoreError: NotFoundError (also LookupError) ── OutputGone; ConflictError
    ├── StorageError: StorageFull, ReadOnlyHome, StoreUnavailable (the data home)
    ├── CompactionFailed, OutputDamaged, InstallError (an agent's settings file)
    └── UsageError (a command or a file given to it used wrongly)

    TokenizerDataError (a RuntimeError): the packaged tokenizer data is damaged; reinstall.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

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


class Remedy(StrEnum):
    """A way forward an error names. The core names it; each interface words it for its user
    (`ContextfoldError.worded`): an MCP client reads tool names, a terminal reads commands."""

    DELETE_SESSIONS = "delete_sessions"
    READ_IN_PARTS = "read_in_parts"
    SPILL_FIRST = "spill_first"


REMEDY = "{remedy}"
"""Where a message puts its remedy's words."""

REMEDY_WORDS: Mapping[Remedy, str] = {
    Remedy.DELETE_SESSIONS: "delete sessions you no longer need",
    Remedy.READ_IN_PARTS: "read it in pages (offset and limit) or search it with a pattern",
    Remedy.SPILL_FIRST: "spill huge outputs first and send their previews",
}
"""The remedies as a library caller reads them."""


class ContextfoldError(Exception):
    """An error the caller can act on; the message says what was wrong and what to do.

    A message may name a `Remedy` where it says `{remedy}`: `str(error)` words it for a library
    caller, `worded(words)` in an interface's own terms.
    """

    remedy: Remedy | None = None

    def __init__(self, *args: object, remedy: Remedy | None = None) -> None:
        super().__init__(*args)
        self.remedy = remedy

    def worded(self, words: Mapping[Remedy, str] = REMEDY_WORDS) -> str:
        text = super().__str__()
        if self.remedy is None:
            return text
        return text.replace(REMEDY, words.get(self.remedy) or REMEDY_WORDS[self.remedy])

    def __str__(self) -> str:
        return self.worded()


USER_ERRORS: tuple[type[Exception], ...] = (ContextfoldError,)
"""What a request may end in as a clear error (a tool error, a CLI line) rather than a bug."""


class InvalidInput(ContextfoldError, ValueError):
    def __init__(self, field: str, problem: str, *, remedy: Remedy | None = None) -> None:
        super().__init__(f"{field}: {problem}", remedy=remedy)
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


class SettingsError(ContextfoldError, ValueError):
    """A setting with a bad name or value; the message names it and the allowed values."""


class FormatError(ContextfoldError, ValueError):
    """A message that cannot be read. `path` names the field, e.g. `messages[3].content[0].tool_use_id`."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class TranscriptError(ContextfoldError, ValueError):
    """A transcript file that cannot be read. The message names the file and, when known, the line."""

    def __init__(self, path: Path | str, line: int | None, problem: str) -> None:
        where = f"{path}, line {line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {problem}")
        self.path = Path(path)
        self.line = line
        self.problem = problem


class RecordError(ContextfoldError, ValueError):
    """A problem inside one record; the driver adds the file and line number."""


class TokenFileError(ContextfoldError, ValueError):
    """A tokens file that cannot be read or changed as asked; the message says what to do."""


class TokenizerDataError(RuntimeError):
    """The packaged rank file is missing or does not match tiktoken's expected hash."""


class StoreError(ContextfoldError):
    """Base class of store errors."""


class NotFoundError(StoreError, LookupError):
    def __init__(self, kind: str, key: str, hint: str = "") -> None:
        message = f"no {kind} with id {key!r}"
        super().__init__(f"{message}; {hint}" if hint else message)
        self.kind = kind
        self.key = key


def output_not_found(output_id: str) -> NotFoundError:
    """What reading an output id nobody has says: the same words for one that is another's to read."""
    return NotFoundError(
        "output", output_id, "it may have expired or been deleted; outputs are kept for a limited time"
    )


class ConflictError(StoreError):
    """The write conflicts with what is stored (e.g. a session id that already exists)."""


class OutputGone(NotFoundError):
    """The output was removed by gc; the message says why and when."""

    def __init__(self, output_id: str, message: str) -> None:
        super().__init__("output", output_id)
        self.args = (message,)


class OutputDamaged(ContextfoldError):
    """The output's file was cut short, changed or deleted outside contextfold."""

    def __init__(self, output_id: str, problem: str) -> None:
        super().__init__(f"output {output_id} is damaged: {problem}; rerun the tool to see it again")
        self.output_id = output_id


class InstallError(ContextfoldError):
    """A settings file contextfold cannot change safely; the message says which and why."""

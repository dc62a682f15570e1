"""What a session has imported of a file, so importing the file again adds only what is new.

Each import of a file into a session leaves a mark in the session's state (`SessionState.imports`): the
file's path, how many bytes and lines it read, a SHA-256 of those bytes and of the file's first
64 KiB, where to pick up (calls still waiting for a result, the newest Claude Code record ids, the
messages still in its queue), and how many lines it could not read and skipped, and values it kept as
text, over all its imports (`problems` says them in words, for `stats` and the hooks' handover).
A file continues a mark when all the bytes that import read are still there unchanged: then only
the rest is read (the prefix is hashed, never parsed again), wherever the file was moved or copied.
A file at a marked path, or starting like a marked one, whose imported bytes changed is refused.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextfold.domain import SessionState
from contextfold.errors import InvalidInput
from contextfold.importers import Resume, deep_words, unreadable_words

HEAD_BYTES = 65_536
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImportMark:
    file: str
    path: str
    format: str
    bytes: int
    lines: int
    sha256: str
    head_sha256: str
    pending_calls: tuple[str, ...] = ()
    tail_uuids: tuple[str, ...] = ()
    queued: tuple[str, ...] = ()
    """Claude Code: messages queued while the agent worked, not yet taken (`Resume.queued`)."""
    at: float = 0.0
    unreadable: int = 0
    """Lines of the file skipped because they could not be read, over every import of it."""
    deep_values: int = 0
    """Values nested too deeply, kept as their JSON text, over every import of it."""

    def resume(self) -> Resume:
        return Resume(self.bytes, self.lines, frozenset(self.pending_calls), self.tail_uuids, self.queued)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "path": self.path,
            "format": self.format,
            "bytes": self.bytes,
            "lines": self.lines,
            "sha256": self.sha256,
            "head_sha256": self.head_sha256,
            "pending_calls": list(self.pending_calls),
            "tail_uuids": list(self.tail_uuids),
            "queued": list(self.queued),
            "at": self.at,
            "unreadable": self.unreadable,
            "deep_values": self.deep_values,
        }

    @classmethod
    def from_json(cls, raw: Any) -> ImportMark | None:
        """The mark, or None for an entry this version cannot read (it is then ignored)."""
        try:
            return cls(
                file=str(raw["file"]),
                path=str(raw.get("path", "")),
                format=str(raw["format"]),
                bytes=int(raw["bytes"]),
                lines=int(raw["lines"]),
                sha256=str(raw["sha256"]),
                head_sha256=str(raw["head_sha256"]),
                pending_calls=tuple(str(c) for c in raw.get("pending_calls", ())),
                tail_uuids=tuple(str(u) for u in raw.get("tail_uuids", ())),
                queued=tuple(str(q) for q in raw.get("queued", ())),
                at=float(raw.get("at", 0.0)),
                unreadable=int(raw.get("unreadable", 0)),
                deep_values=int(raw.get("deep_values", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def marks_in(state: SessionState) -> list[ImportMark]:
    marks = [ImportMark.from_json(e) for e in state.imports]
    return [m for m in marks if m is not None]


def problems(marks: list[ImportMark]) -> list[str]:
    """What the imports of a session's files could not read, in words ([] when they read it all)."""
    said: list[str] = []
    for mark in marks:
        found = [unreadable_words(mark.unreadable)] if mark.unreadable else []
        found += [deep_words(mark.deep_values)] if mark.deep_values else []
        if found:
            said.append(f"{mark.file}: {'; '.join(found)}")
    return said


def with_mark(state: SessionState, old: ImportMark | None, new: ImportMark) -> SessionState:
    """`state` with `old` (the mark this import continued, if any) replaced by `new`. A session
    that was made before its first import (by an agent's hooks) learns what it was imported from."""
    kept = [m.to_json() for m in marks_in(state) if m != old]
    update: dict[str, Any] = {"imports": [*kept, new.to_json()]}
    if state.source_format is None:
        update |= {"imported_from": new.file, "source_format": new.format}
    return state.model_copy(update=update)


class Prefix:
    """A running SHA-256 of a file's first bytes, extended as an import reads further."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = 0
        self._hash = hashlib.sha256()

    def extend_to(self, end: int) -> str:
        """The digest of the file's first `end` bytes (`end` ≥ what was hashed so far)."""
        with self.path.open("rb") as handle:
            handle.seek(self.done)
            while self.done < end:
                chunk = handle.read(min(_CHUNK, end - self.done))
                if not chunk:
                    break
                self._hash.update(chunk)
                self.done += len(chunk)
        return self._hash.hexdigest()


def head_digest(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        return hashlib.sha256(handle.read(min(HEAD_BYTES, size))).hexdigest()


def find_mark(path: Path, format: str, marks: list[ImportMark], session_id: str) -> tuple[ImportMark | None, Prefix]:
    """The mark an earlier import of this file left, with the prefix it covers hashed and checked.

    Raises `InvalidInput` when the file was imported before but has changed, not just grown.
    """
    size = path.stat().st_size
    where = str(path.resolve())
    prefix = Prefix(path)
    for mark in marks:
        same_start = size >= min(mark.bytes, HEAD_BYTES) and head_digest(path, mark.bytes) == mark.head_sha256
        if mark.format != format or not (same_start or mark.path == where):
            continue  # another file
        if same_start and size >= mark.bytes and prefix.extend_to(mark.bytes) == mark.sha256:
            return mark, prefix
        raise InvalidInput(
            "file",
            f"{path.name} was imported into session {session_id!r} before ({mark.bytes:,} bytes), and those bytes "
            "have changed since; importing again adds only what a file appends, so import this version into "
            "a new session (give another session id)",
        )
    return None, prefix


def new_mark(
    path: Path,
    format: str,
    prefix: Prefix,
    *,
    end: int,
    lines: int,
    pending_calls: frozenset[str],
    tail_uuids: tuple[str, ...],
    queued: tuple[str, ...] = (),
    unreadable: int = 0,
    deep_values: int = 0,
) -> ImportMark:
    return ImportMark(
        file=path.name,
        path=str(path.resolve()),
        format=format,
        bytes=end,
        lines=lines,
        sha256=prefix.extend_to(end),
        head_sha256=head_digest(path, end),
        pending_calls=tuple(sorted(pending_calls)),
        tail_uuids=tail_uuids,
        queued=queued,
        at=time.time(),
        unreadable=unreadable,
        deep_values=deep_values,
    )


__all__ = ["ImportMark", "Prefix", "find_mark", "marks_in", "new_mark", "problems", "with_mark"]

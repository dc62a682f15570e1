"""The tokens file: one line per tenant, `tenant<TAB>sha256:<hex>[<TAB>created]`, only hashes.

Changes (`add`, `rotate`, `remove`) take an exclusive lock on a sidecar `<file>.lock`, read the
file, and write the whole new version to a temporary file (mode 0600, fsynced) that replaces the
old one with `os.replace`: a reader (the HTTP server re-reading it on change) sees the old file or
the new one, never half of either, and two `token add` at once cannot lose one another's line.
Reading takes no lock and writes nothing.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from contextfold.errors import TokenFileError

HASH_PREFIX = "sha256:"
FINGERPRINT_HEX = 12
"""`token list` shows this many hex digits of the hash: enough to tell tokens apart, no secret."""
TOKEN_BYTES = 32
FILE_MODE = 0o600


def digest(token: str) -> str:
    """The sha256 hex of a bearer token, as stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def fingerprint(hex_digest: str) -> str:
    """A short, public name for a stored hash: `token list` shows it, logs name refused tokens by it."""
    return f"{HASH_PREFIX}{hex_digest[:FINGERPRINT_HEX]}"


@dataclass(frozen=True)
class Entry:
    tenant: str
    digest: str
    created: str | None = None
    """ISO 8601 UTC; None for lines written before it was recorded."""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.digest)

    def line(self) -> str:
        fields = [self.tenant, HASH_PREFIX + self.digest] + ([self.created] if self.created else [])
        return "\t".join(fields) + "\n"


def parse(text: str, path: Path) -> list[Entry]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        hashed = fields[1] if len(fields) > 1 else ""
        hex_part = hashed.removeprefix(HASH_PREFIX)
        if (
            len(fields) > 3
            or not fields[0]
            or not hashed.startswith(HASH_PREFIX)
            or len(hex_part) != 64
            or any(c not in "0123456789abcdef" for c in hex_part)
        ):
            raise TokenFileError(
                f"{path}, line {number}: expected 'tenant<TAB>sha256:<64 hex>[<TAB>created]'; "
                "fix or delete the line, or manage tokens with `contextfold token`"
            )
        entries.append(Entry(fields[0], hex_part, fields[2] if len(fields) == 3 else None))
    return entries


def read_entries(path: Path) -> list[Entry]:
    """The file's entries; a missing file has none."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"cannot read tokens file {path}: {exc}") from exc
    return parse(text, path)


def check_tenant(tenant: str) -> None:
    if not tenant or len(tenant) > 200 or not tenant.isprintable() or any(c.isspace() for c in tenant):
        raise TokenFileError(
            f"bad tenant name {tenant[:40]!r}: use 1-200 printable characters without spaces, e.g. alice"
        )


def add(path: Path, tenant: str, *, rotate: bool = False) -> tuple[str, list[Entry]]:
    """A new token for `tenant` (the token, and the entries it replaced).

    A tenant that already has a token is refused unless `rotate`, which replaces its old hashes
    with the new one in the same atomic write.
    """
    return _issue(path, tenant, "replace" if rotate else "refuse")


def rotate(path: Path, tenant: str) -> tuple[str, list[Entry]]:
    """A new token replacing `tenant`'s existing one, which is refused from then on."""
    return _issue(path, tenant, "require")


def _issue(path: Path, tenant: str, existing: Literal["refuse", "replace", "require"]) -> tuple[str, list[Entry]]:
    check_tenant(tenant)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with _locked(path):
        entries = read_entries(path)
        old = [e for e in entries if e.tenant == tenant]
        if old and existing == "refuse":
            raise TokenFileError(
                f"tenant {tenant!r} already has a token ({_describe(old)}) in {path}: replace it with "
                f"`contextfold token rotate {tenant}` (or `token add {tenant} --rotate`), or pick another name"
            )
        if not old and existing == "require":
            raise TokenFileError(_no_token(path, tenant))
        kept = [e for e in entries if e.tenant != tenant]
        _write(path, [*kept, Entry(tenant, digest(token), _now())])
    return token, old


def remove(path: Path, tenant: str) -> list[Entry]:
    """Delete `tenant`'s tokens; returns what was removed."""
    with _locked(path):
        entries = read_entries(path)
        gone = [e for e in entries if e.tenant == tenant]
        if not gone:
            raise TokenFileError(_no_token(path, tenant))
        _write(path, [e for e in entries if e.tenant != tenant])
    return gone


def _no_token(path: Path, tenant: str) -> str:
    return (
        f"no token for tenant {tenant!r} in {path}: see `contextfold token list`, "
        f"or create one with `contextfold token add {tenant}`"
    )


def _describe(entries: list[Entry]) -> str:
    return ", ".join(f"{e.fingerprint}, created {e.created or 'unknown'}" for e in entries)


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock for a read-modify-write of `path` (on `<path>.lock`, which stays)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write(path: Path, entries: list[Entry]) -> None:
    """Replace `path` with `entries` in one step: a temporary file, fsynced, renamed over it."""
    data = "".join(e.line() for e in entries).encode("utf-8")
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # exactly 0600 whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)

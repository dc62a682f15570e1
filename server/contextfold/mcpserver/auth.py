"""Bearer tokens for the HTTP transport: each token names a tenant, and only its hash is kept.

Tokens come from a tokens file (managed with `contextfold token`; format in `tokenfile`) and
from `CONTEXTFOLD_TOKENS` (`tenant=token;…`, hashed as soon as it is read). The server re-reads
the file when it changes: each check stats it (inode, size, mtime, ctime, a few microseconds) and
reads it again only if one of them differs, so a token added or removed counts from the next
request, with no restart. A request's token is hashed and compared with every stored hash in
constant time, so neither the tokens nor the comparison leak through the disk or the clock.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from contextfold.errors import TokenFileError
from contextfold.home.bearer import digest, parse
from contextfold.names import TOKENS_ENV

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

__all__ = ["SCOPE", "TOKENS_ENV", "TenantTokens", "TokenFileError", "unauthorized_message"]

log = logging.getLogger(__name__)

SCOPE = "contextfold"

Entries = tuple[tuple[str, str], ...]
"""(tenant, sha256 hex of the token)."""
StatKey = tuple[int, int, int, int, int]


class TenantTokens:
    """A `TokenVerifier` (the SDK's protocol) mapping bearer tokens to tenants.

    Only the parsed file is kept between requests, together with the stat it was read under;
    a request whose stat differs reads the file again. A file that disappears or stops parsing
    accepts none of its tokens (fail closed) and logs why once.
    """

    def __init__(self, path: Path | None = None, fixed: Entries = ()) -> None:
        self.path = path
        self.fixed = fixed
        self._key: StatKey | None = None
        self._entries: Entries = ()

    @classmethod
    def load(cls, path: Path | None = None, environ: Mapping[str, str] | None = None) -> TenantTokens:
        """Tokens from `path` (which must exist and parse) and `CONTEXTFOLD_TOKENS`."""
        environ = os.environ if environ is None else environ
        fixed: list[tuple[str, str]] = []
        for item in filter(None, (x.strip() for x in environ.get(TOKENS_ENV, "").split(";"))):
            tenant, sep, token = item.partition("=")
            if not sep or not tenant.strip() or not token.strip():
                raise TokenFileError(f"{TOKENS_ENV}: expected tenant=token pairs separated by ';', got {item[:20]!r}…")
            fixed.append((tenant.strip(), digest(token.strip())))
        tokens = cls(path, tuple(fixed))
        if path is not None:
            tokens._key, tokens._entries = _read_file(path)
        return tokens

    @property
    def configured(self) -> bool:
        """Whether requests need a token: a file is watched (even an empty one) or the env has some."""
        return self.path is not None or bool(self.fixed)

    def __bool__(self) -> bool:
        return self.configured

    def entries(self) -> Entries:
        """Every accepted (tenant, digest) now: the file as it is on disk, then the environment's."""
        return self._file_entries() + self.fixed

    def _file_entries(self) -> Entries:
        if self.path is None:
            return ()
        try:
            key = _stat_key(os.stat(self.path))
        except OSError as exc:
            if self._key is not None:
                log.warning("tokens file %s is gone (%s): its tokens are refused until it is back", self.path, exc)
            self._key, self._entries = None, ()
            return ()
        if key != self._key:
            try:
                self._key, self._entries = _read_file(self.path)
            except TokenFileError as exc:
                log.error("%s; its tokens are refused until it is fixed", exc)
                self._key, self._entries = key, ()
        return self._entries

    def tenant_of(self, token: str) -> str | None:
        wanted = digest(token)
        found = None
        for tenant, hashed in self.entries():  # no early exit: every request costs the same
            if hmac.compare_digest(wanted, hashed):
                found = tenant
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken  # the SDK is heavy; `contextfold token` needs none of it

        tenant = self.tenant_of(token)
        return AccessToken(token=token, client_id=tenant, scopes=[SCOPE]) if tenant else None


def unauthorized_message(presented: bool) -> str:
    """What a client refused for its bearer token is told: how to pass one and where to get one."""
    how = (
        "send the header `Authorization: Bearer <token>`; whoever runs the server creates one with "
        "`contextfold token add NAME` and lists them with `contextfold token list`"
    )
    if presented:
        return f"bearer token refused: it is unknown, or was removed or rotated; {how}"
    return f"this contextfold server needs a bearer token: {how}"


def _stat_key(st: os.stat_result) -> StatKey:
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_file(path: Path) -> tuple[StatKey, Entries]:
    """The file's entries with the stat of the very file read (not of a later replacement)."""
    try:
        with open(path, "rb") as f:
            key = _stat_key(os.fstat(f.fileno()))
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(
            f"cannot read tokens file {path}: {exc}; create it with `contextfold token add NAME --tokens-file {path}`"
        ) from exc
    return key, tuple((e.tenant, e.digest) for e in parse(text, path))

"""Bearer tokens for the HTTP transport: each token names a tenant, and only its hash is kept.

Tokens come from a tokens file (`tenant<TAB>sha256:<hex>` lines, written by `contextfold token
add`) and from `CONTEXTFOLD_TOKENS` (`tenant=token;…`, hashed as soon as it is read). A request's
token is hashed and compared with every stored hash in constant time, so neither the tokens nor
the comparison leak through the disk or the clock.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mcp.server.auth.provider import AccessToken

TOKENS_ENV = "CONTEXTFOLD_TOKENS"
SCOPE = "contextfold"


class TokenFileError(ValueError):
    pass


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TenantTokens:
    """A `TokenVerifier` (the SDK's protocol) mapping bearer tokens to tenants."""

    entries: tuple[tuple[str, str], ...]
    """(tenant, sha256 hex of the token)."""

    @classmethod
    def load(cls, path: Path | None = None, environ: Mapping[str, str] | None = None) -> TenantTokens:
        environ = os.environ if environ is None else environ
        entries: list[tuple[str, str]] = []
        if path is not None:
            entries += _read_file(path)
        for item in filter(None, (x.strip() for x in environ.get(TOKENS_ENV, "").split(";"))):
            tenant, sep, token = item.partition("=")
            if not sep or not tenant.strip() or not token.strip():
                raise TokenFileError(f"{TOKENS_ENV}: expected tenant=token pairs separated by ';', got {item[:20]!r}…")
            entries.append((tenant.strip(), _digest(token.strip())))
        return cls(tuple(entries))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def tenant_of(self, token: str) -> str | None:
        wanted = _digest(token)
        found = None
        for tenant, digest in self.entries:  # no early exit: every request costs the same
            if hmac.compare_digest(wanted, digest):
                found = tenant
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        tenant = self.tenant_of(token)
        return AccessToken(token=token, client_id=tenant, scopes=[SCOPE]) if tenant else None


def _read_file(path: Path) -> list[tuple[str, str]]:
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as exc:
        raise TokenFileError(f"cannot read tokens file {path}: {exc}") from exc
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tenant, _, hashed = line.partition("\t")
        if not hashed.startswith("sha256:") or len(hashed) != 71 or not tenant:
            raise TokenFileError(f"{path}, line {number}: expected 'tenant<TAB>sha256:<64 hex>'")
        entries.append((tenant, hashed.removeprefix("sha256:")))
    return entries


def add_token(path: Path, tenant: str) -> str:
    """Create a token for `tenant`, store its hash in `path` (0600), and return the token itself."""
    if not tenant or any(c.isspace() for c in tenant):
        raise TokenFileError("a tenant name must be non-empty and contain no whitespace")
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(f"{tenant}\tsha256:{_digest(token)}\n")
    return token

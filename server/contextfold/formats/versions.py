"""Versions of a rendered view, so a caller can ask for only what changed since the one it holds.

A version names the rendered messages exactly: their number and a hash chained over each one's
canonical JSON, seeded with the format and the system prompt, so any process that renders the
same view gives it the same version. `get_context(since=version)` answers with the messages
after that prefix when the view still starts with it, else with all of them; either way the
answer's `start` says where its messages go. Equal versions mean byte-equal prefixes, which is
what a provider's prompt cache needs: the version doubles as a cache hint.

A `Chain` is kept beside a session's cached view. Updating it reuses the links of rendered
messages that are the same objects as last time (the view cache keeps them), so a turn hashes
only what is new.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

_SIZE = 16


@dataclass
class Chain:
    """Each rendered message of a view with the digest of everything up to and including it."""

    seed: bytes = b""
    messages: list[dict[str, Any]] = field(default_factory=list)
    digests: list[bytes] = field(default_factory=list)

    def update(self, format: str, system: Any, messages: list[dict[str, Any]]) -> None:
        """Chain `messages`, reusing the digests of the leading ones that are unchanged objects."""
        seed = _digest(b"contextfold-view\x00" + format.encode() + b"\x00" + _canonical(system))
        keep = 0
        if seed == self.seed:
            limit = min(len(self.messages), len(messages))
            while keep < limit and self.messages[keep] is messages[keep]:
                keep += 1
        self.seed = seed
        self.messages = list(messages)
        del self.digests[keep:]
        digest = self.digests[-1] if self.digests else seed
        for message in messages[keep:]:
            digest = _digest(digest + _canonical(message))
            self.digests.append(digest)

    @property
    def version(self) -> str:
        """The version of the whole rendered view."""
        return self._version(len(self.digests))

    def resume_at(self, since: str) -> int:
        """How many leading messages a caller holding version `since` already has: the whole
        prefix it names when the view still starts with it, else none."""
        count, _, _ = since.partition(".")
        if not count.isdigit() or int(count) > len(self.digests):
            return 0
        n = int(count)
        return n if self._version(n) == since else 0

    def _version(self, n: int) -> str:
        return f"{n}.{(self.digests[n - 1] if n else self.seed).hex()}"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=_SIZE).digest()

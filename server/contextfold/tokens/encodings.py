"""The offline BPE encodings: tiktoken's, built from the rank files packaged in `_data/`.

tiktoken would download the rank files on first use; it is handed the packaged bytes instead,
after they are checked against the sha256 that `tiktoken_ext.openai_public` expects (and the one
pinned here). Nothing here touches the network. Each encoding is built once per process.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from importlib import resources
from typing import Literal

import tiktoken
import tiktoken_ext.openai_public as _openai_public

from contextfold.errors import TokenizerDataError

__all__ = ["EXPECTED_SHA256", "Encoding", "TokenizerDataError", "encoding", "forget", "warm"]

Encoding = Literal["o200k_base", "cl100k_base"]

EXPECTED_SHA256: dict[Encoding, str] = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
"""Pinned here as well, so a tiktoken that stopped declaring a hash cannot switch the check off."""


_load_lock = threading.Lock()


def _packaged_ranks(name: Encoding, expected_hash: str | None) -> dict[bytes, int]:
    try:
        raw = resources.files("contextfold._data").joinpath(f"{name}.tiktoken.gz").read_bytes()
        data = gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise TokenizerDataError(
            f"the packaged {name} rank file cannot be read ({exc}); reinstall contextfold"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    for wanted in {expected_hash, EXPECTED_SHA256[name]} - {None}:
        if digest != wanted:
            raise TokenizerDataError(
                f"the packaged {name} rank file has sha256 {digest}, tiktoken expects {wanted}; reinstall contextfold"
            )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


_encodings: dict[str, tiktoken.Encoding] = {}


def encoding(name: Encoding) -> tiktoken.Encoding:
    """The tiktoken encoding `name`, built from the packaged rank file (never downloaded).

    Built once per process (about 0.4 s): a thread that asks while another builds it waits.
    """
    found = _encodings.get(name)
    if found is not None:
        return found
    if name not in EXPECTED_SHA256:
        raise ValueError(f"unknown encoding {name!r}; contextfold ships o200k_base and cl100k_base")
    with _load_lock:
        if name not in _encodings:
            _encodings[name] = _build(name)
        return _encodings[name]


def warm() -> None:
    """Build every packaged encoding now. A server serving many sessions over HTTP calls this in a
    thread at start, so that its first count does not hold the event loop for 0.4 s."""
    for name in EXPECTED_SHA256:
        encoding(name)


def _build(name: Encoding) -> tiktoken.Encoding:
    constructor = getattr(_openai_public, name)
    # tiktoken's constructor knows the split pattern, the special tokens and the expected hash;
    # only its loader would go to the network. Swap in one that reads the packaged bytes.
    original = _openai_public.load_tiktoken_bpe
    _openai_public.load_tiktoken_bpe = lambda _url, expected_hash=None: _packaged_ranks(name, expected_hash)
    try:
        params = constructor()
    finally:
        _openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**params)


def forget() -> None:
    """Drop the encodings built so far: the next `encoding` call builds (and checks) its file again."""
    with _load_lock:
        _encodings.clear()

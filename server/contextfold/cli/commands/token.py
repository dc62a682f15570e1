"""`contextfold token add|rotate|remove|list`: the tokens file, managed from the shell.

A token is printed once, when it is made; the file keeps only its hash. `list` shows names,
creation times and a short fingerprint of each hash, never a secret. A running
`contextfold serve --http` notices every change at its next request (see `auth`). The parser is
in `cli`, which imports this module only when a token command runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from contextfold.home import bearer as tokenfile

if TYPE_CHECKING:
    from contextfold.config import Settings

DEFAULT_NAME = "tokens"


def default_path(settings: Settings) -> Path:
    """Where `token` keeps hashes and `serve --http` looks for them without --tokens-file."""
    return settings.home / DEFAULT_NAME


def _path(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.tokens_file).expanduser() if args.tokens_file else default_path(settings)


def _print_new(tenant: str, token: str, path: Path, replaced: list[tokenfile.Entry]) -> None:
    if replaced:
        old = ", ".join(e.fingerprint for e in replaced)
        print(f"replaced {tenant!r}'s token {old}: it is refused from now on, by running servers too")
    print(f"token for tenant {tenant!r} (shown once; only its hash is stored in {path}):")
    print(token)  # the last line, alone, for scripts


def add(args: argparse.Namespace, settings: Settings) -> int:
    path = _path(args, settings)
    token, replaced = tokenfile.add(path, args.tenant, rotate=args.rotate)
    _print_new(args.tenant, token, path, replaced)
    return 0


def rotate(args: argparse.Namespace, settings: Settings) -> int:
    path = _path(args, settings)
    token, replaced = tokenfile.rotate(path, args.tenant)
    _print_new(args.tenant, token, path, replaced)
    return 0


def remove(args: argparse.Namespace, settings: Settings) -> int:
    path = _path(args, settings)
    removed = tokenfile.remove(path, args.tenant)
    prints = ", ".join(e.fingerprint for e in removed)
    print(f"removed the token of tenant {args.tenant!r} ({prints}); running servers refuse it from their next request")
    return 0


def list_tokens(args: argparse.Namespace, settings: Settings) -> int:
    path = _path(args, settings)
    entries = tokenfile.read_entries(path)
    if args.json:
        rows = [{"tenant": e.tenant, "created": e.created, "fingerprint": e.fingerprint} for e in entries]
        print(json.dumps({"file": str(path), "tokens": rows}, indent=2))
    elif not entries:
        print(f"no tokens in {path}; create one with `contextfold token add NAME`")
    else:
        cells = [("tenant", "created", "fingerprint")]
        cells += [(e.tenant, e.created or "-", e.fingerprint) for e in entries]
        widths = [max(len(row[i]) for row in cells) for i in range(3)]
        for row in cells:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        print(f"\n{len(entries)} token(s) in {path}")
    return 0

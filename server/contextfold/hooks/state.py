"""The little a session's hooks remember between processes, in files under `<home>/hooks/`.

Each hook event is its own process, and an agent waits for one before it fires the next, so a
session's hook files have one writer at a time; several agent windows write different sessions.
Files are written whole and renamed into place (a reader sees the old or the new one), `0600` in a
`0700` directory, like the rest of the data home:

- `sessions/<id>.json` — what the latest compaction's handover gave (its keys), so what the
  agent's summary turns out to lack is not given twice;
- `sessions/<id>.pending` — context for the next UserPromptSubmit (Claude Code hands the summary
  over only after the last point where a hook can add context). Claimed by renaming it away, so
  two prompts cannot both deliver it; checking for it costs one `stat`;
- `sessions/<id>.ranking` — the working set's ranking the latest handover chose from, with the
  history it ranked (its length and last message id): a second look at the same compaction takes
  it instead of ranking the whole history again (most of a handover's time);
- `hooks.log` — one line per hook that failed open (the agent never sees the failure).

Standard library only: the prompt hook reads a pending file without loading the settings.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOG_NAME = "hooks.log"
MAX_LOG_BYTES = 1 << 20
"""Past this the log is started again (the previous one kept as `hooks.log.1`)."""
_SAFE = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def hooks_dir(home: Path) -> Path:
    return home / "hooks"


def _session_file(home: Path, session_id: str, suffix: str) -> Path:
    if _SAFE.match(session_id):
        name = session_id
    else:
        import hashlib  # agents' session ids are UUIDs: only an odd one needs hashing into a file name

        name = hashlib.sha256(session_id.encode()).hexdigest()
    return hooks_dir(home) / "sessions" / f"{name}{suffix}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def load(home: Path, session_id: str) -> dict[str, Any]:
    try:
        value = json.loads(_session_file(home, session_id, ".json").read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def save(home: Path, session_id: str, state: dict[str, Any]) -> None:
    _write(_session_file(home, session_id, ".json"), json.dumps(state, ensure_ascii=False))


def set_pending(home: Path, session_id: str, text: str) -> None:
    path = _session_file(home, session_id, ".pending")
    if text:
        _write(path, text)
    else:
        path.unlink(missing_ok=True)


def take_pending(home: Path, session_id: str) -> str | None:
    """The pending context, removed so no later prompt gets it again; None when there is none."""
    path = _session_file(home, session_id, ".pending")
    if not path.exists():
        return None
    claimed = path.with_name(f".{path.name}.{os.getpid()}.taken")
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return None  # another prompt took it first
    try:
        return claimed.read_text("utf-8")
    finally:
        claimed.unlink(missing_ok=True)


MAX_RANKED = 5_000
"""Names of a ranking kept for the second look, at most (the most relevant): a handover reaches a
few hundred (`hook_context_tokens` bounds it)."""
MAX_RANKING_BYTES = 4 << 20
"""A ranking file larger than this is not read (it was not written by this code)."""


def save_ranking(home: Path, session_id: str, history: str, ranked: Sequence[tuple[str, str]]) -> None:
    """Keep `ranked` (name, kind), the working set's ranking of the history `history` names."""
    kept = [list(pair) for pair in ranked[:MAX_RANKED]]
    _write(_session_file(home, session_id, ".ranking"), json.dumps({"history": history, "ranked": kept}))


def load_ranking(home: Path, session_id: str, history: str) -> list[tuple[str, str]] | None:
    """The ranking kept for the history `history` names; None when there is none for it (another
    history, a file damaged or too large)."""
    path = _session_file(home, session_id, ".ranking")
    try:
        if path.stat().st_size > MAX_RANKING_BYTES:
            return None
        value = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get("history") != history or not isinstance(value.get("ranked"), list):
        return None
    pairs = value["ranked"]
    if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
        return None
    return [(name, kind) for name, kind in pairs]


def log_failure(home: Path, agent: str, event: str, error: BaseException) -> None:
    """One line in `<home>/hooks/hooks.log`; never raises (the hook is failing open already)."""
    try:
        log = hooks_dir(home) / LOG_NAME
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if log.exists() and log.stat().st_size > MAX_LOG_BYTES:
            os.replace(log, log.with_name(LOG_NAME + ".1"))
        message = " ".join(str(error).split())[:500]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(f"{stamp} {agent} {event}: {type(error).__name__}: {message}\n")
    except Exception:  # noqa: BLE001 - nowhere left to report to
        pass


__all__ = [
    "MAX_RANKED",
    "hooks_dir",
    "load",
    "load_ranking",
    "log_failure",
    "save",
    "save_ranking",
    "set_pending",
    "take_pending",
]

"""Finding an agent's transcript from its session id, for `contextfold import SESSION_ID`.

Claude Code keeps each session as `~/.claude/projects/<project>/<session id>.jsonl` (the project
is its working directory with `/` and `.` written as `-`; `$CLAUDE_CONFIG_DIR` moves `~/.claude`).
Codex keeps each as `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl` (`$CODEX_HOME`
moves `~/.codex`). The settings `claude_projects_dir` and `codex_sessions_dir` name other roots.
Only those fixed depths are looked at, so a lookup reads a few directories, never a whole tree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from contextfold.config import Settings
from contextfold.errors import UsageError

SESSION_ID = re.compile(
    r"(?:claude-code-|codex-)?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", re.IGNORECASE
)
"""An agent's session id (a UUID), alone or as the session its hooks keep (`claude-code-<id>`, `codex-<id>`)."""

MAX_SHOWN = 5
"""Files an ambiguous id's error names."""


def claude_projects(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    if settings.claude_projects_dir is not None:
        return Path(settings.claude_projects_dir).expanduser()
    config = environ.get("CLAUDE_CONFIG_DIR")
    return (Path(config).expanduser() if config else Path.home() / ".claude") / "projects"


def codex_sessions(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    if settings.codex_sessions_dir is not None:
        return Path(settings.codex_sessions_dir).expanduser()
    home = environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "sessions"


def resolve(given: str, settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """The file `import` reads: `given` itself when it exists or is no session id, else the one
    transcript of that session under the agents' roots; a one-line error when none or several."""
    path = Path(given)
    match = SESSION_ID.fullmatch(given.strip())
    if path.exists() or match is None:
        return path
    session = match.group(1).lower()
    claude, codex = claude_projects(settings, environ), codex_sessions(settings, environ)
    found = sorted(
        {
            *_glob(claude, f"*/{session}.jsonl"),
            *_glob(codex, f"*/*/*/rollout-*{session}.jsonl"),
        }
    )
    if not found:
        raise UsageError(
            f"no transcript of session {session} under {claude} (Claude Code: <project>/<id>.jsonl, the "
            f"claude_projects_dir setting) or {codex} (Codex: YYYY/MM/DD/rollout-*-<id>.jsonl, the "
            "codex_sessions_dir setting); give the file's path instead"
        )
    if len(found) > 1:
        shown = ", ".join(str(p) for p in found[:MAX_SHOWN]) + (", …" if len(found) > MAX_SHOWN else "")
        raise UsageError(
            f"session {session} names {len(found)} transcripts ({shown}); give the path of the one to import"
        )
    return found[0]


def _glob(root: Path, pattern: str) -> list[Path]:
    try:
        return [p for p in root.glob(pattern) if p.is_file()]
    except OSError:  # an unreadable root is a root without the file
        return []


__all__ = ["claude_projects", "codex_sessions", "resolve"]

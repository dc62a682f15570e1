"""Names the light paths use before they load what they name; this module imports nothing.

`contextfold --help` lists the import formats and the removal strategies and mentions the tokens
variable; defined here, with nothing imported, they cost the parser nothing. The modules that
implement them (`importers`, `strategies`, `auth`) re-export them from here. The hooks' status
line shows an overflow state without loading pydantic.
"""

from __future__ import annotations

from typing import Literal

ImportFormat = Literal[
    "claude-code", "codex", "normalized", "anthropic", "openai", "mini-swe-agent", "swe-agent", "openhands"
]
IMPORT_FORMATS: tuple[ImportFormat, ...] = (
    "claude-code",
    "codex",
    "normalized",
    "anthropic",
    "openai",
    "mini-swe-agent",
    "swe-agent",
    "openhands",
)

ORPHAN_RESULT_END = ", made before this transcript begins:]"
"""How the first line ends of the user-role note an import makes of a tool result whose call is
not in the file (`[The result of tool call ID, made before this transcript begins:]`, then the
result): the importer's words and a tool's output, never the user's."""

REMOVAL_STRATEGIES = ("middle", "oldest", "hybrid")
"""Compaction strategies that remove messages from view without summarizing them."""

TOKENS_ENV = "CONTEXTFOLD_TOKENS"
"""Bearer tokens for `serve --http` from the environment: `tenant=token;…`."""

OverflowState = Literal["ok", "soft", "hard", "overflow"]
"""Where a session stands against its budget (`policy.overflow` assesses it); a status line shows it."""

PROXY_ORIGIN = "proxy"
"""`SessionState.origin` of the session a `contextfold proxy` connection records its calls in."""

HOOK_ORIGIN = "hook:"
"""`SessionState.origin` of a session an agent's hooks opened, followed by the agent ("hook:codex"):
the hooks import the agent's transcript into it, and it still reads as the hooks' session."""

LOCAL_OWNER = ""
"""The tenant of callers on this machine (stdio, the CLI, the hooks, a library user)."""

AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex"}
"""The agents whose transcripts and hooks contextfold reads, as a person calls them."""


def agent_session_id(agent: str, native_id: str) -> str:
    """The contextfold session that holds an agent's own session `native_id` (`agent`: "claude-code",
    "codex"): where its hooks store what they see and where `import` puts that agent's transcript
    by default, so the hooks, an import and a re-import all meet in one session."""
    return f"{agent}-{native_id}"

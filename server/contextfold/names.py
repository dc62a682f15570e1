"""Names the command line offers before it loads what they name.

`contextfold --help` lists the import formats and the removal strategies and mentions the tokens
variable; defined here, with nothing imported, they cost the parser nothing. The modules that
implement them (`importers`, `strategies`, `auth`) re-export them from here.
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

REMOVAL_STRATEGIES = ("middle", "oldest", "hybrid")
"""Compaction strategies that remove messages from view without summarizing them."""

TOKENS_ENV = "CONTEXTFOLD_TOKENS"
"""Bearer tokens for `serve --http` from the environment: `tenant=token;…`."""

"""Agent adapters: what each coding agent's tool calls, results and harness text look like.

One module per agent (`claude_code`, `codex`, `opencode`, `swe_agent`, `openhands`) and a
`generic` fallback, all behind `base.AgentAdapter`; `registry` orders them and picks one per tool
call. `shell` and `output` read what every agent's shell tool runs and prints. Supporting another
agent is one more module and one `register` call.
"""

from contextfold.compaction.agents.base import (
    AgentAdapter,
    Notification,
    Outcome,
    PlanEdit,
    PlanItem,
    ToolCall,
    Walk,
)
from contextfold.compaction.agents.registry import adapters, pick, register, unregister

__all__ = [
    "AgentAdapter",
    "Notification",
    "Outcome",
    "PlanEdit",
    "PlanItem",
    "ToolCall",
    "Walk",
    "adapters",
    "pick",
    "register",
    "unregister",
]

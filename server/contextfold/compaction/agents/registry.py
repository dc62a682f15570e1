"""Which adapters are asked, in which order, and which one reads a given tool call.

The order matters twice. A call goes to the first adapter that recognizes it (its exact tool name
and shape); failing that, to the first whose tool names include it in another spelling; failing
that, to the generic adapter. SWE-agent comes first because an `edit` or `insert` that names no
file is its open-file edit whoever sent it. And a result's wrapper is read by the first adapter
whose harness format it is in: the wrappers that must open an output (mini-swe-agent's
`<returncode>`, Claude Code's `Exit code N`) are tried before Codex's header, searched in the
first 400 characters, and OpenHands' exit line, searched in the last 300.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextfold.compaction.agents.base import AgentAdapter, ToolCall
from contextfold.compaction.agents.claude_code import ClaudeCode
from contextfold.compaction.agents.codex import Codex
from contextfold.compaction.agents.generic import Generic
from contextfold.compaction.agents.opencode import OpenCode
from contextfold.compaction.agents.openhands import OpenHands
from contextfold.compaction.agents.swe_agent import SweAgent

GENERIC = Generic()
_adapters: list[AgentAdapter] = [SweAgent(), ClaudeCode(), OpenCode(), Codex(), OpenHands()]


def adapters() -> tuple[AgentAdapter, ...]:
    """The registered adapters in the order they are asked, the generic fallback last."""
    return (*_adapters, GENERIC)


def register(adapter: AgentAdapter) -> AgentAdapter:
    """Ask `adapter` after the ones registered before it (and before the generic fallback)."""
    if any(existing.name == adapter.name for existing in _adapters):
        raise ValueError(f"an adapter named {adapter.name!r} is registered already; unregister it first")
    _adapters.append(adapter)
    return adapter


def unregister(adapter: AgentAdapter) -> None:
    if adapter in _adapters:
        _adapters.remove(adapter)


def pick(call: ToolCall, among: Sequence[AgentAdapter]) -> AgentAdapter:
    """The adapter that reads `call`."""
    for adapter in among:
        if adapter is not GENERIC and adapter.recognizes(call):
            return adapter
    for adapter in among:
        if adapter is not GENERIC and adapter.knows(call):
            return adapter
    return GENERIC

"""OpenHands: `execute_bash` (`command`), whose result ends `[The command completed with exit code
N.]`, and `str_replace_editor` (shared with SWE-agent); headless runs answer the agent's questions
with a fixed nudge in the user's turn."""

from __future__ import annotations

import re

from contextfold.compaction.agents.base import AgentAdapter, Outcome
from contextfold.domain import ToolPart

_EXIT = re.compile(r"(?:executed|completed) with exit code (-?\d+)")


class OpenHands(AgentAdapter):
    name = "OpenHands"
    shell_tools = frozenset({"execute_bash"})
    editor_tools = frozenset({"str_replace_editor"})
    other_tools = frozenset({"finish", "think", "execute_ipython_cell"})
    web_tools = frozenset({"browser"})
    injected_prefixes = ("Please continue working on the task on whatever approach you think is suitable",)
    """The reply OpenHands' headless runs send in the user's turn when the agent asks something:
    a nudge to go on, not the user's words."""

    def outcome(self, part: ToolPart) -> Outcome | None:
        text = part.result_text
        match = _EXIT.search(text[-300:])
        if match is None:
            return None
        code = int(match.group(1))
        return Outcome(code == 0, code, text)

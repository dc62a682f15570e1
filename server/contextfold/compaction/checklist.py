"""A plan the agent wrote as a Markdown checklist in its own text (`- [x] Parse the input`).

Agents without a plan tool, or with one they did not use, keep their plan this way; read like a
plan tool's call, the latest checklist replaces the plan before it.
"""

from __future__ import annotations

import re

from contextfold.compaction.agents import PlanItem
from contextfold.compaction.agents.base import PlanStatus

_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+\[([ xX✓✔~>/-])\]\s+(.+?)\s*$")
_STATUS: dict[str, PlanStatus] = {
    " ": "pending",
    "x": "completed",
    "X": "completed",
    "✓": "completed",
    "✔": "completed",
    "~": "in_progress",
    ">": "in_progress",
    "/": "in_progress",
    "-": "in_progress",
}
MIN_ITEMS = 2
"""One box alone is as likely a remark as a plan."""


def checklist(text: str) -> list[PlanItem]:
    """The checklist items of `text` in order, or [] when it holds fewer than `MIN_ITEMS`."""
    items = [
        PlanItem(match.group(2).replace("**", "").strip(), _STATUS[match.group(1)])
        for match in map(_ITEM.match, text.splitlines())
        if match is not None and match.group(2).strip()
    ]
    if len(items) < MIN_ITEMS:
        return []
    return items


__all__ = ["checklist"]

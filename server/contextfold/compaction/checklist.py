"""Plans the agent wrote in Markdown: a checklist in its own text, a plan the user approved.

A checklist (`- [x] Parse the input`): agents without a plan tool, or with one they did not use,
keep their plan this way; read like a plan tool's call, the latest checklist replaces the plan
before it (`checklist`).

A plan put to the user in a plan mode is a document (a title, context, numbered steps, code): its
title and its steps are what a summary can carry (`outline`).
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


MAX_STEPS = 10
"""Steps of a plan's outline, at most (the first)."""
MAX_PLAN_LINES = 2_000
"""Lines of a plan read for its outline."""
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$")
_STEP_HEADING = re.compile(
    r"^#{2,6}[ \t]+(?:\*\*)?(?:(?:step|phase|stage|part|task)[ \t]+)?\d+[.:)]?[ \t]+(.+?)[ \t#]*$", re.IGNORECASE
)
"""`### 1. Create the page`, `## Phase 2: Deploy`, `## Step 3 — Tests`."""
_STEP_ITEM = re.compile(r"^\d+[.)][ \t]+(.+?)[ \t]*$")
"""`1. Add the limiter`, at the start of the line (not a nested item)."""
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)")


def outline(plan: str) -> tuple[str, list[str]]:
    """A Markdown plan's title (its first heading, else its first line) and its steps: its
    numbered headings, or when it has fewer than two, its numbered top-level items; none inside
    a code block. Each without its emphasis marks."""
    title = ""
    headed: list[str] = []
    listed: list[str] = []
    fenced = False
    for line in plan.splitlines()[:MAX_PLAN_LINES]:
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        if not title:
            heading = _HEADING.match(line)
            title = _plain(heading.group(1) if heading else line)
            continue
        if (step := _STEP_HEADING.match(line)) is not None:
            headed.append(_plain(step.group(1)))
        elif (item := _STEP_ITEM.match(line)) is not None:
            listed.append(_plain(item.group(1)))
    steps = headed if len(headed) >= MIN_ITEMS else listed if len(listed) >= MIN_ITEMS else []
    return title, [s for s in steps if s][:MAX_STEPS]


def _plain(text: str) -> str:
    return text.replace("**", "").strip().strip(":：").strip()


__all__ = ["MAX_STEPS", "checklist", "outline"]

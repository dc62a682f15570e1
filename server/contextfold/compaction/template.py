"""The anchored summary: eight sections in a fixed order, terse bullets, `(none)` when empty.

Every summarizer's output is parsed into `Summary` and rendered back, so whatever model wrote it,
the stored summary has every section in this order and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

GOAL = "Goal"
CONSTRAINTS = "Constraints & Preferences"
PROGRESS = "Progress"
DONE = "Done"
IN_PROGRESS = "In Progress"
BLOCKED = "Blocked"
DECISIONS = "Key Decisions"
NEXT_STEPS = "Next Steps"
CRITICAL = "Critical Context"
FILES = "Relevant Files"

SECTIONS: tuple[str, ...] = (GOAL, CONSTRAINTS, DONE, IN_PROGRESS, BLOCKED, DECISIONS, NEXT_STEPS, CRITICAL, FILES)
"""The bullet lists a summary holds, in order. Done / In Progress / Blocked sit under `## Progress`."""
PROGRESS_PARTS: tuple[str, ...] = (DONE, IN_PROGRESS, BLOCKED)

EMPTY = "(none)"
LATEST_REQUEST = "Latest request: "
"""Label of the Goal bullet that carries the user's latest instruction."""

_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.*\S)\s*$")
_ALIASES = {name.casefold(): name for name in (*SECTIONS, PROGRESS)}
_ALIASES.update({"constraints": CONSTRAINTS, "preferences": CONSTRAINTS, "files": FILES, "decisions": DECISIONS})


@dataclass
class Summary:
    """Bullets per section (`SECTIONS` keys). Order within a section is kept."""

    sections: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SECTIONS})

    def __getitem__(self, name: str) -> list[str]:
        return self.sections[name]

    def add(self, name: str, bullet: str) -> bool:
        """Append `bullet` unless the section already holds it (ignoring case and spacing)."""
        bullet = " ".join(bullet.split())
        if not bullet or bullet == EMPTY:
            return False
        key = bullet.casefold()
        if any(" ".join(b.split()).casefold() == key for b in self.sections[name]):
            return False
        self.sections[name].append(bullet)
        return True

    def mentions(self, text: str) -> bool:
        """True when `text` appears in any bullet (exact substring)."""
        return any(text in bullet for bullets in self.sections.values() for bullet in bullets)

    def render(self) -> str:
        lines: list[str] = []
        for name in SECTIONS:
            if name == DONE:
                lines += [f"## {PROGRESS}", ""]
            heading = "###" if name in PROGRESS_PARTS else "##"
            lines.append(f"{heading} {name}")
            bullets = self.sections[name] or [EMPTY]
            lines += [f"- {b}" for b in bullets]
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


def parse_summary(markdown: str) -> Summary:
    """Read a summary written by any summarizer, tolerating headings at either level, numbered
    bullets and stray prose. Text outside a known section is dropped; unknown headings are
    treated as part of the section before them."""
    summary = Summary()
    current: str | None = None
    for raw in markdown.splitlines():
        heading = _HEADING.match(raw)
        if heading:
            name = _ALIASES.get(heading.group(2).strip().strip("*").casefold())
            if name == PROGRESS:
                current = IN_PROGRESS  # loose bullets straight under Progress are work in flight
            elif name is not None:
                current = name
            continue
        if current is None:
            continue
        bullet = _BULLET.match(raw)
        if bullet:
            summary.add(current, bullet.group(1))
        elif raw.strip() and raw.startswith(("  ", "\t")) and summary.sections[current]:
            # A wrapped continuation of the previous bullet.
            summary.sections[current][-1] += " " + raw.strip()
        elif raw.strip() and not raw.strip().startswith(("```", "---")):
            summary.add(current, raw.strip())
    return summary


def missing_sections(markdown: str) -> list[str]:
    """The sections whose heading does not appear in `markdown` (for validating LLM output)."""
    found = set()
    for raw in markdown.splitlines():
        heading = _HEADING.match(raw)
        if heading:
            name = _ALIASES.get(heading.group(2).strip().strip("*").casefold())
            if name:
                found.add(name)
    return [name for name in (GOAL, CONSTRAINTS, PROGRESS, DECISIONS, NEXT_STEPS, CRITICAL, FILES) if name not in found]

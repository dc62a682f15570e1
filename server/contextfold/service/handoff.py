"""Handing a session off: one message that starts a fresh session, or another agent, where this one
stands (docs/steering.md).

The message is written by code from the session's view, as the extractive summary is — the goal,
the user's own words, the plan and its state, the working set (files, tests, names), the open
errors — with the session's pins word for word, the newest steps in whatever room is left (as a
compaction keeps its tail), and a closing line saying how to reach the whole history
(`search_history` on this session). Secrets are redacted. It is bounded by `tokens`
(default: the `handoff_tokens` setting) and rendered for the target: plain Markdown, or a first
prompt for Claude Code or Codex.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from contextfold.compaction.extractive import build_summary
from contextfold.compaction.pins import pin_facts
from contextfold.compaction.secrets import redact_history
from contextfold.compaction.template import CONSTRAINTS, PINNED_NOTE, Summary, parse_summary
from contextfold.domain import Message
from contextfold.errors import InvalidInput
from contextfold.results import HandoffResult
from contextfold.tokens.counting import TokenCounter

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope

Target = Literal["markdown", "claude-code", "codex"]
TARGETS: tuple[Target, ...] = ("markdown", "claude-code", "codex")
MIN_TOKENS = 300
"""Below this a handoff cannot hold its headings and the closing line."""

_OPENING: dict[str, str] = {
    "markdown": "# Handoff: where session {sid} stands",
    "claude-code": (
        "Continue a task started in another session. What follows is where it stands, written from its full "
        "history by contextfold; trust the user's quoted words over anything else."
    ),
    "codex": (
        "You are picking up a task from an earlier session. Below is where it stands, written from its full "
        "history by contextfold; the user's quoted words are the ground truth."
    ),
}


def closing(session_id: str, target: str) -> str:
    how = (
        "the contextfold MCP server's search_history tool"
        if target != "markdown"
        else "`contextfold show`, or the search_history tool of contextfold's MCP server"
    )
    return (
        f'The whole earlier history is stored in contextfold session "{session_id}": read it with {how} '
        f'(search_history(session_id="{session_id}", pattern="…"), or at="m12" for a cited message).'
    )


class Handoffs:
    """Hand one tenant's sessions off."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def handoff(self, session_id: str, *, to: str = "markdown", tokens: int | None = None) -> HandoffResult:
        """The message that carries `session_id` on in a fresh session or another agent (see the module)."""
        if to not in TARGETS:
            raise InvalidInput("to", f"unknown target {to!r}; one of {', '.join(TARGETS)}")
        scope = self._scope
        session = await scope.store.get_session(session_id)
        settings = scope.settings_for(session)
        budget = settings.handoff_tokens if tokens is None else tokens
        if budget < MIN_TOKENS:
            raise InvalidInput("tokens", f"{budget:,} tokens cannot hold a handoff; at least {MIN_TOKENS}")
        counter = scope.counter(session.model, settings)
        visible = await scope.view(session)
        previous = next((m.text for m in visible if m.summary), None)
        history = [m for m in visible if not m.is_compaction]
        redacted, redactor = redact_history(history, previous)
        previous = redactor.text(previous) if previous is not None else None
        notes = [PINNED_NOTE + n for n in session.metadata.pinned_notes()]
        pinned = session.metadata.pinned_seqs()
        kept = [m for m in redacted if m.seq in pinned]
        fixed = [_OPENING[to].format(sid=session_id), closing(session_id, to)]
        pinned_text = _pinned(kept)
        room = budget - counter.count("\n\n".join([*fixed, pinned_text, *notes])) - 16
        text, body = "", ""
        while room >= MIN_TOKENS // 2:
            summary = build_summary(redacted, previous=previous, counter=counter, budget_tokens=room)
            summary, _ = pin_facts(summary, redacted, previous=previous, budget_tokens=room)
            parsed = parse_summary(redactor.text(summary))
            with_notes = Summary({**parsed.sections})
            for note in notes:
                with_notes.add(CONSTRAINTS, note)
            body = with_notes.render(note=False).rstrip()
            parts = [fixed[0], body, pinned_text, fixed[1]]
            text = "\n\n".join(p for p in parts if p)
            if counter.count(text) <= budget:
                break
            room -= max(50, counter.count(text) - budget)
        if body and counter.count(text) > budget:
            # The facts pinned into a summary can outgrow a small budget: drop bullets from the end.
            lines = body.splitlines()
            while lines and counter.count(text) > budget:
                drop = next(  # a pinned note is never dropped: it is carried word for word
                    (
                        i
                        for i in range(len(lines) - 1, -1, -1)
                        if lines[i].startswith("- ") and not lines[i].startswith("- " + PINNED_NOTE)
                    ),
                    None,
                )
                if drop is None:
                    break
                del lines[drop]
                text = "\n\n".join(p for p in [fixed[0], "\n".join(lines), pinned_text, fixed[1]] if p)
        if text and counter.count(text) < budget - RECENT_MIN_TOKENS:
            # The room left holds the newest steps as they happened, as a compaction keeps its tail.
            recent = _recent(redacted, counter, budget - counter.count(text) - 8)
            if recent:
                body_parts = text.rsplit("\n\n", 1)
                text = "\n\n".join([body_parts[0], recent, body_parts[1]])
        if not text or counter.count(text) > budget:
            raise InvalidInput(
                "tokens", f"{budget:,} tokens cannot hold this session's handoff with its pins; give more"
            )
        return HandoffResult(session_id=session_id, to=to, text=text, tokens=counter.count(text), budget=budget)


RECENT_MIN_TOKENS = 150
"""Room below which no recent steps are added."""
STEP_CHARS = 600
"""Characters of one step's text, call or output kept in the recent steps."""


def _recent(messages: list[Message], counter: TokenCounter, room: int) -> str:
    """The newest steps, oldest first, within `room` tokens: what each message said, each call with
    its input, and the start and end of each output."""
    header = "## Recent steps (newest last)"
    lines: list[str] = []
    used = counter.count(header) + 2
    for message in reversed(messages):
        step = _step(message)
        if not step:
            continue
        cost = counter.count(step) + 1
        if used + cost > room:
            break
        lines.append(step)
        used += cost
    return "\n".join([header, *reversed(lines)]) if lines else ""


def _step(message: Message) -> str:
    pieces = []
    if message.text.strip():
        pieces.append(f"- [m{message.seq}] {message.role}: {_cut(message.text)}")
    for part in message.tool_parts:
        pieces.append(f"- [m{message.seq}] {part.name} {_cut(json.dumps(part.input, ensure_ascii=False))}")
        if part.result_text.strip():
            pieces.append(f"  → {_cut(part.result_text)}")
    return "\n".join(pieces)


def _cut(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= STEP_CHARS:
        return text
    half = STEP_CHARS // 2
    return f"{text[:half]} … {text[-half:]}"


def _pinned(messages: list[Message]) -> str:
    if not messages:
        return ""
    lines = ["## Pinned (word for word)"]
    for message in messages:
        said = message.text.strip() or "; ".join(f"{p.name} → {p.result_text[:2000]}" for p in message.tool_parts)
        lines.append(f"- [m{message.seq}] {message.role}: {said}")
    return "\n".join(lines)

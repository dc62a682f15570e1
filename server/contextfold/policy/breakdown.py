"""Tokens in view by category: what the model is sent, split the way a person reads it.

The split is exact by construction. Each message in view costs its stored `in_view_tokens`; each
part of it is given what it costs as the view shows it (`tokens.count_in_view`: a part shown as
stored costs its stored count, so a big session is not counted again), a tool part split into its
call (wrapper, name, arguments as shown) and its result (the rest), and whatever is left of the
message — its per-message overhead, and any rounding the stored total carries — goes to the
category of the message itself (user, assistant text, or summary). The system prompt is its own
category. So the categories add up to the stored count of the view; the caller adds the
difference to the count `status` judges by (a provider's report that came out higher, or a total
that drifted from its messages) as a category of its own, so the table always sums to `status`.

Pure: no I/O. Counting (of a marked part, or of a call's arguments) goes through the counter given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from contextfold.domain import CompactionPart, FilePart, Message, ReasoningPart, SystemPrompt, TextPart, ToolPart
from contextfold.formats.shown import shown_input_text, shows_as_stored
from contextfold.tokens.counting import TOOL_OVERHEAD, TokenCounter, count_in_view

CATEGORIES: tuple[tuple[str, str], ...] = (
    ("system", "System prompt"),
    ("tool_definitions", "Tool definitions"),
    ("user", "User messages"),
    ("assistant", "Assistant text"),
    ("reasoning", "Reasoning"),
    ("tool_calls", "Tool calls"),
    ("tool_results", "Tool results"),
    ("spilled_previews", "Previews of spilled outputs"),
    ("cleared_outputs", "Cleared outputs"),
    ("attachments", "Attachments"),
    ("summary", "Summary"),
    ("digests", "Region digests"),
    ("reported_extra", "Reported beyond our count"),
    ("unattributed", "Not attributed to a message"),
)
"""Every category, in the order tables and bars show them, with its label."""

LABELS = dict(CATEGORIES)


@dataclass
class Split:
    """Tokens per category for a run of messages (and the system prompt)."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LABELS, 0))

    def add(self, category: str, tokens: int) -> None:
        self.tokens[category] += tokens

    @property
    def total(self) -> int:
        return sum(self.tokens.values())


def message_base(message: Message) -> str:
    """The category a message's own overhead (and its plain text) belongs to."""
    if message.summary or message.compaction is not None:
        return "summary"
    return "user" if message.role == "user" else "assistant"


def split_message(message: Message, counter: TokenCounter) -> dict[str, int]:
    """`message.in_view_tokens` split by category; the values add up to it exactly."""
    base = message_base(message)
    out: dict[str, int] = {}

    def put(category: str, tokens: int) -> None:
        out[category] = out.get(category, 0) + tokens

    spent = 0
    for part in message.parts:
        shown = part.tokens if isinstance(part, ToolPart) and part.tokens and shows_as_stored(part) else None
        cost = shown if shown is not None else count_in_view(part, counter)
        spent += cost
        if isinstance(part, ToolPart):
            call = TOOL_OVERHEAD + counter.count(part.name) + counter.count(shown_input_text(part))
            call = min(call, cost)
            put("tool_calls", call)
            put(_result_category(part), cost - call)
        elif isinstance(part, TextPart):
            put("spilled_previews" if part.spill_id else base, cost)
        elif isinstance(part, ReasoningPart):
            put("reasoning" if base != "summary" else base, cost)
        elif isinstance(part, FilePart):
            put("attachments", cost)
        elif isinstance(part, CompactionPart):
            put("summary", cost)
    put(base, message.in_view_tokens - spent)  # the message's overhead, and any drift of its total
    return out


def _result_category(part: ToolPart) -> str:
    if part.view_text is not None:
        return "digests"
    if part.compacted_at is not None:
        return "cleared_outputs"
    if part.spill_id is not None:
        return "spilled_previews"
    return "tool_results"


def split_view(system: Sequence[SystemPrompt], messages: Sequence[Message], counter: TokenCounter) -> Split:
    """The view (system prompt and messages in view) split by category."""
    split = Split()
    for prompt in system:
        split.add("system", prompt.tokens)
    for message in messages:
        for category, tokens in split_message(message, counter).items():
            split.add(category, tokens)
    return split


__all__ = ["CATEGORIES", "LABELS", "Split", "message_base", "split_message", "split_view"]

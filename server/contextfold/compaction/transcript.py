"""The head of a session as plain text for an LLM summarizer.

A summarizer needs what happened, not the wire format: who said what, which tools ran with which
arguments, and what came back. So the transcript is a labelled plain-text log. It is cheaper than
API blocks and it can sit inside one delimited data block of a prompt (see `prompt.py`).

What is left out or shortened, and why:
- reasoning: long, provider-specific and often opaque; the visible text carries the decisions;
- compaction markers and earlier summaries: the previous summary is passed separately as the
  anchor to update, and summarizing it as history would nest summaries;
- synthetic text (contextfold's own continue messages and notes): not part of the work;
- media: an image cannot be summarized from its base64, so it becomes `[Attached image/png: name]`;
- tool arguments and outputs: capped per item, keeping the start and the end, since a command's
  context sits at the top of its output and its verdict (the traceback's last line, the test
  summary) at the bottom.

Otherwise a part reads as the model sees it in its view (`contextfold.formats.shown`): a pruned output as
the placeholder, a cut one as its first characters and the note, a digested one as its digest,
an attachment left out with its note.

Deterministic: the same messages always give the same text (no clocks, ids or randomness), so a
retried compaction sends the same prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from contextfold.domain import FilePart, Message, ReasoningPart, TextPart, ToolPart
from contextfold.formats import RenderOptions
from contextfold.formats.shown import media_placeholder, shown_result, tool_input_text

TRANSCRIPT_TAG = "transcript"
"""The prompt wraps the transcript in `<transcript>` … `</transcript>`."""
PREVIOUS_TAG = "previous_summary"
"""The prompt wraps the anchor summary in `<previous_summary>` … `</previous_summary>`."""
DATA_TAGS: tuple[str, ...] = (TRANSCRIPT_TAG, PREVIOUS_TAG)

PRUNED_PLACEHOLDER = RenderOptions().pruned_placeholder
"""The same words the model saw in its own view when prune cleared the output."""
NO_OUTPUT = "(no output)"

# `<transcript`, `</transcript`, `< / Transcript` …: anything a model could read as one of our
# delimiters opening or closing. Matching the tag name with a word boundary leaves ordinary text
# such as `<transcripts>` or `a < b` alone.
_DELIMITER = re.compile(r"<(\s*/?\s*)(" + "|".join(map(re.escape, DATA_TAGS)) + r")\b", re.IGNORECASE)
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def render_transcript(messages: Sequence[Message], *, output_cap: int = 2_000) -> str:
    """The messages (oldest first) as a labelled plain-text transcript for a summarizer.

    Each kept message becomes a block that starts with `[user]` or `[assistant]` (`[user m12]` for
    a stored message, numbered by its `seq`); blocks are
    separated by a blank line. Tool calls read `[tool call NAME] ARGUMENTS`, followed by
    `[tool result NAME]` or `[tool error NAME]` and the output; arguments and outputs are each
    capped at `output_cap` characters (negative: no cap). The result is safe to place inside the
    prompt's data block: our delimiter tags are neutralised.
    """
    blocks: list[str] = []
    for message in messages:
        if message.summary or message.compaction is not None:
            continue
        lines = _message_lines(message, output_cap)
        if lines:
            # The stored message's number, which a summary cites as `[m12]` (`template.cite`).
            label = f"[{message.role} m{message.seq}]" if message.seq > 0 else f"[{message.role}]"
            blocks.append("\n".join([label, *lines]))
    return neutralise_delimiters(_LONE_SURROGATE.sub("\ufffd", "\n\n".join(blocks)))


def neutralise_delimiters(text: str) -> str:
    """`text` with every look-alike of our data tags defused, so it cannot end (or open) a block.

    `</transcript>` becomes `‹/transcript>`: still readable as what it was, no longer the closing
    tag. Idempotent, so text that was already neutralised can safely pass through again.
    """
    return _DELIMITER.sub(lambda m: "\u2039" + m.group(1) + m.group(2), text)


def cap_text(text: str, cap: int) -> str:
    """`text` cut to `cap` characters, keeping its start and its end around a note of how many
    characters were omitted. A negative `cap` means no cap."""
    if cap < 0 or len(text) <= cap:
        return text
    head = (cap + 1) // 2
    tail = cap - head
    omitted = len(text) - head - tail
    end = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n… [omitted {omitted:,} chars] …\n{end}"


def _message_lines(message: Message, output_cap: int) -> list[str]:
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if not part.synthetic and part.text.strip():
                lines.append(part.text.strip("\n"))
        elif isinstance(part, FilePart):
            lines.append(media_placeholder(part))
        elif isinstance(part, ToolPart):
            lines.extend(_tool_lines(part, output_cap))
        elif isinstance(part, ReasoningPart):
            continue
        # A compaction part never reaches here: its message is skipped whole.
    if message.error:
        lines.append(f"[error] {cap_text(message.error, output_cap)}")
    return lines


def _tool_lines(part: ToolPart, output_cap: int) -> list[str]:
    if part.input_cleared:
        call = f"[tool call {part.name}] (arguments cleared)"
    else:
        arguments = cap_text(tool_input_text(part), output_cap)
        call = f"[tool call {part.name}] {arguments}" if arguments.strip() else f"[tool call {part.name}]"

    # As in the view: a call that never got its result reads as interrupted.
    result = shown_result(part)
    assert result is not None  # the view's options answer every open call
    label = f"[tool error {part.name}]" if result.is_error else f"[tool result {part.name}]"
    body = cap_text(result.text, output_cap) if result.text.strip() else NO_OUTPUT
    return [call, label, body, *(media_placeholder(file) for file in result.attachments)]


__all__ = [
    "DATA_TAGS",
    "PREVIOUS_TAG",
    "PRUNED_PLACEHOLDER",
    "TRANSCRIPT_TAG",
    "cap_text",
    "neutralise_delimiters",
    "render_transcript",
]

"""What the model sees for one part: the one definition behind counting, rendering and the transcript.

A part is stored whole. Marks change only how it shows: prune's `compacted_at` (the output becomes
a placeholder) and `input_cleared` (the arguments become `{}`), overflow recovery's `view_cap`
(the output becomes its first characters and a note) and a file's `omitted` (the attachment
becomes a note), the regions strategy's `view_text` (a digest stands in for the output). This
module turns a part and its marks into what is shown; `tokens.count_in_view` counts it, both wire
formats shape it, and the summarizer's transcript writes it out, so the three cannot disagree.

Pure: no I/O, no token counting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from contextfold.domain import FilePart, ToolPart
from contextfold.formats.base import INTERRUPTED_RESULT, RenderOptions

COMPACTION_PROMPT = "What did we do so far?"
"""How a compaction marker reads to the model: the question its summary answers."""

OMITTED_NOTE = "not shown: the attachment was too large for the context window"

VIEW = RenderOptions()
"""The view as counted and as the summarizer reads it: calls still running read as interrupted,
media is shown, no output cap beyond each part's own marks."""


@dataclass(frozen=True)
class ShownResult:
    """A call's result as the model sees it, before a wire format shapes it."""

    text: str
    is_error: bool
    attachments: list[FilePart]
    """Media shown with the result (a format that cannot carry one names it with `media_placeholder`)."""


def tool_input_text(part: ToolPart) -> str:
    """The call's arguments as the model wrote them: the exact string when they came as JSON
    text, else compact JSON."""
    if part.raw_arguments is not None:
        return part.raw_arguments
    if isinstance(part.input, str):
        return part.input
    return json.dumps(part.input, ensure_ascii=False, separators=(",", ":"))


def shown_input(part: ToolPart) -> Any:
    """The call's arguments as a JSON value, as the view shows them: `{}` once prune cleared them."""
    return {} if part.input_cleared else part.input


def shown_raw_arguments(part: ToolPart) -> str | None:
    """The call's exact arguments string as the view shows it (None once prune cleared them)."""
    return None if part.input_cleared else part.raw_arguments


def shown_input_text(part: ToolPart) -> str:
    """The call's arguments as text, as the view shows and counts them."""
    return "{}" if part.input_cleared else tool_input_text(part)


def shown_output(part: ToolPart, options: RenderOptions = VIEW) -> ShownResult:
    """What stands in the view for `part`'s output as its marks leave it, finished or not: a
    region digest, prune's placeholder, the output cut to its caps (the part's own `view_cap`
    and `options.output_cap`, the smaller wins) with a note, or the output whole."""
    is_error = part.state == "error"
    if part.view_text is not None:
        # A region summary stands in for this output (and for the region's other outputs).
        return ShownResult(part.view_text, False, [])
    if part.compacted_at is not None:
        # Pruned: the output (and anything the tool attached) is hidden; the call itself stays.
        return ShownResult(options.pruned_placeholder, is_error, [])
    caps = [c for c in (options.output_cap, part.view_cap) if c is not None]
    text = cap_output(part.result_text, min(caps) if caps else None, part.spill_id)
    return ShownResult(text, is_error, list(part.attachments))


def shown_result(part: ToolPart, options: RenderOptions = VIEW) -> ShownResult | None:
    """The result the model is sent for `part`, or None when the call is left out of the view.

    A call still pending or running reads as interrupted (both APIs reject an unanswered call);
    with `strip_media`, attachments become notes at the end of the text.
    """
    if not part.is_finished:
        return ShownResult(INTERRUPTED_RESULT, True, []) if options.interrupt_pending else None
    result = shown_output(part, options)
    if options.strip_media and result.attachments:
        notes = "\n".join(media_placeholder(file) for file in result.attachments)
        return ShownResult(f"{result.text}\n{notes}" if result.text else notes, result.is_error, [])
    return result


def shows_as_stored(part: ToolPart) -> bool:
    """No mark changes how `part` shows: the view shows it as stored (and counts it so)."""
    return (
        part.view_text is None
        and part.compacted_at is None
        and part.view_cap is None
        and not part.input_cleared
        and not any(file.omitted for file in part.attachments)
    )


def shows_media(file: FilePart, options: RenderOptions = VIEW) -> bool:
    """The attachment itself is shown, rather than a note naming it (`media_placeholder`)."""
    return not (options.strip_media or file.omitted)


def media_placeholder(file: FilePart) -> str:
    """What the model reads instead of an attachment: `[Attached image/png: name]`."""
    label = file.filename or (file.url if file.url and not file.url.startswith("data:") else None)
    note = f" — {OMITTED_NOTE}" if file.omitted else ""
    return f"[Attached {file.mime}: {label}{note}]" if label else f"[Attached {file.mime}{note}]"


def cap_output(text: str, cap: int | None, output_id: str | None = None) -> str:
    """The first `cap` characters of `text`, with a note of how many were left out (and, for an
    output spilled at ingest, how to read all of it: the preview's own hint may be cut off)."""
    if cap is None or len(text) <= cap:
        return text
    keep = max(cap, 0)
    whole = f'; read_output(id="{output_id}") reads the whole output' if output_id else ""
    return f"{text[:keep]}\n… [omitted {len(text) - keep:,} chars{whole}]"


__all__ = [
    "COMPACTION_PROMPT",
    "OMITTED_NOTE",
    "VIEW",
    "ShownResult",
    "cap_output",
    "media_placeholder",
    "shown_input",
    "shown_input_text",
    "shown_output",
    "shown_raw_arguments",
    "shown_result",
    "shows_as_stored",
    "shows_media",
    "tool_input_text",
]

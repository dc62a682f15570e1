"""How the `contextfold` command shows things: tables, a session's view, exports, results, errors.

Pure functions from the service's results to text (or JSON values); the command modules
(`contextfold.cli.commands`) do the calling and the printing. Errors are worded with CLI commands, since
the messages the service raises name the MCP tools a model would call: in `cli_errors`, which
light commands can load without this module (re-exported here).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from contextfold.cli.reporting import error_line
from contextfold.domain import CompactionPart, FilePart, Message, ReasoningPart, Session, TextPart, ToolPart
from contextfold.errors import UsageError
from contextfold.formats import RenderOptions, WireFormat, render
from contextfold.formats.shown import COMPACTION_PROMPT, shown_result
from contextfold.results import Breakdown, CompactResult, PinList, PruneResult, SessionInfo, Status, UndoResult

__all__ = [
    "UsageError",
    "breakdown_lines",
    "compact_lines",
    "error_line",
    "fmt",
    "full_export",
    "in_view_words",
    "pin_lines",
    "prune_lines",
    "sessions_json",
    "sessions_table",
    "status_lines",
    "table",
    "undo_lines",
    "view_lines",
    "when",
    "watch_line",
]


# -- tables ----------------------------------------------------------------------------------------


def fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.1%}" if value <= 10 else f"{value:,.0f}"
    return str(value)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))] if rows else []

    def line(row: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if numeric and numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def in_view_words(status: Status) -> str:
    """The tokens in view and where the figure comes from: contextfold's count ("exact", "estimate")
    or, when it is the larger, the usage the agent or provider reported."""
    if _reported_wins(status):
        return f"{status.tokens_in_view:,} (reported by {status.reported_by or 'the provider'})"
    return f"{status.tokens_in_view:,} ({status.method})"


def _reported_wins(status: Status) -> bool:
    return status.tokens_reported is not None and status.tokens_reported > status.tokens_counted


def status_lines(status: Status) -> str:
    rows: list[tuple[str, Any]] = [
        ("session", status.session_id),
        ("model", status.model + ("" if status.model_known else " (unknown: default limits)")),
        ("messages", status.message_count),
        ("tokens in view", in_view_words(status)),
        ("tokens stored", status.tokens_stored),
        ("usable", status.usable if status.context_window else "unlimited"),
        ("used", status.ratio),
        ("state", status.state),
        ("next", status.recommended_action),
    ]
    if status.tokens_reported is not None:
        # Counted and reported kept apart: the one not shown as "in view" gets its own line.
        other = (
            ("tokens counted", f"{status.tokens_counted:,} ({status.method})")
            if _reported_wins(status)
            else ("tokens reported", f"{status.tokens_reported:,} (by {status.reported_by or 'the provider'})")
        )
        rows.insert(4, other)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {fmt(v)}" for k, v in rows)


def when(epoch: float) -> str:
    """A moment as a person reads it, to the minute, in local time."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch else "-"


def _clip(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters, saying how much more there was."""
    lines = text.strip().splitlines() or [""]
    first = " ".join(lines[0].split())
    more = f" (+{len(lines) - 1:,} lines)" if len(lines) > 1 else ""
    room = max(width - len(more), 10)
    if len(first) > room:
        first = first[: room - 1] + "…"
    return first + more


# -- sessions --------------------------------------------------------------------------------------


def sessions_table(sessions: Sequence[tuple[SessionInfo, Status]]) -> str:
    rows = [
        (
            info.id,
            _clip(info.title or "-", 40),
            info.model,
            status.message_count,
            status.tokens_in_view,
            status.ratio,
            status.state,
            when(info.updated_at),
        )
        for info, status in sessions
    ]
    return table(rows, ["session", "title", "model", "messages", "in view", "used", "state", "updated"])


def sessions_json(sessions: Sequence[tuple[SessionInfo, Status]]) -> list[dict[str, Any]]:
    return [
        {
            "id": info.id,
            "title": info.title,
            "model": info.model,
            "messages": status.message_count,
            "tokens_in_view": status.tokens_in_view,
            "usable": status.usable,
            "ratio": status.ratio,
            "state": status.state,
            "updated_at": info.updated_at,
        }
        for info, status in sessions
    ]


# -- a session's view ------------------------------------------------------------------------------

_OPTIONS = RenderOptions()
INDENT = " " * 24
"""Where a message's further parts start: under its first, after its number, role and tokens."""


def view_lines(session: Session, messages: Sequence[Message], status: Status, width: int = 100) -> list[str]:
    """The view as the model sees it, one line per part: role, tokens in view, what each part holds
    (cleared, cut and spilled outputs marked), the summary whole; then the session's numbers."""
    width = max(width, 60)
    title = f" — {session.title}" if session.title else ""
    lines = [_clip(f"session {session.id}{title}", width)]
    for prompt in session.system:
        lines.append(f"{'':>4}  {prompt.role:<9} {prompt.tokens:>6,}  {_clip(prompt.text, width - len(INDENT))}")
    hidden = status.message_count - len(messages)
    lines.append(
        f"-- {len(messages):,} messages in view" + (f", {hidden:,} stored out of view --" if hidden else " --")
    )
    for number, message in enumerate(messages, 1):
        head = f"{number:>4}  {message.role:<9} {message.in_view_tokens:>6,}  "
        parts = _message_lines(message, width - len(INDENT))
        lines.append((head + (parts[0] if parts else "(empty)")).rstrip())
        lines.extend((INDENT + p).rstrip() for p in parts[1:])
    lines += ["", status_lines(status)]
    return lines


def _message_lines(message: Message, width: int) -> list[str]:
    marker = message.compaction
    if marker is not None:
        how = ", ".join(k for k, on in (("auto", marker.auto), ("overflow", marker.overflow)) if on)
        return [f"[compaction marker{' (' + how + ')' if how else ''}] {COMPACTION_PROMPT}"]
    if message.summary:
        body = message.text.strip().splitlines()
        return ["[summary of the earlier history]", *(_clip(line, width) if line.strip() else "" for line in body)]
    out: list[str] = []
    for part in message.parts:
        out.extend(_part_lines(part, width))
    return out


def _part_lines(part: Any, width: int) -> list[str]:
    if isinstance(part, TextPart):
        if not part.text.strip() and not part.spill_id:
            return []
        notes = ("[contextfold] " if part.synthetic else "") + (
            f"[spilled {part.spill_id}: preview] " if part.spill_id else ""
        )
        return [notes + _clip(part.text, width - len(notes))]
    if isinstance(part, ReasoningPart):
        return ["[redacted thinking]" if part.redacted_data else _clip(f"[thinking] {part.text}", width)]
    if isinstance(part, FilePart):
        return [_file_line(part)]
    if isinstance(part, ToolPart):
        return _tool_lines(part, width)
    if isinstance(part, CompactionPart):  # pragma: no cover - a marker is its message's only part
        return ["[compaction marker]"]
    return [f"[{getattr(part, 'type', 'part')}]"]  # pragma: no cover


def _file_line(part: FilePart) -> str:
    notes = "".join(
        note
        for note, on in ((" omitted from view", part.omitted), (f" spilled {part.spill_id}", bool(part.spill_id)))
        if on
    )
    return f"[{part.mime}{': ' + part.filename if part.filename else ''}{notes}]"


def _tool_lines(part: ToolPart, width: int) -> list[str]:
    args = "[input cleared]" if part.input_cleared else json.dumps(part.input, ensure_ascii=False)
    call = _clip(f"→ {part.name} {args}", width)
    marks = []
    if part.compacted_at is not None:
        marks.append("cleared by prune")
    if part.view_text is not None:
        marks.append("region summary")
    if part.view_cap is not None and part.compacted_at is None and part.view_text is None:
        marks.append(f"cut to {part.view_cap:,} chars in view")
    if part.spill_id:
        marks.append(f"spilled {part.spill_id}")
    if part.state == "error":
        marks.append("error")
    elif not part.is_finished:
        marks.append(part.state)
    label = f"[{', '.join(marks)}] " if marks else ""
    shown = shown_result(part, _OPTIONS) if part.compacted_at is None else None  # the label says it all
    result = _clip(label + (shown.text if shown else ""), width - 2).rstrip()
    return [call, f"← {result}"]


# -- export ----------------------------------------------------------------------------------------


def full_export(session: Session, history: Sequence[Message], in_view: set[str], format: WireFormat) -> dict[str, Any]:
    """The whole stored history, hidden messages included: each with its id, where it stands, and
    its content rendered in `format` as stored (outputs whole, as before any prune or cut)."""
    body = render(session.system, [], format, _OPTIONS)
    return {
        "session": {
            "id": session.id,
            "title": session.title,
            "model": session.model,
            "created_at": session.created_at,
            "updated_at": session.updated_at,
            "tokens_stored": session.tokens_stored,
        },
        "format": format,
        "system": body.get("system") if format == "anthropic" else body["messages"],
        "messages": [_exported(m, m.id in in_view, format) for m in history],
    }


def _exported(message: Message, shown: bool, format: WireFormat) -> dict[str, Any]:
    marks = [line for part in message.parts for line in _marks(part)]
    return {
        "id": message.id,
        "seq": message.seq,
        "role": message.role,
        "in_view": shown,
        "summary": message.summary,
        "compaction_marker": message.compaction is not None,
        "tokens": message.tokens,
        "tokens_in_view": message.in_view_tokens if shown else 0,
        "created_at": message.created_at,
        "view_marks": marks,
        "spilled": [p.spill_id for p in message.parts if isinstance(p, (TextPart, FilePart, ToolPart)) and p.spill_id],
        "content": render([], [_as_stored(message)], format, _OPTIONS)["messages"],
    }


def _marks(part: Any) -> list[str]:
    if isinstance(part, ToolPart):
        return [
            f"{part.call_id}: {mark}"
            for mark, on in (
                ("output cleared by prune", part.compacted_at is not None),
                ("input cleared by prune", part.input_cleared),
                (f"output cut to {part.view_cap} chars in view", part.view_cap is not None),
                ("output shown as a region summary", part.view_text is not None),
            )
            if on
        ]
    if isinstance(part, FilePart) and part.omitted:
        return [f"{part.filename or part.mime}: omitted from view"]
    return []


def _as_stored(message: Message) -> Message:
    """`message` without the marks that change how its parts show in the view."""
    parts: list[Any] = []
    for part in message.parts:
        if isinstance(part, ToolPart):
            part = part.model_copy(
                update={"compacted_at": None, "input_cleared": False, "view_cap": None, "view_text": None}
            )
        elif isinstance(part, FilePart) and part.omitted:
            part = part.model_copy(update={"omitted": False})
        parts.append(part)
    return message.model_copy(update={"parts": parts})


# -- results ---------------------------------------------------------------------------------------


def prune_lines(result: PruneResult) -> list[str]:
    if not result.applied and not (result.dry_run and result.parts):
        return [f"not pruned: {result.reason}", _brief_line(result.status)]
    verb = "would clear" if result.dry_run else "cleared"
    lines = [
        f"{verb} {result.parts:,} tool outputs from the view, freeing {result.tokens_freed:,} tokens "
        "(the outputs stay stored)",
    ]
    if result.cleared:
        lines.append("would clear: " + ", ".join(result.cleared) + "; every other output stays")
    if result.token:
        lines.append(f"apply exactly this: contextfold prune SESSION --apply {result.token}")
    return [*lines, _brief_line(result.status)]


def breakdown_lines(breakdown: Breakdown) -> str:
    """Tokens in view by category as a table whose rows add up to the total, then the budget."""
    total = breakdown.tokens_in_view
    rows: list[tuple[str, str, str]] = []
    for category in breakdown.categories:
        if not category.known:
            rows.append((category.label, "-", "not recorded"))
            continue
        rows.append((category.label, f"{category.tokens:,}", f"{category.tokens / total:.1%}" if total else "-"))
    rows.append(("Total in view", f"{total:,}", "100.0%" if total else "-"))
    widths = [max(len(r[i]) for r in [("category", "tokens", "share"), *rows]) for i in range(3)]

    def line(row: tuple[str, str, str]) -> str:
        return f"{row[0].ljust(widths[0])}  {row[1].rjust(widths[1])}  {row[2].rjust(widths[2])}"

    text = "\n".join([line(("category", "tokens", "share")), "  ".join("-" * w for w in widths), *map(line, rows)])
    usable = f"{breakdown.usable:,}" if breakdown.context_window else "unlimited"
    budget = [
        ("session", breakdown.session_id),
        ("model", f"{breakdown.model} ({breakdown.method})"),
        ("messages in view", f"{breakdown.messages_in_view:,}"),
        ("context window", f"{breakdown.context_window:,}" if breakdown.context_window else "unlimited"),
        ("reserved", f"{breakdown.reserved:,}"),
        ("usable", usable),
        ("soft / hard at", f"{breakdown.soft_threshold:,} / {breakdown.hard_threshold:,}"),
        ("used", f"{total / breakdown.usable:.1%}" if breakdown.usable else "-"),
        ("state", breakdown.state),
    ]
    width = max(len(k) for k, _ in budget)
    return text + "\n\n" + "\n".join(f"{k.ljust(width)}  {v}" for k, v in budget)


def compact_lines(result: CompactResult) -> list[str]:
    if result.dry_run:
        head = f"dry run: {result.strategy} would take the view from {result.tokens_before:,} to {result.tokens_after:,} tokens"
    elif result.compacted:
        head = f"compacted ({result.strategy}): {result.tokens_before:,} → {result.tokens_after:,} tokens in view"
    else:
        head = f"not compacted ({result.strategy}): {result.tokens_before:,} → {result.tokens_after:,} tokens in view"
    lines = [head]
    if result.summarizer:
        lines.append(
            f"summarizer: {result.summarizer} ({result.summary_tokens:,} tokens, {result.head_messages:,} messages summarized)"
        )
    lines += [f"passed over: {f}" for f in result.fallbacks]
    if result.outputs_cut:
        lines.append(f"{result.outputs_cut:,} oversized tool outputs cut in view (kept whole in the store)")
    if result.reason:
        lines.append(f"note: {result.reason}")
    if result.summary:
        lines += ["", result.summary.rstrip(), ""]
    if result.view:
        lines.append("view after: " + ", ".join(result.view))
    if result.token:
        lines.append(f"apply exactly this summary: contextfold compact SESSION --apply {result.token}")
    lines.append(_brief_line(result.status))
    return lines


def pin_lines(result: PinList) -> list[str]:
    if not result.pins:
        return [f"nothing pinned in {result.session_id}"]
    lines = [
        f"{len(result.pins)} pin(s) in {result.session_id}: {result.pinned_tokens:,} of {result.usable:,} usable tokens"
    ]
    for pin in result.pins:
        what = pin.ref if pin.ref is not None else f"note: {pin.note}"
        lines.append(f"  {pin.id}  {what}  ({pin.tokens:,} tokens)")
    return lines


def undo_lines(result: UndoResult) -> list[str]:
    return [
        f"undid the last {result.undone}: {result.tokens_before:,} → {result.tokens_after:,} tokens in view "
        "(nothing stored was deleted)",
        _brief_line(result.status),
    ]


def _brief_line(status: Any) -> str:
    return (
        f"now {status.tokens_in_view:,} of {status.usable:,} usable tokens ({status.ratio:.1%}), "
        f"{status.state}; next: {status.recommended_action}"
    )


def watch_changed(before: Status, now: Status) -> bool:
    """Whether `watch` has something new to show."""
    keys = ("tokens_in_view", "message_count", "usable", "state", "tokens_stored")
    return any(getattr(before, k) != getattr(now, k) for k in keys)


def watch_table(status: Status, previous: Status | None, changed_at: float) -> Any:
    """`watch` on a terminal: the session's numbers and its last change, as a rich table."""
    from rich.table import Table

    grid = Table(title=f"session {status.session_id} · {status.model}", show_header=False, title_justify="left")
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("tokens in view", in_view_words(status))
    grid.add_row("usable", f"{status.usable:,}")
    grid.add_row("used", f"{status.ratio:.1%}")
    grid.add_row("state", status.state)
    grid.add_row("messages", f"{status.message_count:,}")
    ago = f"{time.time() - changed_at:,.0f} s ago, at {time.strftime('%H:%M:%S', time.localtime(changed_at))}"
    if previous is None:
        grid.add_row("last change", f"none since watching began ({ago})")
    else:
        tokens = status.tokens_in_view - previous.tokens_in_view
        messages = status.message_count - previous.message_count
        grid.add_row("last change", f"{tokens:+,} tokens, {messages:+,} messages ({ago})")
    grid.add_row("next", status.recommended_action)
    grid.caption = "Ctrl-C to stop"
    return grid


def watch_line(status: Status, previous: Status | None, at: float) -> str:
    """One line of `watch` for a log or a pipe: the numbers and what changed since the last line."""
    change = ""
    if previous is not None:
        tokens = status.tokens_in_view - previous.tokens_in_view
        messages = status.message_count - previous.message_count
        change = f"  {tokens:+,} tokens, {messages:+,} messages"
        if status.state != previous.state:
            change += f", was {previous.state}"
    return (
        f"{time.strftime('%H:%M:%S', time.localtime(at))}  {status.tokens_in_view:,} / {status.usable:,} tokens "
        f"({status.ratio:.1%})  {status.state}  {status.message_count:,} messages{change}"
    )

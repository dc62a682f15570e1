"""The inspector's pages as data and HTML: one function per page, shared by the live app and the
export. A page is rendered with a `Links` that says where a link goes: a URL of the app, or an
anchor inside the exported file."""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from markupsafe import Markup

from contextfold.domain import CompactionPart, CompactionRecord, FilePart, Message, ReasoningPart, TextPart, ToolPart
from contextfold.formats.shown import COMPACTION_PROMPT, shown_input_text, shown_result
from contextfold.names import AGENT_NAMES
from contextfold.policy.breakdown import split_message
from contextfold.results import Breakdown
from contextfold.service.facade import Tenant
from contextfold.service.inspecting import Life
from contextfold.tokens.counting import TokenCounter

PART_CHARS = 4_000
"""Characters of one part the view page shows before a "more" note (the history shows more)."""
HISTORY_CHARS = 20_000

COLORS = {
    "system": "#7c6cf0",
    "tool_definitions": "#9e9e9e",
    "user": "#2f9e6e",
    "assistant": "#3b82f6",
    "reasoning": "#60a5fa",
    "tool_calls": "#f59e0b",
    "tool_results": "#ef6c3a",
    "spilled_previews": "#d946ef",
    "cleared_outputs": "#94a3b8",
    "attachments": "#14b8a6",
    "summary": "#eab308",
    "digests": "#a3a635",
    "reported_extra": "#64748b",
    "unattributed": "#475569",
}


class Links:
    """Where the pages link to, in the app (`/s/<id>/…`)."""

    static = False

    def sessions(self) -> str:
        return "/"

    def session(self, sid: str, page: int | None = None) -> str:
        return f"/s/{quote(sid, safe='')}" + (f"?page={page}" if page else "")

    def life(self, sid: str) -> str:
        return f"/s/{quote(sid, safe='')}/life"

    def event(self, sid: str, number: int) -> str:
        return f"/s/{quote(sid, safe='')}/life#event-{number}"

    def summary(self, sid: str) -> str:
        return f"/s/{quote(sid, safe='')}/summary"

    def message(self, sid: str, seq: int) -> str:
        return f"/s/{quote(sid, safe='')}/history?at=m{seq}#m{seq}"

    def outputs(self, sid: str) -> str:
        return f"/s/{quote(sid, safe='')}/outputs"

    def output(self, output_id: str, **query: Any) -> str:
        args = {k: v for k, v in query.items() if v not in (None, "", False)}
        return f"/o/{quote(output_id, safe='')}" + (f"?{urlencode(args)}" if args else "")

    def search(self, sid: str, **query: Any) -> str:
        args = {k: v for k, v in query.items() if v not in (None, "", False)}
        return f"/s/{quote(sid, safe='')}/search" + (f"?{urlencode(args)}" if args else "")

    def history(self, sid: str, at: int) -> str:
        return f"/s/{quote(sid, safe='')}/history?at=m{at}"


class FileLinks(Links):
    """Links inside one exported file: every page is a section, every message an anchor."""

    static = True

    def session(self, sid: str, page: int | None = None) -> str:
        return "#now"

    def life(self, sid: str) -> str:
        return "#life"

    def event(self, sid: str, number: int) -> str:
        return f"#event-{number}"

    def summary(self, sid: str) -> str:
        return "#summary"

    def message(self, sid: str, seq: int) -> str:
        return f"#m{seq}"

    def outputs(self, sid: str) -> str:
        return "#outputs"

    def output(self, output_id: str, **query: Any) -> str:
        return f"#output-{output_id}"


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("contextfold.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        css=Markup(_asset("app.css")),
        js=Markup(_asset("app.js")),
        colors=COLORS,
        when=when,
        num=lambda n: f"{n:,}" if isinstance(n, int) else str(n),
        pct=lambda a, b: f"{a / b:.1%}" if b else "-",
        writer=writer,
    )
    env.filters["cited"] = cited_html
    env.filters["summary_html"] = summary_html
    return env


def writer(summarizer: str) -> str:
    """Who wrote a summary, for a person: an agent's own compaction says so."""
    agent = AGENT_NAMES.get(summarizer)
    return f"{agent} (its own compaction)" if agent else summarizer


def _asset(name: str) -> str:
    return resources.files("contextfold.web").joinpath("static", name).read_text("utf-8")


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch else "-"


# -- citations -------------------------------------------------------------------------------------

_CITATION = re.compile(r"\[((?:m\d+(?:[–-]m\d+)?|…)(?:, (?:m\d+(?:[–-]m\d+)?|…))*)\]")
_REF = re.compile(r"m(\d+)")


def cited_html(text: str, links: Links, sid: str) -> Markup:
    """`text` escaped, each citation's message numbers (`[m12]`, `[m3–m5, m9]`) links to the message."""
    out: list[str] = []
    last = 0
    for match in _CITATION.finditer(text):
        out.append(html.escape(text[last : match.start()]))
        inner = _REF.sub(
            lambda m: f'<a class="cite" href="{html.escape(links.message(sid, int(m.group(1))))}">m{m.group(1)}</a>',
            html.escape(match.group(1)),
        )
        out.append(f"[{inner}]")
        last = match.end()
    out.append(html.escape(text[last:]))
    return Markup("".join(out))


def cited_seqs(text: str) -> list[int]:
    """Every message number the citations in `text` name (a run `m3–m5` gives all three)."""
    found: list[int] = []
    for match in _CITATION.finditer(text):
        for run in re.finditer(r"m(\d+)(?:[–-]m(\d+))?", match.group(1)):
            first = int(run.group(1))
            last = int(run.group(2)) if run.group(2) else first
            found += range(first, min(last, first + 50) + 1)
    return found


def summary_html(text: str, links: Links, sid: str) -> Markup:
    """A summary's markdown (headings, bullets, plain lines) as HTML, citations linked."""
    out: list[str] = []
    in_list = False
    for line in text.splitlines():
        stripped = line.strip()
        bullet = stripped.startswith(("- ", "* "))
        if in_list and not bullet:
            out.append("</ul>")
            in_list = False
        if stripped.startswith("#"):
            out.append(f"<h3>{cited_html(stripped.lstrip('#').strip(), links, sid)}</h3>")
        elif bullet:
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{cited_html(stripped[2:], links, sid)}</li>")
        elif stripped:
            out.append(f"<p>{cited_html(stripped, links, sid)}</p>")
    if in_list:
        out.append("</ul>")
    return Markup("\n".join(out))


# -- messages --------------------------------------------------------------------------------------


@dataclass
class ShownPart:
    kind: str
    """text, spilled, reasoning, call, file, marker, summary."""
    title: str
    body: str
    marks: list[str]
    more: int = 0
    """Characters left out of `body`."""
    output_id: str | None = None


def _capped(text: str, chars: int) -> tuple[str, int]:
    return (text, 0) if len(text) <= chars else (text[:chars], len(text) - chars)


def shown_parts(message: Message, *, stored: bool = False) -> list[ShownPart]:
    """A message's parts as a page shows them: as the model sees them (`stored=False`), or as
    they are stored, whole outputs and cleared ones included (the history)."""
    chars = HISTORY_CHARS if stored else PART_CHARS
    parts: list[ShownPart] = []
    for part in message.parts:
        if isinstance(part, CompactionPart):
            how = ", ".join(k for k, on in (("auto", part.auto), ("overflow", part.overflow)) if on)
            parts.append(ShownPart("marker", "compaction marker" + (f" ({how})" if how else ""), COMPACTION_PROMPT, []))
        elif isinstance(part, TextPart):
            if not part.text.strip() and not part.spill_id:
                continue
            body, more = _capped(part.text, chars)
            marks = (["contextfold note"] if part.synthetic else []) + (["spilled: preview"] if part.spill_id else [])
            kind = "summary" if message.summary else "spilled" if part.spill_id else "text"
            parts.append(ShownPart(kind, "", body, marks, more, part.spill_id))
        elif isinstance(part, ReasoningPart):
            body, more = _capped("[redacted thinking]" if part.redacted_data else part.text, chars)
            parts.append(ShownPart("reasoning", "thinking", body, [], more))
        elif isinstance(part, FilePart):
            marks = ["omitted from view"] if part.omitted else []
            parts.append(ShownPart("file", part.mime, part.filename or "", marks))
        elif isinstance(part, ToolPart):
            parts.append(_tool(part, stored, chars))
    return parts


def _tool(part: ToolPart, stored: bool, chars: int) -> ShownPart:
    marks = []
    if part.compacted_at is not None:
        marks.append("cleared by prune")
    if part.input_cleared:
        marks.append("input cleared")
    if part.view_text is not None:
        marks.append("region digest")
    if part.view_cap is not None and part.compacted_at is None and part.view_text is None:
        marks.append(f"cut to {part.view_cap:,} chars")
    if part.spill_id:
        marks.append("spilled")
    if part.state == "error":
        marks.append("error")
    if stored:
        args = json.dumps(part.input, ensure_ascii=False) if not isinstance(part.input, str) else part.input
        result = part.result_text if part.is_finished else f"[{part.state}]"
    else:
        args = shown_input_text(part)
        shown = shown_result(part)
        result = shown.text if shown is not None else ""
    arg_text, _ = _capped(args, 400)
    body, more = _capped(result, chars)
    return ShownPart("call", f"{part.name} {arg_text}", body, marks, more, part.spill_id)


def message_marks(message: Message) -> list[str]:
    marks = []
    if message.summary:
        marks.append("summary")
    if message.compaction is not None:
        marks.append("marker")
    if any(isinstance(p, TextPart) and p.synthetic for p in message.parts):
        marks.append("contextfold")
    return marks


def preview_line(message: Message) -> str:
    """The first line of what the message says, for its folded row."""
    for shown in shown_parts(message):
        line = (shown.title + " " + shown.body).strip().splitlines()
        if line:
            first = " ".join(line[0].split())
            return first[:140] + ("…" if len(first) > 140 else "")
    return ""


@dataclass
class ViewRow:
    number: int
    message: Message
    tokens: int
    split: dict[str, int]
    marks: list[str]
    preview: str
    parts: list[ShownPart]


def view_rows(messages: list[Message], start: int, counter: TokenCounter) -> list[ViewRow]:
    return [
        ViewRow(
            start + i + 1,
            m,
            m.in_view_tokens,
            split_message(m, counter),
            message_marks(m),
            preview_line(m),
            shown_parts(m),
        )
        for i, m in enumerate(messages)
    ]


# -- the pages' data ---------------------------------------------------------------------------------


def bar(breakdown: Breakdown) -> dict[str, Any]:
    """The composition bar's geometry: segments in percent of the scale (usable, or the view when
    it is larger or the window unlimited), and where the thresholds sit."""
    scale = max(breakdown.usable, breakdown.tokens_in_view, 1)
    x = 0.0
    segments = []
    for c in breakdown.categories:
        if c.tokens <= 0:
            continue
        width = 100 * c.tokens / scale
        segments.append({"name": c.name, "label": c.label, "tokens": c.tokens, "x": x, "w": width})
        x += width
    marks = []
    if breakdown.usable:
        for name, value in (("soft", breakdown.soft_threshold), ("hard", breakdown.hard_threshold)):
            marks.append({"name": name, "x": 100 * value / scale, "tokens": value})
        marks.append({"name": "usable", "x": 100 * breakdown.usable / scale, "tokens": breakdown.usable})
    return {"segments": segments, "marks": marks, "scale": scale}


PLOT_POINTS = 1_000
"""Points the life plot draws at most: a longer history is drawn by the highest point of each stretch."""


def plot(life: Life, width: int = 960, height: int = 300) -> dict[str, Any]:
    """The life plot's geometry in SVG units: a line of tokens in view along the stored messages,
    compactions and prunes as marks on it, turns as ticks."""
    pad_l, pad_r, pad_t, pad_b = 64, 16, 16, 36
    first = life.points[0].seq if life.points else 0
    last = max(life.points[-1].seq if life.points else 1, first + 1)
    top = max([p.tokens for p in life.points] + [e.before for e in life.events] + [1])
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def xy(seq: float, tokens: int) -> tuple[float, float]:
        return pad_l + w * (seq - first) / (last - first), pad_t + h * (1 - tokens / top)

    drawn = life.points
    if len(drawn) > PLOT_POINTS:
        step = -(-len(drawn) // PLOT_POINTS)
        drawn = [max(drawn[i : i + step], key=lambda p: p.tokens) for i in range(0, len(drawn), step)] + [drawn[-1]]
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(p.seq, p.tokens) for p in drawn))
    events = []
    for number, event in enumerate(life.events, 1):
        x, y0 = xy(event.seq, event.before)
        _, y1 = xy(event.seq, event.after)
        events.append({"number": number, "event": event, "x": x, "y0": y0, "y1": y1})
    ticks = [{"y": xy(first, int(top * f))[1], "label": f"{int(top * f):,}"} for f in (0, 0.25, 0.5, 0.75, 1)]
    span = last - first
    xticks = [
        {"x": xy(s, 0)[0], "label": f"m{s}"}
        for s in sorted({first, first + span // 4, first + span // 2, first + 3 * span // 4, last})
    ]
    turns: list[float] = []
    previous = 0
    for p in life.points[:-1]:
        if p.turn != previous and len(turns) < PLOT_POINTS:
            turns.append(xy(p.seq, 0)[0])
        previous = p.turn
    return {
        "width": width,
        "height": height,
        "points": points,
        "events": events,
        "ticks": ticks,
        "xticks": xticks,
        "turns": turns,
        "base": pad_t + h,
        "left": pad_l,
        "right": width - pad_r,
    }


DROPPED_CACHE = 64
"""Handovers an inspector process keeps worked out (per tenant and summary): the history a
summary replaced does not change, and reading it again costs seconds on a long session."""


async def with_dropped(
    tenant: Tenant,
    sid: str,
    summaries: list[tuple[Message, CompactionRecord | None]],
    cache: dict[tuple[str, str, str], str] | None = None,
) -> list[tuple[Message, CompactionRecord | None, str]]:
    """Each summary with, for an agent's own compaction (Claude Code's, Codex's), what code finds
    its summary lacked in the history it replaced: the text the hooks' handover would add
    (`hooks.handover`), within `hook_context_tokens`. '' for contextfold's own summaries."""
    from contextfold.hooks.handover import HEADER, handover

    out: list[tuple[Message, CompactionRecord | None, str]] = []
    session = await tenant.session_record(sid)
    counter = tenant.session_counter(session)
    for message, record in summaries:
        dropped = ""
        key = (tenant.owner, sid, message.id)
        if cache is not None and key in cache:
            dropped = cache[key]
        elif record is not None and record.summarizer in AGENT_NAMES:
            marker = message.seq - 1
            before = [m for m, _ in await tenant.stored_page(sid, after_seq=0, limit=max(marker - 1, 1))]
            if before:
                found = handover(
                    before,
                    session_id=sid,
                    counter=counter,
                    budget=tenant.settings.hook_context_tokens,
                    summary=message.text,
                )
                dropped = found.text.removeprefix(HEADER).strip()
            if cache is not None:
                cache[key] = dropped
                while len(cache) > DROPPED_CACHE:
                    del cache[next(iter(cache))]
        out.append((message, record, dropped))
    return out


async def session_now(tenant: Tenant, sid: str, page: int, per_page: int) -> dict[str, Any]:
    """Page 2: the breakdown, the budget, and the view message by message (one page of it)."""
    breakdown = await tenant.breakdown(sid)
    session, visible = await tenant.session_view(sid)
    counter = tenant.session_counter(session)
    pages = max((len(visible) + per_page - 1) // per_page, 1)
    page = min(max(page, 1), pages)
    start = (page - 1) * per_page
    return {
        "session": session,
        "breakdown": breakdown,
        "bar": bar(breakdown),
        "rows": view_rows(visible[start : start + per_page], start, counter),
        "page": page,
        "pages": pages,
        "total": len(visible),
    }


__all__ = ["FileLinks", "Links", "environment", "render", "session_now"]

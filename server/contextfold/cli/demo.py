"""`contextfold demo`: a real transcript driven through the MCP server, turn by turn.

The demo is an MCP client of its own server (the SDK's in-process `Client`, the same protocol a
real client speaks): it replays a real agent transcript shipped with the package, one turn per
`append`, and shows what happens — tokens per turn against the budget, the huge tool output
spilled and read back, the overflow state, a prune, the compaction that recovers with the tail it
keeps, and its whole summary. Offline; with ANTHROPIC_API_KEY set the Anthropic summarizer is used
instead of the offline one.

Every model gets the same budget, `DEMO_USABLE` tokens plus the model's own reply reserve (a model
whose whole budget is smaller keeps its window), so each tells the same story. The numbers are the
same on every run (the ids too: see `_replayable_ids`). The layout fits `WIDTH` columns.
"""

from __future__ import annotations

import gzip
import random
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import TextContent, TextResourceContents
from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table
from rich.text import Text

from contextfold import domain
from contextfold.config import Settings
from contextfold.formats import WireFormat
from contextfold.importers import load_transcript
from contextfold.mcpserver.tools import build_server
from contextfold.tokens import catalog

BUNDLED_TRANSCRIPT = "mini-swe-agent__psf__requests-1142.jsonl.gz"
SESSION = "demo"
DEMO_USABLE = 32_000
"""The usable budget the demo gives a model: small enough that this transcript goes through
every state up to overflow (it ends near 50,000 tokens)."""
WIDTH = 80
"""The demo lays itself out in at most this many columns, in any terminal."""
KEEP_TOOL_USES = 10
"""The demo's prune: every tool result but the newest this-many is cleared (context editing). The
default rule leaves the last two user turns alone, and in this transcript they hold 87 of its 143
messages, the huge output among them (an agent rarely hears from its user): the older outputs come
to 4,724 tokens, within even the protection scaled to this budget (8,000)."""


def demo_settings(model: str, settings: Settings) -> dict[str, int]:
    """Session settings that give `model` `DEMO_USABLE` usable tokens, its own reply reserve kept.

    Empty when the model's own budget is no bigger: then the demo runs on the model's window.
    """
    budget = catalog.budget(catalog.lookup(model), reserved=settings.reserved, output=settings.max_output)
    if 0 < budget.usable <= DEMO_USABLE:
        return {}
    # No separate input limit: usable is then the window less the reply's share.
    return {"context_window": DEMO_USABLE + max(budget.max_output, budget.reserved), "input_limit": 0}


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The transcript as the batches a harness would append: each assistant reply with its results."""
    batches: list[list[dict[str, Any]]] = []
    for message in messages:
        if message["role"] == "tool" and batches:
            batches[-1].append(message)
        else:
            batches.append([message])
    return batches


class _SeededUlid:
    """ULID-shaped ids from a fixed clock and a seeded generator: the same ids on every run."""

    def __init__(self) -> None:
        self._random = random.Random(1142)
        self._millis = 1_735_689_600_000  # 2025-01-01, then one millisecond an id: still increasing

    def __call__(self) -> str:
        self._millis += 1
        value = (self._millis << 80) | self._random.getrandbits(80)
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@contextmanager
def _replayable_ids() -> Iterator[None]:
    """Seeded ids while the demo's in-process server runs. A spilled output's id is part of what
    the model sees, so with random ids the token counts would change by a few from run to run."""
    saved = domain.new_ulid
    domain.new_ulid = _SeededUlid()  # type: ignore[assignment]
    try:
        yield
    finally:
        domain.new_ulid = saved


async def _call(client: Client, name: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(name, args, **kwargs)
    if result.is_error:
        first = result.content[0]
        assert isinstance(first, TextContent)  # our server words every error as text
        raise RuntimeError(f"{name}: {first.text}")
    return result.structured_content or {}


async def run_demo(settings: Settings, *, model: str, console: Console) -> None:
    console.width = min(console.width, WIDTH)
    packaged = resources.files("contextfold._data").joinpath(BUNDLED_TRANSCRIPT)
    with tempfile.TemporaryDirectory(prefix="contextfold-demo-") as tmp, _replayable_ids():
        path = Path(tmp) / BUNDLED_TRANSCRIPT.removesuffix(".gz")
        path.write_bytes(gzip.decompress(packaged.read_bytes()))
        transcript = load_transcript(path)
        # A throwaway data home: the demo never writes to the user's own.
        home = Path(tmp) / "home"
        server = build_server(settings.model_copy(update={"home": home, "database": None, "spill_dir": None}))
        async with Client(server) as client:
            system = "\n\n".join(p["text"] for p in transcript.system) or None
            session_settings = demo_settings(model, settings)
            await _call(
                client,
                "session_open",
                {"session_id": SESSION, "model": model, "system": system, "settings": session_settings},
            )
            status = await _call(client, "status", {"session_id": SESSION})
            console.print(_header(status, model=catalog.lookup(model), overridden=bool(session_settings)))
            await _replay(client, _turns(transcript.messages), console)
            await _show_spill(client, console)
            await _recover(client, console)
            latest = latest_request(transcript.messages, transcript.format)
            await _show_view(client, console, verbatim=transcript.messages, latest_request=latest)
            await _show_summary(client, console)


def latest_request(messages: list[dict[str, Any]], format: WireFormat) -> str:
    """The text of the newest message in which the user asked for something, read as a summary
    reads it (`prose.user_words`, `userwords.is_request`): not the harness's format nag that
    mini-swe-agent sends in the user's turn, nor a "thanks" or a "continue"."""
    from contextfold.compaction.prose import user_words
    from contextfold.compaction.userwords import is_request
    from contextfold.formats import parse

    latest = ""
    previous: domain.Message | None = None
    for message in parse(messages, format).messages:
        words = user_words(message, previous=previous)
        if words is not None and is_request(words):
            latest = message.text
        previous = message
    return latest


def _header(status: dict[str, Any], *, model: catalog.ModelInfo, overridden: bool) -> Panel:
    name, window, usable = status["model"], status["context_window"], status["usable"]
    own = f"its {model.context:,}" if model.known else f"the {model.context:,} assumed for a model it does not know"
    budget = (
        f"The demo gives {name} a {window:,}-token window instead of {own}: "
        if overridden
        else f"{name}'s own window is {window:,} tokens: "
    )
    text = Text(
        "A real agent transcript (mini-swe-agent with gemini-3-pro-preview fixing psf/requests#1142; MIT, "
        "see NOTICE.md) replayed turn by turn through contextfold's own MCP server, counted as "
        f"{name}. {budget}{window - usable:,} kept for the reply, {usable:,} usable, so this session "
        "runs into overflow."
    )
    return Panel(text, title="contextfold demo")


async def _replay(client: Client, batches: list[list[dict[str, Any]]], console: Console) -> None:
    """Append the batches one by one; a row every ten turns, where the state changes, and at a spill."""
    table = Table(title="Tokens in view as the session grows")
    for column in ("turn", "appended", "tokens in view", "share of usable", "state", "spilled"):
        table.add_column(column, justify="left" if column == "state" else "right")
    state = "ok"
    with Progress(TextColumn("replaying"), BarColumn(), TaskProgressColumn(), console=console, transient=True) as bar:
        task = bar.add_task("replay", total=len(batches))
        for number, batch in enumerate(batches, 1):
            result = await _call(client, "append", {"session_id": SESSION, "messages": batch})
            standing = result["status"]
            if number % 10 == 0 or result["spilled"] or number == len(batches) or standing["state"] != state:
                table.add_row(
                    str(number),
                    f"{sum(m['tokens'] for m in result['messages']):,}",
                    f"{standing['tokens_in_view']:,}",
                    f"{standing['ratio']:.0%}",
                    standing["state"],
                    "yes" if result["spilled"] else "",
                )
            state = standing["state"]
            bar.advance(task)
    console.print(table)


async def _show_spill(client: Client, console: Console) -> None:
    context = await _call(client, "get_context", {"session_id": SESSION})
    hints = [
        m["content"] for m in context["messages"] if m.get("role") == "tool" and "Full output saved as" in m["content"]
    ]
    if not hints:
        return
    spilled = re.search(r"out_[0-9A-Z]+", hints[0])
    assert spilled is not None  # the hint names the output it saved
    output_id = spilled.group(0)
    hint = hints[0].strip().splitlines()[-1]
    console.print(Panel(Text(hint), title="the end of the spilled output's preview, as the model sees it"))
    first = await _call(client, "read_output", {"id": output_id, "limit": 1})
    total = first["total_lines"]
    offset = max(1, total - 2)
    tail = await _call(client, "read_output", {"id": output_id, "offset": offset, "limit": 3})
    found = await _call(client, "read_output", {"id": output_id, "pattern": r"def prepare_auth", "context": 1})
    console.print(Panel(Text(tail["text"]), title=f"read_output(id, offset={offset}, limit=3) of {total:,} lines"))
    title = f"read_output(id, pattern='def prepare_auth', context=1): {found['matches']} matches"
    console.print(Panel(Text(found["text"]), title=title))


async def _recover(client: Client, console: Console) -> None:
    """The way back under budget: the cheap step first (prune), then compaction."""
    before = await _call(client, "status", {"session_id": SESSION})
    pruned = await _call(client, "prune", {"session_id": SESSION, "keep_tool_uses": KEEP_TOOL_USES})
    with Progress(TextColumn("{task.description}"), BarColumn(), console=console, transient=True) as bar:
        task = bar.add_task("compacting", total=1.0)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            bar.update(task, completed=progress, description=f"compacting: {message or ''}")

        compacted = await _call(client, "compact", {"session_id": SESSION}, progress_callback=on_progress)
    table = Table(title="Back under budget: prune, then compact")
    for column in ("step", "freed", "in view", "of usable", "state"):
        table.add_column(column, justify="left" if column in ("step", "state") else "right")
    for step, freed, standing in (
        ("end of the replay", "", before),
        (f"prune, keep {KEEP_TOOL_USES} tool uses", f"{pruned['tokens_freed']:,}", pruned["status"]),
        (
            f"compact ({compacted['summarizer']})",
            f"{compacted['tokens_before'] - compacted['tokens_after']:,}",
            compacted["status"],
        ),
    ):
        table.add_row(step, freed, f"{standing['tokens_in_view']:,}", f"{standing['ratio']:.0%}", standing["state"])
    console.print(table)
    if pruned["applied"]:
        cleared = (
            f"{pruned['parts']} tool results cleared, {pruned['tokens_freed']:,} tokens: every one but the "
            f"newest {KEEP_TOOL_USES}, as Anthropic's context editing does. The calls stay in view, the "
            "outputs stay stored."
        )
    else:
        cleared = f"nothing cleared: {pruned['reason']}"
    passed = "; ".join(compacted["fallbacks"])
    notes = [
        ("prune", cleared),
        ("then", f"status {pruned['status']['state']}, so {pruned['status']['recommended_action']}"),
        (
            "compact",
            f"{compacted['head_messages']} messages summarized in {compacted['summary_tokens']:,} tokens; "
            "the ones after them stay as they were (below).",
        ),
        ("summarizer", compacted["summarizer"] + (f"; passed over {passed}" if passed else "")),
    ]
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, text in notes:
        grid.add_row(label, Text(text))
    console.print(grid)


async def _show_view(client: Client, console: Console, *, verbatim: list[dict[str, Any]], latest_request: str) -> None:
    """The view after compaction, one row a message: the summary, then the tail kept as it was."""
    from contextfold.compaction.prose import harness_turn

    context = await _call(client, "get_context", {"session_id": SESSION})
    summary = (await _summary_text(client)).strip()
    messages = context["messages"]
    originals = {m["content"] for m in verbatim if isinstance(m.get("content"), str)}
    rows: list[tuple[str, str, str]] = []
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message.get("content"), str) else ""
        following = messages[index + 1].get("content") if index + 1 < len(messages) else None
        if message["role"] == "system":
            note = "system prompt"
        elif content.strip() == summary:
            note = "summary (below)"
        elif isinstance(following, str) and following.strip() == summary:
            note = "asks for it"
        elif content == latest_request:
            note = "latest request"
        elif message["role"] == "user" and harness_turn(
            domain.Message(role="user", parts=[domain.TextPart(text=content)])
        ):
            note = "harness text"  # mini-swe-agent's format nag: the agent's to fix, no request
        elif "[omitted " in content:
            note = "cut in view"
        elif content in originals:
            note = "verbatim"
        else:
            note = "added by compact"
        rows.append((message["role"], _first_line(content), note))
    tail = sum(1 for _, _, note in rows if note in ("latest request", "verbatim", "cut in view", "harness text"))
    table = Table(
        title=f"What the model sees now: {len(messages)} messages, {context['tokens']:,} tokens",
        caption=f"the tail: {tail} messages kept as they were",
    )
    # role and note whole; the text takes what is left (frame and padding: 10 columns).
    table.add_column("role", no_wrap=True, width=9)
    table.add_column("begins with", no_wrap=True, overflow="ellipsis", width=max(10, console.width - 35))
    table.add_column("", no_wrap=True, width=16)
    for role, begins, note in _collapsed(rows):
        table.add_row(role, begins, note)
    console.print()
    console.print(table)


def _collapsed(rows: list[tuple[str, str, str]], keep: int = 2) -> list[tuple[str, str, str]]:
    """Long runs of plain verbatim rows shortened to their first and last `keep`."""
    out: list[tuple[str, str, str]] = []
    run: list[tuple[str, str, str]] = []
    for row in [*rows, ("", "", "")]:
        if row[2] == "verbatim":
            run.append(row)
            continue
        if len(run) > 2 * keep + 1:
            run = [*run[:keep], ("", f"… {len(run) - 2 * keep} more", "verbatim"), *run[-keep:]]
        out += run
        run = []
        out.append(row)
    return out[:-1]


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


async def _summary_text(client: Client) -> str:
    summary = await client.read_resource(f"contextfold://sessions/{SESSION}/summary")
    contents = summary.contents[0]
    assert isinstance(contents, TextResourceContents)  # the summary resource is text
    return contents.text


async def _show_summary(client: Client, console: Console) -> None:
    """The whole summary: every section, every bullet (it is what the model continues from)."""
    parts: list[Any] = []
    bullets: Table | None = None
    for line in (await _summary_text(client)).strip().splitlines():
        if line.startswith("- "):
            if bullets is None:
                bullets = Table.grid()
                bullets.add_column(no_wrap=True)
                bullets.add_column()
                parts.append(bullets)
            bullets.add_row("- ", Text(line[2:]))
            continue
        bullets = None
        parts.append(Text(line, style="bold" if line.startswith("#") else ""))
    title = f"the anchored summary, whole (contextfold://sessions/{SESSION}/summary)"
    console.print(Panel(Group(*parts), title=title))

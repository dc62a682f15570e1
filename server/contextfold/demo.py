"""`contextfold demo`: a real transcript driven through the MCP server, turn by turn.

The demo is an MCP client of its own server (the SDK's in-process `Client`, the same protocol a
real client speaks): it replays a real agent transcript shipped with the package, one turn per
`append`, and shows what happens — tokens per turn against the window, the huge tool output
spilled and read back, prune, the overflow state, and compaction with its summary. Offline; with
ANTHROPIC_API_KEY set the Anthropic summarizer is used instead of the offline one.
"""

from __future__ import annotations

import gzip
import re
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from mcp import Client
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

from .config import Settings
from .formats.importers import load_transcript
from .server import build_server

BUNDLED_TRANSCRIPT = "mini-swe-agent__psf__requests-1142.jsonl.gz"
SESSION = "demo"
DEMO_WINDOW = 48_000
"""A window small enough that this transcript goes through every state up to overflow."""


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The transcript as the batches a harness would append: each assistant reply with its results."""
    batches: list[list[dict[str, Any]]] = []
    for message in messages:
        if message["role"] == "tool" and batches:
            batches[-1].append(message)
        else:
            batches.append([message])
    return batches


async def _call(client: Client, name: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(name, args, **kwargs)
    if result.is_error:
        raise RuntimeError(f"{name}: {result.content[0].text}")
    return result.structured_content or {}


async def run_demo(settings: Settings, *, model: str, console: Console) -> None:
    packaged = resources.files("contextfold._data").joinpath(BUNDLED_TRANSCRIPT)
    with tempfile.TemporaryDirectory(prefix="contextfold-demo-") as tmp:
        path = Path(tmp) / BUNDLED_TRANSCRIPT.removesuffix(".gz")
        path.write_bytes(gzip.decompress(packaged.read_bytes()))
        transcript = load_transcript(path)
        # A throwaway data home: the demo never writes to the user's own.
        home = Path(tmp) / "home"
        server = build_server(settings.model_copy(update={"home": home, "database": None, "spill_dir": None}))
        console.print(
            Panel.fit(
                "A real agent transcript: mini-swe-agent with gemini-3-pro-preview fixing psf/requests#1142\n"
                f"(MIT; see NOTICE.md), replayed turn by turn through contextfold's MCP server as {model}\n"
                f"with a {DEMO_WINDOW:,}-token window, so it runs into overflow.",
                title="contextfold demo",
            )
        )
        async with Client(server) as client:
            system = "\n\n".join(p["text"] for p in transcript.system) or None
            await _call(
                client,
                "session_open",
                {"session_id": SESSION, "model": model, "system": system, "settings": {"context_window": DEMO_WINDOW}},
            )
            await _replay(client, _turns(transcript.messages), console)
            await _show_spill(client, console)
            await _show_prune_and_compact(client, console)


async def _replay(client: Client, batches: list[list[dict[str, Any]]], console: Console) -> None:
    table = Table(title="Tokens in view as the session grows", show_lines=False)
    for column in ("turn", "appended", "tokens in view", "share of usable", "state", "spilled"):
        table.add_column(column, justify="right" if column != "state" else "left")
    spilled_total = 0
    with Progress(TextColumn("replaying"), BarColumn(), TaskProgressColumn(), console=console, transient=True) as bar:
        task = bar.add_task("replay", total=len(batches))
        for number, batch in enumerate(batches, 1):
            result = await _call(client, "append", {"session_id": SESSION, "messages": batch})
            spilled_total += len(result["spilled"])
            standing = result["status"]
            if number % 10 == 0 or result["spilled"] or number == len(batches):
                table.add_row(
                    str(number),
                    f"{sum(m['tokens'] for m in result['messages']):,}",
                    f"{standing['tokens_in_view']:,}",
                    f"{standing['ratio']:.0%}",
                    standing["state"],
                    "yes" if result["spilled"] else "",
                )
            bar.advance(task)
    console.print(table)


async def _show_spill(client: Client, console: Console) -> None:
    context = await _call(client, "get_context", {"session_id": SESSION})
    hints = [m["content"] for m in context["messages"] if m.get("role") == "tool" and "Full output saved as" in m["content"]]
    if not hints:
        return
    output_id = re.search(r"out_[0-9A-Z]+", hints[0]).group(0)
    hint = hints[0].strip().splitlines()[-1]
    console.print(Panel(hint, title="what the model sees at the end of the spilled output's preview"))
    first = await _call(client, "read_output", {"id": output_id, "limit": 1})
    total = first["total_lines"]
    tail = await _call(client, "read_output", {"id": output_id, "offset": max(1, total - 2), "limit": 3})
    found = await _call(client, "read_output", {"id": output_id, "pattern": r"def prepare_auth", "context": 1})
    console.print(f"read_output(offset={max(1, total - 2)}, limit=3) of {total:,} lines:")
    console.print(tail["text"], markup=False, highlight=False)
    console.print(f"read_output(pattern='def prepare_auth', context=1): {found['matches']} match(es)")
    console.print(found["text"], markup=False, highlight=False)


async def _show_prune_and_compact(client: Client, console: Console) -> None:
    pruned = await _call(client, "prune", {"session_id": SESSION, "keep_tool_uses": 10})
    console.print(f"\nprune (keep the last 10 tool uses): {pruned['reason']}")
    status = await _call(client, "status", {"session_id": SESSION})
    console.print(f"status: {status['tokens_in_view']:,} of {status['usable']:,} usable — {status['state']}: "
                  f"{status['recommended_action']}")

    with Progress(TextColumn("{task.description}"), BarColumn(), console=console, transient=True) as bar:
        task = bar.add_task("compacting", total=1.0)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            bar.update(task, completed=progress, description=f"compacting: {message or ''}")

        compacted = await _call(client, "compact", {"session_id": SESSION}, progress_callback=on_progress)
    table = Table(title=f"compact ({compacted['summarizer']})")
    for column in ("tokens before", "tokens after", "messages summarized", "state after"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{compacted['tokens_before']:,}", f"{compacted['tokens_after']:,}",
        str(compacted["head_messages"]), compacted["status"]["state"],
    )
    console.print(table)
    for reason in compacted["fallbacks"]:
        console.print(f"  passed over {reason}", markup=False)
    summary = await client.read_resource(f"contextfold://sessions/{SESSION}/summary")
    text = summary.contents[0].text
    lines = text.splitlines()
    shown = "\n".join(line[:110] for line in lines[:30]) + ("\n…" if len(lines) > 30 else "")
    console.print(Panel(shown, title="the anchored summary (contextfold://sessions/demo/summary)"), markup=False)

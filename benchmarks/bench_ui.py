"""`contextfold ui`: a session page's server time and first paint against the session's length,
and the size of the HTML export.

Sessions of 100, 1,000 and 10,000 messages (user requests and assistant replies, appended through
the service as a harness appends them) in one data home, served by a real `contextfold ui`
process. Measured per size: the server time of the session page (the first page of the view,
`ui_page_messages` messages, with the breakdown, the bar and the budget), as the wall time of a GET
from this process on loopback, and the first contentful paint of the same page in Debian's
chromium driven headless by Playwright (a fresh page each run; skipped, and said so, when chromium
or Playwright is missing). The last column is each figure's ratio to the 100-message session's:
paginated, the page should cost little more as the session grows. Then the export's size for the
demo session (the bundled transcript replayed, pruned and compacted, as `contextfold demo` does)
and for the 1,000-message session, whole and gzipped.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from _harness import Options, ms, options, ratio, report

from contextfold.cli.demo import BUNDLED_TRANSCRIPT, _turns, demo_settings
from contextfold.config import load_settings
from contextfold.importers import load_transcript
from contextfold.service.facade import ContextService
from contextfold.web.export import export_html

CHROMIUM = Path(os.environ.get("CONTEXTFOLD_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


async def build(home: Path, sizes: list[int]) -> None:
    async with await ContextService.open(load_settings({"home": home})) as service:
        for size in sizes:
            sid = f"s{size}"
            await service.open_session(sid, model="gpt-4o", settings={"context_window": 0})
            batch: list[dict[str, Any]] = []
            for i in range(size // 2):
                batch.append({"role": "user", "content": f"step {i}: look at file_{i}.py and fix the failing test"})
                batch.append({"role": "assistant", "content": f"Fixed file_{i}.py: the loop bound was off by one."})
                if len(batch) >= 1_000:
                    await service.append(sid, batch)
                    batch = []
            if batch:
                await service.append(sid, batch)
        packaged = resources.files("contextfold._data").joinpath(BUNDLED_TRANSCRIPT)
        path = home / BUNDLED_TRANSCRIPT.removesuffix(".gz")
        path.write_bytes(gzip.decompress(packaged.read_bytes()))
        transcript = load_transcript(path)
        system = "\n\n".join(p["text"] for p in transcript.system) or None
        await service.open_session(
            "demo", model="gpt-4o", system=system, settings=demo_settings("gpt-4o", service.settings)
        )
        for batch in _turns(transcript.messages):
            await service.append("demo", batch)
        await service.prune("demo", keep_tool_uses=10)
        await service.compact("demo", summarizer="extractive")


async def export_sizes(home: Path, sessions: list[str]) -> dict[str, tuple[int, int]]:
    """Each session's export: (bytes, gzipped bytes)."""
    sizes = {}
    async with await ContextService.open(load_settings({"home": home})) as service:
        for sid in sessions:
            page = (await export_html(service, sid)).encode()
            sizes[sid] = (len(page), len(gzip.compress(page)))
    return sizes


def start_ui(home: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "contextfold", "--home", str(home), "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "http" not in line:
        process.kill()
        raise SystemExit(f"contextfold ui did not start: {line!r}")
    return process, line.split()[2].rstrip("/")


def server_times(url: str, sids: list[str], repeat: int) -> dict[str, list[float]]:
    """Seconds per GET of each session's page, the sizes interleaved run by run."""
    runs: dict[str, list[float]] = {sid: [] for sid in sids}
    with httpx.Client(timeout=60) as client:
        for sid in sids:  # warm: the view cache, the templates
            client.get(f"{url}/s/{sid}").raise_for_status()
        for _ in range(repeat):
            for sid in sids:
                start = time.perf_counter()
                client.get(f"{url}/s/{sid}").raise_for_status()
                runs[sid].append(time.perf_counter() - start)
    return runs


def first_paints(url: str, sids: list[str], repeat: int) -> dict[str, list[float]] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not CHROMIUM.exists():
        return None
    paints: dict[str, list[float]] = {sid: [] for sid in sids}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        for _ in range(repeat):
            for sid in sids:  # interleaved: a busy moment falls on every size alike
                page = context.new_page()
                page.goto(f"{url}/s/{sid}", wait_until="load")
                fcp = page.evaluate(
                    "new Promise(done => { const e = performance.getEntriesByName('first-contentful-paint');"
                    " if (e.length) return done(e[0].startTime);"
                    " new PerformanceObserver(l => done(l.getEntries()[0].startTime)).observe({type: 'paint', buffered: true}); })"
                )
                paints[sid].append(float(fcp) / 1000)
                page.close()
        browser.close()
    return paints


def main(opts: Options) -> None:
    sizes = [20, 100] if opts.quick else [100, 1_000, 10_000]
    with tempfile.TemporaryDirectory(prefix="contextfold-bench-ui-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        asyncio.run(build(home, sizes))
        process, url = start_ui(home)
        try:
            sids = [f"s{size}" for size in sizes]
            times = server_times(url, sids, opts.repeat * 3)
            paints = first_paints(url, sids, opts.repeat)
        finally:
            process.terminate()
            process.wait(timeout=30)
        exported = asyncio.run(export_sizes(home, ["demo", sids[min(1, len(sids) - 1)]]))
    base_time = statistics.median(times[sids[0]])
    base_paint = statistics.median(paints[sids[0]]) if paints else 0.0
    rows = []
    for size, sid in zip(sizes, sids):
        server = statistics.median(times[sid])
        row: dict[str, Any] = {
            "messages": f"{size:,}",
            "server ms": ms(server),
            "server vs smallest": ratio(server, base_time),
        }
        if paints:
            paint = statistics.median(paints[sid])
            row["first paint ms"] = ms(paint)
            row["paint vs smallest"] = ratio(paint, base_paint)
        else:
            row["first paint ms"] = "n/a (no chromium or Playwright)"
        rows.append(row)
    report(
        "ui",
        "contextfold ui: a session page against the session's length",
        rows,
        opts,
        packages=["starlette", "jinja2", "playwright"],
    )
    export_rows = []
    for sid, (size, packed) in exported.items():
        export_rows.append({"session": sid, "export bytes": f"{size:,}", "gzipped": f"{packed:,}"})
    report("ui_export", "contextfold export --html: the file's size", export_rows, opts)


if __name__ == "__main__":
    main(options(__doc__ or "", repeat=7))

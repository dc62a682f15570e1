"""What every benchmark script shares: timing, the machine, the table, the results file.

A script builds a list of rows (plain dicts, one per measured case), prints them with `report`,
and `report` also writes `benchmarks/results/<name>.json` and `<name>.md` so the README can quote
an actual run. `--quick` shrinks every input so the test suite can smoke-run a script in seconds;
quick runs never overwrite the committed results.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CORPUS = Path(os.environ.get("CONTEXTFOLD_CORPUS", ROOT.parent / "shared" / "corpus"))


@dataclass
class Options:
    quick: bool
    out: Path | None
    repeat: int


def options(description: str, *, repeat: int = 7) -> Options:
    """Parse the flags every script accepts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny inputs, for a smoke run; results are not saved")
    parser.add_argument("--out", type=Path, help=f"directory for the results files (default {RESULTS})")
    parser.add_argument("--repeat", type=int, default=repeat, help=f"timed runs per case (default {repeat})")
    args = parser.parse_args()
    out = args.out if args.out else (None if args.quick else RESULTS)
    return Options(quick=args.quick, out=out, repeat=1 if args.quick else max(1, args.repeat))


@dataclass
class Timing:
    """Seconds per run of one case: the median is what tables show; the spread says how much to trust it."""

    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def best(self) -> float:
        return min(self.runs)


def timed(fn: Callable[[], Any], *, repeat: int, warmup: int = 1) -> tuple[Timing, Any]:
    """Run `fn` `warmup` + `repeat` times; return the timings of the last `repeat` and its last result."""
    result: Any = None
    for _ in range(warmup):
        result = fn()
    timing = Timing()
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        timing.runs.append(time.perf_counter() - start)
    return timing, result


async def timed_async(fn: Callable[[], Awaitable[Any]], *, repeat: int, warmup: int = 1) -> tuple[Timing, Any]:
    """`timed` for coroutines: each run awaits a fresh `fn()`."""
    result: Any = None
    for _ in range(warmup):
        result = await fn()
    timing = Timing()
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = await fn()
        timing.runs.append(time.perf_counter() - start)
    return timing, result


@dataclass(frozen=True)
class Memory:
    """Peak memory one run of a case needed above what was in use when it started, in bytes.

    ``traced`` is tracemalloc's peak (every Python allocation, in every thread); ``rss`` is the
    growth of the process's resident set at its peak (Linux only: the kernel's high-water mark is
    reset before the run; None elsewhere). Each comes from its own run, since tracing slows a run
    down and adds memory of its own.
    """

    traced: int
    rss: int | None


def _proc_status_kib(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise ValueError(f"no {field_name} in /proc/self/status")


def _release_freed_memory() -> None:
    gc.collect()
    try:  # glibc keeps freed heap pages resident until asked; they would hide a later run's growth
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_rss_peak() -> int | None:
    """Reset the kernel's peak-RSS mark to the current RSS and return that (bytes), or None."""
    _release_freed_memory()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _proc_status_kib("VmRSS") * 1024
    except (OSError, ValueError):
        return None


def _rss_growth(start: int | None) -> int | None:
    return None if start is None else max(0, _proc_status_kib("VmHWM") * 1024 - start)


class PeakRSS:
    """`with PeakRSS() as peak: ...` then `peak.growth`: resident-set growth at its peak (bytes, or None)."""

    def __init__(self) -> None:
        self._start: int | None = None
        self.growth: int | None = None

    def __enter__(self) -> PeakRSS:
        self._start = _reset_rss_peak()
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth = _rss_growth(self._start)


def _traced_start() -> int:
    _release_freed_memory()
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    tracemalloc.reset_peak()
    return tracemalloc.get_traced_memory()[0]


def _traced_stop(start: int) -> int:
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return max(0, peak - start)


def memory(fn: Callable[[], Any]) -> tuple[Memory, Any]:
    """Run `fn` twice, once for the resident-set peak and once under tracemalloc; the last result."""
    with PeakRSS() as peak:
        fn()
    start = _traced_start()
    try:
        result = fn()
    finally:
        traced = _traced_stop(start)
    return Memory(traced, peak.growth), result


async def memory_async(fn: Callable[[], Awaitable[Any]]) -> tuple[Memory, Any]:
    """`memory` for coroutines."""
    with PeakRSS() as peak:
        await fn()
    start = _traced_start()
    try:
        result = await fn()
    finally:
        traced = _traced_stop(start)
    return Memory(traced, peak.growth), result


def mib(n: int | None) -> str:
    """A byte count in MiB (KiB under one MiB), or "n/a" when it could not be measured."""
    if n is None:
        return "n/a"
    if n < 1024**2:
        return f"{n / 1024:,.0f} KiB"
    return f"{n / 1024**2:,.1f} MiB"


def run(main: Callable[[Options], Awaitable[None]], opts: Options) -> None:
    asyncio.run(main(opts))


def ms(seconds: float) -> str:
    """A latency in milliseconds with sensible precision."""
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.4f}"


def ratio(slow: float, fast: float) -> str:
    return "∞" if fast <= 0 else f"{slow / fast:,.1f}×"


def machine() -> dict[str, Any]:
    """What the numbers were measured on, for the results file and the README."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages * size / 1024**3:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def versions(*packages: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("contextfold", *packages):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def report(
    name: str,
    title: str,
    rows: Sequence[dict[str, Any]],
    opts: Options,
    *,
    notes: Iterable[str] = (),
    packages: Sequence[str] = (),
) -> None:
    """Print `rows` as a table and, unless this is a quick run, save them as JSON and Markdown."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column == columns[0] else "right")
    for row in rows:
        table.add_row(*(str(row.get(column, "")) for column in columns))
    console = Console(width=max(100, Console().width))
    console.print(table)
    notes = list(notes)
    for note in notes:
        console.print(f"• {note}")
    if opts.out is None:
        return
    opts.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "benchmark": name,
        "title": title,
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions(*packages),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    (opts.out / f"{name}.json").write_text(json.dumps({**meta, "rows": list(rows), "notes": notes}, indent=2) + "\n")
    (opts.out / f"{name}.md").write_text(_markdown(meta, columns, rows, notes))


def _markdown(meta: dict[str, Any], columns: list[str], rows: Sequence[dict[str, Any]], notes: list[str]) -> str:
    m = meta["machine"]
    lines = [
        f"### {meta['title']}",
        "",
        f"`{meta['command']}` on {meta['when']}: {m['cpu']}, {m['cores']} cores, {m['memory']}, "
        f"{m['os']}, Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|",
    ]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    if notes:
        lines.append("")
        lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"

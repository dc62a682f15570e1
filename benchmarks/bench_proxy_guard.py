"""The proxy's guard on a result of many small content blocks: 10k, 100k and 1M blocks (issue 26).

`contextfold.proxy.oversize` decides what of a result to store (`plan`) and writes the result the
client gets (`apply`); the store itself is left out (each piece gets a made-up preview), so this
measures the guard's own work: walking the blocks, counting their tokens with the proxy's
tokenizer, choosing, joining the small blocks into one stored piece, and copying what changes.

- **Now**: plan + apply at each size, time per block, and the ratio to the size ten times smaller
  (linear work: about 10× per 10×). A result over `proxy_max_result_blocks` (100,000) is refused before any of
  that, so 1M blocks is measured twice: the refusal as the proxy gives it, and the guard with the
  bound raised for this run, to show the work itself stays linear.
- **Before**: the guard as it was before issue 26, item 4 (commit `BEFORE`'s `oversize.py`, read
  with `git show`), at 10k and 20k blocks only: it is quadratic (membership tests on lists of
  paths), so 100k would take about 100 times its 10k time and 1M about 10,000 times.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from _harness import ROOT, options, report

from contextfold.config import load_settings
from contextfold.proxy import oversize as guard
from contextfold.proxy.session import ProxySession
from contextfold.tokens.counting import counter_for

BEFORE = "edaa2f8^"
"""The commit before the guard was made linear (issue 26, item 4)."""


def result_of(blocks: int) -> dict[str, Any]:
    """A tool result of `blocks` small text blocks (three lines each): small alone, over
    `max_lines` together, so they are joined and stored as one piece."""
    return {"content": [{"type": "text", "text": f"block {i}\nsecond line\nthird line"} for i in range(blocks)]}


def guard_once(module: ModuleType, result: dict[str, Any], limits: Any, count: Any) -> str:
    """Plan and apply, as the relay does (a made-up preview per stored piece); what became of it."""
    try:
        planned = module.plan(result, limits, count)
    except ValueError as exc:  # TooManyBlocks: refused, naming the bound
        return f"refused ({type(exc).__name__})"
    assert planned is not None
    stored = {
        piece.path: module.Stored(f'[preview {n}] read_output(id="out_{n}")', f"out_{n}")
        for n, piece in enumerate(planned.pieces)
    }
    out = module.apply(result, planned, stored, count=count)
    return f"{len(out['content'])} block(s) out"


def before_module() -> ModuleType | None:
    """The guard as it was at `BEFORE`, or None when git or that commit is not at hand."""
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BEFORE}:server/contextfold/proxy/oversize.py"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "oversize_before.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("oversize_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["oversize_before"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@dataclass
class Runs:
    """CPU and wall seconds of each run. The guard is single-threaded work in this process, so its CPU
    time is the figure that does not depend on what else the (shared) machine is doing."""

    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    uncollected: float | None = None
    """CPU seconds of one more run with Python's cyclic garbage collector off."""


def measured(fn: Callable[[], str], repeat: int, warmup: int = 1, *, uncollected: bool = False) -> tuple[Runs, str]:
    outcome = ""
    for _ in range(warmup):
        outcome = fn()
    runs = Runs()
    for _ in range(repeat):
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        outcome = fn()
        runs.cpu.append(time.process_time() - cpu)
        runs.wall.append(time.perf_counter() - wall)
    if uncollected:
        gc.collect()
        gc.disable()
        try:
            cpu = time.process_time()
            fn()
            runs.uncollected = time.process_time() - cpu
        finally:
            gc.enable()
    return runs, outcome


def _seconds(value: float) -> str:
    return f"{value:.3f}" if value >= 0.001 else f"{value * 1e6:.0f} µs"


def row(label: str, blocks: int, runs: Runs, outcome: str, smaller: tuple[int, float] | None) -> dict[str, Any]:
    cpu, wall = statistics.median(runs.cpu), statistics.median(runs.wall)
    per_block = cpu / blocks * 1e6
    return {
        "guard": label,
        "blocks": f"{blocks:,}",
        "outcome": outcome,
        "CPU s": _seconds(cpu),
        "wall s": _seconds(wall),
        "CPU µs per block": f"{per_block:.2f}" if per_block >= 0.01 else f"{per_block:.5f}",
        "× the smaller size": "" if smaller is None else f"{cpu / smaller[1]:.1f}× for {blocks / smaller[0]:.0f}×",
        "CPU µs per block, collector off": "" if runs.uncollected is None else f"{runs.uncollected / blocks * 1e6:.2f}",
        "runs": len(runs.cpu),
    }


def main() -> None:
    opts = options(__doc__.splitlines()[0], repeat=3)
    settings = load_settings()
    limits = ProxySession(settings, title="bench", owner="bench").limits  # the proxy's own limits
    count = counter_for(settings.default_model, settings.token_factors).count
    sizes = [1_000, 10_000] if opts.quick else [10_000, 100_000]
    rows: list[dict[str, Any]] = []
    previous: tuple[int, float] | None = None
    for blocks in sizes:
        result = result_of(blocks)
        runs, outcome = measured(lambda: guard_once(guard, result, limits, count), opts.repeat, uncollected=True)
        rows.append(row("now", blocks, runs, outcome, previous))
        previous = (blocks, statistics.median(runs.cpu))
    over = limits.max_blocks + 1 if opts.quick else 1_000_000
    result = result_of(over)
    runs, outcome = measured(lambda: guard_once(guard, result, limits, count), opts.repeat)
    rows.append(row("now, as the proxy runs (proxy_max_result_blocks)", over, runs, outcome, None))
    if not opts.quick:  # the same 1M blocks with the bound out of the way: the work itself
        raised = dataclasses.replace(limits, max_blocks=over)
        runs, outcome = measured(lambda: guard_once(guard, result, raised, count), 1, warmup=0, uncollected=True)
        rows.append(row("now, bound raised to 1M for this run", over, runs, outcome, previous))
    del result
    notes = [
        "plan + apply in this process, the proxy's limits and tokenizer (settings as loaded), each stored piece "
        "given a made-up preview: the guard's own work, without the store's I/O. Median of the runs; the "
        "ratios are of CPU time (wall time also counts the other processes on a shared machine).",
        f"A result over proxy_max_result_blocks ({limits.max_blocks:,}) is refused before it is walked: the proxy answers that "
        "request with an error naming the bound. The 'bound raised' row measures the same 1M blocks guarded "
        "anyway (one run), to show the work is linear past the bound too.",
        "What grows per block with the size is mostly Python's cyclic garbage collector (it walks the live "
        "objects, and a million blocks are many of them), the rest memory traffic: the collector-off column is "
        "one more run with it disabled.",
    ]
    old = before_module()
    if old is None:
        notes.append(f"The guard before ({BEFORE}) was not measured: git or that commit is not at hand.")
    else:
        previous = None
        for blocks in [1_000, 2_000] if opts.quick else [10_000, 20_000]:
            result = result_of(blocks)
            repeat = opts.repeat if blocks <= 10_000 else 1
            runs, outcome = measured(lambda: guard_once(old, result, limits, count), repeat, warmup=0)
            rows.append(row(f"before ({BEFORE})", blocks, runs, outcome, previous))
            previous = (blocks, statistics.median(runs.cpu))
        notes.append(
            f"'before' is oversize.py at {BEFORE} (before issue 26, item 4): quadratic, so it is measured at 10k "
            "and 20k blocks only (about 4× the time for 2× the blocks; 100k would take about 100 times its 10k "
            "time, and 200k blocks never answered in the report that found it)."
        )
    report(
        "proxy_guard",
        "contextfold proxy: the guard (plan + apply) on a result of many small blocks",
        rows,
        opts,
        notes=notes,
    )


if __name__ == "__main__":
    main()

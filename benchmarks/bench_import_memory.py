"""Importing a big Claude Code transcript: records a second and peak memory, before and after streaming.

What is measured: `contextfold import FILE` as its own process (what the PreCompact hook runs too)
on generated session files of 100k, 250k and 1M small records (user and assistant text, about 390
bytes each, `parentUuid` chains as Claude Code writes them): wall time, records a second, and the
process's peak RSS (`VmHWM` at exit). Each size is run with this tree and, side by side, with the
tree of the revision before issue 26 (`BENCH_IMPORT_OLD`, default 584e9df; "none" skips it), which
read the whole file into memory before storing it.

Why: issue 26, item 11. 1,000,000 small records took 98 s and 5.16 GB in the hook, enough for the
OOM killer to pick the agent itself. The import now reads and stores a chunk at a time; what grows
with the file is the thread's index, a few numbers a record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

from _harness import ROOT, Options, options, ratio, report, run

OLD = os.environ.get("BENCH_IMPORT_OLD", "584e9df")
MEASURE = """
import sys
from contextfold.cli.dispatch import main
code = main(sys.argv[1:])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("PEAK_KB", int(peak.split()[1]), file=sys.stderr)
sys.exit(code)
"""


def small_records(path: Path, records: int) -> None:
    base = {"isSidechain": False, "userType": "external", "cwd": "/work/project", "sessionId": "0f0e"}
    base |= {"version": "2.1.197", "timestamp": "2026-11-27T10:00:00.000Z"}
    parent = None
    with path.open("w", encoding="utf-8") as handle:
        for i in range(records):
            uuid = f"{i:08d}-aaaa-4bbb-8ccc-dddddddddddd"
            if i % 2 == 0:
                message: dict[str, Any] = {"role": "user", "content": f"step {i}"}
            else:
                message = {"id": f"msg_{i}", "role": "assistant", "model": "claude-opus-4-8"}
                message |= {"content": [{"type": "text", "text": f"done {i}"}], "usage": {"input_tokens": 3}}
            record = {"parentUuid": parent, **base, "type": message["role"], "message": message, "uuid": uuid}
            handle.write(json.dumps(record) + "\n")
            parent = uuid


def old_tree(into: Path) -> Path | None:
    """The package as it was at `OLD`, unpacked under `into`; None when git cannot give it."""
    if OLD == "none":
        return None
    try:
        archive = subprocess.run(
            ["git", "archive", OLD, "server/contextfold"], cwd=ROOT, capture_output=True, check=True, timeout=120
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "server"


def measure(tree: Path, path: Path, home: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of `contextfold import` run with the package in `tree`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    environ["PYTHONPATH"] = str(tree)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, "--home", str(home), "import", str(path), "--session", "s"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=3_600,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"import failed with {tree}: {done.stderr[-2000:]}")
    return seconds, int(done.stderr.split("PEAK_KB")[1].split()[0]) * 1024


async def main(opts: Options) -> None:
    sizes = [2_000, 5_000] if opts.quick else [100_000, 250_000, 1_000_000]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        old = None if opts.quick else old_tree(Path(tmp) / "old")
        trees = [("now", ROOT / "server")] + ([(f"before ({OLD})", old)] if old else [])
        for records in sizes:
            path = Path(tmp) / f"{records}.jsonl"
            small_records(path, records)
            found: dict[str, tuple[float, int]] = {}
            for name, tree in trees:
                found[name] = measure(tree, path, Path(tmp) / f"home-{name}-{records}")
                seconds, peak = found[name]
                rows.append(
                    {
                        "records": f"{records:,}",
                        "file": f"{path.stat().st_size / 1024**2:,.0f} MiB",
                        "code": name,
                        "s": f"{seconds:,.1f}",
                        "records/s": f"{records / seconds:,.0f}",
                        "peak RSS": f"{peak / 1024**2:,.0f} MiB",
                    }
                )
            if old:
                (new_s, new_peak), (old_s, old_peak) = found["now"], found[f"before ({OLD})"]
                rows.append(
                    {
                        "records": f"{records:,}",
                        "code": "before / now",
                        "s": ratio(old_s, new_s),
                        "peak RSS": ratio(old_peak, new_peak),
                    }
                )
            path.unlink()
    report(
        "import_memory",
        "Importing a big Claude Code transcript: records a second and peak memory, before and after streaming",
        rows,
        opts,
        notes=[
            "one `contextfold import` process per row (what the PreCompact hook runs); peak RSS is its VmHWM",
            "small user/assistant text records of about 390 bytes, chained by parentUuid",
        ],
    )


if __name__ == "__main__":
    run(main, options(__doc__ or "", repeat=1))

"""Cold start: how long a fresh `contextfold` process takes, beside a bare `python -c pass`.

Every run is a new process (wall time from spawn to exit), so nothing is cached but the files
the OS already holds; the median of `--repeat` runs is shown. Cases:

- `python -c pass` (the floor) and `python -c "import contextfold"`;
- `contextfold --version` (the lightest path: stands in for the hooks' no-op path), `--help`;
- `contextfold count` on a short text from stdin (needs the tokenizer, not the MCP SDK);
- `contextfold token list` and `contextfold sessions` on an empty data home;
- `contextfold serve` (stdio) until it answers `tools/list`: raw JSON-RPC lines on its stdin
  (`initialize`, `notifications/initialized`, `tools/list`), timed to the answer's line.

Why: issue 15 asks that the CLI's light paths not load the MCP SDK, the HTTP stack or the
tokenizer, and that they stay well under 300 ms; a hook pays this after every tool call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _harness import Options, ms, options, ratio, report

HANDSHAKE_VERSION = "2025-06-18"
SERVE_TIMEOUT = 60.0


def _contextfold() -> list[str]:
    """The installed console script next to this Python, else `python -m contextfold`."""
    script = Path(sys.executable).parent / "contextfold"
    found = str(script) if script.exists() else shutil.which("contextfold")
    return [found] if found else [sys.executable, "-m", "contextfold"]


def _run(argv: list[str], env: dict[str, str], stdin: str = "") -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True, timeout=SERVE_TIMEOUT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def _serve_until_tools(argv: list[str], env: dict[str, str]) -> float:
    """Spawn `serve` on stdio, send the handshake and `tools/list`, time until the answer arrives."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench_coldstart", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        process.stdin.flush()
        for line in process.stdout:
            answer = json.loads(line)
            if answer.get("id") == 2:
                elapsed = time.perf_counter() - start
                if not answer.get("result", {}).get("tools"):
                    raise SystemExit(f"tools/list answered without tools: {line[:500]!r}")
                return elapsed
        raise SystemExit(f"serve exited ({process.wait()}) before answering tools/list")
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=SERVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _median(fn: Callable[[], float], repeat: int) -> float:
    fn()  # warm-up: the first run after a change also writes .pyc files
    runs = sorted(fn() for _ in range(repeat))
    return runs[len(runs) // 2]


def main(opts: Options) -> None:
    cf = _contextfold()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CONTEXTFOLD_HOME": str(Path(tmp) / "home")}
        env.pop("CONTEXTFOLD_CONFIG", None)
        env.pop("CONTEXTFOLD_TOKENS", None)
        text = "Count these few words of a short text, as a hook would.\n"
        cases: list[tuple[str, Callable[[], float]]] = [
            ("python -c pass", lambda: _run([sys.executable, "-c", "pass"], env)),
            ('python -c "import contextfold"', lambda: _run([sys.executable, "-c", "import contextfold"], env)),
            ("contextfold --version", lambda: _run([*cf, "--version"], env)),
            ("contextfold --help", lambda: _run([*cf, "--help"], env)),
            ("contextfold count (stdin, 11 words)", lambda: _run([*cf, "count"], env, stdin=text)),
            ("contextfold token list (empty home)", lambda: _run([*cf, "token", "list"], env)),
            ("contextfold sessions (empty home)", lambda: _run([*cf, "sessions"], env)),
            ("contextfold serve → tools/list (stdio)", lambda: _serve_until_tools([*cf, "serve"], env)),
        ]
        medians = [(name, _median(fn, opts.repeat)) for name, fn in cases]
    floor = medians[0][1]
    rows = [{"case": name, "median ms": ms(t), "× python -c pass": ratio(t, floor)} for name, t in medians]
    report(
        "coldstart",
        "Cold start: a fresh process per run, median wall time",
        rows,
        opts,
        notes=[
            f"median of {opts.repeat} runs per case after one warm-up run; each run spawns a new process",
            f"contextfold run as {' '.join(Path(a).name for a in cf)}; empty data home",
            "serve: from spawn to the tools/list answer, after initialize over raw JSON-RPC lines on stdin",
        ],
        packages=("mcp", "pydantic", "tiktoken"),
    )


if __name__ == "__main__":
    main(options(__doc__.splitlines()[0], repeat=11))

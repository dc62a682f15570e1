"""Every benchmark script runs: `--quick` on tiny inputs, exit code 0, its table printed.

No timings are asserted; the numbers belong to the full runs quoted in the README. Scripts that
read the corpus fall back to generated data in `--quick` when it is absent, so nothing is skipped.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def table_titles(script: Path) -> list[str]:
    """The literal titles the script passes to `report(name, title, …)`."""
    titles = []
    for node in ast.walk(ast.parse(script.read_text("utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "report":
            title = (
                node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "title"), None)
            )
            if isinstance(title, ast.Constant) and isinstance(title.value, str):
                titles.append(title.value)
    return titles


def squeeze(text: str) -> str:
    """Whitespace collapsed, so a title rich wrapped onto two lines still matches."""
    return " ".join(text.split())


def test_there_are_benchmarks() -> None:
    assert {
        "bench_tail.py",
        "bench_tokens.py",
        "bench_compaction.py",
        "bench_compaction_flat.py",
        "bench_coldstart.py",
        "bench_status.py",
        "bench_regions.py",
    } <= {p.name for p in SCRIPTS}


def _needs(script: Path) -> None:
    """Skip a script whose tools are not installed, naming what to install (a failure under CI)."""
    if script.stem == "bench_agents":
        import agents_harness

        agents_harness.required(agents_harness.claude_binary)
        agents_harness.required(agents_harness.codex_binary)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_quick_run(script: Path, tmp_path: Path) -> None:
    _needs(script)
    env = {**os.environ, "CONTEXTFOLD_HOME": str(tmp_path / "home"), "COLUMNS": "160"}
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    titles = table_titles(script)
    output = squeeze(done.stdout)
    if titles:
        for title in titles:
            assert squeeze(title) in output, f"{title!r} not in the output of {script.name}"
    else:
        assert "┏" in done.stdout, f"{script.name} printed no table"

"""The examples run offline as they are, from a fresh install, and do what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}  # the offline stand-in
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        env={**env, "CONTEXTFOLD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_agent_loop_keeps_its_history_in_contextfold(tmp_path: Path):
    out = _run("agent_loop.py", tmp_path)
    assert "Step 1: running ls -la" in out and "Step 2: running find" in out
    assert "The largest file is: 48000 ./data.csv" in out
    assert "done: 4 messages stored" in out
    assert (tmp_path / "contextfold.db").is_file()


def test_huge_output_agent_finds_the_failure_with_read_output(tmp_path: Path):
    out = _run("huge_output.py", tmp_path)
    assert "60,001 lines" in out
    assert "grep FAILED → 1 match(es)" in out
    assert "One test failed (line 41,235 of the output): tests/test_module_412.py::test_case_41234 FAILED" in out

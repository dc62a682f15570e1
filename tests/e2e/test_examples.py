"""The examples run offline as they are, from a fresh install, and do what they say."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["agent_loop.py", "huge_output.py", "library.py"]


def _run(script: str, home: Path | None, scratch: Path | None = None) -> str:
    """Run an example; with `home` None it makes its own data home; its temp files go to `scratch`."""
    drop = ("ANTHROPIC_API_KEY", "CONTEXTFOLD_HOME")  # the offline stand-in; the home is the test's
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if home is not None:
        env["CONTEXTFOLD_HOME"] = str(home)
    if scratch is not None:
        env["TMPDIR"] = str(scratch)
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_agent_loop_keeps_its_history_in_contextfold(tmp_path: Path):
    home, scratch = tmp_path / "home", tmp_path / "tmp"
    scratch.mkdir()
    out = _run("agent_loop.py", home, scratch)
    assert "Step 1: running ls -la" in out and "Step 2: running find" in out
    assert "The largest file is: 48000 ./data.csv" in out
    assert "done: 4 messages stored" in out
    assert (home / "contextfold.db").is_file()  # a home the user chose is kept, and said so
    assert f"the session is kept in {home}" in out
    assert list(scratch.iterdir()) == []  # the workspace the agent looked at is gone


@pytest.mark.parametrize("script", EXAMPLES)
def test_a_run_leaves_nothing_behind(tmp_path: Path, script: str):
    # Without CONTEXTFOLD_HOME an example makes a throwaway data home: it goes at the end, with
    # everything else the run put in the temp directory.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    _run(script, None, scratch)
    assert sorted(p.name for p in scratch.iterdir()) == []


def test_huge_output_agent_finds_the_failure_with_read_output(tmp_path: Path):
    out = _run("huge_output.py", tmp_path)
    assert "60,001 lines" in out
    assert "grep FAILED → 1 match(es)" in out
    assert "One test failed (line 41,235 of the output): tests/test_module_412.py::test_case_41234 FAILED" in out


def test_library_example_uses_only_the_public_api(tmp_path: Path):
    tree = ast.parse((ROOT / "examples" / "library.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    assert {m for m in imported if m.startswith("contextfold")} == {"contextfold"}
    out = _run("library.py", tmp_path)
    assert "(40,000 lines); the model sees a preview" in out
    assert "read_output(pattern='FAILED') → 1 match(es): 27183:tests/test_api.py::test_case_27182 FAILED" in out
    before, after = (int(n.replace(",", "")) for n in out.split("compact: ")[1].split(" tokens")[0].split(" → "))
    assert after < before
    assert (tmp_path / "contextfold.db").is_file()

"""The wheel and sdist, as a user installs them: built from this checkout, checked, installed alone.

The wheel goes into a new virtual environment (its dependencies from the package index, nothing of this
checkout on the path: the commands run in a scratch folder with PYTHONPATH unset) and is used there as a
user would: `contextfold demo`, `contextfold serve` answering `tools/list` to a real MCP client over stdio,
`hooks install --dry-run`, the `[postgres]` and `[s3]` extras' modules imported. `uvx --from <wheel>
contextfold demo` runs the same wheel through uv. The wheel's contents are listed and its size is kept
in bounds: the tokenizer rank files are most of it.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from _package import Dist, clean_env, fresh_venv, uv_binary
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.anyio

WHEEL_LIMIT = 3_600_000
"""Bytes the wheel may weigh. It is about 3.4 MB: the o200k and cl100k rank files (2.4 MB gzipped) and
the demo's transcript (0.3 MB) are most of it; the code is the rest."""

AGENT_TOOLS = {"read_output", "search_history"}


@pytest.fixture(scope="module")
def venv(built_dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and both extras installed; its bin folder."""
    return fresh_venv(built_dist.wheel, tmp_path_factory.mktemp("venv") / "env", extras=("postgres", "s3"))


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"$ {' '.join(argv)}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr}"
    return done


def test_the_wheel_holds_the_package_and_its_data_and_nothing_else(built_dist: Dist) -> None:
    with zipfile.ZipFile(built_dist.wheel) as wheel:
        names = wheel.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"contextfold", built_dist.wheel.name.split("-py3")[0] + ".dist-info"}, tops
    for data in ("o200k_base.tiktoken.gz", "cl100k_base.tiktoken.gz", "NOTICE.md", "mini-swe-agent__"):
        assert any(n.startswith(f"contextfold/_data/{data}") for n in names), data
    assert "contextfold/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".orig", ".rej"))]
    size = built_dist.wheel.stat().st_size
    assert size < WHEEL_LIMIT, f"the wheel weighs {size:,} bytes (limit {WHEEL_LIMIT:,})"


def test_twine_accepts_the_wheel_and_the_sdist(built_dist: Dist) -> None:
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(built_dist.wheel), str(built_dist.sdist)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_installed_wheel_runs_the_demo_from_a_scratch_folder(venv: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home", COLUMNS="80")
    where = run([str(venv / "python"), "-c", "import contextfold; print(contextfold.__file__)"], tmp_path, env)
    assert str(venv.parent) in where.stdout, where.stdout  # the installed copy, not this checkout
    demo = run([str(venv / "contextfold"), "demo"], tmp_path, env)
    assert "search_history" in demo.stdout and "read_output" in demo.stdout, demo.stdout[-2000:]


async def test_the_installed_server_lists_its_tools_to_an_mcp_client(venv: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home", CONTEXTFOLD_HOME=str(tmp_path / "data"))
    params = StdioServerParameters(
        command=str(venv / "contextfold"),
        args=["serve", "--tools", "read_output,search_history"],
        env=env,
        cwd=tmp_path,
    )
    with open(tmp_path / "serve.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = await client.list_tools()
    assert {tool.name for tool in tools.tools} == AGENT_TOOLS, (tmp_path / "serve.log").read_text()[-2000:]


def test_the_installed_hooks_install_dry_run_names_the_installed_contextfold(venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    done = run([str(venv / "contextfold"), "hooks", "install", "claude-code", "--dry-run"], tmp_path, env)
    assert "would change" in done.stdout and "PostToolUse" in done.stdout, done.stdout
    assert str(venv.parent) in done.stdout, done.stdout  # the hooks run this environment's contextfold
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()  # a dry run writes nothing


def test_the_extras_modules_import_in_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    code = (
        "import json, psycopg, psycopg_pool, obstore\n"
        "import contextfold.store.postgres, contextfold.blobs.postgres, contextfold.blobs.s3\n"
        "print(json.dumps([psycopg.__version__, obstore.__version__]))\n"
    )
    done = run([str(venv / "python"), "-c", code], tmp_path, env)
    assert len(json.loads(done.stdout)) == 2


def test_uvx_runs_the_demo_from_the_wheel(built_dist: Dist, tmp_path: Path) -> None:
    uv = uv_binary()
    env = clean_env(tmp_path / "home", UV_CACHE_DIR=str(tmp_path / "uv-cache"), COLUMNS="80")
    env["UV_PYTHON_DOWNLOADS"] = "never"  # the machine's Python, as pip's environment uses
    demo = run([str(uv), "tool", "run", "--from", str(built_dist.wheel), "contextfold", "demo"], tmp_path, env)
    assert "search_history" in demo.stdout, demo.stdout[-2000:] + demo.stderr[-2000:]

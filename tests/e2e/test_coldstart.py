"""The command line's light paths load only what they use (issue 15, cold start).

Each case runs `contextfold.cli.dispatch.main` in a fresh interpreter, as the `contextfold` script does,
and reads back every module that was loaded by the time it returned. A hook runs `contextfold`
after every tool call of its agent: what it imports and does not need is paid each time
(`benchmarks/bench_coldstart.py` has the times; nothing here is timed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from contextfold.cli import dispatch as cli
from contextfold.cli.commands.count import count_text
from contextfold.config import load_settings
from contextfold.home.opening import without_store

SDK_AND_HTTP = {"mcp", "mcp_types", "uvicorn", "starlette", "sse_starlette", "httpx", "httpx2", "anthropic"}
TOKENIZER = {"tiktoken"}
STORE = {"aiosqlite", "contextfold.store", "contextfold.service.facade"}

PROBE = """
import sys

from contextfold.cli.dispatch import main

try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
finally:
    import json, os

    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(sorted(sys.modules), out)
sys.exit(code)
"""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    modules: set[str]

    def loaded(self, names: set[str]) -> set[str]:
        """Which of `names` (packages or modules) were imported, a package counting its submodules."""
        return {name for name in names for module in self.modules if module == name or module.startswith(name + ".")}


@pytest.fixture(scope="module")
def bare_interpreter() -> set[str]:
    """What a bare `python -c` has loaded before running anything (site hooks included)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; print(' '.join(sys.modules))"], capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


def run_cli(tmp_path: Path, *argv: str, stdin: str = "") -> Run:
    out = tmp_path / "modules.json"
    env = {**os.environ, "CONTEXTFOLD_HOME": str(tmp_path / "home"), "PROBE_OUT": str(out)}
    env.pop("CONTEXTFOLD_CONFIG", None)
    env.pop("CONTEXTFOLD_TOKENS", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        input=stdin,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Run(done.returncode, done.stdout, done.stderr, set(json.loads(out.read_text())))


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str | None]:
    """Every runnable command (`("token", "add")`, …) and the handler it names."""
    found: dict[tuple[str, ...], str | None] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= leaf_commands(sub, (*path, name))
    return found or {path: parser.get_default("handler")}


def test_every_command_names_a_handler_that_exists() -> None:
    commands = leaf_commands(cli._build_parser())
    assert len(commands) >= 17 and ("token", "list") in commands and ("serve",) in commands
    for command, name in commands.items():
        assert name is not None, f"{command} names no handler"
        assert callable(cli._handler(name)), f"{command}: {name} is not a function"


@pytest.mark.parametrize(
    "argv", [["--help"], ["--version"], ["serve", "--help"], ["token", "add", "--help"], ["proxy", "--help"]]
)
def test_parsing_alone_loads_nothing_but_the_standard_library(
    tmp_path: Path, argv: list[str], bare_interpreter: set[str]
) -> None:
    run = run_cli(tmp_path, *argv)
    assert run.code == 0, run.stderr
    assert "contextfold" in run.stdout
    outside = {m.split(".")[0] for m in run.modules - bare_interpreter} - set(sys.stdlib_module_names) - {"contextfold"}
    assert not outside, f"{argv} loaded {sorted(outside)}"
    assert not run.loaded({"contextfold.config", "contextfold.cli.commands", "contextfold.cli.commands.token"})


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["token", "list"], 0, "no tokens in"),
        (["token", "add", "alice"], 0, "token for tenant 'alice'"),
        (["token", "remove", "nobody"], 2, "contextfold: error: no token for tenant 'nobody'"),
    ],
)
def test_token_commands_load_no_sdk_store_or_tokenizer(tmp_path: Path, argv: list[str], code: int, says: str) -> None:
    run = run_cli(tmp_path, *argv)
    assert run.code == code, run.stderr
    assert says in run.stdout + run.stderr
    assert not run.loaded(SDK_AND_HTTP | TOKENIZER | STORE), (
        f"{argv} loaded {sorted(run.loaded(SDK_AND_HTTP | TOKENIZER | STORE))}"
    )


def test_count_loads_the_tokenizer_but_no_sdk_or_store(tmp_path: Path) -> None:
    text = "Count these words, 数えて.\n"
    run = run_cli(tmp_path, "count", "--json", "--model", "claude-sonnet-4-5", stdin=text)
    assert run.code == 0, run.stderr
    service = without_store(load_settings({"home": tmp_path / "home"}, environ={}))
    assert json.loads(run.stdout) == service.count_tokens(text=text, model="claude-sonnet-4-5").model_dump()
    assert run.loaded(TOKENIZER) == TOKENIZER
    assert not run.loaded(SDK_AND_HTTP | STORE), f"count loaded {sorted(run.loaded(SDK_AND_HTTP | STORE))}"


@pytest.mark.parametrize(
    "model", [None, "gpt-4o", "gpt-4", "claude-sonnet-4-5", "gemini-2.5-pro", "a-model-nobody-knows"]
)
@pytest.mark.parametrize("text", ["", "def f(x):\n    return x * 2\n", "混合 text, ハイブリッド — " * 50])
def test_count_answers_as_the_service_does(tmp_path: Path, model: str | None, text: str) -> None:
    settings = load_settings({"home": tmp_path / "home", "claude_token_factor": 1.3}, environ={})
    assert count_text(text, model, settings) == without_store(settings).count_tokens(text=text, model=model)

"""The hook's cheap path: what it loads, and that its quick reading of the limits is the real one.

A PostToolUse hook runs after every tool call. For an output within the limits it must decide so
from the event alone — no pydantic, no settings model, no tokenizer, no store, no MCP SDK — and it
must never call an output within the limits that the exact check (`ingest.PreviewCaps`, counting
with the session's counter) would spill, nor the other way round. (Times are in
`benchmarks/bench_hooks.py`; nothing here is timed.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.config import Settings, load_settings
from contextfold.hooks import gate
from contextfold.service.ingest import PreviewCaps
from contextfold.tokens.counting import counter_for

HEAVY = {
    "pydantic",
    "contextfold.config",
    "tiktoken",
    "aiosqlite",
    "contextfold.store",
    "contextfold.service.facade",
    "mcp",
    "anthropic",
    "contextfold.compaction",
}

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


def loaded_by(tmp_path: Path, event: dict[str, object], *argv: str) -> tuple[str, set[str]]:
    out = tmp_path / "modules.json"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--home", str(tmp_path / "home"), "hook", *argv],
        input=json.dumps(event),
        env={**environ, "PROBE_OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(out.read_text()))
    return done.stdout, {name for name in HEAVY for m in modules if m == name or m.startswith(name + ".")}


def bash(stdout: str) -> dict[str, object]:
    return {
        "session_id": "s",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": "t",
        "tool_input": {"command": "make"},
        "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False},
    }


@pytest.mark.parametrize("size", [200, 20_000])
def test_a_small_output_loads_nothing_heavy(tmp_path: Path, size: int) -> None:
    stdout, heavy = loaded_by(tmp_path, bash(("x" * 59 + "\n") * (size // 60)), "claude-code", "PostToolUse")
    assert stdout == "" and not heavy, f"the small-output path loaded {sorted(heavy)}"


def test_a_prompt_with_nothing_pending_and_a_plain_session_start_load_nothing_heavy(tmp_path: Path) -> None:
    for argv, event in (
        (("claude-code", "UserPromptSubmit"), {"session_id": "s", "prompt": "hi"}),
        (("claude-code", "SessionStart"), {"session_id": "s", "source": "startup"}),
        (("codex", "PostToolUse"), {"session_id": "s", "tool_name": "Bash", "tool_response": "x"}),
        (
            ("claude-code", "StatusLine"),
            {"session_id": "s", "context_window": {"total_input_tokens": 9, "context_window_size": 200_000}},
        ),
    ):
        stdout, heavy = loaded_by(tmp_path, event, *argv)
        assert (stdout == "") != (argv[1] == "StatusLine") and not heavy, f"{argv} loaded {sorted(heavy)}"


def test_the_quick_reading_of_the_limits_is_the_settings(tmp_path: Path) -> None:
    defaults = Settings(home=tmp_path)
    assert {name: getattr(defaults, name) for name in gate.LIMIT_DEFAULTS} == gate.LIMIT_DEFAULTS
    (tmp_path / "config.toml").write_text("max_lines = 500\ncontext_share = 0.2\ncontext_window = 64000\n")
    environ = {
        "CONTEXTFOLD_MAX_BYTES": "9000",
        "CONTEXTFOLD_CONTEXT_SHARE": "0.25",
        "CONTEXTFOLD_CLAUDE_TOKEN_FACTOR": "1.5",
    }
    quick = gate.light_limits(tmp_path, None, environ)
    real = load_settings({"home": tmp_path}, environ=environ)
    assert quick == {name: getattr(real, name) for name in gate.LIMIT_DEFAULTS}
    (tmp_path / "config.toml").write_text("max_lines = [oops")
    assert gate.light_limits(tmp_path, None, {}) is None  # the exact path then reports the bad file


texts = st.text(alphabet=st.sampled_from(list("ab \n\t{}0é漢😀")), max_size=3_000).map(lambda t: t * 40)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(text=texts, window=st.sampled_from([8_192, 32_000, 200_000]), share=st.sampled_from([0.05, 0.3]))
def test_certainly_within_never_lets_through_what_the_exact_check_would_spill(
    text: str, window: int, share: float
) -> None:
    limits = {**gate.LIMIT_DEFAULTS, "context_window": window, "context_share": share}
    real = Settings(context_window=window, context_share=share)
    exact = PreviewCaps.of(real, window, counter_for("claude", real.token_factors).count)
    if gate.certainly_within(*gate.measure(text), limits, "claude"):
        assert exact.truncate(text, max_lines=real.max_lines, max_bytes=real.max_bytes, direction="auto") is None

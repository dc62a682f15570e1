"""Inside the real agents: one scripted session, with and without contextfold's hooks, side by side.

Claude Code 2.1.197 and Codex 0.169.0 (pinned in tests/agents) run headless in a scratch home against the
test suite's fake model APIs on 127.0.0.1 (tests/fake_models.py, tests/agents_harness.py). The fake model
plays the same session in every run: a command with a 1.3 MB output (`seq 1 200000`), one more command
whose turn reports usage past the agent's compaction limit (so the agent compacts for real), then a reply.
Arms: the agent alone, and the agent after `contextfold hooks install <agent>` on a fresh data home.

Measured per arm: the wall time of the whole run (median of --repeat runs; every run starts from a fresh
home, so each pays the hooks' first start on an empty data home) and, from when the fake model received
each request, where it went: start to the first request (MCP servers connecting), the huge output's turn
to the next request (the command and PostToolUse), the turn past the limit to the first request after
the compaction (PreCompact, the summary request, SessionStart and PostCompact); what the model was sent in place of the
huge output (characters, o200k tokens); what the first request after the compaction carries besides the
agent's own summary (contextfold's additional context: characters, tokens, and whether it holds the user's
instruction verbatim and the spilled output's id).

The model is a fake, so wall time here is the agent's and the hooks' own work, with no model latency: in
real use the same seconds add to minutes of model time.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from _harness import ROOT, Options, options, report

sys.path.insert(0, str(ROOT / "tests"))

from agents_harness import (  # noqa: E402 (the harness lives with the tests)
    CLAUDE_COMPACT_WINDOW,
    AgentMissing,
    ClaudeCode,
    Codex,
    claude_binary,
    codex_binary,
)
from fake_models import ModelRequest, call, say, serve_messages_api, serve_responses_api  # noqa: E402

HUGE = "seq 1 200000"
QUICK_HUGE = "seq 1 20000"
INSTRUCTION = "Never delete files in this project."
PROMPT = f"List the numbers with seq and check the last ones. {INSTRUCTION}"
_OUTPUT_ID = re.compile(r"\bout_[0-9A-Z]{20,}")


def _count(text: str) -> int:
    from contextfold.tokens.counting import counter_for

    return counter_for("gpt-4o").count(text)


def _install(agent: ClaudeCode | Codex, target: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "hooks", "install", target],
        cwd=agent.cwd, env=agent.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"contextfold hooks install {target} failed:\n{done.stdout}\n{done.stderr}")


def _claude_tool_result(request: ModelRequest) -> str:
    texts = []
    for block in request.body["messages"][-1]["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            content = block["content"]
            texts.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
    return "\n".join(texts)


def _claude_context(request: ModelRequest) -> str:
    """contextfold's additional context in a Messages request (Claude Code puts it in a system message)."""
    marker = "SessionStart hook additional context:"
    for message in request.body["messages"]:
        text = json.dumps(message["content"]) if not isinstance(message["content"], str) else message["content"]
        if marker in text:
            return text[text.index(marker) + len(marker) :].strip()
    return ""


def _codex_tool_result(request: ModelRequest) -> str:
    outputs = [i["output"] for i in request.body["input"] if i.get("type") == "function_call_output"]
    return outputs[-1] if outputs else ""


def _codex_context(request: ModelRequest) -> str:
    for item in request.body["input"]:
        if item.get("type") == "message" and item.get("role") == "developer":
            text = "".join(c.get("text", "") for c in item["content"])
            if text.startswith("contextfold"):
                return text
    return ""


def _claude_run(workdir: Path, hooks: bool, huge: str) -> dict[str, Any]:
    with serve_messages_api() as fake:
        agent = ClaudeCode(claude_binary(), workdir, fake)
        if hooks:
            _install(agent, "claude-code")
        fake.script(
            call("Bash", {"command": huge, "description": "List the numbers"}),
            call("Bash", {"command": "echo small"}, input_tokens=int(CLAUDE_COMPACT_WINDOW * 0.95)),
            say("Checked."),
        )
        started = time.perf_counter()
        agent.prompt(PROMPT).ok()
        seconds = time.perf_counter() - started
        turns, after = fake.turns(), fake.after_compaction()
        return {
            "seconds": seconds,
            **_gaps(started, turns),
            "tool_result": _claude_tool_result(turns[1]),
            "context": _claude_context(after[0]) if after else "",
            "compactions": len(fake.compactions()),
        }


def _codex_run(workdir: Path, hooks: bool, huge: str) -> dict[str, Any]:
    with serve_responses_api() as fake:
        agent = Codex(codex_binary(), workdir, fake)
        if hooks:
            _install(agent, "codex")
        fake.script(
            call("exec_command", {"cmd": huge}),
            call("exec_command", {"cmd": "echo small"}, input_tokens=agent.auto_compact_limit + 10_000),
            say("Checked."),
        )
        started = time.perf_counter()
        agent.exec(PROMPT).ok()
        seconds = time.perf_counter() - started
        turns, after = fake.turns(), fake.after_compaction()
        return {
            "seconds": seconds,
            **_gaps(started, turns),
            "tool_result": _codex_tool_result(turns[1]),
            "context": _codex_context(after[0]) if after else "",
            "compactions": len(fake.compactions()),
        }


def _gaps(started: float, turns: list[ModelRequest]) -> dict[str, float]:
    """Seconds between the three main turns' arrivals (the script has exactly three)."""
    first, after_huge, after_compaction = (t.received for t in turns[:3])
    return {"start": first - started, "tool": after_huge - first, "compaction": after_compaction - after_huge}


def _arm(agent: str, hooks: bool, run: Callable[[Path, bool, str], dict[str, Any]], opts: Options) -> dict[str, Any]:
    huge = QUICK_HUGE if opts.quick else HUGE
    runs = []
    for _ in range(opts.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-agents-") as scratch:
            runs.append(run(Path(scratch), hooks, huge))
    last = runs[-1]
    context, result = last["context"], last["tool_result"]
    return {
        "agent": agent,
        "hooks": "contextfold" if hooks else "none",
        "run s": f"{median(r['seconds'] for r in runs):.2f}",
        "to 1st request": f"{median(r['start'] for r in runs):.2f}",
        "huge output turn": f"{median(r['tool'] for r in runs):.2f}",
        "compaction": f"{median(r['compaction'] for r in runs):.2f}",
        "compactions": last["compactions"],
        "model got for the huge output": f"{len(result):,} chars / {_count(result):,} tok",
        "added after compaction": f"{len(context):,} chars / {_count(context):,} tok" if context else "nothing",
        "has the instruction": "yes" if INSTRUCTION in context else "no",
        "names the spilled id": "yes" if _OUTPUT_ID.search(context) else "no",
    }


def main() -> None:
    opts = options(__doc__.split("\n", 1)[0], repeat=3)
    rows, notes = [], []
    for agent, find, run, _label in (
        ("Claude Code 2.1.197", claude_binary, _claude_run, "claude"),
        ("Codex 0.169.0", codex_binary, _codex_run, "codex"),
    ):
        try:
            find()
        except AgentMissing as missing:
            notes.append(f"{agent}: not measured, {missing}")
            continue
        rows.append(_arm(agent, False, run, opts))
        rows.append(_arm(agent, True, run, opts))
    notes.append(
        "Seconds are medians of the runs; the three after `run s` are where it went (see the script's docstring)."
    )
    notes.append(
        f"One session per run: `{QUICK_HUGE if opts.quick else HUGE}`, a command reporting usage past the limit "
        "(Claude Code: 190,000 of CLAUDE_CODE_AUTO_COMPACT_WINDOW=200,000; Codex: 160,000 over "
        "model_auto_compact_token_limit=150,000), a reply; fake model on loopback, fresh home per run."
    )
    notes.append(
        "Claude Code alone sends a 2 KB head of the output and a path to the file it saved; Codex alone sends "
        "its own head-and-tail cut. Codex's hooks do not replace tool outputs (it cuts them to ~10 KB itself)."
    )
    report(
        "agents",
        "Inside the real agents: one session with a huge output and a compaction, with and without contextfold's hooks",
        rows,
        opts,
        notes=notes,
    )


if __name__ == "__main__":
    main()

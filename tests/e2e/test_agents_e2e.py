"""contextfold inside the real agents: `contextfold hooks install`, then Claude Code and Codex at work.

Each test installs contextfold's hooks and MCP server into a scratch home with the real command a user
runs, then runs the real agent CLI headless (tests/agents_harness.py) against a fake model
(tests/fake_models.py) scripted to run a tool with a huge output and to report usage past the agent's
compaction limit, so the agent compacts for real. What the fake model is sent afterwards shows whether
the hooks did their work:

- Claude Code: the request after the huge Bash output carries contextfold's preview and read_output
  hint, not Claude Code's own 2 KB head; the model's read_output call, through the MCP server the
  installer added, returns the output's last lines (the whole output was spilled, not the 30,000-character
  cut the hook is handed); the first request after the compaction carries contextfold's additional
  context (the user's words, the spilled output's id, the search_history line).
- Codex: the hooks run without `--dangerously-bypass-hook-trust` (the installer trusted them), and the
  first request after the compaction carries contextfold's additional context.

Without the CLIs installed (`npm ci --prefix tests/agents`) these skip locally and fail under CI=true.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
from agents_harness import (
    CLAUDE_COMPACT_WINDOW,
    Agent,
    ClaudeCode,
    Codex,
)
from fake_models import DEFAULT_SUMMARY, ModelRequest, Turn, call, say

pytestmark = [pytest.mark.npm]

HUGE_COMMAND = "seq 1 200000"  # 200,000 lines, 1,288,895 bytes
PROMPT = "List the numbers up to 200000 with seq, then check the last ones. Never delete files in this project."
OUTPUT_ID = re.compile(r"out_[0-9A-Za-z]+")
SERVER = "contextfold"  # the MCP server's name in the agents' settings


def contextfold(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    """`contextfold ARGS...` as the user would type it, with the agent's HOME, cwd and data home."""
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        cwd=agent.cwd,
        env=agent.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"contextfold {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _tool_result_text(request: ModelRequest) -> str:
    """The text of the tool results in a Messages request's last message."""
    texts = []
    for block in request.body["messages"][-1]["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            content = block["content"]
            texts.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
    assert texts, f"request {request.index} carries no tool result"
    return "\n".join(texts)


def _read_back(last_lines: int) -> Callable[[ModelRequest], Turn]:
    """A model turn that reads the end of the output just spilled, by the id the preview gave it."""

    def step(request: ModelRequest) -> Turn:
        found = OUTPUT_ID.search(_tool_result_text(request))
        assert found, f"no output id in what the model was sent: {_tool_result_text(request)[-1500:]}"
        offset = 200_000 - last_lines + 1
        return call(f"mcp__{SERVER}__read_output", {"id": found.group(0), "offset": offset, "limit": last_lines})

    return step


def test_claude_code_with_contextfold_hooks(claude: ClaudeCode) -> None:
    installed = contextfold(claude, "hooks", "install", "claude-code")
    assert "PostToolUse" in json.dumps(claude.settings().get("hooks", {})), installed.stdout
    assert "Connected" in claude.mcp_list().get(SERVER, ""), claude.run("mcp", "list").stdout

    claude.fake.script(
        call("Bash", {"command": HUGE_COMMAND, "description": "List the numbers"}),
        _read_back(3),
        call("Bash", {"command": "echo small"}, input_tokens=int(CLAUDE_COMPACT_WINDOW * 0.95)),
        say("Checked."),
    )
    run = claude.prompt(PROMPT, allowed_tools=("Bash", f"mcp__{SERVER}")).ok()
    assert run.result["result"] == "Checked.", run.describe()
    session = run.result["session_id"]

    turns = claude.fake.turns()
    assert len(turns) == 4, claude.fake.kinds()  # the four scripted turns, the last one after the compaction
    # PostToolUse: the model got contextfold's preview with the read_output hint, not Claude Code's own head.
    preview = _tool_result_text(turns[1])
    assert "<persisted-output>" not in preview and "Output too large" not in preview, preview[:2000]
    assert "read_output" in preview and OUTPUT_ID.search(preview), preview[-2000:]
    assert len(preview) < 30_000, len(preview)
    output_id = OUTPUT_ID.search(preview).group(0)
    # read_output through the installed MCP server, on the hooks' data home: the whole output was spilled.
    read = json.loads(_tool_result_text(turns[2]))  # Claude Code hands over the structured result as JSON
    assert read["output_id"] == output_id and read["total_lines"] == 200_000, read
    assert read["text"] == "199998\t199998\n199999\t199999\n200000\t200000", read

    # PreCompact -> SessionStart(compact): the first request after the compaction has contextfold's context.
    (after,) = claude.fake.after_compaction()
    assert after.index == turns[3].index
    assert after.contains(DEFAULT_SUMMARY)
    context = "\n".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in after.body["messages"]
        if m["role"] == "system" and "SessionStart hook additional context" in json.dumps(m["content"])
    )
    assert context, [m["role"] for m in after.body["messages"]]
    assert "search_history" in context, context
    assert output_id in context, context
    assert "Never delete files in this project" in context, context

    # The transcript went into the store under the agent's session id.
    listing = contextfold(claude, "sessions").stdout
    assert session in listing, listing


def _developer_texts(request: ModelRequest) -> list[str]:
    """The developer messages of a Responses request (where Codex puts a hook's additional context)."""
    return [
        "".join(c.get("text", "") for c in item["content"])
        for item in request.body["input"]
        if item.get("type") == "message" and item.get("role") == "developer"
    ]


def _search_history(request: ModelRequest) -> Turn:
    """A model turn searching the stored history, in the session the additional context names."""
    found = [m for text in _developer_texts(request) for m in re.findall(r'search_history\(session_id="([^"]+)"', text)]
    assert found, f"no session id in the developer messages: {_developer_texts(request)}"
    return call("search_history", {"session_id": found[0], "pattern": "Never delete"}, namespace=f"mcp__{SERVER}")


def test_codex_with_contextfold_hooks(codex: Codex) -> None:
    contextfold(codex, "hooks", "install", "codex")
    status = contextfold(codex, "hooks", "status", "codex").stdout
    assert "trusted" in status and "untrusted" not in status.lower(), status

    codex.fake.script(
        call("exec_command", {"cmd": HUGE_COMMAND}),
        call("exec_command", {"cmd": "echo small"}, input_tokens=codex.auto_compact_limit + 10_000),
        _search_history,
        say("Checked."),
    )
    # No --dangerously-bypass-hook-trust: only hooks the installer trusted can run.
    run = codex.exec(PROMPT).ok()
    thread = next(e["thread_id"] for e in run.events if e["type"] == "thread.started")

    assert codex.fake.kinds() == ["turn", "turn", "compaction", "turn", "turn"], codex.fake.describe()
    after, last = codex.fake.after_compaction()
    assert after.contains(DEFAULT_SUMMARY)
    # PreCompact -> PostCompact -> SessionStart(compact): contextfold's context, as a developer message.
    context = "\n".join(text for text in _developer_texts(after) if "search_history" in text)
    assert context, _developer_texts(after)
    assert "Never delete files in this project" in context, context
    assert thread in context, context  # the session the hooks stored the rollout under

    # The installed MCP server reads the same data home: search_history finds the user's words.
    (found,) = [i["output"] for i in last.body["input"] if i.get("type") == "function_call_output"][-1:]
    assert "Never delete files in this project" in found, found


def test_a_pin_made_in_claude_code_reaches_the_first_request_after_its_compaction(claude: ClaudeCode) -> None:
    """The user pins a fact with a `pin:` prompt; Claude Code compacts for real; the first request
    after it carries the pin word for word in contextfold's SessionStart context (not as a quote of
    the user's words: as the pin)."""
    contextfold(claude, "hooks", "install", "claude-code")
    claude.fake.script(
        call("Bash", {"command": "echo one"}),
        call("Bash", {"command": "echo two"}),
        call("Bash", {"command": "echo small"}, input_tokens=int(CLAUDE_COMPACT_WINDOW * 0.95)),
        say("Done."),
    )
    run = claude.prompt("pin: Always answer in French.", allowed_tools=("Bash",)).ok()
    assert run.result["result"] == "Done.", run.describe()
    first = claude.fake.turns()[0]
    assert first.contains("contextfold: pinned p1"), "the UserPromptSubmit hook did not confirm the pin"
    (after,) = claude.fake.after_compaction()
    context = "\n".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in after.body["messages"]
        if m["role"] == "system" and "SessionStart hook additional context" in json.dumps(m["content"])
    )
    assert "contextfold: pinned in this session" in context and "- [p1] Always answer in French." in context, context
    listing = contextfold(claude, "pins", f"claude-code-{run.result['session_id']}").stdout
    assert "p1  note: Always answer in French." in listing, listing

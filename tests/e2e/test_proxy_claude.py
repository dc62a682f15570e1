"""`contextfold proxy` inside a real client: the `claude` CLI (pinned 2.1.197) run headless against a
fake Messages API on loopback (tests/agents_harness.py, tests/fake_models.py).

The upstream is @modelcontextprotocol/server-filesystem reading a 3.4 MB file. Added directly, Claude
Code refuses the result and tells the model it was saved to a file of its own; added as `claude mcp
add files -- contextfold proxy -- …`, the model receives contextfold's preview with the read_output
hint, and its read_output call, through the same connection, returns the file's last lines.

Needs the pinned CLIs (`npm ci --prefix tests/agents`) and servers (`npm ci --prefix tests/upstreams`);
without them these skip locally and fail under CI=true.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from _proxy import npm_server
from agents_harness import ClaudeCode
from fake_models import ModelRequest, Turn, call, say

pytestmark = [pytest.mark.npm]

OUTPUT_ID = re.compile(r"out_[0-9A-Za-z]+")
LINES = 62_000


def big_file(root: Path) -> tuple[Path, str]:
    root.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{i:06d} the quick brown fox jumps over the lazy dog {i * 7919 % 1000:03d}\n" for i in range(LINES))
    path = root / "big.log"
    path.write_text(text)
    return path, text


def filesystem(root: Path) -> list[str]:
    return [str(npm_server("@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")), str(root)]


def tool_result_text(request: ModelRequest) -> str:
    """The text of the tool results in a Messages request's last message."""
    texts = []
    for block in request.body["messages"][-1]["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            content = block["content"]
            texts.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
    assert texts, f"request {request.index} carries no tool result"
    return "\n".join(texts)


def read_back(server: str) -> Callable[[ModelRequest], Turn]:
    """The model's next turn: read the file's last two lines by the id the preview gave it."""

    def step(request: ModelRequest) -> Turn:
        found = OUTPUT_ID.search(tool_result_text(request))
        assert found, f"no output id in what the model was sent: {tool_result_text(request)[-1500:]}"
        return call(f"mcp__{server}__read_output", {"id": found.group(0), "offset": LINES - 1, "limit": 2})

    return step


def test_without_the_proxy_claude_code_refuses_the_result(claude: ClaudeCode, tmp_path: Path) -> None:
    path, text = big_file(claude.cwd)  # server-filesystem serves the roots Claude Code gives it: its project
    claude.add_mcp_server("files", *filesystem(path.parent))
    claude.fake.script(call("mcp__files__read_text_file", {"path": str(path)}), say("Done."))
    claude.prompt("Read big.log", allowed_tools=("mcp__files",)).ok()
    received = tool_result_text(claude.fake.turns()[1])
    assert "exceeds maximum allowed tokens" in received and "000000 the quick" not in received, received[:1000]


def test_through_the_proxy_the_model_gets_the_preview_and_reads_the_rest(claude: ClaudeCode, tmp_path: Path) -> None:
    path, text = big_file(claude.cwd)
    assert len(text) > 3_300_000
    claude.add_mcp_server("files", "contextfold", "proxy", "--", *filesystem(path.parent))
    assert "Connected" in claude.mcp_list().get("files", ""), claude.run("mcp", "list").stdout

    claude.fake.script(
        call("mcp__files__read_text_file", {"path": str(path)}),
        read_back("files"),
        say("Read it."),
    )
    run = claude.prompt("Read big.log, then its last lines", allowed_tools=("mcp__files",)).ok()
    assert run.result["result"] == "Read it.", run.describe()

    turns = claude.fake.turns()
    assert len(turns) == 3, claude.fake.kinds()
    preview = tool_result_text(turns[1])
    assert "exceeds maximum allowed tokens" not in preview
    assert "000000 the quick brown fox" in preview and "Full output saved as out_" in preview
    assert "read_output(id=" in preview and len(preview) < 30_000, len(preview)
    last = tool_result_text(turns[2])
    expected = text.splitlines()[-2:]
    assert f"{LINES - 1}\t{expected[0]}\n{LINES}\t{expected[1]}" in last, last[:500]
    assert f"{OUTPUT_ID.search(preview).group(0)}: {LINES:,} lines" in last

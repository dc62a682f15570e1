"""Steering over real processes: the MCP server as a stdio subprocess with the SDK's client, and
the `contextfold` command (docs/steering.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio


def turn(i: int, size: int = 300) -> list[dict]:
    output = "\n".join(f"line {j} of step {i}: src/module_{i}/file_{j}.py ok" for j in range(size))
    return [
        {"role": "user", "content": f"Step {i}: look at module_{i}."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls {i}"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        {"role": "assistant", "content": f"Module {i} holds {size} files."},
    ]


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "CONTEXTFOLD_HOME": str(home), "CONTEXTFOLD_SUMMARIZER": "extractive", "COLUMNS": "200"}
    env.pop("ANTHROPIC_API_KEY", None)
    return env


def cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(home),
        timeout=120,
    )


async def test_preview_apply_pin_and_undo_over_stdio(tmp_path: Path):
    params = StdioServerParameters(command=sys.executable, args=["-m", "contextfold", "serve"], env=_env(tmp_path))
    async with Client(params) as c:
        await c.call_tool("session_open", {"session_id": "st", "model": "gpt-4o"})
        for i in range(12):
            await c.call_tool("append", {"session_id": "st", "messages": turn(i)})
        pinned = await c.call_tool("pin", {"session_id": "st", "ref": "m4"})
        assert not pinned.is_error and pinned.structured_content["pins"][0]["ref"] == "m4"
        noted = await c.call_tool("pin", {"session_id": "st", "note": "Ship only signed builds."})
        assert [p["id"] for p in noted.structured_content["pins"]] == ["p1", "p2"]
        before = (await c.call_tool("get_context", {"session_id": "st"})).structured_content

        preview = (await c.call_tool("compact", {"session_id": "st", "dry_run": True})).structured_content
        assert preview["token"] and preview["view"][:3] == ["marker", "summary", "m4"]
        assert "Pinned: Ship only signed builds." in preview["summary"]
        applied = await c.call_tool("compact", {"session_id": "st", "apply": preview["token"]})
        assert not applied.is_error, applied.content
        after = (await c.call_tool("get_context", {"session_id": "st"})).structured_content
        summaries = [
            m["content"] for m in after["messages"] if m["role"] == "assistant" and "## Goal" in str(m["content"])
        ]
        assert summaries == [preview["summary"]]  # exactly the previewed text
        assert {"role": "user", "content": "Step 1: look at module_1."} in after["messages"]  # the pinned m4

        again = await c.call_tool("compact", {"session_id": "st", "apply": preview["token"]})
        assert again.is_error and "changed since preview" in again.content[0].text

        bad = await c.call_tool("compact", {"session_id": "st", "edit": "## Goal\n- Ship it [m999]"})
        assert bad.is_error and "citation [m999] names no stored message" in bad.content[0].text
        good = await c.call_tool("compact", {"session_id": "st", "edit": "## Key Decisions\n- Keep module_2 [m7]"})
        assert not good.is_error and "- Keep module_2 [m7]" in good.structured_content["summary"]

        undone = await c.call_tool("compact", {"session_id": "st", "undo": True})
        assert not undone.is_error, undone.content
        restored = (await c.call_tool("get_context", {"session_id": "st"})).structured_content
        assert restored["messages"] == before["messages"] and restored["version"] == before["version"]

        status = (await c.call_tool("status", {"session_id": "st"})).structured_content
        assert status["pinned_tokens"] > 0
        handed = (await c.call_tool("handoff", {"session_id": "st", "to": "codex"})).structured_content
        assert "Pinned: Ship only signed builds." in handed["text"] and handed["tokens"] <= handed["budget"]


def test_pin_preview_apply_and_undo_from_the_command_line(tmp_path: Path):
    home = tmp_path / "home"
    source = tmp_path / "s.json"
    source.write_text(json.dumps([m for i in range(12) for m in turn(i)]), "utf-8")
    out = cli(home, "import", str(source), "--session", "c", "--format", "openai", "--model", "gpt-4o")
    assert out.returncode == 0, out.stderr
    out = cli(home, "pin", "c", "m4")
    assert out.returncode == 0 and "p1  m4" in out.stdout, out.stderr
    out = cli(home, "pin", "c", "m999")
    assert out.returncode == 2 and "m999 is not a stored message" in out.stderr
    before = json.loads(cli(home, "export", "c").stdout)

    out = cli(home, "compact", "c", "--dry-run", "--json")
    preview = json.loads(out.stdout)
    out = cli(home, "compact", "c", "--apply", preview["token"], "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["compacted"]
    shown = json.loads(cli(home, "export", "c").stdout)
    assert [m["content"] for m in shown["messages"] if "## Goal" in str(m["content"])] == [preview["summary"]]

    out = cli(home, "edit", "c", stdin="## Goal\n- Ship it [m999]\n")
    assert out.returncode == 2 and "citation [m999] names no stored message" in out.stderr
    out = cli(home, "edit", "c", stdin="## Next Steps\n- Check module_11 again [m34]\n")
    assert out.returncode == 0 and "- Check module_11 again [m34]" in out.stdout, out.stderr

    out = cli(home, "undo", "c")
    assert out.returncode == 0 and "undid the last compaction" in out.stdout, out.stderr
    assert json.loads(cli(home, "export", "c").stdout) == before

    out = cli(home, "prune", "c", "--dry-run", "--keep-tool-uses", "2")
    assert out.returncode == 0 and "would clear: m" in out.stdout
    token = next(w for w in out.stdout.split() if w.startswith("prune-"))
    out = cli(home, "prune", "c", "--apply", token)
    assert out.returncode == 0 and "cleared 10 tool outputs" in out.stdout, out.stdout + out.stderr
    out = cli(home, "undo", "c", "--prune")
    assert out.returncode == 0 and "undid the last prune" in out.stdout
    assert json.loads(cli(home, "export", "c").stdout) == before
    out = cli(home, "pins", "c", "--json")
    assert [p["ref"] for p in json.loads(out.stdout)["pins"]] == ["m4"]


def test_a_range_compaction_from_the_command_line_keeps_what_is_around_it(tmp_path: Path):
    home = tmp_path / "home"
    source = tmp_path / "s.json"
    source.write_text(json.dumps([m for i in range(12) for m in turn(i)]), "utf-8")
    assert cli(home, "import", str(source), "--session", "r", "--format", "openai", "--model", "gpt-4o").returncode == 0
    before = json.loads(cli(home, "export", "r").stdout)["messages"]
    out = cli(home, "compact", "r", "--range", "m4..m27", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["strategy"] == "range"
    after = json.loads(cli(home, "export", "r").stdout)["messages"]
    assert after[:4] == before[:4]  # turn 0: its request, the call, its result, the answer
    assert after[-12:] == before[-12:]  # turns 9 to 11
    assert "are summarized below" in after[4]["content"]
    out = cli(home, "undo", "r")
    assert out.returncode == 0, out.stderr
    assert json.loads(cli(home, "export", "r").stdout)["messages"] == before
    out = cli(home, "handoff", "r", "--to", "claude-code", "--tokens", "1500")
    assert out.returncode == 0 and 'search_history(session_id="r"' in out.stdout and "## Goal" in out.stdout

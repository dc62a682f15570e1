"""Secrets never enter a summary (issue 27, item 2), over the real stdio server.

A session whose user pasted keys, whose commands carried tokens and whose outputs printed config
files with passwords is compacted by `contextfold serve` in a subprocess: the summary the model
gets holds none of the seeded secrets (`benchmarks/_secrets.py`), while the stored history keeps
them — `search_history` still finds the user's original words.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from _secrets import leaks, seeded_secrets
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

SEED = 5


def conversation(seed: int) -> list[dict[str, Any]]:
    """OpenAI Chat messages: the user's request with secrets in it, a command with tokens, an output
    printing config files, an edit, a failing test, then a later request and an answer."""
    seeded = seeded_secrets(seed)
    said = "\n".join(s.text for s in seeded if s.where == "user")
    command = " && ".join(s.text for s in seeded if s.where == "command")
    output = "\n\n".join(s.text for s in seeded if s.where == "output")

    def called(call_id: str, name: str, args: dict[str, Any], result: str, text: str) -> list[dict[str, Any]]:
        return [
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]

    return [
        {"role": "user", "content": "Deploy the app to staging and fix the failing health check.\n" + said},
        *called("c1", "bash", {"command": command}, output, "Checking the deployment settings."),
        *called("c2", "bash", {"command": "cat config/runtime.exs"}, output, "Reading the runtime config."),
        *called(
            "c3",
            "bash",
            {"command": "pytest -q tests/test_health.py"},
            "E   KeyError: 'DB_HOST'\n1 failed, 2 passed",
            "Running the health check test.",
        ),
        {"role": "assistant", "content": "The health check fails on a missing DB_HOST."},
        {"role": "user", "content": "Keep the deploy script idempotent and rerun the test."},
        *called("c4", "bash", {"command": "pytest -q"}, "3 passed", "Rerunning."),
        {"role": "assistant", "content": "All three tests pass now."},
    ]


async def test_a_compaction_over_stdio_gives_no_secret_away_and_the_history_keeps_them(tmp_path: Path) -> None:
    seeded = seeded_secrets(SEED)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_"))}
    env["CONTEXTFOLD_HOME"] = str(tmp_path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "contextfold", "serve"], env=env)
    async with Client(params) as client:
        await client.call_tool("session_open", {"session_id": "s", "model": "gpt-4o"})
        appended = await client.call_tool("append", {"session_id": "s", "messages": conversation(SEED)})
        assert not appended.is_error, appended.content
        compacted = await client.call_tool("compact", {"session_id": "s", "summarizer": "extractive"})
        assert not compacted.is_error, compacted.content
        assert compacted.structured_content["compacted"]

        context = await client.call_tool("get_context", {"session_id": "s"})
        messages = context.structured_content["messages"]
        summary = next(m["content"] for m in messages if m["role"] == "assistant" and "## Goal" in m["content"])
        assert not leaks(summary, seeded), leaks(summary, seeded)
        assert "[redacted]" in summary
        assert "Deploy the app to staging" in summary and "KeyError" in summary  # the rest is still there

        # The stored history is the user's: the original words are found.
        token = next(s for s in seeded if s.label == "prose, a token given in words").secrets[0]
        found = await client.call_tool("search_history", {"session_id": "s", "pattern": re.escape(token)})
        assert not found.is_error, found.content
        assert token in found.structured_content["text"]

"""A minimal agent loop that keeps its history in contextfold over MCP.

Each turn: append the new messages, read `status`, prune or compact when it advises, fetch the
context with `get_context`, call the model, run the tools it asks for, append their results.

The model is Anthropic's when ANTHROPIC_API_KEY is set; otherwise a scripted stand-in that emits
real tool calls, so the loop runs offline as it is:

    python examples/agent_loop.py                          # a throwaway data home, removed at the end
    CONTEXTFOLD_HOME=~/cf-demo python examples/agent_loop.py  # kept: `contextfold show example-agent`
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp import Client, StdioServerParameters

SESSION = "example-agent"
TASK = "Find the largest file under this directory and tell me its size. Never modify any file."


@contextmanager
def workspace() -> Iterator[str]:
    """A small directory for the agent to look at, so the run is the same everywhere; removed after."""
    with tempfile.TemporaryDirectory(prefix="contextfold-workspace-") as root:
        for name, size in [("notes.txt", 120), ("data.csv", 48_000), ("report.md", 2_300)]:
            with open(os.path.join(root, name), "w") as f:
                f.write("x" * size)
        yield root


@contextmanager
def data_home() -> Iterator[str]:
    """$CONTEXTFOLD_HOME when it is set (kept), else a throwaway data home removed at the end."""
    if os.environ.get("CONTEXTFOLD_HOME"):
        yield os.environ["CONTEXTFOLD_HOME"]
        return
    with tempfile.TemporaryDirectory(prefix="contextfold-example-") as home:
        yield home


def run_tool(name: str, args: dict[str, Any], cwd: str) -> str:
    """The agent's only tool: a shell command (read-only by the task's own constraint)."""
    if name != "bash":
        return f"error: unknown tool {name}"
    done = subprocess.run(args["command"], shell=True, capture_output=True, text=True, timeout=30, cwd=cwd)
    return (done.stdout + done.stderr) or f"(exit {done.returncode}, no output)"


class ScriptedModel:
    """Stands in for an LLM: a fixed plan of tool calls, then an answer built from what it saw."""

    def __init__(self) -> None:
        self.steps = [
            ("bash", {"command": "ls -la"}),
            ("bash", {"command": "find . -type f -printf '%s %p\\n' | sort -n | tail -3"}),
        ]

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        step = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
        if step < len(self.steps):
            name, args = self.steps[step]
            call = {"id": f"call_{step}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            return {"role": "assistant", "content": f"Step {step + 1}: running {args['command']}", "tool_calls": [call]}
        last = next(m for m in reversed(messages) if m["role"] == "tool")["content"].strip().splitlines()
        return {"role": "assistant", "content": f"The largest file is: {last[-1] if last else 'unknown'}"}


async def anthropic_reply(context: dict[str, Any]) -> dict[str, Any]:  # needs ANTHROPIC_API_KEY
    """Call Claude with the context contextfold rendered in Anthropic format; answer in OpenAI shape.

    contextfold takes either format on every append, so the harness can render for one API and
    append in the other: results still attach to their calls by id.
    """
    import anthropic

    tool = {
        "name": "bash",
        "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    }
    request: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "messages": context["messages"],
        "tools": [tool],
    }
    if context.get("system"):
        request["system"] = context["system"]
    response = await anthropic.AsyncAnthropic().messages.create(**request)
    calls = [b for b in response.content if b.type == "tool_use"]
    text = "".join(b.text for b in response.content if b.type == "text")
    if not calls:
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.input)}}
            for c in calls
        ],
    }


async def main() -> None:
    with data_home() as home, workspace() as cwd:
        await run(home, cwd)
    if os.environ.get("CONTEXTFOLD_HOME"):
        print(f"the session is kept in {home}: look at it with `contextfold --home {home} show {SESSION}`")
    else:
        print(
            f"(the throwaway data home is removed; set CONTEXTFOLD_HOME=DIR to keep the session, then "
            f"`contextfold --home DIR show {SESSION}`)"
        )


async def run(home: str, cwd: str) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "contextfold", "serve"], env={**os.environ, "CONTEXTFOLD_HOME": home}
    )
    model = ScriptedModel()
    use_anthropic = bool(os.environ.get("ANTHROPIC_API_KEY"))
    async with Client(server) as cf:
        await cf.call_tool(
            "session_open", {"session_id": SESSION, "model": "gpt-4o", "system": "You are a careful agent."}
        )
        pending: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        for turn in range(8):
            appended = await cf.call_tool("append", {"session_id": SESSION, "messages": pending})
            standing = appended.structured_content["status"]
            print(f"turn {turn}: {standing['tokens_in_view']:,} tokens in view, {standing['state']}")
            if standing["state"] == "soft":
                await cf.call_tool("prune", {"session_id": SESSION})
            elif standing["state"] in ("hard", "overflow"):
                await cf.call_tool("compact", {"session_id": SESSION})
            fmt = "anthropic" if use_anthropic else "openai"
            context = (await cf.call_tool("get_context", {"session_id": SESSION, "format": fmt})).structured_content
            reply = await anthropic_reply(context) if use_anthropic else model.reply(context["messages"])
            print(f"  model: {reply['content']}")
            pending = [reply]
            if not reply.get("tool_calls"):
                await cf.call_tool("append", {"session_id": SESSION, "messages": pending})
                break
            for call in reply["tool_calls"]:
                output = run_tool(call["function"]["name"], json.loads(call["function"]["arguments"]), cwd)
                pending.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        final = (await cf.call_tool("status", {"session_id": SESSION})).structured_content
        print(f"done: {final['message_count']} messages stored, {final['tokens_in_view']:,} tokens in view")


if __name__ == "__main__":
    asyncio.run(main())

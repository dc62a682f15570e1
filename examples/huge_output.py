"""An agent meets a huge tool output and finds what it needs with `read_output`.

A test run prints 60,000 lines; contextfold spills it at ingest and the model sees a preview
whose hint names the output id. The (scripted) agent then greps the spilled output for the
failure and reads the lines around it, instead of flooding its context with all of it:

    python examples/huge_output.py      # a throwaway data home, removed at the end (or $CONTEXTFOLD_HOME, kept)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from mcp import Client, StdioServerParameters

SESSION = "example-huge-output"


def fake_test_run() -> str:
    """60,000 lines of passing tests with one failure buried in the middle."""
    lines = [f"tests/test_module_{i // 100}.py::test_case_{i} PASSED" for i in range(60_000)]
    lines[41_234] = "tests/test_module_412.py::test_case_41234 FAILED - AssertionError: expected 200, got 503"
    return "\n".join(lines) + "\n== 1 failed, 59999 passed in 812.31s ==\n"


@contextmanager
def data_home() -> Iterator[str]:
    """$CONTEXTFOLD_HOME when it is set (kept), else a throwaway data home removed at the end."""
    if os.environ.get("CONTEXTFOLD_HOME"):
        yield os.environ["CONTEXTFOLD_HOME"]
        return
    with tempfile.TemporaryDirectory(prefix="contextfold-example-") as home:
        yield home


async def main() -> None:
    with data_home() as home:
        await run(home)


async def run(home: str) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "contextfold", "serve"], env={**os.environ, "CONTEXTFOLD_HOME": home}
    )
    async with Client(server) as cf:
        await cf.call_tool("session_open", {"session_id": SESSION, "model": "gpt-4o"})
        call = {
            "id": "run_tests",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": "pytest"})},
        }
        appended = await cf.call_tool(
            "append",
            {
                "session_id": SESSION,
                "messages": [
                    {"role": "user", "content": "Run the test suite and tell me what failed."},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "run_tests", "content": fake_test_run()},
                ],
            },
        )
        spilled = appended.structured_content["spilled"][0]
        print(f"spilled {spilled['bytes']:,} bytes in {spilled['lines']:,} lines as {spilled['output_id']}")

        # What the model sees: a preview that ends with a hint naming the id.
        context = (await cf.call_tool("get_context", {"session_id": SESSION})).structured_content
        seen = context["messages"][-1]["content"]
        print(f"the model sees {len(seen):,} characters; the hint: {seen.strip().splitlines()[-1][:120]}…")
        output_id = re.search(r"out_[0-9A-Z]+", seen).group(0)

        # The agent searches instead of reading everything.
        found = (
            await cf.call_tool("read_output", {"id": output_id, "pattern": "FAILED", "context": 1})
        ).structured_content
        print(f"grep FAILED → {found['matches']} match(es):\n{found['text']}")
        match = re.search(r"^(\d+):(.*)$", found["text"], re.M)  # `N:` is a match, `N-` its context
        line, failure = int(match.group(1)), match.group(2)
        around = (
            await cf.call_tool("read_output", {"id": output_id, "offset": line - 2, "limit": 5})
        ).structured_content
        print(f"lines {line - 2}–{line + 2}:\n{around['text']}")
        answer = f"One test failed (line {line:,} of the output): {failure}"
        await cf.call_tool("append", {"session_id": SESSION, "messages": [{"role": "assistant", "content": answer}]})
        print(answer)


if __name__ == "__main__":
    asyncio.run(main())

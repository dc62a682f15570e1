"""What a client receives from a tool: the result once (issue 15).

Structured content for clients that read it, beside one short line of text; the whole result as
compact JSON text for clients older than structured content. Checked on the bytes a real
`contextfold serve` writes to its stdout, for each protocol version a client may negotiate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextfold.mcpserver import answers


def _messages(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test in parser.py."}]
    for i in range(turns):
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"grep -n token src/m{i}.py"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"src/m{i}.py:{i}: token = next(tokens)\n" * 20},
        ]
    return messages


class RawStdio:
    """`contextfold serve` spoken to line by line, keeping each response's raw bytes."""

    def __init__(self, home: Path, version: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")} | {
            "CONTEXTFOLD_HOME": str(home)
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "contextfold", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next_id = 0
        init = self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        assert init[0]["result"]["protocolVersion"] == version
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "the server closed its stdout"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message, len(line)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        response, size = self.request("tools/call", {"name": name, "arguments": arguments})
        assert not response["result"].get("isError"), response
        return response["result"], size

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def raw(tmp_path: Path, request: pytest.FixtureRequest):
    server = RawStdio(tmp_path, request.param)
    yield server
    server.close()


@pytest.mark.parametrize("raw", ["2025-06-18", "2025-11-25"], indirect=True)
def test_a_client_reading_structured_content_gets_the_result_once(raw: RawStdio):
    raw.call("session_open", {"session_id": "s", "model": "gpt-4o"})
    messages = _messages(200)
    raw.call("append", {"session_id": "s", "messages": messages})
    result, size = raw.call("get_context", {"session_id": "s"})
    shipped = result["structuredContent"]["messages"]
    assert len(shipped) == len(messages)
    (text,) = result["content"]
    assert "\n" not in text["text"] and len(text["text"]) < 300, text
    assert "messages=[401 items]" in text["text"]
    # The answer on the wire is the messages' JSON and a little more, not twice it.
    assert size <= 1.3 * len(json.dumps(shipped))
    # Where a model reads the text, it is there in full after the line.
    read, _ = raw.call("spill", {"session_id": "s", "text": "alpha\nbeta\n" * 2_000})
    page, _ = raw.call("read_output", {"id": read["structuredContent"]["output_id"], "offset": 3, "limit": 2})
    assert page["content"][0]["text"].endswith("\n3\talpha\n4\tbeta")


@pytest.mark.parametrize("raw", ["2025-03-26"], indirect=True)
def test_a_client_before_structured_content_gets_the_whole_result_as_text(raw: RawStdio):
    raw.call("session_open", {"session_id": "s", "model": "gpt-4o"})
    raw.call("append", {"session_id": "s", "messages": _messages(3)})
    result, _ = raw.call("get_context", {"session_id": "s"})
    (text,) = result["content"]
    assert json.loads(text["text"]) == result["structuredContent"]
    assert "\n" not in text["text"]  # compact, not indented


def test_the_summary_line_names_every_field_and_keeps_readable_text():
    line = answers.summary_text(
        {
            "output_id": "out_1",
            "text": "1\ta\n2\tb",
            "has_more": False,
            "status": {"state": "ok", "tokens": 5, "advice": ["x"]},
        }
    )
    assert (
        line
        == 'output_id="out_1", has_more=false, status={state="ok", tokens=5} (full result in structuredContent)\n1\ta\n2\tb'
    )
    assert answers.summary_text({"summary": "x" * 500, "note": "y" * 500}).count("x") == 500

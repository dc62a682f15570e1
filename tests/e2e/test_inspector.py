"""End to end through an independent client: the MCP Inspector CLI (the TypeScript SDK) over stdio.

Every call is its own Inspector process, which starts its own `python -m contextfold serve`. The
calls of one test share a data home (CONTEXTFOLD_HOME), so state carries across them in SQLite.

The Inspector is pinned in tests/inspector/package.json; install it with
`npm ci --prefix tests/inspector` (.ci/run does). Without npm the tests skip locally; with CI set they
fail instead, so CI cannot pass without running them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.npm]

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR_DIR = ROOT / "tests" / "inspector"
INSPECTOR_BIN = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
INSTALL = "npm ci --prefix tests/inspector"

CALL_TIMEOUT = 45  # seconds, per Inspector process (normally about 3-4 s: node plus the server's imports)
MODERN = "2026-07-28"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"  # only the modern era carries it in results
TOOL_ERROR_EXIT = 5  # the Inspector's exit code for a tool result with isError


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def _pinned_version() -> str:
    package = json.loads((INSPECTOR_DIR / "package.json").read_text())
    return package["devDependencies"][INSPECTOR_PACKAGE]


@pytest.fixture(scope="module")
def inspector() -> Path:
    """The installed Inspector binary, or a skip (a failure under CI) saying what is missing."""
    for tool in ("npm", "node"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} is not installed: the MCP Inspector tests need Node.js and npm, then `{INSTALL}`")
    if not INSPECTOR_BIN.exists():
        _unavailable(f"the MCP Inspector is not installed in {INSPECTOR_DIR}: run `{INSTALL}`")
    installed = json.loads((INSPECTOR_DIR / "node_modules" / INSPECTOR_PACKAGE / "package.json").read_text())["version"]
    if installed != _pinned_version():
        _unavailable(f"the installed MCP Inspector is {installed}, not the pinned {_pinned_version()}: run `{INSTALL}`")
    return INSPECTOR_BIN


class Inspector:
    """Runs `mcp-inspector --cli <server> <options>` and returns the parsed JSON result."""

    def __init__(self, binary: Path, tmp: Path) -> None:
        self.binary = binary
        self.data = tmp / "data"
        # The Inspector writes its own state under HOME, and the TypeScript SDK gives a stdio server only
        # a few variables of its environment (HOME, PATH, ...), not CONTEXTFOLD_HOME: that goes through
        # `-e`. A private HOME also keeps a server that missed it out of the real ~/.local/share.
        self.env = {**os.environ, "HOME": str(tmp / "home"), "CONTEXTFOLD_HOME": str(self.data)}
        (tmp / "home").mkdir()
        self.cwd = tmp

    def command(self, *options: str, era: str | None = None) -> list[str]:
        # Options come after the server command: `--cli -q python ...` would try to spawn "-q".
        server = [sys.executable, "-m", "contextfold", "serve"]
        era_option = ["--protocol-era", era] if era else []
        return [
            str(self.binary), "--cli", *server,
            "-e", f"CONTEXTFOLD_HOME={self.data}",
            "--format", "json", "-q", *era_option, *options,
        ]  # fmt: skip

    def run(self, *options: str, era: str | None = None, exit_code: int = 0) -> dict[str, Any]:
        done = subprocess.run(
            self.command(*options, era=era),
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
        )
        described = (
            f"{' '.join(options)[:500]}\nexit {done.returncode}\n"
            f"stdout: {done.stdout[:2000]}\nstderr: {done.stderr[-2000:]}"
        )
        assert done.returncode == exit_code, described
        self.stderr = done.stderr
        try:
            output = json.loads(done.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"stdout is not one JSON object ({exc})\n{described}") from None
        assert set(output) == {"result"}, described
        return output["result"]

    def call(self, tool: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.run(
            "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments), **kwargs
        )


@pytest.fixture
def cli(inspector: Path, tmp_path: Path) -> Inspector:
    return Inspector(inspector, tmp_path)


EXPECTED_TOOLS = {
    "count_tokens", "session_open", "session_list", "session_delete", "append", "get_context",
    "status", "prune", "select_tail", "spill", "read_output", "compact", "summarize",
}  # fmt: skip


def test_tools_list_has_schemas_and_annotations(cli: Inspector) -> None:
    tools = {tool["name"]: tool for tool in cli.run("--method", "tools/list")["tools"]}

    assert EXPECTED_TOOLS <= set(tools), sorted(EXPECTED_TOOLS - set(tools))
    for name, tool in tools.items():
        assert tool["outputSchema"]["type"] == "object", name
        assert tool["outputSchema"]["properties"], name
        annotations = tool["annotations"]
        assert tool["title"], name
        # Hints at their protocol defaults are left out (readOnly and idempotent: false); the
        # protocol reads destructiveHint only when readOnlyHint is false.
        assert annotations["openWorldHint"] is False, name
        assert annotations.get("readOnlyHint", False) is not isinstance(annotations.get("destructiveHint"), bool), name
    assert tools["status"]["annotations"]["readOnlyHint"] is True
    assert tools["status"]["annotations"]["idempotentHint"] is True
    assert "readOnlyHint" not in tools["append"]["annotations"]
    assert tools["append"]["annotations"]["destructiveHint"] is False
    assert tools["session_delete"]["annotations"]["destructiveHint"] is True
    assert tools["read_output"]["inputSchema"]["properties"]["offset"]["minimum"] == 1


def test_spilled_output_across_processes_and_eras(cli: Inspector) -> None:
    opened = cli.call("session_open", {"session_id": "big", "model": "gpt-4o"})
    assert opened["isError"] is False
    assert opened["structuredContent"]["state"] == "ok"
    assert SERVER_INFO_META not in opened.get("_meta", {})  # the default, legacy handshake
    assert (cli.data / "contextfold.db").is_file()  # -e reached the server

    text = "".join(f"line {i}\n" for i in range(1, 5_001))
    appended = cli.call(
        "append",
        {
            "session_id": "big",
            "messages": [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"seq\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": text},
            ],
        },
    )  # fmt: skip
    assert appended["isError"] is False
    spilled = appended["structuredContent"]["spilled"]
    assert len(spilled) == 1
    assert spilled[0]["call_id"] == "c1" and spilled[0]["lines"] == 5_000
    output_id = spilled[0]["output_id"]
    assert [m["role"] for m in appended["structuredContent"]["messages"]] == ["assistant"]  # the result joined its call

    # A fresh server process on the modern era (2026-07-28) reads what the legacy ones wrote.
    page = cli.call("read_output", {"id": output_id, "offset": 2_500, "limit": 3}, era="modern")
    assert page["_meta"][SERVER_INFO_META]["name"] == "contextfold"
    read = page["structuredContent"]
    assert read["text"] == "2500\tline 2500\n2501\tline 2501\n2502\tline 2502"
    assert read["total_lines"] == 5_000 and read["has_more"] is True

    last = cli.call("read_output", {"id": output_id, "offset": 4_999, "limit": 5})["structuredContent"]
    assert last["text"] == "4999\tline 4999\n5000\tline 5000"
    assert last["has_more"] is False

    uri = f"contextfold://outputs/{output_id}"
    (content,) = cli.run("--method", "resources/read", "--uri", uri)["contents"]
    assert content["uri"] == uri and content["mimeType"] == "text/plain"
    assert content["text"] == text


def test_unknown_session_is_an_error_result(cli: Inspector) -> None:
    result = cli.call("status", {"session_id": "no-such-session-42"}, exit_code=TOOL_ERROR_EXIT)

    assert result["isError"] is True
    assert "structuredContent" not in result
    (message,) = result["content"]
    assert "no session with id 'no-such-session-42'" in message["text"]
    assert "session_open" in message["text"]  # says what to do about it
    assert "tool_is_error" in cli.stderr  # -q leaves only the Inspector's error envelope on stderr


def test_resource_templates_and_prompt(cli: Inspector) -> None:
    templates = cli.run("--method", "resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"]: t["mimeType"] for t in templates} == {
        "contextfold://outputs/{output_id}": "text/plain",
        "contextfold://sessions/{session_id}/summary": "text/markdown",
    }

    prompt = cli.run("--method", "prompts/get", "--prompt-name", "anchored_summary", era="modern")
    (message,) = prompt["messages"]
    assert message["role"] == "user"
    assert "## Relevant Files" in message["content"]["text"]

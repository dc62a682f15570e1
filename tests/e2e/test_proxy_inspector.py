"""`contextfold proxy` driven by an independent client: the MCP Inspector CLI (the TypeScript SDK).

Each call is its own Inspector process, which starts `python -m contextfold proxy -- python
tests/proxy_upstream.py`; calls of one test share a data home, so an output one proxy stored is
read back by the next. Uses the Inspector pinned in tests/inspector (see tests/test_inspector.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _proxy import UPSTREAM, output_id
from proxy_upstream import lines_text
from test_inspector import CALL_TIMEOUT, SERVER_INFO_META, TOOL_ERROR_EXIT, inspector  # noqa: F401

pytestmark = [pytest.mark.npm]

MODERN = "modern"  # the Inspector's name for the 2026-07-28 era


class ProxyInspector:
    def __init__(self, binary: Path, tmp: Path) -> None:
        self.binary = binary
        self.data = tmp / "data"
        (tmp / "home").mkdir()
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp / "home")}
        self.cwd = tmp

    def run(self, *options: str, direct: bool = False, era: str | None = None, exit_code: int = 0) -> dict[str, Any]:
        server = [sys.executable, str(UPSTREAM)]
        if not direct:
            server = [sys.executable, "-m", "contextfold", "proxy", "--", *server]
        command = [
            str(self.binary), "--cli", *server, "-e", f"CONTEXTFOLD_HOME={self.data}",
            "--format", "json", "-q", *(["--protocol-era", era] if era else []), *options,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=CALL_TIMEOUT,
        )  # fmt: skip
        described = f"{' '.join(options)[:300]}\nexit {done.returncode}\nstdout: {done.stdout[:1500]}\nstderr: {done.stderr[-1500:]}"
        assert done.returncode == exit_code, described
        return json.loads(done.stdout)["result"]

    def call(self, tool: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.run(
            "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments), **kwargs
        )


@pytest.fixture
def cli(inspector: Path, tmp_path: Path) -> ProxyInspector:  # noqa: F811
    return ProxyInspector(inspector, tmp_path)


@pytest.mark.parametrize("era", [None, MODERN])
def test_the_inspector_lists_the_upstream_tools_and_the_two_added(cli: ProxyInspector, era: str | None) -> None:
    upstream = cli.run("--method", "tools/list", direct=True, era=era)["tools"]
    through = cli.run("--method", "tools/list", era=era)["tools"]
    assert through[: len(upstream)] == upstream
    assert [tool["name"] for tool in through[len(upstream) :]] == ["read_output", "search_history"]


def test_the_inspector_gets_small_results_as_directly_and_a_preview_it_can_read_back(cli: ProxyInspector) -> None:
    arguments = {"text": "héllo through the proxy"}
    assert cli.call("echo", arguments) == cli.call("echo", arguments, direct=True)
    failed = cli.call("tool_error", {}, exit_code=TOOL_ERROR_EXIT)
    assert failed["isError"] is True and failed["content"][0]["text"] == "it went wrong"

    cut = cli.call("big", {"lines": 5_000})["content"][0]["text"]
    assert cut.startswith("line 1 ") and "Full output saved as out_" in cut
    # Another proxy process (the next Inspector call) reads what the first one stored.
    page = cli.call("read_output", {"id": output_id(cut), "offset": 4_999}, era=MODERN)
    assert page["_meta"][SERVER_INFO_META]["name"] == "proxy-upstream"  # the upstream's stamp, 2026-07-28
    head, _, body = page["content"][0]["text"].partition("\n")
    assert head == f"{output_id(cut)}: 5,000 lines"
    assert body.split("\n") == [f"{n}\t{line}" for n, line in zip((4_999, 5_000), lines_text(5_000).split("\n")[-2:])]

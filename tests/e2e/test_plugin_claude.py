"""contextfold as a Claude Code plugin, from this repository as a marketplace, with the real `claude` CLI.

The repository is a marketplace (`.claude-plugin/marketplace.json`) holding one plugin
(`plugins/contextfold/`): the MCP server with the two agent tools and every hook `contextfold hooks install
claude-code` writes, each running `bin/contextfold`, which installs contextfold into the plugin's data
folder on its first run and execs it from there afterwards.

The test does what a user does, in a scratch home: `claude plugin validate`, `claude plugin marketplace add
<this checkout>`, `claude plugin install contextfold@contextfold`, then a headless session against the fake
model (tests/fake_models.py). The plugin installs the wheel built from this checkout
(`CONTEXTFOLD_PLUGIN_REQUIREMENT`, since contextfold is not on the package index yet) with its dependencies
from the index. The session makes the same checks as tests/e2e/test_agents_e2e.py's hooks test: the huge Bash
output reaches the model as contextfold's preview, the model reads its end back through the plugin's MCP
server, and after a real compaction the first request carries contextfold's handover.

Without the pinned CLI (`npm ci --prefix tests/agents`) or `build`/`uv` this skips locally and fails under
CI=true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from _package import INSTALL_TIMEOUT, ROOT, Dist, base_python, clean_env
from agents_harness import CLAUDE_COMPACT_WINDOW, ClaudeCode
from fake_models import DEFAULT_SUMMARY, ModelRequest, Turn, call, say
from test_agents_e2e import HUGE_COMMAND, OUTPUT_ID, PROMPT, _tool_result_text, contextfold

pytestmark = [pytest.mark.npm]

PLUGIN = ROOT / "plugins" / "contextfold"
SELECTOR = "contextfold@contextfold"  # plugin@marketplace
TOOLS = "mcp__plugin_contextfold_contextfold"  # how Claude Code names the plugin's server's tools (the prefix)
NETWORK = ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
"""How this machine reaches the package index, passed to the agent so that the plugin's first run can install."""


def _version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"', text, re.M)
    assert found
    return found.group(1)


def test_the_plugin_and_marketplace_pin_the_packaged_version() -> None:
    version = _version()
    plugin = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    (entry,) = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())["plugins"]
    script = (PLUGIN / "bin" / "contextfold").read_text()
    assert plugin["version"] == entry["version"] == version, (plugin["version"], entry["version"], version)
    assert f"\nVERSION={version} " in script
    assert os.access(PLUGIN / "bin" / "contextfold", os.X_OK)


def test_the_plugin_brings_every_hook_hooks_install_writes() -> None:
    """The plugin's hooks.json is `hooks install claude-code`'s hooks (events, matchers, timeouts), the
    status line aside (a plugin cannot set one)."""
    from contextfold.hooks.install import CLAUDE_HOOKS

    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    wanted = {spec.event: (spec.matcher, spec.timeout) for spec in CLAUDE_HOOKS}
    found = {}
    for event, groups in hooks.items():
        ((group,),) = [groups]
        (hook,) = group["hooks"]
        assert hook["command"] == f'"${{CLAUDE_PLUGIN_ROOT}}/bin/contextfold" hook claude-code {event}', hook
        found[event] = (group.get("matcher"), hook["timeout"])
    assert found == wanted
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert servers["contextfold"]["args"] == ["serve", "--tools", "read_output,search_history"]


def _read_back(last_lines: int) -> Callable[[ModelRequest], Turn]:
    """A model turn that reads the end of the output just spilled, through the tool the plugin's server offers."""

    def step(request: ModelRequest) -> Turn:
        found = OUTPUT_ID.search(_tool_result_text(request))
        assert found, f"no output id in what the model was sent: {_tool_result_text(request)[-1500:]}"
        offset = 200_000 - last_lines + 1
        return call(f"{TOOLS}__read_output", {"id": found.group(0), "offset": offset, "limit": last_lines})

    return step


def test_claude_code_with_the_contextfold_plugin(claude: ClaudeCode, built_dist: Dist) -> None:
    claude.extra_env.update({name: os.environ[name] for name in NETWORK if name in os.environ})
    claude.extra_env["CONTEXTFOLD_PLUGIN_REQUIREMENT"] = str(built_dist.wheel)
    # The server's first start installs contextfold (about 10 s with uv); Claude Code gives a server 30 s
    # to connect by default, which a busy shared machine can exceed.
    claude.extra_env["MCP_TIMEOUT"] = "300000"

    for path in (ROOT, PLUGIN):
        checked = claude.run("plugin", "validate", "--strict", str(path))
        assert checked.returncode == 0 and "Validation passed" in checked.stdout, checked.describe()
    claude.run("plugin", "marketplace", "add", str(ROOT)).ok()
    claude.run("plugin", "install", SELECTOR).ok()
    listed = claude.run("plugin", "list").ok().stdout
    assert SELECTOR in listed and "enabled" in listed, listed
    assert "hooks" not in claude.settings(), claude.settings()  # the hooks come from the plugin, not settings
    servers = claude.mcp_list()
    assert "Connected" in servers.get("plugin:contextfold:contextfold", ""), claude.run("mcp", "list").stdout

    claude.fake.script(
        call("Bash", {"command": HUGE_COMMAND, "description": "List the numbers"}),
        _read_back(3),
        call("Bash", {"command": "echo small"}, input_tokens=int(CLAUDE_COMPACT_WINDOW * 0.95)),
        say("Checked."),
    )
    run = claude.prompt(PROMPT, allowed_tools=("Bash", TOOLS)).ok()
    assert run.result["result"] == "Checked.", run.describe()
    session = run.result["session_id"]

    turns = claude.fake.turns()
    assert len(turns) == 4, claude.fake.kinds()
    # PostToolUse through the plugin: the model got contextfold's preview with the read_output hint.
    preview = _tool_result_text(turns[1])
    assert "<persisted-output>" not in preview and "Output too large" not in preview, preview[:2000]
    assert "read_output" in preview and OUTPUT_ID.search(preview), preview[-2000:]
    assert len(preview) < 30_000, len(preview)
    output_id = OUTPUT_ID.search(preview).group(0)
    # read_output through the plugin's MCP server, on the hooks' data home: the whole output was spilled.
    read = json.loads(_tool_result_text(turns[2]))
    assert read["output_id"] == output_id and read["total_lines"] == 200_000, read
    assert read["text"] == "199998\t199998\n199999\t199999\n200000\t200000", read

    # PreCompact -> SessionStart(compact) through the plugin: the handover after a real compaction.
    (after,) = claude.fake.after_compaction()
    assert after.index == turns[3].index
    assert after.contains(DEFAULT_SUMMARY)
    context = "\n".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in after.body["messages"]
        if m["role"] == "system" and "SessionStart hook additional context" in json.dumps(m["content"])
    )
    assert context, [m["role"] for m in after.body["messages"]]
    assert "search_history" in context and output_id in context, context
    assert "Never delete files in this project" in context, context

    listing = contextfold(claude, "sessions").stdout
    assert session in listing, listing
    # The plugin ran the wheel it installed into its own data folder, not this checkout.
    (venv,) = (claude.home / ".local" / "share" / "contextfold-plugin").glob("venv-*")
    assert (venv / ".ready").is_file(), sorted(p.name for p in venv.iterdir())
    assert not list(venv.parent.glob("*.partial")) and not (venv.parent / ".installing").exists()
    probe = Path(venv / "bin" / "python")
    assert probe.exists()


def test_the_plugin_launcher_installs_once_with_pip_while_a_second_process_waits(
    built_dist: Dist, tmp_path: Path
) -> None:
    """bin/contextfold without uv on PATH: python -m venv and pip. Two processes start at once (as the
    MCP server and a hook do): one installs, the other waits for it; both then run contextfold, and a
    third run starts from the ready environment without installing."""
    data = tmp_path / "plugin-data"
    env = clean_env(
        tmp_path / "home",
        path_first=(),
        CONTEXTFOLD_PLUGIN_DATA=str(data),
        CONTEXTFOLD_HOME=str(tmp_path / "contextfold-data"),
        CONTEXTFOLD_PLUGIN_REQUIREMENT=str(built_dist.wheel),
        CONTEXTFOLD_PLUGIN_PYTHON=base_python(),
    )
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "uv").exists())
    launcher = [str(PLUGIN / "bin" / "contextfold"), "sessions"]
    first, second = (
        subprocess.Popen(launcher, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    )
    outcomes = [p.communicate(timeout=INSTALL_TIMEOUT) for p in (first, second)]
    for process, (out, err) in zip((first, second), outcomes):
        assert process.returncode == 0, out + err
    installs = [err for _, err in outcomes if "installing" in err]
    assert len(installs) == 1, outcomes
    (venv,) = data.glob("venv-*")
    assert (venv / ".ready").is_file() and not list(data.glob("*.partial")) and not (data / ".installing").exists()
    assert not (venv / "bin" / "uv").exists() and (venv / "bin" / "pip").exists()  # pip made it
    third = subprocess.run(launcher, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and third.stderr == "", third.stderr

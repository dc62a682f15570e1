"""contextfold as a Codex plugin, from this repository as a marketplace, with the real `codex` CLI.

Codex (0.169) reads a Claude Code marketplace (`.claude-plugin/marketplace.json`) and, for each plugin, its
own manifest first (`.codex-plugin/plugin.json`). contextfold's plugin folder carries both: Codex's names the
same MCP server (`.mcp.json`) and Codex's hooks (`hooks/codex.json`: PreCompact, PostCompact and
SessionStart(compact), as `contextfold hooks install codex` writes them), run by the same `bin/contextfold`
launcher, which installs contextfold into the plugin's data folder on its first run.

The test does what a user does, in a scratch home: `codex plugin marketplace add <this checkout>`, `codex plugin
add contextfold@contextfold`, then `codex exec` against the fake model (tests/fake_models.py) with the same
checks as tests/e2e/test_agents_e2e.py's Codex test: after a real compaction the first request carries
contextfold's handover, and search_history through the plugin's MCP server finds the user's words.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from _package import ROOT, Dist
from agents_harness import Codex
from fake_models import DEFAULT_SUMMARY, ModelRequest, Turn, call, say
from test_agents_e2e import HUGE_COMMAND, PROMPT, _developer_texts

pytestmark = [pytest.mark.npm]

PLUGIN = ROOT / "plugins" / "contextfold"
SELECTOR = "contextfold@contextfold"
NETWORK = ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


def test_the_codex_manifest_brings_the_hooks_hooks_install_codex_writes() -> None:
    from contextfold.hooks.install import CODEX_HOOKS

    manifest = json.loads((PLUGIN / ".codex-plugin" / "plugin.json").read_text())
    claude = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == claude["name"] and manifest["version"] == claude["version"]
    hooks = json.loads((PLUGIN / manifest["hooks"]).read_text())["hooks"]
    wanted = {spec.event: (spec.matcher, spec.timeout, dict(spec.extra)) for spec in CODEX_HOOKS}
    found = {}
    for event, groups in hooks.items():
        ((group,),) = [groups]
        (hook,) = group["hooks"]
        assert hook["command"] == f'"${{CLAUDE_PLUGIN_ROOT}}/bin/contextfold" hook codex {event}', hook
        extra = {k: v for k, v in hook.items() if k not in ("type", "command", "timeout")}
        found[event] = (group.get("matcher"), hook["timeout"], extra)
    assert found == wanted
    (server,) = manifest["mcpServers"].values()
    claude_server = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["contextfold"]
    assert server["args"] == claude_server["args"] and server["command"] == "./bin/contextfold"


def _trust_plugin_hooks(codex: Codex) -> None:
    """What the user's review in Codex's /hooks records for the plugin's hooks: `[hooks.state."<plugin>:<file>:
    <event>:<group>:<handler>"] trusted_hash`, the hash of each hook's definition (`codex_hash`, as `hooks
    install codex` records for its own hooks)."""
    from contextfold.hooks.install import _SNAKE, codex_hash

    manifest = json.loads((PLUGIN / ".codex-plugin" / "plugin.json").read_text())
    source = manifest["hooks"].removeprefix("./")
    hooks = json.loads((PLUGIN / source).read_text())["hooks"]
    lines = []
    for event, groups in hooks.items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group["hooks"]):
                key = f"{SELECTOR}:{source}:{_SNAKE[event]}:{g}:{h}"
                digest = codex_hash(event, group.get("matcher"), handler)
                lines.append(f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n')
    with codex.config_path.open("a") as config:
        config.write("\n" + "\n".join(lines))


def _search_history(request: ModelRequest) -> Turn:
    found = [m for text in _developer_texts(request) for m in re.findall(r'search_history\(session_id="([^"]+)"', text)]
    assert found, f"no session id in the developer messages: {_developer_texts(request)}"
    namespaces = [
        tool["name"]
        for tool in request.body.get("tools", [])
        if tool.get("type") == "namespace" and any(t.get("name") == "search_history" for t in tool.get("tools", []))
    ]
    assert len(namespaces) == 1, " ".join(f"{t.get('type')}:{t.get('name')}" for t in request.body.get("tools", []))
    return call("search_history", {"session_id": found[0], "pattern": "Never delete"}, namespace=namespaces[0])


def test_codex_with_the_contextfold_plugin(codex: Codex, built_dist: Dist) -> None:
    codex.extra_env.update({name: os.environ[name] for name in NETWORK if name in os.environ})
    codex.extra_env["CONTEXTFOLD_PLUGIN_REQUIREMENT"] = str(built_dist.wheel)

    codex.run("plugin", "marketplace", "add", str(ROOT)).ok()
    codex.run("plugin", "add", SELECTOR).ok()
    listed = codex.run("plugin", "list").ok().stdout
    assert re.search(rf"{re.escape(SELECTOR)}\s+installed", listed), listed
    assert not codex.hooks_path.exists()  # the hooks come from the plugin, not ~/.codex/hooks.json
    _trust_plugin_hooks(codex)

    codex.fake.script(
        call("exec_command", {"cmd": HUGE_COMMAND}),
        call("exec_command", {"cmd": "echo small"}, input_tokens=codex.auto_compact_limit + 10_000),
        _search_history,
        say("Checked."),
    )
    run = codex.exec(PROMPT, timeout=300).ok()
    thread = next(e["thread_id"] for e in run.events if e["type"] == "thread.started")

    assert codex.fake.kinds() == ["turn", "turn", "compaction", "turn", "turn"], codex.fake.describe()
    after, last = codex.fake.after_compaction()
    assert after.contains(DEFAULT_SUMMARY)
    context = "\n".join(text for text in _developer_texts(after) if "search_history" in text)
    assert context, _developer_texts(after)
    assert "Never delete files in this project" in context, context
    assert thread in context, context
    (found,) = [i["output"] for i in last.body["input"] if i.get("type") == "function_call_output"][-1:]
    assert "Never delete files in this project" in found, found

"""`contextfold hooks install|uninstall|status` on real settings files, and what the real CLIs make of them.

The merge is checked on settings that already hold other tools' hooks and servers: those stay as
they were, in their order; installing twice changes nothing; uninstalling gives back the very bytes
there were before. Codex's trust is checked against Codex itself where its CLI is installed
(`tests/agents`, `npm ci --prefix tests/agents`): `codex app-server`'s `hooks/list` must report
each of our hooks `trusted`, with the hash we recorded; and `claude mcp list` must show the server
connected. Without the CLIs those tests skip locally and fail under `CI=true`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from contextfold.hooks import install

ROOT = Path(__file__).resolve().parents[2]

CLAUDE_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": 'prettier --write "$FILE"'}]}
        ],
        "PreCompact": [{"hooks": [{"type": "command", "command": "~/bin/save-notes.sh"}]}],
    },
}
CLAUDE_STATE = {"numStartups": 7, "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": []}}}
CODEX_CONFIG = """\
# my settings
model = "gpt-5"

[mcp_servers.docs]
command = "docs-mcp"   # keep this comment
args = ["--port", "1"]

[hooks.state."OTHER:pre_compact:0:0"]
trusted_hash = "sha256:0000"
"""


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _cli(name: str) -> Path:
    # CI installs tests/agents with --ignore-scripts, which leaves .bin/claude a stub that cannot run:
    # the agents harness finds the platform binary itself.
    from agents_harness import AgentMissing, claude_binary, codex_binary

    try:
        return {"claude": claude_binary, "codex": codex_binary}[name]()
    except AgentMissing as missing:
        reason = str(missing)
    if _in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def contextfold(
    home: Path, *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "CLAUDE_", "CODEX_"))}
    return subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), *args],
        env={**environ, **env},
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    return home


def write_claude(home: Path) -> tuple[bytes, bytes]:
    settings = json.dumps(CLAUDE_SETTINGS, indent=4).encode()
    state = json.dumps(CLAUDE_STATE).encode()
    (home / ".claude" / "settings.json").write_bytes(settings)
    (home / ".claude.json").write_bytes(state)
    return settings, state


def test_claude_code_install_keeps_others_is_idempotent_and_uninstall_restores(tmp_path: Path, user_home: Path) -> None:
    data = tmp_path / "data"
    env = {"HOME": str(user_home)}
    settings_before, state_before = write_claude(user_home)
    done = contextfold(data, "hooks", "install", "claude-code", env=env)
    assert done.returncode == 0, done.stderr
    settings = json.loads((user_home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus" and settings["permissions"] == CLAUDE_SETTINGS["permissions"]
    post = settings["hooks"]["PostToolUse"]
    assert post[0] == CLAUDE_SETTINGS["hooks"]["PostToolUse"][0]  # theirs first, untouched
    assert post[1]["matcher"] == "Bash|Read|mcp__.*"
    assert post[1]["hooks"][0]["command"].endswith(f"--home {data} hook claude-code PostToolUse")
    assert settings["hooks"]["PreCompact"][0] == CLAUDE_SETTINGS["hooks"]["PreCompact"][0]
    assert set(settings["hooks"]) == {"PostToolUse", "PreCompact", "SessionStart", "PostCompact", "UserPromptSubmit"}
    assert settings["hooks"]["SessionStart"][0]["matcher"] == "compact"
    assert settings["statusLine"]["command"].endswith("hook claude-code StatusLine")  # there was none
    state = json.loads((user_home / ".claude.json").read_text())
    assert state["numStartups"] == 7 and state["mcpServers"]["github"] == CLAUDE_STATE["mcpServers"]["github"]
    server = state["mcpServers"]["contextfold"]
    assert server["args"][-5:] == ["--home", str(data), "serve", "--tools", "read_output,search_history"]  # same home

    files = {p: p.read_bytes() for p in (user_home / ".claude" / "settings.json", user_home / ".claude.json")}
    again = contextfold(data, "hooks", "install", "claude-code", env=env)
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert {p: p.read_bytes() for p in files} == files

    removed = contextfold(data, "hooks", "uninstall", "claude-code", env=env)
    assert removed.returncode == 0, removed.stderr
    assert (user_home / ".claude" / "settings.json").read_bytes() == settings_before
    assert (user_home / ".claude.json").read_bytes() == state_before
    assert not list(user_home.rglob("*.contextfold-backup"))


def test_someone_elses_status_line_is_kept(tmp_path: Path, user_home: Path) -> None:
    env = {"HOME": str(user_home)}
    (user_home / ".claude" / "settings.json").write_text(
        json.dumps({"statusLine": {"type": "command", "command": "~/my-line.sh"}})
    )
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", env=env)
    assert "your Claude Code statusLine is kept" in done.stdout
    assert json.loads((user_home / ".claude" / "settings.json").read_text())["statusLine"]["command"] == "~/my-line.sh"


def test_uninstall_keeps_what_changed_since_and_drops_only_ours(tmp_path: Path, user_home: Path) -> None:
    env = {"HOME": str(user_home)}
    write_claude(user_home)
    contextfold(tmp_path / "data", "hooks", "install", "claude-code", env=env)
    path = user_home / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    settings["theme"] = "dark"  # the user changed something meanwhile
    path.write_text(json.dumps(settings))
    contextfold(tmp_path / "data", "hooks", "uninstall", "claude-code", env=env)
    after = json.loads(path.read_text())
    assert after == {**CLAUDE_SETTINGS, "theme": "dark"}


def test_reinstalling_with_another_home_replaces_ours_in_place(tmp_path: Path, user_home: Path) -> None:
    env = {"HOME": str(user_home)}
    write_claude(user_home)
    contextfold(tmp_path / "one", "hooks", "install", "claude-code", env=env)
    contextfold(tmp_path / "two", "hooks", "install", "claude-code", env=env)
    settings = json.loads((user_home / ".claude" / "settings.json").read_text())
    commands = [h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]]
    ours = [c for c in commands if " hook claude-code " in c]
    assert len(ours) == 5 and all(f"--home {tmp_path / 'two'} " in c for c in ours)
    state = json.loads((user_home / ".claude.json").read_text())
    assert state["mcpServers"]["contextfold"]["args"][-4] == str(tmp_path / "two")


def test_dry_run_prints_the_change_and_writes_nothing(tmp_path: Path, user_home: Path) -> None:
    env = {"HOME": str(user_home)}
    write_claude(user_home)
    before = {p: p.read_bytes() for p in user_home.rglob("*") if p.is_file()}
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", "--dry-run", env=env)
    assert done.returncode == 0
    assert "+++ " in done.stdout and "hook claude-code PostToolUse" in done.stdout and "would change" in done.stdout
    assert {p: p.read_bytes() for p in user_home.rglob("*") if p.is_file()} == before


def test_a_settings_file_that_is_not_json_is_refused_untouched(tmp_path: Path, user_home: Path) -> None:
    path = user_home / ".claude" / "settings.json"
    path.write_text("{ this is not json")
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", env={"HOME": str(user_home)})
    assert done.returncode == 2 and "is not valid JSON" in done.stderr and done.stderr.count("\n") == 1
    assert path.read_text() == "{ this is not json"
    deep = '{"a": ' * 5_000 + "1" + "}" * 5_000  # valid JSON, nested past what the parser goes
    path.write_text(deep)
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", env={"HOME": str(user_home)})
    assert done.returncode == 2 and "nested too deeply" in done.stderr and done.stderr.count("\n") == 1
    assert path.read_text() == deep


TEAM_SETTINGS = {"permissions": {"allow": ["Bash(npm test)"]}}
TEAM_SERVERS = {"mcpServers": {"docs": {"type": "stdio", "command": "docs-mcp", "args": []}}}


def write_project(project: Path) -> dict[Path, bytes]:
    """A project with the Claude Code files its team commits, as they are before any install."""
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(json.dumps(TEAM_SETTINGS, indent=2) + "\n")
    (project / ".mcp.json").write_text(json.dumps(TEAM_SERVERS, indent=2) + "\n")
    return {p: p.read_bytes() for p in (project / ".claude" / "settings.json", project / ".mcp.json")}


def test_project_scope_writes_the_local_settings_never_the_committed_files(tmp_path: Path, user_home: Path) -> None:
    """Claude Code's local scope: `.claude/settings.local.json` and the project's entry in
    `~/.claude.json`, since the commands name this machine's paths; the team's files stay as they were."""
    project = tmp_path / "proj"
    committed = write_project(project)
    _, state_before = write_claude(user_home)
    env = {"HOME": str(user_home)}
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", "--scope", "project", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in committed} == committed  # nothing of this machine in committed files
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert local["hooks"]["PreCompact"][0]["hooks"][0]["command"].endswith("hook claude-code PreCompact")
    state = json.loads((user_home / ".claude.json").read_text())
    server = state["projects"][str(project.resolve())]["mcpServers"]["contextfold"]
    assert server["args"][-5:] == ["--home", str(tmp_path / "data"), "serve", "--tools", "read_output,search_history"]
    assert state["mcpServers"] == CLAUDE_STATE["mcpServers"]  # the user-scope servers are left alone
    assert "settings.local.json" in done.stdout and "this machine's paths" in done.stdout  # which, and why
    found = json.loads(
        contextfold(
            tmp_path / "data", "hooks", "status", "claude-code", "--scope", "project", "--json", env=env, cwd=project
        ).stdout
    )
    assert all(h["installed"] for h in found["hooks"]) and found["server"] and found["problems"] == []

    removed = contextfold(
        tmp_path / "data", "hooks", "uninstall", "claude-code", "--scope", "project", env=env, cwd=project
    )
    assert removed.returncode == 0, removed.stderr
    assert {p: p.read_bytes() for p in committed} == committed
    assert not (project / ".claude" / "settings.local.json").exists()
    assert (user_home / ".claude.json").read_bytes() == state_before
    assert not list(tmp_path.rglob("*.contextfold-backup"))


def test_an_older_project_install_leaves_the_committed_files_byte_for_byte(tmp_path: Path, user_home: Path) -> None:
    """What earlier versions wrote into `.claude/settings.json` and `.mcp.json` (with the backups
    they kept) is taken out on the next install, giving back the team's exact bytes."""
    project = tmp_path / "proj"
    committed = write_project(project)
    old = "/old/venv/bin/contextfold --home /old/home hook claude-code PreCompact"
    for path, doc in (
        (
            project / ".claude" / "settings.json",
            {**TEAM_SETTINGS, "hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": old}]}]}},
        ),
        (
            project / ".mcp.json",
            {
                "mcpServers": {
                    **TEAM_SERVERS["mcpServers"],
                    "contextfold": {"command": "/old/venv/bin/contextfold", "args": ["--home", "/old/home", "serve"]},
                }
            },
        ),
    ):
        path.with_name(path.name + ".contextfold-backup").write_bytes(committed[path])
        path.write_text(json.dumps(doc, indent=2) + "\n")
    env = {"HOME": str(user_home)}
    flagged = contextfold(
        tmp_path / "data", "hooks", "status", "claude-code", "--scope", "project", env=env, cwd=project
    )
    assert flagged.returncode == 1 and "a team usually commits" in flagged.stdout
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", "--scope", "project", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in committed} == committed
    assert not list(project.rglob("*.contextfold-backup"))
    assert "hook claude-code PreCompact" in (project / ".claude" / "settings.local.json").read_text()


def test_claude_mcp_list_finds_the_project_scope_server_connected(tmp_path: Path, user_home: Path) -> None:
    claude = _cli("claude")
    project = tmp_path / "proj"
    write_project(project)
    env = {"HOME": str(user_home)}
    done = contextfold(tmp_path / "data", "hooks", "install", "claude-code", "--scope", "project", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    line = next(
        (row for row in claude_mcp_list(claude, env, project).splitlines() if row.startswith("contextfold:")), ""
    )
    assert "Connected" in line, line
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    assert "contextfold:" not in claude_mcp_list(claude, env, elsewhere)  # this project's, no other's


def claude_mcp_list(claude: Path, env: dict[str, str], cwd: Path) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_", "CLAUDE_"))}
    done = subprocess.run(
        [str(claude), "mcp", "list"],
        env={
            **environ,
            **env,
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )
    return done.stdout + done.stderr


def test_status_reports_what_is_installed(tmp_path: Path, user_home: Path) -> None:
    env = {"HOME": str(user_home)}
    missing = contextfold(tmp_path / "data", "hooks", "status", "claude-code", "--json", env=env)
    assert json.loads(missing.stdout)["hooks"][0]["installed"] is False
    contextfold(tmp_path / "data", "hooks", "install", "claude-code", env=env)
    found = json.loads(contextfold(tmp_path / "data", "hooks", "status", "claude-code", "--json", env=env).stdout)
    assert all(h["installed"] for h in found["hooks"]) and found["server"] and found["problems"] == []
    assert found["home"] == str(tmp_path / "data")


def test_status_without_an_agent_reports_both(tmp_path: Path, user_home: Path) -> None:
    env = {**codex_env(user_home)}
    contextfold(tmp_path / "data", "hooks", "install", "claude-code", env=env)
    done = contextfold(tmp_path / "data", "hooks", "status", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "claude-code (user scope): 5 of 5 hooks" in done.stdout and "codex (user scope): 0 of 3 hooks" in done.stdout
    both = json.loads(contextfold(tmp_path / "data", "hooks", "status", "--json", env=env).stdout)
    assert [s["agent"] for s in both] == ["claude-code", "codex"]


# -- Codex -----------------------------------------------------------------------------------------


def codex_env(user_home: Path) -> dict[str, str]:
    return {"HOME": str(user_home), "CODEX_HOME": str(user_home / ".codex")}


def test_codex_install_merges_hooks_server_and_trust_and_uninstall_restores(tmp_path: Path, user_home: Path) -> None:
    codex = user_home / ".codex"
    theirs = {"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "notify-compaction"}]}]}}
    (codex / "hooks.json").write_text(json.dumps(theirs))
    (codex / "config.toml").write_text(CODEX_CONFIG)
    # their hook is trusted under its key, which our hooks must not shift
    their_hash = install.codex_hash("PreCompact", None, {"command": "notify-compaction"})
    (codex / "config.toml").write_text(
        CODEX_CONFIG + f'\n[hooks.state."{codex / "hooks.json"}:pre_compact:0:0"]\ntrusted_hash = "{their_hash}"\n'
    )
    before = {p.name: p.read_bytes() for p in codex.iterdir()}
    done = contextfold(tmp_path / "data", "hooks", "install", "codex", env=codex_env(user_home))
    assert done.returncode == 0, done.stderr
    hooks = json.loads((codex / "hooks.json").read_text())["hooks"]
    assert hooks["PreCompact"][0] == theirs["hooks"]["PreCompact"][0]
    assert set(hooks) == {"PreCompact", "PostCompact", "SessionStart"}  # no PostToolUse for Codex
    text = (codex / "config.toml").read_text()
    assert "# my settings" in text and "# keep this comment" in text
    config = tomllib.loads(text)
    assert config["mcp_servers"]["docs"] == {"command": "docs-mcp", "args": ["--port", "1"]}
    assert config["mcp_servers"]["contextfold"]["args"][-5:-2] == ["--home", str(tmp_path / "data"), "serve"]
    state = config["hooks"]["state"]
    assert state[f"{codex / 'hooks.json'}:pre_compact:0:0"]["trusted_hash"] == their_hash
    ours = hooks["PreCompact"][1]
    assert state[f"{codex / 'hooks.json'}:pre_compact:1:0"]["trusted_hash"] == install.codex_hash(
        "PreCompact", None, ours["hooks"][0]
    )
    status = json.loads(
        contextfold(tmp_path / "data", "hooks", "status", "codex", "--json", env=codex_env(user_home)).stdout
    )
    assert [h["trust"] for h in status["hooks"]] == ["trusted"] * 3 and status["problems"] == []

    again = contextfold(tmp_path / "data", "hooks", "install", "codex", env=codex_env(user_home))
    assert "nothing changed" in again.stdout
    contextfold(tmp_path / "data", "hooks", "uninstall", "codex", env=codex_env(user_home))
    assert {p.name: p.read_bytes() for p in codex.iterdir()} == before


def test_codex_status_reports_a_hook_changed_after_trust(tmp_path: Path, user_home: Path) -> None:
    env = codex_env(user_home)
    contextfold(tmp_path / "data", "hooks", "install", "codex", env=env)
    path = user_home / ".codex" / "hooks.json"
    hooks = json.loads(path.read_text())
    hooks["hooks"]["PostCompact"][0]["hooks"][0]["timeout"] = 5  # any change untrusts it
    path.write_text(json.dumps(hooks))
    done = contextfold(tmp_path / "data", "hooks", "status", "codex", env=env)
    assert done.returncode == 1
    assert "PostCompact       installed, modified" in done.stdout
    assert "Codex skips the PostCompact hook: it is modified" in done.stdout


def test_codex_install_with_no_trust_leaves_the_review_to_the_user(tmp_path: Path, user_home: Path) -> None:
    env = codex_env(user_home)
    (user_home / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    done = contextfold(tmp_path / "data", "hooks", "install", "codex", "--no-trust", env=env)
    assert done.returncode == 0, done.stderr
    assert "--no-trust" in done.stdout and "/hooks" in done.stdout
    config = tomllib.loads((user_home / ".codex" / "config.toml").read_text())
    assert list(config["hooks"]["state"]) == ["OTHER:pre_compact:0:0"]  # no trust of ours recorded
    assert "contextfold" in config["mcp_servers"]
    status = contextfold(tmp_path / "data", "hooks", "status", "codex", "--json", env=env)
    assert status.returncode == 1 and [h["trust"] for h in json.loads(status.stdout)["hooks"]] == ["untrusted"] * 3
    trusted = contextfold(tmp_path / "data", "hooks", "install", "codex", env=env)  # trusting is still one command
    assert (
        trusted.returncode == 0 and contextfold(tmp_path / "data", "hooks", "status", "codex", env=env).returncode == 0
    )
    refused = contextfold(tmp_path / "data", "hooks", "install", "claude-code", "--no-trust", env=env)
    assert refused.returncode == 2 and "--no-trust is for codex" in refused.stderr


def test_codex_hash_matches_what_codex_0169_computed() -> None:
    # Values `codex app-server` (0.169.0) reported as `currentHash` in `hooks/list` for these hooks.
    assert install.codex_hash("PreToolUse", None, {"command": "/tmp/invest/cx1/dump.sh PreToolUse"}) == (
        "sha256:ca0e3928a6e7ba4c2c8bdec73fb0e89669f47470081acfe26e71e37badcace1c"
    )
    handler = {
        "command": "/x/contextfold --home /h hook codex SessionStart",
        "timeout": 120,
        "additionalContextLimit": 0,
    }
    assert install.codex_hash("SessionStart", "compact", handler) == (
        "sha256:fb502fde542654d6bfb089e08738ddd4c27fd6389cd4d3614cd24d8833bd3faa"
    )


def app_server_hooks(codex: Path, env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    process = subprocess.Popen(
        [str(codex), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        text=True,
        cwd=cwd,
    )
    assert process.stdin is not None and process.stdout is not None

    def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        process.stdin.write(json.dumps({"id": request_id, "method": method, "params": params}) + "\n")
        process.stdin.flush()
        while True:
            message = json.loads(process.stdout.readline())
            if message.get("id") == request_id:
                return message

    try:
        call(0, "initialize", {"clientInfo": {"name": "contextfold-tests", "version": "1"}})
        process.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        listed = call(1, "hooks/list", {"cwds": [str(cwd)]})
        return [h for entry in listed["result"]["data"] for h in entry["hooks"]]
    finally:
        process.kill()
        process.wait(timeout=30)


def test_codex_itself_lists_our_hooks_as_trusted(tmp_path: Path, user_home: Path) -> None:
    codex = _cli("codex")
    env = codex_env(user_home)
    done = contextfold(tmp_path / "data", "hooks", "install", "codex", env=env)
    assert done.returncode == 0, done.stderr
    listed = [h for h in app_server_hooks(codex, env, tmp_path) if " hook codex " in (h.get("command") or "")]
    assert sorted(h["eventName"] for h in listed) == ["postCompact", "preCompact", "sessionStart"]
    assert all(h["trustStatus"] == "trusted" for h in listed), listed
    config = tomllib.loads((user_home / ".codex" / "config.toml").read_text())
    assert {h["key"]: h["currentHash"] for h in listed} == {
        key: value["trusted_hash"] for key, value in config["hooks"]["state"].items()
    }


def test_claude_mcp_list_shows_contextfold_connected(tmp_path: Path, user_home: Path) -> None:
    claude = _cli("claude")
    env = {"HOME": str(user_home)}
    contextfold(tmp_path / "data", "hooks", "install", "claude-code", env=env)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_", "CLAUDE_"))}
    done = subprocess.run(
        [str(claude), "mcp", "list"],
        env={
            **environ,
            **env,
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    line = next((row for row in done.stdout.splitlines() if row.startswith("contextfold:")), "")
    assert "Connected" in line, done.stdout + done.stderr


@pytest.mark.anyio
async def test_the_installed_server_offers_the_agent_two_tools_and_says_what_they_are_for(
    tmp_path: Path, user_home: Path
) -> None:
    from mcp import Client, StdioServerParameters

    from contextfold.mcpserver.tools import AGENT_INSTRUCTIONS, TOOLS

    contextfold(tmp_path / "data", "hooks", "install", "claude-code", env={"HOME": str(user_home)})
    entry = json.loads((user_home / ".claude.json").read_text())["mcpServers"]["contextfold"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    async with Client(StdioServerParameters(command=entry["command"], args=entry["args"], env=environ)) as client:
        listed = sorted(t.name for t in (await client.list_tools()).tools)
        assert listed == ["read_output", "search_history"]
    async with Client(
        StdioServerParameters(
            command=sys.executable, args=["-m", "contextfold", "--home", str(tmp_path / "data"), "serve"], env=environ
        )
    ) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == sorted(
            TOOLS
        )  # the full server is unchanged
    assert "read_output" in AGENT_INSTRUCTIONS and "append" not in AGENT_INSTRUCTIONS

"""Run the real Claude Code and Codex CLIs headless, in a scratch home, against the fake model APIs.

The CLIs are pinned in tests/agents/package.json (install with `npm ci --prefix tests/agents`, as .ci/run
does). Each agent gets its own scratch HOME, working directory and contextfold data home under the test's
tmp_path, an environment built from scratch (nothing of the developer's own keys, settings or proxies leaks
in), and a fake model on 127.0.0.1 that the test scripts (tests/fake_models.py):

    def test_something(claude: ClaudeCode) -> None:
        claude.fake.script(call("Bash", {"command": "seq 1 100000"}), say("done"))
        run = claude.prompt("list the numbers")
        assert run.result["result"] == "done"
        assert "<persisted-output>" in claude.fake.turns()[1].text

    def test_other(codex: Codex) -> None:
        codex.fake.script(call("exec_command", {"cmd": "echo hi"}), say("done"))
        run = codex.exec("say hi")

Other CLI commands go through `run` (`claude.run("mcp", "add", "name", "--", "contextfold", "proxy", ...)`).
Without Node.js or the installed CLIs the fixtures skip locally and fail under CI=true (like
tests/e2e/test_inspector.py), so CI cannot pass without running these tests.

`hook_recorder_command` gives a hook command line that appends every event it is handed to a JSON-lines
file; `read_hook_log` reads it back. A hook process sees the `CONTEXTFOLD_HOME` the agent was started with.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_models import FakeMessagesAPI, FakeModelAPI, FakeResponsesAPI, serve_messages_api, serve_responses_api

ROOT = Path(__file__).resolve().parents[1]
AGENTS_DIR = ROOT / "tests" / "agents"
MODULES = AGENTS_DIR / "node_modules"
INSTALL = "npm ci --prefix tests/agents"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"
HOOK_RECORDER = ROOT / "tests" / "hook_recorder.py"

RUN_TIMEOUT = 60.0
"""Seconds an agent command may take (a normal run here takes 1-4 s; the machine is shared)."""

CLAUDE_COMPACT_WINDOW = 200_000
"""`CLAUDE_CODE_AUTO_COMPACT_WINDOW`: a turn reporting ~190,000 input tokens makes Claude Code compact."""

# Variables a scratch agent inherits from the test's environment; everything else is set on purpose.
_INHERITED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT", "PYTHONPATH")
"""PYTHONPATH too: a checkout run against another tree's editable install points it at its own
`server/`, and the hooks the agent starts must import that code, not the install's."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip the test, or fail it when CI is set: CI must run the agents."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def pinned_version(package: str) -> str:
    manifest = json.loads((AGENTS_DIR / "package.json").read_text())
    return manifest["devDependencies"][package]


def installed_version(package: str) -> str | None:
    try:
        return json.loads((MODULES / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def _platform_tags() -> list[str]:
    """npm's `<os>-<arch>` for this machine, e.g. `linux-x64` (a musl build has `-musl` after it)."""
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(
        platform.system(), platform.system().lower()
    )
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return [f"{system}-{arch}", f"{system}-{arch}-musl"]


class AgentMissing(Exception):
    """The pinned CLI is not installed as the tests need it; the message says what to run."""


def _check_installed(package: str) -> None:
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise AgentMissing(f"{tool} is not installed: the agent tests need Node.js and npm, then `{INSTALL}`")
    installed = installed_version(package)
    if installed is None:
        raise AgentMissing(f"{package} is not installed in {AGENTS_DIR}: run `{INSTALL}`")
    if installed != pinned_version(package):
        pinned = pinned_version(package)
        raise AgentMissing(f"the installed {package} is {installed}, not the pinned {pinned}: run `{INSTALL}`")


def claude_binary() -> Path:
    """The native `claude` executable of the pinned package; AgentMissing when it is not installed.

    The package's postinstall only copies the platform package's binary over a stub, and CI installs with
    `--ignore-scripts`, so the binary is taken from the platform package itself.
    """
    _check_installed(CLAUDE_PACKAGE)
    for tag in _platform_tags():
        candidate = MODULES / f"{CLAUDE_PACKAGE}-{tag}" / ("claude.exe" if tag.startswith("win32") else "claude")
        if candidate.is_file():
            return candidate
    raise AgentMissing(f"no native Claude Code binary for {_platform_tags()[0]} under {MODULES}: run `{INSTALL}`")


def codex_binary() -> Path:
    """The `codex` launcher of the pinned package (a Node.js script that runs the platform binary)."""
    _check_installed(CODEX_PACKAGE)
    launcher = MODULES / CODEX_PACKAGE / "bin" / "codex.js"
    if not launcher.is_file():
        raise AgentMissing(f"{launcher} is missing: run `{INSTALL}`")
    return launcher


def required(find: Callable[[], Path]) -> Path:
    """`find()`, or a skip (a failure under CI) saying what is missing."""
    try:
        return find()
    except AgentMissing as missing:
        unavailable(str(missing))
        raise


# -- runs ------------------------------------------------------------------------------------------


class AgentTimeout(AssertionError):
    """The agent ran past its timeout; the message holds what it printed and what the fake received."""


@dataclass(frozen=True)
class AgentRun:
    """One finished agent process."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    context: str = ""
    """What the fake model had received when the run ended."""

    def describe(self, limit: int = 3_000) -> str:
        return (
            f"$ {' '.join(self.argv)[:400]}\nexit {self.returncode} after {self.seconds:.1f} s\n{self.context}\n"
            f"stdout: {self.stdout[:limit]}\nstderr: {self.stderr[-limit:]}"
        )

    def ok(self) -> AgentRun:
        """This run, after asserting it exited 0."""
        assert self.returncode == 0, self.describe()
        return self

    @property
    def result(self) -> dict[str, Any]:
        """`claude -p --output-format json`: the one JSON object it prints."""
        try:
            value = json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"stdout is not one JSON object ({exc})\n{self.describe()}") from None
        assert isinstance(value, dict), self.describe()
        return value

    @property
    def events(self) -> list[dict[str, Any]]:
        """`codex exec --json`: the JSON events it prints, one a line."""
        events = []
        for line in self.stdout.splitlines():
            if line.strip():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    raise AssertionError(f"a stdout line is not JSON: {line[:300]}\n{self.describe()}") from None
        return events


def _run(
    argv: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float, context: Callable[[], str]
) -> AgentRun:
    """Run `argv` to the end, in its own process group so a timeout also ends the hooks it started."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = process.communicate()
        raise AgentTimeout(
            f"$ {' '.join(argv)[:400]}\ntimed out after {timeout:.0f} s\n{context()}\n"
            f"stdout: {stdout[:3000]}\nstderr: {stderr[-3000:]}"
        ) from None
    return AgentRun(tuple(argv), process.returncode, stdout, stderr, time.monotonic() - started, context())


class Agent:
    """What both agents share: a scratch HOME, project directory and data home under `workdir`, a fake model.

    `extra_env` is added last to every command's environment (e.g. a contextfold setting for the hooks).
    """

    fake: FakeModelAPI

    def __init__(self, workdir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.home = workdir / "home"
        self.cwd = workdir / "project"
        self.data = workdir / "contextfold-data"
        for directory in (self.home, self.cwd):
            directory.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(extra_env or {})

    @property
    def env(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in _INHERITED if name in os.environ}
        # The hooks run `contextfold` and Python: this interpreter's environment comes first on PATH.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            CONTEXTFOLD_HOME=str(self.data),
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        env.update(self.extra_env)
        return env

    def _exec(self, argv: Sequence[str], timeout: float) -> AgentRun:
        return _run(argv, cwd=self.cwd, env=self.env, timeout=timeout, context=self.fake.describe)


class ClaudeCode(Agent):
    """The real `claude` CLI in a scratch home, talking to a fake Messages API."""

    def __init__(
        self, binary: Path, workdir: Path, fake: FakeMessagesAPI, extra_env: dict[str, str] | None = None
    ) -> None:
        super().__init__(workdir, extra_env)
        self.binary = binary
        self.fake = fake

    @property
    def env(self) -> dict[str, str]:
        env = super().env
        env.update(
            ANTHROPIC_BASE_URL=self.fake.base_url,
            ANTHROPIC_API_KEY="sk-ant-fake-key-for-tests",
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_ERROR_REPORTING="1",
            CLAUDE_CODE_AUTO_COMPACT_WINDOW=str(CLAUDE_COMPACT_WINDOW),
            # In -p mode Claude Code otherwise sends its first request while MCP servers still connect, and
            # the model's first call to one fails with "The MCP server ... is still connecting".
            MCP_CONNECTION_NONBLOCKING="false",
        )
        env.update(self.extra_env)
        return env

    @property
    def settings_path(self) -> Path:
        """User-scope settings (`~/.claude/settings.json`), where hooks go."""
        return self.home / ".claude" / "settings.json"

    def settings(self) -> dict[str, Any]:
        try:
            return json.loads(self.settings_path.read_text())
        except FileNotFoundError:
            return {}

    def add_hook(self, event: str, command: str, matcher: str = "") -> None:
        """Append one command hook for `event` to the user settings (what a user would write by hand)."""
        settings = self.settings()
        groups = settings.setdefault("hooks", {}).setdefault(event, [])
        groups.append({"matcher": matcher, "hooks": [{"type": "command", "command": command}]})
        self.settings_path.parent.mkdir(parents=True, exist_ok=True)
        self.settings_path.write_text(json.dumps(settings, indent=2) + "\n")

    def run(self, *args: str, timeout: float = RUN_TIMEOUT) -> AgentRun:
        """`claude ARGS...` (e.g. `mcp add ...`, `mcp list`)."""
        return self._exec([str(self.binary), *args], timeout)

    def add_mcp_server(self, name: str, *command: str, scope: str = "local") -> AgentRun:
        """`claude mcp add --scope SCOPE NAME -- COMMAND...`; the model then calls `mcp__NAME__<tool>`."""
        return self.run("mcp", "add", "--scope", scope, name, "--", *command).ok()

    def mcp_list(self) -> dict[str, str]:
        """`claude mcp list`, as {server name: the rest of its line} (e.g. "... - ✔ Connected")."""
        listed = self.run("mcp", "list").ok()
        servers = {}
        for line in listed.stdout.splitlines():
            name, sep, rest = line.partition(": ")
            if sep and name and " " not in name:
                servers[name] = rest
        return servers

    def prompt(
        self,
        text: str,
        *,
        allowed_tools: Sequence[str] = ("Bash",),
        resume: str | None = None,
        args: Sequence[str] = (),
        timeout: float = RUN_TIMEOUT,
    ) -> AgentRun:
        """`claude -p TEXT --output-format json --allowedTools ...` (resuming session `resume` when given)."""
        argv = [str(self.binary), "-p", text, "--output-format", "json"]
        if allowed_tools:
            argv += ["--allowedTools", ",".join(allowed_tools)]
        if resume is not None:
            argv += ["--resume", resume]
        return self._exec([*argv, *args], timeout)

    def compact(self, session_id: str, *, timeout: float = RUN_TIMEOUT) -> AgentRun:
        """`claude -p --resume ID /compact`: compact by hand (needs at least two model rounds before)."""
        return self.prompt("/compact", allowed_tools=(), resume=session_id, timeout=timeout)

    def transcript(self, session_id: str) -> Path:
        """The session's transcript file (`~/.claude/projects/<cwd, dashed>/<id>.jsonl`)."""
        (path,) = (self.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl")
        return path


CODEX_MODEL = "gpt-5.1-codex"


class Codex(Agent):
    """The real `codex` CLI in a scratch home (CODEX_HOME = ~/.codex), talking to a fake Responses API.

    The base config (the fake as the model provider, update checks and analytics off, the compaction limit)
    is written once at creation; installers may then merge their own entries into the same file.
    """

    def __init__(
        self,
        launcher: Path,
        workdir: Path,
        fake: FakeResponsesAPI,
        *,
        auto_compact_limit: int = 150_000,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(workdir, extra_env)
        self.launcher = launcher
        self.fake = fake
        self.auto_compact_limit = auto_compact_limit
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.base_config())

    def base_config(self) -> str:
        return (
            f'model = "{CODEX_MODEL}"\n'
            'model_provider = "contextfold-fake"\n'
            f"model_auto_compact_token_limit = {self.auto_compact_limit}\n"
            "check_for_update_on_startup = false\n"
            "\n"
            "[analytics]\n"
            "enabled = false\n"
            "\n"
            "[model_providers.contextfold-fake]\n"
            'name = "contextfold test fake"\n'
            f'base_url = "{self.fake.base_url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "CONTEXTFOLD_FAKE_OPENAI_KEY"\n'
        )

    @property
    def env(self) -> dict[str, str]:
        env = super().env
        env.update(CONTEXTFOLD_FAKE_OPENAI_KEY="fake-key-for-tests", CODEX_HOME=str(self.codex_home))
        env.update(self.extra_env)
        return env

    @property
    def config_path(self) -> Path:
        return self.codex_home / "config.toml"

    @property
    def hooks_path(self) -> Path:
        return self.codex_home / "hooks.json"

    def add_hook(self, event: str, command: str, matcher: str | None = None) -> None:
        """Append one command hook for `event` to ~/.codex/hooks.json (untrusted until reviewed)."""
        try:
            config = json.loads(self.hooks_path.read_text())
        except FileNotFoundError:
            config = {}
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if matcher is not None:
            group["matcher"] = matcher
        config.setdefault("hooks", {}).setdefault(event, []).append(group)
        self.hooks_path.write_text(json.dumps(config, indent=2) + "\n")

    def run(self, *args: str, timeout: float = RUN_TIMEOUT) -> AgentRun:
        """`codex ARGS...` (through its Node.js launcher)."""
        return self._exec([str(self.launcher), *args], timeout)

    def exec(self, prompt: str, *, args: Sequence[str] = (), timeout: float = RUN_TIMEOUT) -> AgentRun:
        """`codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --json ... PROMPT`."""
        argv = [
            str(self.launcher), "exec", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", "--json", *args, prompt,
        ]  # fmt: skip
        return self._exec(argv, timeout)

    def rollouts(self) -> list[Path]:
        """The session rollout files written so far (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`)."""
        return sorted((self.codex_home / "sessions").glob("*/*/*/rollout-*.jsonl"))


# -- hook recording --------------------------------------------------------------------------------


def hook_recorder_command(log: Path, label: str) -> str:
    """A hook command line appending `{"label", "payload", "env"}` to `log` for every event it gets."""
    return shlex.join([sys.executable, str(HOOK_RECORDER), str(log), label])


def read_hook_log(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[ClaudeCode]:
    """The real Claude Code in a scratch home under tmp_path, with its own fake Messages API running."""
    binary = required(claude_binary)
    with serve_messages_api() as fake:
        yield ClaudeCode(binary, tmp_path / "claude", fake)


@pytest.fixture
def codex(tmp_path: Path) -> Iterator[Codex]:
    """The real Codex in a scratch home under tmp_path, with its own fake Responses API running."""
    launcher = required(codex_binary)
    with serve_responses_api() as fake:
        yield Codex(launcher, tmp_path / "codex", fake)

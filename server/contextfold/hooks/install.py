"""Putting the hooks and the contextfold MCP server into Claude Code's and Codex's settings.

`plan(agent, action, …)` works out every file change first (`FileChange`: the text before and
after), so `--dry-run` prints exactly what `apply` would write. Only contextfold's own entries are
touched — a hook is ours when its command runs `… hook <agent> <Event>` of a contextfold
executable, the server when it is named `contextfold` — so everyone else's hooks and servers stay
as they were, in their order. Installing twice changes nothing; installing with another data home
or executable replaces our entries in place. Before a file is changed the first time, its bytes are
kept beside it (`<file>.contextfold-backup`); uninstall removes our entries, and when what is left
equals that backup, it puts the backup's exact bytes back (or removes a file contextfold created).

Both the hooks and the server get the same data home, written into their command lines (`--home`).

**Claude Code** (settings verified with 2.1.197): for `--scope user`, hooks in
`~/.claude/settings.json` and the server in `~/.claude.json` `mcpServers` (`$CLAUDE_CONFIG_DIR`
honoured). For `--scope project`, Claude Code's local scope: hooks in
`<project>/.claude/settings.local.json` and the server in `~/.claude.json` under
`projects["<project>"].mcpServers` (where `claude mcp add --scope local` puts it). The commands name
this machine's paths (this contextfold, the data home), so they stay out of the files a team
commits (`.claude/settings.json`, `.mcp.json`); contextfold entries found there, from an older
install, are taken out again.

**Codex** (0.169): hooks in `hooks.json` (`$CODEX_HOME`, default `~/.codex`, or
`<project>/.codex/`), the server as `[mcp_servers.contextfold]` in the same folder's `config.toml`.
Codex runs only hooks the user trusted, and silently skips the others in `codex exec`. Its own
review (`/hooks`) records trust in the user's `config.toml` as `[hooks.state."<file>:<event>:<group>:<handler>"]`
`trusted_hash = "sha256:…"`, the hash of the hook's normalized definition (Codex's
`command_hook_hash`: the event's snake-case name, the matcher and the one handler with its
defaults, as key-sorted compact JSON, SHA-256). `install` writes exactly that for our hooks, so
they run at once (`--no-trust` leaves that to the user's own review in `/hooks`); any change to a
hook changes its hash and untrusts it, which `status` reports.
A project's `.codex/` folder is read only when the project itself is trusted in the user's
config (`[projects."<path>"] trust_level = "trusted"`); `status` says so when it is not.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from contextfold.errors import InstallError

Agent = Literal["claude-code", "codex"]
Scope = Literal["user", "project"]
SERVER_NAME = "contextfold"
BACKUP_SUFFIX = ".contextfold-backup"


@dataclass(frozen=True)
class HookSpec:
    event: str
    matcher: str | None
    timeout: int
    extra: Mapping[str, Any] = field(default_factory=dict)


CLAUDE_HOOKS = (
    HookSpec("PostToolUse", "Bash|Read|mcp__.*", 60),
    HookSpec("PreCompact", None, 300),
    HookSpec("SessionStart", "compact", 300),
    HookSpec("PostCompact", None, 120),
    HookSpec("UserPromptSubmit", None, 30),
)
"""Claude Code's events and what each listens to (see `claude_code`)."""
CODEX_HOOKS = (
    HookSpec("PreCompact", None, 300),
    HookSpec("PostCompact", None, 300),
    # The handover is bounded by hook_context_tokens; Codex must pass it whole, not spill it to a file.
    HookSpec("SessionStart", "compact", 300, {"additionalContextLimit": 0}),
)
"""Codex's events (no PostToolUse: Codex has cut the output already and takes no replacement)."""

_SNAKE = {
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
}


@dataclass(frozen=True)
class FileChange:
    path: Path
    before: str | None
    """None: the file does not exist."""
    after: str | None
    """None: the file is removed."""
    removal: bool = False
    """Only contextfold's entries leave this file (an uninstall, or an install moving them elsewhere):
    no backup is made of it, and its backup goes once it is written."""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        old = (self.before or "").splitlines(keepends=True)
        new = (self.after or "").splitlines(keepends=True)
        label = str(self.path)
        return "".join(
            difflib.unified_diff(
                old,
                new,
                label if self.before is not None else "/dev/null",
                label if self.after is not None else "/dev/null",
            )
        )


@dataclass
class Plan:
    agent: Agent
    action: str
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[FileChange]:
        return [c for c in self.changes if c.changed]


@dataclass(frozen=True)
class Where:
    """Where one agent's settings live for one scope."""

    hooks: Path
    server: Path
    trust: Path | None = None
    """Codex: the user config.toml that records trust."""
    project: Path | None = None
    servers_at: tuple[str, ...] = ("mcpServers",)
    """Claude Code: the keys leading to the object of MCP servers in `server`."""
    shared: tuple[Path, Path] | None = None
    """Claude Code, project scope: the files a team commits (hooks, servers), where older
    versions installed and contextfold must no longer be."""


def locate(agent: Agent, scope: Scope, project: Path, environ: Mapping[str, str]) -> Where:
    home = Path(environ.get("HOME") or Path.home())
    if agent == "claude-code":
        config = Path(environ["CLAUDE_CONFIG_DIR"]) if environ.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        state = config / ".claude.json" if environ.get("CLAUDE_CONFIG_DIR") else home / ".claude.json"
        if scope == "user":
            return Where(config / "settings.json", state)
        return Where(
            project / ".claude" / "settings.local.json",
            state,
            project=project,
            servers_at=("projects", str(project), "mcpServers"),
            shared=(project / ".claude" / "settings.json", project / ".mcp.json"),
        )
    codex_home = Path(environ["CODEX_HOME"]) if environ.get("CODEX_HOME") else home / ".codex"
    folder = codex_home if scope == "user" else project / ".codex"
    return Where(
        folder / "hooks.json",
        folder / "config.toml",
        codex_home / "config.toml",
        project if scope == "project" else None,
    )


def executable() -> list[str]:
    """How to start this contextfold: its console script when that is what runs, else this Python with `-m`."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "contextfold" and script.exists():
        return [str(script.resolve())]
    return [sys.executable, "-m", "contextfold"]


def hook_command(base: list[str], home: Path, agent: Agent, event: str) -> str:
    return shlex.join([*base, "--home", str(home), "hook", agent, event])


AGENT_TOOLS = "read_output,search_history"
"""What the server offers an agent that keeps its own history: the spilled outputs and the past."""


def server_entry(base: list[str], home: Path) -> dict[str, Any]:
    return {"command": base[0], "args": [*base[1:], "--home", str(home), "serve", "--tools", AGENT_TOOLS]}


def is_ours(command: Any, agent: Agent, event: str | None = None) -> bool:
    """Whether a hook command is contextfold's hook for `agent` (and `event`)."""
    if not isinstance(command, str) or "contextfold" not in command:
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    for i in range(len(words) - 2):
        if words[i] == "hook" and words[i + 1] == agent and (event is None or words[i + 2] == event):
            return True
    return False


# -- planning -------------------------------------------------------------------------------------


def plan(
    agent: Agent,
    action: Literal["install", "uninstall"],
    *,
    home: Path,
    scope: Scope = "user",
    project: Path | None = None,
    base: list[str] | None = None,
    environ: Mapping[str, str] = os.environ,
    trust: bool = True,
) -> Plan:
    """Every file change `action` makes. `trust`: Codex, record our hooks as trusted (else the
    user reviews them in Codex's `/hooks`)."""
    where = locate(agent, scope, (project or Path.cwd()).resolve(), environ)
    base = base or executable()
    result = Plan(agent, action)
    specs = CLAUDE_HOOKS if agent == "claude-code" else CODEX_HOOKS
    hooks_before = _read(where.hooks)
    hooks_doc = _json(where.hooks, hooks_before)
    old_hooks = _json(where.hooks, hooks_before)
    installing = action == "install"
    _merge_hooks(hooks_doc, agent, specs, base, home, installing)
    if agent == "claude-code":
        note = _merge_status_line(hooks_doc, base, home, installing)
        if note:
            result.notes.append(note)
    result.changes.append(_change(where.hooks, hooks_before, _dump_json(hooks_doc), installing))
    if agent == "claude-code":
        server_before = _read(where.server)
        server_doc = _json(where.server, server_before)
        entry = {"type": "stdio", **server_entry(base, home), "env": {}} if installing else None
        _put_server(where.server, server_doc, where.servers_at, entry)
        result.changes.append(_change(where.server, server_before, _dump_json(server_doc), installing))
        if where.shared is not None:
            result.changes += _leave_shared(where.shared)
            if installing:
                result.notes.append(_local_note(where, base, home))
        return result
    import tomlkit

    config_before = _read(where.server)
    config = _toml(where.server, config_before)
    servers = config.setdefault("mcp_servers", tomlkit.table(True))
    if installing:
        entry = tomlkit.table()
        for key, value in server_entry(base, home).items():
            entry[key] = value
        servers[SERVER_NAME] = entry
    else:
        servers.pop(SERVER_NAME, None)
        if not servers:
            config.pop("mcp_servers")
    trust_same = where.trust == where.server
    trust_before = config_before if trust_same else _read(where.trust) if where.trust else None
    trust_doc = config if trust_same else _toml(where.trust, trust_before) if where.trust else None
    if trust_doc is not None:
        _merge_trust(trust_doc, where.hooks, old_hooks, hooks_doc, record=trust)
    result.changes.append(_change(where.server, config_before, tomlkit.dumps(config), installing))
    if trust_doc is not None and not trust_same and where.trust is not None:
        result.changes.append(_change(where.trust, trust_before, tomlkit.dumps(trust_doc), installing))
    if installing and not trust:
        result.notes.append(
            "--no-trust: Codex skips these hooks until you trust them; review them with /hooks in Codex "
            "(`contextfold hooks status codex` lists them untrusted until then)"
        )
    if installing and scope == "project" and where.project is not None and not project_trusted(where, environ):
        result.notes.append(
            f"Codex reads {where.hooks.parent} only for a trusted project: trust {where.project} when Codex asks, or add "
            f'[projects."{where.project}"] trust_level = "trusted" to {where.trust}'
        )
    return result


def apply(result: Plan) -> None:
    for change in result.changed:
        backup = change.path.with_name(change.path.name + BACKUP_SUFFIX)
        if change.after is None:
            change.path.unlink(missing_ok=True)
        else:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            if not change.removal and change.before is not None and not backup.exists():
                backup.write_text(change.before, "utf-8")
            temporary = change.path.with_name(f".{change.path.name}.{os.getpid()}.tmp")
            temporary.write_text(change.after, "utf-8")
            if change.path.exists():
                os.chmod(temporary, change.path.stat().st_mode & 0o777)
            os.replace(temporary, change.path)
        if change.removal:
            backup.unlink(missing_ok=True)
    if result.action == "uninstall":
        for change in result.changes:
            change.path.with_name(change.path.name + BACKUP_SUFFIX).unlink(missing_ok=True)


# -- status ---------------------------------------------------------------------------------------


@dataclass
class HookStatus:
    event: str
    installed: bool
    command: str | None = None
    trust: str | None = None
    """Codex: `trusted`, `untrusted` or `modified` (trusted once, changed since)."""


@dataclass
class Status:
    agent: Agent
    scope: Scope
    hooks_file: Path
    server_file: Path
    hooks: list[HookStatus]
    server: dict[str, Any] | None
    home: str | None
    """The data home the installed hooks name (None when none is installed)."""
    problems: list[str]


def status(
    agent: Agent, *, scope: Scope = "user", project: Path | None = None, environ: Mapping[str, str] = os.environ
) -> Status:
    where = locate(agent, scope, (project or Path.cwd()).resolve(), environ)
    specs = CLAUDE_HOOKS if agent == "claude-code" else CODEX_HOOKS
    doc = _json(where.hooks, _read(where.hooks))
    found: list[HookStatus] = []
    homes: set[str] = set()
    trusted = _trusted_hashes(where.trust) if agent == "codex" else {}
    problems: list[str] = []
    for spec in specs:
        groups = doc.get("hooks", {}).get(spec.event, [])
        hit = None
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            for h, handler in enumerate(group.get("hooks", []) if isinstance(group, dict) else []):
                if isinstance(handler, dict) and is_ours(handler.get("command"), agent, spec.event):
                    hit = (g, h, group, handler)
        if hit is None:
            found.append(HookStatus(spec.event, False))
            continue
        g, h, group, handler = hit
        homes.add(_home_in(handler["command"]) or "")
        entry = HookStatus(spec.event, True, handler["command"])
        if agent == "codex":
            key = f"{where.hooks}:{_SNAKE[spec.event]}:{g}:{h}"
            expected = codex_hash(spec.event, group.get("matcher"), handler)
            recorded = trusted.get(key)
            entry.trust = "trusted" if recorded == expected else "modified" if recorded else "untrusted"
            if entry.trust != "trusted":
                problems.append(
                    f"Codex skips the {spec.event} hook: it is {entry.trust}; run `contextfold hooks install codex"
                    f"{' --scope project' if scope == 'project' else ''}` again, or trust it in Codex's /hooks"
                )
        found.append(entry)
    server = _server(agent, where)
    if any(s.installed for s in found) and server is None:
        problems.append(f"the contextfold MCP server is not in {where.server}, so the model cannot call read_output")
    for path in _shared_with_ours(where):
        problems.append(
            f"{path} holds contextfold entries naming this machine's paths, in a file a team usually commits; "
            "run `contextfold hooks install claude-code --scope project` again to move them to the local settings"
        )
    if agent == "codex" and scope == "project" and where.project is not None and not project_trusted(where, environ):
        problems.append(f"Codex reads {where.hooks.parent} only when {where.project} is a trusted project")
    return Status(agent, scope, where.hooks, where.server, found, server, ",".join(sorted(homes)) or None, problems)


def project_trusted(where: Where, environ: Mapping[str, str]) -> bool:
    if where.trust is None or where.project is None:
        return True
    doc = _toml(where.trust, _read(where.trust))
    projects = doc.get("projects", {})
    entry = projects.get(str(where.project), {}) if hasattr(projects, "get") else {}
    return hasattr(entry, "get") and entry.get("trust_level") == "trusted"


# -- Codex's trust hash ---------------------------------------------------------------------------


def codex_hash(event: str, matcher: str | None, handler: Mapping[str, Any]) -> str:
    """The hash Codex 0.169 trusts a command hook by (`command_hook_hash`): the event's snake-case
    label, the matcher and the one handler as Codex normalizes it (timeout defaults to 600 s, at
    least 1; `async` false; unset fields left out), as compact JSON with sorted keys, SHA-256."""
    normalized: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(1, int(handler.get("timeout", handler.get("timeoutSec", 600)) or 600)),
        "async": bool(handler.get("async", False)),
    }
    for key in ("statusMessage", "additionalContextLimit"):
        if handler.get(key) is not None:
            normalized[key] = handler[key]
    identity: dict[str, Any] = {"event_name": _SNAKE[event], "hooks": [normalized]}
    if matcher is not None and matcher not in ("", "*") or (matcher == "*" and event in ("PreToolUse", "PostToolUse")):
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- helpers --------------------------------------------------------------------------------------


def _merge_hooks(
    doc: dict[str, Any], agent: Agent, specs: tuple[HookSpec, ...], base: list[str], home: Path, installing: bool
) -> None:
    """Put our handler for each spec in `doc`, in place of an earlier one of ours (or take it out);
    everyone else's groups and handlers keep their order."""
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError("the settings' `hooks` is not an object; fix it by hand, then install again")
    for spec in specs:
        groups = hooks.setdefault(spec.event, [])
        if not isinstance(groups, list):
            raise InstallError(f"the settings' hooks.{spec.event} is not a list; fix it by hand, then install again")
        handler = {
            "type": "command",
            "command": hook_command(base, home, agent, spec.event),
            "timeout": spec.timeout,
            **spec.extra,
        }
        placed = False
        emptied: set[int] = set()
        for g, group in enumerate(groups):
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                continue
            mine = [
                i for i, h in enumerate(inner) if isinstance(h, dict) and is_ours(h.get("command"), agent, spec.event)
            ]
            if mine and not placed and installing and group.get("matcher") == spec.matcher:
                inner[mine[0]] = handler  # where it was: reinstalling moves nothing
                mine, placed = mine[1:], True
            for i in reversed(mine):
                del inner[i]
            if mine and not inner:
                emptied.add(g)
        hooks[spec.event] = groups = [group for g, group in enumerate(groups) if g not in emptied]
        if installing:
            if not placed:
                groups.append(
                    {"matcher": spec.matcher, "hooks": [handler]} if spec.matcher is not None else {"hooks": [handler]}
                )
        if not groups:
            del hooks[spec.event]
    if not hooks:
        del doc["hooks"]


def _merge_status_line(doc: dict[str, Any], base: list[str], home: Path, installing: bool) -> str | None:
    """Claude Code's status line: ours when there is none (or ours already); someone else's stays."""
    current = doc.get("statusLine")
    ours = isinstance(current, dict) and is_ours(current.get("command"), "claude-code", "StatusLine")
    if not installing:
        if ours:
            del doc["statusLine"]
        return None
    if current is not None and not ours:
        return (
            "your Claude Code statusLine is kept; contextfold's (tokens in view, usable, state) is `"
            + hook_command(base, home, "claude-code", "StatusLine")
            + "` if you want it"
        )
    doc["statusLine"] = {"type": "command", "command": hook_command(base, home, "claude-code", "StatusLine")}
    return None


def _merge_trust(doc: Any, hooks_file: Path, old: dict[str, Any], new: dict[str, Any], *, record: bool = True) -> None:
    """Record trust for our handlers in `new` (unless not `record`), drop it for ours in `old`, and
    move other tools' trust with their handlers when ours coming or going shifted their positions
    (Codex keys trust by `<file>:<event>:<group>:<handler>`)."""
    import tomlkit

    prefix = f"{hooks_file}:"
    old_at, new_at = _positions(old), _positions(new)
    moves: dict[str, str] = {}
    ours_before: set[str] = set()
    for event in set(old_at) | set(new_at):
        theirs_old = [key for key, _, mine in old_at.get(event, []) if not mine]
        theirs_new = [key for key, _, mine in new_at.get(event, []) if not mine]
        moves |= {prefix + a: prefix + b for a, b in zip(theirs_old, theirs_new, strict=False) if a != b}
        ours_before |= {prefix + key for key, _, mine in old_at.get(event, []) if mine}
    hooks = doc.get("hooks")
    state = hooks.get("state") if hasattr(hooks, "get") else None
    kept: dict[str, Any] = {}
    if state is not None:
        for key in list(state):
            if key in moves or key in ours_before:
                entry = state[key]
                del state[key]
                if key in moves:
                    kept[moves[key]] = entry
    ours_now = [(prefix + key, entry) for event in new_at for key, entry, mine in new_at[event] if mine and record]
    if not kept and not ours_now:
        if state is not None and not state:
            del hooks["state"]
            if not hooks:
                del doc["hooks"]
        return
    if "hooks" not in doc:
        doc["hooks"] = tomlkit.table(True)
    if "state" not in doc["hooks"]:
        doc["hooks"]["state"] = tomlkit.table(True)
    state = doc["hooks"]["state"]
    for key, entry in kept.items():
        state[key] = entry
    for key, (event, matcher, handler) in ours_now:
        entry = tomlkit.table()
        entry["trusted_hash"] = codex_hash(event, matcher, handler)
        state[key] = entry


def _positions(doc: dict[str, Any]) -> dict[str, list[tuple[str, tuple[str, Any, dict[str, Any]], bool]]]:
    """Per event of a Codex hooks file: (`event:group:handler` key, (event, matcher, handler), ours)
    of each command handler."""
    found: dict[str, list[tuple[str, tuple[str, Any, dict[str, Any]], bool]]] = {}
    given = doc.get("hooks")
    hooks: dict[str, Any] = given if isinstance(given, dict) else {}
    for event, groups in hooks.items():
        if event not in _SNAKE or not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            inner = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(handler, dict) and isinstance(handler.get("command"), str):
                    mine = is_ours(handler["command"], "codex", event)
                    found.setdefault(event, []).append(
                        (f"{_SNAKE[event]}:{g}:{h}", (event, group.get("matcher"), handler), mine)
                    )
    return found


def _trusted_hashes(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    doc = _toml(path, _read(path))
    state = doc.get("hooks", {}).get("state", {}) if hasattr(doc.get("hooks", {}), "get") else {}
    return {str(k): str(v.get("trusted_hash")) for k, v in state.items() if hasattr(v, "get") and v.get("trusted_hash")}


def _server(agent: Agent, where: Where) -> dict[str, Any] | None:
    if agent == "claude-code":
        found: Any = _json(where.server, _read(where.server))
        for key in where.servers_at:
            found = found.get(key) if isinstance(found, dict) else None
        entry = found.get(SERVER_NAME) if isinstance(found, dict) else None
    else:
        entry = _toml(where.server, _read(where.server)).get("mcp_servers", {}).get(SERVER_NAME)
        entry = json.loads(json.dumps(entry)) if entry is not None else None
    return entry if isinstance(entry, dict) else None


def _put_server(path: Path, doc: dict[str, Any], keys: tuple[str, ...], entry: dict[str, Any] | None) -> None:
    """Put our server `entry` in the object `keys` lead to in `doc` (making what is missing), or,
    with None, take it out along with the objects it leaves empty that the file's backup (what
    it held before contextfold) did not have."""
    if entry is not None:
        servers = doc
        for key in keys:
            servers = servers.setdefault(key, {})
            if not isinstance(servers, dict):
                raise InstallError(f"{path}: {'.'.join(keys)} is not an object; fix it by hand, then install again")
        servers[SERVER_NAME] = entry
        return
    chain = [doc]
    for key in keys:
        inner = chain[-1].get(key)
        if not isinstance(inner, dict):
            return
        chain.append(inner)
    chain[-1].pop(SERVER_NAME, None)
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    kept: Any = _json(backup, _read(backup)) if backup.exists() else {}
    had: list[bool] = []
    for key in keys:
        kept = kept.get(key) if isinstance(kept, dict) else None
        had.append(isinstance(kept, dict))
    for depth in range(len(keys), 0, -1):
        if chain[depth] or had[depth - 1]:
            break
        del chain[depth - 1][keys[depth - 1]]


def _leave_shared(shared: tuple[Path, Path]) -> list[FileChange]:
    """Our entries out of the project's committed Claude Code files, where older versions put them."""
    changes: list[FileChange] = []
    for path in shared:
        text = _read(path)
        try:
            doc = _json(path, text)
            if path.name == ".mcp.json":
                _put_server(path, doc, ("mcpServers",), None)
            else:
                _merge_hooks(doc, "claude-code", CLAUDE_HOOKS, [], Path(), installing=False)
                _merge_status_line(doc, [], Path(), installing=False)
        except InstallError:
            continue  # not a file contextfold wrote into: nothing of ours to take out
        if text is not None:
            changes.append(replace(_change(path, text, _dump_json(doc), installing=False), removal=True))
    return changes


def _shared_with_ours(where: Where) -> list[Path]:
    """The project's committed Claude Code files that still hold contextfold's entries."""
    if where.shared is None:
        return []
    return [c.path for c in _leave_shared(where.shared) if c.changed]


def _local_note(where: Where, base: list[str], home: Path) -> str:
    return (
        f"project scope writes Claude Code's local settings: the hooks in {where.hooks} and the server in "
        f"{where.server} under this project (as `claude mcp add --scope local` does), not the committed "
        f".claude/settings.json and .mcp.json, because the commands name this machine's paths ({base[0]} and "
        f"the data home {home}); Claude Code keeps settings.local.json out of git when it creates it, so add it "
        "to .gitignore if git lists it"
    )


def _home_in(command: str) -> str | None:
    words = shlex.split(command)
    return words[words.index("--home") + 1] if "--home" in words[:-1] else None


def _read(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {path}: {exc}") from exc


def _json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix it by hand, then install again") from exc
    except RecursionError as exc:
        raise InstallError(f"{path} is nested too deeply to read as JSON; fix it by hand, then install again") from exc
    if not isinstance(value, dict):
        raise InstallError(f"{path} does not hold a JSON object; fix it by hand, then install again")
    return value


def _toml(path: Path, text: str | None) -> Any:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse(text or "")
    except TOMLKitError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); fix it by hand, then install again") from exc


def _dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _change(path: Path, before: str | None, after: str, installing: bool) -> FileChange:
    """The change to `path`; on uninstall, the exact bytes from before install when nothing else
    changed, and no file when contextfold created it."""
    if not installing:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        original = _read(backup) if backup.exists() else None
        if original is not None and _same(path, original, after):
            return FileChange(path, before, original, removal=True)
        if original is None and _empty(path, after) and before is not None:
            return FileChange(path, before, None, removal=True)
    if before is None and _empty(path, after):
        return FileChange(path, None, None)
    if before is not None and _same(path, before, after):
        return FileChange(path, before, before)
    return FileChange(path, before, after)


def _same(path: Path, one: str, other: str) -> bool:
    if path.suffix == ".toml":
        import tomlkit

        same: bool = tomlkit.parse(one).unwrap() == tomlkit.parse(other).unwrap()
        return same
    try:
        equal: bool = json.loads(one or "{}") == json.loads(other or "{}")
        return equal
    except ValueError:
        return False


def _empty(path: Path, text: str) -> bool:
    if path.suffix == ".toml":
        import tomlkit

        return not tomlkit.parse(text).unwrap()
    return not json.loads(text or "{}")


__all__ = [
    "CLAUDE_HOOKS",
    "CODEX_HOOKS",
    "FileChange",
    "InstallError",
    "Plan",
    "Status",
    "apply",
    "codex_hash",
    "executable",
    "hook_command",
    "is_ours",
    "locate",
    "plan",
    "status",
]

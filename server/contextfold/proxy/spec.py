"""The upstreams the proxy stands in front of: a command (stdio) or a URL, and the servers file.

`--config servers.json` names several in the `mcpServers` format the apps write:
`{"mcpServers": {"NAME": {"command": …, "args": […], "env": {…}, "cwd": …}}}` for a stdio server,
`{"url": …, "headers": {…}}` for one over HTTP (VS Code's `{"servers": …}` with `"type"` is read
too; `"disabled": true` leaves an entry out).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from contextfold.errors import UsageError

__all__ = ["NAME", "SEPARATOR", "ServersFileError", "UpstreamSpec", "load_servers"]

SEPARATOR = "__"
"""Between a server's name and its tools' and prompts' names (`NAME__tool`)."""
NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


@dataclass(frozen=True)
class UpstreamSpec:
    command: list[str] | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    """Set for the upstream on top of the proxy's own environment."""
    cwd: str | None = None
    name: str | None = None
    """Its name in a `--config` file (the prefix of its tools and prompts)."""

    @property
    def label(self) -> str:
        """The upstream as a person would name it: the command without its program's path, or the URL."""
        if self.command:
            return " ".join([os.path.basename(self.command[0]), *self.command[1:]])
        return self.url or ""


class ServersFileError(ValueError):
    """The servers file cannot be used; the message says which entry and why."""


def load_servers(path: Path) -> list[UpstreamSpec]:
    try:
        document = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such servers file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not a JSON servers file ({exc})") from None
    servers = document.get("mcpServers", document.get("servers")) if isinstance(document, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise UsageError(f'{path}: expected {{"mcpServers": {{"NAME": {{"command": …, "args": […]}}, …}}}}')
    specs = []
    for name, entry in servers.items():
        where = f"{path}: mcpServers.{name}"
        if not NAME.match(name) or SEPARATOR in name:
            raise UsageError(
                f"{where}: a name is 1-40 letters, digits, '-' or '_' (not '__'); it prefixes the server's tools"
            )
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected an object with command and args, or url")
        if entry.get("disabled") is True:
            continue
        env = entry.get("env") or {}
        headers = entry.get("headers") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise UsageError(f"{where}.env: expected an object of strings")
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise UsageError(f"{where}.headers: expected an object of strings")
        if isinstance(entry.get("command"), str) and entry["command"]:
            args = entry.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise UsageError(f"{where}.args: expected a list of strings")
            cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
            specs.append(UpstreamSpec(command=[entry["command"], *args], env=dict(env), cwd=cwd, name=name))
        elif isinstance(entry.get("url"), str):
            kind = entry.get("type", "http")
            if kind not in ("http", "streamable-http", "streamableHttp"):
                raise UsageError(f"{where}.type: {kind!r} is not served; use a streamable HTTP url (type http)")
            specs.append(UpstreamSpec(url=entry["url"], headers=dict(headers), name=name))
        else:
            raise UsageError(f"{where}: needs a command (stdio) or a url (streamable HTTP)")
    if not specs:
        raise UsageError(f"{path}: every server is disabled")
    return specs

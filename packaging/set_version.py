"""Pin every app file in this repository to the package's version (pyproject.toml's `version`).

    python packaging/set_version.py          # rewrite the pins after a version bump
    python packaging/set_version.py --check  # exit 1, naming the files, when a pin differs

The pins: the Claude Code marketplace and plugin manifests, the Codex plugin manifest, the plugin's launcher
(`VERSION=`), the MCPB bundle's manifest and pyproject, server.json, gemini-extension.json, and the commands
and install links in docs/install.md (the Cursor link's base64 configuration is rebuilt). The tests in
tests/e2e/test_plugin_*.py and tests/e2e/test_app_manifests.py check the same pins.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _version() -> str:
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    if not found:
        raise SystemExit("set_version: pyproject.toml has no version line")
    return found.group(1)


Update = Callable[[str, str], str]
"""A file's text and the version -> the text with the version pinned."""


def _regex_file(path: str, *patterns: str) -> tuple[str, Update]:
    """Each pattern has one group, the version, replaced wherever the pattern matches."""

    def update(text: str, version: str) -> str:
        for pattern in patterns:
            text = re.sub(pattern, lambda m: m.group(0).replace(m.group(1), version), text)
        return text

    return path, update


def _docs(text: str, version: str) -> str:
    text = re.sub(
        r"contextfold(==|-)[0-9][0-9A-Za-z.+!-]*?(?=[ \"'\]`,)]|-py3|\.mcpb|\.tar\.gz)",
        rf"contextfold\g<1>{version}",
        text,
    )
    text = re.sub(r"venv-[0-9][0-9A-Za-z.+!-]*?(?=/|`)", f"venv-{version}", text)
    text = re.sub(r"`[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+!-]*` for the\s+version", f"`{version}` for the\nversion", text)
    text = re.sub(r"version\s+[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+!-]*, run with", f"version\n{version}, run with", text)
    args = ["--from", f"contextfold=={version}", "contextfold", "serve"]
    cursor = base64.b64encode(json.dumps({"command": "uvx", "args": args}, separators=(",", ":")).encode()).decode()
    text = re.sub(
        r"(cursor://anysphere\.cursor-deeplink/mcp/install\?name=contextfold&config=)[A-Za-z0-9+/=]+",
        rf"\g<1>{cursor}",
        text,
    )
    vscode = json.dumps({"name": "contextfold", "command": "uvx", "args": args}, separators=(",", ":"))
    text = re.sub(r"(vscode:mcp/install\?)[^)\s]+", lambda m: m.group(1) + urllib.parse.quote(vscode, safe=""), text)
    return text


JSON_VERSION = r'"version": "([^"]+)"'
"""A JSON file's `"version"` keys (each one in these files is the package's version; `manifest_version` is not
matched). Edited in place, so the files keep their layout."""

FILES: list[tuple[str, Update]] = [
    _regex_file(".claude-plugin/marketplace.json", JSON_VERSION),
    _regex_file("plugins/contextfold/.claude-plugin/plugin.json", JSON_VERSION),
    _regex_file("plugins/contextfold/.codex-plugin/plugin.json", JSON_VERSION),
    _regex_file("plugins/contextfold/bin/contextfold", r"\nVERSION=([^ \n]+) "),
    _regex_file("packaging/mcpb/manifest.json", JSON_VERSION),
    _regex_file("packaging/mcpb/pyproject.toml", r'\nversion = "([^"]+)"', r'"contextfold==([^"]+)"'),
    _regex_file("server.json", JSON_VERSION),
    _regex_file("gemini-extension.json", JSON_VERSION, r'"contextfold==([^"]+)"'),
    ("docs/install.md", _docs),
]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    version = _version()
    differing = []
    for path, update in FILES:
        file = ROOT / path
        before = file.read_text()
        after = update(before, version)
        if after != before:
            differing.append(path)
            if not check:
                file.write_text(after)
    if check and differing:
        print(f"set_version: these files do not pin {version}: {', '.join(differing)}", file=sys.stderr)
        return 1
    if not check:
        print(
            f"set_version: {version} pinned" + (f" in {', '.join(differing)}" if differing else " (nothing to change)")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

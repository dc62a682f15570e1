"""The files other apps install contextfold from, each checked by the tool that consumes it.

- Claude Desktop's MCPB bundle (`packaging/mcpb/`): `mcpb validate` and `mcpb pack` (the MCPB CLI pinned in
  tests/apps), then the packed bundle unpacked and run as its host runs a `uv` bundle (`uv run` in the bundle's
  folder), its server answering `tools/list` to a real MCP client over stdio.
- The MCP Registry's `server.json`: validated with `jsonschema` against the registry's published schema
  (vendored in tests/registry; no package carries it).
- Gemini CLI's `gemini-extension.json`: `gemini extensions validate`, then `gemini extensions link` into a
  scratch home and `gemini extensions list` naming the server and its command (the Gemini CLI pinned in
  tests/apps).
- The Cursor and VS Code install links in docs/install.md: their configuration decodes to the command the
  other files run.

Every pin names the package's own version. contextfold is not on the package index yet, so the runs that
install it (the bundle's `uv run`) find the wheel built from this checkout through `UV_FIND_LINKS`.
Without the npm tree (`npm ci --prefix tests/apps`) or uv these skip locally and fail under CI=true.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import urllib.parse
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _package import ROOT, Dist, clean_env, unavailable, uv_binary
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = [pytest.mark.npm, pytest.mark.anyio]

APPS = ROOT / "tests" / "apps"
BUNDLE = ROOT / "packaging" / "mcpb"
DOCS = ROOT / "docs" / "install.md"
COMMAND = ["uvx", "--from", "contextfold=={version}", "contextfold", "serve"]
"""What Gemini CLI, Cursor and VS Code run: the pinned package through uvx."""


def _version() -> str:
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found
    return found.group(1)


def _command() -> list[str]:
    return [part.format(version=_version()) for part in COMMAND]


def _tool(name: str) -> Path:
    path = APPS / "node_modules" / ".bin" / name
    if shutil.which("node") is None:
        unavailable("node is not installed: the app manifests' tools need Node.js")
    if not path.exists():
        unavailable(f"{path} is missing: run `npm ci --prefix tests/apps`")
    return path


def _run(argv: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"$ {' '.join(map(str, argv))}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_every_app_file_pins_the_package_version() -> None:
    """packaging/set_version.py --check: after a version bump, `python packaging/set_version.py` updates them."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "set_version.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


# -- Claude Desktop: the MCPB bundle -----------------------------------------------------------------


def test_the_mcpb_manifest_pins_the_package_version() -> None:
    manifest = _json(BUNDLE / "manifest.json")
    assert manifest["version"] == _version()
    assert manifest["server"]["type"] == "uv" and manifest["server"]["entry_point"] == "server/main.py"
    project = (BUNDLE / "pyproject.toml").read_text()
    assert f'dependencies = ["contextfold=={_version()}"]' in project, project


async def test_mcpb_validates_packs_and_the_bundle_serves_tools(built_dist: Dist, tmp_path: Path) -> None:
    mcpb = _tool("mcpb")
    env = clean_env(tmp_path / "home")
    checked = _run([mcpb, "validate", BUNDLE / "manifest.json"], cwd=tmp_path, env=env)
    assert "passes" in checked, checked
    packed = tmp_path / "contextfold.mcpb"
    _run([mcpb, "pack", BUNDLE, packed], cwd=tmp_path, env=env)
    with zipfile.ZipFile(packed) as bundle:
        assert sorted(bundle.namelist()) == ["manifest.json", "pyproject.toml", "server/main.py"]
        bundle.extractall(tmp_path / "unpacked")

    # As Claude Desktop runs a uv bundle: `uv run` in its folder installs the pinned contextfold and starts it.
    uv = uv_binary()
    env = clean_env(
        tmp_path / "home",
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_FIND_LINKS=str(built_dist.wheel.parent),
        UV_PYTHON_DOWNLOADS="never",
        CONTEXTFOLD_HOME=str(tmp_path / "data"),
    )
    unpacked = tmp_path / "unpacked"
    params = StdioServerParameters(
        command=str(uv), args=["run", "--directory", str(unpacked), "server/main.py"], env=env, cwd=tmp_path
    )
    with open(tmp_path / "bundle.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {"read_output", "search_history", "compact"} <= tools, (tmp_path / "bundle.log").read_text()[-2000:]


# -- the MCP Registry: server.json --------------------------------------------------------------------


def test_server_json_is_valid_against_the_registrys_published_schema() -> None:
    import jsonschema

    schema = _json(ROOT / "tests" / "registry" / "server.schema.json")
    server = _json(ROOT / "server.json")
    assert server["$schema"] == schema["$id"]
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(server)]
    assert not errors, errors
    (package,) = server["packages"]
    assert server["version"] == package["version"] == _version()
    assert package["registryType"] == "pypi" and package["identifier"] == "contextfold"
    assert [a["value"] for a in package["packageArguments"]] == ["serve"]


def test_the_schema_check_rejects_what_the_registry_rejects() -> None:
    """The vendored schema is the real one: it refuses a floating version and a long description."""
    import jsonschema

    schema = _json(ROOT / "tests" / "registry" / "server.schema.json")
    server = _json(ROOT / "server.json")
    for broken in (
        {**server, "packages": [{**server["packages"][0], "version": "latest"}]},
        {**server, "description": "x" * 101},
        {**server, "name": "contextfold"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


# -- Gemini CLI: gemini-extension.json -------------------------------------------------------------------


def test_gemini_validates_and_links_the_extension(tmp_path: Path) -> None:
    gemini = _tool("gemini")
    manifest = _json(ROOT / "gemini-extension.json")
    assert manifest["version"] == _version()
    (server,) = manifest["mcpServers"].values()
    assert [server["command"], *server["args"]] == _command()

    env = clean_env(tmp_path / "home", NO_BROWSER="true")
    checked = _run([gemini, "extensions", "validate", ROOT], cwd=tmp_path, env=env)
    assert "successfully validated" in checked, checked
    _run([gemini, "extensions", "link", ROOT, "--consent"], cwd=tmp_path, env=env)
    listed = _run([gemini, "extensions", "list"], cwd=tmp_path, env=env)
    assert f"contextfold ({_version()})" in listed and "contextfold" in listed.split("MCP servers:")[-1], listed


# -- Cursor and VS Code: the install links in docs/install.md ----------------------------------------------


def test_the_cursor_deeplink_decodes_to_the_pinned_command() -> None:
    text = DOCS.read_text()
    (link,) = set(re.findall(r"cursor://anysphere\.cursor-deeplink/mcp/install\?[^)\s\"']+", text))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    assert query["name"] == ["contextfold"]
    config = json.loads(base64.b64decode(query["config"][0], validate=True))
    assert config == {"command": "uvx", "args": _command()[1:]}


def test_the_vscode_install_link_decodes_to_the_pinned_command() -> None:
    text = DOCS.read_text()
    (link,) = set(re.findall(r"vscode:mcp/install\?[^)\s\"']+", text))
    config = json.loads(urllib.parse.unquote(link.split("?", 1)[1]))
    assert config == {"name": "contextfold", "command": "uvx", "args": _command()[1:]}
    assert f"code --add-mcp '{json.dumps(config, separators=(',', ':'))}'" in text


def test_the_pinned_command_runs_the_wheel(built_dist: Dist, tmp_path: Path) -> None:
    """`uvx --from contextfold==<version> contextfold` (what Gemini CLI, Cursor and VS Code run) resolves to this
    checkout's wheel when the index is replaced by the built files: the pin names the built version."""
    uv = uv_binary()
    env = clean_env(
        tmp_path / "home",
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_FIND_LINKS=str(built_dist.wheel.parent),
        UV_PYTHON_DOWNLOADS="never",
    )
    out = _run([uv, "tool", "run", *_command()[1:4], "--version"], cwd=tmp_path, env=env)
    assert f"contextfold {_version()}" in out, out

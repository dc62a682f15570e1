"""The documentation cannot drift from the code: the reference pages are generated from it, and the
hand-written pages name only what exists.

docs/hooks/reference.py writes the command-line, configuration, MCP tools and models pages at every
`mkdocs build` (tests/e2e/test_docs_build.py builds the site strictly); here its renderers are called
directly and checked against the parser, the settings, the server's tool listing and the catalogue.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cell(text: str) -> str:
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def test_every_command_and_argument_is_on_the_cli_page(reference: ModuleType) -> None:
    from contextfold.cli.dispatch import build_parser

    page = reference.cli_markdown()
    for path, _help, parser in reference._commands(build_parser()):
        assert f"\n## contextfold {path}".rstrip() + "\n" in page, path
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            for option in action.option_strings:
                assert re.search(rf"[`, ]{re.escape(option)}[`, ]", page), (path, option)
            if action.help:
                assert _cell(action.help) in page, (path, action.help)
    assert "## contextfold completion" in page and "## contextfold hooks install" in page


def test_every_setting_is_on_the_configuration_page_with_its_description(reference: ModuleType) -> None:
    from contextfold.config import Settings

    page = reference.config_markdown()
    for name, field in Settings.model_fields.items():
        assert field.description, f"setting {name} has no description: the reference would say nothing"
        row = next((line for line in page.splitlines() if line.startswith(f"| `{name}`<br>")), None)
        assert row is not None, name
        assert f"CONTEXTFOLD_{name.upper()}" in row and _cell(field.description) in row, name
    assert "## Other settings" not in page  # every setting sits under a section of config.py
    spill = next(line for line in page.splitlines() if line.startswith("| `spill_quota_bytes`"))
    assert "(2 GiB)" in spill and "server-wide" in spill
    batch = next(line for line in page.splitlines() if line.startswith("| `max_batch_messages`"))
    assert "lower only" in batch


def test_every_tool_resource_and_prompt_is_on_the_tools_page(reference: ModuleType) -> None:
    from contextfold.config import Settings
    from contextfold.mcpserver.tools import build_server

    server = build_server(Settings(home=ROOT / "no-such-home-is-opened"))
    tools = asyncio.run(server.list_tools())
    page = reference.tools_markdown()
    assert len(tools) >= 14  # every tool is checked below, whatever their number
    for tool in tools:
        assert f"\n## {tool.name}\n" in page
        assert (tool.description or "").strip() in page
        for field in tool.input_schema.get("properties", {}):
            assert f"| `{field}` |" in page, (tool.name, field)
    assert "contextfold://outputs/{output_id}" in page and "`anchored_summary`" in page


def test_the_models_page_lists_the_catalogue(reference: ModuleType) -> None:
    from contextfold.tokens.catalog import known_models

    page = reference.models_markdown()
    for info in known_models():
        assert f"| `{info.id}` |" in page
    assert "| `gpt-4o` | openai | 128,000 | 16,384 | — | 16,384 | 111,616 | exact o200k_base |" in page


def test_the_site_names_only_pages_that_exist() -> None:
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    generated = {"reference/cli.md", "reference/configuration.md", "reference/tools.md", "reference/models.md"}
    generated.add("changelog.md")
    pages = re.findall(r":\s+([\w/.-]+\.md)\s*$", config, re.M)
    assert len(pages) > 20
    missing = [p for p in pages if p not in generated and not (DOCS / p).is_file()]
    assert not missing, missing
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "hooks" not in p.parts}
    assert on_disk <= set(pages), f"pages not in the nav: {sorted(on_disk - set(pages))}"


def test_the_limits_page_names_real_settings() -> None:
    from contextfold.config import Settings

    text = (DOCS / "reference" / "limits.md").read_text("utf-8")
    named = re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", text, re.M)
    assert named
    for pair in named:
        for name in filter(None, pair):
            assert name in Settings.model_fields, name


def test_the_readme_is_short_and_its_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", readme):
        assert (ROOT / target).exists(), target
    assert "issue" not in readme.lower()


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    install = re.search(r"pip install -q -e '(\.\[[\w,]+\])'", ci)
    assert install, "CI's install line"
    assert f"pip install -q -e '{install.group(1)}' && pytest --full" in readme
    assert "pytest --full" in ci and "mkdocs build --strict" in ci
    extras = set(install.group(1)[2:-1].split(","))
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    assert extras <= set(declared) and "docs" in extras


def test_the_version_is_one_and_has_a_changelog_section() -> None:
    import contextfold

    version = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    assert contextfold.__version__ == version
    changelog = (ROOT / "CHANGELOG.md").read_text("utf-8")
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.M)
    assert "## [Unreleased]" in changelog
    assert not re.search(r"\bissue \d+", changelog, re.I)


def test_the_pages_carry_no_internal_issue_numbers_or_history() -> None:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        if page.name in ("design.md", "install.md", "inspector.md", "steering.md", "search.md"):
            continue  # design notes, and the pages other parts of the project write
        for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
            if re.search(r"\bissue \d+|\(before[:,]|old code", line, re.I):
                found.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_the_configuration_pages_example_file_loads(reference: ModuleType, tmp_path: Path) -> None:
    from contextfold.config import load_settings

    example = re.search(r"```toml\n(.*?)```", reference.config_markdown(), re.S)
    assert example
    config = tmp_path / "config.toml"
    config.write_text(example.group(1), "utf-8")
    settings = load_settings({"home": tmp_path}, config_file=config)
    assert settings.default_model == "claude-sonnet-4-5" and settings.prune_protected_tools == ["skill", "Read"]

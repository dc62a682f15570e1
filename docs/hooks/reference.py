"""The reference pages, generated from the code at every `mkdocs build` so they cannot drift.

- `reference/cli.md`: every command of the argparse tree (`contextfold.cli.dispatch.build_parser`),
  its usage line and each argument's help, default and choices.
- `reference/configuration.md`: every field of `contextfold.config.Settings`, grouped by the
  `# -- section --` comments of config.py, with its default, environment variable, whether a
  session may override it, and its description.
- `reference/tools.md`: the MCP server's tools as `tools/list` gives them (title, description,
  annotations, input and output schemas), its resource templates and prompts.

mkdocs runs this file as a hook (mkdocs.yml `hooks:`); tests/unit/test_docs_reference.py calls the
three renderers directly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))

PAGES = {
    "changelog.md": "changelog_markdown",
    "reference/models.md": "models_markdown",
    "reference/cli.md": "cli_markdown",
    "reference/configuration.md": "config_markdown",
    "reference/tools.md": "tools_markdown",
}

GENERATED = "<!-- generated from the code by docs/hooks/reference.py at build time: do not edit -->\n"


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes escaped, and `<…>` outside code spans shown, not
    taken as HTML (`<home>` would vanish)."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _code(text: object) -> str:
    text = str(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# -- the command line -----------------------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, path: str = "", help: str = ""
) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = [(path, help, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                found.extend(_commands(child, f"{path} {name}".strip(), helps.get(name, "")))
    return found


def _argument_row(action: argparse.Action) -> str | None:
    if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
        return None
    if action.option_strings:
        name = ", ".join(action.option_strings)
        if action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
    else:
        name = action.metavar or action.dest
        if action.nargs == "?":
            name = f"[{name}]"
        elif action.nargs == argparse.REMAINDER:
            name = f"{name}…"
    notes = []
    if action.choices:
        notes.append("one of " + ", ".join(_code(c) for c in action.choices))
    default = action.default
    if (
        default not in (None, False, [], argparse.SUPPRESS)
        and action.nargs != 0
        and not isinstance(action, argparse._VersionAction)
    ):
        notes.append(f"default {_code(default)}")
    text = (action.help or "").replace("%(default)s", str(default)).replace("%%", "%")
    if notes:
        text = f"{text} ({'; '.join(notes)})" if text else "; ".join(notes)
    return f"| {_code(name)} | {_cell(text)} |"


def cli_markdown() -> str:
    from contextfold.cli.dispatch import build_parser

    parser = build_parser()
    lines = [
        GENERATED,
        "# Command line",
        "",
        "Every command of `contextfold`, as its parser defines it (`contextfold COMMAND --help` prints the same). "
        "`python -m contextfold` works too. Errors print one line saying what to do and exit 2.",
        "",
    ]
    for path, help, command in _commands(parser):
        title = f"contextfold {path}".strip()
        lines += [f"## {title}", ""]
        description = command.description or help
        if description:
            lines += [description.strip(), ""]
        usage = command.format_usage().removeprefix("usage: ").strip()
        lines += ["```text", " ".join(usage.split()), "```", ""]
        rows = [row for action in command._actions if (row := _argument_row(action))]
        subcommands = [
            (name, helps)
            for action in command._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, helps in ((c.dest, c.help or "") for c in action._choices_actions)
        ]
        if subcommands:
            lines += ["| command | does |", "|---|---|"]
            lines += [f"| [`{name}`](#{_anchor(f'{title} {name}')}) | {_cell(text)} |" for name, text in subcommands]
            lines.append("")
        if rows:
            lines += ["| argument | meaning |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def _anchor(title: str) -> str:
    """The id mkdocs (Python-Markdown's toc) gives a heading."""
    slug = re.sub(r"[^\w\s-]", "", title.lower()).strip()
    return re.sub(r"[-\s]+", "-", slug)


# -- the settings -----------------------------------------------------------------------------------

SECTION = re.compile(r"^    # -- (.+?) -+\s*$")
FIELD = re.compile(r"^    (\w+): ")


def _sections() -> list[tuple[str, list[str]]]:
    """config.py's `# -- section --` comments, each with the fields written under it, in order."""
    import contextfold.config as config

    sections: list[tuple[str, list[str]]] = []
    inside = False
    for line in Path(config.__file__).read_text("utf-8").splitlines():
        if line.startswith("class Settings("):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break
        if not inside:
            continue
        if heading := SECTION.match(line):
            sections.append((heading.group(1), []))
        elif (field := FIELD.match(line)) and field.group(1) != "model_config":
            if not sections:
                sections.append(("settings", []))
            sections[-1][1].append(field.group(1))
    return sections


def _default(name: str, field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        if name == "home":
            return "$CONTEXTFOLD_HOME, else the platform's user data dir (~/.local/share/contextfold on Linux)"
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "—"
    if isinstance(value, bool):
        return _code(str(value).lower())
    if isinstance(value, int) and name.endswith("_bytes") and value >= 1024 and value % 1024 == 0:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if value % size == 0:
                return f"{_code(f'{value:,}')} ({value // size} {unit})"
    if isinstance(value, int):
        return _code(f"{value:,}")
    if isinstance(value, (list, dict)):
        return _code(json.dumps(value))
    return _code(value)


def config_markdown() -> str:
    from contextfold.config import ENV_PREFIX, PROCESS_SETTINGS, SESSION_LIMITS, Settings

    fields = Settings.model_fields
    lines = [
        GENERATED,
        "# Configuration",
        "",
        "Settings come from command-line flags, then `CONTEXTFOLD_<NAME>` environment variables, then a TOML "
        "file (`$CONTEXTFOLD_CONFIG`, else `config.toml` in the data home), then the defaults below. "
        "**Server-wide** settings guard the whole process or data home and are set only there; a session that "
        "tries to override one is refused. Every other setting is **per-session** policy: "
        "`session_open(settings={…})` overrides it for that session. The request limits marked *lower only* may "
        "be lowered per session, never raised. Every limit that refuses a request names its setting in the error.",
        "",
        "```toml",
        "# <home>/config.toml",
        'default_model = "claude-sonnet-4-5"',
        "spill_retention_days = 3",
        'prune_protected_tools = ["skill", "Read"]',
        "```",
        "",
    ]
    listed: set[str] = set()
    for heading, names in _sections():
        lines += [
            f"## {heading[0].upper()}{heading[1:]}",
            "",
            "| setting | default | scope | meaning |",
            "|---|---|---|---|",
        ]
        for name in names:
            if name not in fields:
                continue
            listed.add(name)
            field = fields[name]
            scope = (
                "server-wide"
                if name in PROCESS_SETTINGS
                else ("per-session, lower only" if name in SESSION_LIMITS else "per-session")
            )
            env = f"{ENV_PREFIX}{name.upper()}"
            lines.append(
                f"| `{name}`<br><small>`{env}`</small> | {_cell(_default(name, field))} | {scope} | "
                f"{_cell(field.description or '')} |"
            )
        lines.append("")
    unlisted = [name for name in fields if name not in listed]
    if unlisted:
        lines += ["## Other settings", "", "| setting | default | meaning |", "|---|---|---|"]
        lines += [
            f"| `{n}` | {_cell(_default(n, fields[n]))} | {_cell(fields[n].description or '')} |" for n in unlisted
        ]
        lines.append("")
    return "\n".join(lines)


# -- the MCP tools -------------------------------------------------------------------------------------


def _listing() -> tuple[list[Any], list[Any], list[Any]]:
    from contextfold.config import Settings
    from contextfold.mcpserver.tools import build_server

    with tempfile.TemporaryDirectory() as home:
        server = build_server(Settings(home=Path(home)))

        async def listed() -> tuple[list[Any], list[Any], list[Any]]:
            return await server.list_tools(), await server.list_resource_templates(), await server.list_prompts()

        return asyncio.run(listed())


def _type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(_code(json.dumps(v)) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type(schema['items'])}"
    if isinstance(kind, list):
        return " or ".join(kind)
    return str(kind)


def _schema_rows(schema: dict[str, Any] | None, *, inputs: bool) -> list[str]:
    if not schema or not schema.get("properties"):
        return []
    required = set(schema.get("required", []))
    rows = [
        "| field | type | " + ("required | meaning |" if inputs else "meaning |"),
        "|---|---|---|---|" if inputs else "|---|---|---|",
    ]
    for name, prop in schema["properties"].items():
        meaning = prop.get("description", "")
        if inputs and "default" in prop:
            meaning = f"{meaning} (default {_code(json.dumps(prop['default']))})".strip()
        cells = [f"`{name}`", _cell(_type(prop))]
        if inputs:
            cells.append("yes" if name in required else "")
        cells.append(_cell(meaning))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def tools_markdown() -> str:
    tools, templates, prompts = _listing()
    lines = [
        GENERATED,
        "# MCP tools",
        "",
        f"`contextfold serve` offers {len(tools)} tools, as its `tools/list` answers (listed here from the server "
        "itself). Every tool has a title, annotations and an output schema and returns structured output; a bad "
        "request returns an error naming the field and writes nothing. `serve --tools read_output,search_history` "
        "offers only those (what `hooks install` gives an agent).",
        "",
        "| tool | does |",
        "|---|---|",
    ]
    lines += [f"| [`{t.name}`](#{_anchor(t.name)}) | {_cell((t.description or '').split(chr(10))[0])} |" for t in tools]
    lines.append("")
    for tool in tools:
        lines += [f"## {tool.name}", ""]
        if tool.title:
            lines += [f"*{tool.title}*", ""]
        lines += [(tool.description or "").strip(), ""]
        if tool.annotations is not None:
            hints = {
                k: v
                for k, v in tool.annotations.model_dump(by_alias=True, exclude_none=True).items()
                if k != "title" and v is not None
            }
            if hints:
                lines += ["Annotations: " + ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in hints.items()), ""]
        inputs = _schema_rows(tool.input_schema, inputs=True)
        lines += ["**Arguments**", "", *(inputs or ["none"]), ""]
        outputs = _schema_rows(tool.output_schema, inputs=False)
        if outputs:
            lines += ["**Result** (`structuredContent`)", "", *outputs, ""]
    lines += ["## Resources", "", "| URI template | what |", "|---|---|"]
    lines += [f"| `{t.uri_template}` | {_cell(t.description or t.title or '')} |" for t in templates]
    lines += ["", "## Prompts", "", "| prompt | arguments | what |", "|---|---|---|"]
    lines += [
        f"| `{p.name}` | {', '.join(f'`{a.name}`' for a in (p.arguments or [])) or '—'} | {_cell(p.description or '')} |"
        for p in prompts
    ]
    lines.append("")
    return "\n".join(lines)


# -- the models and the changelog ------------------------------------------------------------------------


def models_markdown() -> str:
    from contextfold.cli.commands.models import rows
    from contextfold.config import Settings

    with tempfile.TemporaryDirectory() as home:
        table = rows(Settings(home=Path(home)))
    lines = [
        GENERATED,
        "# Models",
        "",
        "The models contextfold knows, as `contextfold models` prints them. A model id matches its longest known "
        "prefix, so dated snapshots and variants find their family (`gpt-4o-2024-08-06` is `gpt-4o`, "
        "`claude-sonnet-4-5-20250929` is `claude-sonnet-4-5`); provider prefixes (`anthropic/`, `openai/`, "
        "`bedrock/`, …) are dropped first. Any other id is counted as `default`, and the commands that take "
        "`--model` warn on stderr, naming the nearest known ids.",
        "",
        "*reserved* is kept free for the reply (`min(20,000, max output)` unless the `reserved` setting says "
        "otherwise); *usable* is what the conversation may take before `overflow`: the window less the larger of "
        "the output limit (capped at 32,000) and the reserve, or the input limit less the reserve where a model "
        "has one. The `context_window`, `max_output`, `input_limit` and `reserved` settings override these per "
        "session.",
        "",
        "| model | provider | window | max output | input limit | reserved | usable | counting |",
        "|---|---|--:|--:|--:|--:|--:|---|",
    ]
    for row in table:
        limit = f"{row['input_limit']:,}" if row["input_limit"] else "—"
        lines.append(
            f"| `{row['model']}` | {row['provider']} | {row['context_window']:,} | {row['max_output']:,} | {limit} "
            f"| {row['reserved']:,} | {row['usable']:,} | {row['counting']} |"
        )
    lines.append("")
    return "\n".join(lines)


def changelog_markdown() -> str:
    """CHANGELOG.md as a page of the site (it lives at the repository's root, where people look for it)."""
    return GENERATED + (ROOT / "CHANGELOG.md").read_text("utf-8")


def render(page: str) -> str:
    return globals()[PAGES[page]]()


# -- the mkdocs hook ------------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for page in PAGES:
        existing = files.get_file_from_path(page)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, page, content=render(page)))
    return files

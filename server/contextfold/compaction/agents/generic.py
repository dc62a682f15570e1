"""Any other agent, and any tool no adapter knows: tool names common elsewhere (Gemini CLI, Cursor,
Cline, Windsurf, the Anthropic text editor tool), and the tools of MCP servers an agent was given
(Serena, JetBrains, the filesystem and GitHub servers, Desktop Commander, Playwright, Context7 …),
whose names no list can hold.

A known name is read as its list says. An unknown one is read by its words and arguments
(`guessed_kind`): a tool with a `command` string and a word such as `shell`, `terminal` or `execute`
runs a shell command; one with a file path argument changes that file when a word says so
(`replace_symbol_body`, `edit_block`, `create_or_update_file`), reads it when a word says that
(`get_file_text_by_path`), searches it (`find_symbol`); a tool that browses or fetches pages or
documentation (`browser_snapshot`, `get-library-docs`) brings back others' prose, as a web tool
does, and an argument named as an id (`libraryId`, `node_id`) holds the service's handle, not a name
of the work. A result an MCP shell tool sends as JSON (`{"stdout": …, "return_code": 1}`) is judged
by its exit code. A tool whose words say nothing of these stays a tool that touches no file."""

from __future__ import annotations

import json
import re
from typing import Any

from contextfold.compaction.agents.base import COMMON_PATH_KEYS, AgentAdapter, Kind, Outcome, ToolCall
from contextfold.domain import ToolPart

_SHELL_WORDS = frozenset({"shell", "bash", "sh", "terminal", "console", "command", "cmd", "exec", "execute", "process"})
_EDIT_WORDS = frozenset(
    {"edit", "write", "replace", "patch", "insert", "create", "append", "apply", "update", "modify", "save"}
    | {"overwrite", "delete", "remove"}
)
_READ_WORDS = frozenset({"read", "get", "view", "open", "show", "cat", "head", "tail", "overview", "outline", "list"})
_SEARCH_WORDS = frozenset({"find", "search", "grep", "glob", "locate", "lookup", "references", "referencing"})
_FOLDER_WORDS = frozenset({"dir", "directory", "folder", "tree"})
"""A tool that makes or removes a folder changes no file; one that lists it reads it."""
_WEB_WORDS = frozenset(
    {"web", "browser", "browse", "navigate", "snapshot", "scrape", "crawl", "fetch", "url", "docs"}
    | {"documentation", "library"}
)
_WORD = re.compile(r"[a-z]+|\d+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

MAX_JSON_RESULT_CHARS = 1_000_000
"""A result longer than this is not parsed as an MCP shell tool's JSON (it is read as text)."""
_CODE_KEYS = ("return_code", "returncode", "exit_code", "exitCode", "exit_status")
_OUTPUT_KEYS = ("stdout", "output", "stderr")


def words(tool: str) -> frozenset[str]:
    """The words of a tool's name, lower case: `replace_symbol_body`, `getFileTextByPath` and
    `get-library-docs` are split at `_`, `-` and a capital."""
    return frozenset(_split(tool))


def _split(name: str) -> list[str]:
    return _WORD.findall(_CAMEL.sub(" ", name).lower())


def _is_id_key(key: str) -> bool:
    """`libraryId`, `context7CompatibleLibraryID`, `node_id`, `ids`: an argument holding a service's
    handle for something, not a file or a name of the work."""
    split = _split(key)
    return bool(split) and split[-1] in ("id", "ids")


def guessed_kind(call: ToolCall, path: str | None) -> Kind | None:
    """What an unknown tool does, by its name's words and its arguments (see the module's note);
    None when they do not say."""
    named = words(call.tool)
    command = call.args.get("command", call.args.get("cmd"))
    if named & _SHELL_WORDS and isinstance(command, str) and command.strip():
        return "shell"
    if path is None:
        return None
    if named & _FOLDER_WORDS:
        return "read" if named & _READ_WORDS else None
    if named & _EDIT_WORDS:
        return "edit"
    if named & _READ_WORDS:
        return "read"
    if named & _SEARCH_WORDS:
        return "search"
    return None


class Generic(AgentAdapter):
    name = "generic"
    shell_tools = frozenset(
        {
            "run_command",
            "run_shell_command",
            "terminal",
            "execute_command",
            "cmd",
            "powershell",
        }
    )
    edit_tools = frozenset(
        {
            "str_replace",
            "write_file",
            "replace",
            "edit_file",
            "create_file",
            "append_file",
            "apply_diff",
            "search_replace",
            "patch",
        }
    )
    read_tools = frozenset(
        {
            "view",
            "read_file",
            "cat",
            "list_dir",
            "list_directory",
            "read_many_files",
            "search",
            "codebase_search",
            "file_search",
        }
    )
    editor_tools = frozenset({"str_replace_based_edit_tool", "text_editor"})
    plan_tools = frozenset({"todo_write", "todo", "write_todos"})
    web_tools = frozenset({"web_fetch", "web_search", "google_web_search"})
    path_keys = (*COMMON_PATH_KEYS, "relative_path", "pathInProject", "filePath")
    """Also Serena's `relative_path`, JetBrains' `pathInProject` and a camel-case `filePath`."""

    def recognizes(self, call: ToolCall) -> bool:
        return self.knows(call) or self.is_shell(call)

    def kind(self, call: ToolCall) -> Kind | None:
        known = super().kind(call)
        return known if known is not None else guessed_kind(call, self.path(call))

    def reads_web(self, call: ToolCall) -> bool:
        if super().reads_web(call):
            return True
        return self.kind(call) is None and bool(words(call.tool) & _WEB_WORDS)

    def named_input(self, call: ToolCall) -> Any:
        named = super().named_input(call)
        if self.knows(call) or not isinstance(named, dict):
            return named
        return {key: value for key, value in named.items() if not _is_id_key(key)}

    def outcome(self, part: ToolPart) -> Outcome | None:
        return _json_shell_result(part.result_text)


def _json_shell_result(text: str) -> Outcome | None:
    """The outcome of a result an MCP shell tool sends as one JSON object with an exit code and
    its output (`{"stdout": "…", "stderr": "…", "return_code": 1}`); None for any other result."""
    stripped = text.strip()
    if not stripped.startswith("{") or not stripped.endswith("}") or len(stripped) > MAX_JSON_RESULT_CHARS:
        return None
    try:
        data: Any = json.loads(stripped)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None
    if not isinstance(data, dict):
        return None
    code = next((data[key] for key in _CODE_KEYS if key in data), None)
    outputs = [data[key] for key in _OUTPUT_KEYS if isinstance(data.get(key), str)]
    if not isinstance(code, int) or isinstance(code, bool) or not outputs:
        return None
    return Outcome(code == 0, code, "\n".join(o for o in outputs if o.strip()))

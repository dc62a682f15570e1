"""Files a normalized transcript edited, read off its lines independently of `compaction.facts`.

Real Claude Code edit calls come in more shapes than `{"file_path": …}`: `notebook_path`
(NotebookEdit), `path`, an MCP prefix on the tool name (`mcp__acp__Edit`), Windows paths
(`C:\\Users\\…`, with spaces), an empty `{}` input, arguments that are not JSON or not an object. A
call whose result is a tool error (`<tool_use_error>File has not been read yet…`) edited nothing;
a call with no result at all (the history was cut by a compaction before it came) counts as an
edit. A call id may be reused within a session (a resumed session replays records): each result
answers the latest call of its id made before it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

EDIT_TOOLS = frozenset({"edit", "write", "multiedit", "notebookedit"})
"""Claude Code's file-editing tools, casefolded, without an MCP prefix."""
PATH_KEYS = ("file_path", "notebook_path", "path")


@dataclass(frozen=True)
class Call:
    line: int
    """Index of the line that made the call."""
    id: str
    name: str
    args: Any
    """Decoded arguments: an object, or whatever else the line holds."""
    result: str | None
    """The result's text, None when the transcript holds none."""


def decode(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def calls(records: Sequence[dict[str, Any]]) -> Iterator[Call]:
    """Every tool call with its own result, in order."""
    made: list[tuple[int, dict[str, Any]]] = []
    results: dict[int, str] = {}
    open_ids: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        for call in record.get("tool_calls") or []:
            open_ids.setdefault(str(call.get("id")), []).append(len(made))
            made.append((index, call))
        if record.get("role") == "tool":
            waiting = open_ids.get(str(record.get("tool_call_id")))
            if waiting:
                content = record.get("content")
                results[waiting.pop()] = content if isinstance(content, str) else json.dumps(content)
    for position, (index, call) in enumerate(made):
        yield Call(
            index,
            str(call.get("id")),
            str(call.get("name") or ""),
            decode(call.get("arguments")),
            results.get(position),
        )


def edit_path(call: Call) -> str | None:
    """The file a Claude Code edit call names, whatever its shape; None for any other call."""
    if call.name.rsplit("__", 1)[-1].casefold() not in EDIT_TOOLS or not isinstance(call.args, dict):
        return None
    for key in PATH_KEYS:
        value = call.args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def edited(call: Call) -> str | None:
    """The file the call edited: an edit call not answered by a tool error."""
    path = edit_path(call)
    if path is None or (call.result or "").lstrip().startswith("<tool_use_error>"):
        return None
    return path


def edited_paths(records: Sequence[dict[str, Any]], lines: range | None = None) -> set[str]:
    """Files the Claude Code edit calls made on `lines` (default: all) edited."""
    return {
        path for call in calls(records) if (lines is None or call.line in lines) and (path := edited(call)) is not None
    }

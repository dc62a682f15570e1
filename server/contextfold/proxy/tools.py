"""The two tools the proxy adds to the upstream's: `read_output` and `search_history`.

They are listed after the upstream's tools and cost 271 o200k tokens of `tools/list` together,
measured as tests/e2e/test_footprint.py measures contextfold's own listing (tests/e2e/test_proxy.py holds
them under 300). Their results are text only, without an output
schema: what the model reads is the text, and a schema would cost tokens on every listing.

Names never collide with the upstream's: each tool takes the first of its name,
`contextfold_<name>`, `contextfold_<name>_2`, … that the upstream's listing does not use. The
upstream's tools are never renamed or hidden, and the hint after a preview names the tool as it
is listed at the time.
"""

from __future__ import annotations

import copy
from typing import Any

from contextfold.blobs.lines import READ_LIMIT_LINES

READ_OUTPUT = "read_output"
SEARCH_HISTORY = "search_history"
PREFIX = "contextfold_"

_READ_OUTPUT: dict[str, Any] = {
    "name": READ_OUTPUT,
    "title": "Read saved output",
    "description": "Read an output saved whole when a result was cut: numbered lines from offset, or lines matching pattern.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "offset": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": READ_LIMIT_LINES},
            "pattern": {"type": "string", "description": "Regex; (?i) ignores case."},
            "context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Lines around each match."},
        },
        "required": ["id"],
    },
    "annotations": {"readOnlyHint": True, "openWorldHint": False},
}

_SEARCH_HISTORY: dict[str, Any] = {
    "name": SEARCH_HISTORY,
    "title": "Search earlier results",
    "description": 'Search this server\'s earlier tool calls and results by regex, or read them from a reference (at="m12").',
    "inputSchema": {
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "at": {"type": "string"}},
    },
    "annotations": {"readOnlyHint": True, "openWorldHint": False},
}


class ToolNames:
    """The names the added tools go by, given the upstream's tools.

    A `passive` one (an upstream's relay behind `--config`, where the hub lists and answers the
    added tools) only names the reader in previews' hints: it adds and owns nothing."""

    def __init__(self, *, passive: bool = False) -> None:
        self.read_output = READ_OUTPUT
        self.search_history = SEARCH_HISTORY
        self.passive = passive

    def settle(self, upstream: set[str]) -> None:
        """Pick names the upstream's listing does not use."""
        if self.passive:
            return
        self.read_output = _free(READ_OUTPUT, upstream)
        self.search_history = _free(SEARCH_HISTORY, upstream)

    def owns(self, name: Any) -> str | None:
        """Which added tool `name` is (its base name), or None for an upstream tool."""
        if self.passive:
            return None
        if name == self.read_output:
            return READ_OUTPUT
        if name == self.search_history:
            return SEARCH_HISTORY
        return None

    def definitions(self) -> list[dict[str, Any]]:
        if self.passive:
            return []
        read, search = copy.deepcopy(_READ_OUTPUT), copy.deepcopy(_SEARCH_HISTORY)
        read["name"], search["name"] = self.read_output, self.search_history
        return [read, search]


def _free(base: str, taken: set[str]) -> str:
    for candidate in (base, PREFIX + base):
        if candidate not in taken:
            return candidate
    n = 2
    while f"{PREFIX}{base}_{n}" in taken:
        n += 1
    return f"{PREFIX}{base}_{n}"


async def answer(session: Any, added: str, arguments: Any) -> dict[str, Any]:
    """The result of a call to an added tool (`added` is its base name), errors as error results."""
    from contextfold.errors import USER_ERRORS, brief

    answered: tuple[type[Exception], ...] = (ArgumentError, *USER_ERRORS)
    try:
        if added == READ_OUTPUT:
            text = await session.read_output(**read_output_args(arguments))
        else:
            text = await session.search_history(**search_history_args(arguments))
        return {"content": [{"type": "text", "text": text}], "isError": False}
    except answered as exc:
        return {"content": [{"type": "text", "text": brief(str(exc))}], "isError": True}
    except Exception as exc:
        import logging

        logging.getLogger(__name__).exception("contextfold proxy: %s failed", added)
        return {"content": [{"type": "text", "text": f"{added} failed: {type(exc).__name__}"}], "isError": True}


class ArgumentError(ValueError):
    """A bad argument to an added tool; the message names it and what is expected."""


def read_output_args(arguments: Any) -> dict[str, Any]:
    args = _object(arguments)
    _unknown(args, ("id", "offset", "limit", "pattern", "context"))
    output_id = args.get("id")
    if not isinstance(output_id, str) or not output_id or len(output_id) > 100:
        raise ArgumentError('id: expected the output id from a cut result, e.g. "out_01J…"')
    pattern = args.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise ArgumentError("pattern: expected a regular expression (a string)")
    return {
        "output_id": output_id,
        "offset": _integer(args, "offset", 1, 1, None),
        "limit": _integer(args, "limit", READ_LIMIT_LINES, 1, READ_LIMIT_LINES),
        "pattern": pattern or None,
        "context": _integer(args, "context", 0, 0, 20),
    }


def search_history_args(arguments: Any) -> dict[str, Any]:
    args = _object(arguments)
    _unknown(args, ("pattern", "at"))
    values: dict[str, Any] = {}
    for name in ("pattern", "at"):
        value = args.get(name)
        if value is not None and not isinstance(value, str):
            raise ArgumentError(f"{name}: expected a string")
        values[name] = value or None
    if values["at"] is not None and len(values["at"]) > 100:
        raise ArgumentError('at: expected a message reference such as "m12"')
    return values


def _object(arguments: Any) -> dict[str, Any]:
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise ArgumentError("arguments: expected an object")
    return arguments


def _unknown(args: dict[str, Any], known: tuple[str, ...]) -> None:
    extra = sorted(set(args) - set(known))
    if extra:
        raise ArgumentError(f"{extra[0]}: unknown argument; expected {', '.join(known)}")


def _integer(args: dict[str, Any], name: str, default: int, low: int, high: int | None) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"{low}–{high}" if high is not None else f"≥ {low}"
        raise ArgumentError(f"{name}: expected an integer {bound}, got {value!r}")
    return value

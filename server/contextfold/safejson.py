"""JSON values from a request or a file, made safe before anything else reads them.

Two things in otherwise valid JSON break deep inside the server: nesting deeper than the
serializers handle (`json` and pydantic give up somewhere between 250 and 1,000 levels, with a
RecursionError or a ValueError, long after a transaction has started), and lone UTF-16
surrogates, which JSON's `\\ud83d` escapes decode to (half an emoji cut by a JavaScript tool, say)
but which UTF-8 cannot encode, so SQLite and every JSON response refuse them. `clean` checks the
first without recursing and repairs the second.
"""

from __future__ import annotations

import re
from typing import Any

from contextfold.errors import LimitExceeded

MAX_DEPTH = 100
"""How deep arrays and objects may nest in one value. Real transcripts stay within about 10."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(value: Any, path: str) -> Any:
    """`value`, with every lone surrogate in its strings (keys included) replaced by U+FFFD.

    A high and a low surrogate next to each other are joined into the character they encode.
    `value` itself is returned unless it holds a lone surrogate. Raises `LimitExceeded` naming
    `path` (or the member below it that is too deep) when `value` nests deeper than `MAX_DEPTH`.
    """
    if not check(value, path):
        return value
    return _repair(value)


def check(value: Any, path: str) -> bool:
    """Refuse too deep a value like `clean` (iteratively); True when it holds a lone surrogate."""
    found = False
    stack: list[tuple[Any, int, str]] = [(value, 0, path)]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            found = found or has_surrogate(item)
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise LimitExceeded(
                where or "value",
                f"arrays and objects nest more than {MAX_DEPTH} levels deep; flatten the value "
                "(a real message needs about 10)",
            )
        # Paths name the first two levels below `path` (e.g. `messages[3].content`): enough to find
        # the culprit, and they do not grow with the nesting.
        named = depth < 2
        if isinstance(item, dict):
            for key, child in item.items():
                found = found or (isinstance(key, str) and has_surrogate(key))
                stack.append((child, depth + 1, _join(where, key) if named else where))
        else:
            stack.extend((child, depth + 1, f"{where}[{i}]" if named else where) for i, child in enumerate(item))
    return found


def has_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate (lone, or half of a pair that `json` left split)."""
    # isascii() is O(1) in CPython, so plain ASCII text costs nothing.
    return not text.isascii() and _SURROGATE.search(text) is not None


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _repair(value: Any) -> Any:
    # Recursion is safe here: `check` has bounded the depth.
    if isinstance(value, str):
        if not has_surrogate(value):
            return value
        # Through UTF-16, a valid pair becomes its character and a lone half becomes U+FFFD.
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [_repair(item) for item in value]
    if isinstance(value, dict):
        return {_repair(key): _repair(item) for key, item in value.items()}
    return value


__all__ = ["MAX_DEPTH", "check", "clean"]

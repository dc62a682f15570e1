"""JSON-RPC messages as the proxy sees them: plain dicts, told apart by their members.

The proxy forwards what it does not change as the bytes it received, so it needs no model of
the protocol's types (importing the SDK's would cost a quarter of a second at every start); it
only needs to know a request from a notification from a response, and to write the few messages
it makes itself. JSON-RPC error codes are the protocol's.
"""

from __future__ import annotations

import json
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UPSTREAM_ERROR = -32000
"""The proxy's own code for "the server behind me failed" (the implementation-defined range)."""

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
"""Present in a 2026-07-28 request's `_meta` (the per-request envelope of the sessionless era)."""
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
"""Stamped into every 2026-07-28 result's `_meta`."""


def dumps(message: Any) -> bytes:
    """A message as one line of compact UTF-8 JSON (lone surrogates kept, as JSON escapes)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def is_request(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message


def is_notification(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message


def is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and "id" in message


def key(request_id: Any) -> str:
    """A dict key for a JSON-RPC id that keeps `1` and `"1"` apart."""
    return json.dumps(request_id)


def params(message: dict[str, Any]) -> dict[str, Any]:
    value = message.get("params")
    return value if isinstance(value, dict) else {}


def meta(message: dict[str, Any]) -> dict[str, Any]:
    value = params(message).get("_meta")
    return value if isinstance(value, dict) else {}


def is_modern(message: dict[str, Any]) -> bool:
    """Whether a request carries the 2026-07-28 envelope."""
    return isinstance(meta(message).get(PROTOCOL_VERSION_META), str)


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def result(request_id: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def find_id(head: bytes, tail: bytes) -> tuple[bool, Any]:
    """The top-level id of a message too large to parse, from its first and last bytes.

    SDKs write `{"jsonrpc":"2.0","id":…,"result":…}` (Python) or `{"result":…,"jsonrpc":"2.0",
    "id":…}` (TypeScript): the id is near one end. Returns (found, id)."""
    start = head.lstrip()
    for prefix in (b'{"jsonrpc":"2.0","id":', b'{"id":'):
        if start.startswith(prefix):
            found, value = _scalar(start[len(prefix) :])
            if found:
                return True, value
    end = tail.rstrip()
    if end.endswith(b"}"):
        at = end.rfind(b'"id":')
        if at >= 0:
            found, value = _scalar(end[at + 5 : -1])
            if found and end[at + 5 : -1].strip() == dumps(value):
                return True, value
    return False, None


def _scalar(data: bytes) -> tuple[bool, Any]:
    """The JSON number or string at the start of `data`."""
    try:
        value, _ = json.JSONDecoder().raw_decode(data.decode("utf-8", "replace"))
    except ValueError:
        return False, None
    return (True, value) if isinstance(value, (int, str)) and not isinstance(value, bool) else (False, None)

"""Large strings of an HTTP tool call decoded off the event loop (`bigstrings`): the tool sees
exactly what `json.loads` would have given it, and anything that does not qualify is untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _servers import client as _client
from _servers import serve
from _stored import read_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import safejson
from contextfold.mcpserver import bigstrings

# Every kind of byte sequence a cut can fall into: 2-, 3- and 4-byte UTF-8, \uXXXX escapes, an
# escaped surrogate pair, lone surrogates, escaped quotes, backslashes and control characters.
TRICKY = 'aé€😀"\\\n\t\x01\ud83d\ude00\ud800x\udc00'


def _call(arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "append", "arguments": arguments},
        **extra,
    }


def _body(value: Any, ensure_ascii: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


def _seen(body: bytes, min_literal: int, piece: int) -> tuple[Any, dict[str, str]]:
    """What the tool's arguments are after the rewrite and `restore`, and the strings taken out."""
    rewritten, strings = bigstrings.extract(body, min_literal, piece)
    request = json.loads(rewritten)
    arguments = safejson.clean(request["params"]["arguments"], "")
    return bigstrings.restore(arguments, strings), strings


def _expected(body: bytes) -> Any:
    return safejson.clean(json.loads(body)["params"]["arguments"], "")


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("piece", range(1, 40))
def test_every_cut_position_decodes_like_json_loads(piece: int, ensure_ascii: bool):
    text = (TRICKY * 7) + "\\" * 5 + TRICKY
    body = _body(_call({"session_id": "s", "messages": [{"role": "user", "content": text}]}), ensure_ascii)
    seen, strings = _seen(body, 16, piece)
    assert seen == _expected(body)
    if piece >= 16:  # room for the longest escape plus a run of backslashes: never refused
        assert len(strings) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    texts=st.lists(st.text(alphabet=st.sampled_from(list(TRICKY) + list('xyz \\"')), max_size=300), max_size=4),
    ensure_ascii=st.booleans(),
    min_literal=st.integers(1, 64),
    piece=st.integers(1, 128),
)
def test_the_arguments_a_tool_sees_are_unchanged(texts: list[str], ensure_ascii: bool, min_literal: int, piece: int):
    body = _body(_call({"session_id": "s", "texts": texts, "n": 3, "nested": {"t": texts[:1]}}), ensure_ascii)
    seen, _ = _seen(body, min_literal, piece)
    assert seen == _expected(body)


@pytest.mark.parametrize(
    "request_",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 100}},  # another method
        _call({"session_id": "s"}, params2={"pad": "x" * 100}),  # a large string outside the arguments
        {**_call({"session_id": "s"}), "params": {"name": "append", "arguments": {"k" * 100: 1}}},  # a key
        {**_call({}), "params": {"name": "x" * 100, "arguments": {}}},  # the tool's name
        _call({"session_id": "s", "short": "x" * 10}),  # nothing large
    ],
)
def test_a_body_that_does_not_qualify_is_untouched(request_: dict[str, Any]):
    body = json.dumps(request_).encode()
    assert bigstrings.extract(body, 16, 8) == (body, {})


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"t":"'
        + b"x" * 64
        + b'\x01"}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"t":"'
        + b"x" * 64
        + b'\\q"}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"t":"'
        + b"\xff" * 64
        + b'"}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"t":"' + b"x" * 64,
        b"not json at all " + b'"' + b"x" * 64 + b'"',
    ],
)
def test_json_that_does_not_decode_is_left_for_the_sdk_to_refuse(body: bytes):
    assert bigstrings.extract(body, 16, 8) == (body, {})


def test_a_token_a_client_sends_itself_is_just_a_string():
    forged = {"t": "\x00contextfold-string:" + "0" * 32}
    assert bigstrings.restore(forged, {"1" * 32: "secret"}) == forged


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_large_append_over_http_stores_exactly_what_was_sent(tmp_path: Path, mode: str):
    # 6 MB of JSON with every escape the client writes (it sends UTF-8 as is and cannot send surrogates).
    line = "".join(c for c in TRICKY if not 0xD800 <= ord(c) <= 0xDFFF)
    text = "".join(f"{i:07d} {line}\n" for i in range(200_000))
    limits = {"CONTEXTFOLD_MAX_MESSAGE_BYTES": str(64 * 1024**2), "CONTEXTFOLD_MAX_BATCH_BYTES": str(64 * 1024**2)}
    with serve(tmp_path, env=limits) as server:
        async with _client(server.url, mode=mode) as client:
            await client.call_tool("session_open", {"session_id": "big", "model": "gpt-4o"})
            appended = await client.call_tool(
                "append", {"session_id": "big", "messages": [{"role": "user", "content": text}]}
            )
            assert not appended.is_error, appended.content
            # Validation still sees the real strings: a bad field is named, and nothing is written.
            refused = await client.call_tool(
                "append", {"session_id": "big", "format": "none", "messages": [{"role": "user", "content": text}]}
            )
            assert refused.is_error and "format" in str(refused.content)
            status = await client.call_tool("status", {"session_id": "big"})
            assert status.structured_content["message_count"] == 1
    stored = read_store(tmp_path / "contextfold.db")
    (output,) = stored.outputs.values()  # the message is over the window's share: it was spilled whole
    assert (tmp_path / "outputs" / output["digest"]).read_bytes() == text.encode()

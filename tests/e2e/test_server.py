"""The MCP surface through real clients: the SDK's in-memory Client in both protocol eras and a
stdio subprocess running `contextfold serve`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters

from contextfold.config import load_settings
from contextfold.mcpserver.tools import build_server

pytestmark = pytest.mark.anyio

TOOLS = {
    "count_tokens",
    "session_open",
    "session_list",
    "session_delete",
    "append",
    "get_context",
    "status",
    "spill",
    "read_output",
    "prune",
    "select_tail",
}
READ_ONLY = {"count_tokens", "session_list", "get_context", "status", "read_output", "select_tail"}


@pytest.fixture(params=["2026-07-28", "legacy"])
async def client(request, tmp_path: Path):
    server = build_server(load_settings({"home": tmp_path}, environ={}))
    mode = "auto" if request.param == "2026-07-28" else "legacy"
    async with Client(server, mode=mode) as c:
        yield c


TOOLS_LIST_BUDGET = 4_000


async def test_the_tool_list_fits_its_token_budget(client):
    """Every tools/list costs the user context on every request: keep it within 4,000 tokens."""
    import json

    from contextfold.tokens.counting import counter_for

    tools = (await client.list_tools()).tools
    wire = json.dumps(
        [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], separators=(",", ":")
    )
    assert counter_for("gpt-4o").count(wire) <= TOOLS_LIST_BUDGET
    # Lean schemas must still describe what matters: required fields, types, property names.
    append = next(t for t in tools if t.name == "append")
    assert append.input_schema["required"] == ["session_id", "messages"]
    assert "title" not in append.input_schema["properties"]["session_id"]
    session_open = next(t for t in tools if t.name == "session_open")
    assert "title" in session_open.input_schema["properties"]  # a parameter named title stays
    status = next(t for t in tools if t.name == "status").output_schema
    assert status["properties"]["tokens_reported"]["type"] == ["integer", "null"]


async def test_protocol_era(client):
    assert client.protocol_version in ("2026-07-28", "2025-11-25")
    assert client.server_info.name == "contextfold"


async def test_every_tool_has_title_annotations_and_output_schema(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert TOOLS <= set(tools)
    for name in TOOLS:
        tool = tools[name]
        assert tool.title, name
        assert tool.description, name
        assert tool.output_schema and tool.output_schema.get("type") == "object", name
        # readOnlyHint is left out where it would be false, its protocol default.
        assert bool(tool.annotations.read_only_hint) is (name in READ_ONLY), name
        assert tool.annotations.open_world_hint is False, name
    assert tools["session_delete"].annotations.destructive_hint is True
    assert tools["append"].annotations.destructive_hint is False


async def test_a_turn_through_mcp(client):
    opened = await client.call_tool("session_open", {"session_id": "t1", "model": "gpt-4o", "system": "Be terse."})
    assert not opened.is_error and opened.structured_content["state"] == "ok"

    appended = await client.call_tool(
        "append",
        {
            "session_id": "t1",
            "messages": [
                {"role": "user", "content": "what is in /tmp?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
                },
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 12},
        },
    )
    assert not appended.is_error, appended.content
    body = appended.structured_content
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["status"]["tokens_reported"] == 912

    result = await client.call_tool(
        "append", {"session_id": "t1", "messages": [{"role": "tool", "tool_call_id": "c1", "content": "a\nb"}]}
    )
    assert result.structured_content["results_attached"] == 1

    ctx = await client.call_tool("get_context", {"session_id": "t1", "format": "anthropic"})
    content = ctx.structured_content
    assert content["system"] == [{"type": "text", "text": "Be terse."}]
    assert content["messages"][-1]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "a\nb"}

    status = await client.call_tool("status", {"session_id": "t1"})
    assert status.structured_content["message_count"] == 2

    count = await client.call_tool("count_tokens", {"text": "hello world", "model": "gpt-4o"})
    assert count.structured_content == {
        "tokens": 2,
        "model": "gpt-4o",
        "method": "exact",
        "encoding": "o200k_base",
        "factor": 1.0,
    }

    listing = await client.call_tool("session_list", {})
    assert [s["id"] for s in listing.structured_content["sessions"]] == ["t1"]
    deleted = await client.call_tool("session_delete", {"session_id": "t1"})
    assert deleted.structured_content == {"session_id": "t1", "deleted": True}


async def test_errors_are_results_that_say_what_to_fix(client):
    missing = await client.call_tool("status", {"session_id": "nope"})
    assert missing.is_error and "no session with id 'nope'" in missing.content[0].text

    await client.call_tool("session_open", {"session_id": "e"})
    orphan = await client.call_tool(
        "append", {"session_id": "e", "messages": [{"role": "tool", "tool_call_id": "zz", "content": "x"}]}
    )
    assert orphan.is_error and "messages[0]" in orphan.content[0].text and "zz" in orphan.content[0].text

    no_role = await client.call_tool("append", {"session_id": "e", "messages": [{"content": "x"}]})
    assert no_role.is_error and "messages[0].role" in no_role.content[0].text

    wrong_type = await client.call_tool("append", {"session_id": "e", "messages": "not a list"})
    assert wrong_type.is_error and "messages" in wrong_type.content[0].text

    both = await client.call_tool("count_tokens", {})
    assert both.is_error and "exactly one of text or messages" in both.content[0].text

    status = await client.call_tool("status", {"session_id": "e"})
    assert status.structured_content["message_count"] == 0  # nothing was written by the failures


async def test_spill_read_output_and_the_resource(client):
    await client.call_tool("session_open", {"session_id": "big", "model": "gpt-4o"})
    text = "".join(f"line {i}\n" for i in range(1, 5_001))
    appended = await client.call_tool(
        "append",
        {
            "session_id": "big",
            "messages": [
                {"role": "user", "content": "dump it"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": text},
            ],
        },
    )
    spilled = appended.structured_content["spilled"]
    assert len(spilled) == 1 and spilled[0]["lines"] == 5_000
    output_id = spilled[0]["output_id"]

    read = await client.call_tool("read_output", {"id": output_id, "offset": 4_999, "limit": 5})
    assert read.structured_content["text"] == "4999\tline 4999\n5000\tline 5000"
    assert read.structured_content["has_more"] is False
    grep = await client.call_tool("read_output", {"id": output_id, "pattern": "^line 4242$", "context": 1})
    assert grep.structured_content["text"] == "4241-line 4241\n4242:line 4242\n4243-line 4243"

    resource = await client.read_resource(f"contextfold://outputs/{output_id}")
    assert resource.contents[0].text == text
    with pytest.raises(MCPError):
        await client.read_resource("contextfold://outputs/out_nothing")

    traversal = await client.call_tool("read_output", {"id": "../../etc/passwd"})
    assert traversal.is_error and "no output with id" in traversal.content[0].text

    manual = await client.call_tool("spill", {"session_id": "big", "text": "short"})
    assert manual.structured_content["truncated"] is False and manual.structured_content["preview"] == "short"


async def test_prune_and_select_tail_tools(client):
    await client.call_tool("session_open", {"session_id": "p", "model": "gpt-4o"})
    messages = [{"role": "user", "content": "start"}]
    for i in range(30):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"chunk {i} " + "data " * 3_000})
    await client.call_tool("append", {"session_id": "p", "messages": messages})
    # Two more user turns, so the tool-heavy turn is outside the protected last two.
    for text in ("next", "and again"):
        await client.call_tool("append", {"session_id": "p", "messages": [{"role": "user", "content": text}]})

    dry = await client.call_tool("prune", {"session_id": "p", "dry_run": True, "keep_tool_uses": 5})
    assert dry.structured_content["applied"] is False and dry.structured_content["dry_run"] is True
    pruned = await client.call_tool("prune", {"session_id": "p", "keep_tool_uses": 5})
    body = pruned.structured_content
    assert body["applied"] is True and body["tokens_freed"] > 20_000
    ctx = await client.call_tool("get_context", {"session_id": "p"})
    cleared = [m for m in ctx.structured_content["messages"] if m.get("content") == "[Old tool result content cleared]"]
    assert len(cleared) == body["parts"]

    status = await client.call_tool("status", {"session_id": "p"})
    metrics = status.structured_content["compaction"]
    assert metrics["prunes"] == 1 and metrics["prune_tokens_freed"] == body["tokens_freed"]

    tail = await client.call_tool("select_tail", {"session_id": "p", "budget": 8_000})
    assert tail.structured_content["tail_tokens"] <= 8_000


async def test_stdio_subprocess(tmp_path: Path):
    env = {**os.environ, "CONTEXTFOLD_HOME": str(tmp_path)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "contextfold", "serve"], env=env)
    async with Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert TOOLS <= names
        await c.call_tool("session_open", {"session_id": "io", "model": "gpt-4.1"})
        r = await c.call_tool("append", {"session_id": "io", "messages": [{"role": "user", "content": "over stdio"}]})
        assert not r.is_error
        ctx = await c.call_tool("get_context", {"session_id": "io"})
        assert ctx.structured_content["messages"] == [{"role": "user", "content": "over stdio"}]
    assert (tmp_path / "contextfold.db").is_file()

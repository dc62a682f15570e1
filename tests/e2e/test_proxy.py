"""`contextfold proxy` in front of a Python MCP server (tests/proxy_upstream.py), over stdio.

Every test runs real processes: the SDK's client starts `python -m contextfold proxy -- python
tests/proxy_upstream.py`, which starts the upstream. What goes through unchanged is compared with
a direct connection to the same upstream; what is oversized must come back as a preview whose
`read_output` returns the original.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from typing import Any

import anyio
import pytest
from _proxy import RawClient, direct, env, output_id, proxied, proxy_command, python_upstream, read_whole
from mcp import Client, MCPError
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent
from proxy_upstream import lines_text

from contextfold.tokens.counting import counter_for

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]
"""The 2025-11-25 handshake and (negotiated by `auto` with this upstream) 2026-07-28."""
FOOTPRINT_BUDGET = 300


async def fake_llm(_context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", model="fake", content=TextContent(type="text", text=f"LLM<{params.messages[0].content.text}>")
    )


async def consent(_context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


async def list_roots(_context: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])


def dumped(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def era_of(mode: str) -> str:
    return "2025-11-25" if mode == "legacy" else "2026-07-28"


# -- the listing -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_the_upstream_tools_keep_everything_and_two_cheap_ones_are_added(tmp_path, mode):
    async with Client(direct(tmp_path, *python_upstream()), mode=mode) as plain:
        upstream_tools = [dumped(t) for t in (await plain.list_tools()).tools]
        upstream_info = dumped(plain.server_info)
    async with Client(proxied(tmp_path, *python_upstream()), mode=mode) as client:
        assert client.protocol_version == era_of(mode)
        assert dumped(client.server_info) == upstream_info
        listed = [dumped(t) for t in (await client.list_tools()).tools]
    assert listed[: len(upstream_tools)] == upstream_tools  # names, descriptions, annotations, schemas
    added = listed[len(upstream_tools) :]
    assert [t["name"] for t in added] == ["read_output", "search_history"]
    # Measured as tests/test_footprint.py measures contextfold's own listing (the peers' measure).
    o200k = counter_for("gpt-4o")
    cost = o200k.count(json.dumps(listed)) - o200k.count(json.dumps(upstream_tools))
    assert cost <= FOOTPRINT_BUDGET, cost
    for tool in added:
        assert tool["annotations"]["readOnlyHint"] is True and tool["description"]


async def test_upstream_tools_named_like_the_added_ones_keep_their_names(tmp_path):
    upstream = python_upstream()
    async with Client(proxied(tmp_path, *upstream, PROXY_UPSTREAM_COLLIDE="1"), mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names.count("read_output") == 1 and names.count("contextfold_search_history") == 1
        assert names[-2:] == ["contextfold_read_output", "search_history"]
        # The upstream's read_output is the upstream's.
        mine = await client.call_tool("read_output", {"path": "x"})
        assert mine.content[0].text == "upstream read x"
        # A preview's hint names the added tool by the name it has here.
        cut = (await client.call_tool("big", {"lines": 3_000})).content[0].text
        assert 'contextfold_read_output(id="out_' in cut and " read_output(id=" not in cut
        assert await read_whole(client, output_id(cut), "contextfold_read_output") == lines_text(3_000)


# -- what passes unchanged ---------------------------------------------------------------------------

SMALL_CALLS = [
    ("tools/call", {"name": "echo", "arguments": {"text": "héllo ✓ \u2028"}}),
    ("tools/call", {"name": "weather", "arguments": {"city": "Oslo"}}),
    ("tools/call", {"name": "big", "arguments": {"lines": 40}}),
    ("tools/call", {"name": "picture", "arguments": {"size": 2_000}}),
    ("tools/call", {"name": "embed", "arguments": {"lines": 20}}),
    ("tools/call", {"name": "report", "arguments": {"rows": 5}}),
    ("tools/call", {"name": "tool_error", "arguments": {}}),
    ("tools/call", {"name": "fail", "arguments": {}}),
    ("tools/call", {"name": "no_such_tool", "arguments": {}}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "text://small"}),
    ("resources/read", {"uri": "blob://small"}),
    ("resources/read", {"uri": "item://7"}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "al"}},
    ),
    ("ping", None),
    ("no/such/method", {}),
]


async def test_small_results_are_byte_identical_to_a_direct_connection(tmp_path):
    answers: dict[str, list[bytes]] = {}
    for name, argv in (("direct", python_upstream()), ("proxy", proxy_command(*python_upstream()))):
        client = await RawClient.start(argv, env(tmp_path))
        try:
            lines = [await client.handshake()]
            for method, params in SMALL_CALLS:
                lines.append(await client.request(method, params))
        finally:
            await client.close()
        answers[name] = lines
    for sent, direct_line, proxy_line in zip(["initialize", *SMALL_CALLS], answers["direct"], answers["proxy"]):
        assert proxy_line == direct_line, sent


@pytest.mark.parametrize("mode", ERAS)
async def test_small_results_are_equal_through_the_sdk_in_both_eras(tmp_path, mode):
    async def run(params: Any) -> list[Any]:
        async with Client(params, mode=mode) as c:
            return [
                dumped(await c.call_tool("echo", {"text": "hi"})),
                dumped(await c.call_tool("weather", {"city": "Oslo"})),
                dumped(await c.call_tool("picture", {"size": 500})),
                dumped(await c.call_tool("tool_error", {})),
                dumped(await c.read_resource("text://small")),
                dumped(await c.read_resource("blob://small")),
                dumped(await c.get_prompt("greet", {"name": "Ada"})),
                [dumped(r) for r in (await c.list_resource_templates()).resource_templates],
            ]

    def unstamped(values: list[Any]) -> list[Any]:  # the serverInfo stamp is the upstream's either way
        return json.loads(json.dumps(values))

    assert unstamped(await run(proxied(tmp_path, *python_upstream()))) == unstamped(
        await run(direct(tmp_path, *python_upstream()))
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_upstream_errors_pass_through_as_errors(tmp_path, mode):
    async def failure(params: Any) -> tuple[int, str, Any]:
        async with Client(params, mode=mode) as c:
            with pytest.raises(MCPError) as caught:
                await c.call_tool("fail", {"code": -32077})
            return caught.value.code, caught.value.error.message, caught.value.error.data

    assert await failure(proxied(tmp_path, *python_upstream())) == await failure(direct(tmp_path, *python_upstream()))
    assert (await failure(proxied(tmp_path, *python_upstream())))[0] == -32077


# -- what is guarded ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_an_oversized_result_becomes_a_preview_whose_read_output_returns_the_original(tmp_path, mode):
    original = lines_text(20_000, width=60)
    async with Client(proxied(tmp_path, *python_upstream()), mode=mode) as client:
        result = await client.call_tool("big", {"lines": 20_000, "width": 60})
        assert not result.is_error and len(result.content) == 1
        preview = result.content[0].text
        assert preview.startswith("line 1 ") and "Full output saved as out_" in preview
        assert counter_for("gpt-4o").count(preview) <= 2_000 + 150  # the preview budget and its hint
        assert await read_whole(client, output_id(preview)) == original
        # A regex search of the stored output, through the same connection.
        found = await client.call_tool("read_output", {"id": output_id(preview), "pattern": "^line 19999 "})
        assert "19999:line 19999 " in found.content[0].text


async def test_a_result_under_the_limit_is_not_touched_and_one_over_is(tmp_path):
    options = ("--max-tokens", "1000", "--preview-tokens", "200")
    async with Client(proxied(tmp_path, *python_upstream(), options=options), mode="legacy") as client:
        under = (await client.call_tool("big", {"lines": 15, "width": 20})).content[0].text
        assert under == lines_text(15, 20)
        over = (await client.call_tool("big", {"lines": 200, "width": 20})).content[0].text
        assert "Full output saved as" in over and counter_for("gpt-4o").count(over) < 200 + 150


async def test_many_small_blocks_over_the_limit_are_stored_together(tmp_path):
    async with Client(proxied(tmp_path, *python_upstream()), mode="legacy") as client:
        result = await client.call_tool("blocks", {"count": 40, "lines": 60})
        assert len(result.content) == 1
        text = result.content[0].text
        assert "Full output saved as" in text
        whole = await read_whole(client, output_id(text))
        assert whole == "\n".join(lines_text(60, start=1 + i * 60) for i in range(40))


async def test_a_result_over_the_block_bound_is_refused_naming_the_setting(tmp_path):
    """The bound on a result's content blocks is `proxy_max_result_blocks`, set like any other
    setting (here from the environment): over it the request gets an error naming the setting. (A
    result small enough to need no guarding passes whatever its blocks: only walking one costs.)"""
    bound = {"CONTEXTFOLD_PROXY_MAX_RESULT_BLOCKS": "30"}
    async with Client(proxied(tmp_path, *python_upstream(), **bound), mode="legacy") as client:
        with pytest.raises(MCPError, match="40 content blocks.*of 30 .proxy_max_result_blocks"):
            await client.call_tool("blocks", {"count": 40, "lines": 60})
        result = await client.call_tool("blocks", {"count": 30, "lines": 60})
        assert not result.is_error and "Full output saved as" in result.content[0].text


@pytest.mark.parametrize("mode", ERAS)
async def test_structured_content_over_the_limit_stays_valid_for_its_output_schema(tmp_path, mode):
    async with Client(proxied(tmp_path, *python_upstream()), mode=mode) as client:
        # The SDK's client validates structured content against the tool's output schema.
        result = await client.call_tool("report", {"rows": 600})
        assert not result.is_error
        shortened = result.structured_content
        assert shortened["title"] == "report" and 0 < len(shortened["rows"]) < 600
        assert counter_for("gpt-4o").count(json.dumps(shortened)) <= 2_400
        assert shortened["rows"] == [
            {"id": i, "name": f"row {i}", "notes": "n" * 200} for i in range(len(shortened["rows"]))
        ]
        # Rows were dropped without a trace in them: a note says so, and where the whole result is
        # (clients such as Claude Code show the model the structured content).
        assert "lists cut to their first items" in shortened["contextfold_note"]
        # The JSON text the SDK writes beside it shows the stored JSON's preview and hint: one
        # output for both, written indented so that it reads by lines.
        assert len(result.content) == 1
        text = result.content[0].text
        assert text.startswith('{\n "title": "report",') and "Full output saved as" in text
        whole = json.loads(await read_whole(client, output_id(text)))
        assert whole == {
            "title": "report",
            "rows": [{"id": i, "name": f"row {i}", "notes": "n" * 200} for i in range(600)],
        }
        long = await client.call_tool("report", {"rows": 3, "note_chars": 60_000})
        notes = [row["notes"] for row in long.structured_content["rows"]]
        assert all(n.startswith("nnnn") and f'read_output(id="{output_id(long.content[0].text)}")' in n for n in notes)
        assert "contextfold_note" not in long.structured_content  # each cut carries its own note


async def test_structured_content_no_shortening_can_fit_becomes_an_error_result_with_the_preview(tmp_path):
    options = ("--max-tokens", "1000", "--preview-tokens", "300")
    async with Client(proxied(tmp_path, *python_upstream(), options=options), mode="legacy") as client:
        # The client has not listed the tools: the proxy learns the output schema itself.
        result = await client.call_tool("strict_report", {"chars": 15_000})
        assert result.is_error and result.structured_content is None
        text = result.content[0].text
        assert text.startswith("The tool ran, but its structured result is too large")
        assert '"blob": "qqq' in text and "read_output(id=" in text
        whole = json.loads(await read_whole(client, output_id(text)))
        assert whole == {"rows": [{"id": 1, "code": "abc"}], "blob": "q" * 15_000}


async def test_images_pass_unless_over_the_binary_limit_and_embedded_text_is_guarded(tmp_path):
    extra = {"CONTEXTFOLD_PROXY_MAX_BINARY_BYTES": "50000"}
    async with Client(proxied(tmp_path, *python_upstream(), **extra), mode="legacy") as client:
        small = await client.call_tool("picture", {"size": 40_000})
        assert small.content[0].type == "image"
        large = await client.call_tool("picture", {"size": 60_000})
        assert large.content[0].type == "text"
        note = large.content[0].text
        assert "image/png, 60,000 bytes, over proxy_max_binary_bytes" in note
        stored = await read_whole(client, output_id(note))  # base64, in lines of 76
        assert max(map(len, stored.split("\n"))) == 76
        assert base64.b64decode(stored)[:8] == b"\x89PNG\r\n\x1a\n" and len(base64.b64decode(stored)) == 60_000

        embedded = await client.call_tool("embed", {"lines": 5_000})
        assert embedded.content[0].text == "here it is:"
        resource = embedded.content[1].resource
        assert resource.uri == "file:///embedded.txt" and "Full output saved as" in resource.text
        assert await read_whole(client, output_id(resource.text)) == lines_text(5_000)


@pytest.mark.parametrize("mode", ERAS)
async def test_resource_reads_and_prompts_are_guarded_too(tmp_path, mode):
    async with Client(proxied(tmp_path, *python_upstream()), mode=mode) as client:
        read = await client.read_resource("text://big")
        assert "Full output saved as" in read.contents[0].text and read.contents[0].uri == "text://big"
        assert await read_whole(client, output_id(read.contents[0].text)) == lines_text(4_000)
        prompt = await client.get_prompt("long_prompt", {"lines": "3000"})
        text = prompt.messages[0].content.text
        assert "Full output saved as" in text
        assert await read_whole(client, output_id(text)) == lines_text(3_000)


# -- the back channel and notifications --------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_sampling_elicitation_roots_progress_and_logging_pass_through(tmp_path, mode):
    logs: list[Any] = []
    messages: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append((params.level, params.data))

    async def on_message(message: Any) -> None:
        messages.append(message)

    async with Client(
        proxied(tmp_path, *python_upstream()),
        mode=mode,
        sampling_callback=fake_llm,
        elicitation_callback=consent,
        list_roots_callback=list_roots,
        logging_callback=on_log,
        log_level="info",
        message_handler=on_message,
    ) as client:
        assert (await client.call_tool("ask", {"question": "why"})).content[0].text == "LLM<why>"
        assert (await client.call_tool("confirm", {"what": "proceed"})).content[0].text == "accept:True"
        assert (await client.call_tool("roots", {})).content[0].text == "file:///work/project"
        if mode == "legacy":  # server-to-client requests exist only in the 2025 era
            assert (await client.call_tool("ask_push", {"question": "how"})).content[0].text == "LLM<how>"
            assert (await client.call_tool("confirm_push", {"what": "go"})).content[0].text == "accept:True"
        seen: list[Any] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        assert (await client.call_tool("count", {"n": 3}, progress_callback=on_progress)).content[0].text == "counted 3"
        assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        assert (await client.call_tool("chatty", {})).content[0].text == "ok"
        assert ("info", "hello from chatty") in logs
        if mode == "legacy":
            assert (await client.call_tool("grow", {})).content[0].text == "grown"
            for _ in range(600):  # a bound on waiting (30 s), not a timing assertion
                if any(type(m).__name__ == "ToolListChangedNotification" for m in messages):
                    break
                await asyncio.sleep(0.05)
            assert any(type(m).__name__ == "ToolListChangedNotification" for m in messages), messages
        else:  # the 2026-07-28 way: a `subscriptions/listen` stream
            async with client.listen(tools_list_changed=True) as events:
                assert (await client.call_tool("grow", {})).content[0].text == "grown"
                with anyio.fail_after(10):
                    event = await events.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
        names = [t.name for t in (await client.list_tools()).tools]
        assert "added_later" in names and names[-2:] == ["read_output", "search_history"]


async def test_a_cancelled_call_leaves_the_proxy_answering(tmp_path):
    async with Client(proxied(tmp_path, *python_upstream()), mode="legacy") as client:
        with pytest.raises(MCPError):
            await client.session.call_tool("slow", {"seconds": 30}, read_timeout_seconds=0.5)
        assert (await client.call_tool("echo", {"text": "still here"})).content[0].text == "still here"


# -- the session and the data home -------------------------------------------------------------------


async def test_search_history_finds_earlier_results_through_the_same_connection(tmp_path):
    async with Client(proxied(tmp_path, *python_upstream()), mode="legacy") as client:
        nothing = await client.call_tool("search_history", {"pattern": "x"})
        assert "Nothing recorded yet" in nothing.content[0].text
        await client.call_tool("echo", {"text": "the needle is here"})
        await client.call_tool("weather", {"city": "Bergen"})
        await client.call_tool("big", {"lines": 3_000})
        found = (await client.call_tool("search_history", {"pattern": "needle"})).content[0].text
        assert "m1 assistant" in found and "the needle is here" in found
        again = (await client.call_tool("search_history", {"at": "m2"})).content[0].text
        assert "Bergen" in again
        bad = await client.call_tool("search_history", {"pattern": "(unclosed"})
        assert bad.is_error and bad.content[0].text.startswith("pattern:")
        missing = await client.call_tool("read_output", {"id": "out_nope"})
        assert missing.is_error and "out_nope" in missing.content[0].text


def _sessions(home: Any) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "sessions", "--json"], env=env(home), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip().startswith("[") else json.loads(done.stdout)["sessions"]


async def test_each_proxy_has_a_session_made_only_when_used(tmp_path):
    async with Client(proxied(tmp_path, *python_upstream()), mode="legacy") as client:
        await client.list_tools()
    assert not (tmp_path / "contextfold.db").exists() or _sessions(tmp_path) == []
    async with Client(proxied(tmp_path, *python_upstream()), mode="legacy") as client:
        await client.call_tool("big", {"lines": 3_000})
    sessions = _sessions(tmp_path)
    assert (
        len(sessions) == 1
        and sessions[0]["title"].startswith("proxy: ")
        and "proxy_upstream.py" in sessions[0]["title"]
    )


async def test_several_proxies_on_one_home_keep_every_output(tmp_path):
    async def one(n: int) -> None:
        async with Client(proxied(tmp_path, *python_upstream()), mode="legacy") as client:
            ids = []
            for lines in (2_500 + n, 3_000 + n, 2_500 + n):  # the first and last are the same content
                ids.append(output_id((await client.call_tool("big", {"lines": lines})).content[0].text))
            assert ids[0] != ids[2]  # one output each, even where the content is stored once
            for lines, stored in zip((2_500 + n, 3_000 + n, 2_500 + n), ids):
                assert await read_whole(client, stored) == lines_text(lines)

    await asyncio.gather(*(one(n) for n in range(3)))
    assert len(_sessions(tmp_path)) == 3

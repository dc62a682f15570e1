"""`contextfold proxy` in front of real third-party servers from npm (TypeScript SDK).

`@modelcontextprotocol/server-everything` exercises every protocol feature: each is used through
the proxy and compared with a direct connection. `@modelcontextprotocol/server-filesystem` reads a
3.4 MB file, which must come back as a preview whose `read_output` returns the file.

Both are pinned in tests/upstreams/package.json; install them with `npm ci --prefix tests/upstreams`
(.ci/run does). Without them these tests skip locally, and fail under CI=true.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from _proxy import RawClient, direct, env, npm_server, output_id, proxied, proxy_command, read_whole
from mcp import Client
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

ERAS = ["legacy", "auto"]
"""The TypeScript servers speak the 2025 era only: `auto` probes, is refused, and falls back,
through the proxy as directly."""


def everything() -> list[str]:
    return [str(npm_server("@modelcontextprotocol/server-everything", "mcp-server-everything")), "stdio"]


def filesystem(root: Path) -> list[str]:
    return [str(npm_server("@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")), str(root)]


async def fake_llm(_context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", model="fake", content=TextContent(type="text", text=f"LLM<{params.messages[0].content.text}>")
    )


async def fill_form(_context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True, "integer": 7})


async def list_roots(_context: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])


CALLBACKS = {"sampling_callback": fake_llm, "elicitation_callback": fill_form, "list_roots_callback": list_roots}


def dumped(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize("mode", ERAS)
async def test_everything_lists_the_same_tools_prompts_and_resources_plus_two_tools(tmp_path, mode):
    async def listing(params: Any) -> tuple[Any, ...]:
        async with Client(params, mode=mode, **CALLBACKS) as client:
            return (
                client.protocol_version,
                dumped(client.server_info),
                [dumped(t) for t in (await client.list_tools()).tools],
                [dumped(p) for p in (await client.list_prompts()).prompts],
                [dumped(r) for r in (await client.list_resources()).resources],
                [dumped(t) for t in (await client.list_resource_templates()).resource_templates],
            )

    plain = await listing(direct(tmp_path, *everything()))
    through = await listing(proxied(tmp_path, *everything()))
    assert plain[0] == through[0] == "2025-11-25"
    assert through[1] == plain[1] and through[3:] == plain[3:]
    assert through[2][: len(plain[2])] == plain[2]
    assert [t["name"] for t in through[2][len(plain[2]) :]] == ["read_output", "search_history"]
    assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= {
        t["name"] for t in plain[2]
    }


DETERMINISTIC = [
    ("tools/call", {"name": "echo", "arguments": {"message": "héllo ✓"}}),
    ("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 40}}),
    ("tools/call", {"name": "get-tiny-image", "arguments": {}}),
    ("tools/call", {"name": "get-annotated-message", "arguments": {"messageType": "error", "includeImage": True}}),
    ("tools/call", {"name": "get-structured-content", "arguments": {"location": "Chicago"}}),
    ("tools/call", {"name": "get-resource-links", "arguments": {"count": 4}}),
    ("tools/call", {"name": "echo", "arguments": {}}),  # a validation failure: the upstream's error result
    ("tools/call", {"name": "no-such-tool", "arguments": {}}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "demo://resource/static/document/architecture.md"}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "simple-prompt"}),
    ("prompts/get", {"name": "args-prompt", "arguments": {"city": "Oslo", "state": "Norway"}}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": "E"}},
    ),
    ("logging/setLevel", {"level": "warning"}),
    ("resources/subscribe", {"uri": "demo://resource/dynamic/text/1"}),
    ("ping", None),
]
TIMED = [  # their text says when they were made: compared with the times masked
    ("resources/read", {"uri": "demo://resource/dynamic/text/1"}),
    ("tools/call", {"name": "get-resource-reference", "arguments": {"resourceType": "Text", "resourceId": 2}}),
]
CLOCK = re.compile(rb"\d{1,2}:\d{2}:\d{2}\s?[AP]M")


async def test_everything_small_results_are_byte_identical_to_a_direct_connection(tmp_path):
    answers = {}
    for name, argv in (("direct", everything()), ("proxy", proxy_command(*everything()))):
        client = await RawClient.start(argv, env(tmp_path))
        try:
            lines = [await client.handshake()]
            lines += [await client.request(method, params) for method, params in DETERMINISTIC]
            lines += [CLOCK.sub(b"<time>", await client.request(method, params)) for method, params in TIMED]
        finally:
            await client.close()
        answers[name] = lines
    for sent, plain, through in zip(["initialize", *DETERMINISTIC, *TIMED], answers["direct"], answers["proxy"]):
        assert through == plain, sent


async def test_everything_back_channel_progress_logging_subscriptions_and_tasks_pass_through(tmp_path):
    logs: list[Any] = []
    messages: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def on_message(message: Any) -> None:
        messages.append(message)

    async def until(found: Any, what: str) -> None:
        with anyio.fail_after(15):
            while not found():
                await anyio.sleep(0.05)

    async with Client(
        proxied(tmp_path, *everything()),
        mode="legacy",
        logging_callback=on_log,
        message_handler=on_message,
        **CALLBACKS,
    ) as client:
        sampled = await client.call_tool("trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 20})
        assert "LLM<Resource trigger-sampling-request context: Say hi>" in sampled.content[0].text
        elicited = await client.call_tool("trigger-elicitation-request", {})
        assert "Ada Lovelace" in json.dumps(dumped(elicited))
        rooted = await client.call_tool("get-roots-list", {})
        assert "file:///work/project" in rooted.content[0].text

        progress: list[Any] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total))

        done = await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
        )
        assert "Steps: 3" in done.content[0].text and progress == [(1, 3), (2, 3), (3, 3)]

        await client.set_logging_level("debug")
        await client.call_tool("toggle-simulated-logging", {})
        await until(lambda: logs, "a log message")

        uri = "demo://resource/dynamic/text/1"
        await client.subscribe_resource(uri)
        await client.call_tool("toggle-subscriber-updates", {})
        await until(
            lambda: any(type(m).__name__ == "ResourceUpdatedNotification" and m.params.uri == uri for m in messages),
            "a resource update",
        )

        # A tool that registers a resource: the list-changed notification comes through.
        data = "data:text/plain;base64,aGVsbG8gcHJveHk="
        await client.call_tool("gzip-file-as-resource", {"name": "hello.txt.gz", "data": data})
        await until(
            lambda: any(type(m).__name__ == "ResourceListChangedNotification" for m in messages), "list changed"
        )

    # Tasks (SEP-1686): a task-augmented call, polled, and its result fetched, in raw JSON-RPC.
    raw = await RawClient.start(proxy_command(*everything()), env(tmp_path))
    try:
        await raw.handshake()
        started = json.loads(
            await raw.request(
                "tools/call",
                {"name": "simulate-research-query", "arguments": {"topic": "proxies"}, "task": {"ttl": 60_000}},
            )
        )
        task_id = started["result"]["task"]["taskId"]
        with anyio.fail_after(30):
            while json.loads(await raw.request("tasks/get", {"taskId": task_id}))["result"]["status"] != "completed":
                await anyio.sleep(0.2)
        result = json.loads(await raw.request("tasks/result", {"taskId": task_id}))["result"]
        assert "proxies" in json.dumps(result)
    finally:
        await raw.close()


def big_file(root: Path) -> tuple[Path, str]:
    text = "".join(
        f"{i:06d} the quick brown fox jumps over the lazy dog {i * 7919 % 1000:03d}\n" for i in range(62_000)
    )
    path = root / "big.log"
    path.write_text(text)
    return path, text


@pytest.mark.parametrize("mode", ERAS)
async def test_filesystem_reading_a_large_file_gives_a_preview_whose_read_output_returns_it(tmp_path, mode):
    root = tmp_path / "files"
    root.mkdir()
    path, text = big_file(root)
    assert len(text) > 3_300_000
    (root / "small.txt").write_text("just a few words\n")
    async with Client(direct(tmp_path, *filesystem(root)), mode=mode) as plain:
        small_direct = dumped(await plain.call_tool("read_text_file", {"path": str(root / "small.txt")}))
    async with Client(proxied(tmp_path, *filesystem(root)), mode=mode) as client:
        small = dumped(await client.call_tool("read_text_file", {"path": str(root / "small.txt")}))
        assert small == small_direct
        result = await client.call_tool("read_text_file", {"path": str(path)})
        preview = result.content[0].text
        assert preview.startswith("000000 the quick brown fox") and "Full output saved as out_" in preview
        assert len(preview) < 20_000
        assert await read_whole(client, output_id(preview)) == text.removesuffix("\n")
        # Its structuredContent ({"content": the text}, which Claude Code shows the model) carries
        # the same preview and hint, and stays valid for the tool's output schema.
        assert result.structured_content == {"content": preview}

"""`contextfold proxy --config servers.json`: several upstreams behind one proxy, names prefixed.

Two Python upstreams (tests/proxy_upstream.py, one with tools named like the proxy's own) and one
that cannot start, in the `mcpServers` format the apps use; the SDK's client in front.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _proxy import UPSTREAM, env, output_id, read_whole
from mcp import Client, MCPError, StdioServerParameters
from proxy_upstream import lines_text
from test_proxy import consent, fake_llm

pytestmark = pytest.mark.anyio


def servers_file(tmp_path: Path) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {
        "alpha": {"command": sys.executable, "args": [str(UPSTREAM)]},
        "beta": {"command": sys.executable, "args": [str(UPSTREAM)], "env": {"PROXY_UPSTREAM_COLLIDE": "1"}},
        "gone": {"command": "no-such-mcp-server-program"},
        "off": {"command": "whatever", "disabled": True},
    }}))  # fmt: skip
    return path


def hub(tmp_path: Path, path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "contextfold", "proxy", "--config", str(path)], env=env(tmp_path)
    )


async def test_several_upstreams_behind_one_proxy(tmp_path):
    async with Client(
        hub(tmp_path, servers_file(tmp_path)), mode="auto", sampling_callback=fake_llm, elicitation_callback=consent
    ) as client:
        assert client.protocol_version == "2025-11-25" and client.server_info.name == "contextfold-proxy"
        names = [t.name for t in (await client.list_tools()).tools]
        assert "alpha__echo" in names and "beta__echo" in names and "beta__read_output" in names
        assert not any(n.startswith("gone__") for n in names)  # it could not start: only its tools are missing
        assert names[-2:] == ["read_output", "search_history"]
        assert (await client.call_tool("alpha__echo", {"text": "hi"})).content[0].text == "hi"
        assert (await client.call_tool("beta__read_output", {"path": "p"})).content[0].text == "upstream read p"
        # The back channel: each upstream's requests to the client get ids of the hub's.
        answers = [await client.call_tool(f"{n}__ask_push", {"question": n}) for n in ("alpha", "beta")]
        assert [a.content[0].text for a in answers] == ["LLM<alpha>", "LLM<beta>"]
        progress: list[Any] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        await client.call_tool("beta__count", {"n": 2}, progress_callback=on_progress)
        assert progress == [1, 2]
        with pytest.raises(MCPError) as failed:
            await client.call_tool("alpha__fail", {"code": -32055})
        assert failed.value.code == -32055
        # Guarded as a single upstream is, read back through the one read_output.
        cut = (await client.call_tool("beta__big", {"lines": 4_000})).content[0].text
        assert "Full output saved as" in cut and 'read_output(id="' in cut
        assert await read_whole(client, output_id(cut)) == lines_text(4_000)
        # Prompts are prefixed too; resources keep their URIs.
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert "alpha__greet" in prompts and "beta__long_prompt" in prompts
        greeting = await client.get_prompt("alpha__greet", {"name": "Ada"})
        assert greeting.messages[0].content.text == "Say hello to Ada."
        assert (await client.read_resource("text://small")).contents[0].text == "a small resource"
        await client.list_resource_templates()
        assert (await client.read_resource("item://9")).contents[0].text == "item 9"
        found = (await client.call_tool("search_history", {"pattern": "upstream read p"})).content[0].text
        assert "upstream read p" in found


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "not a JSON servers file"),
        ('{"mcpServers": {}}', 'expected {"mcpServers"'),
        ('{"mcpServers": {"a__b": {"command": "x"}}}', "a name is 1-40 letters"),
        ('{"mcpServers": {"a": {"args": ["x"]}}}', "needs a command (stdio) or a url"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "args: expected a list of strings"),
    ],
)
def test_a_bad_servers_file_is_one_clear_line(tmp_path, content, message):
    path = tmp_path / "servers.json"
    path.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "proxy", "--config", str(path)],
        env=env(tmp_path), capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    "method,params,says",
    [
        ("tools/call", {"name": ["alpha__echo"], "arguments": {}}, "no tool named ['alpha__echo']"),
        ("tools/call", {"name": {"n": 1}, "arguments": {}}, "no tool named {'n': 1}"),
        ("prompts/get", {"name": [1, 2]}, "no prompt named [1, 2]"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": {}}, "argument": {}}, "has the prompt {}"),
        ("tasks/get", {"taskId": ["t"]}, "cannot tell which upstream"),
    ],
)
async def test_a_name_of_any_json_type_gets_a_one_line_error_not_an_internal_one(tmp_path, method, params, says):
    """A name that is a list or an object (unhashable in Python) names nothing: the hub says so for
    that request, as for an unknown name, and goes on serving."""
    from _proxy import RawClient

    argv = [sys.executable, "-m", "contextfold", "proxy", "--config", str(servers_file(tmp_path))]
    client = await RawClient.start(argv, env(tmp_path))
    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        await client.request("initialize", init)
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await client.request("tools/list")
        answer = json.loads(await client.request(method, params))
        assert "error" in answer, answer
        assert says in answer["error"]["message"] and "internal" not in answer["error"]["message"].lower(), answer
        echoed = json.loads(await client.request("tools/call", {"name": "alpha__echo", "arguments": {"text": "ok"}}))
        assert echoed["result"]["content"][0]["text"] == "ok"
    finally:
        client.process.kill()
        await client.process.wait()

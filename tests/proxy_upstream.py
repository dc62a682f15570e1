"""An MCP server that uses every feature the proxy must pass through, for tests/test_proxy*.py.

Run as a script it serves stdio; `--http PORT` serves streamable HTTP. Written with the MCP SDK
(both protocol eras), its tools return small and large text, structured content with output
schemas, images, embedded resources, errors of both kinds, and ask the client for sampling,
elicitation and roots in both the push style (2025 era only) and the `Resolve` style (both).
`PROXY_UPSTREAM_COLLIDE=1` adds tools named like the proxy's own.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from typing import Annotated, Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Elicit, ListRoots, Resolve, Sample
from mcp.types import (
    CallToolResult,
    Completion,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

mcp = MCPServer("proxy-upstream", version="1.2.3", instructions="A test server for contextfold proxy.")

PNG_HEADER = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (64).to_bytes(4, "big") * 2


def lines_text(lines: int, width: int = 40, start: int = 1) -> str:
    return "\n".join(f"line {i} " + "x" * width for i in range(start, start + lines))


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), title="Echo")
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool(structured_output=False)
def big(lines: int, width: int = 40) -> str:
    """Return `lines` numbered lines."""
    return lines_text(lines, width)


@mcp.tool(structured_output=False)
def blocks(count: int, lines: int) -> list[TextContent]:
    """Return `count` text blocks of `lines` lines each."""
    return [TextContent(type="text", text=lines_text(lines, start=1 + i * lines)) for i in range(count)]


class Weather(BaseModel):
    city: str
    temperature: float
    conditions: str


@mcp.tool()
def weather(city: str) -> Weather:
    """Structured weather."""
    return Weather(city=city, temperature=21.5, conditions="clear")


class Row(BaseModel):
    id: int
    name: str
    notes: str


class Report(BaseModel):
    title: str
    rows: list[Row]


@mcp.tool()
def report(rows: int, note_chars: int = 200) -> Report:
    """A structured report with many rows."""
    return Report(
        title="report",
        rows=[Row(id=i, name=f"row {i}", notes=("n" * note_chars)) for i in range(rows)],
    )


class StrictRow(BaseModel):
    id: int
    code: Annotated[str, Field(pattern=r"^[a-z]+$")]


class StrictReport(BaseModel):
    rows: Annotated[list[StrictRow], Field(min_length=1)]
    blob: Annotated[str, Field(pattern=r"^[a-z]+$")]


@mcp.tool()
def strict_report(chars: int) -> StrictReport:
    """Structured content that no shortened copy can satisfy (a pattern on the long string)."""
    return StrictReport(rows=[StrictRow(id=1, code="abc")], blob="q" * chars)


@mcp.tool()
def picture(size: int) -> ImageContent:
    """A PNG-looking image of `size` bytes."""
    data = PNG_HEADER + b"\x00" * max(0, size - len(PNG_HEADER))
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type="image/png")


@mcp.tool()
def embed(lines: int) -> list[TextContent | EmbeddedResource]:
    """Text and an embedded text resource of `lines` lines."""
    resource = TextResourceContents(uri="file:///embedded.txt", mime_type="text/plain", text=lines_text(lines))
    return [
        TextContent(type="text", text="here it is:"),
        EmbeddedResource(type="resource", resource=resource),
    ]


@mcp.tool()
def fail(code: int = -32099) -> str:
    """Fail with a JSON-RPC error (not a tool error)."""
    raise MCPError(code, "deliberate failure", {"why": "testing"})


@mcp.tool()
def tool_error() -> CallToolResult:
    """A tool error result."""
    return CallToolResult(content=[TextContent(type="text", text="it went wrong")], is_error=True)


def _ask(question: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=question))], max_tokens=20)


@mcp.tool()
def ask(question: str, answer: Annotated[CreateMessageResult, Resolve(_ask)]) -> str:
    """Ask the client's model (works in both eras)."""
    return answer.content.text if answer.content.type == "text" else "?"


@mcp.tool()
async def ask_push(question: str, ctx: Context) -> str:
    """Ask the client's model with a server-to-client request (2025 era)."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=20,
        related_request_id=ctx.request_id,
    )
    return result.content.text


class Consent(BaseModel):
    ok: bool


def _confirm(what: str) -> Elicit[Consent]:
    return Elicit(f"May I {what}?", Consent)


@mcp.tool()
def confirm(what: str, consent: Annotated[Consent, Resolve(_confirm)]) -> str:
    """Ask the user (elicitation, both eras); the accepted answer is injected."""
    return f"accept:{consent.ok}"


@mcp.tool()
async def confirm_push(what: str, ctx: Context) -> str:
    """Ask the user with a server-to-client request (2025 era)."""
    result = await ctx.elicit(f"May I {what}?", Consent)
    return f"{result.action}:{getattr(result.data, 'ok', None)}"


def _roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
def roots(listing: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
    """The client's roots."""
    return ",".join(str(root.uri) for root in listing.roots)


@mcp.tool()
async def chatty(ctx: Context) -> str:
    """Log to the client."""
    await ctx.info("hello from chatty")
    return "ok"


@mcp.tool()
async def count(n: int, ctx: Context) -> str:
    """Report progress n times."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, total=n, message=f"step {i}")
    return f"counted {n}"


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep (for cancellation and timeouts)."""
    await asyncio.sleep(seconds)
    return "done"


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add a tool and say the list changed."""
    mcp.add_tool(lambda: "new", name="added_later", description="Added by grow.")
    if ctx.protocol_version >= "2026-07-28":
        await ctx.notify_tools_changed()  # to `subscriptions/listen` streams
    else:
        await ctx.session.send_tool_list_changed()
    return "grown"


@mcp.tool()
def header(name: str, ctx: Context) -> str:
    """A header of the HTTP request that carried this call ("" over stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@mcp.resource("text://small", mime_type="text/plain")
def small_resource() -> str:
    return "a small resource"


@mcp.resource("text://big", mime_type="text/plain")
def big_resource() -> str:
    return lines_text(4_000)


@mcp.resource("blob://small", mime_type="application/octet-stream")
def blob_resource() -> bytes:
    return b"\x00\x01\x02binary"


@mcp.resource("item://{id}", mime_type="text/plain")
def item(id: str) -> str:
    return f"item {id}"


@mcp.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Say hello to {name}."


@mcp.prompt()
def long_prompt(lines: int) -> str:
    """A prompt with a long text."""
    return lines_text(int(lines))


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion:
    names = ["alice", "albert", "bob"]
    return Completion(values=[n for n in names if n.startswith(argument.value)])


if os.environ.get("PROXY_UPSTREAM_COLLIDE"):

    @mcp.tool(name="read_output")
    def upstream_read_output(path: str) -> str:
        """The upstream's own read_output."""
        return f"upstream read {path}"

    @mcp.tool(name="contextfold_search_history")
    def upstream_search(pattern: str) -> str:
        """Another name the proxy might have used."""
        return pattern


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()

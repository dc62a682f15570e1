"""Anthropic and OpenAI wire formats: parsing, rendering, round trips, and real transcripts."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_files, corpus_params, needs_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_importers import misplaced_result
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.domain import (
    CompactionPart,
    FilePart,
    Message,
    ReasoningPart,
    SystemPrompt,
    TextPart,
    ToolPart,
    ToolResult,
    complete_tool_part,
)
from contextfold.errors import FormatError
from contextfold.formats import INTERRUPTED_RESULT, RenderOptions, parse, render
from contextfold.formats.anthropic import CONTINUATION_TEXT, EMPTY_ERROR_TEXT
from contextfold.formats.openai import COMPACTION_PROMPT

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()
KEEP_PENDING_OUT = RenderOptions(interrupt_pending=False)


def _user(*parts: Any, name: str | None = None) -> Message:
    return Message(role="user", parts=[TextPart(text=p) if isinstance(p, str) else p for p in parts], name=name)


def _assistant(*parts: Any, summary: bool = False) -> Message:
    return Message(
        role="assistant", parts=[TextPart(text=p) if isinstance(p, str) else p for p in parts], summary=summary
    )


def _call(call_id: str, state: str = "completed", **fields: Any) -> ToolPart:
    fields.setdefault("name", "bash")
    fields.setdefault("input", {"command": "ls"})
    if state == "completed":
        fields.setdefault("output", f"output of {call_id}")
    return ToolPart(call_id=call_id, state=state, **fields)


def _format_error(messages: Any, fmt: str) -> FormatError:
    with pytest.raises(FormatError) as caught:
        parse(messages, fmt)  # type: ignore[arg-type]
    return caught.value


# == Anthropic: parse ==============================================================================


def test_anthropic_string_content_is_one_text_part() -> None:
    batch = parse([{"role": "user", "content": "hello"}], "anthropic")
    assert batch.system is None and batch.results == []
    assert batch.messages == [Message(role="user", parts=[TextPart(text="hello")])]


def test_anthropic_empty_batch() -> None:
    batch = parse([], "anthropic")
    assert batch.messages == [] and batch.results == [] and batch.system is None


def test_anthropic_parses_every_block_type() -> None:
    batch = parse(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
                    {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}, "title": "A"},
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "ok", "citations": []},
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}, "caller": {"x": 1}},
                ],
            },
        ],
        "anthropic",
    )
    user, assistant = batch.messages
    assert user.parts == [
        TextPart(text="look"),
        FilePart(mime="image/png", data=PNG),
        FilePart(mime="image/jpeg", url="https://x.test/cat.jpg"),
        FilePart(mime="application/pdf", data=PDF),
        FilePart(mime="application/pdf", url="https://x.test/a.pdf", filename="A"),
        FilePart(mime="text/plain", data=base64.b64encode(b"notes").decode()),
    ]
    assert assistant.parts == [
        ReasoningPart(text="hmm", signature="sig=="),
        ReasoningPart(redacted_data="opaque"),
        TextPart(text="ok"),
        ToolPart(call_id="t1", name="read", input={"path": "a"}, state="pending"),
    ]
    assert all(m.id == "" and m.tokens == 0 for m in batch.messages)


def test_anthropic_result_in_same_batch_completes_the_call() -> None:
    batch = parse(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "line 1"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                            {"type": "text", "text": "line 2"},
                        ],
                    }
                ],
            },
        ],
        "anthropic",
    )
    # The carrier of the result is not a user turn: only two domain messages.
    assert [m.role for m in batch.messages] == ["user", "assistant"]
    (part,) = batch.messages[1].tool_parts
    assert part.state == "completed"
    assert part.output == "line 1\nline 2"
    assert part.attachments == [FilePart(mime="image/png", data=PNG)]
    assert batch.results == []


def test_anthropic_error_result_and_user_text_after_results() -> None:
    batch = parse(
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
                    {"type": "text", "text": "try again"},
                ],
            },
        ],
        "anthropic",
    )
    assert [m.role for m in batch.messages] == ["assistant", "user"]
    part = batch.messages[0].tool_parts[0]
    assert (part.state, part.error, part.output) == ("error", "boom", None)
    assert batch.messages[1].parts == [TextPart(text="try again")]


def test_anthropic_result_for_a_stored_call_goes_to_results() -> None:
    batch = parse(
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "old", "content": "done"}]}],
        "anthropic",
    )
    assert batch.messages == []
    assert batch.results == [ToolResult(call_id="old", output="done", source="messages[0].content[0]")]


def test_anthropic_second_result_for_a_finished_call_is_an_error() -> None:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x"}
    error = _format_error(
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [result, result]},
        ],
        "anthropic",
    )
    assert error.path == "messages[1].content[1]"
    assert "t1" in str(error) and "already answered" in str(error)


def test_reused_call_id_attaches_to_the_most_recent_open_call() -> None:
    def use(call_id: str) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "bash", "input": {}}]}

    def result(text: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": text}]}

    # The first call is abandoned (never answered); the second is answered, then reused again.
    batch = parse([use("x"), use("x"), result("second"), use("x"), result("third")], "anthropic")
    outputs = [m.tool_parts[0].output for m in batch.messages]
    assert outputs == [None, "second", "third"]


ANTHROPIC_BAD = [
    ([1], "messages[0]", "expected a message object"),
    ([{"content": "x"}], "messages[0].role", "missing"),
    ([{"role": "system", "content": "x"}], "messages[0].role", "pass the system prompt separately"),
    ([{"role": "tool", "content": "x"}], "messages[0].role", "'tool'"),
    ([{"role": 3, "content": "x"}], "messages[0].role", "got a number"),
    ([{"role": "user"}], "messages[0].content", "missing"),
    ([{"role": "user", "content": 5}], "messages[0].content", "got a number"),
    ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]", "got a string"),
    ([{"role": "user", "content": [{"text": "hi"}]}], "messages[0].content[0].type", "missing"),
    ([{"role": "user", "content": [{"type": "video"}]}], "messages[0].content[0].type", "'video'"),
    ([{"role": "user", "content": [{"type": "text", "text": 7}]}], "messages[0].content[0].text", "string"),
    (
        [{"role": "user", "content": [{"type": "image"}]}],
        "messages[0].content[0].source",
        "expected an image source object",
    ),
    (
        [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}],
        "messages[0].content[0].source.type",
        "'file'",
    ),
    (
        [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png"}}]}],
        "messages[0].content[0].source.data",
        "missing",
    ),
    (
        [{"role": "user", "content": [{"type": "document", "source": {"type": "content", "content": []}}]}],
        "messages[0].content[0].source.type",
        "'content'",
    ),
    (
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": [1]}]}],
        "messages[0].content[0].input",
        "expected an object",
    ),
    (
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n"}]}],
        "messages[0].content[0].input",
        "missing",
    ),
    (
        [{"role": "assistant", "content": [{"type": "tool_use", "name": "n", "input": {}}]}],
        "messages[0].content[0].id",
        "missing",
    ),
    (
        [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}],
        "messages[0].content[0].type",
        "assistant",
    ),
    (
        [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t", "content": ""}]}],
        "messages[0].content[0].type",
        "user",
    ),
    (
        [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
        "messages[0].content[0].tool_use_id",
        "missing",
    ),
    (
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}],
        "messages[0].content[0].is_error",
        "true or false",
    ),
    (
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 3}]}],
        "messages[0].content[0].content",
        "got a number",
    ),
    (
        [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "search_result"}]}],
            }
        ],
        "messages[0].content[0].content[0].type",
        "'search_result'",
    ),
    (
        [{"role": "assistant", "content": [{"type": "thinking", "signature": "s"}]}],
        "messages[0].content[0].thinking",
        "missing",
    ),
    (
        [{"role": "assistant", "content": [{"type": "redacted_thinking", "data": None}]}],
        "messages[0].content[0].data",
        "got null",
    ),
]


@pytest.mark.parametrize(("messages", "path", "fragment"), ANTHROPIC_BAD)
def test_anthropic_bad_input_names_the_field(messages: list[Any], path: str, fragment: str) -> None:
    error = _format_error(messages, "anthropic")
    assert error.path == path
    assert str(error).startswith(f"{path}: ")
    assert fragment in error.problem


# == OpenAI: parse =================================================================================


def test_openai_system_and_developer_become_the_system_prompt() -> None:
    batch = parse(
        [
            {"role": "system", "content": "be brief"},
            {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": "hi", "name": "alice"},
        ],
        "openai",
    )
    assert batch.system == [SystemPrompt(role="system", text="be brief"), SystemPrompt(role="developer", text="a\nb")]
    assert batch.messages == [Message(role="user", parts=[TextPart(text="hi")], name="alice")]


def test_openai_no_system_message_leaves_system_unset() -> None:
    assert parse([{"role": "user", "content": "hi"}], "openai").system is None
    assert parse([], "openai").messages == []


def test_openai_user_media_parts() -> None:
    batch = parse(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.webp"}},
                    {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
                    {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}},
                    {"type": "file", "file": {"file_data": PDF, "filename": "b.pdf"}},
                    {"type": "image_url", "image_url": {"url": "data:image/svg+xml,%3Csvg%2F%3E"}},
                ],
            }
        ],
        "openai",
    )
    assert batch.messages[0].parts == [
        TextPart(text="see"),
        FilePart(mime="image/png", data=PNG),
        FilePart(mime="image/webp", url="https://x.test/a.webp"),
        FilePart(mime="audio/wav", data="UklGR"),
        FilePart(mime="application/pdf", data=PDF, filename="a.pdf"),
        FilePart(mime="application/pdf", data=PDF, filename="b.pdf"),
        FilePart(mime="image/svg+xml", data=base64.b64encode(b"<svg/>").decode()),
    ]


def test_openai_tool_calls_keep_raw_arguments_even_when_broken() -> None:
    broken = '{"command": "ls'
    batch = parse(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command":  "ls"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "patch", "arguments": broken}},
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "files", "name": "bash"},
        ],
        "openai",
    )
    (message,) = batch.messages
    first, second = message.parts
    assert isinstance(first, ToolPart) and isinstance(second, ToolPart)
    assert (first.input, first.raw_arguments, first.output) == ({"command": "ls"}, '{"command":  "ls"}', "files")
    assert (second.input, second.raw_arguments, second.output) == (broken, broken, "a\nb")
    assert message.text == ""  # null content adds no text part


def test_openai_result_for_a_stored_call_goes_to_results() -> None:
    batch = parse([{"role": "tool", "tool_call_id": "old", "content": "done"}], "openai")
    assert batch.messages == []
    assert batch.results == [ToolResult(call_id="old", output="done", source="messages[0]")]


def test_openai_second_result_is_an_error() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    error = _format_error(
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a"},
            {"role": "tool", "tool_call_id": "c1", "content": "b"},
        ],
        "openai",
    )
    assert error.path == "messages[2]" and "already answered" in error.problem


def test_openai_assistant_refusal_and_text_parts() -> None:
    batch = parse(
        [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "no"}]}],
        "openai",
    )
    assert batch.messages[0].parts == [TextPart(text="a"), TextPart(text="no")]


def _openai_call(**overrides: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    call.update(overrides)
    return {"role": "assistant", "content": None, "tool_calls": [call]}


OPENAI_BAD = [
    ("nope", "messages", "expected a list"),
    ([None], "messages[0]", "expected a message object"),
    ([{"content": "x"}], "messages[0].role", "missing"),
    ([{"role": "function", "name": "f", "content": "x"}], "messages[0].role", "role 'tool'"),
    ([{"role": "bot", "content": "x"}], "messages[0].role", "'bot'"),
    ([{"role": "user", "content": 5}], "messages[0].content", "got a number"),
    ([{"role": "user"}], "messages[0].content", "got null"),
    ([{"role": "user", "content": "x", "name": 5}], "messages[0].name", "string"),
    ([{"role": "user", "content": [{"type": "video"}]}], "messages[0].content[0].type", "'video'"),
    (
        [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        "messages[0].content[0].image_url.url",
        "missing",
    ),
    (
        [{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}],
        "messages[0].content[0].image_url",
        "object",
    ),
    (
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png"}}]}],
        "messages[0].content[0].image_url.url",
        "malformed data: URL",
    ),
    (
        [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f1"}}]}],
        "messages[0].content[0].file.file_id",
        "file_data",
    ),
    (
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]}],
        "messages[0].content[0].input_audio.format",
        "missing",
    ),
    ([{"role": "system", "content": [{"type": "image_url"}]}], "messages[0].content[0].type", "'text'"),
    ([{"role": "system", "content": None}], "messages[0].content", "got null"),
    ([{"role": "assistant", "content": [{"type": "image_url"}]}], "messages[0].content[0].type", "'refusal'"),
    ([{"role": "assistant", "content": 1}], "messages[0].content", "got a number"),
    ([{"role": "assistant", "function_call": {"name": "f"}}], "messages[0].function_call", "tool_calls"),
    ([{"role": "assistant", "tool_calls": {}}], "messages[0].tool_calls", "expected an array"),
    ([{"role": "assistant", "tool_calls": [7]}], "messages[0].tool_calls[0]", "tool call object"),
    ([_openai_call(type="custom")], "messages[0].tool_calls[0].type", "'custom'"),
    ([_openai_call(id=None)], "messages[0].tool_calls[0].id", "got null"),
    ([_openai_call(function="bash")], "messages[0].tool_calls[0].function", "got a string"),
    (
        [_openai_call(function={"name": "bash", "arguments": {"a": 1}})],
        "messages[0].tool_calls[0].function.arguments",
        "JSON-encoded string, got an object",
    ),
    ([_openai_call(function={"name": "bash"})], "messages[0].tool_calls[0].function.arguments", "missing"),
    ([_openai_call(function={"arguments": "{}"})], "messages[0].tool_calls[0].function.name", "missing"),
    ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id", "missing"),
    ([{"role": "tool", "tool_call_id": "c", "content": {"a": 1}}], "messages[0].content", "got an object"),
    (
        [{"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url"}]}],
        "messages[0].content[0].type",
        "'text'",
    ),
]


@pytest.mark.parametrize(("messages", "path", "fragment"), OPENAI_BAD)
def test_openai_bad_input_names_the_field(messages: Any, path: str, fragment: str) -> None:
    error = _format_error(messages, "openai")
    assert error.path == path
    assert str(error).startswith(f"{path}: ")
    assert fragment in error.problem


# == Anthropic: render =============================================================================


def test_anthropic_render_system_and_plain_strings() -> None:
    body = render(
        [SystemPrompt(text="be brief"), SystemPrompt(role="developer", text="  ")],
        [_user("hi"), _assistant("hello")],
        "anthropic",
    )
    assert body == {
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    }
    assert "system" not in render([], [_user("hi")], "anthropic")


def test_anthropic_render_merges_roles_and_puts_results_first() -> None:
    messages = [
        _user("a"),
        _user("b"),
        _assistant("calling", _call("t1"), _call("t2", state="error", error="bad")),
        _user("thanks"),
        _assistant("one"),
        _assistant("two"),
    ]
    body = render([], messages, "anthropic")
    assert_anthropic_valid(body)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "output of t1"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "bad", "is_error": True},
                {"type": "text", "text": "thanks"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
    ]


def test_anthropic_render_starts_with_user() -> None:
    body = render([], [_assistant("I was saying"), _user("go on")], "anthropic")
    assert body["messages"][0] == {"role": "user", "content": CONTINUATION_TEXT}
    assert_anthropic_valid(body)


def test_anthropic_pending_call_is_interrupted_or_left_out() -> None:
    messages = [_user("run"), _assistant(_call("t1", state="running")), _user("hello?")]
    interrupted = render([], messages, "anthropic")
    assert interrupted["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": INTERRUPTED_RESULT,
        "is_error": True,
    }
    assert_anthropic_valid(interrupted)
    omitted = render([], messages, "anthropic", KEEP_PENDING_OUT)
    # The assistant message held only the call, so it vanishes and the user messages merge.
    assert omitted["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "run"}, {"type": "text", "text": "hello?"}]}
    ]
    assert_anthropic_valid(omitted)


def test_anthropic_pruned_capped_and_empty_results() -> None:
    messages = [
        _user("x"),
        _assistant(
            _call("old", compacted_at=1.0),
            _call("big", output="a" * 20_000),
            _call("quiet", output=""),
            _call("silent", state="error", error=""),
        ),
    ]
    body = render([], messages, "anthropic", RenderOptions(output_cap=100, pruned_placeholder="[cleared]"))
    results = body["messages"][2]["content"]
    assert results[0]["content"] == "[cleared]"
    assert results[1]["content"] == "a" * 100 + "\n… [omitted 19,900 chars]"
    assert "content" not in results[2]
    assert results[3] == {"type": "tool_result", "tool_use_id": "silent", "content": EMPTY_ERROR_TEXT, "is_error": True}
    assert_anthropic_valid(body)


def test_anthropic_media_and_strip_media() -> None:
    image = FilePart(mime="image/png", data=PNG, filename="shot.png")
    messages = [
        _user("see", image, FilePart(mime="application/zip", data="UEs=", filename="a.zip")),
        _assistant(_call("t1", output="here", attachments=[image])),
    ]
    body = render([], messages, "anthropic")
    assert body["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "[Attached application/zip: a.zip]"},  # not a type the API takes
    ]
    assert body["messages"][2]["content"][0]["content"] == [
        {"type": "text", "text": "here"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]
    stripped = render([], messages, "anthropic", RenderOptions(strip_media=True))
    assert stripped["messages"][0]["content"][1] == {"type": "text", "text": "[Attached image/png: shot.png]"}
    assert stripped["messages"][2]["content"][0]["content"] == "here\n[Attached image/png: shot.png]"
    assert_anthropic_valid(body)
    assert_anthropic_valid(stripped)


def test_anthropic_reasoning_blocks() -> None:
    body = render(
        [],
        [
            _user("q"),
            _assistant(
                ReasoningPart(text="signed", signature="s1"),
                ReasoningPart(text="unsigned"),
                ReasoningPart(redacted_data="blob"),
                "answer",
            ),
        ],
        "anthropic",
    )
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "s1"},
        {"type": "redacted_thinking", "data": "blob"},
        {"type": "text", "text": "answer"},
    ]


def test_anthropic_blank_text_is_never_sent() -> None:
    body = render([], [_user("q"), _assistant("  \n"), _assistant(""), _user("", "again")], "anthropic")
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}]}
    ]


def test_anthropic_compaction_and_summary() -> None:
    messages = [Message(role="user", parts=[CompactionPart(auto=True)]), _assistant("## Goal\n- x", summary=True)]
    body = render([], messages, "anthropic")
    assert body["messages"] == [
        {"role": "user", "content": COMPACTION_PROMPT},
        {"role": "assistant", "content": "## Goal\n- x"},
    ]


def test_anthropic_reused_ids_are_made_unique_and_inputs_objects() -> None:
    messages = [
        _user("go"),
        _assistant(_call("x")),
        _assistant(_call("x", input="not json", raw_arguments="not json")),
    ]
    body = render([], messages, "anthropic")
    assert_anthropic_valid(body)
    uses = [b for m in body["messages"] for b in m["content"] if isinstance(b, dict) and b["type"] == "tool_use"]
    assert [u["id"] for u in uses] == ["x", "x_2"]
    assert uses[1]["input"] == {"input": "not json"}


# == OpenAI: render ================================================================================


def test_openai_render_shapes() -> None:
    image = FilePart(mime="image/png", data=PNG, filename="shot.png")
    messages = [
        _user("hi", name="alice"),
        _user("see", image),
        _assistant(
            ReasoningPart(text="hidden", signature="s"), "calling", _call("c1"), _call("c2", raw_arguments="{ }")
        ),
        _assistant(_call("c3", state="error", error="denied", output="ignored")),
        Message(role="user", parts=[CompactionPart()]),
        _assistant("summary text", summary=True),
    ]
    body = render([SystemPrompt(text="sys"), SystemPrompt(role="developer", text="dev")], messages, "openai")
    assert_openai_valid(body)
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "developer", "content": "dev"},
        {"role": "user", "content": "hi", "name": "alice"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
                {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{ }"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "output of c1"},
        {"role": "tool", "tool_call_id": "c2", "content": "output of c2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "denied"},
        {"role": "user", "content": COMPACTION_PROMPT},
        {"role": "assistant", "content": "summary text"},
    ]


def test_openai_render_non_ascii_arguments_unescaped() -> None:
    body = render([], [_assistant(_call("c1", input={"q": "héllo 世界"}))], "openai")
    assert body["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"q": "héllo 世界"}'


def test_openai_pending_pruned_capped_and_stripped() -> None:
    image = FilePart(mime="image/png", data=PNG, filename="shot.png")
    messages = [
        _user("x", image),
        _assistant(
            "working",
            _call("p", state="pending"),
            _call("old", compacted_at=1.0),
            _call("big", output="b" * 50),
            _call("pic", output="see", attachments=[image]),
        ),
    ]
    options = RenderOptions(output_cap=10, strip_media=True)
    body = render([], messages, "openai", options)
    assert_openai_valid(body)
    assert body["messages"][0]["content"] == "x\n[Attached image/png: shot.png]"
    tools = {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    assert tools == {
        "p": INTERRUPTED_RESULT,
        "old": "[Old tool result content cleared]",
        "big": "b" * 10 + "\n… [omitted 40 chars]",
        "pic": "see\n[Attached image/png: shot.png]",
    }
    omitted = render([], messages, "openai", KEEP_PENDING_OUT)
    assert_openai_valid(omitted)
    assert [c["id"] for c in omitted["messages"][1]["tool_calls"]] == ["old", "big", "pic"]
    only_pending = render([], [_user("x"), _assistant(_call("p", state="running"))], "openai", KEEP_PENDING_OUT)
    assert only_pending["messages"] == [{"role": "user", "content": "x"}]


def test_openai_tool_attachments_become_notes() -> None:
    image = FilePart(mime="image/png", data=PNG, filename="shot.png")
    body = render([], [_assistant(_call("c", output="", attachments=[image]))], "openai")
    assert body["messages"][1]["content"] == "\n[Attached image/png: shot.png]"


# == Round trips ===================================================================================


ANTHROPIC_CONVERSATION: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/b.gif"}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                "title": "spec",
            },
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain notes"}},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me look.", "signature": "EqQBCkYIAxgCIkD=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "text", "text": "Checking two things."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Read",
                "input": {"path": "/a.py", "limit": 5, "deep": {"x": [1, None]}},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "false"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [
                    {"type": "text", "text": "1: import os"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                ],
            },
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "exit 1", "is_error": True},
            {"type": "text", "text": "Also: keep it short."},
        ],
    },
    {"role": "assistant", "content": "Done: é ✓"},
    {"role": "user", "content": "thanks"},
]


def test_anthropic_round_trip_is_exact() -> None:
    batch = parse(ANTHROPIC_CONVERSATION, "anthropic")
    assert batch.results == []
    body = render([SystemPrompt(text="sys")], batch.messages, "anthropic")
    assert body == {"system": [{"type": "text", "text": "sys"}], "messages": ANTHROPIC_CONVERSATION}
    assert_anthropic_valid(body)


OPENAI_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": "Prefer bash."},
    {"role": "user", "content": "Fix it", "name": "dev_1"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "screenshot:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
            {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "r.pdf"}},
        ],
    },
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"ls -la"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "apply_patch", "arguments": "*** Begin Patch"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "tool", "tool_call_id": "call_2", "content": ""},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "call_3", "content": "ok"},
    {"role": "assistant", "content": "Fixed.", "name": "bot"},
]


def test_openai_round_trip_is_exact() -> None:
    batch = parse(OPENAI_CONVERSATION, "openai")
    assert batch.results == []
    body = render(batch.system or [], batch.messages, "openai")
    assert body == {"messages": OPENAI_CONVERSATION}
    assert_openai_valid(body)


def test_cross_format_renders_are_valid() -> None:
    from_openai = parse(OPENAI_CONVERSATION, "openai")
    assert_anthropic_valid(render(from_openai.system or [], from_openai.messages, "anthropic"))
    from_anthropic = parse(ANTHROPIC_CONVERSATION, "anthropic")
    assert_openai_valid(render([], from_anthropic.messages, "openai"))


# == Property tests ================================================================================

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

_texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", " ", "\n", "ok", "line 1\nline 2"]
)
_json_scalars = (
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False, allow_infinity=False) | _texts
)
_json_values = st.recursive(
    _json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3), max_leaves=6
)
_images = st.builds(
    FilePart, mime=st.just("image/png"), data=st.sampled_from([PNG, "AAAA"]), filename=st.none() | st.just("s.png")
)


@st.composite
def _tool_part(draw: st.DrawFn, call_id: str) -> ToolPart:
    state = draw(st.sampled_from(["pending", "running", "completed", "error"]))
    arguments = draw(st.dictionaries(_texts, _json_values, max_size=3))
    fields: dict[str, Any] = {"input": arguments}
    if draw(st.booleans()):
        # As if from OpenAI: kept as text, possibly broken JSON.
        raw = draw(st.sampled_from([json.dumps(arguments), '{"a": ', "*** Begin Patch"]))
        fields = {"raw_arguments": raw, "input": arguments if raw == json.dumps(arguments) else raw}
    if state == "completed":
        fields.update(output=draw(_texts), attachments=draw(st.lists(_images, max_size=1)))
    elif state == "error":
        fields.update(error=draw(_texts))
    if state in ("completed", "error") and draw(st.booleans()):
        fields["compacted_at"] = 1.0
    return ToolPart(call_id=call_id, name=draw(st.sampled_from(["bash", "Read"])), state=state, **fields)


@st.composite
def _conversations(draw: st.DrawFn) -> list[Message]:
    messages = []
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "assistant", "compaction", "summary"]))
        if kind == "user":
            parts = draw(st.lists(st.builds(TextPart, text=_texts) | _images, max_size=3))
            messages.append(Message(role="user", parts=parts, name=draw(st.none() | st.just("alice"))))
        elif kind == "compaction":
            messages.append(Message(role="user", parts=[CompactionPart()]))
        elif kind == "summary":
            messages.append(Message(role="assistant", parts=[TextPart(text=draw(_texts))], summary=True))
        else:
            messages.append(Message(role="assistant", parts=draw(_assistant_parts())))
    return messages


@st.composite
def _assistant_parts(draw: st.DrawFn) -> list[Any]:
    # Ids come from a small pool so some are reused across messages (as SWE-agent does),
    # but never twice within one message.
    ids = draw(st.lists(st.sampled_from(["call_a", "call_b", "call_c", "call_a_2"]), unique=True, max_size=3))
    parts: list[Any] = [draw(_tool_part(call_id)) for call_id in ids]
    extras = (
        st.builds(TextPart, text=_texts)
        | st.builds(ReasoningPart, text=_texts, signature=st.none() | st.just("sig"))
        | st.builds(ReasoningPart, redacted_data=st.just("blob"))
    )
    for extra in draw(st.lists(extras, max_size=3)):
        parts.insert(draw(st.integers(0, len(parts))), extra)
    return parts


_render_options = st.builds(RenderOptions, interrupt_pending=st.booleans(), strip_media=st.booleans())
_systems = st.lists(st.builds(SystemPrompt, role=st.sampled_from(["system", "developer"]), text=_texts), max_size=2)


def _system_of(body: dict[str, Any], batch_system: list[SystemPrompt] | None) -> list[SystemPrompt]:
    if "system" in body:
        return [SystemPrompt(text=block["text"]) for block in body["system"]]
    return batch_system or []


@PROPERTY_SETTINGS
@given(
    system=_systems, messages=_conversations(), options=_render_options, fmt=st.sampled_from(["anthropic", "openai"])
)
def test_render_parse_render_is_stable_and_valid(
    system: list[SystemPrompt], messages: list[Message], options: RenderOptions, fmt: str
) -> None:
    first = render(system, messages, fmt, options)  # type: ignore[arg-type]
    (assert_anthropic_valid if fmt == "anthropic" else assert_openai_valid)(first)
    batch = parse(first["messages"], fmt)  # type: ignore[arg-type]
    assert batch.results == []  # every result's call is in the same body
    second = render(_system_of(first, batch.system), batch.messages, fmt, options)  # type: ignore[arg-type]
    assert second == first


def _attach_to_stored(stored: list[Message], results: list[ToolResult]) -> None:
    """What the caller does with `ParsedBatch.results`: complete the latest open stored call."""
    for result in results:
        for message in reversed(stored):
            open_parts = [
                i
                for i, p in enumerate(message.parts)
                if isinstance(p, ToolPart) and p.call_id == result.call_id and not p.is_finished
            ]
            if open_parts:
                index = open_parts[0]
                message.parts[index] = complete_tool_part(message.parts[index], result)  # type: ignore[arg-type]
                break
        else:
            raise AssertionError(f"no stored call for {result.source}")


@PROPERTY_SETTINGS
@given(messages=_conversations(), fmt=st.sampled_from(["anthropic", "openai"]), data=st.data())
def test_a_body_split_into_two_batches_parses_to_the_same_history(
    messages: list[Message], fmt: str, data: st.DataObject
) -> None:
    body = render([], messages, fmt)  # type: ignore[arg-type]
    wire = body["messages"]
    cut = data.draw(st.integers(0, len(wire)))
    head = parse(wire[:cut], fmt)  # type: ignore[arg-type]
    tail = parse(wire[cut:], fmt)  # type: ignore[arg-type]
    assert head.results == []
    _attach_to_stored(head.messages, tail.results)
    assert render([], head.messages + tail.messages, fmt) == body  # type: ignore[arg-type]


_junk_keys = st.sampled_from(
    [
        "role",
        "content",
        "type",
        "text",
        "tool_calls",
        "tool_call_id",
        "tool_use_id",
        "id",
        "name",
        "input",
        "function",
        "arguments",
        "source",
        "image_url",
        "url",
        "data",
        "media_type",
        "is_error",
        "file",
        "file_data",
    ]
)
_junk_strings = st.sampled_from(
    [
        "user",
        "assistant",
        "tool",
        "system",
        "text",
        "tool_use",
        "tool_result",
        "image",
        "image_url",
        "function",
        "base64",
        "url",
        "document",
        "thinking",
        "file",
        "input_audio",
        "data:image/png;base64,AA",
        "data:x",
        "{}",
    ]
)
_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | _junk_strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_junk_keys, inner, max_size=5),
    max_leaves=25,
)


@PROPERTY_SETTINGS
@given(messages=st.lists(_junk, max_size=4), fmt=st.sampled_from(["anthropic", "openai", "auto"]))
def test_untrusted_input_only_ever_raises_format_error(messages: list[Any], fmt: str) -> None:
    try:
        parse(messages, fmt)  # type: ignore[arg-type]
    except FormatError as error:
        assert error.path.startswith("messages")


def _locations(value: Any, trail: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path inside a JSON value."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    found = []
    for key, child in children:
        found.append((*trail, key))
        found.extend(_locations(child, (*trail, key)))
    return found


def _corrupt(value: Any, trail: tuple[Any, ...], replacement: Any, delete: bool) -> Any:
    """A deep copy of `value` with the item at `trail` replaced (or deleted)."""
    copy = json.loads(json.dumps(value))
    holder = copy
    for key in trail[:-1]:
        holder = holder[key]
    if delete:
        del holder[trail[-1]]
    else:
        holder[trail[-1]] = replacement
    return copy


_CORRUPTIONS: list[tuple[str, Any]] = [
    ("delete", None),
    ("null", None),
    ("number", 7),
    ("bool", True),
    ("string", "x"),
    ("list", []),
    ("object", {}),
]


@pytest.mark.parametrize(("fmt", "messages"), [("anthropic", ANTHROPIC_CONVERSATION), ("openai", OPENAI_CONVERSATION)])
def test_corrupting_any_field_gives_a_format_error_or_a_batch(fmt: str, messages: list[Any]) -> None:
    """Every field of a valid conversation, deleted or replaced by each JSON type in turn."""
    for trail in _locations(messages):
        for kind, replacement in _CORRUPTIONS:
            corrupted = _corrupt(messages, trail, replacement, delete=kind == "delete")
            try:
                parse(corrupted, fmt)  # type: ignore[arg-type]
            except FormatError as error:
                assert error.path.startswith(f"messages[{trail[0]}]") or "already answered" in error.problem, (
                    trail,
                    kind,
                    str(error),
                )


def test_a_developer_message_sent_mid_conversation_stays_in_place() -> None:
    # Codex writes `<model_switch>` as a developer message after the conversation began.
    wire = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "hello"},
        {"role": "developer", "content": "<model_switch>\ncontinue with the new model"},
        {"role": "user", "content": "hello again"},
    ]
    batch = parse(wire, "openai")
    assert [p.text for p in batch.system or []] == ["You are a coding agent."]
    assert render(batch.system or [], batch.messages, "openai")["messages"] == wire
    anthropic = render(batch.system or [], batch.messages, "anthropic")
    assert_anthropic_valid(anthropic)
    assert "<model_switch>" in json.dumps(anthropic["messages"])


# == Corpus ========================================================================================


def _corpus_wire(path: Path) -> list[dict[str, Any]]:
    """A normalized transcript as OpenAI Chat Completions messages."""
    wire = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        role, name = record["role"], record.get("name")
        if role == "user" and name in ("system", "developer"):
            wire.append({"role": name, "content": record["content"]})
            continue
        message: dict[str, Any] = {"role": role, "content": record["content"]}
        if record.get("tool_calls"):
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in record["tool_calls"]
            ]
        if role == "tool":
            message["tool_call_id"] = record["tool_call_id"]
        if name is not None:
            message["name"] = name
        wire.append(message)
    return wire


def _expected_render(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What rendering the parsed transcript must give back (interrupt_pending off).

    The leading system prompts come first; a later system/developer message stays in place; `name`
    on tool messages is not kept (the call carries the tool name); results are listed in call order;
    a call never answered is left out.
    """
    leading = next((i for i, m in enumerate(wire) if m["role"] not in ("system", "developer")), len(wire))
    system, rest = wire[:leading], wire[leading:]
    expected: list[dict[str, Any]] = []
    index = 0
    while index < len(rest):
        message = dict(rest[index])
        index += 1
        if message["role"] == "tool":
            raise AssertionError(f"tool message without a call at {index - 1}")
        if message["role"] != "assistant" or "tool_calls" not in message:
            expected.append(message)
            continue
        results: dict[str, dict[str, Any]] = {}
        while index < len(rest) and rest[index]["role"] == "tool":
            result = {k: v for k, v in rest[index].items() if k != "name"}
            results[result["tool_call_id"]] = result
            index += 1
        answered = [call for call in message["tool_calls"] if call["id"] in results]
        if answered:
            message["tool_calls"] = answered
        else:
            del message["tool_calls"]
        expected.append(message)
        expected.extend(results[call["id"]] for call in answered)
    return system + expected


NORMALIZED = corpus_files("normalized/*.jsonl")


@needs_corpus
def test_corpus_is_present() -> None:
    assert NORMALIZED, "the corpus has no normalized files"


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params(NORMALIZED, id=lambda p: p.stem[:60]))
def test_corpus_round_trip_openai(path: Path) -> None:
    if (defect := misplaced_result(path)) is not None:
        pytest.skip(defect)
    wire = _corpus_wire(path)
    batch = parse(wire, "openai")
    assert batch.results == []
    body = render(batch.system or [], batch.messages, "openai", KEEP_PENDING_OUT)
    assert body["messages"] == _expected_render(wire)
    assert_openai_valid(body)
    assert_openai_valid(render(batch.system or [], batch.messages, "openai"))
    assert_anthropic_valid(render(batch.system or [], batch.messages, "anthropic"))
    assert_anthropic_valid(render(batch.system or [], batch.messages, "anthropic", KEEP_PENDING_OUT))

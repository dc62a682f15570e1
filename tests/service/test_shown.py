"""One definition of what a part shows (`contextfold.formats.shown`): counting, both wire formats and the
summarizer's transcript agree on it, for parts in every state a mark can leave them in."""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import VALID_SUMMARY, message_reply, serve_fake_anthropic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextfold
from contextfold.compaction.transcript import NO_OUTPUT, render_transcript
from contextfold.config import load_settings
from contextfold.domain import FilePart, Message, TextPart, ToolPart
from contextfold.formats import INTERRUPTED_RESULT, render
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import TOOL_OVERHEAD, count_in_view, count_part, counter_for, media_tokens

COUNTERS = [counter_for("gpt-4o"), counter_for("claude-sonnet-4-5")]
PNG = base64.b64encode(
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    + (800).to_bytes(4, "big")
    + (600).to_bytes(4, "big")
    + b"\x08\x02\x00\x00\x00"
).decode()
LOG = "\n".join(f"test_case_{i} PASSED in {i}.01s" for i in range(300))


def _assistant(*parts: ToolPart | TextPart) -> Message:
    return Message(role="assistant", parts=list(parts))


def _tool(**fields: Any) -> ToolPart:
    return ToolPart(
        **{
            "call_id": "c1",
            "name": "bash",
            "input": {"command": "pytest -q"},
            "state": "completed",
            "output": LOG,
            **fields,
        }
    )


def _transcript_result(part: ToolPart) -> str:
    """The lines of the transcript after the call's `[tool result …]` / `[tool error …]` label."""
    lines = render_transcript([_assistant(part)], output_cap=100_000).split("\n")
    label = next(i for i, line in enumerate(lines) if line.startswith(("[tool result ", "[tool error ")))
    return "\n".join(lines[label + 1 :])


def _view_result(part: ToolPart) -> str:
    """The call's result as get_context renders it (OpenAI: the `tool` message's content)."""
    [_, tool_message] = render([], [_assistant(part)], "openai")["messages"]
    return tool_message["content"]


# -- the summarizer reads what the model reads -------------------------------------------------------


@pytest.mark.parametrize(
    "marks",
    [
        {"view_cap": 120},
        {"view_cap": 120, "spill_id": "out_0123456789abcdef"},
        {"view_cap": 0},
        {"view_cap": 50, "state": "error", "output": None, "error": LOG},
        {"view_text": "[Summary of 3 tool calls]\n- bash pytest -q → 300 passed"},
        {"view_text": "(summarized above)", "input_cleared": True},
        {"view_text": "[Summary of 1 tool call]", "compacted_at": 1.0},
    ],
    ids=["cut", "cut-spilled", "cut-to-nothing", "cut-error", "digest", "digest-pointer", "digest-over-prune"],
)
def test_transcript_shows_a_cut_or_digested_output_as_the_view_does(marks: dict[str, Any]) -> None:
    part = _tool(**marks)
    shown = _view_result(part)
    assert shown != part.result_text  # the mark changes what the model sees...
    assert _transcript_result(part) == shown  # ...and the summarizer sees the same
    assert "test_case_299" not in render_transcript([_assistant(part)])


def test_transcript_names_an_attachment_left_out_of_the_view_as_the_view_does() -> None:
    image = FilePart(mime="image/png", data=PNG, filename="screen.png", omitted=True)
    message = Message(role="user", parts=[TextPart(text="What does this show?"), image])
    [wire] = render([], [message], "openai")["messages"]
    note = wire["content"].split("\n")[-1]
    assert "not shown" in note
    assert render_transcript([message]).split("\n")[-1] == note


# -- counting, both renderers and the transcript agree, in every state -----------------------------

_words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_non_blank = st.builds(lambda head, tail: head + tail, st.sampled_from(["ok", "Error:", "中文", "x" * 50]), _words)
_arguments = st.dictionaries(st.sampled_from(["command", "path", "n"]), _words | st.integers(), max_size=3)


@st.composite
def _attachments(draw: st.DrawFn) -> list[FilePart]:
    files = draw(
        st.lists(
            st.builds(
                FilePart,
                mime=st.just("image/png"),
                data=st.sampled_from([PNG, "AAAA"]),
                filename=st.none() | st.just("s.png"),
            ),
            max_size=2,
        )
    )
    # No code path leaves a tool's own attachment out of the view today; if one ever does, it
    # must show (and count) as its note.
    return [f.model_copy(update={"omitted": draw(st.integers(0, 4)) == 0}) for f in files]


@st.composite
def _tool_parts(draw: st.DrawFn) -> ToolPart:
    """A tool part in any state: finished or not; pruned, cut, digested, arguments cleared, or as stored."""
    arguments = draw(_arguments)
    fields: dict[str, Any] = {"call_id": "c1", "name": draw(st.sampled_from(["bash", "Read"])), "input": arguments}
    if draw(st.booleans()):
        raw = draw(st.sampled_from([json.dumps(arguments), '{"a": ']))  # as OpenAI sent it, maybe broken
        fields.update(raw_arguments=raw, input=arguments if raw == json.dumps(arguments) else raw)
    state = draw(st.sampled_from(["completed", "completed", "error", "pending", "running"]))
    fields["state"] = state
    if state in ("pending", "running"):
        return ToolPart(**fields, input_cleared=draw(st.booleans()))
    if state == "completed":
        fields.update(output=draw(_non_blank), attachments=draw(_attachments()))
    else:
        fields.update(error=draw(_non_blank), output=draw(st.none() | _non_blank))
    fields["spill_id"] = draw(st.none() | st.just("out_0123456789abcdef"))
    fields["input_cleared"] = draw(st.booleans())
    fields["compacted_at"] = draw(st.none() | st.just(1.0))
    fields["view_cap"] = draw(st.none() | st.integers(0, 80))
    fields["view_text"] = draw(st.none() | st.sampled_from(["", "(summarized above)", "[Summary of 2 tool calls]"]))
    return ToolPart(**fields)


def _media_cost(block: dict[str, Any], counter: Any) -> int:
    """What an attachment in the rendered tool result costs: an image its estimate, a note its text."""
    if block["type"] == "image":
        return media_tokens(FilePart(mime=block["source"]["media_type"], data=block["source"]["data"]))
    return counter.count(block["text"])


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(part=_tool_parts(), cached=st.booleans())
def test_count_renderers_and_transcript_agree_on_what_a_tool_part_shows(part: ToolPart, cached: bool) -> None:
    anthropic = render([], [_assistant(part)], "anthropic")["messages"]
    openai = render([], [_assistant(part)], "openai")["messages"]
    [use] = [b for b in anthropic[-2]["content"] if b["type"] == "tool_use"]
    [result] = anthropic[-1]["content"]
    call = openai[0]["tool_calls"][0]["function"]
    # The arguments as the model wrote them: the OpenAI wire's string when the call came as text,
    # else the Anthropic wire's object as compact JSON.
    if part.raw_arguments is not None and not part.input_cleared:
        arguments = call["arguments"]
    else:
        arguments = json.dumps(use["input"], ensure_ascii=False, separators=(",", ":"))
    content = result.get("content", "")
    text = content if isinstance(content, str) else content[0]["text"]
    media = [] if isinstance(content, str) else content[1:]
    transcript = _transcript_result(part)

    if not part.is_finished:
        # Sent as interrupted (the APIs reject an unanswered call); the stand-in is not stored, so
        # not counted: the call costs what it holds.
        assert text == INTERRUPTED_RESULT and openai[-1]["content"] == INTERRUPTED_RESULT
        assert transcript == INTERRUPTED_RESULT
        text = part.result_text
    else:
        # OpenAI sends the same text, then a note naming each attachment (tool messages carry
        # text only); the transcript reads exactly so, saying "(no output)" for a blank result.
        tool_message = openai[-1]["content"]
        assert tool_message == text if not media else tool_message.startswith(text + "\n")
        assert transcript == (tool_message if text.strip() else NO_OUTPUT + tool_message[len(text) :])
    for counter in COUNTERS:
        shown = part.model_copy(update={"tokens": count_part(part, counter) if cached else 0})
        expected = (
            TOOL_OVERHEAD
            + counter.count(part.name)
            + counter.count(arguments)
            + counter.count(text)
            + sum(_media_cost(block, counter) for block in media)
        )
        assert count_in_view(shown, counter) == expected


# -- end to end: a compaction's summarizer after the regions strategy ------------------------------


def _call(call_id: str, command: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


@pytest.mark.anyio
async def test_the_summarizer_reads_region_digests_not_the_outputs_they_replaced(tmp_path: Path, monkeypatch) -> None:
    settings_ = load_settings(
        {
            "home": tmp_path,
            "context_window": 24_000,
            "max_output": 2_000,
            "preserve_recent_tokens": 800,
            "regions_keep_recent_tokens": 1_500,
        },
        environ={},
    )
    with serve_fake_anthropic() as fake:
        fake.script(message_reply(VALID_SUMMARY))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        async with await ContextService.open(settings_) as service:
            await service.open_session("s", model="gpt-4o")
            await service.append("s", [{"role": "user", "content": "Find the flaky test."}])
            for i in range(8):
                await service.append(
                    "s",
                    [
                        {
                            "role": "assistant",
                            "content": f"Running step {i}.",
                            "tool_calls": [_call(f"c{i}", f"pytest -k case{i}")],
                        },
                        {
                            "role": "tool",
                            "tool_call_id": f"c{i}",
                            "content": "\n".join(f"step-{i} log line {j} of the run" for j in range(200)),
                        },
                    ],
                )
            await service.compact("s", strategy="regions")
            context = await service.get_context("s", format="openai")
            shown = {m["tool_call_id"]: m["content"] for m in context.messages if m["role"] == "tool"}
            digested = {cid: text for cid, text in shown.items() if f"step-{cid[1:]} log line 100 " not in text}
            assert digested  # the regions strategy replaced some outputs in the view
            # The lines no digest kept (a digest shows the head and tail of each output it replaces).
            left_out = [
                line
                for cid in digested
                for line in (f"step-{cid[1:]} log line {j} of the run" for j in range(200))
                if not any(line in text for text in digested.values())
            ]
            assert left_out
            result = await service.compact("s", summarizer="anthropic")
        assert result.summarizer == "anthropic"
        transcript = fake.last.body["messages"][0]["content"]
        for digest in digested.values():
            assert f"[tool result bash]\n{digest}\n" in transcript
        assert not [line for line in left_out if line in transcript]


# -- no module reaches into another package's private module ---------------------------------------


def _imported_names(path: Path, package: list[str]) -> list[list[str]]:
    """Every dotted name an import in `path` (a module of `package`) reaches, absolute, as parts."""
    names: list[list[str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = [*base, *filter(None, (node.module or "").split("."))]
            names += [module, *([*module, alias.name] for alias in node.names)]
        elif isinstance(node, ast.Import):
            names += [alias.name.split(".") for alias in node.names]
    return names


def test_no_module_imports_a_private_module_of_another_package() -> None:
    root = Path(contextfold.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        package = list(path.relative_to(root.parent).parts[:-1])
        for name in _imported_names(path, package):
            for depth, part in enumerate(name):
                is_private_module = (
                    part.startswith("_")
                    and not part.startswith("__")
                    and (root.joinpath(*name[1 : depth + 1]).with_suffix(".py").exists())
                )
                if is_private_module and package[:depth] != name[:depth]:
                    offenders.append(f"{path.relative_to(root)} imports {'.'.join(name[: depth + 1])}")
    assert offenders == []

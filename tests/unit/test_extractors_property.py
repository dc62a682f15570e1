"""Property tests: any JSON a tool call can carry goes through every extractor and the whole
extractive summarizer without an exception.

Real transcripts hold edit calls with `{}` inputs, `notebook_path` or `path` keys, Windows paths,
string inputs for free-form tools, numbers where strings were expected. Whatever the shape, the
extractors must read what they know and leave the rest unknown. Derandomized, so CI sees the same
examples every run.
"""

from __future__ import annotations

import json
from typing import Any

from _recall import edited_files, instructions  # noqa: E402
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.compaction import outcomes, workingset
from contextfold.compaction.agents import ToolCall, pick
from contextfold.compaction.agents import adapters as registered_adapters
from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.extractive import ExtractiveSummarizer
from contextfold.compaction.facts import extract_facts
from contextfold.compaction.pins import pin_facts
from contextfold.compaction.prose import user_words
from contextfold.compaction.template import missing_sections
from contextfold.domain import Message, TextPart, ToolPart
from contextfold.tokens.counting import counter_for

COUNTER = counter_for("gpt-4o")
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

TOOL_NAMES = [
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "Bash",
    "Read",
    "Grep",
    "Glob",
    "TodoWrite",
    "Task",
    "Skill",
    "apply_patch",
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "exec_command",
    "write_stdin",
    "update_plan",
    "shell",
    "bash",
    "edit",
    "create",
    "insert",
    "open",
    "submit",
    "mcp__acp__Edit",
    "mcp__acp__Bash",
    "PowerShell",
    "execute_bash",
    "AskUserQuestion",
    "ExitPlanMode",
    "Agent",
    "shell_command",
    "mcp__serena__replace_symbol_body",
    "mcp__serena__execute_shell_command",
    "mcp__jetbrains__get_file_text_by_path",
    "mcp__context7__get-library-docs",
    "mcp__playwright__browser_snapshot",
    "unknown_tool",
]
KEYS = [
    "file_path",
    "notebook_path",
    "path",
    "filename",
    "file",
    "command",
    "cmd",
    "content",
    "old_string",
    "new_string",
    "edits",
    "todos",
    "plan",
    "input",
    "patch",
    "paths",
    "session_id",
    "chars",
    "status",
    "relative_path",
    "pathInProject",
    "libraryId",
    "description",
    "subagent_type",
]
PATHS = st.sampled_from(
    [
        "src/a.py",
        "/repo/x.md",
        r"C:\Users\me\My Docs\x.md",
        r"X:\03_ACG\views\lead view.xml",
        "",
        " ",
        "a b/c d.txt",
    ]
)
TEXT = st.one_of(
    PATHS,
    st.text(max_size=40),
    st.sampled_from(
        [
            "*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n*** End Patch",
            "sed -i 's/a/b/' f.py && cat > t.py <<EOF\nx\nEOF",
            "pytest -q tests/test_a.py",
            "Exit code 1\nTraceback (most recent call last):\nValueError: boom",
            "<tool_use_error>File has not been read yet.</tool_use_error>",
            "<returncode>0</returncode>\n<output>ok</output>",
            "Process exited with code 2\nOutput:\nFAILED tests/test_a.py::test_x",
            "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nFAILED tests/test_a.py::test_x",
            '{"stdout": "1 failed", "stderr": "", "return_code": 1}',
            '{"stdout": ' * 3_000 + "1" + "}" * 3_000,  # deeper than the JSON parser goes
            "User has approved your plan. You can now start coding.",
            "# Plan\n\n1. Fix `a.py`\n2. Test it\n",
            "Async agent launched successfully.",
            "https://x.org/a.md#_snippet_1?utm=2 https://",
        ]
    ),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True), TEXT)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=5),
    ),
    max_leaves=12,
)
INPUTS = st.one_of(JSON, st.dictionaries(st.sampled_from(KEYS), JSON, max_size=5))

USER_TEXT = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "<command-name>/review</command-name><command-args>42</command-args>",
            "<command-message>x</command-message>\n<command-name>/x</command-name>",
            "Unknown skill: ralph-loop",
            "<local-command-stdout></local-command-stdout>",
            "<bash-notification><shell-id>1</shell-id></bash-notification>",
            "<system-reminder>remember</system-reminder>fix it",
            "[Request interrupted by user]",
            "繼續簡化，不合理的地方都簡化",
            "Never touch tests/. Always run the linter.",
            "<unclosed",
            "</x>",
        ]
    ),
)


@st.composite
def tool_parts(draw: st.DrawFn) -> ToolPart:
    state = draw(st.sampled_from(["completed", "completed", "error", "pending", "running"]))
    output = draw(st.one_of(st.none(), TEXT))
    return ToolPart(
        call_id=draw(st.sampled_from(["c1", "c2", "c3", "c4"])),  # reused ids, as real sessions have
        name=draw(st.sampled_from(TOOL_NAMES)),
        input=draw(INPUTS),
        state=state,  # type: ignore[arg-type]
        output=output if state != "error" else None,
        error=output if state == "error" else None,
    )


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for seq in range(1, draw(st.integers(1, 8)) + 1):
        if draw(st.booleans()):
            messages.append(Message(role="user", parts=[TextPart(text=draw(USER_TEXT))], seq=seq))
        else:
            text = draw(st.one_of(st.just(""), st.text(max_size=40), st.just("Next steps:\n- fix a.py\n- run tests")))
            parts: list[Any] = [TextPart(text=text)] if text else []
            parts += draw(st.lists(tool_parts(), max_size=3))
            messages.append(Message(role="assistant", parts=parts or [TextPart(text="ok")], seq=seq))
    return messages


@PROPERTY
@given(tool_parts())
def test_every_adapter_reads_any_call_without_an_exception(part: ToolPart) -> None:
    call = ToolCall.of(part)
    for adapter in registered_adapters():
        adapter.plan(call)
        adapter.command(call)
        path = adapter.path(call)
        assert path is None or isinstance(path, str)
        adapter.outcome(part)
    pick(call, registered_adapters())


@PROPERTY
@given(histories())
def test_facts_and_the_summarizer_take_any_history(head: list[Message]) -> None:
    facts = extract_facts(head)
    assert all(isinstance(f.path, str) and f.path.strip() for f in facts.files)
    assert all(
        isinstance(line, str)
        for line, _ in outcomes.outcomes(facts.steps, outcomes.project_root([f.path for f in facts.files]))
    )
    workingset.working_set(head, {f.path for f in facts.edited_files})
    for index, message in enumerate(head):
        user_words(message, previous=head[index - 1] if index else None)
    request = SummaryRequest(head=head, previous=None, counter=COUNTER, budget_tokens=1_500)
    text = ExtractiveSummarizer().summarize_sync(request).text
    assert missing_sections(text) == []
    assert COUNTER.count(text) <= 1_500
    pin_facts(text, head)
    # Updating its own summary with the same history works as well.
    again = (
        ExtractiveSummarizer()
        .summarize_sync(SummaryRequest(head=head, previous=text, counter=COUNTER, budget_tokens=1_500))
        .text
    )
    assert missing_sections(again) == []


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(TOOL_NAMES), INPUTS, st.one_of(st.none(), TEXT)), max_size=4), USER_TEXT)
def test_the_recall_measure_takes_any_call(items: list[tuple[str, Any, Any]], said: str) -> None:
    lines: list[dict[str, Any]] = [{"role": "user", "content": said}]
    for index, (name, arguments, result) in enumerate(items):
        try:
            encoded = json.dumps(arguments)
        except ValueError:
            encoded = str(arguments)
        lines.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"t{index}", "name": name, "arguments": encoded}],
            }
        )
        if result is not None:
            lines.append({"role": "tool", "tool_call_id": f"t{index}", "content": result})
    assert all(isinstance(name, str) for name in edited_files(lines))
    instructions(lines)


def test_a_read_call_with_null_path_arguments_reads_nothing() -> None:
    # Found by the property above: `paths: null` raised TypeError in the default `report`.
    part = ToolPart(call_id="r1", name="Read", input={"file_path": None, "paths": None}, state="completed", output="x")
    head = [Message(role="assistant", parts=[part], seq=1)]
    assert extract_facts(head).files == []

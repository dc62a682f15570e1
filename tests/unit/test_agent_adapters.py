"""Agent adapters: each agent's tool calls are recognized by its own adapter, and a new agent is a
new adapter, not a change to the facts walker.

The recognition tests run over every tool call in the shared corpus of real transcripts (Claude
Code, Codex, SWE-agent, mini-swe-agent, OpenHands); OpenCode, which the corpus lacks, is checked
with calls in the shapes of OpenCode's own tool schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_files, corpus_session, needs_corpus

from contextfold.compaction.agents import (
    AgentAdapter,
    Outcome,
    PlanItem,
    ToolCall,
    adapters,
    pick,
    register,
    unregister,
)
from contextfold.compaction.facts import extract_facts
from contextfold.domain import Message, TextPart, ToolPart

_ids = iter(range(1, 1_000_000))


def call(name: str, input: Any, output: str = "", *, state: str = "completed") -> ToolPart:
    if state == "error":
        return ToolPart(call_id=f"c{next(_ids)}", name=name, input=input, state="error", error=output)
    return ToolPart(call_id=f"c{next(_ids)}", name=name, input=input, state=state, output=output)  # type: ignore[arg-type]


def assistant(*tools: ToolPart, text: str = "") -> Message:
    return Message(role="assistant", parts=[*([TextPart(text=text)] if text else []), *tools])


def adapter(name: str) -> AgentAdapter:
    return next(a for a in adapters() if a.name == name)


def specific() -> list[AgentAdapter]:
    return [a for a in adapters() if a.name != "generic"]


def tool_calls(messages: list[Message]) -> list[ToolCall]:
    return [ToolCall.of(p) for m in messages for p in m.parts if isinstance(p, ToolPart)]


SHARED = {"str_replace_editor": {"SWE-agent", "OpenHands"}}
"""Tools two agents both have, under the same name and shape: either adapter reads them."""


# -- each agent's calls are its own --------------------------------------------------------------

CORPUS_AGENTS = [
    ("claude-code-spotter__*.jsonl", "Claude Code"),
    ("codex-codemie__*.jsonl", "Codex"),
    ("swe-agent__*.jsonl", "SWE-agent"),
    ("mini-swe-agent__*.jsonl", "SWE-agent"),
    ("openhands__*.jsonl", "OpenHands"),
]


@needs_corpus
@pytest.mark.parametrize(("pattern", "agent"), CORPUS_AGENTS, ids=[a for _, a in CORPUS_AGENTS])
def test_every_corpus_call_is_recognized_by_its_agent_only(pattern: str, agent: str) -> None:
    calls = [c for path in corpus_files(f"normalized/{pattern}") for c in tool_calls(corpus_session(path)[1])]
    assert len(calls) > 5, f"the corpus has too few {agent} calls for this test"
    own = adapter(agent)
    for each in calls:
        assert own.recognizes(each), f"{agent} does not recognize its own {each.tool} {sorted(each.args)}"
        others = {a.name for a in specific() if a is not own and a.recognizes(each)}
        assert others <= SHARED.get(each.tool, set()) - {agent}, f"{each.tool} is also claimed by {others}"
        assert pick(each, adapters()).name in {agent, *SHARED.get(each.tool, ())}


def opencode_calls() -> list[ToolPart]:
    """Calls in the shapes of OpenCode's tool schemas (camel-case arguments, a described bash)."""
    patch = "*** Begin Patch\n*** Update File: src/app.ts\n@@\n-a\n+b\n*** End Patch"
    return [
        call("read", {"filePath": "/repo/src/index.ts", "offset": 0, "limit": 200}, "<file>\n00001| x\n</file>"),
        call("edit", {"filePath": "/repo/src/index.ts", "oldString": "a", "newString": "b"}, ""),
        call("write", {"filePath": "/repo/src/new.ts", "content": "export {}\n"}, ""),
        call("bash", {"command": "bun test", "description": "Runs the test suite"}, "3 pass\n 12 passed"),
        call("grep", {"pattern": "TODO", "path": "/repo/src", "include": "*.ts"}, "Found 1 match"),
        call("glob", {"pattern": "**/*.ts", "path": "/repo"}, "/repo/src/index.ts"),
        call("apply_patch", {"patchText": patch}, "Success. Updated the following files:\nM src/app.ts"),
        call(
            "todowrite",
            {"todos": [{"id": "1", "content": "Wire the route", "status": "in_progress", "priority": "high"}]},
        ),
    ]


def test_opencode_calls_are_recognized_by_opencode_only_and_read() -> None:
    parts = opencode_calls()
    own = adapter("OpenCode")
    for each in map(ToolCall.of, parts):
        assert own.recognizes(each), each.tool
        assert not [a.name for a in specific() if a is not own and a.recognizes(each)], each.tool
    facts = extract_facts([Message(role="user", parts=[TextPart(text="Add the route")]), assistant(*parts)])
    assert [f.path for f in facts.edited_files] == ["/repo/src/index.ts", "/repo/src/new.ts", "src/app.ts"]
    assert ("in_progress", "Wire the route") in facts.todos
    assert any(d.startswith("Tests passed: `bun test`") for d in facts.done)


def test_claude_codes_task_tools_change_the_plan_one_task_at_a_time() -> None:
    def create(subject: str, number: int) -> ToolPart:
        return call(
            "TaskCreate", {"subject": subject, "description": "…"}, f"Task #{number} created successfully: {subject}"
        )

    def update(number: int | str, **fields: str) -> ToolPart:
        return call("TaskUpdate", {"taskId": str(number), **fields}, f"Updated task #{number}")

    facts = extract_facts(
        [
            Message(role="user", parts=[TextPart(text="Port the parser and its tests")]),
            assistant(create("Port the lexer", 1), create("Port the parser", 2), create("Port the tests", 3)),
            assistant(create("Write docs", 4), update(1, status="in_progress")),
            assistant(update(1, status="completed"), update(2, status="in_progress")),
            assistant(update(3, subject="Port the parser's tests"), update(4, status="deleted")),
            assistant(update(9, status="completed")),  # a task this history never created
            assistant(
                call("TaskCreate", {"subject": "Refused"}, "<tool_use_error>InputValidationError</tool_use_error>")
            ),
        ]
    )
    assert facts.todos == [
        ("completed", "Port the lexer"),
        ("in_progress", "Port the parser"),
        ("pending", "Port the parser's tests"),
    ]
    for each in ("TaskCreate", "TaskUpdate", "TaskList", "TaskGet"):
        assert pick(ToolCall.of(call(each, {})), adapters()).name == "Claude Code"


def test_claude_codes_powershell_tool_is_its_shell_on_windows() -> None:
    failing = call("PowerShell", {"command": "cd X:/app; pytest -q"}, "Exit code 1\nFAILED tests/test_a.py::test_x")
    claude = pick(ToolCall.of(failing), adapters())
    assert claude.name == "Claude Code" and claude.is_shell(ToolCall.of(failing))
    outcome = claude.outcome(failing)
    assert outcome is not None and outcome.ok is False and outcome.exit_code == 1
    assert pick(ToolCall.of(call("Agent", {"prompt": "look"})), adapters()).name == "Claude Code"


def test_a_shared_tool_reads_the_same_whichever_adapter_reads_it() -> None:
    messages = [
        assistant(call("str_replace_editor", {"command": "view", "path": "/repo/a.py"}, "1\timport os")),
        assistant(
            call(
                "str_replace_editor",
                {"command": "create", "path": "/repo/b.py", "file_text": "x = 1\n"},
                "File created successfully at: /repo/b.py",
            )
        ),
        assistant(
            call(
                "str_replace_editor",
                {"command": "str_replace", "path": "/repo/a.py", "old_str": "os", "new_str": "sys"},
                "ERROR: No replacement was performed, old_str `os` did not appear verbatim in /repo/a.py.",
            )
        ),
    ]
    by_swe = extract_facts(messages, adapters=[adapter("SWE-agent")])
    by_openhands = extract_facts(messages, adapters=[adapter("OpenHands")])
    assert by_swe == by_openhands
    assert [f.path for f in by_swe.edited_files] == ["/repo/b.py"]
    assert by_swe.unresolved_error is not None and "/repo/a.py" in by_swe.unresolved_error.source


def test_unknown_agents_fall_back_to_the_generic_adapter() -> None:
    # Gemini CLI's tools: no adapter of their own.
    parts = [
        call("read_file", {"absolute_path": "/w/src/main.go"}, "package main"),
        call("write_file", {"file_path": "/w/src/util.go", "content": "package main"}, "Successfully wrote"),
        call("run_shell_command", {"command": "go test ./..."}, "ok  \texample.com/w\t0.01s"),
        call("write_todos", {"todos": [{"description": "x", "text": "Port the parser", "status": "pending"}]}),
    ]
    for each in map(ToolCall.of, parts):
        assert not [a.name for a in specific() if a.recognizes(each)], each.tool
        assert pick(each, adapters()).name == "generic"
    facts = extract_facts([assistant(*parts)])
    assert [(f.path, f.action) for f in facts.files] == [("/w/src/util.go", "edited"), ("/w/src/main.go", "read")]
    assert facts.todos == [("pending", "Port the parser")]
    assert facts.done[-1].startswith("Tests passed: `go test ./...`")


# -- tools of MCP servers: named by their servers, read by their words -----------------------------

MCP_FILE_TOOLS = [
    # (tool as Claude Code names it, arguments, what it did to the file)
    (
        "mcp__serena__replace_symbol_body",
        {"name_path": "verify", "relative_path": "src/auth.ts", "body": "x"},
        "edited",
    ),
    (
        "mcp__serena__insert_after_symbol",
        {"name_path": "verify", "relative_path": "src/auth.ts", "body": "x"},
        "edited",
    ),
    (
        "mcp__jetbrains__replace_specific_text",
        {"pathInProject": "src/page.tsx", "oldText": "a", "newText": "b"},
        "edited",
    ),
    ("mcp__jetbrains__create_new_file_with_text", {"pathInProject": "src/new.ts", "text": "x"}, "edited"),
    (
        "mcp__desktop-commander__edit_block",
        {"file_path": "/w/CHANGELOG.md", "old_string": "a", "new_string": "b"},
        "edited",
    ),
    (
        "mcp__github__create_or_update_file",
        {"owner": "o", "repo": "r", "path": "docs/setup.md", "content": "x"},
        "edited",
    ),
    ("mcp__serena__read_file", {"relative_path": "src/lib/db.ts"}, "read"),
    ("mcp__jetbrains__get_file_text_by_path", {"pathInProject": "src/main.ts"}, "read"),
    ("mcp__serena__get_symbols_overview", {"relative_path": "src/lib/user.ts"}, "read"),
    ("mcp__serena__find_symbol", {"name_path": "User", "relative_path": "src/models"}, "read"),
    # Other agents' own tools, by the same words: Cline's, VS Code Copilot's
    ("write_to_file", {"path": "src/cli.ts", "content": "x"}, "edited"),
    ("replace_string_in_file", {"filePath": "/w/src/app.ts", "oldString": "a", "newString": "b"}, "edited"),
    ("list_code_definition_names", {"path": "src/"}, "read"),
]


@pytest.mark.parametrize(("tool", "args", "action"), MCP_FILE_TOOLS, ids=[t for t, _, _ in MCP_FILE_TOOLS])
def test_an_mcp_servers_file_tool_is_read_by_its_words_and_path(tool: str, args: dict[str, Any], action: str) -> None:
    path = next(v for k, v in args.items() if k in ("relative_path", "pathInProject", "file_path", "path", "filePath"))
    facts = extract_facts([assistant(call(tool, args, "OK"))])
    assert [(f.path, f.action) for f in facts.files] == [(path, action)]


def test_an_mcp_tool_whose_words_or_arguments_say_no_file_touches_none() -> None:
    parts = [
        call("mcp__filesystem__create_directory", {"path": "/w/build/out"}, "Created"),  # a folder, no file
        call("mcp__github__create_issue", {"title": "Login fails", "body": "x"}, '{"number": 7}'),  # no path
        call("mcp__serena__write_memory", {"memory_file_name": "notes", "content": "x"}, "ok"),  # no path key
        call("mcp__sentry__get_issue_details", {"issueId": "PROJ-1"}, "..."),  # a read with no path
    ]
    assert extract_facts([assistant(*parts)]).files == []


def test_an_mcp_shell_tool_runs_its_command_and_its_json_result_says_how_it_ended() -> None:
    failing = '{"stdout": "FAILED tests/test_auth.py::test_login - assert 401 == 200", "stderr": "", "return_code": 1}'
    passing = '{"stdout": "3 passed in 0.41s", "return_code": 0, "cwd": "/w"}'
    facts = extract_facts(
        [
            assistant(call("mcp__serena__execute_shell_command", {"command": "pytest tests/test_auth.py"}, failing)),
            assistant(
                call("mcp__desktop-commander__start_process", {"command": "pytest", "timeout_ms": 5000}, passing)
            ),
            assistant(call("run_terminal_cmd", {"command": "pytest -x", "is_background": False}, "1 passed in 0.1s")),
        ]
    )
    assert facts.commands == ["pytest tests/test_auth.py", "pytest", "pytest -x"]  # Cursor's terminal tool too
    assert facts.done[-1].startswith("Tests passed: `pytest -x`")
    assert any("test_login" in e.text for e in facts.errors)
    # A command's JSON is the command's: not read as an exit code unless it is one object with an
    # exit code and an output.
    bash = adapter("Claude Code")
    assert adapter("generic").outcome(call("x", {}, '{"return_code": 1}')) is None
    assert adapter("generic").outcome(call("x", {}, '{"stdout": "x", "return_code": true}')) is None
    assert bash.outcome(call("Bash", {}, '{"stdout": "x", "return_code": 1}')) is None
    nested = '{"stdout": ' * 5_000 + '"x"' + "}" * 5_000  # past the JSON parser's depth: read as text
    assert adapter("generic").outcome(call("mcp__x__run_command", {"command": "x"}, nested)) is None


def test_codexs_shell_command_and_its_exit_code_header_are_read() -> None:
    failing = (
        "Exit code: 1\nWall time: 0.4 seconds\nOutput:\nFAILED tests/test_auth.py::test_login - assert 401 == 200\n"
    )
    passing = "Exit code: 0\nWall time: 1.2 seconds\nTotal output lines: 1\nOutput:\n3 passed in 0.41s\n"
    runs = [
        call("shell_command", {"command": "pytest tests/test_auth.py", "workdir": "/w"}, failing),
        call("shell_command", {"command": "pytest tests/test_auth.py", "workdir": "/w"}, passing),
    ]
    assert {pick(ToolCall.of(p), adapters()).name for p in runs} == {"Codex"}
    outcome = adapter("Codex").outcome(runs[0])
    assert outcome == Outcome(False, 1, "FAILED tests/test_auth.py::test_login - assert 401 == 200\n")
    facts = extract_facts([assistant(runs[0]), assistant(runs[1])])
    assert facts.commands == ["pytest tests/test_auth.py"]  # a rerun, once
    assert facts.done[-1].startswith("Tests passed: `pytest tests/test_auth.py`")
    assert any("test_login" in e.text for e in facts.resolved_errors)


def test_a_task_a_subagent_finished_is_work_done_and_one_it_did_not_finish_is_not() -> None:
    def delegate(name: str, result: str, description: str = "Implement API retries", **more: Any) -> ToolPart:
        args = {"description": description, "prompt": "Add retries to src/api/client.ts", **more}
        return call(name, args, result)

    report = "## Summary\nAdded `withRetry` in `src/api/retry.ts`; `npm test` passes."
    finished = [
        delegate("Task", report, subagent_type="general-purpose"),
        delegate("Agent", report, description="Review the retry change"),
        delegate("task", report, description="Port the parser"),  # OpenCode's
    ]
    unfinished = [
        delegate("Task", "Async agent launched successfully.\nagentId: a2b1218 (internal ID)"),
        delegate("Agent", 'API Error: 503 {"error":{"message":"overloaded"}}'),
        delegate("Task", "[Request interrupted by user for tool use]"),
        delegate("Task", ""),
        call("Task", {"prompt": "no description"}, report),
    ]
    done = [s.text for s in extract_facts([assistant(*finished, *unfinished)]).steps if s.kind == "note"]
    assert done == [
        'Subagent "Implement API retries" finished (general-purpose)',
        'Subagent "Review the retry change" finished',
        'Subagent "Port the parser" finished',
    ], done


def test_a_background_command_ends_where_claude_code_reports_its_exit_code() -> None:
    launched = "Command running in background with ID: {}. Output is being written to: /tmp/claude/w/tasks/{}.output"
    polled_task = (
        "<retrieval_status>success</retrieval_status>\n\n<task_id>bae407b</task_id>\n\n<task_type>local_bash"
        "</task_type>\n\n<status>completed</status>\n\n<exit_code>1</exit_code>\n\n<output>\n"
        "FAILED tests/test_cart.py::test_total - assert 10 == 30\n1 failed, 3 passed in 0.21s\n</output>"
    )
    running = "<status>running</status>\n\n<stdout>\nPASS src/a.test.js\n</stdout>"
    finished = "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\nTests: 4 passed, 4 total\n</stdout>"
    messages = [
        assistant(
            call("Bash", {"command": "pytest -q", "run_in_background": True}, launched.format("bae407b", "bae407b"))
        ),
        assistant(call("Bash", {"command": "npm run dev", "run_in_background": True}, launched.format("b2", "b2"))),
        assistant(
            call(
                "Bash",
                {"command": "npm test", "run_in_background": True},
                "Command running in background with ID: bash_3",
            )
        ),
        assistant(call("TaskOutput", {"task_id": "bae407b", "block": True}, polled_task)),
        assistant(call("BashOutput", {"bash_id": "bash_3"}, running)),
        assistant(call("BashOutput", {"bash_id": "bash_3"}, finished)),
    ]
    facts = extract_facts(messages)
    steps = [(s.kind, s.text, s.ok) for s in facts.steps]
    # The dev server never reported an end: a command that ran, where it started; the tests end
    # where their exit codes came.
    assert steps == [("command", "npm run dev", True), ("test", "pytest -q", False), ("test", "npm test", True)], steps
    assert [e.text for e in facts.errors] == ["FAILED tests/test_cart.py::test_total - assert 10 == 30"]
    assert facts.steps[-1].detail == "Tests: 4 passed, 4 total"
    # Only a poll's result is read as one: a command printing such tags is a command's output.
    assert adapter("Claude Code").outcome(call("Bash", {"command": "cat s.xml"}, "<status>ok</status>")) is None
    # A poll that says it is still running has no outcome yet.
    assert adapter("Claude Code").outcome(call("BashOutput", {"bash_id": "b"}, running)) == Outcome(
        None, None, "PASS src/a.test.js\n"
    )


def test_claude_codes_task_notifications_end_background_commands_and_subagents() -> None:
    def notice(task: str, summary: str, *, status: str = "completed", result: str = "") -> Message:
        body = (
            f"<task-notification>\n<task-id>{task}</task-id>\n<status>{status}</status>\n<summary>{summary}</summary>\n"
        )
        body += f"<result>{result}</result>\n" if result else ""
        return Message(role="user", parts=[TextPart(text=body + "</task-notification>\nRead the output file.")])

    launched = "Command running in background with ID: b1e. Output is being written to: /tmp/claude/w/tasks/b1e.output"
    agent = "Async agent launched successfully.\nagentId: a2b (internal ID)"
    messages = [
        assistant(call("Bash", {"command": "pytest -q", "run_in_background": True}, launched)),
        assistant(call("Task", {"description": "Explore the auth module", "prompt": "Map it"}, agent)),
        notice("b1e", 'Background command "Run the tests" completed (exit code 1)'),
        notice("a2b", 'Agent "Explore the auth module" completed', result="`verifyPassword` in `src/auth.ts`"),
        notice("zzz", 'Agent "Never started here" failed', status="failed"),
    ]
    facts = extract_facts(messages)
    assert [(s.kind, s.text, s.ok) for s in facts.steps if s.kind != "user"] == [
        ("test", "pytest -q", False),
        ("note", 'Subagent "Explore the auth module" finished', True),
    ]
    assert "Never started here" not in " ".join(facts.done)


def test_a_background_subagent_is_done_once_where_a_poll_or_a_notice_says_it_finished() -> None:
    launched = "Async agent launched successfully.\nagentId: a7937d1 (internal ID - do not mention to user.)"
    polled = (
        "<retrieval_status>success</retrieval_status>\n\n<task_id>a7937d1</task_id>\n\n<task_type>local_agent"
        "</task_type>\n\n<status>completed</status>\n\n<output>\nFound `verifyPassword`.\n</output>"
    )
    notice = (
        "<task-notification>\n<task-id>a7937d1</task-id>\n<status>completed</status>\n"
        '<summary>Agent "Explore auth" completed</summary>\n</task-notification>'
    )
    messages = [
        assistant(call("Task", {"description": "Explore auth", "subagent_type": "Explore", "prompt": "x"}, launched)),
        assistant(call("TaskOutput", {"task_id": "a7937d1", "block": True}, polled)),
        Message(role="user", parts=[TextPart(text=notice)]),
    ]
    notes = [s.text for s in extract_facts(messages).steps if s.kind == "note"]
    assert notes == ['Subagent "Explore auth" finished (Explore)'], notes
    # Still running at the cut: not done.
    running = polled.replace("<status>completed</status>", "<status>running</status>")
    messages[1] = assistant(call("TaskOutput", {"task_id": "a7937d1", "block": False}, running))
    assert not [s for s in extract_facts(messages[:2]).steps if s.kind == "note"]


def test_a_known_tool_in_another_spelling_goes_to_the_agent_that_has_it() -> None:
    # No adapter has `READ` or `todowrite` without a list exactly; the ones whose tools they are read them.
    shouting = ToolCall.of(call("READ", {"file_path": "/r/x.py"}))
    assert pick(shouting, adapters()).name == "Claude Code"
    update = ToolCall.of(call("Update_Plan", {"plan": [{"step": "Ship", "status": "completed"}]}))
    assert pick(update, adapters()).name == "Codex"
    assert pick(update, adapters()).plan(update) == [PlanItem("Ship", "completed")]


@needs_corpus
def test_a_transcript_mixing_agents_keeps_every_agents_edits() -> None:
    names = [
        "claude-code-spotter__subagent.jsonl",
        "codex-codemie__*.jsonl",
        "mini-swe-agent__scikit-learn__scikit-learn-9288.jsonl",
        "swe-agent__function_calling_simple.jsonl",
        "openhands__basic_gui_mode.jsonl",
    ]
    paths: list[Path] = [p for name in names for p in corpus_files(f"normalized/{name}")]
    assert len(paths) == len(names)
    alone: list[str] = []
    mixed: list[Message] = []
    for path in paths:
        messages = corpus_session(path)[1]
        edited = [f.path for f in extract_facts(messages).edited_files]
        assert edited, f"{path.name} edits nothing"
        alone += [p for p in edited if p not in alone]
        mixed += messages
    assert [f.path for f in extract_facts(mixed).edited_files] == alone


# -- the plan hook -------------------------------------------------------------------------------


@needs_corpus
def test_plan_tools_report_their_items() -> None:
    codex = [c for p in corpus_files("normalized/codex-codemie__*.jsonl") for c in tool_calls(corpus_session(p)[1])]
    plans = [c for c in codex if c.tool == "update_plan"]
    assert plans
    items = pick(plans[-1], adapters()).plan(plans[-1])
    assert items and {i.status for i in items} <= {"completed", "in_progress", "pending"}
    todo = ToolCall.of(
        call(
            "TodoWrite",
            {
                "todos": [
                    {"content": "Write the test", "status": "completed", "activeForm": "Writing the test"},
                    {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
                ]
            },
        )
    )
    expected = [PlanItem("Write the test", "completed"), PlanItem("Fix the bug", "in_progress")]
    assert adapter("Claude Code").plan(todo) == expected
    # A call that writes no plan says so.
    assert adapter("Claude Code").plan(ToolCall.of(call("Read", {"file_path": "/a"}))) is None


# -- a new agent is a new adapter ----------------------------------------------------------------


class Zed(AgentAdapter):
    """A made-up agent: `zap_file` edits the file in `target`, a failure is reported as
    `[zap failed] why`, and `zap_tasks` holds its task list as `{"name", "done"}` items."""

    name = "Zed (test)"
    edit_tools = frozenset({"zap_file"})
    plan_tools = frozenset({"zap_tasks"})
    path_keys = ("target",)

    def outcome(self, part: ToolPart) -> Outcome | None:
        text = part.result_text
        if text.startswith("[zap failed]"):
            return Outcome(False, None, text.removeprefix("[zap failed]").strip())
        return None

    def plan(self, call: ToolCall) -> list[PlanItem] | None:
        if call.name != "zap_tasks":
            return super().plan(call)
        return [PlanItem(t["name"], "completed" if t["done"] else "pending") for t in call.args.get("tasks", [])]


def zed_session() -> list[Message]:
    return [
        Message(role="user", parts=[TextPart(text="Rename the config loader")]),
        assistant(
            call("zap_file", {"target": "src/config.rs", "diff": "-load\n+read"}, "zapped"),
            call(
                "zap_file",
                {"target": "src/main.rs", "diff": "-load\n+read"},
                "[zap failed] error: src/main.rs is read-only",
            ),
            call(
                "zap_tasks",
                {"tasks": [{"name": "Rename the loader", "done": True}, {"name": "Update callers", "done": False}]},
            ),
        ),
    ]


def test_a_registered_adapter_changes_the_facts_without_touching_the_walker() -> None:
    before = extract_facts(zed_session())
    assert before.files == [] and before.todos == [] and before.errors == []
    zed = register(Zed())
    try:
        with pytest.raises(ValueError, match="registered already"):
            register(Zed())
        after = extract_facts(zed_session())
    finally:
        unregister(zed)
    assert [f.path for f in after.edited_files] == ["src/config.rs"]
    assert after.unresolved_error is not None
    assert after.unresolved_error.text == "error: src/main.rs is read-only"
    assert after.unresolved_error.source == "zap_file `src/main.rs`"
    assert after.todos == [("completed", "Rename the loader"), ("pending", "Update callers")]
    # Passed explicitly instead of registered, it does the same; unregistered, it is gone again.
    assert extract_facts(zed_session(), adapters=[*adapters(), Zed()]) == after
    assert extract_facts(zed_session()) == before

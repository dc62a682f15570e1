"""Facts extraction, the extractive summarizer and pinning: unit tests per agent style, then the corpus.

Unit tests build small conversations by hand in the shapes the real agents produce (Claude Code,
Codex, SWE-agent, OpenHands, mini-swe-agent). The corpus tests summarize every large normalized
transcript and compare, on the three Claude Code sessions that contain a real compaction, what
Claude Code's own summary kept with what ours keeps.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from _corpus_edits import calls, edited
from _histories import stored
from _recall import OPENING_CHARS, own_words  # noqa: E402
from _recall import normalize as recall_normalize  # noqa: E402
from conftest import corpus_files, corpus_params, corpus_session, needs_corpus

from contextfold.compaction.agents import Outcome
from contextfold.compaction.agents.output import suite_verdict
from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.extractive import ExtractiveSummarizer, focus_keywords
from contextfold.compaction.facts import (
    command_key,
    constraint_sentences,
    error_line,
    extract_facts,
    resolves,
    shell_touches,
    suite_invocation,
)
from contextfold.compaction.pins import PinReport, names_file, names_path, pin_facts
from contextfold.compaction.template import (
    BLOCKED,
    CONSTRAINTS,
    CRITICAL,
    DECISIONS,
    DONE,
    FILES,
    GOAL,
    IN_PROGRESS,
    LEFT_OUT,
    NEXT_STEPS,
    SECTIONS,
    Summary,
    missing_sections,
    parse_summary,
)
from contextfold.compaction.userwords import MIN_OPENING_CHARS, is_request, parse_quote, quote_budget
from contextfold.domain import CompactionPart, Message, TextPart, ToolPart
from contextfold.tokens.counting import counter_for

COUNTER = counter_for("gpt-4o")


# -- building conversations -------------------------------------------------------------------------

_ids = iter(range(1, 1_000_000))


def user(text: str, *, synthetic: bool = False, name: str | None = None) -> Message:
    return Message(role="user", name=name, parts=[TextPart(text=text, synthetic=synthetic)])


def call(name: str, input: Any, output: str | None = "", *, state: str = "completed") -> ToolPart:
    if state == "error":
        return ToolPart(call_id=f"c{next(_ids)}", name=name, input=input, state="error", error=output)
    return ToolPart(call_id=f"c{next(_ids)}", name=name, input=input, state=state, output=output)  # type: ignore[arg-type]


def assistant(text: str = "", *tools: ToolPart) -> Message:
    parts: list[Any] = [TextPart(text=text)] if text else []
    return Message(role="assistant", parts=[*parts, *tools])


def request(
    head: list[Message], budget: int = 4_000, previous: str | None = None, focus: str | None = None
) -> SummaryRequest:
    return SummaryRequest(head=head, previous=previous, counter=COUNTER, budget_tokens=budget, instructions=focus)


def summarize(head: list[Message], **kwargs: Any) -> str:
    return ExtractiveSummarizer().summarize_sync(request(head, **kwargs)).text


def headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


EXPECTED_HEADINGS = [GOAL, CONSTRAINTS, "Progress", DONE, IN_PROGRESS, BLOCKED, DECISIONS, NEXT_STEPS, CRITICAL, FILES]


# -- facts: Claude Code --------------------------------------------------------------------------


def claude_code_session() -> list[Message]:
    return [
        user("Fix the timeout handling in the client. Don't touch the public API."),
        assistant(
            "Let me look at the client first.",
            call("Read", {"file_path": "/repo/src/client.py"}, "     1→import time\n"),
            call("Grep", {"pattern": "timeout", "path": "/repo/src"}, "src/client.py:10: timeout = 5"),
        ),
        assistant(
            "Now update the retry loop in client.py to honour the deadline.",
            call(
                "Edit",
                {"file_path": "/repo/src/client.py", "old_string": "a", "new_string": "b"},
                "The file /repo/src/client.py has been updated successfully.",
            ),
        ),
        assistant(
            "",
            call(
                "Edit",
                {"file_path": "/repo/src/missing.py", "old_string": "x", "new_string": "y"},
                "<tool_use_error>String to replace not found in file.</tool_use_error>",
            ),
            call(
                "Write",
                {"file_path": "/repo/tests/test_client.py", "content": "def test(): pass\n"},
                "File created successfully at: /repo/tests/test_client.py",
            ),
        ),
        assistant(
            "",
            call(
                "Bash",
                {"command": "pytest tests/test_client.py -q", "description": "Run the tests"},
                "Exit code 1\n.F\n=== short test summary info ===\nFAILED tests/test_client.py::test_deadline - AssertionError: 5 != 3\n1 failed, 1 passed in 0.10s",
            ),
        ),
    ]


def test_claude_code_files_are_exact_and_edited_first() -> None:
    facts = extract_facts(claude_code_session())
    edited = [f.path for f in facts.files if f.action == "edited"]
    read = [f.path for f in facts.files if f.action == "read"]
    assert edited == ["/repo/src/client.py", "/repo/tests/test_client.py"]
    # A failed edit edited nothing; the file stays on record as touched, and the failure as an error.
    assert "/repo/src/missing.py" in read and "/repo/src" in read
    assert [f.action for f in facts.files] == ["edited"] * len(edited) + ["read"] * len(read)
    client = next(f for f in facts.files if f.path == "/repo/src/client.py")
    assert "Edit" in client.why and "retry loop" in client.why
    assert any("String to replace not found" in e.text for e in facts.errors)


def test_a_call_imported_as_failed_is_quoted_without_the_harness_markup() -> None:
    # An import marks a result the API flagged `is_error` as a failed call; Claude Code wraps its
    # words in `<tool_use_error>`, which the summary must not quote.
    refused = ToolPart(
        call_id="c_refused",
        name="Edit",
        input={"file_path": "/repo/src/app.py", "old_string": "x", "new_string": "y"},
        state="error",
        output="<tool_use_error>String to replace not found in file.\nString: x</tool_use_error>",
    )
    unknown = ToolPart(
        call_id="c_unknown",
        name="AskUserQuestion",
        input={"questions": []},
        state="error",
        output="<tool_use_error>Error: No such tool available: AskUserQuestion</tool_use_error>",
    )
    history = [
        Message(role="user", parts=[TextPart(text="fix it")]),
        Message(role="assistant", parts=[refused, unknown]),
    ]
    facts = extract_facts(history)
    assert [e.text for e in facts.errors] == [
        "String to replace not found in file.",
        "Error: No such tool available: AskUserQuestion",
    ]


def test_an_edit_the_tool_refused_and_a_later_edit_made_is_no_fixed_item() -> None:
    path = "/repo/src/app.py"
    history = [
        user("Rename the handler."),
        assistant(
            "",
            call(
                "Edit",
                {"file_path": path, "old_string": "def handle(", "new_string": "def serve("},
                "<tool_use_error>String to replace not found in file.</tool_use_error>",
            ),
        ),
        assistant(
            "", call("Edit", {"file_path": path, "old_string": "def handle (", "new_string": "def serve("}, "ok")
        ),
        assistant("", call("Bash", {"command": "pytest -q"}, "Exit code 1\nE   ImportError: cannot import name 'x'")),
        assistant("", call("Bash", {"command": "pytest -q"}, "3 passed in 0.1s")),
    ]
    done = parse_summary(summarize(history))[DONE]
    fixed = [bullet for bullet in done if bullet.startswith("Fixed: ")]
    assert len(fixed) == 1 and "ImportError" in fixed[0], done  # the test run's failure, not the retry


def test_a_write_refused_until_the_file_is_read_is_answered_by_reading_it() -> None:
    # Claude Code will not write a file the agent has not read (or not since it changed): reading it
    # meets the condition, and an agent that then leaves the file alone left nothing unresolved.
    path = "/repo/README.md"
    not_read = "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"
    stale = "<tool_use_error>File has been modified since read. Read it again before writing to it.</tool_use_error>"
    read = assistant("", call("Read", {"file_path": path}, "     1\t# App\n     2\tThe app.\n"))
    refused = assistant("", call("Write", {"file_path": path, "content": "# App\n"}, not_read))
    settled = [user("Tidy the readme."), refused, read, assistant("The readme says it already; I'll leave it.")]
    facts = extract_facts(settled)
    assert facts.unresolved_errors == [] and facts.unresolved_error is None
    assert not any(b.startswith("Unresolved: ") for b in parse_summary(summarize(settled))[CRITICAL])
    assert not any(b.startswith("Fixed: ") for b in parse_summary(summarize(settled))[DONE])
    # Until the agent reads it, the refusal stands; a read before it answers nothing.
    assert [e.text for e in extract_facts(settled[:2]).unresolved_errors] == [not_read[16:-17]]
    before = [user("Tidy the readme."), read, assistant("", call("Write", {"file_path": path, "content": "x"}, stale))]
    assert len(extract_facts(before).unresolved_errors) == 1


def test_a_command_the_harness_blocked_and_a_later_run_made_is_no_fixed_item() -> None:
    # Claude Code's guard refuses `sleep N && cmd` without running it; the agent runs `cmd` alone.
    # A retry, not something that went wrong and was fixed; until a run succeeds, it stands.
    guard = "Blocked: sleep 30 followed by: pytest -q. To wait for a condition, use Monitor with an until-loop."
    blocked = ToolPart(
        call_id="c_guard",
        name="Bash",
        input={"command": "sleep 30 && pytest -q"},
        state="error",
        output=f"<tool_use_error>{guard}</tool_use_error>",
    )
    history = [user("Run the tests once the server is up."), Message(role="assistant", parts=[blocked])]
    ran = assistant("", call("Bash", {"command": "pytest -q"}, "3 passed in 0.1s"))
    done = parse_summary(summarize([*history, ran]))[DONE]
    assert not any(bullet.startswith("Fixed: ") for bullet in done), done
    assert [e.text for e in extract_facts(history).unresolved_errors] == [guard]


def test_claude_code_failing_test_is_the_unresolved_error() -> None:
    facts = extract_facts(claude_code_session())
    assert facts.unresolved_error is not None
    assert facts.unresolved_error.text == "FAILED tests/test_client.py::test_deadline - AssertionError: 5 != 3"
    assert "pytest tests/test_client.py -q" in facts.unresolved_error.source
    assert facts.first_instruction == facts.latest_instruction
    assert facts.constraints == ["Don't touch the public API."]
    assert "Edited `/repo/src/client.py`" in facts.done
    assert "Created `/repo/tests/test_client.py`" in facts.done


def test_a_passing_rerun_resolves_the_error() -> None:
    head = claude_code_session() + [
        assistant("", call("Bash", {"command": "cd /repo && pytest tests 2>&1 | tail -3"}, "3 passed in 0.2s")),
    ]
    facts = extract_facts(head)
    assert facts.unresolved_error is not None  # the failed Edit of missing.py was never answered
    assert facts.unresolved_error.source.startswith("Edit")
    assert all("test_deadline" not in e.text for e in facts.unresolved_errors)
    assert any("test_deadline" in e.text for e in facts.resolved_errors)
    assert any(d.startswith("Tests passed: `pytest tests") and "3 passed" in d for d in facts.done)


def test_an_error_the_work_went_on_past_no_longer_blocks_it() -> None:
    failed = "Exit code 1\nError: Browser is already in use for /tmp/profile"
    head = [
        user("check the login page in the browser"),
        assistant(
            "", call("mcp__playwright__browser_navigate", {"url": "http://localhost:3000"}, failed, state="error")
        ),
        assistant("The browser is locked; I'll leave it."),
        user("fine, add a logout button to the header instead"),
        assistant("", call("Edit", {"file_path": "/app/src/Header.tsx", "old_string": "a", "new_string": "b"}, "ok")),
    ]
    # The user spoke after the error, but nothing has run since: a fix in progress looks like this.
    assert extract_facts(head).unresolved_error is not None
    head.append(assistant("", call("Bash", {"command": "ls src"}, "Header.tsx")))  # a look around
    assert extract_facts(head).unresolved_error is not None
    head.append(assistant("", call("Bash", {"command": "npm run build"}, "built in 2.1s")))
    facts = extract_facts(head)
    assert facts.unresolved_error is None  # the work went on: a new request, taken up and built
    assert [e.text for e in facts.unresolved_errors] == ["Error: Browser is already in use for /tmp/profile"]
    summary = parse_summary(summarize(head))
    assert summary[BLOCKED] == [], summary[BLOCKED]
    assert not any("Fixing the failure" in b for b in summary[IN_PROGRESS]), summary[IN_PROGRESS]
    assert any("Browser is already in use" in b for b in summary[CRITICAL]), summary[CRITICAL]

    # Without the user's word in between, the agent is still on it, whatever else it ran.
    alone = [head[0], head[1], head[4], head[6]]
    assert extract_facts(alone).unresolved_error is not None
    # A whole exchange after it moves on too, when nothing runs: asked, changed, asked again.
    exchange = [*head[:5], user("now make it red")]
    assert extract_facts(exchange).unresolved_error is None


def test_todowrite_latest_list_wins_and_completed_items_stay() -> None:
    first = {
        "todos": [
            {"content": "Reproduce the bug", "status": "in_progress", "activeForm": "Reproducing"},
            {"content": "Fix the parser", "status": "pending", "activeForm": "Fixing"},
        ]
    }
    second = {
        "todos": [
            {"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "Write a regression test", "status": "pending", "activeForm": "Writing"},
        ]
    }
    third = {"todos": [{"content": "Reproduce the bug", "status": "completed"}, *second["todos"]]}
    head = [user("go"), assistant("", call("TodoWrite", first, "ok")), assistant("", call("TodoWrite", second, "ok"))]
    assert extract_facts(head).todos == [("in_progress", "Fix the parser"), ("pending", "Write a regression test")]
    head.append(assistant("", call("TodoWrite", third, "ok")))
    head.append(assistant("", call("TodoWrite", second, "ok")))  # a list that leaves the finished item out
    assert extract_facts(head).todos == [
        ("completed", "Reproduce the bug"),
        ("in_progress", "Fix the parser"),
        ("pending", "Write a regression test"),
    ]


# -- facts: Codex ------------------------------------------------------------------------------------

PATCH = """*** Begin Patch
*** Update File: src/agents/config.ts
@@
-  threshold: 0.8,
+  threshold: 0.9,
*** Add File: src/agents/new_helper.ts
+export const x = 1;
*** End Patch
"""


def test_codex_apply_patch_exec_sessions_and_update_plan() -> None:
    head = [
        user("let's set the default threshold to 90"),
        assistant(
            "",
            call(
                "update_plan",
                {
                    "plan": [
                        {"step": "Add a failing test", "status": "in_progress"},
                        {"step": "Change the default", "status": "pending"},
                    ]
                },
                "Plan updated",
            ),
        ),
        assistant(
            "",
            call(
                "apply_patch",
                PATCH,
                '{"output":"Success. Updated the following files:\\nM src/agents/config.ts\\n","metadata":{"exit_code":0,"duration_seconds":0.3}}',
            ),
        ),
        assistant(
            "",
            call(
                "exec_command",
                {"cmd": "npm test -- --run src/agents/config.test.ts", "workdir": "/w"},
                "Chunk ID: a1\nWall time: 1.0 seconds\nProcess running with session ID 4242\nOriginal token count: 0\nOutput:\n",
            ),
        ),
        assistant(
            "",
            call(
                "write_stdin",
                {"session_id": 4242, "chars": ""},
                "Chunk ID: a2\nWall time: 0.0 seconds\nProcess exited with code 1\nOriginal token count: 10\nOutput:\n × sets the default threshold 12ms\n Tests  1 failed (1)\n",
            ),
        ),
        assistant(
            "",
            call(
                "update_plan",
                {
                    "plan": [
                        {"step": "Add a failing test", "status": "completed"},
                        {"step": "Change the default", "status": "in_progress"},
                    ]
                },
                "Plan updated",
            ),
        ),
    ]
    facts = extract_facts(head)
    assert [f.path for f in facts.edited_files] == ["src/agents/config.ts", "src/agents/new_helper.ts"]
    assert facts.commands == ["npm test -- --run src/agents/config.test.ts"]
    assert facts.unresolved_error is not None
    assert facts.unresolved_error.text == "× sets the default threshold 12ms"
    assert facts.todos == [("completed", "Add a failing test"), ("in_progress", "Change the default")]
    # The exit code arrives through write_stdin: a later passing run on another session resolves it.
    head += [
        assistant(
            "",
            call(
                "exec_command",
                {"cmd": "npm test -- --run src/agents/config.test.ts"},
                "Chunk ID: b1\nWall time: 0.2 seconds\nProcess exited with code 0\nOriginal token count: 5\nOutput:\n Tests  1 passed (1)\n",
            ),
        ),
    ]
    facts = extract_facts(head)
    assert facts.unresolved_error is None
    assert any(d.startswith("Tests passed: `npm test") and "1 passed" in d for d in facts.done)


# -- facts: SWE-agent and OpenHands ----------------------------------------------------------------


def test_swe_agent_function_calls_edit_the_open_file() -> None:
    head = [
        user("We're currently solving the following issue within our repository. ISSUE: rounding bug"),
        assistant("", call("create", {"filename": "reproduce.py"}, "[File: reproduce.py (1 lines total)]")),
        assistant(
            "",
            call(
                "edit",
                {"replacement_text": "print(1)", "start_line": 1, "end_line": 1},
                "File updated. Please review the changes.\n[File: /testbed/reproduce.py (1 lines total)]",
            ),
        ),
        assistant(
            "",
            call(
                "open",
                {"path": "src/marshmallow/fields.py", "line_number": 1474},
                "[File: src/marshmallow/fields.py (1997 lines total)]",
            ),
        ),
        assistant(
            "",
            call(
                "edit",
                {"replacement_text": "return int(round(x))", "start_line": 1475, "end_line": 1475},
                "Your proposed edit has introduced new syntax error(s).\n\nERRORS:\n- E999 IndentationError: unexpected indent\n",
            ),
        ),
    ]
    facts = extract_facts(head)
    assert [f.path for f in facts.edited_files] == ["reproduce.py"]
    assert facts.unresolved_error is not None
    assert facts.unresolved_error.text == "- E999 IndentationError: unexpected indent"
    assert "src/marshmallow/fields.py" in facts.unresolved_error.source
    head.append(
        assistant(
            "",
            call(
                "edit",
                {"replacement_text": "        return int(round(x))", "start_line": 1475, "end_line": 1475},
                "File updated.\n[File: /testbed/src/marshmallow/fields.py (1997 lines total)]",
            ),
        )
    )
    facts = extract_facts(head)
    assert [f.path for f in facts.edited_files] == ["reproduce.py", "src/marshmallow/fields.py"]
    assert facts.unresolved_error is None


def test_swe_agent_text_actions_in_a_bash_block() -> None:
    head = [
        user("We're currently solving the following issue within our repository."),
        assistant(
            "",
            call(
                "bash",
                {"command": "create reproduce_bug.py"},
                "[File: reproduce_bug.py (1 lines total)]\n(Open file: /r/reproduce_bug.py)\n(Current directory: /r)\nbash-$",
            ),
        ),
        assistant(
            "",
            call(
                "bash",
                {"command": "python reproduce_bug.py"},
                'Traceback (most recent call last):\n  File "reproduce_bug.py", line 3\nAttributeError: missing PixelRepresentation\n(Open file: /r/reproduce_bug.py)\n(Current directory: /r)\nbash-$',
            ),
        ),
        assistant(
            "", call("bash", {"command": "open pydicom/pixel_data_handlers/numpy_handler.py 293"}, "[File: ...]")
        ),
        assistant(
            "",
            call(
                "bash",
                {"command": "edit 287:295\n    required = []\nend_of_edit"},
                "File updated. Please review the changes.",
            ),
        ),
    ]
    facts = extract_facts(head)
    assert [f.path for f in facts.edited_files] == ["reproduce_bug.py", "pydicom/pixel_data_handlers/numpy_handler.py"]
    assert facts.unresolved_error is not None
    assert facts.unresolved_error.text == "AttributeError: missing PixelRepresentation"
    head.append(
        assistant(
            "",
            call(
                "bash",
                {"command": "python reproduce_bug.py"},
                "Script completed successfully, no errors.\n(Open file: x)\n(Current directory: /r)\nbash-$",
            ),
        )
    )
    assert extract_facts(head).unresolved_error is None


def test_openhands_editor_and_exit_codes() -> None:
    head = [
        user("Please rename game_2048.py to 2048.py"),
        assistant("", call("str_replace_editor", {"command": "view", "path": "/workspace"}, "Here's the files ...")),
        assistant(
            "",
            call(
                "execute_bash",
                {"command": "mv /workspace/game_2048.py /workspace/2048.py"},
                "Command `mv /workspace/game_2048.py /workspace/2048.py` executed with exit code 0.",
            ),
        ),
        assistant(
            "",
            call(
                "str_replace_editor",
                {"command": "create", "path": "/workspace/notes.md", "file_text": "x"},
                "--- /workspace/notes.md\n+++ /workspace/notes.md",
            ),
        ),
        assistant(
            "",
            call(
                "execute_bash",
                {"command": "python3 -m pytest -q"},
                "Command `python3 -m pytest -q` executed with exit code 2.",
            ),
        ),
    ]
    facts = extract_facts(head)
    assert [f.path for f in facts.edited_files] == ["/workspace/notes.md"]
    assert [f.path for f in facts.files if f.action == "read"] == ["/workspace"]
    assert "Ran `mv /workspace/game_2048.py /workspace/2048.py`" in facts.done
    assert facts.unresolved_error is not None and "pytest" in facts.unresolved_error.source


# -- facts: mini-swe-agent shell commands ------------------------------------------------------------


def _obs(code: int, output: str = "") -> str:
    return f"<returncode>{code}</returncode>\n<output>\n{output}</output>"


def test_mini_swe_agent_shell_writes_and_reads() -> None:
    head = [
        user("<pr_description>\nConsider the following PR description: pickled querysets crash\n</pr_description>"),
        assistant(
            "THOUGHT: look", call("bash", {"command": "cat tests/queryset_pickle/models.py"}, _obs(0, "import x\n"))
        ),
        assistant(
            "THOUGHT: I'll add a model",
            call(
                "bash",
                {"command": "cat <<'EOF' >> tests/queryset_pickle/models.py\nclass Toy(models.Model):\n    pass\nEOF"},
                _obs(0),
            ),
        ),
        assistant(
            "", call("bash", {"command": "sed -i '211,213c\\    @query.setter' django/db/models/query.py"}, _obs(0))
        ),
        assistant(
            "",
            call(
                "bash",
                {
                    "command": "echo 'x = 1' > scratch/out.txt 2>/dev/null && nl -ba django/db/models/sql/query.py | sed -n '1,5p'"
                },
                _obs(0, "1 x"),
            ),
        ),
        assistant("", call("bash", {"command": "grep -n 'def set_values' django/db/models/sql/query.py"}, _obs(1))),
        assistant("", call("bash", {"command": "python reproduce.py"}, _obs(0, "ok"))),
        assistant(
            "",
            call(
                "bash",
                {"command": "sed -i 's/a/b/' never_written.py"},
                _obs(2, "sed: can't read never_written.py: No such file"),
            ),
        ),
    ]
    facts = extract_facts(head)
    assert facts.first_instruction == "Consider the following PR description: pickled querysets crash"
    assert [f.path for f in facts.edited_files] == [
        "tests/queryset_pickle/models.py",
        "django/db/models/query.py",
        "scratch/out.txt",
    ]
    read = [f.path for f in facts.files if f.action == "read"]
    assert read == ["django/db/models/sql/query.py", "reproduce.py"]
    # grep finding nothing is not a failure; sed on a missing file is.
    assert [e.source for e in facts.errors] == ["bash `sed -i 's/a/b/' never_written.py`"]
    assert (
        facts.unresolved_error is not None
        and facts.unresolved_error.text == "sed: can't read never_written.py: No such file"
    )


@pytest.mark.parametrize(
    ("command", "edited", "read"),
    [
        ("cat > a/b.py <<EOF\nimport os\nprint(1) > ignored.txt\nEOF", ["a/b.py"], []),
        ("sed -i.bak -e 's/x/y/' -e 's/p/q/' src/m.py", ["src/m.py"], []),
        ("sed -n '10,20p' src/m.py", [], ["src/m.py"]),
        ("printf 'x' | tee -a logs/run.log", ["logs/run.log"], []),
        ("perl -pi -e 's/a/b/' lib/x.pm", ["lib/x.pm"], []),
        ("head -n 5 README.md && tail -f app.log", [], ["README.md", "app.log"]),
        ("rg -n 'TODO' src/pkg docs", [], ["src/pkg"]),
        ("python3 -c 'print(1)' > out.json", ["out.json"], []),
        ("FOO=1 sudo timeout 30 cat data/in.csv", [], ["data/in.csv"]),
        ("ls -la 2> errors.log", [], []),
        ("echo hi > /dev/null", [], []),
        ("cat 'unterminated", [], []),
    ],
)
def test_shell_touches(command: str, edited: list[str], read: list[str]) -> None:
    touches = shell_touches(command)
    assert [t.path for t in touches if t.action == "edited"] == edited
    assert [t.path for t in touches if t.action == "read"] == read


def test_test_invocations_and_resolution_rules() -> None:
    assert suite_invocation("cd /x && mix test test/a_test.exs 2>&1 | tail -5") == ("mix test", ("test/a_test.exs",))
    assert suite_invocation("uv run pytest -k slow tests/unit") == ("pytest", ("tests/unit",))
    assert suite_invocation("npx vitest run src/a.test.ts -t 'Compaction Config'") == ("vitest", ("src/a.test.ts",))
    assert suite_invocation("./tests/runtests.py queryset_pickle.test_reproduce")[0] == "runtests.py"  # type: ignore[index]
    assert suite_invocation("cat testing/pytest.ini") is None
    # Other ecosystems' runners: options before the subcommand, a script that is the program.
    assert suite_invocation("mvn -q test -Dtest=OrderServiceTest") == ("mvn test", ())
    assert suite_invocation("cargo +nightly test") == ("cargo test", ())
    assert suite_invocation("php artisan test --filter UserTest") == ("artisan test", ())
    assert suite_invocation("python3 manage.py test orders") == ("manage.py test", ())
    assert suite_invocation("bin/rails test test/models/user_test.rb") == ("rails test", ("test/models/user_test.rb",))
    assert suite_invocation("npx playwright test e2e/login.spec.ts") == ("playwright test", ("e2e/login.spec.ts",))
    assert suite_invocation("python tests/runtests.py queryset_pickle")[0] == "runtests.py"  # type: ignore[index]
    for command in ("swift test", "flutter test", "./mvnw test", "sbt test", "bazel test //...", "npx cypress run"):
        assert suite_invocation(command) is not None, command
    for command in ("go vet ./...", "python script.py", "node scripts/build.js", "git -C repo status"):
        assert suite_invocation(command) is None, command
    assert command_key("cd /repo && pytest tests 2>&1 | tail -3") == "pytest tests"
    # The same runner over the same tests or more resolves; other tests do not.
    assert resolves("pytest tests/test_a.py::test_x", "pytest tests/test_a.py")
    assert resolves("pytest tests/test_a.py::test_x", "pytest")
    assert not resolves("pytest tests/test_a.py::test_x", "pytest tests/test_b.py")
    assert resolves("./tests/runtests.py queryset_pickle.test_reproduce", "./tests/runtests.py queryset_pickle")
    # A retry of the same action with changed flags resolves; another action does not.
    assert resolves("git push", "git push --set-upstream origin main")
    assert resolves("git add a.css b.ex", "git add -f a.css")
    assert not resolves("npm run build", "npm run lint")
    # A retry that dropped an option and its value resolves, if it keeps the action and a target.
    odoo = "docker exec web odoo -d db -u crm,leads --stop-after-init"
    assert resolves("docker exec web odoo -c /etc/odoo/odoo.conf -d db -u crm,leads --stop-after-init", odoo)
    assert not resolves("docker exec web odoo -d db -u crm,leads", "docker exec db psql -d db")
    assert not resolves("docker exec web odoo -d db", "docker exec")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            'Traceback (most recent call last):\n  File "x.py", line 1\n    1/0\nZeroDivisionError: division by zero\n',
            "ZeroDivisionError: division by zero",
        ),
        (
            "....F\nFAILED tests/test_a.py::test_b - assert 1 == 2\n1 failed, 4 passed",
            "FAILED tests/test_a.py::test_b - assert 1 == 2",
        ),
        (
            "Compiling 2 files\nerror: cannot find value `x` in this scope\n",
            "error: cannot find value `x` in this scope",
        ),
        (
            "  1) test renders rows (MyApp.RowTest)\n     test/row_test.exs:12\n\n5 tests, 1 failure",
            "1) test renders rows (MyApp.RowTest)",
        ),
        (
            "** (Mix) Could not start application\n    ** (EXIT) an exception was raised:\n        ** (BadMapError) expected a map, got: []",
            "** (BadMapError) expected a map, got: []",
        ),
        (
            "Pre-commit validation failed:\n\n[FORMAT] Code is not formatted.",
            "Pre-commit validation failed: [FORMAT] Code is not formatted.",
        ),
        (
            "fatal: The current branch main has no upstream branch.",
            "fatal: The current branch main has no upstream branch.",
        ),
        # A script that says what it does next, then fails: the line saying what failed.
        (
            "IP_ROUTE\ndefault via 10.0.0.1 dev wlan0\n---\nPING\nPING 10.0.0.9 56(84) bytes of data.\n"
            "--- 10.0.0.9 ping statistics ---\n2 packets transmitted, 0 received, 100% packet loss, time 1007ms\n",
            "2 packets transmitted, 0 received, 100% packet loss, time 1007ms",
        ),
        (
            "cc -c main.c\ncc -o app main.o\nmake: *** [Makefile:4: app] Error 1\nlint: 0 errors\n",
            "make: *** [Makefile:4: app] Error 1",
        ),
        ("Checking the cluster\nnode-1 ready\n", "Checking the cluster"),
        ("", "(no output)"),
        # Go: the failing test and what it logged, not the package lines after it.
        (
            "--- FAIL: TestParseAmount (0.00s)\n    parse_test.go:42: got 15, want 1.5\nFAIL\n"
            "FAIL\tgithub.com/ana/ledger/parser\t0.012s\n",
            "--- FAIL: TestParseAmount (0.00s) parse_test.go:42: got 15, want 1.5",
        ),
        # The TypeScript compiler's and MSBuild's place in parentheses: the first error, not the count.
        (
            "src/app/player.ts(12,5): error TS2304: Cannot find name 'rosterId'.\n\nFound 2 errors in 2 files.",
            "src/app/player.ts(12,5): error TS2304: Cannot find name 'rosterId'.",
        ),
        # RSpec's and minitest's first numbered failure with what failed, not the count.
        (
            "Failures:\n\n  1) User#display_name returns the nickname\n     Failure/Error: expect(name).to eq('Bo')\n"
            "\n4 examples, 1 failure",
            "1) User#display_name returns the nickname Failure/Error: expect(name).to eq('Bo')",
        ),
        (
            "  1) Failure:\nUserTest#test_display_name [test/models/user_test.rb:12]:\nExpected: 'Bo'\n"
            "\n3 runs, 3 assertions, 1 failures, 0 errors, 0 skips",
            "1) Failure: UserTest#test_display_name [test/models/user_test.rb:12]:",
        ),
        ("1) Checking config\n2) Building\nError: build failed", "Error: build failed"),
        # The Kotlin compiler's `e:` line, not Gradle's task line before it.
        (
            "> Task :app:compileKotlin FAILED\ne: file:///repo/src/Main.kt:12:5 Unresolved reference: fooBar\n",
            "e: file:///repo/src/Main.kt:12:5 Unresolved reference: fooBar",
        ),
        # A runner's FAIL line is one line: not joined to the next across the line break.
        ("FAIL\nFAIL\tgithub.com/ana/ledger/parser\t0.012s\n", "FAIL github.com/ana/ledger/parser 0.012s"),
    ],
)
def test_error_line(output: str, expected: str) -> None:
    assert error_line(output) == expected


@pytest.mark.parametrize(
    ("output", "passed"),
    [
        ("--- FAIL: TestParse (0.00s)\nFAIL\nFAIL\tgithub.com/a/p\t0.01s\nok  \tgithub.com/a/q\t(cached)", False),
        ("ok  \tgithub.com/a/p\t0.01s\nok  \tgithub.com/a/q\t(cached)", True),
        ("[ERROR] Tests run: 12, Failures: 1, Errors: 0, Skipped: 0\n[INFO] BUILD FAILURE", False),
        ("[INFO] Tests run: 12, Failures: 0, Errors: 0, Skipped: 0\n[INFO] BUILD SUCCESS", True),
        ("> Task :test FAILED\n3 tests completed, 1 failed\nBUILD FAILED in 4s", False),
        ("test result: FAILED. 3 passed; 1 failed; 0 ignored", False),
        ("test result: ok. 4 passed; 0 failed; 0 ignored", True),
        ("Finished in 0.03 seconds\n4 examples, 0 failures", True),  # RSpec
        ("Finished in 0.04 seconds\n4 examples, 1 failure", False),
        ("12 runs, 30 assertions, 0 failures, 0 errors, 0 skips", True),  # minitest
        ("  5 passing (12ms)", True),  # Mocha
        ("  4 passing (12ms)\n  1 failing", False),
        ("Passed!  - Failed:     0, Passed:    12, Skipped:     0, Total:    12", True),  # dotnet test
        ("Failed!  - Failed:     1, Passed:    11, Skipped:     0, Total:    12", False),
        ("Executed 12 tests, with 0 failures (0 unexpected) in 0.5 seconds", True),  # XCTest
        ("  ✔  All specs passed!                        00:12        3        3", True),  # Cypress
        ("  ✖  1 of 3 failed (33%)                      00:12        9        8        1", False),
        ("  py311: OK (12.3 seconds)\n  congratulations :) (12.4 seconds)", True),  # tox
        ("nox > Session tests failed.", False),
    ],
)
def test_a_test_run_without_an_exit_code_is_judged_by_its_runners_words(output: str, passed: bool) -> None:
    # Go, Maven, Gradle, cargo: piped to `tail`, or from a harness that reports no exit code.
    assert suite_verdict(Outcome(None, None, output))[0] is passed


def test_inspection_failures_and_sibling_errors_are_not_blockers() -> None:
    head = [
        user("look around"),
        assistant("", call("Bash", {"command": "ls missing_dir"}, "Exit code 2\nls: cannot access 'missing_dir'")),
        assistant("", call("Bash", {"command": "grep -r foo src 2>/dev/null"}, "Exit code 1\n")),
        assistant(
            "", call("Read", {"file_path": "/a.py"}, "<tool_use_error>Sibling tool call errored</tool_use_error>")
        ),
    ]
    facts = extract_facts(head)
    assert facts.errors == [] and facts.unresolved_error is None


_DECLINED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how "
    "to proceed."
)


def test_a_call_the_user_declined_is_their_decision_not_an_error_to_fix() -> None:
    head = [
        user("Make the header sticky and check it in the browser."),
        assistant("", call("Bash", {"command": "npm run dev"}, _DECLINED, state="error")),
        assistant("", call("Bash", {"command": "npx vitest run src/Header.test.ts"}, _DECLINED, state="error")),
        assistant(
            "",
            call(
                "Edit",
                {"file_path": "/repo/src/Header.css", "old_string": "a", "new_string": "b"},
                _DECLINED[:-1] + ", the user said:\nUse position: sticky, not a scroll listener",
                state="error",
            ),
        ),
        assistant("I'll wait for your go-ahead."),
    ]
    facts = extract_facts(head)
    assert facts.errors == [] and facts.unresolved_error is None
    interrupted = call(
        "Task", {"description": "Explore the API"}, "[Request interrupted by user for tool use]", state="error"
    )
    killed = call(
        "Bash", {"command": "npm run e2e"}, "Exit code 137\n[Request interrupted by user for tool use]", state="error"
    )
    plain = call("Task", {"description": "Audit"}, "Interrupted by user", state="error")  # Claude Code 2.0
    stopped = extract_facts([*head, assistant("", plain), assistant("", interrupted), assistant("", killed)])
    assert stopped.errors == [] and stopped.unresolved_error is None  # stopped by the user: no failure to fix
    assert [d.source for d in stopped.declined] == ["Task", "Task", "Bash `npm run e2e`"], stopped.declined
    assert [(d.source, d.said) for d in facts.declined] == [
        ("Bash `npm run dev`", ""),
        ("Bash `npx vitest run src/Header.test.ts`", ""),
        ("Edit `/repo/src/Header.css`", "Use position: sticky, not a scroll listener"),
    ]
    assert not [f for f in facts.files if f.path.endswith("Header.css")]  # nothing was written, nor read
    assert not [s for s in facts.steps if s.kind == "test"]  # a test run nobody ran did not fail
    summary = parse_summary(summarize(head))
    assert summary[BLOCKED] == [], summary[BLOCKED]  # "(none)"
    assert "STOP what you are doing" not in summarize(head)
    decisions = " ".join(summary[DECISIONS])
    assert "User declined Bash `npm run dev`" in decisions, decisions
    assert (
        'User declined Edit `/repo/src/Header.css` and said: "Use position: sticky, not a scroll listener"' in decisions
    )


def test_a_call_declined_at_codexs_approval_prompt_ran_nothing_and_wrote_nothing() -> None:
    # Codex answers a call the user turned down with these words as the whole result: no exit code,
    # no patch applied. Read as output, the patch's files were "Created" and the commands "ran".
    head = [
        user("let's set the default threshold to 90"),
        assistant("", call("exec_command", {"cmd": "rm -rf build && npm run build"}, "exec command rejected by user")),
        assistant("", call("apply_patch", PATCH, "patch rejected by user")),
        assistant("", call("exec_command", {"cmd": "pytest -q"}, "exec command rejected by user")),
        assistant("", call("exec_command", {"cmd": "npm run dev"}, "aborted by user after 27.2s")),  # Esc
    ]
    facts = extract_facts(head)
    assert facts.errors == [] and facts.edited_files == []
    assert [s.kind for s in facts.steps] == ["user"]  # nothing ran, nothing was written
    assert [d.source for d in facts.declined] == [  # the newest three
        "apply_patch `src/agents/config.ts`",
        "exec_command `pytest -q`",
        "exec_command `npm run dev`",
    ]
    summary = parse_summary(summarize(head))
    assert summary[DONE] == [] and summary[BLOCKED] == [], summary
    assert "User declined apply_patch `src/agents/config.ts`" in summary[DECISIONS], summary[DECISIONS]


# -- facts: user and assistant text ----------------------------------------------------------------


def test_constraints_in_english() -> None:
    text = (
        "Please fix the parser. You must keep the public API stable. Never commit directly to main.\n"
        "Always run the linter before pushing. I prefer small commits. Only touch files under src/.\n"
        "Avoid new dependencies. Make sure the tests pass. Don't rename modules; do not reformat.\n"
        "requests.get is ALWAYS sending content length. It only fails on Linux. I don't know why."
    )
    assert constraint_sentences(text) == [
        "You must keep the public API stable.",
        "Never commit directly to main.",
        "Always run the linter before pushing.",
        "I prefer small commits.",
        "Only touch files under src/.",
        "Avoid new dependencies.",
        "Make sure the tests pass.",
        "Don't rename modules;",
        "do not reformat.",
    ]


def test_constraints_in_chinese() -> None:
    text = "请修复解析器。必须保持公共接口不变。不要修改测试文件！别动配置文件。总是先运行测试。请只修改 src 目录。优先使用标准库。特别是这个函数很慢。它总是报错。这个函数不能处理空值。"
    assert constraint_sentences(text) == [
        "必须保持公共接口不变。",
        "不要修改测试文件！",
        "别动配置文件。",
        "总是先运行测试。",
        "请只修改 src 目录。",
        "优先使用标准库。",
    ]


def test_constraints_ignore_code_and_deduplicate() -> None:
    text = "Never use eval.\n```python\n# you must not see this\n```\nnever use eval."
    assert constraint_sentences(text) == ["Never use eval."]


def test_instructions_skip_injected_and_synthetic_text() -> None:
    head = [
        user("<system-reminder>\nPostToolUse hook: you must not do X\n</system-reminder>"),
        user("Work on the importer. Never drop fields."),
        Message(role="user", parts=[CompactionPart(auto=True)]),
        user("Continue with the task from where you left off.", synthetic=True),
        user("This session is being continued from a previous conversation ...", name="compact_summary"),
        user("[Request interrupted by user]"),
        user("<local-command-caveat>Caveat: ...</local-command-caveat>"),
        user(
            "<command-message>compact</command-message>\n<command-name>/compact</command-name>\n<command-args>and continue with the remaining tasks</command-args>"
        ),
        user("<command-name>/mcp</command-name>\n<command-args></command-args>"),
    ]
    facts = extract_facts(head)
    assert facts.first_instruction == "Work on the importer. Never drop fields."
    assert facts.latest_instruction == "/compact and continue with the remaining tasks"
    assert facts.constraints == ["Never drop fields."]


def test_instructions_are_collapsed_and_bounded() -> None:
    facts = extract_facts([user("do   this\n\n" + "x" * 2_000)])
    assert facts.first_instruction is not None
    assert len(facts.first_instruction) <= 400 and "  " not in facts.first_instruction


def test_decisions_plan_steps_and_latest_assistant_text() -> None:
    head = [
        user("speed up the importer"),
        assistant("I'll use a streaming parser instead of loading the whole file. `x` is a Toy instead of a dict."),
        assistant("So, the fix is:\n- stream"),
        assistant(
            "The fix is to cache the tokenizer per process.\n\nNext steps:\n1. Add a benchmark\n2. Update the README\n"
        ),
    ]
    facts = extract_facts(head)
    assert facts.decisions == [
        "I'll use a streaming parser instead of loading the whole file.",
        "The fix is to cache the tokenizer per process.",
    ]
    assert facts.plan_steps == ["Add a benchmark", "Update the README"]
    assert facts.latest_assistant_text is not None and facts.latest_assistant_text.startswith("The fix is to cache")


def test_facts_are_bounded() -> None:
    head = [user("go " + "must do it. " * 100)]
    for index in range(150):
        head.append(
            assistant(
                "", call("Write", {"file_path": f"/p/gen_{index}.py", "content": ""}, "File created successfully")
            )
        )
        head.append(assistant("", call("Read", {"file_path": f"/p/read_{index}.py"}, "x")))
        head.append(
            assistant(
                "", call("Bash", {"command": f"make step{index}"}, "Exit code 1\nerror: step failed " + "y" * 500)
            )
        )
    facts = extract_facts(head)
    assert len(facts.edited_files) == 60
    assert len([f for f in facts.files if f.action == "read"]) == 20
    assert len(facts.constraints) <= 20 and len(facts.done) <= 50 and len(facts.commands) <= 40
    assert len(facts.errors) <= 30
    assert all(len(e.text) <= 300 for e in facts.errors)


def test_facts_are_fast_on_a_large_history() -> None:
    head = claude_code_session() * 200
    started = time.perf_counter()
    extract_facts(head)
    assert time.perf_counter() - started < 2.0


# -- the extractive summarizer -----------------------------------------------------------------------


def test_every_section_present_in_order_and_filled() -> None:
    head = claude_code_session() + [
        assistant(
            "",
            call(
                "TodoWrite",
                {
                    "todos": [
                        {"content": "Reproduce the timeout", "status": "completed"},
                        {"content": "Fix the deadline check", "status": "in_progress"},
                        {"content": "Add a regression test", "status": "pending"},
                    ]
                },
                "ok",
            ),
        ),
        assistant("I'll use a monotonic clock instead of time.time() for the deadline."),
    ]
    text = summarize(head)
    assert headings(text) == EXPECTED_HEADINGS
    assert missing_sections(text) == []
    summary = parse_summary(text)
    assert summary[GOAL] == ["Fix the timeout handling in the client. Don't touch the public API."]
    # The user's message is quoted whole (issue 16), so the rule in it is not listed again.
    assert summary[CONSTRAINTS] == ["User: Fix the timeout handling in the client. Don't touch the public API."]
    assert "Reproduce the timeout" in summary[DONE]
    # Done groups the edits of one stretch of work by directory (issue 16: outcomes, not a log).
    assert any("edited `client.py` in `/repo/src/`" in b for b in summary[DONE])
    assert summary[IN_PROGRESS][0] == "Fix the deadline check"
    assert summary[BLOCKED] == [
        "FAILED tests/test_client.py::test_deadline - AssertionError: 5 != 3 — Bash `pytest tests/test_client.py -q`"
    ]
    assert summary[DECISIONS] == ["I'll use a monotonic clock instead of time.time() for the deadline."]
    assert summary[NEXT_STEPS] == ["Add a regression test"]
    assert any(b.startswith("Unresolved: String to replace not found") for b in summary[CRITICAL])
    assert "Test command: `pytest tests/test_client.py -q`" in summary[CRITICAL]
    assert summary[FILES][0].startswith("/repo/src/client.py — ")
    assert summary[FILES][1].startswith("/repo/tests/test_client.py — created")
    assert "(none)" not in text


def test_empty_history_gives_the_empty_template() -> None:
    text = summarize([])
    assert headings(text) == EXPECTED_HEADINGS
    assert text.count("- (none)") == len(SECTIONS)


def test_deterministic_and_async() -> None:
    head = claude_code_session()
    first = summarize(head)
    outcome = asyncio.run(ExtractiveSummarizer().summarize(request(head)))
    assert outcome.text == first == summarize(head)
    assert outcome.summarizer == "extractive" and outcome.model is None


def test_latest_request_joins_the_goal() -> None:
    head = claude_code_session() + [user("Also add a retry limit of 3.")]
    summary = parse_summary(summarize(head))
    assert summary[GOAL][1] == "Latest request: Also add a retry limit of 3."


def test_the_tool_the_agent_picks_for_its_next_step_is_no_decision_about_the_work() -> None:
    head = [
        user("The CSV export drops the header row."),
        assistant("Let's use find_file to see where it is. I'll use `sed` to replace the function body."),
        assistant("I'll use a python script to rewrite the file content. I'll use `ed`."),
        assistant("We'll use Redis to cache the rendered rows. I'll use `csv.writer` instead of joining strings."),
    ]
    assert parse_summary(summarize(head))[DECISIONS] == [
        "We'll use Redis to cache the rendered rows.",
        "I'll use `csv.writer` instead of joining strings.",
    ]


def test_each_answer_through_claude_codes_question_tool_is_a_choice_of_its_own() -> None:
    answered = (
        'User has answered your questions: "Replace toasts only for API errors, or for all errors?"="Only API '
        'errors", "Where should errors be intercepted?"="Component level". You can now continue with the '
        "user's answers in mind."
    )
    asked = {"questions": [{"question": "Replace toasts only for API errors, or for all errors?"}]}
    head = [user("Show API errors in a modal."), assistant("", call("AskUserQuestion", asked, answered))]
    decisions = parse_summary(summarize(head))[DECISIONS]
    assert decisions == [
        'User chose "Only API errors" (asked: Replace toasts only for API errors, or for all errors?)',
        'User chose "Component level" (asked: Where should errors be intercepted?)',
    ], decisions
    # Another harness's answer tool, or another form: the whole result, as before.
    other = call("ask_followup_question", {"question": "Which port?"}, "3000")
    assert extract_facts([user("Run it."), assistant("", other)]).choices[0].answer == "3000"


PLAN = """# Plan: rate-limit the public API

## Context
The public API has no limit; one client took it down last week.

## Steps
1. Add a **`RateLimiter`** class in `api/limits.py` (token bucket, 60 requests a minute per key)
2. Wire it into `api/middleware.py` before authentication
   1. a nested detail is no step
3. Return 429 with a `Retry-After` header

```python
1. a numbered line in code is no step
```
"""
APPROVED = (
    "User has approved your plan. You can now start coding. Start with updating your todo list if applicable\n\n"
    "Your plan has been saved to: /home/me/.claude/plans/brisk-rate-limits.md\nYou can refer back to it if needed "
    "during implementation.\n\n## Approved Plan:\n" + PLAN
)


def test_a_plan_the_user_approved_in_claude_codes_plan_mode_is_their_decision_with_its_steps() -> None:
    head = [
        user("Add rate limiting to the public API. Plan it first."),
        assistant("", call("ExitPlanMode", {"plan": PLAN}, APPROVED)),
        assistant("", call("Write", {"file_path": "/srv/api/limits.py", "content": "class RateLimiter: ..."}, "ok")),
    ]
    decisions = parse_summary(summarize(head))[DECISIONS]
    assert decisions == [
        'User approved the plan "Plan: rate-limit the public API": 1. Add a `RateLimiter` class in `api/limits.py` '
        "(token bucket, 60 requests a minute per key); 2. Wire it into `api/middleware.py` before authentication; "
        "3. Return 429 with a `Retry-After` header (saved to /home/me/.claude/plans/brisk-rate-limits.md)"
    ], decisions
    # Turned down: the user's decision the other way, not a plan to follow.
    declined = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
        "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you "
        "how to proceed."
    )
    turned_down = ToolPart(call_id="p1", name="ExitPlanMode", input={"plan": PLAN}, state="error", error=declined)
    refused = [user("Plan the rate limit."), assistant("", turned_down)]
    decisions = parse_summary(summarize(refused))[DECISIONS]
    assert not [d for d in decisions if d.startswith("User approved")], decisions
    assert [d for d in decisions if d.startswith("User declined ExitPlanMode")], decisions
    # A plan without numbered steps is given by its title; an older approved plan gives way to a newer one.
    newer = "# Switch the limiter to Redis\n\nKeep the same limits, store the buckets in Redis."
    head += [assistant("", call("ExitPlanMode", {"plan": newer}, "User has approved your plan. You can now start"))]
    decisions = parse_summary(summarize(head))[DECISIONS]
    assert decisions == ['User approved the plan "Switch the limiter to Redis"'], decisions


def _continued(intent_section: str) -> Message:
    return user(
        "This session is being continued from a previous conversation that ran out of context. The "
        "conversation is summarized below:\nAnalysis:\nThe user kept saying continue.\n\nSummary:\n"
        + intent_section
        + "2. Key Technical Concepts:\n   - gopter property tests\n\n3. Files and Code Sections:\n   - `a.go`\n"
    )


def test_a_session_going_on_from_claude_codes_summary_takes_its_task_from_it() -> None:
    intent = (
        "1. Primary Request and Intent:\n   The user asked to work through the open GitHub issues of the CLI:\n"
        "   1. Finish the user documentation\n   - Fix the DI container deadlock\n\n"
    )
    head = [
        _continued(intent),
        user("continue"),
        assistant("", call("Bash", {"command": "go test ./..."}, "ok")),
    ]
    goal = parse_summary(summarize(head))[GOAL]
    assert goal == [
        "From the earlier conversation's summary: The user asked to work through the open GitHub issues of the "
        "CLI: 1. Finish the user documentation - Fix the DI container deadlock"
    ], goal
    # A request the user makes in the new session is the latest one; the carried task stays first.
    goal = parse_summary(summarize([*head, user("Now start on the plugin architecture issue.")]))[GOAL]
    assert goal[1] == "Latest request: Now start on the plugin architecture issue.", goal
    # Markdown headings too; a summary without the section carries nothing.
    heading = "## 1. Primary Request and Intent\n\nMigrate the store to PostgreSQL.\n\n"
    assert parse_summary(summarize([_continued(heading), user("go on")]))[GOAL] == [
        "From the earlier conversation's summary: Migrate the store to PostgreSQL."
    ]
    assert parse_summary(summarize([_continued(""), user("continue")]))[GOAL] == ["continue"]


# -- anchor updates ----------------------------------------------------------------------------------

PREVIOUS = """## Goal
- Port the importer to streaming
- Latest request: keep memory under 100 MB

## Constraints & Preferences
- Never load a whole file into memory.

## Progress

### Done
- Wrote the streaming reader

### In Progress
- Wire `src/importer.py` to the streaming reader
- Update the changelog entry
- Last step: I was about to wire the reader.

### Blocked
- `pytest tests/test_importer.py` fails: ImportError: cannot import name 'stream'
- `make docs` fails: sphinx missing

## Key Decisions
- Use generators rather than threads.

## Next Steps
- Benchmark with the 2 GB fixture
- Write the migration guide

## Critical Context
- The fixture lives in /data/big.jsonl

## Relevant Files
- src/reader.py — created the streaming reader
- docs/design.md — read for the memory budget
"""


def anchored_head() -> list[Message]:
    return [
        user("Now wire it up and make the tests pass."),
        assistant(
            "",
            call(
                "TodoWrite",
                {
                    "todos": [
                        {"content": "Update the changelog entry", "status": "completed"},
                        {"content": "Benchmark with the 2 GB fixture", "status": "pending"},
                    ]
                },
                "ok",
            ),
        ),
        assistant(
            "Wiring the importer.",
            call(
                "Edit", {"file_path": "src/importer.py", "old_string": "a", "new_string": "b"}, "updated successfully"
            ),
        ),
        assistant("", call("Bash", {"command": "pytest tests/test_importer.py"}, "4 passed in 0.3s")),
        assistant("Importer wired; tests pass."),
    ]


def test_anchor_update_keeps_moves_and_drops() -> None:
    text = summarize(anchored_head(), previous=PREVIOUS)
    summary = parse_summary(text)
    # Still true: kept.
    assert summary[GOAL][:2] == ["Port the importer to streaming", "Earlier request: keep memory under 100 MB"]
    assert summary[GOAL][-1] == "Latest request: Now wire it up and make the tests pass."
    assert summary[CONSTRAINTS] == [
        "User: Now wire it up and make the tests pass.",
        "Never load a whole file into memory.",
    ]
    assert "Use generators rather than threads." in summary[DECISIONS]
    assert "The fixture lives in /data/big.jsonl" in summary[CRITICAL]
    assert any(b.startswith("src/reader.py") for b in summary[FILES])
    assert any(b.startswith("docs/design.md") for b in summary[FILES])
    assert summary[DONE][0] == "Wrote the streaming reader"
    # In Progress items that got done moved to Done: one by its file, one by its todo.
    assert "Wire `src/importer.py` to the streaming reader" in summary[DONE]
    assert "Update the changelog entry" in summary[DONE]
    assert "Wire `src/importer.py` to the streaming reader" not in summary[IN_PROGRESS]
    assert "Update the changelog entry" not in summary[IN_PROGRESS]
    # The stale "Last step" went; the work is at rest (tests pass, nothing left in flight), so
    # In Progress holds nothing rather than the assistant's last words (issue 16).
    assert summary[IN_PROGRESS] == []
    # The resolved blocker went; the other one stays.
    assert summary[BLOCKED] == ["`make docs` fails: sphinx missing"]
    # Next steps: the pending todo (also in the anchor) once, the anchor's other item kept.
    assert summary[NEXT_STEPS] == ["Benchmark with the 2 GB fixture", "Write the migration guide"]
    # New file merged in among the edited ones.
    assert any(b.startswith("src/importer.py — ") for b in summary[FILES])
    assert pin_facts(text, anchored_head(), previous=PREVIOUS) == (text, PinReport([]))


def test_anchor_update_with_nothing_new_keeps_the_anchor() -> None:
    text = summarize([], previous=PREVIOUS)
    assert parse_summary(text).sections == parse_summary(PREVIOUS).sections


def test_anchor_update_replaces_a_read_file_with_its_edit() -> None:
    head = [
        user("edit the design doc"),
        assistant("", call("Edit", {"file_path": "docs/design.md", "old_string": "a", "new_string": "b"}, "ok")),
    ]
    parsed = parse_summary(summarize(head, previous=PREVIOUS))
    files = parsed[FILES]
    assert [b.split(" — ")[0] for b in files] == ["src/reader.py", "docs/design.md"]
    assert "edited" in files[1]


# -- focus ---------------------------------------------------------------------------------------------


def test_focus_keywords() -> None:
    assert focus_keywords("Keep the API design details and the `retry_policy`") == ["api", "design", "retry_policy"]
    assert focus_keywords("请保留缓存策略的细节") == ["缓存策略"]
    assert focus_keywords(None) == []


def test_focus_adds_matching_sentences_and_protects_them() -> None:
    head = claude_code_session() + [
        assistant("The retry_policy uses exponential backoff capped at 30 seconds."),
        assistant("Unrelated musing about the weather."),
    ]
    text = summarize(head, focus="keep the retry_policy details")
    assert "The retry_policy uses exponential backoff capped at 30 seconds." in parse_summary(text)[CRITICAL]
    # Under a budget that forces trimming, the focus sentence outlives ordinary context: at the
    # first budget small enough to cost the test command its line, the focus sentence is still there.
    budget = COUNTER.count(text)
    while "Test command" in (tight := summarize(head, focus="keep the retry_policy details", budget=budget)):
        budget -= 10
    assert COUNTER.count(tight) <= budget
    assert "exponential backoff" in tight
    assert parse_summary(tight)[DONE] == [LEFT_OUT]  # Done went before context


# -- budget --------------------------------------------------------------------------------------------


def big_session() -> list[Message]:
    head = [user("Refactor the storage layer. You must keep the on-disk format. 必须保持向后兼容。")]
    for index in range(40):
        head.append(
            assistant(
                f"I'll use approach {index} for module {index}.",
                call("Read", {"file_path": f"/repo/src/read_only_{index}.py"}, "x"),
                call(
                    "Edit",
                    {"file_path": f"/repo/src/module_{index}.py", "old_string": "a", "new_string": "b"},
                    "updated",
                ),
                call("Bash", {"command": f"make build-{index}"}, "ok"),
            )
        )
    head.append(
        assistant(
            "",
            call(
                "Bash",
                {"command": "pytest tests/storage"},
                "FAILED tests/storage/test_io.py::test_roundtrip - ValueError: bad header\n1 failed",
            ),
        )
    )
    return head


@pytest.mark.parametrize("budget", [400, 900, 1_500, 4_000])
def test_budget_is_respected_with_every_section(budget: int) -> None:
    text = summarize(big_session(), budget=budget)
    assert COUNTER.count(text) <= budget
    assert headings(text) == EXPECTED_HEADINGS


def test_medium_budget_keeps_the_essentials_and_drops_the_least_important_first() -> None:
    head = big_session()
    full = parse_summary(summarize(head, budget=100_000))
    text = summarize(head, budget=900)
    summary = parse_summary(text)
    assert COUNTER.count(text) <= 900
    # Essentials: every edited file, the constraints, the unresolved error, the goal.
    for index in range(40):
        assert names_file(summary, f"/repo/src/module_{index}.py")
    assert summary[CONSTRAINTS] == [
        "User: Refactor the storage layer. You must keep the on-disk format. 必须保持向后兼容。"
    ]
    assert summary[BLOCKED] == full[BLOCKED] and "ValueError: bad header" in summary[BLOCKED][0]
    assert summary[GOAL] == full[GOAL]
    # Oldest Done went first; the newest outcome stays, only its first clause when whole it would
    # cost the working set's names.
    done = [b for b in summary[DONE] if b != LEFT_OUT]
    assert done and done[:-1] == full[DONE][-len(done) : -1]
    newest = full[DONE][-1]
    assert done[-1] != newest and done[-1] == newest.partition("; ")[0] + "; …"
    # Read-only files before decisions, once the account of the work (decisions among it) is
    # within its share of the budget, which its oldest bullets leave first (issue 27).
    kept = summary[DECISIONS]
    assert not any("read_only_" in b for b in summary[FILES]) or (kept and kept == full[DECISIONS][-len(kept) :])
    assert pin_facts(text, head, budget_tokens=1_100) == (text, PinReport([]))


def test_the_newest_outcome_stays_as_its_first_clause_with_its_citation() -> None:
    # Whole, Done's newest bullet would cost the working set's names; in brief it still says what
    # the work achieved and where to read it, where before Done read "left out for room".
    head = stored(big_session())
    full = parse_summary(summarize(head, budget=100_000))[DONE]
    assert len(full) == 1 and full[0].endswith(" [m2–m42]") and "; ran " in full[0]
    assert parse_summary(summarize(head, budget=900))[DONE] == [full[0].partition("; ")[0] + "; … [m2–m42]"]


def test_a_finished_plan_item_does_not_stand_in_for_done_s_newest_outcome() -> None:
    # The plan's finished item stands above the names already; the outcome kept in brief is the
    # newest of Done's own (here the anchor's), not the plan item, which is newer.
    files = "\n".join(f"- /repo/src/storage/module_{i}.py — edited (Edit ×2)" for i in range(40))
    done = "\n".join(
        f"- Edited `module_{i}.py` in `/repo/src/storage/`; ran `make build-{i}` [m{i + 2}]" for i in range(3)
    )
    anchor = f"## {GOAL}\n- Refactor the storage layer\n\n## {DONE}\n{done}\n\n## {FILES}\n{files}\n"
    plan = {"todos": [{"content": "Survey the parser modules", "status": "completed", "activeForm": "Surveying"}]}
    head = [user("Now survey the parser and list what it exports."), assistant("", call("TodoWrite", plan, "ok"))]
    for i in range(40):
        found = "\n".join(f"/repo/src/parser/mod_{i}_{j}.py:3: helper_{i}_{j}(x)" for j in range(4))
        grep = call("Grep", {"pattern": f"parse_fn_{i}", "path": "/repo/src/parser/"}, found)
        head.append(assistant(f"Looking at `parse_fn_{i}` and `ParserState{i}` next.", grep))
    summary = parse_summary(summarize(stored(head), budget=800, previous=anchor))
    assert summary[DONE] == ["Edited `module_2.py` in `/repo/src/storage/`; … [m4]", "Survey the parser modules [m2]"]


def test_a_section_the_budget_emptied_says_so_instead_of_none() -> None:
    # "(none)" under Done would say nothing was done; the edits were many, the room was short.
    head = big_session()
    full = parse_summary(summarize(head, budget=100_000))
    assert full[DONE] and not full[NEXT_STEPS]
    emptied = []
    for budget in (1_500, 1_000, 800, 700):
        text = summarize(head, budget=budget)
        assert COUNTER.count(text) <= budget
        summary = parse_summary(text)
        for name in (DONE, DECISIONS, CRITICAL):
            assert summary[name] and (summary[name] == [LEFT_OUT] or LEFT_OUT not in summary[name]), (budget, name)
            if summary[name] == [LEFT_OUT]:
                emptied.append(name)
        assert summary[NEXT_STEPS] == []  # "(none)": there never were any
    assert DONE in emptied
    # Updated, the summary does not carry the note over as a bullet; a bullet added replaces it.
    anchor = f"## {GOAL}\n- Refactor the storage layer\n\n## {DONE}\n- {LEFT_OUT}\n"
    assert LEFT_OUT not in parse_summary(summarize([user("Now add a changelog entry.")], previous=anchor))[DONE]
    edited = parse_summary(anchor)
    edited.add(DONE, "Moved the writer to a thread")
    assert edited[DONE] == ["Moved the writer to a thread"]


def test_tiny_budget_still_renders_every_section() -> None:
    head = big_session()
    text = summarize(head, budget=120)
    assert headings(text) == EXPECTED_HEADINGS
    assert COUNTER.count(text) <= 120
    # Below the cost of the empty template itself: the empty template (the contract) comes back.
    skeleton = Summary().render()
    assert summarize(head, budget=10) == skeleton


# -- pins ------------------------------------------------------------------------------------------------


def test_pins_add_what_a_summary_left_out() -> None:
    head = claude_code_session() + [user("Also add a retry limit of 3.")]
    llm_summary = "## Goal\n- Fix timeouts\n\n## Relevant Files\n- `src/client.py` — the client\n"
    text, report = pin_facts(llm_summary, head, previous="## Constraints & Preferences\n- Keep Python 3.9 support.\n")
    summary = parse_summary(text)
    assert headings(text) == EXPECTED_HEADINGS
    # `src/client.py` is not the exact path `/repo/src/client.py`: the exact one is added.
    assert any(b.startswith("/repo/src/client.py — ") for b in summary[FILES])
    assert any(b.startswith("/repo/tests/test_client.py — ") for b in summary[FILES])
    # The user's own messages are quoted word for word (issue 16), then the rules no quote holds.
    assert summary[CONSTRAINTS] == [
        "User: Fix the timeout handling in the client. Don't touch the public API.",
        "User: Also add a retry limit of 3.",
        "Keep Python 3.9 support.",
    ]
    assert summary[BLOCKED] == [
        "FAILED tests/test_client.py::test_deadline - AssertionError: 5 != 3 — Bash `pytest tests/test_client.py -q`"
    ]
    # The latest request is quoted in Constraints: Goal does not repeat it.
    assert summary[GOAL] == ["Fix timeouts"]
    assert report.added == [
        "file: /repo/src/client.py",
        "file: /repo/tests/test_client.py",
        "user: " + "Fix the timeout handling in the client. Don't touch the public API."[:60],
        "user: Also add a retry limit of 3.",
        "constraint: Keep Python 3.9 support.",
        "error: FAILED tests/test_client.py::test_deadline - AssertionError: 5 != 3",
    ]


def test_pins_leave_a_complete_summary_unchanged() -> None:
    head = claude_code_session()
    complete = summarize(head)
    assert pin_facts(complete, head) == (complete, PinReport([]))
    # An error quoted in Critical Context (not Blocked) counts too; case and spacing are ignored.
    summary = parse_summary(complete)
    error = summary[BLOCKED].pop()
    summary.add(CRITICAL, "Still failing:  " + error.upper())
    moved = summary.render()
    assert pin_facts(moved, head) == (moved, PinReport([]))


def test_pins_accept_the_instruction_in_next_steps() -> None:
    head = [user("Add a --dry-run flag")]
    text = "## Goal\n- CLI work\n\n## Next Steps\n- Add a --dry-run flag\n"
    pinned, report = pin_facts(text, head)
    assert report.added == [] and parse_summary(pinned)[GOAL] == ["CLI work"]


def test_names_path_is_exact() -> None:
    assert names_path("- src/a.py — edited", "src/a.py")
    assert names_path("`src/a.py`: edited", "src/a.py")
    assert not names_path("src/a.py.bak — backup", "src/a.py")
    assert not names_path("lib/src/a.py — other", "src/a.py")
    assert not names_path("src/a.pyc", "src/a.py")


# -- corpus -----------------------------------------------------------------------------------------------

LARGE = [p for p in corpus_files("normalized/*.jsonl") if p.stat().st_size > 100_000]
CLAUDE_COMPACTED = [
    p
    for p in corpus_files("normalized/claude-code-spotter__*.jsonl")
    if "__agent-" not in p.name
    and any(json.loads(line).get("name") == "compact_summary" for line in p.open(encoding="utf-8"))
]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _expected_edits(records: list[dict[str, Any]]) -> set[str]:
    """Files edited, read off the raw records independently of `facts`: Claude Code edit calls in
    every shape (`_corpus_edits`: unless the result is a tool error), Codex `*** Update/Add File:`
    lines of a successful apply_patch, and mini-swe-agent `sed -i … FILE` / `> FILE` on the first
    line of a command that returned 0."""
    found: set[str] = set()
    for call in calls(records):
        result, args, name = call.result or "", call.args, call.name
        path = edited(call)
        if path is not None:
            found.add(path)
        elif name == "apply_patch" and '"exit_code":0' in result and isinstance(args, str):
            found.update(re.findall(r"^\*\*\* (?:Update|Add) File: (.+)$", args, re.MULTILINE))
        elif name == "bash" and isinstance(args, dict) and result.startswith("<returncode>0<"):
            first = str(args.get("command", "")).split("\n")[0]
            if re.match(r"^sed -i", first) and "&&" not in first and "|" not in first:
                found.add(first.split()[-1])
            target = re.search(r"(?<![0-9&])>>? ?([\w./-]+\.\w+)\s*$", first)
            if target and "<<" in first:
                found.add(target.group(1))
    return found


def _instructions(records: list[dict[str, Any]]) -> list[str]:
    """The openings of the user's own messages, casefolded, in order of their last saying, by the
    recall measure's rules (`benchmarks/_recall.py`: not tool results, prompts, summaries or
    harness text): what every summary must quote, derived from the data, not from the code under
    test. (A summary quotes a message said twice once, where it was said last.)"""
    last: dict[str, int] = {}
    for index in range(len(records)):
        words = own_words(records, index)
        if words is not None:
            opening = words[:OPENING_CHARS].rstrip().casefold()
            last.pop(opening, None)
            last[opening] = index
    return list(last)


def _seen_lines(text: str) -> str:
    """The summary as the measure normalizes it, line by line (a quote cut inside a tag must not
    swallow the lines after it), casefolded."""
    return "\n".join(recall_normalize(line) for line in text.splitlines()).casefold()


def _kept_instructions(openings: list[str], budget_tokens: int) -> list[str]:
    """The openings a summary of `budget_tokens` must hold: all of them when each fits in its
    shortest opening (`MIN_OPENING_CHARS`), else the newest that do (see `userwords`)."""
    room = quote_budget(budget_tokens)
    kept: list[str] = []
    for opening in reversed(openings):
        room -= min(len(opening), MIN_OPENING_CHARS)
        if room < 0:
            break
        kept.append(opening)
    return kept


@needs_corpus
def test_corpus_has_large_transcripts() -> None:
    assert len(LARGE) >= 8
    assert len(CLAUDE_COMPACTED) == 3


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params(LARGE, id=lambda p: p.stem[:60]))
def test_corpus_summary(path: Path) -> None:
    records = _records(path)
    messages = corpus_session(path)[1]
    text = summarize(messages, budget=4_000)
    assert headings(text) == EXPECTED_HEADINGS
    assert COUNTER.count(text) <= 4_000
    summary = parse_summary(text)
    expected = _expected_edits(records)
    missing = [p for p in expected if not names_file(summary, p)]
    assert not missing, f"edited files not named: {missing}"
    # Every instruction of the user's is quoted (its opening, word for word), the latest request
    # (issue 27: not a "yes" or a "continue") also in Goal or Next Steps; no harness text is
    # quoted as theirs.
    openings = _instructions(records)
    seen = _seen_lines(text)
    missing_words = [o for o in _kept_instructions(openings, 4_000) if o not in seen]
    assert not missing_words, f"user instructions not quoted: {missing_words}"
    requests = [o for o in openings if is_request(o)]
    if requests:
        assert requests[-1] in _seen_lines("\n".join(summary[GOAL] + summary[NEXT_STEPS]))
    quoted = [q for b in summary[CONSTRAINTS] if (q := parse_quote(b)) is not None]
    harness = [q.text for q in quoted if not any(_seen_lines(q.text).startswith(o[:40]) for o in openings)]
    assert not harness, f"quoted as the user's but not theirs: {harness}"
    assert summarize(messages, budget=4_000) == text
    assert pin_facts(text, messages, budget_tokens=4_000) == (text, PinReport([]))


def _compacted_head(path: Path) -> tuple[list[Message], str, list[dict[str, Any]]]:
    """The messages Claude Code compacted, its summary of them, and the head's records."""
    records = _records(path)
    cut = next(i for i, r in enumerate(records) if r.get("name") == "compact_summary")
    messages = corpus_session(path)[1]
    boundary = next(i for i, m in enumerate(messages) if m.name == "compact_summary")
    return messages[:boundary], records[cut]["content"], records[:cut]


# What Claude Code's summary of each session says went wrong, as it appears in the compacted
# history (hook output such as Credo warnings never reached the transcript, so it is not listed):
# (text in the head, text our summary must hold).
CLAUDE_ERRORS = {
    "4d5611e5": [],
    "8463c716": [("ignored by one of your .gitignore files", "git add -f priv/static/assets/spotter.css")],
    "ae4a77f8": [
        ("BadMapError", "BadMapError"),
        ("pattern_match", "otel_trace_helpers.ex:58:13:pattern_match"),
    ],
}


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("path", CLAUDE_COMPACTED, ids=[p.stem.split("__")[1][:8] for p in CLAUDE_COMPACTED])
def test_against_claude_code_compaction(path: Path) -> None:
    head, claude_summary, records = _compacted_head(path)
    ours = summarize(head, budget=4_000)
    parsed = parse_summary(ours)
    edited = _expected_edits(records)
    # Files Claude Code's summary names (relative, in backticks or bold) that were edited in the head.
    named = {m.strip("`*") for m in re.findall(r"`[^`\s]+\.\w+`|\*\*`?[^*\s]+\.\w+`?\*\*", claude_summary)}
    kept = {p for p in edited if any(p.endswith("/" + n.lstrip("/")) or p == n for n in named)}
    ours_named = {p for p in kept if names_file(parsed, p)}
    key = path.stem.split("__")[1][:8]
    errors = CLAUDE_ERRORS[key]
    head_text = "\n".join(p.result_text for m in head for p in m.tool_parts)
    visible = [(seen, want) for seen, want in errors if seen in head_text]
    errors_kept = [want for _, want in visible if want in ours]
    print(
        f"\n{key}: Claude Code names {len(kept)} of {len(edited)} edited files, ours names {len(ours_named)} of them "
        f"(and all {len(edited)}); errors it mentions that are visible in the head: {len(visible)}, ours keeps {len(errors_kept)}; "
        f"sizes: claude {COUNTER.count(claude_summary)} tokens, ours {COUNTER.count(ours)}"
    )
    assert kept, "Claude Code's summary should name some edited files"
    assert ours_named == kept
    assert all(names_file(parsed, p) for p in edited)
    assert len(visible) == len(errors) or key == "4d5611e5"
    assert errors_kept == [want for _, want in visible]


CHAINED = sorted(LARGE, key=lambda p: p.stat().st_size)[-3:]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("path", CHAINED, ids=[p.stem[:60] for p in CHAINED])
def test_corpus_chained_compactions_keep_every_edited_file(path: Path) -> None:
    """Three compactions in a row, each updating the previous summary: every file edited in any
    of the heads is still named at the end, and each summary fits and needs no pinning."""
    messages = corpus_session(path)[1]
    size = len(messages) // 3 + 1
    previous: str | None = None
    edited: list[str] = []
    for start in range(0, len(messages), size):
        head = messages[start : start + size]
        text = summarize(head, budget=4_000, previous=previous)
        assert COUNTER.count(text) <= 4_000
        assert headings(text) == EXPECTED_HEADINGS
        assert pin_facts(text, head, previous=previous) == (text, PinReport([]))
        edited += [f.path for f in extract_facts(head).edited_files]
        parsed = parse_summary(text)
        assert all(names_file(parsed, p) for p in edited)
        previous = text

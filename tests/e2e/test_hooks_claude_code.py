"""`contextfold hook claude-code EVENT`, driven with the inputs Claude Code 2.1.197 sends.

Each hook runs as its own process (`python -m contextfold --home H hook claude-code EVENT`), as
Claude Code runs it; what a spill stored is read back through a real `contextfold serve` on the
same home with the MCP SDK's client, as the model would.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _agent_events import ClaudeTranscript, run_hook
from mcp import Client, StdioServerParameters

from contextfold.config import load_settings
from contextfold.service.ingest import PreviewCaps
from contextfold.tokens.counting import counter_for

PERSIST_CUT = 30_000
"""Claude Code cuts a Bash output to this many characters when it saves the whole to disk."""


def bash_event(stdout: str, *, session: str = "s1", **response: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/work/project",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -q", "description": "run the tests"},
        "tool_response": {
            "stdout": stdout,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
            **response,
        },
        "tool_use_id": "toolu_0001",
        "duration_ms": 38,
    }


def mcp_event(response: Any) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/work/project",
        "hook_event_name": "PostToolUse",
        "tool_name": "mcp__bigdata__query",
        "tool_input": {"sql": "select * from events"},
        "tool_response": response,
        "tool_use_id": "toolu_0002",
    }


def tool_results(tmp_path: Path, session: str = "s1") -> tuple[str, Path]:
    """A session's transcript path and the folder Claude Code saves its too-large outputs in:
    `~/.claude/projects/<project>/<session>.jsonl` and `…/<project>/<session>/tool-results/`."""
    project = tmp_path / ".claude" / "projects" / "-work-project"
    folder = project / session / "tool-results"
    folder.mkdir(parents=True, exist_ok=True)
    return str(project / f"{session}.jsonl"), folder


def numbered(n: int, width: int = 40) -> str:
    return "".join(f"row {i:06d} " + "x" * (width - 11) + "\n" for i in range(1, n + 1))


async def read_back(home: Path, output_id: str, **arguments: Any) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "contextfold", "--home", str(home), "serve"], env=environ
    )
    async with Client(params) as client:
        result = await client.call_tool("read_output", {"id": output_id, **arguments})
        assert not result.is_error, result.content
        return result.structured_content


def output_id_in(preview: str) -> str:
    marker = "Full output saved as "
    assert marker in preview, preview[-500:]
    return preview.split(marker, 1)[1].split(" ", 1)[0]


def test_a_small_output_gets_no_answer_and_touches_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = run_hook(home, "claude-code", "PostToolUse", bash_event("3 passed in 0.12s\n"))
    assert (run.code, run.stdout) == (0, ""), run.stderr
    assert not home.exists()  # not even the data home was created


def test_other_tools_get_no_answer(tmp_path: Path) -> None:
    event = bash_event("x")
    event |= {"tool_name": "Edit", "tool_response": {"filePath": "/a.py", "originalFile": numbered(5_000)}}
    run = run_hook(tmp_path / "home", "claude-code", "PostToolUse", event)
    assert (run.code, run.stdout) == (0, "")


@pytest.mark.anyio
async def test_bash_over_the_limits_is_spilled_and_read_back_over_mcp(tmp_path: Path) -> None:
    home = tmp_path / "home"
    text = numbered(3_000)
    run = run_hook(home, "claude-code", "PostToolUse", bash_event(text.rstrip("\n"), stderr=""))
    assert run.code == 0, run.stderr
    specific = run.answer["hookSpecificOutput"]
    assert specific["hookEventName"] == "PostToolUse" and "updatedMCPToolOutput" not in specific
    updated = specific["updatedToolOutput"]
    assert set(updated) == {"stdout", "stderr", "interrupted", "isImage", "noOutputExpected"}  # the tool's own shape
    assert updated["stderr"] == "" and updated["interrupted"] is False
    preview = updated["stdout"]
    assert preview.startswith("row 000001 ") and len(preview.encode()) < 8_000 + 1_024
    assert "read_output(" in preview
    read = await read_back(home, output_id_in(preview), offset=2_999, limit=5)
    assert read["total_lines"] == 3_000
    assert read["text"] == "\n".join(f"{i}\t{line}" for i, line in enumerate(text.splitlines()[2_998:], start=2_999))


@pytest.mark.anyio
async def test_a_bash_output_claude_code_saved_to_disk_is_spilled_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    whole = "".join(f"{i}\n" for i in range(1, 20_001))  # 108,894 bytes: Claude Code persists it
    transcript, folder = tool_results(tmp_path)
    saved = folder / "bleroiqs2.txt"
    saved.write_text(whole)
    event = bash_event(whole[:PERSIST_CUT], persistedOutputPath=str(saved), persistedOutputSize=len(whole))
    event["transcript_path"] = transcript
    run = run_hook(home, "claude-code", "PostToolUse", event)
    updated = run.answer["hookSpecificOutput"]["updatedToolOutput"]
    assert "persistedOutputPath" not in updated and "persistedOutputSize" not in updated  # else Claude Code shows 2 KB
    read = await read_back(home, output_id_in(updated["stdout"]), offset=19_999, limit=5)
    assert read["total_lines"] == 20_000 and read["text"] == "19999\t19999\n20000\t20000"


def test_a_bash_output_within_the_limits_but_saved_to_disk_still_gets_a_real_preview(tmp_path: Path) -> None:
    # 35 KB: over Claude Code's 30,000-character cap, under contextfold's 50 KiB.
    whole = numbered(900)
    transcript, folder = tool_results(tmp_path)
    saved = folder / "saved.txt"
    saved.write_text(whole)
    event = bash_event(whole[:PERSIST_CUT], persistedOutputPath=str(saved)) | {"transcript_path": transcript}
    run = run_hook(tmp_path / "home", "claude-code", "PostToolUse", event)
    stdout = run.answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert stdout.startswith("row 000001") and "read_output(" in stdout


@pytest.mark.anyio
async def test_an_mcp_result_claude_code_replaced_by_an_error_becomes_a_preview(tmp_path: Path) -> None:
    home = tmp_path / "home"
    whole = numbered(4_000, width=50)
    transcript, folder = tool_results(tmp_path)
    saved = folder / "mcp-bigdata-query-1795715818848.txt"
    saved.write_text(whole)
    error = (
        f"Error: result ({len(whole):,} characters across 4,000 lines) exceeds maximum allowed tokens. "
        f"Output has been saved to {saved}.\nFormat: Plain text\nUse offset and limit parameters to read specific "
        "portions of the file, search within it for specific content, and jq to make structured queries.\n"
    )
    run = run_hook(home, "claude-code", "PostToolUse", mcp_event(error) | {"transcript_path": transcript})
    specific = run.answer["hookSpecificOutput"]
    preview = specific["updatedToolOutput"]
    assert isinstance(preview, str) and preview.startswith("row 000001") and "exceeds maximum" not in preview
    assert specific["updatedMCPToolOutput"] == preview  # for Claude Code before 2.1.121
    read = await read_back(home, output_id_in(preview), pattern="^row 003999 ")
    assert read["matches"] == 1 and read["text"].startswith("3999:row 003999 ")


def test_an_mcp_result_under_claude_codes_cap_keeps_its_content_block_shape(tmp_path: Path) -> None:
    whole = numbered(2_500)
    run = run_hook(tmp_path / "home", "claude-code", "PostToolUse", mcp_event([{"type": "text", "text": whole}]))
    updated = run.answer["hookSpecificOutput"]["updatedToolOutput"]
    assert isinstance(updated, list) and len(updated) == 1 and updated[0]["type"] == "text"
    assert updated[0]["text"].startswith("row 000001") and "read_output(" in updated[0]["text"]


def test_an_mcp_result_with_an_image_is_left_alone(tmp_path: Path) -> None:
    response = [{"type": "text", "text": numbered(3_000)}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]
    assert run_hook(tmp_path / "home", "claude-code", "PostToolUse", mcp_event(response)).stdout == ""


def test_a_large_read_keeps_the_read_shape_and_its_line_numbers(tmp_path: Path) -> None:
    content = numbered(3_001)
    event = mcp_event(None) | {
        "tool_name": "Read",
        "tool_input": {"file_path": "/work/project/big.txt"},
        "tool_response": {
            "type": "text",
            "file": {
                "filePath": "/work/project/big.txt",
                "content": content,
                "numLines": 3_001,
                "startLine": 1,
                "totalLines": 3_001,
            },
        },
    }
    run = run_hook(tmp_path / "home", "claude-code", "PostToolUse", event)
    updated = run.answer["hookSpecificOutput"]["updatedToolOutput"]
    file = updated["file"]
    assert updated["type"] == "text" and file["filePath"] == "/work/project/big.txt"
    assert file["startLine"] == 1 and file["totalLines"] == 3_001
    assert file["content"].startswith("row 000001") and file["numLines"] == file["content"].count("\n") + 1
    head = file["content"].split("\n\n…", 1)[0].splitlines()
    assert head == content.splitlines()[: len(head)]  # the head, never a tail: Claude Code numbers the lines


def test_the_preview_is_within_the_limits_so_importing_it_again_spills_nothing(tmp_path: Path) -> None:
    run = run_hook(
        tmp_path / "home", "claude-code", "PostToolUse", bash_event("".join(f"{i}\n" for i in range(50_000)))
    )
    preview = run.answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    settings = load_settings({"home": tmp_path / "home"}, environ={})
    caps = PreviewCaps.of(settings, 200_000, counter_for("claude").count)
    assert caps.truncate(preview, max_lines=settings.max_lines, max_bytes=settings.max_bytes, direction="auto") is None


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1, 2]", b'{"tool_name": "Bash"}', b"\xff\xfe"])
def test_a_bad_event_fails_open_with_one_log_line(tmp_path: Path, payload: bytes) -> None:
    home = tmp_path / "home"
    run = run_hook(home, "claude-code", "PostToolUse" if payload else "PreCompact", payload)
    assert (run.code, run.stdout, run.stderr) == (0, "", "")
    if payload in (b'{"tool_name": "Bash"}',):
        return  # a PostToolUse without a tool output to replace is simply not ours
    lines = (home / "hooks" / "hooks.log").read_text().splitlines()
    assert len(lines) == 1 and " claude-code " in lines[0]


def test_a_spill_that_cannot_be_stored_fails_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "contextfold.db").write_bytes(b"this is not a database" * 100)
    run = run_hook(home, "claude-code", "PostToolUse", bash_event(numbered(3_000)))
    assert (run.code, run.stdout) == (0, "")
    assert "PostToolUse" in (home / "hooks" / "hooks.log").read_text()


# -- compaction ------------------------------------------------------------------------------------


def working_session(tmp_path: Path) -> ClaudeTranscript:
    t = ClaudeTranscript(tmp_path / "session.jsonl", cwd=str(tmp_path / "proj"))
    t.user("Add retries to `fetch_page` in src/client.py. Never retry on a 4xx.")
    t.tool("Read", {"file_path": f"{t.cwd}/src/client.py"}, "def fetch_page(url):\n    return http.get(url)\n")
    t.tool(
        "Edit", {"file_path": f"{t.cwd}/src/client.py", "old_string": "a", "new_string": "b"}, "The file was updated."
    )
    t.tool(
        "Bash", {"command": "pytest -q tests/test_client.py"}, "E   TimeoutError: read timed out\n1 failed, 3 passed"
    )
    t.user("Actually, keep the backoff under 2 seconds in total.")
    t.tool("Write", {"file_path": f"{t.cwd}/src/backoff.py", "content": "MAX = 2\n"}, "File created")
    t.assistant("I'll rerun `test_retry_budget` next.")
    return t


def test_precompact_imports_the_transcript_only_what_is_new_each_time(tmp_path: Path) -> None:
    import asyncio

    from contextfold.service.facade import ContextService

    home = tmp_path / "home"
    t = working_session(tmp_path)
    first = run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    assert (first.code, first.stdout) == (0, ""), first.stderr  # anything printed would become summary instructions
    t.tool("Bash", {"command": "pytest -q"}, "4 passed")
    second = run_hook(
        home, "claude-code", "PreCompact", t.event("PreCompact", trigger="manual", custom_instructions=None)
    )
    assert (second.code, second.stdout) == (0, "")

    async def stored(where: Path, once: bool) -> tuple[int, list[dict[str, Any]]]:
        async with await ContextService.open(load_settings({"home": where}, environ={})) as service:
            if once:
                await service.import_transcript(t.path, session_id="once", format="claude-code")
            session, _ = await service.session_view("once" if once else f"claude-code-{t.session}")
            assert session.metadata.origin == (None if once else "hook:claude-code")  # the inspector's source
            return session.message_count, session.metadata.imports

    count, marks = asyncio.run(stored(home, once=False))
    assert len(marks) == 1 and marks[0]["bytes"] == t.path.stat().st_size  # one mark, moved to the new end
    assert count == asyncio.run(stored(tmp_path / "other", once=True))[0] == 8  # nothing twice, nothing lost
    assert not (home / "hooks" / "hooks.log").exists()


def test_sessionstart_compact_hands_over_files_words_error_and_the_searchable_history(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = working_session(tmp_path)
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    start = run_hook(
        home, "claude-code", "SessionStart", t.event("SessionStart", source="compact", model="claude-opus-4-8")
    )
    assert start.code == 0 and start.answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    text = start.context
    # The edited files, relative to the working directory the heading names.
    assert f"paths not starting with / are under {t.cwd}/):" in text
    assert "\n- src/client.py\n" in text and "\n- src/backoff.py\n" in text
    assert "Add retries to `fetch_page` in src/client.py. Never retry on a 4xx." in text  # word for word
    assert "Actually, keep the backoff under 2 seconds in total." in text
    assert text.index("Actually, keep") < text.index("Add retries")  # newest first
    assert "TimeoutError: read timed out" in text
    assert f'search_history(session_id="claude-code-{t.session}"' in text
    assert counter_for("claude").count(text) <= 2_000


def test_the_handover_gives_no_secret_away_and_the_history_still_finds_it(tmp_path: Path) -> None:
    """Issue 27, item 2: keys the user pasted, a token in a command and a config file printed by a
    tool are in the transcript; the SessionStart handover (the real hook process) holds none."""
    from _secrets import leaks, seeded_secrets

    seeded = seeded_secrets(9)
    home = tmp_path / "home"
    t = ClaudeTranscript(tmp_path / "session.jsonl", cwd=str(tmp_path / "proj"))
    t.user("Deploy to staging and fix the health check.\n" + "\n".join(s.text for s in seeded if s.where == "user"))
    t.tool("Bash", {"command": " && ".join(s.text for s in seeded if s.where == "command")}, "ok")
    t.tool("Read", {"file_path": f"{t.cwd}/.env"}, "\n\n".join(s.text for s in seeded if s.where == "output"))
    t.tool("Edit", {"file_path": f"{t.cwd}/deploy.sh", "old_string": "a", "new_string": "b"}, "The file was updated.")
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact")).context
    assert text and "Deploy to staging and fix the health check." in text and "\n- deploy.sh\n" in text
    assert not leaks(text, seeded), leaks(text, seeded)


def test_other_session_starts_get_nothing(tmp_path: Path) -> None:
    t = working_session(tmp_path)
    for source in ("startup", "resume", "clear"):
        run = run_hook(tmp_path / "home", "claude-code", "SessionStart", t.event("SessionStart", source=source))
        assert (run.code, run.stdout) == (0, "")


def test_the_handover_is_bounded_by_hook_context_tokens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = working_session(tmp_path)
    for i in range(40):
        t.tool(
            "Edit",
            {
                "file_path": f"{t.cwd}/src/module_{i:02d}/implementation_file_{i}.py",
                "old_string": "a",
                "new_string": "b",
            },
            "ok",
        )
    t.user("Please also " + "check everything twice and be careful. " * 200)
    env = {"CONTEXTFOLD_HOOK_CONTEXT_TOKENS": "500"}
    run_hook(
        home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None), env=env
    )
    text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact"), env=env).context
    assert counter_for("claude").count(text) <= 500
    assert "search_history(" in text and "/implementation_file_39.py" in text  # the newest edit stays


def test_postcompact_keeps_what_the_summary_lacked_for_the_next_prompt_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = working_session(tmp_path)
    # Enough names that the first handover cannot hold them all; words, not a numbered run (the
    # working set folds a run into one entry).
    verbs = "parse load render store fetch check merge split index route track queue".split()
    nouns = "invoice order cart user token".split()
    for i, (noun, verb) in enumerate((n, v) for n in nouns for v in verbs):
        t.tool(
            "Bash",
            {"command": f"grep -rn handler_{verb}_{noun} src/"},
            f"src/{noun}/{verb}_{noun}s.py:{i}: def handler_{verb}_{noun}(): pass",
        )
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    env = {"CONTEXTFOLD_HOOK_CONTEXT_TOKENS": "1000"}  # SessionStart gets four fifths of it
    first = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact"), env=env).context
    summary = f"Working on retries in {t.cwd}/src/client.py; the tests fail with a TimeoutError."
    post = run_hook(
        home, "claude-code", "PostCompact", t.event("PostCompact", trigger="auto", compact_summary=summary), env=env
    )
    assert (post.code, post.stdout) == (0, "")  # PostCompact takes no context
    later = run_hook(home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="go on")).context
    assert later and later != first
    assert f"- {t.cwd}/src/client.py\n" not in later  # the summary names it
    given = {line for line in first.splitlines() if line.startswith("- ") and "handler_" in line}
    assert not any(line in later for line in given)  # nothing the first handover gave
    again = run_hook(home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="and now?"))
    assert (again.code, again.stdout) == (0, "")  # delivered once


def test_postcompact_takes_the_ranking_sessionstart_made_of_the_same_history_only(tmp_path: Path) -> None:
    # Ranking the working set is most of a handover's time: the second look at a compaction takes
    # the first one's, and only for the history it ranked.
    t = working_session(tmp_path)
    verbs = "parse load render store fetch check merge split index route track queue".split()
    for i, (noun, verb) in enumerate((n, v) for n in "invoice order cart user token".split() for v in verbs):
        t.tool(
            "Bash", {"command": f"grep -rn {verb}_{noun} src/"}, f"src/{noun}/{verb}.py:{i}: def {verb}_{noun}(): ..."
        )
    env = {"CONTEXTFOLD_HOOK_CONTEXT_TOKENS": "1000"}
    summary = f"Working on retries in {t.cwd}/src/client.py."

    def compaction(home: Path, ranking: Callable[[Path], None] | None = None) -> str | None:
        run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
        run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact"), env=env)
        files = list((home / "hooks" / "sessions").glob("*.ranking"))
        assert len(files) == 1
        if ranking is not None:
            ranking(files[0])
        event = t.event("PostCompact", trigger="auto", compact_summary=summary)
        run_hook(home, "claude-code", "PostCompact", event, env=env)
        return run_hook(home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="go on")).context

    def planted(history: str | None) -> Callable[[Path], None]:
        def plant(path: Path) -> None:
            kept = json.loads(path.read_text("utf-8"))
            ranked = [["planted_marker_name", "name"], *kept["ranked"]]
            path.write_text(json.dumps({"history": history or kept["history"], "ranked": ranked}), "utf-8")

        return plant

    taken = compaction(tmp_path / "a")
    assert taken and "_invoice" in taken
    assert compaction(tmp_path / "b", lambda path: path.unlink()) == taken  # ranked again: the same
    assert compaction(tmp_path / "c", planted("1:another-history")) == taken  # not this history's
    assert compaction(tmp_path / "d", lambda path: path.write_text("[1, 2", "utf-8")) == taken  # damaged
    used = compaction(tmp_path / "e", planted(None))
    assert used and "planted_marker_name" in used  # this history's: taken as it is


def test_a_prompt_without_anything_pending_is_answered_with_nothing(tmp_path: Path) -> None:
    t = working_session(tmp_path)
    run = run_hook(tmp_path / "home", "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="hi"))
    assert (run.code, run.stdout) == (0, "")
    assert not (tmp_path / "home").exists()


def test_spilled_outputs_are_listed_in_the_handover(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = working_session(tmp_path)
    event = bash_event(numbered(3_000), session=t.session)
    spilled = output_id_in(
        run_hook(home, "claude-code", "PostToolUse", event).answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    )
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact")).context
    line = next(line for line in text.splitlines() if spilled in line)
    assert "Bash `pytest -q`" in line and "3,000 lines" in line


def test_the_answer_is_json_claude_code_can_parse(tmp_path: Path) -> None:
    run = run_hook(tmp_path / "home", "claude-code", "PostToolUse", bash_event(numbered(3_000)))
    assert run.stdout.startswith("{") and run.stdout.endswith("\n") and json.loads(run.stdout)


def test_a_transcript_that_cannot_be_imported_still_gets_a_handover_from_what_is_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = working_session(tmp_path)
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    t.path.write_text(t.path.read_text().replace("Never retry", "Always retry"))  # rewritten, not grown
    text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact")).context
    assert text is not None and "Never retry on a 4xx." in text  # from the import that worked
    log = (home / "hooks" / "hooks.log").read_text()
    assert "SessionStart (import)" in log and "those bytes have changed" in log


def test_the_status_line_shows_tokens_usable_state_and_spills(tmp_path: Path) -> None:
    home = tmp_path / "home"
    event = {
        "session_id": "s1",
        "model": {"id": "claude-opus-4-8", "display_name": "Opus"},
        "workspace": {"current_dir": "/w"},
        "context_window": {"total_input_tokens": 150_000, "context_window_size": 200_000, "used_percentage": 75},
    }
    run = run_hook(home, "claude-code", "StatusLine", event)
    assert run.stdout == "contextfold · 150,000 of 168,000 usable (89%) · soft\n"
    run_hook(home, "claude-code", "PostToolUse", bash_event(numbered(3_000)))
    after = run_hook(
        home,
        "claude-code",
        "StatusLine",
        event | {"context_window": {"total_input_tokens": 170_000, "context_window_size": 200_000}},
    )
    assert after.stdout == "contextfold · 170,000 of 168,000 usable (101%) · overflow · 1 output spilled\n"


def test_several_windows_spilling_at_once_on_one_fresh_home(tmp_path: Path) -> None:
    """Four agent windows, four sessions, one data home, started at the same instant."""
    import concurrent.futures

    home = tmp_path / "home"
    events = [bash_event(numbered(2_500 + i), session=f"window-{i}") for i in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda e: run_hook(home, "claude-code", "PostToolUse", e), events))
    assert all(r.code == 0 and r.answer for r in runs), [r.stderr for r in runs]
    assert not (home / "hooks" / "hooks.log").exists()
    import sqlite3

    with sqlite3.connect(home / "contextfold.db") as db:
        rows = db.execute("SELECT session_id, lines FROM outputs ORDER BY session_id").fetchall()
    assert rows == [(f"claude-code-window-{i}", 2_500 + i) for i in range(4)]


@pytest.mark.anyio
async def test_the_history_the_handover_points_to_is_searchable_over_mcp(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = working_session(tmp_path)
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact")).context
    session = text.split('search_history(session_id="', 1)[1].split('"', 1)[0]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}
    args = ["-m", "contextfold", "--home", str(home), "serve", "--tools", "read_output,search_history"]
    async with Client(StdioServerParameters(command=sys.executable, args=args, env=environ)) as client:
        found = await client.call_tool("search_history", {"session_id": session, "pattern": "TimeoutError"})
    assert not found.is_error, found.content
    assert "TimeoutError: read timed out" in found.structured_content["text"]


LONE = "\ud800"
"""A lone surrogate: JSON's `\\ud800` escape with no low half after it, which Python keeps as is."""


@pytest.mark.parametrize(
    "event",
    [
        bash_event(LONE + " start\n" + numbered(3_000), extra="tail \udc00"),
        bash_event(numbered(3_000)) | {"tool_input": {"command": f"grep {LONE} -r ."}},
        bash_event(f"small {LONE}\n"),
        mcp_event([{"type": "text", "text": numbered(2_500) + LONE}]),
        mcp_event(f"{LONE} a short error"),
        bash_event(numbered(3_000), session=f"odd-{LONE}"),
    ],
    ids=["bash-output", "bash-command", "small", "mcp-blocks", "mcp-text", "session-id"],
)
def test_lone_surrogates_in_an_event_are_repaired_not_a_crash(tmp_path: Path, event: dict[str, Any]) -> None:
    home = tmp_path / "home"
    run = run_hook(home, "claude-code", "PostToolUse", event)  # run_hook decodes stdout as strict UTF-8
    assert (run.code, run.stderr) == (0, "")
    assert not (home / "hooks" / "hooks.log").exists()
    if run.stdout:
        answer = json.dumps(run.answer, ensure_ascii=False)
        answer.encode("utf-8")  # no surrogate left in the answer
        if "start\n" in json.dumps(event):
            assert "\ufffd start\n" in run.answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
            assert run.answer["hookSpecificOutput"]["updatedToolOutput"]["extra"] == "tail \ufffd"


def test_lone_surrogates_in_other_events_fail_open_or_are_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    status = {"session_id": "s1", "model": {"id": f"claude-{LONE}"}, "context_window": {"total_input_tokens": 10}}
    run = run_hook(home, "claude-code", "StatusLine", status)
    assert run.code == 0 and run.stdout.startswith("contextfold · 10 of ") and run.stderr == ""
    transcript = tmp_path / "session.jsonl"
    transcript.write_text('{"type": "user", "message": {"role": "user", "content": "\\ud800"}}\n', "utf-8")
    for name in ("PreCompact", "UserPromptSubmit"):
        event = {"session_id": LONE, "transcript_path": str(transcript), "hook_event_name": name, "prompt": LONE}
        run = run_hook(home, "claude-code", name, event)
        assert (run.code, run.stdout, run.stderr) == (0, "", ""), name


# -- the files an event names ------------------------------------------------------------------------


def saved_error(path: Path | str) -> str:
    """What Claude Code puts in place of an MCP result too large to show; an MCP server can write it too."""
    return (
        "Error: result (90,000 characters across 4,000 lines) exceeds maximum allowed tokens. "
        f"Output has been saved to {path}.\nFormat: Plain text\n"
    )


@pytest.mark.parametrize(
    "where", ["etc", "outside", "symlink", "dotdot", "directory", "other-session", "no-transcript"]
)
def test_a_saved_output_is_read_only_from_the_sessions_tool_results_folder(tmp_path: Path, where: str) -> None:
    home = tmp_path / "home"
    transcript, folder = tool_results(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-TOKEN\n" + numbered(3_000))
    target: Path | str
    if where == "etc":
        target = "/etc/passwd"
    elif where == "outside":
        target = secret
    elif where == "symlink":
        target = folder / "link.txt"
        target.symlink_to(secret)
    elif where == "dotdot":
        target = f"{folder}/../../../../secret.txt"
    elif where == "directory":
        target = folder / "sub"
        target.mkdir()
    elif where == "other-session":
        _, elsewhere = tool_results(tmp_path, "s2")
        target = elsewhere / "theirs.txt"
        target.write_text("SECRET-TOKEN\n" + numbered(3_000))
    else:
        target = folder / "mine.txt"
        target.write_text("SECRET-TOKEN\n" + numbered(3_000))
        transcript = ""
    for event in (
        bash_event("cut", persistedOutputPath=str(target)) | {"transcript_path": transcript},
        mcp_event(saved_error(target)) | {"transcript_path": transcript},
    ):
        run = run_hook(home, "claude-code", "PostToolUse", event)
        assert (run.code, run.stdout, run.stderr) == (0, "", ""), run.stdout[:300]
    lines = (home / "hooks" / "hooks.log").read_text().splitlines()
    assert len(lines) == 2 and all("not read" in line or "not a regular file" in line for line in lines), lines
    assert not (home / "contextfold.db").exists()  # refused before the home was opened


def test_a_fifo_where_the_output_was_saved_does_not_hold_the_hook(tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript, folder = tool_results(tmp_path)
    fifo = folder / "fifo.txt"
    os.mkfifo(fifo)
    event = mcp_event(saved_error(fifo)) | {"transcript_path": transcript}
    run = run_hook(home, "claude-code", "PostToolUse", event, timeout=30)  # it hung for good before
    assert (run.code, run.stdout, run.stderr) == (0, "", "")
    assert "not a regular file" in (home / "hooks" / "hooks.log").read_text()


def test_a_saved_output_over_the_read_limit_is_left_alone(tmp_path: Path) -> None:
    from contextfold.hooks.runner import SAVED_READ_LIMIT

    home = tmp_path / "home"
    transcript, folder = tool_results(tmp_path)
    big = folder / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(SAVED_READ_LIMIT + 1)  # sparse: no 64 MB written
    run = run_hook(home, "claude-code", "PostToolUse", mcp_event(saved_error(big)) | {"transcript_path": transcript})
    assert (run.code, run.stdout, run.stderr) == (0, "", "")
    assert "over 67,108,864 bytes" in (home / "hooks" / "hooks.log").read_text()


def test_a_pin_prompt_survives_claude_codes_own_compaction_in_the_handover(tmp_path: Path) -> None:
    """`pin: <fact>` typed as a prompt is pinned to the session; every SessionStart handover after
    one of Claude Code's compactions gives it back word for word, with the pinned messages."""
    home = tmp_path / "home"
    t = working_session(tmp_path)
    said = run_hook(
        home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="pin: Never push to main.")
    )
    assert said.code == 0 and "pinned p1" in (said.context or ""), said.stderr
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))

    import asyncio

    from contextfold.service.facade import ContextService

    async def pin_first_request() -> None:
        async with await ContextService.open(load_settings({"home": home}, environ={})) as service:
            await service.pin(f"claude-code-{t.session}", ref="m1")

    asyncio.run(pin_first_request())
    for _ in range(2):  # a second compaction gives them again
        text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact")).context or ""
        assert "- [p1] Never push to main." in text
        assert "[p2 [m1]] user: Add retries to `fetch_page` in src/client.py. Never retry on a 4xx." in text
    gone = run_hook(home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="unpin: p1"))
    assert "unpinned p1" in (gone.context or "")
    text = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact")).context or ""
    assert "Never push to main." not in text

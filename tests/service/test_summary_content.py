"""What a summary holds (issue 16), on synthetic histories so the rules are not tuned to a corpus.

The user's own words survive word for word, with the stored message they came from; the agent's
plan (a plan tool or a checklist in its text) drives In Progress and Next Steps; Done is outcomes,
not a log of shell plumbing; an error is open only until something later succeeds at the same
thing; the working set lists the names the agent worked with; every summary ends by pointing at
the searchable history. Citations are checked against a real store, and pins against a summary
the real Anthropic SDK brought back from a fake server that leaves the user's words out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _histories import assistant, call, stored, user
from fake_anthropic import VALID_SUMMARY, message_reply, serve_fake_anthropic

from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.extractive import GOAL_OPENING_CHARS, ExtractiveSummarizer
from contextfold.compaction.pins import names_file, pin_facts
from contextfold.compaction.template import (
    BLOCKED,
    CONSTRAINTS,
    CRITICAL,
    DONE,
    FILES,
    GOAL,
    HISTORY_NOTE,
    IN_PROGRESS,
    LATEST_REQUEST,
    NEXT_STEPS,
    cite,
    cited_seqs,
    parse_summary,
)
from contextfold.compaction.workingset import IDENTIFIERS, READ, SHARE
from contextfold.config import load_settings
from contextfold.domain import Message, ToolPart
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import counter_for

COUNTER = counter_for("gpt-4o")


# -- building histories ----------------------------------------------------------------------------


def summarize(head: list[Message], budget: int = 4_000, previous: str | None = None) -> str:
    request = SummaryRequest(head=head, previous=previous, counter=COUNTER, budget_tokens=budget)
    return ExtractiveSummarizer().summarize_sync(request).text


def bash(command: str, output: str) -> ToolPart:
    return call("Bash", {"command": command, "description": "run"}, output)


def edit(path: str) -> ToolPart:
    return call("Edit", {"file_path": path, "old_string": "a", "new_string": "b"}, f"The file {path} has been updated.")


CORRECTION = "Actually, store the cache on disk under .cache/parser, not in memory: the worker restarts often."


def corrected_history() -> list[Message]:
    return stored(
        [
            user("Add caching to the parser in src/parser.py."),
            assistant("I'll add an in-memory cache.", edit("/repo/src/parser.py")),
            user(CORRECTION),
            assistant("Understood, moving it to disk.", edit("/repo/src/parser.py")),
            user("Good. Now run the benchmarks."),
            assistant("", bash("python bench.py", "Exit code 0\nparse: 1.2 ms")),
        ]
    )


# -- the user's own words --------------------------------------------------------------------------


def test_a_correction_after_the_first_instruction_is_kept_word_for_word() -> None:
    head = corrected_history()
    summary = parse_summary(summarize(head))
    quotes = [b for b in summary[CONSTRAINTS] if b.startswith("User [")]
    # Each of the user's messages, in order, with the stored message it came from.
    assert quotes == [
        "User [m1]: Add caching to the parser in src/parser.py.",
        f"User [m3]: {CORRECTION}",
        "User [m5]: Good. Now run the benchmarks.",
    ]


def test_a_long_request_quoted_whole_is_named_in_the_goal_by_its_opening() -> None:
    task = (
        "Migrate the billing service from the legacy cron jobs to the new scheduler: keep every job's "
        "timing, move the retry policy into the scheduler's config, and write a note for the on-call "
        "team describing what changed and how to roll back."
    )
    latest = "Now also drop the old cron entries from deploy/crontab once the scheduler runs them."
    head = stored(
        [
            user(task),
            assistant("Starting with the job list.", bash("crontab -l", "0 * * * * bill.sh")),
            user(latest),
            assistant("", bash("cat deploy/crontab", "0 * * * * bill.sh")),
        ]
    )
    text = summarize(head)
    summary = parse_summary(text)
    # Constraints quotes both whole; the Goal names the long one by its opening and the message it
    # came from, and the short one whole.
    assert f"User [m1]: {task}" in summary[CONSTRAINTS]
    first, newest = summary[GOAL]
    assert first.startswith(task[: GOAL_OPENING_CHARS - 10]) and first.endswith("… [m1]"), first
    assert len(first) < len(task)
    assert newest == f"{LATEST_REQUEST}{latest} [m3]"
    # Nothing the pins guard is missing: they add nothing back.
    pinned, report = pin_facts(text, head)
    assert report.added == [] and pinned == text


def test_an_anchors_relative_paths_are_read_back_with_the_root_it_stated() -> None:
    first = stored(
        [
            user("Speed up the parser."),
            assistant("", edit("/repo/src/parser.py")),
            assistant("", edit("/repo/src/lexer.py")),
        ]
    )
    previous = summarize(first)
    assert "parser.py — edited (Edit)" in parse_summary(previous)[FILES]
    # The next stretch works elsewhere: its root is another, so the anchor's files are written whole.
    later = [
        m.model_copy(update={"id": f"msg_{m.seq + 10}", "seq": m.seq + 10})
        for m in stored(
            [
                user("Now the docs."),
                assistant("", edit("/work/site/docs/parser.md")),
                assistant("", edit("/work/site/docs/index.md")),
            ]
        )
    ]
    text = summarize(later, previous=previous)
    summary = parse_summary(text)
    assert [b for b in summary[CRITICAL] if b.startswith("Project root: ")] == [
        "Project root: `/work/site/docs/` (the paths below under it are written relative to it)"
    ]
    # The earlier root stays, for the Done lines written from it.
    assert "Earlier project root: `/repo/src/` (earlier Done lines read from it)" in summary[CRITICAL]
    for path in ("/repo/src/parser.py", "/repo/src/lexer.py", "/work/site/docs/parser.md", "/work/site/docs/index.md"):
        assert names_file(summary, path), (path, summary[FILES])
    assert "/repo/src/parser.py — edited (Edit)" in summary[FILES]
    assert pin_facts(text, later, previous=previous)[1].added == []


def test_harness_text_in_the_users_turn_is_not_quoted() -> None:
    head = stored(
        [
            user("<system-reminder>Remember the todo list.</system-reminder>"),
            user("<local-command-stdout>Compacted</local-command-stdout>"),
            user("[Request interrupted by user]"),
            user("<environment_context>\n<cwd>/repo</cwd>\n</environment_context>"),
            user("Rename the flag to --dry-run."),
        ]
    )
    quotes = [b for b in parse_summary(summarize(head))[CONSTRAINTS] if b.startswith("User")]
    assert quotes == ["User [m5]: Rename the flag to --dry-run."]


def test_the_newest_words_are_quoted_first_and_older_ones_keep_their_opening() -> None:
    long = "Please refactor the loader so that " + "every stage streams its input " * 60
    head = stored([user(f"{i}: {long}") for i in range(12)] + [user("Last: ship it.")])
    text = summarize(head, budget=1_500)
    quotes = [b for b in parse_summary(text)[CONSTRAINTS] if b.startswith("User")]
    assert quotes[-1] == "User [m13]: Last: ship it."
    # Within the budget every message keeps at least its opening, the newest the most text.
    assert all(f"User [m{i + 1}]: {i}: Please refactor the loader" in " ".join(quotes) for i in range(12))
    assert len(quotes[-2]) > len(quotes[0])
    assert COUNTER.count(text) <= 1_500


@pytest.mark.anyio
async def test_the_users_words_survive_an_anthropic_summary_that_left_them_out(tmp_path: Path, monkeypatch) -> None:
    assert "disk" not in VALID_SUMMARY  # the model's summary drops the correction
    with serve_fake_anthropic() as fake:
        fake.script(message_reply(VALID_SUMMARY))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        settings = load_settings({"home": tmp_path, "preserve_recent_tokens": 300}, environ={})
        async with await ContextService.open(settings) as service:
            await service.open_session("s", model="claude-sonnet-4-5")
            await service.append(
                "s",
                [
                    {"role": "user", "content": "Add caching to the parser."},
                    {"role": "assistant", "content": "In memory, then. " + "detail " * 300},
                    {"role": "user", "content": CORRECTION},
                    {"role": "assistant", "content": "Moving it to disk. " + "detail " * 300},
                    {"role": "user", "content": "Now run the benchmarks."},
                    {"role": "assistant", "content": "Running them. " + "detail " * 300},
                ],
            )
            result = await service.compact("s", summarizer="anthropic")
            summary = await service.summary_text("s")
            history = {m.seq: m for m in await service.session_history("s")}
    assert result.summarizer == "anthropic"
    assert any(p.startswith("user: Actually, store the cache on disk") for p in result.pinned)
    quote = next(b for b in parse_summary(summary)[CONSTRAINTS] if CORRECTION in b)
    # The pinned quote cites the stored message the words came from.
    (seq,) = cited_seqs(quote)
    assert history[seq].role == "user" and history[seq].text == CORRECTION


# -- the plan --------------------------------------------------------------------------------------


def test_a_todo_list_drives_in_progress_and_next_steps() -> None:
    head = stored(
        [
            user("Port the exporter."),
            assistant(
                "",
                call(
                    "TodoWrite",
                    {
                        "todos": [
                            {"content": "Read the old exporter", "status": "completed"},
                            {"content": "Write the new exporter", "status": "in_progress"},
                            {"content": "Add a regression test", "status": "pending"},
                            {"content": "Update the changelog", "status": "pending"},
                        ]
                    },
                    "Todos updated",
                ),
            ),
            assistant("", edit("/repo/src/export.py")),
            assistant("Excellent point! Let me add the retry."),
        ]
    )
    summary = parse_summary(summarize(head))
    assert summary[IN_PROGRESS] == ["Write the new exporter [m2]"]
    assert summary[NEXT_STEPS] == ["Add a regression test [m2]", "Update the changelog [m2]"]
    assert "Read the old exporter [m2]" in summary[DONE]
    assert not any("Excellent point" in b for b in summary[IN_PROGRESS])


def test_codex_update_plan_and_a_checklist_in_text_are_plans_too() -> None:
    codex = stored(
        [
            user("Fix the flaky test."),
            assistant(
                "",
                call(
                    "update_plan",
                    {
                        "plan": [
                            {"step": "Reproduce the flake", "status": "completed"},
                            {"step": "Pin the clock", "status": "in_progress"},
                        ]
                    },
                    "Plan updated",
                ),
            ),
        ]
    )
    assert parse_summary(summarize(codex))[IN_PROGRESS] == ["Pin the clock [m2]"]
    written = stored(
        [
            user("Fix the flaky test."),
            assistant("Plan:\n- [x] Reproduce the flake\n- [ ] Pin the clock\n- [ ] Rerun the suite 20 times"),
        ]
    )
    summary = parse_summary(summarize(written))
    assert summary[NEXT_STEPS] == ["Pin the clock [m2]", "Rerun the suite 20 times [m2]"]
    assert "Reproduce the flake [m2]" in summary[DONE]


def test_without_a_plan_in_progress_is_the_work_under_way_not_a_sentence() -> None:
    head = stored(
        [
            user("Make the importer stream."),
            assistant("Great! Let me update the reader.", edit("/repo/src/reader.py")),
            assistant(
                "", bash("pytest tests/test_reader.py", "Exit code 1\nE   ValueError: chunk too large\n1 failed")
            ),
            assistant("Excellent point! Let me add the limit.", edit("/repo/src/limits.py")),
        ]
    )
    summary = parse_summary(summarize(head))
    assert summary[IN_PROGRESS] == [
        "Fixing the failure of Bash `pytest tests/test_reader.py` [m3]",
        # Named relative to the directory the edited files share (Critical Context names it).
        "Changing `reader.py`, `limits.py` (not yet checked) [m2, m4]",
    ]
    assert "Project root: `/repo/src/` (the paths below under it are written relative to it)" in summary[CRITICAL]
    # The files being changed are In Progress's: Done does not say them again as done.
    assert not any("reader.py" in bullet or "limits.py" in bullet for bullet in summary[DONE]), summary[DONE]

    # A stretch that also ran something stays in Done: In Progress names only its files.
    ran = stored([*head, assistant("", bash("npm run codegen", "generated 3 files"), edit("/repo/src/x.py"))])
    done = parse_summary(summarize(ran))[DONE]
    assert any("npm run codegen" in bullet and "limits.py" in bullet for bullet in done), done


# -- Done, Blocked ---------------------------------------------------------------------------------


def test_done_is_outcomes_without_shell_plumbing() -> None:
    head = stored(
        [
            user("Add the cache."),
            assistant(
                "", bash("cd /repo && mkdir -p .cache && export CACHE=1", "Exit code 0"), edit("/repo/src/cache.py")
            ),
            assistant("", edit("/repo/src/cache.py"), edit("/repo/src/cache.py")),
            assistant(
                "", bash("cd /repo && pytest tests/test_cache.py", "Exit code 1\nE   KeyError: 'k'\n1 failed in 0.1s")
            ),
            assistant("", edit("/repo/src/cache.py")),
            assistant("", bash("cd /repo && pytest tests/test_cache.py", "Exit code 0\n3 passed in 0.1s")),
            assistant("", bash("cd /repo && pytest tests/test_cache.py", "Exit code 0\n3 passed in 0.1s")),
            assistant(
                "",
                bash(
                    "git add -A && git commit -m \"$(cat <<'EOF'\nfeat: add the parse cache\n\nDetails.\nEOF\n)\"",
                    "Exit code 0\n[main 1a2b3c] feat: add the parse cache",
                ),
            ),
        ]
    )
    done = parse_summary(summarize(head))[DONE]
    text = "\n".join(done)
    for plumbing in ("mkdir", "export", "cd /repo", "git add", "$(cat", "<<'EOF'"):
        assert plumbing not in text, (plumbing, done)
    # One outcome: the file (edits folded), the check that passed (reruns folded), the commit.
    assert done[0] == (
        "Edited `cache.py` ×4 in `/repo/src/`; `pytest tests/test_cache.py` passed (3 passed in 0.1s) "
        'after 1 failing run; committed "feat: add the parse cache" [m2–m8]'
    )


def test_an_error_fixed_later_is_not_blocked() -> None:
    # A commit refused by its lint hook, then made after the fix: the same thing, succeeded.
    head = stored(
        [
            user("Commit the change."),
            assistant(
                "",
                bash(
                    'git add -A && git commit -m "feat: parser cache"',
                    "Exit code 1\nruff....Failed\nsrc/cache.py:3:1: F401 `os` imported but unused",
                ),
            ),
            assistant("", edit("/repo/src/cache.py")),
            assistant(
                "",
                bash('git commit -am "feat: parser cache (lint)"', "Exit code 0\n[main 9f] feat: parser cache (lint)"),
            ),
        ]
    )
    summary = parse_summary(summarize(head))
    assert summary[BLOCKED] == []
    assert any(b.startswith("Fixed: src/cache.py:3:1: F401") for b in summary[DONE])


def test_an_unfixed_error_is_blocked_with_its_exact_message() -> None:
    message = "E   sqlite3.OperationalError: database is locked"
    head = stored(
        [
            user("Run the migration tests."),
            assistant("", bash("pytest tests/test_migrate.py", f"Exit code 1\n{message}\n1 failed in 0.3s")),
            assistant("", edit("/repo/src/db.py")),
            assistant("", bash("pytest tests/test_other.py", "Exit code 0\n2 passed")),
        ]
    )
    summary = parse_summary(summarize(head))
    assert summary[BLOCKED] == [f"{' '.join(message.split())} — Bash `pytest tests/test_migrate.py` [m2]"]


def test_the_users_answer_to_a_question_is_a_key_decision() -> None:
    head = stored(
        [
            user("Speed up the importer."),
            assistant("", edit("/repo/src/importer.py")),
            assistant("Two ways: batch the inserts, or stream them. Which do you prefer?"),
            user("Stream them."),
            assistant("I'll use a generator for the rows.", edit("/repo/src/importer.py")),
        ]
    )
    decisions = parse_summary(summarize(head))["Key Decisions"]
    assert decisions == [
        'User chose "Stream them." (asked: Which do you prefer?) [m3–m4]',
        "I'll use a generator for the rows. [m5]",
    ]


def test_the_task_given_in_answer_to_a_greeting_is_the_goal_not_a_decision() -> None:
    head = stored(
        [
            user("hello"),
            assistant("Hi! What do you need help with?"),
            user("Find the SLAM programs in this workspace and tell me how to run them."),
            assistant("", call("Bash", {"command": "ls src"}, "slam_planner")),
            assistant("Which robot do you use, the A1 or the Go1?"),
            user("The A1."),
        ]
    )
    summary = parse_summary(summarize(head))
    assert summary[GOAL][0].startswith("Find the SLAM programs"), summary[GOAL]
    assert summary["Key Decisions"] == [
        'User chose "The A1." (asked: Which robot do you use, the A1 or the Go1?) [m5–m6]'
    ]


# -- the working set, the closing line ------------------------------------------------------------


def test_the_working_set_names_what_the_agent_worked_with_within_its_share() -> None:
    head = stored(
        [
            user("Why does `load_config` ignore `CONTEXT_HOME`?"),
            assistant(
                "",
                call(
                    "Grep",
                    {"pattern": "def load_config", "path": "/repo/src"},
                    "/repo/src/settings.py:40:def load_config(env):",
                ),
            ),
            assistant(
                "`load_config` reads `env.get('HOME')` first; `resolve_home` is never called.",
                call(
                    "Read",
                    {"file_path": "/repo/src/settings.py"},
                    "40 def load_config(env):\n41     return resolve_home(env)",
                ),
            ),
        ]
    )
    text = summarize(head, budget=600)
    for name in ("load_config", "CONTEXT_HOME", "resolve_home", "/repo/src/settings.py"):
        assert name in text, (name, text)
    # Names the user's quoted words already hold are not listed again; the others are, within the
    # working set's share of the budget.
    listings = [b for b in parse_summary(text)[FILES] if b.startswith((IDENTIFIERS, READ))]
    assert any("resolve_home" in b for b in listings) and any("/repo/src/settings.py" in b for b in listings)
    assert not any("load_config" in b for b in listings)
    assert COUNTER.count("\n".join(listings)) <= 600 * SHARE


def test_every_summary_ends_with_the_way_to_the_full_history() -> None:
    text = summarize(corrected_history())
    assert text.rstrip().splitlines()[-1] == HISTORY_NOTE
    assert "search_history" in HISTORY_NOTE
    # The note is the renderer's: reading the summary back and rendering it again keeps one note.
    assert parse_summary(text).render() == text


# -- citations against a real store ----------------------------------------------------------------


def test_citations_are_compact_runs() -> None:
    assert cite([12]) == "[m12]"
    assert cite([12, 13, 14, 15]) == "[m12–m15]"
    assert cite([3, 9, 10, 11, 12]) == "[m3, m9–m12]"
    assert cite([1, 3, 5, 7, 9]) == "[m1, m3, …, m9]"
    assert cite([0]) == ""
    assert cited_seqs("x [m3, m9–m12] y [m40]") == [3, 9, 12, 40]


def _tool(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


@pytest.mark.anyio
async def test_citations_resolve_to_the_stored_messages_they_came_from(tmp_path: Path) -> None:
    settings = load_settings({"home": tmp_path, "preserve_recent_tokens": 200}, environ={})
    async with await ContextService.open(settings) as service:
        await service.open_session("s", model="gpt-4o")
        await service.append(
            "s",
            [
                {"role": "user", "content": "Make the loader stream."},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        _tool("e1", "Edit", {"file_path": "/repo/src/loader.py", "old_string": "a", "new_string": "b"})
                    ],
                },
                {"role": "tool", "tool_call_id": "e1", "content": "The file /repo/src/loader.py has been updated."},
                {"role": "user", "content": "No threads, please: keep it a generator."},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        _tool("b1", "Bash", {"command": "pytest tests/test_loader.py", "description": "test"})
                    ],
                },
                {"role": "tool", "tool_call_id": "b1", "content": "Exit code 1\nE   MemoryError: chunk\n1 failed"},
                {"role": "assistant", "content": "The chunk size is the problem. " + "detail " * 400},
                {"role": "user", "content": "Keep going."},
                {"role": "assistant", "content": "Working. " + "detail " * 400},
            ],
        )
        result = await service.compact("s", summarizer="extractive")
        summary = parse_summary(await service.summary_text("s"))
        history = {m.seq: m for m in await service.session_history("s")}
    assert result.compacted
    cited = [
        (bullet, seqs) for bullets in summary.sections.values() for bullet in bullets if (seqs := cited_seqs(bullet))
    ]
    assert cited, summary.sections
    for bullet, seqs in cited:
        assert all(seq in history for seq in seqs), (bullet, seqs)
    quote = next(b for b in summary[CONSTRAINTS] if "No threads" in b)
    assert [history[s].text for s in cited_seqs(quote)] == ["No threads, please: keep it a generator."]
    (blocked,) = summary[BLOCKED]
    (seq,) = cited_seqs(blocked)
    assert "MemoryError: chunk" in blocked
    assert [p.input["command"] for p in history[seq].tool_parts] == ["pytest tests/test_loader.py"]
    edited = next(b for b in summary[DONE] if "loader.py" in b)
    assert all(any(p.name == "Edit" for p in history[s].tool_parts) for s in cited_seqs(edited))

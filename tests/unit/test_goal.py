"""The Goal is the user's task as the user stated it (issue 27, item 4), on synthetic histories:
greetings and chit-chat openers, acknowledgements and "continue", the harnesses' own messages in
the user's turn (mini-swe-agent's and SWE-agent's format nags, Claude Code's reminders, command
wrappers and caveats), and a change of direction; and the request kept in view after a compaction
is the user's, not a nag.
"""

from __future__ import annotations

import pytest
from _histories import assistant, call, stored, user

from contextfold.compaction.engine import plan_compaction
from contextfold.compaction.extractive import build_summary
from contextfold.compaction.facts import extract_facts
from contextfold.compaction.pins import pin_facts
from contextfold.compaction.template import GOAL, LATEST_REQUEST, parse_summary
from contextfold.compaction.userwords import goal, is_request, redirects
from contextfold.domain import Message
from contextfold.tokens.counting import count_message, counter_for

COUNTER = counter_for("gpt-4o")
TASK = "Fix the crash in `parse_config` when the config file is empty, and add a regression test."


def goal_of(messages: list[Message], previous: str | None = None) -> list[str]:
    summary = build_summary(stored(messages), previous=previous, counter=COUNTER, budget_tokens=4_000)
    return parse_summary(summary)[GOAL]


def work() -> list[Message]:
    """Some work on the task: a read, an edit, a test run."""
    return [
        assistant("Reading the parser.", call("Read", {"file_path": "src/config.py"}, "def parse_config(path): ...")),
        assistant("", call("Edit", {"file_path": "src/config.py", "old_string": "a", "new_string": "b"}, "ok")),
        assistant("", call("Bash", {"command": "pytest -q tests/test_config.py"}, "3 passed")),
    ]


@pytest.mark.parametrize(
    "opener",
    [
        "hi",
        "Hello there!",
        "i am you and you are me",
        "hey, how are you?",
        "Warmup",
        "你好",
        "olá, tudo bem",
        "claude --c",
        "hi claude",  # the agent greeted by name
        "Merhaba!",
        "cześć",
        "halo, terima kasih",
    ],
)
def test_a_greeting_before_the_task_is_not_the_goal(opener: str) -> None:
    messages = [user(opener), assistant("Hello! What can I do for you?"), user(TASK), *work()]
    bullets = goal_of(messages)
    assert bullets[0].startswith(TASK), bullets
    assert not any(b.startswith(opener) or LATEST_REQUEST + opener in b for b in bullets)


def test_a_task_that_is_a_question_is_the_goal() -> None:
    messages = [user("what's 1+1?"), assistant("2."), user("No, I mean by Goldbach's conjecture!"), assistant("…")]
    bullets = goal_of(messages)
    assert bullets[0].startswith("what's 1+1?") and "Goldbach" in bullets[1]


@pytest.mark.parametrize("ack", ["yes", "continue", "ok, go ahead", "thanks!", "继续", "2", "sim, pode", "Продолжай"])
def test_an_acknowledgement_leaves_the_latest_request_current(ack: str) -> None:
    later = "Also make the error message name the file."
    messages = [user(TASK), *work(), user(later), assistant("Shall I also update the docs?"), user(ack), *work()]
    bullets = goal_of(messages)
    assert bullets[0].startswith(TASK)
    assert bullets[1].startswith(LATEST_REQUEST + later), bullets
    assert len(bullets) == 2


def test_mini_swe_agents_format_nag_is_neither_goal_nor_quote() -> None:
    nag = (
        "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n\n"
        "Please format your action in triple backticks as shown in <response_example>.\n\n"
        "<response_example>\nTHOUGHT: …\n\n```bash\n<action>\n```\n</response_example>"
    )
    timed_out = "The last command <command>sleep 999</command> timed out and has been killed."
    messages = [
        user(
            "<pr_description>\nConsider the following PR description: requests.get sends Content-Length\n</pr_description>"
        ),
        assistant("THOUGHT: two commands\n```bash\nls\n```\n```bash\npwd\n```"),
        user(nag),
        *work(),
        user(timed_out),
        *work(),
    ]
    summary = build_summary(stored(messages), previous=None, counter=COUNTER, budget_tokens=4_000)
    bullets = parse_summary(summary)[GOAL]
    assert bullets == [bullets[0]] and "requests.get sends Content-Length" in bullets[0]
    assert "EXACTLY ONE action" not in summary and "timed out and has been killed" not in summary


@pytest.mark.parametrize(
    "nag",
    [
        "Your output was not formatted correctly. You must always include one discussion and one command.",
        "Your last output did not use any tool calls!\nPlease make sure your output includes exactly _ONE_ call!",
        "Your bash command contained syntax errors and was NOT executed. Please fix the syntax errors.",
        "Your command ran successfully and did not produce any output.",
        "Please continue working on the task on whatever approach you think is suitable.\nIMPORTANT: never ask.",
    ],
)
def test_swe_agents_and_openhands_notices_are_not_the_users(nag: str) -> None:
    messages = [user(TASK), *work(), user(nag), *work()]
    summary = build_summary(stored(messages), previous=None, counter=COUNTER, budget_tokens=4_000)
    assert parse_summary(summary)[GOAL] == [parse_summary(summary)[GOAL][0]]
    assert nag.split("\n")[0][:40] not in summary


@pytest.mark.parametrize(
    "injected",
    [
        "<system-reminder>The TodoWrite tool hasn't been used recently.</system-reminder>",
        "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
        "<local-command-stdout>Total cost: $0.12</local-command-stdout>",
        "Caveat: The messages below were generated by the user while running local commands. DO NOT respond.",
        "[Request interrupted by user for tool use]",
        "Unknown slash command: extract",
    ],
)
def test_claude_codes_own_messages_in_the_users_turn_are_not_the_goal(injected: str) -> None:
    messages = [user(TASK), *work(), user(injected), *work()]
    bullets = goal_of(messages)
    assert len(bullets) == 1 and bullets[0].startswith(TASK), bullets


def test_a_later_request_refines_the_task_which_stays_first() -> None:
    later = "Now also handle a config file that holds only comments."
    bullets = goal_of([user(TASK), *work(), user(later), *work()])
    assert bullets[0].startswith(TASK) and not bullets[0].startswith("Earlier")
    assert bullets[1].startswith(LATEST_REQUEST + later)


@pytest.mark.parametrize(
    "redirect",
    [
        "Forget that, the CI is red: fix the lint job in .github/workflows/ci.yml first.",
        "Never mind the parser. New task: bump the version to 2.0 in pyproject.toml.",
        "Actually, scratch that — let's do something else: write the release notes.",
        "算了，先修复 CI 的 lint 任务。",
    ],
)
def test_a_change_of_direction_makes_the_new_request_the_goal(redirect: str) -> None:
    bullets = goal_of([user(TASK), *work(), user(redirect), *work()])
    assert bullets[0].startswith("Earlier request: " + TASK), bullets
    assert bullets[1].startswith(LATEST_REQUEST + redirect)
    assert redirects(redirect) and not redirects(TASK)


def test_an_updated_summary_sets_its_goal_aside_when_the_user_changes_direction() -> None:
    first = build_summary(stored([user(TASK), *work()]), previous=None, counter=COUNTER, budget_tokens=4_000)
    redirect = "Forget the parser. New task: write the release notes for 2.0."
    head = [m.model_copy(update={"seq": m.seq + 10}) for m in stored([user(redirect), *work()])]
    bullets = parse_summary(build_summary(head, previous=first, counter=COUNTER, budget_tokens=4_000))[GOAL]
    assert bullets[0].startswith("Earlier request: " + TASK), bullets
    assert bullets[-1].startswith(LATEST_REQUEST + redirect)


ACKS = "ok|thanks|continue|yes|go on|sure|great|cool|nice|perfect|yep|ok thanks|thanks!|go ahead|proceed".split("|")


def test_pins_add_the_latest_request_not_an_acknowledgement() -> None:
    """Many acknowledgements after the request, and a tiny budget; the summary still carries the
    request the work answers — quoted, since every message keeps its opening whatever the budget
    (issue 27) — and no "proceed" is taken for the latest request."""
    later = "Also make the error message name the file."
    acks = [*ACKS, *(f"ok, {n}" for n in range(1, 20))]
    messages = [user(TASK), *work(), user(later)]
    for ack in acks:
        messages += [assistant("Next?"), user(ack)]
    facts = extract_facts(stored(messages))
    pinned, report = pin_facts("## Goal\n- something else\n", facts, budget_tokens=20)
    assert f": {later}" in pinned or LATEST_REQUEST + later in pinned, pinned
    assert not any(LATEST_REQUEST + ack in pinned for ack in acks)
    assert any(later in line for line in report.added)


def test_is_request_by_rule() -> None:
    assert not is_request("thanks!") and not is_request("👍") and not is_request("1")
    assert not is_request("[The result of tool call toolu_01, made before this transcript begins:]\n1 import os")
    assert is_request("fix it") and is_request("生成pdf") and is_request("commit")
    assert is_request(" ".join(["ok"] * 13))  # long: whatever its words, it says something
    # An agent's own command line typed at its prompt is meant for the shell.
    assert not is_request("claude --c") and not is_request("codex --resume") and not is_request("CLAUDE")
    assert is_request("claude, fix the login bug") and is_request("codex exec 'run the tests'")
    said = extract_facts(stored([user("hello"), user("hello"), user(TASK), user("yes")])).said
    assert goal(said).task == TASK and goal(said).latest is None


def test_the_request_kept_in_view_after_a_nag_is_the_users() -> None:
    """The tail starts at mini-swe-agent's nag: the request shown again after the summary is the
    user's task before it, not the nag (the demo's "latest request")."""
    nag = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
    messages = [
        user(TASK + "\n" + "Details of the task. " * 200),
        *work(),
        assistant("THOUGHT: two commands\n```bash\nls\n```\n```bash\npwd\n```"),
        user(nag),
        assistant("", call("Bash", {"command": "git diff"}, "diff --git a/src/config.py b/src/config.py\n" * 50)),
        assistant("Done."),
    ]
    counted = [count_message(m, COUNTER) for m in stored(messages)]
    plan = plan_compaction(counted, tail_budget=2_000, tail_turns=1, usable=20_000, counter=COUNTER)
    shown = plan.prompt if plan.prompt is not None else plan.tail[0]
    assert shown.text.startswith(TASK), shown.text[:80]


def test_the_newest_system_message_sent_mid_conversation_is_quoted_in_critical_context() -> None:
    from contextfold.compaction.extractive import SYSTEM_SAID
    from contextfold.compaction.template import CRITICAL
    from contextfold.domain import SystemPrompt
    from contextfold.formats.base import instruction_message

    switch = "<model_switch> The user switched models; earlier replies came from another model."
    plan = "<collaboration_mode> Plan mode: propose changes, do not edit files until the user approves."
    messages = [
        user(TASK),
        *work(),
        instruction_message(SystemPrompt(role="developer", text=switch)),
        *work(),
        instruction_message(SystemPrompt(role="developer", text=plan)),
        *work(),
    ]
    summary = build_summary(stored(messages), previous=None, counter=COUNTER, budget_tokens=4_000)
    said = [b for b in parse_summary(summary)[CRITICAL] if b.startswith(SYSTEM_SAID)]
    # Only the newest: it is what holds now, and no other section quotes a system message.
    assert len(said) == 1 and plan in said[0] and "[m" in said[0], said
    assert switch not in summary
    # Carried by the next summary until a newer one comes.
    again = build_summary(stored([user("go on"), *work()]), previous=summary, counter=COUNTER, budget_tokens=4_000)
    assert any(plan in b for b in parse_summary(again)[CRITICAL])
    # Codex's own notices sent the same way after it are no rule of the session: the plan stays quoted.
    restated = "<model_switch>\nThe user was previously using a different model. You are Codex, a coding agent."
    skills = "<skills_instructions>\n## Skills\nA skill is a set of local instructions."
    later = [*messages, *(instruction_message(SystemPrompt(role="developer", text=t)) for t in (restated, skills))]
    summary = build_summary(stored([*later, *work()]), previous=None, counter=COUNTER, budget_tokens=4_000)
    said = [b for b in parse_summary(summary)[CRITICAL] if b.startswith(SYSTEM_SAID)]
    assert len(said) == 1 and plan in said[0], said

"""The handover's budget after an agent's compaction (issue 27, item 3), on synthetic histories.

The budget follows the window: a share of the room left free after the agent's compaction, never
more than `hook_context_tokens`, never less than `hook_context_min_tokens`. Within it the handover
gives what the agent's summary lacks: what the summary holds is not repeated, and the room it
leaves is not filled with names further down the working set.
"""

from __future__ import annotations

from _histories import assistant, call, stored, user

from contextfold.domain import Message, ToolPart, Usage
from contextfold.hooks import sizing
from contextfold.hooks.handover import handover
from contextfold.tokens.counting import counter_for

CLAUDE = counter_for("claude")
SHARE, FLOOR, CAP = 0.05, 500, 8_000


def whole(usable: int, fixed: int, summary: int | None = None) -> int:
    room = sizing.Room(usable, fixed, sizing.SUMMARY_ESTIMATE if summary is None else summary)
    return sizing.budget(room, share=SHARE, floor=FLOOR, cap=CAP)


# -- the budget ----------------------------------------------------------------------------------------


def test_more_free_room_gives_a_bigger_budget_up_to_the_cap() -> None:
    budgets = [whole(usable, 30_000) for usable in (80_000, 120_000, 168_000, 400_000, 1_000_000)]
    assert budgets == sorted(budgets) and len(set(budgets)) == len(budgets) - 1  # grows, then stops
    assert budgets[2] == int((168_000 - 30_000 - sizing.SUMMARY_ESTIMATE - sizing.REATTACHED) * SHARE)
    assert budgets[-2:] == [CAP, CAP]


def test_a_crowded_window_gets_the_floor_and_a_floor_above_the_cap_gets_the_cap() -> None:
    assert whole(168_000, 160_000) == FLOOR  # what every call reads fills the window: no free room
    assert whole(168_000, 140_000) == FLOOR  # some, but a twentieth of it is under the floor
    room = sizing.Room(168_000, 140_000, 5_000)
    assert sizing.budget(room, share=SHARE, floor=900, cap=600) == 600


def test_what_is_in_view_after_the_compaction_counts_the_fixed_part_the_summary_and_what_comes_back() -> None:
    room = sizing.Room(168_000, 28_000, 3_500)
    assert room.in_view == 28_000 + 3_500 + sizing.REATTACHED
    assert room.free == 168_000 - room.in_view
    assert whole(168_000, 28_000, summary=1_500) > whole(168_000, 28_000, summary=6_000)  # a longer summary leaves less


def test_the_fixed_part_is_the_smallest_input_a_call_reported_else_a_share_of_usable() -> None:
    def reply(total: int | None) -> Message:
        usage = None if total is None else Usage(input=10, cache_read=total - 10)
        return Message(role="assistant", parts=[], usage=usage)

    assert sizing.fixed_part([user("go"), reply(31_000), reply(29_500), reply(None), reply(90_000)], 168_000) == 29_500
    assert sizing.fixed_part([user("go"), reply(None)], 168_000) == int(168_000 * sizing.UNREPORTED_SHARE)


def test_sessionstart_takes_its_share_and_postcompact_the_rest() -> None:
    assert sizing.start_budget(5_000, FLOOR) == int(5_000 * sizing.START_SHARE)
    assert sizing.start_budget(550, FLOOR) == FLOOR  # the floor, within the budget
    assert sizing.start_budget(300, FLOOR) == 300
    assert sizing.later_budget(5_000, 4_100) == 900
    assert sizing.later_budget(5_000, 5_200) == 0


# -- what the budget is spent on ----------------------------------------------------------------------


def session(names: int = 80) -> list[Message]:
    """A history that edits two files and greps for many handler names, each in its own file."""
    messages = [
        user("Rename every handler to the new naming scheme, and keep the old names as aliases."),
        assistant("", call("Edit", {"file_path": "/w/src/router.py", "old_string": "a", "new_string": "b"}, "ok")),
        assistant("", call("Edit", {"file_path": "/w/src/aliases.py", "old_string": "a", "new_string": "b"}, "ok")),
    ]
    for i in range(names):
        messages.append(
            assistant(
                f"Next, `handler_{i:03d}_name`.",
                call("Bash", {"command": f"grep -rn handler_{i:03d}_name src/"}, f"src/pkg_{i}/mod_{i}.py:3: def x()"),
            )
        )
    return stored(messages)


def test_what_the_agents_summary_holds_is_not_repeated() -> None:
    history = session()
    blind = handover(history, session_id="s", counter=CLAUDE, budget=6_000, summary=None, root="/w", depth=6_000)
    held = "Renamed handlers in /w/src/router.py; `handler_079_name` and `handler_078_name` are next."
    seen = handover(history, session_id="s", counter=CLAUDE, budget=6_000, summary=held, root="/w", depth=6_000)
    assert "\n- src/router.py\n" in blind.text and "handler_079_name" in blind.text
    assert "src/router.py" not in seen.text and "handler_079_name" not in seen.text
    assert "\n- src/aliases.py\n" in seen.text  # the summary does not name it


def test_a_summary_that_holds_much_leaves_the_handover_smaller_not_deeper() -> None:
    history = session()
    depth = 600
    blind = handover(history, session_id="s", counter=CLAUDE, budget=6_000, summary=None, root="/w", depth=depth)
    given = [f"handler_{i:03d}_name" for i in range(80) if f"handler_{i:03d}_name" in blind.text]
    assert 5 < len(given) < 80  # the depth, not the budget, ends the list
    summary = "Working through " + ", ".join(f"`{n}`" for n in given) + "."
    seen = handover(history, session_id="s", counter=CLAUDE, budget=6_000, summary=summary, root="/w", depth=depth)
    assert seen.tokens < blind.tokens - CLAUDE.count(", ".join(given)) // 2
    below = [f"handler_{i:03d}_name" for i in range(80) if f"handler_{i:03d}_name" not in blind.text]
    assert not any(name in seen.text for name in below)  # nothing from further down the ranking


def test_a_bigger_budget_reaches_further_down_the_working_set() -> None:
    history = session()
    small = handover(history, session_id="s", counter=CLAUDE, budget=700, root="/w", depth=700)
    large = handover(history, session_id="s", counter=CLAUDE, budget=3_000, root="/w", depth=3_000)
    assert CLAUDE.count(small.text) <= 700 < large.tokens <= 3_000
    assert small.keys < large.keys


def test_every_name_the_handover_counts_as_given_stands_in_its_text() -> None:
    # A name counted as given is never given again: one dropped to fit the budget must stay
    # free for the handover with the next prompt.
    history = session(120)
    for budget in range(300, 2_000, 23):
        given = handover(history, session_id="s", counter=CLAUDE, budget=budget, root="/w", depth=budget)
        names = [key.removeprefix("name:") for key in given.keys if key.startswith("name:")]
        assert all(name in given.text for name in names), budget


def test_edited_files_under_the_working_directory_are_written_relative_to_it() -> None:
    history = session(3) + stored(
        [assistant("", call("Write", {"file_path": "/etc/app/app.conf", "content": "x"}, "ok"))]
    )
    within = handover(history, session_id="s", counter=CLAUDE, budget=3_000, root="/w")
    assert "Files edited before the compaction (paths not starting with / are under /w/):" in within.text
    assert "\n- src/router.py\n" in within.text and "\n- /etc/app/app.conf" in within.text
    assert "file:/w/src/router.py" in within.keys  # known by its exact path
    unrooted = handover(history, session_id="s", counter=CLAUDE, budget=3_000, root=None)
    assert "(exact paths):" in unrooted.text and "\n- /w/src/router.py\n" in unrooted.text


def test_a_plan_the_user_approved_is_handed_over_when_no_todo_list_replaced_it() -> None:
    plan = "# Move the cache to Redis\n\n1. Add `RedisCache` in `cache.py`\n2. Switch `app.py` to it\n"
    approved = "User has approved your plan. You can now start coding."
    exited = ToolPart(call_id="plan-1", name="ExitPlanMode", input={"plan": plan}, state="completed", output=approved)
    history = session(3) + stored([assistant("", exited)])
    given = handover(history, session_id="s", counter=CLAUDE, budget=3_000, root="/w")
    line = next(x for x in given.text.splitlines() if "approved by the user" in x)
    assert line.startswith(
        '- [approved by the user] "Move the cache to Redis": 1. Add `RedisCache` in `cache.py`; 2. Switch `app.py` to it'
    ), line
    todo = ToolPart(
        call_id="todo-1",
        name="TodoWrite",
        input={"todos": [{"content": "Add RedisCache", "status": "in_progress", "activeForm": "Adding"}]},
        state="completed",
        output="ok",
    )
    given = handover([*history, *stored([assistant("", todo)])], session_id="s", counter=CLAUDE, budget=3_000)
    assert "approved by the user" not in given.text and "- [in progress] Add RedisCache" in given.text


def test_a_declined_call_is_handed_over_as_the_users_decision_never_as_the_error_to_fix() -> None:
    declined = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
        "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
        "tell you how to proceed., the user said:\nRun it against the staging database instead"
    )
    refused = ToolPart(
        call_id="declined-1", name="Bash", input={"command": "alembic upgrade head"}, state="error", error=declined
    )
    history = session(3) + stored([assistant("", refused)])
    given = handover(history, session_id="s", counter=CLAUDE, budget=3_000, root="/w")
    assert "Latest error not fixed since:" not in given.text and "STOP what you are doing" not in given.text
    assert "Calls the user declined (their decision, not an error):\n" in given.text
    assert '- Bash `alembic upgrade head` and said: "Run it against the staging database instead"' in given.text
    assert "declined:Bash `alembic upgrade head`" in given.keys
    again = handover(history, session_id="s", counter=CLAUDE, budget=3_000, root="/w", sent=given.keys)
    assert "alembic" not in again.text  # given once

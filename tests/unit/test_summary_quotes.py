"""The user's words in a summary stay readable when a quote is cut, and the summary says nothing
twice (issue 27, item 6).

A quote cut inside a markup tag the user pasted (`… <record id="view_x" mod…`) left the tag open:
to a reader that drops markup — the recall measure, and a model skimming the summary — everything
after it up to the next `>` read as part of the tag, so the next quotes vanished. On the corpus,
18 of the user's messages were lost that way at three compaction points. Synthetic histories only.
"""

from __future__ import annotations

import re

import pytest
from _histories import assistant, call, stored, user
from _recall import instructions, normalize, opening_kept

from contextfold.compaction import workingset
from contextfold.compaction.extractive import ACCOUNT_MIN_TOKENS, ACCOUNT_SECTIONS, ACCOUNT_SHARE, build_summary
from contextfold.compaction.record import Said
from contextfold.compaction.template import DECISIONS, DONE, FILES, LEFT_OUT, NEXT_STEPS, parse_summary
from contextfold.compaction.userwords import MARKUP_SLACK, MIN_OPENING_CHARS, TAG_SLACK, Quote, clip_quote, quotes
from contextfold.domain import Message
from contextfold.tokens.counting import counter_for

COUNTER = counter_for("gpt-4o")
_OPEN_TAG = re.compile(r"</?[A-Za-z][^<>]*$")


def _open_tag_left(text: str) -> bool:
    return _OPEN_TAG.search(text.rstrip("…")) is not None


XML = (
    '<?xml version="1.0" encoding="utf-8"?> <odoo> <record id="view_weekly_performance_list" '
    'model="ir.ui.view"> <field name="name">weekly.performance.list</field> <field name="arch" type="xml"> '
    '<list string="Weekly Performance" create="false"> <field name="department_id"/> </list> </field> </record> </odoo>'
)


@pytest.mark.parametrize("limit", range(20, len(XML) + 5, 7))
def test_a_clipped_quote_never_leaves_a_tag_open(limit: int) -> None:
    text = "Here is the view I mean, please add two tabs to it: " + XML
    shown = clip_quote(text, limit)
    assert not _open_tag_left(shown)
    assert text.startswith(shown.rstrip("…"))  # word for word: only where it ends moves
    assert len(shown) <= max(limit, 1) + MARKUP_SLACK + TAG_SLACK


def test_a_short_quote_and_one_cut_outside_markup_are_as_clip_cuts_them() -> None:
    assert clip_quote("restart the server", 100) == "restart the server"
    assert clip_quote("a b c d e f g h i j", 10) == "a b c d e…"


def test_a_tag_too_long_to_end_is_cut_before() -> None:
    text = "look at this: <div " + "data-x='1' " * 60 + "> hello"
    shown = clip_quote(text, 40)
    assert shown == "look at this:…"


def test_a_message_opening_with_a_long_tag_still_shows_its_words() -> None:
    """The recall measure reads a message's opening with markup dropped: a quote of 64 characters
    that are all one `<td …>` tag would keep none of the user's words."""
    words = "The name column is too narrow, fix its width so the full opportunity name shows"
    text = '<td class="' + "o_cell " * 40 + '" data-tooltip="x">' + words + "</td>"
    for limit in (64, 100, 160):
        shown = clip_quote(text, limit)
        assert not _open_tag_left(shown)
        assert normalize(shown).startswith(words[: limit - 1].rstrip())


def test_markup_shown_beyond_the_limit_is_bounded() -> None:
    text = " ".join(f'<field name="f{i}" string="Field {i}"/>' for i in range(200))
    assert len(clip_quote(text, 64)) <= 64 + MARKUP_SLACK + TAG_SLACK


def test_the_opening_pins_check_is_what_the_bullet_shows() -> None:
    quote = Quote("x " * 60 + XML, "[m3]")
    for limit in (64, 120, 160):
        assert quote.opening(limit) in quote.bullet(limit)


def test_every_instruction_stays_readable_after_a_quote_cut_inside_a_tag() -> None:
    """The user pastes a long XML view; later messages are short; one says `a > b`. Read as the
    recall measure reads it (markup dropped from the whole text), every message's opening is in
    the summary. Before: the pasted view's quote ended inside `<field na…` and swallowed the
    messages up to the `>`."""
    field = '<field name="department_total_amount" string="Department total" optional="show"/>'
    pasted = "For this view, line 94, add two tabs that sum the same metric by department: " + " ".join([field] * 40)
    messages = [
        user(pasted),
        assistant("I'll add the tabs.", call("Edit", {"file_path": "/repo/views/weekly.xml"}, "ok")),
        user("restart the server and upgrade the module"),
        assistant("Restarted.", call("Bash", {"command": "make restart"}, "done")),
        user("when i load the excel every total shows 0"),
        assistant("Looking.", call("Read", {"file_path": "/repo/wizard/importer.py"}, "code")),
        user("the header row is now line 1, not 4"),
        assistant("Fixed the header row.", call("Edit", {"file_path": "/repo/wizard/importer.py"}, "ok")),
        user("it still fails when a > b in the totals"),
        assistant("Checking the comparison."),
    ]
    head = stored(messages)
    wire = [{"role": m.role, "content": m.text} for m in messages]
    for budget in (1_200, 2_000, 4_500):
        summary = build_summary(head, previous=None, counter=COUNTER, budget_tokens=budget)
        seen = normalize(summary)
        lost = [o for _, o in instructions(wire) if not opening_kept(o, seen)]
        assert not lost, (budget, lost)


# -- the summary's size: nothing said twice, the account held to its share (issue 27, item 6) ------

TASK = "Make the CSV importer skip rows whose date column is empty, and report how many it skipped."


def _edit_cycles(n: int) -> list[Message]:
    """A history of `n` edit-and-test rounds on different modules, each announced by the assistant."""
    messages: list[Message] = [user(TASK)]
    for i in range(n):
        path = f"/repo/src/importer/stage_{i}.py"
        messages += [
            assistant(
                f"Now I'll update `stage_{i}.py` so that step {i} skips the empty dates.",
                call(
                    "Edit",
                    {"file_path": path, "old_string": "a", "new_string": "b"},
                    f"The file {path} has been updated.",
                ),
            ),
            assistant("", call("Bash", {"command": f"pytest tests/test_stage_{i}.py -q"}, "3 passed in 0.1s")),
        ]
    return messages


def test_edited_files_say_how_not_the_assistants_sentence_again() -> None:
    summary = build_summary(stored(_edit_cycles(2)), previous=None, counter=COUNTER, budget_tokens=3_000)
    files = parse_summary(summary)[FILES]
    # Under the project root Critical Context states, the path is written relative to it.
    assert "stage_0.py — edited (Edit)" in files
    assert not any("so that step" in bullet for bullet in files)


def test_the_account_of_the_work_is_held_to_its_share() -> None:
    """Sixty rounds of work: Done would fill the summary; it keeps its newest items within its share."""
    budget = 3_700
    summary = build_summary(stored(_edit_cycles(60)), previous=None, counter=COUNTER, budget_tokens=budget)
    parsed = parse_summary(summary)
    account = sum(COUNTER.count(f"- {b}\n") for name in ACCOUNT_SECTIONS for b in parsed[name])
    assert account <= max(ACCOUNT_MIN_TOKENS, int(budget * ACCOUNT_SHARE))
    assert parsed[DONE] and "stage_59.py" in " ".join(parsed[DONE])  # the newest work stays


def test_each_section_of_the_account_keeps_its_newest_bullet_when_held() -> None:
    """Thirty rounds, each choosing how, then a plan of twenty steps: the account is over its share
    and the plan outranks the decisions, yet Key Decisions still says the newest choice instead of
    reading as emptied for room while names are listed below it."""
    messages: list[Message] = [user(TASK)]
    for i in range(30):
        messages.append(
            assistant(
                f"The fix is to treat an empty date in stage {i} as a missing value and count the row as skipped.",
                call("Edit", {"file_path": f"/repo/src/importer/stage_{i}.py", "old_string": "a", "new_string": "b"}),
            )
        )
    todos = [
        {"content": f"Make stage {j} of the importer report the rows it skipped", "status": "pending"}
        for j in range(30, 50)
    ]
    messages.append(assistant("Planning the rest.", call("TodoWrite", {"todos": todos}, "Todos have been modified.")))
    parsed = parse_summary(build_summary(stored(messages), previous=None, counter=COUNTER, budget_tokens=2_900))
    assert parsed[DECISIONS] and parsed[DECISIONS] != [LEFT_OUT]
    assert "stage 29" in " ".join(parsed[DECISIONS])
    assert parsed[NEXT_STEPS] and parsed[NEXT_STEPS] != [LEFT_OUT]


def test_done_held_for_room_keeps_the_newest_work_and_the_newest_fix() -> None:
    """Rounds of work, then five failures each answered by a long command: held to its share, Done
    keeps the newest work done and the newest fix, never only the fixes."""
    messages = _edit_cycles(20)
    for i in range(5):
        commit = f'git add -A && git commit -m "feat: stage {i} reports skipped rows {"and more detail " * 6}"'
        messages += [
            assistant("", call("Bash", {"command": commit}, f"Exit code 1\nPre-commit validation failed: stage {i}")),
            assistant("", call("Bash", {"command": commit.replace("commit", "commit --no-verify")}, "[main abc1234]")),
        ]
    messages.append(assistant("", call("Bash", {"command": "pytest tests/test_final.py -q"}, "9 passed in 0.3s")))
    parsed = parse_summary(build_summary(stored(messages), previous=None, counter=COUNTER, budget_tokens=2_500))
    done = parsed[DONE]
    assert any(b.startswith("Fixed: Pre-commit validation failed: stage 4") for b in done), done
    assert any(not b.startswith("Fixed: ") and "test_final.py" in b for b in done), done
    assert not any("stage 0" in b for b in done if b.startswith("Fixed: ")), done  # the oldest fix went first


def test_names_the_kept_tail_types_are_not_listed_again() -> None:
    head = stored(
        [
            user(TASK),
            assistant(
                "Reading the parsers.",
                call("Read", {"file_path": "/repo/src/date_parser.py"}, "def parse_date(value): ..."),
                call("Read", {"file_path": "/repo/src/row_filter.py"}, "def keep_row(row): ..."),
            ),
            assistant("`parse_date` and `keep_row` decide it; `RowSkipCounter` will count."),
        ]
    )
    tail = [assistant("Next I'll change `keep_row` in row_filter.py.")]
    without = build_summary(head, previous=None, counter=COUNTER, budget_tokens=3_000)
    listed = build_summary(head, previous=None, counter=COUNTER, budget_tokens=3_000, tail=tail)
    names = [n for b in parse_summary(listed)[FILES] for n, _ in (workingset.listed(b) or [])]
    assert "keep_row" in without and "keep_row" not in names
    assert "RowSkipCounter" in names and "parse_date" in names


def test_a_file_the_head_listed_and_the_kept_tail_names_in_words_is_listed() -> None:
    # More files than a listing keeps names of, the one the tail means among them.
    scanners = [f"/repo/scanners/check_{chr(97 + i)}{chr(97 + j)}.py" for i in range(3) for j in range(10)]
    scanners.append("/repo/scanners/prompt_injection.py")
    head = stored(
        [
            user(TASK),
            assistant("", call("Bash", {"command": "find /repo -name '*.py' -o -name '*.md'"}, "\n".join(scanners))),
            assistant("", call("Read", {"file_path": "/repo/Makefile"}, "run:\n\tuvicorn app:app")),
        ]
    )
    tail = [user("We only need the prompt injection scanner; load its model lazily.")]
    without = build_summary(head, previous=None, counter=COUNTER, budget_tokens=3_000)
    listed = build_summary(head, previous=None, counter=COUNTER, budget_tokens=3_000, tail=tail)
    assert "prompt_injection.py" not in without and "prompt_injection.py" in listed, listed


def test_every_message_keeps_its_opening_however_small_the_quote_budget() -> None:
    said = [
        Said(f"message number {i}: please also check the {i}th column of the sheet, thanks", (i + 1,))
        for i in range(80)
    ]
    chosen = quotes(said, [], budget=1_000)
    assert len(chosen) == 80
    assert all(shown >= MIN_OPENING_CHARS for _, shown in chosen)


def test_a_long_message_sent_again_with_changes_is_quoted_once_citing_every_sending() -> None:
    task = "/ralph-loop Task: rename the GraphQL field deviceGroupID to siteID across the monorepo. " * 3
    said = [
        Said(task + "Scope: the portal only.", (3,)),
        Said("why did the permission check fail?", (5,)),
        Said(task + "Scope: the portal, the AI modules and core.", (9,)),
        Said(task + "Scope: the portal, the AI modules and core, and their tests.", (14,)),
    ]
    chosen = quotes(said, [], budget=8_000)
    assert [q.citation for q, _ in chosen] == ["[m5]", "[m3, m9, m14]"]
    newest, shown = chosen[-1]
    assert newest.text.endswith("and their tests.") and shown == len(newest.text)
    # Every sending's opening is still there, word for word.
    assert all(q.opening() in newest.text for q in (Quote(s.text, "") for s in said if s.seqs != (5,)))


def test_short_messages_said_again_cite_every_sending_and_different_long_ones_stay_apart() -> None:
    said = [Said("continue", (2,)), Said("fix the totals " + "x" * 200, (4,)), Said("continue", (6,))]
    said.append(Said("fix the tax " + "y" * 200, (8,)))
    chosen = quotes(said, [], budget=8_000)
    assert [q.citation for q, _ in chosen] == ["[m4]", "[m2, m6]", "[m8]"]


def test_a_message_said_again_in_another_case_is_quoted_as_typed_each_time() -> None:
    # "Pronto" quoted for "pronto" is not the user's words verbatim: only the very same text folds.
    said = [Said("pronto", (3,)), Said("continue", (5,)), Said("Pronto", (7,)), Said("pronto", (9,))]
    chosen = quotes(said, [], budget=8_000)
    assert [(q.text, q.citation) for q, _ in chosen] == [
        ("continue", "[m5]"),
        ("Pronto", "[m7]"),
        ("pronto", "[m3, m9]"),
    ]

"""The user's words in a summary stay readable when a quote is cut (issue 27, item 6).

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

from contextfold.compaction.extractive import build_summary
from contextfold.compaction.userwords import TAG_SLACK, Quote, clip_quote
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
    assert len(shown) <= max(limit, 1) + TAG_SLACK


def test_a_short_quote_and_one_cut_outside_markup_are_as_clip_cuts_them() -> None:
    assert clip_quote("restart the server", 100) == "restart the server"
    assert clip_quote("a b c d e f g h i j", 10) == "a b c d e…"


def test_a_tag_too_long_to_end_is_cut_before() -> None:
    text = "look at this: <div " + "data-x='1' " * 60 + "> hello"
    shown = clip_quote(text, 40)
    assert shown == "look at this:…"


def test_a_message_opening_with_a_long_tag_ends_it() -> None:
    text = '<td class="' + "cell " * 80 + '">The name column is too narrow, fix its width</td>'
    shown = clip_quote(text, 100)
    assert not _open_tag_left(shown)
    assert shown.rstrip("…").endswith('">')


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

"""How `bench_compaction.py` reports recall (issue 27): per project, per half of the projects (the
generalisation check), the worst cuts with what they missed and whether it was knowable.

Made-up cut records only: the report's arithmetic and its rules, not a corpus run.
"""

from __future__ import annotations

import json
from typing import Any

import bench_compaction as bench
import pytest
from _recall import CutMeasure, Noise, Share


def cut(transcript: str, k: int, wanted: int, missed: tuple[str, ...], agent: bool = False) -> bench.CutRecord:
    facts = tuple(f"fact_{i}" for i in range(wanted - len(missed))) + missed
    measure = CutMeasure(k, Share(facts, missed), Share(("do it",), ()), Share((), ()))
    record = bench.CutRecord(transcript, "real" if agent else "40%", k, measure, 1_000, Noise(("a_b", "x"), ("x",)))
    if agent:
        record.agent = CutMeasure(k, Share(facts, facts[:1]), Share(("do it",), ()), Share((), ()))
        record.agent_tokens = 2_000
    return record


def projects_in_each_half() -> tuple[str, str]:
    names = [f"project-{i}" for i in range(20)]
    return next(n for n in names if bench.half_of(n) == "A"), next(n for n in names if bench.half_of(n) == "B")


def test_projects_split_in_two_fixed_halves_by_their_names_hash() -> None:
    names = [f"project-{i}" for i in range(20)]
    halves = [bench.half_of(n) for n in names]
    assert set(halves) == {"A", "B"}
    assert halves == [bench.half_of(n) for n in names]  # the same on every run and machine
    assert bench.project_of("claude-code-spotter/…4/agent-afc096d") == "claude-code-spotter"


def test_each_project_each_half_and_all_are_reported_with_the_gap() -> None:
    a, b = projects_in_each_half()
    records = [
        cut(f"{a}/one", 10, 10, ()),
        cut(f"{a}/one", 20, 10, ("late_name",), agent=True),
        cut(f"{b}/two", 10, 10, ("x_1", "x_2", "x_3")),
    ]
    rows, notes = bench.project_rows(records)
    by_name = {row["project"]: row for row in rows}
    assert [row["project"] for row in rows] == [a, b, "half A", "half B", "all"]
    assert by_name[a]["recall"] == "95% (19/20)" and by_name[a]["real cuts"] == 1
    assert by_name[a]["agent recall"] == "90% (9/10)" and by_name[a]["tokens at real"] == "1,000"
    assert by_name[b]["recall"] == "70% (7/10)" and by_name[b]["cuts < 80%"] == 1
    assert by_name["all"]["recall"] == "87% (26/30)"
    assert by_name["all"]["noise"] == "50.0% (3/6)"
    assert "Pooled recall A 95.0%, B 70.0%: gap +25.0 points" in notes[0]


def test_the_worst_cuts_say_whether_a_miss_was_knowable_and_name_it_only_under_a_licence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = projects_in_each_half()
    worst = cut(f"{a}/one", 20, 4, ("parser.py", "load_rows"))
    worst.before = {"parser.py": ("shown", 120), "load_rows": ("used", 3)}
    fine = cut(f"{b}/two", 20, 4, ("util.py",))
    fine.before = {"util.py": ("used", 9)}
    monkeypatch.setattr(bench, "licensed_source", lambda project: project == b)
    rows = bench.worst_rows([fine, worst, cut(f"{b}/two", 30, 4, ())])
    assert [(r["transcript"], r["recall"]) for r in rows] == [(f"{a}/one", "50%"), (f"{b}/two", "75%")]
    assert rows[0]["knowable (used before)"] == "1/2"
    # No licence: the kind of name, not the name.
    assert rows[0]["what"] == "file (shown, 120 msgs before); identifier (used, 3 msgs before)"
    assert rows[1]["what"] == "util.py (used, 9 msgs before)"


def test_provenance_tells_a_name_used_before_the_cut_from_one_only_shown() -> None:
    def call(call_id: str, command: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }

    messages = [
        {"role": "user", "content": "Fix the loader."},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "ls src")]},
        {"role": "tool", "tool_call_id": "c1", "content": "loader.py\nparser.py"},
        {"role": "assistant", "content": "", "tool_calls": [call("c2", "cat src/loader.py")]},
        {"role": "tool", "tool_call_id": "c2", "content": "def load(): ..."},
        {"role": "assistant", "content": "Now the parser."},
    ]
    assert bench.provenance(messages, 5, ["loader.py", "parser.py", "other.py"]) == {
        "loader.py": ("used", 2),
        "parser.py": ("shown", 3),
    }


def test_the_hooks_benchmark_tunes_and_holds_out_the_same_halves_as_the_compaction_benchmark() -> None:
    import bench_hooks
    from _handover import Replayed

    a, b = projects_in_each_half()

    def replayed(project: str, kept: int) -> Replayed:
        facts = tuple(f"fact_{i}" for i in range(4))
        measure = CutMeasure(10, Share(facts, facts[kept:]), Share((), ()), Share((), ()))
        return Replayed(project[-6:], project, 0, 10, "", "", "", 0, 0, 0, measure, measure, measure, {})

    notes = bench_hooks.summary_notes([replayed(a, 4), replayed(b, 2)])
    assert any(n.startswith(f"Projects tuned on (half A) (1: {a};") for n in notes), notes
    assert any(n.startswith(f"Projects held out (half B) (1: {b};") for n in notes), notes
    assert any(n.startswith("Generalisation gap (+ handover, tuned on − held out): +50.0%") for n in notes), notes

"""`contextfold show SESSION --breakdown`: the tokens in view by category, as a table and as JSON,
adding up to what `stats` reports, run as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import _ui
from test_cli import run


def test_breakdown_json_sums_to_stats_and_the_table_shows_every_category(tmp_path: Path):
    home = tmp_path / "home"
    _ui.demo_session(home)
    _ui.spill_session(home)
    for session in ("demo", "harness-spill"):
        shown = run(home, "show", session, "--breakdown", "--json")
        assert shown.returncode == 0, shown.stderr
        breakdown = json.loads(shown.stdout)
        stats = json.loads(run(home, "stats", session, "--json").stdout)
        assert sum(c["tokens"] for c in breakdown["categories"]) == stats["tokens_in_view"]
        assert breakdown["usable"] == stats["usable"]
    names = {c["name"]: c["tokens"] for c in breakdown["categories"]}
    assert names["spilled_previews"] > 0  # the harness session's 40,000-line build log

    table = run(home, "show", "demo", "--breakdown")
    assert table.returncode == 0, table.stderr
    for label in ("System prompt", "Tool definitions", "Summary", "Previews of spilled outputs", "Total in view"):
        assert label in table.stdout
    assert "not recorded" in table.stdout  # tool definitions: contextfold is not told them


def test_json_without_breakdown_and_an_unknown_session_are_one_line_errors(tmp_path: Path):
    home = tmp_path / "home"
    _ui.spill_session(home)
    wrong = run(home, "show", "harness-spill", "--json")
    assert wrong.returncode == 2 and "--json goes with --breakdown" in wrong.stderr
    missing = run(home, "show", "nope", "--breakdown")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1

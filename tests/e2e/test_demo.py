"""The demo's story (issue 13), checked on what a user sees: `contextfold demo` run as a subprocess
in an 80-column terminal, its tables and panels read back from the text.

The story: the huge tool output is spilled and read back, a prune frees tokens, the compaction
keeps the latest request and what followed verbatim, the whole summary is shown, every line fits
80 columns, two runs print the same thing, and claude-sonnet-4-5 (a 200k window) tells the same
story rather than starting in overflow.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contextfold.compaction.template import PROGRESS, PROGRESS_PARTS, SECTIONS

LATEST_REQUEST = "<pr_description>"
"""How the user's task begins: the request the compaction must keep in view (issue 27: not
mini-swe-agent's format nag, the transcript's last user-role message)."""
NAG = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."


def run_demo(home: Path, *args: str, columns: int = 80) -> str:
    env = {**os.environ, "CONTEXTFOLD_HOME": str(home), "COLUMNS": str(columns)}
    env.pop("ANTHROPIC_API_KEY", None)  # the offline summarizer, so every run writes the same summary
    out = subprocess.run(
        [sys.executable, "-m", "contextfold", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert not (home / "contextfold.db").exists()  # the demo leaves the real home alone
    return out.stdout


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    return run_demo(tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> str:
    return run_demo(tmp_path_factory.mktemp("home"), "--model", "claude-sonnet-4-5")


# -- reading rich output back ----------------------------------------------------------------------


def panel(text: str, title: str) -> list[str]:
    """The body lines of the first box whose top border holds `title`, frame stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("╭") and title in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return [line[2:-2].rstrip() for line in lines[start + 1 : end]]


def table(text: str, title: str) -> list[list[str]]:
    """The body rows of the first table whose title line holds `title`, as stripped cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line and not line.startswith(("│", "╭")))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("└"):
            return rows
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    raise AssertionError(f"table {title!r} has no end")


def number(cell: str) -> int:
    return int(cell.replace(",", "").rstrip("%"))


# -- the story ---------------------------------------------------------------------------------------


def check_spill_and_prune(text: str) -> None:
    hint = " ".join(panel(text, "spilled output's preview"))
    assert re.search(r"Full output saved as out_\w+ — call read_output\(id=", hint), hint
    tail = panel(text, "read_output(id, offset=16585, limit=3) of 16,587 lines")
    assert tail[-1].startswith("16587") and "def prepare_auth" in tail[-2]
    found = panel(text, "read_output(id, pattern='def prepare_auth', context=1): 2 matches")
    assert sum(":" in line and "def prepare_auth" in line for line in found) == 2

    steps = {row[0]: row for row in table(text, "Back under budget")}
    replay_end, pruned, compacted = (
        steps["end of the replay"],
        steps["prune, keep 10 tool uses"],
        steps[next(step for step in steps if step.startswith("compact"))],
    )
    assert replay_end[4] == "overflow"
    # The prune frees what the view loses; before, the 20,000-token minimum outweighed it.
    assert number(pruned[1]) > 0 and number(pruned[2]) == number(replay_end[2]) - number(pruned[1])
    assert number(compacted[1]) > 0 and compacted[4] == "ok"


def check_tail(text: str) -> None:
    rows = table(text, "What the model sees now")
    notes = [row[2] for row in rows]
    summary = notes.index("summary (below)")
    latest = notes.index("latest request")
    assert latest > summary and rows[latest][0] == "user"
    assert LATEST_REQUEST.startswith(rows[latest][1].rstrip("…"))
    nags = [row for row in rows if NAG.startswith(row[1].rstrip("…"))]
    assert nags and all(row[2] == "harness text" for row in nags), nags
    kept = int(re.search(r"the tail: (\d+) messages kept as they were", text).group(1))
    assert kept > 1  # the request and the work that followed it


def test_the_output_is_spilled_and_read_back_and_a_prune_frees_tokens(gpt: str):
    check_spill_and_prune(gpt)


def test_compaction_keeps_the_latest_request_and_what_followed(gpt: str):
    check_tail(gpt)


def test_the_whole_summary_is_shown(gpt: str):
    body = panel(gpt, "the anchored summary")
    headings = [line for line in body if line.startswith("#")]
    expected = [f"## {name}" for name in SECTIONS if name not in PROGRESS_PARTS]
    expected.insert(2, f"## {PROGRESS}")
    expected[3:3] = [f"### {name}" for name in PROGRESS_PARTS]
    assert headings == expected, headings
    # Every section holds at least one bullet, `(none)` included: nothing is cut after a heading.
    for index, line in enumerate(body):
        if line.startswith("#") and line != f"## {PROGRESS}":
            assert body[index + 1].startswith("- "), (line, body[index + 1 : index + 3])
    # The goal names the user's task by its opening and citation; Constraints quotes it whole, not a
    # line cut at 110 characters.
    goal = " ".join(body[1 : body.index("")])
    assert goal.startswith("- Consider the following PR description") and "[m" in goal, goal
    start = body.index("## Constraints & Preferences")
    constraints = " ".join(body[start + 1 : body.index("", start)])
    assert "For example http://amazon.com returns 503" in constraints


def test_every_line_fits_80_columns_and_the_header_is_not_broken_by_hand(gpt: str):
    too_wide = [line for line in gpt.splitlines() if len(line) > 80]
    assert too_wide == []
    header = panel(gpt, "contextfold demo")
    # Wrapped by rich at the panel's width: no line but the last stops short.
    assert all(len(line) >= 50 for line in header[:-1]), header
    assert "a 48,384-token window instead of its 128,000: 16,384 kept for the reply, 32,000 usable" in " ".join(header)


def test_two_runs_print_the_same_story_in_any_terminal(gpt: str, tmp_path: Path):
    # Seeded ids (a spilled output's id is counted in the view) and a layout of at most 80
    # columns: a second run, in a wider terminal, prints the very same text, numbers included.
    assert run_demo(tmp_path, columns=132) == gpt


def test_claude_tells_the_same_story(claude: str):
    header = " ".join(panel(claude, "contextfold demo"))
    assert "a 64,000-token window instead of its 200,000: 32,000 kept for the reply, 32,000 usable" in header
    rows = table(claude, "Tokens in view as the session grows")
    states = {int(row[0]): row[4] for row in rows}
    assert states[30] == "ok"  # before, claude's 32,000-token reply reserve left 16,000: overflow by turn 30
    order = ["ok", "soft", "hard", "overflow"]
    assert [s for i, s in enumerate(states.values()) if s not in list(states.values())[:i]] == order
    check_spill_and_prune(claude)
    check_tail(claude)


def test_the_readme_the_docs_and_the_picture_quote_the_numbers_the_demo_prints(gpt: str):
    # The README's picture and caption and the docs' home page describe this run: a change to what
    # compaction writes must bring them along (docs/img/demo.svg is rich's export of the output).
    root = Path(__file__).resolve().parents[2]
    pruned, compacted = (re.search(rf"│ {step}[^│]*│\s*([\d,]+) │\s*([\d,]+) │", gpt) for step in ("prune", "compact"))
    assert pruned and compacted, gpt
    summary = re.search(r"summarized in ([\d,]+) tokens", gpt)
    assert summary, gpt
    before, after = pruned.group(2), compacted.group(2)
    readme = " ".join((root / "README.md").read_text("utf-8").split())
    assert f"from {before} to {after} tokens](docs/img/demo.svg)" in readme
    index = " ".join((root / "docs" / "index.md").read_text("utf-8").split())
    assert f"brings {before} tokens down to {after}: the 63 older messages become a {summary.group(1)}-token" in index
    picture = (root / "docs" / "img" / "demo.svg").read_text("utf-8").replace("&#160;", " ")
    assert after in picture and f"summarized in {summary.group(1)} tokens" in picture

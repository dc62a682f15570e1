"""The handover's budget after Claude Code's compaction follows the session (issue 27, item 3).

Each hook runs as its own `contextfold hook claude-code EVENT` process, as Claude Code runs it, on
transcripts in Claude Code's format whose responses report how many tokens each call read. What
every call reads (the smallest report) stays in view after the compaction; the handover takes a
share of the room that leaves (`hook_context_room_share`), at most `hook_context_tokens`, at least
`hook_context_min_tokens`. SessionStart, blind to the summary, gives `sizing.START_SHARE` of it;
PostCompact measures what Claude Code's summary lacks and the next prompt gets that, within the rest.
"""

from __future__ import annotations

from pathlib import Path

from _agent_events import ClaudeTranscript, run_hook

from contextfold.hooks import sizing
from contextfold.tokens.counting import counter_for

CLAUDE = counter_for("claude")
_VERBS = "parse load render store fetch check merge split index route track queue sign sync scan build trim wrap post mark".split()
_NOUNS = "invoice order cart user token report ledger batch refund coupon review ticket shipment quote badge alert profile draft audit memo".split()
HANDLERS = [f"{verb}_{noun}" for noun in _NOUNS for verb in _VERBS]
"""400 handler names of words, not a numbered run (the working set folds a run into one entry)."""
NAMES = len(HANDLERS)
USABLE = 168_000
"""Claude's usable window as contextfold counts it (200,000 less 32,000 for output)."""


def busy_session(tmp_path: Path, name: str, reported: int) -> ClaudeTranscript:
    """A session that edits two files and greps for 400 handler names: more than any budget here holds."""
    t = ClaudeTranscript(tmp_path / f"{name}.jsonl", cwd="/w", reported_input=reported)
    t.user("Rename every handler to the new scheme; keep the old names as aliases.")
    t.tool("Edit", {"file_path": "/w/src/router.py", "old_string": "a", "new_string": "b"}, "ok")
    t.tool("Edit", {"file_path": "/w/src/aliases.py", "old_string": "a", "new_string": "b"}, "ok")
    for i in range(NAMES):
        t.tool(
            "Bash",
            {"command": f"grep -rn {HANDLERS[i]} src/"},
            f"src/{_NOUNS[i // len(_VERBS)]}/handlers/{HANDLERS[i]}s.py:3: def {HANDLERS[i]}(): pass",
        )
    return t


def start(home: Path, t: ClaudeTranscript, env: dict[str, str] | None = None) -> str:
    run_hook(home, "claude-code", "PreCompact", t.event("PreCompact", trigger="auto", custom_instructions=None))
    run = run_hook(home, "claude-code", "SessionStart", t.event("SessionStart", source="compact"), env=env)
    assert run.code == 0 and run.context, run.stderr
    assert not (home / "hooks" / "hooks.log").exists()
    return run.context


def test_more_room_after_the_compaction_gives_a_bigger_handover_up_to_the_cap(tmp_path: Path) -> None:
    sizes = {}
    for reported in (150_000, 110_000, 70_000, 20_000):
        t = busy_session(tmp_path, f"s{reported}", reported)
        sizes[reported] = CLAUDE.count(start(tmp_path / f"home{reported}", t))
    # What the window can spare after the compaction, as the hook estimates it, and its share.
    expected = {
        reported: sizing.start_budget(
            min(8_000, max(500, int(sizing.Room(USABLE, reported, sizing.SUMMARY_ESTIMATE).free * 0.05))), 500
        )
        for reported in sizes
    }
    assert expected[150_000] == 500 and expected[110_000] < expected[70_000] < expected[20_000]
    for reported, size in sizes.items():
        # Names of one directory share a bullet, so the last bullet that fits may leave a sixth unused.
        assert expected[reported] * 0.8 <= size <= expected[reported], (reported, size, expected[reported])
    capped = busy_session(tmp_path, "capped", 20_000)
    size = CLAUDE.count(start(tmp_path / "capped-home", capped, {"CONTEXTFOLD_HOOK_CONTEXT_TOKENS": "2000"}))
    assert 1_400 <= size <= int(2_000 * sizing.START_SHARE)  # the cap bounds it
    floor = busy_session(tmp_path, "floor", 150_000)
    size = CLAUDE.count(start(tmp_path / "floor-home", floor, {"CONTEXTFOLD_HOOK_CONTEXT_MIN_TOKENS": "1200"}))
    assert 1_000 <= size <= 1_200  # a crowded window still gets the floor


def test_the_next_prompt_gets_what_the_summary_lacks_within_the_rest_of_the_budget(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = busy_session(tmp_path, "s", 20_000)
    env = {"CONTEXTFOLD_HOOK_CONTEXT_TOKENS": "3000"}
    first = start(home, t, env)
    # Claude Code's summary names one edited file and a handler the first handover did not reach.
    lacking = [name for name in HANDLERS if name not in first]
    assert lacking, "the first handover held every name: the test checks nothing"
    summary = f"Renaming handlers in /w/src/router.py; `{lacking[0]}` is next."
    post = run_hook(
        home, "claude-code", "PostCompact", t.event("PostCompact", trigger="auto", compact_summary=summary), env=env
    )
    assert (post.code, post.stdout) == (0, "")
    later = run_hook(home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="go on"), env=env)
    text = later.context or ""
    assert text, "the summary lacks names the first handover had no room for"
    assert "router.py" not in text and lacking[0] not in text  # the summary holds them
    given = {line for line in first.splitlines() if line.startswith("- ") and not line.startswith("- (")}
    assert not given & set(text.splitlines())  # nor what the first handover gave (its items; not a note)
    assert CLAUDE.count(first) + CLAUDE.count(text) <= 3_000  # both parts within the budget
    assert any(name in text for name in lacking[1:])


def test_a_summary_holding_everything_leaves_the_next_prompt_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    t = ClaudeTranscript(tmp_path / "small.jsonl", cwd="/w")
    t.user("Fix the typo in the README.")
    t.tool("Read", {"file_path": "/w/README.md"}, "# Projet\nA tool.\n")
    t.tool("Edit", {"file_path": "/w/README.md", "old_string": "Projet", "new_string": "Project"}, "ok")
    first = start(home, t)
    assert CLAUDE.count(first) < 500  # a small session's handover is small: nothing fills the budget
    summary = "The user asked: Fix the typo in the README. Fixed `Projet` in /w/README.md; nothing is left to do."
    run_hook(home, "claude-code", "PostCompact", t.event("PostCompact", trigger="auto", compact_summary=summary))
    later = run_hook(home, "claude-code", "UserPromptSubmit", t.event("UserPromptSubmit", prompt="thanks"))
    assert (later.code, later.stdout) == (0, "")

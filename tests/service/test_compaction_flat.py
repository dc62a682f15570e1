"""Issue 15: extractive compaction stays flat as a session ages.

A session compacted again and again keeps a summary of bounded size (each section capped when the
previous summary is merged in) that still holds what pins guarantee: the newest request, the
newest rules, the files the summarized history edited. And merging or deduplicating bullets costs
the same per bullet however many there are: checked by counting the calls the interpreter makes
(a deterministic measure), not by timing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.compaction.extractive import SECTION_CAPS, build_summary
from contextfold.compaction.facts import MAX_EDITED_FILES
from contextfold.compaction.pins import MAX_PINNED_CONSTRAINTS, names_file
from contextfold.compaction.template import (
    CONSTRAINTS,
    DONE,
    FILES,
    GOAL,
    SECTIONS,
    Summary,
    missing_sections,
    parse_summary,
    strip_citations,
)
from contextfold.compaction.workingset import listed
from contextfold.config import load_settings
from contextfold.domain import Message, TextPart
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import counter_for

COUNTER = counter_for("gpt-4o")
EDITS = 12
"""Files each stretch of work edits (and as many commands it runs); half as many it only reads."""
COMPACTIONS = 10


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def edited(stretch: int, index: int) -> str:
    return f"/repo/module{stretch}/src/part_{index}.py"


def request(stretch: int) -> str:
    return f"Port module {stretch} to the new storage API."


def rule(stretch: int) -> str:
    return f"Never touch the legacy adapter of module {stretch}."


def work(stretch: int) -> list[dict[str, Any]]:
    """One user turn of Claude Code-shaped work on module `stretch`: edits, commands, reads, a
    decision now and then, and a closing reply; about 20k tokens."""
    filler = "\n".join(f"{stretch:02d}:{line:03d} value={line * 7 + stretch} status=ok" for line in range(60))
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"{request(stretch)} {rule(stretch)}"}]
    for index in range(EDITS):
        calls = [
            (
                _call(
                    f"e{stretch}_{index}",
                    "Edit",
                    {"file_path": edited(stretch, index), "old_string": "a", "new_string": "b"},
                ),
                f"The file {edited(stretch, index)} has been updated.\n{filler}",
            ),
            (_call(f"b{stretch}_{index}", "Bash", {"command": f"make check-{stretch}-{index}"}), f"ok\n{filler}"),
        ]
        if index % 2 == 0:
            path = f"/repo/module{stretch}/docs/notes_{index}.md"
            calls.append((_call(f"r{stretch}_{index}", "Read", {"file_path": path}), filler))
        text = f"I'll use the streaming codec for part {index} of module {stretch}." if index % 3 == 0 else ""
        messages.append({"role": "assistant", "content": text, "tool_calls": [c for c, _ in calls]})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": out} for c, out in calls]
    messages.append(
        {"role": "assistant", "content": f"Module {stretch} is ported.\n\nNext steps:\n- Review module {stretch}"}
    )
    return messages


@pytest.mark.anyio
async def test_ten_compactions_keep_the_summary_bounded_and_the_newest_facts(tmp_path: Path) -> None:
    async with await ContextService.open(load_settings({"home": tmp_path}, environ={})) as svc:
        session = (await svc.open_session(model="gpt-4o")).session_id
        sizes = []
        done_full: list[bool] = []
        done_counts: list[int] = []
        for stretch in range(COMPACTIONS):
            await svc.append(session, work(stretch), format="openai")
            result = await svc.compact(session, summarizer="extractive")
            assert result.compacted and result.summarizer == "extractive"
            assert result.pinned == []  # the caps never drop what pins would have to add back
            text = await svc.summary_text(session)
            summary = parse_summary(text)
            assert missing_sections(text) == []
            for name, cap in SECTION_CAPS.items():
                # The working set's lists (issue 16) are bounded by their share of the budget, not by the cap;
                # edited files are carried past the cap, up to MAX_EDITED_FILES (issue 24: none is lost).
                bullets = [b for b in summary[name] if name != FILES or listed(b) is None]
                edits = [b for b in bullets if name == FILES and " — edited" in b]
                assert len(bullets) - len(edits) <= cap, (stretch, name, summary[name])
                assert len(edits) <= MAX_EDITED_FILES, (stretch, name, summary[name])
            assert len(summary[CONSTRAINTS]) <= MAX_PINNED_CONSTRAINTS
            sizes.append(result.summary_tokens)
            done_full.append(len(summary[DONE]) == SECTION_CAPS[DONE])
            done_counts.append(len(summary[DONE]))

            # The goal as first stated, and the newest request and rule.
            assert strip_citations(summary[GOAL][0]) == f"{request(0)} {rule(0)}"
            if stretch:
                assert strip_citations(summary[GOAL][-1]) == f"Latest request: {request(stretch)} {rule(stretch)}"
            assert rule(stretch) in summary[CONSTRAINTS][-1]  # quoted with the request (issue 16)
            # The files this stretch edited in the part summarized (its first ones, the tail keeps
            # its end), every file the previous stretch edited, and a file only read stays only
            # while every file edited before is still there (edits outlast reads).
            # Paths under the root Critical Context states are written relative to it.
            files = "\n".join(b for b in summary[FILES] if listed(b) is None)
            assert all(names_file(summary, edited(stretch, i)) for i in range(4)), files
            assert all(
                names_file(summary, edited(s, i)) for s in range(max(0, stretch - 1), stretch) for i in range(EDITS)
            )
            if "/docs/" in files:
                assert all(names_file(summary, edited(s, i)) for s in range(stretch) for i in range(EDITS)), files
        # Flat: once its sections are full, the summary stops growing; only the newest requests, one
        # per stretch, still add a line each. Done fills last (a bullet per stretch of work, issue 16),
        # up to its cap or to its room in the account's share of the budget (issue 27).
        full = done_full.index(True) if any(done_full) else COMPACTIONS // 2
        assert any(done_full) or len(set(done_counts[full:])) == 1, done_counts
        assert full < COMPACTIONS - 1 and max(sizes[full:]) <= 1.1 * sizes[full], sizes


# -- linear merging ------------------------------------------------------------------------------


class _TooMany(Exception):
    pass


def calls_made(work: Callable[[], object], limit: int) -> int:
    """How many function calls (Python and built-in) `work` makes; raises `_TooMany` past `limit`,
    so a quadratic implementation fails at once instead of running for minutes."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1
            if count > limit:
                raise _TooMany(f"more than {limit:,} calls")

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


BULLETS = 10_000
PER_FILE = 500
"""Calls allowed per distinct file path: compiling the pattern that finds it in a summary."""
PER_BULLET = 40
"""Calls allowed per bullet: a constant. A list scan for duplicates makes thousands per bullet at
this size (it normalizes every bullet already held)."""


def test_summary_add_is_linear() -> None:
    summary = Summary()

    def fill() -> None:
        for index in range(BULLETS):
            assert summary.add(DONE, f"Edited  `src/module_{index}.py`")
        for index in range(BULLETS):  # the same bullets again, case and spacing changed: all refused
            assert not summary.add(DONE, f"edited `SRC/module_{index}.py` ")

    calls = calls_made(fill, PER_BULLET * 2 * BULLETS)
    assert len(summary[DONE]) == BULLETS and summary[DONE][0] == "Edited `src/module_0.py`"
    assert calls <= PER_BULLET * 2 * BULLETS


def test_merging_a_huge_previous_summary_is_linear_and_capped() -> None:
    """A previous summary of 10,000 bullets (say, from a model that never trims) is parsed, merged
    and capped in time linear in its size, and the result is back within the caps."""
    previous = Summary()
    for index in range(BULLETS):
        previous.add(DONE, f"Ran `make target-{index}`")
        if index % 10 == 0:
            previous.add(FILES, f"/repo/src/file_{index}.py — edited (Edit)")
    previous.add(GOAL, "Port the importer to streaming")
    markdown = previous.render()
    head = [Message(role="user", parts=[TextPart(text="Now make the tests pass.")])]
    out: list[str] = []

    def merge() -> None:
        out.append(build_summary(head, previous=markdown, counter=COUNTER, budget_tokens=6_000))

    # Building the tokenizer and compiling fixed patterns happen once per process: a small summary
    # of the same shape pays for them first. Each carried edited file's path is matched with a
    # pattern of its own, compiled once per path (PER_FILE calls): linear in the files too.
    small = Summary()
    small.add(DONE, "Ran `make target`")
    small.add(FILES, "/repo/src/file.py — edited (Edit)")
    build_summary(head, previous=small.render(), counter=COUNTER, budget_tokens=6_000)

    calls_made(merge, PER_BULLET * 2 * BULLETS + PER_FILE * len(previous[FILES]))
    merged = parse_summary(out[0])
    # Every previous Relevant File is an edit: those are carried past the section's cap, shortened
    # to their path, up to MAX_EDITED_FILES, the newest kept.
    caps = {**SECTION_CAPS, FILES: MAX_EDITED_FILES}
    assert [len(merged[name]) for name in SECTIONS if name in SECTION_CAPS] == [
        min(caps[name], len(previous[name]) + (name == GOAL)) for name in SECTIONS if name in SECTION_CAPS
    ]
    assert merged[GOAL] == ["Port the importer to streaming", "Latest request: Now make the tests pass."]
    # The newest bullets of a section are the ones kept.
    assert merged[DONE] == previous[DONE][-SECTION_CAPS[DONE] :]
    assert merged[FILES] == [b.removesuffix(" (Edit)") for b in previous[FILES][-MAX_EDITED_FILES:]]
    assert COUNTER.count(out[0]) <= 6_000

"""How much work reading a Claude Code file costs, counted, not timed (issue 26, item 15).

A compaction's `compact_boundary` names the record before it in `logicalParentUuid`; when that
record was never written, the thread continues from the newest earlier record. Looking that record
up by scanning back from the end made a file of many such boundaries quadratic: 20k records took
2.6 s, 80k 135 s, near the PreCompact hook's timeout. The work is counted here as the Python lines
and calls the thread module runs (a trace), which does not depend on the machine's speed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from contextfold.importers import claude_code_thread, load_transcript
from contextfold.importers.base import iter_jsonl

BASE = {"isSidechain": False, "sessionId": "s", "version": "2.1.39", "cwd": "/r", "timestamp": "t"}


def dangling_boundaries(path: Path, records: int) -> Path:
    """A session of `records` records where every fourth is a compact boundary whose logical parent
    was never written (the shape the red team's file had)."""
    lines: list[str] = []
    parent: str | None = None
    for i in range(records):
        if i % 4 == 3:
            uuid = f"b{i}"
            record = {
                **BASE,
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": uuid,
                "parentUuid": None,
                "logicalParentUuid": f"never-written-{i}",
                "compactMetadata": {"trigger": "auto", "preTokens": 1000},
            }
        elif i % 2 == 0:
            uuid = f"u{i}"
            record = {
                **BASE,
                "type": "user",
                "uuid": uuid,
                "parentUuid": parent,
                "message": {"role": "user", "content": f"step {i}"},
            }
        else:
            uuid = f"a{i}"
            message = {
                "role": "assistant",
                "id": f"m{i}",
                "model": "m",
                "content": [{"type": "text", "text": f"ok {i}"}],
            }
            record = {**BASE, "type": "assistant", "uuid": uuid, "parentUuid": parent, "message": message}
        parent = uuid
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def thread_work(path: Path) -> int:
    """Lines and calls run inside `claude_code_thread` while it picks the thread of `path`."""
    records = list(iter_jsonl(path))
    steps = 0
    module = claude_code_thread.__file__

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        if frame.f_code.co_filename != module:
            return None
        steps += 1
        return trace

    sys.settrace(trace)
    try:
        claude_code_thread.select_thread(records)
    finally:
        sys.settrace(None)
    return steps


def test_dangling_compaction_boundaries_cost_linear_work(tmp_path: Path) -> None:
    # The old lookup: 196,563 → 643,063 → 2,286,063 steps for 1k → 2k → 4k records (×3.3, ×3.6).
    work = [thread_work(dangling_boundaries(tmp_path / f"{n}.jsonl", n)) for n in (1_000, 2_000, 4_000)]
    assert work[1] <= 2.1 * work[0] and work[2] <= 2.1 * work[1], work
    assert work[2] <= 200 * 4_000, work  # about a hundred steps a record, whatever the size


def test_dangling_boundaries_still_continue_from_the_record_before(tmp_path: Path) -> None:
    transcript = load_transcript(dangling_boundaries(tmp_path / "s.jsonl", 400), "claude-code")
    # Every user and assistant record is on the thread: 3 of every 4 records.
    assert len(transcript.messages) == 300
    assert transcript.skipped == {}

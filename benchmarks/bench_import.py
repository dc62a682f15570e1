"""Importing a growing Claude Code transcript again: only what it appended is read.

What is measured, on a generated ~10 MB Claude Code session file (records shaped like the real
ones: `parentUuid` chains, progress records, tool calls with 3 KB outputs):

- importing the whole file into a new session;
- importing it again into the same session, unchanged (nothing new: the prefix is only hashed);
- importing it again after 25 more turns were appended (the hooks' case: at each compaction);
- for scale, reading (parsing, not storing) the whole grown file, which a re-import from the
  start would cost on top of storing every message a second time.

Why: issue 13 asks that a 10 MB transcript not be re-read from the start at each import.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from _harness import Options, mib, ms, options, report, run, timed, timed_async

from contextfold.config import load_settings
from contextfold.importers import load_transcript
from contextfold.service.facade import ContextService

OUTPUT = "".join(f"{i:>5}  def handler_{i}(request):  return respond(request, status=200)\n" for i in range(48))


def _turn(i: int, parent: str | None) -> list[dict[str, Any]]:
    base = {"isSidechain": False, "sessionId": "bench", "version": "2.1.39", "cwd": "/repo", "timestamp": "t"}
    u, a, p, r, b = (f"{i}-{k}" for k in "uaprb")
    usage = {"input_tokens": 1, "cache_read_input_tokens": 1000 + i, "output_tokens": 40}

    def assistant(uuid: str, parent_id: str, blocks: list[dict[str, Any]], msg: str) -> dict[str, Any]:
        message = {"model": "claude-opus-4-6", "id": msg, "role": "assistant", "content": blocks, "usage": usage}
        return {**base, "type": "assistant", "uuid": uuid, "parentUuid": parent_id, "message": message}

    return [
        {**base, "type": "user", "uuid": u, "parentUuid": parent, "message": {"role": "user", "content": f"step {i}"}},
        assistant(
            a, u, [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"/src/{i}.py"}}], f"m{i}"
        ),
        {**base, "type": "progress", "uuid": p, "parentUuid": a, "data": {"type": "hook_progress"}},
        {
            **base,
            "type": "user",
            "uuid": r,
            "parentUuid": p,
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": OUTPUT}],
            },
        },
        assistant(b, r, [{"type": "text", "text": f"Read /src/{i}.py: {i} handlers."}], f"n{i}"),
    ]


def _lines(first: int, count: int) -> str:
    records: list[dict[str, Any]] = []
    for i in range(first, first + count):
        records += _turn(i, f"{i - 1}-b" if i else None)
    return "".join(json.dumps(r) + "\n" for r in records)


async def main(opts: Options) -> None:
    turns = 60 if opts.quick else 2_200
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        path.write_text(_lines(0, turns), "utf-8")
        size = path.stat().st_size
        async with await ContextService.open(load_settings({"home": Path(tmp) / "home"}, environ={})) as service:
            counter = iter(range(1_000_000))
            whole, _ = await timed_async(
                lambda: service.import_transcript(path, session_id=f"s{next(counter)}"), repeat=1, warmup=0
            )
            again, result = await timed_async(
                lambda: service.import_transcript(path, session_id="s0"), repeat=opts.repeat
            )
            assert result.messages == 0
            with path.open("a", encoding="utf-8") as handle:
                handle.write(_lines(turns, 25))
            grown, result = await timed_async(
                lambda: service.import_transcript(path, session_id="s0"), repeat=1, warmup=0
            )
            assert result.messages == 25 * 3 and result.already_imported_lines == turns * 5
        grown_size = path.stat().st_size
        parse, _ = timed(lambda: load_transcript(path), repeat=opts.repeat)
    rows = [
        {"case": "whole file, new session", "file": mib(size), "ms": ms(whole.median)},
        {"case": "same file again (nothing new)", "file": mib(size), "ms": ms(again.median)},
        {"case": "grown by 25 turns, again", "file": mib(grown_size), "ms": ms(grown.median)},
        {"case": "parse the whole grown file (for scale)", "file": mib(grown_size), "ms": ms(parse.median)},
    ]
    report(
        "import",
        "Importing a Claude Code transcript again reads only what it appended",
        rows,
        opts,
        notes=[f"{turns:,} turns ({turns * 5:,} records); medians of {opts.repeat} runs where repeated"],
    )


if __name__ == "__main__":
    run(main, options(__doc__ or ""))

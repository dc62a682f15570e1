"""Extractive compaction of every long corpus transcript, through the real service.

What is measured: each normalized corpus transcript over 100,000 bytes (the largest included) is
imported into a `ContextService` on a temporary SQLite home, then compacted with
`compact(summarizer="extractive")`: the offline, deterministic summarizer (SPEC §10) that every
other summarizer falls back to. Each run imports a fresh copy (not timed) and times the compaction
alone: selecting the tail, rendering the head, extracting the facts, writing the summary, pinning
and recording it. Reported per transcript: messages, tokens in view before and after, summary
tokens, head messages summarized, and the median compaction time.

Why: SPEC §15 lists extractive compaction of the largest corpus transcript among the numbers the
README quotes; it is what runs when no model is available, so it must stay fast on real sessions.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import CORPUS, Options, Timing, ms, options, report, run
from _sessions import synthetic_session, transcripts, write_normalized

from contextfold.config import load_settings
from contextfold.results import CompactResult
from contextfold.service import ContextService

MODEL = "gpt-4o"
LONG_BYTES = 100_000


async def compact_runs(svc: ContextService, path: Path, repeat: int) -> tuple[Timing, CompactResult, int]:
    """Import `path` and compact it, `repeat` times on fresh sessions; (compaction times, last result, messages)."""
    compactions = Timing()
    result: CompactResult | None = None
    messages = 0
    for i in range(repeat + 1):  # the first run warms up and is not counted
        imported = await svc.import_transcript(path, session_id=f"{path.stem[:60]}-{i}", format="normalized", model=MODEL)
        start = time.perf_counter()
        result = await svc.compact(imported.session_id, summarizer="extractive")
        compacted_in = time.perf_counter() - start
        messages = imported.messages
        if i:
            compactions.runs.append(compacted_in)
        await svc.delete_session(imported.session_id)
    assert result is not None
    return compactions, result, messages


def short(name: str, width: int = 16) -> str:
    """`agent/rest-of-name`, the rest cut to its last `width` characters (the distinguishing end)."""
    source, _, rest = name.removesuffix(".jsonl").partition("__")
    rest = rest.replace("__", "/")
    return f"{source}/{rest if len(rest) <= width else '…' + rest[-(width - 1):]}"


async def measure(files: Sequence[Path], opts: Options) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as home:
        async with await ContextService.open(load_settings({"home": Path(home)}, environ={})) as svc:
            for path in files:
                compactions, result, messages = await compact_runs(svc, path, opts.repeat)
                if not result.compacted or result.summarizer != "extractive":
                    raise AssertionError(f"{path.name}: not compacted by the extractive summarizer ({result})")
                rows.append(
                    {
                        "transcript": short(path.name),
                        "KB": f"{path.stat().st_size / 1000:,.0f}",
                        "msgs": f"{messages:,}",
                        "before": f"{result.tokens_before:,}",
                        "after": f"{result.tokens_after:,}",
                        "summary": f"{result.summary_tokens:,}",
                        "head": f"{result.head_messages:,}",
                        "compact ms": ms(compactions.median),
                    }
                )
    return rows


async def main(opts: Options) -> None:
    notes = []
    with tempfile.TemporaryDirectory(prefix="bench-compaction-data-") as scratch:
        files = transcripts(min_bytes=LONG_BYTES)
        if files:
            largest = files[-1]
            notes.append(
                f"Every normalized corpus transcript over {LONG_BYTES:,} bytes, model {MODEL} (exact o200k counts); "
                f"the largest is {largest.name}."
                + (" --quick: only the smallest of them." if opts.quick else "")
            )
            if opts.quick:
                files = files[:1]
        elif opts.quick:
            files = [write_normalized(synthetic_session(200), Path(scratch) / "synthetic.jsonl")]
            notes.append(f"The corpus is not at {CORPUS}: a generated 200-message session was compacted instead.")
        else:
            raise SystemExit(f"the corpus is not at {CORPUS} (set CONTEXTFOLD_CORPUS); --quick runs on generated data")
        rows = await measure(files, opts)
    notes += [
        f"compact ms: median of {opts.repeat} runs, each on a fresh import of the transcript (not timed; one "
        "warm-up run not counted).",
        "msgs: messages imported; before / after: tokens in view around the compaction; summary: tokens of "
        "the summary written; head: messages it replaced.",
    ]
    report(
        "compaction",
        "Extractive compaction of long corpus transcripts",
        rows,
        opts,
        notes=notes,
    )


if __name__ == "__main__":
    run(main, options(__doc__.splitlines()[0], repeat=5))

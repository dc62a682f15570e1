"""Handoff vs a full compaction: needed-later recall at no more tokens.

Each long normalized corpus transcript (over 100,000 bytes) is cut where `_recall.cut_points` cuts
it (40/60/80 %, and where the agent compacted). The first k messages are imported into a fresh
session; `handoff` writes its message with the budget a full compaction's view takes (summary plus
kept tail, as `get_context` counts it), then the session is compacted (extractive) and its view read.
Both are measured by `_recall.measure` against what the agent used later: needed-later recall,
pooled over every cut. Without the corpus (or with --quick) a generated session stands in.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from _harness import Options, options, report, run
from _recall import cut_points, seen_text
from _recall import measure as measure_cut
from _sessions import synthetic_session, transcripts, write_normalized
from bench_compaction import LONG_BYTES, MODEL, Transcript, original_of, prefix_body, read_transcript

from contextfold.config import load_settings
from contextfold.service.facade import ContextService


def _files(opts: Options) -> list[Path]:
    files = transcripts(min_bytes=LONG_BYTES)
    return files[:1] if opts.quick else files


def _label(index: int, transcript: Transcript) -> str:
    """A transcript by its number and agent only: the corpus's file names stay out of the results."""
    agent = next(
        (
            a
            for a in ("claude-code", "codex", "mini-swe-agent", "swe-agent", "openhands")
            if transcript.name.startswith(a)
        ),
        "other",
    )
    return f"#{index + 1} ({agent})"


async def _cut(svc: ContextService, transcript: Transcript, k: int, scratch: Path, label: str) -> dict[str, Any] | None:
    file = scratch / f"prefix-{k}.json"
    file.write_text(json.dumps(prefix_body(transcript, k), ensure_ascii=False), "utf-8")
    imported = await svc.import_transcript(file, format=transcript.format, model=MODEL)
    sid = imported.session_id
    system = [p["text"] for p in transcript.system]
    try:
        result = await svc.compact(sid, summarizer="extractive", dry_run=True)
        if result.summary is None:
            return None
        await svc.compact(sid, apply=result.token)
        full = await svc.get_context(sid, format="openai")
        budget = full.tokens - sum(svc.count_tokens(text=p["text"], model=MODEL).tokens + 4 for p in transcript.system)
        await svc.undo(sid, "compaction")
        handed = await svc.handoff(sid, tokens=max(300, budget))
    finally:
        await svc.delete_session(sid)
        file.unlink()
    ours = measure_cut(transcript.messages, k, seen_text(full.messages, full.system), system=system)
    theirs = measure_cut(transcript.messages, k, handed.text, system=system)
    return {
        "transcript": label,
        "k": f"{k}/{len(transcript.messages)}",
        "facts": len(ours.recall.wanted),
        "compaction recall": _pct(ours.recall.kept, len(ours.recall.wanted)),
        "compaction tokens": f"{full.tokens:,}",
        "handoff recall": _pct(theirs.recall.kept, len(theirs.recall.wanted)),
        "handoff tokens": f"{handed.tokens:,}",
        "_kept": (ours.recall.kept, theirs.recall.kept, len(ours.recall.wanted), full.tokens, handed.tokens),
    }


def _pct(kept: int, wanted: int) -> str:
    return "n/a" if not wanted else f"{kept / wanted:.0%}"


async def main(opts: Options) -> None:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        settings = load_settings(
            {"home": home, "summarizer": "extractive", "compaction_cooldown_seconds": 0}, environ={}
        )
        async with await ContextService.open(settings) as svc:
            files = _files(opts)
            loaded = [read_transcript(original_of(f), f.name) for f in files]
            if not loaded:
                generated = write_normalized(synthetic_session(400), Path(scratch) / "generated.jsonl")
                loaded = [read_transcript(generated, "generated/400")]
            for index, transcript in enumerate(loaded):
                cuts = sorted({k for k, _ in transcript.real} | {c.k for c in cut_points(transcript.messages)})
                for k in cuts[:1] if opts.quick else cuts:
                    row = await _cut(svc, transcript, k, Path(scratch), _label(index, transcript))
                    if row is not None:
                        rows.append(row)
    kept = [r.pop("_kept") for r in rows]
    wanted = sum(w for _, _, w, _, _ in kept)
    ours = sum(o for o, _, _, _, _ in kept)
    theirs = sum(t for _, t, _, _, _ in kept)
    over = sum(1 for _, _, _, full, hand in kept if hand > full)
    rows.append(
        {
            "transcript": f"pooled ({len(kept)} cuts)",
            "k": "",
            "facts": wanted,
            "compaction recall": _pct(ours, wanted),
            "compaction tokens": f"{sum(k[3] for k in kept):,}",
            "handoff recall": _pct(theirs, wanted),
            "handoff tokens": f"{sum(k[4] for k in kept):,}",
        }
    )
    notes = [
        "Needed-later recall (benchmarks/_recall.py) of the handoff message vs the view a full compaction "
        "(extractive) leaves, at each cut; the handoff's budget is that view's tokens less the system prompt, "
        f"so it never takes more. Cuts where the handoff took more tokens than the compaction: {over}.",
        f"Pooled: compaction {_pct(ours, wanted)}, handoff {_pct(theirs, wanted)} "
        f"({(theirs - ours) * 100 / wanted if wanted else 0:+.1f} points).",
    ]
    report("handoff", "Handoff vs full compaction: needed-later recall at no more tokens", rows, opts, notes=notes)


if __name__ == "__main__":
    run(main, options(__doc__.splitlines()[0], repeat=1))

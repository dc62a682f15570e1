"""Claude Code's real compactions replayed through `contextfold hook claude-code`.

For each raw Claude Code transcript that holds a compaction (a `system` record with subtype
`compact_boundary`, followed by the `isCompactSummary` user record Claude Code wrote), the JSONL is
cut just before the boundary and given to the hooks as Claude Code 2.1.197 would: PreCompact
(import) and then SessionStart with `source: "compact"` (the handover, the summary not yet known),
each as its own `contextfold hook` process on one data home. What the model then holds is Claude
Code's own summary plus contextfold's `additionalContext`; it is measured with `_recall.measure` at
the same cut as `bench_compaction`'s real compaction points (needed-later recall, the user's
instructions kept, edited files named), beside the summary alone.

Then PostCompact with the real summary and the next UserPromptSubmit: what the summary turned out
to lack beyond the first handover (usually nothing or a little), measured the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import CORPUS
from _recall import CutMeasure
from _recall import measure as measure_cut

sys.path.insert(0, str(Path(__file__).resolve().parent))


@dataclass(frozen=True)
class Replayed:
    name: str
    k: int
    summary: str
    context: str
    """What SessionStart(compact) added."""
    later: str
    """What UserPromptSubmit added after PostCompact."""
    context_tokens: int
    later_tokens: int
    summary_tokens: int
    alone: CutMeasure
    """Claude Code's summary alone."""
    with_context: CutMeasure
    """The summary and the SessionStart handover."""
    with_both: CutMeasure
    """… and what the next prompt got."""


def compacted_transcripts() -> list[Path]:
    """Raw Claude Code transcripts in the corpus that hold a real compaction."""
    root = CORPUS / "raw"
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        if "/subagents/" in str(path):
            continue
        with path.open(encoding="utf-8") as handle:
            if any('"compact_boundary"' in line for line in handle):
                found.append(path)
    return found


def contextfold_command() -> list[str]:
    script = Path(sys.executable).parent / "contextfold"
    return [str(script)] if script.exists() else [sys.executable, "-m", "contextfold"]


def hook(home: Path, event: str, payload: dict[str, Any]) -> str:
    """Run `contextfold hook claude-code EVENT` as Claude Code would; its stdout's additionalContext."""
    done = subprocess.run(
        [*contextfold_command(), "--home", str(home), "hook", "claude-code", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")},
    )
    if done.returncode != 0:
        raise RuntimeError(f"hook {event} exited {done.returncode}: {done.stderr[-2000:]}")
    log = home / "hooks" / "hooks.log"
    if log.exists():
        raise RuntimeError(f"hook {event} failed open: {log.read_text()[-2000:]}")
    if not done.stdout.strip():
        return ""
    return str(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"])


def cut_at_boundary(path: Path, into: Path) -> tuple[Path, str, str, str]:
    """The transcript up to its first compaction boundary (a new file), the summary Claude Code
    wrote there, the session id and the working directory (what the hooks' events carry)."""
    lines = path.read_text("utf-8").splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    summary = ""
    for line in lines[boundary + 1 :]:
        record = json.loads(line)
        if record.get("isCompactSummary"):
            content = record["message"]["content"]
            summary = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
            break
    records = [json.loads(line) for line in lines[:boundary]]
    session = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), path.stem)
    cwd = next((r["cwd"] for r in records if isinstance(r.get("cwd"), str)), str(into))
    cut = into / path.name
    cut.write_text("".join(lines[:boundary]), "utf-8")
    return cut, summary, session, cwd


def replay(path: Path, name: str, *, count: Any) -> Replayed:
    from bench_compaction import read_transcript

    transcript = read_transcript(path, name)
    k, _ = transcript.real[0]
    system = [p["text"] for p in transcript.system]
    with tempfile.TemporaryDirectory(prefix="bench-handover-") as scratch:
        home = Path(scratch) / "home"
        cut, summary, session, cwd = cut_at_boundary(path, Path(scratch))
        base = {"session_id": session, "transcript_path": str(cut), "cwd": cwd}
        hook(home, "PreCompact", {**base, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": None})
        context = hook(home, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": "compact"})
        hook(home, "PostCompact", {**base, "hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": summary})
        later = hook(home, "UserPromptSubmit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    messages = transcript.messages
    return Replayed(
        name=name,
        k=k,
        summary=summary,
        context=context,
        later=later,
        context_tokens=count(context),
        later_tokens=count(later),
        summary_tokens=count(summary),
        alone=measure_cut(messages, k, summary, system=system),
        with_context=measure_cut(messages, k, summary + "\n\n" + context, system=system),
        with_both=measure_cut(messages, k, summary + "\n\n" + context + "\n\n" + later, system=system),
    )


__all__ = ["Replayed", "compacted_transcripts", "cut_at_boundary", "hook", "replay"]

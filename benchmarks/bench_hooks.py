"""The agent hooks: what a hook process costs, and what the handover adds to a real compaction.

First table, `hooks`: whole-process wall time of `contextfold hook claude-code …` (a new process
per run, fed the event on stdin, as Claude Code runs it), beside `python -c pass` and
`contextfold --version`, median of `--repeat` runs after one warm-up:

- PostToolUse with a small output (a 200-byte Bash result) and with a 20 KB `Read` result (both
  within the limits: the cheap path, which must not load pydantic, the store, the tokenizer or the
  MCP SDK), and with a 3,000-line output (spilled: the full path);
- UserPromptSubmit with nothing pending (a `stat`), SessionStart(startup) (nothing to do);
- PreCompact on a generated 10 MB Claude Code transcript: the first import, the same again with
  nothing new, and after 25 more tool calls were appended (only those are read).

Why: a PostToolUse hook runs after every tool call, so its common case must cost little more than
starting Python (issue 17; `contextfold --help` took 0.65 s before issue 15 made the CLI light).

Second table, `hooks_handover`: every real Claude Code compaction in the corpus (each of every
session's, as `_handover.compactions` finds them) replayed through the hooks (`_handover.py`):
per transcript, what the model holds after Claude Code's own summary alone, with contextfold's
SessionStart `additionalContext`, and with what the next prompt adds after PostCompact —
needed-later recall, the user's instructions kept and edited files named (`_recall.py`), and the
tokens each adds (Claude's count: o200k × 1.2). The notes give the pooled recall, how many
compactions stay under 80 %, the instructions and edited files kept over all of them, the same
pooled per project and for the half of the projects the rules were tuned on against the half held
out (`_sessions.half_of`, the same halves as `bench_compaction`'s) with the gap between them, and the
worst compactions with what they missed and whether it was knowable before the cut: quality figures, which tests/e2e/test_hooks_corpus.py does not hold to a
threshold. `--only timings`, `--only handover` or `--only secrets` runs one of the tables.

Third table, `hooks_secrets` (issue 27): the same sessions with fresh fake secrets written into
the first prompt, command and tool result before the compaction (`_secrets.py`), and how many of
them the SessionStart handover gives away (the target is none).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _handover import (
    compacted_transcripts,
    compactions,
    replay,
    replay_seeded,
    synthetic_claude_transcript,
    synthetic_compaction,
)
from _harness import Options, ms, options, ratio, report
from _recall import file_name
from _sessions import half_of, licensed_source

from contextfold.tokens.counting import counter_for

TEN_MB = 10 * 1024**2


def _contextfold() -> list[str]:
    script = Path(sys.executable).parent / "contextfold"
    found = str(script) if script.exists() else shutil.which("contextfold")
    return [found] if found else [sys.executable, "-m", "contextfold"]


def _run(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def _median(fn: Callable[[], float], repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    runs = sorted(fn() for _ in range(repeat))
    return runs[len(runs) // 2]


def _event(name: str, **fields: Any) -> str:
    base = {
        "session_id": "bench-session",
        "transcript_path": "/nonexistent.jsonl",
        "cwd": "/work/project",
        "hook_event_name": name,
    }
    return json.dumps({**base, **fields})


def _bash(stdout: str) -> str:
    return _event(
        "PostToolUse",
        tool_name="Bash",
        tool_use_id="toolu_1",
        tool_input={"command": "make test"},
        tool_response={"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
    )


def timings(opts: Options) -> None:
    cf = _contextfold()
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as scratch:
        root = Path(scratch)
        home = root / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}

        def hook(event: str, payload: str) -> float:
            elapsed, out = _run([*cf, "--home", str(home), "hook", "claude-code", event], env, payload)
            if (home / "hooks" / "hooks.log").exists():
                raise SystemExit(f"the {event} hook failed open: {(home / 'hooks' / 'hooks.log').read_text()}")
            return elapsed

        small = _bash("ok: 12 files checked, 0 problems\n" * 6)
        read = _event(
            "PostToolUse",
            tool_name="Read",
            tool_use_id="toolu_2",
            tool_input={"file_path": "/work/project/a.py"},
            tool_response={
                "type": "text",
                "file": {
                    "filePath": "/work/project/a.py",
                    "content": ("x = compute(1)  # a line\n" * 800),
                    "numLines": 800,
                    "startLine": 1,
                    "totalLines": 800,
                },
            },
        )
        big = _bash("".join(f"tests/test_{i}.py::test_case PASSED\n" for i in range(3_000)))
        cases: list[tuple[str, Callable[[], float]]] = [
            ("python -c pass", lambda: _run([sys.executable, "-c", "pass"], env)[0]),
            ("contextfold --version", lambda: _run([*cf, "--version"], env)[0]),
            ("PostToolUse, 200-byte Bash output (nothing to do)", lambda: hook("PostToolUse", small)),
            ("PostToolUse, 20 KB Read output (nothing to do)", lambda: hook("PostToolUse", read)),
            (
                "UserPromptSubmit, nothing pending",
                lambda: hook("UserPromptSubmit", _event("UserPromptSubmit", prompt="go on")),
            ),
            ("SessionStart, source startup", lambda: hook("SessionStart", _event("SessionStart", source="startup"))),
            ("PostToolUse, 3,000-line Bash output (spilled)", lambda: hook("PostToolUse", big)),
        ]
        medians = [(name, _median(fn, opts.repeat)) for name, fn in cases]

        # PreCompact on a 10 MB transcript: the first import, nothing new, then 25 more tool calls.
        transcript = root / "session.jsonl"
        target = 200_000 if opts.quick else TEN_MB
        while not transcript.exists() or transcript.stat().st_size < target:
            synthetic_claude_transcript(transcript, 300)
        size = transcript.stat().st_size
        pre = _event("PreCompact", transcript_path=str(transcript), trigger="auto", custom_instructions=None)
        first = hook("PreCompact", pre)
        unchanged = _median(lambda: hook("PreCompact", pre), opts.repeat, warmup=0)
        grown = []
        for _ in range(max(1, min(opts.repeat, 3))):
            synthetic_claude_transcript(transcript, 25)
            grown.append(hook("PreCompact", pre))
        # After the compaction: the handover (blind to the summary), then the comparison with it.
        start = _event("SessionStart", transcript_path=str(transcript), source="compact")
        handed = [hook("SessionStart", start) for _ in range(max(1, min(opts.repeat, 3)))]
        summary = "This session is being continued from a previous conversation. The user asked to refactor."
        post = _event("PostCompact", transcript_path=str(transcript), trigger="auto", compact_summary=summary)
        compared = [hook("PostCompact", post) for _ in range(max(1, min(opts.repeat, 3)))]
        medians += [
            (f"PreCompact, first import of a {size / 1024**2:,.1f} MB transcript", first),
            ("PreCompact again, nothing new", unchanged),
            ("PreCompact after 25 more tool calls", sorted(grown)[len(grown) // 2]),
            ("SessionStart compact: the handover from the whole history", sorted(handed)[len(handed) // 2]),
            ("PostCompact: what the summary lacks, kept for the next prompt", sorted(compared)[len(compared) // 2]),
        ]
    floor = medians[0][1]
    version = medians[1][1]
    rows = [
        {"case": name, "median ms": ms(t), "× python -c pass": ratio(t, floor), "× --version": ratio(t, version)}
        for name, t in medians
    ]
    report(
        "hooks",
        "Hook processes: a fresh contextfold per event, median wall time",
        rows,
        opts,
        notes=[
            f"median of {opts.repeat} runs per case after one warm-up; each run spawns `contextfold --home H hook claude-code EVENT` "
            "with the event on stdin (the first PreCompact import is one run)",
            "the 200-byte and 20 KB outputs take the cheap path (tests/e2e/test_hooks_gate.py checks what it loads); the "
            "3,000-line one is spilled (settings, store and tokenizer loaded)",
            f"the transcript is generated in Claude Code 2.1.197's format ({size:,} bytes); each PreCompact imports only "
            "what was appended since the last",
            "SessionStart(compact) and PostCompact read the whole stored history (redaction, facts, the working set): "
            "linear in its size; PostCompact takes the working set's ranking SessionStart made of the same history "
            "(most of the time) instead of ranking again; Claude Code waits for SessionStart before the model goes on "
            "(the hooks are installed with a 300 s timeout)",
        ],
        packages=("mcp", "pydantic", "tiktoken"),
    )


def handover_table(opts: Options) -> None:
    count = counter_for("claude").count
    with tempfile.TemporaryDirectory(prefix="bench-handover-files-") as scratch:
        found = compactions()
        notes = []
        points = (found[:1] or [(synthetic_compaction(Path(scratch)), 0)]) if opts.quick else found
        if not found:
            notes.append("The corpus is not beside the repository: a generated compaction stands in (--quick only).")
        replayed = [
            replay(path, path.stem[:8] + (f"#{index + 1}" if index else ""), count=count, index=index)
            for path, index in points
        ]
    rows: list[dict[str, Any]] = []
    for r in replayed:
        for label, m, added in (
            ("Claude Code's summary alone", r.alone, "—"),
            ("+ SessionStart handover", r.with_context, f"{r.context_tokens:,}"),
            ("+ next prompt (after PostCompact)", r.with_both, f"{r.context_tokens:,} + {r.later_tokens:,}"),
        ):
            rows.append(
                {
                    "transcript": r.name,
                    "what the model holds": label,
                    "recall": _share(m.recall),
                    "instructions": f"{m.instructions.kept}/{len(m.instructions.wanted)}",
                    "edited files": f"{m.edited.kept}/{len(m.edited.wanted)}",
                    "summary tokens": f"{r.summary_tokens:,}",
                    "added tokens": added,
                    # How many, not which: the names are from people's private projects in the
                    # corpus, and results are committed (_handover.replay gives them to a developer).
                    "facts missed": len(m.recall.missed),
                }
            )
    notes += summary_notes(replayed)
    notes += [
        "recall: facts (file base names, backticked identifiers, test and exception names) the agent used in the 60 "
        "messages after the compaction that occurred before it, found in what the model holds (benchmarks/_recall.py); "
        "instructions: the user's own messages before it whose opening is kept verbatim; edited files: base names found.",
        "Every compaction of every transcript (`#2`: its second): the transcript is cut just before Claude Code's "
        "compact_boundary (1.0.x: its summary record); PreCompact, SessionStart(compact), PostCompact (with the summary "
        "Claude Code really wrote) and UserPromptSubmit each run as a `contextfold hook claude-code` process.",
        "Default settings: the handover takes hook_context_room_share (5 %) of the window's free room after the "
        "compaction, at least hook_context_min_tokens (500) and at most hook_context_tokens (8,000), four fifths of "
        "it at SessionStart; tokens counted as contextfold counts Claude (o200k × 1.2).",
    ]
    report(
        "hooks_handover",
        "Claude Code's real compactions, with and without contextfold's hooks",
        rows,
        opts,
        notes=notes,
    )
    if opts.out is not None:
        # What was missed, named, only for the sources that carry a licence (see bench_compaction).
        shareable = [
            {"transcript": r.name, "project": r.project, "missed": r.knowable}
            for r in replayed
            if licensed_source(r.project) and r.knowable
        ]
        (opts.out / "hooks_handover_missed.json").write_text(json.dumps(shareable, indent=1, ensure_ascii=False) + "\n")


UNDER = 0.80
"""Compactions whose recall stays under this share are counted in the notes."""
WORST = 10
"""The compactions the notes describe, lowest recall with the hooks first."""
LEVELS = (("summary alone", "alone"), ("+ handover", "with_context"), ("+ next prompt", "with_both"))


def _pooled(replayed: list[Any], pick: str) -> str:
    measures = [getattr(r, pick) for r in replayed]
    kept = sum(m.recall.kept for m in measures)
    wanted = sum(len(m.recall.wanted) for m in measures)
    return f"{kept}/{wanted}" + (f" ({kept / wanted:.0%})" if wanted else "")


def _share_of(replayed: list[Any], pick: str = "with_context") -> float | None:
    kept = sum(getattr(r, pick).recall.kept for r in replayed)
    wanted = sum(len(getattr(r, pick).recall.wanted) for r in replayed)
    return kept / wanted if wanted else None


def summary_notes(replayed: list[Any]) -> list[str]:
    """Over all replayed compactions: pooled recall, per compaction, under 80 %, instructions and
    edited files kept — for each of what the model holds; the tokens added; the same pooled per
    project and for the projects tuned on against those held out; and the worst compactions."""
    notes = [
        f"{len(replayed)} real Claude Code compaction(s) replayed, in "
        f"{len({(r.project, r.name.split('#')[0]) for r in replayed})} session(s) from "
        f"{len({r.project for r in replayed})} project(s)."
    ]
    for label, pick in LEVELS:
        measures = [getattr(r, pick) for r in replayed]
        shares = [m.recall.share for m in measures if m.recall.share is not None]
        under = sum(1 for v in shares if v < UNDER)
        told = sum(len(m.instructions.wanted) for m in measures)
        edited = sum(len(m.edited.wanted) for m in measures)
        notes.append(
            f"{label}: pooled recall {_pooled(replayed, pick)}"
            + f"; {under} of {len(shares)} compaction(s) with facts to recall under {UNDER:.0%}"
            + (f" (lowest {min(shares):.0%})" if shares else "")
            + f"; instructions kept {sum(m.instructions.kept for m in measures)}/{told}"
            + f"; edited files named {sum(m.edited.kept for m in measures)}/{edited}."
        )
    below = [r.name for r in replayed if r.with_both.recall.kept < r.alone.recall.kept]
    notes.append(
        "With the hooks below Claude Code alone: " + (", ".join(below) if below else "none") + " of "
        f"{len(replayed)} (the hooks add; they never take away)."
    )
    added = sorted(r.context_tokens + r.later_tokens for r in replayed)
    if added:
        starts = sorted(r.context_tokens for r in replayed)
        notes.append(
            f"Tokens added per compaction (both parts): median {added[len(added) // 2]:,}, "
            f"{added[0]:,} to {added[-1]:,}, mean {sum(added) / len(added):,.0f}; SessionStart alone: median "
            f"{starts[len(starts) // 2]:,}, {starts[0]:,} to {starts[-1]:,}."
        )
    every = {r.project for r in replayed}
    tuned, held = {p for p in every if half_of(p) == "A"}, {p for p in every if half_of(p) == "B"}
    for label, projects in (("tuned on (half A)", tuned), ("held out (half B)", held)):
        chosen = [r for r in replayed if r.project in projects]
        if chosen:
            notes.append(
                f"Projects {label} ({len(projects)}: {', '.join(sorted(projects))}; {len(chosen)} compactions): "
                + "; ".join(f"{label_} {_pooled(chosen, pick)}" for label_, pick in LEVELS)
                + "."
            )
    shares = [_share_of([r for r in replayed if r.project in projects]) for projects in (tuned, held)]
    if None not in shares:
        notes.append(
            f"Generalisation gap (+ handover, tuned on − held out): {(shares[0] or 0) - (shares[1] or 0):+.1%} "
            f"({shares[0]:.1%} against {shares[1]:.1%})."
        )
    per_project = []
    for project in sorted({r.project for r in replayed}):
        chosen = [r for r in replayed if r.project == project]
        per_project.append(f"{project} ({len(chosen)}) {_pooled(chosen, 'alone')} → {_pooled(chosen, 'with_both')}")
    notes.append("Per project, summary alone → with the hooks: " + "; ".join(per_project) + ".")
    per_session = ", ".join(
        f"{r.name} {_share(r.alone.recall)} → {_share(r.with_context.recall)} → {_share(r.with_both.recall)}"
        for r in replayed
    )
    notes.append(f"Per compaction, summary alone → + handover → + next prompt: {per_session}.")
    worst = sorted(
        (r for r in replayed if r.with_both.recall.missed),
        key=lambda r: (r.with_both.recall.share or 0.0, -len(r.with_both.recall.missed)),
    )[:WORST]
    if worst:
        described = []
        for r in worst:
            used = sum(1 for v in r.knowable.values() if v == "used")
            files = sum(1 for f in r.knowable if file_name(f) is not None)
            described.append(
                f"{r.name} {_share(r.with_both.recall)}: {len(r.knowable)} missed "
                f"({files} file name(s), {len(r.knowable) - files} other name(s); {used} used before the cut by the "
                f"agent or the user, {len(r.knowable) - used} only seen in tool outputs)"
            )
        notes.append(
            f"The {len(worst)} compactions with the lowest recall with the hooks, and what they missed (every missed "
            "fact occurred before the cut; `used` ones were knowable from what the agent did, `seen` ones only from "
            "what tools showed it; names are given in hooks_handover_missed.json for licensed sources only): "
            + "; ".join(described)
            + "."
        )
    return notes


def _share(share: Any) -> str:
    value = share.share
    return "n/a" if value is None else f"{value:.0%} ({share.kept}/{len(share.wanted)})"


def secrets_table(opts: Options) -> None:
    """Issue 27, item 2: every compacted session again, seeded with fake secrets before the compaction."""
    count = counter_for("claude").count
    with tempfile.TemporaryDirectory(prefix="bench-handover-secrets-files-") as scratch:
        files = compacted_transcripts()
        if opts.quick:
            files = files[:1] or [synthetic_compaction(Path(scratch))]
        replayed = [replay_seeded(path, path.stem[:8], count=count) for path in files]
    rows = [
        {
            "transcript": r.name,
            "secrets seeded": r.seeded,
            "leaked": r.leaked_values,
            "leaked kinds": ", ".join(r.leaked) or "—",
            "handover tokens": f"{r.context_tokens:,}",
        }
        for r in replayed
    ]
    seeded = sum(r.seeded for r in replayed)
    leaked = sum(r.leaked_values for r in replayed)
    notes = [
        f"{leaked} of {seeded} seeded secrets leaked into a SessionStart handover, over {len(replayed)} sessions.",
        "Each compacted Claude Code session is cut before its first compaction, as above, and fresh fake secrets "
        "of 27 kinds (benchmarks/_secrets.py) are written before its first prompt, into its first Bash command and "
        "into the first tool result after it; PreCompact and SessionStart(compact) then run as real hook processes and the "
        "handover is searched for each value, whole or any 12 characters of it.",
    ]
    report(
        "hooks_secrets", "Seeded secrets in the handover after Claude Code's real compactions", rows, opts, notes=notes
    )


def main(opts: Options, only: str | None = None) -> None:
    if only in (None, "timings"):
        timings(opts)
    if only in (None, "handover"):
        handover_table(opts)
    if only in (None, "secrets"):
        secrets_table(opts)


if __name__ == "__main__":
    import argparse

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--only", choices=("timings", "handover", "secrets"))
    known, rest = extra.parse_known_args()
    given, sys.argv = sys.argv, [sys.argv[0], *rest]
    parsed = options(__doc__.splitlines()[0] + " (--only timings|handover|secrets: one table)", repeat=11)
    sys.argv = given  # the results record the command as run
    main(parsed, known.only)

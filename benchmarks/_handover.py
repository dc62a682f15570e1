"""Claude Code's real compactions replayed through `contextfold hook claude-code`.

Every compaction of every raw Claude Code transcript in the corpus (a `system` record with subtype
`compact_boundary` followed by the `isCompactSummary` user record Claude Code wrote; Claude Code
1.0.x wrote only the summary record, with no parent) is replayed: the JSONL is cut just before that
compaction (a later one's cut holds the earlier compactions, as Claude Code's transcript did) and
given to the hooks as Claude Code 2.1.197 would: PreCompact (import) and then SessionStart with
`source: "compact"` (the handover, the summary not yet known), each as its own `contextfold hook`
process on one data home. What the model then holds is Claude Code's own summary plus
contextfold's `additionalContext`; it is measured with `_recall.measure` at the same cut as
`bench_compaction`'s real compaction points (needed-later recall, the user's instructions kept,
edited files named), beside the summary alone.

Then PostCompact with the real summary and the next UserPromptSubmit: what the summary turned out
to lack beyond the first handover, measured the same way.

`knowable` says of each fact still missed whether it was knowable before the cut: `used` (the
agent or the user wrote it: its text, a call's arguments, the user's words) or `seen` (it stood
only in tool outputs). By definition every needed fact occurred before the cut.
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
from _recall import CutMeasure, occurs, pieces
from _recall import measure as measure_cut

sys.path.insert(0, str(Path(__file__).resolve().parent))


@dataclass(frozen=True)
class Replayed:
    name: str
    project: str
    """The corpus source the transcript comes from (`claude-code-…`)."""
    index: int
    """Which of the transcript's compactions (0: its first)."""
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
    knowable: dict[str, str]
    """Each fact still missed with both: `used` before the cut by the agent or the user, or `seen`
    only in tool outputs."""


def compaction_start(record: dict[str, Any]) -> bool:
    """True for the record a compaction starts with: its `compact_boundary`, or (Claude Code 1.0.x,
    which wrote no boundary) the `isCompactSummary` user record itself."""
    return (record.get("type") == "system" and record.get("subtype") == "compact_boundary") or (
        record.get("type") == "user" and record.get("isCompactSummary") is True
    )


def _records(path: Path) -> list[dict[str, Any]]:
    """The file's JSON object records, one a line (a line that is not one reads as {})."""
    records = []
    for line in path.read_text("utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = {}
        records.append(record if isinstance(record, dict) else {})
    return records


def compaction_starts(records: list[dict[str, Any]]) -> list[int]:
    """Where each compaction starts in `records`: its boundary, or its summary record when no
    boundary comes right before it (1.0.x)."""
    starts: list[int] = []
    for i, record in enumerate(records):
        if compaction_start(record) and not (starts and starts[-1] == i - 1 and record.get("type") == "user"):
            starts.append(i)
    return starts


def compacted_transcripts() -> list[Path]:
    """Raw Claude Code session transcripts in the corpus that hold a real compaction, sorted.

    Subagent files are left out (a compaction happens in the main session). The cheap text test
    only picks candidates; each is confirmed on its parsed records, so a tool output that merely
    quotes `isCompactSummary` does not count.
    """
    return [path for path, index in compactions() if index == 0]


def compactions() -> list[tuple[Path, int]]:
    """Every real compaction in the corpus's raw Claude Code transcripts: (transcript, index), in order."""
    root = CORPUS / "raw"
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        if "subagents" in path.relative_to(root).parts:
            continue
        text = path.read_text("utf-8", errors="replace")
        if "compact_boundary" not in text and "isCompactSummary" not in text:
            continue
        found += [(path, index) for index in range(len(compaction_starts(_records(path))))]
    return found


def project_of(path: Path) -> str:
    """The corpus source of a raw transcript: `raw/<source>/…`."""
    return path.relative_to(CORPUS / "raw").parts[0]


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


def cut_at_boundary(path: Path, into: Path, index: int = 0) -> tuple[Path, str, str, str]:
    """The transcript up to its compaction number `index` (a new file), the summary Claude Code
    wrote there, the session id and the working directory (what the hooks' events carry).

    The cut falls just before the `compact_boundary`, or before the summary record where Claude Code
    1.0.x wrote no boundary: either way the file holds what Claude Code held when PreCompact ran."""
    lines = path.read_text("utf-8").splitlines(keepends=True)
    records = _records(path)
    start = compaction_starts(records)[index]
    summary = ""
    for record in records[start:]:
        if record.get("type") == "user" and record.get("isCompactSummary") is True:
            content = record["message"]["content"]
            summary = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
            break
    before = records[:start]
    session = next((r["sessionId"] for r in before if isinstance(r.get("sessionId"), str)), path.stem)
    cwd = next((r["cwd"] for r in reversed(before) if isinstance(r.get("cwd"), str)), str(into))
    cut = into / path.name
    cut.write_text("".join(lines[:start]), "utf-8")
    return cut, summary, session, cwd


def knowable(messages: list[dict[str, Any]], k: int, facts: tuple[str, ...]) -> dict[str, str]:
    """For each fact, `used` when the agent or the user wrote it before `k`, else `seen`."""
    own = "\n".join(p.text for m in messages[:k] for p in pieces(m) if p.kind in ("user", "assistant", "call"))
    return {fact: "used" if occurs(fact, own) else "seen" for fact in facts}


def replay(path: Path, name: str, *, count: Any, index: int = 0) -> Replayed:
    from bench_compaction import read_transcript

    transcript = read_transcript(path, name)
    after, _ = transcript.real[index]
    system = [p["text"] for p in transcript.system]
    with tempfile.TemporaryDirectory(prefix="bench-handover-") as scratch:
        home = Path(scratch) / "home"
        cut, summary, session, cwd = cut_at_boundary(path, Path(scratch), index)
        # What came before is read from the cut, the file the hooks read: a 1.0.x summary has no
        # parent, so the whole file's thread starts at it and holds nothing from before.
        before = read_transcript(cut, name)
        base = {"session_id": session, "transcript_path": str(cut), "cwd": cwd}
        hook(
            home,
            "PreCompact",
            {**base, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": None},
        )
        context = hook(home, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": "compact"})
        hook(
            home,
            "PostCompact",
            {**base, "hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": summary},
        )
        later = hook(home, "UserPromptSubmit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    messages = before.messages + transcript.messages[after:]
    k = len(before.messages)
    system = system or [p["text"] for p in before.system]
    with_both = measure_cut(messages, k, summary + "\n\n" + context + "\n\n" + later, system=system)
    return Replayed(
        name=name,
        project=project_of(path) if path.is_relative_to(CORPUS / "raw") else path.parent.name,
        index=index,
        k=k,
        summary=summary,
        context=context,
        later=later,
        context_tokens=count(context),
        later_tokens=count(later),
        summary_tokens=count(summary),
        alone=measure_cut(messages, k, summary, system=system),
        with_context=measure_cut(messages, k, summary + "\n\n" + context, system=system),
        with_both=with_both,
        knowable=knowable(messages, k, with_both.recall.missed),
    )


@dataclass(frozen=True)
class SeededReplay:
    name: str
    seeded: int
    """Secret values written into the transcript before its compaction."""
    leaked: tuple[str, ...]
    """The kinds of seeded secrets the SessionStart handover gave away."""
    leaked_values: int
    context_tokens: int


def replay_seeded(path: Path, name: str, *, count: Any) -> SeededReplay:
    """The transcript cut before its first compaction with fresh seeded secrets written into its
    first prompt, its first Bash command and the first tool result after it (`_secrets`), then
    PreCompact and SessionStart(compact) as real hook processes: what the handover gives away."""
    from _secrets import leaks, seed_claude_jsonl, seeded_secrets

    seeded = seeded_secrets(name)
    with tempfile.TemporaryDirectory(prefix="bench-handover-secrets-") as scratch:
        home = Path(scratch) / "home"
        cut, _summary, session, cwd = cut_at_boundary(path, Path(scratch))
        lines, placed = seed_claude_jsonl(cut.read_text("utf-8").splitlines(keepends=True), seeded)
        cut.write_text("".join(lines), "utf-8")
        base = {"session_id": session, "transcript_path": str(cut), "cwd": cwd}
        hook(
            home,
            "PreCompact",
            {**base, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": None},
        )
        context = hook(home, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": "compact"})
    present = [s for s in seeded if s.where in placed]
    found = leaks(context, present)
    return SeededReplay(
        name=name,
        seeded=sum(len(s.secrets) for s in present),
        leaked=tuple(found),
        leaked_values=sum(len(s.secrets) for s in present if s.label in found),
        context_tokens=count(context),
    )


__all__ = [
    "Replayed",
    "SeededReplay",
    "compacted_transcripts",
    "compaction_start",
    "compaction_starts",
    "compactions",
    "cut_at_boundary",
    "hook",
    "knowable",
    "project_of",
    "replay",
    "replay_seeded",
]


# -- generated Claude Code transcripts (for timing, and for --quick without the corpus) --------------


def synthetic_claude_transcript(
    path: Path, turns: int, *, cwd: str = "/work/project", session: str = "bench-session"
) -> Path:
    """A Claude Code session JSONL of `turns` tool calls (a Read, an Edit or a Bash each, with
    outputs of a few KB), appended to `path` in Claude Code 2.1.197's record format."""
    import uuid

    parent = None
    existing = path.read_text("utf-8").splitlines() if path.exists() else []
    if existing:
        parent = json.loads(existing[-1])["uuid"]
    lines = []

    def record(kind: str, message: dict[str, Any]) -> None:
        nonlocal parent
        rid = str(uuid.uuid4())
        lines.append(
            json.dumps(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": kind,
                    "message": message,
                    "uuid": rid,
                    "timestamp": "2026-11-26T18:07:17.764Z",
                    "cwd": cwd,
                    "sessionId": session,
                    "version": "2.1.197",
                }
            )
        )
        parent = rid

    if not existing:
        record("user", {"role": "user", "content": "Make the importer incremental; never re-read what was imported."})
    start = len(existing)
    for i in range(start, start + turns):
        call = f"toolu_{i:06d}"
        kind = i % 3
        if kind == 0:
            use = {"name": "Read", "input": {"file_path": f"{cwd}/src/module_{i % 40}.py"}}
            output = "".join(f"def function_{i}_{j}(argument):\n    return argument * {j}\n" for j in range(60))
        elif kind == 1:
            use = {
                "name": "Edit",
                "input": {"file_path": f"{cwd}/src/module_{i % 40}.py", "old_string": "x", "new_string": "y"},
            }
            output = f"The file {cwd}/src/module_{i % 40}.py has been updated."
        else:
            use = {"name": "Bash", "input": {"command": f"pytest -q tests/test_module_{i % 40}.py"}}
            output = (
                "".join(f"tests/test_module_{i % 40}.py::test_case_{j} PASSED\n" for j in range(40))
                + "40 passed in 0.31s"
            )
        record(
            "assistant",
            {
                "id": f"msg_{i}",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-8",
                "content": [{"type": "tool_use", "id": call, **use}],
                "usage": {"input_tokens": 1000 + i, "output_tokens": 30},
            },
        )
        record("user", {"role": "user", "content": [{"tool_use_id": call, "type": "tool_result", "content": output}]})
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return path


def synthetic_compaction(into: Path) -> Path:
    """A small Claude Code transcript with a compaction boundary and a summary, like the corpus's."""
    path = synthetic_claude_transcript(into / "synthetic-compacted.jsonl", 30)
    last = json.loads(path.read_text("utf-8").splitlines()[-1])
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "parentUuid": None,
        "logicalParentUuid": last["uuid"],
        "uuid": "b0",
        "sessionId": last["sessionId"],
        "cwd": last["cwd"],
        "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
    }
    summary = {
        "type": "user",
        "isCompactSummary": True,
        "parentUuid": "b0",
        "uuid": "s0",
        "sessionId": last["sessionId"],
        "cwd": last["cwd"],
        "message": {
            "role": "user",
            "content": "This session is being continued from a previous "
            "conversation. Summary: making the importer incremental in src/module_1.py; tests pass.",
        },
    }
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(boundary) + "\n" + json.dumps(summary) + "\n")
    return path

"""Regions digests: their size against the region and the findings they keep, before and after.

What is measured, on every long transcript of the corpus (normalized, gpt-4o's tokenizer) and on
the synthetic 8,000-token run of the tests (`tests/region_runs.py`): the regions `compact(strategy=
"regions")` would digest (outside the newest 20,000 tokens), and for each the rule-based digest at
its budget (a fifth of the region), beside the one-line-per-call digest it replaced (each call's
name, key argument and first meaningful result line). Per transcript:

- share: digest tokens over region tokens, summed over the regions;
- findings kept: the distinct result lines that report an error or a test verdict (any line
  matching `…Error:` / `…Exception:`, `error:`, `FAILED`, `N passed` / `N failed`; at most 300
  characters; the `===` rules around a pytest verdict left out; not code: a numbered line of a
  file read, `except …`, `raise …`, `class …`) found verbatim in the digest of their region;
- asked kept: the calls whose command, path or pattern (its first 40 characters) is in the
  digest.

`--quick` measures only the synthetic run.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from _harness import CORPUS, ROOT, Options, options, report

from contextfold.domain import Message, ToolPart
from contextfold.formats import parse
from contextfold.policy.digest import digest, key_argument
from contextfold.policy.regions import KEEP_RECENT_TOKENS, TARGET_FRACTION, find_regions
from contextfold.tokens.counting import count_message, counter_for

sys.path.insert(0, str(ROOT / "tests"))
from region_runs import realistic_run  # noqa: E402

COUNTER = counter_for("gpt-4o")
_RULES = re.compile(r"^[=_*#~!-]{3,}\s*|\s*[=_*#~!-]{3,}$")
_FILE_LINE = re.compile(r"^\s*(?:\d+\s*(?:→|\t)|except\b|raise\b|class\b)")
"""Code, not a finding: a numbered line of a file read, `except ValueError:`, `raise …`, `class …`."""
_FINDING = re.compile(r"\w(?:Error|Exception)\b:|\berror(?:\[\w+\])?:|\bFAILED\b|\b\d+ (?:passed|failed)\b")


def one_line_per_call(parts: Sequence[ToolPart], budget: int) -> str:
    """The digest before: each call's name, key argument and first meaningful result line; over
    budget, the middle calls gave way to `… N more calls …` (down to none)."""
    top = f"[Summary of {len(parts)} tool calls]"
    lines = []
    for part in parts:
        first = next(
            (line.strip()[:160] for line in part.result_text.splitlines() if any(c.isalnum() for c in line)), ""
        )
        lines.append(f"- {part.name} {key_argument(part.input)} → {'error: ' if part.state == 'error' else ''}{first}")
    n = len(lines)
    for keep in range(n, -1, -1):
        head, tail = (keep + 1) // 2, keep // 2
        note = [f"… {n - keep} more calls …"] if keep < n else []
        text = "\n".join([top, *lines[:head], *note, *lines[n - tail :]])
        if COUNTER.count(text) <= budget or keep == 0:
            return text
    raise AssertionError("unreachable")


def findings(parts: Sequence[ToolPart]) -> set[str]:
    """Error and verdict lines, stripped of the rules around them (`=== 3 passed ===` → `3 passed`)."""
    return {
        _RULES.sub("", line.strip())
        for p in parts
        for line in p.result_text.splitlines()
        if _FINDING.search(line) and len(line.strip()) <= 300 and not _FILE_LINE.match(line)
    }


def measure(name: str, regions: list[list[ToolPart]], sizes: list[int]) -> dict[str, object]:
    region_tokens = sum(sizes)
    before_tokens = after_tokens = 0
    found = kept_before = kept_after = asked = asked_before = asked_after = 0
    for parts, size in zip(regions, sizes, strict=True):
        after = digest(parts, budget_tokens=size // TARGET_FRACTION, counter=COUNTER)
        before = one_line_per_call(parts, size // TARGET_FRACTION)
        before_tokens += COUNTER.count(before)
        after_tokens += COUNTER.count(after)
        lines = findings(parts)
        found += len(lines)
        kept_before += sum(1 for line in lines if line in before)
        kept_after += sum(1 for line in lines if line in after)
        arguments = [a[:40] for a in (key_argument(p.input) for p in parts) if a]
        asked += len(arguments)
        asked_before += sum(1 for a in arguments if a in before)
        asked_after += sum(1 for a in arguments if a in after)

    def share(part: int, whole: int) -> str:
        return f"{100 * part / whole:.1f} %" if whole else "n/a"

    return {
        "transcript": name,
        "regions": len(regions),
        "region tokens": f"{region_tokens:,}",
        "digest before": f"{before_tokens:,} ({share(before_tokens, region_tokens)})",
        "digest after": f"{after_tokens:,} ({share(after_tokens, region_tokens)})",
        "findings": found,
        "kept before": share(kept_before, found),
        "kept after": share(kept_after, found),
        "asked kept before": share(asked_before, asked),
        "asked kept after": share(asked_after, asked),
    }


def transcript_regions(path: Path) -> tuple[list[list[ToolPart]], list[int]]:
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    wire = []
    for line in lines:
        role = line["role"]
        if role == "user" and line.get("name") in ("system", "developer"):
            role = line["name"]
        entry: dict[str, object] = {"role": role, "content": line.get("content") or ""}
        if line.get("tool_calls"):
            entry["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in line["tool_calls"]
            ]
        if role == "tool":
            entry["tool_call_id"] = line["tool_call_id"]
        wire.append(entry)
    messages = [
        count_message(m.model_copy(update={"id": f"m{i:06d}", "seq": i}), COUNTER)
        for i, m in enumerate(parse(wire, "openai").messages)
    ]
    return regions_of(messages, KEEP_RECENT_TOKENS)


def regions_of(messages: list[Message], keep: int) -> tuple[list[list[ToolPart]], list[int]]:
    by_id = {m.id: m for m in messages}
    found = find_regions(messages, keep_recent_tokens=keep, counter=COUNTER)
    parts = [[by_id[mid].parts[i] for mid, i in r.parts] for r in found]
    return [[p for p in ps if isinstance(p, ToolPart)] for ps in parts], [r.tokens for r in found]


def main(opts: Options) -> None:
    run = realistic_run()
    synthetic = [Message(id="m0", seq=0, role="assistant", parts=list(run))]
    rows = [measure("synthetic 8,000-token run (tests/region_runs.py)", *regions_of(synthetic, 0))]
    if not opts.quick:
        for path in sorted((CORPUS / "normalized").glob("*.jsonl")):
            if path.stat().st_size > 100_000:
                regions, sizes = transcript_regions(path)
                if regions:
                    rows.append(measure(path.stem[:48], regions, sizes))
    report(
        "regions",
        "Regions digests: size against the region, and findings kept, before and after",
        rows,
        opts,
        notes=[
            "before: one line per call (name, key argument, first meaningful result line), middle calls dropped "
            "when over budget; after: the rule-based digest at a fifth of the region (policy/digest.py).",
            "findings: distinct result lines reporting an error or a test verdict; kept: found verbatim in the "
            "region's digest. asked kept: calls whose command, path or pattern (first 40 characters) is in the digest.",
            f"Regions outside the newest {KEEP_RECENT_TOKENS:,} tokens, gpt-4o tokenizer; the digests an LLM "
            "writes when a summarizer is configured are not measured here.",
        ],
    )


if __name__ == "__main__":
    main(options(__doc__.splitlines()[0]))

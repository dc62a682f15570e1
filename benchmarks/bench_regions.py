"""Regions: the digests' size against what they replace, the findings they keep, and where a soft
compaction ends.

What is measured, on every long transcript of the corpus (normalized, gpt-4o's tokenizer) and on
the synthetic 8,000-token run of the tests (`tests/region_runs.py`):

1. The regions `compact(strategy="regions")` would digest (outside the newest 20,000 tokens), and
   for each the rule-based digest at its budget — a fifth of what it replaces (the region, less the
   first call, which stays in view), at most `MAX_DIGEST_TOKENS` — beside the one-line-per-call
   digest of the first version (each call's name, key argument and first meaningful result line).
   Per transcript:
   - share: digest tokens over the tokens they replace, summed over the regions; fill: digest
     tokens over their budgets;
   - findings kept: the distinct result lines that report an error or a test verdict (any line
     matching `…Error:` / `…Exception:`, `error:`, `FAILED`, `N passed` / `N failed`; at most 300
     characters; the `===` rules around a pytest verdict left out; not code: a numbered line of a
     file read, `except …`, `raise …`, `class …`) found verbatim in the digest of their region;
   - asked kept: the calls whose command, path or pattern (its first 40 characters) is in the
     digest, the first call left out (its input stays in view).
2. A soft compaction (`regions_soft`): the window set so the view starts at 75 % and at 85 % of
   usable (soft), the plan `compact(strategy="regions")` makes, aiming under the soft threshold
   (70 %, before) and under half of usable (the seed's soft compaction, now): where the view ends.

`--quick` measures only the synthetic runs.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from _harness import CORPUS, ROOT, Options, options, report

from contextfold.domain import Message, TextPart, ToolPart
from contextfold.formats import parse
from contextfold.policy.digest import digest, key_argument
from contextfold.policy.regions import (
    KEEP_RECENT_TOKENS,
    MAX_DIGEST_TOKENS,
    SOFT_TARGET,
    Region,
    digest_budget,
    find_regions,
    plan_regions,
    replaced_tokens,
    target_tokens,
)
from contextfold.tokens.counting import MESSAGE_OVERHEAD, count_in_view, count_message, counter_for

sys.path.insert(0, str(ROOT / "tests"))
from region_runs import realistic_run  # noqa: E402

COUNTER = counter_for("gpt-4o")
SOFT_RATIO = 0.70
"""The soft threshold (`soft_ratio`): where a soft compaction stopped before."""
STARTS = (0.75, 0.85)
"""Where the view starts, as shares of usable, for the soft compactions measured."""
_RULES = re.compile(r"^[=_*#~!-]{3,}\s*|\s*[=_*#~!-]{3,}$")
_FILE_LINE = re.compile(r"^\s*(?:\d+\s*(?:→|\t)|except\b|raise\b|class\b)")
"""Code, not a finding: a numbered line of a file read, `except ValueError:`, `raise …`, `class …`."""
_FINDING = re.compile(r"\w(?:Error|Exception)\b:|\berror(?:\[\w+\])?:|\bFAILED\b|\b\d+ (?:passed|failed)\b")


def short(name: str, width: int = 16) -> str:
    """`agent/rest-of-name`, the rest cut to its last `width` characters (as the other benchmarks name sessions)."""
    source, _, rest = name.removesuffix(".jsonl").partition("__")
    rest = rest.replace("__", "/")
    return f"{source}/{rest if len(rest) <= width else '…' + rest[-(width - 1) :]}"


def one_line_per_call(parts: Sequence[ToolPart], budget: int) -> str:
    """The first digest: each call's name, key argument and first meaningful result line; over
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


def share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"


def measure(name: str, regions: list[list[ToolPart]], sizes: list[int]) -> dict[str, object]:
    region_tokens = replaced_total = before_tokens = after_tokens = budgets = 0
    found = kept_before = kept_after = asked = asked_before = asked_after = 0
    for parts, size in zip(regions, sizes, strict=True):
        replaced = replaced_tokens(Region([], size, 0), parts, COUNTER)
        budget = min(digest_budget(replaced), MAX_DIGEST_TOKENS)
        after = digest(parts, budget_tokens=budget, counter=COUNTER)
        before = one_line_per_call(parts, budget)
        region_tokens += size
        replaced_total += replaced
        budgets += budget
        before_tokens += COUNTER.count(before)
        after_tokens += COUNTER.count(after)
        lines = findings(parts)
        found += len(lines)
        kept_before += sum(1 for line in lines if line in before)
        kept_after += sum(1 for line in lines if line in after)
        # The first call's input stays in view (the digest is its result): it is never lost.
        arguments = [a[:40] for a in (key_argument(p.input) for p in parts[1:]) if a]
        asked += len(arguments)
        asked_before += sum(1 for a in arguments if a in before)
        asked_after += sum(1 for a in arguments if a in after)
    return {
        "transcript": name,
        "regions": len(regions),
        "region tokens": f"{region_tokens:,}",
        "replaced": f"{replaced_total:,}",
        "one line a call": f"{before_tokens:,} ({share(before_tokens, replaced_total)})",
        "digest": f"{after_tokens:,} ({share(after_tokens, replaced_total)})",
        "fill": share(after_tokens, budgets),
        "findings": found,
        "kept, one line": share(kept_before, found),
        "kept, digest": share(kept_after, found),
        "asked kept, one line": share(asked_before, asked),
        "asked kept, digest": share(asked_after, asked),
        "_sums": (
            region_tokens,
            replaced_total,
            before_tokens,
            after_tokens,
            budgets,
            found,
            kept_before,
            kept_after,
            asked,
            asked_before,
            asked_after,
        ),
    }


def messages_of(path: Path) -> list[Message]:
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
    return [
        count_message(m.model_copy(update={"id": f"m{i:06d}", "seq": i}), COUNTER)
        for i, m in enumerate(parse(wire, "openai").messages)
    ]


def regions_of(messages: list[Message], keep: int) -> tuple[list[list[ToolPart]], list[int]]:
    by_id = {m.id: m for m in messages}
    found = find_regions(messages, keep_recent_tokens=keep, counter=COUNTER)
    parts = [[by_id[mid].parts[i] for mid, i in r.parts] for r in found]
    return [[p for p in ps if isinstance(p, ToolPart)] for ps in parts], [r.tokens for r in found]


def soft(name: str, messages: list[Message]) -> dict[str, object]:
    """Where a soft regions compaction ends, aiming at the soft threshold (before) and under half (now)."""
    total = sum(MESSAGE_OVERHEAD + sum(count_in_view(p, COUNTER) for p in m.parts) for m in messages)
    row: dict[str, object] = {"transcript": name, "view tokens": f"{total:,}"}
    for start in STARTS:
        usable = int(total / start)
        for label, ratio in (("before", SOFT_RATIO), ("now", SOFT_TARGET)):
            plan = plan_regions(
                messages,
                total_tokens=total,
                target_tokens=target_tokens(usable, urgent=False, soft_target=ratio),
                counter=COUNTER,
                now=0.0,
            )
            end = plan.tokens_after / usable
            row[f"from {start:.0%}, {label}"] = f"{end:.1%}" + ("" if plan.reached_target else " (all digested)")
            row.setdefault("_ends", []).append((start, label, end, plan.reached_target))  # type: ignore[union-attr]
    return row


def synthetic_session(turns: int = 60) -> list[Message]:
    """A session of `turns` tool turns (user, call and result, a reply), as the tests build them."""
    out: list[Message] = []
    for i in range(turns):
        rows = "\n".join(f"row {n} of table {i}: ok" for n in range(120))
        call = ToolPart(
            call_id=f"c{i}", name="bash", input={"cmd": f"cat table_{i}.txt"}, state="completed", output=rows
        )
        out += [
            Message(role="user", parts=[TextPart(text=f"Step {i}: show me table {i}.")]),
            Message(role="assistant", parts=[call]),
            Message(role="assistant", parts=[TextPart(text=f"Read table {i}.")]),
        ]
    return [count_message(m.model_copy(update={"id": f"m{i:06d}", "seq": i}), COUNTER) for i, m in enumerate(out)]


def _pooled_corpus(rows: list[dict[str, object]]) -> dict[str, object]:
    sums = [sum(s) for s in zip(*(row["_sums"] for row in rows), strict=True)]  # type: ignore[misc]
    (
        region_tokens,
        replaced,
        before,
        after,
        budgets,
        found,
        kept_before,
        kept_after,
        asked,
        asked_before,
        asked_after,
    ) = sums
    return {
        "region tokens": f"{region_tokens:,}",
        "replaced": f"{replaced:,}",
        "one line a call": f"{before:,} ({share(before, replaced)})",
        "digest": f"{after:,} ({share(after, replaced)})",
        "fill": share(after, budgets),
        "findings": found,
        "kept, one line": share(kept_before, found),
        "kept, digest": share(kept_after, found),
        "asked kept, one line": share(asked_before, asked),
        "asked kept, digest": share(asked_after, asked),
    }


def main(opts: Options) -> None:
    run = realistic_run()
    synthetic = [Message(id="m0", seq=0, role="assistant", parts=list(run))]
    rows = [measure("synthetic 8,000-token run (tests/region_runs.py)", *regions_of(synthetic, 0))]
    softs = [soft("synthetic: 60 tool turns", synthetic_session())]
    if not opts.quick and (CORPUS / "normalized").is_dir():
        for path in sorted((CORPUS / "normalized").glob("*.jsonl")):
            if path.stat().st_size > 100_000:
                messages = messages_of(path)
                regions, sizes = regions_of(messages, KEEP_RECENT_TOKENS)
                if regions:
                    rows.append(measure(short(path.name), regions, sizes))
                    softs.append(soft(short(path.name), messages))
    if len(rows) > 1:
        rows.append({"transcript": f"pooled ({len(rows) - 1} corpus transcripts)", **_pooled_corpus(rows[1:])})
    for row in rows:
        row.pop("_sums", None)
    report(
        "regions",
        "Regions digests: size against what they replace, and findings kept",
        rows,
        opts,
        notes=[
            "digest: the rule-based digest at a fifth of what it replaces (the region less its first call, which "
            f"stays in view), at most {MAX_DIGEST_TOKENS:,} tokens (policy/digest.py); fill: its tokens over its "
            "budget; one line a call: the first digest (name, key argument, first meaningful result line), middle "
            "calls dropped when over budget.",
            "findings: distinct result lines reporting an error or a test verdict; kept: found verbatim in the "
            "region's digest. asked kept: calls whose command, path or pattern (first 40 characters) is in the digest "
            "(not counting the first call, whose input stays in view).",
            f"Regions outside the newest {KEEP_RECENT_TOKENS:,} tokens, gpt-4o tokenizer; the digests an LLM "
            "writes when a summarizer is configured are not measured here.",
        ],
    )
    ends = [row.pop("_ends") for row in softs]
    corpus = [e for row_ends in ends[1:] for e in row_ends]  # type: ignore[attr-defined]
    summary: dict[str, object] = {"transcript": f"median ({len(softs) - 1} corpus transcripts)", "view tokens": ""}
    for start in STARTS:
        for label in ("before", "now"):
            values = [end for s, lab, end, _ in corpus if s == start and lab == label]
            reached = sum(1 for s, lab, _, ok in corpus if s == start and lab == label and ok)
            summary[f"from {start:.0%}, {label}"] = (
                f"{statistics.median(values):.1%} ({reached}/{len(values)} reached)" if values else "n/a"
            )
    if len(softs) > 1:
        softs.append(summary)
    report(
        "regions_soft",
        "Regions: where a soft compaction ends, aiming at the soft threshold (before) and under half (now)",
        softs,
        opts,
        notes=[
            f"The window set so the view starts at {', '.join(f'{s:.0%}' for s in STARTS)} of usable (soft); the "
            f'plan compact(strategy="regions") makes, aiming just under {SOFT_RATIO:.0%} of usable (the soft '
            f"threshold, before) and just under {SOFT_TARGET:.0%} (regions_soft_target, the seed's soft "
            "compaction, now): the view's share of usable after it. (all digested): every region outside the "
            f"newest {KEEP_RECENT_TOKENS:,} tokens was digested and the view is still above the target.",
            "Rule-based digests, gpt-4o tokenizer; 'reached' counts the runs that got under their target.",
        ],
    )


if __name__ == "__main__":
    main(options(__doc__.splitlines()[0]))

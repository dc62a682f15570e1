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

Second table, `compaction_recall` (issue 16): what the compaction carries across. Each long
transcript is read by the package's importers from its original file (the corpus's raw file, via
`sources.json`; any file the importers read works), the agent's own compaction summaries taken
out of the message list and their positions kept as real compaction points. It is cut at each real
point and at 40/60/80 % (see `_recall.cut_points`); for each cut the first k messages (and the
system prompts) are written as a request body and imported into a fresh session
(`import_transcript`), compacted with `compact(summarizer="extractive")` (tail rules as
configured), and the rendered `get_context` (system and messages, as text) is what the model sees.
Measured on it, by `_recall.measure` (whose docstring defines every term): needed-later recall
(facts — file base names, backticked identifiers, test names, exception names — the agent used in
the 60 messages from k on, in its text, its call arguments and the user's own words, that already
occurred before k), user instructions kept (openings of the user's own messages before k found
verbatim), the summary's tokens and the edited files named. Beside it, at real compaction points,
the same numbers for the agent's own summary (Claude Code's), taken as all the model sees then.
Lists of what was missed go to `compaction_recall_missed.json` (full runs). Beside recall, each
cut's working-set noise (`_recall.noise`: the share of the names the summary's working set lists
that are not a real path or identifier of the session).

Issue 27's reporting: `compaction_recall_projects` gives each project (the corpus folder a
transcript comes from) pooled over its cuts and at its real compaction points beside the agent's
own summary, then each half of the projects — split by the parity of the first byte of the SHA-256
of the project's name (`half_of`), A tuned on, B held out — and the gap between them;
`compaction_recall_worst` gives the ten worst cuts with what they missed and whether each miss was
knowable before the cut (the user or the agent had used it) or only shown in a tool output.
Missed names are written only for sources that carry a licence (`_sessions.licensed_source`).

Last, `compaction_secrets` (issue 27): at the same cuts, fresh seeded fake secrets in many syntaxes
(`_secrets.py`) written before the user's first message, into the first command and the first output, and
how many of them the summary gives away (the target is none); `secrets_scan` times the redaction
scan on the corpus's text and on adversarial inputs of two sizes (linear time: flat ms per MB).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _harness import CORPUS, Options, Timing, ms, options, report, run
from _recall import (
    CutMeasure,
    Noise,
    SessionText,
    Share,
    cut_points,
    file_name,
    noise,
    occurs,
    pieces,
    seen_text,
    text_of,
)
from _recall import measure as measure_cut
from _secrets import leaks, seed_wire, seeded_secrets
from _sessions import half_of, licensed_source, project_of, synthetic_session, transcripts, write_normalized

from contextfold.compaction.engine import SUMMARY_MAX_TOKENS
from contextfold.config import load_settings
from contextfold.results import CompactResult
from contextfold.service.facade import ContextService

MODEL = "gpt-4o"
LONG_BYTES = 100_000


async def compact_runs(svc: ContextService, path: Path, repeat: int) -> tuple[Timing, CompactResult, int]:
    """Import `path` and compact it, `repeat` times on fresh sessions; (compaction times, last result, messages)."""
    compactions = Timing()
    result: CompactResult | None = None
    messages = 0
    for i in range(repeat + 1):  # the first run warms up and is not counted
        imported = await svc.import_transcript(
            path, session_id=f"{path.stem[:60]}-{i}", format="normalized", model=MODEL
        )
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
    return f"{source}/{rest if len(rest) <= width else '…' + rest[-(width - 1) :]}"


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


# -- needed-later recall (issue 16) ---------------------------------------------------------------

TOKENS_TARGET = 4_500
"""Issue 16: summaries at most this many tokens (with recall ≥ 90 % and every instruction kept)."""


@dataclass(frozen=True)
class Transcript:
    """A transcript ready to cut: its conversation with the agent's own summaries taken out."""

    name: str
    format: str
    """Wire format of `messages` ("anthropic" or "openai")."""
    system: list[dict[str, str]]
    messages: list[dict[str, Any]]
    real: list[tuple[int, str]]
    """(k, the agent's summary text) at each compaction the agent made."""


def original_of(normalized: Path) -> Path:
    """The corpus file `normalized` was made from (`sources.json`), else `normalized` itself."""
    try:
        sources = json.loads((CORPUS / "sources.json").read_text("utf-8"))
    except (OSError, ValueError):
        return normalized
    for entry in sources:
        named = entry.get("normalized") or f"{entry.get('source')}__{Path(entry.get('local', '')).name}"
        if named == normalized.name and (CORPUS / "raw" / entry["local"]).is_file():
            return CORPUS / "raw" / entry["local"]
    return normalized


def read_transcript(path: Path, name: str) -> Transcript:
    """Any file the importers read, as wire messages; the agent's compaction summaries become cut points."""
    from contextfold.importers import load_transcript

    loaded = load_transcript(path)
    summaries = {c.summary_index for c in loaded.compactions}
    summaries |= set(loaded.metadata.get("compact_summary_indexes", []))  # named summary lines not replayed
    messages: list[dict[str, Any]] = []
    real: list[tuple[int, str]] = []
    for i, message in enumerate(loaded.messages):
        if i in summaries:
            real.append((len(messages), text_of(message)))
        else:
            messages.append(message)
    return Transcript(name, loaded.format, loaded.system, messages, real)


def prefix_body(transcript: Transcript, k: int) -> dict[str, Any]:
    """The first k messages and the system prompts as a request body the wire importer reads."""
    if transcript.format == "anthropic":
        body: dict[str, Any] = {"messages": transcript.messages[:k]}
        if transcript.system:
            body["system"] = [{"type": "text", "text": p["text"]} for p in transcript.system]
        return body
    prompts = [{"role": p["role"], "content": p["text"]} for p in transcript.system]
    return {"messages": prompts + transcript.messages[:k]}


@dataclass(frozen=True)
class Compacted:
    seen: str
    summary: str
    summary_tokens: int
    compacted: bool


async def compact_prefix(svc: ContextService, transcript: Transcript, k: int, scratch: Path) -> Compacted:
    """Import the first k messages into a fresh session, compact it, and read what the model sees."""
    file = scratch / f"prefix-{k}.json"
    file.write_text(json.dumps(prefix_body(transcript, k), ensure_ascii=False), "utf-8")
    imported = await svc.import_transcript(file, format=transcript.format, model=MODEL)
    try:
        result = await svc.compact(imported.session_id, summarizer="extractive")
        context = await svc.get_context(imported.session_id, format="openai")
        summary = await svc.summary_text(imported.session_id) if result.compacted else ""
    finally:
        await svc.delete_session(imported.session_id)
        file.unlink()
    return Compacted(seen_text(context.messages, context.system), summary, result.summary_tokens, result.compacted)


def pct(share: Share) -> str:
    value = share.share
    return "n/a" if value is None else f"{value:.0%}"


def ratio_of(share: Share) -> str:
    return f"{share.kept}/{len(share.wanted)}"


def missed(m: CutMeasure) -> dict[str, list[str]]:
    return {
        "facts": list(m.recall.missed),
        "instructions": list(m.instructions.missed),
        "edited_files": list(m.edited.missed),
    }


@dataclass
class CutRecord:
    """One cut of one transcript: what our compaction kept, and the agent's where it compacted."""

    transcript: str
    label: str
    k: int
    ours: CutMeasure
    tokens: int
    noise: Noise
    agent: CutMeasure | None = None
    agent_tokens: int | None = None
    before: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Per fact our summary missed: how it stood before the cut — `used` (the user's or agent's words,
    a call's arguments) or `shown` (only in tool outputs) — and how many messages before it last did."""

    @property
    def project(self) -> str:
        return project_of(self.transcript)


def provenance(messages: Sequence[dict[str, Any]], k: int, facts: Sequence[str]) -> dict[str, tuple[str, int]]:
    """How each of `facts` stood before cut `k` (see `CutRecord.before`)."""
    found: dict[str, tuple[str, int]] = {}
    for fact in facts:
        used = shown = -1
        for i in range(k - 1, -1, -1):
            for piece in pieces(messages[i]):
                if occurs(fact, piece.text):
                    if piece.kind in ("user", "assistant", "call") and used < 0:
                        used = i
                    elif piece.kind == "output" and shown < 0:
                        shown = i
            if used >= 0:
                break
        if used >= 0:
            found[fact] = ("used", k - used)
        elif shown >= 0:
            found[fact] = ("shown", k - shown)
    return found


async def recall_rows(
    svc: ContextService, transcript: Transcript, scratch: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CutRecord]]:
    """One row per cut: ours, and the agent's own summary where it compacted there."""
    system = [p["text"] for p in transcript.system]
    session = SessionText(transcript.messages)
    real = {k: summary for k, summary in transcript.real}
    cuts = [(k, "real", summary) for k, summary in real.items()]
    for c in cut_points(transcript.messages):
        if c.k not in real:  # a share that falls on a real compaction point is that point
            cuts.append((c.k, c.label + ("" if c.kind == "user" else "·step"), None))
    rows, details, records = [], [], []
    for k, label, theirs in sorted(cuts, key=lambda c: (c[0], c[1] != "real")):
        ours = await compact_prefix(svc, transcript, k, scratch)
        m = measure_cut(transcript.messages, k, ours.seen, system=system)
        record = CutRecord(transcript.name, label, k, m, ours.summary_tokens, noise(session, k, ours.summary))
        record.before = provenance(transcript.messages, k, m.recall.missed)
        row: dict[str, Any] = {
            "transcript": transcript.name,
            "cut": label,
            "k": f"{k}/{len(transcript.messages)}",
            "facts": len(m.recall.wanted),
            "recall": pct(m.recall),
            "in summary": pct(measure_cut(transcript.messages, k, ours.summary, system=system).recall),
            "instr": ratio_of(m.instructions),
            "tokens": f"{ours.summary_tokens:,}" if ours.compacted else "not compacted",
            "edited": ratio_of(m.edited),
            "noise": share_of(record.noise),
        }
        detail: dict[str, Any] = {"transcript": transcript.name, "cut": label, "k": k, "ours": missed(m)}
        if theirs is not None:
            record.agent = measure_cut(transcript.messages, k, theirs, system=system)
            record.agent_tokens = svc.count_tokens(text=theirs, model=MODEL).tokens
            row |= {
                "agent recall": pct(record.agent.recall),
                "agent instr": ratio_of(record.agent.instructions),
                "agent tokens": f"{record.agent_tokens:,}",
                "agent edited": ratio_of(record.agent.edited),
            }
            detail["agent"] = missed(record.agent)
        rows.append(row)
        details.append(detail)
        records.append(record)
    return rows, details, records


def share_of(n: Noise) -> str:
    return "n/a" if n.share is None else f"{n.share:.0%}"


def pooled(shares: Sequence[Share]) -> str:
    wanted = sum(len(s.wanted) for s in shares)
    kept = sum(s.kept for s in shares)
    return "n/a" if not wanted else f"{kept / wanted:.0%} ({kept}/{wanted})"


def pooled_value(shares: Sequence[Share]) -> float | None:
    wanted = sum(len(s.wanted) for s in shares)
    return sum(s.kept for s in shares) / wanted if wanted else None


def pooled_noise(noises: Sequence[Noise]) -> str:
    entries = sum(len(n.entries) for n in noises)
    noisy = sum(len(n.noisy) for n in noises)
    return "n/a" if not entries else f"{noisy / entries:.1%} ({noisy}/{entries})"


def noise_of(noises: Sequence[Noise]) -> float:
    entries = sum(len(n.entries) for n in noises)
    return sum(len(n.noisy) for n in noises) / entries if entries else 0.0


RECALL_TARGET = 0.95
"""Issue 27: needed-later recall pooled over every cut."""
CUT_TARGET = 0.80
"""Issue 27: needed-later recall on every compaction."""
NOISE_TARGET = 0.05
"""Issue 27: the working set's noise on every transcript."""
WORST = 10


def recall_notes(records: Sequence[CutRecord]) -> list[str]:
    ours = [r.ours for r in records]
    real = [r for r in records if r.agent is not None]
    low = sorted(
        {r.transcript for r in records if r.ours.recall.share is not None and r.ours.recall.share < CUT_TARGET}
    )
    lost = sorted({r.transcript for r in records if r.ours.instructions.missed})
    by_transcript: dict[str, list[Noise]] = {}
    for r in records:
        by_transcript.setdefault(r.transcript, []).append(r.noise)
    noisy = sorted(t for t, ns in by_transcript.items() if noise_of(ns) > NOISE_TARGET)
    worst_noise = max(by_transcript.items(), key=lambda item: noise_of(item[1]), default=None)
    notes = [
        f"All cuts pooled ({len(records)}) — recall {pooled([m.recall for m in ours])}, instructions kept "
        f"{pooled([m.instructions for m in ours])}, edited files named {pooled([m.edited for m in ours])}; "
        f"largest summary {max((r.tokens for r in records), default=0):,} tokens; working-set noise "
        f"{pooled_noise([r.noise for r in records])}"
        + (
            f", the noisiest transcript {noise_of(worst_noise[1]):.1%} ({worst_noise[0]})."
            if worst_noise is not None
            else "."
        ),
    ]
    if real:
        smaller = sum(1 for r in real if r.agent_tokens is not None and r.tokens <= r.agent_tokens)
        ratios = [r.tokens / r.agent_tokens for r in real if r.agent_tokens]
        notes.append(
            f"At the agent's own compaction points ({len(real)}) — ours: recall "
            f"{pooled([r.ours.recall for r in real])}, instructions {pooled([r.ours.instructions for r in real])}, "
            f"edited {pooled([r.ours.edited for r in real])}; the agent's summary: recall "
            f"{pooled([r.agent.recall for r in real if r.agent])}, instructions "
            f"{pooled([r.agent.instructions for r in real if r.agent])}, edited "
            f"{pooled([r.agent.edited for r in real if r.agent])}. Summary tokens: ours "
            f"{statistics.median(r.tokens for r in real):,.0f} median against the agent's "
            f"{statistics.median(r.agent_tokens for r in real if r.agent_tokens is not None):,.0f}; ours no larger "
            f"at {smaller} of {len(real)} points (median ratio {statistics.median(ratios) if ratios else 0:.2f})."
        )
    notes.append(
        f"Targets (issue 27): recall ≥ {RECALL_TARGET:.0%} pooled and ≥ {CUT_TARGET:.0%} on every cut, every "
        f"instruction kept, noise ≤ {NOISE_TARGET:.0%} on every transcript, summaries no larger than the agent's. "
        f"Cuts under {CUT_TARGET:.0%}: {', '.join(low) or 'none'}. Instructions lost: {', '.join(lost) or 'none'}. "
        f"Noise over {NOISE_TARGET:.0%}: {', '.join(noisy) or 'none'}."
    )
    return notes


def project_rows(records: Sequence[CutRecord]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per project, then per half and over all: the generalisation check."""
    groups: dict[str, list[CutRecord]] = {}
    for r in records:
        groups.setdefault(r.project, []).append(r)

    def row(name: str, half: str, group: list[CutRecord]) -> dict[str, Any]:
        real = [r for r in group if r.agent is not None]
        shares = [r.ours.recall.share for r in group if r.ours.recall.share is not None]
        return {
            "project": name,
            "half": half,
            "transcripts": len({r.transcript for r in group}),
            "cuts": len(group),
            "recall": pooled([r.ours.recall for r in group]),
            "lowest cut": f"{min(shares):.0%}" if shares else "n/a",
            f"cuts < {CUT_TARGET:.0%}": sum(1 for x in shares if x < CUT_TARGET),
            "instr": pooled([r.ours.instructions for r in group]),
            "noise": pooled_noise([r.noise for r in group]),
            "real cuts": len(real),
            "recall at real": pooled([r.ours.recall for r in real]),
            "agent recall": pooled([r.agent.recall for r in real if r.agent]),
            "agent instr": pooled([r.agent.instructions for r in real if r.agent]),
            "tokens at real": f"{statistics.median(r.tokens for r in real):,.0f}" if real else "",
            "agent tokens": (
                f"{statistics.median(r.agent_tokens for r in real if r.agent_tokens is not None):,.0f}" if real else ""
            ),
        }

    rows = [row(p, half_of(p), group) for p, group in sorted(groups.items(), key=lambda i: (half_of(i[0]), i[0]))]
    halves = {h: [r for r in records if half_of(r.project) == h] for h in "AB"}
    rows += [row(f"half {h}", h, group) for h, group in halves.items() if group]
    rows.append(row("all", "", list(records)))
    notes = []
    values = {h: pooled_value([r.ours.recall for r in group]) for h, group in halves.items() if group}
    at_real = {
        h: pooled_value([r.ours.recall for r in group if r.agent is not None]) for h, group in halves.items() if group
    }
    if len(values) == 2 and None not in values.values():
        a, b = values["A"], values["B"]
        assert a is not None and b is not None
        gap = f"{(a - b) * 100:+.1f} points"
        real_gap = ""
        if at_real.get("A") is not None and at_real.get("B") is not None:
            ra, rb = at_real["A"], at_real["B"]
            assert ra is not None and rb is not None
            real_gap = f"; at real compactions A {ra:.1%}, B {rb:.1%} ({(ra - rb) * 100:+.1f} points)"
        notes.append(
            f"Generalisation: the projects split by the parity of the first byte of the SHA-256 of their name "
            "(A even, tuned on; B odd, held out from the first tuning — later rules were read off the worst cuts "
            f"of both halves, so B is no longer unseen). Pooled recall A "
            f"{a:.1%}, B {b:.1%}: gap {gap} (A − B){real_gap}."
        )
    notes.append(
        "recall / instr: pooled over the project's cuts (ours); lowest cut: its worst cut; noise: the working "
        "set's entries that are not a real path or identifier of the session (benchmarks/_recall.py `noise`); "
        "real cuts: where the agent compacted, with the agent's own summary's recall, instructions and tokens "
        "beside ours (tokens: medians)."
    )
    return rows, notes


def fact_kind(fact: str) -> str:
    if file_name(fact) is not None:
        return "file"
    if fact.endswith(("Error", "Exception", "Warning", "Interrupt")):
        return "exception"
    if fact.startswith(("test_", "Test")):
        return "test"
    return "identifier"


def worst_rows(records: Sequence[CutRecord]) -> list[dict[str, Any]]:
    """The `WORST` cuts by our recall, with what they missed and whether it was knowable before the
    cut: `used` — the user or the agent had used it (in words or a call), so the summary had evidence
    to keep it; `shown` — it stood only in tool outputs, one name among all an output showed. Names
    are given only for sources that carry a licence; for the others, their kind."""
    scored = [r for r in records if r.ours.recall.share is not None and r.ours.recall.missed]
    scored.sort(key=lambda r: (r.ours.recall.share, -len(r.ours.recall.missed), r.transcript, r.k))
    rows = []
    for r in scored[:WORST]:
        named = licensed_source(r.project)
        what = []
        for fact in r.ours.recall.missed:
            how, distance = r.before.get(fact, ("?", 0))
            label = fact if named else fact_kind(fact)
            what.append(f"{label} ({how}, {distance} msgs before)")
        used = sum(1 for f in r.ours.recall.missed if r.before.get(f, ("",))[0] == "used")
        rows.append(
            {
                "transcript": r.transcript,
                "cut": r.label,
                "k": r.k,
                "recall": pct(r.ours.recall),
                "missed": len(r.ours.recall.missed),
                "knowable (used before)": f"{used}/{len(r.ours.recall.missed)}",
                "what": "; ".join(what),
            }
        )
    return rows


async def measure_recall(files: Sequence[Path], opts: Options) -> None:
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    records: list[CutRecord] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as home:
        scratch = Path(home) / "prefixes"
        scratch.mkdir()
        if not files:  # no corpus (--quick only): a generated session stands in
            files = [write_normalized(synthetic_session(200), Path(home) / "synthetic.jsonl")]
        async with await ContextService.open(load_settings({"home": Path(home) / "data"}, environ={})) as svc:
            for path in files:
                transcript = read_transcript(original_of(path), short(path.name))
                got, detail, cut_records = await recall_rows(svc, transcript, scratch)
                rows += got
                details += detail
                records += cut_records
    notes = recall_notes(records) + [
        "recall: share of the facts needed after the cut found in what the model sees after compact (the summary "
        "and the kept tail); in summary: the same counted in the summary alone; facts: how many were needed; "
        "instr: the user's own messages before the cut whose opening (60 characters) is found verbatim; "
        "tokens: the summary's; edited: files edited before the cut whose base name is found; noise: the share of "
        "the working set's entries that are not a real path or identifier of the session (`_recall.noise`). "
        "agent …: the agent's own summary at its real compaction, the whole of what the model saw then.",
        "cut: real = where the agent compacted; 40/60/80 % = just before the user's own message nearest that share "
        "of the messages, or ·step = before the agent's next step when no user message is near. Definitions: "
        f"benchmarks/_recall.py. Model {MODEL} (o200k counts for both summaries). "
        f"{len(rows)} cuts in {time.perf_counter() - started:,.0f} s.",
    ]
    report(
        "compaction_recall", "Needed-later recall and user instructions kept after compaction", rows, opts, notes=notes
    )
    by_project, project_notes = project_rows(records)
    report(
        "compaction_recall_projects",
        "Needed-later recall per project and per half of the projects",
        by_project,
        opts,
        notes=project_notes,
    )
    report(
        "compaction_recall_worst",
        "The worst cuts and what they missed",
        worst_rows(records),
        opts,
        notes=[
            "missed: needed facts not in what the model sees after our compaction; knowable (used before): how many "
            "of them the user or the agent had used before the cut (in words or a call's arguments) — the others "
            "stood only in tool outputs before it, one name among all an output showed; what: each missed fact "
            "(its kind — file, identifier, test, exception — where the source carries no licence), how it stood "
            "before the cut and how many messages before the cut it last did."
        ],
    )
    if opts.out is not None:
        # What was missed, named, only for the sources that carry a licence: the others are
        # people's private sessions, kept out of the repository (their counts are in the table).
        shareable = [d for d in details if licensed_source(str(d["transcript"]).split("/", 1)[0])]
        missed_file = opts.out / "compaction_recall_missed.json"
        missed_file.write_text(json.dumps(shareable, indent=1, ensure_ascii=False) + "\n")


# -- the summary's size against what it keeps ----------------------------------------------------

BUDGETS = (2_900, 3_200, 3_800)
"""`summary_max_tokens` values compared side by side (2,900 is the default)."""


async def measure_budget(files: Sequence[Path], opts: Options) -> None:
    """Needed-later recall and summary size at each `summary_max_tokens` in `BUDGETS`, over the same
    cuts as `compaction_recall`, beside the agent's own summaries at its real compactions."""
    rows: list[dict[str, Any]] = []
    agent_tokens: list[int] = []
    for budget in BUDGETS:
        records: list[CutRecord] = []
        with tempfile.TemporaryDirectory(prefix="bench-budget-") as home:
            scratch = Path(home) / "prefixes"
            scratch.mkdir()
            settings = load_settings({"home": Path(home) / "data", "summary_max_tokens": budget}, environ={})
            async with await ContextService.open(settings) as svc:
                for path in files:
                    records += (await recall_rows(svc, read_transcript(original_of(path), short(path.name)), scratch))[
                        2
                    ]
        real = [r for r in records if r.agent_tokens is not None]
        if not agent_tokens:
            agent_tokens = [r.agent_tokens for r in real if r.agent_tokens is not None]
        rows.append(
            {
                "summary_max_tokens": f"{budget:,}" + (" (default)" if budget == SUMMARY_MAX_TOKENS else ""),
                "cuts": len(records),
                "recall": pooled([r.ours.recall for r in records]),
                "cuts < 80%": sum(1 for r in records if (r.ours.recall.share or 1.0) < 0.8),
                "instr": pooled([r.ours.instructions for r in records]),
                "summary tokens, median": f"{statistics.median(r.tokens for r in records):,.0f}",
                "at real cuts, median": f"{statistics.median(r.tokens for r in real):,.0f}" if real else "-",
                "agent's, median": f"{statistics.median(agent_tokens):,.0f}" if agent_tokens else "-",
                "no larger than the agent's": f"{sum(r.tokens <= (r.agent_tokens or 0) for r in real)}/{len(real)}",
            }
        )
        print(f"summary_max_tokens {budget:,}: {rows[-1]['recall']}", flush=True)
    report(
        "compaction_budget",
        "The summary's size against what it keeps",
        rows,
        opts,
        notes=[
            "Each row compacts every cut of `compaction_recall` again with that `summary_max_tokens` (the same "
            "transcripts, cuts and measures); recall pooled over the cuts; instr: the user's messages before the cut "
            "found verbatim; the agent's summaries are measured at its real compactions only.",
        ],
    )


# -- after the agent's own compaction, and a chatty session --------------------------------------

AFTER_FRACTIONS = (0.4, 0.6, 0.8)


def raw_prefix_cuts(raw: Path) -> list[tuple[str, int]]:
    """(label, lines) cuts of a JSONL transcript holding the agent's own compactions: at 40/60/80 %
    of the lines after its first compaction boundary. [] for other files."""
    if raw.suffix != ".jsonl":
        return []
    lines = raw.read_text("utf-8").splitlines(keepends=True)
    boundary = next((i for i, line in enumerate(lines) if '"compact_boundary"' in line or '"compacted"' in line), None)
    if boundary is None:
        return []
    return [(f"after·{f:.0%}", boundary + int((len(lines) - boundary) * f)) for f in AFTER_FRACTIONS]


async def after_rows(
    svc: ContextService, normalized: Path, scratch: Path
) -> list[tuple[dict[str, Any], CutMeasure, int]]:
    """The raw file cut after the agent's own compaction and imported as a user would import it
    (the compaction replayed: what came before is hidden behind the agent's summary), then compacted
    by contextfold; measured against the whole conversation."""
    raw = original_of(normalized)
    cuts = raw_prefix_cuts(raw)
    if not cuts:
        return []
    whole = read_transcript(raw, short(normalized.name))
    system = [p["text"] for p in whole.system]
    lines = raw.read_text("utf-8").splitlines(keepends=True)
    out = []
    for label, count in cuts:
        cut = scratch / f"after-{count}{raw.suffix}"
        cut.write_text("".join(lines[:count]), "utf-8")
        k = len(read_transcript(cut, whole.name).messages)
        imported = await svc.import_transcript(cut, model=MODEL)
        try:
            result = await svc.compact(imported.session_id, summarizer="extractive")
            context = await svc.get_context(imported.session_id, format="openai")
        finally:
            await svc.delete_session(imported.session_id)
            cut.unlink()
        m = measure_cut(whole.messages, k, seen_text(context.messages, context.system), system=system)
        row = {
            "transcript": whole.name,
            "cut": label,
            "k": f"{k}/{len(whole.messages)}",
            "facts": len(m.recall.wanted),
            "recall": pct(m.recall),
            "instr": ratio_of(m.instructions),
            "tokens": f"{result.summary_tokens:,}",
            "edited": ratio_of(m.edited),
            "agent compactions hidden": imported.compactions,
        }
        out.append((row, m, result.summary_tokens))
    return out


CHATTY_USERS = (30, 100)
"""User messages in the generated chatty sessions (the corpus has one or two per transcript)."""


def chatty_session(users: int) -> list[dict[str, Any]]:
    """A generated session where the user speaks often: each request, three tool calls, an answer."""
    words = "stream the rows batch the writes keep the header check the flag rename the option add a test".split()
    messages: list[dict[str, Any]] = []
    for u in range(users):
        text = f"Request {u}: " + " ".join(words[(u * 7 + j) % len(words)] for j in range(8 + (u * 13) % 60))
        messages.append({"role": "user", "content": text})
        for t in range(3):
            call_id = f"c{u}_{t}"
            args = json.dumps({"command": f"cat src/module_{u}_{t}.py"})
            messages.append(
                {
                    "role": "assistant",
                    "content": "Reading.",
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "x = 1\n" * (20 + (u * t) % 150)})
        messages.append({"role": "assistant", "content": f"Done with request {u}."})
    return messages


async def chatty_rows(svc: ContextService, scratch: Path) -> list[tuple[dict[str, Any], CutMeasure, int]]:
    out = []
    for users in CHATTY_USERS:
        messages = chatty_session(users)
        k = len(messages) - 5
        transcript = Transcript(f"generated/{users} user messages", "openai", [], messages, [])
        ours = await compact_prefix(svc, transcript, k, scratch)
        m = measure_cut(messages, k, ours.seen)
        row = {
            "transcript": transcript.name,
            "cut": "end",
            "k": f"{k}/{len(messages)}",
            "facts": len(m.recall.wanted),
            "recall": pct(m.recall),
            "instr": ratio_of(m.instructions),
            "tokens": f"{ours.summary_tokens:,}",
            "edited": ratio_of(m.edited),
        }
        out.append((row, m, ours.summary_tokens))
    return out


async def measure_after(files: Sequence[Path], opts: Options) -> None:
    rows: list[dict[str, Any]] = []
    measures: list[tuple[CutMeasure, int]] = []
    with tempfile.TemporaryDirectory(prefix="bench-after-") as home:
        scratch = Path(home) / "cuts"
        scratch.mkdir()
        async with await ContextService.open(load_settings({"home": Path(home) / "data"}, environ={})) as svc:
            for path in files:
                for row, m, tokens in await after_rows(svc, path, scratch):
                    rows.append(row)
                    measures.append((m, tokens))
            for row, m, tokens in await chatty_rows(svc, scratch):
                rows.append(row)
                measures.append((m, tokens))
    notes = [
        f"All rows pooled — recall {pooled([m.recall for m, _ in measures])}, instructions kept "
        f"{pooled([m.instructions for m, _ in measures])}, edited files named {pooled([m.edited for m, _ in measures])}; "
        f"largest summary {max((t for _, t in measures), default=0):,} tokens.",
        "after·N %: the agent's original file (Claude Code JSONL) cut at N % of its lines after its first compaction "
        "boundary and imported as a user would (the importer replays the agent's compaction: everything before "
        "it is hidden behind the agent's summary), then compacted by contextfold (extractive); measured against "
        "the whole conversation, as in the table above. The summary is built from the stored history the agent's "
        "summary stands for, not from that summary.",
        "generated/N user messages: a session where the user wrote N messages (of 8–68 words) between tool "
        "calls, compacted at its end: every message keeps at least its opening within the quotes' budget.",
    ]
    report("compaction_after", "Recall after the agent's own compaction, and a chatty session", rows, opts, notes=notes)


# -- seeded secrets (issue 27, item 2) -----------------------------------------------------------------


async def secret_rows(svc: ContextService, transcript: Transcript, scratch: Path) -> dict[str, Any]:
    """At every cut of the recall table, the transcript with fresh seeded secrets written into the
    user's first message, the first command and the first output (`_secrets.seed_wire`), compacted:
    how many of the secrets written before the cut the summary gives away."""
    cuts = sorted({k for k, _ in transcript.real} | {c.k for c in cut_points(transcript.messages)})
    seeded_total = leaked_total = 0
    kinds: set[str] = set()
    for k in cuts:
        seeded = seeded_secrets(f"{transcript.name}@{k}")
        messages, placed = seed_wire(transcript.messages, seeded, k)
        present = [s for s in seeded if s.where in placed]
        ours = await compact_prefix(svc, replace(transcript, messages=messages), k, scratch)
        found = leaks(ours.summary, present) if ours.compacted else []
        seeded_total += sum(len(s.secrets) for s in present)
        leaked_total += sum(len(s.secrets) for s in present if s.label in found)
        kinds.update(found)
    return {
        "transcript": transcript.name,
        "cuts": len(cuts),
        "secrets seeded": seeded_total,
        "leaked": leaked_total,
        "leaked kinds": ", ".join(sorted(kinds)) or "—",
    }


SCAN_MB = (1, 4)
"""Sizes of the adversarial inputs the redaction scan is timed on: the time must grow with the size, no faster."""
SCAN_RUNS = 3


def scan_rows(corpus: Sequence[Path]) -> list[dict[str, Any]]:
    """The redaction scan (`compaction.secrets.find`) timed on the corpus's text and on adversarial
    inputs at two sizes: linear time means the ms per MB stays flat."""
    from contextfold.compaction.secrets import find

    texts = []
    for path in corpus:
        for line in path.read_text("utf-8").splitlines():
            message = json.loads(line)
            texts += [message["content"]] if isinstance(message.get("content"), str) else []
            texts += [str(c.get("arguments")) for c in message.get("tool_calls") or []]
    rows = []

    def timed(label: str, inputs: list[str]) -> None:
        size = sum(len(t) for t in inputs)
        elapsed = float("inf")
        for _ in range(SCAN_RUNS):  # the best of a few: the machine is shared
            start = time.perf_counter()
            found = sum(len(find(t)) for t in inputs)
            elapsed = min(elapsed, time.perf_counter() - start)
        rows.append(
            {
                "input": label,
                "MB": f"{size / 1e6:,.1f}",
                "found": found,
                "ms": ms(elapsed),
                "ms per MB": f"{elapsed * 1000 / (size / 1e6):,.0f}",
            }
        )

    if texts:
        timed("every corpus message and call, each scanned alone", texts)
    for mb in SCAN_MB:
        n = mb * 1_000_000
        for label, unit in (
            ("`password=` repeated", "password="),
            ("`token: ` + a quote, repeated", 'token: "'),
            ("`sk-` repeated", "sk-"),
            ("`Bearer ` repeated", "Bearer "),
            ("`://user:` repeated", "://user:"),
            ("one word of letters", "a"),
            ("`key` glued to a name, repeated", "api_key_"),
        ):
            timed(f"{label}, {mb} MB", [(unit * (n // len(unit) + 1))[:n]])
    return rows


async def measure_secrets(files: Sequence[Path], opts: Options) -> None:
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-secrets-") as home:
        scratch = Path(home) / "prefixes"
        scratch.mkdir()
        if not files:
            files = [write_normalized(synthetic_session(200), Path(home) / "synthetic.jsonl")]
        async with await ContextService.open(load_settings({"home": Path(home) / "data"}, environ={})) as svc:
            for path in files:
                rows.append(await secret_rows(svc, read_transcript(original_of(path), short(path.name)), scratch))
    seeded = sum(r["secrets seeded"] for r in rows)
    leaked = sum(r["leaked"] for r in rows)
    cuts = sum(r["cuts"] for r in rows)
    notes = [
        f"{leaked} of {seeded} seeded secrets leaked into a summary, over {cuts} cuts of {len(rows)} transcripts "
        f"({time.perf_counter() - started:,.0f} s).",
        f"At each cut of the recall table, {len(seeded_secrets())} kinds of realistic fake secrets (fresh values "
        "each time, benchmarks/_secrets.py: keys of known formats, tokens in env, JSON, YAML, TOML, Python, Go, "
        "PHP, HTTP headers, CLI flags, a URL's password, a PEM key, a token given in words, a value printed alone "
        "after its assignment) are written before the user's first message (where its quote starts), into the "
        "first tool call's command and into the first output after it; the prefix is compacted (extractive) and the summary searched for each value, "
        "whole or any 12 characters of it. secrets seeded: values written before the cut.",
    ]
    report("compaction_secrets", "Seeded secrets in the summary after compaction", rows, opts, notes=notes)
    scan = scan_rows(transcripts())
    report(
        "secrets_scan",
        "The redaction scan on real text and on adversarial inputs",
        scan,
        opts,
        notes=[
            f"compaction.secrets.find over each text, best of {SCAN_RUNS} runs; adversarial inputs: one pattern's "
            f"trigger repeated to the size given ({', '.join(f'{mb} MB' for mb in SCAN_MB)}): ms per MB flat = "
            "linear time.",
        ],
    )


async def main(opts: Options) -> None:
    notes = []
    with tempfile.TemporaryDirectory(prefix="bench-compaction-data-") as scratch:
        files = transcripts(min_bytes=LONG_BYTES)
        if files:
            largest = files[-1]
            notes.append(
                f"Every normalized corpus transcript over {LONG_BYTES:,} bytes, model {MODEL} (exact o200k counts); "
                f"the largest is {short(largest.name)}."
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
    await measure_recall(recall_files(opts), opts)
    await measure_budget(recall_files(opts), opts)
    await measure_after(recall_files(opts), opts)
    await measure_secrets(recall_files(opts), opts)


def recall_files(opts: Options) -> list[Path]:
    """Every long transcript; --quick: the smallest, and the smallest where the agent compacted."""
    files = transcripts(min_bytes=LONG_BYTES)
    if not opts.quick:
        return files
    compacted = [f for f in files if read_transcript(original_of(f), f.name).real]
    return list(dict.fromkeys(files[:1] + compacted[:1]))


if __name__ == "__main__":
    run(main, options(__doc__.splitlines()[0], repeat=5))

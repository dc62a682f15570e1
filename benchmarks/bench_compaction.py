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
Lists of what was missed go to `compaction_recall_missed.json` (full runs).

Last, `compaction_secrets` (issue 27): at the same cuts, fresh seeded fake secrets in many syntaxes
(`_secrets.py`) written before the user's first message, into the first command and the first output, and
how many of them the summary gives away (the target is none); `secrets_scan` times the redaction
scan on the corpus's text and on adversarial inputs of two sizes (linear time: flat ms per MB).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _harness import CORPUS, Options, Timing, ms, options, report, run
from _recall import CutMeasure, Share, cut_points, seen_text, text_of
from _recall import measure as measure_cut
from _secrets import leaks, seed_wire, seeded_secrets
from _sessions import licensed_source, synthetic_session, transcripts, write_normalized

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
        if entry.get("normalized") == normalized.name and (CORPUS / "raw" / entry["local"]).is_file():
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


async def recall_rows(
    svc: ContextService, transcript: Transcript, scratch: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[CutMeasure, int, CutMeasure | None]]]:
    """One row per cut: ours, and the agent's own summary where it compacted there."""
    system = [p["text"] for p in transcript.system]
    real = {k: summary for k, summary in transcript.real}
    cuts = [(k, "real", summary) for k, summary in real.items()]
    for c in cut_points(transcript.messages):
        if c.k not in real:  # a share that falls on a real compaction point is that point
            cuts.append((c.k, c.label + ("" if c.kind == "user" else "·step"), None))
    rows, details, measures = [], [], []
    for k, label, theirs in sorted(cuts, key=lambda c: (c[0], c[1] != "real")):
        ours = await compact_prefix(svc, transcript, k, scratch)
        m = measure_cut(transcript.messages, k, ours.seen, system=system)
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
        }
        detail: dict[str, Any] = {"transcript": transcript.name, "cut": label, "k": k, "ours": missed(m)}
        agent: CutMeasure | None = None
        if theirs is not None:
            agent = measure_cut(transcript.messages, k, theirs, system=system)
            tokens = svc.count_tokens(text=theirs, model=MODEL).tokens
            row |= {
                "agent recall": pct(agent.recall),
                "agent instr": ratio_of(agent.instructions),
                "agent tokens": f"{tokens:,}",
                "agent edited": ratio_of(agent.edited),
            }
            detail["agent"] = missed(agent)
        rows.append(row)
        details.append(detail)
        measures.append((m, ours.summary_tokens, agent))
    return rows, details, measures


def pooled(shares: Sequence[Share]) -> str:
    wanted = sum(len(s.wanted) for s in shares)
    kept = sum(s.kept for s in shares)
    return "n/a" if not wanted else f"{kept / wanted:.0%} ({kept}/{wanted})"


def recall_notes(measures: list[tuple[str, CutMeasure, int, CutMeasure | None]]) -> list[str]:
    ours = [m for _, m, _, _ in measures]
    theirs = [(m, a) for _, m, _, a in measures if a is not None]
    low = sorted({name for name, m, _, _ in measures if m.recall.share is not None and m.recall.share < 0.9})
    lost = sorted({name for name, m, _, _ in measures if m.instructions.missed})
    big = sorted({name for name, _, tokens, _ in measures if tokens > TOKENS_TARGET})
    notes = [
        f"All cuts pooled — recall {pooled([m.recall for m in ours])}, instructions kept "
        f"{pooled([m.instructions for m in ours])}, edited files named {pooled([m.edited for m in ours])}; "
        f"largest summary {max((t for _, _, t, _ in measures), default=0):,} tokens.",
    ]
    if theirs:
        notes.append(
            f"At the agent's own compaction points ({len(theirs)}) — ours: recall "
            f"{pooled([m.recall for m, _ in theirs])}, instructions {pooled([m.instructions for m, _ in theirs])}, "
            f"edited {pooled([m.edited for m, _ in theirs])}; the agent's summary: recall "
            f"{pooled([a.recall for _, a in theirs])}, instructions {pooled([a.instructions for _, a in theirs])}, "
            f"edited {pooled([a.edited for _, a in theirs])}."
        )
    notes.append(
        f"Targets (issue 16): recall ≥ 90 % and every instruction kept on every cut, summaries ≤ {TOKENS_TARGET:,} "
        f"tokens. Recall below 90 %: {', '.join(low) or 'none'}. Instructions lost: {', '.join(lost) or 'none'}. "
        f"Summaries over the limit: {', '.join(big) or 'none'}."
    )
    return notes


async def measure_recall(files: Sequence[Path], opts: Options) -> None:
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    measures: list[tuple[str, CutMeasure, int, CutMeasure | None]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as home:
        scratch = Path(home) / "prefixes"
        scratch.mkdir()
        if not files:  # no corpus (--quick only): a generated session stands in
            files = [write_normalized(synthetic_session(200), Path(home) / "synthetic.jsonl")]
        async with await ContextService.open(load_settings({"home": Path(home) / "data"}, environ={})) as svc:
            for path in files:
                transcript = read_transcript(original_of(path), short(path.name))
                got, detail, cut_measures = await recall_rows(svc, transcript, scratch)
                rows += got
                details += detail
                measures += [(transcript.name, m, tokens, agent) for m, tokens, agent in cut_measures]
    notes = recall_notes(measures) + [
        "recall: share of the facts needed after the cut found in what the model sees after compact (the summary "
        "and the kept tail); in summary: the same counted in the summary alone; facts: how many were needed; "
        "instr: the user's own messages before the cut whose opening (60 characters) is found verbatim; "
        "tokens: the summary's; edited: files edited before the cut whose base name is found. "
        "agent …: the agent's own summary at its real compaction, the whole of what the model saw then.",
        "cut: real = where the agent compacted; 40/60/80 % = just before the user's own message nearest that share "
        "of the messages, or ·step = before the agent's next step when no user message is near. Definitions: "
        f"benchmarks/_recall.py. Model {MODEL} (o200k counts for both summaries). "
        f"{len(rows)} cuts in {time.perf_counter() - started:,.0f} s.",
    ]
    report(
        "compaction_recall", "Needed-later recall and user instructions kept after compaction", rows, opts, notes=notes
    )
    if opts.out is not None:
        # What was missed, named, only for the sources that carry a licence: the others are
        # people's private sessions, kept out of the repository (their counts are in the table).
        shareable = [d for d in details if licensed_source(str(d["transcript"]).split("/", 1)[0])]
        missed_file = opts.out / "compaction_recall_missed.json"
        missed_file.write_text(json.dumps(shareable, indent=1, ensure_ascii=False) + "\n")


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
                f"the largest is {largest.name}." + (" --quick: only the smallest of them." if opts.quick else "")
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

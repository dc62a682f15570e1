"""Spilled outputs: reading a slice deep in a huge tool output, against reading the file yourself.

SPEC § 15 claims `read_output` latency is flat in the output's size and its memory bounded: the
spill store keeps a line index beside each file, so a read seeks near the wanted line and scans
at most one index stride forward. This script checks that on log-like outputs of 1, 20 and
200 MB, spilled the way a harness would: a tool result appended through `ContextService.append`,
which ingest truncates and spills whole.

Measured, side by side in one run:
- spill (write) time and resident-memory peak of that append, per size (one run: a second
  append of the same content would be deduplicated);
- `read_output` of a 100-line slice starting at 10 %, 50 % and 90 % of the lines, median over
  repeats, against two readers a user would otherwise write on the spill file itself:
  "read-all" (`read_text().splitlines()[a:b]`) and "islice" (stream lines with
  `itertools.islice` up to the offset);
- peak memory of each reader at the 90 % slice (tracemalloc peak and resident-set growth);
- a regex search over the whole output (`read_output(pattern=…)`) against `re` over the lines,
  for a regex and for a plain-text pattern (which the store matches as bytes).

The limits on one message (16 MiB) and one batch (64 MiB) are raised for this run so that the
20 and 200 MB outputs can be appended; with the defaults they are refused with a clear error.
"""

from __future__ import annotations

import asyncio
import gc
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from _harness import Memory, Options, PeakRSS, memory, memory_async, mib, ms, options, ratio, report, timed, timed_async

from contextfold.blobs.lines import read_lines
from contextfold.config import load_settings
from contextfold.service.facade import ContextService

MB = 1_000_000
FULL_SIZES = (1 * MB, 20 * MB, 200 * MB)
QUICK_SIZES = (MB // 4, 1 * MB)
POSITIONS = (0.10, 0.50, 0.90)
SLICE = 100
GREP_REPEAT = 3
CHEAP_REPEAT = 5
"""Reads through the index cost about a millisecond: they get this many times more runs, for a
steadier median on a busy machine."""
ERROR_EVERY = 50_000
"""One ERROR line per this many lines: 200 MB holds ~40, under read_output's cap of 50 matches,
so both sides of the grep comparison scan the whole file."""
GREP_PATTERNS = (("regex", r"ERROR .*deadlock"), ("plain text", "deadlock detected"))

_LEVELS = ("INFO", "INFO", "DEBUG", "INFO", "WARN", "INFO", "DEBUG", "INFO")
_SERVICES = ("api", "auth", "billing", "search", "worker", "scheduler", "cache", "gateway")
_WORDS = "handled request from upstream pool after retry with cached token and warm connection".split()


# -- the output ------------------------------------------------------------------------------------


def log_line(i: int) -> str:
    """Line `i` of a deterministic application log, 80–120 characters."""
    h = (i * 2654435761) & 0xFFFFFFFF
    stamp = f"2025-03-14T{i // 3_600_000 % 24:02d}:{i // 60_000 % 60:02d}:{i // 1_000 % 60:02d}.{i % 1_000:03d}Z"
    service = _SERVICES[h % len(_SERVICES)]
    if i % ERROR_EVERY == ERROR_EVERY // 2:
        return (
            f"{stamp} ERROR db[{h % 64:02d}] req={h:08x} deadlock detected on table orders, "
            f"retrying (attempt {h % 5 + 1})"
        )
    words = " ".join(_WORDS[h % 7 : h % 7 + 1 + (h >> 8) % 5])
    return (
        f"{stamp} {_LEVELS[h % len(_LEVELS)]:<5} {service}[{h % 64:02d}] req={h:08x} "
        f"GET /items/{h % 100_000} {200 if h % 17 else 503} {h % 997}ms {words}"
    )


def log_text(size: int) -> str:
    """Whole lines of the log, just over `size` bytes (the text is ASCII), newline-terminated."""
    blocks: list[str] = []
    total = 0
    i = 0
    while total < size:
        block = "\n".join(log_line(n) for n in range(i, i + 10_000)) + "\n"
        if total + len(block) > size:  # finish on the first line boundary past `size`
            cut = block.find("\n", size - total) + 1
            block = block[:cut] if cut > 0 else block
        blocks.append(block)
        total += len(block)
        i += 10_000
    return "".join(blocks)


# -- the readers -----------------------------------------------------------------------------------


def read_all(path: Path, offset: int) -> list[str]:
    """What a user writes first: load the file, split it, slice (offset is 1-based)."""
    return path.read_text(encoding="utf-8").splitlines()[offset - 1 : offset - 1 + SLICE]


def read_islice(path: Path, offset: int) -> list[str]:
    """The streaming version: skip lines up to the offset, keep the slice."""
    with path.open(encoding="utf-8") as f:
        return [line.rstrip("\n") for line in islice(f, offset - 1, offset - 1 + SLICE)]


def grep_lines(path: Path, pattern: str) -> list[int]:
    """Numbers of the lines matching `pattern`, streaming the file."""
    rx = re.compile(pattern)
    with path.open(encoding="utf-8") as f:
        return [n for n, line in enumerate(f, 1) if rx.search(line)]


def numbered(text: str) -> list[str]:
    """The lines of a `read_output` slice without their `N<TAB>` prefixes."""
    return [row.split("\t", 1)[1] for row in text.split("\n")] if text else []


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Spilled:
    size: int
    output_id: str
    digest: str
    path: Path
    lines: int
    seconds: float
    rss: int | None


async def spill(service: ContextService, size: int) -> Spilled:
    """Append a tool call and its `size`-byte result; ingest spills the result."""
    session = f"spill-{size}"
    await service.open_session(session, model="gpt-4o")
    call = {"id": "call_log", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat app.log"}'}}
    await service.append(session, [{"role": "assistant", "content": None, "tool_calls": [call]}])
    text = log_text(size)
    result_message = {"role": "tool", "tool_call_id": "call_log", "content": text}
    del text  # the message holds the only reference, so PeakRSS's baseline counts it once
    with PeakRSS() as peak:
        start = time.perf_counter()
        result = await service.append(session, [result_message])
        seconds = time.perf_counter() - start
    (out,) = result.spilled
    record = await service.outputs.resolve(out.output_id, "")
    path = service.outputs.files.root / record.digest
    return Spilled(out.bytes, out.output_id, record.digest, path, out.lines, seconds, peak.growth)


async def measure(opts: Options) -> None:
    # The imported libraries are ~200k objects that the harness's gc.collect() before every run
    # would rescan (a quarter of a second each on a busy machine); they live forever anyway.
    gc.freeze()
    sizes = QUICK_SIZES if opts.quick else FULL_SIZES
    latency_rows: list[dict[str, Any]] = []
    memory_rows: list[dict[str, Any]] = []
    write_rows: list[dict[str, Any]] = []
    grep_rows: list[dict[str, Any]] = []
    spread: dict[str, tuple[float, float]] = {"cf": (float("inf"), 0.0), "read-all": (float("inf"), 0.0)}
    with tempfile.TemporaryDirectory(prefix="bench-spill-") as home:
        limit = 2 * max(sizes) + 16 * MB
        settings = load_settings({"home": Path(home), "max_message_bytes": limit, "max_batch_bytes": limit}, environ={})
        async with await ContextService.open(settings) as service:
            for size in sizes:
                out = await spill(service, size)
                label = f"{size / MB:g} MB"
                write_rows.append(
                    {
                        "output": label,
                        "bytes": f"{out.size:,}",
                        "lines": f"{out.lines:,}",
                        "spill (append) ms": ms(out.seconds),
                        "MB/s": f"{out.size / MB / out.seconds:,.0f}",
                        "RSS peak growth": mib(out.rss),
                    }
                )

                async def cf_read(offset: int, output_id: str = out.output_id) -> list[str]:
                    return numbered((await service.read_output(output_id, offset=offset, limit=SLICE)).text)

                files = service.outputs.files
                for position in POSITIONS:
                    offset = int(out.lines * position) + 1
                    cheap = CHEAP_REPEAT * opts.repeat
                    cf, cf_lines = await timed_async(lambda: cf_read(offset), repeat=cheap)
                    layer, _ = timed(lambda: read_lines(files, out.digest, offset, SLICE), repeat=cheap)
                    naive, naive_lines = timed(lambda: read_all(out.path, offset), repeat=opts.repeat)
                    stream, stream_lines = timed(lambda: read_islice(out.path, offset), repeat=opts.repeat)
                    if not cf_lines == naive_lines == stream_lines or len(cf_lines) != SLICE:
                        raise AssertionError(f"{label} at line {offset:,}: the readers disagree")
                    for name, timing in (("cf", cf), ("read-all", naive)):
                        low, high = spread[name]
                        spread[name] = (min(low, timing.median), max(high, timing.median))
                    latency_rows.append(
                        {
                            "output": label,
                            "slice at": f"{position:.0%}",
                            "cf ms": ms(cf.median),
                            "file layer ms": ms(layer.median),
                            "read-all ms": ms(naive.median),
                            "islice ms": ms(stream.median),
                            "read-all/cf": ratio(naive.median, cf.median),
                            "islice/cf": ratio(stream.median, cf.median),
                        }
                    )

                deep = int(out.lines * POSITIONS[-1]) + 1
                cf_mem, _ = await memory_async(lambda: cf_read(deep))
                all_mem, _ = memory(lambda: read_all(out.path, deep))
                stream_mem, _ = memory(lambda: read_islice(out.path, deep))
                memory_rows.append({"output": label, **_memory_cells(cf_mem, all_mem, stream_mem)})

                for kind, pattern in GREP_PATTERNS:

                    async def cf_grep(output_id: str = out.output_id, pattern: str = pattern) -> int:
                        return (await service.read_output(output_id, pattern=pattern)).matches or 0

                    repeat = min(opts.repeat, GREP_REPEAT)
                    cf, found = await timed_async(cf_grep, repeat=repeat)
                    naive, hits = timed(_bind(grep_lines, out.path, pattern), repeat=repeat)
                    if found != len(hits):
                        raise AssertionError(f"{label}, {pattern!r}: read_output found {found} matches, re {len(hits)}")
                    grep_rows.append(
                        {
                            "output": label,
                            "pattern": kind,
                            "matches": found,
                            "cf ms": ms(cf.median),
                            "re over lines ms": ms(naive.median),
                            "re / cf": ratio(naive.median, cf.median),
                            "cf MB/s": f"{out.size / MB / cf.median:,.0f}",
                        }
                    )
    report(
        "spill",
        f"read_output: a {SLICE}-line slice of a spilled output vs reading the file yourself",
        latency_rows,
        opts,
        notes=[
            "cf (contextfold): ContextService.read_output(id, offset, limit=100), which resolves the id in SQLite, "
            "reads through the line index, numbers the lines and records the read; file layer: the index read alone "
            "(lines.read_lines on the blob store). A slice starts at 10, 50 or 90 % of the output's lines.",
            "read-all: path.read_text().splitlines(), then slice the list; islice: stream the file's lines with "
            "itertools.islice up to the slice; both on the spill file itself.",
            f"Medians of {CHEAP_REPEAT * opts.repeat} runs for contextfold and the file layer, {opts.repeat} for "
            "the naive readers.",
            f"Across sizes and positions, cf took {ms(spread['cf'][0])}–{ms(spread['cf'][1])} ms and read-all "
            f"{ms(spread['read-all'][0])}–{ms(spread['read-all'][1])} ms.",
        ],
    )
    report(
        "spill_memory",
        f"Peak memory of one {SLICE}-line read at 90 % of the output",
        memory_rows,
        opts,
        notes=[
            "traced: tracemalloc peak above the start (Python allocations, all threads); RSS: growth of the "
            "resident set at its peak (Linux high-water mark, reset before each run).",
        ],
    )
    report(
        "spill_write",
        "Spilling a tool output: one append of the tool result, ingest truncates and spills it",
        write_rows,
        opts,
        notes=[
            "One run per size (a second identical output is deduplicated). The time covers the whole append: "
            "size checks, parsing, truncation, sha256, the line index, the fsynced file and the transaction.",
            "RSS peak growth is above a baseline that already holds the output text once.",
        ],
    )
    report(
        "spill_grep",
        "read_output(pattern=…) over the whole output vs re over its lines "
        f"(median of {min(opts.repeat, GREP_REPEAT)})",
        grep_rows,
        opts,
        notes=[
            "Patterns: " + "; ".join(f"{kind} {pattern!r}" for kind, pattern in GREP_PATTERNS) + ". contextfold "
            "matches a plain-text pattern as bytes, without decoding lines; a regex is skimmed over blocks of "
            "whole lines with the regex module, and only candidate lines are searched on their own (every "
            "engine call has a timeout against catastrophic backtracking).",
            "re over lines: for n, line in enumerate(open(path), 1): if rx.search(line) (stdlib re, streaming).",
        ],
    )


def _bind(fn: Callable[[Path, str], Any], path: Path, pattern: str) -> Callable[[], Any]:
    return lambda: fn(path, pattern)


def _memory_cells(cf: Memory, read_all_mem: Memory, stream: Memory) -> dict[str, str]:
    return {
        "cf traced": mib(cf.traced),
        "cf RSS": mib(cf.rss),
        "read-all traced": mib(read_all_mem.traced),
        "read-all RSS": mib(read_all_mem.rss),
        "islice traced": mib(stream.traced),
        "islice RSS": mib(stream.rss),
    }


if __name__ == "__main__":
    opts = options(__doc__.splitlines()[0], repeat=5)
    asyncio.run(measure(opts))

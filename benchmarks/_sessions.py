"""Seeded synthetic agent sessions in the OpenAI Chat Completions shape, for the benchmarks.

A session is user turns, each followed by assistant steps with tool calls and their `role: tool`
results: log, code, test-run, grep and directory-listing text of 200–20,000 characters, so token
counts come out as they do for real agent work. The same seed always gives the same session.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

from _harness import CORPUS

SEED = 20_240_611

_WORDS = (
    "the a to of and in for with on by from this that it is was be not when then if after before "
    "file path config value cache session token request response handler error warning test case "
    "module function class method parameter result output input index query table row column user "
    "server client build run check update remove add fix change load parse write read retry "
    "timeout limit buffer stream queue worker thread lock event state status message payload schema "
    "field record entry key default option flag version release branch commit patch diff merge "
    "should must will can could would may need expected actual missing invalid unknown empty large "
    "small first last next previous new old same different every each some all none only also still"
).split()
_SYLLABLES = (
    "get set load save parse read write check build run test handle make find open close user "
    "config token cache session index value item node tree path file request response data model "
    "view query result error event queue batch chunk store view policy tail turn part"
).split()
_TYPES = ("int", "str", "bytes", "bool", "float", "Path", "dict[str, Any]", "list[str]", "Session", "None")
_EXCEPTIONS = ("ValueError", "KeyError", "RuntimeError", "TypeError", "FileNotFoundError", "TimeoutError")
_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARNING", "ERROR")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_EXTENSIONS = ("py", "py", "py", "md", "toml", "json", "txt", "cfg", "yaml", "sh")
_TOOLS = ("bash", "read_file", "grep", "edit_file", "run_tests", "list_dir")

MIN_OUTPUT, MAX_OUTPUT = 200, 20_000
"""Tool outputs are log-uniform in this range (median ≈ 2,000 characters)."""


class _Text:
    """Seeded pools of realistic lines; outputs are drawn from them so generation stays fast."""

    def __init__(self, rng: random.Random, pool: int = 3_000) -> None:
        self.rng = rng
        self.pools: dict[str, list[str]] = {
            kind: [make() for _ in range(pool)]
            for kind, make in (
                ("code", self.code_line),
                ("log", self._log),
                ("tests", self._test),
                ("grep", self._grep),
                ("listing", self._listing),
            )
        }

    def sentence(self, low: int = 6, high: int = 18) -> str:
        words = self.rng.choices(_WORDS, k=self.rng.randint(low, high))
        return " ".join(words).capitalize() + "."

    def paragraph(self, sentences: int) -> str:
        return " ".join(self.sentence() for _ in range(sentences))

    def name(self, parts: int = 2) -> str:
        return "_".join(self.rng.choices(_SYLLABLES, k=parts))

    def camel(self) -> str:
        return "".join(s.capitalize() for s in self.rng.choices(_SYLLABLES, k=2))

    def path(self) -> str:
        r = self.rng
        return f"src/{self.name(1)}/{self.name(2)}.{r.choice(_EXTENSIONS)}"

    def code_line(self) -> str:
        r = self.rng
        indent = "    " * r.randint(0, 3)
        var, fn = self.name(), self.name()
        match r.randint(0, 8):
            case 0:
                return f"{indent}def {fn}(self, {var}: {r.choice(_TYPES)}) -> {r.choice(_TYPES)}:"
            case 1:
                return f"{indent}{var} = {fn}({self.name()}, {r.randint(0, 4096)})"
            case 2:
                return f"{indent}if {var} is None or len({var}) > {r.randint(1, 999)}:"
            case 3:
                return f"{indent}return self.{var}.{fn}()"
            case 4:
                return f"{indent}# {self.sentence(4, 12)}"
            case 5:
                return f'{indent}raise {r.choice(_EXCEPTIONS)}(f"{self.sentence(3, 8)} {{{var}!r}}")'
            case 6:
                return f"from {self.name(1)}.{self.name(1)} import {self.camel()}, {fn}"
            case 7:
                return f"class {self.camel()}({self.camel()}):"
            case _:
                return f"{indent}for {var} in {fn}(self.{self.name()}):"

    def _log(self) -> str:
        r = self.rng
        return (
            f"2025-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:"
            f"{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z {r.choice(_LEVELS):<7} [{self.name(1)}.{self.name(1)}] "
            f"{self.sentence(3, 10)} id={r.getrandbits(32):08x} elapsed={r.uniform(0.1, 900):.1f}ms"
        )

    def _test(self) -> str:
        r = self.rng
        test = f"tests/test_{self.name(1)}.py::test_{self.name(3)}"
        match r.randint(0, 5):
            case 0 | 1 | 2:
                return f"{test} PASSED{' ' * r.randint(2, 20)}[{r.randint(0, 100):3d}%]"
            case 3:
                return f"{test} FAILED{' ' * r.randint(2, 20)}[{r.randint(0, 100):3d}%]"
            case 4:
                return f"E       AssertionError: assert {r.randint(0, 999)} == {r.randint(0, 999)}"
            case _:
                return f"{self.path()}:{r.randint(1, 2000)}: in {self.name()}"

    def _grep(self) -> str:
        return f"{self.path()}:{self.rng.randint(1, 2000)}:{self.code_line()}"

    def _listing(self) -> str:
        r = self.rng
        return (
            f"-rw-r--r--  1 dev staff {r.randint(0, 999_999):>8} {r.choice(_MONTHS)} {r.randint(1, 28):2d} "
            f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d} {self.name()}.{r.choice(_EXTENSIONS)}"
        )

    def output(self, kind: str, size: int, *, numbered: bool = False) -> str:
        pool = self.pools[kind]
        lines = self.rng.choices(pool, k=size // 40 + 4)
        if numbered:
            start = self.rng.randint(1, 500)
            lines = [f"{start + i:6d}\t{line}" for i, line in enumerate(lines)]
        text = "\n".join(lines)
        while len(text) < size:
            text += "\n" + "\n".join(self.rng.choices(pool, k=size // 40 + 4))
        return text[:size]


def _tool_call(text: _Text, call_id: str) -> tuple[dict[str, Any], str]:
    """An OpenAI tool call and its output."""
    r = text.rng
    tool = r.choice(_TOOLS)
    size = int(math.exp(r.uniform(math.log(MIN_OUTPUT), math.log(MAX_OUTPUT))))
    match tool:
        case "bash":
            args: dict[str, Any] = {
                "command": f"python -m {text.name(1)}.{text.name(1)} --{text.name(1)} 2>&1 | tail -n {r.randint(20, 400)}"
            }
            output = text.output("log", size)
        case "read_file":
            args = {"path": text.path(), "offset": r.randint(0, 400), "limit": r.randint(50, 800)}
            output = text.output("code", size, numbered=True)
        case "grep":
            args = {"pattern": text.name(), "path": f"src/{text.name(1)}"}
            output = text.output("grep", size)
        case "edit_file":
            args = {"path": text.path(), "old": text.code_line(), "new": text.code_line()}
            output = f"Edited {args['path']}.\n" + text.output("code", size, numbered=True)
        case "run_tests":
            args = {"command": f"pytest tests/test_{text.name(1)}.py -x -q"}
            output = text.output("tests", size)
        case _:
            args = {"path": f"src/{text.name(1)}", "all": r.random() < 0.3}
            output = text.output("listing", size)
    call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
    return call, output


def synthetic_session(size: int, seed: int = SEED) -> list[dict[str, Any]]:
    """Exactly `size` OpenAI Chat Completions messages of an agent at work, deterministic for a seed.

    Each turn: a user instruction, then 1–80 steps (an assistant message, sometimes with a sentence of
    its own, with 1–3 tool calls, each followed by its `role: tool` result), then a closing reply.
    """
    rng = random.Random(seed)
    text = _Text(rng)
    session: list[dict[str, Any]] = []
    calls = 0
    while len(session) < size:
        session.append({"role": "user", "content": f"{text.paragraph(rng.randint(1, 4))} Start with {text.path()}."})
        steps = min(80, 1 + int(rng.expovariate(1 / 14)))
        for _ in range(steps):
            room = size - len(session)
            if room < 3:  # leave space for the closing reply
                break
            fan_out = min(room - 2, rng.choices((1, 2, 3), weights=(70, 20, 10))[0])
            step = [_tool_call(text, f"call_{calls + i:07d}") for i in range(fan_out)]
            calls += fan_out
            words = text.sentence() if rng.random() < 0.5 else ""
            session.append({"role": "assistant", "content": words, "tool_calls": [c for c, _ in step]})
            session += [{"role": "tool", "tool_call_id": c["id"], "content": out} for c, out in step]
        if len(session) < size:
            session.append({"role": "assistant", "content": text.paragraph(rng.randint(1, 5))})
    return session


def write_normalized(session: list[dict[str, Any]], path: Path) -> Path:
    """Save a session as the corpus's normalized JSONL (flat tool calls), so it imports like a real one."""
    with path.open("w", encoding="utf-8") as out:
        for message in session:
            line = {k: v for k, v in message.items() if k != "tool_calls"}
            if message.get("tool_calls"):
                line["tool_calls"] = [
                    {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                    for c in message["tool_calls"]
                ]
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


def transcripts(min_bytes: int = 0, max_bytes: int | None = None) -> list[Path]:
    """Normalized corpus transcripts within a size range, smallest first; [] without the corpus."""
    if not (CORPUS / "normalized").is_dir():
        return []
    files = [p for p in (CORPUS / "normalized").glob("*.jsonl") if p.stat().st_size > min_bytes]
    if max_bytes is not None:
        files = [p for p in files if p.stat().st_size <= max_bytes]
    return sorted(files, key=lambda p: (p.stat().st_size, p.name))


def licensed_source(source: str) -> bool:
    """Whether the corpus source `source` (`claude-code-spotter`, …) carries a licence.

    Most sessions added on 2026-11-27 carry none: they are test data here, and what a benchmark
    writes into the repository (lists of missed names, quotes) must not copy them."""
    manifest = CORPUS / "sources.json"
    if not manifest.is_file():
        return False
    licences = {entry.get("source"): str(entry.get("license", "")) for entry in json.loads(manifest.read_text("utf-8"))}
    licence = licences.get(source, "")
    return bool(licence) and not licence.lower().startswith("none")


def project_of(transcript: str) -> str:
    """The corpus folder a transcript comes from (`claude-code-spotter`): its project."""
    return transcript.split("/", 1)[0]


def half_of(project: str) -> str:
    """`A` or `B`: the projects split in two by the parity of the first byte of their name's
    SHA-256 — a split fixed before any tuning, the same on every machine. A is tuned on, B held out."""
    return "AB"[hashlib.sha256(project.encode()).digest()[0] % 2]

"""Extractive compaction stays flat as a session ages: time and summary size over 10 compactions.

What is measured: a generated coding-agent session (`ClaudeCodeSession`: Claude Code's tools on a
package of 100 files, todo lists, failing then passing test runs, the user's rules, the assistant's
decisions and next steps, with `_sessions.synthetic_session`'s tool output text) is appended to a
`ContextService` on a temporary SQLite home, a step at a time, until the view holds about 150,000
tokens (claude-sonnet-4-5, 200k window); then `compact(summarizer="extractive")` runs. The next
stretch of work (the same steps on another package) is appended until the view is back at 150,000
tokens and it compacts again, ten times: each compaction summarizes a head of the same make-up with
new facts in it, and updates the previous summary (the anchor). Reported per compaction: its time
(wall and CPU, the least of dry runs just before it; and the wall time of the one kept), the
summary's tokens and bullets, and each as a ratio to the first compaction.

Two arms, side by side in one run: "after" is the code in this tree; "before" is the same loop run in
a child process against the package as it was at commit `BEFORE` (extracted with `git archive` into
a temporary directory put first on `PYTHONPATH`), when git and that commit are available.

Why: issue 15 — at a constant view size, the 10th compaction took 4× the first and its summary held
3× the bullets (a quadratic duplicate check, a budget fit that re-rendered the summary per bullet,
and an anchor merged whole every time). Target: every compaction ≤ 1.5× the first, in time and size.
"""

from __future__ import annotations

import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _harness import ROOT, Options, Timing, ms, options, report, run
from _sessions import SEED, synthetic_session

BEFORE = "114973a1698207230c3572b53e80229358247ad3"
"""The commit before the flat-compaction change (issue 15)."""
MODEL = "claude-sonnet-4-5"
CHILD = "CONTEXTFOLD_BENCH_FLAT_CHILD"
"""Set in the child process that runs the loop on the old code and prints its steps as JSON."""


@dataclass(frozen=True)
class Step:
    seconds: float
    """The compaction that was kept (one run)."""
    best: float
    """Fastest of dry runs of the same compaction just before it (all the work but the write)."""
    cpu: float
    """Least CPU time (this process, all its threads) of those dry runs: what other processes on
    the machine do cannot inflate it."""
    summary_tokens: int
    bullets: int
    in_view: int
    head: int


_AREAS = ("store", "policy", "compaction", "server", "tokens", "formats", "spill", "tail", "http", "cli")
_NAMES = ("session", "reader", "writer", "cache", "index", "schema", "budget", "planner", "render", "limits")
_RULES = (
    "Never change the signature of {name} in {package}.",
    "You must keep {path} compatible with the old schema.",
    "Please always run {test} before you say it works.",
    "Don't add new dependencies to {package}.",
    "Prefer small functions in {path}.",
)
_DECISIONS = (
    "I'll use a {name} index here instead of scanning the {area} table of {package}.",
    "The fix is to cache the {name} per process in {path}.",
    "Let's go with a bounded queue for the {area} {name} of {package}.",
)
_TASKS = ("Update {name} in {path}", "Add a test for {test}", "Handle the empty {name} in {path}", "Document {path}")


class ClaudeCodeSession:
    """The generated session (`synthetic_session`, endlessly, a new seed per batch) reshaped as
    Claude Code writes it: `Read`/`Edit`/`Grep`/`Bash`/`TodoWrite` calls on a package of 100 files,
    each user turn working on a few of them, with its todo list, a test run that fails before one
    that passes, the user's rules now and then, the assistant's decisions, and a closing reply that
    lists next steps. Tool outputs keep the generated text (and its sizes).

    Each `stretch` (one per compaction) is the same work on another package of a monorepo: the same
    steps and outputs, every path, command, rule and task naming that package. So every compaction
    summarizes a head of the same make-up and new facts, and what changes from one to the next is
    only the session's age (its previous summary)."""

    def __init__(self, stretch: int, seed: int = SEED) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.stretch = stretch
        self.root = f"/repo/packages/pkg{stretch:02d}"
        self.files = [f"{self.root}/src/{area}/{name}.py" for area in _AREAS for name in _NAMES]
        self.focus: list[str] = []
        self.todos: list[str] = []
        self.failed = False

    def units(self) -> Iterator[list[dict[str, Any]]]:
        """Appendable units: a user message, or an assistant message with the results of its calls."""
        batch = 0
        while True:
            unit: list[dict[str, Any]] = []
            prefix = f"s{self.stretch}b{batch}_"
            for message in synthetic_session(2_000, seed=self.seed + batch):
                if message["role"] != "tool" and unit:
                    yield from self._reshape(unit, prefix)
                    unit = []
                unit.append(message)
            if unit:
                yield from self._reshape(unit, prefix)
            batch += 1

    def _words(self) -> dict[str, str]:
        path = self.rng.choice(self.focus)
        area = path.split("/")[-2]
        test = f"{self.root}/tests/test_{area}.py"
        return {"path": path, "area": area, "name": self.rng.choice(_NAMES), "test": test, "package": self.root}

    def _reshape(self, unit: list[dict[str, Any]], prefix: str) -> Iterator[list[dict[str, Any]]]:
        first = unit[0]
        if first["role"] == "user":
            self.focus = self.rng.sample(self.files, 5)
            self.todos = [self.rng.choice(_TASKS).format(**self._words()) for _ in range(self.rng.randint(2, 4))]
            self.failed = False
            text = first["content"].split(". ")[0] + f". Start with {self.focus[0]}."
            if self.rng.random() < 0.3:
                text += " " + self.rng.choice(_RULES).format(**self._words())
            yield [{"role": "user", "content": text}]
            yield self._todo_unit(prefix, done=0)
            return
        if not first.get("tool_calls"):
            yield self._todo_unit(prefix, done=len(self.todos))
            reply = first["content"]
            if self.rng.random() < 0.6:
                steps = [self.rng.choice(_TASKS).format(**self._words()) for _ in range(self.rng.randint(2, 3))]
                reply += "\n\nNext steps:\n" + "\n".join(f"- {step}" for step in steps)
            yield [{"role": "assistant", "content": reply}]
            return
        text = first["content"]
        if self.rng.random() < 0.1:
            text = (text + " " + self.rng.choice(_DECISIONS).format(**self._words())).strip()
        calls, results = [], []
        for call, result in zip(first["tool_calls"], unit[1:], strict=True):
            name, args, output = self._call(
                call["function"]["name"], json.loads(call["function"]["arguments"]), result["content"]
            )
            call_id = prefix + call["id"]
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}})
            results.append({"role": "tool", "tool_call_id": call_id, "content": output})
        yield [{"role": "assistant", "content": text, "tool_calls": calls}, *results]

    def _call(self, tool: str, args: dict[str, Any], output: str) -> tuple[str, dict[str, Any], str]:
        words = self._words()
        match tool:
            case "read_file":
                return "Read", {"file_path": words["path"]}, output
            case "edit_file":
                head = f"The file {words['path']} has been updated. Here's a snippet of the edited file:\n"
                return (
                    "Edit",
                    {"file_path": words["path"], "old_string": args["old"], "new_string": args["new"]},
                    head + output,
                )
            case "grep":
                return "Grep", {"pattern": args["pattern"], "path": f"{self.root}/src"}, output
            case "run_tests":
                command = f"python -m pytest {words['test']} -x -q"
                if not self.failed:
                    self.failed = True
                    failure = f"FAILED {words['test']}::test_{words['name']} - AssertionError: assert 3 == 4"
                    return (
                        "Bash",
                        {"command": command},
                        f"Exit code 1\n{output}\n{failure}\n1 failed, 12 passed in 2.41s",
                    )
                return "Bash", {"command": command}, f"{output}\n13 passed in 2.38s"
            case "list_dir":
                return "Bash", {"command": f"ls -la {self.root}/src/{words['area']}"}, output
            case _:
                return "Bash", {"command": f"cd {self.root} && {args['command']}"}, output

    def _todo_unit(self, prefix: str, done: int) -> list[dict[str, Any]]:
        todos = [
            {
                "content": t,
                "status": "completed" if i < done else "in_progress" if i == done else "pending",
                "activeForm": t,
            }
            for i, t in enumerate(self.todos)
        ]
        call_id = f"{prefix}todo_{self.rng.getrandbits(40):010x}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "TodoWrite", "arguments": json.dumps({"todos": todos})},
        }
        result = "Todos have been modified successfully. Ensure that you continue to use the todo list."
        return [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]


def bullets(summary: str) -> int:
    return sum(1 for line in summary.splitlines() if line.startswith("- ") and line != "- (none)")


async def loop(target: int, compactions: int, repeat: int) -> list[Step]:
    """Fill to `target` tokens in view and compact, `compactions` times; one `Step` per compaction."""
    from contextfold.config import load_settings
    from contextfold.service.facade import ContextService

    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="bench-flat-") as home:
        async with await ContextService.open(load_settings({"home": Path(home)}, environ={})) as svc:
            session = (await svc.open_session(model=MODEL)).session_id
            for stretch in range(compactions):
                source = ClaudeCodeSession(stretch).units()
                in_view = (await svc.status(session)).tokens_in_view
                while in_view < target:
                    in_view = (await svc.append(session, next(source), format="openai")).status.tokens_in_view
                dry, cpu = Timing(), Timing()
                for _ in range(repeat):
                    gc.collect()
                    started, cpu_started = time.perf_counter(), time.process_time()
                    await svc.compact(session, summarizer="extractive", dry_run=True)
                    dry.runs.append(time.perf_counter() - started)
                    cpu.runs.append(time.process_time() - cpu_started)
                gc.collect()
                started = time.perf_counter()
                result = await svc.compact(session, summarizer="extractive")
                seconds = time.perf_counter() - started
                if not result.compacted or result.summarizer != "extractive":
                    raise AssertionError(f"not compacted by the extractive summarizer: {result}")
                summary = await svc.summary_text(session)
                steps.append(
                    Step(
                        seconds,
                        dry.best,
                        cpu.best,
                        result.summary_tokens,
                        bullets(summary),
                        in_view,
                        result.head_messages,
                    )
                )
    return steps


def before_arm(target: int, compactions: int, repeat: int) -> tuple[list[Step] | None, str]:
    """The same loop on the package as it was at `BEFORE`, in a child process; (steps, note)."""
    with tempfile.TemporaryDirectory(prefix="bench-flat-before-") as scratch:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", BEFORE, "server/contextfold"],
            capture_output=True,
        )
        if archive.returncode != 0:
            return None, f"before arm skipped: git archive {BEFORE} failed ({archive.stderr.decode()[-200:].strip()})"
        subprocess.run(["tar", "-x", "-C", scratch], input=archive.stdout, check=True)
        env = {
            **os.environ,
            CHILD: json.dumps([target, compactions, repeat]),
            "PYTHONPATH": str(Path(scratch) / "server"),
        }
        child = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True)
        if child.returncode != 0:
            return None, f"before arm failed: {child.stderr[-300:].strip()}"
        found = json.loads(child.stdout.splitlines()[-1])
        if not found["package"].startswith(scratch):
            return None, f"before arm skipped: the child imported {found['package']}, not the old copy"
        return [Step(**step) for step in found["steps"]], f"before: the package at commit {BEFORE[:10]}"


def row(arm: str, index: int, step: Step, first: Step) -> dict[str, Any]:
    return {
        "arm": arm,
        "#": index + 1,
        "view": f"{step.in_view / 1000:,.0f}k",
        "head": step.head,
        "ms": ms(step.seconds),
        "best ms": ms(step.best),
        "cpu ms": ms(step.cpu),
        "cpu ×": f"{step.cpu / first.cpu:.2f}",
        "tokens": f"{step.summary_tokens:,}",
        "tok ×": f"{step.summary_tokens / first.summary_tokens:.2f}",
        "bullets": step.bullets,
        "bul ×": f"{step.bullets / max(1, first.bullets):.2f}",
    }


def worst(steps: list[Step]) -> str:
    first = steps[0]
    return (
        f"CPU time {max(s.cpu for s in steps) / first.cpu:.2f}×, tokens "
        f"{max(s.summary_tokens for s in steps) / first.summary_tokens:.2f}×, bullets "
        f"{max(s.bullets for s in steps) / max(1, first.bullets):.2f}×"
    )


async def main(opts: Options) -> None:
    target, compactions = (30_000, 3) if opts.quick else (150_000, 10)
    after = await loop(target, compactions, opts.repeat)
    before, note = before_arm(target, compactions, opts.repeat)
    rows = []
    for arm, steps in (("before", before), ("after", after)):
        if steps:
            rows += [row(arm, i, step, steps[0]) for i, step in enumerate(steps)]
    notes = [
        f"{compactions} extractive compactions of one generated session, each once the view is back at "
        f"{target:,} tokens ({MODEL}); view: tokens in view then; head: messages summarized. ms: the compaction "
        "kept (one run); best ms: the fastest of "
        f"{opts.repeat} dry runs of it just before (the same work but the write); cpu ms: their least CPU "
        "time (other processes on a shared machine inflate wall time, not CPU time).",
        "tokens / bullets: the summary written (bullets other than `(none)`); × columns: ratio to the arm's first.",
        note,
        f"worst after: {worst(after)} (target ≤ 1.5× the first)",
    ]
    if before:
        notes.append(f"worst before: {worst(before)}")
    report(
        "compaction_flat", "Extractive compaction as a session ages, at a constant view size", rows, opts, notes=notes
    )


def child() -> None:
    """The loop alone, its steps printed as JSON (the before arm)."""
    import asyncio

    import contextfold

    target, compactions, repeat = json.loads(os.environ[CHILD])
    steps = asyncio.run(loop(target, compactions, repeat))
    print(json.dumps({"package": contextfold.__file__, "steps": [asdict(s) for s in steps]}))


if __name__ == "__main__":
    if os.environ.get(CHILD):
        child()
    else:
        run(main, options(__doc__.splitlines()[0], repeat=5))

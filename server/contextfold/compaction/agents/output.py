"""What a tool's output says, whatever agent ran the tool.

Whether an output with no exit code reports a failure, the most telling line of a failure, and a
test run's verdict and summary line. Outputs are scanned at the start and the end only: a
command's verdict sits at the bottom, and a megabyte of output must not make extraction slow.
"""

from __future__ import annotations

import re

from contextfold.compaction.agents.base import Outcome
from contextfold.compaction.agents.text import clip

_SCAN_HEAD = 6_000
_SCAN_TAIL = 20_000


def scan_window(text: str) -> str:
    """The start and the end of a long output (all of a short one)."""
    if len(text) <= _SCAN_HEAD + _SCAN_TAIL:
        return text
    return text[:_SCAN_HEAD] + "\n" + text[-_SCAN_TAIL:]


TRACEBACK = "Traceback (most recent call last)"
# Without an exit code, an output whose first line announces a failure ("Error: …", "Pre-commit
# validation failed:", "npm ERR! …", "fatal: …") is a failure: harness hooks that block a command
# report that way.
# The word must end its clause ("failed:", "Error!", "Permission denied"), so "Error rate: 0.5%"
# or "errors: 0" printed by a program that worked do not count.
_FAILED_HEADLINE = re.compile(
    r"^(?:\S+[ \t]+){0,3}(?:failed|failure|error|fatal|denied|refused|aborted)(?:\[[\w-]+\])?[ \t]*(?::|!|$)"
    r"|^npm ERR!|command not found",
    re.IGNORECASE,
)


def judged(body: str, failed: bool = False) -> Outcome:
    """The outcome of an output that carries no exit code, judged by what it says: a traceback
    or a failure headline is a failure. `failed`: the harness already said so."""
    if failed or TRACEBACK in scan_window(body):
        return Outcome(False, None, body)
    headline = body.lstrip()[:300].split("\n", 1)[0]
    if _FAILED_HEADLINE.search(headline):
        return Outcome(False, None, body)
    return Outcome(True, None, body)


_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) \S+.*$", re.MULTILINE)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Fault)\b(?::.*)?$")
_EXUNIT_TEST = re.compile(r"^\s*\d+\) test .+$", re.MULTILINE)
_JS_FAIL = re.compile(r"^[ \t]*(?:×|✗|✕|FAIL)[ \t]+\S.*$", re.MULTILINE)
_NUMBERED_FAILURE = re.compile(
    r"^[ \t]*\d+\) (?:(?:Failure|Error):\n[ \t]*\S.*|\S.*\n[ \t]+Failure/Error: .*)$", re.MULTILINE
)
"""RSpec's and minitest's first failure: `1) User#name returns the nickname` with its `Failure/Error:`
line, or `1) Failure:` with the test it names on the next."""
_GO_FAIL = re.compile(r"^--- FAIL: .*(?:\n[ \t]+\S.*)?", re.MULTILINE)
"""Go's failing test and the first line it logged: `--- FAIL: TestParse (0.00s)` then `    parse_test.go:42: got 15`."""
_ERROR_LINE = re.compile(
    r"^\s*(?:error(?:\[\w+\])?:|Error:|ERROR:|fatal:|FATAL:|✘ \[ERROR\]|E\s{2,}\S|FAIL:|e: \S*\.kts?\b).*$",
    re.MULTILINE,
)
_ELIXIR_CRASH = re.compile(r"^\s*\*\* \(\w+\).*$", re.MULTILINE)
_ANY_EXCEPTION = re.compile(r"^.*\b\w+(?:Error|Exception)\b: .+$", re.MULTILINE)
# Compiler and linter style: `path/to/file.ext:LINE[:COL]: message` (also dialyzer's `…:58:13:pattern_match`).
_LOCATED = re.compile(
    r"^[^\s:]*[\w/]\.\w{1,6}:\d+(?::\d+)?:\s*\S.*$|^[^\s(]*[\w/]\.\w{1,6}\(\d+,\d+\): (?:error|warning)\b.*$",
    re.MULTILINE,
)
"""Also the TypeScript compiler's and MSBuild's `src/a.ts(12,5): error TS2304: …`."""
_FAILURE_SUMMARY = re.compile(
    r"^.*\b(?:[1-9]\d* failed|[1-9]\d* failures?|[1-9]\d* errors?)\b.*$", re.MULTILINE | re.IGNORECASE
)


_FAILURE_WORDS = re.compile(
    r"\b(?:fail(?:ed|s|ure)?|errors?|denied|not found|no such|cannot|can't|could ?n[o']t|unable|refused"
    r"|timed out|unreachable|invalid|missing|abort(?:ed)?|panic(?:ked)?|packet loss)\b",
    re.IGNORECASE,
)
_NO_FAILURE = re.compile(r"\b0 (?:errors?|failed|failures?)\b|\b(?:errors?|failures?|failed):? 0\b", re.IGNORECASE)


def error_line(body: str) -> str:
    """The most telling line of a failed command's output: a failing test, the exception that
    ended a traceback, an `error:` line, a failure count, else the first line that says in words
    that something failed (not a script's `echo` of what it does next, printed before it failed),
    else the first line."""
    window = scan_window(body)
    if "\\n" in window.split("\n", 1)[0]:
        # Output that arrived JSON-escaped (a hook's message): read its `\n` as line breaks.
        window = window.replace("\\n", "\n")
    failed = _PYTEST_FAILED.findall(window)
    if failed:
        return clip(failed[0])
    if TRACEBACK in window:
        tail = window[window.rfind(TRACEBACK) :]
        for line in reversed(tail.splitlines()):
            if _EXCEPTION_LINE.match(line.strip()):
                return clip(line)
    test = _EXUNIT_TEST.search(window)
    if test:
        return clip(test.group(0))
    numbered = _NUMBERED_FAILURE.search(window)
    if numbered:
        return clip(numbered.group(0))
    go = _GO_FAIL.search(window)
    if go:
        return clip(go.group(0))
    crashes = _ELIXIR_CRASH.findall(window)
    if crashes:
        return clip(crashes[-1])  # the innermost `** (SomeError)` is the cause
    for pattern in (_JS_FAIL, _ERROR_LINE, _ANY_EXCEPTION, _LOCATED, _FAILURE_SUMMARY):
        found = pattern.search(window)
        if found:
            return clip(found.group(0))
    lines = [line.strip() for line in window.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    if lines[0].endswith(":") and len(lines) > 1:
        return clip(f"{lines[0]} {lines[1]}")  # "Pre-commit validation failed:" says what only on the next line
    if not _FAILED_HEADLINE.search(lines[0]):
        for line in lines:
            if _FAILURE_WORDS.search(line) and not _NO_FAILURE.search(line):
                return clip(line)
    return clip(lines[0])


_PASS_SUMMARY = re.compile(
    r"^.*(?:\b\d+ passed\b|\b\d+ (?:tests?|examples?|specs?|runs?), (?:with |\d+ assertions, )?0 failures\b"
    r"|Tests?\s+\d+ passed"
    r"|^OK\b|\bRan \d+ tests?\b|test result: ok|\ball (?:tests|specs) passed\b|\b\d+ passing\b"
    r"|^\s*congratulations :\)|^nox > Session \S+ was successful"
    r"|Tests run: [1-9]\d*, Failures: 0, Errors: 0\b|\bPassed!\s+- Failed:\s+0\b).*$",
    re.MULTILINE | re.IGNORECASE,
)
"""A passing run's summary line: pytest's and Jest's counts, ExUnit's, RSpec's, minitest's and Jasmine's `…, 0
failures`, XCTest's `with 0 failures`, unittest's `OK`, Mocha's `5 passing`, cargo's `test result: ok`,
Go's `ok`, Maven's `Tests run: 3, Failures: 0, Errors: 0`, `dotnet test`'s `Passed!`, Cypress's `All
specs passed!`, tox's `congratulations :)`, nox's `Session tests was successful`."""
_CRASHED = re.compile(r"^\s*\*\* \(\w+|^\s*(?:error|Error|ERROR)(?:\[\w+\])?:", re.MULTILINE)
_TEST_FAILED = re.compile(
    r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b|^FAIL(?:ED)?\b|^--- FAIL:|Tests?\s+\d+ failed"
    r"|\b(?:Failures|Errors): [1-9]|\bFailed:\s+[1-9]|\bBUILD FAIL(?:URE|ED)\b|^nox > Session \S+ failed",
    re.MULTILINE,
)
"""A failing test or build in any of the usual runners' words: counts (`1 failed`, `2 failures`, Mocha's
`1 failing`), unittest's `FAIL:`, Go's `--- FAIL:` and its package's `FAIL` line, Maven's and Gradle's
`Failures: 1` and `BUILD FAILURE`, `dotnet test`'s `Failed:     1`, nox's `Session tests failed`."""


def suite_verdict(outcome: Outcome) -> tuple[bool | None, str]:
    """(passed, summary line) for a test command. Failures in the output win over a zero exit
    code (a pipe to `tail` hides the runner's own exit code); a pass needs a passing summary line
    or a known zero exit code. None: the output says neither (a run still going, a quiet runner)."""
    window = scan_window(outcome.body)
    passed_lines = _PASS_SUMMARY.findall(window)
    summary = clip(passed_lines[-1].strip(" =-*"), 120) if passed_lines else ""
    if outcome.ok is False or _TEST_FAILED.search(window) or _CRASHED.search(window) or TRACEBACK in window:
        return False, summary
    if passed_lines or outcome.exit_code == 0:
        return True, summary
    return None, summary

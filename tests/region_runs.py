"""A realistic run of tool calls (about 8,000 tokens) for the regions digest tests.

An agent chasing a failing health check in a small web service, as Claude Code's tools record
it: it looks around, searches, reads the handler, runs the tests (one fails with an exact
message), edits, lints (an error), reads the config and reruns the tests (all pass). The facts
below are what a digest must keep verbatim.
"""

from __future__ import annotations

from contextfold.domain import ToolPart

ERROR_MESSAGE = "E       AssertionError: expected 200, got 503"
FAILED_TEST = "FAILED tests/e2e/test_server.py::test_health - AssertionError: expected 200, got 503"
FIRST_VERDICT = "1 failed, 41 passed in 3.21s"
LAST_VERDICT = "42 passed in 3.05s"
LINT_ERROR = "src/app/server.py:88:5: F841 local variable 'started' is assigned to but never used"
GREP_HIT = "src/app/server.py:87:def handle_health(request):"
COMMANDS = ("git status --short", "pytest -x tests/e2e/test_server.py", "ruff check src", "pytest -q tests")


def _call(name: str, arguments: dict[str, object], output: str, *, error: bool = False) -> ToolPart:
    return ToolPart(
        call_id="",
        name=name,
        input=arguments,
        state="error" if error else "completed",
        output=None if error else output,
        error=output if error else None,
    )


def _numbered(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{i:>6}→{line}" for i, line in enumerate(lines, start))


def _module(name: str, functions: int) -> list[str]:
    out = [f'"""The {name} module."""', "", "from __future__ import annotations", "", "import logging", ""]
    for i in range(functions):
        out += [
            f"def {name}_step_{i}(request, *, retries: int = 3) -> dict:",
            f'    """Handle step {i} of the {name} flow and return the payload."""',
            f"    payload = {{'step': {i}, 'name': '{name}', 'retries': retries}}",
            "    if request.headers.get('x-debug'):",
            f"        logging.getLogger(__name__).debug('step %d payload %r', {i}, payload)",
            "    return payload",
            "",
        ]
    return out


def _pytest(verdict_failed: bool) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /srv/app",
        "configfile: pyproject.toml",
        "plugins: anyio-4.4.0, hypothesis-6.108.5",
        "collected 42 items",
        "",
    ]
    for i in range(14):
        lines.append(f"tests/test_module_{i}.py ...                                              [{(i + 1) * 7:3d}%]")
    if verdict_failed:
        lines += [
            "tests/e2e/test_server.py F",
            "",
            "=================================== FAILURES ===================================",
            "_________________________________ test_health __________________________________",
            "",
            "client = <starlette.testclient.TestClient object at 0x7f3a2c1b9d90>",
            "",
            "    def test_health(client):",
            "        response = client.get('/health')",
            ">       assert response.status_code == 200, f'expected 200, got {response.status_code}'",
            ERROR_MESSAGE,
            "E       assert 503 == 200",
            "E        +  where 503 = <Response [503]>.status_code",
            "",
            "tests/e2e/test_server.py:14: AssertionError",
            "------------------------------ Captured log call -------------------------------",
        ]
        lines += [f"WARNING  app.server:server.py:{90 + i} pool warm-up {i} pending" for i in range(20)]
        lines += [
            "=========================== short test summary info ============================",
            FAILED_TEST,
            f"========================= {FIRST_VERDICT} ==========================",
        ]
    else:
        lines += [
            "tests/e2e/test_server.py .",
            "",
            f"============================== {LAST_VERDICT} ==============================",
        ]
    return "\n".join(lines)


def realistic_run() -> list[ToolPart]:
    """Fourteen calls (ids `toolu_0000` … `toolu_0013`), about 8,000 tokens in the view (gpt-4o's tokenizer)."""
    status = "\n".join([" M src/app/server.py", " M tests/e2e/test_server.py", "?? notes/health.md"])
    hits = [GREP_HIT] + [
        f"src/app/{mod}.py:{10 + 7 * i}:def {mod}_step_{i}(request, *, retries: int = 3) -> dict:"
        for mod in ("routes", "views", "auth")
        for i in range(12)
    ]
    server = _module("server", 14)
    server[86:88] = ["def handle_health(request):", "    started = time.monotonic()"]
    settings = "\n".join(
        [
            "[project]",
            'name = "app"',
            'version = "2.3.1"',
            'requires-python = ">=3.11"',
            "",
            "[tool.app]",
            "pool_size = 8",
            "health_timeout_seconds = 2.5",
            'database_url = "postgresql://db/app"',
            "",
        ]
        + [f'option_{i} = "value {i}"' for i in range(40)]
    )
    lint = "\n".join([LINT_ERROR, "Found 1 error.", "[*] 1 fixable with the `--fix` option."])
    listing = "\n".join(
        [f"src/app/{name}.py" for name in ("server", "routes", "views", "auth", "db", "cache", "config")]
        + [f"tests/test_module_{i}.py" for i in range(14)]
    )
    calls = [
        _call("Bash", {"command": COMMANDS[0], "description": "Show changed files"}, status),
        _call("Glob", {"pattern": "**/*.py", "path": "/srv/app"}, listing),
        _call(
            "Grep",
            {"pattern": r"def \w+\(request", "path": "src/app", "output_mode": "content", "-n": True},
            "\n".join(hits),
        ),
        _call("Read", {"file_path": "/srv/app/src/app/server.py"}, _numbered(server)),
        _call("Bash", {"command": COMMANDS[1], "description": "Run the server tests"}, _pytest(True), error=True),
        _call(
            "Read",
            {"file_path": "/srv/app/src/app/routes.py", "offset": 1, "limit": 60},
            _numbered(_module("routes", 8)[:60]),
        ),
        _call(
            "Edit",
            {"file_path": "/srv/app/src/app/server.py", "old_string": "return 503", "new_string": "return 200"},
            "The file /srv/app/src/app/server.py has been updated. Here's the result of running `cat -n` "
            "on a snippet of the edited file:\n" + _numbered(server[80:100], 81),
        ),
        _call("Bash", {"command": COMMANDS[2], "description": "Lint"}, lint, error=True),
        _call("Read", {"file_path": "/srv/app/pyproject.toml"}, _numbered(settings.splitlines())),
        _call("Read", {"file_path": "/srv/app/src/app/views.py"}, _numbered(_module("views", 15))),
        _call("Bash", {"command": COMMANDS[3], "description": "Run all tests"}, _pytest(False)),
        _call(
            "Bash",
            {"command": "git diff --stat"},
            " src/app/server.py     | 4 ++--\n tests/e2e/test_server.py | 2 +-\n 2 files changed, 3 insertions(+), 3 deletions(-)",
        ),
        _call("Bash", {"command": "ls notes"}, "health.md\nplan.md"),
        _call(
            "Bash",
            {"command": "wc -l src/app/*.py"},
            "\n".join(f"  {100 + 13 * i} src/app/{n}.py" for i, n in enumerate(("server", "routes", "views")))
            + "\n  417 total",
        ),
    ]
    return [call.model_copy(update={"call_id": f"toolu_{i:04d}"}) for i, call in enumerate(calls)]


__all__ = [
    "COMMANDS",
    "ERROR_MESSAGE",
    "FAILED_TEST",
    "FIRST_VERDICT",
    "GREP_HIT",
    "LAST_VERDICT",
    "LINT_ERROR",
    "realistic_run",
]

"""The `contextfold` command: serve, demo, import, count, stats, token, and a session's own
commands (sessions, show, export, delete, prune, compact, watch).

This module parses the command line, loads the settings and dispatches. Each subcommand names
its handler as "module:function" (in `contextfold.cli.commands`, or `tokencli`), imported only when
that command runs: `--help` and `--version` load argparse and little else, `token` no store,
tokenizer or MCP SDK, `count` the tokenizer but no store or SDK, and only `serve` the SDK
(tests/e2e/test_coldstart.py, benchmarks/bench_coldstart.py). A handler calls the service (`count`
the tokenizer alone) and prints a table for people or JSON with `--json` (the wording lives in `cli_views`). Commands that only
read open the home so that nothing in it is created or changed. Errors print one line saying
what to do, naming CLI commands, and exit 2.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextfold import __version__
from contextfold.cli.reporting import error_line
from contextfold.errors import USER_ERRORS
from contextfold.names import IMPORT_FORMATS, REMOVAL_STRATEGIES, TOKENS_ENV

if TYPE_CHECKING:
    from contextfold.config import Settings

Handler = Callable[[argparse.Namespace, "Settings"], "int | Coroutine[Any, Any, int]"]

EXIT_USAGE = 2


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextfold",
        description="Manage an LLM agent's conversation context: count, store, render (MCP server and CLI).",
    )
    parser.add_argument("--version", action="version", version=f"contextfold {__version__}")
    parser.add_argument("--home", help="data home (default: $CONTEXTFOLD_HOME or the platform data dir)")
    parser.add_argument("--config", help="TOML settings file (default: <home>/config.toml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the MCP server (stdio, or streamable HTTP with --http)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others need tokens)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    serve.add_argument(
        "--tokens-file",
        help=f"bearer tokens per tenant (default <home>/tokens if it exists; see `token add`; also ${TOKENS_ENV}); "
        "re-read when it changes",
    )
    serve.add_argument(
        "--tools",
        metavar="NAMES",
        help="offer only these tools, comma-separated (what `hooks install` gives an agent: read_output,search_history)",
    )
    _add_team_options(serve)
    serve.set_defaults(handler="commands.serve:serve")

    _add_token_commands(sub)
    _add_proxy_command(sub)

    inspector = sub.add_parser("ui", help="the web inspector: sessions, what the model sees, summaries, outputs")
    inspector.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others need tokens)")
    inspector.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    inspector.add_argument("--no-open", action="store_true", help="do not open a browser; print the address")
    inspector.add_argument(
        "--tokens-file",
        help=f"bearer tokens per tenant, as serve --http takes them (default <home>/tokens if it exists; also ${TOKENS_ENV})",
    )
    inspector.set_defaults(handler="commands.ui:ui")

    demo = sub.add_parser("demo", help="import a bundled real transcript and show its context budget")
    demo.add_argument("--model", default="gpt-4o", help="model to measure against (default gpt-4o)")
    demo.set_defaults(handler="commands.demo:demo")

    imp = sub.add_parser("import", help="import a transcript file into a session")
    imp.add_argument(
        "file",
        help="Claude Code JSONL, Codex rollout JSONL, normalized JSONL, Anthropic/OpenAI JSON, "
        "a mini-swe-agent or SWE-agent trajectory, or an OpenHands event list; or a Claude Code or Codex "
        "session id, whose transcript is found under ~/.claude/projects or ~/.codex/sessions",
    )
    imp.add_argument(
        "--session",
        help="session id (created if new; default: for a Claude Code or Codex session file, the session its hooks "
        "keep, claude-code-<id> or codex-<id>; else a fresh id); importing a file again adds only what is new",
    )
    imp.add_argument("--format", choices=list(IMPORT_FORMATS), help="default: detected")
    imp.add_argument("--model", help="model id (default: the one the transcript used)")
    imp.add_argument("--json", action="store_true", help="print JSON")
    imp.set_defaults(handler="commands.changing:import_transcript")

    count = sub.add_parser("count", help="count the tokens of a file or stdin")
    count.add_argument("file", nargs="?", help="file to count; - or nothing for stdin")
    count.add_argument("--model", help="model id (default: the default_model setting)")
    count.add_argument("--json", action="store_true", help="print JSON")
    count.set_defaults(handler="commands.count:count")

    stats = sub.add_parser("stats", help="sessions and their context budget")
    stats.add_argument("session", nargs="?", help="one session's details")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(handler="commands.reading:stats")
    _add_session_commands(sub)
    collect = sub.add_parser("gc", help="delete expired spilled outputs and enforce the spill quota")
    collect.add_argument("--dry-run", action="store_true", help="report what would be removed")
    collect.add_argument("--json", action="store_true", help="print JSON")
    collect.set_defaults(handler="commands.changing:gc")
    _add_hook_commands(sub)
    _add_migrate_command(sub)
    _add_helper_commands(sub)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The whole command line as argparse holds it (for shell completion and the reference docs)."""
    return _build_parser()


def _add_helper_commands(sub: Any) -> None:
    """`models` (the catalogue) and `completion SHELL` (a script generated from this parser)."""
    models = sub.add_parser("models", help="the models contextfold knows: windows, reserves, how tokens are counted")
    models.add_argument("--json", action="store_true", help="print JSON")
    models.set_defaults(handler="commands.models:models")
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL. bash: `source <(contextfold completion bash)` in "
        "~/.bashrc; zsh: `source <(contextfold completion zsh)` in ~/.zshrc; fish: `contextfold completion fish "
        "> ~/.config/fish/completions/contextfold.fish`.",
    )
    completion.add_argument("shell", choices=["bash", "zsh", "fish"])
    completion.set_defaults(handler="commands.completion:completion", light=True, build_parser=build_parser)


def _add_proxy_command(sub: Any) -> None:
    """`proxy`: another MCP server behind contextfold (handled by commands/proxy.py)."""
    proxy = sub.add_parser(
        "proxy",
        help="run an MCP server behind contextfold, which spills its oversized results (proxy -- COMMAND ARGS…)",
        description="Serve MCP on stdio (or --http) in front of an upstream MCP server: everything passes "
        "through, except results over the limits, which are saved whole and replaced by a preview with a "
        "read_output hint. Give the upstream as `-- COMMAND [ARGS…]`, --url, or --config.",
    )
    proxy.add_argument("--url", help="the upstream's streamable HTTP endpoint instead of a command")
    proxy.add_argument(
        "--header", action="append", default=[], metavar="K=V", help="an HTTP header for --url (repeatable)"
    )
    proxy.add_argument(
        "--config",
        "--servers",
        dest="servers",
        metavar="FILE",
        help='several upstreams: a JSON file in the apps\' {"mcpServers": {...}} format, tools prefixed by server',
    )
    proxy.add_argument("--max-tokens", type=int, metavar="N", help="cut results over N tokens (proxy_max_tokens)")
    proxy.add_argument(
        "--preview-tokens", type=int, metavar="N", help="tokens a cut result keeps (proxy_preview_tokens)"
    )
    proxy.add_argument(
        "--timeout", type=float, metavar="S", help="fail requests unanswered for S seconds (proxy_timeout_seconds)"
    )
    proxy.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    proxy.add_argument("--host", default="127.0.0.1", help="with --http: bind address (default 127.0.0.1)")
    proxy.add_argument("--port", type=int, default=8766, help="with --http: port (default 8766)")
    proxy.add_argument(
        "--tokens-file",
        help="with --http: bearer tokens per tenant, as serve --http takes them (default <home>/tokens if it "
        f"exists; also ${TOKENS_ENV})",
    )
    proxy.add_argument("upstream", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]: the upstream server to run")
    proxy.set_defaults(handler="commands.proxy:proxy")


AGENTS = ("claude-code", "codex")


def _add_hook_commands(sub: Any) -> None:
    """`hook AGENT EVENT` (run by the agent, light: it loads the settings itself only when it must)
    and `hooks install|uninstall|status AGENT`."""
    hook = sub.add_parser("hook", help="run one agent hook event: its JSON on stdin, the agent's JSON (or nothing) out")
    hook.add_argument("agent", choices=AGENTS)
    hook.add_argument("event", help="the agent's event name: PostToolUse, PreCompact, PostCompact, SessionStart, …")
    hook.set_defaults(handler="commands.hooks:hook", light=True)

    hooks = sub.add_parser(
        "hooks", help="put contextfold's hooks and MCP server into Claude Code or Codex (install, uninstall, status)"
    )
    actions = hooks.add_subparsers(dest="hooks_command", metavar="ACTION", required=True)
    for name, what in (
        ("install", "merge contextfold's hooks and MCP server into the agent's settings (others' entries kept)"),
        ("uninstall", "take them out again, restoring the settings as they were"),
        ("status", "what is installed, where, for which data home, and whether Codex trusts it"),
    ):
        action = actions.add_parser(name, help=what)
        if name == "status":
            action.add_argument("agent", choices=AGENTS, nargs="?", help="default: both")
        else:
            action.add_argument("agent", choices=AGENTS)
        action.add_argument(
            "--scope",
            choices=["user", "project"],
            default="user",
            help="default user; project: Claude Code's local settings for this project (.claude/settings.local.json "
            "and ~/.claude.json), Codex's .codex/ here",
        )
        action.add_argument(
            "--project", metavar="DIR", help="the project for --scope project (default: the current directory)"
        )
        if name == "status":
            action.add_argument("--json", action="store_true", help="print JSON")
        else:
            action.add_argument("--dry-run", action="store_true", help="print the change instead of making it")
        if name == "install":
            action.add_argument(
                "--no-trust",
                action="store_true",
                help="codex: do not record the hooks as trusted; you review them in Codex's /hooks",
            )
        action.set_defaults(handler=f"commands.hooks:{name}")


def _add_team_options(serve: Any) -> None:
    """`serve`'s options for a team: a PostgreSQL database shared by stateless replicas."""
    serve.add_argument(
        "--database",
        metavar="URL",
        help="postgresql://user:password@host:port/dbname to share sessions and spilled outputs between "
        "replicas (also the database setting, $CONTEXTFOLD_DATABASE); default the SQLite file in the home",
    )
    serve.add_argument(
        "--spill-url",
        metavar="URL",
        help="s3://bucket/prefix to keep spilled outputs in S3-compatible storage (credentials and endpoint from "
        "AWS_* variables; the spill_url setting); default the database when it is PostgreSQL, else <home>/outputs",
    )
    serve.add_argument(
        "--stateless",
        action="store_true",
        help="HTTP: answer handshake (2025-era) clients without MCP sessions, so any replica behind a load "
        "balancer serves any request (2026-07-28 clients are sessionless anyway)",
    )


def _add_migrate_command(sub: Any) -> None:
    """`migrate --to URL`: a SQLite home's data copied into PostgreSQL."""
    migrate = sub.add_parser("migrate", help="copy this home's SQLite sessions and spilled outputs into PostgreSQL")
    migrate.add_argument("--to", required=True, metavar="URL", help="postgresql://user:password@host:port/dbname")
    migrate.add_argument("--json", action="store_true", help="print JSON")
    migrate.set_defaults(handler="commands.migrate:migrate")


def _add_token_commands(sub: Any) -> None:
    """`token` and its actions (add, rotate, remove, list): the tokens file, from the shell."""
    token = sub.add_parser("token", help="manage bearer tokens for HTTP tenants (add, rotate, remove, list)")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    where = "tokens file (default <home>/tokens, which serve --http reads)"

    add = actions.add_parser("add", help="create a tenant's token (printed once) and store its hash")
    add.add_argument("tenant")
    add.add_argument("--rotate", action="store_true", help="replace the tenant's token if it has one")
    add.set_defaults(handler="commands.token:add")

    rotate = actions.add_parser("rotate", help="replace a tenant's token with a new one (printed once)")
    rotate.add_argument("tenant")
    rotate.set_defaults(handler="commands.token:rotate")

    remove = actions.add_parser("remove", help="delete a tenant's token; servers refuse it at once")
    remove.add_argument("tenant")
    remove.set_defaults(handler="commands.token:remove")

    listing = actions.add_parser("list", help="tenants, creation times and hash fingerprints (no secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler="commands.token:list_tokens")

    for action in (add, rotate, remove, listing):
        action.add_argument("--tokens-file", help=where)


def _add_session_commands(sub: Any) -> None:
    """`sessions`, `show`, `export`, `delete`, `prune`, `compact`, `edit`, `handoff`, `pin`, `unpin`, `pins`, `undo` and `watch`."""
    listing = sub.add_parser("sessions", help="list sessions: id, title, model, messages, tokens in view, state")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler="commands.reading:sessions")

    show = sub.add_parser("show", help="a session's view as its model sees it, with counts and state")
    show.add_argument("session")
    show.add_argument("--format", choices=["anthropic", "openai"], help="print the view as this API's JSON instead")
    show.add_argument(
        "--breakdown", action="store_true", help="tokens in view by category (system, user, tool results, …) instead"
    )
    show.add_argument("--json", action="store_true", help="with --breakdown: print JSON")
    show.set_defaults(handler="commands.reading:show")

    export = sub.add_parser("export", help="a session as Anthropic or OpenAI JSON: the view, or --full history")
    export.add_argument("session")
    export.add_argument("--format", choices=["anthropic", "openai"], default="openai", help="default openai")
    export.add_argument(
        "--full", action="store_true", help="every stored message with its id, those out of view included"
    )
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page instead: the breakdown, the view, the life, summaries with their "
        "cited messages, spilled outputs",
    )
    export.set_defaults(handler="commands.reading:export")

    delete = sub.add_parser("delete", help="delete a session, its messages and its spilled outputs")
    delete.add_argument("session")
    delete.add_argument("--yes", action="store_true", help="confirm: the session cannot be recovered")
    delete.set_defaults(handler="commands.changing:delete")

    prune = sub.add_parser("prune", help="clear old tool outputs from a session's view (they stay stored)")
    prune.add_argument("session")
    prune.add_argument("--dry-run", action="store_true", help="report what would be cleared")
    prune.add_argument(
        "--keep-tool-uses", type=int, metavar="N", help="clear every tool result but the newest N tool uses"
    )
    prune.add_argument(
        "--clear-at-least",
        type=int,
        metavar="TOKENS",
        help="prune only if it frees at least this many tokens (the minimum the tool also takes)",
    )
    prune.add_argument("--apply", metavar="TOKEN", help="clear exactly what a --dry-run listed, if nothing changed")
    prune.add_argument("--json", action="store_true", help="print JSON")
    prune.set_defaults(handler="commands.changing:prune")

    compact = sub.add_parser("compact", help="summarize a session's older history (or remove it from view)")
    compact.add_argument("session")
    compact.add_argument("--dry-run", action="store_true", help="report what would change, summary included")
    compact.add_argument(
        "--strategy", default="anchored", choices=["anchored", "regions", *REMOVAL_STRATEGIES], help="default anchored"
    )
    compact.add_argument(
        "--summarizer",
        choices=["auto", "anthropic", "extractive"],
        help="default: the summarizer setting (auto: anthropic when ANTHROPIC_API_KEY is set, else extractive)",
    )
    compact.add_argument("--instructions", help="what the summary should focus on")
    compact.add_argument(
        "--apply", metavar="TOKEN", help="write exactly the summary a --dry-run showed, if nothing changed"
    )
    compact.add_argument("--range", metavar="M10..M80", help="summarize only these messages, in their place")
    compact.add_argument("--keep-pins", action="store_true", help="--range: keep pinned messages inside it")
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.set_defaults(handler="commands.changing:compact")

    edit = sub.add_parser("edit", help="correct a session's summary: its full text, or only the sections to add to")
    edit.add_argument("session")
    edit.add_argument("file", nargs="?", default="-", help="Markdown with the summary's headings; - or nothing: stdin")
    edit.add_argument("--json", action="store_true", help="print JSON")
    edit.set_defaults(handler="commands.steering:edit")

    handoff = sub.add_parser(
        "handoff", help="one message that starts a fresh session or another agent where this one stands"
    )
    handoff.add_argument("session")
    handoff.add_argument("--to", choices=["markdown", "claude-code", "codex"], default="markdown")
    handoff.add_argument("--tokens", type=int, help="at most this many tokens (default: the handoff_tokens setting)")
    handoff.add_argument("--json", action="store_true", help="print JSON")
    handoff.set_defaults(handler="commands.steering:handoff")

    pin = sub.add_parser("pin", help="pin messages (m12, m10..m80) or a note so no compaction takes them away")
    pin.add_argument("session")
    pin.add_argument("ref", nargs="?", help="a message (m12) or a span (m10..m80)")
    pin.add_argument("--note", help="a fact carried word for word into every summary instead")
    pin.add_argument("--json", action="store_true", help="print JSON")
    pin.set_defaults(handler="commands.steering:pin")
    unpin = sub.add_parser("unpin", help="remove a pin (its id, as `pins` lists it)")
    unpin.add_argument("session")
    unpin.add_argument("pin_id", metavar="PIN")
    unpin.add_argument("--json", action="store_true", help="print JSON")
    unpin.set_defaults(handler="commands.steering:unpin")
    pins = sub.add_parser("pins", help="a session's pins and what they cost in view")
    pins.add_argument("session")
    pins.add_argument("--json", action="store_true", help="print JSON")
    pins.set_defaults(handler="commands.steering:pins")
    undo = sub.add_parser("undo", help="take back the last compaction or prune: the view is as it was before")
    undo.add_argument("session")
    which = undo.add_mutually_exclusive_group()
    which.add_argument(
        "--compaction", action="store_const", dest="what", const="compaction", help="the last compaction"
    )
    which.add_argument("--prune", action="store_const", dest="what", const="prune", help="the last prune")
    undo.add_argument("--json", action="store_true", help="print JSON")
    undo.set_defaults(handler="commands.steering:undo", what="last")

    search = sub.add_parser(
        "search", help="full-text search over stored sessions (one, a project's, or all), or read messages back"
    )
    search.add_argument("query", nargs="?", help='words (all of them), "a phrase", or words joined with OR')
    search.add_argument("--session", help="search this session (the default scope when given)")
    search.add_argument("--within", choices=["session", "project", "all"], help="default: session if given, else all")
    search.add_argument("--project", help="a project root (the agent's working directory) for --within project")
    search.add_argument("--since", help="a time or phrase: 2026-11-20, yesterday, 'last 2 hours', a timestamp")
    search.add_argument("--until", help="same forms as --since; a day or phrase counts to its end")
    search.add_argument("--regex", action="store_true", help="QUERY is a regular expression (one --session)")
    search.add_argument("--limit", type=int, default=10, help="hits per page (default 10)")
    search.add_argument("--offset", type=int, default=0, help="skip this many hits (the page before said where)")
    search.add_argument("--expand", metavar="REF", help="read messages back: m12 and those around it, or [m3, m9-m12]")
    search.add_argument("--around", type=int, default=2, help="messages either side of an --expand m12 (default 2)")
    search.add_argument("--index", action="store_true", help="first index older history, with progress on stderr")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.set_defaults(handler="commands.search:search")

    watch = sub.add_parser("watch", help="follow a live session's tokens, usable budget and state until Ctrl-C")
    watch.add_argument("session")
    watch.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between looks (default 1)")
    watch.set_defaults(handler="commands.reading:watch")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names; its exit status.

    A reader that stops reading (`contextfold demo | head`) ends the command quietly with 0, as
    `git` and `ls` do: whatever the handler was writing, and however the failed write came back
    (a `BrokenPipeError`, rich's `SystemExit` after one, either inside an exception group).
    """
    try:
        status = _run(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe would fail out of reach
        return status
    except BaseException as exc:
        if not _broken_pipe(exc):
            raise
        _stdout_to_devnull()
        return 0


def _broken_pipe(exc: BaseException) -> bool:
    """Whether `exc` comes from writing to a pipe nobody reads any more: a `BrokenPipeError`, the
    `SystemExit` rich raises while handling one, or an exception group holding either."""
    if isinstance(exc, BrokenPipeError):
        return True
    if isinstance(exc, SystemExit):
        return exc.__context__ is not None and _broken_pipe(exc.__context__)
    if isinstance(exc, BaseExceptionGroup):
        return any(_broken_pipe(inner) for inner in exc.exceptions)
    return False


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so what is still buffered for the closed pipe goes nowhere at exit
    instead of failing again (Python's own advice: docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (an embedder's): nothing buffered to lose
        pass


def _run(argv: Sequence[str] | None) -> int:
    settings: Settings | None = None
    try:
        with _starting():
            parser = _build_parser()
            args = parser.parse_args(argv)
            if not getattr(args, "command", None):
                parser.print_help()
                return EXIT_USAGE
            if getattr(args, "light", False):  # a hook: it reads only the settings it needs, when it needs them
                return int(_handler(args.handler)(args, None))  # type: ignore[arg-type]
            from contextfold.config import load_settings  # pydantic: after parsing, which --help and --version end

            settings = load_settings({"home": args.home}, config_file=Path(args.config) if args.config else None)
            if getattr(args, "model", None):  # a typo must not silently become an estimate
                from contextfold.cli.commands.models import warn_unknown_model

                warn_unknown_model(args.model)
            run = _handler(args.handler)
        outcome = run(args, settings)
        if isinstance(outcome, Coroutine):
            import asyncio  # already loaded: every async handler's module uses the store

            outcome = asyncio.run(outcome)
        return int(outcome)
    except Exception as exc:
        if _broken_pipe(exc) or not _reported(exc):
            raise
        print(f"contextfold: error: {error_line(exc, settings.home if settings else None)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _handler(name: str) -> Handler:
    """The function `name` ("module:function", under this package) names, its module imported now."""
    module, _, function = name.partition(":")
    handler: Handler = getattr(importlib.import_module(f".{module}", __package__), function)
    return handler


_started = False


@contextmanager
def _starting() -> Iterator[None]:
    """The process's first command loads its modules with the collector off, then freezes them.

    What start-up allocates (classes, schemas, the SDK's models) lives as long as the process:
    collections while it loads free next to nothing, and once frozen it is never walked again
    (the few cycles start-up leaves behind stay). `serve` answers its first request about a tenth
    sooner, `token list` a sixth (`benchmarks/bench_coldstart.py`). Later calls in the same process
    (an embedder calling `main` again) load little and are left alone.
    """
    global _started
    if _started:
        yield
        return
    _started = True
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _reported(exc: Exception) -> bool:
    """Whether `exc` is a problem the user can fix, reported in one line (exit 2), not a bug."""
    if isinstance(exc, (*USER_ERRORS, OSError)):
        return True
    import sqlite3

    from contextfold.store.schema import (
        SchemaTooNewError,  # only the store raises these: loaded whenever one is the cause
    )

    return isinstance(exc, (SchemaTooNewError, sqlite3.Error))


if __name__ == "__main__":
    sys.exit(main())

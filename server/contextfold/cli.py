"""The `contextfold` command: serve, demo, import, count, stats, and a session's own commands
(sessions, show, export, delete, prune, compact, watch).

Each subcommand parses its flags, calls one `ContextService` method and prints the result, as a
table for people or as JSON with `--json` (the wording lives in `cli_views`). Commands that only
read open the home so that nothing in it is created or changed. Errors print one line saying what
to do, naming CLI commands, and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from . import __version__
from . import cli_views as views
from .config import Settings, SettingsError, load_settings
from .auth import TOKENS_ENV, TenantTokens, TokenFileError
from .importers import IMPORT_FORMATS, TranscriptError
from .results import SessionInfo, Status
from .service import USER_ERRORS, ContextService
from .strategies import REMOVAL_STRATEGIES
from .guard import open_for_reading, open_service, without_store
from .store import NotFoundError
from .store.schema import SchemaTooNewError
from .tokencli import default_path as default_tokens_path
from .tokencli import register as register_token_commands

EXIT_USAGE = 2


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


_table, _fmt, _status_lines = views.table, views.fmt, views.status_lines


async def _open(settings: Settings) -> ContextService:
    """The service on the data home. A home it cannot use normally (read-only, a damaged or newer
    database) still opens: the first call that needs the store raises one line saying why."""
    service, _ = await open_service(settings)
    return service


async def _read_session(settings: Settings, session_id: str) -> ContextService:
    """The service for a command that only reads `session_id`: nothing in the home is created or
    changed (see `guard.open_for_reading`)."""
    service = await open_for_reading(settings)
    if service is None:
        raise _no_database(settings, session_id)
    return service


async def _open_session(settings: Settings, session_id: str) -> ContextService:
    """The service for a command that changes `session_id`; a home without a database gets none."""
    if not settings.database_path.exists():
        raise _no_database(settings, session_id)
    return await _open(settings)


def _no_database(settings: Settings, session_id: str) -> views.CliError:
    return views.CliError(
        f"no session with id {session_id!r}: the data home {settings.home} holds no database yet (no "
        f"{settings.database_path}); import a transcript with `contextfold import FILE`, or pass --home"
    )


# -- commands --------------------------------------------------------------------------------------


LOOPBACK = ("127.0.0.1", "localhost", "::1")
IMPORT_SKIPS_SHOWN = 5
"""`import` names the conversation records it left out once there are more than a handful."""


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from .httpserve import serve_http
    from .server import build_server

    if not args.http:
        build_server(settings).run()
        return 0
    tokens = TenantTokens.load(_tokens_file(args, settings))
    if args.host not in LOOPBACK and not tokens:
        raise SettingsError(
            f"refusing to serve on {args.host} without bearer tokens: anyone who can reach it could read "
            f"every session. Create one with `contextfold token add NAME` (kept in {default_tokens_path(settings)}, "
            f"read by default; or pass --tokens-file FILE, or set {TOKENS_ENV}), or bind 127.0.0.1"
        )
    server = build_server(settings, tokens=tokens or None)
    serve_http(server, settings, host=args.host, port=args.port)
    return 0


def _tokens_file(args: argparse.Namespace, settings: Settings) -> Path | None:
    """--tokens-file (which must exist), else <home>/tokens if `token add` made one, else none."""
    if args.tokens_file:
        return Path(args.tokens_file).expanduser()
    default = default_tokens_path(settings)
    return default if default.exists() else None


async def _cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    async with await _open(settings) as service:
        result = await service.import_transcript(
            Path(args.file), session_id=args.session, format=args.format, model=args.model
        )
        status = await service.status(result.session_id)
    if args.json:
        _print_json(result.model_dump())
    else:
        if result.already_imported_lines:
            print(
                f"{args.file}: its first {result.already_imported_lines:,} lines were already imported into "
                f"session {result.session_id}; only what follows was read"
            )
        print(
            f"imported {result.messages:,} messages ({result.tool_calls:,} tool calls, "
            f"{result.tool_results:,} results) from {args.file} [{result.source_format}]"
        )
        if result.compactions:
            print(
                f"replayed {result.compactions:,} compaction(s) the agent made: the view starts at its last summary, "
                "the history before it is kept but hidden"
            )
        left_out = sum(result.skipped.values())
        if left_out > IMPORT_SKIPS_SHOWN:
            reasons = ", ".join(f"{count:,} {reason.replace('_', ' ')}" for reason, count in sorted(result.skipped.items()))
            print(f"left out {left_out:,} conversation records: {reasons}")
        for warning in result.warnings:
            print(f"warning: {warning}")
        print(_status_lines(status))
    return 0


async def _cmd_count(args: argparse.Namespace, settings: Settings) -> int:
    if args.file in (None, "-"):
        text = sys.stdin.read()
    else:
        text = Path(args.file).read_text("utf-8", errors="surrogateescape")
    count = without_store(settings).count_tokens(text=text, model=args.model)  # needs no data home
    if args.json:
        _print_json(count.model_dump())
    else:
        how = count.encoding or "character estimate"
        if count.factor != 1.0:
            how += f" × {count.factor}"
        print(f"{count.tokens:,} tokens  ({count.method}, {how}, model {count.model})")
    return 0


async def _cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    if args.session:
        async with await _read_session(settings, args.session) as service:
            status = await service.status(args.session)
        if args.json:
            _print_json(status.model_dump())
        else:
            print(_status_lines(status))
        return 0
    reader = await open_for_reading(settings)
    if reader is None:
        if args.json:
            _print_json({"sessions": [], "totals": None})
        else:
            print(f"no sessions yet (no database at {settings.database_path})")
        return 0
    async with reader as service:
        statuses = [status for _, status in await _sessions(service)]
        totals = await service.totals()
    if args.json:
        _print_json({"sessions": [s.model_dump() for s in statuses], "totals": totals})
    elif not statuses:
        print(f"no sessions in {settings.database_path}")
    else:
        rows = [(s.session_id, s.model, s.message_count, s.tokens_in_view, s.ratio, s.state) for s in statuses]
        print(_table(rows, ["session", "model", "messages", "in view", "used", "state"]))
        print(
            f"\n{totals['sessions']:,} sessions, {totals['messages']:,} messages; "
            f"{totals['compactions']:,} compactions freed {totals['compaction_tokens_freed']:,} tokens, "
            f"{totals['prunes']:,} prunes freed {totals['prune_tokens_freed']:,}"
        )
    return 0


async def _sessions(service: ContextService) -> list[tuple[SessionInfo, Status]]:
    """Every session, newest first, with where it stands."""
    infos: list[SessionInfo] = []
    cursor: str | None = None
    while True:
        page = await service.list_sessions(limit=500, cursor=cursor)
        infos += page.sessions
        if not (cursor := page.next_cursor):
            break
    return [(info, await service.status(info.id)) for info in infos]


async def _cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    reader = await open_for_reading(settings)
    if reader is None:
        sessions = []
    else:
        async with reader as service:
            sessions = await _sessions(service)
    if args.json:
        _print_json(views.sessions_json(sessions))
    elif reader is None:
        print(f"no sessions yet (no database at {settings.database_path})")
    elif not sessions:
        print(f"no sessions in {settings.database_path}")
    else:
        print(views.sessions_table(sessions))
    return 0


async def _cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    async with await _read_session(settings, args.session) as service:
        if args.format:
            context = await service.get_context(args.session, format=args.format)
            _print_json(context.model_dump())
            return 0
        session, messages = await service.session_view(args.session)
        status = await service.status(args.session)
    print("\n".join(views.view_lines(session, messages, status, shutil.get_terminal_size().columns)))
    return 0


async def _cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    async with await _read_session(settings, args.session) as service:
        if args.full:
            session, view = await service.session_view(args.session)
            history = await service.session_history(args.session)
            body = views.full_export(session, history, {m.id for m in view}, args.format)
        else:
            body = (await service.get_context(args.session, format=args.format)).model_dump()
    text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    if not args.output or args.output == "-":
        sys.stdout.write(text)
        return 0
    if Path(args.output).is_dir():
        raise views.CliError(f"-o {args.output}: is a directory; name the file to write")
    _write_whole(Path(args.output), text)
    what = f"{len(body['messages']):,} stored messages" if args.full else f"the view ({len(body['messages']):,} messages)"
    print(f"wrote {what} of session {args.session} as {args.format} JSON to {args.output}", file=sys.stderr)
    return 0


def _write_whole(path: Path, text: str) -> None:
    """`text` to `path`, all or nothing: a failed write leaves no half-written file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, "utf-8", errors="surrogateescape")
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


async def _cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    async with await _read_session(settings, args.session) as service:
        status = await service.status(args.session)
    if not args.yes:
        raise views.CliError(
            f"delete removes session {args.session!r} and its {status.message_count:,} stored messages for good; "
            "pass --yes to confirm (or `contextfold export SESSION --full -o FILE` first to keep a copy)"
        )
    async with await _open(settings) as service:
        await service.delete_session(args.session)
    print(f"deleted session {args.session} ({status.message_count:,} messages)")
    return 0


async def _cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    async with await _open_session(settings, args.session) as service:
        result = await service.prune(args.session, dry_run=args.dry_run, keep_tool_uses=args.keep_tool_uses)
    if args.json:
        _print_json(result.model_dump())
    else:
        print("\n".join(views.prune_lines(result)))
    return 0


async def _cmd_compact(args: argparse.Namespace, settings: Settings) -> int:
    async with await _open_session(settings, args.session) as service:
        result = await service.compact(
            args.session,
            strategy=args.strategy,
            summarizer=args.summarizer,
            instructions=args.instructions,
            dry_run=args.dry_run,
        )
    if args.json:
        _print_json(result.model_dump())
    else:
        print("\n".join(views.compact_lines(result)))
    return 0


def _cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    """Follow a session's numbers until Ctrl-C: a live table on a terminal, a line per change elsewhere."""
    if not args.interval > 0:
        raise views.CliError(f"--interval: expected a positive number of seconds, got {args.interval}")

    async def poll() -> Status:
        # Opened afresh each time: the home may gain or lose a running server (and its -wal) meanwhile.
        async with await _read_session(settings, args.session) as service:
            return await service.status(args.session)

    status = asyncio.run(poll())  # a missing session is an error before anything is shown
    try:
        if sys.stdout.isatty():
            _watch_live(args.interval, status, lambda: asyncio.run(poll()))
        else:
            _watch_lines(args.interval, status, lambda: asyncio.run(poll()))
    except KeyboardInterrupt:
        return 0
    except NotFoundError:
        print(f"session {args.session} was deleted", flush=True)
        return 1
    return 0


def _watch_lines(interval: float, status: Status, poll: Callable[[], Status]) -> None:
    print(views.watch_line(status, None, time.time()), flush=True)
    while True:
        time.sleep(interval)
        now = poll()
        if views.watch_changed(status, now):
            print(views.watch_line(now, status, time.time()), flush=True)
            status = now


def _watch_live(interval: float, status: Status, poll: Callable[[], Status]) -> None:
    from rich.live import Live

    changed_at, previous = time.time(), None
    with Live(views.watch_table(status, previous, changed_at), auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            now = poll()
            if views.watch_changed(status, now):
                changed_at, previous, status = time.time(), status, now
            live.update(views.watch_table(status, previous, changed_at), refresh=True)


async def _cmd_gc(args: argparse.Namespace, settings: Settings) -> int:
    async with await _open(settings) as service:
        result = await service.gc(dry_run=args.dry_run)
    if args.json:
        _print_json(result.model_dump())
    else:
        verb = "would remove" if result.dry_run else "removed"
        print(
            f"{verb} {result.outputs_removed:,} expired or evicted outputs and {result.files_removed:,} files "
            f"({result.bytes_freed:,} bytes); {result.bytes_kept:,} bytes kept in {settings.spill_path}"
        )
    return 0


async def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console

    from .demo import run_demo

    await run_demo(settings, model=args.model, console=Console())
    return 0


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
    serve.set_defaults(run=_cmd_serve, is_async=False)

    register_token_commands(sub)

    demo = sub.add_parser("demo", help="import a bundled real transcript and show its context budget")
    demo.add_argument("--model", default="gpt-4o", help="model to measure against (default gpt-4o)")
    demo.set_defaults(run=_cmd_demo, is_async=True)

    imp = sub.add_parser("import", help="import a transcript file into a session")
    imp.add_argument(
        "file",
        help="Claude Code JSONL, Codex rollout JSONL, normalized JSONL, Anthropic/OpenAI JSON, "
        "a mini-swe-agent or SWE-agent trajectory, or an OpenHands event list",
    )
    imp.add_argument(
        "--session", help="session id (created if new; default a fresh id); importing a file again adds only what is new"
    )
    imp.add_argument("--format", choices=list(IMPORT_FORMATS), help="default: detected")
    imp.add_argument("--model", help="model id (default: the one the transcript used)")
    imp.add_argument("--json", action="store_true", help="print JSON")
    imp.set_defaults(run=_cmd_import, is_async=True)

    count = sub.add_parser("count", help="count the tokens of a file or stdin")
    count.add_argument("file", nargs="?", help="file to count; - or nothing for stdin")
    count.add_argument("--model", help="model id (default: the default_model setting)")
    count.add_argument("--json", action="store_true", help="print JSON")
    count.set_defaults(run=_cmd_count, is_async=True)

    stats = sub.add_parser("stats", help="sessions and their context budget")
    stats.add_argument("session", nargs="?", help="one session's details")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(run=_cmd_stats, is_async=True)
    _add_session_commands(sub)
    gc = sub.add_parser("gc", help="delete expired spilled outputs and enforce the spill quota")
    gc.add_argument("--dry-run", action="store_true", help="report what would be removed")
    gc.add_argument("--json", action="store_true", help="print JSON")
    gc.set_defaults(run=_cmd_gc, is_async=True)
    return parser


def _add_session_commands(sub: Any) -> None:
    """`sessions`, `show`, `export`, `delete`, `prune`, `compact` and `watch`."""
    listing = sub.add_parser("sessions", help="list sessions: id, title, model, messages, tokens in view, state")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_cmd_sessions, is_async=True)

    show = sub.add_parser("show", help="a session's view as its model sees it, with counts and state")
    show.add_argument("session")
    show.add_argument("--format", choices=["anthropic", "openai"], help="print the view as this API's JSON instead")
    show.set_defaults(run=_cmd_show, is_async=True)

    export = sub.add_parser("export", help="a session as Anthropic or OpenAI JSON: the view, or --full history")
    export.add_argument("session")
    export.add_argument("--format", choices=["anthropic", "openai"], default="openai", help="default openai")
    export.add_argument(
        "--full", action="store_true", help="every stored message with its id, those out of view included"
    )
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(run=_cmd_export, is_async=True)

    delete = sub.add_parser("delete", help="delete a session, its messages and its spilled outputs")
    delete.add_argument("session")
    delete.add_argument("--yes", action="store_true", help="confirm: the session cannot be recovered")
    delete.set_defaults(run=_cmd_delete, is_async=True)

    prune = sub.add_parser("prune", help="clear old tool outputs from a session's view (they stay stored)")
    prune.add_argument("session")
    prune.add_argument("--dry-run", action="store_true", help="report what would be cleared")
    prune.add_argument(
        "--keep-tool-uses", type=int, metavar="N", help="clear every tool result but the newest N tool uses"
    )
    prune.add_argument("--json", action="store_true", help="print JSON")
    prune.set_defaults(run=_cmd_prune, is_async=True)

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
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.set_defaults(run=_cmd_compact, is_async=True)

    watch = sub.add_parser("watch", help="follow a live session's tokens, usable budget and state until Ctrl-C")
    watch.add_argument("session")
    watch.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between looks (default 1)")
    watch.set_defaults(run=_cmd_watch, is_async=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    settings: Settings | None = None
    try:
        settings = load_settings(
            {"home": args.home}, config_file=Path(args.config) if args.config else None
        )
        run: Callable[..., Any] = args.run
        if args.is_async:
            coroutine: Coroutine[Any, Any, int] = run(args, settings)
            return asyncio.run(coroutine)
        return int(run(args, settings))
    except (
        *USER_ERRORS, TranscriptError, SettingsError, SchemaTooNewError, TokenFileError, OSError, sqlite3.Error
    ) as exc:
        print(f"contextfold: error: {views.error_line(exc, settings.home if settings else None)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

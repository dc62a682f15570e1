"""The `contextfold` command: serve, demo, import, count, stats.

Each subcommand parses its flags, calls one `ContextService` method and prints the result, as a
table for people or as JSON with `--json`. Errors print one line saying what to do and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .config import Settings, SettingsError, load_settings
from .errors import brief
from .auth import TOKENS_ENV, TenantTokens, TokenFileError, add_token
from .formats.importers import IMPORT_FORMATS, TranscriptError
from .results import Status
from .service import USER_ERRORS, ContextService
from .guard import open_service
from .store.schema import SchemaTooNewError

EXIT_USAGE = 2


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))] if rows else []

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric and numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.1%}" if value <= 10 else f"{value:,.0f}"
    return str(value)


def _status_lines(status: Status) -> str:
    rows = [
        ("session", status.session_id),
        ("model", status.model + ("" if status.model_known else " (unknown: default limits)")),
        ("messages", status.message_count),
        ("tokens in view", f"{status.tokens_in_view:,} ({status.method})"),
        ("tokens stored", status.tokens_stored),
        ("usable", status.usable if status.context_window else "unlimited"),
        ("used", status.ratio),
        ("state", status.state),
        ("next", status.recommended_action),
    ]
    if status.tokens_reported is not None:
        rows.insert(4, ("tokens reported", status.tokens_reported))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {_fmt(v)}" for k, v in rows)


async def _open(settings: Settings) -> ContextService:
    """The service on the data home. A home it cannot use normally (read-only, a damaged or newer
    database) still opens: the first call that needs the store raises one line saying why."""
    service, _ = await open_service(settings)
    return service


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
    tokens = TenantTokens.load(Path(args.tokens_file) if args.tokens_file else None)
    if args.host not in LOOPBACK and not tokens:
        raise SettingsError(
            f"refusing to serve on {args.host} without bearer tokens: anyone who can reach it could read "
            f"every session. Create one with `contextfold token add TENANT --tokens-file FILE` and pass "
            f"--tokens-file FILE (or set {TOKENS_ENV}), or bind 127.0.0.1"
        )
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"
    server = build_server(settings, tokens=tokens or None, url=url)
    serve_http(server, settings, host=args.host, port=args.port)
    return 0


def _cmd_token(args: argparse.Namespace, settings: Settings) -> int:
    path = Path(args.tokens_file) if args.tokens_file else settings.home / "tokens"
    token = add_token(path, args.tenant)
    print(f"token for tenant {args.tenant!r} (shown once; only its hash is stored in {path}):")
    print(token)
    return 0


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
    async with await _open(settings) as service:
        count = service.count_tokens(text=text, model=args.model)
    if args.json:
        _print_json(count.model_dump())
    else:
        how = count.encoding or "character estimate"
        if count.factor != 1.0:
            how += f" × {count.factor}"
        print(f"{count.tokens:,} tokens  ({count.method}, {how}, model {count.model})")
    return 0


async def _cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    async with await _open(settings) as service:
        if args.session:
            status = await service.status(args.session)
            if args.json:
                _print_json(status.model_dump())
            else:
                print(_status_lines(status))
            return 0
        listing = await service.list_sessions(limit=500)
        statuses = [await service.status(s.id) for s in listing.sessions]
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
    serve.add_argument("--tokens-file", help=f"bearer tokens per tenant (see `token add`; also ${TOKENS_ENV})")
    serve.set_defaults(run=_cmd_serve, is_async=False)

    token = sub.add_parser("token", help="manage bearer tokens for HTTP tenants")
    token_sub = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_add = token_sub.add_parser("add", help="create a token for a tenant and store its hash")
    token_add.add_argument("tenant")
    token_add.add_argument("--tokens-file", help="where hashes are kept (default <home>/tokens)")
    token_add.set_defaults(run=_cmd_token, is_async=False)

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
    gc = sub.add_parser("gc", help="delete expired spilled outputs and enforce the spill quota")
    gc.add_argument("--dry-run", action="store_true", help="report what would be removed")
    gc.add_argument("--json", action="store_true", help="print JSON")
    gc.set_defaults(run=_cmd_gc, is_async=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
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
        print(f"contextfold: error: {brief(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

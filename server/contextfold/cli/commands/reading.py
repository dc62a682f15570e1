"""The commands that look at sessions without changing them: stats, sessions, show, export, watch.

Each opens the data home only to read (`guard.open_for_reading`): nothing in it is created or changed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from contextfold.cli import views
from contextfold.cli.commands._home import all_sessions, read_session
from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.errors import NotFoundError
from contextfold.home.opening import open_for_reading
from contextfold.importers.marks import marks_in, problems
from contextfold.results import Status
from contextfold.service.facade import ContextService


async def stats(args: argparse.Namespace, settings: Settings) -> int:
    if args.session:
        async with await read_session(settings, args.session) as service:
            status = await service.status(args.session)
            unread = await _import_problems(service, args.session)
        if args.json:
            print_json({**status.model_dump(), "import_problems": unread})
        else:
            print(views.status_lines(status))
            for problem in unread:
                print(f"note: {problem}")
        return 0
    reader = await open_for_reading(settings)
    if reader is None:
        if args.json:
            print_json({"sessions": [], "totals": None})
        else:
            print(f"no sessions yet (no database at {settings.database_name})")
        return 0
    async with reader as service:
        statuses = [status for _, status in await all_sessions(service)]
        totals = await service.totals()
        noted = {s.session_id: await _import_problems(service, s.session_id) for s in statuses}
    if args.json:
        print_json({"sessions": [s.model_dump() for s in statuses], "totals": totals})
    elif not statuses:
        print(f"no sessions in {settings.database_name}")
    else:
        rows = [(s.session_id, s.model, s.message_count, s.tokens_in_view, s.ratio, s.state) for s in statuses]
        print(views.table(rows, ["session", "model", "messages", "in view", "used", "state"]))
        print(
            f"\n{totals['sessions']:,} sessions, {totals['messages']:,} messages; "
            f"{totals['compactions']:,} compactions freed {totals['compaction_tokens_freed']:,} tokens, "
            f"{totals['prunes']:,} prunes freed {totals['prune_tokens_freed']:,}"
        )
        for session_id, said in noted.items():
            for problem in said:
                print(f"note: session {session_id}: {problem}")
    return 0


async def _import_problems(service: ContextService, session_id: str) -> list[str]:
    """What imports into the session could not read of its transcripts, in words."""
    return problems(marks_in((await service.store.get_session(session_id)).metadata))


async def sessions(args: argparse.Namespace, settings: Settings) -> int:
    reader = await open_for_reading(settings)
    if reader is None:
        found = []
    else:
        async with reader as service:
            found = await all_sessions(service)
    if args.json:
        print_json(views.sessions_json(found))
    elif reader is None:
        print(f"no sessions yet (no database at {settings.database_name})")
    elif not found:
        print(f"no sessions in {settings.database_name}")
    else:
        print(views.sessions_table(found))
    return 0


async def show(args: argparse.Namespace, settings: Settings) -> int:
    if getattr(args, "json", False) and not getattr(args, "breakdown", False):
        raise views.UsageError("--json goes with --breakdown (for the view as JSON, pass --format anthropic|openai)")
    if getattr(args, "breakdown", False) and args.format:
        raise views.UsageError("--breakdown and --format are two different answers; pass one of them")
    async with await read_session(settings, args.session) as service:
        if getattr(args, "breakdown", False):
            breakdown = await service.breakdown(args.session)
            if args.json:
                print_json(breakdown.model_dump())
            else:
                print(views.breakdown_lines(breakdown))
            return 0
        if args.format:
            context = await service.get_context(args.session, format=args.format)
            print_json(context.model_dump())
            return 0
        session, messages = await service.session_view(args.session)
        status = await service.status(args.session)
    print("\n".join(views.view_lines(session, messages, status, shutil.get_terminal_size().columns)))
    return 0


async def export(args: argparse.Namespace, settings: Settings) -> int:
    if getattr(args, "html", None):
        return await _export_html(args, settings)
    async with await read_session(settings, args.session) as service:
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
        raise views.UsageError(f"-o {args.output}: is a directory; name the file to write")
    _write_whole(Path(args.output), text)
    what = (
        f"{len(body['messages']):,} stored messages" if args.full else f"the view ({len(body['messages']):,} messages)"
    )
    print(f"wrote {what} of session {args.session} as {args.format} JSON to {args.output}", file=sys.stderr)
    return 0


async def _export_html(args: argparse.Namespace, settings: Settings) -> int:
    if args.full or args.output:
        raise views.UsageError("--html FILE is its own export; leave out --full and -o")
    target = Path(args.html)
    if target.is_dir():
        raise views.UsageError(f"--html {args.html}: is a directory; name the file to write")
    from contextfold.web.export import export_html  # jinja2 and the templates, for this branch only

    async with await read_session(settings, args.session) as service:
        page = await export_html(service, args.session)
    _write_whole(target, page)
    print(
        f"wrote session {args.session} as one HTML file ({len(page.encode()):,} bytes) to {args.html}", file=sys.stderr
    )
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


def watch(args: argparse.Namespace, settings: Settings) -> int:
    """Follow a session's numbers until Ctrl-C: a live table on a terminal, a line per change elsewhere."""
    if not args.interval > 0:
        raise views.UsageError(f"--interval: expected a positive number of seconds, got {args.interval}")

    async def poll() -> Status:
        # Opened afresh each time: the home may gain or lose a running server (and its -wal) meanwhile.
        async with await read_session(settings, args.session) as service:
            return await service.status(args.session)

    # A shell starts a background job with SIGINT ignored, and Python then keeps it ignored: watch
    # runs until Ctrl-C, so it takes the signal back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
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

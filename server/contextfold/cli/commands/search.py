"""`contextfold search`: the history search the MCP tool `search_history` and the web inspector
offer, from the command line (one service function behind all three), and `--index`, which
builds the search index over a home's older history with its progress on stderr."""

from __future__ import annotations

import argparse
import sys
import time

from contextfold.cli.commands._home import open_home
from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.errors import ReadOnlyHome, UsageError


async def search(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.database_url and not settings.database_path.exists():
        raise UsageError(f"the data home {settings.home} holds no database yet; nothing to search")
    async with await open_home(settings) as service:
        if args.index:
            await _build_index(service, settings)
            if args.query is None and args.expand is None:
                return 0
        page = await service.search(
            args.query,
            session_id=args.session,
            within=args.within,
            project=args.project,
            since=args.since,
            until=args.until,
            mode="regex" if args.regex else "text",
            limit=args.limit,
            offset=args.offset,
            expand=args.expand,
            around=args.around,
        )
    if args.json:
        print_json(page.model_dump())
    else:
        print(page.text)
    return 0


async def _build_index(service: object, settings: Settings) -> None:
    """Index every part stored before the search index existed, saying how far it got about
    once a second (several processes may do this at once: they share the work)."""
    from contextfold.service.facade import ContextService

    assert isinstance(service, ContextService)
    store = service._runtime.store
    said = 0.0
    progress = await store.index_step(settings.search_index_batch)
    while not progress.complete or progress.waiting:
        if not progress.writable:
            raise ReadOnlyHome(f"the data home {settings.home} cannot be written, so its search index cannot be built")
        if time.monotonic() - said >= 1.0:
            said = time.monotonic()
            print(f"indexing older history for search: {progress.done:,} of {progress.total:,} parts", file=sys.stderr)
        progress = await store.index_step(settings.search_index_batch)
    print(f"search index complete ({progress.total:,} older parts indexed)", file=sys.stderr)

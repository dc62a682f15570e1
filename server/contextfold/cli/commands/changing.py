"""The commands that change the data home: import, delete, prune, compact, gc."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextfold.cli import views
from contextfold.cli.commands._home import open_home, open_session, read_session
from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.home.opening import open_for_reading
from contextfold.results import GcResult

IMPORT_SKIPS_SHOWN = 5
"""`import` names the conversation records it left out once there are more than a handful."""


async def import_transcript(args: argparse.Namespace, settings: Settings) -> int:
    from contextfold.cli.commands.transcripts import resolve

    path = resolve(args.file, settings)  # a Claude Code or Codex session id finds its transcript
    if str(path) != args.file:
        if not args.json:
            print(f"session {args.file}: {path}")
        args.file = str(path)
    async with await open_home(settings) as service:
        result = await service.import_transcript(
            Path(args.file), session_id=args.session, format=args.format, model=args.model
        )
        status = await service.status(result.session_id)
    if args.json:
        print_json(result.model_dump())
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
            reasons = ", ".join(
                f"{count:,} {reason.replace('_', ' ')}" for reason, count in sorted(result.skipped.items())
            )
            print(f"left out {left_out:,} conversation records: {reasons}")
        for warning in result.warnings:
            print(f"warning: {warning}")
        print(views.status_lines(status))
    return 0


async def delete(args: argparse.Namespace, settings: Settings) -> int:
    async with await read_session(settings, args.session) as service:
        status = await service.status(args.session)
    if not args.yes:
        raise views.UsageError(
            f"delete removes session {args.session!r} and its {status.message_count:,} stored messages for good; "
            "pass --yes to confirm (or `contextfold export SESSION --full -o FILE` first to keep a copy)"
        )
    async with await open_home(settings) as service:
        await service.delete_session(args.session)
    print(f"deleted session {args.session} ({status.message_count:,} messages)")
    return 0


async def prune(args: argparse.Namespace, settings: Settings) -> int:
    async with await open_session(settings, args.session) as service:
        result = await service.prune(
            args.session,
            dry_run=args.dry_run,
            keep_tool_uses=args.keep_tool_uses,
            clear_at_least=args.clear_at_least,
            apply=args.apply,
        )
    if args.json:
        print_json(result.model_dump())
    else:
        print("\n".join(views.prune_lines(result)))
    return 0


async def compact(args: argparse.Namespace, settings: Settings) -> int:
    async with await open_session(settings, args.session) as service:
        if args.range is not None:
            result = await service.compact_range(
                args.session,
                args.range,
                keep_pins=args.keep_pins,
                summarizer=args.summarizer,
                instructions=args.instructions,
                dry_run=args.dry_run,
            )
        else:
            result = await service.compact(
                args.session,
                strategy=args.strategy,
                summarizer=args.summarizer,
                instructions=args.instructions,
                dry_run=args.dry_run,
                apply=args.apply,
            )
    if args.json:
        print_json(result.model_dump())
    else:
        print("\n".join(views.compact_lines(result)))
    return 0


async def gc(args: argparse.Namespace, settings: Settings) -> int:
    if args.dry_run:  # only reads: a home without a database stays as it is, like every reading command
        reader = await open_for_reading(settings)
        if reader is None:
            if args.json:
                print_json(
                    GcResult(dry_run=True, outputs_removed=0, files_removed=0, bytes_freed=0, bytes_kept=0).model_dump()
                )
            else:
                print(f"nothing to remove (no database at {settings.database_name})")
            return 0
        async with reader as service:
            result = await service.gc(dry_run=True)
    else:
        async with await open_home(settings) as service:
            result = await service.gc(dry_run=False)
    if args.json:
        print_json(result.model_dump())
    else:
        verb = "would remove" if result.dry_run else "removed"
        if result.sessions_removed:
            print(f"{verb} {result.sessions_removed:,} sessions past their retention, with all they held:")
            for gone in result.sessions:
                owner = f" (tenant {gone.owner})" if gone.owner else ""
                print(
                    f"  {gone.session_id}{owner}  {gone.messages:,} messages, last active {views.when(gone.last_active)}"
                    f"  [{gone.reason}]  {gone.title or ''}".rstrip()
                )
            if result.sessions_removed > len(result.sessions):
                print(f"  … and {result.sessions_removed - len(result.sessions):,} more")
        print(
            f"{verb} {result.outputs_removed:,} expired or evicted outputs and {result.files_removed:,} files "
            f"({result.bytes_freed:,} bytes); {result.bytes_kept:,} bytes kept in {settings.spill_name}"
        )
    return 0

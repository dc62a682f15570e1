"""The commands that steer a session's compaction: edit, handoff, pin, unpin, pins, undo (docs/steering.md)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from contextfold.cli import views
from contextfold.cli.commands._home import open_session, read_session
from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.results import PinList


def _who() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _print(result: PinList, as_json: bool) -> int:
    if as_json:
        print_json(result.model_dump())
    else:
        print("\n".join(views.pin_lines(result)))
    return 0


async def pin(args: argparse.Namespace, settings: Settings) -> int:
    if (args.ref is None) == (args.note is None):
        raise views.UsageError("pin takes a message reference (m12, m10..m80) or --note TEXT, not both")
    async with await open_session(settings, args.session) as service:
        result = await service.pin(args.session, ref=args.ref, note=args.note, by=_who())
    return _print(result, args.json)


async def unpin(args: argparse.Namespace, settings: Settings) -> int:
    async with await open_session(settings, args.session) as service:
        result = await service.unpin(args.session, args.pin_id)
    return _print(result, args.json)


async def pins(args: argparse.Namespace, settings: Settings) -> int:
    async with await read_session(settings, args.session) as service:
        result = await service.pins(args.session)
    return _print(result, args.json)


async def undo(args: argparse.Namespace, settings: Settings) -> int:
    async with await open_session(settings, args.session) as service:
        result = await service.undo(args.session, args.what)
    if args.json:
        print_json(result.model_dump())
    else:
        print("\n".join(views.undo_lines(result)))
    return 0


async def edit(args: argparse.Namespace, settings: Settings) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise views.UsageError(f"cannot read {args.file}: {exc}") from exc
    async with await open_session(settings, args.session) as service:
        result = await service.edit_summary(args.session, text, by=_who())
    if args.json:
        print_json(result.model_dump())
    else:
        print("\n".join(views.compact_lines(result)))
    return 0


async def handoff(args: argparse.Namespace, settings: Settings) -> int:
    async with await read_session(settings, args.session) as service:
        result = await service.handoff(args.session, to=args.to, tokens=args.tokens)
    if args.json:
        print_json(result.model_dump())
    else:
        print(result.text)
    return 0

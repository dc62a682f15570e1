"""`contextfold demo`: import a bundled real transcript and show its context budget, offline."""

from __future__ import annotations

import argparse

from rich.console import Console

from contextfold.cli.demo import run_demo
from contextfold.config import Settings


async def demo(args: argparse.Namespace, settings: Settings) -> int:
    await run_demo(settings, model=args.model, console=Console())
    return 0

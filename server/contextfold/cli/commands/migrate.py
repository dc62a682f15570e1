"""`contextfold migrate --to postgresql://…`: copy this home's SQLite data into PostgreSQL."""

from __future__ import annotations

import argparse
import sys

from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.errors import UsageError


def migrate(args: argparse.Namespace, settings: Settings) -> int:
    from contextfold.store.postgres import is_postgres_url

    if not is_postgres_url(args.to):
        raise UsageError(f"--to takes a postgresql://user:password@host:port/dbname URL, not {args.to!r}")
    if settings.database_url:
        raise UsageError(
            "the database setting already names PostgreSQL; migrate copies a SQLite home: point --home (or "
            "CONTEXTFOLD_HOME) at it and unset CONTEXTFOLD_DATABASE"
        )

    def progress(done: int, total: int) -> None:
        if not args.json and (done % 100 == 0 or done == total):
            print(f"  {done:,} of {total:,} sessions", file=sys.stderr, flush=True)

    report = _run(settings, args.to, progress)
    if args.json:
        print_json({**report.__dict__, "ok": report.ok})
    else:
        _print(report)
    return 0 if report.ok else 1


def _run(settings: Settings, url: str, progress):  # type: ignore[no-untyped-def]
    from contextfold.home.migration import migrate_home
    from contextfold.home.opening import storage_error
    from contextfold.store.pgfailures import postgres_problem

    try:
        return migrate_home(
            settings.database_path, settings.spill_path, url, spill_url=settings.spill_url, progress=progress
        )
    except Exception as exc:
        problem = postgres_problem(exc, url, "run migrate again: it goes on where it stopped")
        if problem is None:
            problem = storage_error(exc, settings)
        if problem is None:
            raise
        raise problem from exc


def _print(report) -> None:  # type: ignore[no-untyped-def]
    if report.upgraded_from is not None:
        print(f"upgraded {report.source} from schema {report.upgraded_from} first")
    print(
        f"{report.sessions:,} sessions in {report.source}: {report.copied:,} copied, {report.recopied:,} copied again "
        f"(changed since), {report.skipped:,} already there"
    )
    rows = report.rows
    print(
        f"in {report.target}: {rows.get('sessions', 0):,} sessions, {rows.get('messages', 0):,} messages, "
        f"{rows.get('parts', 0):,} parts, {rows.get('compactions', 0):,} compactions, {rows.get('outputs', 0):,} "
        f"outputs; {report.blobs:,} spilled contents ({report.blob_bytes:,} bytes) stored in this run"
    )
    for line in report.missing_content:
        print(f"not copied (its content is no longer in the home): {line}")
    if report.in_use:
        print(
            f"{len(report.in_use):,} session(s) copied earlier have been written in PostgreSQL since, so their counts "
            f"were not compared: {', '.join(report.in_use[:10])}{' …' if len(report.in_use) > 10 else ''}"
        )
    for line in report.conflicts:
        print(f"conflict: {line}")
    for line in report.mismatches:
        print(f"count mismatch: {line}")
    if report.ok:
        print("counts verified: every copied session's messages, parts, compactions and outputs match the home's")
    else:
        print("not verified: see above; run migrate again once resolved (copied sessions are skipped)")

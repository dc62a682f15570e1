"""The store as the server and the CLI open it: storage failures that say why.

`open_service` opens a data home in one of three modes and returns what keeps it from the first:

- normal;
- read-only, when the home cannot be written (a read-only mount, say): the database is opened
  read-only, reads work, and a write is refused with one line naming the home;
- unavailable, when the database cannot be used at all (written by a newer contextfold, damaged,
  unreadable): every call that needs the store answers the one line that says why and what to
  do, while those that need none (count_tokens, summarize) still work.

In every mode a storage failure during a call (a full disk, a file that became read-only, a page
found damaged) becomes a `StorageError` that names the path and the remedy, instead of a
traceback in the server's log and a bare "Error executing tool" for the client. By then the
store's transaction has rolled back and a spill file's temp file is gone: nothing of the call
is stored.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import inspect
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiosqlite

from contextfold.blobs.base import StoredBlob
from contextfold.blobs.files import FileBlobs
from contextfold.config import Settings
from contextfold.domain import Session
from contextfold.errors import ReadOnlyHome, StorageError, StorageFull, StoreUnavailable
from contextfold.service.facade import ContextService
from contextfold.store import SessionTransaction, SQLiteStore, Store, TenantStore
from contextfold.store.schema import SCHEMA_VERSION, SchemaTooNewError
from contextfold.store.sqlite import BUSY_TIMEOUT_MS

__all__ = [
    "check_database",
    "GuardedFiles",
    "GuardedStore",
    "GuardedTenant",
    "open_for_reading",
    "open_service",
    "storage_error",
    "without_store",
]

log = logging.getLogger(__name__)

_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_UNREADABLE = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN)


# -- what went wrong, in one line --------------------------------------------------------------------


def storage_error(
    exc: BaseException, settings: Settings, read_only: ReadOnlyHome | None = None, *, then: str = "retry"
) -> StorageError | None:
    """`exc` as a `StorageError` when the disk or the database caused it, else None.

    The causes `exc` was raised from or while handling count too: a ROLLBACK that fails because
    SQLite already rolled back hides the "database or disk is full" that made it necessary.
    With `read_only` (the home was opened read-only), any refused write reads as that.
    """
    for cause in _causes(exc):
        if isinstance(cause, sqlite3.Error):
            problem = _sqlite_problem(cause, settings, read_only, then)
        elif settings.spill_url and type(cause).__module__.startswith("obstore"):
            problem = StoreUnavailable(
                f"the spill store at {settings.spill_url} failed ({str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__}); "
                f"check that it is reachable and the AWS_* credentials, then {then}"
            )
        elif settings.database_url and type(cause).__module__.startswith(("psycopg", "contextfold.store.pg")):
            from contextfold.store.pgfailures import postgres_problem  # only a PostgreSQL deployment gets here

            problem = postgres_problem(cause, settings.database_url, then)
        elif isinstance(cause, OSError):
            problem = _os_problem(cause, settings, read_only, then)
        else:
            continue
        if problem is not None:
            return problem
    return None


@contextmanager
def _explained(settings: Settings, read_only: ReadOnlyHome | None = None) -> Iterator[None]:
    """Raise a storage failure inside the block as the `StorageError` that says why."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        problem = storage_error(exc, settings, read_only)
        if problem is None:
            raise
        raise problem from exc
    except Exception as exc:
        if not settings.database_url and not settings.spill_url:
            raise
        problem = storage_error(exc, settings, read_only)
        if problem is None:
            raise
        raise problem from exc


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _sqlite_problem(
    exc: sqlite3.Error, settings: Settings, read_only: ReadOnlyHome | None, then: str
) -> StorageError | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF
    database = settings.database_path
    if primary == sqlite3.SQLITE_FULL:
        return _full(database.parent, str(exc), then=then)
    if primary == sqlite3.SQLITE_READONLY:
        return _again(read_only) if read_only else _read_only(settings, str(exc))
    if primary in _DAMAGED:
        return _damaged(database, str(exc))
    if primary in _UNREADABLE:
        return StoreUnavailable(
            f"could not read or write the database at {database} ({exc}); check the disk and that the file is "
            "still there and readable, then restart contextfold"
        )
    return None


def _os_problem(exc: OSError, settings: Settings, read_only: ReadOnlyHome | None, then: str) -> StorageError | None:
    if exc.errno in _FULL:
        # A failed write() names no file; every file contextfold writes outside SQLite is a spill file.
        where = Path(exc.filename).parent if exc.filename else settings.spill_path
        return _full(where, _FULL[exc.errno], quota=exc.errno == errno.EDQUOT, then=then)
    if read_only is not None and exc.errno in _NOT_WRITABLE:
        return _again(read_only)
    if exc.errno == errno.EROFS:
        return _read_only(settings, exc.strerror or "read-only file system")
    return None


def _full(where: Path, reason: str, *, quota: bool = False, then: str = "retry") -> StorageFull:
    what = f"your disk quota on the disk holding {where} is used up" if quota else f"the disk holding {where} is full"
    return StorageFull(
        f"{what} ({reason}); nothing was saved. Free space there (`contextfold gc` deletes expired spilled "
        f"outputs) and {then}"
    )


def _read_only(settings: Settings, reason: str) -> ReadOnlyHome:
    return ReadOnlyHome(
        f"the data home {settings.home} is read-only ({reason}): reads work, writes are refused; make it "
        "writable (then restart contextfold if it started read-only)"
    )


def _damaged(database: Path, reason: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"the database at {database} is damaged ({reason}); move it aside and restart contextfold (it starts "
        "a new one), or restore a backup"
    )


def _too_new(database: Path, version: int | None) -> StoreUnavailable:
    schema = f"schema {version}, this one knows {SCHEMA_VERSION}" if version else f"this one knows {SCHEMA_VERSION}"
    return StoreUnavailable(
        f"the database at {database} was written by a newer contextfold ({schema}); upgrade contextfold, "
        "or point it at another data home"
    )


def _again(problem: StorageError) -> StorageError:
    """A fresh copy: raising one exception object again and again would grow its traceback."""
    return type(problem)(*problem.args)


# -- opening -----------------------------------------------------------------------------------------


async def open_service(settings: Settings) -> tuple[ContextService, StorageError | None]:
    """The service on `settings`' data home, and the problem that keeps it from working normally.

    With a problem the service still runs: read-only (reads work, writes refused) when the
    problem is a `ReadOnlyHome`, otherwise without a store (calls that need it raise the problem).
    Anything that is not a storage problem is raised. A PostgreSQL database that cannot be
    reached or used is raised too (`StoreUnavailable`): a replica that cannot work should not start.
    """
    if settings.database_url:
        return await _open_postgres(settings), None
    try:
        return await _open_normally(settings), None
    except Exception as exc:
        problem = await _opening_problem(exc, settings)
        if problem is None:
            raise
    store: SQLiteStore | None = None
    if isinstance(problem, ReadOnlyHome):
        try:
            store = await _open_read_only(settings.database_path)
        except Exception as exc:
            problem = await _read_only_failure(exc, settings)
    return ContextService(settings, GuardedStore(store, settings, problem), GuardedFiles(settings, problem)), problem


async def open_for_reading(settings: Settings) -> ContextService | None:
    """The service for a command that only reads, or None when the home holds no database yet.

    Nothing in the home is created or changed: not the database, not SQLite's -wal and -shm
    files, not the spill directory (see `_untouched_uri`). A write through it is refused. On
    PostgreSQL there are no files to leave alone: the service is opened as the server opens it.
    """
    if settings.database_url:
        return await _open_postgres(settings)
    if not _exists(settings.database_path) or _never_written(settings.database_path):
        return None
    problem = ReadOnlyHome(f"the data home {settings.home} was opened only to read; this command cannot write")
    try:
        store = await _open_read_only(settings.database_path, _untouched_uri)
    except StorageError:
        raise
    except Exception as exc:
        if not os.access(settings.home, os.W_OK):
            raise await _read_only_failure(exc, settings) from exc
        failure = storage_error(exc, settings)
        if failure is None:
            raise
        raise failure from exc
    return ContextService(settings, GuardedStore(store, settings, problem), GuardedFiles(settings, problem))


def without_store(settings: Settings) -> ContextService:
    """The service for calls that need no store (`count_tokens`): the home is not even opened."""
    problem = StoreUnavailable(f"the data home {settings.home} was not opened for this command")
    return ContextService(settings, GuardedStore(None, settings, problem), GuardedFiles(settings, problem))


async def _s3_blobs(settings: Settings) -> GuardedBlobs:
    """Spilled outputs in S3-compatible storage (`spill_url`), failures explained."""
    from contextfold.blobs.s3 import S3Blobs

    assert settings.spill_url is not None
    with _explained(settings):
        return GuardedBlobs(await asyncio.to_thread(S3Blobs, settings.spill_url), settings)


async def _open_postgres(settings: Settings) -> ContextService:
    """The service on a PostgreSQL database, spilled outputs in it too; its failures in one line."""
    from contextfold.service.backends import open_postgres

    url = settings.database_url
    assert url is not None
    store, files = await open_postgres(settings)
    return ContextService(settings, GuardedStore(store, settings), GuardedBlobs(files, settings))


async def _open_normally(settings: Settings) -> ContextService:
    store = await SQLiteStore.open(settings.database_path, index_lag=settings.search_index_lag)
    try:
        files = await _s3_blobs(settings) if settings.spill_url else GuardedFiles(settings)
    except BaseException:
        await store.close()
        raise
    return ContextService(settings, GuardedStore(store, settings), files)


async def _opening_problem(exc: Exception, settings: Settings) -> StorageError | None:
    database = settings.database_path
    if any(isinstance(cause, SchemaTooNewError) for cause in _causes(exc)):
        return _too_new(database, await _stored_version(database))
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno in _FULL:
            break  # a full disk, not a read-only one: `storage_error` says so
        not_writable = (
            (isinstance(cause, OSError) and cause.errno in _NOT_WRITABLE)
            or (isinstance(cause, sqlite3.Error) and _primary(cause) == sqlite3.SQLITE_READONLY)
            or (
                isinstance(cause, sqlite3.Error)
                and _primary(cause) == sqlite3.SQLITE_CANTOPEN
                and not os.access(database.parent, os.W_OK)
            )
        )
        if not_writable:
            reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
            return _read_only(settings, reason)
    problem = storage_error(exc, settings)
    if isinstance(problem, StorageFull):
        # Without a database the server cannot pick up by itself once there is room again.
        return StoreUnavailable(str(storage_error(exc, settings, then="restart contextfold")))
    return problem


async def _read_only_failure(exc: Exception, settings: Settings) -> StorageError:
    """Why a home that cannot be written cannot be read either."""
    database = settings.database_path
    known = await _opening_problem(exc, settings) if not isinstance(exc, StorageError) else exc
    if isinstance(known, StoreUnavailable):
        return known  # too new, or damaged: the same answer as on a writable home
    if not _exists(database):
        return StoreUnavailable(
            f"the data home {settings.home} is read-only and holds no database yet; make it writable, or point "
            "contextfold at another data home"
        )
    if _exists(Path(f"{database}-wal")):
        return StoreUnavailable(
            f"the data home {settings.home} is read-only and the database at {database} has changes in its -wal "
            "file that SQLite can apply only with write access; make the home writable once and restart contextfold"
        )
    return StoreUnavailable(
        f"the data home {settings.home} cannot be written and the database at {database} cannot be read "
        f"either ({exc}); check the permissions of both"
    )


def _exists(path: Path) -> bool:
    try:
        return path.stat().st_size >= 0
    except OSError:
        return False


def _primary(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


async def _open_read_only(database: Path, uri_for: Callable[[Path], str] | None = None) -> SQLiteStore:
    """The database opened so that nothing, SQLite included, writes to the home."""
    # Probed with the plain driver first: a failed aiosqlite connect leaves its worker thread to
    # report to an event loop that may be gone by then.
    uri = await asyncio.to_thread(uri_for or _read_only_uri, database)
    conn = await aiosqlite.connect(uri, uri=True, isolation_level=None)
    conn.row_factory = aiosqlite.Row
    try:
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except BaseException:
        await conn.close()
        raise
    return SQLiteStore(conn)


def _read_only_uri(database: Path) -> str:
    """A URI that opens `database` read-only and works here, once its schema is checked.

    SQLite reads a WAL database through its -shm file, which it cannot create in a directory it
    cannot write. When there is none and no -wal either (every clean shutdown removes both), the
    file alone is the whole database and is opened immutable; with a -wal left behind it is not,
    and this fails (see `_read_only_failure`).
    """
    if not _exists(database):
        raise sqlite3.OperationalError(f"no database file at {database}")
    uri = _uri(database)
    try:
        version = _version(uri)
    except sqlite3.OperationalError as exc:
        if _primary(exc) != sqlite3.SQLITE_CANTOPEN or _exists(Path(f"{database}-wal")):
            raise
        uri = _uri(database, immutable=True)
        version = _version(uri)
    _check_version(database, version, "make the data home writable once and restart contextfold")
    return uri


def _untouched_uri(database: Path) -> str:
    """A URI that reads `database` without creating or changing any file of the home.

    A read-only reader of a WAL database creates the -wal and -shm files when the directory is
    writable, and leaves them behind. With no -wal file no process has the database open (every
    clean close removes it) and the file alone is the whole database: it is opened immutable, so
    SQLite creates nothing. With one, a server has it open (or stopped uncleanly) and it is read
    through those files like any other reader does.
    """
    uri = _uri(database, immutable=not _exists(Path(f"{database}-wal")))
    _check_version(database, _version(uri), "run a command that writes (or `contextfold serve`) once to upgrade it")
    return uri


def _check_version(database: Path, version: int, upgrade: str) -> None:
    if version > SCHEMA_VERSION:
        raise _too_new(database, version)
    if version < SCHEMA_VERSION:
        raise StoreUnavailable(
            f"the database at {database} is at schema {version} and this contextfold needs {SCHEMA_VERSION}; "
            f"the upgrade needs write access: {upgrade}"
        )


def _uri(database: Path, *, immutable: bool = False) -> str:
    return f"file:{quote(str(database.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")


def _never_written(database: Path) -> bool:
    """The database file exists at schema 0: an opener created it and stopped (or is still busy)
    before its first migration, so it holds nothing yet; a reader sees an empty home."""
    try:
        return _version(_uri(database, immutable=not _exists(Path(f"{database}-wal")))) == 0
    except sqlite3.Error:
        return False  # damaged or unreadable: the normal opening says which


def _version(uri: str) -> int:
    conn = sqlite3.connect(uri, uri=True)
    try:
        row = conn.execute("PRAGMA user_version").fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


async def _stored_version(database: Path) -> int | None:
    """The database's schema version, read without writing anything; None if it cannot be read."""

    def read() -> int | None:
        for immutable in (False, True):
            try:
                return _version(_uri(database, immutable=immutable))
            except sqlite3.Error:
                continue
        return None

    return await asyncio.to_thread(read)


# -- the store and the spill files, guarded ----------------------------------------------------------


class GuardedFiles(FileBlobs):
    """`FileBlobs` whose puts fail with a `StorageError` that says why (a full or read-only disk).

    With a `problem` the home is not used normally and its directory is left as it is: a
    `ReadOnlyHome` is what any refused write reads as; any other problem refuses every write.
    """

    def __init__(self, settings: Settings, problem: StorageError | None = None) -> None:
        super().__init__(settings.spill_path, read_only=problem is not None)
        self._settings = settings
        self._problem = problem

    @contextmanager
    def _writing(self) -> Iterator[None]:
        if self._problem is not None and not isinstance(self._problem, ReadOnlyHome):
            raise _again(self._problem)
        with _explained(self._settings, self._problem if isinstance(self._problem, ReadOnlyHome) else None):
            yield

    def put(self, content: bytes | Iterable[bytes]) -> StoredBlob:
        with self._writing():
            return super().put(content)


class GuardedBlobs:
    """Any `BlobStore` whose storage failures come out as the one line that says why (the
    filesystem store has `GuardedFiles`, which also knows about read-only homes)."""

    def __init__(self, inner: Any, settings: Settings) -> None:
        self._inner = inner
        self._settings = settings

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)
        if name.startswith("_") or not callable(method):
            return method

        @functools.wraps(method)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with _explained(self._settings):
                return method(*args, **kwargs)

        return guarded


class _Guarded:
    """Passes calls through to `inner` by name, so its interface can grow without this class;
    storage failures come out as the one line that says why. Without `inner` (unavailable),
    every call raises `problem`."""

    def __init__(self, inner: Any | None, settings: Settings, problem: StorageError | None) -> None:
        self._wrapped = inner
        self._settings = settings
        self._problem = problem
        self._read_only = problem if isinstance(problem, ReadOnlyHome) else None

    def _inner(self) -> Any:
        if self._wrapped is None:
            raise _again(self._problem or StoreUnavailable("the store is closed"))
        return self._wrapped

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._wrapped is None:

            async def unavailable(*args: Any, **kwargs: Any) -> Any:
                raise _again(self._problem or StoreUnavailable("the store is closed"))

            return unavailable
        method = getattr(self._wrapped, name)
        if not inspect.iscoroutinefunction(method):
            return method

        @functools.wraps(method)
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            with _explained(self._settings, self._read_only):
                return await method(*args, **kwargs)

        return guarded


class GuardedStore(_Guarded):
    """A `Store` whose storage failures say why (see the module docstring).

    With a `ReadOnlyHome` problem the store was opened read-only: reads pass through and a refused
    write reads as it.
    """

    def __init__(self, store: Store | None, settings: Settings, problem: StorageError | None = None) -> None:
        super().__init__(store, settings, problem)

    def tenant(self, owner: str) -> GuardedTenant:
        inner = self._wrapped.tenant(owner) if self._wrapped is not None else None
        return GuardedTenant(inner, owner, self._settings, self._problem)

    async def close(self) -> None:
        if self._wrapped is not None:
            await self._wrapped.close()


class GuardedTenant(_Guarded):
    """A `TenantStore` whose storage failures say why."""

    def __init__(self, inner: TenantStore | None, owner: str, settings: Settings, problem: StorageError | None) -> None:
        super().__init__(inner, settings, problem)
        self.owner = owner

    @asynccontextmanager
    async def write(self, session_id: str, *, create: Session | None = None) -> AsyncIterator[SessionTransaction]:
        store = self._inner()
        with _explained(self._settings, self._read_only):
            async with store.write(session_id, create=create) as tx:
                yield tx

    async def touch_output(self, output_id: str) -> None:
        """Noting when an output was read is bookkeeping: a read must not fail for want of it."""
        if self._read_only is not None:
            return
        try:
            with _explained(self._settings, self._read_only):
                await self._inner().touch_output(output_id)
        except (StorageFull, ReadOnlyHome) as exc:
            log.debug("not noting that %s was read: %s", output_id, exc)


def check_database(settings: Settings) -> None:
    """Connect once and migrate, or raise the `StorageError` that says why (for `serve`, before it
    starts listening: a replica that cannot reach its database should not come up)."""
    import psycopg  # PostgreSQL deployments alone load it

    from contextfold.store import pgschema
    from contextfold.store.pgfailures import opening_problem
    from contextfold.store.postgres import connect_kwargs

    url = settings.database_url
    assert url is not None
    try:
        with psycopg.connect(url, connect_timeout=30, **connect_kwargs()) as conn:
            pgschema.migrate(conn)
    except Exception as exc:
        raise opening_problem(exc, url) from exc

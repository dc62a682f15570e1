"""Spilled outputs: the database rows that own them and the blobs under them, kept in step.

A client only ever holds an opaque id such as `out_01J…`. The id resolves through the store to a
record (session, owner, content digest); only then does the blob store (`blobs.BlobStore`, any
backend) see a digest, which it validates again. Retention and quota are enforced by `gc`; an expired output is
refused at read time even before gc has run. Writers call `make_room` first, so a store near its
quota evicts its oldest outputs instead of refusing new ones; only an output that cannot fit even
then is refused.

Several processes share one store (every agent window runs its own server), so nothing here is
cached: the quota counts the bytes the database references, read in the transaction that
decides; a file is deleted only inside a write transaction that proves no row points at it; and a
writer, which stores its file before its transaction, checks under the same lock that the file is
still there once its row is in (and writes it again if a gc took it meanwhile). An acknowledged
output is never lost. Outputs that gc removes leave a tombstone, so a read says why and when.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from contextfold.blobs.base import BlobStore, DamagedContent, StoredBlob, encode_text
from contextfold.blobs.lines import READ_LIMIT_CHARS, READ_LIMIT_LINES, LineSlice, read_lines, read_text
from contextfold.blobs.search import GrepResult, grep
from contextfold.domain import new_id
from contextfold.errors import REMEDY, InvalidInput, LimitExceeded, NotFoundError, OutputDamaged, OutputGone, Remedy
from contextfold.results import GcResult, OutputRead
from contextfold.store import OutputRecord, SessionTransaction, Store, Tombstone

FILE_GRACE_SECONDS = 300
"""gc deletes a file no record points to at once when it has just removed the file's last record,
any other only once it is this old: writers store files before their transactions, so a young one
may be about to be recorded (deleting it would be safe, the writer stores it again, but wasteful)."""

TOMBSTONE_RETENTIONS = 4
"""gc forgets why an output left once this many retention periods have passed."""

EVICT_AT = 0.9
EVICT_TO = 0.8
"""Past EVICT_AT of the quota, `contextfold gc` evicts the oldest outputs down to EVICT_TO of it.
A writer evicts only what its output needs (`make_room`): emptying the store to EVICT_TO for
each spill took outputs that had just been acknowledged and never read."""

EVICTION_GRACE_SECONDS = 60.0
"""No output younger than this is evicted, by a writer or by gc: its id has just been handed to a
client, which reads it next. A spill that fits only by evicting such an output is refused instead.
The default of the `spill_eviction_grace_seconds` setting."""


class OutputExpired(OutputGone):
    def __init__(self, output_id: str, days: float, at: float) -> None:
        super().__init__(
            output_id,
            f"output {output_id} expired at {_when(at)} (outputs are kept {days:g} days, spill_retention_days); "
            "rerun the tool to see it again",
        )


class OutputEvicted(OutputGone):
    def __init__(self, output_id: str, quota_bytes: int, at: float) -> None:
        super().__init__(
            output_id,
            f"output {output_id} was evicted at {_when(at)} to keep the spill store under spill_quota_bytes "
            f"({_size(quota_bytes)}); rerun the tool to see it again, or raise spill_quota_bytes to keep more",
        )


@dataclass(frozen=True)
class NewOutput:
    record: OutputRecord
    file: StoredBlob


class Outputs:
    def __init__(
        self,
        store: Store,
        files: BlobStore,
        *,
        retention_days: float,
        quota_bytes: int,
        eviction_grace: float = EVICTION_GRACE_SECONDS,
    ) -> None:
        self.store = store
        self.files = files
        """The blobs under the outputs (any backend: every call goes through `blobs.BlobStore`)."""
        self.retention_seconds = retention_days * 86_400
        self.retention_days = retention_days
        self.quota_bytes = quota_bytes
        self.eviction_grace = eviction_grace
        """Seconds an output is safe from eviction after it was recorded."""
        self._released: set[str] = set()
        """Digests whose rows a write transaction evicted: their files go at the next `make_room` or
        gc, once that transaction has committed (and only if still no row points at them)."""

    async def used_bytes(self) -> int:
        """Bytes of spilled content the database references, as every process sees it now."""
        return await self.store.spill_bytes()

    async def make_room(self, incoming: int) -> None:
        """Before a write of up to `incoming` bytes (outside its transaction): if it would not fit,
        evict the oldest outputs past their grace, just enough for it."""
        if self._released:
            released, self._released = self._released, set()
            await self._delete_unreferenced(released)
        if not self.quota_bytes or incoming > self.quota_bytes:
            return  # nothing to enforce, or evicting everything would still not make room: evict nothing
        if await self.used_bytes() + incoming > self.quota_bytes:
            await self.gc(reserve=incoming, just_enough=True)

    async def store_file(self, text: str) -> StoredBlob:
        """Write the blob of an output about to be recorded.

        Call it before the transaction that records the output: a blob can be hundreds of
        megabytes, and the write lock is shared by every process on the store.
        """
        # Encoding, hashing and I/O off the event loop.
        return await asyncio.to_thread(_put_text, self.files, text)

    async def discard(self, file: StoredBlob) -> None:
        """Undo `store_file` when no output was recorded for it (the file stays if a row uses it)."""
        if file.created:
            await self._delete_unreferenced({file.digest})

    async def add(
        self,
        tx: SessionTransaction,
        text: str,
        *,
        owner: str,
        tool: str | None = None,
        call_id: str | None = None,
        stored: StoredBlob | None = None,
    ) -> NewOutput:
        """Record `text` as an output in the caller's transaction; its file is written here unless
        `stored` (from `store_file`) says it was already."""
        spilled = stored if stored is not None else await self.store_file(text)
        await self._fit(tx, spilled)
        record = OutputRecord(
            id=new_id("out"),
            session_id=tx.session.id,
            owner=owner,
            digest=spilled.digest,
            bytes=spilled.bytes,
            lines=spilled.lines,
            tool=tool,
            call_id=call_id,
            created_at=time.time(),
        )
        await tx.add_output(record)
        # Until the row above existed, a gc in any process could prove the file unreferenced and
        # delete it. Now that this transaction holds the write lock and the row, none can: if
        # one did meanwhile, store the content again.
        if not await asyncio.to_thread(_exists, self.files, spilled.digest):
            await self.store_file(text)
        return NewOutput(record, spilled)

    async def _fit(self, tx: SessionTransaction, spilled: StoredBlob) -> None:
        """Check the quota for `spilled`, counted from the database in the writer's transaction.

        `make_room` evicted before the transaction; when writers elsewhere have taken that room
        since, evict here (oldest first, outputs of this transaction excepted). Refuse only an
        output that cannot fit even so.
        """
        if not self.quota_bytes or await tx.referenced([spilled.digest]):
            return  # no quota, or this content is stored and counted already
        used = await tx.spill_bytes()
        if used + spilled.bytes <= self.quota_bytes:
            return
        if spilled.bytes <= self.quota_bytes:
            candidates = await tx.outputs()
            others = used - _referenced_bytes(candidates)  # outputs this transaction added
            evicted = _evictions(
                candidates, spilled.bytes + others, self.quota_bytes, before=time.time() - self.eviction_grace
            )
            if evicted:
                await tx.remove_outputs([r.id for r in evicted], "evicted", time.time())
                if await tx.spill_bytes() + spilled.bytes <= self.quota_bytes:
                    self._released.update(r.digest for r in evicted)
                    return
        # Refused: the caller's transaction rolls back, evictions above included.
        if spilled.created:
            # No row points at it (checked above) and this transaction holds the write lock.
            await asyncio.to_thread(self.files.delete, spilled.digest)
        young = (
            f", and no output younger than {self.eviction_grace:g} s (spill_eviction_grace_seconds) is evicted. "
            "Retry shortly, run"
            if spilled.bytes <= self.quota_bytes
            else ". Run"
        )
        raise LimitExceeded(
            "spill",
            f"a {spilled.bytes:,}-byte output does not fit: the spill store holds {used:,} of its "
            f"{self.quota_bytes:,} bytes (spill_quota_bytes){young} `contextfold gc` to evict the "
            "oldest outputs, delete old sessions, or raise spill_quota_bytes",
        )

    async def resolve(self, output_id: str, owner: str) -> OutputRecord:
        """The output's record, once its file is checked to be there at its stored size."""
        try:
            record = await self.store.tenant(owner).get_output(output_id)
        except NotFoundError:
            tombstone = await self.store.tenant(owner).output_tombstone(output_id)
            if tombstone is None:
                raise
            raise self._gone(tombstone) from None
        if time.time() - record.created_at > self.retention_seconds:
            raise OutputExpired(output_id, self.retention_days, record.created_at + self.retention_seconds)
        try:
            size = (await asyncio.to_thread(self.files.stat, record.digest)).size
        except FileNotFoundError:
            raise await self._vanished(record) from None
        if size != record.bytes:
            how = "cut short" if size < record.bytes else "changed"
            raise OutputDamaged(
                output_id,
                f"its spilled file holds {size:,} bytes, not the {record.bytes:,} stored ({how} outside contextfold)",
            )
        return record

    def _gone(self, tombstone: Tombstone) -> OutputGone:
        if tombstone.reason == "evicted":
            return OutputEvicted(tombstone.id, self.quota_bytes, tombstone.removed_at)
        return OutputExpired(tombstone.id, self.retention_days, tombstone.removed_at)

    async def _vanished(self, record: OutputRecord) -> Exception:
        """The error for a file found missing: gc removed the output meanwhile, or someone else the file."""
        try:
            await self.store.tenant(record.owner).get_output(record.id)
        except NotFoundError:
            tombstone = await self.store.tenant(record.owner).output_tombstone(record.id)
            return self._gone(tombstone) if tombstone else NotFoundError("output", record.id, "it was deleted")
        return OutputDamaged(record.id, "its spilled file was deleted outside contextfold")

    async def read(
        self,
        output_id: str,
        *,
        owner: str,
        offset: int = 1,
        limit: int = READ_LIMIT_LINES,
        pattern: str | None = None,
        context: int = 0,
        ignore_case: bool = False,
        max_matches: int = 50,
    ) -> OutputRead:
        record = await self.resolve(output_id, owner)
        try:
            if pattern is None:
                slice_ = await asyncio.to_thread(
                    read_lines, self.files, record.digest, offset, min(limit, READ_LIMIT_LINES), READ_LIMIT_CHARS
                )
                result = _numbered(output_id, slice_)
            else:
                found = await asyncio.to_thread(
                    grep,
                    self.files,
                    record.digest,
                    pattern,
                    offset=offset,
                    context=context,
                    max_matches=max_matches,
                    ignore_case=ignore_case,
                    max_chars=READ_LIMIT_CHARS,
                )
                result = _grepped(output_id, found)
        except FileNotFoundError:
            raise await self._vanished(record) from None
        except DamagedContent:
            raise OutputDamaged(output_id, _EDITED) from None
        await self.store.tenant(owner).touch_output(output_id)
        return result

    async def full_text(self, output_id: str, *, owner: str, max_bytes: int) -> str:
        record = await self.resolve(output_id, owner)
        if record.bytes > max_bytes:
            raise InvalidInput(
                "output_id",
                f"output {output_id} is {record.bytes:,} bytes, more than one read returns ({max_bytes:,}); {REMEDY}",
                remedy=Remedy.READ_IN_PARTS,
            )
        try:
            return await asyncio.to_thread(read_text, self.files, record.digest, max_bytes=max_bytes)
        except FileNotFoundError:
            raise await self._vanished(record) from None
        except DamagedContent:
            raise OutputDamaged(output_id, _EDITED) from None

    async def session_digests(self, session_id: str, owner: str) -> set[str]:
        return {r.digest for r in await self.store.tenant(owner).session_outputs(session_id)}

    async def delete_unreferenced(self, digests: Collection[str]) -> set[str]:
        """Delete the files of `digests` that no output record points to any more; those deleted."""
        return await self._delete_unreferenced(digests)

    async def _delete_unreferenced(self, digests: Collection[str]) -> set[str]:
        """Delete the files of `digests` no row points to, proven and done under the write lock."""
        if not digests:
            return set()
        async with self.store.spill_transaction() as tx:
            doomed = set(digests) - await tx.referenced(digests)
            await asyncio.to_thread(_delete_files, self.files, doomed)
        return doomed

    async def gc(
        self, *, dry_run: bool = False, now: float | None = None, reserve: int = 0, just_enough: bool = False
    ) -> GcResult:
        """Drop expired records, evict oldest-first near the quota, then delete unreferenced files.

        The records are chosen and removed in one write transaction, leaving tombstones; the files
        then go under the write lock once more (see `_delete_unreferenced`). `reserve` is room
        wanted for a write about to happen; it counts as used. `just_enough` evicts only what
        `reserve` needs to fit the quota, instead of past EVICT_AT down to EVICT_TO.
        """
        now = time.time() if now is None else now
        if dry_run:
            records = await self.store.outputs()
            expired, evicted = self._plan(records, now, reserve, just_enough)
        else:
            async with self.store.spill_transaction() as tx:
                records = await tx.outputs()
                expired, evicted = self._plan(records, now, reserve, just_enough)
                await tx.remove_outputs([r.id for r in expired], "expired", now)
                await tx.remove_outputs([r.id for r in evicted], "evicted", now)
                await tx.drop_tombstones(now - TOMBSTONE_RETENTIONS * self.retention_seconds)
        removed = {r.id for r in expired + evicted}
        keep = {r.digest for r in records if r.id not in removed}
        # Files of the records removed here go at once (eviction must free space now); any other
        # unreferenced file waits out the grace period, since a writer may be about to record it.
        released = {r.digest for r in expired + evicted} | self._released
        if not dry_run:
            self._released = set()
        stored = await asyncio.to_thread(lambda: list(self.files.list()))
        candidates = {
            f.digest: f
            for f in stored
            if f.digest not in keep and (f.digest in released or now - f.modified > FILE_GRACE_SECONDS)
        }
        gone = set(candidates) if dry_run else await self._delete_unreferenced(candidates)
        doomed = [candidates[d] for d in gone]
        return GcResult(
            dry_run=dry_run,
            outputs_removed=len(removed),
            files_removed=len(doomed),
            bytes_freed=sum(f.size for f in doomed),
            bytes_kept=sum(f.size for f in stored) - sum(f.size for f in doomed),
        )

    def _plan(
        self, records: list[OutputRecord], now: float, reserve: int, just_enough: bool = False
    ) -> tuple[list[OutputRecord], list[OutputRecord]]:
        """(expired, evicted) among `records` (oldest first)."""
        expired = [r for r in records if now - r.created_at > self.retention_seconds]
        live = [r for r in records if now - r.created_at <= self.retention_seconds]
        at, to = (1.0, 1.0) if just_enough else (EVICT_AT, EVICT_TO)
        if self.quota_bytes and _referenced_bytes(live) + reserve > at * self.quota_bytes:
            return expired, _evictions(live, reserve, to * self.quota_bytes, before=now - self.eviction_grace)
        return expired, []


_EDITED = (
    "its spilled file was changed outside contextfold (its bytes no longer match the sha256 they were stored under)"
)


def _referenced_bytes(records: list[OutputRecord]) -> int:
    """Bytes of the distinct contents `records` point to (each content file is stored once)."""
    return sum({r.digest: r.bytes for r in records}.values())


def _evictions(live: list[OutputRecord], reserve: int, target: float, *, before: float) -> list[OutputRecord]:
    """The oldest of `live` (oldest first) to remove so that what the rest reference, plus `reserve`,
    is at most `target`; a content file is freed only with the last record pointing at it. No
    output created after `before` (within its eviction grace) is removed, so the target may be missed."""
    sizes = {r.digest: r.bytes for r in live}
    refs = Counter(r.digest for r in live)
    used = sum(sizes.values())
    evicted: list[OutputRecord] = []
    for record in live:
        if used + reserve <= target:
            break
        if record.created_at > before:
            continue
        evicted.append(record)
        refs[record.digest] -= 1
        if not refs[record.digest]:
            used -= sizes[record.digest]
    return evicted


def _delete_files(files: BlobStore, digests: Collection[str]) -> None:
    for digest in digests:
        files.delete(digest)


def _put_text(files: BlobStore, text: str) -> StoredBlob:
    return files.put(encode_text(text))


def _exists(files: BlobStore, digest: str) -> bool:
    try:
        files.stat(digest)
    except FileNotFoundError:
        return False
    return True


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n:,} bytes"


def _numbered(output_id: str, slice_: LineSlice) -> OutputRead:
    width = len(str(slice_.lines[-1].number)) if slice_.lines else 1
    text = "\n".join(
        f"{line.number:>{width}}\t{line.text}" + (" … [line cut]" if line.truncated else "") for line in slice_.lines
    )
    return OutputRead(
        output_id=output_id,
        total_lines=slice_.total_lines,
        text=text,
        has_more=slice_.has_more,
        next_offset=slice_.next_offset,
    )


def _grepped(output_id: str, found: GrepResult) -> OutputRead:
    groups = []
    for match in found.matches:
        rows = [f"{line.number}-{line.text}" for line in match.before]
        rows.append(f"{match.line.number}:{match.line.text}")
        rows += [f"{line.number}-{line.text}" for line in match.after]
        groups.append("\n".join(rows))
    last = max((m.after[-1] if m.after else m.line).number for m in found.matches) if found.matches else 0
    return OutputRead(
        output_id=output_id,
        total_lines=found.total_lines,
        text="\n--\n".join(groups) if groups else "(no match)",
        matches=len(found.matches),
        has_more=found.truncated,
        next_offset=last + 1 if found.truncated else None,
    )

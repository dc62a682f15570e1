"""Spilled outputs: the database rows that own them and the files under them, kept in step.

A client only ever holds an opaque id such as `out_01J…`. The id resolves through the store to a
record (session, owner, content digest); only then does the content-addressed file layer see a
digest, which it validates again. Retention and quota are enforced by `gc`; an expired output is
refused at read time even before gc has run. Writers call `make_room` first, so a store near its
quota evicts its oldest outputs instead of refusing new ones; only an output that cannot fit even
then is refused.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from .domain import new_id
from .errors import LimitExceeded
from .results import GcResult, OutputRead
from .spill import GrepResult, LineSlice, SpilledFile, SpillFiles
from .store import NotFoundError, OutputRecord, SessionStore, SessionTransaction

FILE_GRACE_SECONDS = 300
"""A file no record points to is deleted only once it is this old: a transaction that wrote it
(or wrote the same content again, which refreshes the file's mtime) may still commit."""

EVICT_AT = 0.9
EVICT_TO = 0.8
"""Past EVICT_AT of the quota, gc evicts the oldest outputs down to EVICT_TO of it: the gap is
the room new spills get before the next eviction, so writers near the quota are not refused."""

READ_LIMIT_LINES = 200
READ_LIMIT_CHARS = 20_000


class OutputExpired(NotFoundError):
    def __init__(self, output_id: str, days: float) -> None:
        super().__init__(
            "output", output_id, f"it expired (outputs are kept {days:g} days); rerun the tool to see it again"
        )


@dataclass(frozen=True)
class NewOutput:
    record: OutputRecord
    file: SpilledFile


class Outputs:
    def __init__(self, store: SessionStore, files: SpillFiles, *, retention_days: float, quota_bytes: int) -> None:
        self.store = store
        self.files = files
        self.retention_seconds = retention_days * 86_400
        self.retention_days = retention_days
        self.quota_bytes = quota_bytes
        self._used: int | None = None  # bytes of spill files, summed lazily, kept up to date by this process

    async def used_bytes(self) -> int:
        if self._used is None:
            self._used = await asyncio.to_thread(self.files.total_bytes)
        return self._used

    async def make_room(self, incoming: int) -> None:
        """Before a write of up to `incoming` bytes (outside its transaction): evict if it would pass the threshold."""
        if not self.quota_bytes or incoming > self.quota_bytes:
            return  # nothing to enforce, or evicting everything would still not make room: evict nothing
        if await self.used_bytes() + incoming > EVICT_AT * self.quota_bytes:
            await self.gc(reserve=incoming)

    async def add(
        self,
        tx: SessionTransaction,
        text: str,
        *,
        owner: str,
        tool: str | None = None,
        call_id: str | None = None,
    ) -> NewOutput:
        """Write `text` to disk and record it in the caller's transaction."""
        # File I/O off the event loop: a spilled output can be hundreds of megabytes.
        before = await self.used_bytes()
        spilled = await asyncio.to_thread(self.files.write, text)
        if spilled.created:
            self._used = before + spilled.bytes
            if self.quota_bytes and self._used > self.quota_bytes:
                await asyncio.to_thread(self.files.delete, spilled.digest)
                self._used = before
                raise LimitExceeded(
                    "spill",
                    f"a {spilled.bytes:,}-byte output does not fit: the spill store holds {before:,} of its "
                    f"{self.quota_bytes:,} bytes (spill_quota_bytes). Run `contextfold gc` to evict the "
                    "oldest outputs, delete old sessions, or raise spill_quota_bytes",
                )
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
        return NewOutput(record, spilled)

    async def resolve(self, output_id: str, owner: str) -> OutputRecord:
        record = await self.store.get_output(output_id, owner)
        if time.time() - record.created_at > self.retention_seconds:
            raise OutputExpired(output_id, self.retention_days)
        if not self.files.exists(record.digest):
            raise NotFoundError("output", output_id, "its file is gone from the spill directory")
        return record

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
        if pattern is None:
            slice_ = await asyncio.to_thread(
                self.files.read_lines, record.digest, offset, min(limit, READ_LIMIT_LINES), READ_LIMIT_CHARS
            )
            result = _numbered(output_id, slice_)
        else:
            found = await asyncio.to_thread(
                self.files.grep,
                record.digest,
                pattern,
                offset=offset,
                context=context,
                max_matches=max_matches,
                ignore_case=ignore_case,
                max_chars=READ_LIMIT_CHARS,
            )
            result = _grepped(output_id, found)
        await self.store.touch_output(output_id)
        return result

    async def full_text(self, output_id: str, *, owner: str, max_bytes: int) -> str:
        record = await self.resolve(output_id, owner)
        if record.bytes > max_bytes:
            raise ValueError(
                f"output {output_id} is {record.bytes:,} bytes, more than one read returns ({max_bytes:,}); "
                "use the read_output tool with offset/limit or pattern"
            )
        return await asyncio.to_thread(self.files.read_text, record.digest, max_bytes=max_bytes)

    async def session_digests(self, session_id: str) -> set[str]:
        return {r.digest for r in await self.store.outputs() if r.session_id == session_id}

    async def delete_unreferenced(self, digests: set[str]) -> int:
        """Delete the files of `digests` that no output record points to any more."""
        referenced = {r.digest for r in await self.store.outputs()}
        doomed = digests - referenced
        for digest in doomed:
            await asyncio.to_thread(self.files.delete, digest)
        self._used = None
        return len(doomed)

    async def gc(self, *, dry_run: bool = False, now: float | None = None, reserve: int = 0) -> GcResult:
        """Drop expired records, evict oldest-first near the quota, then delete unreferenced files.

        `reserve` is room wanted for a write about to happen; it counts as used.
        """
        now = time.time() if now is None else now
        records = await self.store.outputs()
        expired = [r for r in records if now - r.created_at > self.retention_seconds]
        live = [r for r in records if now - r.created_at <= self.retention_seconds]
        sizes = {f.digest: f for f in self.files.files()}

        def used(rs: list[OutputRecord]) -> int:
            return sum(sizes[d].bytes for d in {r.digest for r in rs} if d in sizes)

        evicted: list[OutputRecord] = []
        if self.quota_bytes and used(live) + reserve > EVICT_AT * self.quota_bytes:
            while live and used(live) + reserve > EVICT_TO * self.quota_bytes:
                evicted.append(live.pop(0))  # oldest first
        removed = expired + evicted
        keep = {r.digest for r in live}
        # Files of the records removed here go at once (eviction must free space now); any other
        # unreferenced file waits out the grace period, since a transaction may still commit it.
        released = {r.digest for r in removed}
        doomed = [
            f
            for f in sizes.values()
            if f.digest not in keep and (f.digest in released or now - f.mtime > FILE_GRACE_SECONDS)
        ]
        if not dry_run:
            if removed:
                await self.store.delete_outputs([r.id for r in removed])
            for f in doomed:
                await asyncio.to_thread(self.files.delete, f.digest)
            self._used = None
        return GcResult(
            dry_run=dry_run,
            outputs_removed=len(removed),
            files_removed=len(doomed),
            bytes_freed=sum(f.bytes for f in doomed),
            bytes_kept=sum(f.bytes for f in sizes.values()) - sum(f.bytes for f in doomed),
        )


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

"""Steering a session's compaction: pin what must stay, undo the last compaction or prune
(docs/steering.md).

A pin is stored with the session (`SessionState.pins`): messages (`m12`, a span `m10..m80`)
that no compaction, prune, cut, digest or removal takes out of the view, or a note carried word
for word into every summary's Constraints. Undo takes back the latest compaction (the view
returns to the anchor it had, the messages the compaction wrote are hidden, the outputs it cut
are shown whole again) or the latest prune (its marks are lifted): the view then renders as it
did before, byte for byte, with whatever was appended since after it. Nothing stored is
deleted: an undone compaction stays in the history, marked.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import TYPE_CHECKING, Literal

from contextfold.compaction.template import (
    PINNED_NOTE,
    PROGRESS,
    SECTIONS,
    cited_seqs,
    missing_sections,
    parse_summary,
)
from contextfold.domain import CompactionRecord, Message, Pin, Preview, Session, TextPart, ToolPart, ViewAnchor
from contextfold.errors import CompactionFailed, InvalidInput, LimitExceeded, NotFoundError
from contextfold.policy import view
from contextfold.results import Brief, CompactResult, PinInfo, PinList, UndoResult
from contextfold.store import PartMark, SessionTransaction
from contextfold.tokens.counting import count_message

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope

_REF = re.compile(r"^\s*m?(\d+)\s*(?:(?:\.\.|-|–)\s*m?(\d+))?\s*$")
UNDO_LOOKBACK = 20
"""Compaction records read to find the latest one not undone."""


def parse_ref(ref: str) -> tuple[int, int]:
    """`m12` → (12, 12); `m10..m80` (or `m10-m80`) → (10, 80)."""
    match = _REF.match(ref)
    if match is None:
        raise InvalidInput("ref", f"{ref!r} is not a message reference; use m12 or a span m10..m80")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if first < 1 or last < first:
        raise InvalidInput("ref", f"{ref!r}: a span runs from a lower message number to a higher one, from m1")
    return first, last


def fingerprint(session: Session) -> str:
    """What a preview was planned on: any change to a message (the revision), to the view's
    anchor, the pins, the session's settings or model, or the counts makes it differ."""
    state = [
        session.revision,
        session.view.model_dump(mode="json") if session.view is not None else None,
        [p.model_dump(mode="json") for p in session.metadata.pins],
        session.settings,
        session.model,
        session.message_count,
        session.tokens_in_view,
    ]
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()


def preview_token(kind: str, fingerprint: str, content: str) -> str:
    return f"{kind}-{fingerprint[:12]}-{hashlib.sha256(content.encode()).hexdigest()[:8]}"


def take_preview(session: Session, token: str, kind: Literal["compact", "prune"]) -> Preview:
    """The preview `token` names, if the session still stands where it was planned; else a refusal
    saying why (nothing is written)."""
    preview = session.metadata.preview
    if preview is None or preview.token != token or preview.kind != kind:
        verb = "compact" if kind == "compact" else "prune"
        raise InvalidInput(
            "apply",
            f"{token!r} is not this session's latest {verb} preview; run {verb} with dry_run first "
            "(only the latest preview is kept)",
        )
    if fingerprint(session) != preview.fingerprint:
        raise CompactionFailed(
            f"the session changed since preview {token} (messages appended or changed, a compaction, prune, pin "
            "or setting); nothing was written — preview again"
        )
    return preview


_HEADING_LINE = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_KNOWN = {name.casefold() for name in (*SECTIONS, PROGRESS)}


def check_summary(text: str, last_seq: int) -> tuple[bool, list[str]]:
    """(whether `text` is a whole summary, the sections it names), or a refusal naming what is
    wrong: a heading the template does not have, or a citation of a message that is not stored."""
    headings = [h.strip().strip("*") for h in _HEADING_LINE.findall(text)]
    unknown = [h for h in headings if h.casefold() not in _KNOWN]
    if unknown:
        raise InvalidInput(
            "edit", f"heading {unknown[0]!r} is not one of the summary's sections ({', '.join(SECTIONS)})"
        )
    if not headings:
        raise InvalidInput("edit", "the text names no section: use the summary's headings (## Goal, …)")
    bad = [seq for seq in cited_seqs(text) if not 1 <= seq <= last_seq]
    if bad:
        raise InvalidInput("edit", f"citation [m{bad[0]}] names no stored message (the session has m1..m{last_seq})")
    return not missing_sections(text), headings


class Steering:
    """Pin, unpin and undo in one tenant's sessions."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    # -- pins --------------------------------------------------------------------------------------

    async def pin(
        self, session_id: str, *, ref: str | None = None, note: str | None = None, by: str | None = None
    ) -> PinList:
        """Pin messages (`ref`: `m12` or `m10..m80`) or a free-text `note` to the session."""
        if (ref is None) == (note is None):
            raise InvalidInput("ref", "pass exactly one of ref (m12, m10..m80) or note")
        async with self._scope.store.write(session_id) as tx:
            session = tx.session
            settings = self._scope.settings_for(session)
            state = session.metadata
            if len(state.pins) >= settings.max_pins:
                raise LimitExceeded(
                    "pins", f"the session holds {len(state.pins)} pins, its max_pins limit; unpin one first"
                )
            pin_id = f"p{state.pins_made + 1}"
            if ref is not None:
                first, last = parse_ref(ref)
                if last - first + 1 > settings.max_pin_span:
                    raise LimitExceeded(
                        "ref",
                        f"{ref} covers {last - first + 1:,} messages, over max_pin_span ({settings.max_pin_span:,})",
                    )
                shown = await _check_in_view(tx, session, first, last)
                lifted = _lift_marks(shown)
                if lifted:  # a pinned message is shown verbatim: an output cleared or cut before comes back
                    await tx.mark_parts(lifted)
                    session = session.model_copy(
                        update={"tokens_in_view": session.tokens_in_view - sum(m.freed for m in lifted)}
                    )
                pin = Pin(id=pin_id, first_seq=first, last_seq=last, created_at=time.time(), by=by)
            else:
                text = " ".join((note or "").split())
                if not text:
                    raise InvalidInput("note", "a pinned note needs some text")
                if len(text) > settings.max_pin_note_chars:
                    raise LimitExceeded(
                        "note", f"{len(text):,} characters, over max_pin_note_chars ({settings.max_pin_note_chars:,})"
                    )
                pin = Pin(id=pin_id, note=text, created_at=time.time(), by=by)
            metadata = state.model_copy(update={"pins": [*state.pins, pin], "pins_made": state.pins_made + 1})
            await tx.save_session(session.model_copy(update={"metadata": metadata}))
        return await self.pins(session_id)

    async def unpin(self, session_id: str, pin_id: str) -> PinList:
        """Remove a pin (`p3`, as `pins` lists them); the messages it held stay where they are until
        the next compaction may summarize them."""
        async with self._scope.store.write(session_id) as tx:
            session = tx.session
            state = session.metadata
            kept = [p for p in state.pins if p.id != pin_id]
            if len(kept) == len(state.pins):
                have = ", ".join(p.id for p in state.pins) or "none"
                raise NotFoundError("pin", pin_id, f"this session's pins: {have}")
            metadata = state.model_copy(update={"pins": kept})
            await tx.save_session(session.model_copy(update={"metadata": metadata}))
        return await self.pins(session_id)

    async def pins(self, session_id: str) -> PinList:
        """The session's pins, each with what it costs in view now."""
        scope = self._scope
        session = await scope.store.get_session(session_id)
        settings = scope.settings_for(session)
        counter = scope.counter(session.model, settings)
        pins = session.metadata.pins
        shown: dict[int, int] = {}
        if any(p.first_seq is not None for p in pins):
            rows = await scope.store.rows(session.id, after_seq=view.load_from(session.view))
            shown = {r.seq: r.tokens for r in view.in_view(rows, session.view) if not r.is_compaction}
        infos = []
        for pin in pins:
            if pin.first_seq is None or pin.last_seq is None:
                tokens = counter.count(PINNED_NOTE + (pin.note or ""))
            else:
                tokens = sum(t for seq, t in shown.items() if pin.first_seq <= seq <= pin.last_seq)
            infos.append(
                PinInfo(
                    id=pin.id,
                    ref=pin.reference if pin.first_seq is not None else None,
                    note=pin.note,
                    tokens=tokens,
                    by=pin.by,
                    at=pin.created_at,
                )
            )
        total = await scope.standing.pinned_tokens(session, counter) if pins else 0
        return PinList(
            session_id=session.id,
            pins=infos,
            pinned_tokens=total,
            usable=scope.budget(session, settings).usable,
        )

    # -- edit ------------------------------------------------------------------------------------

    async def edit_summary(self, session_id: str, text: str, *, by: str | None = None) -> CompactResult:
        """Replace the current summary with `text` (every section of the template), or amend it
        (`text` names only some sections: their bullets are added). Headings and citations are
        checked; the edit is recorded with who and when; the next compaction updates the edited text."""
        async with self._scope.store.write(session_id) as tx:
            session = tx.session
            anchor = session.view
            if anchor is None:
                raise CompactionFailed(f"session {session_id} has no summary to edit: compact it first")
            whole, named = check_summary(text, session.message_count)
            before = session.tokens_in_view
            current = (await tx.messages(anchor.summary_seq - 1))[0]
            if whole:
                edited = parse_summary(text)
            else:
                edited = parse_summary(current.text)
                for name, bullets in parse_summary(text).sections.items():
                    for bullet in bullets:
                        edited.add(name, bullet)
            rendered = edited.render()
            settings = self._scope.settings_for(session)
            counter = self._scope.counter(session.model, settings)
            message = count_message(
                Message(
                    role="assistant",
                    summary=True,
                    parts=[TextPart(text=rendered, synthetic=True)],
                    finish_reason="stop",
                    metadata={"edit_of": current.id, "edited_by": by or "unknown"},
                ),
                counter,
            )
            stored = (await tx.insert_messages([message]))[0]
            after = session.tokens_in_view - current.in_view_tokens + stored.in_view_tokens
            record = await _latest_compaction(tx)
            if record is not None and record.marker_id is not None and record.written_ids:
                await tx.update_compaction(record.model_copy(update={"written_ids": [*record.written_ids, stored.id]}))
            await tx.add_compaction(
                CompactionRecord(
                    strategy="edit",
                    summarizer="edit",
                    edited_by=by or "unknown",
                    tokens_before=session.tokens_in_view,
                    tokens_after=after,
                    head_messages=0,
                    head_tokens=0,
                    summary_tokens=stored.tokens,
                    summary_id=stored.id,
                    notes=["replaced the summary" if whole else "amended " + ", ".join(named)],
                )
            )
            new_anchor = anchor.model_copy(
                update={
                    "summary_seq": stored.seq,
                    "after_seq": anchor.after_seq if anchor.after_seq is not None else anchor.summary_seq,
                }
            )
            session = tx.session.model_copy(
                update={
                    "view": new_anchor,
                    "tokens_in_view": after,
                    "message_count": tx.session.message_count + 1,
                    "tokens_stored": tx.session.tokens_stored + stored.tokens,
                }
            )
            await tx.save_session(session)
        status = await self._scope.status(await self._scope.store.get_session(session_id))
        return CompactResult(
            compacted=True,
            strategy="edit",
            summarizer="edit",
            tokens_before=before,
            tokens_after=after,
            summary_tokens=stored.tokens,
            summary=rendered,
            reason="replaced the summary" if whole else "amended " + ", ".join(named),
            status=Brief.of(status),
        )

    # -- undo --------------------------------------------------------------------------------------

    async def undo(self, session_id: str, what: Literal["last", "compaction", "prune"] = "last") -> UndoResult:
        """Take back the latest compaction or prune (`last`: whichever came later)."""
        async with self._scope.store.write(session_id) as tx:
            session = tx.session
            record = await _latest_compaction(tx)
            prune = session.metadata.last_prune
            if prune is not None and prune.undone_at is not None:
                prune = None
            if what == "last":
                if record is None and prune is None:
                    raise CompactionFailed("nothing to undo: no compaction or prune since the last undo")
                what = (
                    "prune" if prune is not None and (record is None or prune.at > record.created_at) else "compaction"
                )
            before = session.tokens_in_view
            if what == "compaction":
                if record is None:
                    raise CompactionFailed("nothing to undo: no compaction since the last undo")
                session = await _undo_compaction(tx, session, record)
            else:
                if prune is None:
                    raise CompactionFailed("nothing to undo: no prune since the last undo")
                if record is not None and record.created_at > prune.at:
                    raise CompactionFailed("a compaction came after the last prune: undo the compaction first")
                session = await _undo_prune(tx, session)
            await tx.save_session(session)
        status = await self._scope.status(await self._scope.store.get_session(session_id))
        return UndoResult(
            session_id=session_id,
            undone=what,
            tokens_before=before,
            tokens_after=session.tokens_in_view,
            status=Brief.of(status),
        )


def _lift_marks(messages: list[Message]) -> list[PartMark]:
    """Every prune, cut or digest mark on `messages` taken off, each message's hidden tokens
    returned to the view (a negative `freed` on its first lifted part)."""
    marks: list[PartMark] = []
    for message in messages:
        lifted = [
            (index, part)
            for index, part in enumerate(message.parts)
            if isinstance(part, ToolPart)
            and (part.compacted_at is not None or part.view_cap is not None or part.view_text is not None)
        ]
        back = message.tokens - message.in_view_tokens
        for n, (index, part) in enumerate(lifted):
            plain = part.model_copy(
                update={"compacted_at": None, "input_cleared": False, "view_cap": None, "view_text": None}
            )
            marks.append(PartMark(message.id, index, plain, -back if n == 0 else 0))
    return marks


async def _check_in_view(tx: SessionTransaction, session: Session, first: int, last: int) -> list[Message]:
    """The span's messages as the view shows them; a refusal for messages that are not stored, or
    that the view no longer shows (a pin keeps a message in view; it cannot bring back one
    already summarized or removed)."""
    stored = [m for m in await tx.messages(first - 1, hidden=True) if m.seq <= last]
    if not stored or stored[0].seq != first or stored[-1].seq != last:
        top = session.message_count
        raise InvalidInput(
            "ref", f"m{first if not stored or stored[0].seq != first else last} is not a stored message (m1..m{top})"
        )
    shown = {m.seq for m in await view.visible(tx.messages, session.view)}
    gone = [m.seq for m in stored if m.seq not in shown and not m.is_compaction]
    if gone:
        raise InvalidInput(
            "ref",
            f"m{gone[0]} is no longer in view (a compaction or removal took it out); undo that first, "
            "or pin a note with what it said",
        )
    if all(m.is_compaction for m in stored):
        raise InvalidInput("ref", f"m{first} is a compaction marker or summary; pin a note instead")
    copy = next((m for m in stored if m.metadata.get("copy_of")), None)
    if copy is not None and len(stored) > 1:
        raise InvalidInput(
            "ref", f"m{copy.seq} is the request shown again after a summary; pin it on its own (m{copy.seq})"
        )
    written = next((m for m in stored if _written_by_us(m)), None)
    if written is not None:
        raise InvalidInput(
            "ref", f"m{written.seq} was written by contextfold (a note or a range summary); pin a note instead"
        )
    return [m for m in stored if m.seq in shown and not m.is_compaction]


def _written_by_us(message: Message) -> bool:
    """A message a compaction wrote that stands for nothing the user or model said: a continue
    note, a range's marker or summary. (A request copy stands for the request: it may be pinned.)"""
    if message.metadata.get("range") or message.metadata.get("range_summary"):
        return True
    return (
        message.role == "user"
        and bool(message.parts)
        and all(isinstance(p, TextPart) and p.synthetic for p in message.parts)
        and not message.metadata.get("copy_of")
    )


async def _moved_pins(tx: SessionTransaction, session: Session, record: CompactionRecord) -> Session:
    """Pins on a request copy the undone compaction wrote move to the request itself, which the
    restored view shows; nothing else it wrote can be pinned."""
    written = set(record.written_ids)
    pins = session.metadata.pins
    if not pins:
        return session
    copies = {
        m.seq: m.metadata["copy_of"] for m in await tx.messages(0) if m.id in written and m.metadata.get("copy_of")
    }
    if not copies:
        return session
    originals = {m.id: m.seq for m in await tx.messages(0, hidden=True) if m.id in set(copies.values())}
    moved = []
    for pin in pins:
        if pin.first_seq is not None and pin.first_seq == pin.last_seq and pin.first_seq in copies:
            seq = originals.get(copies[pin.first_seq])
            if seq is not None:
                pin = pin.model_copy(update={"first_seq": seq, "last_seq": seq})
        moved.append(pin)
    return session.model_copy(update={"metadata": session.metadata.model_copy(update={"pins": moved})})


async def _latest_compaction(tx: SessionTransaction) -> CompactionRecord | None:
    for record in await tx.compactions(limit=UNDO_LOOKBACK):
        if record.undone_at is None and record.strategy != "edit":
            return record
    return None


async def _undo_compaction(tx: SessionTransaction, session: Session, record: CompactionRecord) -> Session:
    if record.strategy not in ("anchored", "range") or not record.written_ids:
        raise CompactionFailed(
            f"the latest compaction ({record.strategy}, {record.id}) cannot be undone: only anchored and range "
            "compactions made by this version are"
        )
    anchor = session.view
    if record.strategy == "range":
        marker_seq = anchor.splices[-1].marker_seq if anchor is not None and anchor.splices else None
    else:
        marker_seq = anchor.marker_seq if anchor is not None else None
    current = await tx.messages(marker_seq - 1) if marker_seq else []
    if not current or current[0].id != record.marker_id:
        raise CompactionFailed(f"the view no longer starts at compaction {record.id}; nothing was changed")
    session = await _moved_pins(tx, session, record)
    await tx.hide_messages(record.written_ids)
    if record.cut_marks:
        await tx.mark_parts(await _restored(tx, record.cut_marks, {"view_cap": None}, record.view_before))
    visible = await view.visible(tx.messages, record.view_before)
    in_view = sum(p.tokens for p in session.system) + sum(m.in_view_tokens for m in visible)
    await tx.update_compaction(record.model_copy(update={"undone_at": time.time()}))
    metadata = session.metadata.model_copy(update={"last_compaction": None})
    return session.model_copy(update={"view": record.view_before, "tokens_in_view": in_view, "metadata": metadata})


async def _undo_prune(tx: SessionTransaction, session: Session) -> Session:
    prune = session.metadata.last_prune
    assert prune is not None
    marks = await _restored(tx, prune.marks, {"compacted_at": None, "input_cleared": False}, session.view)
    if marks:
        await tx.mark_parts(marks)
    freed = -sum(m.freed for m in marks)
    metadata = session.metadata.model_copy(update={"last_prune": prune.model_copy(update={"undone_at": time.time()})})
    return session.model_copy(update={"tokens_in_view": session.tokens_in_view + freed, "metadata": metadata})


async def _restored(
    tx: SessionTransaction, marks: list[tuple[str, int, int]], update: dict[str, object], anchor: ViewAnchor | None
) -> list[PartMark]:
    """`marks` taken back: each part as it was before (`update` undoes the mark), its tokens returned
    to the view (a negative `freed`)."""
    wanted = {(mid, index): freed for mid, index, freed in marks}
    ids = {mid for mid, _, _ in marks}
    loaded: dict[str, Message] = {}
    for message in await tx.messages(view.load_from(anchor)):
        if message.id in ids:
            loaded[message.id] = message
    out = []
    for (mid, index), freed in wanted.items():
        found = loaded.get(mid)
        part = found.parts[index] if found is not None and index < len(found.parts) else None
        if isinstance(part, ToolPart) and any(getattr(part, name) != value for name, value in update.items()):
            out.append(PartMark(mid, index, part.model_copy(update=update), -freed))
    return out

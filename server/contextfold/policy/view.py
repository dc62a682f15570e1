"""The view: which stored messages the model sees, in what order (docs/design.md §6).

After a compaction the model sees the marker (rendered as a user message), the summary, the
pinned messages from before the tail (verbatim, in order), the copy of the request the tail
answers (when the compaction wrote one), the tail kept verbatim from before the marker, then everything else that came after the summary. Everything else stays
stored and is hidden. Works on anything with a `seq`: full messages or bare rows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from contextfold.domain import ViewAnchor


class _Sequenced(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def is_compaction(self) -> bool: ...


T = TypeVar("T", bound=_Sequenced)


def load_from(anchor: ViewAnchor | None) -> int:
    """The `after_seq` to load from: nothing older than the view is ever read."""
    if anchor is None:
        return 0
    first = anchor.tail_start_seq if anchor.tail_start_seq is not None else anchor.marker_seq
    return min([first, *anchor.pinned_seqs]) - 1


def in_view(messages: Sequence[T], anchor: ViewAnchor | None) -> list[T]:
    """`messages` (in seq order, possibly starting at `load_from(anchor)`) as the model sees them."""
    if anchor is None:
        return list(messages)
    head: list[T] = []
    pinned: list[T] = []
    prompt: list[T] = []
    tail: list[T] = []
    after: list[T] = []
    kept = set(anchor.pinned_seqs)
    for message in messages:
        if message.seq in (anchor.marker_seq, anchor.summary_seq):
            head.append(message)
        elif message.seq == anchor.prompt_seq:
            prompt.append(message)
        elif message.seq in kept:
            pinned.append(message)
        elif anchor.tail_start_seq is not None and anchor.tail_start_seq <= message.seq < anchor.marker_seq:
            # An earlier compaction's marker and summary can sit inside the kept range: the new
            # summary replaced them, so they stay hidden.
            if not message.is_compaction:
                tail.append(message)
        elif message.seq > (anchor.summary_seq if anchor.after_seq is None else anchor.after_seq):
            after.append(message)
    ordered = head + pinned + prompt + tail + after
    return _spliced(ordered, messages, anchor) if anchor.splices else ordered


def _spliced(ordered: list[T], messages: Sequence[T], anchor: ViewAnchor) -> list[T]:
    """`ordered` with each range compaction's messages in place of its range: the marker and the
    summary where the range's first shown message was (nowhere when none of it is shown: an
    anchored compaction summarized it since), then the pinned messages it kept."""
    own = {seq for s in anchor.splices for seq in (s.marker_seq, s.summary_seq)}
    by_seq = {m.seq: m for m in messages if m.seq in own}
    out: list[T] = []
    emitted: set[int] = set()
    for message in ordered:
        if message.seq in own:
            continue  # shown only in its range's place
        splice = next((s for s in anchor.splices if s.first_seq <= message.seq <= s.last_seq), None)
        if splice is None:
            out.append(message)
            continue
        if id(splice) not in emitted:
            emitted.add(id(splice))
            out += [by_seq[seq] for seq in (splice.marker_seq, splice.summary_seq) if seq in by_seq]
        if message.seq in splice.kept:
            out.append(message)
    return out


async def visible(load: Callable[[int], Awaitable[Sequence[T]]], anchor: ViewAnchor | None) -> list[T]:
    """Load only what the view can show (`load(after_seq)`, e.g. a transaction's `messages`) and order it."""
    return in_view(await load(load_from(anchor)), anchor)

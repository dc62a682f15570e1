"""What every anchored compaction keeps in view: the newest request and the last answer.

`select_tail` keeps what fits the tail budget, whole turns first. Alone it can keep nothing (the
newest message is over budget), keep the last answer without the request it answers (the newest
turn split), or, when the whole view fits, keep no tail at all, so the summary replaces the
request and the answer too. On top of its choice:

* The tail reaches back at least to the newest assistant message (with no assistant message, to
  the newest user message). When that is over budget, the tail's largest tool outputs are cut
  down in view (`policy.cut`), biggest first, until it fits or nothing is left to cut.
* A tail that holds no request of its own (it starts inside the newest turn) is preceded by the
  newest request: when nothing else of the turn is left before the tail, the tail takes the
  request itself; otherwise a copy of it is shown right after the summary. A Continue note is
  not a request, nor is a turn the harness wrote (mini-swe-agent's format nag, a reminder): the
  copy is of the user's message before it. A tail that starts inside an older
  turn, the newer ones whole, is left as `select_tail` split it.
* A tail budget of 0 (`preserve_recent_tokens = 0`) asks for no tail, and keeps none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.compaction.prose import harness_turn
from contextfold.domain import Message, TextPart, ToolPart
from contextfold.policy.cut import CutCaps, cut_in_view
from contextfold.store.base import PartMark
from contextfold.tokens.counting import TokenCounter


@dataclass(frozen=True)
class Thread:
    start: int
    """Index of the first message kept verbatim (the length of the view: no tail)."""
    prompt: int | None
    """Index of the request to show again after the summary; None when the tail holds its own."""
    cuts: tuple[PartMark, ...]
    """Tool outputs in the tail cut down in view so the tail fits its budget."""

    @property
    def freed(self) -> int:
        return sum(cut.freed for cut in self.cuts)


def keep_thread(
    messages: Sequence[Message], start: int, *, budget: int, counter: TokenCounter, caps: CutCaps = CutCaps()
) -> Thread:
    """Move the tail start chosen by `select_tail` (an index into `messages`) so the newest request
    and the last answer stay in view, with the cuts that make the tail fit."""
    if budget <= 0 or not messages:
        return Thread(start, None, ())
    anchor = _newest(messages, "assistant")
    if anchor is None:
        anchor = _request_before(messages, len(messages))
    cuts: tuple[PartMark, ...] = ()
    if anchor is not None and start > anchor:
        start = anchor
        cuts = _cuts(messages[start:], budget, counter, caps)
        start = _whole_turn(messages, start, budget, sum(m.in_view_tokens for m in messages[start:]) - _freed(cuts))
    if start >= len(messages) or any(_request(m) for m in messages[start:]):
        # The newest request is in the tail. An older turn the tail starts inside is left as
        # `select_tail` split it: its request goes to the summary (formats bridge the two replies).
        return Thread(start, None, cuts)
    request = _request_before(messages, start)
    if request is None:
        return Thread(start, None, cuts)
    if request == start - 1:
        return Thread(request, None, cuts)  # a copy would cost the same as keeping it
    return Thread(start, request, cuts)


def _newest(messages: Sequence[Message], role: str) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == role), None)


def _request_before(messages: Sequence[Message], end: int) -> int | None:
    """The newest request before `end`."""
    return next((i for i in range(end - 1, -1, -1) if _request(messages[i])), None)


def _request(message: Message) -> bool:
    """A user message that opens a turn and is neither a note contextfold wrote (a Continue) nor
    one the harness wrote (a format nag, a reminder: `prose.harness_turn`)."""
    return message.starts_turn and not _synthetic(message) and not harness_turn(message)


def _synthetic(message: Message) -> bool:
    return bool(message.parts) and all(isinstance(p, TextPart) and p.synthetic for p in message.parts)


def _whole_turn(messages: Sequence[Message], start: int, budget: int, tail_tokens: int) -> int:
    """`start`, or the start of its turn when the rest of the turn fits beside the tail."""
    turn = next((i for i in range(start, -1, -1) if messages[i].starts_turn), None)
    if turn is None or turn == 0 or turn == start:
        return start
    rest = sum(m.in_view_tokens for m in messages[turn:start])
    return turn if tail_tokens + rest <= budget else start


def _cuts(tail: Sequence[Message], budget: int, counter: TokenCounter, caps: CutCaps) -> tuple[PartMark, ...]:
    """The fewest tool outputs of `tail`, largest savings first, to cut so it fits `budget`."""
    excess = sum(m.in_view_tokens for m in tail) - budget
    if excess <= 0:
        return ()
    options = []
    for message in tail:
        for index, part in enumerate(message.parts):
            if (
                isinstance(part, ToolPart)
                and (cut := cut_in_view(part, counter, max_tokens=caps.tokens, max_chars=caps.chars)) is not None
            ):
                options.append(PartMark(message.id, index, cut[0], cut[1]))
    chosen: list[PartMark] = []
    for mark in sorted(options, key=lambda m: m.freed, reverse=True):
        if excess <= 0:
            break
        chosen.append(mark)
        excess -= mark.freed
    return tuple(chosen)


def _freed(cuts: Sequence[PartMark]) -> int:
    return sum(cut.freed for cut in cuts)


__all__ = ["Thread", "keep_thread"]

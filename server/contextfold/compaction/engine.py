"""The anchored compaction pipeline, as pure steps (docs/design.md §8).

plan (select the tail, keep the newest request and the last answer in it — `thread.py` — find
the head and the previous summary) → the summarizer writes (elsewhere: it may be a network call)
→ accept (parse, pin the facts code guarantees, refuse a summary that is not smaller than what
it replaces) → the messages to write (marker, summary, the request when the tail starts inside
its turn, and a continue note for automatic compactions whose tail does not end with the user).
The service runs these in order around its store transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from contextfold.compaction.base import SummarizerError
from contextfold.compaction.facts import Facts, extract_facts
from contextfold.compaction.pins import PinReport, pin_facts
from contextfold.compaction.secrets import Redactor, redact_history
from contextfold.compaction.template import CONSTRAINTS, PINNED_NOTE, Summary, parse_summary
from contextfold.compaction.thread import keep_thread
from contextfold.domain import CompactionPart, Message, Session, TextPart, ViewAnchor
from contextfold.policy.cut import CutCaps
from contextfold.policy.turns import TailSelection, rows, select_tail
from contextfold.store.base import PartMark
from contextfold.tokens.counting import TokenCounter, count_message

CONTINUE_TEXT = (
    "Continue with the task from where you left off, using the summary above. "
    "If there is nothing left to do, say so briefly."
)
SUMMARY_MIN_TOKENS = 500
SUMMARY_MAX_TOKENS = 2_900
"""The largest summary by default (the `summary_max_tokens` setting): past this, a longer summary
is not more use (the working set and the user's quotes are shares of the budget, so they stop
growing here too). Claude Code's own summaries run 1,200–5,100 tokens (2,792 the median, 2,803 on
average) at its 32 real compactions in the corpus; at 2,900 ours are its size in the median (2,801;
2,620 on average) and keep 95.9 % of the names needed later on the corpus's 137 cuts
(`bench_compaction.py`, the `compaction_budget` table: 97.2 % at 3,800, where the median summary is
3,540 tokens at those compactions)."""
SMALL_HEAD_TOKENS = 1_500
"""A head whose half is less than this may still have a summary this large, up to
`SMALL_HEAD_SHARE` of itself: half of a 1,120-token head (560 tokens, its quotes and working set
shares of that) starved the summary of a small subagent transcript (issue 27)."""
SMALL_HEAD_SHARE = 0.8


class NothingToCompact(Exception):
    """Everything in view is the tail (or already a summary): there is nothing to summarize.

    `cuts` are tool outputs of the tail that could still be cut down in view to make it fit.
    """

    def __init__(self, message: str, cuts: Sequence[PartMark] = ()) -> None:
        super().__init__(message)
        self.cuts = tuple(cuts)


@dataclass(frozen=True)
class Plan:
    head: list[Message]
    """The history to summarize, oldest first (the previous marker and summary excluded), its
    secrets redacted (`compaction.secrets`): whatever a summary is written from goes through here.
    The stored messages keep the originals."""
    tail: list[Message]
    """Messages kept verbatim after the new summary, in view order."""
    previous: str | None
    """The previous summary's text: the anchor to update (secrets redacted)."""
    replaced_tokens: int
    """What the new marker and summary replace: the head plus the previous marker and summary,
    less the request shown again after them."""
    tail_tokens: int
    """The tail as it will be shown, its cuts applied."""
    selection: TailSelection
    summary_budget: int
    prompt: Message | None = None
    """The request the tail answers, shown again after the summary (the tail starts inside its turn)."""
    cuts: tuple[PartMark, ...] = ()
    """Tool outputs of the tail cut down in view so it fits its budget."""
    previous_summary: Message | None = None
    """The previous summary's message (its text is `previous`)."""
    earlier: tuple[Message, ...] = ()
    """When the previous summary is another agent's (imported: Claude Code's, Codex's), the stored
    history it stands for, read back (`with_earlier`): their summaries paraphrase, so the user's
    words, the edited files and the working set are taken from the real history instead. Empty
    when the previous summary is contextfold's own, whose anchor carries them. Redacted as `head` is."""
    redactor: Redactor = Redactor()
    """What redacted `head`, `earlier` and `previous`, with the secrets it learned from them: it
    redacts the accepted summary too (a model may write a secret it guessed or was told of)."""
    pinned: tuple[Message, ...] = ()
    """Pinned messages from before the tail: kept verbatim after the summary, never summarized."""
    notes: tuple[str, ...] = ()
    """Pinned notes, each carried word for word into the summary's Constraints (`PINNED_NOTE`)."""

    @property
    def pinned_tokens(self) -> int:
        return sum(m.in_view_tokens for m in self.pinned)

    @property
    def tail_start(self) -> Message | None:
        return self.tail[0] if self.tail else None

    @property
    def history(self) -> list[Message]:
        """Everything before the tail the facts are taken from: `earlier`, then the head."""
        return [*self.earlier, *self.head] if self.earlier else self.head

    @cached_property
    def facts(self) -> Facts:
        """The facts of `history`, extracted once: the extractive summary is built from them and
        every summary is pinned with them."""
        return extract_facts(self.history)

    @property
    def foreign_previous(self) -> bool:
        """The previous summary in view was written by another agent and imported."""
        return self.previous_summary is not None and bool(self.previous_summary.metadata.get("imported_from"))

    def with_earlier(self, stored: Sequence[Message]) -> Plan:
        """This plan with `earlier` set from the session's stored messages (any order, any span):
        those before the previous summary that are history, not markers or summaries."""
        if self.previous_summary is None:
            return self
        before = self.previous_summary.seq
        earlier = [m for m in sorted(stored, key=lambda m: m.seq) if m.seq < before and not m.is_compaction]
        redacted, learned = redact_history(earlier)
        redactor = self.redactor.joined(learned)
        # A secret learned from the earlier history may stand bare in the head too.
        head = redactor.messages(self.head) if learned.learned else self.head
        return replace(self, earlier=tuple(redacted), head=head, redactor=redactor)


def summary_budget(usable: int, replaced_tokens: int, max_tokens: int = SUMMARY_MAX_TOKENS) -> int:
    """Room for the summary: a tenth of usable within [500, `max_tokens`], and half of what it replaces —
    or, for a small head, up to `SMALL_HEAD_TOKENS` within `SMALL_HEAD_SHARE` of it."""
    share = max(replaced_tokens // 2, min(SMALL_HEAD_TOKENS, int(replaced_tokens * SMALL_HEAD_SHARE)))
    floor = min(SUMMARY_MIN_TOKENS, max_tokens)
    return max(floor // 2, min(max_tokens, max(floor, usable // 10), share))


def plan_compaction(
    visible: Sequence[Message],
    *,
    tail_budget: int,
    tail_turns: int,
    usable: int,
    counter: TokenCounter,
    caps: CutCaps = CutCaps(),
    pinned: frozenset[int] = frozenset(),
    notes: Sequence[str] = (),
    summary_max_tokens: int = SUMMARY_MAX_TOKENS,
) -> Plan:
    """Split the view into the head to summarize and the tail to keep. Raises NothingToCompact.

    Messages whose seq is in `pinned` are never summarized: those before the tail are kept
    verbatim after the summary, and their tool outputs are never cut. `notes` go into Constraints."""
    previous_marker = [m for m in visible if m.compaction is not None]
    previous_summary = next((m for m in visible if m.summary), None)
    candidates = [m for m in visible if not m.is_compaction]
    selection = select_tail(rows(candidates), budget=tail_budget, tail_turns=tail_turns)
    start = (
        len(candidates)
        if selection.tail_start_id is None
        else next(i for i, m in enumerate(candidates) if m.id == selection.tail_start_id)
    )
    thread = keep_thread(candidates, start, budget=tail_budget, counter=counter, caps=caps)
    if pinned:
        kept_ids = {m.id for m in candidates if m.seq in pinned}
        cuts = tuple(c for c in thread.cuts if c.message_id not in kept_ids)
        prompt_at = thread.prompt
        if prompt_at is not None and candidates[prompt_at].seq in pinned:
            prompt_at = None  # the request is pinned: shown as it is, no copy
        thread = replace(thread, cuts=cuts, prompt=prompt_at)
    head, tail = candidates[: thread.start], candidates[thread.start :]
    kept = [m for m in head if m.seq in pinned]
    if kept:
        head = [m for m in head if m.seq not in pinned]
    tail_tokens = sum(m.in_view_tokens for m in tail) - thread.freed
    if not head:
        cut = (
            f"; cutting {len(thread.cuts)} oversized tool output(s) in it would free {thread.freed:,} tokens"
            if thread.cuts
            else ""
        )
        raise NothingToCompact(
            f"nothing to compact: the newest request and the last answer stay in view, and with them all "
            f"{len(candidates)} messages ({tail_tokens + thread.freed:,} tokens, tail budget {tail_budget:,}){cut}"
            + (f", {len(kept)} pinned message(s) before it" if kept else ""),
            thread.cuts,
        )
    prompt = candidates[thread.prompt] if thread.prompt is not None else None
    replaced = sum(m.in_view_tokens for m in head) + sum(m.in_view_tokens for m in previous_marker)
    if previous_summary is not None:
        replaced += previous_summary.in_view_tokens
    if prompt is not None:
        replaced -= prompt.in_view_tokens
    smallest = counter.count(Summary().render())
    if replaced <= smallest:
        # Any summary, even of nothing, takes more room than it would free: say so before a
        # summarizer (a paid model, maybe) writes one to be thrown away.
        raise NothingToCompact(
            f"nothing to compact: the {replaced:,} tokens before the kept tail are fewer than the smallest "
            f"summary ({smallest:,} tokens)",
            thread.cuts,
        )
    previous = previous_summary.text if previous_summary is not None else None
    head, redactor = redact_history(head, previous)
    return Plan(
        head=head,
        tail=tail,
        previous=redactor.text(previous) if previous is not None else None,
        replaced_tokens=replaced,
        tail_tokens=tail_tokens,
        selection=selection,
        summary_budget=summary_budget(usable, replaced, summary_max_tokens),
        prompt=prompt,
        cuts=thread.cuts,
        previous_summary=previous_summary,
        redactor=redactor,
        pinned=tuple(kept),
        notes=tuple(notes),
    )


def accept(text: str, plan: Plan, counter: TokenCounter) -> tuple[str, PinReport, int]:
    """The summary as it will be stored: pinned, its secrets redacted, and smaller than what it
    replaces.

    Raises `SummarizerError` for a summary that would not free anything, so the engine falls
    back to the next summarizer instead of reporting a compaction that saved nothing.
    """
    pinned, report = pin_facts(text, plan.facts, previous=plan.previous, budget_tokens=plan.summary_budget)
    pinned = plan.redactor.text(pinned)
    if plan.notes:
        pinned = with_notes(pinned, plan.notes)
    tokens = counter.count(pinned)
    if tokens >= plan.replaced_tokens:
        raise SummarizerError(
            "engine",
            f"the summary ({tokens:,} tokens) is not smaller than what it replaces ({plan.replaced_tokens:,})",
        )
    return pinned, report, tokens


def with_notes(summary: str, notes: Sequence[str]) -> str:
    """`summary` with each pinned note in Constraints, word for word (first, in pin order), and
    any earlier copy of a note that is no longer pinned left as the summarizer kept it."""
    parsed = parse_summary(summary)
    wanted = [PINNED_NOTE + " ".join(n.split()) for n in notes]
    rest = [b for b in parsed[CONSTRAINTS] if b not in wanted]
    sections = {**parsed.sections, CONSTRAINTS: []}
    rebuilt = Summary(sections)
    for bullet in [*wanted, *rest]:
        rebuilt.add(CONSTRAINTS, bullet)
    return rebuilt.render()


def compaction_messages(
    plan: Plan, summary: str, counter: TokenCounter, *, auto: bool, overflow: bool
) -> list[Message]:
    """Marker (a user message with a compaction part), summary, the request the tail answers when
    the tail starts inside its turn, and for automatic ones a continue note — unless the tail
    already ends with the user, whose message is then the one to answer."""
    tail_start = plan.tail_start
    messages = [
        Message(
            role="user",
            parts=[CompactionPart(auto=auto, overflow=overflow, tail_start_id=tail_start.id if tail_start else None)],
        ),
        Message(role="assistant", summary=True, parts=[TextPart(text=summary, synthetic=True)], finish_reason="stop"),
    ]
    if plan.prompt is not None:
        messages.append(request_copy(plan.prompt))
    if auto and (not plan.tail or plan.tail[-1].role != "user"):
        messages.append(Message(role="user", parts=[TextPart(text=CONTINUE_TEXT, synthetic=True)]))
    return [count_message(m, counter) for m in messages]


def request_copy(prompt: Message) -> Message:
    """The request `prompt` again, as a new message (the original stays stored, summarized)."""
    return Message(
        role="user",
        name=prompt.name,
        parts=[part.model_copy(update={"tokens": 0}) for part in prompt.parts],
        metadata={"copy_of": prompt.id},
    )


def is_continue(message: Message) -> bool:
    """The continue note an automatic compaction writes."""
    return (
        message.role == "user"
        and message.text == CONTINUE_TEXT
        and all(isinstance(p, TextPart) and p.synthetic for p in message.parts)
    )


def anchor_for(stored: Sequence[Message], plan: Plan, previous: ViewAnchor | None = None) -> ViewAnchor:
    """The view after the compaction, given the stored marker and summary (ids and seqs assigned)
    and the view before it (`previous`: its range compactions carry over)."""
    marker, summary = stored[0], stored[1]
    tail_start = plan.tail_start.seq if plan.tail_start else None
    splices = list(previous.splices) if previous is not None else []
    for splice in splices:  # the tail starts at a range's summary: it stands where its range began
        if tail_start in (splice.marker_seq, splice.summary_seq):
            tail_start = splice.first_seq
    return ViewAnchor(
        marker_seq=marker.seq,
        summary_seq=summary.seq,
        tail_start_seq=tail_start,
        splices=splices,
        prompt_seq=stored[2].seq if plan.prompt is not None else None,
        pinned_seqs=[m.seq for m in plan.pinned],
    )


def compacted(session: Session, anchor: ViewAnchor, stored: Sequence[Message], tokens_in_view: int) -> Session:
    """`session` once a compaction's marker and summary (`stored`) are written: the view starts at
    `anchor`, and the provider's last usage report is dropped, since it described the old, longer
    context (counting starts again from contextfold's own count)."""
    return session.model_copy(
        update={
            "view": anchor,
            "message_count": session.message_count + len(stored),
            "tokens_stored": session.tokens_stored + sum(m.tokens for m in stored),
            "tokens_in_view": tokens_in_view,
            "last_usage": None,
            "last_usage_message_id": None,
            "usage_baseline": 0,
        }
    )

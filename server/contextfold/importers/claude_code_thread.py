"""Which records of a Claude Code session file are the conversation the model had.

A session file is a tree written in time order, not a list: every record names its parent
(`parentUuid`). The conversation is the path from the newest main-thread record back to the
root, with these additions, each seen in real sessions:

- A compaction's `compact_boundary` has no parent; `logicalParentUuid` names the last record
  before it. When that record is not in the file, the newest earlier record of the thread is.
- Claude Code 1.0.x wrote no boundary: its `isCompactSummary` user record simply has no parent
  (and no logical parent). The history it summarizes is the newest earlier record of the thread.
- Parallel tool calls fork the tree: each `tool_use` line of one API response (`message.id`) has
  its own child, and only one fork lies on the path. The response's other lines, and results
  answering any of its calls, belong to the conversation too.
- Records whose parent lies outside the file (a subagent file starts from points in the main
  session) and that carry context (`isMeta`) open the thread before the path starts.

Left out, and counted: records of a subagent's sidechain inside a main file (`sidechain`) and
records on a branch the conversation left (`branch`: a rewind, an edited prompt, an earlier
root). A file whose records carry no `parentUuid` at all (older or hand-written files) is read in
file order; its thread is the main one when it has any main record, else the sidechain.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TAIL_UUIDS = 64
"""How many of the newest record ids an import remembers, to recognise where the next one continues."""
_CONVERSATION = ("user", "assistant")


@dataclass(frozen=True, eq=False)
class _Node:
    line: int
    kind: str
    uuid: str | None
    parent: str | None
    logical_parent: str | None
    sidechain: bool
    meta: bool
    summary: bool
    """An `isCompactSummary` record: without a parent, it continues the record before it."""
    message_id: str | None
    calls: tuple[str, ...]
    answers: tuple[str, ...]
    """For a user record holding only tool results: the calls it answers."""


@dataclass
class Thread:
    skip: dict[int, str] = field(default_factory=dict)
    """Line → why it is left out, for conversation records off the thread."""
    warnings: list[str] = field(default_factory=list)
    tail_uuids: tuple[str, ...] = ()


def select_thread(
    records: Iterable[tuple[int, dict[str, Any]]],
    *,
    pending_calls: frozenset[str] = frozenset(),
    previous_tail: tuple[str, ...] = (),
) -> Thread:
    """Read every record once (the caller streams them) and decide which conversation records to keep."""
    nodes: list[_Node] = []
    by_uuid: dict[str, _Node] = {}
    linked = False
    tail = list(previous_tail)
    for line, record in records:
        node = _node(line, record)
        if node.uuid is not None:
            by_uuid.setdefault(node.uuid, node)
            tail.append(node.uuid)
        if node.kind in _CONVERSATION or _is_boundary(record):
            nodes.append(node)
            linked = linked or "parentUuid" in record
    thread = Thread(tail_uuids=tuple(tail[-TAIL_UUIDS:]))
    conversation = [n for n in nodes if n.kind in _CONVERSATION]
    if not conversation:
        return thread
    sidechain = all(n.sidechain for n in conversation)
    if not linked:
        thread.skip = {n.line: "sidechain" for n in nodes if n.sidechain != sidechain}
        return thread
    ours = [n for n in nodes if n.sidechain == sidechain]
    kept, start_parent = _path(ours[-1], by_uuid, ours, previous_tail)
    _add_forks(ours, kept, pending_calls)
    first = min((n.line for n in kept), default=0)
    kept.update(n for n in ours if n.line < first and n.meta and n.parent is not None and n.parent not in by_uuid)
    thread.skip = {
        n.line: ("sidechain" if n.sidechain and not sidechain else "branch")
        for n in nodes
        if n not in kept and n.uuid is not None
    }
    if previous_tail and start_parent is not None and start_parent not in previous_tail:
        thread.warnings.append(
            "the conversation continues from an earlier point than the previous import reached (a rewind?); "
            "what that import stored stays in the session"
        )
    return thread


def _path(
    leaf: _Node, by_uuid: dict[str, _Node], ours: list[_Node], previous_tail: tuple[str, ...]
) -> tuple[set[_Node], str | None]:
    """The records from `leaf` back to the root, and the parent outside what was read where it stopped.

    Each record is visited once: a record's predecessor (for a compaction whose logical parent was
    never written) is looked up in a table made in one pass, not searched for, so a file of many
    such boundaries costs linear time, not quadratic."""
    before = _records_before(ours)
    kept: set[_Node] = set()
    node: _Node | None = leaf
    while node is not None and node not in kept:
        kept.add(node)
        parent = node.parent
        if parent is None and node.logical_parent is not None:
            parent = node.logical_parent
            if parent not in by_uuid and parent not in previous_tail:
                # The boundary's logical parent was never written: continue from the record before it.
                node = before.get(node)
                continue
        if parent is None and node.summary:
            # A 1.0.x compaction (no boundary): the summary follows the history it summarizes.
            node = before.get(node)
            continue
        if parent is None:
            return kept, None
        if parent not in by_uuid:
            return kept, parent
        node = by_uuid[parent]
    return kept, None


def _records_before(ours: list[_Node]) -> dict[_Node, _Node]:
    """For each record of the thread (in file order), the newest conversation record written before it."""
    before: dict[_Node, _Node] = {}
    newest: _Node | None = None
    for node in ours:
        if newest is not None:
            before[node] = newest
        if node.kind in _CONVERSATION:
            newest = node
    return before


def _add_forks(ours: list[_Node], kept: set[_Node], pending_calls: frozenset[str]) -> None:
    """Add the other lines of kept API responses, and the results of their calls."""
    responses = {n.message_id for n in kept if n.kind == "assistant" and n.message_id}
    kept.update(n for n in ours if n.kind == "assistant" and n.message_id in responses)
    calls = set(pending_calls)
    for node in kept:
        calls.update(node.calls)
    kept.update(n for n in ours if n.answers and calls.issuperset(n.answers))


def _node(line: int, record: dict[str, Any]) -> _Node:
    raw = record.get("message")
    message: dict[str, Any] = raw if isinstance(raw, dict) else {}
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    answers: tuple[str, ...] = ()
    if record.get("type") == "user" and blocks and all(b.get("type") == "tool_result" for b in blocks):
        answers = tuple(str(b.get("tool_use_id")) for b in blocks)
    kind = record.get("type")
    return _Node(
        line=line,
        kind=kind if isinstance(kind, str) else "",
        uuid=_str(record.get("uuid")),
        parent=_str(record.get("parentUuid")),
        logical_parent=_str(record.get("logicalParentUuid")),
        sidechain=bool(record.get("isSidechain")),
        meta=bool(record.get("isMeta")),
        summary=record.get("type") == "user" and bool(record.get("isCompactSummary")),
        message_id=_str(message.get("id")),
        calls=tuple(str(b.get("id")) for b in blocks if b.get("type") == "tool_use"),
        answers=answers,
    )


def _is_boundary(record: dict[str, Any]) -> bool:
    return record.get("type") == "system" and record.get("subtype") == "compact_boundary"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


__all__ = ["TAIL_UUIDS", "Thread", "select_thread"]

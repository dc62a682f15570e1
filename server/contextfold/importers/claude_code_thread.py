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
- `attachment` records of the kinds that carry conversation (`CONVERSATION_ATTACHMENTS`: a
  message the user typed while the agent worked, a file the user changed) sit on the path like
  any record; one written after the newest message, or after another kept attachment, is kept when
  its parent is.

Left out, and counted: records of a subagent's sidechain inside a main file (`sidechain`) and
records on a branch the conversation left (`branch`: a rewind, an edited prompt, an earlier
root). A file whose records carry no `parentUuid` at all (older or hand-written files) is read in
file order; its thread is the main one when it has any main record, else the sidechain.

Memory: a file of a million records must not cost gigabytes, so each record is kept as a few
numbers in arrays (its line, its parent's number, flags, a hash of its API response id and of its
tool call ids), with one dictionary from a hash of its uuid to its number: about 100 bytes a
record. Records are numbered in file order, and every step below is one pass or one walk up the
tree, each record visited once: linear time. (Two different ids whose 64-bit hashes are equal
would be taken for one; at a million records that happens about once in 10⁷ files.)
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

TAIL_UUIDS = 64
"""How many of the newest record ids an import remembers, to recognise where the next one continues."""
SYNTHETIC_MODEL = "<synthetic>"
"""Claude Code's own marker for messages it made up (errors, "no response requested")."""

# A record's kind and facts, one byte a record.
_USER, _ASSISTANT, _BOUNDARY = 1, 2, 3
_KIND = 3
_SIDECHAIN, _META, _SUMMARY, _HAS_UUID, _ANSWERS = 4, 8, 16, 32, 64
"""`_SUMMARY`: an `isCompactSummary` user record (without a parent, it continues the record before
it). `_ANSWERS`: a user record holding only tool results; its refs are the calls it answers."""
_ATTACHED = 128
"""An `attachment` record of a kind the reader turns into a message (kind 0: not a message record)."""
CONVERSATION_ATTACHMENTS = frozenset(
    {
        "queued_command",
        "edited_text_file",
        "file",
        "compact_file_reference",
        "selected_lines_in_ide",
        "opened_file_in_ide",
        "plan_file_reference",
        "nested_memory",
        "diagnostics",
        "mcp_resource",
        "relevant_memories",
    }
)
"""The attachment kinds whose content Claude Code showed the model as part of the conversation."""
_NONE, _OUTSIDE = -1, -2
"""Parent numbers: no parent; a parent not among the records read (its uuid is in `_Tree.outside`)."""


class _Tree:
    """The records of a file that matter to the thread, as arrays indexed by record number."""

    def __init__(self) -> None:
        self.number: dict[int, int] = {}
        """hash(uuid) → the number of the first record with that uuid."""
        self.line = array("l")
        self.parent = array("l")
        self.flags = bytearray()
        self.response = array("q")
        """hash(message.id) of an assistant record, else 0."""
        self.model = array("H")
        """Index in `models` of an assistant record's model (0: none)."""
        self.refs_end = array("L")
        """Record i's refs (hashes of the calls it makes, or answers) are refs[refs_end[i-1]:refs_end[i]]."""
        self.refs = array("q")
        self.models: list[str] = [""]
        self._model_codes: dict[str, int] = {}
        self.logical: dict[int, int] = {}
        """A boundary's logical parent, by record number (`_OUTSIDE` when not read)."""
        self.outside: dict[int, str] = {}
        """The parent uuid of records whose parent was not read (by record number)."""
        self.logical_outside: dict[int, str] = {}
        self.linked = False
        self.tail: deque[str] = deque(maxlen=TAIL_UUIDS)

    def __len__(self) -> int:
        return len(self.flags)

    def add(self, line: int, record: dict[str, Any]) -> None:
        kind_name = record.get("type")
        kind = _USER if kind_name == "user" else _ASSISTANT if kind_name == "assistant" else 0
        if kind == 0 and kind_name == "system" and record.get("subtype") == "compact_boundary":
            kind = _BOUNDARY
        uuid = _str(record.get("uuid"))
        if uuid is None and kind == 0:
            return  # neither on a path nor conversation
        number = len(self.flags)
        flags = kind | (_ATTACHED if kind == 0 and carries_conversation(record) else 0)
        if uuid is not None:
            flags |= _HAS_UUID
            self.number.setdefault(hash(uuid), number)
            self.tail.append(uuid)
        if kind:
            self.linked = self.linked or "parentUuid" in record
        flags |= _SIDECHAIN if record.get("isSidechain") else 0
        flags |= _META if record.get("isMeta") else 0
        flags |= _SUMMARY if kind == _USER and record.get("isCompactSummary") else 0
        raw = record.get("message")
        message: dict[str, Any] = raw if isinstance(raw, dict) else {}
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if kind == _USER and blocks and all(b.get("type") == "tool_result" for b in blocks):
            flags |= _ANSWERS
            self.refs.extend(hash(str(b.get("tool_use_id"))) for b in blocks)
        else:
            self.refs.extend(hash(str(b.get("id"))) for b in blocks if b.get("type") == "tool_use")
        self.refs_end.append(len(self.refs))
        self.flags.append(flags)
        self.line.append(line)
        self.parent.append(self._link(number, _str(record.get("parentUuid")), self.outside))
        logical = _str(record.get("logicalParentUuid"))
        if logical is not None:
            self.logical[number] = self._link(number, logical, self.logical_outside)
        message_id = _str(message.get("id")) if kind == _ASSISTANT else None
        self.response.append((hash(message_id) or 1) if message_id is not None else 0)
        model = _str(message.get("model")) if kind == _ASSISTANT else None
        self.model.append(self._model_code(model) if model else 0)

    def _link(self, number: int, uuid: str | None, outside: dict[int, str]) -> int:
        if uuid is None:
            return _NONE
        found = self.number.get(hash(uuid))
        if found is not None:
            return found
        outside[number] = uuid  # written later in the file, or never: settled in `resolve`
        return _OUTSIDE

    def _model_code(self, model: str) -> int:
        code = self._model_codes.get(model)
        if code is None and len(self.models) < 65_535:
            code = self._model_codes[model] = len(self.models)
            self.models.append(model)
        return code or 0

    def resolve(self) -> None:
        """Link the parents written after their children (rare); the rest lie outside the file."""
        for links, outside in ((self.parent, self.outside), (None, self.logical_outside)):
            for number, uuid in list(outside.items()):
                found = self.number.get(hash(uuid))
                if found is None:
                    continue
                del outside[number]
                if links is not None:
                    links[number] = found
                else:
                    self.logical[number] = found

    def refs_of(self, number: int) -> array[int]:
        return self.refs[self.refs_end[number - 1] if number else 0 : self.refs_end[number]]


class _Skips(Mapping[int, str]):
    """Line → why it is left out, kept as two arrays (a file can leave out millions of lines)."""

    REASONS = ("branch", "sidechain")

    def __init__(self, lines: array[int], reasons: bytearray) -> None:
        self._lines, self._reasons = lines, reasons

    def __getitem__(self, line: int) -> str:
        at = bisect_left(self._lines, line)
        if at == len(self._lines) or self._lines[at] != line:
            raise KeyError(line)
        return self.REASONS[self._reasons[at]]

    def __iter__(self) -> Iterator[int]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)


@dataclass
class Thread:
    skip: Mapping[int, str] = field(default_factory=dict)
    """Line → why it is left out, for conversation records off the thread."""
    warnings: list[str] = field(default_factory=list)
    tail_uuids: tuple[str, ...] = ()
    model: str | None = None
    """The model the thread's API responses name most often (not Claude Code's own messages)."""


def select_thread(
    records: Iterable[tuple[int, dict[str, Any]]],
    *,
    pending_calls: frozenset[str] = frozenset(),
    previous_tail: tuple[str, ...] = (),
) -> Thread:
    """Read every record once (the caller streams them) and decide which conversation records to keep."""
    tree = _Tree()
    tree.tail.extend(previous_tail)
    for line, record in records:
        tree.add(line, record)
    tree.resolve()
    thread = Thread(tail_uuids=tuple(tree.tail))
    flags, count = tree.flags, len(tree)
    talk, side = False, True  # any conversation record; all of them on a sidechain
    for i in range(count):
        if flags[i] & _KIND in (_USER, _ASSISTANT):
            talk, side = True, side and bool(flags[i] & _SIDECHAIN)
    if not talk:
        return thread
    ours = bytearray(
        1 if flags[i] & (_KIND | _ATTACHED) and bool(flags[i] & _SIDECHAIN) == side else 0 for i in range(count)
    )
    if not tree.linked:
        thread.skip = _skips(tree, lambda i: flags[i] & (_KIND | _ATTACHED) and not ours[i], lambda i: "sidechain")
        return thread
    leaf = max(i for i in range(count) if ours[i] and flags[i] & _KIND)
    kept = bytearray(count)
    start_parent = _path(tree, leaf, ours, kept, previous_tail)
    _add_forks(tree, ours, kept, pending_calls)
    for i in range(leaf + 1, count):
        # Attachments written after the newest message (it is not written yet): kept on the path.
        parent = tree.parent[i]
        if ours[i] and flags[i] & _ATTACHED and parent >= 0 and kept[parent]:
            kept[i] = 1
    first = min((tree.line[i] for i in range(count) if kept[i]), default=0)
    for i in range(count):
        if ours[i] and tree.line[i] < first and flags[i] & _META and tree.parent[i] == _OUTSIDE:
            kept[i] = 1
    thread.skip = _skips(
        tree,
        lambda i: flags[i] & (_KIND | _ATTACHED) and flags[i] & _HAS_UUID and not kept[i],
        lambda i: "sidechain" if flags[i] & _SIDECHAIN and not side else "branch",
    )
    thread.model = _model(tree, kept)
    if previous_tail and start_parent is not None and start_parent not in previous_tail:
        thread.warnings.append(
            "the conversation continues from an earlier point than the previous import reached (a rewind?); "
            "what that import stored stays in the session"
        )
    return thread


def _path(tree: _Tree, leaf: int, ours: bytearray, kept: bytearray, previous_tail: tuple[str, ...]) -> str | None:
    """Mark the records from `leaf` back to the root in `kept`; return the uuid of the parent
    outside what was read where the path stopped, if it stopped at one.

    Each record is visited once: a record's predecessor (for a compaction whose logical parent was
    never written) is looked up in a table made in one pass, not searched for, so a file of many
    such boundaries costs linear time, not quadratic."""
    before = _records_before(tree, ours)
    node = leaf
    while node >= 0 and not kept[node]:
        kept[node] = 1
        parent = tree.parent[node]
        outside = tree.outside.get(node)
        if parent == _NONE and node in tree.logical:
            parent, outside = tree.logical[node], tree.logical_outside.get(node)
            if parent == _OUTSIDE and outside not in previous_tail:
                # The boundary's logical parent was never written: continue from the record before it.
                node = before[node]
                continue
        if parent == _NONE and tree.flags[node] & _SUMMARY:
            # A 1.0.x compaction (no boundary): the summary follows the history it summarizes.
            node = before[node]
            continue
        if parent == _NONE:
            return None
        if parent == _OUTSIDE:
            return outside
        node = parent
    return None


def _records_before(tree: _Tree, ours: bytearray) -> array[int]:
    """For each record, the newest conversation record of the thread written before it (-1: none)."""
    before = array("l", [-1]) * len(tree)
    newest = -1
    for i in range(len(tree)):
        before[i] = newest
        if ours[i] and tree.flags[i] & _KIND in (_USER, _ASSISTANT):
            newest = i
    return before


def _add_forks(tree: _Tree, ours: bytearray, kept: bytearray, pending_calls: frozenset[str]) -> None:
    """Add the other lines of kept API responses, and the results of their calls."""
    count, flags = len(tree), tree.flags
    responses = {tree.response[i] for i in range(count) if kept[i] and tree.response[i]}
    for i in range(count):
        if ours[i] and tree.response[i] in responses:
            kept[i] = 1
    del responses
    calls = {hash(call) for call in pending_calls}
    for i in range(count):
        if kept[i] and not flags[i] & _ANSWERS:
            calls.update(tree.refs_of(i))
    for i in range(count):
        if ours[i] and flags[i] & _ANSWERS and calls.issuperset(tree.refs_of(i)):
            kept[i] = 1


def _skips(tree: _Tree, left_out: Callable[[int], Any], reason: Callable[[int], str]) -> _Skips:
    lines, reasons = array("l"), bytearray()
    for i in range(len(tree)):
        if left_out(i):
            lines.append(tree.line[i])
            reasons.append(_Skips.REASONS.index(reason(i)))
    return _Skips(lines, reasons)


def _model(tree: _Tree, kept: bytearray) -> str | None:
    """The model most of the thread's API responses name, each response once."""
    counts: Counter[int] = Counter()
    last = 0
    for i in range(len(tree)):
        if kept[i] and tree.flags[i] & _KIND == _ASSISTANT:
            code, response = tree.model[i], tree.response[i]
            if code and (response == 0 or response != last) and tree.models[code] != SYNTHETIC_MODEL:
                counts[code] += 1
            last = response
    return tree.models[counts.most_common(1)[0][0]] if counts else None


def carries_conversation(record: dict[str, Any]) -> bool:
    """An `attachment` record of a kind in `CONVERSATION_ATTACHMENTS`."""
    attachment = record.get("attachment")
    return (
        record.get("type") == "attachment"
        and isinstance(attachment, dict)
        and attachment.get("type") in CONVERSATION_ATTACHMENTS
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


__all__ = [
    "CONVERSATION_ATTACHMENTS",
    "SYNTHETIC_MODEL",
    "TAIL_UUIDS",
    "Thread",
    "carries_conversation",
    "select_thread",
]

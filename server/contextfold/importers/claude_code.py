"""Claude Code session JSONL → Anthropic wire messages.

A session file holds one record a line. Only `user` and `assistant` records are conversation;
they carry the Anthropic API message under `message`. What the reader does with the rest, and why:

- One API response is written as several `assistant` lines sharing `message.id` (one content block
  each), and the results of its parallel tool calls can land between those lines. The parts are
  merged back into one assistant message; the results stay in the user message after it.
- Tool results of one assistant message travel in one user message, as the API received them.
- `isMeta` user records (skill bodies, hook reminders, command caveats) were sent to the model,
  so they are kept; their indexes are listed in metadata.
- `isCompactSummary` marks the summary Claude Code wrote at a compaction. The history before it is
  kept too (mark, never delete); the summary's index is listed in metadata, each
  `compact_boundary` system record is recorded with its `compactMetadata`, and the compaction is
  listed in `ImportedTranscript.compactions`: the import replays it, the summary anchoring the view.
- A file is a tree of records; `claude_code_thread` picks the conversation the model had (the path
  from the newest record back, across compactions and parallel tool calls). Sidechain records
  and abandoned branches are skipped and counted.
- The usage each API response reported is kept by message, to calibrate the imported count.
- `isApiErrorMessage` assistant records are errors Claude Code displayed, not model output; skipped.
- Everything else (progress, file-history-snapshot, queue-operation, other system records) is not
  conversation and is counted under `skipped_records`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from contextfold.importers.base import (
    START,
    ImportedCompaction,
    ImportedTranscript,
    LineReader,
    Resume,
    check,
    decode_line,
    derive_title,
    incomplete_line,
    optional,
    read_jsonl_with,
    require,
)
from contextfold.importers.claude_code_thread import select_thread

# Claude Code's own marker for messages it made up (errors, "no response requested").
_SYNTHETIC_MODEL = "<synthetic>"
_MEDIA_KEYS = ("title", "context")
_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# Session facts copied from the first conversation record: record key → metadata key.
_SESSION_KEYS = {
    "sessionId": "session_id",
    "agentId": "agent_id",
    "cwd": "cwd",
    "gitBranch": "git_branch",
    "version": "claude_code_version",
    "slug": "slug",
}

Block = dict[str, Any]


def load_claude_code(path: Path, resume: Resume = START) -> ImportedTranscript:
    # Two passes: the first reads the tree of records and picks the thread, the second converts it.
    lines = LineReader(path, resume)
    boundary: int | None = None  # where a compact_boundary with no conversation after it starts
    cut_short: int | None = None  # a last line still being written

    def records() -> Iterator[tuple[int, dict[str, Any]]]:
        nonlocal boundary, cut_short
        for line_no, raw in lines:
            record = decode_line(lines, line_no, raw)
            if record is None:
                cut_short = line_no
                return
            if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
                boundary = lines.line_start
            elif record.get("type") in ("user", "assistant"):
                boundary = None
            yield line_no, record

    thread = select_thread(records(), pending_calls=resume.pending_calls, previous_tail=resume.tail_uuids)
    # A compaction's boundary is written just before its summary: one read alone is left for the
    # next import, which then sees the two together. So is a last line cut short.
    stop = boundary if boundary is not None else lines.end if cut_short is not None else None
    result = read_jsonl_with(path, ClaudeCodeReader(), resume, skip=thread.skip, stop=stop)
    if cut_short is not None:
        result.warnings.append(incomplete_line(cut_short))
    result.warnings.extend(thread.warnings)
    result.tail_uuids = thread.tail_uuids
    return result


def looks_like_claude_code(record: dict[str, Any]) -> bool:
    """True for a record of a Claude Code session file (typed, with no wire `role` at the top)."""
    if "role" in record or not isinstance(record.get("type"), str):
        return False
    if record["type"] in ("user", "assistant"):
        return isinstance(record.get("message"), dict)
    return any(key in record for key in ("uuid", "sessionId", "leafUuid", "messageId"))


class ClaudeCodeReader:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._thread_is_sidechain: bool | None = None
        # The last assistant message and its API id, while more parts of it may still arrive.
        self._open: tuple[int, str] | None = None
        self._models: Counter[str] = Counter()
        self._session: dict[str, Any] = {}
        self._compactions: list[dict[str, Any]] = []
        self._summary_indexes: list[int] = []
        self._replayed: list[ImportedCompaction] = []
        self._usage: dict[int, dict[str, Any]] = {}
        self._meta_indexes: list[int] = []
        self._skipped_records: Counter[str] = Counter()
        self._skipped_blocks: Counter[str] = Counter()
        self._records = 0
        self._first_prompt: str | None = None
        self._titles: dict[str, str] = {}

    def feed(self, record: dict[str, Any]) -> None:
        self._records += 1
        kind = record.get("type")
        if kind in ("user", "assistant"):
            self._conversation(kind, record)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            self._compact_boundary(record)
        elif kind == "summary" and isinstance(record.get("summary"), str):
            self._titles["summary"] = record["summary"]
        elif kind == "custom-title" and isinstance(record.get("customTitle"), str):
            self._titles["custom"] = record["customTitle"]
        else:
            self._skipped_records[_record_label(record)] += 1

    def finish(self) -> ImportedTranscript:
        title = self._titles.get("custom") or self._titles.get("summary") or derive_title(self._first_prompt)
        model = self._models.most_common(1)[0][0] if self._models else None
        return ImportedTranscript(
            format="anthropic",
            messages=self.messages,
            system=[],  # Claude Code does not write its system prompt into the session file.
            title=title,
            model=model,
            source_format="claude-code",
            metadata=self._metadata(),
            compactions=self._replayed,
            usage=self._usage,
            skipped={k: v for k, v in self._skipped_records.items() if k in _CONVERSATION_SKIPS},
        )

    # -- records ---------------------------------------------------------------------------

    def _conversation(self, kind: str, record: dict[str, Any]) -> None:
        if record.get("isApiErrorMessage"):
            self._skipped_records["api_error_message"] += 1
            return
        if self._thread_is_sidechain is None:
            self._thread_is_sidechain = bool(record.get("isSidechain"))
        self._note_session(record)
        message = require(record, "message", dict, "record")
        if kind == "user":
            self._user(record, message)
        else:
            self._assistant(message)

    def _user(self, record: dict[str, Any], message: dict[str, Any]) -> None:
        content = require(message, "content", (str, list), "message")
        if isinstance(content, list):
            content = self._blocks(content, "message.content")
            if not content:
                self._skipped_records["empty_message"] += 1
                return
            if _only_tool_results(content) and self._last_is_tool_results():
                self.messages[-1]["content"].extend(content)
                return
        index = len(self.messages)
        self.messages.append({"role": "user", "content": content})
        if record.get("isCompactSummary"):
            self._summary_indexes.append(index)
            self._replayed.append(self._compaction_at(index))
        elif record.get("isMeta"):
            self._meta_indexes.append(index)
        elif self._first_prompt is None:
            self._first_prompt = _prompt_text(content)

    def _assistant(self, message: dict[str, Any]) -> None:
        content = require(message, "content", (str, list), "message")
        blocks = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else self._blocks(content, "message.content")
        )
        message_id = optional(message, "id", str, "message")
        model = optional(message, "model", str, "message")
        target = self._continued_message(message_id)
        if target is not None:
            target["content"].extend(blocks)
            self._note_usage(self._open[0] if self._open else -1, message, model)
            return
        if not blocks:
            self._skipped_records["empty_message"] += 1
            return
        self.messages.append({"role": "assistant", "content": blocks})
        self._open = (len(self.messages) - 1, message_id) if message_id else None
        self._note_usage(len(self.messages) - 1, message, model)
        if model and model != _SYNTHETIC_MODEL:
            self._models[model] += 1  # once per API response, not per line

    def _note_usage(self, index: int, message: dict[str, Any], model: str | None) -> None:
        # Every line of a split response repeats the response's usage; the last one stands.
        usage = message.get("usage")
        if index >= 0 and isinstance(usage, dict) and model != _SYNTHETIC_MODEL:
            self._usage[index] = usage

    def _compaction_at(self, summary_index: int) -> ImportedCompaction:
        """The compaction whose summary is at `summary_index`, with its boundary's facts when it has one."""
        boundary: dict[str, Any] = next((c for c in reversed(self._compactions) if c["message_index"] == summary_index), {})
        facts = boundary.get("compact_metadata") or {}
        trigger, pre_tokens = facts.get("trigger"), facts.get("preTokens")
        return ImportedCompaction(
            summary_index=summary_index,
            trigger=trigger if isinstance(trigger, str) else None,
            pre_tokens=pre_tokens if isinstance(pre_tokens, int) and not isinstance(pre_tokens, bool) else None,
        )

    def _continued_message(self, message_id: str | None) -> dict[str, Any] | None:
        """The assistant message this part belongs to, if only its tool results came in between."""
        if message_id is None or self._open is None or self._open[1] != message_id:
            return None
        index = self._open[0]
        if all(_carries_only_results(m) for m in self.messages[index + 1 :]):
            return self.messages[index]
        return None

    def _last_is_tool_results(self) -> bool:
        return bool(self.messages) and _carries_only_results(self.messages[-1])

    def _compact_boundary(self, record: dict[str, Any]) -> None:
        # The boundary sits before the summary: message_index is where the summarized history ends.
        entry: dict[str, Any] = {"message_index": len(self.messages)}
        if isinstance(record.get("timestamp"), str):
            entry["timestamp"] = record["timestamp"]
        if isinstance(record.get("compactMetadata"), dict):
            entry["compact_metadata"] = record["compactMetadata"]
        self._compactions.append(entry)

    def _note_session(self, record: dict[str, Any]) -> None:
        for key, name in _SESSION_KEYS.items():
            if name not in self._session and isinstance(record.get(key), str):
                self._session[name] = record[key]

    # -- content blocks --------------------------------------------------------------------

    def _blocks(self, blocks: list[Any], where: str, allowed: frozenset[str] | None = None) -> list[Block]:
        """Clean wire blocks: known types keep their API fields; unknown types are dropped and counted."""
        cleaned: list[Block] = []
        for i, block in enumerate(blocks):
            label = f"{where}[{i}]"
            check(block, dict, label)
            kind = require(block, "type", str, label)
            convert = _BLOCK_CONVERTERS.get(kind)
            if convert is None or (allowed is not None and kind not in allowed):
                self._skipped_blocks[kind] += 1
                continue
            cleaned.append(convert(self, block, label))
        return cleaned

    def _tool_result(self, block: Block, where: str) -> Block:
        out: Block = {"type": "tool_result", "tool_use_id": require(block, "tool_use_id", str, where)}
        content = optional(block, "content", (str, list), where)
        if isinstance(content, list):
            content = self._blocks(content, f"{where}.content", allowed=_RESULT_BLOCKS)
        if content is not None:
            out["content"] = content
        if block.get("is_error") is True:
            out["is_error"] = True
        return out

    def _metadata(self) -> dict[str, Any]:
        return {
            **self._session,
            "sidechain": bool(self._thread_is_sidechain),
            "models": dict(self._models),
            "compactions": self._compactions,
            "compact_summary_indexes": self._summary_indexes,
            "meta_message_indexes": self._meta_indexes,
            "skipped_records": dict(self._skipped_records),
            "skipped_blocks": dict(self._skipped_blocks),
            "records": self._records,
        }


def _text(_: ClaudeCodeReader, block: Block, where: str) -> Block:
    return {"type": "text", "text": require(block, "text", str, where)}


def _thinking(_: ClaudeCodeReader, block: Block, where: str) -> Block:
    out: Block = {"type": "thinking", "thinking": require(block, "thinking", str, where)}
    signature = optional(block, "signature", str, where)
    if signature is not None:
        out["signature"] = signature  # opaque; the API needs it byte for byte to accept the block back
    return out


def _redacted_thinking(_: ClaudeCodeReader, block: Block, where: str) -> Block:
    return {"type": "redacted_thinking", "data": require(block, "data", str, where)}


def _tool_use(_: ClaudeCodeReader, block: Block, where: str) -> Block:
    # Claude Code adds fields of its own (e.g. `caller`); only the API's fields are kept.
    return {
        "type": "tool_use",
        "id": require(block, "id", str, where),
        "name": require(block, "name", str, where),
        "input": require(block, "input", dict, where),
    }


def _media(_: ClaudeCodeReader, block: Block, where: str) -> Block:
    out: Block = {"type": block["type"], "source": require(block, "source", dict, where)}
    out.update({key: block[key] for key in _MEDIA_KEYS if key in block})
    return out


_BLOCK_CONVERTERS: dict[str, Callable[[ClaudeCodeReader, Block, str], Block]] = {
    "text": _text,
    "thinking": _thinking,
    "redacted_thinking": _redacted_thinking,
    "tool_use": _tool_use,
    "tool_result": ClaudeCodeReader._tool_result,
    "image": _media,
    "document": _media,
}
_RESULT_BLOCKS = frozenset({"text", "image", "document"})
_CONVERSATION_SKIPS = frozenset({"api_error_message", "empty_message"})


def _only_tool_results(blocks: list[Block]) -> bool:
    return bool(blocks) and all(block["type"] == "tool_result" for block in blocks)


def _carries_only_results(message: dict[str, Any]) -> bool:
    """A user message holding nothing but tool results: a reply to tools, not a user turn."""
    content = message["content"]
    return message["role"] == "user" and isinstance(content, list) and _only_tool_results(content)


def _prompt_text(content: str | list[Block]) -> str | None:
    """What the person asked, for a title: typed text, or a slash command with its arguments."""
    if isinstance(content, list):
        content = next((block["text"] for block in content if block["type"] == "text"), "")
    text = content.strip()
    command, args = _COMMAND_NAME.search(text), _COMMAND_ARGS.search(text)
    if command and args and args.group(1).strip():
        return f"{command.group(1).strip()} {args.group(1).strip()}"
    # Other markup (reminders, command output) and Claude Code's interruption notes are not prompts.
    return text if text and not text.startswith(("<", "[Request interrupted")) else None


def _record_label(record: dict[str, Any]) -> str:
    kind = record.get("type")
    if not isinstance(kind, str):
        return "untyped"
    subtype = record.get("subtype")
    return f"{kind}:{subtype}" if kind == "system" and isinstance(subtype, str) else kind


__all__ = ["ClaudeCodeReader", "load_claude_code", "looks_like_claude_code"]

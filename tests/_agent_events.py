"""What Claude Code and Codex give a hook, for tests: transcripts in their formats and events.

The shapes are those Claude Code 2.1.197 and Codex 0.169.0 were seen to write and send when run
headless against scripted model servers (see `contextfold.hooks.claude_code` and `.codex`).
`run_hook` runs `contextfold hook …` as its own process, as the agents do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLAUDE_VERSION = "2.1.197"


@dataclass
class HookRun:
    code: int
    stdout: str
    stderr: str

    @property
    def answer(self) -> dict[str, Any] | None:
        return json.loads(self.stdout) if self.stdout.strip() else None

    @property
    def context(self) -> str | None:
        answer = self.answer
        return answer["hookSpecificOutput"]["additionalContext"] if answer else None


def run_hook(
    home: Path, agent: str, event: str, payload: Any, *, env: dict[str, str] | None = None, timeout: float = 300
) -> HookRun:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_"))}
    raw = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), "hook", agent, event],
        input=raw.encode() if isinstance(raw, str) else raw,
        capture_output=True,
        env={**environ, **(env or {})},
        timeout=timeout,
    )
    return HookRun(done.returncode, done.stdout.decode(), done.stderr.decode())


@dataclass
class ClaudeTranscript:
    """A Claude Code session JSONL, written record by record as Claude Code appends them."""

    path: Path
    cwd: str
    session: str = field(default_factory=lambda: str(uuid.uuid4()))
    reported_input: int = 1200
    """The input tokens each response reports reading (its `usage`)."""
    _parent: str | None = None
    _calls: int = 0

    def _record(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        record_id = str(uuid.uuid4())
        record = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "type": kind,
            "message": message,
            "uuid": record_id,
            "timestamp": "2026-11-26T18:07:17.764Z",
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": CLAUDE_VERSION,
            **extra,
        }
        self._parent = record_id
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def user(self, text: str) -> None:
        self._record("user", {"role": "user", "content": text})

    def assistant(self, text: str) -> None:
        self._record("assistant", _assistant([{"type": "text", "text": text}], self.reported_input))

    def tool(self, name: str, arguments: dict[str, Any], output: str) -> str:
        self._calls += 1
        call = f"toolu_{self._calls:04d}"
        self._record(
            "assistant",
            _assistant([{"type": "tool_use", "id": call, "name": name, "input": arguments}], self.reported_input),
        )
        self._record(
            "user",
            {
                "role": "user",
                "content": [{"tool_use_id": call, "type": "tool_result", "content": output, "is_error": False}],
            },
            toolUseResult={"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
        )
        return call

    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": self.session,
            "transcript_path": str(self.path),
            "cwd": self.cwd,
            "hook_event_name": name,
            **fields,
        }


def _assistant(content: list[dict[str, Any]], input_tokens: int = 1200) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-8",
        "content": content,
        "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": 40,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


@dataclass
class CodexRollout:
    """A Codex rollout JSONL (`{timestamp, type, payload}` records), as Codex 0.169 writes it."""

    path: Path
    cwd: str
    session: str = field(default_factory=lambda: str(uuid.uuid4()))
    _calls: int = 0

    def __post_init__(self) -> None:
        self._write(
            "session_meta", {"id": self.session, "cwd": self.cwd, "originator": "codex_exec", "cli_version": "0.169.0"}
        )
        self._write("turn_context", {"cwd": self.cwd, "model": "gpt-5"})

    def _write(self, kind: str, payload: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"timestamp": "2026-11-26T17:58:57.363Z", "type": kind, "payload": payload}) + "\n")

    def user(self, text: str) -> None:
        self._write(
            "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        )

    def assistant(self, text: str) -> None:
        self._write(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
        )

    def command(self, cmd: str, output: str) -> None:
        self._calls += 1
        call = f"call_{self._calls}"
        self._write(
            "response_item",
            {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": cmd}), "call_id": call},
        )
        self._write(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": call,
                "output": f"Process exited with code 0\nOutput:\n{output}",
            },
        )

    def compacted(self, summary: str) -> None:
        self._write("compacted", {"message": summary})

    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": self.session,
            "transcript_path": str(self.path),
            "cwd": self.cwd,
            "hook_event_name": name,
            "model": "gpt-5",
            **fields,
        }

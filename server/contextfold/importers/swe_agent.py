"""SWE-agent trajectories (`*.traj`) → OpenAI Chat wire messages with tool calls.

The file is `{"history": [...], "trajectory": [...], "info": {...}}`; `history` is what the model
was sent, one message an entry (`role`, `content`, and for the model's turns `thought` and
`action`). Two shapes, both in SWE-agent's own demonstrations:

- function calling: assistant entries carry OpenAI `tool_calls`; `tool` entries answer them
  through `tool_call_ids`. Passed through as Chat messages.
- text actions (older runs): the action is the command line the agent ran. It becomes a call of
  the tool `bash` with `{"command": <action, trimmed>}` (ids `synth_1`, … in order), and the user
  message after it is the call's result. A demonstration (`is_demo`) is a user message.

Leading system entries are the session's system prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextfold.errors import TranscriptError
from contextfold.importers.base import ImportedTranscript, derive_title, type_name
from contextfold.importers.wire import read_document

TOOL_NAME = "bash"


def looks_like_swe_agent(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("history"), list)
        and "messages" not in document
        and all(isinstance(e, dict) and "role" in e for e in document["history"][:3])
    )


def load_swe_agent(path: Path) -> ImportedTranscript:
    document = read_document(path)
    if not looks_like_swe_agent(document):
        raise TranscriptError(path, None, 'not a SWE-agent trajectory: expected an object with a "history" list')
    reader = _Reader(path)
    for i, entry in enumerate(document["history"]):
        reader.entry(entry, f"history[{i}]")
    if not reader.messages:
        raise TranscriptError(path, None, "no conversation messages found")
    first_user = next((m["content"] for m in reader.messages if m["role"] == "user"), None)
    return ImportedTranscript(
        format="openai",
        messages=reader.messages,
        system=reader.system,
        title=derive_title(first_user),
        model=_model(document),
        source_format="swe-agent",
        metadata={"tool_calls_reconstructed": reader.synthetic},
    )


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: list[dict[str, Any]] = []
        self.system: list[dict[str, str]] = []
        self.synthetic = 0
        self._waiting: str | None = None  # a text action's call, answered by the next user message

    def entry(self, entry: Any, where: str) -> None:
        if not isinstance(entry, dict) or not isinstance(entry.get("role"), str):
            raise TranscriptError(self.path, None, f"{where}: expected a message object with a 'role'")
        role = entry["role"]
        content = _text(entry.get("content"))
        if content is None:
            raise TranscriptError(
                self.path,
                None,
                f"{where}.content: expected a string or text parts, got {type_name(entry.get('content'))}",
            )
        if role == "system" and not self.messages:
            self.system.append({"role": "system", "text": content})
        elif role == "assistant":
            self._assistant(entry, content, where)
        elif role == "tool":
            self._tool(entry, content, where)
        elif role in ("user", "system"):
            if role == "user" and self._waiting is not None and not entry.get("is_demo"):
                self.messages.append({"role": "tool", "tool_call_id": self._waiting, "content": content})
            else:
                self.messages.append({"role": role, "content": content})
            self._waiting = None
        else:
            raise TranscriptError(
                self.path, None, f"{where}.role: expected system, user, assistant or tool, got {role!r}"
            )

    def _assistant(self, entry: dict[str, Any], content: str, where: str) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        self._waiting = None
        calls = entry.get("tool_calls")
        if isinstance(calls, list) and calls:
            message["tool_calls"] = [_call(self.path, call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls)]
        elif isinstance(entry.get("action"), str) and entry["action"].strip():
            self.synthetic += 1
            self._waiting = f"synth_{self.synthetic}"
            arguments = json.dumps({"command": entry["action"].strip()})
            message["tool_calls"] = [
                {"id": self._waiting, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}
            ]
        self.messages.append(message)

    def _tool(self, entry: dict[str, Any], content: str, where: str) -> None:
        ids = entry.get("tool_call_ids")
        if isinstance(entry.get("tool_call_id"), str):
            ids = [entry["tool_call_id"]]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise TranscriptError(self.path, None, f"{where}.tool_call_ids: expected a list of call ids")
        self.messages.extend({"role": "tool", "tool_call_id": call_id, "content": content} for call_id in ids)
        self._waiting = None


def _call(path: Path, call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if (
        not isinstance(function, dict)
        or not isinstance(call.get("id"), str)
        or not isinstance(function.get("name"), str)
    ):
        raise TranscriptError(path, None, f"{where}: expected {{id, function: {{name, arguments}}}}")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {})
    return {"id": call["id"], "type": "function", "function": {"name": function["name"], "arguments": arguments}}


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "\n".join(p["text"] for p in content if isinstance(p.get("text"), str))
    return None


def _model(document: dict[str, Any]) -> str | None:
    config = document.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    # "replay" and "instant_empty_submit" are SWE-agent's stand-ins, not models.
    return name if isinstance(name, str) and name not in ("replay", "instant_empty_submit") else None


__all__ = ["load_swe_agent", "looks_like_swe_agent"]

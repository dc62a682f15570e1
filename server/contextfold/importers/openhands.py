"""OpenHands event lists (`*.json`) → OpenAI Chat wire messages with tool calls.

The file is a JSON list of events, each an `action` or an `observation` with a `source`
(`user`, `agent`, `environment`). How events map:

- a `message` action is a user or assistant message (`args.content`);
- an agent action with `tool_call_metadata` is one tool call of the model response recorded
  there: the assistant message is that response's text, the call its id, function name and
  arguments exactly as the model wrote them; actions of one response share one message;
- an observation with `tool_call_metadata` is the call's result: its `content`, or its `message`
  when the content is empty (a command with no output);
- environment events, state changes and `null` observations are not conversation: counted.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from contextfold.errors import TranscriptError
from contextfold.importers.base import ImportedTranscript, derive_title
from contextfold.importers.wire import read_document


def looks_like_openhands(document: Any) -> bool:
    return (
        isinstance(document, list)
        and bool(document)
        and all(isinstance(e, dict) and ("action" in e or "observation" in e) for e in document[:5])
    )


def load_openhands(path: Path) -> ImportedTranscript:
    document = read_document(path)
    if not looks_like_openhands(document):
        raise TranscriptError(
            path, None, 'not an OpenHands event list: expected a JSON list of events with "action" or "observation"'
        )
    reader = _Reader()
    for i, event in enumerate(document):
        if not isinstance(event, dict):
            raise TranscriptError(path, None, f"[{i}]: expected an event object")
        reader.event(event)
    if not reader.messages:
        raise TranscriptError(path, None, "no conversation messages found")
    first_user = next((m["content"] for m in reader.messages if m["role"] == "user"), None)
    model = reader.models.most_common(1)[0][0] if reader.models else None
    return ImportedTranscript(
        format="openai",
        messages=reader.messages,
        system=[],
        title=derive_title(first_user),
        model=model,
        source_format="openhands",
        metadata={"skipped_records": dict(reader.skipped)},
        usage=reader.usage,
    )


class _Reader:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.usage: dict[int, dict[str, Any]] = {}
        self.models: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self._response: tuple[str, dict[str, Any]] | None = None  # the open model response and its message

    def event(self, event: dict[str, Any]) -> None:
        metadata = event.get("tool_call_metadata")
        source = event.get("source")
        if isinstance(event.get("action"), str):
            if isinstance(metadata, dict) and source == "agent":
                self._call(metadata)
            elif event["action"] == "message" and source in ("user", "agent"):
                self._message("user" if source == "user" else "assistant", event)
            else:
                self.skipped[f"action:{event['action']}"] += 1
        elif isinstance(metadata, dict) and isinstance(metadata.get("tool_call_id"), str):
            content = event.get("content")
            text = content if isinstance(content, str) and content else event.get("message")
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": metadata["tool_call_id"],
                    "content": text if isinstance(text, str) else "",
                }
            )
        else:
            self.skipped[f"observation:{event.get('observation')}"] += 1

    def _message(self, role: str, event: dict[str, Any]) -> None:
        args = event.get("args")
        content = args.get("content") if isinstance(args, dict) else None
        if not isinstance(content, str):
            content = event.get("message") if isinstance(event.get("message"), str) else ""
        self.messages.append({"role": role, "content": content})
        self._response = None

    def _call(self, metadata: dict[str, Any]) -> None:
        call_id, name = metadata.get("tool_call_id"), metadata.get("function_name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            self.skipped["action:without_call_id"] += 1
            return
        raw = metadata.get("model_response")
        response: dict[str, Any] = raw if isinstance(raw, dict) else {}
        reply = _reply(response)
        raw_id = response.get("id")
        response_id = raw_id if isinstance(raw_id, str) else call_id
        if self._response is None or self._response[0] != response_id:
            content = reply.get("content")
            message: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else ""}
            message["tool_calls"] = []
            self._response = (response_id, message)
            if isinstance(response.get("usage"), dict):
                self.usage[len(self.messages)] = response["usage"]
            if isinstance(response.get("model"), str):
                self.models[response["model"]] += 1
            self.messages.append(message)
        calls = reply.get("tool_calls")
        arguments = next(
            (
                c["function"].get("arguments")
                for c in (calls if isinstance(calls, list) else [])
                if isinstance(c, dict) and c.get("id") == call_id and isinstance(c.get("function"), dict)
            ),
            None,
        )
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if isinstance(arguments, dict) else {})
        self._response[1]["tool_calls"].append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )


def _reply(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    return message if isinstance(message, dict) else {}


__all__ = ["load_openhands", "looks_like_openhands"]

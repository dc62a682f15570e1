"""mini-swe-agent trajectories (`*.traj.json`) → OpenAI Chat wire messages with tool calls.

The file is `{"messages": [{role, content, extra?}], "info": {...}, "trajectory_format":
"mini-swe-agent-1"}`. mini-swe-agent has no native tool calls: the model answers with exactly one
```bash block, the agent runs it, and the next user message is its output. The import makes that
structure explicit, the way mini-swe-agent itself reads a reply (the same regular expression):

- a reply with exactly one bash block calls the tool `bash` with `{"command": <block>}` (ids
  `synth_1`, `synth_2`, … in order); its text stays as it was;
- the user message after such a reply is that call's result;
- a reply with no or several blocks is plain text, and the format error the agent answered it
  with stays a user message;
- leading system messages are the session's system prompt; `extra.response.usage` is kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from contextfold.errors import TranscriptError
from contextfold.importers.base import ImportedTranscript, derive_title, type_name
from contextfold.importers.wire import read_document

# mini-swe-agent's own action pattern (minisweagent/agents/default.py).
ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
TOOL_NAME = "bash"


def looks_like_mini_swe_agent(document: Any) -> bool:
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        return False
    kind = document.get("trajectory_format")
    return isinstance(kind, str) and kind.startswith("mini-swe-agent")


def load_mini_swe_agent(path: Path) -> ImportedTranscript:
    document = read_document(path)
    if not looks_like_mini_swe_agent(document):
        raise TranscriptError(
            path,
            None,
            'not a mini-swe-agent trajectory: expected an object with "messages" and '
            '"trajectory_format": "mini-swe-agent-1"',
        )
    messages: list[dict[str, Any]] = []
    system: list[dict[str, str]] = []
    usage: dict[int, dict[str, Any]] = {}
    waiting: str | None = None  # the call the next user message answers
    calls = 0
    for i, raw in enumerate(document["messages"]):
        where = f"messages[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
            raise TranscriptError(path, None, f"{where}: expected a message object with a 'role'")
        role, content = raw["role"], raw.get("content")
        if not isinstance(content, str):
            raise TranscriptError(path, None, f"{where}.content: expected a string, got {type_name(content)}")
        if role == "system" and not messages:
            system.append({"role": "system", "text": content})
        elif role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            actions = ACTION.findall(content)
            waiting = None
            if len(actions) == 1:
                calls += 1
                waiting = f"synth_{calls}"
                arguments = json.dumps({"command": actions[0]})
                message["tool_calls"] = [
                    {"id": waiting, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}
                ]
            reported = _usage(raw)
            if reported is not None:
                usage[len(messages)] = reported
            messages.append(message)
        elif role == "user" and waiting is not None:
            messages.append({"role": "tool", "tool_call_id": waiting, "content": content})
            waiting = None
        elif role in ("user", "system"):
            messages.append({"role": role, "content": content})
        else:
            raise TranscriptError(path, None, f"{where}.role: expected system, user or assistant, got {role!r}")
    if not messages:
        raise TranscriptError(path, None, "no conversation messages found")
    first_user = next((m["content"] for m in messages if m["role"] == "user"), None)
    return ImportedTranscript(
        format="openai",
        messages=messages,
        system=system,
        title=derive_title(first_user),
        model=_model(document),
        source_format="mini-swe-agent",
        metadata={"instance_id": document.get("instance_id"), "tool_calls_reconstructed": calls},
        usage=usage,
    )


def _usage(raw: dict[str, Any]) -> dict[str, Any] | None:
    extra = raw.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    found = response.get("usage") if isinstance(response, dict) else None
    return found if isinstance(found, dict) else None


def _model(document: dict[str, Any]) -> str | None:
    info = document.get("info")
    config = info.get("config") if isinstance(info, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


__all__ = ["load_mini_swe_agent", "looks_like_mini_swe_agent"]

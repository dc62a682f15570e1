"""The agent harness itself: the real Claude Code and Codex CLIs, headless, against the fake model APIs.

These pin down what contextfold's hooks rely on, with a recording hook on every event: the events each
pinned agent fires around a compaction and in which order, what a huge tool output looks like when it
reaches PostToolUse, that both agents really compact when the reported usage crosses their limit, and
that the first model request after a compaction carries the summary. If an agent upgrade changes any of
this, these fail before the end-to-end tests of the hooks do (tests/test_agents_e2e.py).

Without the CLIs installed (`npm ci --prefix tests/agents`) they skip locally and fail under CI=true.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anthropic
import pytest
from agents_harness import (
    CLAUDE_COMPACT_WINDOW,
    ClaudeCode,
    Codex,
    hook_recorder_command,
    read_hook_log,
)
from fake_models import DEFAULT_SUMMARY, FakeResponsesAPI, ModelRequest, Turn, call, say, serve_messages_api

pytestmark = [pytest.mark.npm]

CLAUDE_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "PostCompact", "Stop", "SessionEnd")
CODEX_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "PostCompact", "Stop")
HUGE_COMMAND = "seq 1 200000"  # 1,288,895 bytes of output
PAST_THE_LIMIT = int(CLAUDE_COMPACT_WINDOW * 0.95)
TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]


def _events(log: Path) -> list[tuple[str, str | None]]:
    """(event, source or trigger) for every hook call recorded, in order."""
    return [
        (entry["payload"]["hook_event_name"], entry["payload"].get("source") or entry["payload"].get("trigger"))
        for entry in read_hook_log(log)
    ]


def _payload(log: Path, event: str, **where: object) -> dict:
    matches = [
        e["payload"]
        for e in read_hook_log(log)
        if e["payload"]["hook_event_name"] == event and all(e["payload"].get(k) == v for k, v in where.items())
    ]
    assert matches, f"no {event} {where} among {_events(log)}"
    return matches[0]


def test_the_fake_messages_stream_reads_with_the_real_sdk() -> None:
    """The fake's server-sent events are what the anthropic SDK's stream parser accepts."""
    with serve_messages_api() as fake:
        fake.script(
            call("Bash", {"command": "ls"}, text="Listing.", input_tokens=190_000), call("Bash", {"command": "pwd"})
        )
        client = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        with client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}], tools=TOOLS
        ) as stream:
            first = stream.get_final_message()
        assert first.stop_reason == "tool_use"
        assert [b.type for b in first.content] == ["text", "tool_use"]
        assert first.content[1].input == {"command": "ls"} and first.content[1].name == "Bash"
        assert first.usage.input_tokens == 190_000

        # Not streamed: the same message whole.
        second = client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}], tools=TOOLS
        )
        assert second.content[0].input == {"command": "pwd"} and second.stop_reason == "tool_use"
        assert second.content[0].id.startswith("toolu_") and second.usage.output_tokens == 20
        assert [r.kind for r in fake.requests] == ["turn", "turn"]
        assert fake.requests[0].body["stream"] is True and fake.pending == 0


def test_a_step_that_raises_stops_the_client_at_once() -> None:
    """A broken scripted step answers 400 (which clients do not retry) and is kept for the failure message."""

    def broken(request: ModelRequest) -> Turn:
        raise LookupError("no output id in the request")

    with serve_messages_api() as fake:
        fake.script(broken)
        client = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=2)
        with pytest.raises(anthropic.BadRequestError, match="no output id"):
            client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}], tools=TOOLS)
        assert len(fake.requests) == 1
        assert "LookupError: no output id in the request" in fake.describe()


def test_claude_code_compacts_and_fires_its_hooks_in_order(claude: ClaudeCode) -> None:
    log = claude.workdir / "hooks.jsonl"
    for event in CLAUDE_EVENTS:
        claude.add_hook(event, hook_recorder_command(log, event))
    claude.fake.script(
        call("Bash", {"command": HUGE_COMMAND, "description": "a huge output"}),
        call("Bash", {"command": "echo small"}, input_tokens=PAST_THE_LIMIT),  # the next turn must compact first
        say("All listed."),
    )

    run = claude.prompt("List the numbers up to 200000.").ok()

    assert run.result["result"] == "All listed.", run.describe()
    session = run.result["session_id"]
    assert _events(log) == [
        ("SessionStart", "startup"),
        ("UserPromptSubmit", None),
        ("PostToolUse", None),
        ("PostToolUse", None),
        ("PreCompact", "auto"),
        ("SessionStart", "compact"),
        ("PostCompact", "auto"),
        ("Stop", None),
        ("SessionEnd", None),
    ]
    for entry in read_hook_log(log):
        assert entry["payload"]["session_id"] == session
        assert entry["env"]["CONTEXTFOLD_HOME"] == str(claude.data)  # the agent's environment reaches its hooks

    # A Bash output over 30,000 characters reaches PostToolUse cut, with the whole output on disk.
    huge = _payload(log, "PostToolUse", tool_input={"command": HUGE_COMMAND, "description": "a huge output"})
    response = huge["tool_response"]
    assert len(response["stdout"]) == 30_000
    assert response["persistedOutputSize"] == 1_288_895
    assert Path(response["persistedOutputPath"]).read_text().splitlines()[-1] == "200000"
    # ... and the model is sent only a 2 KB head of it.
    assert "<persisted-output>" in claude.fake.turns()[1].text
    assert "199999" not in claude.fake.turns()[1].text

    assert _payload(log, "PostCompact")["compact_summary"] == DEFAULT_SUMMARY
    assert claude.fake.kinds().count("compaction") == 1
    (after,) = claude.fake.after_compaction()
    assert after.contains(DEFAULT_SUMMARY)
    assert not after.contains("<persisted-output>")  # the compacted history is gone from the request
    transcript = claude.transcript(session)
    assert _payload(log, "PreCompact")["transcript_path"] == str(transcript)


def test_codex_compacts_and_runs_only_trusted_hooks(codex: Codex) -> None:
    log = codex.workdir / "hooks.jsonl"
    for event in CODEX_EVENTS:
        codex.add_hook(event, hook_recorder_command(log, event))
    script = (
        call("exec_command", {"cmd": HUGE_COMMAND}),
        call("exec_command", {"cmd": "echo small"}, input_tokens=codex.auto_compact_limit + 10_000),
        say("All listed."),
    )

    # Hooks nobody has reviewed are skipped without a word: the run succeeds, no hook runs.
    codex.fake.script(*script)
    codex.exec("List the numbers up to 200000.").ok()
    assert read_hook_log(log) == []
    assert codex.fake.kinds() == ["turn", "turn", "compaction", "turn"]

    # The same hooks with trust bypassed for this one run (what a trusted hook would see).
    codex.fake.requests.clear()
    codex.fake.script(*script)
    run = codex.exec("List the numbers up to 200000.", args=["--dangerously-bypass-hook-trust"]).ok()

    thread = next(e["thread_id"] for e in run.events if e["type"] == "thread.started")
    assert _events(log) == [
        ("SessionStart", "startup"),
        ("UserPromptSubmit", None),
        ("PostToolUse", None),
        ("PostToolUse", None),
        ("PreCompact", "auto"),
        ("PostCompact", "auto"),
        ("SessionStart", "compact"),
        ("Stop", None),
    ]
    for entry in read_hook_log(log):
        assert entry["payload"]["session_id"] == thread
        assert entry["env"]["CONTEXTFOLD_HOME"] == str(codex.data)

    # Codex cuts a command's output before PostToolUse sees it: a string, head and tail, about 10 KB... of 1.3 MB.
    huge = _payload(log, "PostToolUse", tool_input={"command": HUGE_COMMAND})
    assert huge["tool_name"] == "Bash" and isinstance(huge["tool_response"], str)
    assert huge["tool_response"].startswith("Warning: truncated output")
    assert huge["tool_response"].rstrip().endswith("200000")
    assert len(huge["tool_response"]) < 1_288_895 // 4

    # At PostCompact the rollout already holds the compaction.
    rollout = Path(_payload(log, "PostCompact")["transcript_path"])
    kinds = [json.loads(line)["type"] for line in rollout.read_text().splitlines()]
    assert "compacted" in kinds
    (after,) = codex.fake.after_compaction()
    assert after.contains(DEFAULT_SUMMARY)
    assert json.loads(after.headers["x-codex-turn-metadata"])["request_kind"] == "turn"


def test_codex_compaction_request_is_told_apart() -> None:
    """The fake recognises Codex's summary request by its metadata header, or else by its prompt."""
    fake = FakeResponsesAPI()
    body = {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}]}
    assert fake._classify("POST", "/v1/responses", body, {}) == "side"
    assert fake._classify("POST", "/v1/responses", {**body, "tools": [{}]}, {}) == "turn"
    headers = {"x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})}
    assert fake._classify("POST", "/v1/responses", body, headers) == "compaction"
    prompt = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "You are performing a CONTEXT CHECKPOINT COMPACTION. ..."}],
        }
    ]
    assert fake._classify("POST", "/v1/responses", {"input": prompt}, {}) == "compaction"


def test_claude_code_calls_an_mcp_server_added_by_its_cli(claude: ClaudeCode) -> None:
    """What issue 18's client test builds on: `claude mcp add`, then the model calls the server's tool."""
    claude.add_mcp_server("counter", sys.executable, "-m", "contextfold", "serve")
    assert "Connected" in claude.mcp_list()["counter"]
    claude.fake.script(
        call("mcp__counter__count_tokens", {"text": "one two three", "model": "gpt-4o"}), say("Counted.")
    )

    run = claude.prompt("Count the tokens.", allowed_tools=("mcp__counter",)).ok()

    assert run.result["result"] == "Counted."
    first, second = claude.fake.turns()
    assert any(tool["name"] == "mcp__counter__count_tokens" for tool in first.body["tools"])
    (result,) = [block for block in second.body["messages"][-1]["content"] if block.get("type") == "tool_result"]
    assert not result.get("is_error"), result
    # Claude Code hands the model the tool's structured result as JSON text.
    assert json.loads(result["content"])["tokens"] == 3, result

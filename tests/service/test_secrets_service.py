"""Secrets never enter a region digest or a stateless summary (issue 27, item 2), through the
service: the rule-based digest, the transcript sent to a summarizer model (the real `anthropic` SDK
against the fake Messages API) and a digest the model wrote that echoes a secret all come out
redacted; the stored outputs keep what the tools printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _secrets import leaks, seeded_secrets
from fake_anthropic import RecordedRequest, Reply, message_reply, serve_fake_anthropic
from region_runs import realistic_run

from contextfold.config import load_settings
from contextfold.domain import ToolPart
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio

SEEDED = seeded_secrets(13)
CONFIG = "\n\n".join(s.text for s in SEEDED if s.where == "output")
COMMAND = " && ".join(s.text for s in SEEDED if s.where == "command")


@pytest.fixture(autouse=True)
def no_anthropic_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _settings(tmp_path: Path, **overrides: Any):
    return load_settings(
        {
            "home": tmp_path,
            "context_window": 12_000,
            "max_output": 1_000,
            "max_bytes": 10**9,
            "max_lines": 10**9,
            "context_share": 1.0,
            "max_share_chars": 10**9,
            "regions_keep_recent_tokens": 0,
            **overrides,
        },
        environ={},
    )


def _run() -> list[ToolPart]:
    """The realistic run with a command carrying tokens and a config file read in the middle."""
    parts = realistic_run()
    extra = [
        ToolPart(call_id="", name="Bash", input={"command": COMMAND}, state="completed", output="deployed"),
        ToolPart(call_id="", name="Read", input={"file_path": "/srv/app/.env"}, state="completed", output=CONFIG),
    ]
    parts = [*parts[:5], *extra, *parts[5:]]
    return [p.model_copy(update={"call_id": f"toolu_{i:02d}"}) for i, p in enumerate(parts)]


def _wire() -> list[dict[str, Any]]:
    parts = _run()
    return [
        {"role": "user", "content": "The health check fails, fix it."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": p.call_id, "name": p.name, "input": p.input} for p in parts],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": p.call_id, "content": p.result_text} for p in parts],
        },
        {"role": "assistant", "content": "Fixed."},
        {"role": "user", "content": "Thanks. Now the docs."},
    ]


async def _digests(service: ContextService) -> list[str]:
    return [p.view_text for m in await service.store.load_messages("r") for p in m.tool_parts if p.view_text]


async def test_the_rule_digest_holds_no_secret_and_the_outputs_stay_stored(tmp_path: Path) -> None:
    async with await ContextService.open(_settings(tmp_path)) as service:
        await service.open_session("r", model="gpt-4o")
        await service.append("r", _wire(), format="anthropic")
        result = await service.compact("r", strategy="regions")
        assert result.summarizer == "digest"
        digests = await _digests(service)
        assert digests and not leaks("\n".join(digests), SEEDED), leaks("\n".join(digests), SEEDED)
        stored = [p.result_text for m in await service.store.load_messages("r") for p in m.tool_parts]
        assert CONFIG in stored  # the tool's output as it printed it


def _echoing_reply(request: RecordedRequest) -> Reply:
    """A model that digests what it was sent, and repeats a secret it was never shown."""
    user = request.body["messages"][0]["content"]
    key = user.split('<transcript region="', 1)[1].split('"', 1)[0]
    leaked = SEEDED[0].text  # `export OPENAI_API_KEY=sk-proj-…`
    return message_reply(f'<digest region="{key}">\n- ran the deploy; `{leaked}`\n- read /srv/app/.env\n</digest>')


async def test_the_model_is_sent_no_secret_and_its_digest_is_redacted(tmp_path: Path, monkeypatch) -> None:
    with serve_fake_anthropic() as fake:
        fake.handler = _echoing_reply
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        async with await ContextService.open(_settings(tmp_path)) as service:
            await service.open_session("r", model="gpt-4o")
            await service.append("r", _wire(), format="anthropic")
            result = await service.compact("r", strategy="regions")
            digests = await _digests(service)
    assert result.summarizer == "anthropic", result.fallbacks
    sent = json.dumps([r.body for r in fake.requests])
    assert fake.requests and not leaks(sent, SEEDED), leaks(sent, SEEDED)
    assert "/srv/app/.env" in sent  # what the calls did is still there
    assert digests and not leaks("\n".join(digests), SEEDED), digests


async def test_a_stateless_summary_holds_no_secret(tmp_path: Path) -> None:
    said = "\n".join(s.text for s in SEEDED if s.where == "user")
    messages = [
        {"role": "user", "content": "Deploy to staging.\n" + said},
        *_wire()[1:],
    ]
    async with await ContextService.open(_settings(tmp_path)) as service:
        result = await service.summarize(messages, format="anthropic", summarizer="extractive", model="gpt-4o")
    assert result.summary and not leaks(result.summary, SEEDED), leaks(result.summary, SEEDED)
    assert "Deploy to staging." in result.summary

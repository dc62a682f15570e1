"""Issue 13, counts and budgets that err on the safe side.

Unknown models are estimated as o200k × a safety factor, never from characters alone, so the
estimate is never below a real BPE count. A preview (of a spilled tool output, of a pasted user
message, of the spill tool, and of an output cut in overflow recovery) is capped in tokens with
the session's own counter: dense text such as base64 runs near 1.5 characters a token, so the
old character caps let one preview take half the window.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_files, needs_corpus

from contextfold.config import Settings, load_settings
from contextfold.domain import ToolPart
from contextfold.policy import truncate as truncation
from contextfold.policy.truncate import TOKEN_ROUNDS, prefix_within_tokens, truncate
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import counter_for, encoding

RECOVERY_CAP_TOKENS = Settings.model_fields["cut_tokens"].default

pytestmark = pytest.mark.anyio

GPT4O = counter_for("gpt-4o")
DEMO_WINDOW = 48_000
"""The demo's window: 30 % of it is 14,400 tokens."""
DEMO_CAP = 14_400
GPT4O_CAP = 38_400
"""30 % of gpt-4o's 128,000-token window."""
HINT_ROOM = 150
"""What the hint after a preview (and the call around it) may add."""


def dense(nbytes: int, seed: int = 13) -> str:
    """Base64 of seeded random bytes: about 1.46 characters a token in o200k."""
    return base64.b64encode(random.Random(seed).randbytes(nbytes)).decode("ascii")


def _settings(tmp_path: Path, **overrides):
    return load_settings({"home": tmp_path, **overrides}, environ={})


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(_settings(tmp_path)) as svc:
        yield svc


# -- the estimate for models we do not know -----------------------------------------------------


@needs_corpus
@pytest.mark.slow  # counts every normalized file twice (about 10 s)
def test_the_unknown_model_estimate_is_never_below_a_real_bpe_count_on_the_corpus():
    files = corpus_files("normalized/*.jsonl")
    assert len(files) > 20
    o200k, cl100k = encoding("o200k_base"), encoding("cl100k_base")
    for name in (None, "llama-3-70b-instruct"):
        counter = counter_for(name)
        assert counter.method == "estimate"
        for path in files:
            text = path.read_text("utf-8")
            estimate = counter.count(text)
            assert estimate >= len(o200k.encode_ordinary(text)), (name, path.name)
            assert estimate >= len(cl100k.encode_ordinary(text)), (name, path.name)


@needs_corpus
def test_count_without_a_model_errs_high_from_the_command_line(tmp_path: Path, corpus: Path):
    path = corpus / "normalized" / "claude-code-spotter__subagent.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "contextfold", "count", str(path), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "CONTEXTFOLD_HOME": str(tmp_path)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    exact = len(encoding("o200k_base").encode_ordinary(path.read_text("utf-8")))
    # The character estimate said 15,448 for this file's 17,597 o200k tokens.
    assert result["method"] == "estimate" and result["encoding"] == "o200k_base"
    assert result["tokens"] >= exact


# -- truncate: the token cap ----------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["head", "tail", "head_tail"])
def test_a_preview_within_the_character_caps_is_cut_to_the_token_cap(direction: str):
    # MIME-style base64, 76 characters a line: 48,640 characters, 35,000 tokens.
    text = base64.encodebytes(random.Random(13).randbytes(36_000)).decode("ascii") + "ERROR: 1 failed\n"
    counted: list[int] = []

    def count(s: str) -> int:
        counted.append(len(s))
        return GPT4O.count(s)

    cut = truncate(text, max_bytes=10**6, max_chars=10**6, max_tokens=10_000, count=count, direction=direction)
    assert cut is not None and cut.direction == direction
    tokens = GPT4O.count(cut.preview)
    assert 9_500 <= tokens <= 10_000, tokens
    # The whole text is counted once (it is within the other caps); then only previews.
    assert counted[0] == len(text) and all(n < len(text) for n in counted[1:])
    assert len(counted) <= TOKEN_ROUNDS + 2
    if direction == "head":
        assert text.startswith(cut.preview)
    elif direction == "tail":
        assert text.endswith(cut.preview)


def test_a_text_over_the_character_caps_is_never_counted_whole():
    text = dense(400_000)  # 533,336 characters
    counted: list[int] = []

    def count(s: str) -> int:
        counted.append(len(s))
        return GPT4O.count(s)

    cut = truncate(text, max_bytes=50 * 1024, max_chars=153_600, max_tokens=14_400, count=count, direction="head")
    assert cut is not None and GPT4O.count(cut.preview) <= 14_400
    assert max(counted) <= 50 * 1024


def test_a_text_that_fits_every_cap_is_left_alone():
    assert truncate("short", max_tokens=10, count=GPT4O.count) is None
    with pytest.raises(ValueError, match="go together"):
        truncate("short", max_tokens=10)


def test_the_longest_prefix_within_a_token_cap():
    text = dense(6_000)
    end = prefix_within_tokens(text, max_chars=2_000, max_tokens=500, count=GPT4O.count)
    assert 0 < end < 2_000
    assert 490 <= GPT4O.count(text[:end]) <= 500
    assert prefix_within_tokens("a few words", max_chars=2_000, max_tokens=500, count=GPT4O.count) == 11
    assert truncation.share_cap_tokens(DEMO_WINDOW) == DEMO_CAP
    assert truncation.share_cap_tokens(0) is None


# -- ingest, the spill tool and overflow recovery ------------------------------------------------


def _tool_turn(output: str) -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "cat blob.b64"}'}}
    return [
        {"role": "user", "content": "Show me the attachment."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]


async def _tool_part(service: ContextService, session_id: str) -> ToolPart:
    messages = await service.store.load_messages(session_id)
    return next(p for m in messages for p in m.tool_parts)


async def test_a_dense_tool_output_under_50_kib_is_spilled_to_a_token_capped_preview(service):
    # 49,152 characters (under 50 KiB and under 30 % × 4 × 48,000 characters) but 33,572 tokens:
    # before, it stayed whole and took 70 % of the demo's window.
    output = dense(36 * 1024)
    await service.open_session("d", model="gpt-4o", settings={"context_window": DEMO_WINDOW})
    result = await service.append("d", _tool_turn(output))
    assert len(result.spilled) == 1
    part = await _tool_part(service, "d")
    preview = part.output.rsplit("\n\n", 1)[0]  # the preview, then a blank line and the hint
    assert output.startswith(preview)
    assert 0.95 * DEMO_CAP <= GPT4O.count(preview) <= DEMO_CAP
    assert part.tokens <= DEMO_CAP + HINT_ROOM
    assert result.status.state != "overflow"
    assert await service.output_text(part.spill_id) == output


async def test_a_pasted_dense_user_message_is_capped_in_tokens(service):
    # 146,668 characters fit the 153,600-character share of gpt-4o's window, but are 99,978 tokens.
    text = dense(110_000)
    await service.open_session("u", model="gpt-4o")
    result = await service.append("u", [{"role": "user", "content": text}])
    assert len(result.spilled) == 1
    messages = await service.store.load_messages("u")
    shown = messages[0].parts[0].text
    assert GPT4O.count(shown) <= GPT4O_CAP + HINT_ROOM
    assert result.status.tokens_in_view <= GPT4O_CAP + HINT_ROOM
    assert result.status.state == "ok"


async def test_the_spill_tool_preview_is_capped_in_tokens(service):
    await service.open_session("s", model="gpt-4o", settings={"context_window": DEMO_WINDOW})
    result = await service.spill("s", dense(36 * 1024), tool="bash")
    assert result.truncated
    assert GPT4O.count(result.preview) <= DEMO_CAP + HINT_ROOM


@needs_corpus
async def test_importing_on_the_demo_window_keeps_every_preview_within_its_share(service, corpus: Path):
    # The demo's transcript: one 868,167-character output became a 51,456-character preview of
    # 23,628 tokens, 49 % of the demo's 48,000-token window.
    path = corpus / "normalized" / "mini-swe-agent__psf__requests-1142.jsonl"
    await service.open_session("i", model="gpt-4o", settings={"context_window": DEMO_WINDOW})
    result = await service.import_transcript(path, session_id="i", format="normalized", model="gpt-4o")
    assert result.spilled
    parts = [p for m in await service.store.load_messages("i") for p in m.tool_parts]
    spilled = [p for p in parts if p.spill_id]
    assert spilled and max(GPT4O.count(p.output or "") for p in spilled) <= DEMO_CAP + HINT_ROOM


async def test_overflow_recovery_cuts_an_output_to_a_token_cap(service):
    # A dense output the ingest caps let through whole (the window is large), then cut in view
    # by recovery: 2,000 characters of it were 1,351 tokens, more than twice the cap.
    await service.open_session("r", model="gpt-4o")
    await service.append("r", _tool_turn(dense(20_000)))
    session = await service.store.get_session("r")
    cut = await service.compactor.cut_oversized("r", 1_000)
    assert cut == 1
    part = await _tool_part(service, "r")
    assert part.view_cap is not None and part.output and len(part.output) == 26_668  # the store keeps it whole
    context = await service.get_context("r")
    shown = context.messages[-1]["content"]
    assert GPT4O.count(shown) <= RECOVERY_CAP_TOKENS + 20  # the prefix and its "omitted" note
    after = await service.status("r")
    assert after.tokens_in_view < session.tokens_in_view - 15_000

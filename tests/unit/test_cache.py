"""Cache anchors and cache health (docs/design.md §7): where `cache_control` marks go, and thrash detection.

`validators.assert_anthropic_valid` rejects any key on a `tool_result` block beyond type, id,
content and is_error, so it would reject a legitimate `cache_control` there. The bodies are
therefore checked in two steps: `_assert_marks_valid` checks the marks themselves (how many,
their value, the blocks they sit on), and `assert_anthropic_valid` checks the body with the marks
taken off and marked strings turned back into strings (`_unmarked`).
"""

from __future__ import annotations

import base64
import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_params, corpus_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from validators import assert_anthropic_valid

from contextfold.domain import (
    CompactionPart,
    FilePart,
    Message,
    ReasoningPart,
    SystemPrompt,
    TextPart,
    ToolPart,
    Usage,
)
from contextfold.formats import RenderOptions, parse, render
from contextfold.formats.anthropic import CONTINUATION_TEXT
from contextfold.policy.cache import (
    HIT_RATE_PREVIOUS,
    HIT_RATE_RECENT,
    HIT_RATE_STABLE,
    HIT_RATE_SYSTEM,
    Anchor,
    cache_health,
    count_breakpoints,
    place_cache_anchors,
)
from contextfold.tokens.counting import (
    MESSAGE_OVERHEAD,
    count_message,
    count_system,
    counter_for,
    media_tokens,
)

MARK = {"type": "ephemeral"}
MARKABLE = {"text", "image", "document", "tool_use", "tool_result"}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


# -- checkers -------------------------------------------------------------------------------------


def _marks(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where the body's marks are: ("system", block, 0) or ("message", message, block)."""
    found = [("system", i, 0) for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        if isinstance(message["content"], list):
            found += [("message", i, j) for j, b in enumerate(message["content"]) if "cache_control" in b]
    return found


def _assert_marks_valid(body: dict[str, Any]) -> None:
    """At most four marks, each `{"type": "ephemeral"}` on a block that may carry one."""
    assert len(_marks(body)) <= 4, _marks(body)
    for block in body.get("system", []):
        if "cache_control" in block:
            assert block["cache_control"] == MARK and block["type"] == "text", block
    for index, message in enumerate(body["messages"]):
        if not isinstance(message["content"], list):
            continue
        for position, block in enumerate(message["content"]):
            where = f"messages[{index}].content[{position}]"
            for item in block.get("content", []) if block["type"] == "tool_result" else []:
                assert not isinstance(item, dict) or "cache_control" not in item, f"{where}: nested mark"
            if "cache_control" not in block:
                continue
            assert block["cache_control"] == MARK, where
            assert block["type"] in MARKABLE, f"{where}: a mark on a {block['type']} block"
            if block["type"] == "text":
                assert block["text"].strip(), f"{where}: a mark on blank text"


def _unmarked(body: dict[str, Any]) -> dict[str, Any]:
    """The body without marks; a message the marking turned into one text block is a string again."""
    out = copy.deepcopy(body)
    for block in out.get("system", []):
        block.pop("cache_control", None)
    for message in out["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block.pop("cache_control", None)
            content = message["content"]
            if len(content) == 1 and content[0].keys() == {"type", "text"}:
                message["content"] = content[0]["text"]
    return out


def _assert_valid(body: dict[str, Any]) -> None:
    _assert_marks_valid(body)
    assert_anthropic_valid(_unmarked(body))


def _dump(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def _where(anchors: list[Anchor]) -> list[tuple[str, int, int]]:
    return [(a.location, a.index, a.block) for a in anchors]


# -- hand-built bodies ----------------------------------------------------------------------------


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "bash", "input": {"command": "ls"}}


def _result(call_id: str, content: str = "files") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def _turns(pairs: int) -> list[dict[str, Any]]:
    """user, (assistant tool call, user tool result) × pairs: an agent loop, newest user last."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the build"}]
    for i in range(pairs):
        messages.append({"role": "assistant", "content": [_text(f"step {i}"), _call(f"c{i}")]})
        messages.append({"role": "user", "content": [_result(f"c{i}", f"output {i}")]})
    return messages


def _body(messages: list[dict[str, Any]], system: str | None = "You are a careful engineer.") -> dict[str, Any]:
    body: dict[str, Any] = {"system": [_text(system)]} if system else {}
    body["messages"] = messages
    return body


def test_picks_system_stable_previous_and_recent() -> None:
    #            0     1     2      3    4    5    6    (6 is the newest user message)
    counts = [300, 200, 5_000, 150, 100, 120, 80]
    body = _body(_turns(3))
    marked, anchors = place_cache_anchors(body, token_counts=counts, system_tokens=2_000)

    _assert_valid(marked)
    # Stable: the big tool result (message 2), behind the previous turn's prefix (message 3);
    # previous: before the previous user message (4); recent: before the newest user message (6).
    assert _where(anchors) == [("system", 0, 0), ("message", 2, 0), ("message", 3, 1), ("message", 5, 1)]
    assert _marks(marked) == _where(anchors)
    assert [a.hit_rate for a in anchors] == [HIT_RATE_SYSTEM, HIT_RATE_STABLE, HIT_RATE_PREVIOUS, HIT_RATE_RECENT]
    assert [a.cached_tokens for a in anchors] == [2_000, 7_500, 7_650, 7_870]
    for anchor in anchors:
        assert anchor.score == anchor.cached_tokens * anchor.hit_rate
        assert anchor.reason
    assert "system prompt" in anchors[0].reason and "5,000 tokens" in anchors[1].reason


def test_input_body_is_not_mutated() -> None:
    body = _body(_turns(3) + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "thanks"}])
    before = copy.deepcopy(body)
    marked, anchors = place_cache_anchors(body, token_counts=[2_000] * 9, system_tokens=2_000)
    assert anchors and body == before
    assert "cache_control" not in _dump(body)
    # Nothing in the output is shared with the input.
    marked["messages"][0]["content"] = "changed"
    marked["system"][0]["text"] = "changed"
    assert body == before


def test_string_content_becomes_one_marked_text_block() -> None:
    messages = [
        {"role": "user", "content": "here is the whole design document"},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": "now write the code"},
    ]
    marked, anchors = place_cache_anchors(_body(messages, None), token_counts=[3_000, 50, 20], system_tokens=0)
    _assert_valid(marked)
    # Message 1 is before the newest user message; message 0 is the big stable one.
    assert _where(anchors) == [("message", 0, 0), ("message", 1, 0)]
    assert marked["messages"][0]["content"] == [
        {"type": "text", "text": "here is the whole design document", "cache_control": MARK}
    ]
    assert marked["messages"][1]["content"] == [{"type": "text", "text": "I have read it.", "cache_control": MARK}]
    assert marked["messages"][2]["content"] == "now write the code"  # untouched stays a string


def test_never_marks_thinking_blocks() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "blob"}
    messages = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": [_text("answer"), thinking]},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": [redacted]},
        {"role": "user", "content": "go on"},
    ]
    marked, anchors = place_cache_anchors(_body(messages), token_counts=[2_000] * 5, system_tokens=1_500)
    _assert_valid(marked)
    # Message 1 (the previous turn's prefix) ends with thinking: its text block takes the mark.
    # Message 3 has nothing markable: the recent anchor moves back to message 2's string.
    assert _where(anchors) == [("system", 0, 0), ("message", 0, 0), ("message", 1, 0), ("message", 2, 0)]
    assert "cache_control" not in thinking and "cache_control" not in marked["messages"][1]["content"][1]
    assert marked["messages"][3]["content"] == [redacted]
    recent = anchors[-1]
    assert recent.hit_rate == HIT_RATE_RECENT and "moved from message 3" in recent.reason
    assert recent.cached_tokens == 1_500 + 3 * 2_000  # the prefix it really closes


def test_two_candidates_on_one_block_give_one_mark() -> None:
    thinking = {"content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}]}
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": thinking["content"]},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": thinking["content"]},
        {"role": "user", "content": "q3"},
    ]
    marked, anchors = place_cache_anchors(_body(messages, None), token_counts=[2_000] * 5, system_tokens=0)
    _assert_valid(marked)
    # The previous turn's anchor (message 1) moves back onto message 0, where the stable anchor
    # already is: one mark, kept with the better score. The recent one moves from 3 to 2.
    assert _where(anchors) == [("message", 0, 0), ("message", 2, 0)]
    assert [a.hit_rate for a in anchors] == [HIT_RATE_STABLE, HIT_RATE_RECENT]


def test_no_anchor_on_a_prefix_below_the_minimum() -> None:
    body = _body(_turns(3))
    counts = [100, 100, 100, 100, 600, 500, 100]
    marked, anchors = place_cache_anchors(body, token_counts=counts, system_tokens=300)
    _assert_valid(marked)
    # System 300 < 1,024; prefix through 3 is 700; through 5 is 1,800.
    assert _where(anchors) == [("message", 5, 1)]
    assert all(a.cached_tokens >= 1_024 for a in anchors)
    _, haiku = place_cache_anchors(body, token_counts=counts, system_tokens=300, min_prefix_tokens=2_048)
    assert haiku == []


def test_tiny_messages_get_fewer_anchors() -> None:
    body = _body(_turns(5))
    _, big = place_cache_anchors(body, token_counts=[1_500] * 11, system_tokens=1_500)
    _, tiny = place_cache_anchors(body, token_counts=[40] * 11, system_tokens=1_500)
    _, tinier = place_cache_anchors(body, token_counts=[40] * 11, system_tokens=200)
    assert len(big) == 4
    assert len(tiny) == 3  # no message is large on its own: no stable anchor
    assert tinier == []
    assert _dump(place_cache_anchors(body, token_counts=[40] * 11, system_tokens=200)[0]) == _dump(body)


def test_ranking_prefers_the_system_prompt_over_a_slightly_longer_recent_prefix() -> None:
    body = _body(_turns(4))
    marked, (anchor,) = place_cache_anchors(body, token_counts=[50] * 9, system_tokens=8_000, max_anchors=1)
    # 8,000 × 1.0 beats the recent prefix's 8,400 × 0.6 and the previous turn's 8,300 × 0.75.
    assert (anchor.location, anchor.cached_tokens) == ("system", 8_000)
    assert _marks(marked) == [("system", 0, 0)]


def test_ranking_prefers_a_big_stable_block_over_the_recent_turns() -> None:
    body = _body(_turns(4))
    counts = [50, 50, 6_000, 50, 50, 50, 50, 50, 50]
    _, (anchor,) = place_cache_anchors(body, token_counts=counts, system_tokens=200, max_anchors=1)
    assert (anchor.location, anchor.index, anchor.hit_rate) == ("message", 2, HIT_RATE_STABLE)
    _, two = place_cache_anchors(body, token_counts=counts, system_tokens=3_000, max_anchors=2)
    # Stable (2): 9,100 × 0.9 = 8,190; previous (5): 9,250 × 0.75 = 6,937; recent (7): 9,350 × 0.6 = 5,610;
    # system: 3,000 × 1.0.
    assert [(a.location, a.index) for a in two] == [("message", 2), ("message", 5)]


def test_never_more_than_four_marks_and_existing_ones_count() -> None:
    body = _body(_turns(6))
    counts = [1_500] * 13
    marked, anchors = place_cache_anchors(body, token_counts=counts, system_tokens=2_000, max_anchors=10)
    assert len(anchors) == 4 and len(_marks(marked)) == 4
    # Placing again on a marked body adds nothing and changes nothing.
    again, more = place_cache_anchors(marked, token_counts=counts, system_tokens=2_000)
    assert more == [] and _dump(again) == _dump(marked)
    # A client mark (one already there) leaves room for three.
    client = copy.deepcopy(body)
    client["messages"][0] = {"role": "user", "content": [{**_text("fix the build"), "cache_control": MARK}]}
    assert count_breakpoints(client) == 1
    marked, anchors = place_cache_anchors(client, token_counts=counts, system_tokens=2_000)
    assert len(anchors) == 3 and len(_marks(marked)) == 4
    # A client mark that already closes a candidate's prefix serves it: no second mark beside it.
    client = copy.deepcopy(body)
    client["messages"][11]["content"][1]["cache_control"] = MARK  # the recent prefix's block
    marked, anchors = place_cache_anchors(client, token_counts=counts, system_tokens=2_000)
    assert _where(anchors) == [("system", 0, 0), ("message", 8, 0), ("message", 9, 1)]
    assert _marks(marked) == _where(anchors) + [("message", 11, 1)]


def test_a_body_ending_with_the_assistant_marks_its_last_message() -> None:
    """The newest user message is the one the client sends next: everything before it is reused."""
    messages = _turns(3) + [{"role": "assistant", "content": "All done."}]
    marked, anchors = place_cache_anchors(_body(messages), token_counts=[400] * 8, system_tokens=1_200)
    _assert_valid(marked)
    # recent: 7 (the last message); previous: before the last user message (6) → 5; no large message.
    assert _where(anchors) == [("system", 0, 0), ("message", 5, 1), ("message", 7, 0)]
    assert marked["messages"][7]["content"] == [{"type": "text", "text": "All done.", "cache_control": MARK}]


def test_bad_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="3 entries for 7 messages"):
        place_cache_anchors(_body(_turns(3)), token_counts=[1, 2, 3], system_tokens=0)
    with pytest.raises(ValueError, match="negative"):
        place_cache_anchors(_body(_turns(1)), token_counts=[1, -2, 3], system_tokens=0)


def test_empty_and_single_message_bodies() -> None:
    assert place_cache_anchors({"messages": []}, token_counts=[], system_tokens=0) == ({"messages": []}, [])
    body = _body([{"role": "user", "content": "hello"}])
    marked, anchors = place_cache_anchors(body, token_counts=[5_000], system_tokens=2_000)
    # Only the system prompt: nothing comes before the newest (and only) user message.
    assert _where(anchors) == [("system", 0, 0)]
    _assert_valid(marked)


# -- cache health ---------------------------------------------------------------------------------


def _miss(tokens: int = 20_000, write: int = 18_000) -> Usage:
    return Usage(input=tokens - write, output=300, cache_write=write)


def _hit(read: int = 18_000, fresh: int = 2_000) -> Usage:
    return Usage(input=fresh, output=300, cache_read=read)


def test_three_misses_in_a_row_are_thrashing() -> None:
    health = cache_health([_hit(), _miss(), _miss(), _miss()])
    assert (health.requests, health.consecutive_misses, health.thrashing) == (4, 3, True)
    assert health.hit_rate == 18_000 / 80_000
    assert health.warning is not None
    for words in ("thrashing", "3 requests", "system prompt", "timestamp", "tool definitions", "compaction"):
        assert words in health.warning, words


def test_a_hit_resets_the_streak() -> None:
    health = cache_health([_miss(), _miss(), _hit(), _miss(), _miss()])
    assert (health.consecutive_misses, health.thrashing, health.warning) == (2, False, None)
    assert cache_health([_miss(), _miss(), _miss(), _hit(read=1)]).consecutive_misses == 0


def test_small_prompts_do_not_count_as_misses() -> None:
    small = Usage(input=900, output=50)  # could not have been cached
    health = cache_health([_miss(), small, _miss(), small, small])
    assert (health.consecutive_misses, health.thrashing) == (2, False)
    # Nor do they break a streak: they say nothing either way.
    assert cache_health([_miss(), small, _miss(), small, _miss()]).thrashing
    assert cache_health([small] * 10) == cache_health([small] * 10, miss_streak=1)
    assert cache_health([small] * 10).consecutive_misses == 0
    # A Haiku-sized threshold makes a 1,500-token prompt small too.
    mid = Usage(input=1_500)
    assert cache_health([mid] * 3).thrashing
    assert not cache_health([mid] * 3, min_prompt_tokens=2_048).thrashing


def test_misses_without_cache_writes_point_at_missing_breakpoints() -> None:
    health = cache_health([Usage(input=30_000)] * 3)
    assert health.thrashing and health.warning is not None
    assert "no cache breakpoints" in health.warning and "wrote nothing" in health.warning


def test_miss_streak_and_empty_window() -> None:
    assert cache_health([]) == cache_health([], miss_streak=5)
    empty = cache_health([])
    assert (empty.requests, empty.hit_rate, empty.consecutive_misses, empty.thrashing) == (0, 0.0, 0, False)
    assert empty.warning is None
    assert not cache_health([_miss(), _miss(), _miss()], miss_streak=4).thrashing
    assert cache_health([_miss()], miss_streak=1).thrashing
    with pytest.raises(ValueError):
        cache_health([], miss_streak=0)


# -- rendered sessions ----------------------------------------------------------------------------

WIRE_SESSION: list[dict[str, Any]] = [
    {"role": "user", "content": "Read the spec and fix the failing test."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Start with the spec.", "signature": "sig-1"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "SPEC.md"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "spec line\n" * 1_500}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Now the tests."},
            {"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "pytest -x"}},
            {"type": "tool_use", "id": "t3", "name": "bash", "input": {"command": "git status"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "1 failed"},
            {"type": "tool_result", "tool_use_id": "t3", "content": "clean"},
        ],
    },
    {"role": "assistant", "content": "The test fails because of an off-by-one."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Fix it."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
    },
]
SYSTEM = [SystemPrompt(text="You are a careful engineer. " * 300)]


def _session(wire: list[dict[str, Any]], fmt: str = "anthropic") -> list[Message]:
    counter = counter_for("claude-sonnet-4-5")
    batch = parse(wire, fmt)  # type: ignore[arg-type]
    assert batch.results == []
    return [count_message(m, counter) for m in batch.messages]


def _rendered_counts(messages: list[Message], body: dict[str, Any]) -> list[int]:
    """Token counts for the rendered messages, from the domain messages' stored counts.

    The renderer turns an assistant message into the assistant's blocks followed by a user message
    holding its tool results, and merges neighbours of the same role (results and the next user
    message, say). So each domain message is split the same way: a tool call's result (its output
    text and attachments) goes to the results side, the rest of the message — its overhead, text,
    reasoning and the calls themselves — to the assistant side; then same-role neighbours are
    summed. The synthetic first user message the renderer adds when history starts with the
    assistant is counted as its text plus the message overhead.
    """
    counter = counter_for("claude-sonnet-4-5")
    turns: list[list[Any]] = []  # [role, tokens]

    def add(role: str, tokens: int) -> None:
        if turns and turns[-1][0] == role:
            turns[-1][1] += tokens
        else:
            turns.append([role, tokens])

    for message in messages:
        if message.role == "user":
            add("user", message.tokens)
            continue
        results = sum(
            counter.count(p.result_text) + sum(media_tokens(a) for a in p.attachments) for p in message.tool_parts
        )
        add("assistant", message.tokens - results)
        if message.tool_parts:
            add("user", results)
    if turns and turns[0][0] == "assistant":
        turns.insert(0, ["user", MESSAGE_OVERHEAD + counter.count(CONTINUATION_TEXT)])
    assert [role for role, _ in turns] == [m["role"] for m in body["messages"]], "the split drifted from render"
    return [tokens for _, tokens in turns]


def _place(system: list[SystemPrompt], messages: list[Message]) -> tuple[dict[str, Any], list[Anchor]]:
    counter = counter_for("claude-sonnet-4-5")
    body = render(system, messages, "anthropic")
    system_tokens = sum(p.tokens for p in count_system(system, counter))
    return place_cache_anchors(body, token_counts=_rendered_counts(messages, body), system_tokens=system_tokens)


def test_placement_is_stable_across_two_renders_of_a_session() -> None:
    first = _place(SYSTEM, _session(WIRE_SESSION))
    second = _place(SYSTEM, _session(copy.deepcopy(WIRE_SESSION)))
    assert _dump(first[0]) == _dump(second[0])
    assert first[1] == second[1]
    marked, anchors = first
    _assert_valid(marked)
    assert _where(anchors) == [("system", 0, 0), ("message", 2, 0), ("message", 3, 2), ("message", 5, 0)]
    assert "cache_control" not in marked["messages"][1]["content"][0]  # thinking, not the tool_use after it


def test_the_next_request_marks_again_what_this_one_cached() -> None:
    """The recent prefix of one request is the previous-turn prefix of the next: it is read back."""
    now_marked, now = _place(SYSTEM, _session(WIRE_SESSION))
    later = WIRE_SESSION + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t4", "name": "Edit", "input": {"path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t4", "content": "edited"}]},
    ]
    later_marked, after = _place(SYSTEM, _session(later))
    recent = now[-1]
    previous = next(a for a in after if a.hit_rate == HIT_RATE_PREVIOUS)
    assert _where([previous]) == _where([recent])
    cut = recent.index + 1
    assert _dump(_unmarked(later_marked)["messages"][:cut]) == _dump(_unmarked(now_marked)["messages"][:cut])


# -- property: random conversations ----------------------------------------------------------------

_texts = st.sampled_from(["", " ", "ok", "line 1\nline 2", "déjà vu", "x" * 40])
_images = st.builds(FilePart, mime=st.just("image/png"), data=st.just(PNG), filename=st.none() | st.just("s.png"))


@st.composite
def _tool_part(draw: st.DrawFn, call_id: str) -> ToolPart:
    state = draw(st.sampled_from(["pending", "completed", "completed", "error"]))
    fields: dict[str, Any] = {"input": {"command": draw(_texts)}}
    if state == "completed":
        fields.update(output=draw(_texts), attachments=draw(st.lists(_images, max_size=1)))
    elif state == "error":
        fields.update(error=draw(_texts))
    return ToolPart(call_id=call_id, name=draw(st.sampled_from(["bash", "Read"])), state=state, **fields)


@st.composite
def _assistant_parts(draw: st.DrawFn, turn: int) -> list[Any]:
    ids = draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3))
    parts: list[Any] = [draw(_tool_part(f"call_{turn}_{i}")) for i in ids]
    extras = (
        st.builds(TextPart, text=_texts)
        | st.builds(ReasoningPart, text=_texts, signature=st.just("sig"))
        | st.builds(ReasoningPart, redacted_data=st.just("blob"))
    )
    for extra in draw(st.lists(extras, max_size=3)):
        parts.insert(draw(st.integers(0, len(parts))), extra)
    return parts


@st.composite
def _conversations(draw: st.DrawFn) -> list[Message]:
    messages = []
    for turn in range(draw(st.integers(0, 9))):
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "compaction"]))
        if kind == "user":
            parts = draw(st.lists(st.builds(TextPart, text=_texts) | _images, max_size=3))
            messages.append(Message(role="user", parts=parts))
        elif kind == "compaction":
            messages.append(Message(role="user", parts=[CompactionPart()]))
        else:
            messages.append(Message(role="assistant", parts=draw(_assistant_parts(turn))))
    return messages


_systems = st.lists(st.builds(SystemPrompt, text=_texts), max_size=2)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    system=_systems,
    messages=_conversations(),
    strip_media=st.booleans(),
    data=st.data(),
    system_tokens=st.integers(0, 3_000),
    max_anchors=st.integers(0, 6),
    min_prefix=st.sampled_from([0, 1_024, 2_048]),
)
def test_random_rendered_bodies_stay_valid(
    system: list[SystemPrompt],
    messages: list[Message],
    strip_media: bool,
    data: st.DataObject,
    system_tokens: int,
    max_anchors: int,
    min_prefix: int,
) -> None:
    body = render(system, messages, "anthropic", RenderOptions(strip_media=strip_media))
    counts = data.draw(st.lists(st.integers(0, 3_000), min_size=len(body["messages"]), max_size=len(body["messages"])))
    before = _dump(body)
    marked, anchors = place_cache_anchors(
        body, token_counts=counts, system_tokens=system_tokens, max_anchors=max_anchors, min_prefix_tokens=min_prefix
    )
    _assert_valid(marked)
    assert _dump(body) == before
    assert _unmarked(marked) == body
    assert len(anchors) <= min(4, max_anchors)
    assert _marks(marked) == _where(anchors)  # anchors come in prompt order, one mark each
    for anchor in anchors:
        expected = system_tokens + (sum(counts[: anchor.index + 1]) if anchor.location == "message" else 0)
        assert anchor.cached_tokens == expected >= min_prefix
    again = place_cache_anchors(
        body, token_counts=counts, system_tokens=system_tokens, max_anchors=max_anchors, min_prefix_tokens=min_prefix
    )
    assert _dump(again[0]) == _dump(marked) and again[1] == anchors


# -- the corpus -----------------------------------------------------------------------------------


# The Claude Code main sessions: a bare session id, no `__agent-…` suffix (subagents are short).
def _main_session(path: Path) -> bool:
    parts = path.stem.split("__")
    return len(parts) == 2 and len(parts[1]) == 36


BIG_SESSIONS = corpus_params(
    "normalized/claude-code-*__*.jsonl", where=_main_session, id=lambda p: p.stem.split("__")[1][:8]
)


@cache
def _corpus_session(path: Path) -> tuple[list[SystemPrompt], list[Message]]:
    return corpus_session(path, "claude-sonnet-4-5")


@pytest.mark.parametrize("path", BIG_SESSIONS)
@pytest.mark.parametrize("with_system", [False, True], ids=["no-system", "system"])
def test_corpus_sessions_get_valid_stable_anchors(path: Path, with_system: bool) -> None:
    system, messages = _corpus_session(path)
    if with_system:
        system = system + SYSTEM  # the corpus sessions carry no system prompt of their own
    marked, anchors = _place(system, messages)
    again, anchors_again = _place(system, messages)
    assert _dump(again) == _dump(marked) and anchors_again == anchors

    _assert_valid(marked)
    assert _unmarked(marked) == render(system, messages, "anthropic")
    assert len(anchors) == (4 if with_system else 3)
    assert _marks(marked) == _where(anchors)
    assert all(a.cached_tokens >= 1_024 for a in anchors)
    assert [a.hit_rate for a in anchors if a.location == "message"] == [
        HIT_RATE_STABLE,
        HIT_RATE_PREVIOUS,
        HIT_RATE_RECENT,
    ]
    # The recent mark closes the conversation before the newest user message: the whole body when
    # it ends with the assistant's reply (the next request appends the user's message), else the
    # body up to the user message it ends with (left unmarked: a retry replaces it).
    body = marked["messages"]
    newest_user = (
        len(body) if body[-1]["role"] == "assistant" else max(i for i, m in enumerate(body) if m["role"] == "user")
    )
    assert anchors[-1].index == newest_user - 1

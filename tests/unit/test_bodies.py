"""What a request body's first part decides, and what a whole body holds (`bodies`): a batch
over `max_batch_messages` is refused without being built, and bytes in flight are bounded."""

from __future__ import annotations

import json

import pytest

from contextfold.errors import LimitExceeded
from contextfold.mcpserver import bodies
from contextfold.mcpserver.bodies import BodyBudget, look, parse, peek_id, restore


def _call(messages: int, *, name: str = "append", order: str = "id-first", extra: str = "") -> bytes:
    array = "[" + ",".join('{"role":"user","content":"m"}' for _ in range(messages)) + "]"
    arguments = f'{{"session_id":"s","messages":{array}{extra}}}'
    params = f'"params":{{"name":"{name}","arguments":{arguments}}}'
    if order == "id-first":
        text = f'{{"jsonrpc":"2.0","id":3,"method":"tools/call",{params}}}'
    elif order == "name-last":
        text = f'{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"arguments":{arguments},"name":"{name}"}}}}'
    else:
        text = f'{{"jsonrpc":"2.0","method":"tools/call",{params},"id":3}}'
    return text.encode()


def test_the_first_part_of_a_batch_over_the_limit_decides():
    body = _call(3_000)
    decided = look(body[:5_000], 100)
    assert decided is not None and decided.refused() and decided.request_id() == 3 and decided.name() == "append"
    assert look(_call(100)[:-10], 100) is None  # within the limit: nothing to decide
    assert look(_call(3_000, name="count_tokens")[:5_000], 100) is None  # not a batch tool
    assert look(_call(3_000, order="id-last")[:5_000], 100) is None  # no id yet
    assert look(_call(3_000, order="name-last")[:5_000], 100) is None  # no tool yet
    ping = look(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"xxxx', 100)
    assert ping is not None and ping.not_a_call()
    batch = look(b'[{"jsonrpc":"2.0"', 100)
    assert batch is not None and batch.not_a_call()


@pytest.mark.parametrize("order", ["id-first", "id-last", "name-last"])
def test_a_whole_body_over_the_limit_is_counted_not_built(order: str):
    request = parse(_call(3_000, order=order), 100)
    assert request.refused() and request.request_id() == 3
    assert request.arguments is not None and "messages" not in request.arguments
    # Another tool's messages are not limited: built after all.
    other = parse(_call(3_000, name="count_tokens", order=order), 100)
    assert not other.refused() and other.arguments is not None and len(other.arguments["messages"]) == 3_000
    within = parse(_call(100, order=order, extra=',"format":"openai"'), 100)
    assert within.arguments == json.loads(_call(100, extra=',"format":"openai"'))["params"]["arguments"]


@pytest.mark.parametrize("method", ["tools/call", "ping"])
def test_nothing_is_built_before_the_message_is_known_to_be_a_call(method: str):
    arguments = {"session_id": "s", "messages": [{"role": "user", "content": "m"}] * 50}
    message = {"params": {"_meta": {"k": "v"}, "arguments": arguments, "name": "append"}, "x": ["y"], "id": 3}
    body = json.dumps({**message, "method": method, "jsonrpc": "2.0"}).encode()
    request = parse(body, 100)
    if method == "tools/call":  # built at the end, from where each member starts
        assert request.arguments == arguments and request.params == {"_meta": {"k": "v"}, "name": "append"}
        assert request.fields == {"x": ["y"], "id": 3, "method": method, "jsonrpc": "2.0"}
    else:  # passed over: never built
        assert request.not_a_call() and request.arguments == {"session_id": None}
        assert request.params == {"_meta": None, "name": "append"} and request.fields["x"] is None


@pytest.mark.parametrize("order", ["id-first", "id-last", "name-last"])
def test_a_small_body_is_counted_without_building_it(order: str):
    request = bodies.count(_call(3_000, order=order), 100)
    assert request.refused() and request.request_id() == 3 and request.name() == "append"
    within = bodies.count(_call(100, order=order), 100)
    assert not within.refused() and within.arguments == {"session_id": None}  # strings passed over


def test_the_id_is_found_in_the_first_part_when_it_comes_first():
    assert peek_id(_call(10)[:40]) == 3
    assert peek_id(_call(10, order="id-last")[:40]) is None
    assert peek_id(b'{"jsonrpc":"2.0","id":"abc"') == "abc"
    assert peek_id(b'{"jsonrpc":"2.0","id":12') is None  # 12 may be the start of 123
    assert peek_id(b"garbage") is None


def test_a_refused_batch_reads_as_the_tools_refusal():
    bodies._parsed["t" * 32] = bodies.too_many_messages(2_000)
    try:
        with pytest.raises(LimitExceeded, match=r"more than 2,000 messages exceed max_batch_messages \(2,000\)"):
            restore({bodies._MARK: "t" * 32})
        assert restore({bodies._MARK: "unknown"}) is None
        assert restore({bodies._MARK: "t" * 32, "other": 1}) is None
    finally:
        bodies._parsed.clear()


def test_the_budget_refuses_past_each_limit_naming_it():
    budget = BodyBudget(per_tenant=100, total=150)
    assert budget.take("a", 80) is None
    refused = budget.take("a", 30)
    assert refused is not None and refused.status == 429
    assert (
        "tenant 'a' already has 80 bytes" in refused.message
        and "http_body_bytes_per_tenant (100 bytes)" in refused.message
    )
    assert budget.take("b", 60) is None
    refused = budget.take("c", 20)
    assert refused is not None and refused.status == 503 and "http_body_bytes_in_flight (150 bytes)" in refused.message
    budget.give("a", 80)
    assert budget.take("c", 20) is None
    assert budget.held == {"b": 60, "c": 20} and budget.all == 80
    local = BodyBudget(per_tenant=10, total=100).take("", 11)
    assert local is not None and local.message.startswith(
        "a body of 11 bytes more would pass http_body_bytes_per_tenant"
    )

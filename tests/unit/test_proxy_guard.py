"""The proxy's guard on its own (pure functions): what is stored of a result and what the client gets."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.config import Settings
from contextfold.proxy import oversize as guard
from contextfold.proxy.oversize import COMBINED, Limits, Stored, plan, shorten
from contextfold.proxy.relay import _fits_schema
from contextfold.tokens.counting import counter_for

COUNT = counter_for("default").count
LIMITS = Limits(
    max_tokens=10_000,
    max_lines=2_000,
    max_bytes=50 * 1024,
    preview_tokens=2_000,
    preview_lines=200,
    preview_bytes=12_800,
    max_binary_bytes=5 * 1024**2,
    tokens_per_byte=1.2,
)


def lines(n: int, start: int = 1) -> str:
    return "\n".join(f"line {i} of the output" for i in range(start, start + n))


def stored_for(p: guard.Plan) -> dict[Any, Stored]:
    """What a store would say: a short preview naming a made-up output id per piece."""
    return {
        piece.path: Stored(f'[preview of {piece.kind} {n}] read_output(id="out_{n}")', f"out_{n}")
        for n, piece in enumerate(p.pieces)
    }


def text_result(*texts: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t} for t in texts], **extra}


def test_a_result_under_every_limit_is_left_alone():
    assert plan(text_result(lines(100), lines(100)), LIMITS, COUNT) is None
    assert plan({"content": [], "isError": True}, LIMITS, COUNT) is None
    assert plan({"contents": [{"uri": "x", "text": "small"}]}, LIMITS, COUNT) is None


def test_lines_bytes_and_tokens_each_make_a_result_oversized():
    by_lines = text_result("\n" * 2_100)
    by_bytes = text_result("abcdefghij" * 6_000)  # 60,000 bytes, few tokens per byte
    by_tokens = text_result("漢字仮名交じり文" * 1_500)  # 12,000 characters: 36,000 bytes, 12,000+ tokens
    assert len(by_tokens["content"][0]["text"].encode()) < 50 * 1024 and COUNT(by_tokens["content"][0]["text"]) > 10_000
    for result in (by_lines, by_bytes, by_tokens):
        planned = plan(result, LIMITS, COUNT)
        assert planned is not None and [p.path for p in planned.pieces] == [("content", 0)]


def test_the_largest_parts_are_stored_until_the_rest_fits():
    result = text_result("intro", lines(3_000), lines(150))
    planned = plan(result, LIMITS, COUNT)
    assert [p.path for p in planned.pieces] == [("content", 1)]
    out = guard.apply(result, planned, stored_for(planned), count=COUNT)
    assert out["content"][0]["text"] == "intro" and out["content"][2]["text"] == lines(150)
    assert out["content"][1]["text"].startswith("[preview of text 0]")


def test_many_small_blocks_are_stored_as_one():
    result = text_result(*(lines(60, start=1 + i * 60) for i in range(50)))
    planned = plan(result, LIMITS, COUNT)
    assert [p.path for p in planned.pieces] == [COMBINED] and len(planned.combine) == 50
    assert planned.pieces[0].text == "\n".join(b["text"] for b in result["content"])
    out = guard.apply(result, planned, stored_for(planned), count=COUNT)
    assert len(out["content"]) == 1 and out["content"][0]["type"] == "text"


def test_binaries_pass_unless_over_their_limit():
    small = {"content": [{"type": "image", "data": "QUJD" * 1_000, "mimeType": "image/png"}]}
    assert plan(small, LIMITS, COUNT) is None
    limits = guard.Limits(**{**LIMITS.__dict__, "max_binary_bytes": 1_000})
    planned = plan(small, limits, COUNT)
    assert planned.pieces[0].kind == "binary" and planned.pieces[0].bytes == 3_000
    assert max(map(len, planned.pieces[0].text.split("\n"))) == 76  # stored to read by lines
    out = guard.apply(small, planned, stored_for(planned), count=COUNT)
    assert out["content"][0]["type"] == "text" and "image/png, 3,000 bytes" in out["content"][0]["text"]
    blob = {"contents": [{"uri": "file:///a.bin", "mimeType": "application/zip", "blob": "QUJD" * 1_000}]}
    out = guard.apply(blob, plan(blob, limits, COUNT), stored_for(plan(blob, limits, COUNT)), count=COUNT)
    assert out["contents"][0]["uri"] == "file:///a.bin" and "text" in out["contents"][0]


def test_embedded_resources_resource_reads_and_prompts_are_guarded():
    embedded = {
        "content": [
            {"type": "resource", "resource": {"uri": "file:///x", "mimeType": "text/plain", "text": lines(3_000)}}
        ]
    }
    read = {"contents": [{"uri": "file:///x", "text": lines(3_000)}]}
    prompt = {"messages": [{"role": "user", "content": {"type": "text", "text": lines(3_000)}}]}
    for result, path in (
        (embedded, ("content", 0, "resource")),
        (read, ("contents", 0)),
        (prompt, ("messages", 0, "content")),
    ):
        planned = plan(result, LIMITS, COUNT)
        assert [p.path for p in planned.pieces] == [path]
        out = guard.apply(result, planned, stored_for(planned), count=COUNT)
        assert "read_output" in json.dumps(out) and "line 2999 " not in json.dumps(out)


def test_minified_json_is_stored_indented_so_every_part_reads_back():
    value = {"items": [{"id": i, "name": "x" * 30} for i in range(2_000)]}
    minified = json.dumps(value, separators=(",", ":"))
    planned = plan(text_result(minified), LIMITS, COUNT)
    stored = planned.pieces[0].text
    assert json.loads(stored) == value and max(map(len, stored.split("\n"))) < 100
    plain = "x" * 60_000  # over max_bytes, one line, not JSON: stored as it is
    assert plan(text_result(plain), LIMITS, COUNT).pieces[0].text == plain


REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "notes": {"type": "string"}},
                "required": ["id", "notes"],
            },
        },
    },
    "required": ["title", "rows"],
}


def test_structured_content_is_shortened_to_a_copy_its_schema_accepts():
    value = {"title": "t", "rows": [{"id": i, "notes": "n" * 300} for i in range(500)]}
    result = {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value}
    planned = plan(result, LIMITS, COUNT)
    assert [p.kind for p in planned.pieces] == ["structured"] and planned.mirrors == [("content", 0)]
    out = guard.apply(
        result, planned, stored_for(planned), count=COUNT, output_schema=REPORT_SCHEMA, validate=_fits_schema
    )
    assert not out.get("isError") and _fits_schema(out["structuredContent"], REPORT_SCHEMA)
    assert COUNT(json.dumps(out["structuredContent"])) <= LIMITS.preview_tokens
    assert out["content"][0]["text"].startswith("[preview of structured 0]")  # the mirror shows the preview
    assert result["structuredContent"] is value and len(value["rows"]) == 500  # the input is untouched


def test_a_long_string_that_is_also_a_text_block_becomes_its_preview_in_the_structure():
    # server-filesystem's read_text_file: {"content": text} beside the text, the schema {content: string}.
    text = lines(5_000)
    schema = {
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
        "additionalProperties": False,
    }
    result = {"content": [{"type": "text", "text": text}], "structuredContent": {"content": text}}
    planned = plan(result, LIMITS, COUNT)
    assert [p.kind for p in planned.pieces] == ["text"]  # stored once, as the text (readable by lines)
    assert planned.substitutes == {text: ("content", 0)}
    out = guard.apply(result, planned, stored_for(planned), count=COUNT, output_schema=schema, validate=_fits_schema)
    assert out["structuredContent"] == {"content": out["content"][0]["text"]}
    assert out["content"][0]["text"].startswith("[preview of text 0]")


def test_lists_cut_without_a_trace_get_a_note_where_the_schema_allows_one():
    value = {"rows": [{"id": i, "notes": "n" * 100} for i in range(2_000)]}
    result = {"content": [], "structuredContent": value}
    planned = plan(result, LIMITS, COUNT)
    open_schema = {"type": "object", "properties": {"rows": {"type": "array"}}}
    out = guard.apply(
        result, planned, stored_for(planned), count=COUNT, output_schema=open_schema, validate=_fits_schema
    )
    assert 'read_output(id="out_0")' in out["structuredContent"][guard.NOTE_KEY]
    closed = {**open_schema, "additionalProperties": False}
    out = guard.apply(result, planned, stored_for(planned), count=COUNT, output_schema=closed, validate=_fits_schema)
    assert guard.NOTE_KEY not in out["structuredContent"] and 0 < len(out["structuredContent"]["rows"]) < 2_000


def test_structured_content_no_shortening_fits_becomes_an_error_result():
    value = {"code": "a" * 100_000}
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^a+$"}}, "required": ["code"]}
    result = {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value}
    planned = plan(result, LIMITS, COUNT)
    out = guard.apply(result, planned, stored_for(planned), count=COUNT, output_schema=schema, validate=_fits_schema)
    assert out["isError"] is True and "structuredContent" not in out
    assert len(out["content"]) == 1 and out["content"][0]["text"].startswith("The tool ran, but")


def test_shorten_gives_up_on_an_object_of_countless_small_fields():
    value = {f"k{i}": i for i in range(20_000)}
    assert shorten(value, 500, COUNT, "[cut]") is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3_000),
    lambda children: st.lists(children, max_size=40) | st.dictionaries(st.text(max_size=8), children, max_size=8),
    max_leaves=200,
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(value=json_values, budget=st.integers(min_value=200, max_value=3_000))
def test_shorten_keeps_the_shape_and_fits_the_budget(value, budget):
    found = shorten(value, budget, COUNT, "[cut]")
    if found is None:
        return
    shortened, _dropped = found
    assert COUNT(json.dumps(shortened, ensure_ascii=False, separators=(",", ":"))) <= budget

    def same_shape(a: Any, b: Any) -> bool:
        if isinstance(a, dict):
            return isinstance(b, dict) and list(a) == list(b) and all(same_shape(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return isinstance(b, list) and len(b) <= len(a) and all(same_shape(x, y) for x, y in zip(a, b))
        if isinstance(a, str):
            return isinstance(b, str) and (a == b or b.startswith(a[: max(len(b) - 40, 0)][:16]))
        return a == b

    assert same_shape(value, shortened)


block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=200) | st.builds(lines, st.integers(0, 4_000))),
    st.builds(
        lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.sampled_from(["QUJD", "QUJD" * 3_000])
    ),
    st.builds(
        lambda t: {"type": "resource", "resource": {"uri": "file:///r", "text": t}},
        st.builds(lines, st.integers(0, 3_000)),
    ),
    st.just({"type": "resource_link", "uri": "file:///l", "name": "l"}),
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(blocks=st.lists(block, max_size=12))
def test_apply_never_changes_its_input_and_what_stays_fits(blocks):
    limits = guard.Limits(**{**LIMITS.__dict__, "max_binary_bytes": 5_000})
    result = {"content": blocks}
    before = copy.deepcopy(result)
    planned = plan(result, limits, COUNT)
    if planned is None:
        return
    out = guard.apply(result, planned, stored_for(planned), count=COUNT)
    assert result == before
    texts = [holder["text"] for _, holder, kind in guard.slots(out) if kind == "text"]
    total = sum(COUNT(t) for t in texts)
    assert total <= limits.max_tokens and sum(t.count("\n") + 1 for t in texts) <= limits.max_lines + len(texts)
    assert not any(
        kind == "binary" and guard._binary_bytes(h.get("data") or h.get("blob")) > 5_000
        for _, h, kind in guard.slots(out)
    )


@pytest.mark.parametrize("head,tail,expected", [
    (b'{"jsonrpc":"2.0","id":42,"result":{"content":[', b"", (True, 42)),
    (b'{"result":{"content":[{"type":"text","text":"', b'..."}]},"jsonrpc":"2.0","id":"abc"}', (True, "abc")),
    (b'{"result":{"content":[{"type":"text","text":"', b'..."id":7}]},"jsonrpc":"2.0"}', (False, None)),
    (b"garbage", b"garbage", (False, None)),
])  # fmt: skip
def test_the_id_of_a_message_too_large_to_parse_is_found_at_either_end(head, tail, expected):
    from contextfold.proxy.wire import find_id

    assert find_id(head, tail) == expected


class _Counted(int):
    """A block index that counts how often it is compared for equality (a membership test on a list
    of paths compares it with every path before it; a set, about once)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        _Counted.comparisons += 1
        return int.__eq__(self, other)

    __hash__ = int.__hash__


def _comparisons_to_guard(blocks: int, monkeypatch: pytest.MonkeyPatch) -> int:
    real = guard.slots

    def counted(result: dict[str, Any]) -> Any:
        for path, holder, kind in real(result):
            yield tuple(_Counted(k) if type(k) is int else k for k in path), holder, kind

    monkeypatch.setattr(guard, "slots", counted)
    result = text_result(*(f"block {i}\nsecond line\nthird line" for i in range(blocks)))  # small, over max_lines
    _Counted.comparisons = 0
    planned = plan(result, LIMITS, COUNT)
    assert planned is not None and len(planned.combine) == blocks
    out = guard.apply(result, planned, stored_for(planned), count=COUNT)
    assert len(out["content"]) == 1 and len(result["content"]) == blocks
    return _Counted.comparisons


def test_guarding_many_small_blocks_is_linear_in_blocks(monkeypatch):
    """Issue 26: a membership test on a list of paths made 10k blocks take 0.87 s, 40k 10.7 s,
    200k never. Counted, not timed: the path comparisons grow with the blocks, not their square."""
    small, large = (_comparisons_to_guard(n, monkeypatch) for n in (1_000, 2_000))
    assert large <= 4 * 2_000, (small, large)
    assert large <= 2.2 * small + 10, (small, large)


def test_a_result_over_the_block_bound_is_refused_naming_the_setting():
    bound = Settings().proxy_max_result_blocks
    result = {"content": [{"type": "text", "text": "x"}] * (bound + 1)}
    with pytest.raises(guard.TooManyBlocks, match=f"{bound:,}.*proxy_max_result_blocks"):
        plan(result, replace(LIMITS, max_blocks=bound), COUNT)
    assert plan({"content": [{"type": "text", "text": "x"}] * 1_000}, LIMITS, COUNT) is None
    lowered = replace(LIMITS, max_blocks=10)
    with pytest.raises(guard.TooManyBlocks, match="11 content blocks.*of 10 .proxy_max_result_blocks"):
        plan({"content": [{"type": "text", "text": "x"}] * 11}, lowered, COUNT)


def nested(depth: int) -> Any:
    """A value with `depth` levels of arrays and objects ({"deep": [[…]]})."""
    value: Any = "bottom"
    for _ in range(depth - 1):
        value = [value]
    return {"deep": value}


def test_structured_content_nested_over_the_house_bound_is_refused_without_recursing():
    """Issue 26: a structured result 900 deep gave a 3,000-line RecursionError. Over 100 levels
    (MAX_DEPTH, as everywhere in the house) the guard refuses it, whatever the depth; at 100 it
    guards it as any other."""
    big = "\n".join(f"line {i}" for i in range(5_000))
    for depth in (101, 900, 100_000):
        with pytest.raises(guard.TooDeep, match="more than 100 levels deep.*MAX_DEPTH"):
            plan(text_result(big, structuredContent=nested(depth)), LIMITS, COUNT)
    planned = plan(text_result(big, structuredContent=nested(100)), LIMITS, COUNT)
    assert planned is not None and [p.path for p in planned.pieces] == [("content", 0)]

"""JSON parsed in short steps (`jsonsteps`): exactly what `json.loads` builds, whatever the
steps' sizes, refused where it refuses, and on a prefix never more than the prefix shows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import safejson
from contextfold.mcpserver import jsonsteps
from contextfold.mcpserver.jsonsteps import Incomplete, Steps, Unparsable

TRICKY = 'aé€😀"\\\n\t\x01\ud83d\ude00\ud800x\udc00'

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from(list(TRICKY) + list('xyz \\"')), max_size=40),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=5), children, max_size=6),
    max_leaves=60,
)
small_steps = st.fixed_dictionaries(
    {
        "windows": st.sampled_from([(1,), (2, 7), (16,), (5, 40, 300), jsonsteps.WINDOWS]),
        "min_literal": st.integers(1, 64),
        "piece": st.integers(8, 64),
    }
)


def _text(value: Any, ensure_ascii: bool, indent: int | None) -> bytes:
    """`value` as a client writes it: UTF-8 as is, or with \\u escapes (the only way to send a lone
    surrogate, which UTF-8 cannot hold)."""
    if not ensure_ascii:
        try:
            return json.dumps(value, ensure_ascii=False, indent=indent).encode("utf-8")
        except UnicodeEncodeError:
            pass
    return json.dumps(value, indent=indent).encode()


def _same(got: Any, expected: Any) -> bool:
    """Equal as JSON values once made safe (a long string decoded in pieces has its lone
    surrogates repaired already; `safejson.clean` repairs the others)."""
    return json.dumps(safejson.clean(got, ""), sort_keys=True) == json.dumps(
        safejson.clean(expected, ""), sort_keys=True
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(value=values, ensure_ascii=st.booleans(), indent=st.sampled_from([None, 1]), options=small_steps)
def test_values_are_built_as_json_loads_builds_them(value: Any, ensure_ascii: bool, indent: int | None, options: Any):
    text = _text(value, ensure_ascii, indent)
    assert _same(jsonsteps.loads(text, **options), json.loads(text))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(value=values, options=small_steps, data=st.data())
def test_a_prefix_never_claims_more_than_it_shows(value: Any, options: Any, data: st.DataObject):
    text = _text(value, False, None)
    cut = data.draw(st.integers(0, len(text)))
    steps = Steps(text[:cut], complete=False, **options)
    try:
        got = steps.value()
    except Incomplete:
        return
    assert steps.at == cut == len(text)  # only a value wholly there is read (a number, never)
    assert _same(got, json.loads(text))


@pytest.mark.parametrize("prefix", [b"-", b"[-", b'{"a":-', b"[null,0.", b"[1e", b"[2.5E-"])
def test_a_number_cut_after_its_sign_point_or_exponent_mark_is_incomplete(prefix: bytes):
    with pytest.raises(Incomplete):
        Steps(prefix, complete=False).value()


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"[1,2",
        b"[1,2,]",
        b'{"a" 1}',
        b'{"a":1,}',
        b"[01]",
        b"[NaN]",
        b'{"a":Infinity}',
        b"[-Infinity]",
        b"[tru]",
        b'["a\x01"]',
        b'["\\q"]',
        b'["\xff"]',
        b'"abc',
        b'"abc\\',
        b"[1] 2",
        b"[" + b"1" * 5000 + b"]",
    ],
)
@pytest.mark.parametrize("windows", [(1,), jsonsteps.WINDOWS])
def test_what_is_not_json_is_refused(text: bytes, windows: tuple[int, ...]):
    with pytest.raises(Unparsable):
        jsonsteps.loads(text, windows=windows)


def test_nesting_member_by_member_is_bounded():
    deep = b"[" * 300 + b"]" * 300
    with pytest.raises(Unparsable, match="nest more than 200 levels"):
        jsonsteps.loads(deep, windows=(1,))
    assert jsonsteps.loads(b"[" * 150 + b"]" * 150, windows=(1,)) == json.loads(b"[" * 150 + b"]" * 150)


def test_a_long_string_is_decoded_in_pieces_and_found_whole():
    text = "x" * 3_000 + '"\\' + "é" * 2_000
    body = json.dumps({"t": text, "u": [text]}).encode()
    assert jsonsteps.loads(body, windows=(64,), min_literal=100, piece=64) == {"t": text, "u": [text]}
    # Passed over without building, a 3 MB string is found in 1 MiB steps.
    big = json.dumps(["y" * 3 * 1024**2, 1]).encode()
    steps = Steps(big, windows=(64,))
    assert steps.value(build=False) is None and steps.at == len(big)

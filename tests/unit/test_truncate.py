"""Truncation at ingest (docs/design.md §3): limits, line-boundary cuts, directions, the hint, the share cap."""

from __future__ import annotations

import json
import re

import pytest
from conftest import corpus_files, needs_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.policy.truncate import (
    Truncation,
    hint,
    line_count,
    looks_important_at_end,
    share_cap_chars,
    truncate,
    with_hint,
)

MARKER = re.compile(r"… \[lines? [\d,]+(?:–[\d,]+)? omitted\] …\n")


def nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def numbered(count: int, width: int = 20) -> str:
    return "".join(f"line {i} {'x' * width}\n" for i in range(1, count + 1))


def split_head_tail(t: Truncation) -> tuple[str, str]:
    """The original head and tail around the one marker line (and the newline it may add)."""
    matches = list(MARKER.finditer(t.preview))
    assert len(matches) == 1, t.preview
    head, tail = t.preview[: matches[0].start()], t.preview[matches[0].end() :]
    if head.endswith("\n") and nbytes(head[:-1]) + nbytes(tail) == t.kept_bytes:
        head = head[:-1]  # the marker's own newline, ending a head that was cut mid-line
    return head, tail


# -- the share cap -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (128_000, 153_600),  # min(0.3 × 128,000 × 4, 400,000)
        (8_000, 9_600),
        (200_000, 240_000),
        (1_000_000, 400_000),  # never above max_chars
        (1_000, 2_000),  # never below min_chars (0.3 × 1,000 × 4 = 1,200)
        (0, 400_000),  # unlimited window: only max_chars applies
    ],
)
def test_share_cap_chars(window: int, expected: int) -> None:
    assert share_cap_chars(window) == expected


def test_share_cap_custom_and_invalid() -> None:
    assert share_cap_chars(100_000, share=0.1, max_chars=30_000, min_chars=500) == 30_000
    assert share_cap_chars(100_000, share=0.05) == 20_000
    with pytest.raises(ValueError):
        share_cap_chars(-1)


# -- when nothing happens ----------------------------------------------------------------------


def test_under_all_limits_is_none() -> None:
    assert truncate("") is None
    assert truncate("short\n") is None
    assert truncate(numbered(2000, width=1)) is None  # exactly max_lines
    assert truncate("a" * 50 * 1024) is None  # exactly max_bytes
    assert truncate("a" * 100, max_chars=100) is None


# -- each limit alone --------------------------------------------------------------------------


def test_line_limit_alone() -> None:
    text = numbered(3000, width=1)  # ~30 KB: only the line limit binds
    t = truncate(text, direction="head")
    assert t is not None
    assert t.preview == numbered(2000, width=1)
    assert (t.kept_lines, t.omitted_lines, t.total_lines) == (2000, 1000, 3000)
    assert t.resume_line == 2001
    assert t.kept_bytes + t.omitted_bytes == t.total_bytes == nbytes(text)


def test_byte_limit_alone() -> None:
    text = numbered(1500, width=60)  # 1,500 lines, ~100 KB
    t = truncate(text, direction="head")
    assert t is not None
    assert nbytes(t.preview) <= 50 * 1024
    assert t.preview.endswith("\n") and text.startswith(t.preview)
    assert t.kept_bytes == nbytes(t.preview)
    assert t.resume_line == t.kept_lines + 1


def test_char_limit_alone() -> None:
    text = numbered(200)  # ~6 KB, 200 lines
    t = truncate(text, max_chars=1_000, direction="head")
    assert t is not None
    assert len(t.preview) <= 1_000 and t.preview.endswith("\n")
    assert text.startswith(t.preview)


def test_tightest_limit_wins() -> None:
    text = numbered(5000, width=40)
    t = truncate(text, max_lines=100, max_bytes=1_000_000, max_chars=10_000_000, direction="head")
    assert t is not None and t.kept_lines == 100
    t = truncate(text, max_lines=100, max_bytes=2_000, direction="head")
    assert t is not None and t.kept_lines < 100 and nbytes(t.preview) <= 2_000


# -- the newline rule ------------------------------------------------------------------------------


def test_head_cuts_at_newline_inside_last_fifth() -> None:
    text = "a" * 85 + "\n" + "b" * 200
    t = truncate(text, max_chars=100, direction="head")
    assert t is not None and t.preview == "a" * 85 + "\n"
    assert t.resume_line == 2


def test_head_cuts_mid_line_when_newline_is_too_early() -> None:
    text = "a" * 50 + "\n" + "b" * 200
    t = truncate(text, max_chars=100, direction="head")
    assert t is not None and t.preview == text[:100]
    assert t.resume_line == 2  # line 2 was cut: read it again from its start


def test_head_newline_at_exact_boundary_of_fifth() -> None:
    # Budget 100: a cut after a newline at index 79 loses 20 chars = 20 %: allowed.
    text = "a" * 79 + "\n" + "b" * 200
    assert truncate(text, max_chars=100, direction="head").preview == "a" * 79 + "\n"  # type: ignore[union-attr]
    # One more char lost (21 %): not allowed.
    text = "a" * 78 + "\n" + "b" * 200
    assert truncate(text, max_chars=100, direction="head").preview == text[:100]  # type: ignore[union-attr]


def test_tail_starts_at_newline_inside_first_fifth() -> None:
    text = "b" * 200 + "\n" + "a" * 85
    t = truncate(text, max_chars=100, direction="tail")
    assert t is not None and t.preview == "a" * 85
    assert t.tail_start_line == 2 and t.omitted_lines == 1 and t.resume_line == 1


def test_tail_cuts_mid_line_when_newline_is_too_late() -> None:
    text = "b" * 200 + "\n" + "a" * 50
    t = truncate(text, max_chars=100, direction="tail")
    assert t is not None and t.preview == text[-100:]


# -- directions ----------------------------------------------------------------------------------


def test_tail_keeps_the_end() -> None:
    text = numbered(5000)
    t = truncate(text, direction="tail")
    assert t is not None and t.direction == "tail"
    assert text.endswith(t.preview) and t.preview.startswith("line ")
    assert t.kept_lines + t.omitted_lines == 5000
    assert t.tail_start_line == 5000 - t.kept_lines + 1
    assert t.preview.splitlines()[0] == f"line {t.tail_start_line} {'x' * 20}"


def test_head_tail_keeps_both_ends_with_marker() -> None:
    text = numbered(5000)
    t = truncate(text, direction="head_tail")
    assert t is not None and t.direction == "head_tail"
    head, tail = split_head_tail(t)
    assert text.startswith(head) and text.endswith(tail)
    assert head.endswith("\n") and tail.startswith("line ")
    # Roughly 40 % head and 60 % tail of the budget.
    assert 0.3 < len(head) / (len(head) + len(tail)) < 0.5
    assert nbytes(t.preview) <= 50 * 1024
    marker = MARKER.search(t.preview).group(0)  # type: ignore[union-attr]
    first, last = t.omitted_range
    assert f"[lines {first:,}–{last:,} omitted]" in marker
    assert first == head.count("\n") + 1 and last == t.tail_start_line - 1  # type: ignore[operator]
    assert t.omitted_lines == last - first + 1
    assert t.preview.count("\n") <= 2000


def test_head_tail_on_one_huge_line() -> None:
    text = "y" * 100_000
    t = truncate(text, direction="head_tail")
    assert t is not None
    head, tail = split_head_tail(t)
    assert text.startswith(head) and text.endswith(tail)
    assert (t.total_lines, t.kept_lines, t.omitted_lines) == (1, 1, 0)
    assert "[line 1 omitted]" in t.preview
    assert t.omitted_bytes == 100_000 - len(head) - len(tail)


def test_head_tail_falls_back_to_tail_when_budget_is_tiny() -> None:
    text = numbered(10)
    t = truncate(text, max_lines=2, direction="head_tail")
    assert t is not None and t.direction == "tail"
    assert t.preview == "".join(text.splitlines(keepends=True)[-2:])


def test_unknown_direction() -> None:
    with pytest.raises(ValueError, match="direction"):
        truncate(numbered(3000), direction="middle")  # type: ignore[arg-type]


# -- auto: does the end matter? ------------------------------------------------------------------

PYTEST_FAIL = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0\n"
    "rootdir: /repo\ncollected 412 items\n\n"
    + "".join(f"tests/test_mod{i}.py {'.' * 60} [{i % 100:3d}%]\n" for i in range(3000))
    + "=================================== FAILURES ===================================\n"
    "_________________________________ test_parse __________________________________\n\n"
    "    def test_parse():\n>       assert parse('x') == 1\nE       AssertionError: assert 2 == 1\n\n"
    "tests/test_parse.py:12: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_parse.py::test_parse - AssertionError: assert 2 == 1\n"
    "=================== 1 failed, 411 passed, 3 skipped in 12.31s ===================\n"
)

TRACEBACK = (
    "".join(f"DEBUG loading module {i}\n" for i in range(4000)) + "Traceback (most recent call last):\n"
    '  File "/app/main.py", line 42, in <module>\n    main()\n'
    '  File "/app/main.py", line 37, in main\n    config = load(path)\n'
    "FileNotFoundError: [Errno 2] No such file or directory: '/etc/app.toml'\n"
)

PLAIN_LOG = "".join(f"2024-05-01T12:00:{i % 60:02d} GET /api/items/{i} 200 12ms\n" for i in range(5000))


@pytest.mark.parametrize(
    "text",
    [
        PYTEST_FAIL,
        TRACEBACK,
        "building…\n" * 3000 + "error: could not compile `app` due to 2 previous errors\n",
        "step\n" * 3000 + "error[E0308]: mismatched types\n --> src/main.rs:4:5\n",
        "step\n" * 3000 + "make: *** [Makefile:12: all] Error 2\n",
        "step\n" * 3000 + "Process finished with exit code 1\n",
        "step\n" * 3000 + "Command exited with status 137\n",
        "step\n" * 3000 + "<returncode>2</returncode>\n",
        "ok\n" * 3000 + "Ran 26 tests in 0.032s\n\nFAILED (errors=21)\n",
        "ok\n" * 3000 + "Finished in 2.4 seconds\n12 tests, 2 failures\n",
        "row\n" * 3000 + "TOTAL                 1234    120    90%\n",
        "row\n" * 3000 + "Summary: 3 warnings\n",
        "=== 3 failed, 2 passed in 1.2s ===\n",
    ],
)
def test_important_end_detected(text: str) -> None:
    assert looks_important_at_end(text)


@pytest.mark.parametrize(
    "text",
    [
        PLAIN_LOG,
        "",
        "step\n" * 3000 + "Process finished with exit code 0\n",
        "def handle_error(e):\n    pass\n" * 2000,  # "error" in prose/code is not a signal
        # A failure far from the end does not count: only the last ~40 lines are read.
        "FAILED early\nTraceback (most recent call last):\n" + PLAIN_LOG,
    ],
)
def test_unimportant_end(text: str) -> None:
    assert not looks_important_at_end(text)


def test_auto_picks_head_tail_for_failures_and_head_otherwise() -> None:
    t = truncate(PYTEST_FAIL)
    assert t is not None and t.direction == "head_tail"
    assert t.preview.endswith("1 failed, 411 passed, 3 skipped in 12.31s ===================\n")
    assert t.preview.startswith("===")
    t = truncate(TRACEBACK)
    assert t is not None and t.direction == "head_tail"
    assert "FileNotFoundError: [Errno 2]" in t.preview and "Traceback (most recent call last)" in t.preview
    t = truncate(PLAIN_LOG)
    assert t is not None and t.direction == "head"


def test_important_end_ignores_a_huge_last_line_quickly() -> None:
    assert not looks_important_at_end("z" * 5_000_000)
    assert looks_important_at_end("z" * 5_000_000 + "\nFAILED\n")


# -- multibyte and binary-ish text -------------------------------------------------------------


@pytest.mark.parametrize("char", ["é", "中", "😀"])
def test_multibyte_near_byte_boundary(char: str) -> None:
    for offset in range(4):
        text = "a" * offset + char * 40_000
        t = truncate(text, max_bytes=1_001, direction="head")
        assert t is not None
        assert nbytes(t.preview) <= 1_001
        assert text.startswith(t.preview)
        t.preview.encode("utf-8")  # no broken character
        assert nbytes(t.preview) > 1_001 - len(char.encode())  # and no more lost than one char
        t = truncate(text[::-1], max_bytes=1_001, direction="tail")
        assert t is not None and nbytes(t.preview) <= 1_001 and text[::-1].endswith(t.preview)
        t.preview.encode("utf-8")


def test_surrogate_pairs_are_not_split() -> None:
    pair = "\ud83d\ude00"  # two code points, as a UTF-16 surrogate pair decoded leniently
    text = "a" + pair * 1000
    for limit in range(2, 40):
        head = truncate(text, max_chars=limit, direction="head")
        assert head is not None and not head.preview.endswith("\ud83d")
        tail = truncate(text, max_chars=limit, direction="tail")
        assert tail is not None and not tail.preview.startswith("\ude00")


def test_binary_ish_text_does_not_crash() -> None:
    text = ("\x00\x01\xff\ufffd\ud800 binary \x00\n" * 5000) + "\udfff"
    for direction in ("head", "tail", "head_tail", "auto"):
        t = truncate(text, direction=direction)  # type: ignore[arg-type]
        assert t is not None and nbytes(t.preview) <= 50 * 1024
        hint(t, "out_1")


# -- the hint --------------------------------------------------------------------------------------


def test_hint_names_id_amount_offset_and_both_reads() -> None:
    t = truncate(numbered(3000, width=1), direction="head")
    assert t is not None
    note = hint(t, "out_7f3a")
    assert "out_7f3a" in note
    assert "1,000 lines" in note and f"{t.omitted_bytes:,} bytes" in note
    assert 'read_output(id="out_7f3a", offset=2001, limit=200)' in note
    assert 'pattern="…"' in note


def test_hint_for_tail_points_at_the_start() -> None:
    t = truncate(numbered(3000, width=1), direction="tail")
    assert t is not None
    note = hint(t, "out_9")
    assert "offset=1," in note and "lines 1–1,000" in note and "1,000 lines" in note


def test_hint_for_head_tail_names_the_middle() -> None:
    t = truncate(numbered(5000), direction="head_tail")
    assert t is not None
    first, last = t.omitted_range
    note = hint(t, "out_2")
    assert f"offset={first}," in note and f"lines {first:,}–{last:,}" in note and "middle" in note


def test_hint_for_partial_line_counts_bytes() -> None:
    t = truncate("q" * 60_000, direction="head")
    assert t is not None and t.omitted_lines == 0
    note = hint(t, "out_3")
    assert f"{60_000 - 50 * 1024:,} bytes truncated" in note and "offset=1," in note


def test_with_hint_puts_the_note_on_its_own_line() -> None:
    t = truncate("q" * 60_000, direction="head")
    assert t is not None
    text = with_hint(t, "out_3")
    assert text.startswith(t.preview) and text.endswith(hint(t, "out_3"))
    assert "\n\n…" in text


# -- properties --------------------------------------------------------------------------------


def _high(char: str) -> bool:
    return len(char) == 1 and "\ud800" <= char <= "\udbff"


def _low(char: str) -> bool:
    return len(char) == 1 and "\udc00" <= char <= "\udfff"


_ALPHABET = st.sampled_from(
    ["a", "b", " ", "\n", "\n", "é", "中", "😀", "\x00", "\ufffd", "\ud800", "\udc00", "\r", "\t"]
)
# Longer pieces for long texts: drawing them one character at a time makes hypothesis slow.
_FRAGMENTS = _ALPHABET | st.sampled_from(
    ["word ", "several words here ", "line of output\n", "é中😀", "\ud83d\ude00", "x" * 40, "\n\n", "\r\n"]
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(_ALPHABET, max_size=800).map("".join),
    max_lines=st.integers(1, 40),
    max_bytes=st.integers(1, 600),
    max_chars=st.none() | st.integers(1, 400),
    direction=st.sampled_from(["head", "tail", "head_tail", "auto"]),
)
def test_preview_never_exceeds_budget(
    text: str, max_lines: int, max_bytes: int, max_chars: int | None, direction: str
) -> None:
    _check(text, max_lines, max_bytes, max_chars, direction)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(_FRAGMENTS, min_size=40, max_size=200).map("".join),
    max_lines=st.integers(3, 30),
    max_bytes=st.integers(64, 500),
    max_chars=st.none() | st.integers(40, 300),
)
def test_head_tail_preview_is_prefix_marker_suffix(
    text: str, max_lines: int, max_bytes: int, max_chars: int | None
) -> None:
    t = _check(text, max_lines, max_bytes, max_chars, "head_tail")
    # Falls back to the tail only when the budget cannot hold a marker and both ends.
    assert t is None or t.direction == "head_tail" or max_bytes < 100 or max_lines < 4 or (max_chars or 99) < 60


def _check(text: str, max_lines: int, max_bytes: int, max_chars: int | None, direction: str) -> Truncation | None:
    t = truncate(
        text,
        max_lines=max_lines,
        max_bytes=max_bytes,
        max_chars=max_chars,
        direction=direction,  # type: ignore[arg-type]
    )
    if t is None:
        assert line_count(text) <= max_lines and nbytes(text) <= max_bytes
        assert max_chars is None or len(text) <= max_chars
        return None
    assert line_count(t.preview) <= max_lines
    assert nbytes(t.preview) <= max_bytes
    assert max_chars is None or len(t.preview) <= max_chars
    assert t.kept_lines + t.omitted_lines == t.total_lines == line_count(text)
    assert t.kept_bytes + t.omitted_bytes == t.total_bytes == nbytes(text)
    assert t.omitted_bytes > 0
    if t.direction == "head":
        assert text.startswith(t.preview) and len(t.preview) < len(text)
        assert t.kept_bytes == nbytes(t.preview)
        cut = len(t.preview)
        assert not (_high(text[cut - 1 : cut]) and _low(text[cut : cut + 1]))  # no split surrogate pair
    elif t.direction == "tail":
        assert text.endswith(t.preview) and len(t.preview) < len(text)
        assert t.kept_bytes == nbytes(t.preview)
        cut = len(text) - len(t.preview)
        assert not (_high(text[cut - 1 : cut]) and _low(text[cut : cut + 1]))
    else:
        assert t.direction == "head_tail"
        head, tail = split_head_tail(t)
        assert text.startswith(head) and text.endswith(tail)
        assert len(head) + len(tail) < len(text)
        assert t.kept_bytes == nbytes(head) + nbytes(tail)
        assert 1 <= t.resume_line <= t.tail_start_line  # type: ignore[operator]
    hint(t, "out_x")
    return t


# -- real outputs ----------------------------------------------------------------------------------


def _tool_outputs(name: str) -> list[str]:
    files = corpus_files(f"normalized/{name}")
    if not files:
        pytest.skip("the shared corpus is absent")
    return [r["content"] for r in map(json.loads, files[0].read_text("utf-8").splitlines()) if r["role"] == "tool"]


@needs_corpus
def test_real_pytest_outputs_keep_their_summary() -> None:
    outputs = [o for o in _tool_outputs("mini-swe-agent__pytest-dev__pytest-6197.jsonl") if " failed" in o[-400:]]
    assert outputs
    for output in outputs:
        assert looks_important_at_end(output)
        t = truncate(output, max_lines=40)
        assert t is not None and t.direction == "head_tail"
        summary = [line for line in output.splitlines() if re.match(r"^=+ .*failed.* in [\d.]+s =+$", line)][-1]
        assert summary in t.preview


@needs_corpus
def test_real_huge_diff_is_cut_at_the_head() -> None:
    output = max(_tool_outputs("mini-swe-agent__psf__requests-1142.jsonl"), key=len)
    assert len(output) > 800_000
    t = truncate(output, max_chars=share_cap_chars(128_000))
    assert t is not None and t.direction == "head"
    assert nbytes(t.preview) <= 50 * 1024 and output.startswith(t.preview) and t.preview.endswith("\n")
    assert t.kept_lines + t.omitted_lines == line_count(output)

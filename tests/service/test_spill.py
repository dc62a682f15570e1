"""The content-addressed spill files: exact line slices, grep, bounds, dedup, safety, memory."""

from __future__ import annotations

import hashlib
import os
import random
import re
import stat
import threading
import time
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import pytest
import regex
from conftest import longest_tool_output, needs_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.blobs import lineindex, spill
from contextfold.blobs import search as linesearch
from contextfold.blobs.spill import Line, SpillFiles
from contextfold.config import load_settings
from contextfold.errors import NotFoundError, OutputDamaged
from contextfold.service.facade import ContextService


def expected_lines(text: str) -> list[str]:
    """The line rule: split on "\\n"; a trailing newline opens no extra line; "" has none."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def reassemble(lines: list[str], text: str) -> str:
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def read_all(store: SpillFiles, digest: str, *, limit: int = 200, max_chars: int = 20_000) -> list[Line]:
    """Every line, following next_offset page by page, checking the paging contract on the way."""
    lines: list[Line] = []
    offset: int | None = 1
    while offset is not None:
        page = store.read_lines(digest, offset, limit, max_chars)
        assert page.offset == offset
        if page.total_lines:
            assert page.lines, "a page inside the file must make progress"
        assert len(page.lines) <= limit
        assert [line.number for line in page.lines] == list(range(offset, offset + len(page.lines)))
        if len(page.lines) > 1:
            assert sum(len(line.text) for line in page.lines) <= max_chars
        if page.has_more:
            assert page.next_offset == offset + len(page.lines)
        else:
            assert page.next_offset is None
            assert not page.lines or page.lines[-1].number == page.total_lines
        lines.extend(page.lines)
        offset = page.next_offset
    return lines


@pytest.fixture
def store(tmp_path: Path) -> SpillFiles:
    return SpillFiles(tmp_path / "outputs")


def stored_names(store: SpillFiles) -> list[str]:
    return sorted(os.listdir(store.root))


# -- the corpus's longest real output ---------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_output() -> str:
    """The corpus's longest tool output (whichever file holds it)."""
    return longest_tool_output()[2]


@needs_corpus
def test_corpus_output_is_stored_exactly(store: SpillFiles, corpus_output: str) -> None:
    text = corpus_output
    assert text.count("\n") > 1_000  # enough lines for the probes below to mean something
    expected = expected_lines(text)
    written = store.write(text)
    data = text.encode("utf-8")
    assert written.digest == hashlib.sha256(data).hexdigest()
    assert (written.bytes, written.lines, written.created) == (len(data), len(expected), True)
    assert (store.root / written.digest).read_bytes() == data

    total = len(expected)
    rng = random.Random(1142)
    probes = [(1, 1), (1, 200), (2, 7), (total // 2, 200), (total - 1, 200), (total, 1), (total, 50)]
    probes += [(rng.randint(1, total), rng.randint(1, 500)) for _ in range(60)]
    for offset, limit in probes:
        page = store.read_lines(written.digest, offset, limit, max_chars=10**9)
        want = expected[offset - 1 : offset - 1 + limit]
        assert [line.text for line in page.lines] == want, (offset, limit)
        assert [line.number for line in page.lines] == list(range(offset, offset + len(want)))
        assert not any(line.truncated for line in page.lines)
        assert page.total_lines == total
        assert page.has_more == (offset + len(want) <= total)
        assert page.next_offset == (offset + len(want) if page.has_more else None)

    for offset in (total + 1, total + 1000):
        page = store.read_lines(written.digest, offset, 10)
        assert (page.lines, page.total_lines, page.has_more, page.next_offset) == ([], total, False, None)

    # Default bounds (200 lines / 20,000 chars) and a tight character budget both chain
    # through the whole file and put it back together byte for byte.
    for limit, max_chars in [(200, 20_000), (1000, 3_000)]:
        lines = read_all(store, written.digest, limit=limit, max_chars=max_chars)
        assert reassemble([line.text for line in lines], text) == text


@needs_corpus
def test_grep_corpus_output(store: SpillFiles, corpus_output: str) -> None:
    text = corpus_output
    lines = expected_lines(text)
    digest = store.write(text).digest
    needle = "prepare_auth"
    want = [i + 1 for i, line in enumerate(lines) if needle in line]
    # Pinned as well, so a shared mistake in the line rule cannot hide: the diff defines the
    # method in build/lib/requests/models.py on line 4940.
    assert want == [4768, 4770, 4771, 4940, 16586]
    assert lines[4939] == "+    def prepare_auth(self, auth):"

    found = store.grep(digest, needle, max_matches=1000)
    assert [m.line.number for m in found.matches] == want
    assert all(m.line.text == lines[m.line.number - 1] for m in found.matches)
    assert (found.total_lines, found.truncated) == (len(lines), False)

    # A regular expression through the regex engine, checked against Python's re.
    import re

    pattern = r"def prepare_(\w+)\(self, (\w+)"
    want_re = [i + 1 for i, line in enumerate(lines) if re.search(pattern, line)]
    assert [m.line.number for m in store.grep(digest, pattern, max_matches=1000).matches] == want_re

    # Context: up to 3 neighbours on each side, each line shown once (a line already shown
    # as the previous match's `after` is not repeated in the next `before`).
    with_context = store.grep(digest, needle, context=3, max_matches=1000)
    assert [m.line.number for m in with_context.matches] == want
    shown_until = 0
    for k, m in enumerate(with_context.matches):
        n = m.line.number
        next_match = want[k + 1] if k + 1 < len(want) else len(lines) + 1
        assert [b.number for b in m.before] == list(range(max(n - 3, shown_until + 1), n))
        assert [a.number for a in m.after] == list(range(n + 1, min(n + 3, next_match - 1) + 1))
        for x in (*m.before, m.line, *m.after):
            assert x.text == lines[x.number - 1]
        shown_until = (m.after or [m.line])[-1].number

    capped = store.grep(digest, needle, max_matches=2)
    assert [m.line.number for m in capped.matches] == want[:2]
    assert capped.truncated

    assert store.grep(digest, needle.upper()).matches == []
    insensitive = store.grep(digest, needle.upper(), ignore_case=True, max_matches=1000)
    assert [m.line.number for m in insensitive.matches] == want


# -- line rules and bounds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("\n", [""]),
        ("\n\n", ["", ""]),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\n\nb", ["a", "", "b"]),
        ("a\r\nb\r\n", ["a\r", "b\r"]),
        ("lone\rcarriage\n", ["lone\rcarriage"]),
        ("naïve ✓ 🙂\n中文", ["naïve ✓ 🙂", "中文"]),
    ],
)
def test_line_rules(store: SpillFiles, text: str, lines: list[str]) -> None:
    written = store.write(text)
    assert written.lines == len(lines)
    page = store.read_lines(written.digest)
    assert [line.text for line in page.lines] == lines
    assert page.total_lines == len(lines)
    assert not page.has_more


def test_empty_output(store: SpillFiles) -> None:
    written = store.write(b"")
    assert written == spill.SpilledFile(hashlib.sha256(b"").hexdigest(), 0, 0, created=True)
    assert store.write_stream(iter([])).created is False  # same (empty) content
    page = store.read_lines(written.digest)
    assert (page.lines, page.total_lines, page.has_more, page.next_offset) == ([], 0, False, None)
    found = store.grep(written.digest, "")
    assert (found.matches, found.total_lines, found.truncated) == ([], 0, False)


def test_page_stops_before_a_line_that_does_not_fit(store: SpillFiles) -> None:
    text = "\n".join(["a" * 60, "b" * 60, "c" * 250, "d" * 10, "e" * 10]) + "\n"
    digest = store.write(text).digest
    first = store.read_lines(digest, 1, 10, max_chars=100)
    assert [(line.number, line.text) for line in first.lines] == [(1, "a" * 60)]
    assert (first.has_more, first.next_offset) == (True, 2)
    second = store.read_lines(digest, 2, 10, max_chars=100)
    assert [line.text for line in second.lines] == ["b" * 60]
    # A line longer than the whole budget is cut to it, and the next page goes on after it.
    third = store.read_lines(digest, 3, 10, max_chars=100)
    assert third.lines == [Line(3, "c" * 100, truncated=True)]
    assert third.next_offset == 4
    fourth = store.read_lines(digest, 4, 10, max_chars=100)
    assert [line.text for line in fourth.lines] == ["d" * 10, "e" * 10]
    assert (fourth.has_more, fourth.next_offset) == (False, None)
    assert [line.number for line in store.read_lines(digest, 1, 2, max_chars=10**6).lines] == [1, 2]


def test_truncation_counts_characters_not_bytes(store: SpillFiles) -> None:
    digest = store.write("é🙂" * 100 + "\nnext").digest
    line = store.read_lines(digest, max_chars=7).lines[0]
    assert line == Line(1, "é🙂é🙂é🙂é", truncated=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offset": 0}, "offset must be an integer >= 1"),
        ({"offset": -5}, "offset must be an integer >= 1"),
        ({"limit": 0}, "limit must be an integer >= 1"),
        ({"max_chars": 0}, "max_chars must be an integer >= 1"),
    ],
)
def test_read_lines_rejects_bad_bounds(store: SpillFiles, kwargs: dict, message: str) -> None:
    digest = store.write("x\n").digest
    with pytest.raises(ValueError, match=message):
        store.read_lines(digest, **kwargs)


# -- what a client could send ----------------------------------------------------------------------

BAD_DIGESTS = [
    "../../etc/passwd",
    "",
    "A" * 64,
    "ABCDEF0123456789" * 4,
    "a" * 63,
    "a" * 65,
    "a" * 62 + "/x",
    "/" + "a" * 63,
    "a" * 64 + "\n",
    "a" * 64 + ".idx",
    "g" * 64,
    "..",
    None,
    b"a" * 64,
]


@pytest.mark.parametrize("digest", BAD_DIGESTS)
def test_bad_digests_never_reach_the_filesystem(store: SpillFiles, digest: object) -> None:
    store.write("secret\n")
    calls = [
        lambda: store.exists(digest),  # type: ignore[arg-type]
        lambda: store.read_lines(digest),  # type: ignore[arg-type]
        lambda: store.grep(digest, "x"),  # type: ignore[arg-type]
        lambda: store.delete(digest),  # type: ignore[arg-type]
    ]
    with mock.patch("builtins.open", side_effect=AssertionError("opened a file")):
        for call in calls:
            with pytest.raises(ValueError, match="invalid content digest"):
                call()


def test_missing_digest(store: SpillFiles) -> None:
    digest = hashlib.sha256(b"never written").hexdigest()
    assert not store.exists(digest)
    with pytest.raises(FileNotFoundError, match=f"no spilled content with sha256 {digest}"):
        store.read_lines(digest)
    with pytest.raises(FileNotFoundError, match="deleted"):
        store.grep(digest, "x")
    store.delete(digest)  # nothing to delete is fine


def test_delete(store: SpillFiles) -> None:
    keep = store.write("keep\n")
    gone = store.write("gone\n")
    store.delete(gone.digest)
    assert not store.exists(gone.digest)
    assert store.exists(keep.digest)
    with pytest.raises(FileNotFoundError):
        store.read_lines(gone.digest)
    assert stored_names(store) == sorted([keep.digest, keep.digest + ".idx"])
    assert [f.digest for f in store.files()] == [keep.digest]
    store.delete(gone.digest)
    assert store.write("gone\n").created  # written again after the delete


def test_read_text(store: SpillFiles) -> None:
    digest = store.write(b"whole\n\xff text\n").digest
    assert store.read_text(digest) == "whole\n\ufffd text\n"
    assert store.read_text(digest, max_bytes=13) == "whole\n\ufffd text\n"
    with pytest.raises(ValueError, match="13 bytes, over the 12-byte limit"):
        store.read_text(digest, max_bytes=12)
    with pytest.raises(ValueError, match="invalid content digest"):
        store.read_text("../" + digest)
    with pytest.raises(FileNotFoundError):
        store.read_text(hashlib.sha256(b"nothing").hexdigest())


# -- writing ---------------------------------------------------------------------------------------


def test_dedup_and_listing(store: SpillFiles) -> None:
    first = store.write("same\ncontent\n")
    assert first.created and first.lines == 2
    os.utime(store.root / first.digest, (1_000_000, 1_000_000))
    again = store.write(b"same\ncontent\n")
    streamed = store.write_stream([b"same\n", b"", b"cont", bytearray(b"ent\n")])
    assert again == streamed == spill.SpilledFile(first.digest, first.bytes, 2, created=False)
    # Writing again counts as fresh for age-based retention.
    assert (store.root / first.digest).stat().st_mtime > 1_000_000

    other = store.write("other")
    listed = sorted(store.files(), key=lambda f: f.digest)
    assert [(f.digest, f.bytes) for f in listed] == sorted([(first.digest, first.bytes), (other.digest, other.bytes)])
    assert store.total_bytes() == first.bytes + other.bytes
    assert all(isinstance(f.mtime, float) for f in listed)


def test_modes(tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    store = SpillFiles(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700  # fixed, not only set on creation
    digest = store.write("secret token\n").digest
    assert stat.S_IMODE((root / digest).stat().st_mode) == 0o600
    assert stat.S_IMODE((root / f"{digest}.idx").stat().st_mode) == 0o600
    fresh = SpillFiles(tmp_path / "a" / "b")
    assert stat.S_IMODE(fresh.root.stat().st_mode) == 0o700


def test_failed_writes_leave_nothing(store: SpillFiles) -> None:
    def broken() -> Iterator[bytes]:
        yield b"x" * 1_000_000
        yield b"partial line"
        raise RuntimeError("the tool died")

    with pytest.raises(RuntimeError, match="the tool died"):
        store.write_stream(broken())
    assert stored_names(store) == []

    with pytest.raises(TypeError, match="bytes chunks"):
        store.write_stream(["text"])  # type: ignore[list-item]
    assert stored_names(store) == []

    with mock.patch("contextfold.blobs.files.os.fsync", side_effect=OSError(28, "No space left on device")):
        with pytest.raises(OSError, match="No space left"):
            store.write("a" * 10_000)
    assert stored_names(store) == []


def test_stale_temp_files_are_cleaned(tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    store = SpillFiles(root)
    stale, fresh = root / ".tmp-stale", root / ".tmp-fresh"
    stale.write_bytes(b"left by a crash")
    fresh.write_bytes(b"another process is writing")
    os.utime(stale, (time.time() - 3 * 86400,) * 2)
    SpillFiles(root)
    assert not stale.exists() and fresh.exists()
    assert list(store.files()) == []  # temp files are never listed as content


def test_concurrent_writes_of_the_same_content(store: SpillFiles) -> None:
    data = os.urandom(1 << 20).hex().encode()  # 2 MB, written by every thread at once
    barrier = threading.Barrier(4)
    results: list[spill.SpilledFile] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            if i % 2:
                results.append(store.write(data))
            else:
                results.append(store.write_stream(data[j : j + 65536] for j in range(0, len(data), 65536)))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.digest for r in results}) == 1
    assert sum(r.created for r in results) == 1
    digest = results[0].digest
    assert stored_names(store) == [digest, f"{digest}.idx"]
    assert (store.root / digest).read_bytes() == data


# -- bytes that are not text -----------------------------------------------------------------------


def test_invalid_utf8_is_stored_losslessly_and_rendered_safely(store: SpillFiles) -> None:
    data = b"ok\n\xff\xfe bad \xc3\n\x00\x01\x1b[31m bin\r\nend \xe2\x82"
    written = store.write(data)
    assert (store.root / written.digest).read_bytes() == data
    page = store.read_lines(written.digest)
    assert [line.text for line in page.lines] == [
        "ok",
        "\ufffd\ufffd bad \ufffd",
        "\x00\x01\x1b[31m bin\r",
        "end \ufffd",
    ]
    assert [m.line.number for m in store.grep(written.digest, "bad").matches] == [2]
    assert [m.line.number for m in store.grep(written.digest, r"b.d|\x1b").matches] == [2, 3]
    assert [m.line.number for m in store.grep(written.digest, "\ufffd").matches] == [2, 4]


def test_text_with_lone_surrogates_is_kept(store: SpillFiles) -> None:
    # \udcff is how Python carries the raw byte 0xff (surrogateescape); \ud800 is half a pair.
    written = store.write("raw \udcff byte\nhalf \ud800 pair\n")
    data = b"raw \xff byte\nhalf \xed\xa0\x80 pair\n"
    assert written.digest == hashlib.sha256(data).hexdigest()
    assert (store.root / written.digest).read_bytes() == data
    texts = [line.text for line in store.read_lines(written.digest).lines]
    assert texts == ["raw \ufffd byte", "half \ufffd\ufffd\ufffd pair"]


# -- the line index --------------------------------------------------------------------------------


def numbered(n: int) -> str:
    return "".join(f"line {i} {'x' * (i % 37)}\n" for i in range(1, n + 1))


@pytest.mark.parametrize("damage", ["missing", "garbage", "flipped", "total", "truncated", "empty"])
def test_index_is_rebuilt(store: SpillFiles, damage: str) -> None:
    text = numbered(5_500)
    digest = store.write(text).digest
    idx = store.root / f"{digest}.idx"
    good = idx.read_bytes()
    if damage == "missing":
        idx.unlink()
    elif damage == "garbage":
        idx.write_bytes(os.urandom(len(good)))
    elif damage == "flipped":
        idx.write_bytes(good[:-5] + bytes([good[-5] ^ 0x01]) + good[-4:])
    elif damage == "total":  # 5,500 → 5,501 lines: plausible, only the checksum can tell
        at = lineindex._INDEX_HEADER.size - 4 - 16
        idx.write_bytes(good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1 :])
    elif damage == "truncated":
        idx.write_bytes(good[:-8])
    else:
        idx.write_bytes(b"")
    page = store.read_lines(digest, 4_321, 3)
    assert [line.text for line in page.lines] == expected_lines(text)[4_320:4_323]
    assert page.total_lines == 5_500
    assert idx.read_bytes() == good


def test_index_of_other_content_is_detected(store: SpillFiles) -> None:
    # Same size, same line count, different line starts: the checksum cannot tell, the check
    # that an indexed line start follows a newline does.
    a = b"".join(b"%09d\n" % i for i in range(2_000))
    b = bytearray(a)
    b[9_990:10_010] = b"%011d\n%07d\n" % (999, 1_000)
    b = bytes(b)
    assert len(a) == len(b) and a.count(b"\n") == b.count(b"\n")
    da, db = store.write(a).digest, store.write(b).digest
    good_b = (store.root / f"{db}.idx").read_bytes()
    (store.root / f"{db}.idx").write_bytes((store.root / f"{da}.idx").read_bytes())
    page = store.read_lines(db, 1_001, 3)  # served from the entry for line 1,001
    assert [line.text for line in page.lines] == ["0001000", "000001001", "000001002"]
    assert (store.root / f"{db}.idx").read_bytes() == good_b


def test_index_stride_doubles_when_entries_run_out(store: SpillFiles) -> None:
    text = numbered(1_000)
    with mock.patch.object(lineindex, "_INDEX_STRIDE", 3), mock.patch.object(lineindex, "_INDEX_MAX_ENTRIES", 8):
        written = store.write_stream(text[i : i + 101].encode() for i in range(0, len(text), 101))
    header = (store.root / f"{written.digest}.idx").read_bytes()[: lineindex._INDEX_HEADER.size]
    _, _, stride, size, total, count, _ = lineindex._INDEX_HEADER.unpack(header)
    # 3 → 6 → … → 192: the smallest stride whose entries (one per started stride) fit in 8.
    assert (stride, size, total) == (3 * 2**6, len(text), 1_000)
    assert count == -(-1_000 // stride) == 6
    lines = expected_lines(text)
    for offset in (1, 2, 191, 192, 193, 194, 385, 577, 768, 769, 961, 998, 1_000):
        page = store.read_lines(written.digest, offset, 3)
        assert [line.text for line in page.lines] == lines[offset - 1 : offset + 2], offset


# -- grep ------------------------------------------------------------------------------------------


def test_grep_context_shows_each_line_once(store: SpillFiles) -> None:
    digest = store.write("m1\nx2\nm3\nx4\nx5\nx6\nm7\nx8\nx9\n").digest
    found = store.grep(digest, "^m", context=1)
    shape = [([b.number for b in m.before], m.line.number, [a.number for a in m.after]) for m in found.matches]
    assert shape == [([], 1, [2]), ([], 3, [4]), ([6], 7, [8])]
    wide = store.grep(digest, "^m", context=5)
    shape = [([b.number for b in m.before], m.line.number, [a.number for a in m.after]) for m in wide.matches]
    assert shape == [([], 1, [2]), ([], 3, [4, 5, 6]), ([], 7, [8, 9])]
    assert not found.truncated and not wide.truncated


def test_grep_bounds_and_continuation(store: SpillFiles) -> None:
    lines = [f"{'hit' if i % 3 == 0 else 'miss'} {i} " + "y" * 40 for i in range(1, 301)]
    digest = store.write("\n".join(lines)).digest
    want = [i for i in range(1, 301) if i % 3 == 0]

    capped = store.grep(digest, "hit", max_matches=5)
    assert [m.line.number for m in capped.matches] == want[:5] and capped.truncated
    exact = store.grep(digest, "hit", max_matches=len(want))
    assert len(exact.matches) == len(want) and not exact.truncated  # nothing left after the last

    budget = store.grep(digest, "hit", context=1, max_chars=500)
    returned = [x for m in budget.matches for x in (*m.before, m.line, *m.after)]
    assert budget.truncated and sum(len(x.text) for x in returned) <= 500
    assert all(x.text == lines[x.number - 1] for x in returned)

    # Continue after the last line returned until the end: every match exactly once.
    seen, offset = [], 1
    while True:
        page = store.grep(digest, "hit", max_chars=300, offset=offset)
        seen += [m.line.number for m in page.matches]
        if not page.truncated:
            break
        offset = page.matches[-1].line.number + 1
    assert seen == want

    first_cut = store.grep(digest, "hit", max_chars=10)
    assert first_cut.matches[0].line == Line(3, lines[2][:10], truncated=True)
    assert len(first_cut.matches) == 1 and first_cut.truncated
    assert store.grep(digest, "hit", offset=10_000).matches == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pattern": "("}, r"invalid regular expression '\(': missing \)"),
        ({"pattern": "[a-"}, "invalid regular expression"),
        ({"pattern": "x", "context": -1}, "context must be >= 0"),
        ({"pattern": "x", "max_matches": 0}, "max_matches must be an integer >= 1"),
        ({"pattern": "x", "timeout": 0}, "timeout must be > 0"),
    ],
)
def test_grep_rejects_bad_input(store: SpillFiles, kwargs: dict, message: str) -> None:
    digest = store.write("x\n").digest
    with pytest.raises(ValueError, match=message):
        store.grep(digest, **kwargs)


def test_catastrophic_pattern_times_out(store: SpillFiles) -> None:
    digest = store.write("fine\n" + "a" * 50_000 + "b\n").digest
    started = time.monotonic()
    message = r"regular expression '\(a\+\)\+\$' took more than 0.2 s on line 2"
    with pytest.raises(TimeoutError, match=message):
        store.grep(digest, "(a+)+$", timeout=0.2)
    assert time.monotonic() - started < 5
    with pytest.raises(TimeoutError, match=r"\(a\|aa\)\+\$"):
        store.grep(digest, "(a|aa)+$", timeout=0.2)


def test_a_slow_pattern_does_not_hold_the_gil(store: SpillFiles) -> None:
    # The server runs grep in a worker thread; the event loop must keep running meanwhile.
    digest = store.write("a" * 50_000 + "b\n").digest
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            store.grep(digest, "(a|aa)+$", timeout=0.4)
        except TimeoutError as e:
            errors.append(e)

    thread = threading.Thread(target=worker)
    thread.start()
    last = time.monotonic()
    longest_gap = 0.0
    while thread.is_alive():
        now = time.monotonic()
        longest_gap = max(longest_gap, now - last)
        last = now
    thread.join()
    assert len(errors) == 1
    assert longest_gap < 0.3, f"the main thread stalled {longest_gap:.2f} s"


# -- huge outputs ----------------------------------------------------------------------------------

HUGE_LINES = 2_000_000
PAYLOAD = b"|" + b"0123456789abcdef" * 5 + b"-" * 8  # lines are exactly 100 bytes


def huge_line(n: int) -> bytes:
    return b"%010d" % n + PAYLOAD


def huge_chunks(lines_per_chunk: int = 50_000) -> Iterator[bytes]:
    """200 MB generated on the fly, 5 MB at a time."""
    for start in range(1, HUGE_LINES + 1, lines_per_chunk):
        stop = min(HUGE_LINES + 1, start + lines_per_chunk)
        yield b"\n".join([huge_line(n) for n in range(start, stop)]) + b"\n"


def traced_peak(call):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_deep_read_of_a_200_mb_output_is_cheap(tmp_path: Path) -> None:
    store = SpillFiles(tmp_path / "outputs")
    written = store.write_stream(huge_chunks())
    idx_written = (store.root / f"{written.digest}.idx").stat().st_ino
    try:
        assert (written.bytes, written.lines) == (200_000_000, HUGE_LINES)
        page, peak = traced_peak(lambda: store.read_lines(written.digest, HUGE_LINES - 150, 100))
        assert [line.number for line in page.lines] == list(range(HUGE_LINES - 150, HUGE_LINES - 50))
        want = [huge_line(n) for n in range(HUGE_LINES - 150, HUGE_LINES - 50)]
        assert [line.text.encode() for line in page.lines] == want
        assert (page.total_lines, page.has_more, page.next_offset) == (HUGE_LINES, True, HUGE_LINES - 50)
        assert peak < 5 * 2**20, f"peak {peak:,} bytes while reading 100 lines"
        # Served from the sidecar written with the content, not from a rebuild.
        idx = store.root / f"{written.digest}.idx"
        assert idx.stat().st_ino == idx_written

        last = store.read_lines(written.digest, HUGE_LINES - 2)
        want = [huge_line(n) for n in range(HUGE_LINES - 2, HUGE_LINES + 1)]
        assert [line.text.encode() for line in last.lines] == want
        assert not last.has_more

        # Without its index the file is scanned once, still in bounded memory.
        idx.unlink()
        page, peak = traced_peak(lambda: store.read_lines(written.digest, 1_234_567, 2))
        assert [line.text.encode() for line in page.lines] == [huge_line(1_234_567), huge_line(1_234_568)]
        assert peak < 5 * 2**20, f"peak {peak:,} bytes while rebuilding the index"
    finally:
        store.delete(written.digest)


def test_write_stream_memory_is_bounded(store: SpillFiles) -> None:
    chunk = (b"%09d\n" % 7) * 100_000  # 1 MB, the same object every time
    expected = hashlib.sha256()
    for _ in range(40):
        expected.update(chunk)
    written, peak = traced_peak(lambda: store.write_stream(chunk for _ in range(40)))
    assert written.digest == expected.hexdigest()
    assert (written.bytes, written.lines) == (40 * len(chunk), 4_000_000)
    assert peak < 5 * 2**20, f"peak {peak:,} bytes while streaming 40 MB"
    store.delete(written.digest)  # pytest keeps recent tmp dirs: do not leave 40 MB behind


def test_single_huge_line_is_read_in_bounded_pieces(store: SpillFiles) -> None:
    size = 10 * 2**20
    marks = {  # needles across a 1 MiB window edge, at the edge of an overlap, and deep inside
        2**20 - 4: b"EDGE1!",
        3 * 2**20 + 2**16 - 2: b"EDGE2!",
        5 * 2**20: b"MIDDLE",
    }

    def filler(n: int) -> Iterator[bytes]:  # "é" is 2 bytes: windows must cut between characters
        while n:
            take = min(n, 2**20)
            yield b"\xc3\xa9" * (take // 2)
            n -= take

    def chunks() -> Iterator[bytes]:
        pos = 0
        for at, mark in sorted(marks.items()):
            yield from filler(at - pos)
            yield mark
            pos = at + len(mark)
        yield from filler(size - pos)
        yield b"THE-END"

    written = store.write_stream(chunks())
    assert (written.bytes, written.lines) == (size + 7, 1)
    page, peak = traced_peak(lambda: store.read_lines(written.digest))
    assert page.lines == [Line(1, "é" * 20_000, truncated=True)]
    assert (page.total_lines, page.has_more, page.next_offset) == (1, False, None)
    assert peak < 2**20, f"peak {peak:,} bytes while reading a 10 MB line"

    for needle in ("EDGE1!", "EDGE2", "MIDDLE", "THE-END$", "é{40}MIDDLE", "(?<=é)EDGE1", "^é"):
        # Correctness, not speed: a loaded machine must not turn the per-line time limit into a miss.
        found = store.grep(written.digest, needle, timeout=120)
        assert [m.line.number for m in found.matches] == [1], needle
        assert found.matches[0].line == Line(1, "é" * 20_000, truncated=True)
    for absent in ("^EDGE", "^é*MIDDLE$", "EDGE1$", "NOWHERE", "^THE"):
        assert store.grep(written.digest, absent, timeout=120).matches == [], absent
    store.delete(written.digest)


# -- properties ------------------------------------------------------------------------------------

line_text = st.text(
    alphabet=st.one_of(st.sampled_from("ab \r\t\x00é🙂中"), st.characters(exclude_categories=("Cs",))),
    max_size=30,
).map(lambda s: s.replace("\n", ""))


@st.composite
def outputs(draw: st.DrawFn) -> str:
    lines = draw(st.lists(line_text, max_size=60))
    sep = draw(st.sampled_from(["\n", "\r\n"]))
    return sep.join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.one_of(outputs(), st.text()),
    limit=st.integers(1, 20),
    max_chars=st.integers(1, 80),
    index=st.sampled_from([(1_000, 1 << 16), (1, 2), (2, 3), (5, 4)]),
)
def test_pages_reproduce_the_text(
    store: SpillFiles, text: str, limit: int, max_chars: int, index: tuple[int, int]
) -> None:
    stride, max_entries = index
    with (
        mock.patch.object(lineindex, "_INDEX_STRIDE", stride),
        mock.patch.object(lineindex, "_INDEX_MAX_ENTRIES", max_entries),
    ):
        written = store.write(text)
    # The sidecar may come from an earlier example with another stride: both must read right.
    want = expected_lines(text)
    assert written.lines == len(want)
    lines = read_all(store, written.digest, limit=limit, max_chars=max_chars)
    assert len(lines) == len(want)
    for line, expected in zip(lines, want, strict=True):
        assert line.truncated == (len(expected) > max_chars)
        assert line.text == expected[:max_chars]
    whole = read_all(store, written.digest, limit=limit, max_chars=10_000)
    assert reassemble([line.text for line in whole], text) == text

    if want:
        needle = max(want, key=len)[:3]
        # Plain text takes the byte-search path; anything with regex syntax is escaped.
        pattern = needle if linesearch._REGEX_SYNTAX.isdisjoint(needle) else regex.escape(needle)
        literal = [i + 1 for i, line in enumerate(want) if needle in line]
        found = store.grep(written.digest, pattern, max_matches=100)
        assert [m.line.number for m in found.matches] == literal


# Patterns for the block skim: anchors, classes that cross newlines, empty matches, case, Unicode,
# and the ones the skim must leave to the line-by-line search (lookarounds, \A, \Z, (?r)).
SKIM_PATTERNS = [
    "b",
    "^a",
    "a$",
    "^$",
    r"a\s+b",
    r"[^x]{3}",
    "x*",
    r"\bab\b",
    r"\Bb",
    "(?i)AB",
    "é+",
    r"b\r$",
    r"\Aa",
    r"b\Z",
    "a(?=b)",
    "(?<!a)b",
    "(?r)ab",
    r"(?s)a.b",
    r"\d+",
    "ba|ab",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.text(alphabet="ab \txé\r1", max_size=12), min_size=1, max_size=40),
    pattern=st.sampled_from(SKIM_PATTERNS),
    skim_bytes=st.sampled_from([8, 64, 1 << 18]),
    trailing_newline=st.booleans(),
    invalid=st.booleans(),
)
def test_the_block_skim_finds_exactly_the_lines_a_line_by_line_search_finds(
    store: SpillFiles,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[str],
    pattern: str,
    skim_bytes: int,
    trailing_newline: bool,
    invalid: bool,
) -> None:
    data = "\n".join(lines).encode() + (b"\n" if trailing_newline else b"")
    if invalid:
        data = data.replace(b"1", b"\xff")  # invalid UTF-8 decodes to U+FFFD in both searches
    monkeypatch.setattr(linesearch, "_SKIM_BYTES", skim_bytes)  # small blocks: many block boundaries
    digest = store.write(data).digest
    texts = data.decode("utf-8", "replace").split("\n")
    if texts[-1] == "":  # nothing after the last newline is no line (an empty file has none)
        texts.pop()
    compiled = regex.compile(pattern)
    want = [i + 1 for i, line in enumerate(texts) if compiled.search(line)]
    found = store.grep(digest, pattern, max_matches=1_000, max_chars=1_000_000)
    assert [m.line.number for m in found.matches] == want


# -- damage done behind the store's back -----------------------------------------------------------


def _later(path: Path) -> None:
    """Give a file an mtime a second on, as an editor saving after the store wrote it would."""
    ns = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(ns, ns))


def _stamp(store: SpillFiles, digest: str) -> int:
    """The mtime a file's index records as verified."""
    return lineindex._INDEX_HEADER.unpack_from((store.root / f"{digest}.idx").read_bytes())[1]


def _reads(store: SpillFiles, digest: str) -> list:  # type: ignore[type-arg]
    return [
        lambda: store.read_lines(digest, 1, 10),
        lambda: store.read_lines(digest, 2_990),
        lambda: store.grep(digest, "line 2999 "),
        lambda: store.read_text(digest),
    ]


@pytest.mark.parametrize("index", ["kept", "lost"])
def test_a_truncated_file_is_damaged_not_a_shorter_output(store: SpillFiles, index: str) -> None:
    text = numbered(3_000)
    digest = store.write(text).digest
    with open(store.root / digest, "r+b") as f:
        f.truncate(len(text) // 2)
    if index == "lost":
        (store.root / f"{digest}.idx").unlink()
    for read in _reads(store, digest):
        with pytest.raises(spill.DamagedContent, match=rf"{digest} is damaged: its [\d,]+ bytes no longer hash"):
            read()


@pytest.mark.parametrize("index", ["kept", "lost"])
def test_an_edited_file_is_damaged_even_at_its_old_size(store: SpillFiles, index: str) -> None:
    text = numbered(3_000)
    digest = store.write(text).digest
    path = store.root / digest
    path.write_bytes(text.replace("line 2999 ", "line 2998 ").encode())
    _later(path)
    if index == "lost":
        (store.root / f"{digest}.idx").unlink()
    for read in _reads(store, digest):
        with pytest.raises(spill.DamagedContent, match="changed outside contextfold"):
            read()


def test_a_touched_file_is_rehashed_once_then_trusted(store: SpillFiles) -> None:
    text = numbered(3_000)
    digest = store.write(text).digest
    path, idx = store.root / digest, store.root / f"{digest}.idx"
    assert _stamp(store, digest) == path.stat().st_mtime_ns
    _later(path)
    assert [line.text for line in store.read_lines(digest, 2_001, 2).lines] == [
        "line 2001 " + "x" * (2001 % 37),
        "line 2002 " + "x" * (2002 % 37),
    ]
    assert _stamp(store, digest) == path.stat().st_mtime_ns  # rehashed, found equal, restamped
    restamped = idx.stat().st_ino
    assert store.grep(digest, "line 2999 ").matches
    assert idx.stat().st_ino == restamped  # served from the index: no second rehash


def test_writing_the_content_again_repairs_a_damaged_file(store: SpillFiles) -> None:
    text = numbered(500)
    digest = store.write(text).digest
    path = store.root / digest
    path.write_bytes(path.read_bytes()[:100])
    again = store.write(text)
    assert (again.digest, again.created) == (digest, True)  # stored anew over the damaged copy
    assert path.read_bytes() == text.encode()
    assert read_all(store, digest)[-1].text.startswith("line 500 ")
    assert store.write(text).created is False  # intact now: deduplicated as usual


async def _service(home: Path, **overrides: object) -> ContextService:
    return await ContextService.open(load_settings({"home": home, **overrides}, environ={}))


@pytest.mark.anyio
async def test_read_output_says_an_output_is_damaged(tmp_path: Path) -> None:
    text = numbered(300)
    async with await _service(tmp_path) as svc:
        await svc.open_session("s", model="gpt-4o")
        out = (await svc.spill("s", text)).output_id
        path = svc.settings.spill_path / (await svc.store.get_output(out)).digest
        reads = [
            lambda: svc.read_output(out),
            lambda: svc.read_output(out, offset=250),
            lambda: svc.read_output(out, pattern="line 299 "),
            lambda: svc.output_text(out),
        ]
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.truncate(size - 1_000)
        for read in reads:
            with pytest.raises(OutputDamaged) as caught:
                await read()
            assert str(caught.value) == (
                f"output {out} is damaged: its spilled file holds {size - 1_000:,} bytes, not the {size:,} "
                "stored (cut short outside contextfold); rerun the tool to see it again"
            )
        path.write_bytes(text.replace("line 299 ", "line 298 ").encode())
        _later(path)
        for read in reads:
            with pytest.raises(
                OutputDamaged,
                match=rf"^output {out} is damaged: its spilled file was changed "
                r"outside contextfold \(its bytes no longer match the sha256 they were stored "
                r"under\); rerun the tool to see it again$",
            ):
                await read()
        # Spilling the same content again stores it anew: both outputs read whole.
        again = (await svc.spill("s", text)).output_id
        for output_id in (out, again):
            assert (await svc.output_text(output_id)) == text
            assert (await svc.read_output(output_id, pattern="line 299 ")).matches == 1


def _minute(message: str, word: str) -> float:
    found = re.search(rf"{word} at (\d{{4}}-\d\d-\d\d \d\d:\d\d) UTC", message)
    assert found, message
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()


@pytest.mark.anyio
async def test_a_removed_output_says_whether_it_expired_or_was_evicted_and_when(tmp_path: Path) -> None:
    async with await _service(tmp_path, spill_quota_bytes=40_000, spill_eviction_grace_seconds=0) as svc:
        await svc.tenant("alice").open_session("s", model="gpt-4o")
        spill_one = lambda n: svc.tenant("alice").spill("s", numbered(200) + f"#{n}\n" + "y" * 7_000)  # noqa: E731
        old = (await spill_one(0)).output_id
        await svc.backend.connection.execute(  # type: ignore[attr-defined]
            "UPDATE outputs SET created_at = created_at - 8 * 86400 WHERE id = ?", (old,)
        )
        # Past its retention it reads as expired at once, before gc; gc then leaves a tombstone.
        before = time.time()
        with pytest.raises(NotFoundError, match=r"expired at .* UTC \(outputs are kept 7 days"):
            await svc.tenant("alice").read_output(old)
        assert (await svc.gc()).outputs_removed == 1
        with pytest.raises(NotFoundError) as caught:
            await svc.tenant("alice").read_output(old)
        assert re.fullmatch(
            rf"output {old} expired at .* UTC \(outputs are kept 7 days, spill_retention_days\); "
            "rerun the tool to see it again",
            str(caught.value),
        )
        assert before - 60 <= _minute(str(caught.value), "expired") <= time.time()

        first = (await spill_one(1)).output_id
        for n in range(2, 7):  # 6 × 11 kB through a 40 kB store: the oldest go
            await spill_one(n)
        with pytest.raises(NotFoundError) as caught:
            await svc.tenant("alice").read_output(first)
        assert re.fullmatch(
            rf"output {first} was evicted at .* UTC to keep the spill store under spill_quota_bytes "
            r"\(39.1 KiB\); rerun the tool to see it again, or raise spill_quota_bytes to keep more",
            str(caught.value),
        )
        assert before - 60 <= _minute(str(caught.value), "evicted") <= time.time()
        # Another tenant learns nothing: the id reads as one nobody used.
        with pytest.raises(NotFoundError) as caught:
            await svc.tenant("mallory").read_output(first)
        assert "evicted" not in str(caught.value) and first in str(caught.value)

        # Tombstones are forgotten after four retention periods; then the read is the plain one.
        await svc.outputs.gc(now=time.time() + 4 * 7 * 86_400 + 60)
        for output_id in (old, first):
            assert await svc.tenant("alice").store.output_tombstone(output_id) is None
            with pytest.raises(NotFoundError, match="it may have expired or been deleted"):
                await svc.tenant("alice").read_output(output_id)

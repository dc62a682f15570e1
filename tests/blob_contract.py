"""The contract every blob store backend must keep, as reusable tests.

A backend's test module imports these tests and provides two fixtures: `blobs`, an empty
`BlobStore`, and `reopen`, a function returning a second instance on the same storage (another
process's view of it). `tests/contract/test_blob_contract.py` runs them on the filesystem; a PostgreSQL
or object-store backend adds a module of its own with its fixtures and the same
`from blob_contract import *`.

Only the interface in `contextfold.blobs.base` is used (and the reads built on it): nothing here knows
about paths, files or directories.
"""

from __future__ import annotations

import hashlib
import threading
import tracemalloc
from collections.abc import Iterator

import pytest

from contextfold.blobs import lineindex
from contextfold.blobs.base import BlobStore, StoredBlob
from contextfold.blobs.lines import read_lines, read_text
from contextfold.blobs.search import grep

TEXT = b"first line\nsecond \xc3\xa9 line\n\nlast line without newline"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def whole(blobs: BlobStore, digest: str) -> bytes:
    with blobs.open(digest) as f:
        return f.read()


def listed(blobs: BlobStore) -> dict[str, int]:
    return {info.digest: info.size for info in blobs.list()}


# -- put and read back -----------------------------------------------------------------------------


def test_put_names_content_by_its_sha256(blobs: BlobStore) -> None:
    stored = blobs.put(TEXT)
    assert (stored.digest, stored.bytes, stored.lines, stored.created) == (sha(TEXT), len(TEXT), 4, True)
    assert whole(blobs, stored.digest) == TEXT
    info = blobs.stat(stored.digest)
    assert (info.digest, info.size) == (stored.digest, len(TEXT))
    assert info.modified > 0
    assert listed(blobs) == {stored.digest: len(TEXT)}


def test_empty_content(blobs: BlobStore) -> None:
    stored = blobs.put(b"")
    assert (stored.digest, stored.bytes, stored.lines) == (sha(b""), 0, 0)
    assert whole(blobs, stored.digest) == b""
    assert blobs.read_range(stored.digest, 0, 10) == b""


def test_streamed_chunks_store_their_concatenation(blobs: BlobStore) -> None:
    chunks = [b"first ", b"", bytearray(b"line\nsecond \xc3"), memoryview(b"\xa9 line\n\nlast line without newline")]
    stored = blobs.put(iter(chunks))
    assert stored == StoredBlob(sha(TEXT), len(TEXT), 4, created=True)
    assert whole(blobs, stored.digest) == TEXT


def test_byte_ranges(blobs: BlobStore) -> None:
    digest = blobs.put(TEXT).digest
    assert blobs.read_range(digest, 0, 5) == TEXT[:5]
    assert blobs.read_range(digest, 11, 7) == TEXT[11:18]
    assert blobs.read_range(digest, len(TEXT) - 3, 100) == TEXT[-3:]  # fewer at the end
    assert blobs.read_range(digest, len(TEXT) + 10, 5) == b""
    assert blobs.read_range(digest, 3, 0) == b""
    with pytest.raises(ValueError, match="offset >= 0"):
        blobs.read_range(digest, -1, 5)


def test_a_reader_seeks_and_reports_what_it_opened(blobs: BlobStore) -> None:
    digest = blobs.put(TEXT).digest
    with blobs.open(digest) as f:
        assert f.read(5) == TEXT[:5]
        assert f.tell() == 5
        f.seek(11)
        assert f.read(6) == TEXT[11:17]
        f.seek(0)
        assert f.read() == TEXT
        assert f.read(10) == b""
        info = f.info()
        assert (info.digest, info.size, info.version) == (digest, len(TEXT), blobs.stat(digest).version)


# -- the same content again ------------------------------------------------------------------------


def test_putting_the_same_content_again_stores_it_once(blobs: BlobStore) -> None:
    first = blobs.put(TEXT)
    again = blobs.put(TEXT)
    streamed = blobs.put(TEXT[i : i + 7] for i in range(0, len(TEXT), 7))
    assert again == streamed == StoredBlob(first.digest, first.bytes, first.lines, created=False)
    assert listed(blobs) == {first.digest: len(TEXT)}
    assert whole(blobs, first.digest) == TEXT


@pytest.mark.parametrize("instances", ["one store", "two stores"])
def test_concurrent_puts_of_the_same_content(blobs: BlobStore, reopen, instances: str) -> None:
    data = bytes(range(256)) * 8192 + b"\n" * 1000  # 2 MB, put by both threads at once
    stores = [blobs, blobs if instances == "one store" else reopen()]
    barrier = threading.Barrier(2)
    results: list[StoredBlob] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            if i:
                results.append(stores[i].put(data))
            else:
                results.append(stores[i].put(data[j : j + 65536] for j in range(0, len(data), 65536)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {r.digest for r in results} == {sha(data)}
    if instances == "one store":
        assert sum(r.created for r in results) == 1
    else:
        # Two processes may both write it (the same bytes, atomically); never neither.
        assert any(r.created for r in results)
    assert listed(blobs) == {sha(data): len(data)}
    assert whole(blobs, sha(data)) == data
    assert read_text(blobs, sha(data)) == data.decode("utf-8", "replace")


# -- delete and list -------------------------------------------------------------------------------


def test_delete(blobs: BlobStore) -> None:
    keep = blobs.put(b"keep\n")
    gone = blobs.put(b"gone\n")
    blobs.delete(gone.digest)
    assert listed(blobs) == {keep.digest: 5}
    for call in (
        lambda: blobs.stat(gone.digest),
        lambda: blobs.open(gone.digest),
        lambda: blobs.read_range(gone.digest, 0, 1),
        lambda: read_lines(blobs, gone.digest),
    ):
        with pytest.raises(FileNotFoundError, match=f"no spilled content with sha256 {gone.digest}"):
            call()
    assert blobs.read_index(gone.digest) is None
    assert blobs.put(b"gone\n").created  # stored anew after the delete
    assert whole(blobs, keep.digest) == b"keep\n"


def test_deleting_a_missing_blob_is_not_an_error(blobs: BlobStore) -> None:
    blobs.delete(sha(b"never stored"))
    blobs.delete(sha(b"never stored"))
    assert listed(blobs) == {}


def test_a_second_instance_sees_the_same_blobs(blobs: BlobStore, reopen) -> None:
    digest = blobs.put(TEXT).digest
    other = reopen()
    assert whole(other, digest) == TEXT
    other.delete(digest)
    with pytest.raises(FileNotFoundError):
        blobs.stat(digest)


# -- bad input -------------------------------------------------------------------------------------

BAD_DIGESTS = ["../etc/passwd", "A" * 64, "a" * 63, "a" * 65, "g" * 64, "", None, b"a" * 64]


@pytest.mark.parametrize("digest", BAD_DIGESTS)
def test_bad_digests_are_refused_by_every_method(blobs: BlobStore, digest: object) -> None:
    blobs.put(TEXT)
    for call in (
        lambda: blobs.open(digest),  # type: ignore[arg-type]
        lambda: blobs.read_range(digest, 0, 1),  # type: ignore[arg-type]
        lambda: blobs.stat(digest),  # type: ignore[arg-type]
        lambda: blobs.delete(digest),  # type: ignore[arg-type]
        lambda: blobs.read_index(digest),  # type: ignore[arg-type]
        lambda: blobs.write_index(digest, b"x"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match="invalid content digest"):
            call()
    assert list(listed(blobs)) == [sha(TEXT)]


def test_a_failed_put_stores_nothing(blobs: BlobStore) -> None:
    def broken() -> Iterator[bytes]:
        yield b"x" * 1_000_000
        yield b"partial line"
        raise RuntimeError("the tool died")

    with pytest.raises(RuntimeError, match="the tool died"):
        blobs.put(broken())
    with pytest.raises(TypeError, match="bytes chunks"):
        blobs.put(["text"])  # type: ignore[list-item]
    assert listed(blobs) == {}


# -- big content -----------------------------------------------------------------------------------


def test_big_content_streams_in_and_out_in_bounded_memory(blobs: BlobStore) -> None:
    chunk = b"".join(b"%09d\n" % n for n in range(100_000))  # 1 MB, the same object every time
    count = 48
    expected = hashlib.sha256()
    for _ in range(count):
        expected.update(chunk)
    tracemalloc.start()
    try:
        stored = blobs.put(chunk for _ in range(count))
        put_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        hasher = hashlib.sha256()
        with blobs.open(stored.digest) as f:
            while block := f.read(1 << 20):
                hasher.update(block)
        read_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    try:
        assert (stored.digest, stored.bytes, stored.lines) == (
            expected.hexdigest(),
            count * len(chunk),
            count * 100_000,
        )
        assert hasher.hexdigest() == stored.digest
        assert put_peak < 8 * 2**20, f"peak {put_peak:,} bytes while putting {count} MB"
        assert read_peak < 8 * 2**20, f"peak {read_peak:,} bytes while reading {count} MB"
        assert blobs.read_range(stored.digest, count * len(chunk) - 10, 100) == b"000099999\n"
        page = read_lines(blobs, stored.digest, count * 100_000 - 1, 5)
        assert [line.text for line in page.lines] == ["000099998", "000099999"]
    finally:
        blobs.delete(stored.digest)  # do not leave 48 MB behind in a kept tmp dir


# -- the line index, and the reads built on the interface ------------------------------------------


def test_put_stores_the_line_index_with_the_content(blobs: BlobStore) -> None:
    stored = blobs.put(TEXT)
    assert blobs.read_index(stored.digest) == stored.index
    index = lineindex.parse(stored.index)
    assert index is not None
    assert (index.total_lines, index.size, index.version) == (4, len(TEXT), blobs.stat(stored.digest).version)
    blobs.write_index(stored.digest, b"not an index")
    assert blobs.read_index(stored.digest) == b"not an index"
    # A read finds it broken, rebuilds it from the content and stores it again.
    assert read_lines(blobs, stored.digest, 2, 1).lines[0].text == "second é line"
    assert blobs.read_index(stored.digest) == stored.index


def test_lines_and_search_work_on_the_backend(blobs: BlobStore) -> None:
    text = "".join(f"line {i} {'ERROR' if i % 250 == 0 else 'ok'}\n" for i in range(1, 3001))
    digest = blobs.put(text.encode()).digest
    page = read_lines(blobs, digest, 2_500, 3)
    assert [line.text for line in page.lines] == ["line 2500 ERROR", "line 2501 ok", "line 2502 ok"]
    assert (page.total_lines, page.next_offset) == (3000, 2503)
    found = grep(blobs, digest, r"ERROR$", context=1)
    assert [m.line.number for m in found.matches] == list(range(250, 3001, 250))
    assert found.matches[0].before[0].text == "line 249 ok"
    assert read_text(blobs, digest) == text

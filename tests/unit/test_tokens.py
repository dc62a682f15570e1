"""Token counts: exact against tiktoken itself, offline, and estimates that err high."""

from __future__ import annotations

import gzip
import hashlib
import socket
from importlib import resources
from pathlib import Path

import pytest
import tiktoken
from conftest import corpus_files, corpus_sample, needs_corpus

from contextfold.domain import FilePart, Message, TextPart, ToolPart
from contextfold.errors import TokenizerDataError
from contextfold.tokens import counting as tokens
from contextfold.tokens import encodings
from contextfold.tokens.catalog import lookup
from contextfold.tokens.counting import (
    MESSAGE_OVERHEAD,
    count_message,
    counter_for,
    estimate_chars,
    media_tokens,
)

OPENAI_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tiktoken.Encoding]:
    """tiktoken's own `get_encoding`, fed through its documented cache directory.

    This is an independent path from ours: tiktoken reads the cache file, checks its own expected
    hash and builds the encoding; no network is used because the cache is already filled.
    """
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name, url in OPENAI_URLS.items():
        data = gzip.decompress(resources.files("contextfold._data").joinpath(f"{name}.tiktoken.gz").read_bytes())
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    mp.setattr(tiktoken.registry, "ENCODINGS", {})
    try:
        return {name: tiktoken.get_encoding(name) for name in OPENAI_URLS}
    finally:
        mp.undo()


@pytest.fixture(scope="module", params=["sample", pytest.param("all", marks=pytest.mark.slow)])
def corpus_texts(request: pytest.FixtureRequest) -> list[tuple[str, str]]:
    """Every corpus file's text (the slow set), or the fast set's sample: the smallest of each agent."""
    files = [p for p in corpus_files("**/*") if p.is_file()]
    if not files:
        pytest.skip("the shared corpus is absent")
    if request.param == "sample":
        files = corpus_sample([p for p in files if p.suffix in (".json", ".jsonl", ".traj")])
    return [(str(p), p.read_text("utf-8")) for p in files]


@pytest.fixture(scope="module")
def reference_counts(reference, corpus_texts) -> dict[str, dict[str, int]]:
    """Each corpus file counted once per encoding by the reference."""
    return {
        name: {file: len(enc.encode(text, disallowed_special=())) for file, text in corpus_texts}
        for name, enc in reference.items()
    }


@needs_corpus
@pytest.mark.parametrize(
    ("model", "encoding"),
    [("gpt-4o", "o200k_base"), ("gpt-4.1", "o200k_base"), ("gpt-5", "o200k_base"), ("gpt-4", "cl100k_base")],
)
def test_openai_counts_are_exact_on_every_corpus_file(model, encoding, reference_counts, corpus_texts):
    counter = counter_for(model)
    assert (counter.method, counter.encoding) == ("exact", encoding)
    for name, text in corpus_texts:
        assert counter.count(text) == reference_counts[encoding][name], name


@needs_corpus
def test_claude_is_an_estimate_never_below_o200k(reference_counts, corpus_texts):
    counter = counter_for("claude-sonnet-4-5")
    assert counter.method == "estimate"
    assert counter.factor >= 1.15
    for name, text in corpus_texts:
        assert counter.count(text) >= reference_counts["o200k_base"][name], name


def test_loading_never_touches_the_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("contextfold tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # and no cache to fall back on
    encodings.forget()
    try:
        assert counter_for("gpt-4o").count("hello world") == 2
        assert counter_for("gpt-4").count("hello world") == 2
    finally:
        encodings.forget()


def test_a_rank_file_with_the_wrong_hash_is_refused(monkeypatch):
    monkeypatch.setitem(encodings.EXPECTED_SHA256, "cl100k_base", "0" * 64)
    encodings.forget()
    try:
        with pytest.raises(TokenizerDataError, match="sha256"):
            encodings.encoding("cl100k_base")
    finally:
        encodings.forget()


def test_special_token_text_is_counted_as_ordinary_text():
    # Tool outputs may contain "<|endoftext|>"; counting must not raise on them.
    assert counter_for("gpt-4o").count("a <|endoftext|> b") > 3


def test_unknown_models_get_a_cjk_aware_estimate():
    counter = counter_for("some-local-model")
    # o200k × a safety factor (issue 13), never below the CJK-aware character estimate.
    assert counter.method == "estimate" and counter.encoding == "o200k_base" and counter.factor == 1.2
    chinese = "上下文管理器必须保留用户的指令" * 10
    assert counter.count(chinese) >= len(chinese)  # at least one token a character, not len/4
    assert counter.count("abcd" * 100) >= 100
    assert estimate_chars("") == 0


def test_chinese_estimate_is_not_below_the_real_count(reference):
    text = "压缩对话历史时，工具调用和结果必须成对保留，用户明确的约束不能丢失。" * 20
    assert estimate_chars(text) >= len(reference["o200k_base"].encode(text))


def test_catalog_prefix_lookup():
    assert lookup("gpt-4o-2024-08-06").context == 128_000
    assert lookup("gpt-4o-mini").tokenizer == "o200k_base"
    assert lookup("gpt-4-0613").tokenizer == "cl100k_base"
    assert lookup("claude-sonnet-4-5-20250929").provider == "anthropic"
    assert lookup("anthropic/claude-opus-4-1").output == 32_000
    assert lookup("gemini-2.5-flash").tokenizer == "gemini"
    unknown = lookup("llama-3-70b")
    assert not unknown.known and unknown.id == "llama-3-70b"


def test_every_catalogue_model_leaves_room_for_the_conversation():
    from contextfold.tokens.catalog import budget, known_models

    for info in known_models():
        if info.output:  # embeddings have no reply to reserve for
            assert budget(info).usable >= info.context // 4, info.id


def _png(width: int, height: int) -> bytes:
    import struct

    return b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"


def test_media_estimates():
    import base64

    small = FilePart(mime="image/png", data=base64.b64encode(_png(200, 150)).decode())
    assert media_tokens(small) == 40  # 200 × 150 / 750
    huge = FilePart(mime="image/png", data=base64.b64encode(_png(4000, 3000)).decode())
    assert media_tokens(huge) <= 1_600 * 2  # resized to a 1568 px long edge first
    assert media_tokens(FilePart(mime="image/jpeg", url="https://example.invalid/x.jpg")) == 1_600
    pdf = FilePart(mime="application/pdf", data="A" * 400_000)  # ~300 KB → 6 pages
    assert media_tokens(pdf) == 6 * 2_000


def test_message_counts_include_overhead_and_tool_results():
    counter = counter_for("gpt-4o")
    call = ToolPart(call_id="c1", name="bash", input={"cmd": "ls"}, state="completed", output="a\nb\n")
    message = count_message(Message(role="assistant", parts=[TextPart(text="listing"), call]), counter)
    assert message.parts[0].tokens == counter.count("listing")
    assert message.parts[1].tokens > counter.count("a\nb\n")
    assert message.tokens == MESSAGE_OVERHEAD + sum(p.tokens for p in message.parts)


def test_package_ships_both_rank_files():
    data = resources.files("contextfold._data")
    for name in OPENAI_URLS:
        assert Path(str(data.joinpath(f"{name}.tiktoken.gz"))).stat().st_size > 500_000


# -- long texts are counted in windows, exactly ----------------------------------------------


def _shapes(seed: int) -> str:
    """A text made of runs that stress the window cuts: long single pieces (letters, spaces,
    punctuation, CJK), numbers, words, line breaks, marks, emoji, contractions."""
    import random
    import string

    r = random.Random(seed)
    runs = [
        lambda: r.choice("xyzaQ") * r.randint(1, 900),
        lambda: " " * r.randint(1, 700),
        lambda: "\t " * r.randint(1, 300),
        lambda: "".join(r.choices(string.ascii_lowercase, k=r.randint(1, 900))),
        lambda: "".join(r.choices(string.digits, k=r.randint(1, 50))),
        lambda: "".join(r.choices(".,;:!?-=_/\\'\"()[]{}<>", k=r.randint(1, 600))),
        lambda: "\n" * r.randint(1, 300),
        lambda: "".join(r.choices("的一是不了人我在有", k=r.randint(1, 400))),
        lambda: "".join(r.choices(string.ascii_letters + string.digits + "+/", k=r.randint(1, 500))),
        lambda: " ".join("".join(r.choices(string.ascii_lowercase, k=r.randint(1, 9))) for _ in range(80)),
        lambda: "\u0301" * r.randint(1, 300),
        lambda: "\xa0\u3000" * r.randint(1, 300),
        lambda: "\U0001f600" * r.randint(1, 300),
        lambda: "'s'S'll" * r.randint(1, 10),
    ]
    return "".join(r.choice(runs)() for _ in range(r.randint(1, 40)))


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_long_texts_counted_in_windows_match_tiktoken_exactly(encoding, reference, monkeypatch):
    from contextfold.tokens import windows as tokenwindows

    # Small windows, so that a few kilobytes cross hundreds of cuts of every kind.
    monkeypatch.setattr(tokenwindows, "WINDOW", 400)
    monkeypatch.setattr(tokenwindows, "_NEAR", 60)
    ours = tokens.encoding(encoding)
    for seed in range(120):
        text = _shapes(seed)
        assert tokenwindows.count(ours, text) == len(reference[encoding].encode_ordinary(text)), seed
    for text in ("x" * 5_000, "X" * 5_000, " " * 5_000 + "x", "=" * 6_000 + "abc", "7" * 5_001, "aBcD" * 1_500):
        assert tokenwindows.count(ours, text) == len(reference[encoding].encode_ordinary(text)), text[:8]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_a_million_spaces_are_counted_not_a_tokenizer_panic(encoding, reference):
    """tiktoken's regex gives up on about a million spaces in a row (a Rust panic, which is no
    `Exception` and took the server down); counted in windows, it is exact."""
    counter = counter_for("gpt-4o" if encoding == "o200k_base" else "gpt-4")
    run = 1_280_000
    # The regex splits this text into the spaces but the last, and " x": BPE of the run as one
    # piece (tiktoken's own, without the regex that panics) plus " x" is the exact count.
    expected = len(reference[encoding]._encode_single_piece(b" " * (run - 1)))
    expected += len(reference[encoding].encode_ordinary(" x"))
    assert counter.count(" " * run + "x") == expected

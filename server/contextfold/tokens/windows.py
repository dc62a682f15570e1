"""Exact BPE counts of long texts, window by window: linear time, bounded memory, no panics.

tiktoken is exact, but not made for megabytes in one call. On one long run without spaces it
is super-linear (16 MB of one letter: 17 s and 0.9 GB; a run of 4 MB costs 6x a run of 1 MB),
and on about a million spaces or tabs in a row its regex gives up and the Rust code panics,
which Python cannot catch as an `Exception` and which took the whole server down.

So a text longer than `WINDOW` characters is counted in parts of at most `WINDOW` characters,
each cut where the count of the whole is provably the sum of the counts of the parts:

* **At a piece boundary** of tiktoken's pre-tokenizer (the regex that splits text into pieces
  before BPE): BPE never merges across pieces. The cut is taken only where the character before
  it is not whitespace and the boundary holds whatever follows (the end of a word before a space,
  the start of a line, into or out of a number, a word before punctuation, every third digit of
  a number), so each part is split into the same pieces as the whole.
* **Inside one long piece** (a run of letters, punctuation or spaces, at least the longest token
  from either end of the run), at a token boundary of the left part, and only if the *junction*
  is compatible: the left part's last token and the right part's first token, encoded together,
  give those two tokens again. Two valid BPE encodings joined by a compatible pair are the valid
  encoding of the joined text (the composition property of BPE, see "Properties of BPE" in
  GitHub's rust-gems `bpe` crate), so nothing is lost at the cut.

Tests check the result against `encode_ordinary` of the whole text on both real encodings.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import TYPE_CHECKING

import tiktoken

from contextfold.errors import InvalidInput
from contextfold.tokens.encodings import encoding

if TYPE_CHECKING:
    import regex

WINDOW = 1 << 16
"""Characters counted in one tiktoken call; small enough to stay linear and far from a panic."""
_TRIES = 8
"""Token boundaries tried inside one long piece before counting on to the next piece boundary."""
_SKIP = 4
"""Tokens at a window's end not tried as cuts: truncation changed them, so they rarely pass."""
_NEAR = 1_024
"""A boundary is first looked for this close to the window's end; the whole half window is
searched only when that end is not deep inside one run (where there is none to find)."""

# Unicode White_Space, which is what `\s` means to tiktoken's regex engine (Rust).
_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_WS = r"\t-\r\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_HWS = r"\t\x0b\x0c\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_BOUNDARIES = (
    rf"(?<=[^{_WS}])(?=[{_HWS}])",  # the end of a word (or number, or punctuation), before a space
    r"(?<=[\r\n])(?=[\p{L}\p{N}])",  # the start of a line
    rf"(?<=[^{_WS}\p{{N}}])(?=\p{{N}})",  # into a number
    rf"(?<=\p{{N}})(?=[^{_WS}\p{{N}}])",  # out of a number
    rf"(?<=\p{{L}})(?=[^{_WS}\p{{L}}\p{{N}}\p{{M}}'])",  # a word, then punctuation
)


@cache
def _patterns() -> tuple[regex.Pattern[str], regex.Pattern[str], regex.Pattern[str]]:
    import regex  # tiktoken's own dependency; only long texts need it

    either = "|".join(_BOUNDARIES)
    return regex.compile("(?r)" + either), regex.compile(either), regex.compile(r"(?r)\P{N}")


def count(enc: tiktoken.Encoding, text: str) -> int:
    """`len(enc.encode_ordinary(text))`, computed window by window for long texts."""
    if len(text) <= WINDOW:
        return len(_encode(enc, text))
    return _Counter(enc, text).run()


def _encode(enc: tiktoken.Encoding, text: str) -> list[int]:
    try:
        return enc.encode_ordinary(text)
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise InvalidInput(
            "text", f"the {enc.name} tokenizer could not split this text ({len(text):,} characters); send it in parts"
        ) from None


class _Counter:
    def __init__(self, enc: tiktoken.Encoding, text: str) -> None:
        self.enc = enc
        self.text = text
        self.reach = _max_token_bytes(enc.name) + 2
        """A cut inside a piece keeps this many characters of the run on each side: both parts
        are longer than any token, so tiktoken runs BPE on them (never its whole-token shortcut)."""

    def run(self) -> int:
        text, n = self.text, len(self.text)
        total, pos = 0, 0
        window: list[int] | None = None  # the tokens of text[pos:pos + WINDOW], when known
        while True:
            end = pos + WINDOW
            if end >= n:
                return total + len(window if window is not None else _encode(self.enc, text[pos:]))
            lo = pos + WINDOW // 2
            cut = self._boundary(pos, max(lo, end - _NEAR), end)
            if cut is None and not self._in_run(end - self.reach):
                cut = self._boundary(pos, lo, end)
            if cut is None:
                if window is None:
                    window = _encode(self.enc, text[pos:end])
                split = self._inside(window, pos, lo)
                if split is not None:
                    cut, before, window = split
                    total += before
                    pos = cut
                    continue
                # Nothing provable inside: the last boundary in the window, else the next one after it.
                cut = self._boundary(pos, lo, end)
                if cut is None:
                    match = _patterns()[1].search(text, end, n)
                    cut = match.start() if match is not None else n
                    total += len(_encode(self.enc, text[pos:cut]))
                    pos, window = cut, None
                    continue
            if window is not None:
                total += self._tokens_before(window, pos, cut)
            else:
                total += len(_encode(self.enc, text[pos:cut]))
            pos, window = cut, None

    def _boundary(self, pos: int, lo: int, hi: int) -> int | None:
        """The last piece boundary in (lo, hi] that a part may end at, or None."""
        backwards, _, non_digit = _patterns()
        match = backwards.search(self.text, lo, hi + 1)  # (?r): a match at b looks back to b-1 >= lo
        if match is not None:
            return match.start()
        text = self.text
        if _is_number(text[hi - 1]) and _is_number(text[hi]):
            # Inside a number: pieces are its digits in threes from where the number starts (or
            # from `pos`, itself such a cut).
            other = non_digit.search(text, pos, hi)
            start = other.end() if other is not None else pos
            cut = hi - (hi - start) % 3
            return cut if cut > max(lo, start) else None  # a digit on each side of the cut
        return None

    def _tokens_before(self, window: list[int], pos: int, cut: int) -> int:
        """How many of `window`'s tokens (the encoding of text[pos:pos + WINDOW]) lie before `cut`."""
        text = self.text
        offset = len(text[pos : pos + WINDOW].encode("utf-8"))
        wanted = len(text[pos:cut].encode("utf-8"))
        index = len(window)
        while offset > wanted and index > 0:
            index -= 1
            offset -= len(self.enc.decode_single_token_bytes(window[index]))
        if offset == wanted:
            return index
        return len(_encode(self.enc, text[pos:cut]))  # not at a token boundary: count it anew

    def _inside(self, window: list[int], pos: int, lo: int) -> tuple[int, int, list[int]] | None:
        """A cut inside a long piece: (position, tokens before it, the next window's tokens)."""
        enc, text = self.enc, self.text
        cut = pos + min(WINDOW, len(text) - pos)  # walks back one token at a time
        tries = 0
        for index in range(len(window) - 1, 0, -1):
            token = enc.decode_single_token_bytes(window[index])
            cut -= sum(1 for byte in token if byte & 0xC0 != 0x80)
            if index > len(window) - 1 - _SKIP or token[0] & 0xC0 == 0x80:
                continue  # near the window's end, or the cut would split a character
            if cut <= lo:
                return None
            if not self._in_run(cut):
                continue
            tries += 1
            following = _encode(enc, text[cut : cut + WINDOW])
            if _compatible(enc, window[index - 1], following[0]):
                return cut, index, following
            if tries == _TRIES:
                return None
        return None

    def _in_run(self, cut: int) -> bool:
        """Whether `cut` lies deep inside a run that tiktoken's regex keeps as one piece."""
        reach = self.reach
        if cut < reach or cut + reach > len(self.text):
            return False
        kinds = {_kind(ch) for ch in set(self.text[cut - reach : cut + reach])}
        return len(kinds) == 1 and kinds <= _SPLITTABLE


def _compatible(enc: tiktoken.Encoding, left: int, right: int) -> bool:
    """Whether BPE keeps `left` and `right` apart when they stand side by side."""
    joined = enc.decode_single_token_bytes(left) + enc.decode_single_token_bytes(right)
    return enc._encode_single_piece(joined) == [left, right]


def _is_number(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "N"


_SPLITTABLE = frozenset({"space", "upper", "lower", "letter", "other"})
"""Kinds whose runs the regex matches the same way from any character inside them. Not digits
(in threes from the start), marks (o200k reads them as letters when a run starts with one, as
punctuation after punctuation) or line breaks (o200k's punctuation takes them and a `/` after)."""


def _kind(ch: str) -> str:
    """The class a character belongs to in both encodings' regexes."""
    if ch in "\r\n":
        return "newline"
    if ch in _WHITESPACE:
        return "space"
    category = unicodedata.category(ch)
    if category in ("Lu", "Lt"):
        return "upper"
    if category == "Ll":
        return "lower"
    return {"L": "letter", "M": "mark", "N": "digit"}.get(category[0], "other")


@cache
def _max_token_bytes(name: str) -> int:
    return max(len(token) for token in encoding(name)._mergeable_ranks)  # type: ignore[arg-type]

"""What the proxy does to a result: nothing, or store its oversized parts and show previews (pure).

A result is oversized when its text — text blocks, embedded text resources, a resource read's
text contents, a prompt's text messages — is over any of contextfold's limits taken together
(`max_lines`, `max_bytes`, and `proxy_max_tokens` counted with the session's counter), or when
its `structuredContent` alone is over them. Images, audio and binary resources are left alone
unless one is over `proxy_max_binary_bytes`.

Two steps with the store in between, so this module does no I/O:

1. `plan(result, limits, count)` says which pieces to store whole (`Piece`) and with what preview
   budget, or None when the result goes through untouched (then the caller forwards the bytes it
   received, so a small result is byte-identical to a direct connection);
2. the caller stores each piece and gets back its preview with the `read_output` hint, or a note
   when it could not be stored (`Stored`);
3. `apply(result, plan, stored, ...)` returns the result the client receives.

Structured content is kept valid. Its pieces are stored as indented JSON (so `read_output` can
read it by lines), and the result keeps a shortened copy: long strings cut with a note that names
the output id, long arrays cut to their first items, within the preview budget. For a tool that
declares an `outputSchema` the shortened copy must validate against it (`validate`, supplied by
the caller); when no shortening does (a `maxLength`, `pattern`, `minItems` or `enum` on what had
to be cut), the result becomes an error result whose text is the preview and hint — a valid
result under every protocol version, since `isError` results are not validated — instead of
a result that breaks the client or a schema deleted from the listing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from contextfold.policy.truncate import line_count
from contextfold.safejson import MAX_DEPTH

Count = Callable[[str], int]
Path = tuple[Any, ...]
"""Where a piece is in a result: keys and list indexes from the top (`("content", 2, "text")`)."""
Kind = Literal["text", "binary", "structured"]

HINT_TOKENS = 90
"""What the hint after a preview costs, about: budgets leave room for it."""
MIN_PIECE_TOKENS = 200
"""A preview never gets less than this, however many pieces share the budget."""
COMBINED = ("content", "*")
"""The path of the piece that stands for all of a result's small text blocks at once."""
"""A result with more content blocks (or resource contents, or prompt messages) than this is not
guarded but refused (`TooManyBlocks`): planning is linear in blocks, and this bounds it."""


class Unguardable(ValueError):
    """A result the proxy does not pass on: it answers the request with this error, naming the bound."""


class TooManyBlocks(Unguardable):
    """A result with more content blocks than `proxy_max_result_blocks`."""


class TooDeep(Unguardable):
    """A structured result nested deeper than `MAX_DEPTH` (the house's bound, `safejson`): storing,
    measuring and shortening it would recurse past Python's stack; a direct client gets it whole."""


@dataclass(frozen=True)
class Limits:
    max_tokens: int
    """`proxy_max_tokens`: a result's text over this many tokens is oversized."""
    max_lines: int
    max_bytes: int
    preview_tokens: int
    """`proxy_preview_tokens`: what the previews of one result take together, at most."""
    preview_lines: int
    preview_bytes: int
    max_binary_bytes: int
    """`proxy_max_binary_bytes`: an image, audio clip or blob over this (decoded) is stored instead."""
    max_blocks: int = 100_000
    """`proxy_max_result_blocks`: a result with more content blocks is refused before it is walked."""
    tokens_per_byte: float = 1.25
    """No text counts more tokens than this many times its UTF-8 bytes (the largest safety factor
    over o200k, whose tokens are at least a byte each): a text this rule keeps under the limit is
    not counted at all."""


@dataclass(frozen=True)
class Piece:
    path: Path
    kind: Kind
    text: str
    """What is stored: the text itself, the base64 of a binary, or indented JSON."""
    preview_tokens: int
    """What its preview may take (the budget shared by the pieces of one result)."""
    preview_lines: int = 0
    preview_bytes: int = 0
    mime: str | None = None
    bytes: int = 0
    """For a binary: its decoded size."""


@dataclass(frozen=True)
class Plan:
    pieces: list[Piece]
    combine: list[Path] = field(default_factory=list)
    """Text blocks stored together as one piece (`COMBINED`): many small blocks that no single cut
    brings under the limit."""
    mirrors: list[Path] = field(default_factory=list)
    """Text blocks that are the structured content written as JSON (as the SDKs write it beside
    structured content): they show the structured piece's preview instead of being stored twice."""
    substitutes: dict[str, Path] = field(default_factory=dict)
    """Long strings of the structured content that are also a text block's text (a file's content
    as `{"content": text}` beside the text): in the shortened structure they become that block's
    preview and hint, and they are not stored a second time."""
    structured_budget: int | None = None
    """Tokens the shortened structured content may take (besides the substituted previews); None
    when the structured content goes through unchanged."""


@dataclass(frozen=True)
class Stored:
    """What became of one piece: the text to show in its place (a preview and the hint, or the
    note saying it could not be stored) and its output id when it was."""

    shown: str
    output_id: str | None


@dataclass(frozen=True)
class _Size:
    tokens: int
    lines: int
    bytes: int

    def __add__(self, other: _Size) -> _Size:
        return _Size(self.tokens + other.tokens, self.lines + other.lines, self.bytes + other.bytes)

    def __sub__(self, other: _Size) -> _Size:
        return _Size(self.tokens - other.tokens, self.lines - other.lines, self.bytes - other.bytes)


_ZERO = _Size(0, 0, 0)


# -- where the text and the binaries are ---------------------------------------------------------------


def _blocks(result: dict[str, Any]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every content block or resource content of a tool result, a resource read or a prompt."""
    for key in ("content", "contents"):
        items = result.get(key)
        if isinstance(items, list):
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    yield (key, i), item
    messages = result.get("messages")
    if isinstance(messages, list):
        for i, message in enumerate(messages):
            if isinstance(message, dict) and isinstance(message.get("content"), dict):
                yield ("messages", i, "content"), message["content"]


def slots(result: dict[str, Any]) -> Iterator[tuple[Path, dict[str, Any], Kind]]:
    """(path of the dict holding it, that dict, kind) for every text and binary in a result."""
    for path, block in _blocks(result):
        holders = [(path, block)]
        if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            holders = [((*path, "resource"), block["resource"])]
        for where, holder in holders:
            if isinstance(holder.get("text"), str) and block.get("type") in (None, "text", "resource"):
                yield where, holder, "text"
            elif isinstance(holder.get("blob"), str):
                yield where, holder, "binary"
            elif isinstance(holder.get("data"), str) and block.get("type") in ("image", "audio"):
                yield where, holder, "binary"


def _measure(texts: list[tuple[Path, str]], count: Count, limits: Limits) -> list[tuple[Path, str, _Size]]:
    """The size of each text; tokens are counted only when the texts together could be over the
    limit (by bytes, no count can be higher than `tokens_per_byte` times them), and never for a
    text over `max_bytes`, which is oversized whatever its count."""
    sizes = []
    for path, text in texts:
        nbytes = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        sizes.append((path, text, nbytes, line_count(text)))
    total = sum(nbytes for _, _, nbytes, _ in sizes)
    exact = total * limits.tokens_per_byte > limits.max_tokens
    measured = []
    for path, text, nbytes, lines in sizes:
        if nbytes > limits.max_bytes:
            tokens = max(limits.max_tokens + 1, nbytes // 4)
        elif exact:
            tokens = count(text)
        else:
            tokens = int(nbytes * limits.tokens_per_byte)
        measured.append((path, text, _Size(tokens, lines, nbytes)))
    return measured


def _over(size: _Size, limits: Limits) -> bool:
    return size.tokens > limits.max_tokens or size.lines > limits.max_lines or size.bytes > limits.max_bytes


def _binary_bytes(data: str) -> int:
    """Decoded size of base64 `data`, from its length (no decoding)."""
    stripped = len(data.rstrip("="))
    return stripped * 3 // 4


def structured_text(value: Any) -> str:
    """Structured content as it is stored: indented JSON, so that it reads by lines."""
    return json.dumps(value, ensure_ascii=False, indent=1)


# -- the plan ------------------------------------------------------------------------------------------


def plan(result: dict[str, Any], limits: Limits, count: Count) -> Plan | None:
    """What to store of `result`, or None when it goes to the client unchanged."""
    pieces: list[Piece] = []
    texts: list[tuple[Path, str]] = []
    blocks = _block_count(result)
    if blocks > limits.max_blocks:
        raise TooManyBlocks(
            f"the result has {blocks:,} content blocks, over the proxy's bound of {limits.max_blocks:,} "
            "(proxy_max_result_blocks); ask for less"
        )
    for path, holder, kind in slots(result):
        if kind == "text":
            texts.append((path, holder["text"]))
            continue
        blob = holder.get("blob")
        data = blob if isinstance(blob, str) else holder["data"]
        size = _binary_bytes(data)
        if size > limits.max_binary_bytes:
            pieces.append(Piece(path, "binary", _wrapped(data), 0, mime=holder.get("mimeType"), bytes=size))
    mirrors: list[Path] = []
    substitutes: dict[str, Path] = {}
    budget: int | None = None
    structured = result.get("structuredContent")
    if structured is not None:
        if _nests_deeper(structured, MAX_DEPTH):
            raise TooDeep(
                f"its structuredContent nests more than {MAX_DEPTH} levels deep, over the proxy's bound "
                "(MAX_DEPTH); ask for a flatter result"
            )
        text = structured_text(structured)
        if _over(_measure([(("structuredContent",), text)], count, limits)[0][2], limits):
            budget = limits.preview_tokens
            mirrors = [path for path, text in texts if len(path) == 2 and _mirrors(text, structured)]
            mirrored = set(mirrors)
            texts = [(path, text) for path, text in texts if path not in mirrored]
            by_text = {text: path for path, text in texts if len(text) >= SUBSTITUTE_CHARS}
            substitutes = {value: by_text[value] for value in _strings(structured) if value in by_text}
            if substitutes:  # those strings are stored as their text blocks: this stores the rest
                placeholders = {
                    value: f"[the text of {_where(path)}, stored on its own]" for value, path in substitutes.items()
                }
                text = structured_text(_replace_strings(structured, placeholders))
            if _over(_measure([(("structuredContent",), text)], count, limits)[0][2], limits):
                pieces.append(
                    Piece(
                        ("structuredContent",),
                        "structured",
                        text,
                        limits.preview_tokens,
                        limits.preview_lines,
                        limits.preview_bytes,
                    )
                )
    measured = _measure(texts, count, limits)
    combine: list[Path] = []
    forced = set(substitutes.values())
    if forced or _over(sum((s for _, _, s in measured), _ZERO), limits):
        chosen, combine = _choose(measured, limits, forced)
        n = max(1, len(chosen) + bool(combine))
        share = (
            max(MIN_PIECE_TOKENS, limits.preview_tokens // n),
            max(10, limits.preview_lines // n),
            max(1024, limits.preview_bytes // n),
        )
        pieces += [Piece(path, "text", readable(text), *share) for path, text, _ in chosen]
        if combine:
            combined = set(combine)
            joined = "\n".join(text for path, text, _ in measured if path in combined)
            pieces.append(Piece(COMBINED, "text", readable(joined), *share))
    if not pieces and budget is None:
        return None
    return Plan(pieces, combine, mirrors, substitutes, budget)


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether arrays and objects in `value` nest more than `limit` levels (without recursing)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _block_count(result: dict[str, Any]) -> int:
    return sum(len(v) for v in (result.get(k) for k in ("content", "contents", "messages")) if isinstance(v, list))


SUBSTITUTE_CHARS = 200
"""A string of the structured content this long that is also a text block's text is shown as that
block's preview (shorter ones are too small to matter)."""


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _replace_strings(value: Any, strings: dict[str, str]) -> Any:
    if isinstance(value, str):
        return strings.get(value, value)
    if isinstance(value, list):
        return [_replace_strings(v, strings) for v in value]
    if isinstance(value, dict):
        return {k: _replace_strings(v, strings) for k, v in value.items()}
    return value


def _where(path: Path) -> str:
    return f"content block {path[1] + 1}" if path[0] == "content" else "/".join(map(str, path))


READ_LINE_CHARS = 20_000
"""`read_output` returns at most this much of one line."""


def readable(text: str) -> str:
    """What is stored of a text: the text itself, unless it is JSON with a line longer than
    `read_output` can return (minified JSON), which is stored indented instead, so that every
    part of it can be read back."""
    if len(text) <= READ_LINE_CHARS or not text.lstrip().startswith(("{", "[")):
        return text
    if max(map(len, text.split("\n"))) <= READ_LINE_CHARS:
        return text
    try:
        return structured_text(json.loads(text))
    except (ValueError, RecursionError):
        return text


def _wrapped(data: str, width: int = 76) -> str:
    """Base64 in lines of `width` (as MIME writes it; decoders skip the newlines), to read by lines."""
    data = "".join(data.split())
    return "\n".join(data[i : i + width] for i in range(0, len(data), width))


def _mirrors(text: str, structured: Any) -> bool:
    """Whether a text block is `structured` written as JSON."""
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        return bool(json.loads(text) == structured)
    except (ValueError, RecursionError):
        return False


def _choose(
    texts: list[tuple[Path, str, _Size]],
    limits: Limits,
    forced: set[Path] = frozenset(),  # type: ignore[assignment]
) -> tuple[list[tuple[Path, str, _Size]], list[Path]]:
    """The text slots to store: those `forced`, then the largest first until what stays (previews
    included) fits; and, when the rest are each no bigger than a preview, the plain text blocks to
    store together."""
    chosen = [t for t in texts if t[0] in forced]
    rest = sorted(
        (t for t in texts if t[0] not in forced), key=lambda t: (t[2].tokens, t[2].bytes, t[2].lines), reverse=True
    )
    kept = sum((s for _, _, s in rest), _ZERO) + sum((_preview_size(s, limits) for _, _, s in chosen), _ZERO)
    taken = 0
    while taken < len(rest) and _over(kept, limits) and _shrinks(rest[taken][2], limits):
        path, text, size = rest[taken]
        taken += 1
        chosen.append((path, text, size))
        kept = kept - size + _preview_size(size, limits)
    rest = rest[taken:]
    if not _over(kept, limits):
        return chosen, []
    plain = [path for path, _, _ in rest if len(path) == 2 and path[0] == "content"]
    if len(plain) > 1:
        return chosen, plain
    return chosen + rest, []


def _preview_size(size: _Size, limits: Limits) -> _Size:
    """At most what the preview of a text of `size` takes, its hint included."""
    return _Size(
        min(size.tokens, limits.preview_tokens) + HINT_TOKENS,
        min(size.lines, limits.preview_lines) + 2,
        min(size.bytes, limits.preview_bytes) + 4 * HINT_TOKENS,
    )


def _shrinks(size: _Size, limits: Limits) -> bool:
    """Whether a text of `size` is bigger than its preview would be."""
    return size.tokens > limits.preview_tokens or size.lines > limits.preview_lines or size.bytes > limits.preview_bytes


# -- the result the client gets ------------------------------------------------------------------------


def apply(
    result: dict[str, Any],
    planned: Plan,
    stored: dict[Path, Stored],
    *,
    count: Count,
    output_schema: dict[str, Any] | None = None,
    validate: Callable[[Any, dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """`result` with each planned piece replaced by what `stored` says of it.

    `stored` maps each piece's path to its outcome. `validate(value, schema)` says whether a
    shortened structured content still fits the tool's output schema.
    """
    out = _copy_path_parents(result, planned)
    for piece in planned.pieces:
        outcome = stored[piece.path]
        if piece.kind == "text" and piece.path != COMBINED:
            _holder(out, piece.path)["text"] = outcome.shown
        elif piece.kind == "binary":
            _replace_binary(out, piece, outcome)
    if planned.combine:
        _combine(out, planned.combine, stored[COMBINED].shown)
    if planned.structured_budget is None:
        return out
    structured = next((p for p in planned.pieces if p.kind == "structured"), None)
    whole = stored[structured.path] if structured is not None else None
    if whole is not None:
        for path in planned.mirrors:
            _holder(out, path)["text"] = whole.shown
    shown = {value: stored[path].shown for value, path in planned.substitutes.items()}
    first_id = next((stored[path].output_id for path in planned.substitutes.values() if stored[path].output_id), None)
    output_id = whole.output_id if whole is not None else first_id
    budget = planned.structured_budget + sum(count(text) for text in shown.values())
    for candidate in _shortenings(result["structuredContent"], budget, count, output_id, shown):
        if output_schema is None or validate is None or validate(candidate, output_schema):
            out["structuredContent"] = candidate
            return out
    # No valid shortened copy: an error result (no client validates one) that carries the preview
    # of the structured result first, then the rest of the content as guarded above.
    why = (
        "The tool ran, but its structured result is too large to return whole and no shortened form "
        "of it fits the tool's output schema, so it is given here as text."
    )
    rest = {k: v for k, v in out.items() if k not in ("structuredContent", "content", "isError")}
    mirrored = {path[1] for path in planned.mirrors}
    others = [block for i, block in enumerate(out.get("content") or []) if i not in mirrored]
    head = f"{why}\n{whole.shown}" if whole is not None else why
    return {**rest, "content": [{"type": "text", "text": head}, *others], "isError": True}


NOTE_KEY = "contextfold_note"
"""The key a shortened structured result gets, saying what was cut and where the whole is, when the
tool's output schema allows it (clients such as Claude Code show the model the structured content)."""


def _shortenings(value: Any, budget: int, count: Count, output_id: str | None, shown: dict[str, str]) -> Iterator[Any]:
    """Shortened copies of `value` to offer, best first: with a note of what was cut (when items
    were dropped without a trace), then without."""
    found = shorten(value, budget, count, _note(output_id), shown)
    if found is None:
        return
    shortened, silent = found
    if silent and isinstance(shortened, dict) and NOTE_KEY not in shortened:
        where = f'output {output_id}: read_output(id="{output_id}")' if output_id else "not saved"
        yield {**shortened, NOTE_KEY: f"Shortened to fit: lists cut to their first items. The whole result is {where}."}
    yield shortened


def _note(output_id: str | None) -> str:
    if output_id is None:
        return "[cut: the full result could not be saved]"
    return f'[cut; the full result is output {output_id}: read_output(id="{output_id}")]'


def _copy_path_parents(result: dict[str, Any], planned: Plan) -> dict[str, Any]:
    """A copy of `result` in which every dict and list on a planned path is a new object, so the
    caller's result is never changed."""
    out = dict(result)
    paths = [p.path for p in planned.pieces if p.path != COMBINED and p.kind != "structured"]
    paths += planned.combine + planned.mirrors
    copied: set[int] = set()  # each container once (not once per path through it: 40k blocks)

    def fresh(parent: Any, key: Any) -> Any:
        child = parent[key]
        if id(child) in copied:
            return child
        copy = list(child) if isinstance(child, list) else dict(child)
        copied.add(id(copy))
        parent[key] = copy
        return copy

    for path in paths:
        node: Any = out
        for key in path[:-1]:
            node = fresh(node, key)
        if len(path) >= 2:
            fresh(node, path[-1])
    if planned.combine:
        out["content"] = list(out["content"])
    return out


def _holder(result: dict[str, Any], path: Path) -> dict[str, Any]:
    node: Any = result
    for key in path:
        node = node[key]
    holder: dict[str, Any] = node
    return holder


def _replace_binary(out: dict[str, Any], piece: Piece, outcome: Stored) -> None:
    what = f"{piece.mime or 'binary data'}, {piece.bytes:,} bytes"
    note = f"[{what}, over proxy_max_binary_bytes: not shown. {outcome.shown}]"
    holder = _holder(out, piece.path)
    if piece.path[-1] == "resource":  # an embedded blob resource: a text block in its place
        parent = _holder(out, piece.path[:-1])
        parent.clear()
        parent.update({"type": "text", "text": note})
    elif "blob" in holder:  # a resource read's contents, or a prompt's embedded resource
        uri = holder.get("uri")
        holder.clear()
        holder.update({"uri": uri, "mimeType": "text/plain", "text": note} if uri is not None else {"text": note})
    else:  # an image or audio block
        meta = {k: v for k, v in holder.items() if k in ("annotations", "_meta")}
        holder.clear()
        holder.update({"type": "text", "text": note, **meta})


def _combine(out: dict[str, Any], paths: list[Path], shown: str) -> None:
    """The text blocks at `paths` (all `("content", i)`) become one, where the first was."""
    indexes = sorted(p[1] for p in paths)
    first, dropped = indexes[0], set(indexes[1:])
    content = out["content"]
    content[first] = {"type": "text", "text": shown}
    content[:] = [block for i, block in enumerate(content) if i not in dropped]


# -- shortening structured content ---------------------------------------------------------------------

_ROUNDS = 14


def shorten(
    value: Any, max_tokens: int, count: Count, note: str, shown: dict[str, str] | None = None
) -> tuple[Any, bool] | None:
    """A copy of `value` within `max_tokens` (as compact JSON), and whether items were dropped from a
    list: strings in `shown` replaced by what it maps them to, other strings over a length cut to
    their start and `note`, lists over a length cut to their first items; the lengths halve until
    it fits. None when even the shortest cut does not fit (a huge object of small fields)."""
    strings, items = 4_096, 64
    shown = shown or {}
    for _ in range(_ROUNDS):
        dropped: list[bool] = []
        candidate = _cut(value, strings, items, note, shown, dropped)
        text = json.dumps(candidate, ensure_ascii=False, separators=(",", ":"))
        if count(text) <= max_tokens:
            return candidate, bool(dropped)
        if strings <= 16 and items <= 1:
            return None
        strings, items = max(16, strings // 2), max(1, items // 2)
    return None


def _cut(value: Any, strings: int, items: int, note: str, shown: dict[str, str], dropped: list[bool]) -> Any:
    if isinstance(value, str):
        if value in shown:
            return shown[value]
        return value if len(value) <= strings + len(note) else f"{value[:strings]}… {note}"
    if isinstance(value, list):
        if len(value) > items:
            dropped.append(True)
        return [_cut(v, strings, items, note, shown, dropped) for v in value[:items]]
    if isinstance(value, dict):
        return {k: _cut(v, strings, items, note, shown, dropped) for k, v in value.items()}
    return value

"""Cache anchors: where to put Anthropic `cache_control` breakpoints, and whether caching works (docs/design.md §7).

Anthropic caches a request's prefix — tools, then system, then messages — up to and including a
content block marked `cache_control: {"type": "ephemeral"}`. A request may carry at most four
marks; a prefix shorter than the model's minimum (1,024 tokens; 2,048 for Haiku) is not cached
even when marked; a cached prefix lives five minutes, refreshed by every read; and a mark only
pays off when a later request sends the same prefix again. When it looks for a cached prefix the
API walks back at most 20 blocks from each mark, so a turn that adds many blocks (parallel tool
calls) can step past the previous request's entry unless that position is marked too.

`place_cache_anchors` puts marks on a rendered body. Candidates, with the expected hit rate each
is ranked by (the chance that the prefix it closes is sent again, unchanged, within the TTL):

- **end of system** — `HIT_RATE_SYSTEM` 1.0: identical on every request of a session; only a
  changed system prompt or tool list breaks it, and prune and compaction never touch it.
- **last large stable message** — `HIT_RATE_STABLE` 0.9: the newest message of at least
  `min_prefix_tokens` tokens of its own that lies before the previous turn's prefix. Earlier
  requests marked it as their recent or previous prefix, so marking it again reads their entry,
  and it survives every new turn; it is lost only when prune or compaction rewrites something at
  or before it.
- **previous turn's prefix** — `HIT_RATE_PREVIOUS` 0.75: the message before the previous user
  message, the prefix the previous request most likely cached with its own last mark. Marking it
  lets this request read that entry even when this turn added more than 20 blocks. Lost if the
  previous request is more than five minutes old or history was rewritten since.
- **conversation before the newest user message** — `HIT_RATE_RECENT` 0.6: the longest prefix
  the next request will reuse, but it is written now and pays off only if the next request comes
  within the TTL with nothing before it rewritten. An agent's next tool step almost always does;
  a person's reply may take longer, and a prune or compaction in between invalidates it. When the
  body ends with the assistant, the newest user message is the one the client appends next, so
  this mark goes on the last message. A body that ends with a user message leaves that message
  unmarked, as docs/design.md §7 has it: a retry or an edit replaces it, and it is usually small next to
  the history (a large tool result there is cached by the next request instead).

Each candidate is scored `cached tokens × hit rate` (cached tokens: the whole prefix it closes),
those below `min_prefix_tokens` are dropped, and the best `max_anchors` are kept. The numbers are
relative weights, not measurements: they order the candidates when fewer slots than candidates
are left (the client marks its tools, a candidate moves onto another). `cache_health` measures
what actually happens from reported usage.

A mark goes on the last block of the chosen message. Thinking blocks cannot carry one (the API
rejects it), nor can blank text; the mark then moves to the nearest allowed block before it, in an
earlier message if need be. A message sent as a plain string becomes a one-text-block list.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contextfold.domain import Usage

__all__ = [
    "HIT_RATE_PREVIOUS",
    "HIT_RATE_RECENT",
    "HIT_RATE_STABLE",
    "HIT_RATE_SYSTEM",
    "MAX_BREAKPOINTS",
    "MIN_CACHEABLE_TOKENS",
    "Anchor",
    "CacheHealth",
    "cache_health",
    "count_breakpoints",
    "place_cache_anchors",
]

MAX_BREAKPOINTS = 4
"""The API rejects a request with more `cache_control` marks than this (tools, system and messages together)."""

MIN_CACHEABLE_TOKENS = 1_024
"""The shortest prefix Anthropic caches for most models (2,048 for Haiku)."""

HIT_RATE_SYSTEM = 1.0
HIT_RATE_STABLE = 0.9
HIT_RATE_PREVIOUS = 0.75
HIT_RATE_RECENT = 0.6

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}

_MARKABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})
"""Block types that may carry `cache_control`; thinking and redacted thinking may not."""

Location = Literal["system", "message"]


@dataclass(frozen=True)
class Anchor:
    location: Location
    index: int
    """The system block's index, or the message's index in `body["messages"]`."""
    block: int
    """The content block's index in the message (0 for a system block and for string content)."""
    cached_tokens: int
    """Tokens in the prefix this mark closes: the system prompt plus every message up to this one."""
    hit_rate: float
    """Expected chance that the prefix is sent again unchanged within the TTL (see the module notes)."""
    score: float
    """`cached_tokens × hit_rate`: what the candidates are ranked by."""
    reason: str


@dataclass(frozen=True)
class _Candidate:
    location: Location
    index: int
    block: int
    cached_tokens: int
    hit_rate: float
    reason: str
    rank: int
    """Tie-break between equal scores: lower wins (system, stable, previous, recent)."""

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.location, self.index, self.block)

    @property
    def score(self) -> float:
        return self.cached_tokens * self.hit_rate


def place_cache_anchors(
    body: dict[str, Any],
    *,
    token_counts: Sequence[int],
    system_tokens: int,
    max_anchors: int = MAX_BREAKPOINTS,
    min_prefix_tokens: int = MIN_CACHEABLE_TOKENS,
) -> tuple[dict[str, Any], list[Anchor]]:
    """A copy of `body` with `cache_control` on the best blocks, and those anchors in prompt order.

    `body` is a rendered Anthropic body (`{"system": [...], "messages": [...]}`), left untouched.
    `token_counts[i]` is what `body["messages"][i]` costs; `system_tokens` what the whole system
    prompt costs. Marks already in the body are kept and count toward the limit of four; tool
    definitions are not in the body, so a caller that marks its tools passes `max_anchors=3`.
    The same body and counts always give the same result.
    """
    messages = body.get("messages", [])
    if len(token_counts) != len(messages):
        raise ValueError(f"token_counts has {len(token_counts)} entries for {len(messages)} messages")
    if system_tokens < 0 or any(count < 0 for count in token_counts):
        raise ValueError("token counts must not be negative")
    budget = min(max_anchors, MAX_BREAKPOINTS - count_breakpoints(body))
    candidates = _candidates(body, token_counts, system_tokens, min_prefix_tokens)
    chosen = _choose(candidates, budget, min_prefix_tokens)
    marked = copy.deepcopy(body)
    for candidate in chosen:
        _mark(marked, candidate)
    anchors = [
        Anchor(c.location, c.index, c.block, c.cached_tokens, c.hit_rate, c.score, c.reason)
        for c in sorted(chosen, key=_prompt_order)
    ]
    return marked, anchors


def count_breakpoints(body: dict[str, Any]) -> int:
    """How many `cache_control` marks the body's system and messages already carry."""
    total = sum(1 for block in body.get("system", []) if isinstance(block, dict) and "cache_control" in block)
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            total += "cache_control" in block
            nested = block.get("content")
            if block.get("type") == "tool_result" and isinstance(nested, list):
                total += sum(1 for item in nested if isinstance(item, dict) and "cache_control" in item)
    return total


# -- candidates -----------------------------------------------------------------------------------


def _candidates(
    body: dict[str, Any], token_counts: Sequence[int], system_tokens: int, large_tokens: int
) -> list[_Candidate]:
    messages: list[dict[str, Any]] = body.get("messages", [])
    prefix = _prefix_sums(token_counts, system_tokens)
    found: list[_Candidate] = []
    system = body.get("system")
    if isinstance(system, list) and system and _markable(system[-1]):
        reason = f"end of the system prompt ({system_tokens:,} tokens)"
        found.append(_Candidate("system", len(system) - 1, 0, system_tokens, HIT_RATE_SYSTEM, reason, 0))

    newest_user = _newest_user(messages)
    recent = newest_user - 1 if newest_user is not None else None
    previous_user = _last_user(messages, newest_user)
    previous = previous_user - 1 if previous_user is not None else None
    # "Well before the end": behind the previous turn's prefix, or the recent one when there is none.
    stable = _last_large(token_counts, previous if previous is not None and previous >= 0 else recent, large_tokens)

    wanted: list[tuple[int | None, float, str, int]] = []
    if stable is not None:
        reason = f"last large stable message ({token_counts[stable]:,} tokens of its own)"
        wanted.append((stable, HIT_RATE_STABLE, reason, 1))
    wanted.append((previous, HIT_RATE_PREVIOUS, "the previous turn's prefix (before the previous user message)", 2))
    wanted.append((recent, HIT_RATE_RECENT, "the conversation before the newest user message", 3))
    for index, hit_rate, reason, rank in wanted:
        if index is None or index < 0:
            continue
        target = _target_block(messages, index)
        if target is None:
            continue
        at, block = target
        if (at, block) != _last_block(messages, index):
            reason = f"{reason}; moved from message {index} to the nearest block that can carry a mark"
        found.append(_Candidate("message", at, block, prefix[at], hit_rate, reason, rank))
    return found


def _prefix_sums(token_counts: Sequence[int], system_tokens: int) -> list[int]:
    """`prefix[i]`: tokens of the system prompt and messages 0..i."""
    sums, total = [], system_tokens
    for count in token_counts:
        total += count
        sums.append(total)
    return sums


def _newest_user(messages: Sequence[dict[str, Any]]) -> int | None:
    """Where the newest user message is: when the body ends with the assistant (a stored session
    whose last reply is complete), the one the client appends next, just past the end."""
    if messages and messages[-1].get("role") == "assistant":
        return len(messages)
    return _last_user(messages, len(messages))


def _last_user(messages: Sequence[dict[str, Any]], before: int | None) -> int | None:
    """Index of the last user message before position `before`, or None."""
    if before is None:
        return None
    for index in range(before - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def _last_large(token_counts: Sequence[int], before: int | None, large_tokens: int) -> int | None:
    """The newest message before position `before` that is worth a cache entry on its own."""
    if before is None:
        return None
    for index in range(before - 1, -1, -1):
        if token_counts[index] >= large_tokens:
            return index
    return None


def _last_block(messages: Sequence[dict[str, Any]], index: int) -> tuple[int, int]:
    content = messages[index].get("content")
    return index, (len(content) - 1 if isinstance(content, list) and content else 0)


def _target_block(messages: Sequence[dict[str, Any]], index: int) -> tuple[int, int] | None:
    """The last markable block at or before message `index`, as (message, block); None if there is
    none, or if a mark already ends that prefix (the body came with one)."""
    for at in range(index, -1, -1):
        content = messages[at].get("content")
        if isinstance(content, str):
            if content.strip():
                return at, 0
            continue
        if not isinstance(content, list):
            continue
        for block in range(len(content) - 1, -1, -1):
            item = content[block]
            if isinstance(item, dict) and "cache_control" in item:
                return None
            if _markable(item):
                return at, block
    return None


def _markable(block: Any) -> bool:
    """Whether a mark may go on this block: an allowed type, not blank text, not marked already."""
    if not isinstance(block, dict) or block.get("type") not in _MARKABLE or "cache_control" in block:
        return False
    if block["type"] == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


# -- choice and marking ---------------------------------------------------------------------------


def _choose(candidates: list[_Candidate], budget: int, min_prefix_tokens: int) -> list[_Candidate]:
    if budget <= 0:
        return []
    best: dict[tuple[str, int, int], _Candidate] = {}
    for candidate in candidates:
        if candidate.cached_tokens < min_prefix_tokens:
            continue
        held = best.get(candidate.key)
        if held is None or _ranking(candidate) < _ranking(held):
            best[candidate.key] = candidate
    ranked = sorted(best.values(), key=_ranking)
    return ranked[:budget]


def _ranking(candidate: _Candidate) -> tuple[float, int, int]:
    return (-candidate.score, candidate.rank, candidate.index)


def _prompt_order(candidate: _Candidate) -> tuple[int, int, int]:
    return (0 if candidate.location == "system" else 1, candidate.index, candidate.block)


def _mark(body: dict[str, Any], candidate: _Candidate) -> None:
    """Put the mark on the candidate's block of `body` (a copy the caller owns)."""
    if candidate.location == "system":
        body["system"][candidate.index]["cache_control"] = dict(CACHE_CONTROL)
        return
    message = body["messages"][candidate.index]
    if isinstance(message["content"], str):
        message["content"] = [{"type": "text", "text": message["content"]}]
    message["content"][candidate.block]["cache_control"] = dict(CACHE_CONTROL)


# -- health ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheHealth:
    requests: int
    """Requests in the window."""
    hit_rate: float
    """Cache reads over everything read (fresh input, cache reads and writes) in the window."""
    consecutive_misses: int
    """Newest requests in a row that were large enough to cache yet read nothing from the cache."""
    thrashing: bool
    warning: str | None


def cache_health(
    usages: Sequence[Usage], *, miss_streak: int = 3, min_prompt_tokens: int = MIN_CACHEABLE_TOKENS
) -> CacheHealth:
    """How well prompt caching works over `usages` (oldest first), from provider-reported usage.

    A miss is a request of at least `min_prompt_tokens` input tokens that read nothing from the
    cache. Smaller requests could not have been cached, so they neither count as misses nor break
    a streak; a request that read anything ends it. `miss_streak` misses in a row is thrashing.
    """
    if miss_streak < 1:
        raise ValueError("miss_streak must be at least 1")
    read = sum(u.cache_read for u in usages)
    total = sum(u.total_input for u in usages)
    misses, wrote = 0, False
    for usage in reversed(usages):
        if usage.total_input < min_prompt_tokens:
            continue
        if usage.cache_read > 0:
            break
        misses += 1
        wrote = wrote or usage.cache_write > 0
    thrashing = misses >= miss_streak
    return CacheHealth(
        requests=len(usages),
        hit_rate=read / total if total else 0.0,
        consecutive_misses=misses,
        thrashing=thrashing,
        warning=_thrash_warning(misses, wrote, min_prompt_tokens) if thrashing else None,
    )


def _thrash_warning(misses: int, wrote: bool, min_prompt_tokens: int) -> str:
    head = (
        f"Prompt cache thrashing: the last {misses} requests of at least {min_prompt_tokens:,} input tokens "
        "read nothing from the cache"
    )
    changing = (
        "Something early in the prompt changes on every request — a timestamp or other changing value "
        "in the system prompt, tool definitions sent in a different order or with different contents, "
        "or prune/compaction rewriting history every turn — or requests are more than five minutes "
        "apart, past the cache's lifetime. Keep the tools, the system prompt and older messages "
        "byte-identical between requests, and prune or compact less often."
    )
    if not wrote:
        return (
            f"{head} and wrote nothing to it either. With Anthropic this means the requests carry no "
            "cache breakpoints: request the context with cache anchors, or mark the end of the system "
            "prompt and of the conversation with cache_control yourself. If the provider caches on its "
            f"own (OpenAI), look at the prompt instead. {changing}"
        )
    return f"{head}, though they paid to write to it: every cached prefix is written and never read back. {changing}"

"""The user's own words, quoted in every summary (Constraints & Preferences, `User [m12]: …`).

A correction the user made halfway through ("no, keep the old format") changes the work more than
any file does, and a model summarizing the history tends to fold it into its own paraphrase. So
each message the user wrote (`facts.user_words`: not tool results, not what a harness put in the
user's turn) is quoted word for word, with the stored message it came from:

- newest first, within `quote_budget` characters in all (`QUOTE_SHARE` of the summary's budget,
  at most `QUOTE_CHARS`): every message keeps at least its opening — `OPENING_CHARS`, or down to
  `MIN_OPENING_CHARS` when a long session's many messages would not fit otherwise (a user who
  wrote a hundred messages keeps the first words of each, not the whole of the newest forty) —
  then the newest ones are given their whole text up to `FULL_CHARS`; the budget always has room
  for every message's shortest opening (up to `QUOTE_CHARS`), so only past that do the oldest
  messages go;
- a quote is cut by `clip_quote`: markup the user pasted does not count against its length, and
  a cut never leaves a tag open (which would hide, from a reader that drops markup, everything up
  to the next `>`: the next quotes);
- a long message sent again with changes past its opening (a slash command re-run with edited
  arguments, a task pasted again) is quoted once, where it was said last, citing every sending
  (`User [m12, m19, m25]: …`): each older sending would show the same opening again;
- a previous summary's quotes are older than anything in the new history and are carried first;
- the same selection is what `pins` guarantees in a summary any model wrote.

**The Goal** (`goal`) is the user's task as the user stated it, taken from the same messages by
rule, for any agent and language:

- the task is the first message that asks for something (`is_request`): a greeting, thanks, an
  acknowledgement or a "continue" — a short message whose every word is one of those
  (`_FILLER`), in English and other common languages, with no code, path or sum in it, or a bare
  number (a choice) —
  asks for nothing, and neither does a note the harness put at the head of the turn (`[The result
  of tool call …:]`) or a coding agent's own command line typed at its prompt (`claude --c`: meant
  for the shell); harness nags and reminders never get this far (`facts.user_words` leaves
  them out, by each agent adapter's rules);
- the latest request is the newest message that asks for something (a "yes" or "go on" after it
  leaves it current); it is shown beside the task when it differs;
- the task stays first and essential while later requests refine it ("now also …", "wrong,
  …"): a summary that kept only the newest words would lose what the work is for. When the newest
  request sets the task aside in so many words ("forget that", "never mind", "new task", "scratch
  that", "let's do something else", 算了 …, `_REDIRECT`), the task is kept as an earlier request
  and the newest one is the goal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.compaction.agents.text import clip, collapse
from contextfold.compaction.prose import MAX_INSTRUCTION_CHARS
from contextfold.compaction.record import Said
from contextfold.compaction.template import USER_SAID, cite

QUOTE_CHARS = 8_000
"""All quotes together at most (about 2,000 tokens): reached only by the openings of a long
session's many messages (`quotes` makes room for every message's shortest opening up to this)."""
QUOTE_SHARE = 0.2
"""Of a smaller summary budget, the share the quotes may take (`quote_budget`), beyond the openings
every message keeps. On the corpus the quotes held none of the names needed after a cut that the
rest of the summary or the kept tail did not (0 of 2,176): past the openings and the newest
messages' words they take the working set's room."""
CHARS_PER_TOKEN = 4
FULL_CHARS = 1_000
OPENING_CHARS = 160
"""What each message keeps at least, when all of them fit so."""
MIN_OPENING_CHARS = 64
"""What each keeps at least when many messages share the budget: the words that say what was asked."""

_QUOTE = re.compile(r"^" + re.escape(USER_SAID) + r"(?: (\[[^\]]*\]))?: (.+)$", re.DOTALL)


@dataclass(frozen=True)
class Quote:
    text: str
    """The user's words, whitespace collapsed (possibly already cut by an earlier summary)."""
    citation: str
    """`[m12]`, or '' for messages that are not stored."""

    def bullet(self, limit: int) -> str:
        label = f"{USER_SAID} {self.citation}" if self.citation else USER_SAID
        return f"{label}: {clip_quote(self.text, limit)}"

    def opening(self, limit: int = OPENING_CHARS) -> str:
        """What a summary must hold word for word for this quote to count as kept, when it is
        quoted in `limit` characters."""
        return clip_quote(self.text, min(limit, OPENING_CHARS)).rstrip("…")


TAG_SLACK = 200
"""Characters a quote may run past its limit to end a markup tag it was cut inside."""
MARKUP_SLACK = 400
"""Characters of markup tags a quote may show beyond its limit (see `clip_quote`)."""
_OPEN_TAG = re.compile(r"</?[A-Za-z][^<>]*$")
"""A markup tag begun and not ended: what a clip inside `<field name="x">` leaves at the end."""
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def clip_quote(text: str, limit: int) -> str:
    """`text` (whitespace collapsed) cut as `clip` cuts it at `limit` characters of its words: the
    markup tags it holds (`<td class="…">`) are not counted, up to `MARKUP_SLACK` characters of
    them, so a message that opens with a long tag still shows its words. And a cut never leaves a
    tag open (`… <field na…`): it ends the tag when its `>` comes within `TAG_SLACK` characters,
    else it cuts before the tag. An open tag would make whatever follows it in the summary read as
    part of the tag, up to the next `>`: to a model and to any reader that drops markup, the next
    quotes would vanish."""
    text = collapse(text)
    markup = 0
    for tag in _TAG.finditer(text):
        if tag.start() >= limit + markup or markup >= MARKUP_SLACK:
            break
        markup = min(MARKUP_SLACK, markup + tag.end() - tag.start())
    clipped = clip(text, limit + markup)
    if clipped == text:
        return text
    body = clipped[:-1]
    open_tag = _OPEN_TAG.search(body)
    if open_tag is None:
        return clipped
    end = text.find(">", len(body))
    if end != -1 and end < len(body) + TAG_SLACK and "<" not in text[len(body) : end]:
        return text if end + 1 >= len(text) else text[: end + 1].rstrip() + "…"
    before = body[: open_tag.start()].rstrip()
    if before:
        return before + "…"
    if end != -1 and "<" not in text[len(body) : end]:  # the message opens with a long tag: end it
        return text if end + 1 >= len(text) else text[: end + 1].rstrip() + "…"
    return clipped


def quote_budget(summary_tokens: int | None) -> int:
    """Characters of quotes a summary of `summary_tokens` holds (None: no budget given)."""
    if summary_tokens is None:
        return QUOTE_CHARS
    return max(OPENING_CHARS, min(QUOTE_CHARS, int(summary_tokens * QUOTE_SHARE * CHARS_PER_TOKEN)))


def _opening_cap(lengths: Sequence[int], budget: int) -> int:
    """The largest opening, from `OPENING_CHARS` down to `MIN_OPENING_CHARS`, at which every
    message's opening fits in `budget` (`MIN_OPENING_CHARS` when none does: the oldest then go)."""
    if sum(min(n, OPENING_CHARS) for n in lengths) <= budget:
        return OPENING_CHARS
    low, high = MIN_OPENING_CHARS, OPENING_CHARS
    while high - low > 1:
        middle = (low + high) // 2
        if sum(min(n, middle) for n in lengths) <= budget:
            low = middle
        else:
            high = middle
    return low


def parse_quote(bullet: str) -> Quote | None:
    """The quote a `User [m12]: …` bullet holds, or None for any other bullet."""
    match = _QUOTE.match(bullet)
    if match is None:
        return None
    return Quote(match.group(2).strip(), match.group(1) or "")


def quotes(said: Sequence[Said], carried: Sequence[str] = (), budget: int = QUOTE_CHARS) -> list[tuple[Quote, int]]:
    """(quote, characters to show), oldest first: the previous summary's quote bullets (`carried`,
    other bullets ignored) and then the new history's messages, chosen newest first within
    `budget` characters as the module describes."""
    items: list[tuple[Quote, tuple[int, ...]]] = [(q, ()) for q in map(parse_quote, carried) if q is not None]
    items += [(Quote(collapse(s.text), cite(s.seqs)), tuple(s.seqs)) for s in said]
    seen: set[str] = set()
    unique: list[Quote] = []
    sendings: list[list[int]] = []  # per quote in `unique`, the stored messages that sent it
    sent: dict[str, int] = {}  # a sent message's opening: its quote's index in `unique`
    folded: set[int] = set()  # the quotes that more than one message sent
    for quote, seqs in reversed(items):  # newest first: a message said again is quoted where it was said last
        key = quote.text  # as typed: "Pronto" quoted for "pronto" would not be the user's words verbatim
        opening = key[:OPENING_CHARS]
        if seqs and opening in sent:
            # Said again, or a long message sent again with changes past its opening (a command
            # re-run with edited arguments, a task pasted again): quoted once, citing every sending.
            sendings[sent[opening]] += seqs
            folded.add(sent[opening])
            continue
        if key in seen:
            continue
        seen.add(key)
        if seqs:
            sent[opening] = len(unique)
        unique.append(quote)
        sendings.append(list(seqs))
    for index in folded:
        unique[index] = Quote(unique[index].text, cite(sendings[index]))
    lengths = [len(q.text) for q in unique]
    budget = max(budget, min(QUOTE_CHARS, sum(min(n, MIN_OPENING_CHARS) for n in lengths)))
    cap = _opening_cap(lengths, budget)
    shown: list[int] = []
    left = budget
    for quote in unique:
        size = min(len(quote.text), cap)
        if size > left:
            break
        shown.append(size)
        left -= size
    for index, quote in enumerate(unique[: len(shown)]):
        more = min(len(quote.text), FULL_CHARS) - shown[index]
        if more > 0:
            more = min(more, left)
            shown[index] += more
            left -= more
    chosen = list(zip(unique, shown))
    chosen.reverse()
    return chosen


# -- the goal ---------------------------------------------------------------------------------------

MAX_FILLER_WORDS = 12
"""A message longer than this asks for something, whatever its words."""
_FILLER = frozenset(
    """
    hi hello hey hiya heya yo howdy greetings morning afternoon evening good day night there all everyone folks
    thanks thank thx ty cheers appreciated ok okay k kk sure yes yeah yep yup ya no nope nah fine great cool nice
    awesome perfect excellent amazing brilliant alright right correct exactly true indeed got understood noted
    sounds lgtm continue continuing go on ahead proceed keep going carry resume please pls plz do it that this so
    and or but then now again also just well i im i'm me my mine you your you're yours are am is was be been we
    us our it's its let's lets lol haha hmm um uh wow oh ah welcome bye how what's whats up doing today very much
    a the to for with
    warmup
    sim obrigado obrigada olá oi continua prossiga siga pronto feito beleza certo pode vai isso tudo bem como está
    sí si gracias hola continúa sigue vale bien listo dale qué que tal estás
    oui merci bonjour salut continuez vas-y d'accord ça va comment
    ja danke hallo weiter gut
    grazie ciao
    да спасибо привет продолжай продолжи продолжайте ок хорошо давай ага понятно
    继续 繼續 请继续 請繼續 继续吧 繼續吧 好 好的 好吧 是 是的 对 對 可以 行 嗯 谢谢 謝謝 你好 您好 嗨 没问题 沒問題
    続けて 続けてください はい ありがとう ありがとうございます こんにちは お願いします 進めて
    계속 계속해 계속해줘 네 감사합니다 안녕하세요 좋아요
    merhaba selam teşekkürler sağol tamam devam evet
    hoi dank bedankt doorgaan
    cześć dzięki dziękuję dalej tak
    halo terima kasih lanjut lanjutkan
    xin chào cảm ơn tiếp tục
    namaste dhanyavaad
    مرحبا شكرا نعم استمر
    שלום תודה
    claude codex gemini assistant buddy bro mate dude friend guys team
    """.split()
)
"""Words that ask for nothing by themselves: greetings, thanks, acknowledgements, "continue" (in
the languages users write to agents in), the names a user greets an agent by ("hi claude"), and
the pronouns and little words such openers are made of ("i am you and you are me"). `warmup` is
the prompt Claude Code sends to warm a subagent's cache."""
_WORDS = re.compile(r"[\w'’-]+")
_CODE_OR_MATH = re.compile(r"[+=*/\\_`@#$%^&<>{}\[\]|~]")
"""A character prose does not need: code, a path, a sum (`what's 1+1?`) asks for something."""
_NOTE_HEAD = re.compile(r"^\[[^\[\]\n]{3,200}:\]")
"""A note a harness or an importer puts at the head of a turn (`[The result of tool call …:]`)."""
_AGENT_COMMAND = re.compile(
    r"^(?:claude|codex|gemini|opencode|aider|cursor-agent|qwen)(?:\s+--?[A-Za-z][\w-]*(?:=\S+)?)*\s*$", re.IGNORECASE
)
"""A coding agent's own command line typed at its prompt (`claude --c`, `codex --resume`): meant for
the shell, asking the agent nothing."""
_REDIRECT = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|actually|no|nope|wait|hmm+|so|well|hey)\b[\s,.!:;-]*)*"
    r"(?:forget (?:it|that|this|about|the|what|everything|all)\b|never ?mind\b|scratch that\b|change of plans?\b"
    r"|(?:new|different|another) task\b|ignore (?:that|this|the (?:above|previous|last)|my (?:previous|last)|what i)\b"
    r"|let['’]?s (?:do something else|move on|switch to)\b|moving on\b|drop (?:it|that|this)\b"
    r"|stop (?:working on|doing) |cancel (?:that|this|it)\b"
    r"|esque(?:ça|ce)\b|deixa (?:pra|para) lá|olvida(?:lo)?\b|vergiss\b|забудь\b|算了|先不用|不用了|换个|別做了|别做了)",
    re.IGNORECASE,
)
"""A request that sets the task aside in so many words, at its start."""


def is_request(text: str) -> bool:
    """The user's message asks for something: it is not a greeting, thanks, an acknowledgement or a
    "continue" (only `_FILLER` words or numbers, at most `MAX_FILLER_WORDS`), a note a harness
    put at the head of the turn, or an agent's command line typed at its prompt (`claude --c`)."""
    text = text.strip()
    if not text or _NOTE_HEAD.match(text) or _AGENT_COMMAND.match(text):
        return False
    words = _WORDS.findall(text.casefold())
    if not words:
        return False  # punctuation, an emoji
    if len(words) > MAX_FILLER_WORDS or _CODE_OR_MATH.search(text):
        return True
    return not all(w.strip("'’-") in _FILLER or w.isdigit() for w in words)  # a number: a choice ("ok, 2")


def redirects(text: str) -> bool:
    """The request sets what the user asked before aside ("forget that, …", "new task: …")."""
    return _REDIRECT.match(text) is not None


@dataclass(frozen=True)
class Goal:
    """What a summary's Goal says (see the module doc)."""

    task: str | None
    """The user's task as first stated: the first request, clipped to `MAX_INSTRUCTION_CHARS`."""
    task_seqs: tuple[int, ...] = ()
    latest: str | None = None
    """The newest request, when it is not the task."""
    latest_seqs: tuple[int, ...] = ()
    replaced: bool = False
    """The newest request set the task aside."""

    @property
    def newest(self) -> str | None:
        """The request the work answers now: the latest, else the task."""
        return self.latest or self.task


def goal(said: Sequence[Said], first: str | None = None) -> Goal:
    """The Goal of a history whose user's messages are `said` (oldest first by where each was said
    last, as `Facts.said` holds them). `first`: the first message the user wrote, when `said` may
    have dropped it (it keeps the newest `MAX_SAID`)."""
    if not said and first is None:
        return Goal(None)
    stored = all(s.seqs and min(s.seqs) > 0 for s in said)
    by_first = sorted(said, key=lambda s: min(s.seqs)) if stored else list(said)
    requests = [s for s in by_first if is_request(s.text)]
    task: Said | None
    if first is not None and is_request(first) and not any(clip(s.text, MAX_INSTRUCTION_CHARS) == first for s in said):
        task = Said(first, ())  # said before the messages `said` still holds
    elif requests:
        task = requests[0]
    else:
        task = by_first[0] if by_first else Said(first or "", ())
    newest = next((s for s in reversed(said) if is_request(s.text)), None)
    task_text = clip_quote(task.text, MAX_INSTRUCTION_CHARS) or None
    if newest is None or newest is task or clip_quote(newest.text, MAX_INSTRUCTION_CHARS) == task_text:
        return Goal(task_text, task.seqs)
    return Goal(
        task_text,
        task.seqs,
        clip_quote(newest.text, MAX_INSTRUCTION_CHARS),
        newest.seqs,
        replaced=redirects(newest.text),
    )


__all__ = [
    "FULL_CHARS",
    "MARKUP_SLACK",
    "TAG_SLACK",
    "clip_quote",
    "MAX_FILLER_WORDS",
    "Goal",
    "goal",
    "is_request",
    "redirects",
    "MIN_OPENING_CHARS",
    "OPENING_CHARS",
    "QUOTE_CHARS",
    "Quote",
    "parse_quote",
    "quote_budget",
    "quotes",
]

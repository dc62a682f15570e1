"""Credentials and tokens kept out of everything contextfold derives from a history.

A summary, a hook's handover, a region digest and the working set are written from the stored
history and shown to a model (and through it, often, to logs and other people) long after the
secret that a user pasted or a tool printed scrolled by. So whatever is derived is written from a
**redacted copy** of the history: every secret found is replaced by `REDACTED` (`[redacted]`).
The stored history keeps the original — it is the user's — and `search_history` still finds it.

What counts as a secret, by rule (never by a list of known values):

- **Known key formats**, anywhere: Anthropic and OpenAI keys (`sk-ant-…`, `sk-proj-…`, `sk-…`),
  AWS access key ids (`AKIA…`, `ASIA…`), GitHub tokens (`ghp_…`, `gho_…`, `github_pat_…`),
  GitLab (`glpat-…`), Slack (`xoxb-…`, `xapp-…`, webhook URLs), Google API keys (`AIza…`) and
  OAuth tokens (`ya29.…`), Stripe secret keys (`sk_live_…`, `rk_test_…`), Hugging Face (`hf_…`),
  npm (`npm_…`), PyPI (`pypi-…`), SendGrid (`SG.….…`), JSON Web Tokens (`eyJ….eyJ….…`) and the
  body of a private key's PEM block.
- **Credentials in their place**: the value of an `Authorization` header, a bearer token, the
  password of a URL (`postgres://user:[redacted]@host`).
- **Assignments to a secret's name**, in any syntax that binds a name to a literal: env files and
  shells (`API_TOKEN=…`, `export DB_PASSWORD=…`), JSON and YAML (`"client_secret": "…"`,
  `password: …`), TOML, Python, JS, Go, Ruby and Elixir (`token = "…"`, `apiKey: '…'`,
  `secret := "…"`, `:secret_key_base => "…"`), HTTP headers (`X-Api-Key: …`) and command-line
  flags (`--password x`, `--token=x`). A name is a secret's when its last word is one
  (`password`, `passwd`, `passphrase`, `pwd`, `secret`, `token`, `apikey`, `credentials`, or
  `key` after `api`/`access`/`private`/`secret`/`signing`/…): then any literal value goes. When a
  secret's word stands elsewhere in the name (`secret_key_base`, `password_hash`) or the name just
  ends in `key` (`STRIPE_KEY`), only a value that looks like one goes: a token of 16 characters
  or more, without spaces, mixing letters with digits or symbols (a high-entropy string beside
  such a name).

What is never taken for a secret: values that name one instead of holding it (`$TOKEN`,
`${DB_PASSWORD}`, `{{ secret }}`, `os.environ["API_KEY"]`, `<your-token>`, `YOUR_API_KEY`,
`***`, `None`, `null`, `str`), code that reads one (`token = next_token()`, `password=password`),
an unquoted identifier beside a lower-case name (a variable: `{ token: accessToken }`), and
anything that is not beside a secret's name and not of a known format: git commit ids, UUIDs,
sha256 digests in lock files, base64, file paths and URLs without a password stay, since the
summary must keep the names the agent works with.

**Learned values.** A value found in its place is a secret wherever it appears: the same string
printed alone later (`echo $TOKEN`, a config dump, a working-set name) is redacted too, once it is
long enough and random enough not to be an ordinary word (`LEARNED_MIN_CHARS`, `_looks_secret`).
`redact_history` reads a history once for them; at most `MAX_LEARNED` are kept.

**Where it applies.** `engine.plan_compaction` redacts the head, the earlier history and the
previous summary before anything is written from them, so the extractive summary, the transcript
sent to a summarizer model (which would echo what it is shown) and every pinned fact come from the
redacted copy, and `engine.accept` redacts the summary a model returns once more. The stateless
`summarize`, the hooks' handover (`hooks.handover`) and region digests (the prompt sent for them,
the digest a model wrote and the rule's) do the same.

Every pattern is bounded (no nested quantifiers, fixed maximum lengths, possessive where a
failure could backtrack), so a text is read in time linear in its length whatever it holds.
Pure: no I/O.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from contextfold.domain import Message, Part, ReasoningPart, TextPart, ToolPart

REDACTED = "[redacted]"
LEARNED_MIN_CHARS = 12
"""A secret found in its place is also redacted wherever else it appears once it is this long."""
MAX_LEARNED = 256
"""Learned values kept at most (each one costs a substring search of every text redacted)."""
MIN_LOOSE_CHARS = 16
"""A value beside a name that only may be a secret's is one from this length (see the module doc)."""

# -- known formats --------------------------------------------------------------------------------
# Each pattern begins with its literal prefix (listed beside it): `find` looks for the literal, a
# fast substring search, and tries the pattern only where it stands, at the start of a word.

_TAIL = r"[A-Za-z0-9_\-]"
_KNOWN: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (name, literals, re.compile(pattern))
    for name, literals, pattern in (
        # Anthropic (`sk-ant-api03-…`), OpenAI (`sk-proj-…`, `sk-…`) and others who took the prefix.
        ("sk", ("sk-",), r"sk-(?:ant-[A-Za-z0-9]{2,16}-|proj-|svcacct-|admin-)?" + _TAIL + r"{20,400}+"),
        # Access key ids: long-term (AKIA) and temporary (ASIA); the other prefixes name users and roles.
        ("aws access key id", ("AKIA", "ASIA"), r"A[KS]IA[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[a-z]_[A-Za-z0-9]{36,255}+(?![A-Za-z0-9])"),
        ("github fine-grained", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{22,255}+"),
        ("gitlab", ("glpat-",), r"glpat-[A-Za-z0-9_\-]{20,64}+"),
        ("slack", ("xox",), r"xox[a-z]-[A-Za-z0-9\-]{10,250}+"),
        ("slack app", ("xapp-",), r"xapp-\d-[A-Za-z0-9\-]{10,250}+"),
        (
            "slack webhook",
            ("https://hooks.slack.com/services/",),
            r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,200}+",
        ),
        ("google api key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}"),
        ("google oauth", ("ya29.",), r"ya29\.[0-9A-Za-z_\-]{20,2000}+"),
        ("stripe", ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), r"[sr]k_(?:live|test)_[0-9A-Za-z]{16,250}+"),
        ("hugging face", ("hf_",), r"hf_[A-Za-z0-9]{30,60}+(?![A-Za-z0-9])"),
        ("npm", ("npm_",), r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
        ("pypi", ("pypi-AgE",), r"pypi-AgE[A-Za-z0-9_\-]{50,400}+"),
        ("sendgrid", ("SG.",), r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}+"),
        ("jwt", ("eyJ",), r"eyJ[A-Za-z0-9_\-]{5,2000}+\.eyJ[A-Za-z0-9_\-]{5,8000}+\.[A-Za-z0-9_\-]{8,2000}+"),
    )
)
_PEM = re.compile(
    r"(-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----)"
    r"(.{0,20000}?)(-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
"""A private key's PEM block: its body goes, its armour lines stay (a cut block: to the end)."""

# -- credentials in their place -------------------------------------------------------------------

_AUTHORIZATION = re.compile(
    r"(?i)(?:proxy-)?authorization\\?[\"']?\s{0,4}[:=]\s{0,4}\\?[\"']?\s{0,4}"
    r"(?:(?:bearer|basic|token|bot|digest|apikey|sso-key|negotiate)\s{1,4})?"
    r"(?P<v>[A-Za-z0-9._~+/=:\-]{8,4000}+)"
)
_BEARER = re.compile(r"(?i)bearer\s{1,4}(?P<v>[A-Za-z0-9._~+/=\-]{16,4000}+)")
_URL_PASSWORD = re.compile(r"://[^\s:/?#@'\"<>\[\]{}]{0,256}+:(?P<v>[^\s/?#@'\"<>\[\]{}]{1,256}+)@")
"""From a URL's `://` on (its scheme is checked by code): the password before the `@`."""

# -- assignments and flags ------------------------------------------------------------------------

# Found where a secret's word stands (a substring search for it, in the three ways names are
# cased); the rest of the name is read backwards by code, the operator and value forwards here.
_WORD_LITERALS = ("passw", "passph", "pwd", "secret", "token", "key", "credential")
_ASSIGNMENT = re.compile(
    r"(?i)(?:passw(?:or)?d|passphrase|pwd|secret|token|key|credentials?)(?P<rest>[A-Za-z0-9_.\-]{0,40}+)"
    r"(?P<close>\\?[\"'`])?"  # the closing quote of a quoted key (JSON, YAML, a header)
    r"(?:[ \t]{0,4}:[ \t]{0,4}[A-Za-z_][\w.\[\]|, ]{0,40}?[ \t]{0,4}(?==))?"  # a type annotation: `password: str = …`
    r"(?P<op>[ \t]{0,4}(?::=|=>|=|:)[ \t]{0,8}|[ \t]{1,4})"
    r"(?:\\?(?P<q>[\"'`])(?P<quoted>[^\"'`\\\n]{1,1000}+)\\?(?P=q)"
    r"|(?P<bare>[^\s\"'`,;&|<>(){}\[\]\\]{1,1000}+)(?![(\[]))"
)
_PROSE = re.compile(
    r"(?i)(?:passw(?:or)?d|passphrase|secret|token|key)s?(?![A-Za-z0-9_])"
    r"(?:[,;]?[ \t]{1,4}[A-Za-z\u2019']{1,8}+){0,3}[,;]?(?:[ \t]{0,4}[:=][ \t]{0,4}|[ \t]{1,4})\\?[\"'`]?"
    r"(?P<v>[A-Za-z0-9][A-Za-z0-9_\-+/=.~]{15,400}+)"
)
"""A secret given in words: `the token is "3f…"`, `here's my API key: …` (only a value that looks like
one, and `key` only after `api` or `access`)."""
_NAME_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
_SPLIT_NAME = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

_STRONG_LAST = frozenset({"password", "passwd", "passphrase", "pwd", "secret", "token", "apikey"})
_KEY_QUALIFIERS = frozenset(
    """api access private secret auth signing encryption master license licence account service deploy webhook
    subscription consumer client jwt hmac session app admin write read root sas""".split()
)
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "secret", "token", "apikey"})
_LOOSE_LAST = frozenset({"credential", "credentials", "key"})
_NOT_A_VALUE = frozenset(
    """none null nil true false undefined required optional str string bytes int bool any object secret password
    token redacted hidden masked env environ your my the""".split()
)
_PLACEHOLDER = re.compile(
    r"^(?:\$\{[^}]*\}.*|\$\(.*|\$(?P<var>[A-Za-z_]\w*)|%[A-Za-z_]\w*%|%(?:\(\w+\))?[sdr]|\{\{.*\}\}|<[^<>]*>|\.{3}|…)$"
)
_PLACEHOLDER_WORDS = re.compile(
    r"your[_\- ]|_here\b|example|placeholder|changeme|dummy|redacted|\.{3}|…", re.IGNORECASE
)
"""What stands for a value instead of being one: a variable or command substitution (`$TOKEN`,
`${DB_PASSWORD:-x}`, `$(gh auth token)`, `%APPDATA%`, `%s`), a template (`{{ secret }}`), a
placeholder (`<token>`, `sk-ant-...`, `your-key-here`, `changeme`)."""
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.]*$")
_ROOTED = re.compile(r"^(?:~?\.{0,2}/|[A-Za-z]:\\)")


def _path(value: str, *, rooted: bool = False) -> bool:
    """A file path, not a base64 value with slashes in it: `/`-separated names, none of them random
    (three kinds of character, or two over ten characters long), no `+` or `=`. `rooted`: only a
    path that starts at a root, a home or the current directory (`/etc/x`, `~/x`, `./x`, `C:\\x`)."""
    if rooted and not _ROOTED.match(value):
        return False
    if "/" not in value and "\\" not in value:
        return False
    if "+" in value or "=" in value:
        return False
    for segment in re.split(r"[/\\]", value):
        kinds = sum(
            (any(c.isupper() for c in segment), any(c.islower() for c in segment), any(c.isdigit() for c in segment))
        )
        if kinds == 3 or (kinds == 2 and len(segment) > 10 and not re.search(r"[._\-]", segment)):
            return False
    return True


def _components(name: str) -> list[str]:
    return [c.casefold() for c in _SPLIT_NAME.split(name) if c]


_NEVER_LAST = frozenset(
    """count counts length len size limit limits type types name names id ids file files path paths dir env var
    vars field fields header headers prefix suffix kind mode format url uri endpoint ttl expiry expires expiration
    timeout max min budget usage tokens counter cache index idx enabled required optional policy rotation
    location store source label description text regex pattern placeholder date time timestamp at version since
    until created updated""".split()
)


def _kind(name: str) -> str | None:
    """'strong' when the name's last word is a secret's, 'loose' when it only may name one, else None."""
    words = _components(name)
    if not words:
        return None
    last = words[-1]
    if last in _STRONG_LAST:
        return "strong"
    if last == "key" and len(words) >= 2 and words[-2] in _KEY_QUALIFIERS:
        return "strong"
    if last in _LOOSE_LAST:
        return "loose" if len(words) >= 2 or last != "key" else None
    if last not in _NEVER_LAST and any(w in _SECRET_WORDS for w in words[:-1]):
        return "loose"
    return None


def _looks_secret(value: str, *, strict: bool = False) -> bool:
    """A token of `MIN_LOOSE_CHARS` or more, without spaces, not a path or URL, with digits in it (or,
    unless `strict`, of 32 characters or more and not one word): what a key, a token or a generated
    password is, and not a setting's name (`sidebar-collapsed`)."""
    if len(value) < MIN_LOOSE_CHARS or _path(value) or "://" in value or any(c.isspace() for c in value):
        return False
    if not any(c.isdigit() for c in value) and (strict or len(value) < 32 or value.isalpha()):
        return False
    return _entropy(value) >= 3.0


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts: dict[str, int] = {}
    for c in value:
        counts[c] = counts.get(c, 0) + 1
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in counts.values())


_LABEL = re.compile(r"^[A-Za-z][A-Za-z_.\-]*$")


def _labels(name: str, value: str) -> bool:
    """The value is a name for the secret, not the secret: a word without digits holding the
    name's secret word (`ACCESS_TOKEN = 'accessToken'`, `API_KEY: 'feature_api_key'`)."""
    if not _LABEL.match(value):
        return False
    word = _components(name)[-1]
    flat = "".join(_components(value))
    return word in flat or (word == "key" and "apikey" in flat)


def _random_name(name: str) -> bool:
    """A would-be variable name that is no name: digits among upper- and lower-case letters."""
    return any(c.isdigit() for c in name) and any(c.isupper() for c in name) and any(c.islower() for c in name)


def _code_name(value: str) -> bool:
    """A member of code (`status.HTTP_401_UNAUTHORIZED`, `settings.api_v2`): parts an identifier
    each, none random (`_random_name`), as a list of names after a secret word holds; a token's
    dotted parts (a JWT's) mix cases and digits."""
    parts = value.split(".")
    return len(parts) > 1 and all(_IDENTIFIER.match(p) and not _random_name(p) for p in parts)


def _placeholder(value: str) -> bool:
    """A value that names or stands for a secret instead of holding one."""
    v = value.strip()
    if not v or v.casefold() in _NOT_A_VALUE or _PLACEHOLDER_WORDS.search(v) or len(set(v)) <= 2:
        return True
    whole = _PLACEHOLDER.match(v)
    if whole is not None:
        # `$TOKEN` names a variable; `$vdma9LWuVH6q` (a PHP string, a bcrypt salt) is a value.
        name = whole.group("var")
        return name is None or not _random_name(name)
    if sum(c in "*xX•" for c in v) * 2 >= len(v):
        return True  # masked: `sk-****`, `xxxx-xxxx`
    return bool(_ENV_NAME.match(v)) and "_" in v  # `YOUR_API_KEY`, `DB_PASSWORD`: a name, not a value


# -- finding --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    start: int
    end: int
    """The span of the text to replace."""
    value: str
    """What the span holds (learned when it is long enough)."""


def find(text: str) -> list[Found]:
    """Every secret in `text` by the rules of the module doc, in order, spans not overlapping."""
    spans: list[Found] = []
    if len(text) < _SHORTEST:
        return spans
    for name, literals, pattern in _KNOWN:
        for match in _matches(text, _places(text, literals), pattern, word_start=True):
            key = match.group(0)
            if name == "sk" and not (_looks_secret(key, strict=True) and key != key.lower()):
                continue  # `sk-` before words (`sk-learn-style`): a key mixes cases and digits
            spans.append(Found(match.start(), match.end(), key))
    if "PRIVATE KEY" in text:
        for match in _PEM.finditer(text):
            if match.group(2).strip():
                spans.append(Found(match.start(2), match.end(2), ""))
    for match in _matches(text, _places(text, ("://",)), _URL_PASSWORD):
        value = match.group("v")
        if match.start() and text[match.start() - 1].isalpha() and not _placeholder(value):
            spans.append(Found(match.start("v"), match.end("v"), value))
    # The rest is found by words in any case: looked for in the lower-cased text (the same length
    # for all but a few scripts; those are searched as written, lower case, Capitalized and UPPER).
    low = text.lower()
    if len(low) != len(text):
        low = text
    for pattern, literals, strict in ((_AUTHORIZATION, ("authorization",), False), (_BEARER, ("bearer",), True)):
        for match in _matches(text, _places(low, _cased(literals, low is text)), pattern, word_start=True):
            value = match.group("v")
            if not _placeholder(value) and (not strict or _looks_secret(value, strict=True)):
                spans.append(Found(match.start("v"), match.end("v"), value))
    words = list(_places(low, _cased(_WORD_LITERALS, low is text)))
    for match in _matches(text, words, _ASSIGNMENT):
        found = _assignment(text, match)
        if found is not None:
            spans.append(found)
    for match in _matches(text, words, _PROSE, word_start=True):
        value = match.group("v").rstrip(".")
        if match.group(0)[:3].casefold() == "key" and not low[max(0, match.start() - 7) : match.start()].rstrip(
            " _-"
        ).endswith(("api", "access")):
            continue
        if _looks_secret(value, strict=True) and not _placeholder(value) and not _code_name(value):
            spans.append(Found(match.start("v"), match.start("v") + len(value), value))
    return _disjoint(spans)


_SHORTEST = 6
"""No secret the rules find fits in a shorter text (`pwd=x1`)."""


def _cased(literals: Sequence[str], as_written: bool) -> tuple[str, ...]:
    """`literals` (lower case), with their Capitalized and UPPER forms when the text is searched as written."""
    if not as_written:
        return tuple(literals)
    return tuple(v for word in literals for v in (word, word.capitalize(), word.upper()))


def _places(haystack: str, literals: Sequence[str]) -> Iterator[int]:
    """Where any of `literals` stands in `haystack`, in order, each place once: one substring
    search per literal, the ascending lists merged (linear in the places, no sort)."""
    found: list[list[int]] = []
    for literal in literals:
        at, places = haystack.find(literal), []
        while at != -1:
            places.append(at)
            at = haystack.find(literal, at + 1)
        if places:
            found.append(places)
    last = -1
    for at in found[0] if len(found) == 1 else heapq.merge(*found):
        if at != last:
            yield at
            last = at


def _matches(
    text: str, places: Iterable[int], pattern: re.Pattern[str], *, word_start: bool = False
) -> list[re.Match[str]]:
    """The matches of `pattern` (which begins with the literal found there) tried at each of
    `places` in `text`, in order, not overlapping. `word_start`: only where the literal does not
    continue a word."""
    matches: list[re.Match[str]] = []
    end = 0
    for at in places:
        if at < end or (word_start and at and (text[at - 1].isalnum() or text[at - 1] == "_")):
            continue
        match = pattern.match(text, at)
        if match is not None:
            matches.append(match)
            end = match.end()
    return matches


def _assignment(text: str, match: re.Match[str]) -> Found | None:
    """The value an assignment to a secret's name binds, when it is a literal secret."""
    begin = match.start()
    while begin > 0 and match.start() - begin < 80 and _NAME_CHAR.match(text, begin - 1):
        begin -= 1
    raw = text[begin : match.end("rest")]
    flag = raw.startswith("-") and (begin == 0 or text[begin - 1].isspace())  # `--password x`, `-token=x`
    name = raw.strip(".-")
    kind = _kind(name)
    if kind is None:
        return None
    quoted, bare = match.group("quoted"), match.group("bare")
    value = quoted if quoted is not None else bare
    if value is None or _placeholder(value) or _path(value, rooted=True) or "://" in value:
        return None
    op = match.group("op")
    if not op.strip() and not flag:
        return None  # a space binds only a flag's value (`--password x`): `token is` is prose
    if bare is not None:
        if bare.startswith("-") or bare.endswith((":", "=")):
            return None
        before = text[max(0, begin - 7) : begin]
        env = bool(_ENV_NAME.match(name)) and ("=" in op or before.endswith(("export ", "-e ")))
        if _IDENTIFIER.match(bare) and not env and not flag and (len(bare) < 8 or not any(c.isdigit() for c in bare)):
            return None  # a variable or an expression: code that reads a secret, not the secret
    elif len(value) < 3 or any(c.isspace() for c in value):
        return None  # a sentence in quotes (a message about the password), or a character
    if kind == "loose" and not _looks_secret(value):
        return None
    if _labels(name, value):
        return None
    group = "quoted" if quoted is not None else "bare"
    return Found(match.start(group), match.end(group), value)


def _disjoint(spans: list[Found]) -> list[Found]:
    spans.sort(key=lambda f: (f.start, -f.end))
    out: list[Found] = []
    for span in spans:
        if out and span.start < out[-1].end:
            if span.end > out[-1].end:
                last = out[-1]
                out[-1] = Found(last.start, span.end, last.value)
            continue
        out.append(span)
    return out


def _replace(text: str, spans: Sequence[Found]) -> str:
    pieces: list[str] = []
    at = 0
    for span in spans:
        pieces.append(text[at : span.start])
        pieces.append(REDACTED)
        at = span.end
    pieces.append(text[at:])
    return "".join(pieces)


def _learnable(found: Found) -> bool:
    """A found value worth redacting wherever else it appears: long, and a token, not a word."""
    return len(found.value) >= LEARNED_MIN_CHARS and _looks_secret(found.value)


class Redactor:
    """Redacts secrets by the module's rules and, anywhere, the values it learned."""

    def __init__(self, learned: Iterable[str] = ()) -> None:
        values = sorted({v for v in learned if len(v) >= LEARNED_MIN_CHARS}, key=len, reverse=True)
        self.learned: tuple[str, ...] = tuple(values[:MAX_LEARNED])

    def text(self, text: str) -> str:
        """`text` with every secret replaced by `REDACTED`."""
        return self._apply(text, find(text)) if text else text

    def _apply(self, text: str, spans: Sequence[Found]) -> str:
        if spans:
            text = _replace(text, spans)
        for value in self.learned:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def joined(self, other: Redactor) -> Redactor:
        """A redactor that knows the values both know."""
        return self if not other.learned else Redactor((*self.learned, *other.learned))

    def messages(self, messages: Sequence[Message]) -> list[Message]:
        """Copies of `messages` with their text, tool arguments and outputs redacted (a message
        nothing changes in is returned as it is)."""
        return [_map_message(m, self.text) for m in messages]


def redact_history(messages: Sequence[Message], *texts: str | None) -> tuple[list[Message], Redactor]:
    """`messages` redacted, and the redactor that did it: it learned the secrets of `messages` and
    of `texts` (a previous summary), so that a value found in its place is redacted everywhere.
    Each text is read once for secrets; the learned values are then looked for in it."""
    found: list[list[Found]] = []
    values: list[str] = []

    def learn(text: str) -> str:
        spans = find(text)
        found.append(spans)
        if len(values) < MAX_LEARNED:
            values.extend(f.value for f in spans if _learnable(f))
        return text

    for message in messages:
        _map_message(message, learn)
    for text in texts:
        if text:
            values.extend(f.value for f in find(text) if _learnable(f))
    redactor = Redactor(values)
    spans = iter(found)
    redacted = [_map_message(m, lambda text: redactor._apply(text, next(spans))) for m in messages]
    return redacted, redactor


def redact_texts(texts: Sequence[str], sources: Iterable[str] = ()) -> list[str]:
    """`texts` redacted, each secret found in any of them (or in `sources`, the texts they were
    written from) redacted wherever it appears in them."""
    found = [find(text) for text in texts]
    values = [f.value for spans in found for f in spans if _learnable(f)]
    values += [f.value for source in sources for f in find(source) if _learnable(f)]
    redactor = Redactor(values)
    return [redactor._apply(text, spans) for text, spans in zip(texts, found, strict=True)]


def redact(text: str, sources: Iterable[str] = ()) -> str:
    """`text` with its secrets redacted, and those found in `sources` (the texts it was written from)."""
    return redact_texts([text], sources)[0]


def redact_parts(parts: Sequence[ToolPart]) -> list[ToolPart]:
    """`parts` with their secrets redacted in every text they hold (arguments, output, error), each
    secret found in any of them redacted in all: what a digest is written from, so that cutting a
    line into pieces cannot cut a secret out of sight."""
    texts: list[str] = []

    def collect(text: str) -> str:
        texts.append(text)
        return text

    for part in parts:
        _map_part(part, collect)  # every text a digest may take from it
    redactor = Redactor(f.value for text in texts for f in find(text) if _learnable(f))
    return [cast(ToolPart, _map_part(p, redactor.text)) for p in parts]


def _map_message(message: Message, edit: Callable[[str], str]) -> Message:
    """`message` with `edit` applied to every text a summary may take from it, in a fixed order:
    its error, then each part's text, tool arguments (every string in them), output, error, digest
    and raw arguments. The same object when nothing changed."""
    error = edit(message.error) if message.error else message.error
    parts = [_map_part(p, edit) for p in message.parts]
    if error == message.error and all(new is old for new, old in zip(parts, message.parts, strict=True)):
        return message
    return message.model_copy(update={"parts": parts, "error": error})


def _map_part(part: Part, edit: Callable[[str], str]) -> Part:
    if isinstance(part, TextPart | ReasoningPart):
        text = edit(part.text) if part.text else part.text
        return part if text == part.text else part.model_copy(update={"text": text})
    if isinstance(part, ToolPart):
        update: dict[str, Any] = {}
        arguments = _map_value(part.input, edit)
        if arguments is not part.input:
            update["input"] = arguments
        for name in ("output", "error", "view_text", "raw_arguments"):
            old = getattr(part, name)
            if old:
                new = edit(old)
                if new != old:
                    update[name] = new
        return part.model_copy(update=update) if update else part
    return part


def _map_value(value: Any, edit: Callable[[str], str]) -> Any:
    """A JSON value with `edit` applied to every string in it (the same object when none changed)."""
    if isinstance(value, str):
        new = edit(value) if value else value
        return value if new == value else new
    if isinstance(value, dict):
        items = {k: _map_value(v, edit) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if isinstance(value, list):
        elements = [_map_value(v, edit) for v in value]
        return value if all(a is b for a, b in zip(elements, value, strict=True)) else elements
    return value


__all__ = [
    "LEARNED_MIN_CHARS",
    "MAX_LEARNED",
    "REDACTED",
    "Found",
    "Redactor",
    "find",
    "redact",
    "redact_history",
    "redact_parts",
    "redact_texts",
]

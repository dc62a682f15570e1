"""A seeded set of realistic, fake secrets in many syntaxes, the near misses that must survive, and
the leak count: how the tests and the benchmarks check that no secret reaches a summary, a handover
or a digest (issue 27, item 2).

Every value is generated from a seeded random stream (`seeded_secrets(seed)`), so none is real, the
repository holds no string that looks like a live token, and each transcript can get its own values.
`seed_wire` and `seed_claude_jsonl` write them into a transcript where a summary reads from: the
start of the user's first message (quoted word for word in every summary), the first tool call's
command and the first tool output after it (the working set, the errors, the commands run). `leaks` says which seeded
secrets a text gives away, whole or as any `PIECE` characters of one.

Pure: no I/O, no contextfold imports (the tests and both benchmarks use it as is).
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PIECE = 12
"""A leak is the whole value, or any run of this many of its characters (a secret cut short)."""
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Seeded:
    label: str
    """The syntax it is written in."""
    text: str
    """The line(s) as a user, a config file or a command would hold them."""
    secrets: tuple[str, ...]
    """The values that must not appear in anything derived."""
    where: str
    """`user` (the user's message), `command` (a tool call's command) or `output` (a tool output)."""


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, alphabet: str, n: int) -> str:
    """Random, but with a digit, an upper- and a lower-case letter, as generated keys have."""
    while True:
        value = _pick(rng, alphabet, n)
        if any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value):
            return value


def _jwt(rng: random.Random) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": _pick(rng, HEX, 12), "iat": rng.randrange(1_600_000_000, 1_800_000_000)})
    return f"{header}.{payload}.{_pick(rng, URLSAFE, 43)}"


def seeded_secrets(seed: int | str = 27) -> list[Seeded]:
    """One secret (or two) in each syntax the detector must know, with fresh values for `seed`."""
    rng = random.Random(f"contextfold-seeded-secrets-{seed}")
    out: list[Seeded] = []

    def add(label: str, where: str, template: str, *values: str) -> None:
        out.append(Seeded(label, template.format(*values), tuple(values), where))

    add("env, OpenAI project key", "user", "export OPENAI_API_KEY=sk-proj-{0}", _mixed(rng, URLSAFE, 48))
    add(
        "quoted env, Anthropic key",
        "user",
        'ANTHROPIC_API_KEY="sk-ant-api03-{0}-{1}AA"',
        _mixed(rng, URLSAFE, 86),
        _pick(rng, URLSAFE, 6),
    )
    add(
        "prose, a token given in words",
        "user",
        "I give you the deploy token, it's {0}",
        _mixed(rng, HEX + "ABCDEF", 32),
    )
    add("CLI flag with a space", "user", "run it as mysql -u root --password {0} -e 'select 1'", _mixed(rng, ALNUM, 16))
    add(
        "CLI flag with =",
        "command",
        "docker login --password={0} registry.example.test",
        _mixed(rng, ALNUM + "!#%", 24),
    )
    add(
        "bearer JWT in a curl header",
        "command",
        'curl -s -H "Authorization: Bearer {0}" https://api.example.test/v1/me',
        _jwt(rng),
    )
    add("docker -e", "command", "docker run -e POSTGRES_PASSWORD={0} postgres:16", _mixed(rng, ALNUM, 18))
    add(
        "URL with a password",
        "output",
        "DATABASE_URL=postgres://app_user:{0}@db.internal.example:5432/app",
        _mixed(rng, ALNUM, 20),
    )
    add(
        "AWS credentials file",
        "output",
        "[default]\naws_access_key_id = AKIA{0}\naws_secret_access_key = {1}",
        _pick(rng, string.ascii_uppercase + string.digits, 16),
        _mixed(rng, B64, 40),
    )
    add(
        "GitHub token in a remote URL",
        "output",
        "origin\thttps://ghp_{0}@github.com/acme/app.git (fetch)",
        _mixed(rng, ALNUM, 36),
    )
    add(
        "GitHub fine-grained token in JSON",
        "output",
        '{{"github": {{"token": "github_pat_{0}_{1}"}}}}',
        _mixed(rng, ALNUM, 22),
        _mixed(rng, ALNUM, 59),
    )
    add(
        "Slack bot token in YAML",
        "output",
        "slack:\n  bot_token: xoxb-{0}-{1}-{2}",
        _pick(rng, string.digits, 12),
        _pick(rng, string.digits, 13),
        _mixed(rng, ALNUM, 24),
    )
    add("Google API key in JS", "output", 'const mapsKey = "AIza{0}";', _mixed(rng, URLSAFE, 35))
    add("TOML client secret", "output", '[oauth]\nclient_id = "web-app"\nclient_secret = "{0}"', _pick(rng, HEX, 32))
    add("Django SECRET_KEY", "output", 'SECRET_KEY = "{0}"', _mixed(rng, ALNUM + "!@#%^&*(-_=+)", 50))
    add(
        "Phoenix secret_key_base",
        "output",
        'config :app, AppWeb.Endpoint,\n  secret_key_base: "{0}"',
        _mixed(rng, ALNUM + "+/", 64),
    )
    add("YAML password", "output", "database:\n  user: app\n  password: {0}", _mixed(rng, ALNUM, 14))
    add("JSON camelCase apiKey", "output", '{{"service": "maps", "apiKey": "{0}"}}', _mixed(rng, ALNUM, 32))
    add("Stripe key in Python", "output", 'stripe.api_key = "sk_live_{0}"', _mixed(rng, ALNUM, 24))
    add("HTTP header", "output", "X-Api-Key: {0}", _mixed(rng, ALNUM, 40))
    add("Go short assignment", "output", 'token := "{0}"', _mixed(rng, ALNUM, 40))
    add("PHP/Ruby hash", "output", "'password' => '{0}',", _mixed(rng, ALNUM + "$!", 16))
    add("Hugging Face token", "output", "HF_TOKEN=hf_{0}", _mixed(rng, ALNUM, 34))
    add("npmrc auth token", "output", "//registry.npmjs.org/:_authToken=npm_{0}", _mixed(rng, ALNUM, 36))
    add(
        "Basic auth header",
        "output",
        "Authorization: Basic {0}",
        base64.b64encode(f"deploy:{_mixed(rng, ALNUM, 16)}".encode()).decode(),
    )
    key_body = "\n".join(_pick(rng, B64, 64) for _ in range(6))
    add(
        "PEM private key",
        "output",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{0}\n-----END OPENSSH PRIVATE KEY-----",
        key_body,
    )
    # Found in its place above, then printed alone: a learned value.
    phoenix = next(s for s in out if s.label == "Phoenix secret_key_base").secrets[0]
    out.append(Seeded("a learned value printed alone", f"{phoenix}\n", (phoenix,), "output"))
    return out


NEAR_MISSES: tuple[tuple[str, str], ...] = (
    ("git commit id", "commit 3f2a9c1e4b5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f (HEAD -> main)"),
    ("short commit id", "[main a1b2c3d] Fix the parser"),
    ("git checkout of a sha", "git checkout 0b6a9a4f8e1c2d3b4a5f6e7d8c9b0a1f2e3d4c5b"),
    ("UUID", 'id = "123e4567-e89b-12d3-a456-426614174000"'),
    ("npm lockfile integrity", '"integrity": "sha512-Q2hlY2sgdGhpcyBvdXQgaXQgaXMgb3JkaW5hcnkgdGV4dCBpbiBiYXNlNjQ="'),
    ("poetry lockfile hash", 'hash = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"'),
    ("docker image digest", "image: nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31"),
    ("base64 of ordinary text", "echo aGVsbG8gd29ybGQsIHRoaXMgaXMgb3JkaW5hcnkgdGV4dA== | base64 -d"),
    ("file paths", "edited src/auth/token_store.py, config/password_policy.yml and lib/secrets/manager.ts"),
    ("a token counter", "max_tokens=4096, token_count: 12, tokens_in_view = 5"),
    ("code reading a secret", 'api_key = os.environ["OPENAI_API_KEY"]\ntoken = tokenizer.next_token()'),
    ("keyword arguments", "connect(user=user, password=password)\nsorted(rows, key=len)"),
    ("JS shorthand", "const session = { token: accessToken, user };"),
    ("f-string header", 'headers = {"Authorization": f"Bearer {token}"}'),
    ("placeholders", "OPENAI_API_KEY=your-api-key-here\npassword: ${DB_PASSWORD}\nAuthorization: Bearer <token>"),
    ("shell substitution", "export GITHUB_TOKEN=$(gh auth token)"),
    ("URLs without a password", "git@github.com:acme/app.git https://user@example.com/x http://localhost:8080/api"),
    ("identifiers", "class TokenCounter: PRIMARY_KEY = True; def check_password(password): ..."),
    ("a validation message", '"password": "must be at least 8 characters"'),
    ("a type annotation", "def login(username: str, password: str) -> Token:"),
    ("names listed after a secret word", "Identifiers: auth_config.token, status.HTTP_401_UNAUTHORIZED, user.id"),
)
"""Text that names secrets, or looks random, but holds none: it must come through unchanged."""


def leaks(text: str, seeded: Sequence[Seeded]) -> list[str]:
    """The labels of the seeded secrets `text` gives away: a value whole, or any `PIECE` characters
    of one (a line of a PEM body counts on its own)."""
    found = []
    for item in seeded:
        if any(_leaked(text, value) for value in item.secrets):
            found.append(item.label)
    return found


def _leaked(text: str, value: str) -> bool:
    for piece in value.splitlines() or [value]:
        if len(piece) < PIECE:
            if piece in text:
                return True
            continue
        if any(piece[i : i + PIECE] in text for i in range(len(piece) - PIECE + 1)):
            return True
    return False


def blocks(seeded: Sequence[Seeded]) -> dict[str, str]:
    """The seeded texts by where they go: `user`, `command`, `output`, each joined into one block."""
    out: dict[str, list[str]] = {"user": [], "command": [], "output": []}
    for item in seeded:
        out[item.where].append(item.text)
    return {
        "user": "\n".join(out["user"]),
        "command": " && ".join(out["command"]),
        "output": "\n\n".join(out["output"]),
    }


# -- writing them into a transcript ----------------------------------------------------------------


def seed_wire(
    messages: list[dict[str, Any]], seeded: Sequence[Seeded], end: int
) -> tuple[list[dict[str, Any]], set[str]]:
    """A copy of wire `messages` (OpenAI Chat or Anthropic Messages, as `load_transcript` gives
    them) with the seeded secrets written into the first of `messages[:end]` that the user wrote
    (before its text: where every summary quotes it), the first tool call's command and the first
    tool output after it (appended), and
    where they went (`user`, `command`, `output`): what is missing before `end` is left out."""
    copied = json.loads(json.dumps(messages[:end])) + messages[end:]
    text = blocks(seeded)
    done = {"user": False, "command": False, "output": False}
    for message in copied[:end]:
        role, content = message.get("role"), message.get("content")
        if role == "user" and not message.get("name") and not done["user"] and _has_own_text(content):
            message["content"] = _prepend_text(content, text["user"] + "\n\n")
            done["user"] = True
        elif role == "assistant" and not done["command"]:
            done["command"] = _seed_command(message, text["command"])
        elif not done["output"] and done["command"]:
            done["output"] = _seed_output(message, text["output"])
    return copied, {where for where, placed in done.items() if placed}


def _has_own_text(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content.strip()) and not content.lstrip().startswith("<")
    if isinstance(content, list):
        return any(isinstance(b, dict) and b.get("type") == "text" for b in content) and not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
    return False


def _append_text(content: Any, text: str) -> Any:
    if isinstance(content, str):
        return content + text
    return [*content, {"type": "text", "text": text.strip()}]


def _prepend_text(content: Any, text: str) -> Any:
    """`text` before the message's own (where a quote of it starts)."""
    if isinstance(content, str):
        return text + content
    return [{"type": "text", "text": text.strip()}, *content]


def _seed_command(message: dict[str, Any], command: str) -> bool:
    for call in message.get("tool_calls") or []:  # OpenAI Chat
        function = call.get("function", {})
        try:
            args = json.loads(function.get("arguments") or "{}")
        except ValueError:
            continue
        if isinstance(args, dict) and isinstance(args.get("command", args.get("cmd")), str):
            key = "command" if "command" in args else "cmd"
            args[key] = f"{args[key]} && {command}"
            function["arguments"] = json.dumps(args)
            return True
    content = message.get("content")
    for block in content if isinstance(content, list) else []:  # Anthropic Messages
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
            args = block["input"]
            if isinstance(args.get("command"), str):
                args["command"] = f"{args['command']} && {command}"
                return True
    return False


def _seed_output(message: dict[str, Any], output: str) -> bool:
    if message.get("role") == "tool":
        message["content"] = _append_text(message.get("content") or "", "\n" + output)
        return True
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            block["content"] = (
                (inner or "") + "\n" + output if isinstance(inner, str | None) else _append_text(inner, output)
            )
            return True
    return False


def seed_claude_jsonl(lines: list[str], seeded: Sequence[Seeded]) -> tuple[list[str], set[str]]:
    """A Claude Code session's JSONL lines with the seeded secrets written into its first user
    prompt, its first Bash command and the first tool result after it (records rewritten in place,
    their ids and links kept), and where they went."""
    text = blocks(seeded)
    done = {"user": False, "command": False, "output": False}
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        message = record.get("message") if isinstance(record, dict) else None
        changed = False
        if isinstance(message, dict) and record.get("type") == "user" and not record.get("isCompactSummary"):
            content = message.get("content")
            if not done["user"] and not record.get("isMeta") and _has_own_text(content):
                message["content"] = _prepend_text(content, text["user"] + "\n\n")
                done["user"] = changed = True
            elif done["command"] and not done["output"]:
                done["output"] = changed = _seed_output(message, text["output"])
        elif isinstance(message, dict) and record.get("type") == "assistant" and not done["command"]:
            done["command"] = changed = _seed_command(message, text["command"])
        out.append(json.dumps(record, ensure_ascii=False) + "\n" if changed else line)
    return out, {where for where, placed in done.items() if placed}


__all__ = ["NEAR_MISSES", "PIECE", "Seeded", "blocks", "leaks", "seed_claude_jsonl", "seed_wire", "seeded_secrets"]

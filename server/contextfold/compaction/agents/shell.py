"""Shell command lines, read the way every agent's shell tool runs them.

Which files a command writes or reads (`sed -i`, redirections, `tee`, `ed`, `perl -i`, `cat`,
`head`, `grep`, `python script.py`, patches piped to `apply_patch`), whether a line only looks at
things, which test suite it runs and over which targets, and when a later command answers an
earlier failure. Judged from the words alone: nothing here runs or reads anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from contextfold.compaction.agents.text import collapse

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_RUNNER_PROGRAMS = {
    "pytest": "pytest",
    "py.test": "pytest",
    "tox": "tox",
    "nox": "nox",
    "vitest": "vitest",
    "jest": "jest",
    "runtests.py": "runtests.py",
    "rspec": "rspec",
    "phpunit": "phpunit",
    "ctest": "ctest",
    "unittest": "unittest",
    "trial": "trial",
    "nosetests": "nosetests",
}
_RUNNER_SUBCOMMANDS = {
    ("mix", "test"),
    ("npm", "test"),
    ("yarn", "test"),
    ("pnpm", "test"),
    ("bun", "test"),
    ("go", "test"),
    ("cargo", "test"),
    ("make", "test"),
    ("make", "check"),
    ("deno", "test"),
    ("dotnet", "test"),
    ("gradle", "test"),
    ("gradlew", "test"),
    ("mvn", "test"),
    ("mvnw", "test"),
    ("npm", "t"),
    ("swift", "test"),
    ("flutter", "test"),
    ("dart", "test"),
    ("sbt", "test"),
    ("lein", "test"),
    ("stack", "test"),
    ("cabal", "test"),
    ("bazel", "test"),
    ("rails", "test"),
    ("artisan", "test"),
    ("manage.py", "test"),
    ("playwright", "test"),
    ("cypress", "run"),
    ("hatch", "test"),
    ("nx", "test"),
    ("turbo", "test"),
}
"""A program and the subcommand that runs its tests; options between them are passed over (`mvn -q test`,
`cargo +nightly test`)."""
_LAUNCHERS = {"npx", "uvx", "bunx", "pnpx"}
_LAUNCHER_PAIRS = {
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("bundle", "exec"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("pnpm", "exec"),
    ("yarn", "exec"),
}
_INSPECTION = {
    "ls",
    "cat",
    "head",
    "tail",
    "nl",
    "less",
    "more",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "find",
    "fd",
    "wc",
    "pwd",
    "echo",
    "which",
    "type",
    "file",
    "stat",
    "tree",
    "diff",
    "cmp",
    "test",
    "[",
    "true",
    "printf",
    "env",
    "whoami",
    "date",
    "du",
    "df",
}
_FILTERS = {"strings", "awk", "jq", "sort", "uniq", "cut", "tr", "xxd", "od", "hexdump"}
_SENDING = {
    "-o",
    "-O",
    "--output",
    "--remote-name",
    "-X",
    "--request",
    "-d",
    "--data",
    "--data-raw",
    "--data-binary",
    "-F",
    "--form",
    "-T",
    "--upload-file",
    "--post-data",
    "--post-file",
    "--method",
}
"""curl and wget options that write a file or send something: such a call is not just a look."""
_READ_ONLY_SUBCOMMANDS = {
    "show",
    "status",
    "list",
    "ls",
    "log",
    "diff",
    "ready",
    "info",
    "view",
    "get",
    "search",
    "help",
    "version",
    "--version",
    "-v",
    "describe",
    "inspect",
    "ls-files",
    "branch",
    "remote",
    "rev-parse",
    "blame",
    "grep",
    "config",
    "outdated",
    "why",
    "tree",
    "check-ignore",
}


def is_inspection(commands: list[list[str]], looking: frozenset[str] = frozenset()) -> bool:
    """Every simple command in the line only looks at things (`ls`, `sed -n`, `git status` …).
    `looking`: more programs that only look, such as an agent's own navigation commands."""
    if not commands:
        return True
    for raw in commands:
        words, targets = split_redirects(raw)
        if targets:
            return False
        words = [w for w in words if "=" not in w or w.startswith("-")] or words
        verb = words[0].rsplit("/", 1)[-1] if words else ""
        if not words or verb in ("cd", "true", "set", "export"):
            continue
        if verb == "sed" and not any(w.startswith("-i") or w.startswith("--in-place") for w in words[1:]):
            continue
        if verb in _INSPECTION or verb in _FILTERS or verb in looking:
            continue
        if verb in ("curl", "wget") and not any(w.split("=", 1)[0] in _SENDING for w in words[1:]):
            continue  # a fetch that writes nothing and sends nothing
        if len(words) > 1 and words[1] in _READ_ONLY_SUBCOMMANDS:
            continue
        return False
    return True


_READ_VERBS = {"cat", "head", "tail", "nl", "less", "more", "bat", "view"}
_SEARCH_VERBS = {"grep", "egrep", "fgrep", "rg", "ag"}
_RUN_VERBS = {"python", "python3", "node", "ruby", "bash", "sh", "php", "perl"}
_WRAPPERS = {"sudo", "time", "timeout", "nice", "nohup", "env", "command", "exec", "xargs"}
_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
_PATHLIKE = re.compile(r"^[\w.~@+/-][\w.~@+,:/=-]*$")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def is_path(token: str) -> bool:
    """A word that names a file: no spaces, globs or variables, not an option or URL, and either a
    directory part or a file extension."""
    if not token or len(token) > 250 or token.startswith("-") or "://" in token:
        return False
    if not _PATHLIKE.match(token) or token in (".", "..", "/", "~"):
        return False
    if token.startswith("/dev/") or token.startswith("/proc/"):
        return False
    return "/" in token or bool(_EXTENSION.search(token))


def strip_heredocs(command: str) -> str:
    """The command lines without here-document bodies (the body is data, not commands)."""
    lines = command.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        for match in _HEREDOC.finditer(line):
            delimiter = match.group(2)
            while index < len(lines) and lines[index].strip() != delimiter:
                index += 1
            index += 1  # the delimiter line itself
    return "\n".join(kept)


def simple_commands(command: str) -> list[list[str]]:
    """The simple commands of a whole (possibly multi-line) command, here-documents removed."""
    return [list(words) for words in _parsed(command)]


@lru_cache(maxsize=4096)
def _parsed(command: str) -> tuple[tuple[str, ...], ...]:
    # Cached: the same command is parsed for its files, its inspection status and each time an
    # error is checked against later successes.
    return tuple(tuple(words) for line in strip_heredocs(command).split("\n") for words in _words(line))


def _words(command: str) -> list[list[str]]:
    """Simple commands (lists of words) of a shell line, split at operators; redirections kept
    as their own words. Unbalanced quotes fall back to splitting on whitespace."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    simple: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _OPERATORS:
            if current:
                simple.append(current)
            current = []
        else:
            current.append(token)
    if current:
        simple.append(current)
    return simple


@dataclass(frozen=True)
class ShellTouch:
    path: str
    action: Literal["edited", "read"]
    how: str


def shell_touches(command: str) -> list[ShellTouch]:
    """Files a shell command writes or reads, judged from its words alone."""
    touches: list[ShellTouch] = []
    if "apply_patch" in command or "*** Begin Patch" in command:
        touches += [ShellTouch(p, "edited", how) for p, how in patch_files(command)]
    for words in simple_commands(command):
        touches += command_touches(words)
    return touches


def split_redirects(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the command's own words, the files its output is redirected into). Redirections of
    stderr (`2>`), to descriptors (`>&2`) or to /dev/null write no file worth naming."""
    plain: list[str] = []
    targets: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word in (">", ">>", ">|", "&>", "&>>"):
            stderr = bool(plain) and plain[-1].isdigit() and plain[-1] != "1"
            if stderr or (plain and plain[-1] == "1"):
                plain.pop()
            if index + 1 < len(words):
                target = words[index + 1]
                if not stderr and not target.startswith("&") and is_path(target):
                    targets.append(target)
            index += 2
            continue
        if word in ("<", "<<", "<<<", "<&", ">&", "<<-"):
            if word in (">&", "<&") and plain and plain[-1].isdigit():
                plain.pop()
            index += 2
            continue
        plain.append(word)
        index += 1
    return plain, targets


def command_touches(words: list[str]) -> list[ShellTouch]:
    """Files one simple command (a list of words) writes or reads."""
    # Redirections write their target whatever the command is.
    plain, targets = split_redirects(words)
    touches = [ShellTouch(target, "edited", "written by shell redirect") for target in targets]
    while plain and ("=" in plain[0] and not plain[0].startswith("-") or plain[0] in _WRAPPERS):
        if plain[0] == "timeout" and len(plain) > 1:
            plain = plain[2:]
        else:
            plain = plain[1:]
    if not plain:
        return touches
    verb = plain[0].rsplit("/", 1)[-1]
    args = plain[1:]
    operands = [a for a in args if not a.startswith("-")]
    if verb == "sed":
        in_place = any(a.startswith("-i") or a.startswith("--in-place") for a in args)
        script_options = ("-e", "-f", "--expression", "--file")
        if any(a in script_options for a in args):
            # The script comes as an option's value: every other operand is a file.
            files = [
                a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in script_options)
            ]
        else:
            # The first operand is the script (`sed -i '' 's/a/b/' f`: the empty suffix is not).
            files = [a for a in operands if a][1:]
        for path in files:
            if is_path(path):
                touches.append(ShellTouch(path, "edited" if in_place else "read", "sed -i" if in_place else "sed"))
    elif verb == "perl" and any(a.startswith("-") and "i" in a.lstrip("-") for a in args):
        touches += [ShellTouch(p, "edited", "perl -i") for p in operands[1:] if is_path(p)]
    elif verb == "tee":
        touches += [ShellTouch(p, "edited", "tee") for p in operands if is_path(p)]
    elif verb in ("ed", "ex"):
        touches += [ShellTouch(p, "edited", verb) for p in operands[:1] if is_path(p)]
    elif verb in _READ_VERBS:
        touches += [ShellTouch(p, "read", verb) for p in operands if is_path(p)]
    elif verb == "rm":
        touches += [ShellTouch(p, "read", "removed (rm)") for p in operands if is_path(p)]
    elif verb in _SEARCH_VERBS:
        touches += [ShellTouch(p, "read", f"searched ({verb})") for p in operands[1:] if is_path(p)]
    elif verb in _RUN_VERBS and operands and is_path(operands[0]) and _EXTENSION.search(operands[0]):
        if "-c" not in args and "-m" not in args and "-e" not in args:
            touches.append(ShellTouch(operands[0], "read", f"ran with {verb}"))
    return touches


_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_FILE = re.compile(r"^\+\+\+ (?:b/)?(.+?)(?:\t.*)?\s*$", re.MULTILINE)


def patch_files(patch: str) -> list[tuple[str, str]]:
    """(path, how) for each file a Codex-style patch or a unified diff changes."""
    found: list[tuple[str, str]] = []
    for action, path in _PATCH_FILE.findall(patch):
        found.append((path, {"Update": "updated", "Add": "added", "Delete": "deleted"}[action] + " (apply_patch)"))
    found += [(path, "moved here (apply_patch)") for path in _PATCH_MOVE.findall(patch)]
    if not found and ("\n+++ " in patch or patch.startswith("+++ ")):
        found += [(p, "patched") for p in _DIFF_FILE.findall(patch) if p != "/dev/null"]
    return found


_PLUMBING = {
    "cd",
    "pushd",
    "popd",
    "echo",
    "printf",
    "export",
    "unset",
    "set",
    "source",
    ".",
    "sleep",
    "mkdir",
    "chmod",
    "chown",
    "touch",
    "true",
    "false",
    "clear",
    "pwd",
    "kill",
    "pkill",
    "wait",
    "alias",
    "exit",
    "sync",
    "trap",
    "read",
    "history",
    "disown",
    "jobs",
    "bg",
    "fg",
    "cp",
    "ln",
}
_PLUMBING_SUBCOMMANDS = {("git", "add"), ("git", "stash"), ("git", "checkout"), ("git", "switch"), ("git", "fetch")}


def is_plumbing(commands: list[list[str]]) -> bool:
    """Every simple command of the line only moves the shell around or stages things (`cd`,
    `echo`, `mkdir`, `export`, `git add` …): nothing a summary of the work should list."""
    for raw in commands:
        words = _program(split_redirects(raw)[0])
        if not words:
            continue
        verb = words[0].rsplit("/", 1)[-1]
        if verb in _PLUMBING or (len(words) > 1 and (verb, words[1]) in _PLUMBING_SUBCOMMANDS):
            continue
        return False
    return True


_COMMIT_MESSAGE = re.compile(r"(?:^|\s)(?:-m|--message[= ]|-[a-z]*m)\s*(['\"])(.*?)(?<!\\)\1", re.DOTALL)
_COMMIT_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][\w.-]*)['\"]?[^\n]*\n(.*?)(?:\n\s*\1\b|\Z)", re.DOTALL)


def commit_subject(command: str) -> str | None:
    """The subject line of the commit a `git commit` command makes (from `-m`, or the first line of
    a here-document passed as the message), `(no message)` when it names none; None when the
    command makes no commit."""
    for words in simple_commands(command):
        words = _program(words)
        if len(words) < 2 or words[0].rsplit("/", 1)[-1] != "git":
            continue
        sub = 1
        while sub < len(words) and words[sub].startswith("-"):
            sub += 2 if words[sub] in ("-C", "-c") else 1  # `git -C repo commit`
        if sub >= len(words) or words[sub] != "commit":
            continue
        heredoc = _COMMIT_HEREDOC.search(command)
        if heredoc is not None and heredoc.group(2).strip():
            return collapse(heredoc.group(2).strip().splitlines()[0])[:120]
        quoted = _COMMIT_MESSAGE.search(command)  # a message spanning lines, which `words` split
        if quoted is not None and quoted.group(2).strip():
            return collapse(quoted.group(2).strip().splitlines()[0])[:120]
        for index, word in enumerate(words):
            value = None
            if word in ("-m", "--message") and index + 1 < len(words):
                value = words[index + 1]
            elif word.startswith("--message="):
                value = word.split("=", 1)[1]
            elif word.startswith("-") and not word.startswith("--") and word.endswith("m") and index + 1 < len(words):
                value = words[index + 1]  # `-am "msg"`
            if value and value.strip():
                return collapse(value.strip().splitlines()[0])[:120]
        return "(no message)"
    return None


_PIPE_TAIL = re.compile(r"\s*\|\s*(?:tail|head|grep|rg|less|more|cat|tee)\b.*$")
_CD_PREFIX = re.compile(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_STDERR = re.compile(r"\s*2>&1\s*")


_CAT_HEREDOC = re.compile(r"\$\(\s*cat\s*<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1[^\n]*\n(.*?)\n\s*\2\s*\)", re.DOTALL)


def readable(command: str) -> str:
    """The command as a summary shows it: `command_key`, with a here-document passed as an
    argument (`git commit -m "$(cat <<'EOF' … EOF)"`) shown as its first line instead of an empty
    `$(cat <<'EOF' )` wrapper."""

    def first_line(match: re.Match[str]) -> str:
        lines = [line.strip() for line in match.group(3).splitlines() if line.strip()]
        return (lines[0] + (" …" if len(lines) > 1 else "")).replace('"', "'") if lines else ""

    return command_key(_CAT_HEREDOC.sub(first_line, command))


def command_key(command: str) -> str:
    """A command with what does not change what it tests removed: here-document bodies, a `cd`
    prefix, `2>&1`, and a trailing `| tail` or `| grep` that only filters the output."""
    line = collapse(strip_heredocs(command))
    line = _CD_PREFIX.sub("", line)
    line = _STDERR.sub(" ", line)
    line = _PIPE_TAIL.sub("", line)
    return collapse(line)


def _program(words: list[str]) -> list[str]:
    """The words from the program on: environment assignments, wrappers (`sudo`, `timeout 60`)
    and launchers (`npx`, `uv run`, `python -m`) removed."""
    while words:
        verb = words[0].rsplit("/", 1)[-1]
        if "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
        elif verb == "timeout" and len(words) > 1:
            words = words[2:]
        elif verb in _WRAPPERS or verb in _LAUNCHERS:
            words = words[1:]
        elif len(words) > 1 and (verb, words[1]) in _LAUNCHER_PAIRS:
            words = words[2:]
        elif verb.startswith("python") and len(words) > 2 and words[1] == "-m":
            words = words[2:]
        elif verb.startswith(("python", "php", "node", "ruby")) and len(words) > 1 and not words[1].startswith("-"):
            words = words[1:]  # the script it runs is the program: `python manage.py test`, `php artisan test`
        else:
            return words
    return words


@lru_cache(maxsize=4096)
def suite_invocation(command: str) -> tuple[str, tuple[str, ...]] | None:
    """(runner, targets) when the command runs a test suite: `pytest tests/a.py::t` →
    ("pytest", ["tests/a.py::t"]), `cd x && mix test 2>&1 | tail` → ("mix test", [])."""
    for words in simple_commands(command):
        words = _program(words)
        if not words:
            continue
        verb = words[0].rsplit("/", 1)[-1]
        if verb in _RUNNER_PROGRAMS:
            return _RUNNER_PROGRAMS[verb], tuple(_targets(words[1:]))
        if len(words) < 2:
            continue
        sub = words[1]
        if verb in ("npm", "yarn", "pnpm", "bun") and sub == "run" and len(words) > 2 and words[2].startswith("test"):
            return f"{verb} run {words[2]}", tuple(_targets(words[3:]))
        at = next((i for i, word in enumerate(words[1:], 1) if not word.startswith(("-", "+"))), None)
        if at is not None and (verb, words[at]) in _RUNNER_SUBCOMMANDS:
            return f"{verb} {words[at]}", tuple(_targets(words[at + 1 :]))
    return None


def suite_runner(command: str) -> str | None:
    invocation = suite_invocation(command)
    return invocation[0] if invocation else None


def _targets(words: list[str]) -> list[str]:
    """Which tests a run selects: path- or id-like operands (options and their values left out)."""
    targets: list[str] = []
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
            continue
        if word.startswith("-"):
            # `-t NAME`, `-k EXPR`, `-m MARK`: the next word is the option's value.
            skip_value = word in ("-t", "-k", "-m", "-p", "-c", "--testNamePattern", "--grep", "--seed", "-n")
            continue
        if word in ("run", "--") or not ("/" in word or "::" in word or "." in word or "_" in word):
            continue
        targets.append(word)
    return targets


def resolves(error_key: str, success_key: str) -> bool:
    """Whether a later success of `success_key` answers an earlier failure of `error_key`: the
    same command, or the same test runner over the same tests or more (no target, or a target
    that is a prefix of each failing one)."""
    if error_key == success_key:
        return True
    failed = suite_invocation(error_key)
    if failed is None:
        return _retried(error_key, success_key)
    passed = suite_invocation(success_key)
    if passed is None or passed[0] != failed[0]:
        return False
    wanted, covered = failed[1], passed[1]
    if not covered:
        return True
    return all(any(w.startswith(c) for c in covered) for w in wanted) if wanted else False


def _retried(error_key: str, success_key: str) -> bool:
    """A retry of the same action with changed flags: the same program and subcommand, and either
    a file operand in common (`git add a b` failed, `git add -f b` passed), the failed words
    extended (`git push` failed, `git push -u origin main` passed), or some of them dropped with
    three or more kept in order (`docker exec web odoo -c /etc/o.conf -d db` failed, `docker exec
    web odoo -d db` passed). The failed action of a chain
    is its last command that is not plumbing (`git add -A && git commit -m "x"` is the commit,
    which a later `git commit -m "y"` retries); a message or other text with spaces is not an
    operand that must match."""
    failed = _action(_parsed(error_key))
    if failed is None:
        return False
    failed_words = _operands_of(failed)
    if len(failed_words) < 2:
        return False
    for command in _parsed(success_key):
        passed_words = _operands_of(command)
        if failed_words[:2] != passed_words[:2]:
            continue
        shared = {w for w in failed_words[2:] if is_path(w)} & {w for w in passed_words[2:] if is_path(w)}
        if shared or passed_words[: len(failed_words)] == failed_words:
            return True
        if len(passed_words) >= MIN_KEPT_OPERANDS and _in_order(passed_words, failed_words):
            return True
    return False


MIN_KEPT_OPERANDS = 3
"""Operands a retry that dropped some must keep (the program, its subcommand and a target)."""


def _in_order(words: Sequence[str], within: Sequence[str]) -> bool:
    """Whether `words` are `within` with some left out, in the same order."""
    rest = iter(within)
    return all(any(word == other for other in rest) for word in words)


def _action(commands: Sequence[Sequence[str]]) -> Sequence[str] | None:
    """The command a chain is for: its last one that is not plumbing (`cd`, `echo`, `git add` …)."""
    for words in reversed(commands):
        if not is_plumbing([list(words)]):
            return words
    return commands[0] if commands else None


def _operands_of(words: Sequence[str]) -> list[str]:
    """The words that say what a command acts on: no options, no free text (words with spaces)."""
    return [w for w in words if not w.startswith("-") and " " not in w and "\n" not in w]

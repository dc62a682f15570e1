"""What a user expects of a command line, run as a user would (real processes, a real bash, a real pty):
shell completion generated from the parser, `models`, a warning for an unknown model, `serve` saying
on a terminal what it waits for, `import SESSION_ID` finding an agent's transcript, and logs that stay
on one line per record when stderr is a file."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from _agent_events import ClaudeTranscript, CodexRollout


def env(home: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTFOLD_", "ANTHROPIC_"))}
    return {**base, "CONTEXTFOLD_HOME": str(home), "COLUMNS": "200", **extra}


def run(home: Path, *args: str, stdin: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env(home, **extra),
        timeout=120,
    )


# -- completion ----------------------------------------------------------------------------------


def _complete(script: Path, *words: str) -> list[str]:
    """What bash's completion function offers for `words` (the last is the one being typed)."""
    array = " ".join("'" + w.replace("'", "'\\''") + "'" for w in ("contextfold", *words))
    program = (
        f"source {script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words)}; _contextfold\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\ncomplete -p contextfold >&2\n'
    )
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "-F _contextfold contextfold" in done.stderr  # the function is registered for the command
    return [line for line in done.stdout.splitlines() if line]


def test_bash_completion_sources_and_completes_subcommands_options_and_choices(tmp_path: Path) -> None:
    out = run(tmp_path, "completion", "bash")
    assert out.returncode == 0, out.stderr
    script = tmp_path / "contextfold.bash"
    script.write_text(out.stdout, "utf-8")
    assert _complete(script, "ser") == ["serve"]
    assert set(_complete(script, "")) >= {"serve", "proxy", "hooks", "import", "models", "completion", "--home"}
    assert sorted(_complete(script, "hooks", "")) == ["--help", "-h", "install", "status", "uninstall"]
    assert sorted(_complete(script, "hooks", "install", "c")) == ["claude-code", "codex"]
    assert sorted(_complete(script, "hooks", "install", "codex", "--scope", "")) == ["project", "user"]
    assert _complete(script, "--home", "/tmp/h", "token", "ro") == ["rotate"]  # an option's value is skipped
    assert _complete(script, "serve", "--sta") == ["--stateless"]
    assert sorted(_complete(script, "completion", "")) == ["--help", "-h", "bash", "fish", "zsh"]
    assert "home" not in (tmp_path / "home").name or not (tmp_path / "home").exists()  # nothing opened


def test_zsh_and_fish_completion_name_every_command(tmp_path: Path) -> None:
    from contextfold.cli.completion import walk
    from contextfold.cli.dispatch import build_parser

    commands = {c.path for c in walk(build_parser()) if c.path}
    assert {"serve", "hooks install", "token rotate", "models", "completion"} <= commands
    for shell in ("zsh", "fish"):
        out = run(tmp_path, "completion", shell)
        assert out.returncode == 0, out.stderr
        for path in commands:
            assert path.split()[-1] in out.stdout, (shell, path)
    zsh, fish = shutil.which("zsh"), shutil.which("fish")
    for shell, found in (("zsh", zsh), ("fish", fish)):
        if not found:  # .ci/run installs both; locally they may be absent
            if _in_ci():
                pytest.fail(f"{shell} is not installed (apt-get install zsh fish)")
            continue
        script = tmp_path / f"c.{shell}"
        script.write_text(run(tmp_path, "completion", shell).stdout, "utf-8")
        assert subprocess.run([found, "-n", str(script)], capture_output=True, timeout=60).returncode == 0, shell
    if zsh:  # sourced in a real zsh, the command is registered with the bash function zsh runs
        done = subprocess.run(
            [zsh, "-f", "-c", f"source {tmp_path / 'c.zsh'} && print -r -- ${{_comps[contextfold]}}"],
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
            timeout=60,
        )
        assert done.returncode == 0 and "-F _contextfold" in done.stdout, done.stderr
    if fish:  # fish's own completion engine, asked as the shell asks it
        program = (
            f"source {tmp_path / 'c.fish'}; complete -C 'contextfold ser'; echo ---; "
            "complete -C 'contextfold hooks install --scope '"
        )
        done = subprocess.run([fish, "--no-config", "-c", program], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        first, second = done.stdout.split("---\n")
        assert [line.split("\t")[0] for line in first.splitlines()] == ["serve"]
        assert sorted(line.split("\t")[0] for line in second.splitlines()) == ["project", "user"]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


# -- models ----------------------------------------------------------------------------------------


def test_models_lists_windows_reserves_and_counting(tmp_path: Path) -> None:
    out = run(tmp_path, "models", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["model"]: row for row in json.loads(out.stdout)["models"]}
    assert rows["gpt-4o"] == {
        "model": "gpt-4o",
        "provider": "openai",
        "context_window": 128_000,
        "max_output": 16_384,
        "input_limit": None,
        "reserved": 16_384,
        "usable": 111_616,
        "counting": "exact o200k_base",
    }
    assert rows["gpt-5"]["input_limit"] == 272_000 and rows["gpt-5"]["usable"] == 252_000
    assert rows["claude-sonnet-4-5"]["counting"] == "estimate o200k_base × 1.2"
    assert rows["gemini-2.5"]["counting"] == "estimate o200k_base × 1.15"
    assert rows["default"]["usable"] == 96_000
    table = run(tmp_path, "models")
    assert table.returncode == 0 and "claude-haiku-4-5" in table.stdout and "168,000" in table.stdout
    assert not (tmp_path / "contextfold.db").exists()


def test_an_unknown_model_warns_and_names_the_nearest(tmp_path: Path) -> None:
    out = run(tmp_path, "count", "--model", "gpt4o", stdin="hello world")
    assert out.returncode == 0, out.stderr
    assert "estimate" in out.stdout
    (warning,) = out.stderr.splitlines()
    assert warning.startswith("contextfold: warning: unknown model 'gpt4o'")
    assert "did you mean gpt-4o" in warning and "contextfold models" in warning
    known = run(tmp_path, "count", "--model", "gpt-4o-2024-08-06", stdin="hello world")
    assert known.returncode == 0 and known.stderr == ""  # a dated snapshot of a known family: no warning
    far = run(tmp_path, "count", "--model", "zzzzqqq", stdin="x")
    assert "unknown model 'zzzzqqq'" in far.stderr and "did you mean" not in far.stderr


# -- serve on a terminal -----------------------------------------------------------------------------


def _read_until(fd: int, needle: bytes, limit_seconds: float = 60.0) -> bytes:
    got = b""
    deadline = time.monotonic() + limit_seconds  # a bound on waiting, not a timing assertion
    while needle not in got and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            got += chunk
    return got


def test_serve_on_a_terminal_says_it_waits_for_a_client_and_how_to_add_it(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "contextfold", "serve"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(tmp_path / "home"),
    )
    os.close(follower)
    try:
        assert process.stderr is not None
        said = _read_until(process.stderr.fileno(), b"serve --http").decode()
        assert "waiting for an MCP client on stdio" in said, said
        assert "contextfold hooks install claude-code" in said and "claude mcp add contextfold" in said
        assert '"mcpServers"' in said and str(tmp_path / "home") in said
        assert process.poll() is None  # it goes on waiting
    finally:
        process.terminate()
        process.wait(timeout=30)
        os.close(leader)


def test_serve_on_a_pipe_says_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "serve"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env(tmp_path / "home"),
        timeout=120,
    )
    assert done.returncode == 0 and "waiting" not in done.stderr


# -- import SESSION_ID -----------------------------------------------------------------------------------


def _claude(projects: Path, project: str = "-work-project") -> ClaudeTranscript:
    session = str(uuid.uuid4())
    folder = projects / project
    folder.mkdir(parents=True, exist_ok=True)
    t = ClaudeTranscript(folder / f"{session}.jsonl", cwd="/work/project", session=session)
    t.user("run the tests")
    t.tool("Bash", {"command": "pytest -q"}, "3 passed")
    t.assistant("all pass")
    return t


def test_import_finds_a_claude_code_session_by_its_id(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    t = _claude(claude / "projects")
    _claude(claude / "projects", "-other")  # another session beside it
    out = run(tmp_path / "home", "import", t.session, CLAUDE_CONFIG_DIR=str(claude))
    assert out.returncode == 0, out.stderr
    assert f"session {t.session}: {t.path}" in out.stdout and "imported 3 messages" in out.stdout
    # the setting names another root; the id as the hooks' session works too
    moved = tmp_path / "elsewhere"
    shutil.move(str(claude / "projects"), moved)
    again = run(
        tmp_path / "home", "import", f"claude-code-{t.session}", "--json", CONTEXTFOLD_CLAUDE_PROJECTS_DIR=str(moved)
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["session_id"] == f"claude-code-{t.session}"


def test_import_finds_a_codex_rollout_by_its_id(tmp_path: Path) -> None:
    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "27"
    day.mkdir(parents=True)
    probe = CodexRollout(tmp_path / "probe.jsonl", cwd="/work/project")
    r = CodexRollout(
        day / f"rollout-2026-11-27T10-00-00-{probe.session}.jsonl", cwd="/work/project", session=probe.session
    )
    r.user("list the files")
    r.command("ls", "a.py\nb.py")
    r.assistant("two files")
    out = run(tmp_path / "home", "import", r.session, "--json", CODEX_HOME=str(tmp_path / "codex"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["session_id"] == f"codex-{r.session}"


def test_import_by_id_says_where_it_looked_or_which_files_it_found(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    missing = str(uuid.uuid4())
    out = run(tmp_path / "home", "import", missing, CLAUDE_CONFIG_DIR=str(claude), CODEX_HOME=str(tmp_path / "cx"))
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert f"no transcript of session {missing}" in line and str(claude / "projects") in line
    assert "claude_projects_dir" in line and "codex_sessions_dir" in line
    t = _claude(claude / "projects")
    copy = claude / "projects" / "-copy" / t.path.name
    copy.parent.mkdir()
    shutil.copy(t.path, copy)
    twice = run(tmp_path / "home", "import", t.session, CLAUDE_CONFIG_DIR=str(claude), CODEX_HOME=str(tmp_path / "cx"))
    assert twice.returncode == 2
    (line,) = twice.stderr.splitlines()
    assert "names 2 transcripts" in line and str(copy) in line and str(t.path) in line
    assert not (tmp_path / "home" / "contextfold.db").exists() or "imported" not in twice.stdout


# -- logs ------------------------------------------------------------------------------------------------

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def test_serve_logs_one_line_per_record_into_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "contextfold.db").write_bytes(os.urandom(4096))  # damaged: the server warns, tools answer why
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "status", "arguments": {"session_id": "x"}},
        },
    ]
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "contextfold", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env(home),
        )
        assert process.stdin is not None and process.stdout is not None
        for message in messages:
            process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline()) for _ in range(2)]
        process.stdin.close()
        process.wait(timeout=60)
    assert answers[1]["id"] == 2 and answers[1]["result"]["isError"]
    lines = log.read_text("utf-8").splitlines()
    assert len(lines) >= 2, lines
    assert all(STAMP.match(line) for line in lines), lines
    damaged = [line for line in lines if "is damaged (file is not a database)" in line]
    assert damaged and all("or restore a backup" in line for line in damaged)  # the whole message on its line


def test_one_line_formatter_folds_tracebacks_and_newlines() -> None:
    import logging

    from contextfold.cli.logs import OneLineFormatter

    try:
        raise ValueError("first\nsecond")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed:\n%s", ("a\r\nb",), sys.exc_info())
    text = OneLineFormatter().format(record)
    assert "\n" not in text and "\r" not in text
    assert (
        "failed:\\na\\r\\nb" in text
        and "Traceback (most recent call last)" in text
        and "ValueError: first\\nsecond" in text
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_is_light(tmp_path: Path, shell: str) -> None:
    """`completion` loads no settings: it works with a config file that would not parse."""
    bad = tmp_path / "config.toml"
    bad.write_text("this is = = not toml", "utf-8")
    out = run(tmp_path, "--config", str(bad), "completion", shell)
    assert out.returncode == 0 and "contextfold" in out.stdout, out.stderr

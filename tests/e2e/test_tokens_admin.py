"""Bearer tokens a team can manage: `contextfold token add|rotate|remove|list`, and a server that
follows the tokens file as it changes.

The CLI runs as a user runs it (`python -m contextfold` subprocesses); the server is a real
`contextfold serve --http` on loopback, reached with raw HTTP and with the MCP SDK's client.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import pytest
from _servers import client, serve

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
HOW_TO = "Authorization: Bearer <token>"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args],
        env={**os.environ, "CONTEXTFOLD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def new_token(home: Path, *args: str) -> str:
    out = cli(home, "token", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def digest(token: str) -> str:
    """How the tokens file keeps a token: its sha256, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def _lines(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines()


def test_add_refuses_a_second_token_rotate_replaces_it_list_and_remove(tmp_path: Path):
    tokens_file = tmp_path / "tokens"
    first = new_token(tmp_path, "add", "alice")
    again = cli(tmp_path, "token", "add", "alice")
    assert again.returncode == 2 and again.stdout == ""
    assert "tenant 'alice' already has a token" in again.stderr and "contextfold token rotate alice" in again.stderr
    assert len(_lines(tokens_file)) == 1  # nothing written

    old_hash = digest(first)
    second = new_token(tmp_path, "rotate", "alice")
    third = new_token(tmp_path, "add", "alice", "--rotate")
    assert len({first, second, third}) == 3
    stored = tokens_file.read_text("utf-8")
    assert old_hash not in stored and digest(second) not in stored
    assert [line.split("\t")[:2] for line in _lines(tokens_file)] == [["alice", "sha256:" + digest(third)]]
    assert tokens_file.stat().st_mode & 0o777 == 0o600
    new_token(tmp_path, "add", "bob")

    listing = cli(tmp_path, "token", "list")
    assert listing.returncode == 0, listing.stderr
    rows = [line.split() for line in listing.stdout.splitlines()[1:3]]
    assert [r[0] for r in rows] == ["alice", "bob"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r[1]) for r in rows)
    assert rows[0][2] == "sha256:" + digest(third)[:12]
    assert third not in listing.stdout and digest(third) not in listing.stdout  # no secret, no full hash
    as_json = json.loads(cli(tmp_path, "token", "list", "--json").stdout)
    assert [t["tenant"] for t in as_json["tokens"]] == ["alice", "bob"]

    removed = cli(tmp_path, "token", "remove", "bob")
    assert removed.returncode == 0 and "removed the token of tenant 'bob'" in removed.stdout
    assert [line.split("\t")[0] for line in _lines(tokens_file)] == ["alice"]
    for action in ("remove", "rotate"):
        missing = cli(tmp_path, "token", action, "bob")
        assert missing.returncode == 2 and "no token for tenant 'bob'" in missing.stderr
        assert "contextfold token add bob" in missing.stderr
    assert [line.split("\t")[0] for line in _lines(tokens_file)] == ["alice"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens", "tokens.lock"]  # no temporary file left


def test_concurrent_changes_lose_nothing_and_readers_never_see_half_a_file(tmp_path: Path):
    from contextfold.home import bearer as tokenfile

    path = tmp_path / "tokens"
    names = [f"tenant{i}" for i in range(12)]
    for name in names[:6]:
        tokenfile.add(path, name)
    seen: list[int | str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                seen.append(len(tokenfile.read_entries(path)))
            except tokenfile.TokenFileError as exc:  # a half-written file would not parse
                seen.append(str(exc))

    barrier = threading.Barrier(len(names))

    def change(name: str) -> None:
        barrier.wait()
        for _ in range(3):  # new tenants are added, then rotated; the first six are rotated
            tokenfile.add(path, name, rotate=True)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=change, args=(name,)) for name in names]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    entries = tokenfile.read_entries(path)
    assert sorted(e.tenant for e in entries) == sorted(names)  # each exactly once: no change lost
    assert seen and all(isinstance(n, int) and 6 <= n <= 12 for n in seen), [s for s in seen if isinstance(s, str)]


@pytest.mark.anyio
async def test_the_server_follows_the_tokens_file_without_a_restart(tmp_path: Path):
    tokens_file = tmp_path / "team-tokens"
    alice = new_token(tmp_path, "add", "alice", "--tokens-file", str(tokens_file))
    with serve(tmp_path / "home", "--tokens-file", str(tokens_file), env={"COLUMNS": "1000"}) as server:
        async with client(server.url, alice) as mcp:
            await mcp.call_tool("session_open", {"session_id": "a", "model": "gpt-4o"})

        bob = new_token(tmp_path, "add", "bob", "--tokens-file", str(tokens_file))  # while it runs
        async with client(server.url, bob) as mcp:
            listed = await mcp.call_tool("session_list", {})
            assert listed.structured_content["sessions"] == []  # bob is his own tenant

        assert cli(tmp_path, "token", "remove", "alice", "--tokens-file", str(tokens_file)).returncode == 0
        async with httpx2.AsyncClient(timeout=30.0) as http:
            refused = await http.post(server.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {alice}"})
            assert refused.status_code == 401 and "removed or rotated" in refused.json()["error"]["message"]
            with pytest.raises(Exception) as raised:  # the SDK's client shows the server's explanation
                async with client(server.url, alice) as mcp:
                    await mcp.call_tool("session_list", {})
            assert HOW_TO in _messages(raised.value)

            rotated = new_token(tmp_path, "rotate", "bob", "--tokens-file", str(tokens_file))
            old = await http.post(server.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {bob}"})
            assert old.status_code == 401
            async with client(server.url, rotated) as mcp:
                assert not (await mcp.call_tool("session_list", {})).is_error

            # A file that no longer parses accepts none of its tokens (and the log says why) …
            good = tokens_file.read_text("utf-8")
            tokens_file.write_text(good + "not a token line\n", "utf-8")
            broken = await http.post(server.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {rotated}"})
            assert broken.status_code == 401
            assert f"{tokens_file}, line 2" in server.log_tail()
            # … until it is fixed.
            tokens_file.write_text(good, "utf-8")
            fixed = await http.post(server.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {rotated}"})
            assert fixed.status_code == 200


def _messages(exc: BaseException) -> str:
    """Every message in an exception (group), for errors the client wraps."""
    if isinstance(exc, BaseExceptionGroup):
        return " | ".join(_messages(e) for e in exc.exceptions)
    return str(exc)


@pytest.mark.anyio
async def test_a_401_says_how_to_pass_a_token_and_points_at_no_oauth_metadata(tmp_path: Path):
    new_token(tmp_path, "add", "alice")  # into <home>/tokens, which serve reads by default
    with serve(tmp_path, env={"COLUMNS": "1000"}) as server:
        async with httpx2.AsyncClient(timeout=30.0) as http:
            missing = await http.post(server.url, json=INIT, headers=HEADERS)
            wrong = await http.post(server.url, json=INIT, headers={**HEADERS, "Authorization": "Bearer nope"})
            origin = server.url.removesuffix("/mcp")
            metadata = [
                (await http.get(origin + path)).status_code
                for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")
            ]
        for response in (missing, wrong):
            assert response.status_code == 401
            assert "resource_metadata" not in response.headers["www-authenticate"]
            message = response.json()["error"]["message"]
            assert HOW_TO in message and "contextfold token add NAME" in message
        assert missing.headers["www-authenticate"] == 'Bearer realm="contextfold"'  # RFC 6750: no error code
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
        assert metadata == [404, 404]
        with pytest.raises(Exception) as raised:
            async with client(server.url) as mcp:
                await mcp.call_tool("session_list", {})
        assert "contextfold token add NAME" in _messages(raised.value)
        log = server.log_tail(100_000)
    assert "warning" not in log.lower(), log  # the SDK's deprecation warning printed twice at start is gone
    # Claude Code shows only "Failed to connect" on a 401; the server's log says which token it refused.
    assert "refused POST /mcp: no bearer token" in log
    assert f"refused POST /mcp: bearer token sha256:{digest('nope')[:12]} is unknown, removed or rotated" in log


def test_a_tokens_file_that_does_not_exist_is_refused_with_the_way_forward(tmp_path: Path):
    missing = tmp_path / "nowhere" / "tokens"
    out = cli(tmp_path, "serve", "--http", "--host", "0.0.0.0", "--port", "0", "--tokens-file", str(missing))
    assert out.returncode == 2
    assert f"cannot read tokens file {missing}" in out.stderr
    assert f"contextfold token add NAME --tokens-file {missing}" in out.stderr

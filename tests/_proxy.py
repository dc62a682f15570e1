"""Shared by the proxy tests: how to start `contextfold proxy` in front of a server, and a client
that speaks raw JSON-RPC lines (to compare bytes with a direct connection).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "proxy_upstream.py"
FAULTY = ROOT / "tests" / "proxy_faulty.py"
NPM_DIR = ROOT / "tests" / "upstreams"
NPM_INSTALL = "npm ci --prefix tests/upstreams"
OUTPUT_ID = re.compile(r"out_[0-9A-Za-z]+")
LINE = re.compile(r"^ *(\d+)\t(.*)$", re.S)


def env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "CONTEXTFOLD_HOME": str(home), **extra}


def python_upstream(*args: str) -> list[str]:
    return [sys.executable, str(UPSTREAM), *args]


def proxy_command(*upstream: str, options: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "contextfold", "proxy", *options, "--", *upstream]


def proxied(home: Path, *upstream: str, options: tuple[str, ...] = (), **extra: str) -> StdioServerParameters:
    command = proxy_command(*upstream, options=options)
    return StdioServerParameters(command=command[0], args=command[1:], env=env(home, **extra))


def direct(home: Path, *upstream: str, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=upstream[0], args=list(upstream[1:]), env=env(home, **extra))


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip locally; under CI a missing dependency fails the test instead."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def npm_server(package: str, binary: str) -> Path:
    """The pinned npm server's entry point, or a skip (a failure under CI) naming what to run."""
    if shutil.which("node") is None:
        unavailable(f"node is not installed: the npm upstream tests need Node.js, then `{NPM_INSTALL}`")
    path = NPM_DIR / "node_modules" / ".bin" / binary
    if not path.exists():
        unavailable(f"{package} is not installed in {NPM_DIR}: run `{NPM_INSTALL}`")
    pinned = json.loads((NPM_DIR / "package.json").read_text())["devDependencies"][package]
    installed = json.loads((NPM_DIR / "node_modules" / package / "package.json").read_text())["version"]
    if installed != pinned:
        unavailable(f"{package} {installed} is installed, not the pinned {pinned}: run `{NPM_INSTALL}`")
    return path


def output_id(text: str) -> str:
    found = OUTPUT_ID.search(text)
    assert found, f"no output id in {text[-500:]!r}"
    return found.group(0)


async def read_whole(client: Any, output: str, tool: str = "read_output") -> str:
    """Every line of a stored output, read back page by page through `tool`, joined."""
    lines: list[str] = []
    while True:
        result = await client.call_tool(tool, {"id": output, "offset": len(lines) + 1})
        assert not result.is_error, result.content[0].text
        head, _, body = result.content[0].text.partition("\n")
        for line in body.split("\n") if body else []:
            match = LINE.match(line)
            assert match and int(match.group(1)) == len(lines) + 1, line[:200]
            lines.append(match.group(2))
        if "more from offset=" not in head:
            return "\n".join(lines)


@contextmanager
def listening(argv: list[str], home: Path, port: int, **extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process serving HTTP on `port` for the duration of the block (its stderr in a log)."""
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"listener-{port}.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(argv, env=env(home, **extra), stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
                time.sleep(0.05)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class RawClient:
    """A process spoken to in raw JSON-RPC lines: what a client writes and exactly what it gets."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0
        self.notifications: list[bytes] = []

    @classmethod
    async def start(
        cls, argv: list[str], environ: dict[str, str], stderr: Any = asyncio.subprocess.DEVNULL
    ) -> RawClient:
        """`stderr`: where the process's log goes (a file, to read after a failure)."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=environ,
            limit=1 << 26,
        )
        return cls(process)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> bytes:
        """The raw line of the response to a new request (notifications before it are kept)."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
            assert line, "the server closed its output"
            parsed = json.loads(line)
            if parsed.get("id") == self.next_id and "method" not in parsed:
                return line.rstrip(b"\n")
            self.notifications.append(line)

    async def handshake(self, version: str = "2025-11-25") -> bytes:
        line = await self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return line

    async def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return await asyncio.wait_for(self.process.wait(), 20)
        except TimeoutError:
            self.process.kill()
            return await self.process.wait()

"""`contextfold serve --http` as a real subprocess on loopback, and real MCP clients for it.

Shared by the HTTP, concurrency and crash tests. The server's stderr goes to a log file next to
its data (a pipe nobody reads would block a chatty server once it fills), and `Server.log_tail`
shows the end of it in failure messages.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

START_TIMEOUT = 60.0
"""Seconds a server may take to listen: generous, other test runs may share the machine."""
START_ATTEMPTS = 3
"""A free port can be taken by someone else before the server binds it; then try another."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A running `contextfold serve --http` process."""

    process: subprocess.Popen[bytes]
    url: str
    home: Path
    log: Path

    def log_tail(self, chars: int = 3_000) -> str:
        try:
            return self.log.read_text("utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown handler, no lifespan exit, no checkpoint — a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), falling back to SIGKILL if it hangs."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def start_server(home: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """Start a server on `home` (its CONTEXTFOLD_HOME) and wait until it accepts connections."""
    home.mkdir(parents=True, exist_ok=True)
    for attempt in range(START_ATTEMPTS):
        port = free_port()
        log = home / f"server-{port}.log"
        with open(log, "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "contextfold", "serve", "--http", "--port", str(port), *args],
                env={**os.environ, "CONTEXTFOLD_HOME": str(home), **(env or {})},
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        server = Server(process, f"http://127.0.0.1:{port}/mcp", home, log)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return server
            except OSError:
                time.sleep(0.05)
        else:
            server.kill()
            raise AssertionError(f"server did not start listening:\n{server.log_tail()}")
        if "address already in use" not in server.log_tail().lower() or attempt == START_ATTEMPTS - 1:
            raise AssertionError(f"server exited with {process.returncode}:\n{server.log_tail()}")
    raise AssertionError("unreachable")  # pragma: no cover


@contextmanager
def serve(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """A server for the duration of the block, stopped cleanly after it (unless it is dead already)."""
    server = start_server(home, *args, env=env)
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def client(url: str, token: str | None = None, mode: str = "auto") -> AsyncIterator[Client]:
    """A real MCP client over streamable HTTP (with a bearer token when given).

    The HTTP client gets the SDK's recommended timeouts (30 s, 300 s to read a response stream)
    rather than httpx's 5 s, which a busy server can exceed; it is closed with the MCP client.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as mcp_client:
            yield mcp_client

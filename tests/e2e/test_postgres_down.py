"""A PostgreSQL database that goes away under a running server.

Every request then fails at once, saying the database is unreachable — not after the pool's
whole wait, and not as advice to raise `database_pool_size`, which is what a busy pool gets. A
tenant over HTTP reads "the server's database" where a local user reads the URL (never the
password, never the address).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _servers import client, serve

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


def _token(home: Path, tokens: Path, name: str) -> str:
    added = subprocess.run(
        [sys.executable, "-m", "contextfold", "token", "add", name, "--tokens-file", str(tokens)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CONTEXTFOLD_HOME": str(home)},
    )
    return added.stdout.strip().splitlines()[-1]


async def test_requests_fail_at_once_saying_the_database_is_unreachable(tmp_path: Path) -> None:
    import _postgres

    cluster = _postgres.start_cluster()
    stopped = False
    try:
        url = _postgres.create_database(cluster)
        tokens = tmp_path / "tokens"
        alice = _token(tmp_path, tokens, "alice")
        with serve(tmp_path, "--database", url, "--tokens-file", str(tokens)) as server:
            async with client(server.url, alice) as mcp:
                opened = await mcp.call_tool("session_open", {"session_id": "s", "model": "gpt-4o"})
                assert not opened.is_error, opened.content[0].text
                spilled = await mcp.call_tool(
                    "spill", {"session_id": "s", "text": "\n".join(f"line {i}" for i in range(5_000)), "tool": "cat"}
                )
                assert not spilled.is_error, spilled.content[0].text
                output_id = spilled.structured_content["output_id"]

                cluster.stop()
                stopped = True

                status = await mcp.call_tool("status", {"session_id": "s"})
                read = await mcp.call_tool("read_output", {"id": output_id})
                for result in (status, read):
                    text = result.content[0].text
                    assert result.is_error, text
                    assert "the server's database is unreachable (Connection refused)" in text, text
                    assert "database_pool_size" not in text and "data home" not in text, text
                    assert "127.0.0.1" not in text and str(cluster.port) not in text, text
    finally:
        if not stopped:
            cluster.stop()

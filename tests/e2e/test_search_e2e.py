"""History search in real processes: transcripts imported by the CLI, then searched over the real
stdio transport of the two-tool server `hooks install` sets up (earlier sessions of the same
project, hostile queries, a slow regex that does not hold up another call), `contextfold search`,
and the index of an older home built by several processes at once."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=_environ(),
        timeout=120,
    )


def _transcript(path: Path, sid: str, cwd: str, texts: list[str], day: str = "2026-11-20") -> Path:
    """A Claude Code session file: the user's texts, each answered."""
    records, parent = [], None
    for i, text in enumerate(texts):
        for role, body in (("user", text), ("assistant", [{"type": "text", "text": f"done ({i})"}])):
            uuid = f"{sid}-{role}-{i}"
            message = {"role": role, "content": body}
            if role == "assistant":
                message |= {"id": f"msg-{sid}-{i}", "model": "claude-sonnet-4-5"}
            records.append(
                {"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": sid, "cwd": cwd,
                 "isSidechain": False, "timestamp": f"{day}T10:{i % 60:02d}:00Z", "message": message}
            )  # fmt: skip
            parent = uuid
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    files = [
        _transcript(tmp_path / "a.jsonl", "aaa", "/work/shop", ["we decided the cache key is tenant_scoped_key_v2"]),
        _transcript(tmp_path / "b.jsonl", "bbb", "/work/shop", ["now wire the checkout flow", "a" * 50_000 + "b"]),
        _transcript(tmp_path / "c.jsonl", "ccc", "/work/elsewhere", ["tenant_scoped_key_v2 in another project"]),
    ]
    for path in files:
        done = _cli(home, "import", str(path))
        assert done.returncode == 0, done.stderr
    return home


def _server(home: Path) -> StdioServerParameters:
    args = ["-m", "contextfold", "--home", str(home), "serve", "--tools", "read_output,search_history"]
    return StdioServerParameters(command=sys.executable, args=args, env=_environ())


@pytest.mark.anyio
async def test_an_agent_finds_an_earlier_session_of_its_project_over_stdio(home: Path) -> None:
    async with Client(_server(home)) as client:
        found = await client.call_tool(
            "search_history",
            {"session_id": "claude-code-bbb", "query": "cache key tenant_scoped", "within": "project"},
        )
        assert not found.is_error, found.content
        hits = found.structured_content["hits"]
        assert [(h["session_id"], h["ref"]) for h in hits] == [("claude-code-aaa", "m1")]
        assert "2026-11-20 10:00 UTC" in found.structured_content["text"]
        back = await client.call_tool("search_history", {"session_id": "claude-code-aaa", "expand": "m1"})
        assert "tenant_scoped_key_v2" in back.structured_content["text"]
        # The old form still works: a regex over one session.
        old = await client.call_tool("search_history", {"session_id": "claude-code-aaa", "pattern": "cache k.y"})
        assert not old.is_error and "m1 user" in old.structured_content["text"]


@pytest.mark.anyio
async def test_hostile_queries_get_one_line_and_a_slow_regex_holds_up_nobody(home: Path) -> None:
    async with Client(_server(home)) as client:
        for query in ('"unbalanced checkout', "NEAR(checkout flow)", "checkout AND * OR ^", "col:umn checkout"):
            answer = await client.call_tool("search_history", {"session_id": "claude-code-bbb", "query": query})
            assert not answer.is_error, (query, answer.content)
        refusals = {
            "x" * 1_000_000: "search_max_query_chars",
            " OR ".join(f"w{i}x" for i in range(100)): "search_max_terms",
        }
        for query, setting in refusals.items():
            answer = await client.call_tool("search_history", {"session_id": "claude-code-bbb", "query": query})
            text = answer.content[0].text  # type: ignore[union-attr]
            assert answer.is_error and setting in text and "\n" not in text.strip(), text[:300]
        finished: list[str] = []

        async def slow() -> None:
            answer = await client.call_tool("search_history", {"session_id": "claude-code-bbb", "pattern": "(a+)+$"})
            assert answer.is_error and "pattern" in answer.content[0].text  # type: ignore[union-attr]
            finished.append("regex")

        async def quick() -> None:
            await anyio.sleep(0.2)
            answer = await client.call_tool("search_history", {"query": "tenant_scoped_key_v2", "within": "all"})
            assert not answer.is_error and len(answer.structured_content["hits"]) == 2
            finished.append("fts")

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            group.start_soon(quick)
        assert finished == ["fts", "regex"]


def test_the_cli_searches_with_the_same_function(home: Path) -> None:
    done = _cli(home, "search", "tenant_scoped_key_v2", "--json")
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert {h["session_id"] for h in page["hits"]} == {"claude-code-aaa", "claude-code-ccc"}
    dated = _cli(home, "search", "tenant_scoped_key_v2", "--until", "2026-11-19")
    assert dated.returncode == 0 and dated.stdout.strip() == "no hit found"
    bad = _cli(home, "search", "checkout", "--since", "someday")
    assert bad.returncode != 0 and "since" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def _unindexed(db: Path) -> None:
    """Put the database back as schema 8 left it, history and all: no search index."""
    with sqlite3.connect(db) as conn:
        for statement in (
            "DROP TRIGGER search_on_insert",
            "DROP TRIGGER search_on_delete",
            "DROP TRIGGER search_on_update",
            "DROP TABLE search_index",
            "DROP VIEW search_source",
            "DROP TABLE search_backfill",
            "DROP INDEX messages_summaries",
            "PRAGMA user_version = 8",
        ):
            conn.execute(statement)


def test_an_older_home_is_indexed_by_several_processes_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    texts = [f"older message {i} about subject_{i:04d}" for i in range(600)]
    done = _cli(home, "import", str(_transcript(tmp_path / "old.jsonl", "old", "/p", texts)))
    assert done.returncode == 0, done.stderr
    _unindexed(home / "contextfold.db")
    config = tmp_path / "small-batches.toml"
    config.write_text("search_index_batch = 50\n")
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "contextfold", "--home", str(home), "--config", str(config), "search", "--index"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environ(),
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=180) for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    assert all("search index complete" in err for _, err in outputs), outputs
    with sqlite3.connect(home / "contextfold.db") as conn:
        conn.execute("INSERT INTO search_index (search_index, rank) VALUES ('integrity-check', 1)")
        indexed = conn.execute("SELECT COUNT(*) FROM search_index").fetchone()[0]
        parts = conn.execute("SELECT COUNT(*) FROM parts").fetchone()[0]
    assert indexed == parts
    for i in (0, 299, 599):
        found = _cli(home, "search", f"subject_{i:04d}", "--json")
        assert [h["ref"] for h in json.loads(found.stdout)["hits"]] == [f"m{2 * i + 1}"], found.stdout


_WRITER = """
import asyncio, sys
from pathlib import Path
from contextfold.config import load_settings
from contextfold.service.facade import ContextService

async def main(home: str, name: str) -> None:
    service = await ContextService.open(load_settings({"home": Path(home), "search_index_lag": 7}, environ={}))
    try:
        await service.open_session(name, model="gpt-4o")
        for i in range(60):
            await service.append(name, [{"role": "user", "content": f"{name} wrote entry_{name}_{i:03d}"}])
            if i % 5 == 4:  # what it just wrote is found at once, whatever the other process does
                page = await service.search(f"entry_{name}_{i:03d}", session_id=name)
                assert [h.ref for h in page.hits] == [f"m{i + 1}"], (i, page.hits)
                await service.search("entry", within="all", limit=50)
    finally:
        await service.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_processes_appending_and_searching_at_once_index_every_part_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert (
        _cli(home, "import", str(_transcript(tmp_path / "a.jsonl", "aaa", "/p", ["a first session"]))).returncode == 0
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(home), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environ(),
        )
        for name in ("w1", "w2", "w3")
    ]
    outputs = [p.communicate(timeout=300) for p in writers]
    assert all(p.returncode == 0 for p in writers), outputs
    done = _cli(home, "search", "--index")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(home / "contextfold.db") as conn:
        conn.execute("INSERT INTO search_index (search_index, rank) VALUES ('integrity-check', 1)")
        indexed = conn.execute("SELECT COUNT(*) FROM search_index_docsize").fetchone()[0]
        parts = conn.execute("SELECT COUNT(*) FROM parts").fetchone()[0]
    assert indexed == parts == 2 + 3 * 60
    found = _cli(home, "search", "entry_w2_059", "--json")
    assert [(h["session_id"], h["ref"]) for h in json.loads(found.stdout)["hits"]] == [("w2", "m60")]

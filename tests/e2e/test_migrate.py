"""`contextfold migrate --to postgresql://…` on a real SQLite home and a real PostgreSQL database.

The home is written through the service as a user's would be: two tenants, tool calls and their
results, a 60,000-line output spilled at ingest, a prune, a compaction, a removal strategy's
hidden messages, and an output gc evicted (its tombstone). The command runs as a subprocess; the
database is then opened as a server on it would open it, and every session must read exactly as
it does from the home: the same `get_context` answer (version included), `status`, `search_history`
of hidden messages, the spilled output by slice and search, the tombstone's reason.

Resuming: a run stopped after two sessions goes on with the rest; a session changed in the home
since it was copied is copied again; one that PostgreSQL already has without having received it
from this home is a conflict, reported and left alone (exit 1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from contextfold.config import load_settings
from contextfold.service.facade import ContextService

pytestmark = pytest.mark.anyio

BIG = "\n".join(f"line {i}: {'AssertionError: expected 3' if i == 41_000 else 'ok'}" for i in range(60_000))


def _call(call_id: str, cmd: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}


def _turns(n: int, tag: str) -> list[dict]:
    messages: list[dict] = []
    for i in range(n):
        messages += [
            {"role": "user", "content": f"{tag} step {i}: please run the tests in module_{i}.py; keep the API stable"},
            {"role": "assistant", "content": None, "tool_calls": [_call(f"{tag}{i}", f"pytest module_{i}.py")]},
            {"role": "tool", "tool_call_id": f"{tag}{i}", "content": f"{'x' * 3000}\n{i} passed"},
            {"role": "assistant", "content": f"{tag} step {i} done: module_{i}.py passes."},
        ]
    return messages


async def _build_home(home: Path) -> dict[str, str]:
    """Sessions worth migrating; returns the spilled output's id and the evicted one's."""
    settings = load_settings({"home": home}, environ={})
    async with await ContextService.open(settings) as local:
        await local.open_session("plain", model="gpt-4o", title="plain")
        await local.append("plain", _turns(30, "p"))
        await local.open_session("big", model="gpt-4o")
        result = await local.append(
            "big",
            [
                {"role": "user", "content": "run the whole suite"},
                {"role": "assistant", "content": None, "tool_calls": [_call("b1", "pytest -x")]},
                {"role": "tool", "tool_call_id": "b1", "content": BIG},
            ],
        )
        spilled = result.spilled[0].output_id
        await local.open_session("compacted", model="gpt-4o", settings={"preserve_recent_tokens": 2000})
        await local.append("compacted", _turns(40, "c"))
        await local.prune("compacted", keep_tool_uses=5)
        compacted = await local.compact("compacted", summarizer="extractive")
        assert compacted.compacted
        await local.open_session("removed", model="gpt-4o", settings={"context_window": 30_000})
        await local.append("removed", _turns(40, "r"))
        removed = await local.compact("removed", strategy="middle")
        assert removed.compacted
        gone = await local.spill("plain", "a short output\n" * 10, tool="cat")
        async with local.backend.spill_transaction() as tx:
            await tx.remove_outputs([gone.output_id], "evicted", 1_800_000_000.0)
        bob = local.tenant("bob")
        await bob.open_session("plain", model="gpt-4o", title="bob's plain")
        await bob.append("plain", _turns(3, "b"))
    return {"spilled": spilled, "evicted": gone.output_id}


def _migrate(home: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextfold", "migrate", "--to", url, *extra],
        env={**os.environ, "CONTEXTFOLD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )


SESSIONS = [("", "plain"), ("", "big"), ("", "compacted"), ("", "removed"), ("bob", "plain")]


async def _views(settings) -> dict:
    """What each session reads as, through the service."""
    seen = {}
    async with await ContextService.open(settings) as service:
        for owner, session_id in SESSIONS:
            tenant = service.tenant(owner)
            context = await tenant.get_context(session_id, format="anthropic")
            status = (await tenant.status(session_id)).model_dump()
            history = await tenant.search_history(session_id, pattern="step 0:")
            seen[(owner, session_id)] = (context.model_dump(), status, history.model_dump())
    return seen


async def test_migrate_copies_a_home_that_then_reads_the_same(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    ids = await _build_home(home)
    local = load_settings({"home": home}, environ={})
    before = await _views(local)

    # The test cluster trusts loopback connections, so a password is accepted and ignored: enough
    # to check that none is ever printed.
    with_password = pg_url.replace("contextfold@", "contextfold:hunter2@")
    done = _migrate(home, with_password, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["copied"] == 5 and not report["mismatches"] and not report["conflicts"]
    assert report["blobs"] == 1 and report["blob_bytes"] == len(BIG.encode())
    assert "hunter2" not in done.stdout + done.stderr and "contextfold:***@" in report["target"]

    team = load_settings({"home": tmp_path / "replica", "database": pg_url}, environ={})
    after = await _views(team)
    assert after == before  # same views, versions, counts, statuses and history searches

    async with await ContextService.open(team) as service:
        page = await service.read_output(ids["spilled"], offset=41_001, limit=2)
        assert page.text.splitlines() == ["41001\tline 41000: AssertionError: expected 3", "41002\tline 41001: ok"]
        found = await service.read_output(ids["spilled"], pattern="AssertionError")
        assert found.matches == 1 and found.text.startswith("41001:")
        with pytest.raises(Exception, match="was evicted at 2027-01-15"):
            await service.read_output(ids["evicted"])
        with pytest.raises(Exception, match="no output with id"):
            await service.tenant("bob").read_output(ids["spilled"])
        # The copy is a working session: it takes appends where the home left off.
        await service.append("plain", [{"role": "user", "content": "after the move"}])
        assert (await service.status("plain")).message_count == 91  # 30 turns of 3 stored messages, and this one

    # Nothing new: every session is skipped, the counts still verified (the append above
    # changed only PostgreSQL, which is not a conflict while the home's copy is unchanged).
    again = _migrate(home, pg_url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 copied, 0 copied again (changed since), 5 already there" in again.stdout
    assert "counts verified" in again.stdout


async def test_migrate_resumes_recopies_changes_and_reports_conflicts(tmp_path: Path, pg_url: str) -> None:
    from contextfold.home.migration import migrate_home

    home = tmp_path / "home"
    await _build_home(home)
    local = load_settings({"home": home}, environ={})

    class Stop(Exception):
        pass

    def stop_after_two(done: int, total: int) -> None:
        if done == 2:
            raise Stop

    with pytest.raises(Stop):
        migrate_home(local.database_path, local.spill_path, pg_url, progress=stop_after_two)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM migrated_sessions").fetchone()[0] == 2
        assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 2

    resumed = _migrate(home, pg_url)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "3 copied, 0 copied again (changed since), 2 already there" in resumed.stdout

    # Changed in the home since: copied again, whole.
    async with await ContextService.open(local) as service:
        await service.append("compacted", [{"role": "user", "content": "one more thing"}])
    # And a session PostgreSQL got from elsewhere, with an id the home also uses.
    async with await ContextService.open(local) as service:
        await service.tenant("carol").open_session("mine", model="gpt-4o")
    team = load_settings({"home": tmp_path / "replica", "database": pg_url}, environ={})
    async with await ContextService.open(team) as service:
        await service.tenant("carol").open_session("mine", model="gpt-4o", title="made in PostgreSQL")
    before = await _views(local)

    third = _migrate(home, pg_url)
    assert third.returncode == 1, third.stdout + third.stderr
    assert "0 copied, 1 copied again (changed since), 4 already there" in third.stdout
    assert "conflict: carol/mine: PostgreSQL already has a session with this id; left as it is" in third.stdout
    assert await _views(team) == before
    async with await ContextService.open(team) as service:
        assert (await service.tenant("carol").store.get_session("mine")).title == "made in PostgreSQL"

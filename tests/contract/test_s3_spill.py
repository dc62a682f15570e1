"""The blob store contract (tests/blob_contract.py) on S3-compatible object storage.

The only S3-compatible server that installs on these machines is moto's (`moto[server]` from
PyPI), so that is what this runs against: a real HTTP server on loopback, spoken to by obstore as
to any S3 endpoint (`AWS_ENDPOINT_URL`). A bucket per test.
"""

from __future__ import annotations

import itertools
import os

import pytest
from blob_contract import *  # noqa: F403 - the contract's tests run here

pytestmark = [pytest.mark.s3, pytest.mark.slow]

IN_CI = os.environ.get("CI", "").lower() == "true"
_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_endpoint():
    try:
        import moto.server  # noqa: F401
        import obstore  # noqa: F401
    except ImportError as exc:
        message = f"S3 tests need obstore and moto[server] (pip install -e '.[test]'): {exc}"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    import subprocess
    import sys
    import time

    import httpx2
    from _servers import free_port

    # A process of its own: moto keeps objects in memory, which must not count as ours.
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx2.get(f"http://127.0.0.1:{port}/moto-api/", timeout=1.0)
            break
        except httpx2.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("moto's S3 server did not start") from None
            time.sleep(0.1)
    saved = {
        k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    }
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
        }
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def new_bucket(endpoint: str) -> str:
    import httpx2

    name = f"contextfold-{os.getpid()}-{next(_buckets)}"
    httpx2.put(f"{endpoint}/{name}").raise_for_status()
    return name


@pytest.fixture
def backend(s3_endpoint):
    from contextfold.blobs.s3 import S3Blobs

    url = f"s3://{new_bucket(s3_endpoint)}/spill"
    return lambda: S3Blobs(url)


@pytest.fixture
def blobs(backend):
    return backend()


@pytest.fixture
def reopen(backend):
    return backend


# -- replicas with their spills in S3 ----------------------------------------------------------------


@pytest.mark.anyio
async def test_replicas_share_spilled_outputs_in_s3(tmp_path, pg_url, s3_endpoint) -> None:
    """Two `serve --http --database … --spill-url s3://…` replicas: an output spilled through one
    reads back through the other, its content is in the bucket (not the database), and a gc
    through either removes an expired output's object."""
    import psycopg
    from _servers import client, serve

    bucket = new_bucket(s3_endpoint)
    args = ("--database", pg_url, "--spill-url", f"s3://{bucket}/spill", "--stateless")
    text = "\n".join(f"line {i}: {'Traceback (most recent call last)' if i == 7_777 else 'ok'}" for i in range(20_000))
    with serve(tmp_path / "a", *args) as a, serve(tmp_path / "b", *args) as b:
        async with client(a.url) as ca, client(b.url, mode="legacy") as cb:
            assert not (await ca.call_tool("session_open", {"session_id": "s", "model": "gpt-4o"})).is_error
            spilled = await ca.call_tool("spill", {"session_id": "s", "text": text, "tool": "pytest"})
            assert not spilled.is_error, spilled.content
            output_id = spilled.structured_content["output_id"]
            page = await cb.call_tool("read_output", {"id": output_id, "offset": 7_778, "limit": 1})
            assert page.structured_content["text"] == "7778\tline 7777: Traceback (most recent call last)"
            found = await cb.call_tool("read_output", {"id": output_id, "pattern": "Traceback"})
            assert found.structured_content["matches"] == 1
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 0  # the content is in S3
        (digest,) = db.execute("SELECT digest FROM outputs WHERE id = %s", (output_id,)).fetchone()
    from contextfold.blobs.s3 import S3Blobs

    bucket_view = S3Blobs(f"s3://{bucket}/spill")
    assert [info.digest for info in bucket_view.list()] == [digest]
    assert bucket_view.read_range(digest, 0, 9) == b"line 0: o"

    # Past retention, gc removes the output and its object (any replica's, or the command's).
    import os
    import subprocess
    import sys
    import time

    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("UPDATE outputs SET created_at = %s WHERE id = %s", (time.time() - 8 * 86_400, output_id))
    collected = subprocess.run(
        [sys.executable, "-m", "contextfold", "gc", "--json"],
        env={
            **os.environ,
            "CONTEXTFOLD_HOME": str(tmp_path / "admin"),
            "CONTEXTFOLD_DATABASE": pg_url,
            "CONTEXTFOLD_SPILL_URL": f"s3://{bucket}/spill",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stderr
    assert '"outputs_removed": 1' in collected.stdout and '"files_removed": 1' in collected.stdout
    assert list(bucket_view.list()) == []


@pytest.mark.anyio
async def test_migrate_puts_spilled_content_in_the_bucket_when_spill_url_is_set(tmp_path, pg_url, s3_endpoint) -> None:
    import json
    import subprocess
    import sys

    import psycopg
    from test_migrate import BIG, _build_home

    from contextfold.blobs.s3 import S3Blobs
    from contextfold.config import load_settings
    from contextfold.service.facade import ContextService

    bucket = new_bucket(s3_endpoint)
    home = tmp_path / "home"
    ids = await _build_home(home)
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "migrate", "--to", pg_url, "--json"],
        env={**os.environ, "CONTEXTFOLD_HOME": str(home), "CONTEXTFOLD_SPILL_URL": f"s3://{bucket}/spill"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["blobs"] == 1
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 0
    assert len(list(S3Blobs(f"s3://{bucket}/spill").list())) == 1
    team = load_settings(
        {"home": tmp_path / "replica", "database": pg_url, "spill_url": f"s3://{bucket}/spill"}, environ={}
    )
    async with await ContextService.open(team) as service:
        assert (await service.output_text(ids["spilled"])) == BIG

"""The blob store contract (tests/blob_contract.py) on the filesystem and in PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from blob_contract import *  # noqa: F403 - the contract's tests run here

from contextfold.blobs.files import FileBlobs


@pytest.fixture(params=["files", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
def backend(request: pytest.FixtureRequest, tmp_path: Path):
    """A function opening (another instance on) one fresh store of the backend under test."""
    if request.param == "files":
        yield lambda: FileBlobs(tmp_path / "blobs")
        return
    url = request.getfixturevalue("pg_url")
    opened = []

    def open_postgres():
        from contextfold.blobs.postgres import PostgresBlobs

        opened.append(PostgresBlobs(url, pool_size=2))
        return opened[-1]

    yield open_postgres
    for store in opened:
        store.close()


@pytest.fixture
def blobs(backend):
    return backend()


@pytest.fixture
def reopen(backend):
    return backend

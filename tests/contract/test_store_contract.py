"""The store contract (tests/store_contract.py) on both backends: embedded SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_contract import *  # noqa: F403 - the contract's tests run here

from contextfold.store import SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
def backend(request: pytest.FixtureRequest, tmp_path: Path):
    """How to open (another connection to) one fresh database of the backend under test."""
    if request.param == "sqlite":
        return lambda: SQLiteStore.open(tmp_path / "contract.db")
    url = request.getfixturevalue("pg_url")

    def open_postgres():
        from contextfold.store.postgres import PostgresStore

        return PostgresStore.open(url, pool_size=4)

    return open_postgres


@pytest.fixture
async def store(backend):
    opened = await backend()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def reopen(backend):
    return backend

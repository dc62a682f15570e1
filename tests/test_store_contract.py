"""The store contract (tests/store_contract.py) on the embedded SQLite backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.store import SQLiteStore
from store_contract import *  # noqa: F403 - the contract's tests run here

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path):
    opened = await SQLiteStore.open(tmp_path / "contract.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def reopen(tmp_path: Path):
    async def second():
        return await SQLiteStore.open(tmp_path / "contract.db")

    return second

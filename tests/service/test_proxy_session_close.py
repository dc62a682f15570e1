"""A proxy that goes away while its data home is still being opened leaves the home whole.

The proxy opens the data home in the background once its upstream answers; a client that leaves at
once closes the session while a new database may be migrating. Cancelled between two migration
steps, the opening left the database half upgraded (schema 4 of 8, seen under load), and reading
commands such as `contextfold sessions` then refused the home until something wrote to it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from contextfold.config import load_settings
from contextfold.proxy.session import ProxySession
from contextfold.store.schema import SCHEMA_VERSION

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("after_polls", [0, 1, 2, 5, 20])
async def test_closing_while_the_home_is_opened_leaves_it_whole(tmp_path: Path, after_polls: int) -> None:
    settings = load_settings({"home": str(tmp_path)}, environ={})
    session = ProxySession(settings, title="proxy: test", owner="")
    session.start()
    database = tmp_path / "contextfold.db"
    while not database.exists():  # the opening has begun: the file is made first, then migrated
        await asyncio.sleep(0.0005)
    for _ in range(after_polls):
        await asyncio.sleep(0)
    await session.close()
    with sqlite3.connect(database) as db:
        (version,) = db.execute("PRAGMA user_version").fetchone()
    assert version == SCHEMA_VERSION

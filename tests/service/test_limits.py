"""Disk quotas and hard caps: each is a setting, and exceeding it is a clear error that loses nothing.

The spill store evicts its oldest outputs rather than refusing new ones; only an output that could
never fit is refused. The database refuses appends once it reaches its quota, and takes them again
when sessions are deleted. Per-message and per-batch caps are covered in test_service.py; the HTTP
request body cap in test_http.py.
"""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest
from test_service import call, dump

from contextfold.config import load_settings
from contextfold.errors import NotFoundError
from contextfold.service.facade import ContextService, LimitExceeded
from contextfold.service.outputs import EVICT_TO, EVICTION_GRACE_SECONDS

pytestmark = pytest.mark.anyio


def _noise(n: int, seed: int) -> str:
    """`n` chars of distinct lines (so every output has its own content digest)."""
    rng = random.Random(seed)
    line = lambda: "".join(rng.choices(string.ascii_letters, k=79))  # noqa: E731
    return "\n".join(line() for _ in range(n // 80 + 1))[:n]


async def _open(tmp_path: Path, **overrides) -> ContextService:
    # Small truncation limits, so every output below is spilled.
    settings = load_settings({"home": tmp_path, "max_bytes": 1_000, "max_lines": 50, **overrides}, environ={})
    return await ContextService.open(settings)


async def _tool_result(svc: ContextService, session: str, n: int, text: str):
    return await svc.append(
        session,
        [
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{n}")]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": text},
        ],
    )


def _spill_bytes(tmp_path: Path) -> int:
    """Bytes of spilled content on disk, counted independently of the code under test."""
    return sum(p.stat().st_size for p in (tmp_path / "outputs").iterdir() if re.fullmatch("[0-9a-f]{64}", p.name))


async def test_the_spill_store_evicts_its_oldest_outputs_instead_of_refusing(tmp_path: Path):
    quota = 1_000_000
    async with await _open(tmp_path, spill_quota_bytes=quota) as svc:
        svc.outputs.eviction_grace = 0  # every output past its grace: eviction alone is tested here
        await svc.open_session("s", model="gpt-4o")
        ids = []
        for n in range(12):  # 12 × 150 kB = 1.8 MB through a 1 MB store
            result = await _tool_result(svc, "s", n, _noise(150_000, n))
            ids.append(result.spilled[0].output_id)
            assert await svc.outputs.used_bytes() <= quota
        assert _spill_bytes(tmp_path) <= quota
        # As many of the newest outputs as fit are all still readable; the oldest went first.
        newest = ids[-int(quota // 150_000) :]
        for output_id in newest:
            assert (await svc.read_output(output_id, offset=1, limit=1)).total_lines > 0
        with pytest.raises(
            NotFoundError, match=r"was evicted at .* UTC to keep the spill store under spill_quota_bytes"
        ):
            await svc.read_output(ids[0], offset=1, limit=1)


SIZE = 150_000
FITS_THREE = 3 * SIZE + SIZE // 2
"""A spill quota that holds three outputs of SIZE bytes, not four."""


async def test_a_spill_evicts_only_what_it_needs(tmp_path: Path):
    """The fourth output into a store that fits three evicts the oldest alone: the two newest
    survive with it (eviction down to 80 % of the quota used to take them too, just acknowledged)."""
    async with await _open(tmp_path, spill_quota_bytes=FITS_THREE) as svc:
        svc.outputs.eviction_grace = 0  # all four are past their grace
        await svc.open_session("s", model="gpt-4o")
        ids = [(await _tool_result(svc, "s", n, _noise(SIZE, n))).spilled[0].output_id for n in range(4)]
        with pytest.raises(NotFoundError, match="was evicted"):
            await svc.read_output(ids[0], offset=1, limit=1)
        for output_id in ids[1:]:
            assert (await svc.read_output(output_id, offset=1, limit=1)).total_lines > 0
        assert await svc.outputs.used_bytes() == 3 * SIZE


async def test_an_output_within_its_grace_is_never_evicted(tmp_path: Path):
    """Outputs are safe for EVICTION_GRACE_SECONDS after they are acknowledged: a spill that could
    fit only by evicting one is refused, and every acknowledged output stays readable."""
    assert 0 < EVICTION_GRACE_SECONDS <= 300
    assert load_settings({"home": tmp_path}, environ={}).spill_eviction_grace_seconds == EVICTION_GRACE_SECONDS
    async with await _open(tmp_path, spill_quota_bytes=FITS_THREE) as svc:
        svc.outputs.eviction_grace = 1e9  # every output is within its grace, however slow the machine
        await svc.open_session("s", model="gpt-4o")
        ids = [(await _tool_result(svc, "s", n, _noise(SIZE, n))).spilled[0].output_id for n in range(3)]
        before = dump(svc.settings.database_path)
        with pytest.raises(LimitExceeded, match=r"spill: a 150,000-byte output does not fit"):
            await _tool_result(svc, "s", 3, _noise(SIZE, 3))
        assert dump(svc.settings.database_path) == before
        for output_id in ids:
            assert (await svc.read_output(output_id, offset=1, limit=1)).total_lines > 0


async def test_an_output_larger_than_the_quota_is_refused_and_nothing_is_written(tmp_path: Path):
    async with await _open(tmp_path, spill_quota_bytes=100_000) as svc:
        await svc.open_session("s", model="gpt-4o")
        await _tool_result(svc, "s", 0, _noise(50_000, 0))
        before, files = dump(svc.settings.database_path), _spill_bytes(tmp_path)
        with pytest.raises(LimitExceeded, match=r"spill: a 200,000-byte output does not fit.*spill_quota_bytes"):
            await _tool_result(svc, "s", 1, _noise(200_000, 1))
        assert dump(svc.settings.database_path) == before
        assert _spill_bytes(tmp_path) == files
        assert await svc.outputs.used_bytes() == files


async def test_a_spill_quota_of_zero_means_no_quota(tmp_path: Path):
    async with await _open(tmp_path, spill_quota_bytes=0) as svc:
        await svc.open_session("s", model="gpt-4o")
        for n in range(5):
            await _tool_result(svc, "s", n, _noise(100_000, n))
        assert (await svc.gc()).outputs_removed == 0
        assert _spill_bytes(tmp_path) >= 500_000


async def test_gc_evicts_only_past_90_percent_of_the_quota(tmp_path: Path):
    async with await _open(tmp_path, spill_quota_bytes=0) as svc:
        svc.outputs.eviction_grace = 0
        await svc.open_session("s", model="gpt-4o")
        for n in range(10):
            await _tool_result(svc, "s", n, _noise(100_000, n))
        used = await svc.outputs.used_bytes()
        svc.outputs.quota_bytes = int(used / 0.89)  # 89 % full: under the eviction threshold
        assert (await svc.gc()).outputs_removed == 0
        svc.outputs.quota_bytes = int(used / 0.95)  # 95 % full: evicts down to 80 %
        cleaned = await svc.gc()
        assert cleaned.outputs_removed == 2 and cleaned.files_removed == 2
        assert await svc.outputs.used_bytes() <= EVICT_TO * svc.outputs.quota_bytes


async def test_the_database_quota_refuses_appends_until_sessions_are_deleted(tmp_path: Path):
    async with await _open(tmp_path, max_database_bytes=400_000) as svc:
        await svc.open_session("old", model="gpt-4o")
        await svc.open_session("new", model="gpt-4o")
        text = _noise(900, 7)
        with pytest.raises(
            LimitExceeded,
            match=r"database: the database holds [\d,]+ bytes.*delete sessions you no longer need or raise",
        ):
            for n in range(1_000):
                await svc.append("old", [{"role": "user", "content": f"{n} {text}"}])
        acknowledged = n  # messages 0 … n-1 went in; n was refused
        before = dump(svc.settings.database_path)
        with pytest.raises(LimitExceeded):
            await svc.append("new", [{"role": "user", "content": "hello"}])
        assert dump(svc.settings.database_path) == before
        assert (await svc.status("old")).message_count == acknowledged

        await svc.delete_session("old")
        await svc.append("new", [{"role": "user", "content": "hello again"}])
        assert (await svc.status("new")).message_count == 1

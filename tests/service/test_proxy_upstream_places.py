"""`proxy_max_upstreams` counts an upstream until it is stopped; a request that comes while one is
being stopped waits for that stop instead of being refused.

The upstream's process can be gone (reaped, no longer the proxy's child) a moment before the proxy
has closed its pipes and given its place back. A client that waited for the process to go, then
asked, got a 503 now and then (seen in CI). These run real child processes.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from contextfold.config import load_settings
from contextfold.proxy.launch import Upstreams
from contextfold.proxy.spec import UpstreamSpec

pytestmark = pytest.mark.anyio

# Reads its stdin to the end (the proxy closing it asks it to stop), then takes a while to exit.
SLOW_TO_STOP = UpstreamSpec(command=[sys.executable, "-c", "import sys, time; sys.stdin.read(); time.sleep(0.3)"])


def upstreams(tmp_path: Path, limit: int) -> Upstreams:
    return Upstreams(load_settings({"home": str(tmp_path), "proxy_max_upstreams": limit}, environ={}))


async def test_a_request_while_an_upstream_stops_gets_its_place(tmp_path: Path) -> None:
    places = upstreams(tmp_path, 1)
    async with AsyncExitStack() as first_stack, AsyncExitStack() as second_stack:
        first, problem, refused = await places.open(SLOW_TO_STOP, first_stack)
        assert first is not None and problem is None and not refused
        stopping = asyncio.create_task(first.aclose())
        await asyncio.sleep(0.05)  # the stop has begun: stdin closed, the process still sleeping
        assert places.stopping == 1 and places.running == 1

        second, problem, refused = await places.open(SLOW_TO_STOP, second_stack)

        assert stopping.done(), "the second upstream started before the first had stopped"
        assert second is not None and problem is None and not refused
        assert places.running == 1 and places.stopping == 0
        await second.aclose()
    assert places.running == 0


async def test_at_the_limit_with_nothing_stopping_the_refusal_is_at_once(tmp_path: Path) -> None:
    places = upstreams(tmp_path, 1)
    async with AsyncExitStack() as first_stack, AsyncExitStack() as second_stack:
        first, _, _ = await places.open(SLOW_TO_STOP, first_stack)
        assert first is not None
        second, problem, refused = await asyncio.wait_for(places.open(SLOW_TO_STOP, second_stack), 3.0)
        assert second is None and refused
        assert problem is not None and "proxy_max_upstreams" in problem
        assert await asyncio.wait_for(places.room(), 3.0) == 0
        await first.aclose()
    assert places.running == 0 and await places.room() == 1

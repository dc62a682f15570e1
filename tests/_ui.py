"""Homes for the inspector's tests and benchmark: the demo session, a session with a big spill,
a session of N messages, written through the service as a harness would write them."""

from __future__ import annotations

import asyncio
import gzip
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

from contextfold.cli.demo import BUNDLED_TRANSCRIPT, _turns, demo_settings
from contextfold.config import load_settings
from contextfold.importers import load_transcript
from contextfold.service.facade import ContextService

SPILL_LINES = 40_000
CHROMIUM = Path(os.environ.get("CONTEXTFOLD_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Debian's chromium, headless, that reaches nothing on its own (no updates, sync or probes)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip locally; under CI a missing browser fails the test instead."""
    import pytest

    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def env(**extra: str) -> dict[str, str]:
    """This process's environment for a child: the same package (PYTHONPATH), no wrapping."""
    return {**os.environ, "COLUMNS": "200", **extra}


class Inspector:
    """`contextfold ui` running as a user starts it, on a free port; stopped by `close`."""

    def __init__(self, home: Path, *args: str, **extra_env: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "contextfold", "--home", str(home), "ui", "--no-open", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(**extra_env),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if "contextfold ui: http" not in line:
            self.process.kill()
            raise AssertionError(
                f"ui did not start: {line!r} {self.process.stderr.read() if self.process.stderr else ''}"
            )
        self.url = line.split()[2].rstrip("/").replace("//0.0.0.0:", "//127.0.0.1:")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def settings_for(home: Path) -> Any:
    return load_settings({"home": home})


async def _with_service(home: Path, work: Any) -> Any:
    async with await ContextService.open(settings_for(home)) as service:
        return await work(service)


def run_async(coroutine: Any) -> Any:
    """`asyncio.run` in a thread of its own: Playwright's sync API keeps a loop running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def with_service(home: Path, work: Any) -> Any:
    """`work(service)` on a service over `home`, from sync code (whether or not a loop runs here)."""
    return run_async(_with_service(home, work))


def demo_session(home: Path, session_id: str = "demo", model: str = "gpt-4o") -> None:
    """The demo's session (the bundled mini-swe-agent transcript) replayed into `home`, then
    pruned and compacted with the offline summarizer, as `contextfold demo` does."""

    async def work(service: ContextService) -> None:
        packaged = resources.files("contextfold._data").joinpath(BUNDLED_TRANSCRIPT)
        path = home / BUNDLED_TRANSCRIPT.removesuffix(".gz")
        path.write_bytes(gzip.decompress(packaged.read_bytes()))
        transcript = load_transcript(path)
        path.unlink()
        system = "\n\n".join(p["text"] for p in transcript.system) or None
        await service.open_session(
            session_id, model=model, system=system, settings=demo_settings(model, service.settings)
        )
        for batch in _turns(transcript.messages):
            await service.append(session_id, batch)
        await service.prune(session_id, keep_tool_uses=10)
        await service.compact(session_id, summarizer="extractive")

    home.mkdir(parents=True, exist_ok=True)
    run_async(_with_service(home, work))


def spill_session(
    home: Path, session_id: str = "harness-spill", lines: int = SPILL_LINES, owner: str | None = None
) -> str:
    """A harness session whose one tool output of `lines` numbered lines was spilled; its output id.
    `owner`: the tenant it belongs to (the local one by default)."""

    async def work(local: ContextService) -> str:
        service = local if owner is None else local.tenant(owner)
        await service.open_session(session_id, model="gpt-4o", system="You are a careful coding agent.")
        text = "\n".join(
            f"line {i:05d} of the build log" + (" ERROR disk full" if i % 9_999 == 0 else "")
            for i in range(1, lines + 1)
        )
        result = await service.append(
            session_id,
            [
                {"role": "user", "content": "Run the build and tell me what failed."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"cmd": "make"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": text},
                {"role": "assistant", "content": "The build failed: the disk is full."},
            ],
        )
        return result.spilled[0].output_id

    home.mkdir(parents=True, exist_ok=True)
    return run_async(_with_service(home, work))


def long_session(home: Path, session_id: str, messages: int) -> None:
    """A session of `messages` messages (user and assistant turns with a tool call each)."""

    async def work(service: ContextService) -> None:
        await service.open_session(session_id, model="gpt-4o", settings={"context_window": 0})
        batch: list[dict[str, Any]] = []
        for i in range(messages // 2):
            batch.append({"role": "user", "content": f"step {i}: look at file_{i}.py and fix the bug"})
            batch.append({"role": "assistant", "content": f"Fixed file_{i}.py: the loop bound was off by one."})
            if len(batch) >= 500:
                await service.append(session_id, batch)
                batch = []
        if batch:
            await service.append(session_id, batch)

    home.mkdir(parents=True, exist_ok=True)
    run_async(_with_service(home, work))

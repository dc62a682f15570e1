"""The suite's shared ground: where the corpus is, how it is sampled, the fixtures, the markers.

Tests live in folders by layer: `unit/` (pure functions, in memory), `contract/` (the store and
blob contracts on each backend), `service/` (the library over a real SQLite home) and `e2e/`
(processes, sockets, the real agents, npm servers, nginx, PostgreSQL). Helpers shared by several
files (fake servers, harnesses, the contracts) sit beside this file.

Plain `pytest` runs the fast set; `pytest --full` (what CI and the README's test command run)
runs everything. Slow are: everything under `e2e/`, whatever needs PostgreSQL, S3 or an npm tree,
each corpus session outside the fast set's sample, and tests marked `slow` by hand.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from contextfold.domain import Message, SystemPrompt
from contextfold.formats import parse
from contextfold.importers.normalized import load_normalized
from contextfold.tokens.counting import count_message, count_system, counter_for

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CONTEXTFOLD_CORPUS", ROOT.parent / "shared" / "corpus"))

# The benchmarks' measures (`_recall`, `_handover`) are imported by the tests that check them, and
# a few test modules share builders with another folder's (`from test_proxy import fake_llm`).
sys.path[:0] = [
    str(ROOT / "benchmarks"),
    *(str(ROOT / "tests" / folder) for folder in ("unit", "contract", "service", "e2e")),
]

# Fixtures defined beside the helpers they belong to: the fake Messages server, the real agents, the
# wheel built from this checkout.
pytest_plugins = ["fake_anthropic", "agents_harness", "_package"]

FOLDERS = {"unit", "contract", "service", "e2e"}
"""The layers the tests are sorted by; each test is marked with its folder's name."""
SLOW_FIXTURES = {"pg_cluster": "postgres", "pg_url": "postgres"}
"""Fixtures that start a server of their own: the tests using them are marked, and slow."""


def corpus_files(pattern: str) -> list[Path]:
    """Corpus files matching `pattern` (relative to the corpus root), sorted; [] when it is absent."""
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []


needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(),
    reason=f"the shared corpus is not at {CORPUS} (set CONTEXTFOLD_CORPUS to its path)",
)

# The agent families the corpus's sources belong to: a source is named after its agent, with the
# project it came from after a dash (`claude-code-spotter`, `codex-unitree-a1`). Longest first, so
# `mini-swe-agent` is not taken for `swe-agent`'s.
AGENTS = ("mini-swe-agent", "claude-code", "swe-agent", "openhands", "codex")


def corpus_source(path: Path) -> str:
    """The corpus source a file comes from: `raw/<source>/…` or `normalized/<source>__<name>.jsonl`."""
    relative = path.relative_to(CORPUS)
    if relative.parts[0] == "normalized":
        return relative.name.split("__", 1)[0]
    return relative.parts[1] if len(relative.parts) > 2 else relative.parts[0]


def corpus_kind(path: Path) -> str:
    """The agent family of a corpus file (its source when the source names none of `AGENTS`)."""
    source = corpus_source(path)
    return next((a for a in AGENTS if source == a or source.startswith(a + "-")), source)


def corpus_sample(files: Iterable[Path], sample: int = 1) -> list[Path]:
    """The fast set's rule: the `sample` smallest of `files` in each agent family (ties by path), sorted."""
    kinds: dict[str, list[Path]] = {}
    for path in files:
        kinds.setdefault(corpus_kind(path), []).append(path)
    return sorted(
        p for group in kinds.values() for p in sorted(group, key=lambda p: (p.stat().st_size, str(p)))[:sample]
    )


@functools.cache
def longest_tool_output() -> tuple[Path, str, str]:
    """The normalized corpus file holding the corpus's longest tool output, its call id and the output."""
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    best: tuple[Path, str, str] | None = None
    for path in corpus_files("normalized/*.jsonl"):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                content = row.get("content")
                if (
                    row.get("role") == "tool"
                    and isinstance(content, str)
                    and (best is None or len(content) > len(best[2]))
                ):
                    best = (path, str(row.get("tool_call_id")), content)
    if best is None:
        pytest.skip("the corpus holds no tool output")
    return best


def corpus_params(
    pattern: str | Iterable[Path],
    sample: int = 1,
    *,
    where: Callable[[Path], bool] | None = None,
    id: Callable[[Path], str] | None = None,
) -> list[Any]:
    """One `pytest.param(path)` per corpus file, for `@pytest.mark.parametrize("path", …)`.

    `pattern` is a glob relative to the corpus root, or the files themselves (when found another
    way); `where` keeps only the files it accepts. Every param is marked `corpus`. A deterministic
    sample runs in the fast set (`pytest -m "not slow"`): the `sample` smallest files of each agent
    family (`corpus_kind`), ties by path. The rest are marked `slow`, so a full run replays them all.
    Without the corpus, one skipped param says why.
    """
    if not CORPUS.is_dir():
        return [
            pytest.param(
                None,
                id="no-corpus",
                marks=pytest.mark.skip(
                    reason=f"the shared corpus is not at {CORPUS} (set CONTEXTFOLD_CORPUS to its path)"
                ),
            )
        ]
    files = corpus_files(pattern) if isinstance(pattern, str) else sorted(pattern)
    files = [p for p in files if p.is_file() and (where is None or where(p))]
    fast = set(corpus_sample(files, sample))
    name = id or (lambda p: str(p.relative_to(CORPUS)))
    return [
        pytest.param(
            path, id=name(path), marks=[pytest.mark.corpus] if path in fast else [pytest.mark.corpus, pytest.mark.slow]
        )
        for path in files
    ]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="run the whole suite: the slow set too (e2e, PostgreSQL, npm trees, every corpus session)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder, its servers and its corpus use; without `--full` (or an
    explicit `-m`), leave the slow set out and say so at the end."""
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in FOLDERS:
            item.add_marker(getattr(pytest.mark, folder))
            if folder == "e2e":
                item.add_marker(pytest.mark.slow)
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, marker in SLOW_FIXTURES.items():
            if fixture in fixtures:
                item.add_marker(getattr(pytest.mark, marker))
                item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("corpus"):
            continue
        if any(m == needs_corpus.mark for m in item.iter_markers("skipif")) or "corpus" in fixtures:
            item.add_marker(pytest.mark.corpus)
    if config.getoption("--full") or config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.stash[_LEFT_OUT] = len(slow)


_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"fast set: {left_out:,} slow tests left out (e2e, PostgreSQL, npm, the rest of the corpus); "
            "`pytest --full` runs everything"
        )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    return CORPUS


def corpus_session(path: Path, model: str = "gpt-4o") -> tuple[list[SystemPrompt], list[Message]]:
    """A normalized corpus file as the store would hold it: counted messages with ids and seqs.

    Goes through the product's own importer and parser, so tests of the policies start from the
    same domain objects a real import produces.
    """
    transcript = load_normalized(path)
    counter = counter_for(model)
    batch = parse(transcript.messages, transcript.format)
    system = count_system([SystemPrompt(role=p["role"], text=p["text"]) for p in transcript.system], counter)
    messages = [
        count_message(m, counter).model_copy(update={"id": f"m{i}", "seq": i + 1}) for i, m in enumerate(batch.messages)
    ]
    return system, messages


# -- a real PostgreSQL (tests/_postgres.py) -------------------------------------------------------


@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL cluster for the whole run (skips without one; fails under CI=true)."""
    import _postgres

    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres.missing("the psycopg package is not installed (pip install -e '.[test]')")
    cluster = _postgres.start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster):
    """The URL of a new, empty database on the test cluster, dropped after the test."""
    import _postgres

    url = _postgres.create_database(pg_cluster)
    try:
        yield url
    finally:
        _postgres.drop_database(pg_cluster, url)

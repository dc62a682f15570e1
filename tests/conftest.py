from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextfold.domain import Message, SystemPrompt
from contextfold.formats import parse
from contextfold.importers.normalized import load_normalized
from contextfold.tokens.counting import count_message, count_system, counter_for

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CONTEXTFOLD_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files(pattern: str) -> list[Path]:
    """Corpus files matching `pattern` (relative to the corpus root), sorted; [] when it is absent."""
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []


needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(),
    reason=f"the shared corpus is not at {CORPUS} (set CONTEXTFOLD_CORPUS to its path)",
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
        count_message(m, counter).model_copy(update={"id": f"m{i}", "seq": i + 1})
        for i, m in enumerate(batch.messages)
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

from __future__ import annotations

import os
from pathlib import Path

import pytest

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

"""The blob store contract (tests/blob_contract.py) on the embedded filesystem backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from blob_contract import *  # noqa: F403 - the contract's tests run here
from contextfold.fileblobs import FileBlobs


@pytest.fixture
def blobs(tmp_path: Path) -> FileBlobs:
    return FileBlobs(tmp_path / "blobs")


@pytest.fixture
def reopen(tmp_path: Path):
    return lambda: FileBlobs(tmp_path / "blobs")

"""An import stored a chunk at a time holds what an import of the whole file held (issue 26, item 11).

The import reads a transcript and stores it chunk by chunk, so its memory is a chunk, not the file.
Chunk edges fall anywhere: between an assistant message and its results, inside a compaction (its
summary and the model's answer to it stay together), between a reported usage and the messages
after it. Importing real sessions with chunks of one message must store exactly what chunks of the
default size store: the same messages, counts, compactions and calibration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_files, needs_corpus

import contextfold.importers.base as importer_base
from contextfold.config import load_settings
from contextfold.service.facade import ContextService

pytestmark = [pytest.mark.anyio, needs_corpus]

SESSIONS = [
    # Claude Code sessions with a compaction each, and a Codex rollout (its compactions carry no summary).
    *corpus_files("raw/claude-code-golfgod-v1/cf0615a9-0823-45ae-a214-03337c48795b.jsonl"),
    *corpus_files("raw/claude-code-claude-skills/6b4a1a42-d81e-4b27-9783-6540da6eb1b5.jsonl"),
    *corpus_files("raw/codex-unitree-a1/019eb0ee-7aac-7b12-bc57-cfe3284f7a54.jsonl"),
]


async def _stored(home: Path, path: Path) -> dict[str, Any]:
    async with await ContextService.open(load_settings({"home": home}, environ={})) as service:
        result = await service.import_transcript(path, session_id="s")
        session, view = await service.session_view("s")
        history = await service.session_history("s")
        status = await service.status("s")
    strip = {"id", "session_id", "created_at"}
    standing = status.model_dump()
    for compaction in (standing.get("compaction") or {}).get("recent", []):
        compaction.pop("at")  # when it was replayed
    return {
        "result": result.model_dump(exclude={"session_id", "spilled", "status"}),
        "status": standing,
        "session": session.model_dump(
            include={"model", "title", "message_count", "tokens_stored", "tokens_in_view", "usage_baseline"}
        ),
        "last_usage": session.last_usage.model_dump() if session.last_usage else None,
        "view": [m.seq for m in view],
        "history": [json.dumps(m.model_dump(mode="json", exclude=strip), sort_keys=True) for m in history],
    }


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.parent.name)
async def test_chunks_of_one_message_store_what_the_whole_file_stores(
    tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = await _stored(tmp_path / "whole", path)
    assert whole["result"]["compactions"] >= 1 or "codex" in path.parent.name  # chosen for their compactions
    monkeypatch.setattr(importer_base, "CHUNK_MESSAGES", 1)
    monkeypatch.setattr(importer_base, "CHUNK_BYTES", 1)
    chunked = await _stored(tmp_path / "chunked", path)
    for key in whole:
        assert chunked[key] == whole[key], key

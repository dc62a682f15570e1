"""`search_history`: every stored message of a session, hidden ones included, searched or read
back by reference (issue 16), with `read_output`'s safety and bounds."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_view_cache import _call, _result, _turns

from contextfold.config import load_settings
from contextfold.errors import NotFoundError
from contextfold.service import history
from contextfold.service.facade import ContextService, InvalidInput

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service(tmp_path: Path):
    svc = await ContextService.open(load_settings({"home": tmp_path}, environ={}))
    try:
        yield svc
    finally:
        await svc.close()


async def _compacted(service: ContextService) -> None:
    await service.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    await service.append("s", [{"role": "user", "content": "Never touch the vendored `yaml` package."}])
    await service.append("s", [_call("first", "pytest -x"), _result("first", 3)])
    await service.append(
        "s",
        [
            _call("boom", "pytest tests/test_io.py"),
            {
                "role": "tool",
                "tool_call_id": "boom",
                "content": "E   KeyError: 'checksum_v2'\nFAILED tests/test_io.py::test_roundtrip",
            },
        ],
    )
    await service.append("s", _turns(1, 10))
    assert (await service.compact("s", summarizer="extractive")).compacted


async def test_a_search_finds_what_compaction_hid_and_says_so(service):
    await _compacted(service)
    found = await service.search_history("s", pattern=r"KeyError: '\w+'")
    header, line = found.text.splitlines()[:2]
    assert header.endswith("assistant, hidden") and header.startswith("m")
    assert line == "E   KeyError: 'checksum_v2'"
    # The reference reads the message back whole.
    back = await service.search_history("s", at=header.split()[0])
    assert back.text.startswith(header) and "FAILED tests/test_io.py::test_roundtrip" in back.text
    # The user's own words, hidden too, and case folding inline.
    words = await service.search_history("s", pattern="(?i)NEVER TOUCH")
    assert words.text.splitlines()[0] == "m1 user, hidden" and "vendored `yaml`" in words.text
    # Something still in view is marked as such.
    recent = await service.search_history("s", pattern="check module m10")
    assert recent.text.splitlines()[0].endswith(" user")


async def test_answers_are_bounded_and_continue_where_they_stopped(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", _turns(0, 40))
    first = await service.search_history("s", pattern="line 1\\b")
    blocks = [
        line
        for line in first.text.splitlines()
        if line.startswith("m") and " " in line and line.split()[1] in ("user", "assistant")
    ]
    assert len(blocks) == history.MAX_HITS_DEFAULT and first.next_at is not None
    assert len(first.text) <= history.MAX_CHARS
    then = await service.search_history("s", pattern="line 1\\b", at=first.next_at)
    # It goes on from there: the next hit is at or after it, none is repeated.
    assert int(then.text.split()[0][1:]) >= int(first.next_at[1:]) > int(blocks[-1].split()[0][1:])
    read = await service.search_history("s", at="m1")
    assert len(read.text) <= history.MAX_CHARS and read.next_at


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({}, "pattern: give a pattern to search for, or at=<message>"),
        ({"pattern": "(unclosed"}, "pattern: invalid regular expression"),
        ({"pattern": "x{100000}{100000}"}, "pattern: the repeat counts"),
        ({"pattern": "(?R)"}, "pattern: recursive patterns"),
        ({"at": "m99999999999999999999999"}, "at: no message"),
        ({"at": "msg_nobody"}, "at: no message 'msg_nobody'"),
    ],
)
async def test_bad_requests_say_what_is_wrong(service, arguments, says):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", _turns(0, 1))
    with pytest.raises(InvalidInput, match=says.replace("(", r"\(").replace("{", r"\{").replace("?", r"\?")):
        await service.search_history("s", **arguments)


async def test_an_unknown_session_is_not_found(service):
    with pytest.raises(NotFoundError):
        await service.search_history("nobody", pattern="x")

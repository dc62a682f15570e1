"""An error's way forward, named by the core and worded by each interface in its own terms."""

from __future__ import annotations

import pytest

from contextfold.cli.reporting import CLI_WORDS, error_line
from contextfold.errors import REMEDY, REMEDY_WORDS, LimitExceeded, Remedy
from contextfold.mcpserver.tools import TOOL_WORDS, tool_words


@pytest.mark.parametrize("words", [REMEDY_WORDS, TOOL_WORDS, CLI_WORDS], ids=["library", "mcp", "cli"])
def test_every_interface_words_every_remedy(words: dict[Remedy, str]) -> None:
    assert set(words) == set(Remedy)
    assert all(text and REMEDY not in text for text in words.values())


@pytest.mark.parametrize("remedy", list(Remedy))
def test_each_reader_gets_its_own_words(remedy: Remedy) -> None:
    exc = LimitExceeded("messages", f"too big; {REMEDY}, or raise the setting", remedy=remedy)
    assert str(exc) == f"messages: too big; {REMEDY_WORDS[remedy]}, or raise the setting"
    assert tool_words(exc) == f"messages: too big; {TOOL_WORDS[remedy]}, or raise the setting"
    assert error_line(exc) == f"messages: too big; {CLI_WORDS[remedy]}, or raise the setting"


def test_the_library_and_the_terminal_never_read_a_tool_name() -> None:
    tools = ("session_delete", "read_output tool", "spill tool")
    for remedy in Remedy:
        assert not any(tool in REMEDY_WORDS[remedy] for tool in tools)
        assert "session_delete" not in CLI_WORDS[remedy] and "spill tool" not in CLI_WORDS[remedy]


def test_an_error_without_a_remedy_reads_as_written() -> None:
    exc = LimitExceeded("limit", "expected 1 to 50, got {remedy} literally")
    assert str(exc) == tool_words(exc) == "limit: expected 1 to 50, got {remedy} literally"

"""How the `contextfold` command words an error: one line naming CLI commands, not MCP tools.

Apart from `cli_views`, which needs the domain, the formats and the store to render sessions:
this module imports only `errors`, so reporting an error costs a light command no start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextfold.errors import brief

if TYPE_CHECKING:
    from contextfold.errors import NotFoundError

__all__ = ["cli_words", "error_line"]


_CLI_WORDS = (
    ("(session_delete)", "(`contextfold delete SESSION --yes`)"),
    ("use the read_output tool with offset/limit or pattern", "read it through an MCP client's read_output tool"),
    ("store huge outputs with the spill tool and send its preview", "split the message"),
    ("the client did not offer its model (no sampling capability)", "the command line has no client model to ask"),
)
"""The MCP words some service messages use for the way forward, and what a CLI user reads instead."""


def cli_words(text: str) -> str:
    for tool_words, words in _CLI_WORDS:
        text = text.replace(tool_words, words)
    return text


def error_line(exc: BaseException, home: object = None) -> str:
    """`exc` as one line naming CLI commands rather than MCP tools."""
    missing = _missing_session(exc)
    if missing is not None:
        where = f" in the data home {home}" if home else ""
        return (
            f"no session with id {missing.key!r}{where}; list sessions with `contextfold sessions`, "
            "or import one with `contextfold import FILE --session ID`"
        )
    return brief(cli_words(str(exc)))


def _missing_session(exc: BaseException) -> NotFoundError | None:
    if not isinstance(exc, LookupError):
        return None
    from contextfold.errors import NotFoundError

    return exc if isinstance(exc, NotFoundError) and exc.kind == "session" else None

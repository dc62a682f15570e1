"""How the `contextfold` command words an error: one line, its way forward in commands, not MCP tools.

Apart from `cli_views`, which needs the domain, the formats and the store to render sessions:
this module imports only `errors`, so reporting an error costs a light command no start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextfold.errors import ContextfoldError, Remedy, brief

if TYPE_CHECKING:
    from contextfold.errors import NotFoundError

__all__ = ["CLI_WORDS", "error_line"]


CLI_WORDS: dict[Remedy, str] = {
    Remedy.DELETE_SESSIONS: "delete sessions you no longer need (`contextfold delete SESSION --yes`)",
    Remedy.READ_IN_PARTS: "read it through an MCP client's read_output tool",
    Remedy.SPILL_FIRST: "split the message",
}
"""An error's way forward as a terminal user reads it: commands, not MCP tools."""


def error_line(exc: BaseException, home: object = None) -> str:
    """`exc` as one line naming CLI commands rather than MCP tools."""
    missing = _missing_session(exc)
    if missing is not None:
        where = f" in the data home {home}" if home else ""
        return (
            f"no session with id {missing.key!r}{where}; list sessions with `contextfold sessions`, "
            "or import one with `contextfold import FILE --session ID`"
        )
    return brief(exc.worded(CLI_WORDS) if isinstance(exc, ContextfoldError) else str(exc))


def _missing_session(exc: BaseException) -> NotFoundError | None:
    if not isinstance(exc, LookupError):
        return None
    from contextfold.errors import NotFoundError

    return exc if isinstance(exc, NotFoundError) and exc.kind == "session" else None

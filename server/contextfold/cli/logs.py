"""Where the long-running commands (`serve`, `proxy`) log: one line per record when stderr is a file.

An app that starts `contextfold serve` usually sends its stderr to a log file. The MCP SDK would
otherwise install rich's handler, which wraps each record to 80 columns when it is not writing to
a terminal (a warning became five lines) and draws tracebacks as boxes. When stderr is not a
terminal, each record is one line instead: `2026-11-27T15:43:28Z WARNING contextfold.x: message`,
a newline in the message written as `\\n` and a traceback appended on the same line, so `grep`,
`tail -f` and log shippers see one record per line. On a terminal rich's handler stays (the SDK
installs it). Installed before the SDK is built, its `logging.basicConfig` then changes nothing.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO


class OneLineFormatter(logging.Formatter):
    """A record as one line: UTC time, level, logger, the message with its newlines escaped."""

    converter = staticmethod(time.gmtime)

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%SZ")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)  # the message, then the traceback and stack on lines of their own
        return one_line(text)


def one_line(text: str) -> str:
    """`text` with line breaks written as `\\n` (and a carriage return as `\\r`), trailing ones dropped."""
    return text.rstrip("\r\n").replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def configure(level: int = logging.INFO, stream: TextIO | None = None) -> bool:
    """One line per record on `stream` (stderr) when it is not a terminal; whether it did so.

    Does nothing when the root logger has handlers already (an embedder's own configuration wins).
    """
    stream = stream if stream is not None else sys.stderr
    root = logging.getLogger()
    if root.handlers:
        return False
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if terminal:
        return False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    return True


__all__ = ["OneLineFormatter", "configure", "one_line"]

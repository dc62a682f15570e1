"""Lines read from a child process's pipe, each waited for within a bound.

`select` on the pipe's file object, then `readline()`, loses lines: when two arrive in one read the
second waits in the file object's buffer while `select` waits on the pipe for more that never comes
(a test then failed, now and then, saying the server had stopped answering). `Lines` reads the pipe
itself and keeps what it has not handed out yet.
"""

from __future__ import annotations

import os
import select
import time
from typing import IO

__all__ = ["Lines"]


class Lines:
    def __init__(self, pipe: IO[bytes], timeout: float) -> None:
        self.fd = pipe.fileno()
        self.timeout = timeout
        self.buffer = b""

    def next(self) -> bytes:
        """The next line, without its newline; AssertionError when none comes within the timeout or
        the pipe closes first."""
        deadline = time.monotonic() + self.timeout  # a bound on waiting, not a timing assertion
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no answer within {self.timeout:g} s"
            chunk = os.read(self.fd, 65_536)
            assert chunk, "the server closed its output"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

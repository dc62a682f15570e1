"""Where messages come from and go to: newline-delimited JSON over pipes, bounded.

A `Channel` yields `Frame`s — the bytes of one message as received, parsed — and sends either
such bytes (forwarded untouched) or a message the proxy wrote. Over stdio a message is one line;
`LineFramer` reads lines in 64 KiB blocks and never holds more than `max_bytes` of one: a longer
line is skipped to its end with only its first and last bytes kept (to find its id), so an
upstream that answers with 100 MB costs the proxy a few blocks of memory and its caller a clear
error, not the proxy's life.

The proxy's own stdin and stdout (`stdio_channel`) and an upstream server run as a child
process (`ProcessChannel`, which also keeps the last lines of its stderr for error messages)
are the two stdio ends; the HTTP ends are in `contextfold.proxy.http`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import selectors
import signal
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from contextfold.proxy.wire import dumps

log = logging.getLogger(__name__)

BLOCK = 1 << 16
EDGE = 1 << 12
"""Bytes kept from each end of a line too long to read, to find its id."""
THREADED_PARSE = 1 << 20
"""Lines at least this long are parsed in a worker thread, so the other traffic keeps flowing."""


@dataclass(frozen=True)
class Frame:
    """One message off a channel."""

    raw: bytes | None
    """Its bytes, without the newline (None when it was too large to keep)."""
    message: Any
    """The parsed JSON, or None when it could not be parsed (see `problem`)."""
    size: int
    problem: str | None = None
    head: bytes = b""
    tail: bytes = b""


class Channel(Protocol):
    async def receive(self) -> Frame | None:
        """The next message, or None once the other end has closed."""

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        """Write a message: bytes as received elsewhere (forwarded untouched), or a dict.
        `related` is the id of the request a message belongs to (HTTP routes it by that)."""

    async def aclose(self) -> None: ...


class LineFramer:
    """Lines from a byte source, each at most `max_bytes` (longer ones are reported, not read)."""

    def __init__(self, read: Callable[[int], Awaitable[bytes]], max_bytes: int, *, what: str) -> None:
        self._read = read
        self._max = max_bytes
        self._what = what
        self._buf = bytearray()
        self._eof = False

    async def next(self) -> Frame | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if isinstance(line, Frame):
                return line
            if line.strip():
                return await _parse(line, self._what)

    async def _line(self) -> bytes | Frame | None:
        start = 0
        while True:
            at = self._buf.find(b"\n", start)
            if at >= 0:
                line = bytes(self._buf[:at])
                del self._buf[: at + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(self._buf) > self._max:
                return await self._skip()
            if self._eof:
                if not self._buf:
                    return None
                line, self._buf = bytes(self._buf), bytearray()
                return line
            start = len(self._buf)
            chunk = await self._read(BLOCK)
            if chunk:
                self._buf += chunk
            else:
                self._eof = True

    async def _skip(self) -> Frame:
        """Read past the end of a line over the limit, keeping its first and last bytes."""
        head = bytes(self._buf[:EDGE])
        size = len(self._buf)
        tail = bytearray(self._buf[-EDGE:])
        self._buf = bytearray()
        while True:
            chunk = await self._read(BLOCK)
            if not chunk:
                self._eof = True
                break
            at = chunk.find(b"\n")
            if at >= 0:
                size += at
                tail = (tail + chunk[:at])[-EDGE:]
                self._buf += chunk[at + 1 :]
                break
            size += len(chunk)
            tail = (tail + chunk)[-EDGE:]
        problem = f"a message of {size:,} bytes from {self._what}, over the {self._max:,}-byte limit"
        return Frame(None, None, size, problem, head, bytes(tail))


async def _parse(line: bytes, what: str) -> Frame:
    try:
        try:
            message = await _loads(line)
        except UnicodeDecodeError:  # not UTF-8: read with replacement characters rather than lost
            line = line.decode("utf-8", "replace").encode()
            message = await _loads(line)
    except (ValueError, RecursionError) as exc:
        return Frame(line, None, len(line), f"{what} sent a line that is not JSON ({exc})")
    return Frame(line, message, len(line))


async def _loads(line: bytes) -> Any:
    if len(line) >= THREADED_PARSE:
        return await asyncio.to_thread(json.loads, line)
    return json.loads(line)


class StreamChannel:
    """A channel over an asyncio reader and writer (pipes)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None, max_bytes: int, *, what: str
    ) -> None:
        self._framer = LineFramer(reader.read, max_bytes, what=what)
        self._writer = writer
        self._lock = asyncio.Lock()
        self.closed = False
        self.closing: list[Any] = []
        """What else to close with it (the stdin end of the proxy's own stdio)."""

    async def receive(self) -> Frame | None:
        return await self._framer.next()

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        data = message if isinstance(message, bytes) else dumps(message)
        if self._writer is None or self.closed:
            raise BrokenPipeError("the channel is closed")
        async with self._lock:  # one whole line at a time, never interleaved
            self._writer.write(data + b"\n")
            await self._writer.drain()

    async def aclose(self) -> None:
        self.closed = True
        for thing in [self._writer, *self.closing]:
            if thing is not None:
                try:
                    thing.close()
                except (OSError, RuntimeError):
                    pass


async def stdio_channel(max_bytes: int) -> StreamChannel:
    """This process's stdin and stdout as a channel (the client's end).

    Whatever stdin is, the proxy reads it to its end: a pipe or a terminal through the event loop;
    a regular file or `/dev/null` (which the loop cannot wait on) in a worker thread; none at all
    (started with stdin closed) as an empty input. Its end means the client has gone: the proxy
    stops its upstream and exits 0, as a server started with `< /dev/null` does.
    """
    loop = asyncio.get_running_loop()
    reader: Any = _NoInput()
    closing: list[Any] = []
    stdin_fd = _dup(sys.stdin)
    if stdin_fd is not None:
        stdin = os.fdopen(stdin_fd, "rb", buffering=0)
        reader, pipe = _ThreadReader(stdin), None
        if _pollable(stdin_fd):
            stream = asyncio.StreamReader(limit=BLOCK)
            try:
                pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), stdin)
                reader = stream
            except ValueError:  # not a pipe after all: the thread reads it
                pass
        closing.append(pipe or stdin)
    writer: Any = None
    stdout_fd = _dup(sys.stdout)
    # Nothing else may write to the real stdout now: a stray print would corrupt the stream.
    sys.stdout = sys.stderr
    if stdout_fd is not None:
        stdout = os.fdopen(stdout_fd, "wb", buffering=0)
        try:
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
            writer = asyncio.StreamWriter(transport, protocol, None, loop)
        except ValueError:
            writer = _ThreadWriter(stdout)
    channel = StreamChannel(reader, writer, max_bytes, what="the client")
    channel.closing = closing
    return channel


def _dup(stream: Any) -> int | None:
    """A descriptor of its own for a standard stream, or None when the process was started without
    it (closed: Python then makes the stream None)."""
    try:
        return os.dup(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on `fd` (a pipe, a socket, a terminal). A regular file cannot,
    and neither can `/dev/null`: `connect_read_pipe` accepts it as a character device, then epoll
    refuses it with EPERM in a callback, and the read never ends. (Elsewhere than POSIX the loop's
    own `connect_read_pipe` decides.)"""
    if os.name != "posix":
        return True
    with selectors.DefaultSelector() as probe:
        try:
            probe.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


class _NoInput:
    """The input of a process started with stdin closed: at its end already."""

    async def read(self, n: int) -> bytes:
        return b""


class _ThreadReader:
    def __init__(self, f: Any) -> None:
        self._f = f

    async def read(self, n: int) -> bytes:
        return await asyncio.to_thread(self._f.read, n)


class _ThreadWriter:
    def __init__(self, f: Any) -> None:
        self._f = f
        self._pending = b""

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = self._pending, b""
        await asyncio.to_thread(self._f.write, data)

    def close(self) -> None:
        self._f.close()


STDERR_LINES = 20
STOP_GRACE = 0.5
"""Seconds an upstream gets to exit once its stdin is closed, before SIGTERM. Well under the 2 s an
MCP client (the TypeScript SDK) gives the proxy itself before it sends SIGTERM, then SIGKILL: the
proxy must have stopped its upstream by then, whatever the upstream does with EOF."""
KILL_GRACE = 0.5
"""Seconds an upstream gets to exit after SIGTERM, before SIGKILL."""

_RUNNING: set[ProcessChannel] = set()
"""The upstream processes started and not yet stopped, for `terminate_upstreams`."""


def terminate_upstreams() -> None:
    """At once, from a signal handler: SIGTERM to every running upstream's process group (SIGKILL
    when it was already sent), so none outlives the proxy even if its cleanup is cut short."""
    for channel in list(_RUNNING):
        channel.signal_group(signal.SIGKILL if channel.terminated else signal.SIGTERM)


class ProcessChannel(StreamChannel):
    """An upstream server run as a child process, spoken to over its stdin and stdout.

    Its stderr goes on to this process's stderr (where MCP clients log a server's stderr), and
    its last lines are kept to say why it ended.
    """

    def __init__(self, process: asyncio.subprocess.Process, max_bytes: int, command: str) -> None:
        assert process.stdout is not None and process.stdin is not None
        super().__init__(process.stdout, process.stdin, max_bytes, what="the upstream server")
        self.process = process
        self.command = command
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.terminated = False
        self._stderr_task = asyncio.create_task(self._relay_stderr())
        _RUNNING.add(self)

    @classmethod
    async def start(
        cls, argv: list[str], max_bytes: int, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> ProcessChannel:
        """Start `argv`; OSError (e.g. FileNotFoundError) when it cannot be started."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            limit=BLOCK,
            # Its own process group: what it starts (npx → node, a shell → its server) is stopped with it.
            process_group=0 if os.name == "posix" else None,
        )
        return cls(process, max_bytes, " ".join(argv))

    async def _relay_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while True:
            line = await stream.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            self.stderr_tail.append(text)
            try:
                console = sys.__stderr__  # None without a console: nothing to relay to
                if console is not None:
                    console.write(text + "\n")
                    console.flush()
            except (OSError, ValueError, AttributeError):
                pass

    def describe_exit(self) -> str:
        """How the process ended, with the last line it wrote to stderr."""
        code = self.process.returncode
        how = (
            "is still running"
            if code is None
            else (f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}")
        )
        last = next((line.strip() for line in reversed(self.stderr_tail) if line.strip()), None)
        return f"the upstream server ({self.command}) {how}" + (
            f"; its last words on stderr: {last[:300]}" if last else ""
        )

    async def wait_exit(self, timeout: float = 2.0) -> None:
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            pass
        try:
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 0.5)
        except (TimeoutError, asyncio.CancelledError):
            pass

    def signal_group(self, signum: int) -> None:
        """Send `signum` to the upstream's process group (to the process alone where there is none)."""
        if signum != signal.SIGKILL:
            self.terminated = True
        killpg = getattr(os, "killpg", None)
        if killpg is not None:
            try:
                killpg(self.process.pid, signum)
                return
            except (ProcessLookupError, PermissionError):
                pass
        if self.process.returncode is None:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    async def _exited(self, timeout: float) -> bool:
        if self.process.returncode is not None:
            return True
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def aclose(self) -> None:
        """Close its stdin (the stdio way to ask a server to stop), then terminate, then kill: within
        `STOP_GRACE` + `KILL_GRACE`, or at once after `terminate_upstreams`. Whatever is left of its
        process group is killed, and it is reaped."""
        await super().aclose()
        try:
            if not await self._exited(0 if self.terminated else STOP_GRACE):
                if not self.terminated:
                    self.signal_group(signal.SIGTERM)
                if not await self._exited(KILL_GRACE):
                    self.signal_group(signal.SIGKILL)
                    await self._exited(KILL_GRACE)
        except BaseException:  # cancelled mid-way: no more waiting, but nothing left running
            self.signal_group(signal.SIGKILL)
            raise
        finally:
            self._kill_leftovers()
            _RUNNING.discard(self)
            self._stderr_task.cancel()
            self._release()

    def _release(self) -> None:
        """Close the process's transport now, while the event loop runs. asyncio closes it only once
        the process has exited and both its stdout and stderr have reached their end; an upstream
        killed mid-answer leaves its stdout unread (reading paused on a full buffer), and the
        transport was then finalised after the loop had closed: `RuntimeError: Event loop is closed`
        printed at exit. `asyncio.subprocess.Process` has no public way to close it."""
        transport = getattr(self.process, "_transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()

    def _kill_leftovers(self) -> None:
        killpg = getattr(os, "killpg", None)
        if killpg is not None:
            try:
                killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

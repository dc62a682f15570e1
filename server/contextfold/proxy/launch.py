"""Upstreams started when a client needs one, at most `proxy_max_upstreams` at once (`proxy --http`).

Over stdio the proxy has one client and starts its upstream at once. Over HTTP each client session
has an upstream of its own, so a client that only shakes hands, or a thousand of them, must not cost
a process each:

- a session's upstream starts at the first request that needs it (the relay asks its `Launch`),
  not at the handshake. `initialize` is answered as the upstream answered it before: learned once
  per upstream and protocol version asked for, by starting the upstream, asking it, and stopping it
  (a probe, one at a time per upstream). When the session's upstream starts, the client's own
  `initialize` and `notifications/initialized` go to it first, then the request that needed it;
- `ping` and the proxy's own tools need no upstream;
- `Upstreams` counts the upstreams running, probes included, and refuses one more past
  `proxy_max_upstreams`: the request that needed it gets an error naming the setting (a 503 when the
  HTTP layer can tell before passing the request on, `Seat.needs`). An upstream holds its place until
  it is stopped, which is when its client's session ends: closed, or idle past
  `http_session_idle_seconds`. A request that finds every place taken while an upstream is being
  stopped waits for that stop (bounded by the stop's own graces, `STOPPING_WAIT` in all) before it
  is refused: its process may already be gone while the proxy still closes its pipes.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextfold.proxy import wire
from contextfold.proxy.upstream import connect

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.proxy.channels import Channel, Frame
    from contextfold.proxy.spec import UpstreamSpec

__all__ = ["Launch", "Seat", "Upstreams"]

log = logging.getLogger(__name__)

PROBE_ID = "contextfold-probe:1"
STOPPING_WAIT = 5.0
"""Seconds a request at the limit waits for upstreams being stopped to finish stopping (each is
stopped within `channels.STOP_GRACE` + 2 × `KILL_GRACE`; this bounds the wait if one is not)."""
OTHER_VERSION = "?"
"""The key of the handshake answers to a protocol version the SDK does not know (answered alike)."""


class Upstreams:
    """The upstreams running for all of a proxy's clients, and the handshake answers learned."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limit = settings.proxy_max_upstreams
        self.running = 0
        self.stopping = 0
        """Upstreams being stopped: still counted in `running` until they are."""
        self._stopped = asyncio.Event()
        self._greetings: dict[tuple[int, str], dict[str, Any]] = {}
        self._specs: dict[int, UpstreamSpec] = {}
        """The specs greeted, by id (kept so that an id is never reused for another)."""
        self._probing: dict[int, asyncio.Lock] = {}

    def free(self) -> int:
        return max(0, self.limit - self.running)

    async def room(self) -> int:
        """The places free, once the upstreams being stopped have stopped (within `STOPPING_WAIT`)."""
        try:
            async with asyncio.timeout(STOPPING_WAIT):
                while self.running >= self.limit and self.stopping:
                    self._stopped.clear()
                    await self._stopped.wait()
        except TimeoutError:
            log.warning("contextfold proxy: an upstream took over %g s to stop", STOPPING_WAIT)
        return self.free()

    def refusal(self) -> str:
        idle = self.settings.http_session_idle_seconds
        return (
            f"contextfold proxy is running {self.limit:,} upstream servers for its clients, its "
            f"proxy_max_upstreams limit; retry once another client's session has ended (idle ones end after "
            f"{idle:g} s, http_session_idle_seconds), or ask its operator to raise proxy_max_upstreams"
        )

    async def open(self, spec: UpstreamSpec, stack: AsyncExitStack) -> tuple[Channel | None, str | None, bool]:
        """Start an upstream within the limit: (its channel, None, False); (None, why, False) when it
        cannot be started; (None, the refusal, True) at the limit."""
        if self.running >= self.limit and not await self.room():
            log.warning("contextfold proxy: refused to start an upstream: %d running (proxy_max_upstreams)", self.limit)
            return None, self.refusal(), True
        self.running += 1
        try:
            channel, problem = await connect(spec, self.settings, stack)
        except BaseException:
            self.running -= 1
            raise
        if channel is None:
            self.running -= 1
            return None, problem, False
        return _Counted(channel, self), None, False

    def release(self) -> None:
        self.running = max(0, self.running - 1)
        self._stopped.set()

    def greeted(self, spec: UpstreamSpec, message: dict[str, Any]) -> bool:
        """Whether this `initialize` can be answered without starting `spec`."""
        return (id(spec), _version(message)) in self._greetings

    async def greet(self, spec: UpstreamSpec, message: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to the client's `initialize` `message` (a JSON-RPC response: a result
        or an error), as it answered the same protocol version before; a probe asks it the first time."""
        key = (id(spec), _version(message))
        if key not in self._greetings:
            self._specs[id(spec)] = spec
            async with self._probing.setdefault(id(spec), asyncio.Lock()):
                if key not in self._greetings:
                    answer = await self._probe(spec, message)
                    if not isinstance(answer.get("result"), dict):
                        return answer  # not kept: the next handshake asks again
                    self._greetings[key] = answer["result"]
        return wire.result(message.get("id"), copy.deepcopy(self._greetings[key]))

    async def _probe(self, spec: UpstreamSpec, message: dict[str, Any]) -> dict[str, Any]:
        async with AsyncExitStack() as stack:
            channel, problem, _ = await self.open(spec, stack)
            if channel is None:
                return wire.error(message.get("id"), wire.UPSTREAM_ERROR, f"{problem}; initialize was not sent")
            log.info("contextfold proxy: asking %s how it answers initialize", spec.label)
            try:
                await channel.send({**message, "id": PROBE_ID})
                timeout = self.settings.proxy_timeout_seconds or None
                answer = await asyncio.wait_for(_answer(channel), timeout)
            except TimeoutError:
                answer = None
                problem = (
                    f"the upstream server did not answer initialize within "
                    f"{self.settings.proxy_timeout_seconds:g} s (proxy_timeout_seconds)"
                )
            except (OSError, RuntimeError) as exc:
                answer, problem = None, f"the upstream server could not be asked to initialize ({exc})"
            finally:
                await channel.aclose()
            if answer is None:
                describe = getattr(channel, "describe_exit", None)
                problem = problem or (describe() if describe is not None else "the upstream server closed")
                return wire.error(message.get("id"), wire.UPSTREAM_ERROR, f"{problem}, before it answered initialize")
            return {**answer, "id": message.get("id")}


async def _answer(channel: Channel) -> dict[str, Any] | None:
    """The upstream's answer to the probe, or None when it closed first."""
    while (frame := await channel.receive()) is not None:
        message = frame.message
        if wire.is_response(message) and message["id"] == PROBE_ID:
            return dict(message)
    return None


def _version(message: dict[str, Any]) -> str:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    asked = wire.params(message).get("protocolVersion")
    return asked if isinstance(asked, str) and asked in HANDSHAKE_PROTOCOL_VERSIONS else OTHER_VERSION


class _Counted:
    """An upstream's channel that gives its place back when it is closed."""

    def __init__(self, channel: Channel, upstreams: Upstreams) -> None:
        self.channel = channel
        self._upstreams: Upstreams | None = upstreams

    async def receive(self) -> Frame | None:
        return await self.channel.receive()

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        await self.channel.send(message, related=related)

    async def aclose(self) -> None:
        upstreams, self._upstreams = self._upstreams, None
        if upstreams is not None:
            upstreams.stopping += 1
        try:
            await self.channel.aclose()
        finally:
            if upstreams is not None:
                upstreams.stopping -= 1
                upstreams.release()

    def __getattr__(self, name: str) -> Any:  # describe_exit, wait_exit, when the channel has them
        return getattr(self.channel, name)


class Launch:
    """One relay's upstream, started when a request needs it (see the module's words)."""

    def __init__(self, upstreams: Upstreams, spec: UpstreamSpec, stack: AsyncExitStack) -> None:
        self.upstreams = upstreams
        self.spec = spec
        self.stack = stack
        self.started = False
        self.wants: Callable[[Any], bool] | None = None
        """Set by the relay: whether a client message would start the upstream now."""

    async def greet(self, message: dict[str, Any]) -> dict[str, Any]:
        return await self.upstreams.greet(self.spec, message)

    async def open(self) -> tuple[Channel | None, str | None, bool]:
        channel, problem, refused = await self.upstreams.open(self.spec, self.stack)
        self.started = channel is not None
        return channel, problem, refused

    def needs(self, message: Any) -> bool:
        """Whether `message` would take a place among the upstreams now."""
        if wire.is_request(message) and message["method"] == "initialize":
            return not self.upstreams.greeted(self.spec, message)
        return not self.started and self.wants is not None and self.wants(message)


@dataclass
class Seat:
    """One client's place at a proxy over HTTP (a session, or one tenant's sessionless requests):
    its upstreams, started when needed, and what its proxy session may show it."""

    upstreams: Upstreams
    unsearchable: str | None = None
    """Why `search_history` is refused (clients the proxy cannot tell apart share the seat)."""
    launches: list[Launch] = field(default_factory=list)

    def launch(self, spec: UpstreamSpec, stack: AsyncExitStack) -> Launch:
        launch = Launch(self.upstreams, spec, stack)
        self.launches.append(launch)
        return launch

    def needs(self, message: Any) -> bool:
        """Whether `message` (a request) would start an upstream now, or a probe for its handshake."""
        return any(launch.needs(message) for launch in self.launches)

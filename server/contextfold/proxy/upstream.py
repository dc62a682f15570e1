"""Which server the proxy stands in front of, how it is reached, and the proxy's main loop.

An upstream is a command run as a child process (stdio) or a streamable-HTTP URL; `--config`
names several in the `mcpServers` format the apps use (`servers.load_servers`). `run_proxy`
connects to it and relays one client connection until the client leaves.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextfold.proxy.channels import Channel, ProcessChannel
from contextfold.proxy.relay import Relay
from contextfold.proxy.session import ProxySession

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.service.facade import ContextService


@dataclass(frozen=True)
class UpstreamSpec:
    command: list[str] | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    """Set for the upstream on top of the proxy's own environment."""
    cwd: str | None = None
    name: str | None = None
    """Its name in a `--config` file (the prefix of its tools and prompts)."""

    @property
    def label(self) -> str:
        """The upstream as a person would name it: the command without its program's path, or the URL."""
        if self.command:
            return " ".join([os.path.basename(self.command[0]), *self.command[1:]])
        return self.url or ""


async def connect(
    spec: UpstreamSpec, settings: Settings, stack: AsyncExitStack
) -> tuple[Channel | None, str | None]:
    """A channel to the upstream, or None and why it cannot be reached (said to the client)."""
    if spec.command:
        env = {**os.environ, **spec.env}
        try:
            channel = await ProcessChannel.start(spec.command, settings.max_message_bytes, env=env, cwd=spec.cwd)
        except FileNotFoundError:
            return None, (
                f"cannot start the upstream server: {spec.command[0]!r} was not found"
                + ("" if os.path.sep in spec.command[0] else " on PATH")
                + "; give the full path of the program after `contextfold proxy --`"
            )
        except OSError as exc:
            return None, f"cannot start the upstream server {spec.label!r}: {exc.strerror or exc}"
        return channel, None
    from contextfold.proxy.http import open_http_upstream

    return await open_http_upstream(spec, settings, stack)


async def run_proxy(
    client: Channel,
    spec: UpstreamSpec | list[UpstreamSpec],
    settings: Settings,
    *,
    owner: str = "",
    service: ContextService | None = None,
) -> None:
    """Relay one client connection to the upstream (or upstreams) until the client leaves."""
    if isinstance(spec, list):
        from contextfold.proxy.servers import run_multi

        await run_multi(client, spec, settings, owner=owner, service=service)
        return
    session = ProxySession(settings, title=f"proxy: {spec.label}", owner=owner, service=service)
    async with AsyncExitStack() as stack:
        upstream, problem = await connect(spec, settings, stack)
        await relay_for(client, upstream, session, settings, problem).run()


def relay_for(
    client: Channel, upstream: Channel | None, session: ProxySession, settings: Settings, problem: str | None
) -> Relay:
    return Relay(
        client,
        upstream,
        session,
        timeout=settings.proxy_timeout_seconds,
        max_message_bytes=settings.max_message_bytes,
        unavailable=problem,
    )


def load_servers(path: Any) -> list[UpstreamSpec]:
    from contextfold.proxy.servers import load_servers as load

    return load(path)

"""An upstream reached: a command started as a child process (stdio) or a URL, and its relay."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from contextfold.proxy.channels import Channel, ProcessChannel
from contextfold.proxy.relay import Launcher, Relay
from contextfold.proxy.sdk import open_http_upstream
from contextfold.proxy.session import ProxySession
from contextfold.proxy.spec import UpstreamSpec

if TYPE_CHECKING:
    from contextfold.config import Settings

__all__ = ["connect", "relay_for"]


async def connect(spec: UpstreamSpec, settings: Settings, stack: AsyncExitStack) -> tuple[Channel | None, str | None]:
    """A channel to the upstream, or None and why it cannot be reached (said to the client)."""
    if spec.command:
        env = {**os.environ, **spec.env}
        try:
            channel = await ProcessChannel.start(spec.command, settings.max_message_bytes, env=env, cwd=spec.cwd)
        except FileNotFoundError:
            return None, (
                f"cannot start the upstream server: {spec.command[0]!r} was not found"
                + ("" if os.path.sep in spec.command[0] else " on PATH")
                + (
                    '; give the full path of the program as its "command"'
                    if spec.name
                    else "; give the full path of the program after `contextfold proxy --`"
                )
            )
        except OSError as exc:
            return None, f"cannot start the upstream server {spec.label!r}: {exc.strerror or exc}"
        return channel, None
    return await open_http_upstream(spec, settings, stack)


def relay_for(
    client: Channel,
    upstream: Channel | None,
    session: ProxySession,
    settings: Settings,
    problem: str | None,
    *,
    launch: Launcher | None = None,
) -> Relay:
    return Relay(
        client,
        upstream,
        session,
        timeout=settings.proxy_timeout_seconds,
        max_message_bytes=settings.max_message_bytes,
        unavailable=problem,
        launch=launch,
        drain=settings.proxy_drain_seconds,
    )

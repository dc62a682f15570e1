"""The proxy's main loop: one client connection relayed to its upstream, or to a hub of several.

Over stdio the upstream starts with the proxy. Over HTTP a client has a `Seat`: its upstreams start
when a request needs them, within `proxy_max_upstreams`, and its session shows it only its own.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from contextfold.proxy.channels import Channel
from contextfold.proxy.servers import run_multi
from contextfold.proxy.session import ProxySession
from contextfold.proxy.spec import UpstreamSpec
from contextfold.proxy.upstream import connect, relay_for

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.proxy.launch import Seat
    from contextfold.service.facade import ContextService

__all__ = ["run_proxy"]


async def run_proxy(
    client: Channel,
    spec: UpstreamSpec | list[UpstreamSpec],
    settings: Settings,
    *,
    owner: str,
    service: ContextService | None = None,
    seat: Seat | None = None,
) -> None:
    """Relay one client connection to the upstream (or upstreams) until the client leaves."""
    if isinstance(spec, list):
        await run_multi(client, spec, settings, owner=owner, service=service, seat=seat)
        return
    session = ProxySession(
        settings,
        title=f"proxy: {spec.label}",
        owner=owner,
        service=service,
        own_outputs_only=seat is not None,
        unsearchable=seat.unsearchable if seat is not None else None,
    )
    async with AsyncExitStack() as stack:
        if seat is not None:
            await relay_for(client, None, session, settings, None, launch=seat.launch(spec, stack)).run()
            return
        upstream, problem = await connect(spec, settings, stack)
        await relay_for(client, upstream, session, settings, problem).run()

"""`contextfold proxy --config servers.json`: several upstreams behind one proxy, names prefixed.

The file is read by `spec.load_servers`.

Each upstream gets a relay of its own (`relay.Relay`, as a single upstream would: guarding, timeouts,
faults), talking to a hub instead of to the client. The hub is the one server the client sees:

- the handshake goes to every upstream; the client gets one answer: the lowest protocol version
  they agreed to, the union of their capabilities, their instructions under their names. Only the
  handshake era is served (`server/discover` is answered "method not found", so clients use
  `initialize`): one client connection cannot be in both eras with different upstreams;
- tools and prompts are listed from every upstream with their names prefixed `NAME__`, resources
  and templates under their own URIs, then `read_output` and `search_history` once, for all;
- a call goes to the upstream its prefix (or its resource's URI) names, with its own name; an
  upstream's request to the client (sampling, elicitation, roots) gets an id of the hub's, so two
  upstreams' ids never meet; notifications pass, cancellations go where their request went;
- an upstream that cannot start or dies takes only its own tools with it. One that did not complete
  the handshake is named, with why, in the handshake's instructions and in the error of any call
  to its tools or prompts (its tools are not listed: a listing holds tools only).

All outputs go to one contextfold session per proxy instance. Over HTTP (a `Seat`) each upstream
starts when a request needs it, as a single one does (`launch`); the handshake is answered from what
each answered before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextfold.proxy import tools, wire
from contextfold.proxy.channels import Frame
from contextfold.proxy.relay import Relay, to_the_end
from contextfold.proxy.session import ProxySession
from contextfold.proxy.spec import SEPARATOR, UpstreamSpec
from contextfold.proxy.upstream import connect

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.proxy.channels import Channel
    from contextfold.proxy.launch import Seat
    from contextfold.service.facade import ContextService

log = logging.getLogger(__name__)

FAN_OUT_SECONDS = 60.0
PAGES = 50
HUB_ID = "contextfold-hub:"
FANNED = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", None),
    "resources/templates/list": ("resourceTemplates", None),
}


# -- an upstream's end of the hub -------------------------------------------------------------------------


class _Pipe:
    """The client end a relay talks to: what the hub puts in, what the relay answers."""

    def __init__(self, member: _Member) -> None:
        self.inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.member = member

    async def receive(self) -> Frame | None:
        message = await self.inbox.get()
        if message is None:
            return None
        raw = wire.dumps(message)
        return Frame(raw, message, len(raw))

    async def send(self, message: bytes | dict[str, Any], *, related: Any = None) -> None:
        await self.member.hub.from_member(self.member, json.loads(message) if isinstance(message, bytes) else message)

    async def aclose(self) -> None:
        await self.inbox.put(None)


@dataclass
class _Member:
    name: str
    spec: UpstreamSpec
    hub: Hub
    pipe: _Pipe = field(init=False)
    task: asyncio.Task[None] | None = None
    relay: Relay | None = None
    ready: bool = False
    result: dict[str, Any] | None = None
    """Its answer to the handshake."""
    failure: str | None = None
    """Why it is not serving, in one line, when it could not start or did not complete the handshake:
    said in an error to any call of its tools or prompts, and in the handshake's instructions."""

    def __post_init__(self) -> None:
        self.pipe = _Pipe(self)

    async def send(self, message: dict[str, Any]) -> None:
        await self.pipe.inbox.put(message)


# -- the hub -----------------------------------------------------------------------------------------------


class Hub:
    def __init__(
        self,
        client: Channel,
        specs: list[UpstreamSpec],
        settings: Settings,
        session: ProxySession,
        seat: Seat | None = None,
    ) -> None:
        self.client = client
        self.seat = seat
        self.settings = settings
        self.session = session
        self.names = tools.ToolNames()
        self.members = {spec.name or "": _Member(spec.name or "", spec, self) for spec in specs}
        self.tool_owner: dict[str, tuple[_Member, str]] = {}
        self.prompt_owner: dict[str, tuple[_Member, str]] = {}
        self.resource_owner: dict[str, _Member] = {}
        self.templates: list[tuple[re.Pattern[str], str, _Member]] = []
        self.task_owner: dict[str, _Member] = {}
        self.routed: dict[str, _Member] = {}
        """Client requests in flight, by id: which upstream has each."""
        self.own: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.back: dict[str, tuple[_Member, Any]] = {}
        """Upstream requests to the client, by the hub's id: whose, and its own id."""
        self.count = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, stack: AsyncExitStack) -> None:
        for member in self.members.values():
            launch = self.seat.launch(member.spec, stack) if self.seat is not None else None
            upstream, problem = (None, None) if launch is not None else await connect(member.spec, self.settings, stack)
            passive = tools.ToolNames(passive=True)
            relay = Relay(
                member.pipe, upstream, self.session, timeout=self.settings.proxy_timeout_seconds,
                max_message_bytes=self.settings.max_message_bytes, unavailable=problem, names=passive,
                owns_session=False, launch=launch,
            )  # fmt: skip
            member.relay, member.task = relay, asyncio.create_task(relay.run())
        try:
            while (frame := await self.client.receive()) is not None:
                if frame.message is None:
                    if frame.raw is not None:
                        await self._reply(wire.error(None, wire.PARSE_ERROR, f"Parse error: {frame.problem}"))
                    continue
                self._spawn(self._from_client(frame.message))
        finally:
            await to_the_end(self._stop())

    async def _stop(self) -> None:
        if self._tasks:  # the answers still owed once the client's input ends (`proxy_drain_seconds`)
            await asyncio.wait(self._tasks, timeout=self.settings.proxy_drain_seconds)
        for member in self.members.values():
            await member.pipe.aclose()
        await asyncio.gather(*(m.task for m in self.members.values() if m.task), return_exceptions=True)
        await self.session.close()

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply(self, message: dict[str, Any]) -> None:
        try:
            await self.client.send(message)
        except (OSError, RuntimeError) as exc:
            log.debug("contextfold proxy: the client is gone (%s)", exc)

    # -- from the client ----------------------------------------------------------------------------------

    async def _from_client(self, message: Any) -> None:
        try:
            if wire.is_request(message):
                await self._request(message)
            elif wire.is_notification(message):
                await self._notification(message)
            elif wire.is_response(message):
                owner = self.back.pop(wire.key(message["id"]), None)
                if owner is not None:
                    member, original = owner
                    await member.send({**message, "id": original})
        except Exception:
            log.exception("contextfold proxy: could not relay a message from the client")
            if wire.is_request(message):
                await self._reply(
                    wire.error(message["id"], wire.INTERNAL_ERROR, "contextfold proxy failed; see its log")
                )

    async def _request(self, message: dict[str, Any]) -> None:
        method, request_id, params = message["method"], message["id"], wire.params(message)
        if method == "initialize":
            await self._reply(wire.result(request_id, await self._handshake(message)))
        elif method == "server/discover":
            text = "contextfold proxy --config serves the initialize handshake era; start with initialize"
            await self._reply(wire.error(request_id, -32601, text))
        elif method == "ping":
            await self._reply(wire.result(request_id, {}))
        elif method in FANNED:
            await self._reply(wire.result(request_id, await self._listing(method, message)))
        elif method == "logging/setLevel":
            await asyncio.gather(*(self._ask(m, method, params) for m in self._live()))
            await self._reply(wire.result(request_id, {}))
        elif method == "tools/call" and self.names.owns(params.get("name")):
            result = await tools.answer(self.session, str(self.names.owns(params.get("name"))), params.get("arguments"))
            await self._reply(wire.result(request_id, result))
        else:
            routed = self._route(method, params)
            if isinstance(routed, str) and (method.startswith("resources/") or method == "completion/complete"):
                # Not listed through the hub yet: learn the upstreams' resources, then route again.
                await self._listing("resources/list", message)
                await self._listing("resources/templates/list", message)
                routed = self._route(method, params)
            if isinstance(routed, str):
                await self._reply(wire.error(request_id, wire.INVALID_PARAMS, routed))
                return
            member, new_params = routed
            self.routed[wire.key(request_id)] = member
            await member.send({**message, "params": new_params})

    def _route(self, method: str, params: dict[str, Any]) -> tuple[_Member, dict[str, Any]] | str:
        """Which upstream a request goes to, with its params as that upstream knows them; or why none."""
        if method == "tools/call":
            return self._by_name(self.tool_owner, params, "name", "tool")
        if method == "prompts/get":
            return self._by_name(self.prompt_owner, params, "name", "prompt")
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            member = self._resource(params.get("uri"))
            return (member, params) if member else f"no upstream server lists the resource {params.get('uri')!r}"
        if method == "completion/complete":
            raw = params.get("ref")
            ref: dict[str, Any] = raw if isinstance(raw, dict) else {}
            if ref.get("type") == "ref/prompt":
                prompt: Any = ref.get("name")  # any JSON value: a non-string names no prompt
                owner = self.prompt_owner.get(prompt) if isinstance(prompt, str) else None
                if owner is None:
                    return f"no upstream server has the prompt {ref.get('name')!r}"
                return owner[0], {**params, "ref": {**ref, "name": owner[1]}}
            member = self._resource(ref.get("uri"))
            return (member, params) if member else f"no upstream server has the resource template {ref.get('uri')!r}"
        if method.startswith("tasks/") and isinstance(params.get("taskId"), str):
            member = self.task_owner.get(params["taskId"])
            return (member, params) if member else f"no upstream server has the task {params['taskId']!r}"
        live = self._live()
        if len(live) == 1:
            return live[0], params
        return f"contextfold proxy --config cannot tell which upstream server {method} is for"

    def _by_name(
        self, owners: dict[str, tuple[_Member, str]], params: dict[str, Any], key: str, what: str
    ) -> tuple[_Member, dict[str, Any]] | str:
        name: Any = params.get(key)  # any JSON value: a non-string names nothing
        owner = owners.get(name) if isinstance(name, str) else None
        if owner is None:
            prefix = name.split(SEPARATOR, 1)[0] if isinstance(name, str) and SEPARATOR in name else None
            failed = self.members.get(prefix) if prefix is not None else None
            if failed is not None and failed.failure is not None:
                return f"{self._unavailable(failed)}; its {what}s are unavailable"
            return f"no {what} named {params.get(key)!r}; list them first (names are prefixed NAME{SEPARATOR})"
        return owner[0], {**params, key: owner[1]}

    @staticmethod
    def _unavailable(member: _Member) -> str:
        return f"server {member.name!r} failed to start: {member.failure}"

    def _resource(self, uri: Any) -> _Member | None:
        if not isinstance(uri, str):
            return None
        if uri in self.resource_owner:
            return self.resource_owner[uri]
        for pattern, template, member in self.templates:
            if uri == template or pattern.fullmatch(uri):
                return member
        with_resources = [m for m in self._live() if "resources" in (m.result or {}).get("capabilities", {})]
        return with_resources[0] if len(with_resources) == 1 else None

    async def _notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        if method == "notifications/cancelled":
            request_id = wire.params(message).get("requestId")
            member = self.routed.get(wire.key(request_id))
            if member is not None:
                await member.send(message)
        elif method == "notifications/initialized":
            return  # each relay's upstream got its own after the handshake
        else:  # roots/list_changed and anything else: every upstream
            for member in self._live():
                await member.send(message)

    def _live(self) -> list[_Member]:
        return [m for m in self.members.values() if m.ready]

    # -- from an upstream (its relay) -----------------------------------------------------------------

    async def from_member(self, member: _Member, message: dict[str, Any]) -> None:
        if wire.is_response(message):
            own = self.own.pop(wire.key(message["id"]), None)
            if own is not None:
                if not own.done():
                    own.set_result(message)
                return
            self.routed.pop(wire.key(message["id"]), None)
            result = message.get("result")
            if isinstance(result, dict) and isinstance(result.get("task"), dict):
                task_id = result["task"].get("taskId")
                if isinstance(task_id, str):
                    self.task_owner[task_id] = member
            await self._reply(message)
        elif wire.is_request(message):
            self.count += 1
            hub_id = f"{HUB_ID}{self.count}"
            self.back[wire.key(hub_id)] = (member, message["id"])
            await self._reply({**message, "id": hub_id})
        elif wire.is_notification(message):
            if message["method"] == "notifications/cancelled":
                request_id = wire.params(message).get("requestId")
                for hub_key, (owner, original) in list(self.back.items()):
                    if owner is member and original == request_id:
                        del self.back[hub_key]
                        params = {**wire.params(message), "requestId": json.loads(hub_key)}
                        message = {**message, "params": params}
                        break
            await self._reply(message)  # list_changed too: the client's next listing asks every upstream

    async def _ask(self, member: _Member, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """A request of the hub's to one upstream, and its answer (None when there is none in time)."""
        self.count += 1
        request_id = f"{HUB_ID}{self.count}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.own[wire.key(request_id)] = answer
        await member.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            return await asyncio.wait_for(answer, FAN_OUT_SECONDS)
        except TimeoutError:
            log.warning("contextfold proxy: %s did not answer %s in time", member.name, method)
            return None
        finally:
            self.own.pop(wire.key(request_id), None)

    # -- the handshake and the listings ------------------------------------------------------------------

    async def _handshake(self, message: dict[str, Any]) -> dict[str, Any]:
        from contextfold import __version__

        params = wire.params(message)
        answers = await asyncio.gather(*(self._ask(m, "initialize", params) for m in self.members.values()))
        versions, instructions = [], []
        capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
        for member, answer in zip(self.members.values(), answers):
            result = answer.get("result") if isinstance(answer, dict) else None
            if not isinstance(result, dict):
                error = answer.get("error") if isinstance(answer, dict) else None
                why = error.get("message") if isinstance(error, dict) else None
                # The relay knows best why its upstream is gone (it never started, or it exited: with
                # its last words on stderr); else the upstream's own error, or its silence.
                dead = member.relay.dead if member.relay is not None else None
                member.failure = _one_line(
                    dead or (str(why) if why else f"no answer to initialize in {FAN_OUT_SECONDS:g} s")
                )
                log.warning("contextfold proxy: %s is left out: %s", member.name, member.failure)
                instructions.append(f"{self._unavailable(member)}; its tools and prompts are not listed")
                continue
            member.ready, member.result = True, result
            await member.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            if isinstance(result.get("protocolVersion"), str):
                versions.append(result["protocolVersion"])
            if isinstance(result.get("instructions"), str) and result["instructions"].strip():
                instructions.append(f"{member.name}: {result['instructions'].strip()}")
            _merge_capabilities(capabilities, result.get("capabilities"))
        merged: dict[str, Any] = {
            "protocolVersion": min(versions) if versions else params.get("protocolVersion", "2025-11-25"),
            "capabilities": capabilities,
            "serverInfo": {"name": "contextfold-proxy", "version": __version__},
        }
        if instructions:
            merged["instructions"] = "\n".join(instructions)
        return merged

    async def _listing(self, method: str, message: dict[str, Any]) -> dict[str, Any]:
        key, name_key = FANNED[method]
        members = self._live()
        pages = await asyncio.gather(*(self._all_pages(m, method) for m in members))
        listed: list[dict[str, Any]] = []
        if method == "tools/list":
            self.tool_owner = {}
        elif method == "prompts/list":
            self.prompt_owner = {}
        elif method == "resources/templates/list":
            self.templates = []
        for member, items in zip(members, pages):
            for item in items:
                if not isinstance(item, dict):
                    continue
                if name_key is not None and isinstance(item.get(name_key), str):
                    exposed = f"{member.name}{SEPARATOR}{item[name_key]}"
                    owners = self.tool_owner if method == "tools/list" else self.prompt_owner
                    owners[exposed] = (member, item[name_key])
                    item = {**item, name_key: exposed}
                elif method == "resources/list" and isinstance(item.get("uri"), str):
                    self.resource_owner[item["uri"]] = member
                elif method == "resources/templates/list" and isinstance(item.get("uriTemplate"), str):
                    self.templates.append((_template_pattern(item["uriTemplate"]), item["uriTemplate"], member))
                listed.append(item)
        if method == "tools/list":
            self.names.settle(set(self.tool_owner))
            listed += self.names.definitions()
        return {key: listed}

    async def _all_pages(self, member: _Member, method: str) -> list[Any]:
        items: list[Any] = []
        cursor: Any = None
        key = FANNED[method][0]
        for _ in range(PAGES):
            answer = await self._ask(member, method, {} if cursor is None else {"cursor": cursor})
            result = answer.get("result") if isinstance(answer, dict) else None
            if not isinstance(result, dict) or not isinstance(result.get(key), list):
                break
            items += result[key]
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return items


FAILURE_CHARS = 500
"""How much of why an upstream failed is said in a call's error (its first line)."""


def _one_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no reason given"
    return line if len(line) <= FAILURE_CHARS else line[:FAILURE_CHARS] + "…"


def _merge_capabilities(into: dict[str, Any], capabilities: Any) -> None:
    if not isinstance(capabilities, dict):
        return
    for name in ("tools", "prompts", "resources"):
        if isinstance(capabilities.get(name), dict):
            merged = into.setdefault(name, {})
            for flag in ("listChanged", "subscribe"):
                if capabilities[name].get(flag):
                    merged[flag] = True
    for name in ("logging", "completions"):
        if name in capabilities:
            into[name] = {}


def _template_pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 template as a regex over URIs (`{x}` one segment, `{+x}` anything)."""
    out, at = [], 0
    for match in re.finditer(r"\{([+#]?)[^}]*\}", template):
        out.append(re.escape(template[at : match.start()]))
        out.append(".+" if match.group(1) else "[^/?#]+")
        at = match.end()
    out.append(re.escape(template[at:]))
    return re.compile("".join(out))


async def run_multi(
    client: Channel,
    specs: list[UpstreamSpec],
    settings: Settings,
    *,
    owner: str,
    service: ContextService | None = None,
    seat: Seat | None = None,
) -> None:
    names = ", ".join(spec.name or "" for spec in specs)
    session = ProxySession(
        settings,
        title=f"proxy: {names}",
        owner=owner,
        service=service,
        own_outputs_only=seat is not None,
        unsearchable=seat.unsearchable if seat is not None else None,
    )
    async with AsyncExitStack() as stack:
        await Hub(client, specs, settings, session, seat).run(stack)

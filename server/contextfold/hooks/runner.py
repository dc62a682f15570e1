"""One hook event, end to end: read it, do the work over the service, answer in the agent's JSON.

Fails open: whatever goes wrong (a bad event, a full disk, a transcript that changed under the
import), the hook exits 0 with nothing on stdout, so the agent carries on as if there were no hook,
and one line goes to `<home>/hooks/hooks.log`. Each write is one transaction of the service (an
import, a spill), so a failure leaves nothing half-written.

What each event does (see `claude_code` and `codex` for what the agents send and take back):

| agent | event | work | answer |
|---|---|---|---|
| both | PreCompact | import the transcript into the session, only what was appended since the last import | nothing |
| Claude Code | PostToolUse | an output over the limits (or one Claude Code saved to disk) is spilled | the preview, as `updatedToolOutput` |
| Claude Code | SessionStart `compact` | import what is new, hand over what a summary is likely to lack | `additionalContext` |
| Claude Code | PostCompact | compare the summary with the handover; keep what it lacked for the next prompt | nothing (it takes no context) |
| Claude Code | UserPromptSubmit | deliver that, once | `additionalContext`, or nothing |
| Codex | PostCompact | import (the rollout now holds the summary) | nothing |
| Codex | SessionStart `compact` | hand over what Codex's summary lacks | `additionalContext` |

The common case — a small tool output, a prompt with nothing pending, a session that did not just
compact — is decided from the event alone (`gate`, a `stat` for a pending file) before anything
heavy is imported.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from contextfold.hooks import claude_code, codex, gate, state
from contextfold.names import HOOK_ORIGIN

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.domain import Message
    from contextfold.service.facade import ContextService

AGENTS = ("claude-code", "codex")
SAVED_READ_LIMIT = 64 * 1024**2
"""A file an agent saved an output to is read up to this many bytes (the spill is then refused
with the reason if it is over `max_message_bytes`)."""
SAVED_READ_SECONDS = 10.0
"""And for at most this long: a hook must not hold the agent up on a slow disk."""
_SAVED_CHUNK = 1 << 20


HINT_LINES = 2
HINT_BYTES = 1_024
"""What `policy.truncate.with_hint` adds to a preview, at most: a blank line and the hint."""


class HookError(Exception):
    """An event this hook cannot use (not JSON, not an object); logged, never shown to the agent."""


def run(
    agent: str,
    event: str,
    raw: bytes,
    *,
    home: str | None = None,
    config: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> str:
    """The hook's stdout for `event` of `agent` given its stdin `raw`: JSON, or '' for no answer."""
    where: Path | None = None
    try:
        where = gate.home_of(home, environ)
        data = _repaired(json.loads(raw)) if raw.strip() else {}
        if not isinstance(data, dict):
            raise HookError(f"the {event} event is not a JSON object")
        hook = _Hook(agent, event, data, where, Path(config) if config else None, environ)
        answer = hook.answer()
        if isinstance(answer, str):
            return _repaired_text(answer)  # the status line: plain text
        return _repaired_text(json.dumps(answer, ensure_ascii=False)) if answer else ""
    except Exception as exc:  # noqa: BLE001 - fail open: the agent must never break on its hook
        if where is not None:
            state.log_failure(where, agent, event, exc)
        return ""


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _repaired(value: Any) -> Any:
    """`value`, parsed JSON, with each lone surrogate (JSON's `\\ud800` escapes: Python keeps the
    ones no pair completes) replaced by U+FFFD, as a UTF-8 decoder does with a bad byte.

    Such a string cannot be encoded: spilling the output, writing the state or the answer would
    fail. Repaired where the event comes in, the output is spilled and previewed like any other.
    """
    if isinstance(value, str):
        return _repaired_text(value)
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_repaired(item) for item in value]
    return value


def _repaired_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


class _Hook:
    def __init__(
        self, agent: str, event: str, data: dict[str, Any], home: Path, config: Path | None, environ: Mapping[str, str]
    ) -> None:
        self.agent, self.event, self.data, self.home, self.config, self.environ = (
            agent,
            event,
            data,
            home,
            config,
            environ,
        )
        self.module = claude_code if agent == claude_code.AGENT else codex

    def answer(self) -> dict[str, Any] | str | None:
        sid = self.module.session_id(self.data)
        if sid is None:
            if self.event in ("PostToolUse", "PreCompact", "PostCompact", "SessionStart", "UserPromptSubmit"):
                raise HookError(f"the {self.event} event has no session_id")
            return None
        if self.agent == claude_code.AGENT:
            return self._claude_code(sid)
        return self._codex(sid)

    # -- Claude Code ---------------------------------------------------------------------------

    def _claude_code(self, sid: str) -> dict[str, Any] | str | None:
        if self.event == "StatusLine":
            from contextfold.hooks.statusline import status_line

            limits = gate.light_limits(self.home, self.config, self.environ) or dict(gate.LIMIT_DEFAULTS)
            return status_line(self.data, limits, int(state.load(self.home, sid).get("spilled", 0)))
        if self.event == "PostToolUse":
            output = claude_code.tool_output(self.data)
            if output is None:
                return None
            if output.saved is None:
                quick = gate.light_limits(self.home, self.config, self.environ)
                if quick is not None and gate.certainly_within(*gate.measure(output.text), quick, claude_code.MODEL):
                    return None
            return _run(self._spill(sid, output))
        if self.event == "PreCompact":
            _run(self._import(sid))
            return None  # Claude Code would read anything printed here as summary instructions
        if self.event == "SessionStart":
            if self.data.get("source") != "compact":
                return None
            text = _run(self._handover(sid, summary=None))
            return claude_code.additional_context("SessionStart", text) if text else None
        if self.event == "PostCompact":
            summary = self.data.get("compact_summary")
            if isinstance(summary, str) and summary.strip():
                pending = _run(self._handover(sid, summary=summary, again=True))
                state.set_pending(self.home, sid, pending)
            return None
        if self.event == "UserPromptSubmit":
            said = _run(self._steer(sid)) if _steering(self.data.get("prompt")) else ""
            held = "\n\n".join(t for t in (said, state.take_pending(self.home, sid)) if t)
            return claude_code.additional_context("UserPromptSubmit", held) if held else None
        return None

    # -- Codex ---------------------------------------------------------------------------------

    def _codex(self, sid: str) -> dict[str, Any] | None:
        if self.event in ("PreCompact", "PostCompact"):
            _run(self._import(sid))
            return None
        if self.event == "SessionStart" and self.data.get("source") == "compact":
            text = _run(self._handover(sid, summary="codex"))
            return codex.additional_context("SessionStart", text) if text else None
        return None  # PostToolUse: Codex has already cut the output and takes no replacement

    # -- the work --------------------------------------------------------------------------------

    def _settings(self) -> Settings:
        from contextfold.config import load_settings

        return load_settings({"home": self.home}, config_file=self.config, environ=self.environ)

    async def _service(self) -> tuple[Settings, ContextService]:
        from contextfold.service.facade import ContextService

        settings = self._settings()
        return settings, await ContextService.open(settings)

    def _model(self) -> str:
        model = self.data.get("model")
        return model if isinstance(model, str) and model else self.module.MODEL

    async def _ensure(self, service: ContextService, sid: str) -> None:
        from contextfold.errors import NotFoundError

        try:
            await service.status(sid)
        except NotFoundError:
            title = f"{self.agent} session {sid.removeprefix(self.module.SESSION_PREFIX)}"
            await service.open_session(sid, model=self._model(), title=title, origin=HOOK_ORIGIN + self.agent)

    async def _spill(self, sid: str, output: claude_code.ToolOutput) -> dict[str, Any] | None:
        from contextfold.service.ingest import PreviewCaps
        from contextfold.service.spilling import PreviewLimits
        from contextfold.tokens import catalog
        from contextfold.tokens.counting import counter_for

        # Read before the home is opened: a file refused here leaves nothing behind.
        text = output.text if output.saved is None else _read_saved(output.saved, claude_code.saved_outputs(self.data))
        settings, service = await self._service()
        async with service:
            counter = counter_for(claude_code.MODEL, settings.token_factors)
            window = catalog.budget(catalog.lookup(claude_code.MODEL), context=settings.context_window).context
            caps = PreviewCaps.of(settings, window, counter.count)
            direction = "head" if output.shape == "read" else settings.truncate_direction
            over = caps.truncate(text, max_lines=settings.max_lines, max_bytes=settings.max_bytes, direction=direction)
            if over is None and output.saved is None:
                return None  # within the limits after all
            await self._ensure(service, sid)
            # Room for the hint's two lines and bytes, so importing the transcript later, which
            # holds this preview, finds it within the limits and does not spill it again.
            limits = PreviewLimits(
                tokens=caps.max_tokens,
                lines=max(1, settings.max_lines - HINT_LINES),
                bytes=max(1, min(settings.max_bytes - HINT_BYTES, settings.hook_preview_bytes)),
                direction=direction,
            )
            spilled = await service.spill(sid, text, tool=output.label, call_id=output.call_id, preview=limits)
            preview = spilled.preview
        known = state.load(self.home, sid)
        state.save(self.home, sid, {**known, "spilled": int(known.get("spilled", 0)) + 1})
        return claude_code.replacement(self.data, output, preview)

    async def _import(self, sid: str, service: ContextService | None = None) -> None:
        path = self.data.get("transcript_path")
        if not isinstance(path, str) or not path or not Path(path).is_file():
            raise HookError(f"the {self.event} event names no transcript file ({path!r})")
        if service is None:
            _, opened = await self._service()
            async with opened:
                await self._import(sid, opened)
            return
        await self._ensure(service, sid)
        await service.import_transcript(Path(path), session_id=sid, format=self.agent)

    async def _steer(self, sid: str) -> str:
        """A prompt `pin: <fact>` pins the fact to the session (carried through every compaction
        of the agent's, in the SessionStart handover); `unpin: p2` removes a pin."""
        from contextfold.errors import USER_ERRORS

        prompt = str(self.data.get("prompt", "")).strip()
        verb, _, rest = prompt.partition(":")
        settings, service = await self._service()
        async with service:
            await self._ensure(service, sid)
            try:
                if verb.strip().casefold() == "unpin":
                    listed = await service.unpin(sid, rest.strip())
                    return f"contextfold: unpinned {rest.strip()}; {len(listed.pins)} pin(s) left."
                listed = await service.pin(sid, note=rest, by="user")
            except USER_ERRORS as exc:
                return f"contextfold could not do that: {exc}"
        pin = listed.pins[-1]
        return f"contextfold: pinned {pin.id} (kept word for word through every compaction): {pin.note}"

    async def _handover(self, sid: str, *, summary: str | None, again: bool = False) -> str:
        """The handover text. `summary`: the agent's summary; "codex" to read it from the session
        (the rollout holds it by then); None when it is not known yet (a second look follows).
        `again`: that second look at the same compaction, giving only what the first did not.
        Its budget is `sizing`'s: a share of the window's free room after the agent's compaction."""
        from contextfold.hooks import sizing
        from contextfold.hooks.handover import Handover, SpilledOutput, handover, pinned_block
        from contextfold.importers.marks import marks_in, problems
        from contextfold.tokens import catalog
        from contextfold.tokens.counting import counter_for

        settings, service = await self._service()
        async with service:
            if not again:
                try:
                    await self._import(sid, service)
                except Exception as exc:  # noqa: BLE001 - what is stored still makes a handover
                    state.log_failure(self.home, self.agent, f"{self.event} (import)", exc)
            session, _ = await service.session_view(sid)
            history = await service.session_history(sid)
            if summary == "codex":
                summary, history = _codex_summary(history)
            outputs = [
                SpilledOutput(r.id, r.tool or "output", r.lines, r.bytes)
                for r in await service.store.session_outputs(sid)
            ]
        before = state.load(self.home, sid) if again else {}
        sent = before.get("sent", [])
        counter = counter_for(session.model, settings.token_factors)
        window = catalog.budget(
            catalog.lookup(session.model),
            reserved=settings.reserved,
            context=settings.context_window,
            output=settings.max_output,
            input_limit=settings.input_limit,
        )
        if window.unlimited:
            whole = settings.hook_context_tokens
        else:
            room = sizing.Room(
                window.usable,
                sizing.fixed_part(history, window.usable),
                counter.count(summary) if summary else sizing.SUMMARY_ESTIMATE,
            )
            whole = sizing.budget(
                room,
                share=settings.hook_context_room_share,
                floor=settings.hook_context_min_tokens,
                cap=settings.hook_context_tokens,
            )
        if again:  # what the summary lacked beyond the first look: the rest of the budget
            given = before.get("tokens")
            budget = sizing.later_budget(
                whole, sum(t for t in given if isinstance(t, int)) if isinstance(given, list) else 0
            )
        elif summary is None and self.agent == claude_code.AGENT:  # PostCompact will look again
            budget = sizing.start_budget(whole, settings.hook_context_min_tokens)
        else:
            budget = whole
        result = Handover("", 0)
        ranked_history = f"{len(history)}:{history[-1].id if history else ''}"
        if budget >= sizing.MIN_PART:  # below it there is room for the header and closing line only
            result = handover(
                history,
                session_id=sid,
                counter=counter,
                budget=budget,
                outputs=outputs,
                summary=summary,
                sent=set(sent),
                root=self.data.get("cwd") if isinstance(self.data.get("cwd"), str) else None,
                depth=whole,
                notes=problems(marks_in(session.metadata)),
                ranked=state.load_ranking(self.home, sid, ranked_history) if again else None,
            )
            if result.ranked is not None and summary is None and self.agent == claude_code.AGENT:
                state.save_ranking(self.home, sid, ranked_history, result.ranked)  # for PostCompact's look
        spent = (
            [*before.get("tokens", []), result.tokens] if isinstance(before.get("tokens"), list) else [result.tokens]
        )
        kept = state.load(self.home, sid)
        state.save(
            self.home, sid, {**kept, "agent": self.agent, "sent": sorted(set(sent) | result.keys), "tokens": spent}
        )
        if again:
            return result.text
        pinned = pinned_block(session.metadata.pins, history)  # every compaction's first look carries them
        return "\n\n".join(t for t in (pinned, result.text) if t)


def _steering(prompt: object) -> bool:
    """A prompt that pins (`pin: <fact>`) or unpins (`unpin: p2`)."""
    if not isinstance(prompt, str):
        return False
    verb, colon, rest = prompt.strip().partition(":")
    return bool(colon) and verb.strip().casefold() in ("pin", "unpin") and bool(rest.strip())


def _codex_summary(history: list[Message]) -> tuple[str | None, list[Message]]:
    """Codex's latest summary (its `compacted` record, which the import replays as a compaction:
    the summary is stored as an imported summary message) and the history before it."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if (message.summary and message.metadata.get("imported_from") == "codex") or (
            message.role == "user" and message.name == "compact_summary"
        ):
            return _plain_text(message), history[:index]
    return None, history


def _plain_text(message: Message) -> str:
    from contextfold.domain import TextPart

    return "\n".join(p.text for p in message.parts if isinstance(p, TextPart))


def _read_saved(path: Path, folder: Path | None) -> str:
    """The output the agent saved at `path`, which the event names (an MCP server writes the
    "saved to PATH" string itself, so it can name any file).

    Only a regular file inside `folder`, where the agent saves outputs, symbolic links resolved
    first: not /etc/shadow, not a FIFO that would block the hook until a writer came, not a device.
    Opened without blocking, checked with `fstat` on what was opened, and read up to
    `SAVED_READ_LIMIT` bytes within `SAVED_READ_SECONDS`.
    """
    import stat
    import time

    if folder is None:
        raise HookError(f"{path}: the event does not say where the agent saves outputs; not read")
    where = os.path.realpath(path)
    root = os.path.realpath(folder)
    if os.path.commonpath([where, root]) != root or where == root:
        raise HookError(f"{path} is not in {folder}, where the agent saves outputs; not read")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(where, flags)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise HookError(f"{path} is not a regular file; not read")
        if found.st_size > SAVED_READ_LIMIT:
            raise HookError(f"{path} is over {SAVED_READ_LIMIT:,} bytes; left as the agent saved it")
        deadline = time.monotonic() + SAVED_READ_SECONDS
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(_SAVED_CHUNK, SAVED_READ_LIMIT + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > SAVED_READ_LIMIT:
                raise HookError(f"{path} is over {SAVED_READ_LIMIT:,} bytes; left as the agent saved it")
            if time.monotonic() > deadline:
                raise HookError(f"{path} took over {SAVED_READ_SECONDS:g} s to read; left as the agent saved it")
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


_T = TypeVar("_T")


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    import asyncio

    return asyncio.run(coroutine)


__all__ = ["AGENTS", "HookError", "run"]

"""contextfold: keep an LLM agent's context in order.

Sessions in SQLite (or PostgreSQL), exact token counts, huge tool outputs spilled and read back on
demand, old outputs pruned, and older history compacted into a summary that cites its sources.
The MCP server, the CLI, the agent hooks and the proxy are entry points over this library::

    from contextfold import ContextService, load_settings

    async with await ContextService.open(load_settings({"home": "/tmp/cf"})) as service:
        await service.open_session("s1", model="claude-sonnet-4-5")
        await service.append("s1", [{"role": "user", "content": "Hello"}])
        status = await service.status("s1")

Names are imported on first use, so `import contextfold` costs a command-line hook nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False
"""True only for a type checker (mypy reads the name): `import typing` would cost every hook process."""

__version__ = "0.2.0"

_EXPORTS = {
    # the service: the local tenant (ContextService) and one tenant of many (Tenant)
    "ContextService": "contextfold.service.facade",
    "Tenant": "contextfold.service.facade",
    # settings
    "Settings": "contextfold.config",
    "load_settings": "contextfold.config",
    # what goes in
    "JSONValue": "contextfold.formats.base",
    "SystemArg": "contextfold.formats.base",
    "UsageArg": "contextfold.formats.base",
    "WireFormat": "contextfold.formats.base",
    "WireMessage": "contextfold.formats.base",
    # the conversation as stored
    "CompactionPart": "contextfold.domain",
    "FilePart": "contextfold.domain",
    "Message": "contextfold.domain",
    "ReasoningPart": "contextfold.domain",
    "Session": "contextfold.domain",
    "SystemPrompt": "contextfold.domain",
    "TextPart": "contextfold.domain",
    "ToolPart": "contextfold.domain",
    "Usage": "contextfold.domain",
    # what comes out (each is also an MCP tool's output schema)
    "AppendResult": "contextfold.results",
    "Brief": "contextfold.results",
    "CompactResult": "contextfold.results",
    "Context": "contextfold.results",
    "Deleted": "contextfold.results",
    "GcResult": "contextfold.results",
    "HistoryPage": "contextfold.results",
    "ImportResult": "contextfold.results",
    "OutputRead": "contextfold.results",
    "PruneResult": "contextfold.results",
    "SessionInfo": "contextfold.results",
    "SessionList": "contextfold.results",
    "SpillResult": "contextfold.results",
    "Status": "contextfold.results",
    "SummarizeResult": "contextfold.results",
    "TailResult": "contextfold.results",
    "TokenCount": "contextfold.results",
    # counting without a service
    "TokenCounter": "contextfold.tokens.counting",
    "counter_for": "contextfold.tokens.counting",
    # errors (all of them live in contextfold.errors)
    "CompactionFailed": "contextfold.errors",
    "ConflictError": "contextfold.errors",
    "ContextfoldError": "contextfold.errors",
    "FormatError": "contextfold.errors",
    "InvalidInput": "contextfold.errors",
    "LimitExceeded": "contextfold.errors",
    "NotFoundError": "contextfold.errors",
    "OutputDamaged": "contextfold.errors",
    "OutputGone": "contextfold.errors",
    "ReadOnlyHome": "contextfold.errors",
    "SettingsError": "contextfold.errors",
    "StorageError": "contextfold.errors",
    "StorageFull": "contextfold.errors",
    "StoreError": "contextfold.errors",
    "StoreUnavailable": "contextfold.errors",
    "TranscriptError": "contextfold.errors",
}

__all__ = [
    "AppendResult",
    "Brief",
    "CompactResult",
    "CompactionFailed",
    "CompactionPart",
    "ConflictError",
    "Context",
    "ContextService",
    "ContextfoldError",
    "Deleted",
    "FilePart",
    "FormatError",
    "GcResult",
    "HistoryPage",
    "ImportResult",
    "InvalidInput",
    "JSONValue",
    "LimitExceeded",
    "Message",
    "NotFoundError",
    "OutputDamaged",
    "OutputGone",
    "OutputRead",
    "PruneResult",
    "ReadOnlyHome",
    "ReasoningPart",
    "Session",
    "SessionInfo",
    "SessionList",
    "Settings",
    "SettingsError",
    "SpillResult",
    "Status",
    "StorageError",
    "StorageFull",
    "StoreError",
    "StoreUnavailable",
    "SummarizeResult",
    "SystemArg",
    "SystemPrompt",
    "TailResult",
    "Tenant",
    "TextPart",
    "TokenCount",
    "TokenCounter",
    "ToolPart",
    "TranscriptError",
    "Usage",
    "UsageArg",
    "WireFormat",
    "WireMessage",
    "__version__",
    "counter_for",
    "load_settings",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from contextfold.config import Settings, load_settings
    from contextfold.domain import (
        CompactionPart,
        FilePart,
        Message,
        ReasoningPart,
        Session,
        SystemPrompt,
        TextPart,
        ToolPart,
        Usage,
    )
    from contextfold.errors import (
        CompactionFailed,
        ConflictError,
        ContextfoldError,
        FormatError,
        InvalidInput,
        LimitExceeded,
        NotFoundError,
        OutputDamaged,
        OutputGone,
        ReadOnlyHome,
        SettingsError,
        StorageError,
        StorageFull,
        StoreError,
        StoreUnavailable,
        TranscriptError,
    )
    from contextfold.formats.base import JSONValue, SystemArg, UsageArg, WireFormat, WireMessage
    from contextfold.results import (
        AppendResult,
        Brief,
        CompactResult,
        Context,
        Deleted,
        GcResult,
        HistoryPage,
        ImportResult,
        OutputRead,
        PruneResult,
        SessionInfo,
        SessionList,
        SpillResult,
        Status,
        SummarizeResult,
        TailResult,
        TokenCount,
    )
    from contextfold.service.facade import ContextService, Tenant
    from contextfold.tokens.counting import TokenCounter, counter_for

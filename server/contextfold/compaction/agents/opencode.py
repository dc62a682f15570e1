"""OpenCode: lower-case tools with camel-case arguments — `read`, `edit`, `write` (`filePath`),
`bash` (`command` and a required `description`), `glob` and `grep` (`pattern`, `path`),
`apply_patch` (`patchText`, the `*** Begin Patch` format), `todowrite` (`todos`)."""

from __future__ import annotations

from contextfold.compaction.agents.base import COMMON_PATH_KEYS, AgentAdapter, ToolCall, Walk


class OpenCode(AgentAdapter):
    name = "OpenCode"
    shell_tools = frozenset({"bash"})
    edit_tools = frozenset({"edit", "write", "multiedit"})
    read_tools = frozenset({"read"})
    search_tools = frozenset({"glob", "grep"})
    plan_tools = frozenset({"todowrite"})
    web_tools = frozenset({"webfetch", "websearch"})
    delegate_tools = frozenset({"task"})
    other_tools = frozenset(
        {
            "apply_patch",
            "list",
            "todoread",
            "skill",
            "question",
            "lsp",
        }
    )
    path_keys = ("filePath", *COMMON_PATH_KEYS)

    def recognizes(self, call: ToolCall) -> bool:
        if not super().recognizes(call):
            return False
        # Names other agents use too are told apart by OpenCode's arguments.
        if call.tool == "bash":
            return "description" in call.args
        if call.tool in ("read", "edit", "write", "multiedit"):
            return "filePath" in call.args
        if call.tool == "apply_patch":
            return "patchText" in call.args
        return True

    def report(self, call: ToolCall, walk: Walk) -> None:
        if call.name == "apply_patch":
            walk.patch(call, self.patch_text(call))
        else:
            super().report(call, walk)

    def patch_text(self, call: ToolCall) -> str:
        text = call.args.get("patchText")
        return text if isinstance(text, str) else super().patch_text(call)

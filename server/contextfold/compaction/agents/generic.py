"""Any other agent: tool names common elsewhere (Gemini CLI, Cursor, Cline, Windsurf, the Anthropic
text editor tool). Its arguments are read with the common path keys, its results judged by what
they say; a tool whose name ends in `bash` or `shell` is a shell (`AgentAdapter.is_shell`)."""

from __future__ import annotations

from contextfold.compaction.agents.base import AgentAdapter, ToolCall


class Generic(AgentAdapter):
    name = "generic"
    shell_tools = frozenset(
        {
            "run_command",
            "run_shell_command",
            "terminal",
            "execute_command",
            "cmd",
            "powershell",
        }
    )
    edit_tools = frozenset(
        {
            "str_replace",
            "write_file",
            "replace",
            "edit_file",
            "create_file",
            "append_file",
            "apply_diff",
            "search_replace",
            "patch",
        }
    )
    read_tools = frozenset(
        {
            "view",
            "read_file",
            "cat",
            "list_dir",
            "list_directory",
            "read_many_files",
            "search",
            "codebase_search",
            "file_search",
        }
    )
    editor_tools = frozenset({"str_replace_based_edit_tool", "text_editor"})
    plan_tools = frozenset({"todo_write", "todo", "write_todos"})
    web_tools = frozenset({"web_fetch", "web_search", "google_web_search"})

    def recognizes(self, call: ToolCall) -> bool:
        return self.knows(call) or self.is_shell(call)

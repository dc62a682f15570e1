"""contextfold inside the agents people use: hooks for Claude Code and Codex (issue 17).

`contextfold hook <agent> <Event>` reads the event's JSON on stdin and writes the agent's JSON (or
nothing) on stdout; `contextfold hooks install|uninstall|status <agent>` puts the hooks and the
contextfold MCP server into the agent's settings. One module per job:

- `gate` — the cheap first look at an event: most tool outputs are small, and deciding so must not
  load the store, the tokenizer, pydantic or the MCP SDK (a hook runs after every tool call);
- `claude_code`, `codex` — each agent's events: what its input holds and the output it expects;
- `handover` — what the agent's own compaction summary is likely to lack, from the real history
  (pure: the compaction facts of `compaction/`, bounded in tokens);
- `state` — the little a session's hooks remember between processes, in files under the data home;
- `runner` — one event end to end over the service, failing open (exit 0, nothing printed, one
  line in `<home>/hooks/hooks.log`);
- `install` — merging the hooks and the server into each agent's settings, and Codex's trust.
"""

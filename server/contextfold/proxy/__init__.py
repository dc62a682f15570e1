"""`contextfold proxy`: contextfold in front of any MCP server, guarding its oversized results.

- `relay` — every message between the client and the upstream, forwarded as received, except
  the few the proxy guards or adds to;
- `guard` — pure: which parts of a result to store whole, and the result the client gets;
- `session` — the proxy's session in the data home: stored outputs, recorded calls;
- `tools` — the added `read_output` and `search_history`, named so they never collide;
- `channels` — newline-delimited JSON over stdio and child processes, bounded; `http` — the
  streamable-HTTP ends (an upstream URL, and `--http` for clients);
- `launch` — over HTTP, each client's upstream started when it needs one, within
  `proxy_max_upstreams`;
- `servers` — `--config servers.json`: several upstreams behind one proxy, with name prefixes;
- `wire` — JSON-RPC messages as plain dicts.

`contextfold.cli.commands.proxy` is the command-line handler.
"""

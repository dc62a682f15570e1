"""What each `contextfold` subcommand does: one module per kind of command.

`cli.py` parses the command line, then imports the module of the command that runs and only
that one. So `--help` and `--version` load none of them, `token` loads no store, tokenizer or
MCP SDK, `count` no store and no MCP SDK, and only `serve` loads the SDK.
"""

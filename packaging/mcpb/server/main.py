"""contextfold's MCP server over stdio, as the Claude Desktop bundle runs it (`uv run server/main.py`)."""

import sys

from contextfold.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))

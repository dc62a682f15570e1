"""Context policies: pure functions over domain objects, no I/O and no MCP."""

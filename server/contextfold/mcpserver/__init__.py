"""The MCP face: tools and their schemas, answers, streamable HTTP, its limits and bearer-token auth."""

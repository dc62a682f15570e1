"""contextfold: manage an LLM agent's conversation context over MCP."""

__version__ = "0.1.0"

"""Summarizers that call out of the process (an LLM over the network)."""

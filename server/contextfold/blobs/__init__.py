"""Spilled outputs' bytes: the blob-store interface, its backends and line reads and searches over any of them."""

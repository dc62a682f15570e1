"""Errors a caller can act on. Each message says what was wrong and what to do about it."""

from __future__ import annotations


class ContextfoldError(Exception):
    """An error the caller can act on; the message says what was wrong and what to do."""


class InvalidInput(ContextfoldError, ValueError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class LimitExceeded(InvalidInput):
    pass


class CompactionFailed(ContextfoldError):
    """Compaction could not make the context fit, or would free nothing; the message has the numbers."""

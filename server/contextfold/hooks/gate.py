"""The cheap first look at a tool output: is it certainly within contextfold's limits?

A PostToolUse hook runs after every tool call, and nearly every output is small. Deciding that must
cost little more than starting Python: no pydantic (the settings model), no tokenizer, no store, no
MCP SDK. So the few limits this needs are read here the way `config.load_settings` reads them (a
`CONTEXTFOLD_*` variable, else the TOML file, else the default), with the standard library alone,
and compared with bounds that need no counting: an output of B UTF-8 bytes has at most B characters
and at most B o200k tokens (times the model's safety factor). Only an output that may be over the
limits goes on to the exact check (`runner`), which loads the real settings and counts.

`tests/e2e/test_hooks_gate.py` holds these defaults and readings equal to `config.Settings`'.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "CONTEXTFOLD_"

LIMIT_DEFAULTS: dict[str, Any] = {
    "max_lines": 2_000,
    "max_bytes": 50 * 1024,
    "context_share": 0.30,
    "max_share_chars": 400_000,
    "min_share_chars": 2_000,
    "context_window": None,
    "claude_token_factor": 1.20,
    "gemini_token_factor": 1.15,
    "unknown_token_factor": 1.20,
    "soft_ratio": 0.70,
    "hard_ratio": 0.90,
    "reserved": None,
}
"""The settings the cheap paths read (the decision, the status line), with `config.Settings`' defaults."""

_TYPES: dict[str, type] = {
    "max_lines": int,
    "max_bytes": int,
    "context_share": float,
    "max_share_chars": int,
    "min_share_chars": int,
    "context_window": int,
    "claude_token_factor": float,
    "gemini_token_factor": float,
    "unknown_token_factor": float,
    "soft_ratio": float,
    "hard_ratio": float,
    "reserved": int,
}


def home_of(home: str | None, environ: Mapping[str, str]) -> Path:
    """The data home as `config.load_settings` resolves it: the flag, `CONTEXTFOLD_HOME`, the platform's."""
    if home:
        return Path(home).expanduser()
    if environ.get("CONTEXTFOLD_HOME"):
        return Path(environ["CONTEXTFOLD_HOME"]).expanduser()
    from contextfold.config import default_home  # pragma: no cover - installed hooks always pass --home

    return default_home()


def light_limits(
    home: Path, config_file: Path | None, environ: Mapping[str, str] = os.environ
) -> dict[str, Any] | None:
    """The limits as the settings would have them, or None when they cannot be read cheaply (a bad
    file or value: the exact path then loads the real settings, which say what is wrong)."""
    values = dict(LIMIT_DEFAULTS)
    path = config_file or (
        Path(environ["CONTEXTFOLD_CONFIG"]) if "CONTEXTFOLD_CONFIG" in environ else home / "config.toml"
    )
    try:
        if path.is_file():
            import tomllib  # only when there is a file to read

            found = tomllib.loads(path.read_text("utf-8"))
            values.update({name: found[name] for name in LIMIT_DEFAULTS if name in found})
        for name in LIMIT_DEFAULTS:
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is not None:
                values[name] = raw
        return {name: None if value is None else _TYPES[name](value) for name, value in values.items()}
    except (OSError, ValueError, TypeError):
        return None


def factor_for(model: str, limits: Mapping[str, Any]) -> float:
    """The safety factor contextfold counts `model` with (o200k × factor), from its family; 1 for
    OpenAI's exact tokenizers. Errs high: an unknown family gets the largest factor."""
    name = model.casefold()
    if "claude" in name:
        return float(limits["claude_token_factor"])
    if "gemini" in name:
        return float(limits["gemini_token_factor"])
    if name.startswith(("gpt-", "o1", "o3", "o4")):
        return 1.0
    return max(float(limits["unknown_token_factor"]), float(limits["claude_token_factor"]))


def certainly_within(nbytes: int, nlines: int, limits: Mapping[str, Any], model: str) -> bool:
    """An output of `nbytes` UTF-8 bytes and `nlines` lines fits every ingest limit for `model`
    (lines, bytes, the window's share in characters and in tokens), without counting it."""
    if nlines > limits["max_lines"] or nbytes > limits["max_bytes"]:
        return False
    factor = factor_for(model, limits)
    floor = min(limits["min_share_chars"], (limits["min_share_chars"] // 4) / factor)
    if nbytes <= floor:
        return True  # under the least any window's share can be
    from contextfold.policy.truncate import share_cap_chars, share_cap_tokens
    from contextfold.tokens.catalog import lookup  # pure and small; only for outputs past the floor

    window = limits["context_window"] if limits["context_window"] is not None else lookup(model).context
    chars = share_cap_chars(
        window, share=limits["context_share"], max_chars=limits["max_share_chars"], min_chars=limits["min_share_chars"]
    )
    tokens = share_cap_tokens(window, share=limits["context_share"], min_tokens=limits["min_share_chars"] // 4)
    return nbytes <= chars and (tokens is None or nbytes * factor <= tokens)


def measure(text: str) -> tuple[int, int]:
    """(UTF-8 bytes, lines) of `text`, as the ingest limits count them."""
    nbytes = len(text.encode("utf-8", "surrogatepass"))
    if not text:
        return 0, 0
    return nbytes, text.count("\n") + (0 if text.endswith("\n") else 1)


__all__ = ["LIMIT_DEFAULTS", "certainly_within", "factor_for", "home_of", "light_limits", "measure"]

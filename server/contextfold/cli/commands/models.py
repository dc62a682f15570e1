"""`contextfold models`: the models contextfold knows, and the warning for a model it does not.

Each known id is a prefix: dated snapshots and variants (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`,
`gpt-5.1`) find their family. A model id that matches none is counted as an estimate with the default
window; the commands that take `--model` say so on stderr and name the nearest known ids (difflib), so a
typo (`gpt4o`) does not silently become an estimate.
"""

from __future__ import annotations

import argparse
import difflib
import sys

from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.tokens.catalog import DEFAULT, ModelInfo, budget, known_models, lookup

SUGGESTIONS = 3
"""Nearest known ids named when a model is unknown."""


def method(info: ModelInfo, settings: Settings) -> str:
    """How tokens of `info` are counted: `exact o200k_base`, or `estimate o200k_base × 1.2`."""
    if info.tokenizer in ("o200k_base", "cl100k_base"):
        return f"exact {info.tokenizer}"
    factor = settings.token_factors["unknown" if info.tokenizer == "unknown" else info.tokenizer]
    return f"estimate o200k_base × {factor:g}"


def rows(settings: Settings) -> list[dict[str, object]]:
    """Every catalogue entry and `default`, with the budget contextfold computes for it."""
    result: list[dict[str, object]] = []
    for info in [*known_models(), DEFAULT]:
        spent = budget(info, reserved=settings.reserved)
        result.append(
            {
                "model": info.id,
                "provider": info.provider,
                "context_window": info.context,
                "max_output": info.output,
                "input_limit": info.input_limit,
                "reserved": spent.reserved,
                "usable": spent.usable,
                "counting": method(info, settings),
            }
        )
    return result


def models(args: argparse.Namespace, settings: Settings) -> int:
    table = rows(settings)
    if args.json:
        print_json({"models": table})
        return 0
    header = ("model", "provider", "window", "max output", "reserved", "usable", "counting")
    lines = [
        (
            str(row["model"]),
            str(row["provider"]),
            f"{row['context_window']:,}" + (f" (input {row['input_limit']:,})" if row["input_limit"] else ""),
            f"{row['max_output']:,}",
            f"{row['reserved']:,}",
            f"{row['usable']:,}",
            str(row["counting"]),
        )
        for row in table
    ]
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header))]
    for cells in [header, *lines]:
        print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip())
    print(
        "\nA model id matches its longest known prefix (gpt-4o-2024-08-06 is gpt-4o). reserved: tokens kept for "
        "the reply (the reserved setting); usable: what the conversation may take (window − reserve, or the "
        "input limit − reserve). Any other id is counted as `default`."
    )
    return 0


def unknown_model_warning(model: str | None) -> str | None:
    """The one-line warning for a model id the catalogue does not know, naming the nearest ids; None when known."""
    if not model or model == "default" or lookup(model).known:
        return None
    ids = [info.id for info in known_models()]
    near = difflib.get_close_matches(model.strip().lower(), ids, n=SUGGESTIONS, cutoff=0.5)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    return (
        f"unknown model {model!r}: counted as an estimate with the default {DEFAULT.context:,}-token window; "
        f"{hint}(contextfold models lists the known ones)"
    )


def warn_unknown_model(model: str | None) -> None:
    """Print `unknown_model_warning` on stderr, if any."""
    warning = unknown_model_warning(model)
    if warning:
        print(f"contextfold: warning: {warning}", file=sys.stderr)


__all__ = ["method", "models", "rows", "unknown_model_warning", "warn_unknown_model"]

"""`contextfold count`: the tokens of a file or of stdin, for a model.

It counts with `tokens.counting.count_text`, as `ContextService.count_tokens` does for text, and opens no
data home: neither the store nor the service is loaded (tests/e2e/test_coldstart.py checks both the
answer and what was imported).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contextfold.cli.commands._output import print_json
from contextfold.config import Settings
from contextfold.errors import UsageError
from contextfold.tokens.counting import count_text


def count(args: argparse.Namespace, settings: Settings) -> int:
    if args.file in (None, "-"):
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text("utf-8", errors="surrogateescape")
        except OSError as exc:
            raise UsageError(
                f"{args.file}: cannot read it ({exc.strerror or exc}); give a readable file, or - for stdin"
            ) from None
    result = count_text(text, args.model, settings)
    if args.json:
        print_json(result.model_dump())
    else:
        how = result.encoding or "character estimate"
        if result.factor != 1.0:
            how += f" × {result.factor}"
        print(f"{result.tokens:,} tokens  ({result.method}, {how}, model {result.model})")
    return 0

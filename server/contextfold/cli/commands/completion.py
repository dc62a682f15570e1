"""`contextfold completion bash|zsh|fish`: a completion script generated from the command line itself."""

from __future__ import annotations

import argparse
import sys

from contextfold.cli import completion as scripts


def completion(args: argparse.Namespace, _settings: object) -> int:
    # the whole parser, handed over by the command line (set_defaults), which imports this module, not the reverse
    sys.stdout.write(scripts.script(args.shell, args.build_parser()))
    return 0

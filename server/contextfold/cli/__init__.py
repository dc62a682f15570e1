"""The command line: parsing and dispatch (`dispatch`), what commands print (`views`, `reporting`),
and each command's handler (`commands/`, imported only when it runs)."""

from contextfold.cli.dispatch import main

__all__ = ["main"]

"""`from contextfold import …`: the names a harness author uses, kept honest.

`__all__` is sorted and is exactly what the package exports; every name resolves; what a type
checker reads (the `TYPE_CHECKING` imports) names the same objects as what runs; and importing
the package loads none of it until a name is used.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import contextfold

INIT = Path(contextfold.__file__)


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(INIT.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                for alias in statement.names:
                    found[alias.asname or alias.name] = statement.module
    return found


def test_all_is_sorted_and_is_what_the_package_exports() -> None:
    assert contextfold.__all__ == sorted(contextfold.__all__)
    assert len(set(contextfold.__all__)) == len(contextfold.__all__)
    assert set(contextfold.__all__) == set(contextfold._EXPORTS) | {"__version__"}


def test_what_a_type_checker_reads_is_what_runs() -> None:
    assert _type_checking_imports() == contextfold._EXPORTS


def test_every_name_resolves_to_its_module_object() -> None:
    for name, module in contextfold._EXPORTS.items():
        assert getattr(contextfold, name) is getattr(importlib.import_module(module), name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        contextfold.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_importing_the_package_loads_nothing_else() -> None:
    probe = "import sys, contextfold; print(sorted(m for m in sys.modules if m.startswith('contextfold.')))"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout.strip() == "[]"

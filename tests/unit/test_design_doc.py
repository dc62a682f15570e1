"""The package cites its design in the repository: `docs/design.md §N`, never a SPEC kept elsewhere.

A citation of a document the repository does not hold cannot be checked or followed, so any
mention of "SPEC" in the package fails here, and so does a `docs/design.md §N` whose section
`## N.` is not in the document.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "server" / "contextfold"
DESIGN = ROOT / "docs" / "design.md"

SPEC = re.compile(r"\bSPEC\b")
"""A word of its own: `_INSPECTION` and the like are not citations."""
CITATION = re.compile(r"docs/design\.md\s*((?:§\d+(?:\s*(?:,|and|–|-)\s*)?)+)")
SECTION_NUMBER = re.compile(r"§(\d+)")
HEADING = re.compile(r"^## (\d+)\. \S", re.MULTILINE)


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _sections() -> set[int]:
    return {int(n) for n in HEADING.findall(DESIGN.read_text("utf-8"))}


def test_the_design_document_is_numbered() -> None:
    sections = _sections()
    assert sections, f"{DESIGN.relative_to(ROOT)} has no numbered sections (`## 1. Title`)"
    assert sections == set(range(1, max(sections) + 1)), f"sections are not numbered 1..N: {sorted(sections)}"


def test_no_module_cites_spec() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if SPEC.search(line)
    ]
    assert not found, "cite docs/design.md §N instead of SPEC:\n" + "\n".join(found)


def test_every_cited_section_exists() -> None:
    sections = _sections()
    cited = 0
    missing = []
    for path in _sources():
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            for citation in CITATION.finditer(line):
                for section in SECTION_NUMBER.findall(citation.group(1)):
                    cited += 1
                    if int(section) not in sections:
                        missing.append(f"{path.relative_to(ROOT)}:{number}: §{section}")
    assert cited, "no module cites docs/design.md: the check would pass vacuously"
    assert not missing, f"cited sections not in {DESIGN.relative_to(ROOT)}:\n" + "\n".join(missing)

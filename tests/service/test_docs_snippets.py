"""The Python snippets of the documentation run as printed (their data home pointed at a scratch folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["docs/guides/python-api.md"]


def _snippets() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = (ROOT / page).read_text("utf-8")
        for number, match in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S), 1):
            found.append((page, number, match.group(1)))
    return found


@pytest.mark.parametrize(("page", "number", "code"), _snippets(), ids=lambda v: str(v)[:40])
def test_the_snippet_runs(
    page: str, number: int, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = re.sub(r'"/tmp/[\w-]+"', repr(str(tmp_path / "home")), code)
    exec(compile(code, f"{page} snippet {number}", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip(), "the snippet prints what it shows"

"""The test suite's own layout: conftest.py is loaded once, by pytest, under one name."""

from __future__ import annotations

import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CONFTEST = TESTS / "conftest.py"


def loaded_from(path: Path) -> list[str]:
    """The names in sys.modules of every module loaded from ``path``."""
    names = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            names.append(name)
    return names


def test_conftest_top_level_runs_once() -> None:
    # Imported as both `conftest` and `tests.conftest`, its top-level code ran twice: two copies of
    # every helper, and the second run pointed XDG_CACHE_HOME/XDG_DATA_HOME at new folders.
    assert loaded_from(CONFTEST) == ["conftest"]


def test_no_test_imports_conftest() -> None:
    # pytest loads conftest.py itself; the helpers the tests import are in support.py.
    importing = re.compile(r"^\s*(from\s+(tests\.)?conftest\s+import|import\s+(tests\.)?conftest\b)", re.M)
    offenders = [p.name for p in sorted(TESTS.glob("*.py")) if importing.search(p.read_text())]
    assert offenders == []

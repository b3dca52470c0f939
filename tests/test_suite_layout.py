"""The test suite's own layout: conftest.py is loaded once, by pytest, under one name; the tiers
(``unit``, ``ui`` marked by conftest, ``slow`` by hand and checked by the audit)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def run_pytest(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest, in a fresh process, on ``folder``: a copy of the suite's conftest, support and audit hook
    beside the test files a test writes there."""
    for name in ("conftest.py", "support.py"):
        shutil.copy(TESTS / name, folder / name)
    shutil.copytree(TESTS / "tier_audit", folder / "tier_audit", dirs_exist_ok=True)
    ini = "[pytest]\nasyncio_default_fixture_loop_scope = function\nmarkers =\n    slow: starts a framework\n"
    (folder / "pytest.ini").write_text(ini)
    # Not this run's own test or audit: the inner run's are its own.
    outer = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BENCHTUI_TESTS_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**outer, "PYTHONPATH": "", **(env or {})},
        timeout=300,
    )


def test_every_test_is_in_one_tier(request: pytest.FixtureRequest) -> None:
    # slow and long are the hand's; conftest marks the rest ui (a test that drives the app) or unit.
    tiers = {
        item.nodeid: {m for m in ("slow", "long", "ui", "unit") if item.get_closest_marker(m)}
        for item in request.session.items
    }
    assert {n: t for n, t in tiers.items() if not t or (len(t) > 1 and t & {"ui", "unit"})} == {}
    assert tiers[request.node.nodeid] == {"unit"}
    snapshots = [marks for nodeid, marks in tiers.items() if nodeid.startswith("tests/test_ui_snapshots.py")]
    assert all(marks == {"ui"} for marks in snapshots)  # each takes a snapshot of the app


IMPORTS_A_FRAMEWORK = """
import subprocess, sys
import pytest

def child_imports_torch():
    subprocess.run([sys.executable, "-c", "import torch"], check=True)

def test_not_marked():
    child_imports_torch()

@pytest.mark.slow
def test_marked():
    child_imports_torch()

def test_no_framework():
    subprocess.run([sys.executable, "-c", "import json"], check=True)
"""


def test_the_audit_fails_a_test_not_marked_slow_that_starts_a_framework(tmp_path: Path) -> None:
    # A stand-in torch (the audit notices the import before it is found): no framework really starts.
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "torch.py").write_text("")
    (tmp_path / "test_audit.py").write_text(IMPORTS_A_FRAMEWORK)
    env = {"BENCHTUI_TESTS_AUDIT_TIERS": "1", "PYTHONPATH": str(tmp_path / "fake")}
    result = run_pytest(tmp_path, "-q", "-rE", "test_audit.py", env=env)
    assert result.stdout.splitlines()[-1].startswith("3 passed, 1 error"), result.stdout + result.stderr
    assert "ERROR test_audit.py::test_not_marked" in result.stdout
    assert "test_audit.py::test_not_marked starts a framework (torch) but is not marked slow" in result.stdout


# -- the long tests' cases: all in the full run, a seeded sample in the fast command -------------------
@pytest.mark.parametrize(
    "markexpr, given, runs",
    [
        ("", None, None),  # python -m pytest, as CI runs: every case
        ("slow", None, None),
        ("long", None, 6),  # leaves the slow tier out: a sample (--long-cases=all for every case)
        ("not slow", None, 6),  # the fast command
        ("not slow and not long", None, 6),
        ("unit", None, 6),
        ("not slow", "all", None),
        ("not slow", "3", 3),
        ("", "2", 2),
    ],
)
def test_a_long_test_runs_every_case_unless_the_run_leaves_the_slow_tier_out(
    markexpr: str, given: str | None, runs: int | None
) -> None:
    from support import cases_to_run

    assert cases_to_run(markexpr, given, 6) == runs


def test_a_sample_of_cases_is_seeded_ordered_and_never_more_than_all() -> None:
    from support import sample_cases

    every = list(range(100))
    picked = sample_cases(every, 6, "tests/x.py::test[0]")
    assert len(picked) == 6 and picked == sorted(picked) and set(picked) <= set(every)
    assert sample_cases(every, 6, "tests/x.py::test[0]") == picked  # the same cases every run
    assert sample_cases(every, 6, "tests/x.py::test[1]") != picked  # each loop its own
    assert sample_cases(every, None, "s") == every and sample_cases(every, 500, "s") == every
    assert sample_cases(range(3), 2, "s") in ([0, 1], [0, 2], [1, 2])

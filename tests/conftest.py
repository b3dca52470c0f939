"""Fixtures and hooks, the tiers, and the test run's environment (set once, here). No test imports
this file: the helpers the tests import are in support.py (``from support import ...``).

The tiers (markers): ``slow`` starts a framework (a real runner, a probe) and ``long`` starts none
but takes long (fuzzing, files at their bounds); both are marked by hand, in the test file. ``ui``
(drives the Textual app) and ``unit`` (the rest) are marked here. The fast tier is
``-m "not slow" -n 3``: every test that starts no framework, the ``long`` ones on a seeded sample of
their cases (the ``cases`` fixture, ``--long-cases``). Its tests wait on pipes and timers about half
their time, so a third worker fills those waits on two cores (the default stays two, for the
frameworks). ``python -m pytest`` runs every tier, every case.
``BENCHTUI_TESTS_AUDIT_TIERS=1`` checks the ``slow`` marks: a test not marked slow that imports a
framework, in this process or in any process it starts, fails (a process started with a PYTHONPATH
of the test's own, as the GPU fake's, is not seen)."""

from __future__ import annotations

import atexit
import inspect
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from support import ROOT, FakeLauncher, QuietApp, cases_to_run, sample_cases

if TYPE_CHECKING:
    from benchtui.app import BenchApp
    from benchtui.core.plan.plan import Plan

# Every Python a test starts (a CLI, a runner, a reader, pytest-xdist's workers) imports the app:
# where the environment says to write no bytecode (PYTHONDONTWRITEBYTECODE), each of those hundreds of
# processes compiled Textual, Rich and the app afresh (~0.3 s each). They keep it in a cache of the
# tests' own instead (no __pycache__ beside the sources), compiled once.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"] = str(ROOT / ".pytest_cache" / "pycache")
    sys.dont_write_bytecode = False
# Per-framework environments (benchtui envs) of the machine running the tests would replace
# this Python in every run: the tests use the one they were started with.
os.environ["BENCHTUI_ENVS"] = str(ROOT / ".pytest_cache" / "no-framework-envs")
# Piped output is as wide as its tables unless COLUMNS says (as a user may): the tests set it where
# they mean it, never from whoever started them (pytest-xdist's workers inherit a terminal's).
os.environ.pop("COLUMNS", None)
# The doctor keeps its answers in the user's cache folder: the tests keep theirs in one of their own.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="benchtui-tests-cache-")
# A command that names no sessions folder, started where there is no ./sessions, writes to the user's
# data folder (session.user_sessions_dir): the tests' go to one of their own, never the user's.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="benchtui-tests-data-")
# Both go when this process ends (each xdist worker has its own): 3,355 were left in /tmp by 2026-11-26.
for _folder in (os.environ["XDG_CACHE_HOME"], os.environ["XDG_DATA_HOME"]):
    atexit.register(shutil.rmtree, _folder, True)

FRAMEWORKS = frozenset({"torch", "tensorflow", "jax", "keras"})
T = TypeVar("T")
_BEFORE = pytest.StashKey[frozenset[str]]()  # the frameworks this process had before a test
AUDIT_TIERS = os.environ.get("BENCHTUI_TESTS_AUDIT_TIERS") == "1"
if AUDIT_TIERS:
    # tier_audit/sitecustomize.py on the path of every Python a test starts (the CLI's, and a runner's
    # through the launcher's extra path) writes the test that first imported a framework there.
    _audit_path = str(Path(__file__).resolve().parent / "tier_audit")
    for _name in ("PYTHONPATH", "BENCHTUI_RUNNER_PYTHONPATH"):
        os.environ[_name] = os.pathsep.join(p for p in (_audit_path, os.environ.get(_name, "")) if p)
    if "BENCHTUI_TESTS_FRAMEWORK_LOG" not in os.environ:  # the controller's, inherited by the workers
        _fd, _log = tempfile.mkstemp(prefix="benchtui-tests-frameworks-", suffix=".log")
        os.close(_fd)
        os.environ["BENCHTUI_TESTS_FRAMEWORK_LOG"] = _log


def drives_the_app(item: pytest.Item) -> bool:
    """A test of the Textual app: it takes a snapshot or runs the app under a pilot."""
    if "snap_compare" in getattr(item, "fixturenames", ()):
        return True
    function = getattr(item, "function", None)
    try:
        return function is not None and "run_test(" in inspect.getsource(function)
    except (OSError, TypeError):
        return False


#: Fixtures that start a framework, by the file that defines them: a test that uses one is slow, a
#: test written tomorrow included. (The audit does not see these: the GPU fake's PYTHONPATH is its own.)
FRAMEWORK_FIXTURES: dict[str, frozenset[str]] = {
    "tests/test_fakegpu_faithful.py": frozenset({"unit", "faked"}),  # PyTorch, Keras under the GPU fake
}


def starts_a_framework(item: pytest.Item) -> bool:
    fixtures = FRAMEWORK_FIXTURES.get(item.nodeid.partition("::")[0], frozenset())
    return not fixtures.isdisjoint(getattr(item, "fixturenames", ()))


#: How many cases each of a ``long`` test's loops runs in a quick run (see ``long_cases``).
QUICK_CASES = 6


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long-cases",
        default=None,
        metavar="N|all",
        help="cases per loop of a long test (the fuzzers): all, or a seeded sample of N. Default: all,"
        f" but {QUICK_CASES} where -m leaves out the slow tier (the fast command, -m 'not slow')",
    )


def long_cases(config: pytest.Config) -> int | None:
    """How many cases each loop of a ``long`` test runs (None: all of them)."""
    return cases_to_run(config.getoption("markexpr") or "", config.getoption("--long-cases"), QUICK_CASES)


def pytest_report_header(config: pytest.Config) -> str:
    n = long_cases(config)
    if n is None:
        return "long tests: every case"
    return f"long tests: a seeded sample of {n} cases per loop (--long-cases=all for every case)"


@pytest.fixture
def cases(request: pytest.FixtureRequest) -> Callable[[Sequence[T]], list[T]]:
    """The cases a ``long`` test's loop runs: all of them, or (a quick run) a sample of
    ``long_cases``, seeded by the test's id, in their order. The cases themselves are built the same
    either way (every random draw made), so that a sampled case is the full run's case."""
    n, seed = long_cases(request.config), request.node.nodeid
    return lambda every: sample_cases(every, n, seed)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ui: drives the Textual app (a pilot or a snapshot); marked by conftest"
    )
    config.addinivalue_line("markers", "unit: neither slow nor ui; marked by conftest")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if starts_a_framework(item):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is None and item.get_closest_marker("long") is None:
            item.add_marker(pytest.mark.ui if drives_the_app(item) else pytest.mark.unit)


def frameworks_started(item: pytest.Item, before: frozenset[str]) -> set[str]:
    """The frameworks ``item`` imported: here (new in sys.modules) or in a process it started."""
    started = {name for name in FRAMEWORKS - before if name in sys.modules}
    log = Path(os.environ["BENCHTUI_TESTS_FRAMEWORK_LOG"])
    for line in log.read_text(encoding="utf-8").splitlines():
        test, _, name = line.rpartition("\t")
        if test.rpartition(" (")[0] == item.nodeid:  # PYTEST_CURRENT_TEST: "<nodeid> (<phase>)"
            started.add(name)
    return started


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_BEFORE] = frozenset(FRAMEWORKS & set(sys.modules))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    if not AUDIT_TIERS or call.when != "teardown" or item.get_closest_marker("slow") is not None:
        return
    started = frameworks_started(item, item.stash.get(_BEFORE, frozenset()))
    if started:
        report = outcome.get_result()
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} starts a framework ({', '.join(sorted(started))}) but is not marked slow:"
            " mark it @pytest.mark.slow (or its module pytestmark), so that the fast tier stays fast"
        )


@pytest.fixture
def sessions_root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    return root


@pytest.fixture
def quiet_app(tmp_path: Path) -> QuietApp:
    """The app as the tests drive it: no NVML, no GPU found, its sessions in ``sessions_dir``
    (``tmp_path`` unless given), a plan given started at once (``autostart=False`` holds it), and
    with ``runner`` (the fake runner's own options) the fake runner instead of a framework's.
    The Textual app is imported here, not at conftest's import: a unit test never loads it."""
    from benchtui.app import make_app
    from benchtui.screens.plan import GpuProbe

    def make(
        plan: Plan | None = None,
        *,
        runner: tuple[str, ...] | None = None,
        sessions_dir: Path | None = None,
        **options: Any,
    ) -> BenchApp:
        options.setdefault("autostart", plan is not None)
        if runner is not None:
            options["launcher"] = FakeLauncher(*runner)
        return make_app(
            plan,
            sessions_dir=str(sessions_dir or tmp_path),
            use_nvml=False,
            probe=GpuProbe((), "NVML unavailable: test"),
            **options,
        )

    return make

"""A runner sees nothing of the parent's environment: not its site-packages, not its PYTHONPATH, not its cwd.

Real runner processes through the real launcher (``--doctor`` with an unknown framework or
one that the second environment lacks: answered before any framework is imported).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.provenance import RUNNER_PACKAGE
from benchtui.core.running import launcher
from benchtui.core.running.launcher import collect_events, runner_root, start_runner
from support import TINY, only_session, read_events

#: A package that, when imported, leaves a mark: it stands for the parent's torch, or a hijacker.
MARKING = "import pathlib\npathlib.Path({mark!r}).write_text({name!r})\n"


def _marking_package(where: Path, name: str, mark: Path, main: bool = False) -> None:
    package = where / name
    package.mkdir(parents=True)
    code = MARKING.format(mark=str(mark), name=name)
    (package / "__init__.py").write_text(code)
    if main:
        (package / "__main__.py").write_text(code + "raise SystemExit(7)\n")


def _doctor(
    python: str, framework: str, cwd: Path | None = None
) -> tuple[list[dict[str, Any]], int | None, str]:
    async def go() -> tuple[list[dict[str, Any]], int | None, str]:
        with tempfile.TemporaryFile() as log:
            proc = await start_runner(python, ["--doctor", framework], log, cwd=cwd)
            try:
                events = await collect_events(proc)
            finally:
                proc.close()
            log.seek(0)
            return events, proc.process.returncode, log.read().decode(errors="replace")

    return asyncio.run(go())


@pytest.fixture
def installed_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """benchtui_runners as a wheel installs it: in a site-packages beside the parent's "torch"."""
    site = tmp_path / "site-packages"
    shutil.copytree(RUNNER_PACKAGE, site / RUNNER_PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("numpy", "torch"):
        _marking_package(site, name, tmp_path / f"parent-{name}-imported")
    monkeypatch.setattr(launcher, "RUNNER_PACKAGE", site / RUNNER_PACKAGE.name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return site


def test_an_installed_runner_package_is_staged_alone(installed_layout: Path, tmp_path: Path) -> None:
    root = runner_root(installed_layout / RUNNER_PACKAGE.name)
    assert root != installed_layout and root.is_relative_to(tmp_path / "cache")
    assert [p.name for p in root.iterdir()] == [RUNNER_PACKAGE.name]
    assert runner_root(installed_layout / RUNNER_PACKAGE.name) == root  # made once, then reused
    # In a source checkout the package's own folder already holds nothing else.
    assert runner_root(RUNNER_PACKAGE) == RUNNER_PACKAGE.parent


@pytest.mark.slow
def test_a_runner_in_another_environment_imports_nothing_of_the_parents(
    installed_layout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--python torch=OTHER``: the other environment has no torch; the runner must say so, not borrow ours."""
    other = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    python = str(other / "bin" / "python")
    # The parent's PYTHONPATH does not travel either.
    for name in ("numpy", "torch"):
        _marking_package(tmp_path / "parent-path", name, tmp_path / f"parent-pythonpath-{name}-imported")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "parent-path"))

    events, returncode, log = _doctor(python, "torch")

    errors = [e for e in events if e["type"] == "error"]
    assert errors and errors[0]["kind"] == "unavailable", log
    assert errors[0]["message"].startswith("torch is not installed (No module named")
    assert returncode == 3
    assert not list(tmp_path.glob("parent-*-imported")), "the runner imported the parent's packages"


def test_a_package_named_like_the_runner_in_the_working_directory_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hijack = tmp_path / "project"
    for name in ("benchtui_runners", "runners"):
        _marking_package(hijack, name, tmp_path / f"{name}-hijacked", main=True)
    monkeypatch.chdir(hijack)
    for cwd in (None, hijack):  # the launcher's own choice, and even a hostile one
        events, returncode, log = _doctor(sys.executable, "mxnet", cwd=cwd)
        assert [e["message"] for e in events if e["type"] == "error"] == ["unknown framework 'mxnet'"], log
        assert returncode == 3
    assert not list(tmp_path.glob("*-hijacked"))


@pytest.mark.slow
def test_a_headless_run_from_a_folder_with_a_runners_package_trains(tmp_path: Path) -> None:
    """The user's working directory holds ``runners/`` and ``benchtui_runners/``: the run is unaffected."""
    for name in ("benchtui_runners", "runners"):
        _marking_package(tmp_path, name, tmp_path / f"{name}-hijacked", main=True)
    root = tmp_path / "sessions"
    # As a user types it: the installed entry point (``python -m`` would put the cwd on the parent's path).
    entry = str(Path(sys.executable).parent / "benchtui")
    result = subprocess.run(
        [
            entry,
            "run",
            "--headless",
            "--frameworks",
            "torch",
            *TINY,
            "--epochs",
            "1",
            "--no-nvml",
            "--sessions-dir",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    events = read_events(only_session(root))
    assert [e["status"] for e in events if e["type"] == "run_end"] == ["ok"]
    assert not list(tmp_path.glob("*-hijacked"))

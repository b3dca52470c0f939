"""Which code recorded a session: benchtui's version, its git commit when known, the runner code's hash, the CPU."""

from __future__ import annotations

import functools
import hashlib
import platform
import re
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypedDict

import benchtui_runners

RUNNER_PACKAGE = Path(benchtui_runners.__file__).resolve().parent
SOURCE_ROOT = Path(__file__).resolve().parents[3]  # the checkout, when benchtui runs from one


class Provenance(TypedDict):
    """What session.json records under "benchtui"."""

    version: str
    commit: str | None  # None for an installed wheel; "<sha>-dirty" for a checkout with changes
    runner_hash: str


@functools.cache
def benchtui_version(root: Path = SOURCE_ROOT) -> str:
    """The installed benchtui's version; run from a checkout that is not installed (the lent GPU machine runs
    it so, with ``PYTHONPATH=tui:runners``), the checkout's pyproject.toml's; "unknown" when neither says."""
    try:
        return version("benchtui")
    except PackageNotFoundError:
        return _checkout_version(root / "pyproject.toml") or "unknown"


#: ``version = "0.2.0"`` in pyproject.toml's [project] table (tomllib is Python 3.11+; 3.10 is supported).
_VERSION_LINE = re.compile(r'^version\s*=\s*"([^"\n]{1,64})"\s*$', re.MULTILINE)


def _checkout_version(pyproject: Path) -> str | None:
    """The version of the [project] table of the checkout's pyproject.toml, None when it has none."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    table = text.partition("\n[project]\n")[2].partition("\n[")[0]
    found = _VERSION_LINE.search(table)
    return found.group(1) if found else None


@functools.cache
def runner_code_hash(package: Path = RUNNER_PACKAGE) -> str:
    """SHA-256 of the runner package's Python files (names and bytes): which runner code ran."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def git_commit(root: Path = SOURCE_ROOT) -> str | None:
    """The checkout's commit ("-dirty" when files differ from it), or None outside a git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head or None


def provenance() -> Provenance:
    return {"version": benchtui_version(), "commit": git_commit(), "runner_hash": runner_code_hash()}


@functools.cache
def cpu_model() -> str:
    """The CPU's marketing name (Linux: /proc/cpuinfo), else what the platform module says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def recorded_by_other(recorded: object) -> str | None:
    """One line when a session was recorded by another benchtui version than this one; None when the same."""
    now = benchtui_version()
    if not isinstance(recorded, dict) or not isinstance(recorded.get("version"), str):
        return (
            f"recorded by a benchtui older than 0.2 (session.json names no version); this is benchtui {now}: "
            "its figures are recomputed from events.jsonl with today's code"
        )
    if recorded["version"] != now:
        return (
            f"recorded by benchtui {recorded['version']}; this is benchtui {now}: "
            "its figures are recomputed from events.jsonl with today's code"
        )
    return None

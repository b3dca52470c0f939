"""Fixtures and hooks, and the test run's environment (set once, here). No test imports this file:
the helpers the tests import are in support.py (``from support import ...``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from support import ROOT

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


@pytest.fixture
def sessions_root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    return root

"""Snapshots of the screens, rendered from fixed sessions at fixed terminal sizes.

Regenerate after an intended change with ``pytest tests/test_ui_snapshots.py --snapshot-update``
and look at the SVGs under tests/__snapshots__/ before committing them.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from benchtui.app import BenchApp, make_app
from benchtui.screens.confirm import ConfirmScreen
from benchtui.screens.plan import GpuProbe

ROOT = Path(__file__).parent.parent
# Relative paths: the session folder shown on screen must not depend on the checkout location.
TINY = Path("tests/data/tiny-cpu-session")
GPU = Path("tests/data/gpu-session")


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def replayed(path: Path) -> BenchApp:
    return make_app(replay=path, speed=math.inf)


async def until_replayed(pilot) -> None:  # noqa: ANN001
    app = pilot.app
    deadline = time.monotonic() + 30
    while app.replayer is None or app.replayer.status in ("pending", "running"):
        assert time.monotonic() < deadline
        await pilot.pause(0.05)
    await pilot.pause()
    app.clear_notifications()  # toasts are not what these snapshots check


def test_plan_screen_80x24(snap_compare) -> None:  # noqa: ANN001
    app = make_app(probe=GpuProbe((), "NVML unavailable: no NVIDIA driver"))
    assert snap_compare(app, terminal_size=(80, 24))


def test_replay_cpu_session_80x24(snap_compare) -> None:  # noqa: ANN001
    assert snap_compare(replayed(TINY), terminal_size=(80, 24), run_before=until_replayed)


def test_replay_gpu_session_80x24(snap_compare) -> None:  # noqa: ANN001
    assert snap_compare(replayed(GPU), terminal_size=(80, 24), run_before=until_replayed)


def test_replay_gpu_session_160x45(snap_compare) -> None:  # noqa: ANN001
    assert snap_compare(replayed(GPU), terminal_size=(160, 45), run_before=until_replayed)


def test_replay_with_log_120x36(snap_compare) -> None:  # noqa: ANN001
    assert snap_compare(replayed(TINY), terminal_size=(120, 36), press=["l"], run_before=until_replayed)


def test_quit_confirmation_80x24(snap_compare) -> None:  # noqa: ANN001
    async def ask(pilot) -> None:  # noqa: ANN001
        await until_replayed(pilot)
        pilot.app.push_screen(
            ConfirmScreen(
                "Quit while runs are going on?",
                "The current run is stopped (its whole process group) and the session is kept, "
                "marked interrupted, with everything recorded so far.",
            )
        )

    assert snap_compare(replayed(TINY), terminal_size=(80, 24), run_before=ask)

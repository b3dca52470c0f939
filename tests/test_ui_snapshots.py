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


async def until_replayed(pilot) -> None:
    app = pilot.app
    deadline = time.monotonic() + 30
    while app.replayer is None or app.replayer.status in ("pending", "running"):
        assert time.monotonic() < deadline
        await pilot.pause(0.05)
    await pilot.pause()
    app.clear_notifications()  # toasts are not what these snapshots check


def test_plan_screen_80x24(snap_compare) -> None:
    app = make_app(probe=GpuProbe((), "NVML unavailable: no NVIDIA driver"))
    assert snap_compare(app, terminal_size=(80, 24))


def test_replay_cpu_session_80x24(snap_compare) -> None:
    assert snap_compare(replayed(TINY), terminal_size=(80, 24), run_before=until_replayed)


def test_replay_gpu_session_80x24(snap_compare) -> None:
    assert snap_compare(replayed(GPU), terminal_size=(80, 24), run_before=until_replayed)


def test_replay_gpu_session_160x45(snap_compare) -> None:
    assert snap_compare(replayed(GPU), terminal_size=(160, 45), run_before=until_replayed)


def test_replay_with_log_120x36(snap_compare) -> None:
    assert snap_compare(replayed(TINY), terminal_size=(120, 36), press=["l"], run_before=until_replayed)


def test_quit_confirmation_80x24(snap_compare) -> None:
    async def ask(pilot) -> None:
        await until_replayed(pilot)
        pilot.app.push_screen(
            ConfirmScreen(
                "Quit while runs are going on?",
                "The current run is stopped (its whole process group) and the session is kept, "
                "marked interrupted, with everything recorded so far.",
            )
        )

    assert snap_compare(replayed(TINY), terminal_size=(80, 24), run_before=ask)


def test_replay_cpu_session_120x35(snap_compare) -> None:
    """A short session on a big terminal: the strips grow into the room beside the telemetry."""
    assert snap_compare(replayed(TINY), terminal_size=(120, 35), run_before=until_replayed)


@pytest.fixture
def mid_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three runs of two models, played until the second DenseNet121 run of tf.keras is halfway: every
    run of the model on its line, queued ones too, and the plan's ETA. Named relative to the working folder."""
    from benchtui.core.running.replay import Replayer
    from sessionfactory import make_session

    make_session(
        tmp_path, runs=3, models=("resnet50", "densenet121"), steps=20, epochs=2, folder="three-runs"
    )
    apply = Replayer._apply

    def _apply(self: Replayer, event: dict) -> None:
        apply(self, event)
        if not self.paused and len(self.model.runs["010-tensorflow-densenet121-2"].batch_seconds) == 20:
            self.pause()

    monkeypatch.setattr(Replayer, "_apply", _apply)
    monkeypatch.chdir(tmp_path)
    return Path("three-runs")


async def until_paused(pilot) -> None:
    app = pilot.app
    deadline = time.monotonic() + 30
    while app.replayer is None or not app.replayer.paused:
        assert time.monotonic() < deadline
        await pilot.pause(0.05)
    await pilot.pause(0.5)
    app.clear_notifications()


def test_replay_mid_plan_80x24(snap_compare, mid_plan: Path) -> None:
    assert snap_compare(replayed(mid_plan), terminal_size=(80, 24), run_before=until_paused)


def test_replay_mid_plan_120x35(snap_compare, mid_plan: Path) -> None:
    assert snap_compare(replayed(mid_plan), terminal_size=(120, 35), run_before=until_paused)


@pytest.fixture
def sessions_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The two recorded sessions and one with a long name, in a folder the title names as "sessions"."""
    import shutil

    from benchtui.screens import sessions
    from sessionfactory import make_session

    root = tmp_path / "sessions"
    for name in ("tiny-cpu-session", "gpu-session"):
        shutil.copytree(ROOT / "tests" / "data" / name, root / f"20261121T1000{len(name)}Z_{name}")
    make_session(
        root,
        name="the whole study, every model of the paper, on the lab's shared machine",
        folder="20261120T090000Z_the-whole-study",
        runs=1,
        epochs=2,
        steps=2,
    )

    class Here(type(Path())):  # type: ignore[misc]
        def resolve(self, strict: bool = False) -> Here:
            return self

    monkeypatch.setattr(sessions, "sessions_dir", lambda root: Here("sessions"))
    return root


async def until_listed(pilot) -> None:
    from benchtui.screens.sessions import SessionsScreen

    pilot.app.show_sessions()
    deadline = time.monotonic() + 30
    while not isinstance(pilot.app.screen, SessionsScreen) or pilot.app.screen.shown is None:
        assert time.monotonic() < deadline
        await pilot.pause(0.05)
    await pilot.pause(0.2)


def test_sessions_screen_80x24(snap_compare, sessions_root: Path) -> None:
    app = make_app(None, sessions_dir=str(sessions_root), use_nvml=False, probe=GpuProbe((), "test"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=until_listed)


def test_sessions_screen_120x35(snap_compare, sessions_root: Path) -> None:
    app = make_app(None, sessions_dir=str(sessions_root), use_nvml=False, probe=GpuProbe((), "test"))
    assert snap_compare(app, terminal_size=(120, 35), run_before=until_listed)


def test_compare_screen_80x24(snap_compare, sessions_root: Path) -> None:
    async def compared(pilot) -> None:
        from benchtui.screens.sessions import CompareScreen

        await until_listed(pilot)
        await pilot.press("m", "down", "c")  # the tiny CPU session against the GPU one
        deadline = time.monotonic() + 30
        while not isinstance(pilot.app.screen, CompareScreen) or pilot.app.screen.comparison is None:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        await pilot.pause(0.2)

    app = make_app(None, sessions_dir=str(sessions_root), use_nvml=False, probe=GpuProbe((), "test"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=compared)

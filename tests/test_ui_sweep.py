"""A sweep in the app: the plan screen's axes and size line, and a sweep session's rows, answer and view.

Sweep sessions are made up by tests/sessionfactory.py (``sweep=``, ``point_speed=``) and replayed through
the live screen as ``benchtui replay`` does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input

from benchtui.app import make_app
from benchtui.core.plan.plan import from_preset, run_order
from benchtui.core.store.session import load_session
from benchtui.screens.plan import GpuProbe, PlanScreen
from sessionfactory import make_session

NO_GPU = GpuProbe((), "NVML unavailable: test", cpus=2)
SWEEP = {"batch": ["4", "8"], "channels-last": ["off", "on"]}


def error_text(screen: PlanScreen) -> str:
    error = screen.query_one("#plan-error")
    return error.render().plain if error.display else ""


def sweep_help(screen: PlanScreen) -> str:
    return screen.query_one("#sweep-help").render().plain


# -- the plan screen ------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_plan_screen_makes_a_sweep_and_says_its_size_before_it_starts(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    started: list = []
    app.start_plan = started.append  # type: ignore[method-assign] - the request is what is checked
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        field = screen.query_one("#sweep", Input)
        assert "batch" in str(field.placeholder) and "channels-last" in str(field.placeholder)
        assert "points" not in sweep_help(screen)  # no sweep: no size line
        field.value = "batch=4,8; channels-last=off,on"
        await pilot.pause()
        plan = screen.build_plan()
        assert plan.sweep == SWEEP and len(plan.points()) == 4
        assert plan.preset == ""  # a grid is no preset's plan
        line = sweep_help(screen)
        # tf.keras is channels-last at every setting: its "on" cells read the "off" runs, never run twice.
        runs = len(run_order(plan))
        assert runs == 4 * 2 + 2 * 2 == 12
        assert line.startswith("4 points × 2 frameworks") and f"= {runs} runs" in line, line
        field.value = ""  # --best chooses the batch and the layout itself: it sweeps alone
        screen.query_one("#best", Checkbox).value = True
        await pilot.pause()
        best = screen.build_plan()
        assert best.sweep == {"settings": ["same", "best"]}
        assert sweep_help(screen).startswith("2 points × 2 frameworks")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert len(started) == 1 and started[0].sweep == best.sweep


@pytest.mark.asyncio
async def test_a_bad_sweep_value_is_one_error_line_and_nothing_starts(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    started: list = []
    app.start_plan = started.append  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#sweep", Input).value = "batch=4,eight"
        await pilot.pause()
        said = "--sweep batch takes whole numbers from 1 or auto, got 'eight'"
        assert sweep_help(screen) == said  # under the field as it is typed
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert error_text(screen) == said and "\n" not in error_text(screen)
        assert not started
        screen.query_one("#sweep", Input).value = "colour=red"
        await pilot.pause()
        assert error_text(screen).startswith("--sweep: unknown axis 'colour'")
        screen.query_one("#sweep", Input).value = "batch=4,8"
        await pilot.pause()
        assert error_text(screen) == ""  # fixed: the error goes


@pytest.mark.asyncio
async def test_a_sweep_session_s_plan_fills_the_form_and_comes_back_the_same(tmp_path: Path) -> None:
    path = make_session(
        tmp_path, sweep={"batch": ["4", "8"], "precision": ["fp32", "amp-bf16"]}, batch_size=4
    )
    plan = load_session(path).plan
    assert plan.sweep == {"batch": ["4", "8"], "precision": ["fp32", "amp-bf16"]}
    app = make_app(plan, sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        assert screen.query_one("#sweep", Input).value == "batch=4,8; precision=fp32,amp-bf16"
        assert not screen.query_one("#best", Checkbox).value
        assert screen.build_plan().sweep == plan.sweep
        screen.fill(from_preset("quick"))  # a preset chosen: no sweep
        assert screen.build_plan().sweep == {} and not screen.query_one("#best", Checkbox).value
        screen.fill(plan)
        assert screen.build_plan().sweep == plan.sweep
        best = from_preset("quick")
        best.sweep = {"settings": ["same", "best"]}
        screen.fill(best)  # --best is the box, not text in the field
        assert screen.query_one("#sweep", Input).value == "" and screen.query_one("#best", Checkbox).value
        assert screen.build_plan().sweep == best.sweep

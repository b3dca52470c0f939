"""A sweep in the app: the plan screen's axes and size line, and a sweep session's rows, answer and view.

Sweep sessions are made up by tests/sessionfactory.py (``sweep=``, ``point_speed=``) and replayed through
the live screen as ``benchtui replay`` does.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import time
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Checkbox, Input, Static

from benchtui.app import make_app
from benchtui.core import fmt
from benchtui.core.model.cell import SessionSummary
from benchtui.core.model.session_model import model_verdicts
from benchtui.core.plan.plan import from_preset, run_order
from benchtui.core.plan.sweep import Point
from benchtui.core.running.replay import Replayer
from benchtui.core.store.session import load_session
from benchtui.screens.live import LiveScreen
from benchtui.screens.live import _label as live_label
from benchtui.screens.plan import GpuProbe, PlanScreen
from benchtui.screens.sessions import SessionsScreen
from benchtui.widgets.comparison import BatchComparison
from benchtui.widgets.results_table import ResultsTable, row_key
from benchtui.widgets.sweep_view import SweepView
from sessionfactory import make_session
from support import QuietApp, small_plan
from test_ui_replay import finished
from test_ui_sessions import wait_for
from test_ui_snapshots import until_replayed

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
        assert screen.query_one("#batch-sizes").display and not screen.query_one("#batch-swept").display
        field.value = "batch=4,8; channels-last=off,on"
        await pilot.pause()
        # The sweep sets every point's batch: no sizes to type, and one left half typed is no error.
        assert not screen.query_one("#batch-sizes").display and screen.query_one("#batch-swept").display
        screen.query_one("#bs-resnet50_v1_5", Input).value = ""
        plan = screen.build_plan()
        assert plan.batch_sizes == {"resnet50_v1_5": from_preset("quick").batch_size("resnet50_v1_5")}
        assert plan.sweep == SWEEP and len(plan.points()) == 4
        assert plan.preset == ""  # a grid is no preset's plan
        line = sweep_help(screen)
        # tf.keras is channels-last at every setting: its "on" cells read the "off" runs, never run twice.
        runs = len(run_order(plan))
        assert runs == 4 * 2 + 2 * 2 == 12
        assert line.startswith("4 points × 2 frameworks") and f"= {runs} runs" in line, line
        field.value = ""  # --best chooses the batch and the layout itself: it sweeps alone
        await pilot.pause()
        assert screen.query_one("#batch-sizes").display and not screen.query_one("#batch-swept").display
        screen.query_one("#bs-resnet50_v1_5", Input).value = "16"
        screen.query_one("#best", Checkbox).value = True
        await pilot.pause()
        best = screen.build_plan()
        assert best.sweep == {"settings": ["same", "best"]}
        assert sweep_help(screen).startswith("2 points × 2 frameworks")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert len(started) == 1 and started[0].sweep == best.sweep


@pytest.mark.asyncio
async def test_a_devices_sweep_is_the_scaling_session_as_on_the_command_line(tmp_path: Path) -> None:
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one("#sweep", Input).value = "devices=1,2"
        await pilot.pause()
        plan = screen.build_plan()
        assert plan.sweep == {"devices": ["1", "2"]} and plan.points() == [Point()]
        assert (plan.devices, plan.scaling, plan.device_counts()) == (2, True, [1, 2])
        assert sweep_help(screen).startswith("2 device counts × 2 frameworks")


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
        said = "Sweep batch takes whole numbers from 1 or auto, got 'eight'"  # the field's name, not the flag
        assert sweep_help(screen) == said  # under the field as it is typed
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert error_text(screen) == said and "\n" not in error_text(screen)
        assert not started
        screen.query_one("#sweep", Input).value = "colour=red"
        await pilot.pause()
        assert error_text(screen).startswith("Sweep: unknown axis 'colour'")
        screen.query_one("#sweep", Input).value = "batch=4,8"
        await pilot.pause()
        assert error_text(screen) == ""  # fixed: the error goes
        screen.query_one("#best", Checkbox).value = True  # --best picks each framework's batch itself
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert error_text(screen).startswith(
            "--best chooses each framework's largest batch: drop Sweep batch"
        )
        assert not started


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


# -- a sweep session in the live screen ------------------------------------------------------------------
#: PyTorch gains from channels-last (it is channels-last at every setting in tf.keras: no effect there), and
#: tf.keras is slowed at batch 8: its best is batch 4, PyTorch's batch 8 · channels-last on.
SPEED = {
    ("torch", "batch=4,channels-last=on"): 0.8,
    ("torch", "batch=8,channels-last=on"): 0.7,
    ("tensorflow", "batch=8,channels-last=off"): 1.6,
}


def sweep_session(root: Path, folder: str = "sweep") -> Path:
    return make_session(root, sweep=SWEEP, batch_size=4, point_speed=SPEED, folder=folder)


def written_summary(path: Path) -> SessionSummary:
    return SessionSummary.from_json(json.loads((path / "summary.json").read_text(encoding="utf-8")))


def answer_lines(app) -> list[str]:
    group = app.screen.query_one("#answer").content
    return [" ".join(r.plain.split()) for r in group.renderables[1:]]


@pytest.mark.asyncio
async def test_a_sweep_session_has_a_row_per_point_and_both_verdicts(tmp_path: Path) -> None:
    path = sweep_session(tmp_path)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 45)) as pilot:
        await finished(pilot, app)
        model = app.screen.model
        summary = written_summary(path)
        assert summary is not None and summary.sweep is not None
        table = app.screen.query_one(ResultsTable)
        keys = [row_key(fw, m, p) for fw, m, p in model.grid()]
        assert list(table._shown) == keys and len(keys) == 8  # 4 points × 2 frameworks, the grid's order
        assert "resnet50|torch|batch=8,channels-last=on" in keys
        assert "point" in table.columns_shown
        header = str(table.columns["point"].label)
        assert header.split() == ["batch", "·", "channels-last"]
        for row in summary.rows:  # each row's figure is its point's, as summary.json has it
            key = row_key(row.framework, row.model, row.point)
            assert table.cell_text(key, "point") == " · ".join(v for _, v in row.point.items)
            assert table.cell_text(key, "ips") == fmt.rate(row.images_per_s)
        # tf.keras is channels-last at every setting: its "on" rows are its "off" runs
        on, off = (f"resnet50|tensorflow|batch=4,channels-last={v}" for v in ("on", "off"))
        assert table.cell_text(on, "ips") == table.cell_text(off, "ips")
        assert table.cell_text(on, "ips") != table.cell_text("resnet50|torch|batch=4,channels-last=on", "ips")

        lines = answer_lines(app)
        for point in model.plan.points():  # same settings: the verdict at every point, in every view's words
            (verdict,), _ = model_verdicts(model, "resnet50", point)
            assert f"ResNet50 · {point.label}: {' '.join(verdict.text.split())}" in lines
        (best,) = summary.sweep.best
        assert best.base.point != best.other.point  # each framework at its own best
        assert f"ResNet50: {' '.join(best.text.split())}" in lines
        assert best.text.startswith("best vs best: PyTorch at batch 8 · channels-last on")
        assert "ResNet50 · channels-last on buys: PyTorch 1." in " ".join(lines)
        assert "tf.keras no effect" in [x for x in lines if "channels-last on buys" in x][0]


@pytest.mark.asyncio
async def test_the_sweep_view_draws_each_framework_s_curve_and_what_each_setting_buys(tmp_path: Path) -> None:
    path = sweep_session(tmp_path)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 45)) as pilot:
        await finished(pilot, app)
        view = app.screen.query_one(SweepView)
        assert view.display and str(view.border_title) == "Sweep · ResNet50 · img/s by batch"
        summary = written_summary(path)
        assert summary is not None
        rate = {(r.framework, r.point.key): fmt.rate(r.images_per_s) for r in summary.rows}
        curve = [" ".join(line.split()) for line in view.curve_texts(110)]
        # A line per framework and setting of the other axis; tf.keras's channels-last changes nothing: one.
        assert [line.split(" batch ")[0] for line in curve] == [
            "PyTorch · channels-last off",
            "PyTorch · channels-last on",
            "tf.keras",
        ]
        assert curve[1].endswith(f"batch 8 ████████ {rate[('torch', 'batch=8,channels-last=on')]} ◆")
        assert "batch 4 " in curve[2] and curve[2].split(" · ")[0].endswith(
            f"{rate[('tensorflow', 'batch=4,channels-last=off')]} ◆"
        )  # tf.keras's best is batch 4: the mark is on its first point
        assert curve[0].count("◆") == 0
        texts = [" ".join(t.split()) for t in view.texts(110)]
        assert texts[texts.index("What each setting buys PyTorch tf.keras") + 2].startswith(
            "channels-last on 1."
        )
        assert texts[-1].endswith("no effect")
        # Narrower, the axis's name goes, then the bars: the rates stay.
        narrower = [" ".join(line.split()) for line in view.curve_texts(60)]
        assert all(" batch " not in line and "█" in line for line in narrower)
        narrowest = [" ".join(line.split()) for line in view.curve_texts(48)]
        assert all("█" not in line and len(line) <= 48 for line in narrowest)
        assert narrowest[1].endswith(f"8 {rate[('torch', 'batch=8,channels-last=on')]} ◆")


@pytest.mark.asyncio
async def test_an_inference_sweep_s_curve_says_each_batch_s_latency_where_it_fits(tmp_path: Path) -> None:
    path = make_session(tmp_path, sweep={"batch": ["4", "8", "16"]}, batch_size=4, task="inference")
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot, app)
        view = app.screen.query_one(SweepView)
        assert str(view.border_title) == "Sweep · ResNet50 · img/s (latency p50/p99) by batch"
        rows = {(r.framework, r.point.get("batch")): r for r in written_summary(path).rows}
        wide = [" ".join(line.split()) for line in view.curve_texts(200)]
        for line, fw in zip(wide, ("torch", "tensorflow"), strict=True):
            for batch in ("4", "8", "16"):
                row = rows[(fw, batch)]
                p50, p99 = (fmt.seconds(v * 1000) for v in (row.latency_p50_s, row.latency_p99_s))
                assert f"batch {batch} " in line and f"{fmt.rate(row.images_per_s)} {p50}/{p99} ms" in line
        assert wide[0].endswith(" ms ◆")  # the largest batch is the fastest here
        narrow = view.curve_texts(70)
        assert all(" ms" not in line and len(line) <= 70 for line in narrow)  # no room: the rates alone


@pytest.mark.asyncio
async def test_the_sweep_answer_is_computed_again_sparingly_while_runs_finish_and_once_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It bootstraps: while runs finish it waits SWEEP_EVERY_S, or ten times what it took; the end's is
    computed at once, so the answer shown is the session's."""
    from benchtui.core.model import sweeps
    from benchtui.screens import live

    calls: list[bool] = []
    real = sweeps.answer

    def slow(model):  # as a long sweep's answer takes
        time.sleep(0.3)
        calls.append(app.replayer is not None and app.replayer.status not in ("pending", "running"))
        return real(model)

    played = Replayer.run

    async def ends_late(self: Replayer) -> str:  # as on a busy machine: ticks run after the last event
        status = await played(self)
        self.status = "running"  # before the status turns, as ``settle`` may take
        await asyncio.sleep(0.5)
        self.status = status
        return status

    path = sweep_session(tmp_path)
    app = make_app(replay=path, speed=25.0)  # 12 runs finishing over about 3 s
    monkeypatch.setattr(live.sweeps, "answer", slow)
    monkeypatch.setattr(Replayer, "run", ends_late)
    async with app.run_test(size=(120, 40)) as pilot:
        await finished(pilot, app, timeout=60)
        await wait_for(pilot, lambda: bool(calls and calls[-1]), timeout=5)  # once more when it ended
        assert 2 <= len(calls) <= 4, calls  # not one a finished run: at most every 3 s (10 × 0.3 s)
        (best,) = written_summary(path).sweep.best  # type: ignore[union-attr]
        assert f"ResNet50: {' '.join(best.text.split())}" in answer_lines(app)


@pytest.mark.asyncio
async def test_a_session_without_a_sweep_has_no_sweep_view_and_no_point_column(tmp_path: Path) -> None:
    path = make_session(tmp_path)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 35)) as pilot:
        await finished(pilot, app)
        assert not app.screen.query_one(SweepView).display
        table = app.screen.query_one(ResultsTable)
        assert "point" not in table.columns_shown
        assert list(table._shown) == ["resnet50|torch", "resnet50|tensorflow"]


@pytest.mark.asyncio
async def test_a_sweep_session_opened_from_the_sessions_screen_replays_with_its_view(tmp_path: Path) -> None:
    sweep_session(tmp_path, folder="20261126T1200Z_sweep")
    app = make_app(sessions_dir=str(tmp_path), probe=NO_GPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.shown is not None)
        summary = screen.query_one("#sessions-summary", Static)
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(summary.content)
        assert "best vs best" in console.export_text()  # the report's sweep answer, as show prints it
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")  # at once
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        await finished(pilot, app)
        assert app.screen.query_one(SweepView).display
        assert len(app.screen.query_one(ResultsTable)._shown) == 8


# -- snapshots -----------------------------------------------------------------------------------------
@pytest.fixture
def relative_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sweep session, named relative to the working folder: the screen shows no tmp path."""
    sweep_session(tmp_path)
    monkeypatch.chdir(tmp_path)
    return Path("sweep")


def scrolled_to(selector: str):
    async def run_before(pilot) -> None:
        await until_replayed(pilot)
        screen = pilot.app.screen
        screen.query_one("#body").scroll_to_widget(screen.query_one(selector), animate=False, top=True)
        await pilot.pause()

    return run_before


def test_sweep_view_120x40(snap_compare, relative_sweep: Path) -> None:
    """The sweep view: each framework's curve against batch, best vs best, what each setting buys."""
    app = make_app(replay=relative_sweep, speed=math.inf)
    assert snap_compare(app, terminal_size=(120, 40), run_before=scrolled_to("#sweep"))


def test_sweep_rows_80x24(snap_compare, relative_sweep: Path) -> None:
    """A row per (model, point, framework) on 80 columns: the Point column names the axes."""
    app = make_app(replay=relative_sweep, speed=math.inf)
    assert snap_compare(app, terminal_size=(80, 24), run_before=scrolled_to("#results"))


# -- a sweep run live ---------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_sweep_run_live_fills_a_row_per_point_and_n_brings_its_plan_back(quiet_app: QuietApp) -> None:
    """The engine runs the grid (the fake runner); each framework's runs land in their point's rows, the
    strips follow the point being run, and the plan screen it goes back to holds the sweep."""
    plan = small_plan(epochs=2, runs=1, device="cpu", sweep=dict(SWEEP))
    app = quiet_app(plan, runner=("--batch-s", "0.0"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        assert app.engine is not None
        await wait_for(pilot, lambda: not app.runs_going)
        await pilot.pause(0.5)
        screen = app.screen
        model = app.engine.model
        assert len(model.runs) == 6  # tf.keras's channels-last points are not run twice
        table = screen.query_one(ResultsTable)
        assert list(table._shown) == [row_key(fw, m, p) for fw, m, p in model.grid()]
        assert {table.cell_text(key, "state") for key in table._shown} == {"done"}
        for key in table._shown:  # each row's batch is its point's (the runner's echo)
            _, fw, at = key.split("|")
            runs = model.cell_runs(fw, "resnet50", point=Point.from_key(at))
            assert {r.hello["config"]["batch_size"] for r in runs} == {
                int(Point.from_key(at).get("batch") or 0)
            }
        assert screen.query_one(SweepView).display
        last = max(model.runs.values(), key=lambda r: r.started_t or 0.0)
        assert screen.query_one(BatchComparison).point == last.spec.point
        assert last.spec.point.label in str(screen.query_one(BatchComparison).border_title)
        assert any(line.startswith("ResNet50: best vs best: ") for line in answer_lines(app))
        # The status line's run: the point after the framework, so a narrow screen cuts the point first.
        assert (
            live_label("torch", "resnet50", last.spec.point)
            == "ResNet50 · PyTorch · batch 8 · channels-last on"
        )
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        form = app.screen
        assert form.query_one("#sweep", Input).value == "batch=4,8; channels-last=off,on"
        assert form.build_plan().sweep == SWEEP

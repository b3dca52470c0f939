"""Replaying recorded sessions through the live screen: rows, panels, and keys that do nothing live."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import pytest
from rich.console import RenderableType
from textual.app import App
from textual.screen import Screen
from textual.timer import Timer

from benchtui.app import BenchApp, make_app
from benchtui.core.store.session import load_session
from benchtui.screens.live import TICK_S, LiveScreen
from benchtui.widgets.comparison import BatchComparison
from benchtui.widgets.results_table import ResultsTable
from benchtui.widgets.telemetry import TelemetryPanel

DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny-cpu-session"  # a real run: torch and tf.keras, ResNet50, 32 px, CPU, no NVML
GPU = DATA / "gpu-session"  # hand-made: two GPUs (GPU 1 without power readings), tf.keras OOM


async def finished(pilot, app: BenchApp, timeout: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while app.replayer is None or app.replayer.status in ("pending", "running"):
        assert time.monotonic() < deadline, "replay did not finish"
        await pilot.pause(0.05)
    await pilot.pause()


class Wakeups:
    """Counts what an idle app must not do: run any timer's callback, or draw a frame."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.timers: list[str] = []
        self.frames = 0
        tick, display = Timer._tick, App._display

        async def counted_tick(timer: Timer, *, next_timer: float, count: int) -> None:
            self.timers.append(timer.name)
            await tick(timer, next_timer=next_timer, count=count)

        def counted_display(app: App, screen: Screen, renderable: RenderableType | None) -> None:
            self.frames += renderable is not None
            display(app, screen, renderable)

        monkeypatch.setattr(Timer, "_tick", counted_tick)
        monkeypatch.setattr(App, "_display", counted_display)

    async def over(self, seconds: float = 1.0) -> tuple[list[str], int]:
        """What happened in the next ``seconds``."""
        self.timers.clear()
        self.frames = 0
        await asyncio.sleep(seconds)
        return list(self.timers), self.frames


def cells(app: BenchApp, key: str) -> dict[str, str]:
    table = app.screen.query_one(ResultsTable)
    return {column: table.cell_text(key, column) for column in table.columns_shown}


@pytest.mark.asyncio
async def test_replay_renders_the_recorded_rows() -> None:
    app = make_app(replay=TINY, speed=math.inf)
    async with app.run_test(size=(120, 36)) as pilot:
        await finished(pilot, app)
        assert isinstance(app.screen, LiveScreen)
        torch = cells(app, "resnet50|torch")
        keras = cells(app, "resnet50|tensorflow")
        assert torch == {
            "model": "ResNet50",
            "framework": "PyTorch",
            "state": "done",
            "ips": "5.6",
            "batch": "1.431",
            "epoch": "2.942",
            "first": "3.031",
            "excl": "2.852",
            "build": "0.237",
            "peak": "1.1 GiB",
            "tflops": "–",  # recorded before runners counted FLOPs: no flops event, no figure
        }
        assert keras["state"] == "done" and keras["ips"] == "31.5" and keras["first"] == "16.25"
        comparison = app.screen.query_one(BatchComparison)
        assert comparison.model_id == "resnet50"
        # The verdict under the strips is the summary's, word for word, and it agrees with the table
        # above it: the ratio of the images/s the two rows show.
        (verdict,) = load_session(TINY).model.summary()["ratios"]
        *_, line, how = (strip.plain for strip in comparison._render_lines(200))
        assert line.startswith(verdict["text"] + " · from epoch times excluding the first")
        assert how == "PyTorch eager, 2 threads · tf.keras tf.function graph"  # what each side ran with
        assert verdict["text"].startswith("tf.keras 5.6") and 31.5 / 5.6 == pytest.approx(
            verdict["factor"], rel=0.01
        )
        panels = list(app.screen.query(TelemetryPanel))
        assert [p.gpu_index for p in panels] == [None]  # no NVML on the recording machine
        note = panels[0]._render_lines(100)[0].plain
        assert note.startswith("No GPU metrics (N/A): NVML unavailable")
        status = app.screen.query_one("#status").render().plain
        assert "Complete" in status and "2 of 2 runs ok" in status and "tiny-cpu-session" in status


@pytest.mark.asyncio
async def test_narrow_terminal_drops_three_columns_only() -> None:
    app = make_app(replay=TINY, speed=math.inf)
    async with app.run_test(size=(80, 24)) as pilot:
        await finished(pilot, app)
        table = app.screen.query_one(ResultsTable)
        assert not {"first", "build", "tflops"} & set(table.columns_shown)
        assert cells(app, "resnet50|tensorflow")["excl"] == "0.508"
        assert table.virtual_size.width <= 80


@pytest.mark.asyncio
async def test_gpu_panels_one_per_gpu_with_na_for_missing_metrics() -> None:
    app = make_app(replay=GPU, speed=math.inf)
    async with app.run_test(size=(160, 45)) as pilot:
        await finished(pilot, app)
        panels = list(app.screen.query(TelemetryPanel))
        assert [p.gpu_index for p in panels] == [0, 1]
        gpu1 = "\n".join(line.plain for line in panels[1]._render_lines(80))
        assert "power      N/A" in gpu1
        assert "NVIDIA H100" in str(panels[0].border_title)
        assert cells(app, "resnet50|tensorflow")["state"] == "failed"
        notes = app.screen.query_one("#notes").render().plain
        assert "out of memory" in notes


@pytest.mark.asyncio
async def test_live_only_keys_do_nothing_in_a_replay() -> None:
    app = make_app(replay=TINY, speed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        screen = app.screen
        assert screen.check_action("stop_run", ()) is None  # shown dimmed in the footer
        assert screen.check_action("skip_model", ()) is None
        await pilot.press("s", "k")
        assert isinstance(app.screen, LiveScreen)
        await pilot.press("p")  # pause applies to playback
        assert app.replayer is not None and app.replayer.paused
        played = app.replayer.model.events
        await pilot.pause(0.5)
        assert app.replayer.model.events == played
        await pilot.press("p")
        assert not app.replayer.paused
        await pilot.press("q")  # nothing runs in a replay: no question asked
    assert app.exit_code == 0


@pytest.mark.asyncio
async def test_replay_log_pane_shows_the_recorded_log() -> None:
    app = make_app(replay=TINY, speed=math.inf)
    async with app.run_test(size=(100, 30)) as pilot:
        await finished(pilot, app)
        await pilot.press("l")
        await pilot.pause()
        log = app.screen.query_one("#log")
        assert "002-tensorflow-resnet50-1" in str(log.border_title)
        assert any("tensorflow" in line.lower() or "cuda" in line.lower() for line in log.lines)


@pytest.mark.asyncio
async def test_a_finished_replay_sits_still_until_something_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle means idle: after ``--speed inf`` has played everything, no timer runs and nothing is
    drawn (the tick used to run four times a second for ever); a key or a resize wakes it."""
    app = make_app(replay=GPU, speed=math.inf)
    async with app.run_test(size=(120, 36)) as pilot:
        await finished(pilot, app)
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        await pilot.pause(3 * TICK_S)  # the tick that saw the end, and its timer's last wait
        wakeups = Wakeups(monkeypatch)
        assert await wakeups.over(1.0) == ([], 0)
        assert screen.asleep

        await pilot.press("l")  # the log pane: the tick reads the file, then sleeps again
        await pilot.pause(4 * TICK_S)
        log = screen.query_one("#log")
        assert log.display and log.lines and screen.asleep
        assert await wakeups.over(1.0) == ([], 0)

        await pilot.resize_terminal(90, 30)  # narrower than 100: the table drops three columns
        await pilot.pause(4 * TICK_S)
        assert "tflops" not in screen.query_one(ResultsTable).columns_shown
        assert screen.asleep
        assert await wakeups.over(1.0) == ([], 0)


@pytest.mark.asyncio
async def test_a_paused_replay_sits_still_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(replay=TINY, speed=1.0)  # about 50 recorded seconds: still playing when paused
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.5)
        screen = app.screen
        assert isinstance(screen, LiveScreen) and not screen.asleep  # playing: the tick keeps its rate
        await pilot.press("p")
        await pilot.pause(3 * TICK_S)
        wakeups = Wakeups(monkeypatch)
        assert await wakeups.over(1.0) == ([], 0)
        await pilot.press("p")
        timers, _ = await wakeups.over(1.0)
        assert len(timers) >= 2 and not screen.asleep  # ticking again as the replay goes on
        assert app.replayer is not None and not app.replayer.paused


@pytest.mark.asyncio
async def test_replay_of_a_folder_that_is_not_a_session_exits_2(tmp_path: Path) -> None:
    app = make_app(replay=tmp_path, speed=1.0)
    async with app.run_test() as pilot:
        await pilot.pause()
    assert app.return_code == 2


def test_views_colour_statuses_from_the_one_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """The results table and the headless progress lines take their colours from model/status.py's map."""
    from benchtui.core.model import status
    from benchtui.core.running import headless
    from benchtui.core.running.replay import replay_all
    from benchtui.widgets.results_table import cell_values

    monkeypatch.setitem(status.STATUS_STYLE, "done", "italic blue")
    monkeypatch.setitem(status.STATUS_STYLE, "ok", "underline")
    model = replay_all(TINY).model
    assert cell_values(model, "torch", "resnet50", {})["state"] == ("done", "italic blue")
    run_id = next(r for r, run in model.runs.items() if run.spec.framework == "torch")
    assert headless._run_line(model, run_id).startswith("[underline]")

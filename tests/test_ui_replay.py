"""Replaying recorded sessions through the live screen: rows, panels, and keys that do nothing live."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import RenderableType
from textual.app import App
from textual.screen import Screen
from textual.timer import Timer

from benchtui.app import BenchApp, make_app
from benchtui.core.model.session_model import SessionModel
from benchtui.core.store.session import load_session
from benchtui.screens.live import TICK_S, LiveScreen
from benchtui.widgets.comparison import MAX_STRIP_ROWS, BatchComparison
from benchtui.widgets.results_table import ResultsTable
from benchtui.widgets.spark import BARS
from benchtui.widgets.telemetry import TelemetryPanel

DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny-cpu-session"  # a real run: torch and tf.keras, ResNet50, 32 px, CPU, no NVML
GPU = DATA / "gpu-session"  # hand-made: two GPUs (GPU 1 without power readings), tf.keras OOM


async def finished(pilot, app: BenchApp, timeout: float = 30.0) -> None:
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
        # The answer first: the verdict above the table, in the same words.
        answer = app.screen.query_one("#answer")
        assert answer.display and answer.region.y < app.screen.query_one(ResultsTable).region.y
        text = " ".join(line.plain for line in answer.content.renderables)
        assert "The answer" in text and f"ResNet50: {verdict['text']}" in text, text


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
    """Stop and skip are not offered in a replay (no runner): not in the footer, not in the palette."""
    app = make_app(replay=TINY, speed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        screen = app.screen
        assert app.replayer is not None and app.replayer.status == "running"
        assert screen.check_action("stop_run", ()) is False
        assert screen.check_action("skip_model", ()) is False
        footer = {b.binding.id for b in app.active_bindings.values()}  # dimmed ones too
        assert not {"stop-run", "skip-model"} & footer and "pause-queue" in footer
        titles = [c.title for c in app.get_system_commands(screen)]
        assert "Pause the queue" in titles and "Stop the current run" not in titles
        assert screen.check_action("back", ()) is False  # opened from the command line: nothing to go back to
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


# -- the comparison strips: every run of the model, the whole width ---------------------------------
def paused_when(monkeypatch: pytest.MonkeyPatch, moment: Callable[[SessionModel], bool]) -> None:
    """Replays stop (paused) at the first event after which ``moment`` holds: a session caught mid-plan,
    deterministically."""
    from benchtui.core.running.replay import Replayer

    apply = Replayer._apply

    def _apply(self: Replayer, event: dict) -> None:
        apply(self, event)
        if not self.paused and moment(self.model):
            self.pause()

    monkeypatch.setattr(Replayer, "_apply", _apply)


async def until_paused(pilot, app: BenchApp) -> None:
    deadline = time.monotonic() + 30
    while app.replayer is None or not app.replayer.paused:
        assert time.monotonic() < deadline, "replay did not pause"
        await pilot.pause(0.05)
    await pilot.pause(3 * TICK_S)


def strip_lines(comparison: BatchComparison, width: int) -> list[str]:
    """The lines of the strips as drawn at ``width`` (the verdict and settings lines left out)."""
    lines = [line.plain for line in comparison._render_lines(width)]
    return lines[: -2 if comparison.series and lines[-1].startswith("PyTorch") else -1]


@pytest.mark.asyncio
async def test_the_strips_show_every_run_of_the_model_across_the_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionfactory import make_session

    path = make_session(tmp_path, runs=3, epochs=2, steps=8, name="three")
    # torch r1 and tf.keras r1 done, torch r2 halfway through its 16 batches
    paused_when(monkeypatch, lambda model: len(model.runs["003-torch-resnet50-2"].batch_seconds) == 8)
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_paused(pilot, app)
        comparison = app.screen.query_one(BatchComparison)
        assert {fw: [s.run.spec.index for s in runs] for fw, runs in comparison.strips.items()} == {
            "torch": [1, 2, 3],
            "tensorflow": [1, 2, 3],
        }
        comparison.room = None  # one line a strip, as on a screen without room to spare
        lines = strip_lines(comparison, 70)
        assert [line[:21].rstrip() for line in lines] == [
            "PyTorch  r1 median 0.",
            "         r2 median 0.",
            "         r3 queued",
            "tf.keras r1 median 0.",
            "         r2 queued",
            "         r3 queued",
        ]
        # A finished run spans the whole width; the running one, 8 of its 16 batches in, half of it.
        assert len(lines[0]) == 70 and len(lines[3]) == 70
        start = len("PyTorch  r1 median 0.045 s ")
        assert len(comparison.strips["torch"][1].seconds) == 8
        assert len(lines[1]) - start == round((70 - start) / 2)
        status = app.screen.query_one("#status").render().plain
        assert "ETA: " in status and "left" in status


@pytest.mark.asyncio
async def test_many_runs_stand_side_by_side_on_a_line_per_framework(tmp_path: Path) -> None:
    from sessionfactory import make_session

    path = make_session(tmp_path, runs=6, epochs=2, steps=4, name="six")
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(80, 24)) as pilot:
        await finished(pilot, app)
        comparison = app.screen.query_one(BatchComparison)
        assert comparison.side_by_side
        comparison.room = None
        lines = strip_lines(comparison, 78)
        assert (
            len(lines) == 2
            and lines[0].startswith("PyTorch  r1–r6 median 0.")
            and lines[1].startswith("tf.keras")
        )
        assert all(line.count("│") == 5 for line in lines)  # six runs, five separators


@pytest.mark.asyncio
async def test_strips_grow_into_the_room_the_screen_has() -> None:
    """At 120x35 a two-run session leaves room beside the telemetry: each strip is drawn its most lines high,
    and the body still needs no scrolling; at 80x24 the GPU panels below take all the room: one line each."""
    seen = {}
    for path, size in ((TINY, (120, 35)), (GPU, (80, 24))):
        app = make_app(replay=path, speed=math.inf)
        async with app.run_test(size=size) as pilot:
            await finished(pilot, app)
            await pilot.pause(2 * TICK_S)
            comparison = app.screen.query_one(BatchComparison)
            strips = [line.plain for line in comparison._render_lines()][: 2 * MAX_STRIP_ROWS]
            seen[size] = (comparison.room, strips, app.screen.query_one("#body").max_scroll_y)
    room, strips, scroll = seen[(120, 35)]
    assert room is not None and room > 10 and scroll == 0
    assert [line.split()[0] for line in strips[MAX_STRIP_ROWS - 1 :: MAX_STRIP_ROWS]] == [
        "PyTorch",
        "tf.keras",
    ]  # words on a strip's last line
    assert "█" in strips[0] and set(strips[0]) <= {" ", *BARS}  # the first batches' tops
    room, strips, _ = seen[(80, 24)]
    assert room is None and strips[0].startswith("PyTorch") and strips[1].startswith("tf.keras")


# -- the plan's ETA ------------------------------------------------------------------------------------
def test_the_eta_comes_from_the_finished_runs_of_each_kind(tmp_path: Path) -> None:
    """A GPU session (no plan estimate): each run to come takes as long as its cell's finished runs."""
    from benchtui.core.model.eta import Eta, clock, plan_eta
    from benchtui.core.running.replay import Replayer
    from benchtui.screens.live import eta_text
    from sessionfactory import make_session, read_events

    path = make_session(tmp_path, runs=2, epochs=2, steps=4)  # torch r1, tf r1, torch r2, tf r2
    model = Replayer(path).model
    runs = {(r.spec.framework, r.spec.index): r for r in model.runs.values()}
    events = list(read_events(path))

    def play_until(done: list[tuple[str, int]]) -> float:
        """Apply events until these runs have ended; the last event's time."""
        t = 0.0
        while not all(runs[k].finished for k in done):
            event = events.pop(0)
            model.apply(event)
            t = event.get("t", t)
        return t

    assert eta_text(model, None) == "ETA: after the first run"
    now = play_until([("torch", 1)])
    torch_s = runs["torch", 1].ended_t - runs["torch", 1].started_t  # type: ignore[operator]
    assert plan_eta(model, now) == Eta(
        pytest.approx(torch_s), unknown=2
    )  # torch r2 known; tf.keras r1, r2 not
    assert eta_text(model, now) == f"ETA: over {clock(torch_s)} left (2 runs not timed yet)"
    now = play_until([("tensorflow", 1)])
    keras_s = runs["tensorflow", 1].ended_t - runs["tensorflow", 1].started_t  # type: ignore[operator]
    assert plan_eta(model, now) == Eta(pytest.approx(torch_s + keras_s))
    while runs["torch", 2].started_t is None:
        model.apply(events.pop(0))
    into = 0.5 * torch_s  # halfway through torch r2 (still building): half of it is left
    assert plan_eta(model, runs["torch", 2].started_t + into) == Eta(pytest.approx(torch_s - into + keras_s))
    assert (
        eta_text(model, runs["torch", 2].started_t + into) == f"ETA: {clock(torch_s - into + keras_s)} left"
    )


@pytest.mark.asyncio
async def test_a_finished_session_shows_no_eta() -> None:
    app = make_app(replay=TINY, speed=math.inf)
    async with app.run_test(size=(120, 36)) as pilot:
        await finished(pilot, app)
        assert "ETA" not in app.screen.query_one("#status").render().plain


# -- screenshots ---------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_palette_screenshot_goes_into_the_session_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ~/Downloads needed: the SVG lands in the replayed session's folder, and the notice gives its path."""
    import shutil

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a home without Downloads
    session = tmp_path / "tiny"
    shutil.copytree(TINY, session)
    app = make_app(replay=session, speed=math.inf, sessions_dir=str(tmp_path / "sessions"))
    async with app.run_test(size=(80, 24)) as pilot:
        await finished(pilot, app)
        app.clear_notifications()
        (command,) = [c for c in app.get_system_commands(app.screen) if c.title == "Screenshot"]
        command.callback()
        await pilot.pause(0.4)  # Textual's command waits 0.1 s for the palette to close
        (svg,) = session.glob("*.svg")
        assert "<svg" in svg.read_text()
        assert [n.message for n in app._notifications] == [f"Screenshot saved: {svg.resolve()}"]
    assert not (tmp_path / "home").exists()


@pytest.mark.asyncio
async def test_a_screenshot_without_a_session_goes_into_the_sessions_folder(tmp_path: Path) -> None:
    from benchtui.screens.plan import GpuProbe

    app = make_app(None, sessions_dir=str(tmp_path / "sessions"), probe=GpuProbe((), "test"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        written = app.deliver_screenshot()
        assert written is not None and Path(written).parent == (tmp_path / "sessions").resolve()
        # A folder that cannot be written is said, in one line, and nothing else happens.
        app.sessions_dir = str(tmp_path / "a-file")
        (tmp_path / "a-file").write_text("")
        assert app.deliver_screenshot() is None
        await pilot.pause()
        assert "No screenshot: cannot write in" in list(app._notifications)[-1].message


# -- the results table's throughput: finished runs, a run going on marked as such (issue 30) -----------
def test_images_per_s_is_the_finished_runs_and_a_live_rate_is_marked_now(tmp_path: Path) -> None:
    """The table's img/s is the finished runs' figure (the one the answer above it compares); a run going
    on adds its current rate as "now …", never in place of it."""
    from benchtui.core import fmt
    from benchtui.core.running.replay import Replayer
    from benchtui.widgets.results_table import cell_values
    from sessionfactory import make_session, read_events

    path = make_session(tmp_path, runs=2, epochs=2, steps=20)  # torch r1, tf r1, torch r2, tf r2
    model = Replayer(path).model
    runs = {(r.spec.framework, r.spec.index): r for r in model.runs.values()}
    events = iter(read_events(path))
    while len(runs["torch", 1].batch_seconds) < 10:  # the first run, halfway: nothing finished yet
        model.apply(next(events))
    first = cell_values(model, "torch", "resnet50", {})["ips"]
    assert first[0].startswith("now ") and first[1] == "cyan"
    while len(runs["torch", 2].batch_seconds) < 10:  # the second run of PyTorch, halfway
        model.apply(next(events))
    finished = fmt.rate(model.row("torch", "resnet50").images_per_s)
    text, style = cell_values(model, "torch", "resnet50", {})["ips"]
    assert text.startswith(f"{finished} · now ") and text != f"{finished} · now {finished}" and style == ""
    assert cell_values(model, "torch", "resnet50", {}, compact=True)["ips"] == (finished, "")
    # The answer above the table is the same finished runs' ratio.
    from benchtui.core.model.session_model import model_verdicts

    verdict = model_verdicts(model, "resnet50")[0][0]
    keras = model.row("tensorflow", "resnet50").images_per_s
    assert verdict.ratio == pytest.approx(model.row("torch", "resnet50").images_per_s / keras, rel=1e-6) or (
        verdict.ratio == pytest.approx(keras / model.row("torch", "resnet50").images_per_s, rel=1e-6)
    )


# -- the log pane wraps (issue 30) ------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_log_pane_wraps_long_lines_to_its_width_and_again_when_it_changes(tmp_path: Path) -> None:
    from rich.cells import cell_len
    from textual.app import ComposeResult

    from benchtui.widgets.log_pane import INDENT, RunLog

    long = 'File "/site-packages/tensorflow/python/eager/execute.py", line 53, in quick_execute: ' + "x" * 90
    log = tmp_path / "run.log"
    log.write_text(f"epoch 1\n{long}\nepoch 2\n")

    class LogApp(App[None]):
        def compose(self) -> ComposeResult:
            yield RunLog()

    app = LogApp()
    async with app.run_test(size=(60, 20)) as pilot:
        pane = app.query_one(RunLog)
        pane.follow(log, "run")
        pane.poll()
        await pilot.pause()
        width = pane.scrollable_content_region.width
        lines = list(pane.lines)
        assert lines[0] == "epoch 1" and lines[-1] == "epoch 2" and len(lines) > 3
        assert all(cell_len(line) <= width for line in lines), (width, lines)
        assert all(line.startswith(INDENT) for line in lines[2:-1])  # continuations read as one line
        assert "".join(line.strip() for line in lines[1:-1]).replace(" ", "") == long.replace(" ", "")
        assert pane.virtual_size.width <= pane.scrollable_content_region.width  # no sideways scroll
        await pilot.resize_terminal(100, 20)
        await pilot.pause()
        wider = list(pane.lines)
        assert len(wider) < len(lines) and all(
            cell_len(line) <= pane.scrollable_content_region.width for line in wider
        )


# -- a verdict the machine may have decided claims no winner in the app (issue 30) ------------------
@pytest.mark.asyncio
async def test_unreliable_verdicts_read_as_warnings_and_about_the_same_as_neutral(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The verdicts as model_verdicts gives them (the contract's keys): "unreliable: …" in the warning
    colour, "about the same" plain, never bold like a winner; the table marks no side."""
    from rich.console import Group
    from rich.text import Text

    from benchtui.core.model.cell import FrameworkRatio
    from benchtui.screens import live
    from benchtui.widgets import comparison
    from benchtui.widgets.comparison import verdict_style

    unreliable_entry = {
        "text": "unreliable: other processes kept 1.6 of 2 cores busy during PyTorch's runs; measured, not a "
        "verdict: PyTorch 1.65× faster than tf.keras",
        "unreliable": "other processes kept 1.6 of 2 cores busy during PyTorch's runs",
        "about_same": False,
        "significant": True,
        "faster_framework": None,
        "basis_label": "epoch times",
    }
    same_entry = dict(
        unreliable_entry,
        text="PyTorch and tf.keras about the same (1.00×, 95% CI 0.97–1.03)",
        unreliable=None,
    )
    same_entry["about_same"] = True
    unreliable, same = FrameworkRatio.from_json(unreliable_entry), FrameworkRatio.from_json(same_entry)
    shown: list[FrameworkRatio] = [unreliable]
    fake = lambda model, model_id, point=None: (list(shown), [])  # noqa: E731
    monkeypatch.setattr(live, "model_verdicts", fake)
    monkeypatch.setattr(comparison, "model_verdicts", fake)
    assert verdict_style(unreliable) == "bold yellow" and verdict_style(same) == ""
    old = FrameworkRatio.from_json  # an old session's verdict
    assert verdict_style(old({"text": "x", "significant": True})) == "bold"
    assert verdict_style(old({"text": "x", "significant": False})) == "dim"

    def answer_line(app: BenchApp) -> Text:
        group = app.screen.query_one("#answer").content
        assert isinstance(group, Group)
        return group.renderables[1]  # type: ignore[return-value]

    for verdict, style in ((unreliable, "bold yellow"), (same, "")):
        shown[:] = [verdict]
        app = make_app(replay=TINY, speed=math.inf)
        async with app.run_test(size=(120, 35)) as pilot:
            await finished(pilot, app)
            await pilot.pause(2 * TICK_S)
            line = answer_line(app)
            assert line.plain == f"ResNet50: {verdict.text}"
            assert [s.style for s in line.spans if s.start >= len("ResNet50: ")] == ([style] if style else [])
            ratio = app.screen.query_one(BatchComparison)
            assert verdict.text in "".join(t.plain for t in ratio._render_lines())
            table = app.screen.query_one(ResultsTable)
            assert {table._shown[k]["ips"][1] for k in table._shown} == {""}  # no side stands out


@pytest.mark.asyncio
async def test_the_how_line_under_the_strips_wraps_whole_at_120_columns() -> None:
    """Beside the telemetry (120 columns) the comparison is half the screen: the line that says how each
    framework ran (compile mode, threads, waits) wraps there, never cut with an ellipsis."""
    from benchtui.widgets.comparison import settings_line

    app = make_app(replay=TINY, speed=math.inf)
    async with app.run_test(size=(120, 35)) as pilot:
        await finished(pilot, app)
        for run in app.replayer.model.runs.values():  # type: ignore[union-attr]
            settings = run.hello.setdefault("settings", {})
            settings["compile"] = "a graph traced once, with its own thread pools and no XLA, as its default"
            settings["host_sync_per_step"] = True
        widget = app.screen.query_one(BatchComparison)
        widget.update_from(app.replayer.model)  # type: ignore[union-attr]
        await pilot.pause(2 * TICK_S)
        how = settings_line(widget.series).plain
        assert widget.size.width < len(how)  # half the screen: it has to wrap
        shown = [
            line.plain
            for text in widget._render_lines(widget.size.width)
            for line in text.wrap(app.console, widget.size.width)
        ]
        assert "…" not in "".join(shown)
        assert " ".join(s.strip() for s in shown).endswith(how)
        assert widget.size.height >= len(shown)  # every wrapped line has its row

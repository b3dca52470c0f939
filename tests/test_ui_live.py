"""The live screen driving real engines: keys do what the footer says, quitting leaves no process.

Most tests use tests/data/fake_runner.py (the wire format without a framework, fast);
the slow test starts real PyTorch and tf.keras runners from the plan screen.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchtui.app import BenchApp
from benchtui.core.plan.plan import Plan
from benchtui.screens.confirm import ConfirmScreen
from benchtui.screens.live import TICK_S, LiveScreen
from benchtui.screens.plan import PlanScreen
from benchtui.widgets.results_table import ResultsTable
from support import FakeLauncher, QuietApp, small_plan
from test_ui_replay import Wakeups


def tiny_plan(**overrides: Any) -> Plan:
    return small_plan(**{"epochs": 2, "runs": 1, "device": "cpu", **overrides})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def wait_for(pilot, predicate, timeout: float = 60.0, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(step)


def state(app: BenchApp, framework: str, model: str = "resnet50") -> str:
    return app.screen.query_one(ResultsTable).cell_text(f"{model}|{framework}", "state")


def runner_pids(app: BenchApp) -> list[int]:
    """Runner pids and their grandchildren's, from the hello events."""
    assert app.engine is not None
    pids = []
    for run in app.engine.model.runs.values():
        if run.hello.get("pid"):
            pids.append(run.hello["pid"])
        if run.hello.get("child_pid"):
            pids.append(run.hello["child_pid"])
    return pids


@pytest.fixture(autouse=True)
def _no_runner_left_behind(tmp_path: Path):  # a fixture
    """After each test, every runner (and grandchild) recorded in its sessions is gone."""
    yield
    pids: set[int] = set()
    for events in tmp_path.glob("*/events.jsonl"):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            for key in ("pid", "child_pid"):
                if event.get("type") in ("run_start", "hello") and isinstance(event.get(key), int):
                    pids.add(event[key])
    deadline = time.monotonic() + 5
    while [p for p in pids if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for pid in left:  # do not leave them to the next test either
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"runner processes left behind: {left}"


def session_meta(app: BenchApp) -> dict:
    assert app.session_path is not None
    return json.loads((app.session_path / "session.json").read_text())


@pytest.mark.asyncio
async def test_stop_key_stops_the_run_and_the_queue_goes_on(quiet_app: QuietApp) -> None:
    app = quiet_app(tiny_plan(samples=800), runner=("--batch-s", "0.05", "--child"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        assert app.screen.check_action("stop_run", ()) is True
        pids = runner_pids(app)
        await pilot.press("s")
        await wait_for(pilot, lambda: state(app, "torch") == "stopped", timeout=20)
        assert not [p for p in pids if alive(p)], "the stopped runner's process group is gone"
        await wait_for(pilot, lambda: state(app, "tensorflow").startswith("epoch"), timeout=20)
        await pilot.press("s")
        await wait_for(pilot, lambda: not app.runs_going, timeout=20)
        assert (
            app.session_status == "incomplete"
        )  # stopped runs are not failures, but not a whole plan either
        statuses = [r.status for r in app.engine.model.runs.values()]  # type: ignore[union-attr]
        assert statuses == ["stopped", "stopped"]
        await pilot.press("q")  # nothing running: quits without asking
    assert app.exit_code == 1  # like the headless run: a plan not carried out whole is not a success


@pytest.mark.asyncio
async def test_skip_key_skips_the_rest_of_the_model(quiet_app: QuietApp) -> None:
    plan = tiny_plan(
        models=["resnet50", "densenet121"], runs=2, samples=800, batch_sizes={"resnet50": 8, "densenet121": 8}
    )
    app = quiet_app(plan, runner=("--batch-s", "0.02"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        await pilot.press("k")
        await wait_for(
            pilot,
            lambda: (
                app.engine.model.current is not None  # type: ignore[union-attr]
                and "densenet121" in app.engine.model.current
            ),
            timeout=20,
        )  # type: ignore[union-attr, operator]
        runs = app.engine.model.runs  # type: ignore[union-attr]
        resnet = [r.status for r in runs.values() if r.spec.model == "resnet50"]
        assert resnet == ["stopped", "skipped", "skipped", "skipped"]
        await wait_for(pilot, lambda: state(app, "torch") == "stopped", timeout=5)
        assert state(app, "tensorflow") == "skipped"
        app.engine.cancel()  # type: ignore[union-attr]
        await wait_for(pilot, lambda: not app.runs_going, timeout=20)


@pytest.mark.asyncio
async def test_pause_holds_the_queue_until_resume(quiet_app: QuietApp) -> None:
    app = quiet_app(tiny_plan(samples=400), runner=("--batch-s", "0.02"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        await pilot.press("p")
        assert app.engine.paused  # type: ignore[union-attr]
        await wait_for(pilot, lambda: state(app, "torch") == "done", timeout=60)
        await pilot.pause(0.5)
        assert state(app, "tensorflow") == "queued"  # held between runs
        assert app.screen.check_action("resume", ()) is True
        assert app.screen.check_action("pause", ()) is False
        await pilot.press("p")
        await wait_for(pilot, lambda: not app.runs_going, timeout=60)
        await pilot.pause()
        assert state(app, "tensorflow") == "done"


@pytest.mark.asyncio
async def test_quit_asks_first_then_stops_the_process_group(quiet_app: QuietApp) -> None:
    app = quiet_app(tiny_plan(samples=8000), runner=("--batch-s", "0.05", "--child"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        await wait_for(pilot, lambda: len(runner_pids(app)) == 2)
        pids = runner_pids(app)
        await pilot.press("q")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # keep running
        await pilot.pause(0.2)
        assert isinstance(app.screen, LiveScreen) and app.runs_going
        await pilot.press("q")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=20)
    assert app.exit_code == 130
    assert not [p for p in pids if alive(p)], "runner and its child are gone"
    meta = session_meta(app)
    assert meta["status"] == "interrupted"
    events = (app.session_path / "events.jsonl").read_text().splitlines()  # type: ignore[operator]
    assert any('"type":"batch"' in line for line in events), "what was recorded is kept"
    assert (app.session_path / "summary.json").is_file()  # type: ignore[operator]


@pytest.mark.asyncio
async def test_ctrl_c_interrupts_at_once(quiet_app: QuietApp) -> None:
    app = quiet_app(tiny_plan(samples=8000), runner=("--batch-s", "0.05", "--child"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(runner_pids(app)) == 2)
        pids = runner_pids(app)
        started = time.monotonic()
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, timeout=20)
        took = time.monotonic() - started
    assert app.exit_code == 130
    assert took < 10, f"quitting took {took:.1f} s"
    assert not [p for p in pids if alive(p)]
    assert session_meta(app)["status"] == "interrupted"


@pytest.mark.asyncio
async def test_footer_keys_palette_and_log(quiet_app: QuietApp) -> None:
    app = quiet_app(tiny_plan(samples=400), runner=("--batch-s", "0.05"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        screen = app.screen
        ids = {b.binding.id for b in screen.active_bindings.values()}
        assert {"stop-run", "skip-model", "pause-queue", "toggle-log", "export-md", "quit"} <= ids
        titles = [c.title for c in app.get_system_commands(screen)]
        assert "Stop the current run" in titles and "Skip the current model" in titles
        await pilot.press("l")
        log = screen.query_one("#log")
        assert log.display
        await wait_for(pilot, lambda: "fake runner" in "\n".join(log.lines), timeout=20)
        await pilot.press("l")
        assert not log.display
        app.engine.cancel()  # type: ignore[union-attr]
        await wait_for(pilot, lambda: not app.runs_going, timeout=20)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Stop the current run" not in titles and "New plan" in titles


@pytest.mark.asyncio
async def test_export_writes_markdown_into_the_session(quiet_app: QuietApp) -> None:
    app = quiet_app(tiny_plan(), runner=("--batch-s", "0.0"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: not app.runs_going, timeout=30)
        await pilot.press("e")  # asks for the format; Markdown is the first choice
        await pilot.pause()
        await pilot.press("enter")
        target = app.session_path / "summary.md"  # type: ignore[operator]
        await wait_for(pilot, target.exists, timeout=30)
        assert "ResNet50" in target.read_text()


@pytest.mark.asyncio
async def test_plan_screen_ctrl_r_starts_the_plan(quiet_app: QuietApp) -> None:
    app = quiet_app(runner=("--batch-s", "0.0"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        await pilot.press("ctrl+r")  # the quick preset, as it is
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        await wait_for(pilot, lambda: not app.runs_going, timeout=60)
        assert app.session_status == "complete"
        assert (
            state(app, "torch", "resnet50_v1_5") == "done"
            and state(app, "tensorflow", "resnet50_v1_5") == "done"
        )


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_tiny_cpu_run_from_the_plan_screen(quiet_app: QuietApp) -> None:
    """Real PyTorch and tf.keras runners, started from the plan screen, both reach "done"."""
    app = quiet_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        for field, value in (
            ("image_size", "32"),
            ("samples", "16"),
            ("epochs", "2"),
            ("runs", "1"),
            ("bs-resnet50_v1_5", "8"),
        ):
            screen.query_one(f"#{field}").value = value
        screen.query_one("#device").value = "cpu"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        await wait_for(pilot, lambda: not app.runs_going, timeout=600, step=0.5)
        assert state(app, "torch", "resnet50_v1_5") == "done", app.engine.model.runs  # type: ignore[union-attr]
        assert state(app, "tensorflow", "resnet50_v1_5") == "done"
        table = app.screen.query_one(ResultsTable)
        for fw in ("torch", "tensorflow"):
            assert table.cell_text(f"resnet50_v1_5|{fw}", "ips") not in ("–", "")
        pids = runner_pids(app)
        await pilot.press("q")
    assert app.exit_code == 0
    assert not [p for p in pids if alive(p)]
    meta = json.loads((app.session_path / "session.json").read_text())  # type: ignore[operator]
    assert meta["status"] == "complete" and meta["plan"]["image_size"] == 32


def test_parent_never_imports_a_framework() -> None:
    """Building the app and its screens must not pull in torch, tensorflow, keras or jax."""
    import subprocess

    code = (
        "import sys, benchtui.app, benchtui.screens.live, benchtui.screens.plan, benchtui.core.running.replay, benchtui.core.running.engine;"
        "bad = [m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent.parent
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.asyncio
async def test_an_app_exit_mid_run_still_stops_the_runner_and_marks_interrupted(quiet_app: QuietApp) -> None:
    """Leaving by another path than quit (an error, app.exit) must not leave a runner behind."""
    app = quiet_app(tiny_plan(samples=8000), runner=("--batch-s", "0.05", "--child"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(runner_pids(app)) == 2)
        pids = runner_pids(app)
        app.exit(0)
        await pilot.pause(0.1)
    deadline = time.monotonic() + 10
    while [p for p in pids if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]
    assert session_meta(app)["status"] == "interrupted"


@pytest.mark.asyncio
async def test_the_plan_screen_asks_to_start_and_the_live_screen_asks_for_a_new_plan(
    tmp_path: Path, quiet_app: QuietApp
) -> None:
    """Screens post messages; the app starts the plan on one and shows the plan screen on the other."""
    from textual.message import Message

    posted: list[Message] = []
    plan = tiny_plan(frameworks=["torch"], image_size=40)
    app = quiet_app(plan, runner=("--batch-s", "0.0"), autostart=False)
    async with app.run_test(size=(100, 30), message_hook=posted.append) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        # One message (the hook sees it at each hop as it bubbles up to the app)
        started = list({id(m): m for m in posted if isinstance(m, PlanScreen.StartRequested)}.values())
        assert (
            len(started) == 1 and started[0].plan.frameworks == ["torch"] and started[0].plan.image_size == 40
        )
        assert app.engine is not None and app.screen.source is app.engine
        await wait_for(pilot, lambda: not app.runs_going, timeout=30)
        await pilot.pause()
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        asked = {id(m): m for m in posted if isinstance(m, LiveScreen.NewPlanRequested)}
        assert [m.plan for m in asked.values()] == [app.engine.model.plan]
        again = app.screen.build_plan()
        assert again.frameworks == ["torch"] and again.image_size == 40  # the form is the session's plan
    assert len(list(tmp_path.iterdir())) == 1  # one session: the new plan has not started


@pytest.mark.asyncio
async def test_the_tick_keeps_its_rate_during_a_run_and_sleeps_once_the_session_ends(
    monkeypatch: pytest.MonkeyPatch, quiet_app: QuietApp
) -> None:
    app = quiet_app(tiny_plan(samples=400), runner=("--batch-s", "0.02"))
    async with app.run_test(size=(120, 36)) as pilot:
        wakeups = Wakeups(monkeypatch)
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        timers, _ = await wakeups.over(4 * TICK_S)
        assert timers.count("live-tick") >= 2 and not screen.asleep
        await wait_for(pilot, lambda: not app.runs_going, timeout=60)
        await pilot.pause(3 * TICK_S)
        assert state(app, "tensorflow") == "done"
        assert await wakeups.over(1.0) == ([], 0)  # the finished screen: no timer, no frame
        assert screen.asleep


async def settled(wakeups: Wakeups, timeout: float = 10.0) -> None:
    """Until a 0.3 s stretch with no timer and no frame: what a change draws is drawn (on a loaded
    machine, later than a fixed pause allowed). A timer that keeps running never settles, or shows
    in the second that follows."""
    deadline = time.monotonic() + timeout
    while await wakeups.over(0.3) != ([], 0):
        assert time.monotonic() < deadline, "the app never sat still"


@pytest.mark.asyncio
async def test_the_plan_screen_sits_still_even_with_a_field_focused(
    monkeypatch: pytest.MonkeyPatch, quiet_app: QuietApp
) -> None:
    """No timer runs and nothing is drawn while the form waits: a number field's cursor does not blink."""
    from textual.widgets import Input

    app = quiet_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        wakeups = Wakeups(monkeypatch)
        await settled(wakeups)
        assert await wakeups.over(1.0) == ([], 0)  # at start-up: the model list has the focus
        field = app.screen.query_one("#epochs", Input)
        field.focus()
        await settled(wakeups)
        assert field.has_focus
        assert await wakeups.over(1.0) == ([], 0)
        await pilot.press("backspace", "4")
        assert field.value == "4"


def test_the_app_and_the_headless_run_start_a_session_the_same_way(
    tmp_path: Path, quiet_app: QuietApp
) -> None:
    """Both go through start_session: the same folder layout, session.json fields, events and exit code.

    The plan's one cell is unavailable (no PNASNet in Keras), so no framework starts.
    """
    import asyncio

    from benchtui.core.running.headless import run_headless
    from benchtui.core.store.session import SessionWriter

    plan = tiny_plan(
        frameworks=["tensorflow"],
        models=["pnasnet_large"],
        image_size=64,
        samples=8,
        batch_sizes={"pnasnet_large": 4},
        epochs=1,
    ).validate()
    headless_code = run_headless(plan, SessionWriter.create(plan, tmp_path / "headless"), use_nvml=False)

    app = quiet_app(plan, sessions_dir=tmp_path / "app")

    async def in_the_app() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.engine is not None and not app.runs_going, timeout=30)
            await pilot.press("q")

    asyncio.run(in_the_app())
    assert headless_code == app.exit_code == 0

    def layout(root: Path) -> tuple[Any, ...]:
        (folder,) = root.iterdir()
        files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
        meta = json.loads((folder / "session.json").read_text())
        events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
        kinds = [(e["type"], e.get("run"), e.get("status")) for e in events if e["type"] != "gpu"]
        return files, sorted(meta), meta["status"], meta["telemetry"], meta["placement"], kinds

    assert layout(tmp_path / "headless") == layout(tmp_path / "app")
    assert layout(tmp_path / "app")[2] == "complete"


def test_exit_codes_and_the_pieces_start_session_wires(tmp_path: Path) -> None:
    from benchtui.core.model.status import SessionStatus
    from benchtui.core.running.session_run import exit_code, start_session
    from benchtui.core.store.session import SessionWriter

    assert [exit_code(s) for s in ("complete", "failed", "incomplete", "interrupted", "running")] == [
        0,
        1,
        1,
        130,
        1,
    ]
    assert exit_code(SessionStatus.INTERRUPTED) == 130
    plan = tiny_plan()
    launcher = FakeLauncher()
    session = start_session(plan, tmp_path, use_nvml=False, listener=print, launcher=launcher)
    assert session.path.parent == tmp_path and (session.path / "logs").is_dir()
    assert session.engine.writer is session.writer and session.engine.sampler is session.sampler
    assert session.engine.launcher is launcher and session.engine.listener is print
    session.writer.close()
    writer = SessionWriter.create(plan, tmp_path / "given")
    assert (
        start_session(plan, writer=writer, use_nvml=False).writer is writer
    )  # headless: the CLI made the folder
    writer.close()


@pytest.mark.parametrize("hang_up", [True, False])
def test_signals_stop_the_session_and_a_hang_up_has_its_own_handler(hang_up: bool) -> None:
    """SIGINT and SIGTERM call stop; SIGHUP calls hang_up (the app's) or stop (the headless run's)."""
    import asyncio

    from benchtui.core.running.session_run import stop_on_signals

    calls: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop_on_signals(
            loop, lambda: calls.append("stop"), hang_up=(lambda: calls.append("hang up")) if hang_up else None
        )
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            os.kill(os.getpid(), sig)
            for _ in range(50):
                await asyncio.sleep(0.01)
                if len(calls) == [signal.SIGINT, signal.SIGTERM, signal.SIGHUP].index(sig) + 1:
                    break

    asyncio.run(main())
    assert calls == ["stop", "stop", "hang up" if hang_up else "stop"]


def eta_line(app: BenchApp) -> str:
    return app.screen.query_one("#status").render().plain.splitlines()[1].split(" · ")[0]


@pytest.mark.asyncio
async def test_the_eta_has_a_figure_before_the_first_run_ends_and_keeps_moving(quiet_app: QuietApp) -> None:
    """On a CPU the plan's estimate (estimate.cpu_seconds of each cell, on the plan's threads) is the first
    figure, said as such; it counts down with the clock, not only when an event comes."""
    from benchtui.core.model import eta
    from benchtui.core.plan.estimate import cpu_seconds

    plan = tiny_plan(samples=8000, threads=1)
    app = quiet_app(plan, runner=("--batch-s", "0.05"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.engine is not None and app.engine.model.current is not None)
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        assert screen.prior() == eta.prior_seconds(plan, 1)
        assert sum(screen.prior().values()) == pytest.approx(cpu_seconds(plan, 1))  # type: ignore[union-attr]
        await wait_for(pilot, lambda: "estimate" in eta_line(app), timeout=10)
        assert eta_line(app).startswith("ETA: about ") and eta_line(app).endswith(
            "left (the plan's estimate)"
        )
        seen = {eta_line(app)}
        for _ in range(6):  # the line moves within a few seconds: no event is needed for it to count down
            await pilot.pause(0.5)
            seen.add(eta_line(app))
        assert len(seen) > 1
        assert all(r.status != "ok" for r in app.engine.model.runs.values())  # type: ignore[union-attr]
        app.engine.cancel()  # type: ignore[union-attr]
        await wait_for(pilot, lambda: not app.runs_going, timeout=20)


@pytest.mark.asyncio
async def test_without_threads_the_eta_is_estimated_on_the_idle_cores_measured_before_the_plan(
    quiet_app: QuietApp,
) -> None:
    """The plan screen words the quick preset on the idle cores; the live ETA's first figure uses the idle
    cores the engine measured before the first run (session.json's cpu_threads), not the host's count."""
    from benchtui.core.model import eta

    plan = tiny_plan(samples=8000)
    app = quiet_app(plan, runner=("--batch-s", "0.05"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen) and "cpu_threads" in app.screen.meta)
        screen = app.screen
        assert isinstance(screen, LiveScreen)
        idle = screen.meta["cpu_threads"]["idle_cores"]
        assert isinstance(idle, (int, float))
        assert screen.prior() == eta.prior_seconds(plan, float(idle))
        app.engine.cancel()  # type: ignore[union-attr]
        await wait_for(pilot, lambda: not app.runs_going, timeout=20)


@pytest.mark.asyncio
async def test_a_replay_opened_mid_run_leaves_the_run_going_and_esc_comes_back(
    tmp_path: Path, quiet_app: QuietApp
) -> None:
    """A saved session replayed from the palette while a plan runs: the run goes on (the replay's worker
    once shared the engine's exclusive group, and starting it cancelled the session), and Esc twice
    leads back to the live screen."""
    import shutil

    from benchtui.screens.sessions import SessionsScreen

    # Not scanned by _no_runner_left_behind: the copy's pids are another machine's.
    root = tmp_path / "sessions"
    shutil.copytree(Path(__file__).parent / "data" / "tiny-cpu-session", root / "20200101T000000Z_tiny")
    app = quiet_app(tiny_plan(samples=8000), sessions_dir=root, runner=("--batch-s", "0.05"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: state(app, "torch").startswith("epoch"))
        live = app.screen
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.infos)
        sessions = app.screen
        sessions.query_one("DataTable").move_cursor(
            row=[i["name"] for i in sessions.infos].index("20200101T000000Z_tiny")
        )
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")  # at once
        await wait_for(pilot, lambda: app.replayer is not None and app.replayer.status == "complete")
        assert app.runs_going and app.engine is not None and app.engine.status == "running"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is sessions)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is live)
        pids = runner_pids(app)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, timeout=20)
    assert app.exit_code == 130 and not [p for p in pids if alive(p)]
    assert json.loads((app.session_path / "session.json").read_text())["status"] == "interrupted"  # type: ignore[operator]

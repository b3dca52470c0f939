"""The benchtui Textual app, and ``make_app``: the one factory the command line and the tests share."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from benchtui.core.fmt import clean
from benchtui.core.plan.plan import Plan
from benchtui.core.reporting import registry
from benchtui.screens.confirm import ConfirmScreen
from benchtui.screens.live import LiveScreen
from benchtui.screens.plan import GpuProbe, PlanScreen
from benchtui.screens.sessions import SessionsScreen

if TYPE_CHECKING:
    from benchtui.core.running.engine import Engine
    from benchtui.core.running.launcher import LocalLauncher
    from benchtui.core.running.replay import Replayer

QUIT_WAIT_S = 15.0  # the engine needs ~3 s (SIGTERM grace) + the SIGKILL; this is a safety net


def probe_gpus(use_nvml: bool = True) -> GpuProbe:
    """NVIDIA GPUs by NVML only: importing a framework to ask would take seconds. The plan screen then
    measures the idle cores (``measure_idle``)."""
    from benchtui.core.running.sampler import list_gpus  # the one list: the command line's too

    found = list_gpus(use_nvml)
    return GpuProbe(found.names, found.status, measure_idle=True)


class BenchApp(App[int]):
    """Plan, run and watch a benchmark; or replay a recorded session through the same screen."""

    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses elsewhere find it too
    TITLE = "benchtui"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit (asks first while runs are going on)"),
        Binding(
            "ctrl+c",
            "interrupt",
            "Interrupt",
            id="interrupt",
            show=False,
            priority=True,
            tooltip="Stop the runner's process group now and quit; the session is kept",
        ),
    ]

    def __init__(
        self,
        plan: Plan | None = None,
        *,
        autostart: bool = False,
        sessions_dir: str | None = None,
        use_nvml: bool = True,
        replay: Path | None = None,
        speed: float = 1.0,
        launcher: LocalLauncher | None = None,
        probe: GpuProbe | None = None,
        handle_signals: bool = False,
    ) -> None:
        super().__init__()
        self.plan = plan
        self.autostart = autostart
        self.sessions_dir = sessions_dir
        self.use_nvml = use_nvml
        self.replay_path = replay
        self.speed = speed
        self.launcher = launcher
        self.probe = probe
        self.handle_signals = handle_signals
        self.engine: Engine | None = None
        self.replayer: Replayer | None = None
        self.engine_worker: Worker[Any] | None = None
        self.session_path: Path | None = None
        self.session_status: str | None = None
        self.exit_code = 0
        self._quitting = False

    # -- start --------------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.handle_signals:
            from benchtui.core.running.session_run import stop_on_signals

            stop_on_signals(asyncio.get_running_loop(), self.action_interrupt, hang_up=self._hang_up)
        if self.replay_path is not None:
            self.start_replay(self.replay_path, self.speed)
        elif self.autostart and self.plan is not None:
            self.start_plan(self.plan)
        else:
            self.show_plan(self.plan)

    def _show(self, screen: Screen) -> None:
        if len(self.screen_stack) > 1:
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def show_plan(self, plan: Plan | None = None) -> None:
        if self.probe is None:
            self.probe = probe_gpus(self.use_nvml)
        self._show(PlanScreen(plan, self.probe))

    # -- what the screens ask for (their messages bubble up to the app) -----------------------
    def on_plan_screen_start_requested(self, message: PlanScreen.StartRequested) -> None:
        self.start_plan(message.plan)

    def on_plan_screen_sessions_requested(self, message: PlanScreen.SessionsRequested) -> None:
        self.show_sessions()

    def on_sessions_screen_replay_requested(self, message: SessionsScreen.ReplayRequested) -> None:
        # At the speed chosen (at once by default); a failure to read one is said, and the app stays.
        self.start_replay(message.path, message.speed, from_sessions=True)

    def on_live_screen_back_requested(self, message: LiveScreen.BackRequested) -> None:
        """Esc in a replay opened from the sessions screen: stop playing it and show that screen again."""
        screen = self.screen
        if isinstance(screen, LiveScreen) and screen.back:
            self.pop_screen()
            if self.replayer is screen.source:
                self.replayer.cancel()  # one still playing stops: nothing runs for a screen gone

    def on_live_screen_new_plan_requested(self, message: LiveScreen.NewPlanRequested) -> None:
        self.show_plan(message.plan)

    def start_plan(self, plan: Plan) -> None:
        """Create the session, start the engine in a worker on this loop, show the live screen."""
        from benchtui.core.running.session_run import start_session
        from benchtui.core.store.session import SessionError

        try:
            session = start_session(plan, self.sessions_dir, use_nvml=self.use_nvml, launcher=self.launcher)
        except (OSError, SessionError) as exc:
            message = clean(f"Cannot create the session folder: {exc}")
            if isinstance(self.screen, PlanScreen):
                self.screen.show_error(message)
            else:
                self.show_plan(plan)
                self.notify(message, severity="error", timeout=10, markup=False)
            return
        engine = session.engine
        screen = LiveScreen(engine)
        engine.listener = screen.note_event  # marks the screen dirty; the tick redraws
        self.engine, self.session_path, self.session_status = engine, session.path, None
        self._show(screen)
        self.engine_worker = self.run_worker(
            self._run_engine(engine), name="engine", group="engine", exclusive=True, exit_on_error=False
        )

    async def _run_engine(self, engine: Engine) -> str:
        from benchtui.core.running.session_run import exit_code

        task = asyncio.ensure_future(engine.run())
        try:
            # Shielded: if the app goes away without our quit path (an error, a cancelled
            # worker), the engine still gets to stop its runner and record "interrupted".
            status = await asyncio.shield(task)
        except asyncio.CancelledError:
            engine.cancel()
            try:
                await asyncio.wait_for(task, QUIT_WAIT_S)
            except BaseException:  # cancelled again: the engine's finally kills the group
                task.cancel()
            raise
        except Exception as exc:  # a bug in the engine must not take the terminal with it
            self.session_status, self.exit_code = "failed", 1
            self.notify(
                clean(f"The engine stopped with an error: {exc}"), severity="error", timeout=30, markup=False
            )
            raise
        self.session_status, self.exit_code = status, exit_code(status)
        self._final_tick()
        if not self._quitting:
            severity: SeverityLevel = "information" if status == "complete" else "warning"
            failure = f" ({engine.writer.failure}; what was written is kept)" if engine.writer.failure else ""
            self.notify(
                clean(f"Session {status}{failure}: {engine.writer.path}"),
                severity=severity,
                timeout=15,
                markup=False,
            )
        return status

    def start_replay(self, path: Path, speed: float, from_sessions: bool = False) -> None:
        """Play a session folder through the live screen; ``from_sessions``: on top of the sessions
        screen, which Esc goes back to (a folder that cannot be read is then said, and the app stays)."""
        from benchtui.core.running.replay import Replayer
        from benchtui.core.store.session import SessionError

        try:
            replayer = Replayer(path, speed=speed)
        except (OSError, SessionError) as exc:
            if from_sessions:
                self.notify(clean(f"Cannot replay: {exc}"), severity="error", markup=False)
                return
            self.exit_code = 2
            self.exit(2, return_code=2, message=clean(f"benchtui: error: {exc}"))
            return
        screen = LiveScreen(replayer, speed=speed, back=from_sessions)
        replayer.listener = screen.note_event
        self.replayer = replayer  # session_path stays the live session's: the one said on leaving
        if from_sessions:
            self.push_screen(screen)
        else:
            self._show(screen)
        # Not exclusive, and not in the engine's group: starting a replay must cancel neither a session
        # being run nor a replay on a screen underneath (Esc ends a replay opened from the sessions screen).
        self.run_worker(self._run_replay(replayer), name="replay", group="replay", exit_on_error=False)

    async def _run_replay(self, replayer: Replayer) -> str:
        status = await replayer.run()
        self._final_tick()
        if not self._quitting and not replayer.cancelled:  # cancelled: left with Esc, nothing to say
            self.notify(clean(f"Replay finished: the session was {status}."), timeout=10, markup=False)
        return status

    def _final_tick(self) -> None:
        """Show the final state at once rather than on the next tick."""
        for screen in self.screen_stack:
            if isinstance(screen, LiveScreen) and screen.is_mounted:
                screen.tick()

    # -- leaving --------------------------------------------------------------------------------
    @property
    def runs_going(self) -> bool:
        worker = self.engine_worker
        return worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    async def action_quit(self) -> None:
        """q / ctrl+q: quit at once, or ask first while runs are going on."""
        if not self.runs_going:
            self._leave()
            return
        if isinstance(self.screen, ConfirmScreen):
            return
        watch = self.engine.plan.watch if self.engine is not None else {}
        if watch and not watch.get("command"):  # telemetry only: quitting is how it ends
            self.action_interrupt()
            return
        if watch:
            question = (
                "Stop the command and quit?",
                "The command's whole process group is stopped; the run is recorded as stopped and the "
                "session is kept, with everything recorded so far.",
            )
        else:
            question = (
                "Quit while runs are going on?",
                "The current run is stopped (its whole process group) and the session is kept, "
                "marked interrupted, with everything recorded so far.",
            )
        self.push_screen(ConfirmScreen(*question), self._quit_answer)

    def _quit_answer(self, confirmed: bool | None) -> None:
        if confirmed:
            self.action_interrupt()

    def action_interrupt(self) -> None:
        """ctrl+c, SIGTERM: stop the runner's process group, wait for the engine, quit (130)."""
        if self._quitting:
            return
        if not self.runs_going:
            self._leave()
            return
        self._quitting = True
        assert self.engine is not None
        self.notify("Stopping the runner and closing the session…", timeout=QUIT_WAIT_S)
        self.engine.cancel()
        self.run_worker(self._finish_and_exit(), name="quit", group="quit")

    def _hang_up(self) -> None:
        """The terminal went away (SIGHUP): close the session properly, then leave at once.

        There is no terminal to restore, and Textual's writer can block forever trying to
        (seen when tmux kills its session), so once the engine has written the session and
        stopped the runner, the process ends without the usual shutdown.
        """
        if self.engine is not None:
            self.engine.cancel()
        self.run_worker(self._finish_and_vanish(), name="hang-up", group="quit")

    async def _finish_and_vanish(self) -> None:
        worker = self.engine_worker
        if worker is not None:
            try:
                await asyncio.wait_for(worker.wait(), QUIT_WAIT_S)
            except Exception:  # exiting anyway; the runner dies with us (PDEATHSIG)
                pass
        interrupted = self.engine is not None and self.engine.status == "interrupted"
        os._exit(130 if interrupted else 0)

    async def _finish_and_exit(self) -> None:
        worker = self.engine_worker
        if worker is not None:
            try:
                await asyncio.wait_for(worker.wait(), QUIT_WAIT_S)
            except Exception:  # timeout or a failed engine: exiting cancels it, which kills the runner
                pass
        engine = self.engine
        if engine is not None and engine.plan.watch and engine.status != "running":
            # Quitting is how a watch ends: its exit code is the session's (0: the command exited 0).
            from benchtui.core.running.session_run import exit_code

            self.exit_code = exit_code(engine.status)
        else:
            self.exit_code = 130
        self.exit(self.exit_code, return_code=0)

    def _leave(self) -> None:
        self._quitting = True
        if self.replayer is not None:
            self.replayer.cancel()
        self.exit(self.exit_code, return_code=0)

    # -- command palette --------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, LiveScreen):
            for action, title, help_text in (
                (
                    "stop_run",
                    "Stop the current run",
                    "Terminate the runner; the run is recorded as stopped, the queue goes on",
                ),
                (
                    "skip_model",
                    "Skip the current model",
                    "Stop the current run and skip the model's remaining runs",
                ),
                ("pause", "Pause the queue", "The current run finishes, then the next one waits"),
                ("resume", "Resume the queue", "Start the next run"),
                ("toggle_log", "Show or hide the log", "The current runner's stdout and stderr"),
                ("export", "Export the summary", f"Write {registry.spoken()} into the session folder"),
                ("new_plan", "New plan", "Back to the plan screen"),
            ):
                if screen.check_action(action, ()):
                    yield SystemCommand(title, help_text, getattr(screen, f"action_{action}"))
        elif isinstance(screen, PlanScreen):
            yield SystemCommand("Start the plan", "Validate the form and start its runs", screen.action_start)
        if not isinstance(screen, SessionsScreen):
            yield SystemCommand(
                "Saved sessions", "Browse, replay and export the sessions saved here", self.show_sessions
            )

    def show_sessions(self) -> None:
        self.push_screen(SessionsScreen(self.sessions_dir))

    # -- screenshots ------------------------------------------------------------------------
    def screenshot_folders(self) -> list[Path]:
        """Where a screenshot goes: the folder of the session on screen, else (or if that one cannot
        be written, a recording read-only here) the sessions folder."""
        from benchtui.core.store.session import sessions_dir

        folders = [sessions_dir(self.sessions_dir)]
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ModalScreen):  # the palette, a question: the screen under it
                continue
            if isinstance(screen, LiveScreen):
                folders.insert(0, screen.session_path)
            break
        return folders

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's "Screenshot" (and ``action_screenshot``): an SVG written into the session's
        folder rather than Textual's ~/Downloads (which may not exist), and its full path said."""
        problem = ""
        for folder in [Path(path)] if path else self.screenshot_folders():
            try:
                folder.mkdir(parents=True, exist_ok=True)
                written = Path(self.save_screenshot(filename, str(folder), time_format)).resolve()
            except OSError as exc:
                problem = f"cannot write in {folder}: {exc.strerror or exc}"
                continue
            self.notify(clean(f"Screenshot saved: {written}"), timeout=10, markup=False)
            return str(written)
        self.notify(clean(f"No screenshot: {problem}"), severity="error", timeout=10, markup=False)
        return None


def make_app(plan: Plan | None = None, **options: Any) -> BenchApp:
    """The app, configured; ``run_app``, ``replay_app``, tests and benchmarks all build it here.

    The options are BenchApp's own keywords (autostart, sessions_dir, use_nvml, replay,
    speed, launcher, probe, handle_signals), not repeated here.
    """
    return BenchApp(plan, **options)


def _run(app: BenchApp) -> int:
    app.run()
    if app.return_code not in (0, None):  # Textual itself failed (it printed the traceback)
        return app.return_code
    if app.session_path is not None:  # a session was run (a replay never sets it)
        # The screen is gone: say where everything went.
        print(
            clean(f"benchtui: session {app.session_status or 'ended'}: {app.session_path}"), file=sys.stderr
        )
    return app.exit_code


def run_app(plan: Plan | None, *, autostart: bool, sessions_dir: str | None, use_nvml: bool = True) -> int:
    """``benchtui`` and ``benchtui run``: 0 all runs ok, 1 some failed, 130 interrupted."""
    return _run(
        make_app(plan, autostart=autostart, sessions_dir=sessions_dir, use_nvml=use_nvml, handle_signals=True)
    )


def replay_app(session_path: Path, speed: float = 1.0) -> int:
    """``benchtui replay SESSION``: 0 when the replay ran (whatever the recorded status), 2 if unreadable."""
    return _run(make_app(replay=Path(session_path), speed=speed, handle_signals=True))

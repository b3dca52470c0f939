"""``benchtui watch``: a session without a plan, the machine's telemetry and, when given, one command of the user's.

The ``WatchEngine`` is the engine with one run, ``WATCH_RUN``. With a command, it starts it as a
runner is started (its own process group, stdin from /dev/null, output to the session's log, the
event pipe passed: ``launcher.start_command``) but in the user's folder and environment, samples it
and its children, and reads its pipe: a script that uses benchtui's timing hooks (``StepTimer``,
``KerasTimer``) streams its batches and epochs as a runner does, and its ``hello`` names the framework
the run then belongs to. The hooks never send ``done``: the command's exit code is the run's status.
Without a command, the run is the sampling itself, until the user ends it.

Ending a watch (Ctrl+C, the app's quit or stop key) is how a watch ends, not an interruption: the
command's process group is stopped (SIGTERM, then SIGKILL), the run is "stopped", and the session
is finished and written like any other. Nothing is ever stopped for being silent: a user's script
may print nothing for hours.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from benchtui.core.model.status import RunStatus, SessionStatus
from benchtui.core.plan.devices import Placement, place
from benchtui.core.plan.plan import Plan, RunSpec
from benchtui.core.running.engine import Engine, _write_log, exit_words
from benchtui.core.running.launcher import EXIT_GRACE_S, start_command
from benchtui.core.running.sampler import Sampler
from benchtui.core.running.source import Listener, SessionSource
from benchtui.core.store.session import SessionWriter, StorageError
from benchtui_runners import catalog

#: The session status a watch ends with, by how its run ended.
FINAL: dict[str, str] = {
    RunStatus.OK: SessionStatus.COMPLETE,
    RunStatus.STOPPED: SessionStatus.INCOMPLETE,  # the user stopped the command: it did not finish
    RunStatus.INTERRUPTED: SessionStatus.INTERRUPTED,  # benchtui itself went away mid-run
}


class WatchEngine(Engine):
    """Watches one command (or none: telemetry only) until it exits or the user ends the watch."""

    def __init__(
        self,
        plan: Plan,
        writer: SessionWriter,
        listener: Listener | None = None,
        sampler: Sampler | None = None,
    ) -> None:
        super().__init__(plan, writer, listener=listener, sampler=sampler)
        self.spec: RunSpec = self.specs[0]
        self.returncode: int | None = None
        self._ended = False  # the user asked to end the watch
        self._ending: asyncio.Event | None = None  # set then, on the engine's loop

    @property
    def command(self) -> list[str]:
        """The watched command ([] when the watch samples telemetry only)."""
        return list(self.plan.watch.get("command") or [])

    # -- control: every way of stopping ends the watch ------------------------------------
    def stop_current(self) -> None:
        """Stop the command's process group (the run is "stopped"), or end a telemetry-only watch."""
        self.end_watch()

    def skip_model(self) -> None:
        self.end_watch()

    def cancel(self) -> None:
        """Ctrl+C, kill, the app's quit: the watch ends (never "interrupted": that is how a watch ends)."""
        self.end_watch()

    def end_watch(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self._ending is not None:
            self._ending.set()
        proc = self.current
        if proc is not None and proc.process.returncode is None:
            self._stop_current = True
            asyncio.ensure_future(proc.terminate())

    def storage_failed(self, exc: StorageError) -> None:
        super().storage_failed(exc)
        self.end_watch()

    # -- the session ------------------------------------------------------------------------
    async def run(self) -> str:
        """Watch until the command exits or the user ends the watch; return the session's status."""
        self._ending = asyncio.Event()
        if self._ended:  # ended before it began
            self._ending.set()
        try:
            self._begin()
            if self.command:
                await self._watch_command()
            else:
                await self._watch_telemetry()
        except asyncio.CancelledError:
            self._cancelled = True  # the task itself was cancelled: benchtui is going away
            raise
        except Exception as exc:  # benchtui's own fault: said in the session, never "ok"
            self.crashed(exc)
        finally:
            if self.current is not None:  # leave no process behind, whatever happened
                self.current.kill_now()
            if not self.model.runs[self.spec.run_id].finished:
                self._end_run(self.spec, "interrupted", "benchtui stopped while the command ran", None, 0)
            self._end()
        return self.status

    def _place(self, gpus: list[dict[str, Any]]) -> Placement:
        """The GPU watched (energy, other processes, activity counters): NVML's first, when there is one.
        The command's own environment picks the device it trains on; nothing is masked."""
        placement = place("auto", gpus)
        which = (
            f"NVML GPU {placement.nvml_index} is the one watched"
            if placement.nvml_index is not None
            else "no GPU is watched"
        )
        return dataclasses.replace(
            placement,
            env={},
            reason=f"benchtui watch: the command picks its device in its own environment; {which}",
        )

    def _final_status(self) -> str:
        if self.storage_error is not None or self.error:
            return str(SessionStatus.FAILED)
        return str(FINAL.get(self.model.runs[self.spec.run_id].status, SessionStatus.FAILED))

    def _started(self, **fields: Any) -> None:
        spec = self.spec
        self._parent_event(
            "run_start", spec.run_id, framework=spec.framework, model=spec.model, index=spec.index, **fields
        )

    async def _watch_telemetry(self) -> None:
        """No command: the run is the sampling itself, until the user ends it (then "ok")."""
        self._started()
        if self.sampler is not None:
            self.sampler.set_target(self.spec.run_id, None)  # samples belong to the run, no process
        assert self._ending is not None
        try:
            await self._ending.wait()
        finally:
            if self.sampler is not None:
                self.sampler.set_target(None, None)
        if self.storage_error is not None:
            status, reason = "failed", f"the session could not be written: {self.writer.failure}"
        else:
            status, reason = "ok", ""
        self._end_run(self.spec, status, reason, None, 0)

    async def _watch_command(self) -> None:
        """Start the command, read its events until it exits, then record how it ended."""
        spec, command = self.spec, self.command
        if self._ended:
            self._started()
            self._end_run(spec, "stopped", "stopped before the command started", None, 0)
            return
        try:
            log = open(self.writer.log_path(spec.run_id), "ab", buffering=0)  # closed below
        except OSError as exc:
            self.storage_failed(self.writer.failed_write(exc, "the command's log"))
            self._started()
            self._end_run(spec, "failed", f"no log: {exc.strerror}", None, 0)
            return
        with log:
            try:
                proc = await start_command(command, log, self.plan.watch.get("cwd") or ".")
            except OSError as exc:
                self._started()
                self._end_run(spec, "failed", f"could not start {command[0]}: {exc.strerror or exc}", None, 0)
                return
            self.current, self.current_spec = proc, spec
            self._started(pid=proc.pid)
            if self._ended:  # ended while the command was starting
                self._stop_current = True
                await proc.terminate()
            if self.sampler is not None:
                self.sampler.set_target(spec.run_id, proc.pid)  # its CPU, memory and GPU memory, children too
            try:
                malformed = await self._pump(spec, proc, log)
                returncode = await proc.process.wait()
                await proc.finish_log()
                if proc.ending == "pipe held":
                    note = (
                        f"\n[benchtui] the command {exit_words(returncode)}; what it left running still held "
                        f"the event pipe {EXIT_GRACE_S:g} s later and was killed with its process group\n"
                    )
                    self._write(_write_log, log, note)
            finally:
                proc.close()
                if self.sampler is not None:
                    self.sampler.set_target(None, None)
                self.current, self.current_spec = None, None
        self.returncode = returncode
        spec = self.spec  # the hooks may have named the framework meanwhile
        if self._stop_current:
            status, reason = "stopped", f"stopped by the user ({exit_words(returncode)})"
        elif self.storage_error is not None:
            status, reason = "failed", f"the session could not be written: {self.writer.failure}"
        elif returncode == 0:
            status, reason = "ok", ""
        else:
            status, reason = "failed", exit_words(returncode)
            run = self.model.runs.get(spec.run_id)
            said = proc.last_line
            if said and (run is None or not (run.batch_seconds or run.epoch_times)):
                # It failed before it timed anything (an import error, a bad argument): what it said,
                # not only its exit code; the log has the rest.
                reason = f"{reason}: {said}"
        self._end_run(spec, status, reason, returncode, malformed, proc.log_problem)

    def _on_event(self, spec: RunSpec, event: dict[str, Any]) -> None:
        """The hooks' hello names the command's framework: the run, the plan and the session take it, so
        the session reads back the same (the run's id has no framework in it: its events still match)."""
        if event.get("type") != "hello":
            return
        framework = event.get("framework")
        run = self.model.runs[spec.run_id]
        if run.spec.framework != catalog.WATCH_FRAMEWORK or framework not in catalog.FRAMEWORKS:
            return  # a second hello, or a framework this benchtui does not know: the run stays "command"
        assert isinstance(framework, str)
        run.spec = dataclasses.replace(run.spec, framework=framework)
        self.spec = run.spec
        self.specs = [run.spec]
        if self.current_spec is not None:
            self.current_spec = run.spec
        # What the command said it is: a new plan (the one it was given stays as it was), the model's
        # too, since its cells are (framework, model).
        learned: dict[str, Any] = {"frameworks": [framework]}
        settings = event.get("settings")
        batch = settings.get("batch_size") if isinstance(settings, dict) else None
        if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
            learned["batch_sizes"] = {catalog.WATCH_MODEL: batch}
        self.plan = self.model.plan = dataclasses.replace(self.plan, **learned)
        self._write(self.writer.update_meta, plan=self.plan.to_dict())


if TYPE_CHECKING:
    _source: type[SessionSource] = WatchEngine  # mypy checks that the live screen can show a watch

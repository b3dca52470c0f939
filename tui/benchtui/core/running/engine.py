"""Running a plan: one runner process after another, events into the session as they come.

The engine is asyncio code with no UI. The TUI runs it in a worker on its own loop
and redraws from ``engine.model`` on a timer; the headless command does the same
with Rich. Control (stop the run, skip the model, pause, cancel) is a few flags
checked between runs, plus killing the current runner's process group.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import RunStatus
from benchtui.core.plan.devices import Placement, place
from benchtui.core.plan.plan import Plan, PlanError, Resolved, RunSpec, run_order
from benchtui.core.plan.sweep import NO_POINT, Point
from benchtui.core.plan.threads import measure_idle
from benchtui.core.running.batchsearch import choose, probe_memory_limit, search_largest_batch
from benchtui.core.running.control import Pausable
from benchtui.core.running.launcher import (
    LocalLauncher,
    RunnerProcess,
    config_args,
    launcher_for,
    start_runner,
)
from benchtui.core.running.sampler import Sampler
from benchtui.core.running.source import Listener, SessionSource
from benchtui.core.store.session import SessionWriter, StorageError
from benchtui.core.wire.events import MAX_LINE_BYTES, PARENT_ONLY, Malformed, parse_line
from benchtui_runners import catalog
from benchtui_runners.config import RunConfig


def exit_words(returncode: int | None) -> str:
    """How a process ended, in words: 'exited with code 3', 'killed by SIGKILL', 'did not exit'."""
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode}"


def describe_exit(returncode: int | None) -> str:
    """A runner that ended without finishing its run, in words."""
    if returncode is None:
        return f"runner {exit_words(returncode)}"
    return f"runner {'was ' if returncode < 0 else ''}{exit_words(returncode)} before finishing"


#: The watchdog's limits when the plan sets none (--stall-timeout auto): before a run's first step
#: (importing, building, compiling: minutes on a large model) and while a phase is open, and after
#: it: STALL_FACTOR times the longest window of steps seen, never less than STALL_FLOOR_S.
STALL_BEFORE_STEPS_S = 900.0
STALL_FLOOR_S = 120.0
STALL_FACTOR = 50.0


def stall_limit(plan_timeout: float, run: RunState | None) -> float | None:
    """Seconds without an event after which a runner is stopped as stalled (None: never)."""
    if plan_timeout > 0:
        return plan_timeout
    if plan_timeout < 0:
        return None
    if run is None or run.window_max_s <= 0 or run.phase:
        return STALL_BEFORE_STEPS_S
    return max(STALL_FLOOR_S, STALL_FACTOR * run.window_max_s)


def _write_log(log: Any, note: str) -> None:
    log.write(note.encode())
    log.flush()


class Engine(Pausable):
    """Runs every run of a plan in order, writing a session and updating a model."""

    def __init__(
        self,
        plan: Plan,
        writer: SessionWriter,
        listener: Listener | None = None,
        sampler: Sampler | None = None,
        launcher: LocalLauncher | None = None,
    ) -> None:
        self.plan = plan
        self.writer = writer
        # The host's core count: what the verdict's contention rule weighs other processes' load against.
        meta = getattr(writer, "meta", None)
        self.model = SessionModel(plan, host=meta.get("host") if isinstance(meta, dict) else None)
        self.listener = listener
        self.sampler = sampler
        self.launcher = launcher  # None: each run's own (launcher_for: torchrun for PyTorch data parallel)
        self.specs: list[RunSpec] = run_order(plan)
        self.current: RunnerProcess | None = None
        self.current_spec: RunSpec | None = None
        self.status = "pending"
        super().__init__()
        self._stop_current = False
        self._skip: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._no_fit: dict[tuple[str, str, Point], str] = {}  # cells the batch search found no size for
        # Chosen once when the session starts (from the sampler's NVML view), the same for every run.
        self.placement = Placement("unchecked", plan.device)
        #: What ``--batch-size auto`` chose (model, or "framework:model" -> size): the resolved plan's.
        self.batch_choices: dict[str, int] = {}
        #: What the search chose at sweep points with an ``auto`` batch: (framework, model, point key) -> size.
        self.point_batches: dict[tuple[str, str, str], int] = {}
        #: A CPU plan with no --threads: the idle cores measured once before its first run, and the threads
        #: every run and probe gets from them (``threads.measure_idle``; None: --threads, a GPU, a watch).
        self.cpu_threads: dict[str, Any] | None = None
        self._measured = False
        #: What made the session stop writing (a full disk, ...); the session ends "failed" with it.
        self.storage_error: StorageError | None = None
        #: An exception of benchtui's own that ended the session ("failed" with it); "" while none did.
        self.error = ""

    # -- what a view reads (SessionSource) ---------------------------------------------
    is_replay = False

    @property
    def path(self) -> Path:
        return self.writer.path

    @property
    def meta(self) -> dict[str, Any]:
        return self.writer.meta

    @property
    def runner_active(self) -> bool:
        return self.current is not None and not self.cancelled

    def log_path(self, run_id: str) -> Path:
        return self.writer.log_path(run_id)

    # -- control (pause, resume, paused, cancelled: Pausable) -----------------------------
    def stop_current(self) -> None:
        """Stop the run in progress (recorded as "stopped"); the queue goes on."""
        if self.current is not None:
            self._stop_current = True
            asyncio.ensure_future(self.current.terminate())

    def skip_model(self) -> None:
        """Stop the current run and skip every remaining run of its model."""
        if self.current_spec is not None:
            self._skip.add(self.current_spec.model)
            self.stop_current()

    def cancel(self) -> None:
        """Stop everything: the current runner's process group, and every run not started."""
        super().cancel()
        if self.current is not None:
            asyncio.ensure_future(self.current.terminate())

    # -- events -----------------------------------------------------------------------
    def _record(self, event: dict[str, Any]) -> None:
        if self.writer.closed:
            return  # a GPU sample that arrived after the session was finished
        self.model.apply(event)
        self._write(self.writer.append, event)
        if self.listener is not None:
            self.listener(event)

    def _write(self, write: Callable[..., object], *args: Any, **kwargs: Any) -> None:
        """One write to the session; a failed one stops the session (``storage_failed``), never raises."""
        try:
            write(*args, **kwargs)
        except StorageError as exc:
            self.storage_failed(exc)
        except OSError as exc:  # a log file: the writer did not see it, so say it the writer's way
            self.storage_failed(self.writer.failed_write(exc, "a runner's log"))

    def storage_failed(self, exc: StorageError) -> None:
        """The disk refused a write: stop the runner and the plan; what was written is kept."""
        if self.storage_error is None:
            self.storage_error = exc
            super().cancel()
            if self.current is not None:
                asyncio.ensure_future(self.current.terminate())

    def _on_sample(self, sample: dict[str, Any]) -> None:
        """Called in the sampler's thread: hand the sample to the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._record, sample)
            except RuntimeError:
                pass  # loop closing

    def _parent_event(self, type_: str, run: str | None, **fields: Any) -> None:
        self._record({"type": type_, "t": time.monotonic(), "run": run, **fields})

    # -- the plan ---------------------------------------------------------------------
    async def run(self) -> str:
        """Run the whole plan; return the session status (complete / failed / interrupted)."""
        unavailable: dict[
            tuple[str, str, Point], str
        ] = {}  # cells whose runner said so: their other runs too
        try:
            await self.measure_cpu()
            self._begin()
            if self.cpu_threads is not None:
                self._write(self.writer.update_meta, cpu_threads=self.cpu_threads)
            # A model its framework lacks (PNASNet in Keras) is unavailable from the start: never queued as
            # a run to come, never "skipped" when the session stops before its turn.
            lacking = {spec.run_id: catalog.available(spec.framework, spec.model) for spec in self.specs}
            for spec in self.specs:
                ok, reason = lacking[spec.run_id]
                if not ok:
                    self._parent_event("run_end", spec.run_id, status="unavailable", reason=reason)
            if self.searches():
                await self._search_batches()
            for spec in self.specs:
                cell = (spec.framework, spec.model, spec.point)
                if not lacking[spec.run_id][0]:
                    continue
                if self._cancelled:
                    self._parent_event(
                        "run_end", spec.run_id, status="skipped", reason="session interrupted before this run"
                    )
                elif cell in unavailable:
                    self._parent_event("run_end", spec.run_id, status="unavailable", reason=unavailable[cell])
                elif cell in self._no_fit:
                    self._parent_event("run_end", spec.run_id, status="failed", reason=self._no_fit[cell])
                elif spec.model in self._skip:
                    self._parent_event(
                        "run_end", spec.run_id, status="skipped", reason="model skipped by user"
                    )
                else:
                    await self._resume.wait()
                    if self._cancelled:
                        self._parent_event(
                            "run_end",
                            spec.run_id,
                            status="skipped",
                            reason="session interrupted before this run",
                        )
                        continue
                    await self._run_one(spec)
                    state = self.model.runs[spec.run_id]
                    if state.status == "unavailable":
                        unavailable[cell] = state.reason
        except asyncio.CancelledError:
            self._cancelled = True  # the task itself was cancelled: the session is interrupted
            raise
        except Exception as exc:  # benchtui's own fault: said in the session, never "complete"
            self.crashed(exc)
        finally:
            if self.current is not None:  # cancelled from outside (task cancel): leave no process
                self.current.kill_now()
            self._end()
        return self.status

    def crashed(self, exc: BaseException) -> None:
        """An exception of benchtui's own escaped the plan: the session ends "failed" with its reason (in
        session.json's ``failure``, the traceback in ``error_traceback``), the run it stopped "failed",
        every run not started "skipped". What was recorded stays as it was."""
        if self.error:
            return
        self.error = f"benchtui stopped on an internal error: {type(exc).__name__}: {str(exc)[:300]}"
        self.writer.meta["failure"] = self.error
        self.writer.meta["error_traceback"] = "".join(traceback.format_exception(exc))[-16000:]
        for run_id, state in self.model.runs.items():
            if state.finished:
                continue
            status, reason = (
                ("skipped", "the session failed before this run: " + self.error)
                if state.status is RunStatus.QUEUED
                else ("failed", self.error)
            )
            try:
                self._parent_event("run_end", run_id, status=status, reason=reason)
            except Exception:  # the listener may be what failed: recorded without it
                self.listener = None
                self._parent_event("run_end", run_id, status=status, reason=reason)

    def _begin(self) -> None:
        """The session starts: its device chosen and recorded, the sampler sampling into it."""
        self._loop = asyncio.get_running_loop()
        self.status = "running"
        gpus = self.sampler.gpus() if self.sampler is not None else []
        self.placement = self._place(gpus)
        if self.sampler is not None:
            self.sampler.on_sample = self._on_sample
            self.sampler.watch_gpus(self.placement.nvml_indices)
            self._write(self.writer.update_meta, gpus=gpus, telemetry=self.sampler.status)
            self.sampler.start()
        self._write(self.writer.update_meta, placement=self.placement.to_dict())

    async def measure_cpu(self) -> dict[str, Any] | None:
        """On a CPU plan that names no --threads, the idle cores over ``threads.IDLE_WINDOW_S`` (once per
        session; ``run`` calls it before the first run, a view may call it sooner to say the figure):
        ``{"idle_cores", "cores", "window_s", "threads"}``, or None where the plan's threads are not the
        engine's to choose (--threads, a GPU, a watched command)."""
        if self._measured:
            return self.cpu_threads
        self._measured = True
        if self.plan.threads or self.plan.watch:
            return None
        try:
            placement = self._place(self.sampler.gpus() if self.sampler is not None else [])
        except PlanError:
            return None  # the session fails on it when it begins, and says why
        if placement.runner_device != "cpu":
            return None
        self.cpu_threads = await asyncio.to_thread(measure_idle)
        return self.cpu_threads

    @property
    def resolved(self) -> Resolved:
        """The plan as this session runs it (``Plan.resolve``): its placement, CPU threads and chosen
        batch sizes. The engine never changes the plan it was given."""
        return self.plan.resolve(self.placement, self.cpu_threads, self.batch_choices, self.point_batches)

    def _place(self, gpus: list[dict[str, Any]]) -> Placement:
        return place(self.plan.device, gpus, self.plan.devices, self.plan.device_ids)

    def _end(self) -> None:
        """The session ends: sampling stopped, its status and summary written."""
        try:
            if self.sampler is not None:
                self.sampler.stop()
                # Clocks and throttle reasons at the end too: did the GPU slow down during the session?
                self.writer.meta["gpus_end"] = self.sampler.gpus()
            summary = self.model.summary()
        except Exception as exc:  # the session is still finished, "failed" with the reason
            self.crashed(exc)
            summary = {"failure": self.error}
        self.status = self._final_status()
        self.writer.finish(self.status, summary)

    def _final_status(self) -> str:
        states = [r.status for r in self.model.runs.values()]
        if self.storage_error is not None or self.error:
            return "failed"
        if self._cancelled:
            return "interrupted"
        if "failed" in states:
            return "failed"
        diverged = [r for r in self.model.runs.values() if r.status is RunStatus.DIVERGED]
        if diverged:  # its result is unusable, as a failed run's: the session says which and why
            more = f" (and {len(diverged) - 1} other run(s))" if len(diverged) > 1 else ""
            self.writer.meta["failure"] = f"run {diverged[0].spec.run_id} {diverged[0].reason}{more}"
            return "failed"
        if "stopped" in states or "skipped" in states:
            return "incomplete"  # the user stopped or skipped runs: the plan was not carried out whole
        return "complete"

    def searches(self) -> list[tuple[str, Point, list[str]]]:
        """The batch searches the session makes before its runs: (model, point, frameworks) for every point
        whose batch is ``auto`` (``--batch-size auto``: the one point of a plan without a sweep; a sweep's
        ``batch=auto``; ``--best``'s best point), over the frameworks that run it (a framework's cell at a
        point that is not its ``effective`` one reads another point's runs, and is not searched)."""
        resolved = self.resolved
        out: list[tuple[str, Point, list[str]]] = []
        for model in self.plan.models:
            for point in self.plan.points():
                fws = [
                    fw
                    for fw in self.plan.frameworks
                    if self.plan.effective(point, fw, model) == point
                    and resolved.at(point, fw, model).batch_auto
                ]
                if fws:
                    out.append((model, point, fws))
        return out

    async def _search_batches(self) -> None:
        """--batch-size auto: probe each (model, framework) for the largest batch that fits; at each sweep
        point whose batch is ``auto``, under that point's settings (its precision changes what fits)."""
        for model, point, fws in self.searches():
            at = self.resolved.at(point, fws[0], model)
            upper, policy = at.batch_upper(), at.batch_policy
            found: dict[str, int | None] = {}
            for fw in fws:
                if self._cancelled or not catalog.available(fw, model)[0]:
                    continue

                async def probe(batch: int, fw: str = fw, model: str = model, point: Point = point) -> str:
                    return await (
                        self._probe(fw, model, batch, point) if point else self._probe(fw, model, batch)
                    )

                start = min(catalog.MODELS[model].study_batch_size, upper)
                result = await search_largest_batch(probe, start, upper)
                if self._cancelled:
                    return
                found[fw] = result.best
                if result.best is None:
                    tried = ", ".join(f"{b}: {r}" for b, r in result.probes)
                    why = result.error or "even batch 1 ran out of memory"
                    self._no_fit[(fw, model, point)] = f"no batch size trains ({why}; probes {tried})"
            chosen = choose(found, policy)
            for fw, size in chosen.items():
                if point:
                    self.point_batches[(fw, model, point.key)] = size
                else:
                    self.batch_choices[model if policy == "min" else f"{fw}:{model}"] = size
            self._parent_event(
                "batch_choice",
                None,
                model=model,
                policy=policy,
                upper=upper,
                found=found,
                chosen=chosen,
                **({"point": point.key} if point else {}),
            )
        # The session records the plan it runs: the chosen sizes with it (a sweep point's: its batch_choice).
        self._write(self.writer.update_meta, plan=self.resolved.plan.to_dict())

    def _run_start(self, spec: RunSpec, python: str, pid: int | None = None) -> None:
        """The run's start, as the session records it (``pid``: None when its process did not start)."""
        self._parent_event(
            "run_start",
            spec.run_id,
            framework=spec.framework,
            model=spec.model,
            index=spec.index,
            **({"pid": pid} if pid is not None else {}),
            python=python,
            **({"devices": spec.devices} if spec.devices > 1 else {}),
            **({"nodes": spec.nodes, "host": socket.gethostname()} if spec.nodes > 1 else {}),
        )

    def _config(
        self, framework: str, model: str, run_id: str, devices: int = 1
    ) -> tuple[RunConfig, dict[str, str]]:
        """The run's configuration on the session's device (its first ``devices`` when data parallel),
        and the environment that gives the runner exactly those (``Resolved.run_config``)."""
        return self.resolved.run_config(framework, model, run_id, devices)

    async def _probe(self, framework: str, model: str, batch: int, point: Point = NO_POINT) -> str:
        """One probe in a fresh process, at sweep ``point``'s settings: "ok", "oom" or "error"."""
        probe_id = f"probe-{framework}-{model}-{f'{point.tag}-' if point else ''}{batch}"
        config, env = self.resolved.run_config(framework, model, probe_id, 1, point)
        at = {"point": point.key} if point else {}
        config.batch_size, config.samples, config.epochs, config.mode = (
            batch,
            batch * config.probe_steps,
            1,
            "probe",
        )
        config.profile = False  # a probe only asks whether a batch fits: --profile is for the runs
        config.memory_limit_mb = probe_memory_limit(config.memory_limit_mb)  # the run keeps headroom
        started = time.monotonic()
        self._parent_event(
            "probe_start", None, probe=probe_id, framework=framework, model=model, batch_size=batch, **at
        )
        error: dict[str, Any] = {}
        done: dict[str, Any] = {}
        try:
            log = open(self.writer.log_path(probe_id), "ab", buffering=0)  # closed below
        except OSError as exc:
            self.storage_failed(self.writer.failed_write(exc, "a probe's log"))
            return "error"
        with log:
            try:
                proc = await start_runner(
                    self.plan.python_for(framework),
                    config_args(config.to_dict()),
                    log,
                    self.launcher or LocalLauncher(),
                    env,
                    cwd=self.writer.path,
                )
            except OSError as exc:
                error = {"kind": "exception", "message": str(exc)}
                proc = None
            if proc is not None:
                self.current = proc
                if self._cancelled:
                    await proc.terminate()
                if self.sampler is not None:
                    self.sampler.set_target(probe_id, proc.pid)
                try:
                    async for line in proc.lines(lambda: stall_limit(self.plan.stall_timeout, None)):
                        try:
                            event = parse_line(line or b"")
                        except Malformed:
                            continue
                        if event["type"] == "error":
                            error = event
                        elif event["type"] == "done":
                            done = event
                    returncode = await proc.process.wait()
                    await proc.finish_log()
                    if proc.ending == "stalled":
                        error = {"kind": "exception", "message": f"stalled for {proc.stalled_after:.0f} s"}
                finally:
                    proc.close()
                    self.current = None
                    if self.sampler is not None:
                        self.sampler.set_target(None, None)
                if not error and not done and returncode == -signal.SIGKILL and not self._cancelled:
                    # The kernel's OOM killer leaves no message: a SIGKILL we did not send.
                    error = {"kind": "oom", "message": "killed by SIGKILL (the system ran out of memory?)"}
                elif not error and not done:
                    error = {"kind": "exception", "message": describe_exit(returncode)}
        result = "ok" if done and not error else ("oom" if error.get("kind") == "oom" else "error")
        self._parent_event(
            "probe",
            None,
            probe=probe_id,
            framework=framework,
            model=model,
            batch_size=batch,
            result=result,
            reason=str(error.get("message", ""))[:300],
            peak_bytes=done.get("peak_bytes"),
            seconds=time.monotonic() - started,
            **at,
        )
        return result

    async def _run_one(self, spec: RunSpec) -> None:
        run_config, env = self.resolved.run_config(
            spec.framework, spec.model, spec.run_id, spec.devices, spec.point, spec.nodes
        )
        python = self.plan.python_for(spec.framework)
        if spec.nodes > 1:  # where the framework meets the other nodes: node 0's to say (``cluster``)
            why = await self._meet(spec, run_config, env)
            if why:
                self._run_start(spec, python)
                self._parent_event("run_end", spec.run_id, status="failed", reason=why)
                return
        if run_config.profile:
            try:
                run_config.trace_path = str(self.writer.trace_path(spec.run_id))
            except OSError:
                pass  # no traces/ folder: the run is still profiled; with no path its trace is not kept
        config = run_config.to_dict()
        launcher = self.launcher or launcher_for(run_config)
        self._stop_current = False
        try:
            # Unbuffered: what a full disk refused is said (log_problem), never raised again at close.
            log = open(self.writer.log_path(spec.run_id), "ab", buffering=0)  # closed below
        except OSError as exc:
            self.storage_failed(self.writer.failed_write(exc, "a runner's log"))
            self._parent_event("run_end", spec.run_id, status="failed", reason=f"no log: {exc.strerror}")
            return
        with log:
            try:
                proc = await start_runner(
                    python, config_args(config), log, launcher, env, cwd=self.writer.path
                )
            except OSError as exc:
                self._run_start(spec, python)
                self._parent_event(
                    "run_end", spec.run_id, status="failed", reason=f"could not start {python}: {exc}"
                )
                return
            self.current, self.current_spec = proc, spec
            if self._cancelled:  # cancel() came while the process was starting
                await proc.terminate()
            self._run_start(spec, python, proc.pid)
            if self.sampler is not None:
                self.sampler.set_target(spec.run_id, proc.pid, self._run_gpus(spec), listed=spec.nodes > 1)
            try:
                malformed = await self._pump(spec, proc, log)
                returncode = await proc.process.wait()
                await proc.finish_log()
            finally:
                proc.close()
                if self.sampler is not None:
                    self.sampler.set_target(None, None)
                self.current, self.current_spec = None, None
        state = self.model.runs[spec.run_id]
        if self._stop_current:
            status, reason = "stopped", "stopped by user"
        elif self.storage_error is not None:
            status, reason = "failed", f"the session could not be written: {self.writer.failure}"
        elif proc.ending == "stalled":
            status, reason = (
                "failed",
                f"stalled: the runner sent nothing for {proc.stalled_after:.0f} s and was stopped "
                "(--stall-timeout)",
            )
        elif self._cancelled:
            status, reason = "interrupted", "session interrupted"
        elif state.status in ("failed", "unavailable"):
            status, reason = state.status, state.reason
        elif state.done and (diverged := state.divergence()) is not None:
            status, reason = "diverged", diverged  # it ran to its end, but its loss says it did not train
        elif state.done:
            status, reason = "ok", ""
        else:
            status, reason = "failed", describe_exit(returncode)
        if spec.nodes > 1:  # the run ends once every node's has: a node's failure is the run's
            status, reason = await self._settle(spec, status, reason)
        self._end_run(spec, status, reason, returncode, malformed, proc.log_problem)

    async def _meet(self, spec: RunSpec, config: RunConfig, env: dict[str, str]) -> str:
        """Before a run on several nodes starts: its ``config`` and ``env`` told where its framework meets
        the other nodes; '' when they are, else why the run cannot start. One benchtui alone has no
        other node to meet (``cluster.HeadEngine`` and ``cluster.Follower`` do)."""
        return f"a run on {spec.nodes} nodes needs a benchtui on each node (--node-rank, --rendezvous)"

    async def _settle(self, spec: RunSpec, status: str, reason: str) -> tuple[str, str]:
        """After this node's runner of a run on several nodes ended (``status``, ``reason``): how the run
        ended, once the other nodes' runs have (``cluster``)."""
        return status, reason

    def _end_run(
        self,
        spec: RunSpec,
        status: str,
        reason: str,
        returncode: int | None,
        malformed: int,
        log_problem: str | None = None,
    ) -> None:
        """The run's ``run_end``: how it ended, what the sampler saw while it ran, and what its log lost
        when the log could not be written (``RunnerProcess.log_problem``)."""
        state = self.model.runs[spec.run_id]
        self._parent_event(
            "run_end",
            spec.run_id,
            status=status,
            reason=reason,
            returncode=returncode,
            malformed=malformed,
            **({"log_problem": log_problem} if log_problem else {}),
            other_cpu_cores=state.other_cpu,  # what the sampler saw; loading must not need the samples
            other_gpu_processes=state.other_gpu_procs,
            other_gpu_memory=state.other_gpu_mem,
            **({"per_gpu": state.per_gpu()} if state.gpu_sums else {}),
            **state.counters(),  # GPU utilization and SM/tensor/DRAM activity means, as sampled
        )

    async def _pump(self, spec: RunSpec, proc: RunnerProcess, log: Any) -> int:
        """Read the runner's events until its run is over (``RunnerProcess.lines``); return how many were malformed.

        Every line is checked (``parse_line``); a bad one is counted, and its reason goes to the
        run's log. The run's tag is the parent's: a runner's own ``run`` field is overwritten.
        """
        malformed = 0
        prefix = '{"run":' + json.dumps(spec.run_id) + ","
        run = self.model.runs[spec.run_id]
        async for line in proc.lines(lambda: stall_limit(self.plan.stall_timeout, run)):
            try:
                if line is None:
                    raise Malformed(f"a line longer than {MAX_LINE_BYTES} bytes")
                event = parse_line(line)
                if event["type"] in PARENT_ONLY:
                    raise Malformed(f"a {event['type']!r} event is the parent's to write, not a runner's")
            except Malformed as exc:
                malformed += 1
                note = f"[benchtui] malformed event line ({exc}): {(line or b'')[:200]!r}\n"
                self._write(_write_log, log, note)
                continue
            tagged = "run" not in event and "node" not in event
            event["run"] = spec.run_id
            event.pop("node", None)  # the node a line came from is the parent's to say (node 0's: none)
            self.model.apply(event)
            self._on_event(spec, event)
            if tagged:  # the runner's own bytes, tagged: no second serialisation on the hot path
                self._write(self.writer.append_raw, prefix + line.decode("utf-8").strip()[1:])
            else:
                self._write(self.writer.append, event)
            if self.listener is not None:
                self.listener(event)
            kind = event["type"]
            if kind == "epoch" or (
                kind == "phase" and event.get("name") == "first_batch" and event.get("edge") == "start"
            ):
                self._read_energy(spec.run_id, int(event.get("epoch") or 0) if kind == "epoch" else 0)
        return malformed

    def _on_event(self, spec: RunSpec, event: dict[str, Any]) -> None:
        """A runner's event, just folded into the model, before it is written and shown (a subclass's hook:
        the watch engine learns the command's framework from its hello)."""

    def _run_gpus(self, spec: RunSpec) -> list[int]:
        """The NVML indices of the GPUs a run trains on (its first ``devices`` of the session's)."""
        return self.placement.nvml_indices[: max(1, spec.devices)]

    def _read_energy(self, run_id: str, epoch: int) -> None:
        """The GPUs' energy counter at the first batch (epoch 0) and at each epoch's end: joules per image
        (a data-parallel run's: the sum over its GPUs)."""
        spec = self.model.runs[run_id].spec
        mj = self.sampler.energy_mj(self._run_gpus(spec) or None) if self.sampler is not None else None
        if mj is not None:
            self._parent_event("energy", run_id, epoch=epoch, mj=mj)


if TYPE_CHECKING:
    _source: type[SessionSource] = Engine  # mypy checks that the live screen can drive an engine

"""The session model: runs and their figures, built by folding events one at a time.

The live screens, the headless progress display and the final ``summary.json`` all
use this one fold, so a summary is always recomputable from ``events.jsonl``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchtui.core.fmt import plural
from benchtui.core.model import analysis, efficiency, generation_figures, nodes, parity, scaling, sweeps, why
from benchtui.core.model.cell import (
    HEADLINE,
    NO_COMMAND,
    NO_TIMINGS,
    NO_TIMINGS_FAILED,
    CellSummary,
    FrameworkRatio,
    ParityEntry,
    PerFlop,
    RefusedRatio,
    ScalingCurve,
    SessionSummary,
)
from benchtui.core.model.generation import GenerationRun, token_step_of_event
from benchtui.core.model.runs import GPU_COUNTERS, NodeRun, RunState, parse_loss
from benchtui.core.model.stats import Ratio, describe, mean, quantile
from benchtui.core.model.status import CUT_SHORT, FINAL, CautionKind, CellStatus, RunStatus, caution
from benchtui.core.plan.plan import Plan, run_order
from benchtui.core.plan.sweep import NO_POINT, Point, applies
from benchtui.core.wire.events import (
    BatchEvent,
    DoneEvent,
    EnergyEvent,
    EpochEvent,
    ErrorEvent,
    FlopsEvent,
    HelloEvent,
    MemoryEvent,
    ModelEvent,
    PhaseEvent,
    ProfileEvent,
    RanksEvent,
    RunEndEvent,
    RunStartEvent,
    SettingsEvent,
    prune_gpu_sample,
)
from benchtui_runners import catalog
from benchtui_runners.wire import TokensEvent

SUMMARY_SCHEMA = 2  # 2: a row's warnings are {kind, message} (were sentences)
#: Mean CPU (in cores) used by other processes during a run from which its row carries a caution, even
#: when the run's own threads still had cores of their own (the verdict's rule below is not broken).
OTHER_LOAD_WARN_CORES = 0.5
#: The verdict's rule for a loaded machine (issue 30). A run's times measure the machine, not the framework,
#: when other processes kept busy more of the host's cores than the run left idle, by more than this slack:
#: ``others > cores - needed + CONTENTION_SLACK_CORES``, where ``needed`` is what the run itself asked of
#: the host (on a CPU its threads, over every process of the run, at most the cores; on a GPU one core per
#: process, the thread that feeds the device). On a CPU an oversubscribed OpenMP pool stalls at every
#: barrier on the thread that is not running (2 threads on 2 busy cores: steps of 1-6 s against 0.35-0.5 s
#: with 1 thread); on a GPU the device does the arithmetic and the host only needs that one core. The
#: slack is the parent's own sampling and bookkeeping (about a tenth of a core), which counts as "other".
#: A cell whose runs break the rule gets no winner: its verdict says "unreliable: " and why.
CONTENTION_SLACK_CORES = 0.25
#: Latency per batch (forward only for inference, a training step otherwise): these quantiles of
#: the batch times after warm-up, as ``latency_p50_s`` and so on.
LATENCY_QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
#: Most steps one batch line of a watched command may stand for when its hooks gave no steps per epoch
#: (a window is about 0.3 s of steps: a million is a microsecond a step). A plan's run is bounded by
#: its own steps per epoch.
MAX_WATCH_WINDOW = 1 << 20
#: No run looked up yet (``SessionModel.fold_batches``): never equal to a run's id, None included.
_NO_RUN: Any = object()
_RUNNING = RunStatus.RUNNING  # a global's lookup, not an enum's: set at every batch


class SessionModel:
    """Every run of a plan and its state, updated by ``apply(event)``."""

    def __init__(self, plan: Plan, gpu_window: int = 600, host: dict[str, Any] | None = None) -> None:
        self.plan = plan
        # The host's logical cores as session.json records them (``host.cpu_count``): what the load of other
        # processes is measured against. None: not recorded (a session written by hand, or a caller that
        # did not say); the contention rule then judges nothing (``run_contention``).
        count = (host or {}).get("cpu_count")
        self.host_cores: int | None = (
            count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
        )
        # A watch trains as many epochs as its command does: 0 sets no limit.
        epochs = 0 if plan.watch else plan.epochs
        self.runs: dict[str, RunState] = {s.run_id: RunState(s, epochs) for s in run_order(plan)}
        self.current: str | None = None
        self.gpu_samples: deque[dict[str, Any]] = deque(maxlen=gpu_window)
        self.malformed = 0
        self.events = 0
        self.unknown_runs = 0
        # The largest-batch search (--batch-size auto): every probe, and the choice per model.
        self.probes: list[dict[str, Any]] = []
        self.batch_choices: dict[str, dict[str, Any]] = {}
        # A sweep's: by (model, point key) for its auto points (the ``batch_choice`` event's "point").
        self.point_choices: dict[tuple[str, str], dict[str, Any]] = {}
        self.probing: dict[str, Any] | None = None  # the probe in progress
        # Whether the sampler could read the GPU's profiling counters (its ``counters`` event), once.
        self.counters: dict[str, Any] | None = None
        self._handlers = {
            name[len("_on_") :]: getattr(self, name) for name in dir(self) if name.startswith("_on_")
        }

    # -- folding events -------------------------------------------------------------
    def apply(self, event: dict[str, Any]) -> None:
        self.events += 1
        kind = event.get("type")
        if kind == "batch" and "node" not in event:
            # The common event (a million in a long session): what the path below does for a batch, without
            # the tests of the other types and the handler's lookup.
            run_id = event.get("run")
            run = self.runs.get(run_id) if type(run_id) is str else None
            if run is None:
                if run_id is not None:
                    self.unknown_runs += 1
                return
            try:
                self._handlers["batch"](run, event)
            except (TypeError, ValueError, KeyError):
                self.malformed += 1
            return
        if "node" in event:  # another machine's share of a run (issue 33): never the run's own figures
            self._apply_node(event, kind)
            return
        if kind == "gpu":
            event = prune_gpu_sample(event)  # kept by the hundred: only what the sampler writes
            self.gpu_samples.append(event)
            self._note_load(event)
            return
        if kind == "probe_start":
            self.probing = event
            return
        if kind == "probe":
            self.probes.append(event)
            self.probing = None
            return
        if kind == "batch_choice":
            point = event.get("point")
            if point:  # a sweep's auto point: its own choice (by the point's key)
                self.point_choices[(str(event.get("model")), _key(point))] = event
            else:
                self.batch_choices[str(event.get("model"))] = event
            return
        if kind == "counters":
            self.counters = {k: event.get(k) for k in ("available", "source", "reason")}
            return
        run_id = event.get("run")
        run = self.runs.get(run_id) if isinstance(run_id, str) else None
        if run is None:
            if run_id is not None:
                self.unknown_runs += 1
            return
        # One dict lookup per event: this runs a million times when a long session loads.
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            try:
                handler(run, event)
            except (TypeError, ValueError, KeyError):
                self.malformed += 1  # a well-formed line with nonsense fields

    def _apply_node(self, event: dict[str, Any], kind: Any) -> None:
        """An event node k's benchtui sent node 0 (``node``: k): folded into the run's ``nodes[k]`` by the same
        handlers as a run's own, except what belongs to the session (the current run, its malformed count,
        the GPU samples the live screen draws), which node k's events never touch."""
        node, run_id = event.get("node"), event.get("run")
        run = self.runs.get(run_id) if isinstance(run_id, str) else None
        if not isinstance(node, int) or isinstance(node, bool) or node < 1 or run is None:
            if run_id is not None and run is None:
                self.unknown_runs += 1
            return
        share = run.nodes.get(node)
        if share is None:
            share = run.nodes[node] = NodeRun(run.spec, run.epochs_planned, node=node)
        try:
            if kind == "gpu":
                self._node_gpus(share, event)
            elif kind == "run_start":
                share.status = RunStatus.STARTING
                share.started_t = event.get("t")
                self._run_host(share, event)
            elif kind == "run_end":
                if isinstance(event.get("per_gpu"), list):
                    share.per_gpu_recorded = [dict(g) for g in event["per_gpu"] if isinstance(g, dict)]
                share.status = RunStatus.parse(event.get("status", "failed"))
                if event.get("reason"):
                    share.reason = str(event["reason"])
                share.malformed = int(event.get("malformed") or 0)
                share.ended_t = event.get("t")
            else:
                if kind == "phase" and event.get("name") == "first_batch" and event.get("edge") == "start":
                    t = event.get("t")
                    share.trained_from = float(t) if isinstance(t, (int, float)) else None
                handler = self._handlers.get(kind) if isinstance(kind, str) else None
                if handler is not None:
                    handler(share, event)
        except (TypeError, ValueError, KeyError):
            self.malformed += 1

    @staticmethod
    def _node_gpus(share: NodeRun, sample: dict[str, Any]) -> None:
        """Node k's GPU sample while its share of the run trained: each of the run's GPUs there."""
        gpus, devices, watched = sample.get("gpus"), sample.get("devices"), sample.get("watched")
        if not isinstance(gpus, list):
            return
        indices = devices if isinstance(devices, list) and devices else [watched]
        readings = [
            (i, gpus[i])
            for i in indices
            if isinstance(i, int)
            and not isinstance(i, bool)
            and 0 <= i < len(gpus)
            and isinstance(gpus[i], dict)
        ]
        share.last_gpus = [dict(g) for _, g in readings]
        # While it trained: live, its status says so; loading folds samples after every other event, so then by
        # the events' ``t`` (node 0 puts what node k sends on its own clock), its first batch to its run_end.
        t, start = sample.get("t"), share.trained_from
        trained = share.status is RunStatus.RUNNING or (
            share.finished
            and isinstance(t, (int, float))
            and start is not None
            and start < t <= (share.ended_t if isinstance(share.ended_t, (int, float)) else math.inf)
        )
        if trained:
            for index, gpu in readings:
                share.add_gpu_reading(index, gpu)

    @staticmethod
    def _run_host(run: RunState, event: dict[str, Any]) -> None:
        """The machine and process a run_start names (several nodes: each node's)."""
        host, pid = event.get("host"), event.get("pid")
        if isinstance(host, str):
            run.host = host
        if isinstance(pid, int) and not isinstance(pid, bool):
            run.pid = pid

    def _note_load(self, sample: dict[str, Any]) -> None:
        """Count the CPU that processes other than the runner used while it trained."""
        run_id = sample.get("run")
        run = self.runs.get(run_id) if isinstance(run_id, str) else None
        host = sample.get("host")
        if run is None or run.status is not RunStatus.RUNNING or not isinstance(host, dict):
            return
        busy, mine = host.get("system_busy_cores"), host.get("cpu_percent")
        if isinstance(busy, (int, float)) and isinstance(mine, (int, float)):
            run.other_cpu_sum += max(0.0, busy - mine / 100.0)
            run.other_cpu_samples += 1
        watched, gpus = sample.get("watched"), sample.get("gpus")
        devices = sample.get("devices")
        if isinstance(devices, list) and isinstance(gpus, list):  # a data-parallel run's GPUs
            for index in devices:
                if isinstance(index, int) and 0 <= index < len(gpus) and isinstance(gpus[index], dict):
                    run.add_gpu_reading(index, gpus[index])
        if isinstance(gpus, list) and run.phase != "profile":  # the profiler's steps are not training's
            indices = devices if isinstance(devices, list) and devices else [watched]
            readings = [
                gpus[i]
                for i in indices
                if isinstance(i, int) and 0 <= i < len(gpus) and isinstance(gpus[i], dict)
            ]
            run.add_counters(readings)
        if isinstance(watched, int) and isinstance(gpus, list) and 0 <= watched < len(gpus):
            gpu = gpus[watched]
            procs, mem = (
                (gpu.get("other_procs"), gpu.get("other_mem")) if isinstance(gpu, dict) else (None, None)
            )
            if isinstance(procs, int):
                run.other_gpu_procs = max(procs, run.other_gpu_procs or 0)
            if isinstance(mem, int):
                run.other_gpu_mem = max(mem, run.other_gpu_mem or 0)

    def _on_run_start(self, run: RunState, event: RunStartEvent) -> None:
        # A watched command runs from its start: nothing is built before it (its hooks say hello later).
        run.status = RunStatus.RUNNING if self.plan.watch else RunStatus.STARTING
        run.started_t = event.get("t")
        if "host" in event:  # a run on several nodes: node 0's machine
            self._run_host(run, dict(event))
        self.current = run.spec.run_id

    def _on_hello(self, run: RunState, event: HelloEvent) -> None:
        if run.hello:
            raise ValueError("a second hello: the first is kept")
        if not self.plan.watch:  # an epoch has at most the plan's samples (a last partial batch is dropped)
            for name in ("steps_per_epoch", "samples_per_epoch"):
                said = event.get(name)
                if isinstance(said, int) and said > self.plan.samples:
                    raise ValueError(
                        f"hello.{name} {said} is more than the plan's {self.plan.samples} samples"
                    )
        run.hello = dict(event)
        run.status = RunStatus.RUNNING if self.plan.watch else RunStatus.BUILDING

    def _on_phase(self, run: RunState, event: PhaseEvent) -> None:
        name, edge = str(event["name"]), str(event["edge"])
        t = float(event.get("at", event["t"]))
        run.phases.setdefault(name, {})[edge] = t
        run.phase = name if edge == "start" else ""
        if name == "first_batch" and edge == "start":
            run.status = RunStatus.RUNNING
            run.current_epoch = 1

    def fold_batches(self, batches: Sequence[Any]) -> None:
        """Batch events given by their checked fields, in the file's order: objects with ``run``, ``epoch``,
        ``step``, ``seconds`` and ``steps`` (``events.batch_of``'s Structs; none with a ``node``). What
        ``apply`` does with each as a dict, by the same fold (``_batch``): a load folds its million batch
        lines so, a few thousand a call, and makes no dict of them."""
        self.events += len(batches)
        runs, fold = self.runs, self._batch
        last: Any = _NO_RUN
        run: RunState | None = None
        bound: Any = None
        for batch in batches:
            run_id = batch.run
            if run_id != last:  # a run's events come in long streaks: looked up once a streak
                last, run = run_id, runs.get(run_id)
                if run is not None:  # no hello comes amid a list of batches: the bound holds for it
                    bound = self._window_bound(run)
            if run is None:
                if run_id is not None:
                    self.unknown_runs += 1
                continue
            try:
                fold(run, batch.epoch, batch.step, float(batch.seconds), batch.steps or 1, bound)
            except (TypeError, ValueError, KeyError):
                self.malformed += 1

    def _on_batch(self, run: RunState, event: BatchEvent) -> None:
        steps = int(event.get("steps") or 1)
        seconds, epoch, step = float(event["seconds"]), int(event["epoch"]), int(event["step"])
        self._batch(run, epoch, step, seconds, steps, self._window_bound(run))

    def _window_bound(self, run: RunState) -> Any:
        """The last step a window of ``run`` may end at: its runner's steps per epoch (its hello's, itself at
        most the plan's samples), so what one line stands for is bounded by the plan, never by the line; None
        for a watched command whose hooks gave no count (its windows hold at most MAX_WATCH_WINDOW steps)."""
        said = run.hello.get("steps_per_epoch")
        return (
            said if isinstance(said, int) and said > 0 else (None if self.plan.watch else self.plan.samples)
        )

    def _batch(self, run: RunState, epoch: int, step: int, seconds: float, steps: int, bound: Any) -> None:
        """The one fold of a batch event (a dict's by ``_on_batch``, a Struct's by ``fold_batches``), ``bound``
        its run's ``_window_bound``; raises ValueError for one that makes no sense for its run (``apply``
        counts it malformed)."""
        # A window of steps: each of its steps took the window's mean (benchtui_runners.timing).
        if steps < 1:
            raise ValueError("a window of no steps")
        if (run.epochs_planned and epoch > run.epochs_planned) or step < steps:
            raise ValueError("a step outside the plan")
        if bound is not None and step > bound:
            raise ValueError(f"step {step} is beyond the epoch's {bound} steps")
        if steps > MAX_WATCH_WINDOW and self.plan.watch:
            raise ValueError(f"a window of {steps} steps (at most {MAX_WATCH_WINDOW})")
        # Steps by their numbers: a window that does not start where the last one ended means
        # lost lines; the gap is counted and said, never filled in.
        before = run.current_step if epoch == run.current_epoch else 0
        if step - steps < before:
            raise ValueError("steps already counted")
        run.missing_steps += step - steps - before
        if steps == 1:
            run.batch_seconds.append(seconds)
            run.batch_epochs.append(epoch)
        else:
            run.batch_seconds.extend([seconds] * steps)
            run.batch_epochs.extend([epoch] * steps)
        if step > steps or epoch > 1:  # the run's first step is its own window (compiling, warming up)
            window = seconds * steps
            if window > run.window_max_s:
                run.window_max_s = window
        run.current_epoch = epoch
        run.current_step = step
        run.status = _RUNNING

    def _on_settings(self, run: RunState, event: SettingsEvent) -> None:
        settings = event.get("settings")
        if isinstance(settings, dict):  # a new dict: the hello event as read stays as it was
            run.hello["settings"] = {**(run.hello.get("settings") or {}), **settings}

    def _on_epoch(self, run: RunState, event: EpochEvent) -> None:
        epoch = int(event["epoch"])
        if run.epochs_planned and epoch > run.epochs_planned:
            raise ValueError("an epoch outside the plan")
        if epoch in run.epoch_times:
            raise ValueError(f"epoch {epoch} again: the first is kept")
        run.epoch_times[epoch] = float(event["seconds"])
        run.epoch_samples[epoch] = int(event.get("samples") or 0)
        # From the epoch's start to its first batch's step (runners since issue 30; older ones omit it):
        # a stall at an epoch's start (a data iterator rebuilt, a thread pool resized) shows as such.
        for key, into in (("loss", run.losses), ("loss_min", run.loss_mins), ("loss_max", run.loss_maxs)):
            if (loss := parse_loss(event.get(key))) is not None:
                into[epoch] = loss
        waited = event.get("to_first_batch_s")
        if isinstance(waited, (int, float)) and not isinstance(waited, bool) and math.isfinite(waited):
            if waited >= 0:
                run.to_first_batch[epoch] = float(waited)

    def _on_memory(self, run: RunState, event: MemoryEvent) -> None:
        peak = event.get("peak_bytes")
        if peak is not None:
            run.peak_bytes = int(peak)
        run.memory_source = str(event.get("source", ""))

    def _on_flops(self, run: RunState, event: FlopsEvent) -> None:
        run.flops = efficiency.flops_of_event(dict(event))

    def _on_model(self, run: RunState, event: ModelEvent) -> None:
        run.model_info = parity.model_info_of_event(dict(event))

    def _on_energy(self, run: RunState, event: EnergyEvent) -> None:
        run.energy_mj[int(event["epoch"])] = float(event["mj"])

    def _on_done(self, run: RunState, event: DoneEvent) -> None:
        run.done = True
        self._on_memory(run, event)

    def _on_error(self, run: RunState, event: ErrorEvent) -> None:
        kind = event.get("kind", "exception")
        message = str(event.get("message", ""))
        run.status = RunStatus.UNAVAILABLE if kind == "unavailable" else RunStatus.FAILED
        run.reason = message if kind != "oom" else f"out of memory: {message}"

    def _on_ranks(self, run: RunState, event: RanksEvent) -> None:
        if event["epoch"] == 1 and event["step"] == event.get("steps", 1):
            return  # the run's first window: compiling and warming up, on every rank
        run.add_ranks(list(event["seconds"]), int(event.get("steps") or 1))

    def _on_tokens(self, run: RunState, event: TokensEvent) -> None:
        # One generate step (issue 34), after its batch window: the run's own, in the order they came.
        step = token_step_of_event(event)
        if run.epochs_planned and step.epoch > run.epochs_planned:
            raise ValueError("a generate step outside the plan")
        if run.generation is None:
            run.generation = GenerationRun()
        run.generation.steps.append(step)

    def _on_profile(self, run: RunState, event: ProfileEvent) -> None:
        run.profile = dict(event)

    def _on_run_end(self, run: RunState, event: RunEndEvent) -> None:
        recorded = {n: float(v) for n in GPU_COUNTERS if isinstance(v := event.get(n), (int, float))}
        if recorded:
            run.counters_recorded = recorded
        if isinstance(event.get("per_gpu"), list):
            run.per_gpu_recorded = [dict(g) for g in event["per_gpu"] if isinstance(g, dict)]
        run.status = RunStatus.parse(event.get("status", "failed"))
        if event.get("reason"):
            run.reason = str(event["reason"])
        if run.status is RunStatus.OK and (diverged := run.divergence()) is not None:
            # Decided from the epochs folded, the engine's run_end or not: a session recorded before the
            # engine knew the word still shows its run as such.
            run.status, run.reason = RunStatus.DIVERGED, diverged
        run.malformed = int(event.get("malformed") or 0)
        run.log_problem = str(event.get("log_problem") or "")
        if isinstance(event.get("other_cpu_cores"), (int, float)):
            run.other_cpu_recorded = float(event["other_cpu_cores"])
        if isinstance(event.get("other_gpu_processes"), int):
            run.other_gpu_procs = event["other_gpu_processes"]
        if isinstance(event.get("other_gpu_memory"), int):
            run.other_gpu_mem = event["other_gpu_memory"]
        self.malformed += run.malformed
        run.ended_t = event.get("t")
        if self.current == run.spec.run_id:
            self.current = None

    # -- reading the model ----------------------------------------------------------
    def cells(self) -> list[tuple[str, str]]:
        """(framework, model) pairs in display order: by model, then framework."""
        return [(fw, m) for m in self.plan.models for fw in self.plan.frameworks]

    def grid(self) -> list[tuple[str, str, Point]]:
        """Every cell, (framework, model, sweep point), in display order: by model, then point, then
        framework (a plan without a sweep: ``cells`` at ``Point()``)."""
        return [
            (fw, m, p) for m in self.plan.models for p in self.plan.points() for fw in self.plan.frameworks
        ]

    def cell_runs(
        self,
        framework: str,
        model: str,
        devices: int | None = None,
        point: Point | None = None,
        nodes: int | None = None,
    ) -> list[RunState]:
        """The runs of a cell: at the plan's (nodes, devices) (every table's figures), or at ``devices`` on
        ``nodes`` (a scaling session's other points); at sweep ``point`` (None: the plan's first, ``Point()``
        without a sweep), whose runs are those of its ``effective`` point for this framework and model."""
        devices = devices or self.plan.devices
        nodes = nodes or self.plan.nodes
        at = self.plan.effective(self.plan.points()[0] if point is None else point, framework, model)
        return [
            r
            for r in self.runs.values()
            if r.spec.framework == framework
            and r.spec.model == model
            and r.spec.devices == devices
            and r.spec.nodes == nodes
            and r.spec.point == at
        ]

    def measured_runs(self, framework: str, model: str, point: Point | None = None) -> list[RunState]:
        """The runs a cell's figures come from: its successful ones; in a watch, its run however it ended
        once it has timings (a training stopped after hours with Ctrl+C measured what it ran; the row's
        status still says how it ended)."""
        runs = self.cell_runs(framework, model, point=point)
        if not self.plan.watch:
            return [r for r in runs if r.status is RunStatus.OK]
        return [
            r
            for r in runs
            if r.finished
            and r.status is not RunStatus.DIVERGED  # its loss said it did not train: its times are no result
            and (r.status is RunStatus.OK or r.epoch_times or r.batch_seconds)
        ]

    def batch_size(self, framework: str, model: str, point: Point | None = None) -> int:
        """A cell's per-device batch: what its successful runs' runners echoed (their config), else, before any
        run, the size the batch search chose (``batch_choice``), else the plan's (a session before the runners
        echoed it: its session.json's plan records the chosen sizes). The engine never writes into the plan."""
        for run in self.cell_runs(framework, model, point=point):
            if run.status is RunStatus.OK and (size := analysis.config_batch(run)) is not None:
                return size
        at = self.plan.points()[0] if point is None else point
        for choice in (*self._point_choices(model, framework, at), self.batch_choices.get(model, {})):
            chosen = choice.get("chosen")
            size = chosen.get(framework) if isinstance(chosen, dict) else None
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                return size
        return self.plan.at(at, framework, model).batch_size(model, framework)

    def _point_choices(self, model: str, framework: str, point: Point) -> list[dict[str, Any]]:
        """The batch search's choices that may hold a point's size: by the point's key, then without its batch
        (a search per point's other settings), for the point and for the one whose runs it reads."""
        if not point or not self.point_choices:
            return []
        keys: list[str] = []
        for at in (point, self.plan.effective(point, framework, model)):
            for key in (at.key, at.without("batch").key):
                if key not in keys:
                    keys.append(key)
        return [c for k in keys if (c := self.point_choices.get((model, k))) is not None]

    def row(self, framework: str, model: str, point: Point | None = None) -> CellSummary:
        """The summary of one (framework, model) at sweep ``point`` (None: the plan's first): the contract of
        summary.json (``CellSummary.to_json``)."""
        point = self.plan.points()[0] if point is None else point
        runs = self.cell_runs(framework, model, point=point)
        ok = [r for r in runs if r.status is RunStatus.OK]
        failed = [r for r in runs if r.status is RunStatus.FAILED]
        unavailable = [r for r in runs if r.status is RunStatus.UNAVAILABLE]
        diverged = [r for r in runs if r.status is RunStatus.DIVERGED]
        row: dict[str, Any] = {
            "framework": framework,
            "model": model,
            "point": point.to_json() if point else None,
            "batch_size": self.batch_size(framework, model, point),
            "runs": len(ok),
            "runs_planned": len(runs),
            "failed_runs": len(failed),
        }
        if unavailable and not ok:
            row["status"], row["reason"] = CellStatus.UNAVAILABLE, unavailable[0].reason
        elif failed:
            row["status"], row["reason"] = CellStatus.FAILED, failed[0].reason or "runner failed"
        elif diverged and not ok:
            row["status"], row["reason"] = CellStatus.DIVERGED, _diverged_reason(diverged, runs)
        elif ok:
            row["status"] = CellStatus.OK
            unfinished = [r for r in runs if r.status is not RunStatus.OK]
            if diverged:  # the runs that trained give the figures; the cell says which did not
                row["reason"] = _diverged_reason(diverged, runs)
            elif unfinished:
                row["reason"] = (
                    f"{len(unfinished)} of {len(runs)} runs did not finish ({unfinished[0].status})"
                )
                if all(r.status in CUT_SHORT for r in unfinished):
                    # Interrupted, stopped or skipped: the cell's protocol was not carried out whole. Its
                    # finished runs still give its figures (and a verdict); runs to come leave it "ok".
                    row["status"] = CellStatus.INCOMPLETE
        elif any(r.status in CUT_SHORT for r in runs):
            row["status"] = CellStatus.INCOMPLETE
            row["reason"] = next(r.reason or str(r.status) for r in runs if r.status in FINAL)
        else:
            row["status"] = CellStatus.PENDING
        partial: list[RunState] = []
        if self.plan.watch:
            ok = self.measured_runs(framework, model, point)
            row["runs"] = len(ok)
        elif row["status"] == CellStatus.INCOMPLETE and not ok:
            # No run finished: what the runs cut short measured before they stopped (their epochs done,
            # their build) is shown, said as such; never a ratio or a verdict (those take finished runs).
            partial = [
                r for r in runs if r.status in CUT_SHORT and (r.epoch_times or r.phase_seconds("build"))
            ]
            ok = partial
        row["partial_runs"] = len(partial)
        per_run = [r.figures() for r in ok]
        row["spread"] = {}
        for name in HEADLINE:
            stats = describe([f[name] for f in per_run if f[name] is not None])
            row[name] = stats["mean"] if stats else None
            row["spread"][name] = stats
        # Throughput is total images over total time, never a mean of the runs' rates.
        row["images_per_s"] = analysis.throughput(ok)
        # 95% bootstrap intervals (over runs, then epochs within runs; seeded, cached).
        row["ci"] = {name: analysis.figure_ci(ok, name) for name in HEADLINE}
        for name, interval in row["ci"].items():
            if row["spread"].get(name):
                row["spread"][name]["ci_low"], row["spread"][name]["ci_high"] = interval or (None, None)
        # Batch times after warm-up: their spread and MAD outliers back the warnings.
        steady_batches = sorted(analysis.cell_batches(ok, steady=True))  # a merge of sorted runs
        row["batch"] = describe(steady_batches)
        # One "median batch" everywhere (table, exports, live screen): after the detected warm-up.
        row["median_batch_s"] = row["batch"]["median"] if row["batch"] else None
        # Warm-up detected from the data (stats.warmup_cut), and the steady state after it.
        cuts = [analysis.warmup_of(r) for r in ok]
        row["warmup_batches"] = [c for c, _ in cuts]
        row["warmup_s"] = [s for _, s in cuts]
        row["steady_images_per_s"] = analysis.steady_throughput(ok)
        row["warnings"] = analysis.cell_warnings(ok, row["spread"], row["batch"])
        if partial:
            done = ", ".join(
                f"{r.spec.run_id}: {len(r.epoch_times)} of {self.plan.epochs} epoch(s)" for r in partial[:3]
            )
            row["warnings"].insert(
                0,
                caution(
                    CautionKind.PARTIAL,
                    f"from run(s) cut short ({row.get('reason') or 'interrupted'}): what they completed "
                    f"before they stopped ({done}); not the plan's full protocol",
                ),
            )
        if diverged:
            row["warnings"].insert(
                0,
                caution(
                    CautionKind.DIVERGED,
                    f"the figures, the verdict and the ratios are from the {plural(len(ok), 'run')} that trained"
                    if ok
                    else "no run trained: no figures, no verdict",
                ),
            )
        # Each epoch's loss (runners since issue 36): the first and last epoch's, a mean over the runs
        # that trained (over the diverged ones when none did: what the cell did say).
        with_loss = [r for r in ok if r.losses] or [r for r in diverged if r.losses]
        if with_loss:
            row["loss_first"] = _mean_loss([r.losses[min(r.losses)] for r in with_loss])
            row["loss_last"] = _mean_loss([r.losses[max(r.losses)] for r in with_loss])
        gaps = [(r, r.missing_epochs()) for r in ok]
        gaps = [(r, missing) for r, missing in gaps if missing or r.missing_steps]
        if gaps:
            run, missing = gaps[0]
            what = f"epoch {', '.join(map(str, missing))}" if missing else f"{run.missing_steps} step(s)"
            row["warnings"].append(
                caution(
                    CautionKind.MISSING_DATA,
                    f"{what} of run {run.spec.run_id} missing from its events (lost lines): the figures "
                    "leave out what is missing"
                    + (f"; {len(gaps) - 1} other run(s) too" if len(gaps) > 1 else ""),
                )
            )
        # From run_end when recorded: loading folds GPU samples last (and only the newest), so
        # the figure must not depend on them for summary.json to be recomputable.
        loads = [r.other_cpu for r in ok if r.other_cpu is not None]
        row["other_cpu_cores"] = max(loads) if loads else None
        loaded = cell_contention(ok, self.host_cores, self.plan.threads)
        if loaded is not None and (loaded.over or loaded.others >= OTHER_LOAD_WARN_CORES):
            row["warnings"].append(caution(CautionKind.CPU_CONTENTION, self._contention_text(loaded)))
        # Each epoch's seconds to its first batch, the mean over the cell's runs (None: no runner said).
        row["to_first_batch_s"] = to_first_batch(ok)
        others = [r.other_gpu_procs for r in ok if r.other_gpu_procs]
        row["other_gpu_processes"] = (
            max(others) if others else (0 if any(r.other_gpu_procs == 0 for r in ok) else None)
        )
        if others:
            mem = max((r.other_gpu_mem or 0 for r in ok), default=0)
            row["warnings"].append(
                caution(
                    CautionKind.GPU_SHARING,
                    f"{max(others)} other process(es) used the GPU during a run"
                    + (f" ({mem / 2**20:.0f} MiB)" if mem else "")
                    + ": its times measure the sharing as much as the framework",
                )
            )
        lost = [r for r in runs if r.log_problem]
        if lost:
            row["warnings"].append(
                caution(
                    CautionKind.LOG_CUT,
                    f"run {lost[0].spec.run_id}'s log is incomplete: {lost[0].log_problem}"
                    + (f"; {len(lost) - 1} other run(s) too" if len(lost) > 1 else ""),
                )
            )
        # --profile: a profile that failed or a trace dropped is a note on the row, never a failed run.
        for note in why.profile_notes(ok, expected=self.profiling):
            row["warnings"].append(caution(CautionKind.PROFILE, note))
        kinds = sorted({k for r in ok if (k := r.device_kind)})
        row["device_kind"] = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else None)
        joules = [j for r in ok if (j := r.joules_per_image()) is not None]
        row["joules_per_image"] = mean(joules) if joules else None
        peaks = [r.peak_bytes for r in ok if r.peak_bytes is not None]
        row["peak_memory_bytes"] = max(peaks) if peaks else None
        row["memory_source"] = ok[0].memory_source if ok else ""
        # Compute efficiency (additive): FLOPs per step, achieved TFLOP/s, % of the GPU's peak.
        eff = efficiency.cell_efficiency(ok, row["images_per_s"], row["ci"].get("images_per_s"))
        if refused := eff.pop("flops_refused"):
            row["warnings"].append(caution(CautionKind.FLOPS_REFUSED, refused))
        row["spread"]["achieved_tflops"] = eff.pop("achieved_tflops_spread")
        row["ci"]["achieved_tflops"] = eff.pop("achieved_tflops_ci")
        row.update(eff)
        # FLOPs per sample: the same count under the name that also fits sequences (additive).
        row["flops_per_sample"] = row.get("flops_per_image")
        self._workload_fields(row, model, runs, steady_batches)
        if self.plan.task == "generate":  # its figures from the steady epochs (no key for another task)
            figures = generation_figures.figures(ok, row["batch_size"] or 0)
            row["generation"] = figures.to_json() if figures is not None else None
        row.update(scaling.device_fields(self.plan, ok, row["batch_size"]))
        row.update(nodes.node_fields(self.plan, ok))
        row["epochs"] = self.plan.epochs
        if self.plan.watch:  # the command's own count, and plainly when it sent no timing at all
            row["epochs"] = max((max(r.epoch_times, default=0) for r in runs), default=0)
            # The batch the hooks said (None: unknown, never the catalog's placeholder).
            row["batch_size"] = row["global_batch"] = self.plan.batch_sizes.get(model)
            if runs and all(r.finished and not (r.batch_seconds or r.epoch_times) for r in runs):
                crashed = len(failed) == len(runs)  # it ended before it could reach a hook
                said = (
                    (NO_TIMINGS_FAILED if crashed else NO_TIMINGS)
                    if self.plan.watch.get("command")
                    else NO_COMMAND
                )
                row["reason"] = f"{row['reason']}; {said}" if row.get("reason") else said
                row["warnings"] = []  # no times: nothing for contention or sharing to cast doubt on
        row["run_ids"] = [r.spec.run_id for r in runs]
        same = self._same_runs(framework, model, point)
        if same is not None:
            row["warnings"].insert(0, caution(CautionKind.SAME_RUNS, same))
        return CellSummary.from_json(row)

    def _same_runs(self, framework: str, model: str, point: Point) -> str | None:
        """'the same runs as batch 4 · channels-last off: tf.keras is channels-last at every setting' for a
        sweep's cell whose runs are another point's (an axis that changes nothing for it); None otherwise."""
        at = self.plan.effective(point, framework, model)
        if at == point:
            return None
        reasons: list[str] = []
        for axis, value in point.items:
            if at.get(axis) != value and (why := applies(axis, framework, model)) and why not in reasons:
                reasons.append(why)
        return f"the same runs as {at.label}" + (f": {'; '.join(reasons)}" if reasons else "")

    def _contention_text(self, loaded: Contention) -> str:
        """The row's caution about other processes' CPU, by the verdict's rule (``CONTENTION_SLACK_CORES``),
        and what the user can do about it: a plan's threads, or a watched command's own pools."""
        if self.plan.watch:
            advice = (
                "stop the other work and watch the command again, its thread pools (torch.set_num_threads, "
                "OMP_NUM_THREADS, tf.config.threading) sized to the cores left idle"
            )
        elif loaded.gpu or loaded.needed <= 1:
            # One thread (the idle cores measured before the plan, or --threads 1): no smaller pool to give.
            advice = "stop the other work and run again"
        else:
            advice = (
                "stop the other work and run again, or give every framework only the idle cores (--threads N)"
            )
        busy = loaded.busy_text()
        if loaded.over:
            return (
                f"{busy} during a run that {loaded.needs_text()}: its times measure the contention as much as "
                f"the framework, so its verdict claims no winner; {advice}"
            )
        return (
            f"{busy} during a run that {loaded.needs_text()}; it still had the cores it needed (the verdict's "
            f"rule), so the verdict stands, but its times may carry some of that load; to be sure, {advice}"
        )

    def _workload_fields(
        self, row: dict[str, Any], model: str, runs: list[RunState], steady_batches: list[float]
    ) -> None:
        """What the cell ran (task, kind, tokens per sample, its network's size), tokens/s, latency, parity.

        ``steady_batches``: the batch times of the cell's successful runs after warm-up, sorted.
        """
        info = catalog.MODELS.get(model)
        row["task"] = self.plan.task or "train"  # sessions before inference: training
        row["kind"] = info.kind if info is not None else "image"
        ident = parity.identity(runs)
        # The runner's word first (its model event, then its settings), else the plan's.
        settings = [r.hello["settings"] for r in runs if isinstance(r.hello.get("settings"), dict)]
        said = [r.model_info.get("tokens_per_sample") for r in runs] + [
            s.get("tokens_per_sample") for s in settings
        ]
        tokens = next((t for t in said if isinstance(t, int) and t > 0), 0)
        if not tokens and info is not None:
            at = self.plan.at(Point.of(row.get("point")))  # a seq-len sweep's point: its own length
            tokens = catalog.tokens_per_sample(model, at.seq_len or info.context)
        row["tokens_per_sample"] = tokens if row["kind"] == "tokens" else 0
        row["params"] = ident["params"] if ident else None
        row["trainable_params"] = ident["trainable_params"] if ident else None
        row["model_source"] = ident["source"] if ident else ""
        row["architecture"] = ident["architecture"] if ident else ""
        # Token models: tokens/s is samples/s times tokens per sample, its interval too.
        per = row["tokens_per_sample"]
        images, interval = row.get("images_per_s"), row["ci"].get("images_per_s")
        row["tokens_per_s"] = images * per if per and images is not None else None
        row["ci"]["tokens_per_s"] = [interval[0] * per, interval[1] * per] if per and interval else None
        steady = row.get("steady_images_per_s")
        row["steady_tokens_per_s"] = steady * per if per and steady is not None else None
        # Latency per batch: quantiles of the batch times after warm-up. With window timing each
        # step of a window carries the window's mean, so these are quantiles of window means.
        for name, q in LATENCY_QUANTILES:
            row[f"latency_{name}_s"] = quantile(steady_batches, q) if steady_batches else None
        ok = [r for r in runs if r.status is RunStatus.OK]
        timing = next(
            (str(r.hello["settings"]["timing"]) for r in ok if (r.hello.get("settings") or {}).get("timing")),
            "",
        )
        row["timing"] = timing.split(":")[0] or None
        entry = self.parity(model, Point.of(row.get("point")) or None)
        if entry is not None and entry.flagged and row["framework"] in entry.frameworks:
            row["warnings"].append(caution(CautionKind.ARCHITECTURE, entry.text))
        if self.plan.task == "generate" and ok:  # the sides' decoding, as for architectures
            differs = self.generation_parity(model, Point.of(row.get("point")) or None)
            if differs is not None:
                row["warnings"].append(caution(CautionKind.ARCHITECTURE, differs))

    def parity(self, model: str, point: Point | None = None) -> ParityEntry | None:
        """Whether the plan's frameworks build the same ``model``: ``parity.model_parity`` over their runs (at
        sweep ``point``; None: the plan's first)."""
        cells = []
        for fw in self.plan.frameworks:
            ident = parity.identity(self.cell_runs(fw, model, point=point))
            if ident is not None:
                cells.append((fw, ident))
        return parity.model_parity(model, cells)

    def generation_parity(self, model: str, point: Point | None = None) -> str | None:
        """--task generate: the caution saying which part of the decoding differs between the plan's
        frameworks (their runners' ``settings.generation``), None where they say the same
        (``generation_figures.generation_parity``)."""
        cells = [
            (fw, [r for r in self.cell_runs(fw, model, point=point) if r.status is RunStatus.OK])
            for fw in self.plan.frameworks
        ]
        return generation_figures.generation_parity(model, cells)

    @property
    def profiling(self) -> bool:
        """Whether the plan asked each run for a profile (``--profile``)."""
        return bool(getattr(self.plan, "profile", False))

    def why_table(self, model: str, point: Point | None = None) -> why.WhyTable | None:
        """Where each framework's step time goes for ``model`` and why one is slower (``why.why_for_cell``),
        at sweep ``point`` (None: the plan's first); None when no framework has a usable profile."""
        cells = [(fw, self.cell_runs(fw, model, point=point)) for fw in self.plan.frameworks]
        return why.why_for_cell(model, cells, self.counters, expected=self.profiling)

    def scaling(self) -> list[ScalingCurve]:
        """A scaling session's curve per (model, framework): ``scaling.curve`` (empty otherwise)."""
        if not self.plan.scaling:
            return []
        out = []
        for framework, model in self.cells():
            levels = {
                at: self.cell_runs(framework, model, at.devices, nodes=at.nodes)
                for at in self.plan.scale_points()
            }
            out.append(scaling.curve(self.plan, framework, model, levels))
        return out

    def distributed(self) -> dict[str, Any]:
        """Per framework, how its data parallel ran (engine, all-reduce, buckets, overlap with the
        backward pass), as its runner recorded it at the plan's device count: the parity of the wiring."""
        out: dict[str, Any] = {}
        if not self.plan.multi_device:
            return out
        for run in self.runs.values():
            settings = run.hello.get("settings")
            at_plan = run.spec.devices == self.plan.devices and run.spec.nodes == self.plan.nodes
            if at_plan and isinstance(settings, dict):
                record = settings.get("distributed")
                if isinstance(record, dict):
                    out.setdefault(run.spec.framework, record)
        return out

    def live_figures(self, run: RunState) -> efficiency.LiveFigures:
        """What the live screen shows for a run: FLOPs per step, TFLOP/s now, % of the GPU's peak (its cell:
        the runs at its own sweep point)."""
        return efficiency.live_figures(
            run, self.cell_runs(run.spec.framework, run.spec.model, point=run.spec.point)
        )

    def pair_verdict(
        self,
        model_id: str,
        base: tuple[str, list[RunState]],
        other: tuple[str, list[RunState]],
        at: Point = NO_POINT,
        names: dict[str, str] | None = None,
    ) -> FrameworkRatio | RefusedRatio | None:
        """The verdict between two cells (``pair_verdict``): what ``sweeps`` reads for best vs best."""
        return pair_verdict(self, model_id, base, other, at, names)

    def rows(self) -> list[CellSummary]:
        """Every cell's summary, in display order; a cell whose ratio was refused (its frameworks ran on
        different devices) carries the refusal among its warnings, so no view can miss it."""
        return self._rows(framework_ratios(self)[1])

    def _rows(self, refused: list[RefusedRatio]) -> list[CellSummary]:
        rows = [self.row(fw, m, p) for fw, m, p in self.grid()]
        for refusal in refused:
            rows = [
                replace(row, warnings=(*row.warnings, caution(CautionKind.MIXED_DEVICES, refusal.text)))
                if row.model == refusal.model
                and row.point == refusal.point
                and row.framework in (refusal.base, refusal.framework)
                else row
                for row in rows
            ]
        return rows

    def summary(self) -> dict[str, Any]:
        """summary.json: ``session_summary`` as JSON (``SessionSummary.to_json``, the one mapping)."""
        return self.session_summary().to_json()

    def session_summary(self) -> SessionSummary:
        """The session's summary: every cell's row, the verdicts, and the session-wide figures."""
        environment: dict[str, Any] = {}
        for run in self.runs.values():
            if run.hello and run.spec.framework not in environment:
                threads, processes = analysis.host_threads(run)
                environment[run.spec.framework] = {
                    "versions": run.hello.get("versions", {}),
                    "device": run.hello.get("device", {}),
                    "settings": run.hello.get("settings", {}),
                    # The CPU threads of its ops on this host: per process, its processes (a rank each for
                    # PyTorch's data parallel), in all; so "1 per rank × 2" and "2" read as the same total.
                    "threads": {
                        "per_process": threads,
                        "processes": processes,
                        "total": threads * processes if threads is not None else None,
                        "text": analysis.threads_text(threads, processes),
                    },
                }
        ratios, refused = framework_ratios(self)
        rows = self._rows(refused)
        return SessionSummary(
            schema=SUMMARY_SCHEMA,
            rows=tuple(rows),
            frameworks=environment,
            malformed_lines=self.malformed,
            # Framework against framework per model, with 95% CIs (additive to schema 1).
            ratios=tuple(ratios),
            # Pairs that ran on different kinds of device: never a ratio.
            refused_ratios=tuple(refused),
            # Per model, whether its frameworks build the same network (parameters, FLOPs per sample).
            parity=tuple(p for m in self.plan.models if (p := self.parity(m)) is not None),
            task=self.plan.task or "train",
            # Data parallel: throughput and efficiency at each device count (additive).
            devices=self.plan.devices,
            nodes=self.plan.nodes,
            scaling=tuple(self.scaling()),
            distributed=self.distributed(),
            # --profile: per model, each framework's step time by category and why one is slower (additive).
            why=tuple(table for m in self.plan.models if (table := self.why_table(m)) is not None),
            counters=self.counters,
            # benchtui watch: the command watched and its folder (additive; absent for a plan's session).
            watch=dict(self.plan.watch) if self.plan.watch else None,
            # A sweep: best vs best, and what each setting buys each framework (absent without a sweep).
            sweep=sweeps.answer(self),
            labels={
                "frameworks": catalog.FRAMEWORK_LABELS,
                # The catalog's own, and the plan's (a user's model, a watch's command): never models
                # another session registered in this process.
                "models": {
                    k: v.label
                    for k, v in catalog.MODELS.items()
                    if k in self.plan.models or (k in catalog.BUILTIN_MODELS and k != catalog.WATCH_MODEL)
                },
            },
        )

    def search_lines(self) -> list[str]:
        """The largest-batch search in words, one line per (model, framework) probed."""
        cells: dict[tuple[str, str, str], list[str]] = {}
        for probe in self.probes:
            cells.setdefault((probe["model"], probe["framework"], _key(probe.get("point"))), []).append(
                f"{probe['batch_size']} {probe['result']}"
            )
        if self.probing is not None:
            at = (self.probing["model"], self.probing["framework"], _key(self.probing.get("point")))
            cells.setdefault(at, []).append(f"{self.probing['batch_size']} …")
        lines = []
        for (model, fw, key), tried in cells.items():
            choice = self.point_choices.get((model, key), {}) if key else self.batch_choices.get(model, {})
            chosen = (choice.get("chosen") or {}).get(fw)
            label = f"{catalog.MODELS[model].label} · {catalog.FRAMEWORK_LABELS.get(fw, fw)}"
            if key:  # a sweep's point: the search ran under its settings
                label += f" · {Point.from_key(key).label}"
            end = f" → batch {chosen}" if chosen else ""
            lines.append(f"largest batch, {label}: {', '.join(tried)}{end}")
        return lines

    @property
    def done_runs(self) -> int:
        return sum(1 for r in self.runs.values() if r.finished)


def _key(point: Any) -> str:
    """A point's key as an event gives it: its key ('batch=auto,precision=amp-bf16'), or {axis: value}."""
    if isinstance(point, dict):
        return Point.of(point).key
    return str(point) if point else ""


@dataclass(frozen=True)
class Contention:
    """How loaded the host was during a run, by the verdict's rule (``CONTENTION_SLACK_CORES``)."""

    others: float  # mean cores other processes kept busy while the run trained
    cores: int | None  # the host's logical cores (None: not recorded)
    needed: (
        float  # cores the run asked of the host: its threads over its processes (CPU), a core a process (GPU)
    )
    threads: int | None  # per process, as its runner reported them (None: not reported)
    processes: int
    gpu: bool
    over: bool  # the rule broken: the machine, not the framework, may have decided the run's times

    @property
    def excess(self) -> float:
        """How far other processes reached into the cores the run needed (cores; above the slack: over)."""
        if self.cores is None:
            return self.others
        return self.others - (self.cores - self.needed)

    def busy_text(self) -> str:
        """'other processes kept 1.6 of 2 cores busy'."""
        if self.cores is None:
            return (
                f"other processes kept {self.others:.1f} cores busy (the host's core count was not recorded)"
            )
        return f"other processes kept {self.others:.1f} of {self.cores} cores busy"

    def needs_text(self) -> str:
        """What the run asked of the host: 'used 2 threads', 'fed the GPU from 1 process'."""
        if self.gpu:
            return f"fed the GPU from {self.processes} process{'es' if self.processes != 1 else ''}"
        return f"used {analysis.threads_text(self.threads, self.processes)}"


def run_contention(run: RunState, cores: int | None, plan_threads: int = 0) -> Contention | None:
    """The verdict's rule applied to one run: ``others > cores - needed + CONTENTION_SLACK_CORES``; None when
    other processes' CPU was not measured during it (no sampler, no samples). ``plan_threads``: the plan's
    --threads, for a runner that did not report its pool."""
    others = run.other_cpu
    if others is None:
        return None
    threads, processes = analysis.host_threads(run)
    if threads is None and plan_threads > 0:
        threads = plan_threads
    gpu = run.device_kind not in (None, "cpu")
    if gpu:
        needed: float = processes
    elif threads is not None:
        needed = threads * processes
    else:  # no pool reported: the framework's own default, sized to the machine
        needed = cores if cores is not None else 1
    if cores is None:
        # Without the host's cores there is no share to judge: the row's caution still says the load
        # (from OTHER_LOAD_WARN_CORES), but no verdict loses its winner on a guess.
        over = False
    else:
        needed = min(needed, cores)
        over = others > cores - needed + CONTENTION_SLACK_CORES
    return Contention(others, cores, needed, threads, processes, gpu, over)


def cell_contention(runs: list[RunState], cores: int | None, plan_threads: int = 0) -> Contention | None:
    """The rule applied to a cell: its run that other processes reached furthest into (None: none measured)."""
    loads = [c for r in runs if (c := run_contention(r, cores, plan_threads)) is not None]
    return max(loads, key=lambda c: (c.over, c.excess)) if loads else None


def to_first_batch(runs: list[RunState]) -> list[float | None] | None:
    """Per epoch (1-based, in order), the mean over ``runs`` of its seconds from the epoch's start to its
    first batch's step; None where no run said it for that epoch, and None when none said it at all."""
    said = [r.to_first_batch for r in runs if r.to_first_batch]
    if not said:
        return None
    last = max(max(max(r.epoch_times, default=0), max(r.to_first_batch, default=0)) for r in runs)
    out: list[float | None] = []
    for epoch in range(1, last + 1):
        values = [d[epoch] for d in said if epoch in d]
        out.append(mean(values) if values else None)
    return out


def framework_ratios(model: SessionModel) -> tuple[list[FrameworkRatio], list[RefusedRatio]]:
    """For each model, every framework against the plan's first framework that has results.

    The one verdict of benchtui (``model_verdicts``), for every model of the plan: each entry
    names the faster framework and says "1.23× faster (95% CI 1.18–1.29)", with "not
    significant" when the interval contains 1. Pairs whose runs trained on different kinds
    of device (a GPU against a CPU) get no ratio: they are returned apart, each with the
    sentence every view shows instead.
    """
    out: list[FrameworkRatio] = []
    refused: list[RefusedRatio] = []
    for m in model.plan.models:
        for point in model.plan.points():
            ratios, refusals = model_verdicts(model, m, point)
            out += ratios
            refused += refusals
    return out, refused


def model_verdicts(
    model: SessionModel, model_id: str, point: Point | None = None
) -> tuple[list[FrameworkRatio], list[RefusedRatio]]:
    """The verdicts of one model: every framework against the plan's first that has results.

    Over the runs that succeeded; the ratio is of time per image, so it is the inverse ratio
    of the cells' images/s (total images over total time) whatever their batch sizes. Every
    view prints its ``text``: the live screen (as runs finish), show, the end of a headless
    run, md, html, csv, json and compare. When both sides counted their FLOPs the text ends
    with the ratio per FLOP (``per_flop``: achieved FLOP/s against achieved FLOP/s), and when
    the frameworks do not build the same network (``SessionModel.parity``) it says that the
    raw ratio compares different networks.
    """
    out: list[FrameworkRatio] = []
    refused: list[RefusedRatio] = []
    ok = RunStatus.OK
    cells = [
        (fw, [r for r in model.cell_runs(fw, model_id, point=point) if r.status is ok])
        for fw in model.plan.frameworks
    ]
    at = model.plan.points()[0] if point is None else point
    cells = [(fw, cell) for fw, cell in cells if cell]
    if len(cells) < 2:
        return out, refused
    base_fw, base_runs = cells[0]
    for fw, cell in cells[1:]:
        verdict = pair_verdict(model, model_id, (base_fw, base_runs), (fw, cell), at)
        if isinstance(verdict, RefusedRatio):
            refused.append(verdict)
        elif verdict is not None:
            out.append(verdict)
    return out, refused


def pair_verdict(
    model: SessionModel,
    model_id: str,
    base: tuple[str, list[RunState]],
    other: tuple[str, list[RunState]],
    at: Point = NO_POINT,
    names: dict[str, str] | None = None,
) -> FrameworkRatio | RefusedRatio | None:
    """The verdict between two cells of ``model_id`` (framework, its finished runs): ``other`` against
    ``base``, in ``model_verdicts``' words (about the same, unreliable under contention, a refusal between
    different kinds of device, the raw ratio of different networks); None when a side has no times.

    ``at``: the point both cells ran at (``Point()`` for best vs best, whose cells are at different points);
    ``names``: how the text names each framework (best vs best: 'PyTorch at batch 8'; default its label).
    """
    label = analysis.framework_label
    name = (lambda fw: (names or {}).get(fw) or label(fw)) if names else label
    base_fw, base_runs = base
    fw, cell = other
    if analysis.mixed_devices(base_runs, cell) is not None:
        kinds_a = "/".join(sorted(analysis.device_kinds(base_runs)))
        kinds_b = "/".join(sorted(analysis.device_kinds(cell)))
        return RefusedRatio(
            model=model_id,
            base=base_fw,
            framework=fw,
            devices={
                base_fw: tuple(sorted(analysis.device_kinds(base_runs))),
                fw: tuple(sorted(analysis.device_kinds(cell))),
            },
            text=f"no ratio between {name(base_fw)} and {name(fw)}: they ran on different "
            f"devices ({label(base_fw)} {kinds_a}, {label(fw)} {kinds_b})",
            point=at,
        )
    generating = model.plan.task == "generate"
    if generating:  # issue 34: the batch's tokens/s after the first token, time to first token beside it
        by_token = generation_figures.compare(base_runs, cell)
        compared = ("tokens", by_token) if by_token is not None else None
    else:
        compared = analysis.compare_cells(base_runs, cell)
    if compared is None:
        return None
    same_network = model.parity(model_id, at or None)  # best vs best (no point): the plan's first
    basis, ratio = compared
    winner, loser, seen = (fw, base_fw, ratio) if ratio.faster else (base_fw, fw, ratio.inverted())
    per_flop = None if generating else per_flop_verdict(ratio, base_fw, base_runs, fw, cell)
    # The machine, not the frameworks, may have decided it: no winner then.
    reason = unreliable_reason([(base_fw, base_runs), (fw, cell)], model.host_cores, model.plan.threads)
    if generating:
        text = _generate_text(name(winner), name(loser), seen, (base_fw, base_runs), (fw, cell), winner)
    elif ratio.about_same:
        text = f"{name(winner)} and {name(loser)} about the same ({ratio.same_words()})"
    else:
        text = f"{name(winner)} {seen.phrase(name(loser))}"
    if reason is not None:
        # No winner: the reason, then what was measured, plainly not a verdict (no "faster" in it).
        measured = (
            f"{name(loser)} took {seen.factor:.2f}× the time of {name(winner)}"
            if names
            else (f"{label(loser)} took {seen.factor:.2f}× {label(winner)}'s time")
        )
        if generating:  # what was timed: each token after the first, the batch's
            measured += " per token after the first"
        interval = seen.factor_interval
        measured += (
            f" (95% CI {interval[0]:.2f}–{interval[1]:.2f})"
            if interval is not None
            else " (no CI: one value per side)"
        )
        text = f"unreliable: {reason}; measured, not a verdict: {measured}"
        if per_flop is not None:
            per_flop = replace(per_flop, faster_framework=None)
    flagged = bool(same_network and same_network.flagged)
    if flagged and same_network is not None:
        # The raw ratio is of time per sample: here it compares two different networks.
        text += f"; the raw ratio compares different networks ({parity.differences_text(same_network)})"
        if per_flop is not None and reason is None:
            text += f"; {per_flop.text}"
    if generating:
        parts = generation_figures.differing_parts([(base_fw, base_runs), (fw, cell)])
        if parts:  # as for architectures: the two sides do not do the same work
            flagged = True
            text += f"; the sides do not generate the same way ({', '.join(parts)})"
    # The same network on both sides: per FLOP says what the raw ratio says (it stays in the data).
    return FrameworkRatio(
        model=model_id,
        base=base_fw,
        framework=fw,
        basis=basis,
        basis_label=analysis.BASIS_LABELS[basis],
        ratio=ratio.value,
        ci_low=ratio.low,
        ci_high=ratio.high,
        level=ratio.level,
        significant=ratio.significant,
        conclusive=ratio.conclusive,
        single_run=ratio.single_run,
        faster=ratio.faster,
        about_same=ratio.about_same,
        factor=ratio.factor,
        percent=ratio.percent,
        phrase=ratio.phrase(),
        faster_framework=None if reason is not None or ratio.about_same else winner,
        unreliable=reason,
        per_flop=per_flop,
        parity_flagged=flagged,
        text=text,
        point=at,
    )


def _generate_text(
    winner_name: str,
    loser_name: str,
    seen: Ratio,
    base: tuple[str, list[RunState]],
    other: tuple[str, list[RunState]],
    winner: str,
) -> str:
    """A generate verdict: 'PyTorch 1.23× more tokens/s after the first token (812 vs 660 tok/s, batch 8; 95%
    CI 1.18–1.29); time to first token 12.3 ms vs 15.0 ms' (``seen``: the winner's side of the ratio)."""
    figures = {fw: generation_figures.figures(runs) for fw, runs in (base, other)}
    loser = other[0] if winner == base[0] else base[0]
    numbers = generation_figures.verdict_numbers(figures[winner], figures[loser])
    first = generation_figures.first_token_text(figures[winner], figures[loser])
    if seen.about_same:
        return (
            f"{winner_name} and {loser_name} about the same tokens/s after the first token "
            f"({seen.same_words()}; {numbers}); {first}"
        )
    interval = seen.factor_interval
    ci = (
        f"; {seen.level * 100:.0f}% CI {interval[0]:.2f}–{interval[1]:.2f}"
        if interval is not None
        else "; no CI: one value per side"
    )
    if seen.single_run and interval is not None:
        ci += ", one run on a side: run-to-run spread unknown"
    return f"{winner_name} {seen.factor:.2f}× more tokens/s after the first token ({numbers}{ci}); {first}"


def contention_part(label: str, runs: list[RunState], cores: int | None, plan_threads: int = 0) -> str | None:
    """'1.6 of 2 cores busy during PyTorch's runs (on 2 threads)' when ``runs`` break the contention rule
    (``CONTENTION_SLACK_CORES``), else None. ``label`` names whose runs they are (a framework, "A", "B")."""
    loaded = cell_contention(runs, cores, plan_threads)
    if loaded is None or not loaded.over:
        return None
    what = "on the GPU" if loaded.gpu else f"on {analysis.threads_text(loaded.threads, loaded.processes)}"
    return f"{loaded.others:.1f} of {loaded.cores} cores busy during {label}'s runs ({what})"


def unreliable_reason(
    sides: list[tuple[str, list[RunState]]], cores: int | None, plan_threads: int = 0
) -> str | None:
    """Why a verdict between these cells (framework, its runs) claims no winner, by the contention rule:
    'other processes kept 1.6 of 2 cores busy during PyTorch's runs (on 2 threads)'; None when no side's
    runs broke it."""
    parts = [
        p
        for fw, runs in sides
        if (p := contention_part(analysis.framework_label(fw), runs, cores, plan_threads)) is not None
    ]
    return "other processes kept " + " and ".join(parts) if parts else None


def _flops_per_sample(runs: list[RunState]) -> float | None:
    """A cell's FLOPs per sample, as its row has them: the mean over its runs' counts."""
    counts = [float(r.flops["per_image"]) for r in runs if r.flops.get("per_image")]
    return mean(counts) if counts else None


def per_flop_verdict(
    ratio: Ratio, base_fw: str, base_runs: list[RunState], fw: str, runs: list[RunState]
) -> PerFlop | None:
    """The verdict per FLOP: the ratio of achieved FLOP/s, when both sides counted their FLOPs.

    Time per FLOP of ``fw`` over ``base_fw`` is the time ratio per sample times FLOPs per sample
    of the base over those of ``fw`` (a constant: the interval scales with it), so a reader sees
    the speed of the frameworks apart from the size of the networks they built.
    """
    flops_base, flops_other = _flops_per_sample(base_runs), _flops_per_sample(runs)
    if not flops_base or not flops_other:
        return None
    k = flops_base / flops_other
    scaled = Ratio(
        ratio.value * k,
        None if ratio.low is None else ratio.low * k,
        None if ratio.high is None else ratio.high * k,
        ratio.level,
        ratio.single_run,
    )
    label = analysis.framework_label
    winner = fw if scaled.faster else base_fw
    if scaled.about_same:
        text = f"per FLOP: about the same ({scaled.same_words()})"
    else:
        text = f"per FLOP: {label(winner)} {scaled.factor:.2f}× faster"
    return PerFlop(
        ratio=scaled.value,
        ci_low=scaled.low,
        ci_high=scaled.high,
        factor=scaled.factor,
        significant=scaled.significant,
        faster_framework=None if scaled.about_same else winner,
        about_same=scaled.about_same,
        flops_per_sample={base_fw: flops_base, fw: flops_other},
        text=text,
    )


def _diverged_reason(diverged: list[RunState], runs: list[RunState]) -> str:
    """ "1 of 3 runs diverged: loss NaN at epoch 2" (the first diverged run's reason, its word dropped); a cell of
    one run: "loss NaN at epoch 2" (its status says "diverged": every view says the status, then the reason)."""
    why = diverged[0].reason.removeprefix("diverged: ")
    if len(runs) == 1:
        return why
    return f"{len(diverged)} of {len(runs)} runs diverged: {why}"


def _mean_loss(values: list[float]) -> float:
    """The mean of the runs' losses; NaN where any is NaN, an infinity where any is one (never a warning)."""
    if any(math.isnan(v) for v in values):
        return math.nan
    if any(math.isinf(v) for v in values):
        return next(v for v in values if math.isinf(v))
    return mean(values)

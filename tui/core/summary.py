"""The session model: runs and their figures, built by folding events one at a time.

The live screens, the headless progress display and the final ``summary.json`` all
use this one fold, so a summary is always recomputable from ``events.jsonl``.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from runners import catalog
from tui.core import analysis, efficiency
from tui.core.plan import Plan, RunSpec, run_order
from tui.core.stats import describe, mean

SUMMARY_SCHEMA = 1
#: Mean CPU (in cores) used by other processes during a run above which its times are flagged.
OTHER_LOAD_WARN_CORES = 0.5
FINAL = frozenset({"ok", "failed", "unavailable", "stopped", "skipped", "interrupted"})
HEADLINE = (
    "mean_epoch_s",
    "first_epoch_s",
    "mean_epoch_excl_first_s",
    "build_s",
    "images_per_s",
    "time_to_first_batch_s",
)


@dataclass
class RunState:
    """What is known about one runner process."""

    spec: RunSpec
    epochs_planned: int
    status: str = "queued"
    reason: str = ""
    phase: str = ""
    hello: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    epoch_times: dict[int, float] = field(default_factory=dict)
    epoch_samples: dict[int, int] = field(default_factory=dict)
    batch_seconds: array = field(default_factory=lambda: array("d"))
    batch_epochs: array = field(default_factory=lambda: array("i"))
    current_epoch: int = 0
    current_step: int = 0
    peak_bytes: int | None = None
    memory_source: str = ""
    malformed: int = 0
    done: bool = False
    # CPU that other processes used while this run trained (cores), from the sampler.
    other_cpu_sum: float = 0.0
    other_cpu_samples: int = 0
    other_cpu_recorded: float | None = None  # the engine's figure, from the run's run_end event
    # Other processes on the run's GPU while it trained (most seen at once, their memory), from NVML.
    other_gpu_procs: int | None = None
    other_gpu_mem: int | None = None
    energy_mj: dict[int, float] = field(default_factory=dict)  # GPU energy counter: 0 = first batch, N = end of epoch N

    @property
    def other_cpu(self) -> float | None:
        """Mean cores other processes used while this run trained: as recorded, else as sampled."""
        if self.other_cpu_recorded is not None:
            return self.other_cpu_recorded
        return self.other_cpu_sum / self.other_cpu_samples if self.other_cpu_samples else None
    started_t: float | None = None
    ended_t: float | None = None
    flops: dict[str, Any] = field(default_factory=dict)  # the runner's ``flops`` event

    @property
    def finished(self) -> bool:
        return self.status in FINAL

    @property
    def device_kind(self) -> str | None:
        """The kind of device the runner really trained on ("cuda", "cpu"), from its hello."""
        device = self.hello.get("device")
        return str(device.get("type")) if isinstance(device, dict) and device.get("type") else None

    def joules_per_image(self) -> float | None:
        """GPU energy per image over the epochs after the first (the first when there is only one)."""
        e, samples = self.energy_mj, self.hello.get("samples_per_epoch")
        last = max(self.epoch_times, default=0)
        if not samples or last == 0:
            return None
        start = 1 if last > 1 else 0
        if start not in e or last not in e or e[last] < e[start]:
            return None
        return (e[last] - e[start]) / 1000.0 / (samples * (last - start))

    def phase_seconds(self, name: str) -> float | None:
        edges = self.phases.get(name, {})
        if "start" in edges and "end" in edges:
            return edges["end"] - edges["start"]
        return None

    @property
    def steps_per_epoch(self) -> int | None:
        return self.hello.get("steps_per_epoch")

    def figures(self) -> dict[str, float | None]:
        """The study's four figures and throughput for this run (None where unknown)."""
        epochs = [self.epoch_times[e] for e in sorted(self.epoch_times)]
        rest = epochs[1:]
        samples = self.hello.get("samples_per_epoch") or (
            next(iter(self.epoch_samples.values()), None)
        )
        if rest and samples:
            images_per_s = samples * len(rest) / sum(rest)
        elif epochs and samples:
            images_per_s = samples / epochs[0]
        else:
            images_per_s = None
        return {
            "mean_epoch_s": mean(epochs) if epochs else None,
            "first_epoch_s": epochs[0] if epochs else None,
            "mean_epoch_excl_first_s": mean(rest) if rest else None,
            "build_s": self.phase_seconds("build"),
            "images_per_s": images_per_s,
            "time_to_first_batch_s": self.phase_seconds("first_batch"),
        }


class SessionModel:
    """Every run of a plan and its state, updated by ``apply(event)``."""

    def __init__(self, plan: Plan, gpu_window: int = 600) -> None:
        self.plan = plan
        self.runs: dict[str, RunState] = {
            s.run_id: RunState(s, plan.epochs) for s in run_order(plan)
        }
        self.current: str | None = None
        self.gpu_samples: deque[dict[str, Any]] = deque(maxlen=gpu_window)
        self.malformed = 0
        self.events = 0
        self.unknown_runs = 0
        # The largest-batch search (--batch-size auto): every probe, and the choice per model.
        self.probes: list[dict[str, Any]] = []
        self.batch_choices: dict[str, dict[str, Any]] = {}
        self.probing: dict[str, Any] | None = None  # the probe in progress
        self._handlers = {
            name[len("_on_"):]: getattr(self, name) for name in dir(self) if name.startswith("_on_")
        }

    # -- folding events -------------------------------------------------------------
    def apply(self, event: dict[str, Any]) -> None:
        self.events += 1
        kind = event.get("type")
        if kind == "gpu":
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
            self.batch_choices[str(event.get("model"))] = event
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

    def _note_load(self, sample: dict[str, Any]) -> None:
        """Count the CPU that processes other than the runner used while it trained."""
        run = self.runs.get(sample.get("run")) if isinstance(sample.get("run"), str) else None
        host = sample.get("host")
        if run is None or run.status != "running" or not isinstance(host, dict):
            return
        busy, mine = host.get("system_busy_cores"), host.get("cpu_percent")
        if isinstance(busy, (int, float)) and isinstance(mine, (int, float)):
            run.other_cpu_sum += max(0.0, busy - mine / 100.0)
            run.other_cpu_samples += 1
        watched, gpus = sample.get("watched"), sample.get("gpus")
        if isinstance(watched, int) and isinstance(gpus, list) and 0 <= watched < len(gpus):
            gpu = gpus[watched]
            procs, mem = (gpu.get("other_procs"), gpu.get("other_mem")) if isinstance(gpu, dict) else (None, None)
            if isinstance(procs, int):
                run.other_gpu_procs = max(procs, run.other_gpu_procs or 0)
            if isinstance(mem, int):
                run.other_gpu_mem = max(mem, run.other_gpu_mem or 0)

    def _on_run_start(self, run: RunState, event: dict[str, Any]) -> None:
        run.status = "starting"
        run.started_t = event.get("t")
        self.current = run.spec.run_id

    def _on_hello(self, run: RunState, event: dict[str, Any]) -> None:
        run.hello = event
        run.status = "building"

    def _on_phase(self, run: RunState, event: dict[str, Any]) -> None:
        name, edge = str(event["name"]), str(event["edge"])
        t = float(event.get("at", event["t"]))
        run.phases.setdefault(name, {})[edge] = t
        run.phase = name if edge == "start" else ""
        if name == "first_batch" and edge == "start":
            run.status = "running"
            run.current_epoch = 1

    def _on_batch(self, run: RunState, event: dict[str, Any]) -> None:
        run.batch_seconds.append(float(event["seconds"]))
        run.batch_epochs.append(int(event["epoch"]))
        run.current_epoch = int(event["epoch"])
        run.current_step = int(event["step"])
        run.status = "running"

    def _on_epoch(self, run: RunState, event: dict[str, Any]) -> None:
        epoch = int(event["epoch"])
        run.epoch_times[epoch] = float(event["seconds"])
        run.epoch_samples[epoch] = int(event.get("samples") or 0)

    def _on_memory(self, run: RunState, event: dict[str, Any]) -> None:
        if event.get("peak_bytes") is not None:
            run.peak_bytes = int(event["peak_bytes"])
        run.memory_source = str(event.get("source", ""))

    def _on_flops(self, run: RunState, event: dict[str, Any]) -> None:
        run.flops = efficiency.flops_of_event(event)

    def _on_energy(self, run: RunState, event: dict[str, Any]) -> None:
        run.energy_mj[int(event["epoch"])] = float(event["mj"])

    def _on_done(self, run: RunState, event: dict[str, Any]) -> None:
        run.done = True
        self._on_memory(run, event)

    def _on_error(self, run: RunState, event: dict[str, Any]) -> None:
        kind = event.get("kind", "exception")
        message = str(event.get("message", ""))
        run.status = "unavailable" if kind == "unavailable" else "failed"
        run.reason = message if kind != "oom" else f"out of memory: {message}"

    def _on_run_end(self, run: RunState, event: dict[str, Any]) -> None:
        status = str(event.get("status", "failed"))
        run.status = status
        if event.get("reason"):
            run.reason = str(event["reason"])
        run.malformed = int(event.get("malformed") or 0)
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

    def cell_runs(self, framework: str, model: str) -> list[RunState]:
        return [
            r for r in self.runs.values() if r.spec.framework == framework and r.spec.model == model
        ]

    def row(self, framework: str, model: str) -> dict[str, Any]:
        """The summary row of one (framework, model): the contract of summary.json."""
        runs = self.cell_runs(framework, model)
        ok = [r for r in runs if r.status == "ok"]
        failed = [r for r in runs if r.status == "failed"]
        unavailable = [r for r in runs if r.status == "unavailable"]
        row: dict[str, Any] = {
            "framework": framework,
            "model": model,
            "batch_size": self.plan.batch_size(model, framework),
            "runs": len(ok),
            "runs_planned": len(runs),
            "failed_runs": len(failed),
        }
        if unavailable and not ok:
            row["status"], row["reason"] = "unavailable", unavailable[0].reason
        elif failed:
            row["status"], row["reason"] = "failed", failed[0].reason or "runner failed"
        elif ok:
            row["status"] = "ok"
            unfinished = [r for r in runs if r.status != "ok"]
            if unfinished:
                row["reason"] = f"{len(unfinished)} of {len(runs)} runs did not finish ({unfinished[0].status})"
        elif any(r.status in ("stopped", "skipped", "interrupted") for r in runs):
            row["status"] = "incomplete"
            row["reason"] = next(r.reason or r.status for r in runs if r.status in FINAL)
        else:
            row["status"] = "pending"
        per_run = [r.figures() for r in ok]
        row["spread"] = {}
        for name in HEADLINE:
            stats = describe([f[name] for f in per_run if f[name] is not None])
            row[name] = stats["mean"] if stats else None
            row["spread"][name] = stats
        # 95% bootstrap intervals (over runs, then epochs within runs; seeded, cached).
        row["ci"] = {name: analysis.figure_ci(ok, name) for name in HEADLINE}
        for name, interval in row["ci"].items():
            if row["spread"].get(name):
                row["spread"][name]["ci_low"], row["spread"][name]["ci_high"] = interval or (None, None)
        # Batch times after warm-up: their spread and MAD outliers back the warnings.
        row["batch"] = describe(analysis.cell_batches(ok, steady=True))
        # One "median batch" everywhere (table, exports, live screen): after the detected warm-up.
        row["median_batch_s"] = row["batch"]["median"] if row["batch"] else None
        # Warm-up detected from the data (stats.warmup_cut), and the steady state after it.
        cuts = [analysis.warmup_of(r) for r in ok]
        row["warmup_batches"] = [c for c, _ in cuts]
        row["warmup_s"] = [s for _, s in cuts]
        steady_rates = [
            row["batch_size"] / mean(steady) for r in ok if (steady := analysis.steady_batches(r))
        ]
        row["steady_images_per_s"] = mean(steady_rates) if steady_rates else None
        row["warnings"] = analysis.cell_warnings(ok, row["spread"], row["batch"])
        # From run_end when recorded: loading folds GPU samples last (and only the newest), so
        # the figure must not depend on them for summary.json to be recomputable.
        loads = [r.other_cpu for r in ok if r.other_cpu is not None]
        row["other_cpu_cores"] = max(loads) if loads else None
        if loads and max(loads) >= OTHER_LOAD_WARN_CORES:
            row["warnings"].append(
                f"other processes kept {max(loads):.1f} core(s) busy during a run: on a shared CPU "
                "its times measure the contention as much as the framework"
            )
        others = [r.other_gpu_procs for r in ok if r.other_gpu_procs]
        row["other_gpu_processes"] = max(others) if others else (0 if any(r.other_gpu_procs == 0 for r in ok) else None)
        if others:
            mem = max((r.other_gpu_mem or 0 for r in ok), default=0)
            row["warnings"].append(
                f"{max(others)} other process(es) used the GPU during a run"
                + (f" ({mem / 2**20:.0f} MiB)" if mem else "")
                + ": its times measure the sharing as much as the framework"
            )
        kinds = sorted({k for r in ok if (k := r.device_kind)})
        row["device_kind"] = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else None)
        joules = [j for r in ok if (j := r.joules_per_image()) is not None]
        row["joules_per_image"] = mean(joules) if joules else None
        peaks = [r.peak_bytes for r in ok if r.peak_bytes is not None]
        row["peak_memory_bytes"] = max(peaks) if peaks else None
        row["memory_source"] = ok[0].memory_source if ok else ""
        # Compute efficiency (additive): FLOPs per step, achieved TFLOP/s, % of the GPU's peak.
        eff = efficiency.cell_efficiency(ok, row["ci"].get("images_per_s"))
        row["spread"]["achieved_tflops"] = eff.pop("achieved_tflops_spread")
        row["ci"]["achieved_tflops"] = eff.pop("achieved_tflops_ci")
        row.update(eff)
        row["epochs"] = self.plan.epochs
        row["run_ids"] = [r.spec.run_id for r in runs]
        return row

    def rows(self) -> list[dict[str, Any]]:
        return [self.row(fw, m) for fw, m in self.cells()]

    def summary(self) -> dict[str, Any]:
        environment: dict[str, Any] = {}
        for run in self.runs.values():
            if run.hello:
                environment.setdefault(run.spec.framework, {
                    "versions": run.hello.get("versions", {}),
                    "device": run.hello.get("device", {}),
                    "settings": run.hello.get("settings", {}),
                })
        rows = self.rows()
        ratios, refused = analysis.framework_ratios(self)
        for refusal in refused:  # every view shows a row's warnings: none can miss the refusal
            for row in rows:
                if row["model"] == refusal["model"] and row["framework"] in (refusal["base"], refusal["framework"]):
                    row["warnings"].append(refusal["text"])
        return {
            "schema": SUMMARY_SCHEMA,
            "rows": rows,
            "frameworks": environment,
            "malformed_lines": self.malformed,
            # Framework against framework per model, with 95% CIs (additive to schema 1).
            "ratios": ratios,
            # Pairs that ran on different kinds of device: never a ratio.
            "refused_ratios": refused,
            "labels": {"frameworks": catalog.FRAMEWORK_LABELS, "models": {k: v.label for k, v in catalog.MODELS.items()}},
        }

    def search_lines(self) -> list[str]:
        """The largest-batch search in words, one line per (model, framework) probed."""
        cells: dict[tuple[str, str], list[str]] = {}
        for probe in self.probes:
            cells.setdefault((probe["model"], probe["framework"]), []).append(
                f"{probe['batch_size']} {probe['result']}"
            )
        if self.probing is not None:
            cells.setdefault((self.probing["model"], self.probing["framework"]), []).append(
                f"{self.probing['batch_size']} …"
            )
        lines = []
        for (model, fw), tried in cells.items():
            chosen = self.batch_choices.get(model, {}).get("chosen", {}).get(fw)
            label = f"{catalog.MODELS[model].label} · {catalog.FRAMEWORK_LABELS.get(fw, fw)}"
            end = f" → batch {chosen}" if chosen else ""
            lines.append(f"largest batch, {label}: {', '.join(tried)}{end}")
        return lines

    @property
    def done_runs(self) -> int:
        return sum(1 for r in self.runs.values() if r.finished)

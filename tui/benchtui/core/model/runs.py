"""One runner process as the parent knows it: its plan entry, status, events folded so far."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

from benchtui.core.model.generation import GenerationRun
from benchtui.core.model.stats import mean, warmup_cut
from benchtui.core.model.status import FINAL, RunStatus
from benchtui.core.plan.plan import RunSpec
from benchtui.core.wire.events import COUNTERS

#: What a run's GPU counters are means of: NVML's utilization ("a kernel was running"), then the
#: profiling counters where the sampler can read them (SM, tensor-core and DRAM activity).
GPU_COUNTERS = ("gpu_util", *COUNTERS)


@dataclass
class RunState:
    """What is known about one runner process."""

    spec: RunSpec
    epochs_planned: int
    status: RunStatus = RunStatus.QUEUED
    reason: str = ""
    phase: str = ""
    hello: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    epoch_times: dict[int, float] = field(default_factory=dict)
    epoch_samples: dict[int, int] = field(default_factory=dict)
    # Each epoch's mean training loss and, where the runner sent them, its smallest and largest step loss
    # (NaN and infinities kept as such): runners since issue 36; none for older runs and inference.
    losses: dict[int, float] = field(default_factory=dict)
    loss_mins: dict[int, float] = field(default_factory=dict)
    loss_maxs: dict[int, float] = field(default_factory=dict)
    # Seconds from each epoch's start to its first batch's step, by epoch, as the runner said (optional).
    to_first_batch: dict[int, float] = field(default_factory=dict)
    batch_seconds: array[float] = field(default_factory=lambda: array("d"))
    batch_epochs: array[int] = field(default_factory=lambda: array("i"))
    current_epoch: int = 0
    current_step: int = 0
    missing_steps: int = 0  # steps a lost batch line left out (a gap in the step numbers)
    window_max_s: float = 0.0  # the longest window of steps after the first step (the watchdog's scale)
    peak_bytes: int | None = None
    memory_source: str = ""
    malformed: int = 0
    log_problem: str = ""  # what the run's log lost (a full disk), from its run_end
    done: bool = False
    # CPU that other processes used while this run trained (cores), from the sampler.
    other_cpu_sum: float = 0.0
    other_cpu_samples: int = 0
    other_cpu_recorded: float | None = None  # the engine's figure, from the run's run_end event
    # Other processes on the run's GPU while it trained (most seen at once, their memory), from NVML.
    other_gpu_procs: int | None = None
    other_gpu_mem: int | None = None
    energy_mj: dict[int, float] = field(
        default_factory=dict
    )  # GPU energy counter: 0 = first batch, N = end of epoch N
    # Data parallel: each rank's seconds and steps over the windows after the first (``ranks``
    # events), and each GPU's telemetry over the run (index -> [samples, util sum, mem max, power sum]).
    rank_seconds: list[float] = field(default_factory=list)
    rank_steps: list[int] = field(default_factory=list)
    gpu_sums: dict[int, list[float]] = field(default_factory=dict)
    per_gpu_recorded: list[dict[str, Any]] | None = None  # the engine's figures, from run_end
    # ``--profile``: the runner's profile event, checked (``wire.events.check_profile``); {} without one.
    profile: dict[str, Any] = field(default_factory=dict)
    # The GPU counters while the run trained (name -> [sum, samples]), and the engine's means from run_end.
    counter_sums: dict[str, list[float]] = field(default_factory=dict)
    counters_recorded: dict[str, float] = field(default_factory=dict)
    # Several machines (issue 33): the host its runner ran on (its run_start's), and every other node's share
    # of the run, by node rank, from the events node 0 recorded with ``node`` k (never folded into the above).
    host: str = ""
    pid: int | None = None
    nodes: dict[int, NodeRun] = field(default_factory=dict)
    # Generation (issue 34): the runner's generate steps (``tokens`` events); None until the first.
    generation: GenerationRun | None = None

    def distributed(self) -> dict[str, Any]:
        """Its hello's ``settings.distributed`` (data parallel: engine, link, its node's ranks), {} without."""
        settings = self.hello.get("settings")
        record = settings.get("distributed") if isinstance(settings, dict) else None
        return record if isinstance(record, dict) else {}

    def ranks_span(self) -> tuple[int, int] | None:
        """Its node's processes' global ranks (first, count), as its hello said them; None: not said."""
        ranks = self.distributed().get("ranks")
        if (
            isinstance(ranks, list)
            and len(ranks) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ranks)
            and ranks[1] > 0
        ):
            return ranks[0], ranks[1]
        return None

    def step_s(self) -> float | None:
        """Its mean seconds per step over the timed epochs (those after the first), from its batch windows;
        a run of one epoch: its steps after the warm-up ``stats.warmup_cut`` detects. None: no step timed."""
        seconds, epochs = self.batch_seconds, self.batch_epochs
        if not seconds:
            return None
        later = [s for s, e in zip(seconds, epochs, strict=True) if e > 1]
        if not later:
            later = seconds[warmup_cut(seconds) :].tolist()
        return mean(later) if later else None

    def add_ranks(self, seconds: list[float], steps: int) -> None:
        """One window's mean step time of every rank."""
        if len(self.rank_seconds) < len(seconds):
            grow = len(seconds) - len(self.rank_seconds)
            self.rank_seconds += [0.0] * grow
            self.rank_steps += [0] * grow
        for rank, value in enumerate(seconds):
            self.rank_seconds[rank] += float(value) * steps
            self.rank_steps[rank] += steps

    def rank_step_s(self) -> list[float | None]:
        """Each rank's mean seconds per step (windows after the run's first)."""
        return [s / n if n else None for s, n in zip(self.rank_seconds, self.rank_steps, strict=True)]

    def add_gpu_reading(self, index: int, gpu: dict[str, Any]) -> None:
        sums = self.gpu_sums.setdefault(index, [0, 0.0, 0.0, 0.0, 0])
        util, mem, power = gpu.get("util"), gpu.get("mem_used"), gpu.get("power_w")
        sums[0] += 1
        if isinstance(util, (int, float)):
            sums[1] += util
        if isinstance(mem, (int, float)):
            sums[2] = max(sums[2], mem)
        if isinstance(power, (int, float)):
            sums[3] += power
            sums[4] += 1

    def per_gpu(self) -> list[dict[str, Any]]:
        """Each of the run's GPUs over the run: mean utilization and power, most memory used."""
        if self.per_gpu_recorded is not None:
            return self.per_gpu_recorded
        return [
            {
                "index": index,
                "util": sums[1] / sums[0] if sums[0] else None,
                "mem_max": sums[2] or None,
                "power_w": sums[3] / sums[4] if sums[4] else None,
                "samples": int(sums[0]),
            }
            for index, sums in sorted(self.gpu_sums.items())
        ]

    def add_counters(self, gpus: list[dict[str, Any]]) -> None:
        """One sample of the run's GPUs: NVML's utilization and the profiling counters each has (a mean over GPUs)."""
        for name in GPU_COUNTERS:
            key = "util" if name == "gpu_util" else name
            values = [g[key] for g in gpus if isinstance(g.get(key), (int, float))]
            if values:
                sums = self.counter_sums.setdefault(name, [0.0, 0])
                sums[0] += sum(values) / len(values)
                sums[1] += 1

    def counters(self) -> dict[str, float]:
        """Means over the run's samples while it trained, in percent, of the counters known: as the engine
        recorded them in run_end when it did (loading folds only the newest samples), else as sampled."""
        if self.counters_recorded:
            return dict(self.counters_recorded)
        return {name: s / n for name, (s, n) in self.counter_sums.items() if n}

    @property
    def other_cpu(self) -> float | None:
        """Mean cores other processes used while this run trained: as recorded, else as sampled."""
        if self.other_cpu_recorded is not None:
            return self.other_cpu_recorded
        return self.other_cpu_sum / self.other_cpu_samples if self.other_cpu_samples else None

    started_t: float | None = None
    ended_t: float | None = None
    flops: dict[str, Any] = field(default_factory=dict)  # the runner's ``flops`` event
    model_info: dict[str, Any] = field(default_factory=dict)  # the runner's ``model`` event (parity)

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
        return float((e[last] - e[start]) / 1000.0 / (samples * (last - start)))

    def divergence(self) -> str | None:
        """Why the run did not train (``"diverged: loss NaN at epoch 2"``), or None: an epoch whose loss
        (or smallest or largest step loss) is NaN or infinite, the first such epoch; or a loss that never
        changed over more than one step (every epoch's the same and, where sent, each epoch's min == max), with
        evidence of more than one step's loss: two epochs or more, or an epoch that sent its smallest and largest
        step loss. One epoch's mean alone is not judged (every Keras runner sends only the mean: a run of
        ``--epochs 1`` would always be "diverged")."""
        for epoch in sorted(self.losses.keys() | self.loss_mins.keys() | self.loss_maxs.keys()):
            for values in (self.losses, self.loss_mins, self.loss_maxs):
                value = values.get(epoch)
                if value is not None and not math.isfinite(value):
                    return f"diverged: loss {loss_word(value)} at epoch {epoch}"
        if not self.losses:
            return None
        seen = set(self.losses.values())
        flat = all(self.loss_mins.get(e, v) == v == self.loss_maxs.get(e, v) for e, v in self.losses.items())
        steps = self.steps_per_epoch or 0
        total = steps * len(self.losses) if steps else len(self.batch_seconds) or len(self.losses)
        evidence = len(self.losses) > 1 or any(
            e in self.loss_mins and e in self.loss_maxs for e in self.losses
        )
        if len(seen) == 1 and flat and evidence and total > 1:
            return f"diverged: loss did not change over its {total} steps ({next(iter(seen)):.4f})"
        return None

    def phase_seconds(self, name: str) -> float | None:
        edges = self.phases.get(name, {})
        if "start" in edges and "end" in edges:
            return edges["end"] - edges["start"]
        return None

    @property
    def steps_per_epoch(self) -> int | None:
        return self.hello.get("steps_per_epoch")

    def missing_epochs(self) -> list[int]:
        """Epochs before the last one recorded that have no time: lost lines, never shifted figures."""
        last = max(self.epoch_times, default=0)
        return [e for e in range(1, last) if e not in self.epoch_times]

    def figures(self) -> dict[str, float | None]:
        """The study's four figures and throughput for this run (None where unknown).

        Keyed by epoch number: "first epoch" is epoch 1's time or nothing, never the next one's.
        """
        epochs = [self.epoch_times[e] for e in sorted(self.epoch_times)]
        first = self.epoch_times.get(1)
        rest = [t for e, t in sorted(self.epoch_times.items()) if e > 1]
        samples = self.hello.get("samples_per_epoch") or (next(iter(self.epoch_samples.values()), None))
        if rest and samples:
            images_per_s = samples * len(rest) / sum(rest)
        elif first is not None and samples:
            images_per_s = samples / first
        else:
            images_per_s = None
        return {
            "mean_epoch_s": mean(epochs) if epochs else None,
            "first_epoch_s": first,
            "mean_epoch_excl_first_s": mean(rest) if rest else None,
            "build_s": self.phase_seconds("build"),
            "images_per_s": images_per_s,
            "time_to_first_batch_s": self.phase_seconds("first_batch"),
        }


@dataclass
class NodeRun(RunState):
    """Node k's share of a run on several machines (issue 33): its runner's events and its benchtui's
    run_start, gpu samples and run_end, as node 0 recorded them tagged ``node`` k. The same fold as a run's
    own (its hello, batch windows, epochs, per-GPU telemetry, status and reason), kept apart from the run's
    figures: node 0's are the run's own."""

    node: int = 0
    last_gpus: list[dict[str, Any]] = field(default_factory=list)  # its GPUs in node k's newest sample
    # When its first batch started, by the event's ``t`` (node 0's clock: node 0 shifts what node k sends onto
    # it; a phase's own ``at`` is node k's runner's): from then to its run_end its GPU samples are training's.
    trained_from: float | None = None


def loss_word(value: float) -> str:
    """A non-finite loss as a reason says it: "NaN", "inf", "-inf"."""
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def parse_loss(value: object) -> float | None:
    """A loss as the wire carries it: a JSON number, or one of the strings "nan", "inf", "-inf"; None else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(str(value))
    return None


def wire_loss(value: float) -> float | str:
    """A loss as the wire and the JSON files write it: a number, or "nan" / "inf" / "-inf"."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")

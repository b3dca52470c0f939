"""What a session's GPU and host samples give its report: the html's telemetry lines, and a watch's facts over
its run. Computed where the samples are read, so that they can be read beside the load (``reporting.ahead``)
and only this comes back: a few lists of numbers, not a hundred thousand samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchtui.core.plan.plan import Plan
from benchtui.core.reporting.model.environment import telemetry_facts
from benchtui.core.store.session import SessionFolder


@dataclass(frozen=True)
class GpuLines:
    """One GPU's lines: its utilization (%), memory used and the runner process's own (GiB; ``proc``: None
    when no sample has it), one value per sample, None where the sample has no such reading."""

    index: int
    util: list[float | None]
    used: list[float | None]
    proc: list[float | None] | None


@dataclass(frozen=True)
class TelemetryLines:
    """Node 0's samples as the html's telemetry charts draw them. ``t0``: the first sample's time as
    recorded, ``scale`` seconds a unit of the time axis (``unit``): a run band is placed by the same sum.
    ``total_gib``: the largest memory total any GPU reported (0: none). ``cpu``: the runner's cores;
    ``others``: the other processes' cores (None: never known); ``rss``: the runner's memory (GiB), only
    where no GPU was sampled."""

    t0: float
    scale: float
    unit: str
    xs: list[float]
    gpus: list[GpuLines]
    total_gib: float
    cpu: list[float | None]
    others: list[float | None] | None
    rss: list[float | None] | None

    def x(self, t: float) -> float:
        """Where time ``t`` (as recorded) falls on the time axis."""
        return float((t - self.t0) / self.scale)


@dataclass(frozen=True)
class SamplesDigest:
    """What a report takes of the samples: node 0's ``lines`` (None: no sample), and a watch session's
    facts over its run (``over_run``; None for a plan's session)."""

    lines: TelemetryLines | None
    over_run: list[tuple[str, str]] | None


def read_digest(folder: SessionFolder, plan: Plan) -> SamplesDigest:
    """``folder``'s samples for a report of its session (whose plan is ``plan``): one pass over events.jsonl."""
    return digest(folder.gpu_samples(), bool(plan.watch.get("command")) if plan.watch else None)


def digest(samples: list[dict[str, Any]], watch_command: bool | None) -> SamplesDigest:
    """``samples`` (every GPU sample of the file, in order) for a report; ``watch_command``: whether a watch
    session ran a command (None: not a watch)."""
    # Node 0's samples: another node's GPUs (tagged ``node``) are in its row of the Nodes tables, not here.
    lines = telemetry_lines([s for s in samples if "node" not in s])
    if watch_command is None:
        return SamplesDigest(lines, None)
    during = [s for s in samples if s.get("run") is not None]
    return SamplesDigest(lines, telemetry_facts(during, watch_command))


def telemetry_lines(samples: list[dict[str, Any]]) -> TelemetryLines | None:
    """The lines of ``samples`` (pruned, in order), None when there are none."""
    if not samples:
        return None
    t0 = samples[0]["t"]
    span = samples[-1]["t"] - t0
    scale, unit = (60.0, "minutes") if span > 300 else (1.0, "seconds")
    xs = [float((s["t"] - t0) / scale) for s in samples]
    indices = sorted({g.get("index", 0) for s in samples for g in s.get("gpus") or [] if isinstance(g, dict)})
    gpus: list[GpuLines] = []
    total_gib = 0.0
    for idx in indices:
        # Each sample's reading of this GPU, found once for its four figures (a long session has 100,000s).
        readings = [_gpu_reading(s, idx) for s in samples]
        used = [_number(g, "mem_used") for g in readings]
        proc = [_number(g, "proc_mem") for g in readings]
        totals = [v for v in (_number(g, "mem_total") for g in readings) if v]
        total_gib = max([total_gib] + [t / 2**30 for t in totals])
        gpus.append(
            GpuLines(
                idx,
                [_number(g, "util") for g in readings],
                [None if v is None else v / 2**30 for v in used],
                [None if v is None else v / 2**30 for v in proc]
                if any(v is not None for v in proc)
                else None,
            )
        )
    cpu = [_host_number(s, "cpu_percent") for s in samples]
    busy = [_host_number(s, "system_busy_cores") for s in samples]
    # The CPU that other processes used: the machine's busy cores less the runner's (as the app's
    # "others CPU" and the summary's other_cpu_cores count it): on a shared CPU, the runs' contention.
    others = [
        None if b is None or c is None else max(0.0, b - c / 100) for b, c in zip(busy, cpu, strict=True)
    ]
    rss = None
    if not indices:
        rss = [None if r is None else r / 2**30 for r in (_host_number(s, "rss") for s in samples)]
    return TelemetryLines(
        t0,
        scale,
        unit,
        xs,
        gpus,
        total_gib,
        [None if c is None else c / 100 for c in cpu],
        others if any(v is not None for v in others) else None,
        rss,
    )


def _host_number(sample: dict[str, Any], key: str) -> float | None:
    """A number of a sample's host reading (the runner's CPU, its memory, the machine's busy cores)."""
    host = sample.get("host")
    value = host.get(key) if isinstance(host, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _gpu_reading(sample: dict[str, Any], idx: int) -> dict[str, Any] | None:
    """A sample's reading of GPU ``idx`` (the first that says it is that GPU), None when it has none."""
    for g in sample.get("gpus") or []:
        if isinstance(g, dict) and g.get("index", 0) == idx:
            return g
    return None


def _number(reading: dict[str, Any] | None, key: str) -> float | None:
    """A figure of a GPU's reading as a float, None when absent or not a number."""
    if reading is None:
        return None
    v = reading.get(key)
    return float(v) if isinstance(v, (int, float)) else None

"""Compute efficiency: FLOPs per training step (counted by the runner), achieved TFLOP/s, % of the GPU's peak.

The runner sends one ``flops`` event after its timed epochs (see runners/flops.py).
Achieved TFLOP/s uses the same data as images/s: FLOPs per image x the images of epochs
2..E over their time (the one epoch when there is only one), so a data-parallel run's figure
is the whole job's whatever batch the runner counted (PyTorch counts one replica's, Keras the
global one), and its share of the peak is over the peaks of every GPU the run used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchtui.core import fmt
from benchtui.core.model import gpu_peaks
from benchtui.core.model.analysis import batch_size_of, first_epoch_of, later_epochs_of, samples_per_epoch
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import describe, mean

TERA = 1e12
#: Per-step counts of a cell's runs closer than this are "the same count" (a CI can be scaled).
SAME_COUNT = 1e-6
#: Keys of a ``flops`` event kept on the run.
FLOPS_FIELDS = ("per_step", "per_image", "batch_size", "method", "counted", "convention", "reason", "seconds")


def flops_of_event(event: dict[str, Any]) -> dict[str, Any]:
    """The fields of a ``flops`` event, numbers checked (a nonsense value raises ValueError)."""
    out = {k: event.get(k) for k in FLOPS_FIELDS}
    for key in ("per_step", "per_image"):
        raw = out[key]
        if raw is not None:
            value = float(raw)
            out[key] = value if value > 0 and value != float("inf") else None
    return out


def _steps_per_epoch(run: RunState) -> int | None:
    steps = run.steps_per_epoch
    if steps:
        return int(steps)
    samples = samples_per_epoch(run)
    batch = run.flops.get("batch_size") or (run.hello.get("config") or {}).get("batch_size")
    return samples // int(batch) if samples and batch else None


def job_flops_per_step(run: RunState, flops: dict[str, Any] | None = None) -> float | None:
    """FLOPs of one step of the whole run: every replica's share (FLOPs per image x the global batch),
    whatever batch the runner counted; the count as it is when the run's batch is unknown."""
    flops = run.flops if flops is None else flops
    per_image, per_step = flops.get("per_image"), flops.get("per_step")
    batch = batch_size_of(run)
    if per_image and batch:
        return float(per_image) * batch
    return float(per_step) if per_step else None


def run_tflops(run: RunState) -> float | None:
    """Achieved TFLOP/s of one run (every device it used): FLOPs per step x steps in epochs 2..E / their time."""
    per_step = job_flops_per_step(run)
    if not per_step:
        return None
    timed = later_epochs_of(run) or first_epoch_of(run)
    steps = _steps_per_epoch(run)
    if not timed or not steps or sum(timed) <= 0:
        return None
    return per_step * steps * len(timed) / sum(timed) / TERA


#: Most devices a run's record is believed to name (a nonsense count gives no peak).
MAX_DEVICES = 1 << 16


def devices_used(run: RunState) -> int:
    """How many devices the run trained on: its replicas on every node (1 for a one-device run)."""
    config = run.hello.get("config")
    config = config if isinstance(config, dict) else {}
    count = 1
    for key in ("replicas", "nodes"):
        value = config.get(key, 1)
        count *= value if isinstance(value, int) and 0 < value <= MAX_DEVICES else 1
    if count == 1 and isinstance(run.spec.devices, int) and run.spec.devices > 1:
        count = run.spec.devices
    return count


def run_peak(run: RunState) -> tuple[float, str] | None:
    """(dense peak TFLOP/s, its source) of every GPU the run used, at the run's precision; None off GPU
    or when any of them is unknown. One GPU's peak for a one-device run; the sum over a data-parallel one's."""
    device = run.hello.get("device") or {}
    if device.get("type") != "cuda":
        return None
    config = run.hello.get("config")
    config = config if isinstance(config, dict) else {}
    assigned = [g for g in config.get("gpus") or [] if isinstance(g, dict)]
    if not assigned:
        assigned = [device.get("assigned") or {}]
    if any(g.get("mig_mode") == "enabled" or g.get("mig") for g in assigned):
        return None  # a MIG slice: some fraction of the card, whatever its name says
    settings = run.hello.get("settings") or {}
    precision = settings.get("precision") or config.get("precision")
    n = devices_used(run)
    names = [g.get("name") for g in assigned if g.get("name")]
    if not (n > 1 and len(names) == n and len(set(names)) > 1):
        names = [device.get("name")] * n  # one kind of GPU: the run's own, n times
    peaks = [gpu_peaks.peak_tflops(name, precision) for name in names]
    known = [p for p in peaks if p is not None]
    if len(known) < n:
        return None
    if n == 1:
        return known[0]
    total = sum(p[0] for p in known)
    if len(set(names)) == 1:
        return total, f"{n} × {known[0][1]}"
    return total, f"{total:g} TFLOP/s over {n} GPUs: " + "; ".join(p[1] for p in known)


#: TFLOP/s no device of a kind reaches when its own peak is not known (dense, per device): a CPU (the
#: largest two-socket servers with matrix units are in the hundreds), a GPU (the largest are a few
#: thousand at FP8). A FLOP count that gives more is wrong, whatever it says.
CEILING_TFLOPS = {"cpu": 1_000.0, "cuda": 10_000.0}
#: How far above its datasheet peak a measured rate may be before it is refused (clocks, counting
#: conventions that differ by a few percent).
PEAK_SLACK = 1.10


def flops_ceiling(run: RunState) -> tuple[float, str]:
    """(TFLOP/s, what it is) that ``run``'s achieved rate cannot exceed: its GPUs' peak with some slack
    when known, else what no device of its kind reaches, times the devices it used."""
    peak = run_peak(run)
    if peak is not None:
        return peak[0] * PEAK_SLACK, f"its GPU's peak of {peak[0]:g} TFLOP/s ({peak[1]})"
    kind = run.device_kind if run.device_kind in CEILING_TFLOPS else "cuda"
    n = devices_used(run)
    limit = CEILING_TFLOPS[str(kind)] * n
    return limit, f"{limit:g} TFLOP/s, more than any {'CPU' if kind == 'cpu' else 'GPU'}" + (
        f" × {n}" if n > 1 else ""
    )


def refused_flops(runs: Sequence[RunState]) -> str:
    """Why the FLOP counts of ``runs`` are refused ("" when they are believable): a count whose rate is
    above its device's peak (``flops_ceiling``) is not physics, and no efficiency figure is made from it."""
    for run in runs:
        achieved = run_tflops(run)
        if achieved is None:
            continue
        limit, what = flops_ceiling(run)
        if achieved > limit:
            return (
                f"FLOP count refused: {run.spec.run_id}'s count of {job_flops_per_step(run):.3g} per step "
                f"would make {achieved:.3g} TFLOP/s, above {what}"
            )
    return ""


def cell_efficiency(
    runs: Sequence[RunState],
    images_per_s: float | None = None,
    images_ci: Sequence[float | None] | None = None,
) -> dict[str, Any]:
    """The compute-efficiency fields of a summary row, from a cell's successful runs.

    ``images_per_s`` and ``images_ci`` are the row's throughput (total images over total
    time) and its 95% interval: with one FLOP count for every run, achieved TFLOP/s and
    its interval are those scaled by FLOPs per image, so they tell the same story.
    """
    refused = refused_flops(runs)
    events = [r.flops for r in runs if r.flops]
    counted = [] if refused else [f for f in events if f.get("per_step")]
    per_step = [float(f["per_step"]) for f in counted]
    per_image = [float(f["per_image"]) for f in counted if f.get("per_image")]
    achieved = [] if refused else [v for v in (run_tflops(r) for r in runs) if v is not None]
    out: dict[str, Any] = {
        "flops_per_step": mean(per_step) if per_step else None,
        "flops_per_image": mean(per_image) if per_image else None,
        "flops_method": str(counted[0].get("method") or "") if counted else "",
        "flops_counted": str(counted[0].get("counted") or "") if counted else "",
        "flops_reason": refused
        or ("" if counted else str(next((f.get("reason") for f in events if f.get("reason")), ""))),
        "flops_refused": refused,
        "achieved_tflops": mean(achieved) if achieved else None,  # replaced below when counts agree
        "achieved_tflops_spread": describe(achieved),
        "achieved_tflops_ci": None,
        "peak_tflops": None,
        "peak_fraction": None,
        "peak_source": "",
    }
    same_count = bool(per_image) and max(per_image) - min(per_image) <= SAME_COUNT * max(per_image)
    if same_count and images_per_s is not None and len(per_image) == len(runs):
        out["achieved_tflops"] = images_per_s * per_image[0] / TERA
    if same_count and images_ci and images_ci[0] is not None and images_ci[1] is not None:
        out["achieved_tflops_ci"] = [images_ci[0] * per_image[0] / TERA, images_ci[1] * per_image[0] / TERA]
    peak = next((p for p in (run_peak(r) for r in runs) if p is not None), None)
    if peak is not None and not refused:
        out["peak_tflops"], out["peak_source"] = peak
        if out["achieved_tflops"] is not None:
            out["peak_fraction"] = out["achieved_tflops"] / peak[0]
    return out


# -- live figures (the live screen) -------------------------------------------------------------
def known_flops_per_step(run: RunState, cell: Sequence[RunState]) -> float | None:
    """The run's own count, else the count of an earlier run of the same cell (same work per step).

    A runner counts after its timed epochs, so a cell's first run has no count until it
    ends; its later runs show live TFLOP/s from the start.
    """
    if run.flops.get("per_step"):
        return job_flops_per_step(run)
    for other in cell:
        if other is not run and other.flops.get("per_step"):
            return job_flops_per_step(run, other.flops)
    return None


def live_tflops(run: RunState, cell: Sequence[RunState], window: int = 20) -> float | None:
    """TFLOP/s over the run's last ``window`` batches (never its first), or None while unknown."""
    per_step = known_flops_per_step(run, cell)
    n = len(run.batch_seconds)
    if per_step is None or n < 2:
        return None
    recent = run.batch_seconds[max(1, n - window) :]
    total = sum(recent)
    value = per_step * len(recent) / total / TERA if total > 0 else None
    return value if value is None or value <= flops_ceiling(run)[0] else None  # a count past physics


@dataclass(frozen=True)
class LiveFigures:
    """What the live screen shows for a run: FLOPs per step, TFLOP/s now, % of the GPU's peak (None: unknown)."""

    flops_per_step: float | None
    tflops: float | None
    peak_tflops: float | None
    peak_fraction: float | None
    text: str


def live_figures(run: RunState, cell: Sequence[RunState]) -> LiveFigures:
    """What the live screen shows for a run: FLOPs per step, TFLOP/s now, % of the GPU's peak."""
    tflops = live_tflops(run, cell)
    peak = run_peak(run)
    fraction = tflops / peak[0] if peak and tflops is not None else None
    return LiveFigures(
        flops_per_step=known_flops_per_step(run, cell),
        tflops=tflops,
        peak_tflops=peak[0] if peak else None,
        peak_fraction=fraction,
        text=fmt.tflops_with_peak(tflops, fraction),
    )

"""Data parallel: what each device did, and how throughput scales with the number of devices.

Scaling efficiency at N devices is throughput at N over N times throughput at one device
(1.0: perfect linear scaling). Its interval is the speedup's (the hierarchical bootstrap of
``stats.ratio_ci`` over runs, then epochs, of the seconds per sample on each side), divided by N.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchtui.core.model import analysis
from benchtui.core.model.cell import Interval, ScalingCurve, ScalingPoint
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import mean, ratio_ci
from benchtui.core.plan.plan import Plan

#: Below this efficiency a point is called out in words (a straggler, an input pipeline, communication).
POOR_EFFICIENCY = 0.7
#: A rank this much slower per step than the fastest is a straggler.
STRAGGLER_RATIO = 1.10


def device_fields(plan: Plan, runs: Sequence[RunState], batch_size: int) -> dict[str, Any]:
    """A row's data-parallel figures: devices, the global batch, and each device's figures.

    ``per_device``: by rank (device i is rank i, on the i-th GPU of the run), its mean step time
    where the framework runs one process per device (PyTorch), and its GPU's mean utilization,
    power and most memory used where NVML sampled it. ``straggler``: the slowest rank's step time
    over the fastest's.
    """
    devices = plan.devices
    fields: dict[str, Any] = {"devices": devices, "global_batch": batch_size * devices}
    if devices <= 1:
        return fields
    ranks: list[list[float]] = []
    for run in runs:
        for rank, value in enumerate(run.rank_step_s()):
            if value is not None:
                while len(ranks) <= rank:
                    ranks.append([])
                ranks[rank].append(value)
    gpus: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        for position, gpu in enumerate(run.per_gpu()):
            gpus.setdefault(position, []).append(gpu)
    per_device = []
    for i in range(devices):
        entry: dict[str, Any] = {"device": i}
        if i < len(ranks) and ranks[i]:
            entry["step_s"] = mean(ranks[i])
        readings = gpus.get(i, [])
        if readings:
            entry["gpu_index"] = readings[0].get("index")
            for name in ("util", "power_w"):
                values = [g[name] for g in readings if isinstance(g.get(name), (int, float))]
                entry[name] = mean(values) if values else None
            mems = [g["mem_max"] for g in readings if isinstance(g.get("mem_max"), (int, float))]
            entry["mem_max"] = max(mems) if mems else None
        per_device.append(entry)
    fields["per_device"] = per_device
    steps = [e["step_s"] for e in per_device if e.get("step_s")]
    fields["straggler"] = max(steps) / min(steps) if len(steps) > 1 else None
    return fields


def curve(plan: Plan, framework: str, model: str, levels: dict[int, list[RunState]]) -> ScalingCurve:
    """Throughput at each device count and the efficiency against one device, with 95% intervals."""
    from benchtui.core.model.status import RunStatus

    ok = {n: [r for r in runs if r.status is RunStatus.OK] for n, runs in levels.items()}
    base = ok.get(1, [])
    base_groups, _ = analysis.figure_groups(base, "images_per_s")
    points = []
    for n, runs in sorted(ok.items()):
        per_device = plan.batch_size(model, framework, n)
        ci = analysis.figure_ci(runs, "images_per_s")
        point = ScalingPoint(
            devices=n,
            per_device_batch=per_device,
            global_batch=per_device * n,
            runs=len(runs),
            images_per_s=analysis.throughput(runs),
            images_per_s_ci=Interval(ci[0], ci[1]) if ci else None,
        )
        groups, _ = analysis.figure_groups(runs, "images_per_s")
        # Seconds per sample at 1 device over those at n: the speedup, and its interval.
        ratio = ratio_ci(groups, base_groups) if groups and base_groups else None
        if ratio is not None:
            low, high = ratio.low, ratio.high
            point = replace(
                point,
                speedup=ratio.value,
                efficiency=ratio.value / n,
                speedup_ci=Interval(low, high) if low is not None and high is not None else None,
                efficiency_ci=Interval(low / n, high / n) if low is not None and high is not None else None,
                single_run=ratio.single_run,
            )
        points.append(point)
    return ScalingCurve(framework, model, tuple(points), curve_text(points))


def curve_text(points: Sequence[ScalingPoint]) -> str:
    """The curve in words: '2 devices: 1.84× the throughput of one, 92% efficient (95% CI 88–95%)'."""
    parts = []
    for point in points:
        if point.devices == 1 or point.efficiency is None or point.speedup is None:
            continue
        text = f"{point.devices} devices: {point.speedup:.2f}× one device's throughput, {point.efficiency:.0%} efficient"
        if point.efficiency_ci:
            low, high = point.efficiency_ci
            text += f" (95% CI {low:.0%}–{high:.0%})"
        if point.single_run:
            text += ", one run per count"
        parts.append(text)
    return "; ".join(parts)

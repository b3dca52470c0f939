"""Data parallel: what each device did, and how throughput scales with the number of workers.

A point of the curve is (nodes, devices per node), its workers nodes x devices (one node: its devices, as
before several nodes). Scaling efficiency at w workers is throughput at w over w times throughput at one
worker (1.0: perfect linear scaling). Its interval is the speedup's (the hierarchical bootstrap of
``stats.ratio_ci`` over runs, then epochs, of the seconds per sample on each side), divided by w.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchtui.core.model import analysis
from benchtui.core.model.cell import Interval, ScalingCurve, ScalingPoint
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import mean, ratio_ci
from benchtui.core.plan.plan import Plan, Scale

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
    # On several nodes the global batch is every node's devices' (issue 33); one node: as before.
    fields: dict[str, Any] = {"devices": devices, "global_batch": batch_size * devices * max(1, plan.nodes)}
    if devices <= 1:
        return fields
    ranks: list[list[float]] = []
    for run in runs:
        paces = run.rank_step_s()
        if plan.nodes > 1 and (span := run.ranks_span()) is not None:  # node 0's own ranks (issue 33)
            paces = paces[span[0] : span[0] + span[1]]
        for rank, value in enumerate(paces):
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


def curve(
    plan: Plan, framework: str, model: str, levels: dict[Scale, list[RunState]] | dict[int, list[RunState]]
) -> ScalingCurve:
    """Throughput at each (nodes, devices) point and the efficiency against one worker, with 95% intervals.
    ``levels``: the runs at each point (a bare device count: that many devices on one node)."""
    from benchtui.core.model.status import RunStatus

    ok = {
        (at if isinstance(at, Scale) else Scale(1, at)): [r for r in runs if r.status is RunStatus.OK]
        for at, runs in levels.items()
    }
    base = ok.get(Scale(1, 1), [])
    base_groups, _ = analysis.figure_groups(base, "images_per_s")
    points = []
    for at, runs in sorted(ok.items(), key=lambda item: (item[0].workers, item[0].nodes)):
        n = at.workers
        per_device = plan.batch_size(model, framework, at.devices, at.nodes)
        ci = analysis.figure_ci(runs, "images_per_s")
        point = ScalingPoint(
            devices=at.devices,
            per_device_batch=per_device,
            global_batch=per_device * n,
            runs=len(runs),
            images_per_s=analysis.throughput(runs),
            images_per_s_ci=Interval(ci[0], ci[1]) if ci else None,
            nodes=at.nodes,
        )
        groups, _ = analysis.figure_groups(runs, "images_per_s")
        # Seconds per sample at 1 worker over those at n: the speedup, and its interval.
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


def point_words(point: ScalingPoint) -> str:
    """'4 devices' on one node (as before several nodes), '2 nodes × 4 devices' on several."""
    devices = f"{point.devices} device{'s' if point.devices != 1 else ''}"
    return f"{point.nodes} nodes × {devices}" if point.nodes > 1 else devices


def curve_text(points: Sequence[ScalingPoint]) -> str:
    """The curve in words: '2 devices: 1.84× the throughput of one, 92% efficient (95% CI 88–95%)'; on several
    nodes '2 nodes × 1 device: 1.84× one worker's throughput, ...'."""
    parts = []
    nodes = any(p.nodes > 1 for p in points)
    one = "one worker's" if nodes else "one device's"
    for point in points:
        if point.workers == 1 or point.efficiency is None or point.speedup is None:
            continue
        text = (
            f"{point_words(point)}: {point.speedup:.2f}× {one} throughput, {point.efficiency:.0%} efficient"
        )
        if point.efficiency_ci:
            low, high = point.efficiency_ci
            text += f" (95% CI {low:.0%}–{high:.0%})"
        if point.single_run:
            text += ", one run per count"
        parts.append(text)
    return "; ".join(parts)

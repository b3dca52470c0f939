"""Data parallel: the scaling curves, each device's figures and how each framework wires it."""

from __future__ import annotations

from typing import Any

from benchtui.core import fmt
from benchtui.core.fmt import milliseconds, times
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.model.parity import marked
from benchtui.core.model.scaling import POOR_EFFICIENCY, STRAGGLER_RATIO, point_words
from benchtui.core.reporting.model.columns import flagged_models, wording
from benchtui.core.reporting.model.environment import _join
from benchtui.core.reporting.model.figures import interval_text
from benchtui.core.reporting.model.notes import (
    NODES_NOTE,
    PER_DEVICE_GPU_NOTE,
    PER_DEVICE_RANK_NOTE,
    PER_DEVICE_STEP_NOTE,
    PER_DEVICE_TITLE,
    SCALING_CI_NOTE,
    SCALING_NODES_NOTE,
    SCALING_NOTE,
    WIRING_KEYS,
    WIRING_NOTE,
    WIRING_PER_NODE,
    WIRING_TITLE,
)
from benchtui.core.reporting.model.types import Nodes, Scaling, Table, has_brackets


def scaling_views(summary: SessionSummary) -> list[Scaling]:
    """A ``--scaling`` session, per model: a row per device count (on several nodes: per nodes × devices)
    with each framework's global batch, throughput, speedup and efficiency (95% CIs), and each framework's
    curve in words; [] otherwise.

    The global batch is one column when every framework has the same at every count, else one per framework.
    """
    curves = [c for c in summary.scaling if c.points]
    if not curves:
        return []
    words = wording(summary.rows)
    flagged = flagged_models(summary)
    out = []
    for model in dict.fromkeys(c.model for c in curves):
        mine = [c for c in curves if c.model == model]
        points = {c.framework: {(p.nodes, p.devices): p for p in c.points} for c in mine}
        counts = sorted(
            {n for by_count in points.values() for n in by_count}, key=lambda at: (at[0] * at[1], at[0])
        )
        several = any(at[0] > 1 for at in counts)
        batches = {
            n: {by_count[n].global_batch for by_count in points.values() if n in by_count} for n in counts
        }
        shared = all(len(b) == 1 for b in batches.values())
        header = ["Nodes × devices" if several else "Devices"] + (["Global batch"] if shared else [])
        for fw in points:
            label = framework_label(fw)
            header += [] if shared else [f"Global batch · {label}"]
            header += [
                f"{words.plural.capitalize()}/s · {label}",
                f"Speedup · {label}",
                f"Efficiency · {label}",
            ]
        rows = []
        for n in counts:
            name = f"{n[0]} × {n[1]}" if several else str(n[1])
            row = [name] + ([str(next(iter(batches[n])))] if shared else [])
            for by_count in points.values():
                point = by_count.get(n)
                if point is None:
                    row += ([] if shared else ["–"]) + ["–"] * 3
                    continue
                row += [] if shared else [str(point.global_batch)]
                row.append(interval_text(point.images_per_s, point.images_per_s_ci, fmt.rate))
                if n == (1, 1):  # the reference: its ratio to itself is 1 by definition, not a measurement
                    reference = point.speedup is not None
                    row += ["1.00×", "100%"] if reference else ["–", "–"]
                    continue
                row.append(interval_text(point.speedup, point.speedup_ci, times))
                row.append(interval_text(point.efficiency, point.efficiency_ci, fmt.percent))
            rows.append(row)
        lines = []
        for curve in mine:
            label = framework_label(curve.framework)
            text = curve.text or "no speedup measured (no successful run at one device, or at more)"
            lines.append(f"{label}: {text}")
            poor = [
                p
                for p in curve.points
                if p.workers > 1 and p.efficiency is not None and p.efficiency < POOR_EFFICIENCY
            ]
            if poor:
                at = ", ".join(f"{point_words(p)} ({fmt.percent(p.efficiency)})" for p in poor)
                lines.append(
                    f"{label}: below {POOR_EFFICIENCY:.0%} efficient at {at}: look for a straggler (the per-device "
                    "table), an input pipeline that cannot feed every device, or communication that does not overlap."
                )
        span = (
            f"{counts[0][0] * counts[0][1]} to {counts[-1][0] * counts[-1][1]} workers (nodes × devices)"
            if several
            else f"{counts[0][1]} to {counts[-1][1]} devices"
        )
        title = f"Scaling: {marked(model_label(model), model in flagged)} on {span}"
        align = ["r"] * len(header)
        note = SCALING_NOTE + (f" {SCALING_CI_NOTE}" if has_brackets(rows, 1) else "")
        if several:
            note += f" {SCALING_NODES_NOTE}"
        out.append(Scaling(model, Table(title, header, rows, align, note), lines))
    return out


def per_device_table(summary: SessionSummary) -> tuple[Table | None, list[str]]:
    """Rows on several devices: a row per device (rank, GPU, step time, vs the fastest, GPU util, power,
    peak memory), and one line per cell with its straggler ratio. (None, []) when no row has several.

    Columns nobody has are left out: step times on a framework that drives every device from one
    process, GPU figures on a CPU.
    """
    several = [
        r
        for r in summary.rows
        if r.devices > 1 and any(e.step_s is not None or e.gpu is not None for e in r.per_device or ())
    ]
    if not several:
        return None, []
    entries = [e for r in several for e in r.per_device or ()]
    steps = any(e.step_s is not None for e in entries)
    gpus = any(
        x is not None
        for e in entries
        if e.gpu is not None
        for x in (e.gpu.index, e.gpu.util, e.gpu.power_w, e.gpu.mem_max)
    )
    header = ["Model", "Framework", "Rank"] + (["GPU"] if gpus else [])
    header += ["Step time (ms)", "vs fastest"] if steps else []
    header += ["GPU util", "Power", "Peak memory"] if gpus else []
    flagged = flagged_models(summary)
    rows, lines = [], []
    for row in several:
        names = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
        ]
        per = row.per_device or ()
        fastest = min((e.step_s for e in per if e.step_s is not None), default=None)
        for entry in per:
            gpu = entry.gpu
            cells = [*names, str(entry.device)]
            if gpus:
                cells.append("–" if gpu is None or gpu.index is None else str(gpu.index))
            if steps:
                step = entry.step_s
                cells.append(milliseconds(step))
                cells.append(times(step / fastest) if step is not None and fastest else "–")
            if gpus:
                util, power = (gpu.util, gpu.power_w) if gpu is not None else (None, None)
                cells.append("–" if util is None else f"{util:.0f}%")
                cells.append("–" if power is None else f"{power:.0f} W")
                cells.append(fmt.bytes_(gpu.mem_max if gpu is not None else None))
            rows.append(cells)
        ratio = row.straggler
        if isinstance(ratio, (int, float)):
            slow = ratio >= STRAGGLER_RATIO
            lines.append(
                f"{model_label(row.model)} · {framework_label(row.framework)}: straggler ratio {ratio:.2f}× "
                "(the slowest rank's step time over the fastest's)"
                + (f": above {STRAGGLER_RATIO:.2f}×, a straggler holds every step back" if slow else "")
            )
    align = ["l", "l"] + ["r"] * (len(header) - 2)
    note = " ".join(
        [PER_DEVICE_RANK_NOTE]
        + ([PER_DEVICE_STEP_NOTE] if steps else [])
        + ([PER_DEVICE_GPU_NOTE] if gpus else [])
    )
    title = PER_DEVICE_TITLE if gpus else "Per device: each rank's step time"
    return Table(title, header, rows, align, note), lines


def _wiring_value(value: Any) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "–"
    if isinstance(value, dict):
        return _join(value) or "–"
    return str(value)


def wiring_table(summary: SessionSummary, frameworks: list[str]) -> Table | None:
    """Each framework's data-parallel wiring side by side: a row per setting (engine, all-reduce, buckets,
    overlap, then the rest, sorted), a column per framework; None when no runner recorded one."""
    records = summary.distributed or {}
    if not isinstance(records, dict):
        return None
    order = [fw for fw in frameworks if fw in records] + [fw for fw in records if fw not in frameworks]
    order = [fw for fw in order if isinstance(records[fw], dict)]
    if not order:
        return None
    keys = [str(k) for fw in order for k in records[fw] if k not in WIRING_PER_NODE]
    rest = sorted(set(keys) - set(WIRING_KEYS))
    rows = []
    for key in [k for k in WIRING_KEYS if k in keys] + rest:
        label = WIRING_KEYS.get(key) or key.replace("_", " ").capitalize()
        rows.append([label] + [_wiring_value(records[fw].get(key)) for fw in order])
    header = ["Setting"] + [framework_label(fw) for fw in order]
    return Table(WIRING_TITLE, header, rows, ["l"] * len(header), WIRING_NOTE)


def _ranks_text(ranks: tuple[int, int] | None) -> str:
    """'0–3' (first to last), '2' for one, '–' when its runner did not say."""
    if ranks is None:
        return "–"
    first, count = ranks
    return str(first) if count == 1 else f"{first}–{first + count - 1}"


def node_views(summary: SessionSummary) -> list[Nodes]:
    """Every cell on several machines: a row per node (node, host, ranks, step time, vs the fastest node, its
    slowest rank, GPU util, peak memory), then its straggler line and the inter-node link; [] on one node.
    Power is in the csv and json: the table fits 80 columns without it.

    Columns nobody has are left out: the slowest rank where no framework timed each rank, GPU figures on a CPU.
    """
    rows = [r for r in summary.rows if r.per_node]
    out = []
    for row in rows:
        out.append(_node_view(row))
    return out


def _node_view(row: CellSummary) -> Nodes:
    per = row.per_node or ()
    ranked = any(f.rank_step_s for f in per)
    gpus = any(x is not None for f in per for x in (f.util, f.mem_max))
    unfinished = any(f.status != "ok" for f in per)
    header = ["Node", "Host", "Ranks", "Step time (ms)", "vs fastest"]
    header += ["Slowest rank (ms)"] if ranked else []
    header += ["GPU util", "Peak memory"] if gpus else []
    header += ["Status"] if unfinished else []
    fastest = min((f.step_s for f in per if f.step_s), default=None)
    table_rows = []
    for f in per:
        cells = [str(f.node), f.host or "–", _ranks_text(f.ranks), milliseconds(f.step_s)]
        cells.append(times(f.step_s / fastest) if f.step_s and fastest else "–")
        if ranked:
            timed = [(i, s) for i, s in enumerate(f.rank_step_s) if s is not None]
            if timed and f.ranks is not None:
                i, slowest = max(timed, key=lambda t: t[1])
                cells.append(f"{f.ranks[0] + i}: {milliseconds(slowest)}")
            else:
                cells.append("–")
        if gpus:
            cells.append("–" if f.util is None else f"{f.util:.0f}%")
            cells.append(fmt.bytes_(f.mem_max))
        if unfinished:
            cells.append(f.status)
        table_rows.append(cells)
    lines = []
    if row.node_straggler is not None:
        lines.append(row.node_straggler.text)
    links = {f.link for f in per if f.link}
    if row.link or links:
        lines.append(f"Inter-node link: {row.link or next(iter(links))}")
        for f in per:
            if f.link and f.link != (row.link or next(iter(links))):
                lines.append(f"node {f.node}'s runner named another link: {f.link}")
    title = f"Nodes: {model_label(row.model)} · {framework_label(row.framework)} on {row.nodes} machines"
    align = ["r", "l", "r", "r", "r"] + ["r"] * (len(header) - 5)
    straggler = row.node_straggler.text if row.node_straggler is not None else ""
    return Nodes(
        row.model, row.framework, Table(title, header, table_rows, align, NODES_NOTE), lines, straggler
    )

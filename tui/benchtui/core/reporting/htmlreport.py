"""The HTML report of a session: one self-contained file with the study's tables and inline SVG plots."""

from __future__ import annotations

import math
import re
from html import escape
from typing import IO, Any
from urllib.parse import quote

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, Interval, SessionSummary
from benchtui.core.model.parity import marked
from benchtui.core.model.why import CATEGORY_LABELS, ms
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting.folder import holds_file
from benchtui.core.reporting.model import (
    ANSWER_TITLE,
    DEVICES_NOTE,
    Mark,
    Report,
    SweepChart,
    Table,
    Verdict,
    Why,
    grouped_problems,
    row_flagged,
)
from benchtui.core.reporting.model.figures import point_column, point_text
from benchtui.core.reporting.model.losses import loss_text
from benchtui.core.reporting.model.sweep import (
    BEST_NOTE,
    BEST_TITLE,
    GENERATE_CHARTS,
    SAME_TITLE,
    generate_chart,
)
from benchtui.core.reporting.model.telemetry import TelemetryLines
from benchtui.core.reporting.plots import (
    CATEGORY_COLORS,
    Band,
    Bar,
    Curve,
    Series,
    Stack,
    bar_chart,
    color_for,
    line_chart,
    run_dash,
    scaling_chart,
    shade,
    stacked_bars,
)
from benchtui.core.store.session import no_gc_passes
from benchtui.core.wire.events import PROFILE_CATEGORIES

#: Points per plotted line: enough for a 960 px chart, small enough for a 2 MB report.
MAX_POINTS = 800
#: Telemetry lines in neutral colours: the framework colours are taken by the run bands.
GPU_COLORS = ("#343a40", "#2b8a3e", "#c2255c", "#e67700")

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1020px;
color:#212529;line-height:1.45;padding:0 12px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dee2e6;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.facts{color:#495057;font-size:14px}.facts b{color:#212529;font-weight:600}
table{border-collapse:collapse;font-size:13px;margin:6px 0 4px;width:100%}
th,td{border:1px solid #dee2e6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:nth-child(even) td{background:#f8f9fa}
.ok{color:#2b8a3e}.failed{color:#c92a2a;font-weight:600}.unavailable{color:#e67700}.incomplete,.pending{color:#862e9c}
.ns{color:#868e96}.sig{font-weight:600}
tr td.unreliable{background:#fff9db;color:#a35200;border-left:3px solid #f59f00}
.warn{background:#fff9db;border:1px solid #ffe066;border-radius:6px;padding:8px 12px;font-size:13px}
.warn ul{margin:0;padding-left:18px}
.note{color:#868e96;font-size:12px;margin:2px 0 10px}
figure{margin:10px 0 18px}svg{max-width:100%;height:auto;background:#fff}
details{margin:4px 0}pre{background:#f8f9fa;border:1px solid #dee2e6;padding:8px;font-size:12px;overflow-x:auto;
white-space:pre-wrap;word-break:break-all;max-height:320px}
.env td:first-child{white-space:nowrap;font-weight:600;width:150px}
footer{color:#868e96;font-size:12px;margin-top:32px}
table.fit td.num{white-space:normal}table.fit td.num span{white-space:nowrap}table.fit td,table.fit th{padding:4px 5px}
.pair{display:flex;flex-wrap:wrap;gap:12px}.pair svg{flex:1 1 420px}
ul.lines{font-size:13px;margin:4px 0 6px;padding-left:18px}
"""


def _text(value: Any, one_line: bool = True) -> str:
    """Text for HTML: escaped, and without control characters (session text is not trusted)."""
    return escape(fmt.clean(value, one_line=one_line), quote=True)


def log_tail(report: Report, run_id: str) -> str:
    """The end of a run's log as the report holds it ('' without one; ``folder.log_text``)."""
    return next((r.log_tail for r in report.runs if r.run_id == run_id), "")


# -- tables ---------------------------------------------------------------------------
def _status_cell(row: CellSummary) -> str:
    """A cell's status; its reason is under "Failures and gaps", said once for the cells that share it."""
    status = row.status
    # A class the stylesheet lacks styles itself: the stylesheet (every report's head) stays as it was.
    style = ' style="color:#c92a2a;font-weight:600"' if status == "diverged" else ""
    return f'<span class="{_text(status)}"{style}>{_text(status)}</span>' + (" *" if row.reason else "")


def _figure(text: str, fit: bool) -> str:
    """A figure's cell; with ``fit`` its value and its interval may go on two lines, each kept whole."""
    if not fit:
        return _text(text)
    return " ".join(f"<span>{_text(part)}</span>" for part in re.split(r" (?=\[)", text))


def _table(table: Table, notes: list[str] | None = None, fit: bool = False) -> str:
    """A report table under its title, numbers right-aligned, its notes below.

    ``fit``: a wide table (many frameworks' columns) that stays on the page, a figure wrapping
    before its interval when it must.
    """
    opening = '<table class="fit">' if fit else "<table>"
    parts = (
        [f"<h3>{_text(table.title)}</h3>{opening}<tr>"]
        + [f"<th>{_text(h)}</th>" for h in table.header]
        + ["</tr>"]
    )
    for row in table.rows:
        parts.append("<tr>")
        parts += [
            f'<td class="num">{_figure(c, fit)}</td>' if align == "r" else f"<td>{_text(c)}</td>"
            for c, align in zip(row, table.align, strict=False)
        ]
        parts.append("</tr>")
    parts.append("</table>")
    notes = [table.note] if notes is None and table.note else notes or []
    if notes:
        parts.append('<p class="note">' + "<br>".join(_text(n) for n in notes) + "</p>")
    return "".join(parts)


def _study_tables(report: Report) -> str:
    parts = [_table(report.side_by_side)] + [_table(t) for t in report.figure_tables]
    parts.append(f'<p class="note">{_text(report.study_note)}</p>')
    if report.devices > 1 or report.nodes > 1:
        parts.append(f'<p class="note">{_text(DEVICES_NOTE)}</p>')
    return "".join(parts)


def _lines(lines: list[str]) -> str:
    return (
        '<ul class="lines">' + "".join(f"<li>{_text(line)}</li>" for line in lines) + "</ul>" if lines else ""
    )


def _scaling_plots(report: Report, model: str) -> str:
    """Efficiency and throughput against the device count, a line per framework in its colour (CIs as
    whiskers), with linear scaling dashed: 100% efficient, and each framework's one-device rate × N. On
    several nodes against the workers, each tick labelled nodes × devices ('2×4')."""
    frameworks = list(report.source.frameworks)
    curves = [c for c in report.summary.scaling if c.model == model and c.points]
    efficiency: list[Curve] = []
    rate: list[Curve] = []
    counts = sorted({p.workers for c in curves for p in c.points})
    several = any(p.nodes > 1 for c in curves for p in c.points)
    names = {p.workers: f"{p.nodes}×{p.devices}" for c in curves for p in c.points} if several else None
    unit = "worker" if several else "device"
    words = report.wording.plural
    for curve in curves:
        fw = curve.framework
        color = color_for(fw, frameworks.index(fw) if fw in frameworks else len(frameworks))
        label = framework_label(fw)
        points = sorted(curve.points, key=lambda p: p.workers)
        xs = [p.workers for p in points]

        def ci(interval: Interval | None, i: int, scale: float = 1.0) -> float | None:
            return interval[i] * scale if interval is not None else None

        efficiency.append(
            Curve(
                label,
                xs,
                [None if p.efficiency is None else p.efficiency * 100 for p in points],
                [None if p.workers == 1 else ci(p.efficiency_ci, 0, 100) for p in points],
                [None if p.workers == 1 else ci(p.efficiency_ci, 1, 100) for p in points],
                color,
            )
        )
        rate.append(
            Curve(
                label,
                xs,
                [p.images_per_s for p in points],
                [ci(p.images_per_s_ci, 0) for p in points],
                [ci(p.images_per_s_ci, 1) for p in points],
                color,
            )
        )
        base = next((p.images_per_s for p in points if p.workers == 1), None)
        if base is not None:
            rate.append(
                Curve(f"linear from 1 {unit}", counts, [base * n for n in counts], color=color, dashed=True)
            )
    if not curves:
        return ""
    efficiency.append(Curve("linear (100%)", counts, [100.0] * len(counts), color="#868e96", dashed=True))
    name = model_label(model)
    axis: dict[str, Any] = (
        {"x_label": "workers (nodes × devices)", "x_tip": "at {x} (nodes × devices)", "x_names": names}
        if several
        else {}
    )
    return (
        '<figure class="pair">'
        + scaling_chart(
            f"{name}: scaling efficiency",
            efficiency,
            "% of linear scaling",
            percent=True,
            desc=f"speedup over one {unit} divided by the {unit}s; whiskers: 95% CI; dashed: linear scaling",
            **axis,
        )
        + scaling_chart(
            f"{name}: throughput",
            rate,
            f"{words}/s",
            desc=f"dots: throughput at each {unit} count, whiskers: 95% CI; dashed: one {unit}'s × N",
            **axis,
        )
        + "</figure>"
    )


def _data_parallel(report: Report) -> str:
    """A session on several devices: each framework's wiring, the scaling per model (table, curves in
    words, plots), each device's figures with the straggler ratios; '' on one device."""
    parts = []
    if report.wiring is not None:
        parts.append(_table(report.wiring))
    for view in report.scaling:
        # More than two frameworks' columns: a figure may wrap before its interval rather than leave the page.
        parts.append(_table(view.table, [], fit=len(view.table.header) > 8) + _lines(view.lines))
        parts.append(f'<p class="note">{_text(view.table.note)}</p>')
        parts.append(_scaling_plots(report, view.model))
    if report.per_device is not None:
        parts.append(_table(report.per_device, []) + _lines(report.per_device_notes))
        parts.append(f'<p class="note">{_text(report.per_device.note)}</p>')
    for node_view in report.node_views:  # several machines (issue 33): a table per cell and its lines
        parts.append(_table(node_view.table, []) + _lines(node_view.lines))
    if report.node_views:
        parts.append(f'<p class="note">{_text(report.node_views[0].table.note)}</p>')
    return "<h2>Data parallel</h2>" + "".join(parts) if parts else ""


def _trace_link(report: Report, path: str) -> str:
    """A trace's path as a link relative to the session folder, where the report is written by default; plain
    text, saying so, when the folder holds no such regular file (removed, or a link: never followed)."""
    if holds_file(report.source.path, path):
        return f'<a href="{_text(quote(path, safe="/"))}">{_text(path)}</a>'
    return f"{_text(path)} (not in the session folder)"


def _why_chart(view: Why) -> str:
    """A stacked bar per framework: its timed step by category, in milliseconds, on one scale."""
    stacks = [
        Stack(
            framework_label(side.framework),
            [(c, side.seconds(c) * 1000) for c in PROFILE_CATEGORIES],
            "ms",
        )
        for side in view.data.sides
    ]
    return stacked_bars(
        f"{model_label(view.model)}: where a step goes",
        stacks,
        CATEGORY_COLORS,
        CATEGORY_LABELS,
        "milliseconds per step (each framework's profiled shares of its timed step)",
        desc="a bar per framework: its timed step divided as its own profiler divided the profiled steps",
        value_text=lambda value: ms(value / 1000),  # as the table writes them
    )


def _why(report: Report) -> str:
    """A ``--profile`` session, per model: the breakdown table, the sentence, each profile in words, the
    counters, a stacked bar per framework, the traces and the longest ops; '' without profiles."""
    parts = []
    for view in report.why:
        parts.append(_table(view.table, []))
        parts += [f'<p class="sig">{_text(text)}</p>' for text in view.text]
        parts.append(_lines(view.lines))
        parts.append(f"<figure>{_why_chart(view)}</figure>")
        if view.traces:
            parts.append(
                '<ul class="lines">'
                + "".join(
                    f"<li>Trace, {_text(framework)}, {_text(run)}: {_trace_link(report, path)} ({_text(size)})</li>"
                    for framework, run, path, size in view.traces
                )
                + "</ul>"
            )
        parts.append(f'<p class="note">{_text(view.table.note)}</p>')
        if view.top is not None:
            parts.append(_table(view.top))
    return "<h2>Why: where step time goes</h2>" + "".join(parts) if parts else ""


def _warmup(report: Report) -> str:
    """The warm-up table, the cells whose epochs stalled before their first batch, and how to read it."""
    if not report.warmup.rows:
        return ""
    note = f'<p class="note">{_text(report.warmup.note)}</p>'
    return _table(report.warmup, []) + _lines(report.warmup_notes) + note


def _efficiency_table(report: Report) -> str:
    """FLOPs per step, achieved TFLOP/s and % of the GPU's peak per cell ('' when nothing was counted)."""
    if report.efficiency is None:
        return ""
    notes = [report.efficiency.note] + [f"{fw}: {method}." for fw, method in report.efficiency_methods]
    notes += [f"Peak: {p}." for p in report.peak_sources]
    return _table(report.efficiency, notes)


def _parity_table(report: Report) -> str:
    """Each framework's network per model and the sentence of each ('' when no model has two that reported)."""
    if report.parity is None:
        return ""
    return _table(report.parity, [report.parity.note, *report.parity_notes])


def _cores(value: Any) -> str:
    """Cores busy, '0.42 cores'; '–' when not sampled."""
    return f"{value:.2f} cores" if isinstance(value, (int, float)) else "–"


def _detail_table(summary: SessionSummary) -> str:
    """Per cell: batch, runs, median batch and its spread, peak memory, the CPU other processes used
    while its runs trained (the most of its runs' means), status."""
    points = point_column(summary)  # a sweep: each row's point after its framework
    head = (
        "<table><tr><th>Model</th><th>Framework</th>"
        + ("<th>Point</th>" if points else "")
        + "<th>Batch</th><th>Runs</th><th>Median batch (s)</th>"
        "<th>Batch IQR/median</th><th>Peak memory</th><th>Other processes' CPU</th><th>Status</th></tr>"
    )
    parts = [head]
    median = fmt.seconds_column((r.batch.median if r.batch is not None else None for r in summary.rows), 4)
    for row in summary.rows:
        batch = row.batch
        ratio = batch.iqr_ratio if batch is not None else None
        parts.append(
            f"<tr><td>{_text(marked(model_label(row.model), row_flagged(row)))}</td>"
            f"<td>{_text(framework_label(row.framework))}</td>"
            + (f"<td>{_text(point_text(row.point))}</td>" if points else "")
            + f'<td class="num">{_text("–" if row.batch_size is None else row.batch_size)}</td>'
            f'<td class="num">{_text(row.runs)}/{_text(row.runs_planned)}</td>'
            f'<td class="num">{_text(median(batch.median if batch is not None else None))}</td>'
            f'<td class="num">{"–" if ratio is None else _text(f"{ratio:.1%}")}</td>'
            f'<td class="num">{_text(fmt.bytes_(row.peak_memory_bytes))}</td>'
            f'<td class="num">{_text(_cores(row.other_cpu_cores))}</td>'
            f"<td>{_status_cell(row)}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)


#: The class of a verdict's cell, by its mark: significant ("sig", bold only where it names a winner), not
#: (or without a CI), no ratio, one framework alone, a ratio the machine may have decided (a warning).
VERDICT_CLASSES: dict[Mark, str] = {
    Mark.WINNER: "sig",
    Mark.NOT_SIGNIFICANT: "ns",
    Mark.NO_CI: "ns",
    Mark.ABOUT_SAME: "",
    Mark.UNRELIABLE: "unreliable",
    Mark.REFUSED: "unavailable",
    Mark.NONE: "unavailable",
    Mark.ALONE: "",
}


def verdict_class(verdict: Verdict) -> str:
    """The class of a verdict's cell (``VERDICT_CLASSES``); a significant one that names no winner, "ns"."""
    cls = VERDICT_CLASSES[verdict.mark]
    return "ns" if cls == "sig" and not verdict.highlighted else cls


def _answer(report: Report) -> str:
    """What the report opens with: the verdict per model (its caveats in it), how to read it, and one chart."""
    answer = report.answer
    if not answer.verdicts:
        return ""
    parts = [f"<h2>The answer</h2><h3>{_text(ANSWER_TITLE)}</h3>"]
    if answer.sweep:  # a sweep: best vs best, then the verdict at each point
        parts.append(f'<p class="facts"><b>Sweep</b> {_text(answer.sweep)}</p>')
        if answer.best:
            parts.append(f"<h3>{_text(BEST_TITLE)}</h3>")
            parts.append("<table><tr><th>Model</th><th>Result</th><th>Chosen points</th><th>From</th></tr>")
            for best in answer.best:
                v = best.verdict
                cls = verdict_class(v)
                parts.append(
                    f"<tr><td>{_text(v.label)}</td>"
                    + (f'<td class="{cls}">' if cls else "<td>")
                    + f"{_text(v.text)}</td><td>{'<br>'.join(_text(side) for side in best.sides) or '–'}</td>"
                    + f"<td>{_text(v.basis or '–')}</td></tr>"
                )
            parts.append(f'</table><p class="note">{_text(answer.best_note or BEST_NOTE)}</p>')
        parts.append(f"<h3>{_text(SAME_TITLE)}</h3>")
    parts.append("<table><tr><th>Model</th><th>Result</th><th>From</th></tr>")
    for v in answer.verdicts:
        cls = verdict_class(v)
        parts.append(
            f"<tr><td>{_text(v.label)}</td>"
            + (f'<td class="{cls}">' if cls else "<td>")
            + f"{_text(v.text)}</td><td>{_text(v.basis or '–')}</td></tr>"
        )
    parts.append("</table>")
    if answer.note:
        parts.append(f'<p class="note">{_text(answer.note)}</p>')
    return "".join(parts) + _answer_chart(report)


def _answer_chart(report: Report) -> str:
    """Per model, each framework's time per sample over the first framework's, in the framework colours,
    its 95% CI as a whisker: the ratio of the verdict, at a glance ('' when no model has one)."""
    verdicts = [v for v in report.answer.verdicts if v.compared and v.ratio is not None]
    # A ratio the machine may have decided is no verdict: not drawn as one, and said so.
    left_out = list(dict.fromkeys(v.label for v in report.answer.verdicts if v.kind == "unreliable"))
    note = (
        f'<p class="note">Not drawn: {_text(", ".join(left_out))} (unreliable: no verdict).</p>'
        if left_out
        else ""
    )
    if not verdicts:
        return note
    frameworks = list(report.source.frameworks)
    groups: list[tuple[str, list[Bar]]] = []
    for model, point in dict.fromkeys((v.model, v.point) for v in verdicts):  # a sweep: a group per point
        mine = [v for v in verdicts if v.model == model and v.point == point]
        bars = [Bar(mine[0].base, 1.0)]
        for v in mine:
            low, high = v.ci if v.ci is not None else (None, None)
            bars.append(Bar(v.framework, v.ratio, low, high))
        one_model = len({v.model for v in verdicts}) == 1
        groups.append((mine[0].point if point and one_model else mine[0].label, bars))
    keys = list(dict.fromkeys(b.series for _, bars in groups for b in bars))
    colors = {fw: color_for(fw, frameworks.index(fw) if fw in frameworks else i) for i, fw in enumerate(keys)}
    labels = {fw: framework_label(fw) for fw in keys}
    bases = {v.base for v in verdicts}
    base = framework_label(next(iter(bases))) if len(bases) == 1 else "each model's first framework"
    one = report.answer.unit
    return (
        "<figure>"
        + bar_chart(
            f"Time per {one} relative to {base} (lower is faster)",
            groups,
            colors,
            labels,
            f"time per {one} ÷ {base}'s",
            desc=f"bars: each framework's time per {one} over {base}'s (1: the same speed); whiskers: 95% CI",
        )
        + "</figure>"
        + note
    )


def _problems(report: Report) -> str:
    if not report.problems:
        return ""
    parts = ["<h2>Failures and gaps</h2><table><tr><th>Cells</th><th>Status</th><th>Reason</th></tr>"]
    frameworks = [framework_label(fw) for fw in report.source.frameworks]
    for cells, status, reason in grouped_problems(report.problems, frameworks):
        parts.append(
            f'<tr><td>{_text(cells)}</td><td class="{_text(status)}">{_text(status)}</td><td>{_text(reason)}</td></tr>'
        )
    parts.append("</table>")
    for run in report.runs:
        if run.status not in ("failed", "stopped", "interrupted"):
            continue
        tail = run.log_tail
        parts.append(
            f"<details><summary>{_text(run.run_id)}: {_text(run.status)} — {_text(run.reason)}</summary>"
            f"<pre>{_text(tail or '(no log)', one_line=False)}</pre></details>"
        )
    return "".join(parts)


# -- plots ----------------------------------------------------------------------------
def _bars(report: Report, name: str, title: str, y_label: str) -> str:
    frameworks = report.source.frameworks
    cells = {(r.model, r.framework, r.point): r for r in report.summary.rows}
    points = list(dict.fromkeys(r.point for r in report.summary.rows)) or [Point()]
    groups = []
    for m, p in [(m, p) for m in report.source.models for p in points]:  # a sweep: a group per point
        bars = []
        for fw in frameworks:
            row = cells.get((m, fw, p))
            value = row.figure(name) if row is not None else None
            stats = row.spread_of(name) if row is not None else None
            ok = [r for r in report.cell_runs(fw, m, _ran_at(report, fw, m, p)) if r.status == "ok"]
            dots = [v for f in (r.figures for r in ok) if (v := f[name]) is not None] if len(ok) > 1 else []
            note = {"unavailable": "n/a", "failed": "failed", "diverged": "diverged"}.get(
                row.status if row is not None else "", "–"
            )
            low, high = (stats.min, stats.max) if stats is not None else (None, None)
            bars.append(Bar(fw, value, low, high, dots, note))
        groups.append((model_label(m) + (f" · {p.label}" if p else ""), bars))
    colors = {fw: color_for(fw, i) for i, fw in enumerate(frameworks)}
    labels = {fw: framework_label(fw) for fw in frameworks}
    return bar_chart(
        title, groups, colors, labels, y_label, desc="bars: mean over runs; whiskers: min to max; dots: runs"
    )


def _ran_at(report: Report, framework: str, model: str, point: Point) -> Point | None:
    """The point whose runs measure ``point`` for a cell (a setting that changes nothing for it: the runs of
    the axis's first value, ``sweep.effective``); None without a sweep (every run of the cell)."""
    if not point:
        return None
    ran = {r.point for r in report.runs if r.framework == framework and r.model == model}
    if point in ran:
        return point
    for axis, _ in point.items:  # an axis that changes nothing for it: its runs are at the first value
        values = dict(report.sweep.axes).get(axis, ()) if report.sweep is not None else ()
        if values and (moved := point.with_value(axis, values[0])) in ran:
            point = moved
    return point


def _sweep_gains(report: Report) -> str:
    """A sweep: what each setting buys each framework (a table), why a setting has no effect."""
    sweep = report.sweep
    if sweep is None or sweep.gains is None:
        return ""
    return _table(sweep.gains, [*sweep.gains_notes, sweep.gains.note])


def _chart_curves(chart: SweepChart, key: str, frameworks: list[str], scale: float = 1.0) -> list[Curve]:
    """A sweep chart's series as lines of ``key`` (times ``scale``): a framework's colour, its other series
    lighter shades of it."""
    out = []
    shades: dict[str, int] = {}
    for s in chart.series:
        fw = s.framework
        shades[fw] = shades.get(fw, -1) + 1
        color = shade(
            color_for(fw, frameworks.index(fw) if fw in frameworks else len(frameworks)), shades[fw]
        )
        values = s.figures.get(key, ())
        out.append(
            Curve(
                s.label,
                list(s.xs),
                [None if v is None else v * scale for v, _, _ in values],
                [None if low is None else low * scale for _, low, _ in values],
                [None if high is None else high * scale for _, _, high in values],
                color,
            )
        )
    return out


def _sweep_curves(report: Report) -> str:
    """A sweep over a numeric axis: per model, the table of its curve and its charts: throughput against the
    axis, a line per framework and setting of the other axes; for inference, latency p50 and p99 too."""
    sweep = report.sweep
    if sweep is None or not sweep.curves:
        return ""
    frameworks = list(report.source.frameworks)
    words = report.wording.plural
    parts = ["<h2>Curves</h2>"]
    for table, chart in zip(sweep.curves, sweep.charts, strict=False):
        parts.append(_table(table, fit=True))
        name, axis = model_label(chart.model), chart.axis
        tip = f"at {axis} {{x}}"
        if generate_chart(chart):  # generate (issue 34): tokens/s after the first, first token, token latency
            charts = [
                scaling_chart(
                    f"{name}: {what} against {axis}",
                    _chart_curves(chart, key, frameworks, scale),
                    unit if unit != "ms" else f"{what} (ms)",
                    x_label=axis,
                    desc=f"{what} at each {axis}, a line per framework and setting of the other axes (medians; "
                    "no CI)",
                    x_tip=tip,
                )
                for key, what, unit, scale in GENERATE_CHARTS
            ]
            parts.append('<figure class="pair">' + "".join(charts) + "</figure>")
            continue
        charts = [
            scaling_chart(
                f"{name}: {words}/s against {axis}",
                _chart_curves(chart, "images_per_s", frameworks),
                f"{words}/s",
                x_label=axis,
                desc=f"throughput at each {axis}, a line per framework and setting of the other axes (lighter: "
                "the framework's other settings); whiskers: 95% CI",
                x_tip=tip,
            )
        ]
        if any("latency_p50_s" in s.figures for s in chart.series):
            for key, p in (("latency_p50_s", "p50"), ("latency_p99_s", "p99")):
                charts.append(
                    scaling_chart(
                        f"{name}: latency {p} per batch against {axis}",
                        _chart_curves(chart, key, frameworks, 1000.0),
                        f"latency {p} (ms)",
                        x_label=axis,
                        desc=f"the {p} of the batch times at each {axis}; whiskers: 95% CI",
                        x_tip=tip,
                    )
                )
        parts.append(
            ('<figure class="pair">' if len(charts) > 1 else "<figure>") + "".join(charts) + "</figure>"
        )
    parts.append(f'<p class="note">{_text(sweep.curves[0].note)}</p>')
    return "".join(parts)


def _batch_plots(report: Report) -> str:
    """Per model, the time of every batch of every run: a line per run, in its framework's colour, its runs
    told apart by their dashes (run 1 solid), a legend of the frameworks and of the dashes."""
    parts = []
    points = list(dict.fromkeys(r.point for r in report.runs)) or [Point()]
    for m, p in [(m, p) for m in report.source.models for p in points]:  # a sweep: a chart per point run
        series: list[Series] = []
        boundaries: list[float] = []
        colors: dict[str, str] = {}
        indices: set[int] = set()
        for i, fw in enumerate(report.source.frameworks):
            for run in report.cell_runs(fw, m, p if p else None):
                ys = list(run.batch_seconds)
                if not ys:
                    continue
                xs = list(map(float, range(1, len(ys) + 1)))
                if not boundaries:
                    epochs = run.batch_epochs
                    boundaries = [k + 0.5 for k in range(1, len(epochs)) if epochs[k] != epochs[k - 1]]
                index = run.index
                status = "" if run.status == "ok" else f", {run.status}"
                label = f"{framework_label(fw)} run {index}{status}"
                colors[framework_label(fw)] = color_for(fw, i)
                indices.add(index)
                series.append(Series(label, xs, ys, color_for(fw, i), dash=run_dash(index)))
        if not series:
            continue
        legend: list[tuple[str, str, bool | str]] = [(label, color, False) for label, color in colors.items()]
        if len(indices) > 1:  # the dashes say which run: one grey entry per run
            legend += [(f"run {k}", "#868e96", run_dash(k) or False) for k in sorted(indices)]
        parts.append(
            "<figure>"
            + line_chart(
                f"{model_label(m)}{f' · {p.label}' if p else ''}: time per batch over a run",
                series,
                "batch number in the run (dashed lines: epoch boundaries)",
                "seconds per batch",
                clip_quantile=0.99,
                vlines=boundaries,
                max_points=MAX_POINTS,
                desc="every run of each framework, in its colour, its runs told apart by their dashes; the "
                "first batch includes compilation",
                legend_items=legend,
            )
            + "</figure>"
        )
    return "".join(parts) or '<p class="note">No batches were recorded.</p>'


def _generation(report: Report) -> str:
    """A generate session (issue 34): its two tables, then per model a chart of latency per token: each
    cell's median latency by token index (--timing step), else each run's mean token latency per generate
    call over its calls (the first epoch's calls, its compile, before the dashed line); '' otherwise."""
    if not report.generation:
        return ""
    parts = ["<h2>Generation</h2>", *(_table(t) for t in report.generation)]
    frameworks = list(report.source.frameworks)
    for m, at in dict.fromkeys((c.model, c.point) for c in report.generation_curves):  # a sweep: per point
        curves = [c for c in report.generation_curves if (c.model, c.point) == (m, at)]
        series: list[Series] = []
        boundaries: list[float] = []
        for c in curves:
            i = frameworks.index(c.framework) if c.framework in frameworks else len(series)
            ys_ms: list[float | None] = [y * 1000 for y in c.ys]
            series.append(
                Series(
                    c.label,
                    [float(x) for x in c.xs],
                    ys_ms,
                    color_for(c.framework, i),
                    dash=run_dash(c.run) if c.run else "",
                )
            )
            if not c.per_token and c.first and not boundaries and c.first < len(c.xs):
                boundaries = [(c.xs[c.first - 1] + c.xs[c.first]) / 2]
        per_token = all(c.per_token for c in curves)
        # The first epoch's calls (each side's compile) off the scale of the steady ones, marked as such.
        steady = [y * 1000 for c in curves for y in c.ys[c.first if c.first < len(c.ys) else 0 :]]
        top = 1.5 * max(steady) if steady and not per_token else None
        parts.append(
            "<figure>"
            + line_chart(
                f"{model_label(m)}{f' · {at}' if at else ''}: latency per token"
                + (" (median over calls, by token index)" if per_token else " (each generate call's mean)"),
                series,
                "token index in the sequence (the first token is apart)"
                if per_token
                else "generate call in the run (dashed line: the first epoch's end)",
                "ms per token",
                y_max=top,
                clip_quantile=None if top else 0.99,
                vlines=boundaries,
                max_points=MAX_POINTS,
                desc="--timing step: each token's own latency, the median over the steady calls"
                if per_token
                else "--timing window: a call's time after its first token over its tokens after the first",
            )
            + "</figure>"
        )
    return "".join(parts)


def _gpu_plots(report: Report, lines: TelemetryLines | None) -> str:
    if lines is None:
        return '<p class="note">No telemetry samples were recorded.</p>'
    frameworks = report.source.frameworks
    x = lines.x
    bands = []
    banded: set[str] = set()
    for run in report.runs:
        if isinstance(run.started_t, (int, float)) and isinstance(run.ended_t, (int, float)):
            fw = run.framework
            color = color_for(fw, frameworks.index(fw) if fw in frameworks else 0)
            bands.append(Band(x(run.started_t), x(run.ended_t), color, f"{run.run_id} ({run.status})"))
            banded.add(fw)
    band_legend = {
        f"{framework_label(fw)} runs": color_for(fw, i) for i, fw in enumerate(frameworks) if fw in banded
    }
    xs = lines.xs
    x_label = f"{lines.unit} since the first sample"

    def telemetry_chart(title: str, series: list[Series], x_axis: str, y_axis: str, **options: Any) -> str:
        """One chart of the telemetry section: time axis, run bands and point budget shared."""
        chart = line_chart(
            title,
            series,
            x_axis,
            y_axis,
            bands=bands,
            band_legend=band_legend,
            max_points=MAX_POINTS,
            **options,
        )
        return f"<figure>{chart}</figure>"

    parts = []
    if lines.gpus:
        util: list[Series] = []
        mem: list[Series] = []
        for k, gpu in enumerate(lines.gpus):
            color = GPU_COLORS[k % len(GPU_COLORS)]
            util.append(Series(f"GPU {gpu.index} utilization", xs, gpu.util, color))
            mem.append(Series(f"GPU {gpu.index} memory used", xs, gpu.used, color))
            if gpu.proc is not None:
                mem.append(Series(f"GPU {gpu.index} runner process", xs, gpu.proc, color, dashed=True))
        parts.append(
            telemetry_chart(
                "GPU utilization over time",
                util,
                x_label,
                "utilization (%)",
                y_max=100,
            )
        )
        parts.append(
            telemetry_chart(
                "GPU memory over time",
                mem,
                x_label,
                "GiB",
                y_max=lines.total_gib or None,
                desc="solid: memory used on the GPU; dashed: the runner process's own memory",
            )
        )
    cpu = [Series("runner CPU (cores)", xs, lines.cpu, GPU_COLORS[0])]
    if lines.others is not None:
        cpu.append(Series("other processes' CPU (cores)", xs, lines.others, GPU_COLORS[1], dashed=True))
    cpu_chart = telemetry_chart(
        "Runner CPU over time" if len(cpu) == 1 else "CPU over time: the runner and the other processes",
        cpu,
        x_label,
        "cores busy",
        desc="solid: the runner's CPU; dashed: every other process's on the machine",
    )
    if lines.gpus:
        if len(cpu) > 1:  # a GPU session: the host's CPU too, when the machine's was sampled
            parts.append(cpu_chart)
    else:
        parts.append(
            f'<p class="note">No GPU telemetry ({_text(report.source.meta.get("telemetry") or "not recorded")}): '
            "the runner's CPU and memory, and the other processes' CPU, instead.</p>"
        )
        parts.append(cpu_chart)
        parts.append(
            telemetry_chart(
                "Runner memory over time",
                [Series("runner resident memory", xs, lines.rss or [], GPU_COLORS[0])],
                x_label,
                "GiB",
            )
        )
    return "".join(parts)


# -- the page -------------------------------------------------------------------------
def _stretch(label: str, points: list[tuple[float, float]], color: str, index: int) -> Series:
    return Series(label, [x for x, _ in points], [y for _, y in points], color, dash=run_dash(index))


def _loss_plots(report: Report) -> str:
    """Per model, each run's training loss per epoch (runners since issue 36): a line per run in its
    framework's colour, its runs told apart by their dashes; a NaN or infinite loss breaks its line and is
    marked ✕ at its epoch. '' when no run sent a loss (the report of an older session as before)."""
    if not any(r.losses for r in report.runs):
        return ""
    parts = []
    points = list(dict.fromkeys(r.point for r in report.runs)) or [Point()]
    for m, p in [(m, p) for m in report.source.models for p in points]:
        series: list[Series] = []
        marks: list[tuple[float, str, str]] = []
        colors: dict[str, str] = {}
        indices: set[int] = set()
        for i, fw in enumerate(report.source.frameworks):
            for run in report.cell_runs(fw, m, p if p else None):
                if not run.losses:
                    continue
                color = color_for(fw, i)
                status = "" if run.status == "ok" else f", {run.status}"
                label = f"{framework_label(fw)} run {run.index}{status}"
                colors[framework_label(fw)] = color
                indices.add(run.index)
                # A line per stretch of finite losses: a NaN breaks it, never joins across it.
                stretch: list[tuple[float, float]] = []
                for epoch, loss in sorted(run.losses.items()):
                    if math.isfinite(loss):
                        stretch.append((float(epoch), loss))
                        continue
                    marks.append((float(epoch), color, f"{label}: loss {loss_text(loss)} at epoch {epoch}"))
                    if stretch:
                        series.append(_stretch(label, stretch, color, run.index))
                    stretch = []
                if stretch:
                    series.append(_stretch(label, stretch, color, run.index))
        if not series and not marks:
            continue
        legend: list[tuple[str, str, bool | str]] = [(label, color, False) for label, color in colors.items()]
        if len(indices) > 1:
            legend += [(f"run {k}", "#868e96", run_dash(k) or False) for k in sorted(indices)]
        parts.append(
            "<figure>"
            + line_chart(
                f"{model_label(m)}{f' · {p.label}' if p else ''}: training loss per epoch",
                series,
                "epoch (✕: the loss was NaN or infinite)",
                "mean loss over the epoch",
                y_min=None,
                desc="every run of each framework, in its colour, its runs told apart by their dashes; a loss "
                "that went NaN or infinite breaks its line and is marked ✕ at its epoch",
                legend_items=legend,
                marks=marks,
            )
            + "</figure>"
        )
    return "<h2>Training loss per epoch</h2>" + "".join(parts) if parts else ""


def render(report: Report) -> str:
    """The whole report as one HTML string; nothing in it loads anything from anywhere."""
    source = report.source
    title = report.title
    facts = " · ".join(f"<b>{_text(k)}</b> {_text(v)}" for k, v in report.facts)
    warnings = [w.text for w in report.warnings]
    warn_html = (
        '<div class="warn"><b>Warnings</b><ul>'
        + "".join(f"<li>{_text(w)}</li>" for w in warnings)
        + "</ul></div>"
        if warnings
        else ""
    )
    env_rows = "".join(f"<tr><td>{_text(k)}</td><td>{_text(v)}</td></tr>" for k, v in report.environment)
    has_epochs = any(r.epochs for r in report.runs)
    # A watch's epochs are its command's: as many as it ran.
    epochs = max((len(r.epochs) for r in report.runs), default=0)
    steady_name = (
        "mean_epoch_excl_first_s" if (epochs if source.watch else source.epochs) > 1 else "mean_epoch_s"
    )
    body = [
        f"<h1>benchtui · {_text(title)}</h1>",
        f'<p class="facts">{facts}</p>',
        _answer(report),
        _sweep_gains(report),
        warn_html,
        "<h2>Results</h2>",
        _study_tables(report),
        _sweep_curves(report),
        "" if report.latency is None else _table(report.latency),
        _generation(report),
        _warmup(report),
        _efficiency_table(report),
        _parity_table(report),
        _data_parallel(report),
        _why(report),
        "<h2>Epoch time per model</h2>",
        "<figure>"
        + _bars(
            report,
            steady_name,
            "Epoch time"
            + (" excluding the first" if steady_name == "mean_epoch_excl_first_s" else "")
            + " (mean over runs, min–max, runs)",
            "seconds",
        )
        + "</figure>"
        if has_epochs
        else '<p class="note">No epoch finished.</p>',
        "<figure>"
        + _bars(report, "build_s", "Build time (construct, move to device, compile)", "seconds")
        + "</figure>"
        if has_epochs
        else "",
        _loss_plots(report),
        "<h2>Time per batch</h2>",
        _batch_plots(report),
        "<h2>Telemetry over time</h2>",
        _gpu_plots(report, report.telemetry),
        "<h2>Details per cell</h2>",
        _detail_table(report.summary),
        _problems(report),
        "<h2>Environment</h2>",
        f'<table class="env">{env_rows}</table>',
        f"<footer>Generated by benchtui from {_text(source.folder)}/events.jsonl. Confidence intervals: "
        "95%, seeded bootstrap over runs, then epochs or batches within runs.</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        # No network, ever: styles and images are inline, scripts are not allowed at all.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>benchtui · {_text(title)}</title><style>{CSS}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )


def write(report: Report, fh: IO[str]) -> None:
    with no_gc_passes():  # the plots' points of every GPU sample: the report holds them all (see there)
        text = render(report)
    fh.write(text)

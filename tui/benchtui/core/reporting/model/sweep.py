"""A sweep's answer as every view shows it: best vs best per model, what each setting buys each framework (a
table), and the curves against a numeric axis (batch, seq-len); from the summary's ``sweep`` and its rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import BestPoint, CellSummary, SessionSummary, SettingGain
from benchtui.core.plan.sweep import AXES, Point
from benchtui.core.reporting.model.columns import (
    GENERATE_CURVE_COLUMNS,
    LATENCY_COLUMNS,
    TOKENS_COLUMN,
    study_columns,
    wording,
)
from benchtui.core.reporting.model.figures import cell_text, column_formatter, interval_text
from benchtui.core.reporting.model.types import SweepChart, SweepSeries, SweepView, Table

#: The titles of a sweep's sections, in every view.
BEST_TITLE = "Best vs best: each framework at its fastest point"
SAME_TITLE = "Same settings: the verdict at each point"
GAINS_TITLE = "What each setting buys"
BEST_NOTE = (
    "Each framework's fastest point of the sweep (by throughput), its settings named; the ratio between the "
    "chosen cells with its 95% CI (seeded bootstrap over the runs of each). Choosing the best of several "
    "points flatters it: the bias is estimated from the runs themselves (a bootstrap of the choice)."
)
GAINS_NOTE = (
    "Throughput at a setting over at the axis's first value, the other settings held equal (the geometric "
    "mean over every such pair of points); [in brackets]: the 95% CI. 'no effect': the setting changes "
    "nothing for that framework or model, so its runs were not repeated."
)
CURVE_NOTE = (
    "One column per framework and setting of the other axes; [in brackets]: the 95% CI (seeded bootstrap "
    "over runs, then epochs)."
)
#: A generate sweep's (issue 34): its fastest point is the one of most tokens/s after the first token.
GENERATE_BEST_NOTE = (
    "Each framework's fastest point of the sweep (by the batch's tokens/s after the first token), its settings "
    "named; the ratio between the chosen cells with its 95% CI (seeded bootstrap over the runs of each, then "
    "their generate calls). Choosing the best of several points flatters it: the bias is estimated from the "
    "runs themselves (a bootstrap of the choice)."
)
GENERATE_GAINS_NOTE = (
    "The batch's tokens/s after the first token at a setting over at the axis's first value, the other "
    "settings held equal (the geometric mean over every such pair of points); [in brackets]: the 95% CI. "
    "'no effect': the setting changes nothing for that framework or model, so its runs were not repeated."
)
GENERATE_CURVE_NOTE = (
    "One column per framework and setting of the other axes. Time to first token and token latency after "
    "the first: medians (ms) over the generate calls after the first epoch (per token under --timing step, "
    "else each call's mean); tokens/s after the first token: the batch's (the verdict's figure)."
)


def generating(rows: Sequence[CellSummary]) -> bool:
    """Whether a session's rows are of ``--task generate`` (its sweep's words: tokens/s after the first)."""
    return any(r.task == "generate" for r in rows)


def best_note(rows: Sequence[CellSummary]) -> str:
    """How to read best vs best: by throughput, or generating by tokens/s after the first token."""
    return GENERATE_BEST_NOTE if generating(rows) else BEST_NOTE


def generate_side_rate(rows: Sequence[CellSummary], model: str, side: BestPoint) -> str | None:
    """A generate sweep's chosen point's speed as best vs best says it beside its settings: '3,032 tok/s
    after the first token' (the batch's, from its cell's ``GenerationFigures``); None: not a generate cell,
    or no such figure."""
    row = next(
        (r for r in rows if r.model == model and r.framework == side.framework and r.point == side.point),
        None,
    )
    rate = row.figure("generation.batch_tokens_per_s") if row is not None else None
    return f"{fmt.rate(rate)} tok/s after the first token" if rate is not None else None


#: A generate sweep's charts (html): (figure key, what it is, its axis unit, scale), as ``curve_tables``
#: puts them in each ``SweepChart``'s series.
GENERATE_CHARTS: tuple[tuple[str, str, str, float], ...] = (
    ("generation.batch_tokens_per_s", "the batch's tokens/s after the first token", "tokens/s", 1.0),
    ("generation.first_token_s", "time to first token p50", "ms", 1000.0),
    ("generation.token_s", "token latency p50 after the first", "ms", 1000.0),
)


def generate_chart(chart: SweepChart) -> bool:
    """Whether a sweep chart is a generate sweep's (its series carry ``GENERATE_CHARTS``' keys, no
    images_per_s)."""
    return any(GENERATE_CHARTS[0][0] in s.figures for s in chart.series)


def gain_cell(gain: SettingGain | None) -> str:
    """A setting's speed-up for one framework: '2.90× [2.71×–3.08×]', 'no effect', or '–'."""
    if gain is None:
        return "–"
    if gain.no_effect:
        return "no effect"
    ci = (gain.ci_low, gain.ci_high) if gain.ci_low is not None and gain.ci_high is not None else None
    return interval_text(gain.factor, ci, fmt.times)


def gains_table(
    gains: Sequence[SettingGain], frameworks: Sequence[str], generate: bool = False
) -> tuple[Table | None, list[str]]:
    """A row per (model, axis, value), a column per framework; and why a setting has no effect, once each
    (``generate``: the speed-ups are of tokens/s after the first token, and its note says so)."""
    if not gains:
        return None, []
    models = list(dict.fromkeys(g.model for g in gains))
    fws = [fw for fw in frameworks if any(g.framework == fw for g in gains)]
    fws += [fw for fw in dict.fromkeys(g.framework for g in gains) if fw not in fws]
    by = {(g.model, g.axis, g.value, g.framework): g for g in gains}
    settings = list(dict.fromkeys((g.model, g.axis, g.value, g.baseline) for g in gains))
    several = len(models) > 1
    header = (["Model"] if several else []) + ["Setting"] + [framework_label(fw) for fw in fws]
    rows = []
    for model, axis, value, baseline in settings:
        row = [model_label(model)] if several else []
        row.append(f"{axis} {value} (vs {baseline})")
        row += [gain_cell(by.get((model, axis, value, fw))) for fw in fws]
        rows.append(row)
    notes = list(
        dict.fromkeys(
            (f"{model_label(g.model)} · " if several else "")
            + f"{framework_label(g.framework)} · {g.axis}: no effect ({g.no_effect})"
            for g in gains
            if g.no_effect
        )
    )
    title = GAINS_TITLE + ("" if several else f": {model_label(models[0])}")
    align = (["l"] if several else []) + ["l"] + ["r"] * len(fws)
    return Table(title, header, rows, align, GENERATE_GAINS_NOTE if generate else GAINS_NOTE), notes


def curve_tables(
    rows: Sequence[CellSummary],
    axes: Sequence[tuple[str, tuple[str, ...]]],
    frameworks: Sequence[str],
    effective: Mapping[tuple[str, str, Point], Point],
) -> tuple[list[Table], list[SweepChart]]:
    """Per model and numeric axis with two values or more: a row per value, a column per framework and
    setting of the other axes (a framework's setting that changes nothing for it, left out): throughput for
    training; latency p50, p99 and throughput for inference; for generate, time to first token and token
    latency (p50) and the batch's tokens/s after the first token (``GENERATE_CURVE_COLUMNS``), never
    sequences/s. ``effective`` maps (framework, model, point) to the point whose runs measure it."""
    words = wording(rows)
    out = []
    charts = []
    cells = {(r.model, r.framework, r.point): r for r in rows}
    throughput = next(c for c in study_columns(words) if c.key == "images_per_s")
    for model in dict.fromkeys(r.model for r in rows):
        mine = [r for r in rows if r.model == model]
        for axis, values in axes:
            info = AXES.get(axis)
            numbers = [v for v in values if info is not None and info.number(v) is not None]
            if len(numbers) < 2:
                continue
            # The other axes' settings, in the plan's order: a series each, per framework.
            others = list(dict.fromkeys(r.point.without(axis) for r in mine))
            series: list[tuple[str, str, Point]] = []  # (framework, its label, the other axes' point)
            for fw in frameworks:
                for other in others:
                    points = [_at(other, axis, v, axes) for v in numbers]
                    if any(effective.get((fw, model, p), p) != p for p in points):
                        continue  # the same runs as another series: a setting that changes nothing here
                    if not any((model, fw, p) in cells for p in points):
                        continue
                    label = framework_label(fw) + (f", {other.label}" if other else "")
                    series.append((fw, label, other))
            if not series:
                continue
            generate = generating(mine)
            figures = (
                list(GENERATE_CURVE_COLUMNS)
                if generate
                else (
                    [*(c for c in LATENCY_COLUMNS if c.key in ("latency_p50_s", "latency_p99_s")), throughput]
                    if words.inference
                    else [throughput]
                )
                + ([TOKENS_COLUMN] if words.tokens else [])  # a token model: tokens/s too (seq-len's curve)
            )
            formats = {
                (col.key, s): column_formatter(
                    col,
                    [
                        v
                        for n in numbers
                        if (found := cells.get((model, s[0], _at(s[2], axis, n, axes)))) is not None
                        for v in (found.figure(col.key), *(found.ci_of(col.key) or ()))
                    ],
                )
                for col in figures
                for s in series
            }
            header = [axis.capitalize()]
            for s in series:
                header += [f"{col.header} · {s[1]}" if len(figures) > 1 else s[1] for col in figures]
            table_rows: list[list[str]] = []
            for n in numbers:
                line = [n]
                for s in series:
                    at = cells.get((model, s[0], _at(s[2], axis, n, axes)))
                    line += [cell_text(at, col.key, formats[(col.key, s)]) for col in figures]
                table_rows.append(line)
            what = f"latency per batch and {words.plural}/s" if words.inference else f"{words.plural}/s"
            what += " and tokens/s" if words.tokens else ""
            if generate:
                what = "time to first token, token latency and the batch's tokens/s after the first token"
            title = f"{model_label(model)}: {what} against {axis}"
            note = GENERATE_CURVE_NOTE if generate else CURVE_NOTE
            out.append(Table(title, header, table_rows, ["r"] * len(header), note))
            keys = [col.key for col in figures]
            charts.append(
                SweepChart(
                    model,
                    axis,
                    tuple(
                        SweepSeries(
                            fw,
                            label,
                            tuple(int(n) for n in numbers),
                            _figures(cells, model, fw, other, axis, numbers, axes, keys),
                        )
                        for fw, label, other in series
                    ),
                )
            )
    return out, charts


def _figures(
    cells: Mapping[tuple[str, str, Point], CellSummary],
    model: str,
    framework: str,
    other: Point,
    axis: str,
    numbers: Sequence[str],
    axes: Sequence[tuple[str, tuple[str, ...]]],
    keys: Sequence[str],
) -> dict[str, tuple[tuple[float | None, float | None, float | None], ...]]:
    """A series' figures at each value of ``axis``: (value, CI low, high) per key."""
    out = {}
    for key in keys:
        points = []
        for n in numbers:
            row = cells.get((model, framework, _at(other, axis, n, axes)))
            value = row.figure(key) if row is not None else None
            ci = (row.ci_of(key) if row is not None else None) or (None, None)
            points.append((_number(value), _number(ci[0]), _number(ci[1])))
        out[key] = tuple(points)
    return out


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _at(other: Point, axis: str, value: str, axes: Sequence[tuple[str, tuple[str, ...]]]) -> Point:
    """The point with ``axis`` at ``value`` and the other axes at ``other``'s, in the plan's axis order."""
    given = dict(other.items)
    given[axis] = value
    return Point(tuple((a, given[a]) for a, _ in axes if a in given))


def sweep_view(
    summary: SessionSummary,
    axes: Sequence[tuple[str, tuple[str, ...]]],
    frameworks: Sequence[str],
    effective: Mapping[tuple[str, str, Point], Point],
) -> SweepView | None:
    """A sweep's sections (None: a session without a sweep)."""
    if not axes and summary.sweep is None:
        return None
    sweep = summary.sweep
    axes = list(axes) or ([(a, tuple(v)) for a, v in sweep.axes.items()] if sweep is not None else [])
    curves, charts = curve_tables(summary.rows, axes, frameworks, effective)
    gains, notes = gains_table(sweep.gains if sweep is not None else (), frameworks, generating(summary.rows))
    return SweepView(
        axes=[(fmt.clean(a), tuple(fmt.clean(v) for v in vs)) for a, vs in axes],
        gains=gains,
        gains_notes=[fmt.clean(n) for n in notes],
        curves=curves,
        charts=charts,
    )

"""The study's tables: its figures side by side and one per figure, latency, parity and compute efficiency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchtui.core import fmt
from benchtui.core.fmt import joules
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.model.parity import count_text, marked
from benchtui.core.reporting.model.columns import (
    LATENCY_COLUMNS,
    STUDY_COLUMNS,
    TIMING_COLUMNS,
    TOKENS_COLUMN,
    flagged_models,
    study_columns,
    wording,
)
from benchtui.core.reporting.model.figures import (
    _cells,
    _figure,
    _figure_values,
    _model_points,
    batch_text,
    cell_text,
    column_formatter,
    point_column,
    point_text,
)
from benchtui.core.reporting.model.notes import (
    EFFICIENCY_HEADER,
    EFFICIENCY_NOTE,
    LATENCY_NOTE,
    LATENCY_TITLE,
    PARITY_NOTE,
    PARITY_TITLE,
    SIDE_BY_SIDE_TITLE,
    WINDOW_NOTE,
)
from benchtui.core.reporting.model.types import Table, Wording


def side_by_side(plan: Any, summary: SessionSummary) -> Table:
    """The study's four timings next to each other: one row per model, figure x framework columns (s)."""
    cells = _cells(summary)
    points = point_column(summary)  # a sweep: a row per (model, point)
    grid = _model_points(plan, summary)
    header = ["Model", *(["Point"] if points else []), "Batch"] + [
        f"{col.short} · {framework_label(fw)}" for col in TIMING_COLUMNS for fw in plan.frameworks
    ]
    rows = []
    flagged = flagged_models(summary)
    formats = {  # one number of decimals per column
        (col.key, fw): column_formatter(col, [_figure(cells.get((m, fw, p)), col.key) for m, p in grid])
        for col in TIMING_COLUMNS
        for fw in plan.frameworks
    }
    for m, p in grid:
        sizes = sorted({batch_text(cells.get((m, fw, p))) for fw in plan.frameworks} - {""})
        row = [marked(model_label(m), m in flagged), *([point_text(p)] if points else []), "/".join(sizes)]
        for col in TIMING_COLUMNS:
            for fw in plan.frameworks:
                cell = cells.get((m, fw, p))
                value = _figure(cell, col.key)
                text = formats[(col.key, fw)]
                row.append(text(value) if value is not None else cell_text(cell, col.key, text))
        rows.append(row)
    names = ["l", "l"] if points else ["l"]
    return Table(SIDE_BY_SIDE_TITLE, header, rows, [*names, "r"] + ["r"] * (len(header) - len(names) - 1))


def figure_tables(plan: Any, summary: SessionSummary) -> list[Table]:
    """One table per study figure: a row per model, a column per framework, each figure with its CI.

    Throughput is in the session's words (images, sequences or samples per second), and token
    models add a table of tokens/s.
    """
    cells = _cells(summary)
    points = point_column(summary)  # a sweep: a row per (model, point)
    grid = _model_points(plan, summary)
    names = ["Model", "Point"] if points else ["Model"]
    header = names + [framework_label(fw) for fw in plan.frameworks]
    align = ["l"] * len(names) + ["r"] * len(plan.frameworks)
    flagged = flagged_models(summary)
    tables = []
    for col in study_columns(wording(summary.rows)):
        formats = {  # one number of decimals per column: its figures' and their intervals'
            fw: column_formatter(
                col, [v for m, p in grid for v in _figure_values(cells.get((m, fw, p)), col.key)]
            )
            for fw in plan.frameworks
        }
        rows = [
            [marked(model_label(m), m in flagged), *([point_text(p)] if points else [])]
            + [cell_text(cells.get((m, fw, p)), col.key, formats[fw]) for fw in plan.frameworks]
            for m, p in grid
        ]
        tables.append(Table(col.title, header, rows, align))
    return tables


def latency_table(summary: SessionSummary) -> Table | None:
    """Inference: latency per batch (p50, p90, p99, ms) and throughput per (model, framework); None for training."""
    words = wording(summary.rows)
    if not words.inference:
        return None
    flagged = flagged_models(summary)
    points = point_column(summary)  # a sweep: each row's point after its framework
    header = ["Model", "Framework", *(["Point"] if points else []), "Batch"] + [
        c.header for c in LATENCY_COLUMNS
    ]
    header += [f"{words.plural.capitalize()}/s"] + (["Tokens/s"] if words.tokens else [])
    rows = []
    every = summary.rows
    formats = {  # one number of decimals per column
        c.key: column_formatter(c, [v for r in every for v in _figure_values(r, c.key)])
        for c in (*LATENCY_COLUMNS, STUDY_COLUMNS[-1], TOKENS_COLUMN)
    }
    for row in every:
        cells = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
            *([point_text(row.point)] if points else []),
            str(row.batch_size),
        ]
        cells += [cell_text(row, c.key, formats[c.key]) for c in LATENCY_COLUMNS]
        cells.append(cell_text(row, "images_per_s", formats["images_per_s"]))
        if words.tokens:
            cells.append(cell_text(row, "tokens_per_s", formats["tokens_per_s"]))
        rows.append(cells)
    windows = any(r.timing == "window" for r in summary.rows)
    note = LATENCY_NOTE + (" " + WINDOW_NOTE if windows else "")
    names = 3 if points else 2
    return Table(LATENCY_TITLE, header, rows, ["l"] * names + ["r"] * (len(header) - names), note)


def parity_table(summary: SessionSummary) -> tuple[Table | None, list[str]]:
    """Each framework's network per model (source, parameters, FLOPs per sample) and how far apart they are.

    Returns the table (None when no model has two frameworks that reported) and one sentence per
    model, flagged models first: the sentence every view prints with the numbers.
    """
    entries = list(summary.parity)
    if not entries:
        return None, []
    words = wording(summary.rows)
    header = [
        "Model",
        "Framework",
        "Source",
        "Parameters",
        "Trainable",
        f"FLOPs / {words.singular}",
        "Differs by",
    ]
    rows = []
    for entry in entries:
        parts = []
        if entry.params_diff is not None:
            what = "trainable" if entry.params_compared == "trainable_params" else "parameters"
            parts.append(f"{what} {entry.params_diff:.1%}")
        if entry.flops_diff is not None:
            parts.append(f"FLOPs {entry.flops_diff:.1%}")
        differs = ", ".join(parts) or "–"
        label = marked(model_label(entry.model), entry.flagged)
        for fw, ident in entry.frameworks.items():
            rows.append(
                [
                    label,
                    framework_label(fw),
                    ident.source or "–",
                    count_text(ident.params),
                    count_text(ident.trainable_params),
                    fmt.flops(ident.flops_per_sample),
                    differs,
                ]
            )
    notes = [e.text for e in entries if e.flagged] + [e.text for e in entries if not e.flagged]
    return Table(PARITY_TITLE, header, rows, ["l", "l", "l", "r", "r", "r", "l"], PARITY_NOTE), notes


def efficiency_table(summary: SessionSummary) -> Table | None:
    """FLOPs, achieved TFLOP/s, % of peak and energy per (model, framework); None when nothing was counted."""
    rows = summary.rows
    if not any(
        r.flops_per_step is not None or r.flops_reason or r.joules_per_image is not None for r in rows
    ):
        return None
    out = []
    words = wording(rows)
    flagged = flagged_models(summary)
    unit = flop_unit(rows)
    points = point_column(summary)  # a sweep: each row's point after its framework
    for row in rows:
        names = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
            *([point_text(row.point)] if points else []),
        ]
        tflops = cell_text(row, "achieved_tflops", unit.text)
        if row.flops_per_step is None:
            why = row.flops_reason or {"ok": "not counted"}.get(row.status, "–")
            out.append([*names, why, "–", tflops, "–", "–", joules(row.joules_per_image)])
            continue
        out.append(
            [
                *names,
                fmt.flops(row.flops_per_step),
                fmt.flops(row.flops_per_image),
                tflops,
                fmt.percent(row.peak_fraction),
                "–" if row.peak_tflops is None else f"{fmt.tflops(row.peak_tflops)} TFLOP/s",
                joules(row.joules_per_image),
            ]
        )
    header = [h.replace("image", words.singular).replace("TFLOP/s", unit.name) for h in EFFICIENCY_HEADER]
    if points:
        header.insert(2, "Point")
    align = ["l", "l", *(["l"] if points else []), *["r"] * 6]
    return Table("Compute efficiency", header, out, align, efficiency_note(words))


def flop_unit(rows: Sequence[CellSummary]) -> fmt.FlopUnit:
    """The one unit of a table's achieved FLOP rates (its rows' ``achieved_tflops``, CIs included): the
    one their size reads in ('6.07 GFLOP/s' on a CPU, not '0.00607 TFLOP/s'); with none, the device's."""
    values = [row.achieved_tflops for row in rows]
    values += [v for row in rows for v in row.ci_of("achieved_tflops") or ()]
    if not any(isinstance(v, (int, float)) for v in values):  # none counted: the device's unit, as the app's
        kinds = {row.device_kind for row in rows} - {None}
        return fmt.device_flop_unit(cpu=kinds == {"cpu"})
    return fmt.flop_unit(values)


def efficiency_note(words: Wording) -> str:
    """The efficiency table's note in the session's words: a training or an inference step, per image or sample."""
    if words == Wording():
        return EFFICIENCY_NOTE
    step = (
        "FLOPs of one inference step (forward only; convolution and matmul multiply-adds counted as 2 FLOPs; "
        "element-wise ops not counted)"
        if words.inference
        else "FLOPs of one training step (forward + loss + backward; convolution and matmul multiply-adds "
        "counted as 2 FLOPs; element-wise ops and the optimizer update not counted)"
    )
    size = {"images": "image size", "sequences": "sequence length"}.get(
        words.plural, "image size or sequence length"
    )
    one = words.singular
    return (
        f"{step}, counted by each framework at the run's batch and {size}. FLOP/s (in the unit its size reads "
        f"in: TFLOP/s, GFLOP/s): FLOPs per step × the steps of the epochs after the first, over their time (the "
        f"same data as {words.plural}/s). % of peak: of the "
        "GPU's dense peak for the run's precision (NVIDIA datasheets); none on CPU, a MIG slice, a laptop part "
        f"or an unknown GPU. J / {one}: the GPU's energy (NVML's counter) over the epochs after the first, per "
        f"{one}; none on CPU."
    )


def efficiency_methods(summary: SessionSummary) -> list[tuple[str, str]]:
    """(framework label, how its FLOPs were counted), once per framework."""
    seen: dict[str, str] = {}
    for row in summary.rows:
        if row.flops_method:
            seen.setdefault(framework_label(row.framework), row.flops_method)
    return list(seen.items())

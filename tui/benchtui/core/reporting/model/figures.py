"""A row's figures as text: a value with its 95% CI, a cell that has none, a batch; a table cleaned."""

from __future__ import annotations

from typing import Any

from benchtui.core import fmt
from benchtui.core.fmt import milliseconds
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting.model.types import Column, Formatter, Table


def with_ci(row: CellSummary, name: str, formatter: Formatter = fmt.seconds) -> str:
    """A figure and its 95% CI in brackets, '3.21 [3.10–3.40]'; brackets hold nothing else anywhere."""
    text = formatter(row.figure(name))
    ci = row.ci_of(name)
    if ci and ci[0] is not None and ci[1] is not None and row.runs >= 1 and ci[1] > ci[0]:
        text += f" [{formatter(ci[0])}–{formatter(ci[1])}]"
    return text


def cell_text(row: CellSummary | None, name: str, formatter: Formatter = fmt.seconds) -> str:
    """A figure with its 95% CI in brackets, or why there is none (``row`` None: a cell not in the summary)."""
    if row is None:
        return "–"
    if row.figure(name) is None:
        status = row.status
        return {
            "unavailable": "not available",
            "failed": "failed",
            "incomplete": "incomplete",
            "diverged": "diverged",
        }.get(status, "–")
    text = with_ci(row, name, formatter)
    if row.status == "failed":
        text += " (some runs failed)"
    return text


def interval_text(value: Any, ci: Any, formatter: Formatter) -> str:
    """A figure and its 95% CI in brackets, as ``with_ci`` writes it, from a value and a [low, high] pair."""
    text = formatter(value)
    if (
        value is not None
        and isinstance(ci, (list, tuple))
        and len(ci) == 2
        and all(isinstance(x, (int, float)) for x in ci)
        and ci[1] > ci[0]
    ):
        text += f" [{formatter(ci[0])}–{formatter(ci[1])}]"
    return text


def batch_text(row: CellSummary | None) -> str:
    """A row's batch: '16', or on several devices the per-device batch × devices = the global batch, '16 ×4 = 64'
    ('' for a cell not in the summary)."""
    if row is None:
        return ""
    devices = row.devices
    if devices <= 1 and row.nodes <= 1:
        size = row.batch_size
        return "–" if size is None else str(size)  # None: a watched command that did not say its batch
    if row.per_node is not None and row.nodes > 1:  # several machines (issue 33): every node's devices
        return f"{row.batch_size} ×{devices} ×{row.nodes} nodes = {row.global_batch}"
    return f"{row.batch_size} ×{devices} = {row.global_batch}"


def _cells(summary: SessionSummary) -> dict[tuple[str, str, Point], CellSummary]:
    """The rows by (model, framework, sweep point)."""
    return {(r.model, r.framework, r.point): r for r in summary.rows}


def _model_points(plan: Any, summary: SessionSummary) -> list[tuple[str, Point]]:
    """(model, sweep point) in the plan's order: the rows of a table with a column per framework (a plan
    without a sweep: each model at ``Point()``)."""
    points = list(dict.fromkeys(r.point for r in summary.rows)) or [Point()]
    return [(m, p) for m in plan.models for p in points]


def point_text(point: Point) -> str:
    """A point as a table cell: its label, '–' for none."""
    return point.label or "–"


def point_column(summary: SessionSummary) -> bool:
    """Whether the report's tables have a Point column: a sweep's rows."""
    return any(r.point for r in summary.rows)


def _figure(row: CellSummary | None, key: str) -> Any:
    """A cell's figure by its summary key (None: no such cell)."""
    return None if row is None else row.figure(key)


def _figure_values(row: CellSummary | None, key: str) -> list[Any]:
    """A cell's figure and its CI bounds: what its column's decimals are chosen from."""
    if row is None:
        return [None]
    return [row.figure(key), *(row.ci_of(key) or [])]


def column_formatter(column: Column, values: Any) -> Formatter:
    """``column``'s formatter with one number of decimals for the column of ``values`` (its figures and
    their bounds): '12.640' above '0.704', not '12.64'; a formatter of another kind as it is."""
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if column.formatter is fmt.rate:
        return fmt.rate_column(values)
    if column.formatter is fmt.seconds:
        return fmt.seconds_column(values)
    if column.formatter is milliseconds:
        inner = fmt.seconds_column(v * 1000 for v in values)
        return lambda value: "–" if value is None else inner(value * 1000)
    return column.formatter


def clean_table(table: Table) -> Table:
    """``table`` with every title, header, cell and note through ``fmt.clean``."""
    return Table(
        fmt.clean(table.title),
        [fmt.clean(h) for h in table.header],
        [[fmt.clean(c) for c in row] for row in table.rows],
        list(table.align),
        fmt.clean(table.note),
    )


def _clean_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(fmt.clean(k), fmt.clean(v)) for k, v in pairs]

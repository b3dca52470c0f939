"""The terminal writer: Rich tables of a report (``show``, the end of a headless run, the sessions screen) and of a comparison."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import IO, Any, Literal

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from benchtui.core import fmt
from benchtui.core.model.analysis import BASIS_LABELS, framework_label, model_label
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.model.parity import marked
from benchtui.core.model.status import CautionKind, status_style
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting import model as report_model
from benchtui.core.reporting.compare import Comparison
from benchtui.core.reporting.model import (
    ANSWER_TITLE,
    CI_NOTE,
    DEVICES_NOTE,
    LATENCY_COLUMNS,
    LATENCY_NOTE,
    PARITY_NOTE,
    UNRELIABLE_PREFIX,
    WINDOW_NOTE,
    Answer,
    Mark,
    Report,
    batch_text,
    cells_text,
    how_it_ran,
    row_flagged,
    study_columns,
    with_ci,
    wording,
)
from benchtui.core.reporting.model.generation import generation_line
from benchtui.core.reporting.model.losses import loss_lines
from benchtui.core.reporting.model.sweep import BEST_NOTE, BEST_TITLE, SAME_TITLE

#: Below this many columns the table drops spreads, runs and FLOP/s rather than cut numbers.
WIDE_TABLE = 150
#: The longest ops ``show`` lists per framework (the exports list them all).
TOP_SHOWN = 6
COMPARE_NOTE = (
    "B/A is the ratio of times per sample (below 1: B is faster), by each session's verdict's rule: 95% CIs "
    "by seeded hierarchical bootstrap (runs, then epochs); 'about the same' when B/A rounds to 1.00 or its "
    "CI contains 1; 'unreliable' when other processes kept busy the cores a side's runs needed."
)
#: A figure with its interval in the study's table ('3.21 [3.10–3.40]'): what CI_NOTE explains.
_BRACKET = re.compile(r" \[[0-9.]")


def _plain(value: object) -> Text:
    """Text from a session or a runner as a cell: no markup read in it, no control character."""
    return Text(fmt.clean(value))


def _markup(value: object) -> str:
    """Text from a session or a runner inside a markup string: brackets print, controls go."""
    return escape(fmt.clean(value))


def stdout_console(file: Any = None) -> Console:
    """A console for tables: as wide as needed when stdout is a file or a pipe, unless ``COLUMNS`` says."""
    console = Console(file=file or sys.stdout)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(file=file or sys.stdout, width=200)
    return console


def headline_columns(rows: Sequence[CellSummary]) -> tuple[report_model.Column, ...]:
    """The figures of the headline table: the study's (in the session's words), or for inference
    build time, throughput and latency per batch (p50, p90, p99; the epoch figures stay in the exports)."""
    words = wording(rows)
    figures = study_columns(words)
    if words.inference:
        return tuple(c for c in figures if c.unit != "s" or c.key == "build_s") + LATENCY_COLUMNS
    return figures


def _summary_body(rows: Sequence[CellSummary], wide: bool) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """The headline table's columns (header, justify) and cells (markup), wide or narrow."""
    figures = headline_columns(rows)
    if not wide and wording(rows).inference:  # 80 columns: throughput and latency, the build time goes
        figures = tuple(c for c in figures if c.key != "build_s")
    peak_known = any(row.peak_fraction is not None for row in rows)
    unit = report_model.flop_unit(rows)  # one unit for the column: GFLOP/s on a CPU, TFLOP/s on a GPU
    energy_known = any(row.joules_per_image is not None for row in rows)  # GPU sessions
    # (header, justify); the figures' headers are two lines when narrow.
    columns: list[tuple[str, str]] = [("Model", "left"), ("Framework", "left"), ("Batch", "right")]
    if wide:
        columns.append(("Runs", "right"))
    columns += [(col.header if wide else col.narrow, "right") for col in figures]
    if wide:
        # Achieved FLOP/s from the runner's counted FLOPs per step; "(45%)" of the GPU's peak when known.
        columns.append((f"{unit.name} (% peak)" if peak_known else unit.name, "right"))
        if energy_known:
            columns.append((f"J/{wording(rows).singular}", "right"))
    columns.append(("Status", "left"))
    body: list[list[str]] = []
    for row in rows:
        status = row.status
        # Cells are markup (the status is styled): names are escaped, figures are ours.
        cells = [
            _markup(marked(model_label(row.model), row_flagged(row))),
            _markup(framework_label(row.framework)),
            _markup(batch_text(row)),  # on several devices: '16 ×4 = 64'
        ]
        if wide:
            cells.append(f"{row.runs}/{row.runs_planned}")
        for col in figures:  # brackets: the 95% CI, as in every export
            cells.append(with_ci(row, col.key, col.formatter) if wide else col.formatter(row.figure(col.key)))
        if wide:
            cells.append(unit.with_peak(row.achieved_tflops, row.peak_fraction))
            if energy_known:
                joules = row.joules_per_image
                cells.append("–" if joules is None else f"{joules:.3g}")
        note = " *" if row.reason or row.warnings else ""
        # "[]" would be a markup error: status_style always names a style.
        cells.append(f"[{status_style(status, 'default')}]{_markup(status)}[/]{note}")
        body.append(cells)
    return columns, body


def _natural_width(columns: list[tuple[str, str]], body: list[list[str]]) -> int:
    """How wide the framed table is with no column folded: contents, a space either side, the rules."""
    widths = [
        max([len(part) for part in header.split("\n")] + [Text.from_markup(r[i]).cell_len for r in body])
        for i, (header, _) in enumerate(columns)
    ]
    return sum(w + 2 for w in widths) + len(widths) + 1


def _summary_layout(
    rows: Sequence[CellSummary], width: int | None
) -> tuple[bool, list[tuple[str, str]], list[list[str]]]:
    """Whether the study's table is wide (intervals shown) at ``width``, its columns and its cells."""
    wide = width is None or width >= WIDE_TABLE
    columns, body = _summary_body(rows, wide)
    if wide and width is not None and _natural_width(columns, body) > width:
        wide = False  # the intervals would push the last columns off the edge
        columns, body = _summary_body(rows, wide)
    return wide, columns, body


def shows_brackets(rows: Sequence[CellSummary], width: int | None) -> bool:
    """Whether the study's table at ``width`` holds an interval in brackets: only then is CI_NOTE printed
    (a sweep: any of its tables, one per point)."""
    for block in point_blocks(rows).values():
        wide, _, body = _summary_layout(block, width)
        if wide and any(_BRACKET.search(cell) for cells in body for cell in cells[3:]):
            return True
    return False


def point_blocks(rows: Sequence[CellSummary]) -> dict[Point, list[CellSummary]]:
    """The rows by sweep point, in their order: one block (``Point()``) for a session without a sweep."""
    blocks: dict[Point, list[CellSummary]] = {}
    for row in rows:
        blocks.setdefault(row.point, []).append(row)
    return blocks or {Point(): []}


def summary_tables(rows: Sequence[CellSummary], title: str = "", width: int | None = None) -> list[Table]:
    """The study's table (``summary_table``); a sweep's, one per point, its title naming the point: a block
    each reads at 80 columns, where a column of points would push the figures off the edge."""
    blocks = point_blocks(rows)
    if len(blocks) == 1 and not next(iter(blocks)):
        return [summary_table(rows, title, width)]
    return [
        summary_table(block, f"{title} · {fmt.clean(point.label)}" if title else point.label, width)
        for point, block in blocks.items()
    ]


def summary_table(rows: Sequence[CellSummary], title: str = "", width: int | None = None) -> Table:
    """The study's table: one row per (model, framework), each figure with its 95% CI in brackets.

    Narrower than WIDE_TABLE columns, or than the wide table needs, the intervals, run counts and
    TFLOP/s go (they stay in the exports), the frame thins, and numbers keep their full width while
    names wrap: a number is never cut. Reasons for failed or unavailable rows are printed under the
    table (``summary_notes``), not squeezed into it. Throughput is in the session's words (images/s,
    sequences/s or samples/s, and tokens/s for token models); inference shows latency per batch.
    """
    wide, columns, body = _summary_layout(rows, width)
    if not wide and title:
        title += " · times in seconds" + (", latency in ms" if wording(rows).inference else "")
    table = Table(title=title or None, title_justify="left", header_style="bold")
    if not wide:  # a thin frame: the columns need the room
        table.box, table.show_edge, table.pad_edge = box.SIMPLE_HEAD, False, False
    for i, (header, justify) in enumerate(columns):
        if justify == "right":  # a figure: never narrower than its longest value
            longest = max([len(part) for part in header.split("\n")] + [len(r[i]) for r in body])
            table.add_column(header, justify="right", no_wrap=True, min_width=longest)
        else:  # a name: whole up to 11 characters, folded beyond when the terminal is narrow
            longest = max([len(header)] + [Text.from_markup(r[i]).cell_len for r in body])
            table.add_column(header, overflow="fold", min_width=min(longest, 11))
    for cells in body:
        table.add_row(*cells)
    return table


def summary_notes(rows: Sequence[CellSummary]) -> list[str]:
    """The rows marked * in the table: why they failed or are unavailable, and their cautions (markup).

    A reason or a caution of several rows is said once, with the cells it is about ('session interrupted
    before this run' once for every cell the interruption left, not once a cell).
    """
    out = []
    said: set[str] = set()
    frameworks = list(dict.fromkeys(framework_label(r.framework) for r in rows))
    # (status, reason) or ("caution", message) -> the cells that have it, in the table's order.
    shared: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row in rows:
        cell = (_model_at(row), framework_label(row.framework))
        if row.reason:
            shared.setdefault((str(row.status), str(row.reason)), []).append(cell)
        for w in row.warnings or []:
            if str(w.get("kind")) != CautionKind.ARCHITECTURE:
                shared.setdefault(("caution", str(w.get("message"))), []).append(cell)
    for row in rows:
        key = (str(row.status), str(row.reason or ""))
        if row.reason and key in shared:
            # Reasons are runner error messages: brackets in them must print, not style.
            where = _markup(cells_text(shared.pop(key), frameworks))
            out.append(f"* {where}: {_markup(row.status)}: {_markup(row.reason)}")
        for w in row.warnings or []:
            message = str(w.get("message"))
            if str(w.get("kind")) == CautionKind.ARCHITECTURE:
                # One sentence for the model (it names every side), not one per framework.
                if message not in said:
                    said.add(message)
                    out.append(f"* parity: {_markup(message)}")
                continue
            if ("caution", message) in shared:
                where = _markup(cells_text(shared.pop(("caution", message)), frameworks))
                out.append(f"* {where}: caution: {_markup(message)}")
    return out


def _model_at(row: CellSummary) -> str:
    """A row's model label, and its sweep point after it ('ResNet50 · batch 8 · channels-last on')."""
    return model_label(row.model) + (f" · {row.point.label}" if row.point else "")


def summary_footnotes(rows: Sequence[CellSummary]) -> list[str]:
    """What the table's latency columns are (inference sessions): percentiles of which times; and on
    several devices, what its batch column says."""
    out = []
    if any(isinstance(r.devices, int) and r.devices > 1 or r.nodes > 1 for r in rows):
        out.append(DEVICES_NOTE)
    if wording(rows).inference:
        windows = any(r.timing == "window" for r in rows)
        out.append(LATENCY_NOTE + (" " + WINDOW_NOTE if windows else ""))
    return out


def print_summary(
    rows: Sequence[CellSummary],
    title: str,
    file: Any = None,
    console: Console | None = None,
) -> None:
    """The table, fitted to the terminal, what its brackets mean, and the notes for the rows marked *
    (the verdict per model comes before it: ``print_answer``)."""
    console = console or stdout_console(file)
    console.print(*summary_tables(rows, title, width=console.width))
    if shows_brackets(rows, console.width):  # a note about brackets only under a table that has them
        console.print(CI_NOTE, style="dim", highlight=False, markup=False)
    for footnote in summary_footnotes(rows):
        console.print(footnote, style="dim", highlight=False, markup=False)
    for note in summary_notes(rows):
        console.print(note, highlight=False)
    for line in loss_lines(rows):  # runners since issue 36: did what was timed train?
        console.print(Text(fmt.clean(line)), highlight=False)


def print_result(report: Report, title: str) -> None:
    """The end of a headless run on stdout, from the session's report (``build_report``, as ``show``): the
    answer (the verdict per model), the study's table, how each framework ran, then what a data-parallel or
    profiled session adds. ``show``'s report less its watch and warm-up lines, under the run's own title.

    ``title`` is plain text (a session folder's name), not markup.
    """
    console = stdout_console()
    console.print(_markup(title), style="bold", highlight=False)
    print_answer(report.answer, console)
    print_gains(report.sweep, console)
    print_summary(report.rows, FIGURES_TITLE, console=console)
    print_curves(report.sweep, console)
    print_how(report.summary, console)
    print_data_parallel(report.scaling, report.per_device, report.per_device_notes, report.wiring, console)
    print_nodes(report.node_views, console)
    print_parity_table(report.parity, console)
    print_why(report.why, console)


def rich_table(table: report_model.Table) -> Table:
    """A report table as a Rich table: its title, header and cells as plain text (nothing read as markup)."""
    out = Table(title=_markup(table.title), title_justify="left", header_style="bold")
    for header, align in zip(table.header, table.align, strict=False):
        out.add_column(_plain(header), justify="right" if align == "r" else "left")
    for row in table.rows:
        out.add_row(*(_plain(c) for c in row))
    return out


def _column_widths(table: report_model.Table) -> tuple[list[int], list[int]]:
    """Each column's natural width (nothing wrapped) and the least it can take: its longest header word,
    and its longest cell part, a figure's value or its interval ('1.86× [1.82×–1.89×]' wraps before the
    bracket, never inside a number or between a number and its unit)."""
    natural, least = [], []
    for i, (header, align) in enumerate(zip(table.header, table.align, strict=False)):
        cells = [row[i] for row in table.rows if i < len(row)]
        parts = [part for c in cells for part in (re.split(r" (?=\[)", c) if align == "r" else c.split())]
        natural.append(max([len(header)] + [len(c) for c in cells]))
        least.append(max([len(word) for word in header.split()] + [len(part) for part in parts] + [1]))
    return natural, [min(n, m) for n, m in zip(natural, least, strict=True)]


def _fitted(table: report_model.Table, width: int) -> Table:
    """``rich_table`` within ``width`` columns: at its natural width when it fits, else each column
    given at least its longest part (``_column_widths``) and the rest shared out, the frame thinned
    when even that is too wide (as the study's table does)."""
    out = rich_table(table)
    natural, least = _column_widths(table)
    framed = 3 * len(natural) + 1  # a space either side of each column, its rules
    if sum(natural) + framed <= width:
        return out
    if sum(least) + framed > width:
        out.box, out.show_edge, out.pad_edge = box.SIMPLE_HEAD, False, False
        framed -= 4
    widths = list(least)
    spare = width - framed - sum(least)
    # The columns nearest their natural width first: as many as can be are whole, on one line.
    for i in sorted(range(len(widths)), key=lambda i: natural[i] - least[i]):
        grow = max(0, min(spare, natural[i] - widths[i]))
        widths[i] += grow
        spare -= grow
    for column, w in zip(out.columns, widths, strict=True):
        column.width, column.overflow = w, "fold"
    return out


def fitted_tables(table: report_model.Table, width: int) -> list[Table]:
    """A report table on a terminal ``width`` columns wide, no number cut (``_fitted``). A table of
    framework column groups ("Speedup · PyTorch") wider than the terminal becomes one table per
    framework, each with the columns they share (devices, batch) and its own title ("… · PyTorch")."""
    natural, _ = _column_widths(table)
    groups: dict[str, list[int]] = {}
    for i, header in enumerate(table.header):
        if " · " in header:
            groups.setdefault(header.rsplit(" · ", 1)[1], []).append(i)
    if sum(natural) + 3 * len(natural) + 1 <= width or len(groups) < 2:
        return [_fitted(table, width)]
    shared = [i for i in range(len(table.header)) if not any(i in g for g in groups.values())]
    out = []
    for label, indices in groups.items():
        keep = shared + indices
        part = report_model.Table(
            f"{table.title} · {label}",
            [table.header[i].rsplit(" · ", 1)[0] if i in indices else table.header[i] for i in keep],
            [[row[i] for i in keep] for row in table.rows],
            [table.align[i] for i in keep],
        )
        out.append(_fitted(part, width))
    return out


def print_parity_table(table: report_model.Table | None, console: Console) -> None:
    """The parity table (each framework's network per model) and how to read it; nothing when none reported.

    The sentences of flagged models are printed with the table's notes (``summary_notes``).
    """
    if table is None:
        return
    # Narrow: "Differs by" is said with its numbers in the notes above, and "Trainable" stays when
    # "Parameters" goes; what is left keeps its words whole.
    for column in ("Differs by", "Parameters"):
        natural, least = _column_widths(table)
        if sum(least) + 3 * len(least) + 1 <= console.width or column not in table.header:
            break
        keep = [i for i, h in enumerate(table.header) if h != column]
        table = report_model.Table(
            table.title,
            [table.header[i] for i in keep],
            [[row[i] for i in keep] for row in table.rows],
            [table.align[i] for i in keep],
        )
    console.print(_fitted(table, console.width))
    console.print(PARITY_NOTE, style="dim", highlight=False, markup=False)


def print_generation(tables: list[report_model.Table], console: Console) -> None:
    """A generate session (issue 34): time to first token and token latency, then tokens/s, compile and
    memory, each with its note; nothing for any other session."""
    for table in tables:
        console.print(*(_fitted(part, console.width) for part in halves(table, console.width)))
        console.print(table.note, style="dim", highlight=False, markup=False)


#: The columns that say which cell a row is: kept in each half of a table cut in two.
ROW_NAMES = ("Model", "Framework", "Point", "Batch", "Prompt + new")


def halves(table: report_model.Table, width: int) -> list[report_model.Table]:
    """``table`` whole where its columns' least widths fit ``width``, else cut in two, each half with the
    columns that name its rows (``ROW_NAMES``) and half its figures, its title marked (1 of 2, 2 of 2)."""
    _, least = _column_widths(table)
    names = [i for i, h in enumerate(table.header) if h in ROW_NAMES]
    figures = [i for i in range(len(table.header)) if i not in names]
    if sum(least) + 3 * len(least) + 1 <= width or len(figures) < 2:
        return [table]
    cut = (len(figures) + 1) // 2
    return [
        report_model.Table(
            f"{table.title} ({k} of 2)",
            [table.header[i] for i in names + part],
            [[row[i] for i in names + part] for row in table.rows],
            [table.align[i] for i in names + part],
        )
        for k, part in ((1, figures[:cut]), (2, figures[cut:]))
    ]


def print_data_parallel(
    scaling: list[report_model.Scaling],
    per_device: report_model.Table | None,
    per_device_notes: list[str],
    wiring: report_model.Table | None,
    console: Console,
) -> None:
    """A data-parallel session: each framework's wiring, the scaling table per model with its curves in
    words, and each device's figures with the straggler ratios; nothing on one device."""
    if wiring is not None:
        console.print(*fitted_tables(wiring, console.width))
        console.print(wiring.note, style="dim", highlight=False, markup=False)
    for view in scaling:
        console.print(*fitted_tables(view.table, console.width))
        for line in view.lines:
            console.print(fmt.clean(line), highlight=False, markup=False)
        console.print(view.table.note, style="dim", highlight=False, markup=False)
    if per_device is not None:
        console.print(*fitted_tables(per_device, console.width))
        for line in per_device_notes:
            console.print(fmt.clean(line), highlight=False, markup=False)
        console.print(per_device.note, style="dim", highlight=False, markup=False)


def print_nodes(views: list[report_model.Nodes], console: Console) -> None:
    """A session on several machines (issue 33): per cell, a row per node, its straggler line and the
    inter-node link; nothing on one node."""
    for view in views:
        console.print(*fitted_tables(view.table, console.width))
        for line in view.lines:
            console.print(fmt.clean(line), highlight=False, markup=False)
    if views:
        console.print(views[0].table.note, style="dim", highlight=False, markup=False)


def print_gains(sweep: report_model.SweepView | None, console: Console) -> None:
    """A sweep: what each setting buys each framework (a table), why a setting has no effect, how to read it."""
    if sweep is None or sweep.gains is None:
        return
    console.print(*fitted_tables(sweep.gains, console.width))
    for line in sweep.gains_notes:
        console.print(fmt.clean(line), highlight=False, markup=False)
    console.print(sweep.gains.note, style="dim", highlight=False, markup=False)
    console.print()


def print_curves(sweep: report_model.SweepView | None, console: Console) -> None:
    """A sweep over a numeric axis (batch, seq-len): each model's curve against it, a table each."""
    if sweep is None:
        return
    for table in sweep.curves:
        console.print(*fitted_tables(table, console.width))
    if sweep.curves:
        console.print(sweep.curves[0].note, style="dim", highlight=False, markup=False)


def print_why(views: list[report_model.Why], console: Console) -> None:
    """A ``--profile`` session, per model: where each framework's step goes (ms per step, the differences),
    the sentence that explains the verdict, each profile in words, the counters, the traces and the
    longest ops (``TOP_SHOWN`` per framework); nothing for a session without profiles."""
    for view in views:
        console.print(*fitted_tables(view.table, console.width))
        for text in view.text:
            console.print(Text(fmt.clean(text), style="bold"))
        for line in view.lines:
            console.print(fmt.clean(line), highlight=False, markup=False)
        for framework, run, path, size in view.traces:
            console.print(
                fmt.clean(f"trace: {framework}, {run}: {path} in the session folder ({size})"),
                style="dim",
                highlight=False,
                markup=False,
            )
        console.print(view.table.note, style="dim", highlight=False, markup=False)
        if view.top is not None:
            top = report_model.Table(
                view.top.title, view.top.header, _first_of_each(view.top.rows), view.top.align, view.top.note
            )
            console.print(*fitted_tables(top, console.width))
            console.print(top.note, style="dim", highlight=False, markup=False)


def _first_of_each(rows: list[list[str]], most: int = TOP_SHOWN) -> list[list[str]]:
    """The first ``most`` rows of each framework (a row's first cell)."""
    seen: dict[str, int] = {}
    out = []
    for row in rows:
        seen[row[0]] = seen.get(row[0], 0) + 1
        if seen[row[0]] <= most:
            out.append(row)
    return out


def print_how(summary: SessionSummary, console: Console) -> None:
    """What each framework compiled with (as resolved), threads, timing, optimizer and loss."""
    for line in how_it_ran(summary.frameworks):
        console.print(f"how: {fmt.clean(line)}", style="dim", highlight=False, markup=False)


#: A verdict's style on a terminal, by its mark: bold when significant, dim when not (or without a CI, or
#: about the same), yellow as a warning when it has no ratio or is marked unreliable.
VERDICT_STYLES: dict[Mark, str] = {
    Mark.WINNER: "bold",
    Mark.NOT_SIGNIFICANT: "dim",
    Mark.NO_CI: "dim",
    Mark.ABOUT_SAME: "dim",
    Mark.UNRELIABLE: "yellow",
    Mark.REFUSED: "yellow",
    Mark.NONE: "yellow",
    Mark.ALONE: "",
}


#: ... and under a comparison of two sessions, each session's own verdicts: as above, except that a ratio
#: without a CI is bold (as the app has it). The compare screen's snapshot pins it.
COMPARED_VERDICT_STYLES: dict[Mark, str] = {**VERDICT_STYLES, Mark.NO_CI: "bold"}


def verdict_style(verdict: report_model.Verdict) -> str:
    """How a verdict reads on a terminal (``VERDICT_STYLES``)."""
    return VERDICT_STYLES[verdict.mark]


def print_answer(answer: Answer, console: Console) -> None:
    """What ``show`` and the end of a headless run open with: the verdict per model, a line each (a
    sentence reads whole at any width, where a table's cell would fold it), and how to read them. A sweep:
    best vs best first, then the verdict at each point (same settings)."""
    if not answer.verdicts and not answer.best:
        return
    console.print(ANSWER_TITLE, style="bold", highlight=False, markup=False)
    for line in answer_lines(answer):
        console.print(line, highlight=False)
    if answer.note:
        console.print(answer.note, style="dim", highlight=False, markup=False)
    if answer.best:
        console.print(answer.best_note or BEST_NOTE, style="dim", highlight=False, markup=False)
    console.print()  # the answer stands apart from the tables under it


def answer_lines(answer: Answer) -> list[Text]:
    """The answer in lines, for a view narrower than its table: 'ResNet50: PyTorch 1.23× faster than
    tf.keras (95% CI 1.18–1.29) · from epoch times excluding the first'."""
    lines = []
    if answer.sweep:  # a sweep: best vs best, then the verdict at each point
        lines.append(Text(fmt.clean(f"Sweep: {answer.sweep}"), style="dim"))
        if answer.best:
            lines.append(Text(BEST_TITLE, style="bold underline"))
        for best in answer.best:
            lines.append(_verdict_line(best.verdict))
            lines += [Text(fmt.clean(f"  {side}")) for side in best.sides]
        lines.append(Text(SAME_TITLE, style="bold underline"))
    lines += [_verdict_line(v) for v in answer.verdicts]
    return lines


def _verdict_line(v: report_model.Verdict) -> Text:
    """One verdict: its label, its text styled by its mark, what it is computed from."""
    line = Text(fmt.clean(f"{v.label}: "), style="bold")
    text = fmt.clean(v.text)
    if v.mark is Mark.UNRELIABLE and text.startswith(UNRELIABLE_PREFIX):  # the mark itself, as a warning
        line.append(UNRELIABLE_PREFIX.rstrip(), style="bold yellow")
        text = text[len(UNRELIABLE_PREFIX.rstrip()) :]
    line.append(text, style=verdict_style(v) or "bold")
    if v.basis:
        line.append(fmt.clean(f" · from {v.basis}"), style="dim")
    return line


#: The study's table's title under the answer (the session's name is the report's first line).
FIGURES_TITLE = "Per model and framework"


def report_title(report: Report) -> str:
    """'<folder> · <status>' as Rich markup."""
    return f"{_markup(report.folder)} · {_markup(report.status)}"


def write(report: Report, fh: IO[str]) -> None:
    """The terminal as a ``Writer``: ``benchtui show``'s text into ``fh`` (as wide as it needs, unless
    ``COLUMNS`` says; colour only where ``fh`` is a terminal)."""
    print_report(report, stdout_console(fh))


def print_report(report: Report, console: Console | None = None) -> None:
    """``benchtui show``: the session's name, the answer (the verdict per model), the study's table and
    its notes, then how each framework ran and what a data-parallel or profiled session adds."""
    console = console or stdout_console()
    console.print(report_title(report), style="bold", highlight=False)
    print_answer(report.answer, console)
    print_gains(report.sweep, console)
    print_summary(report.rows, FIGURES_TITLE, console=console)
    print_curves(report.sweep, console)
    print_generation(report.generation, console)
    for label, text in report.watch:  # a watch: the command, its folder, its telemetry
        console.print(Text.assemble((f"{label}: ", "bold"), text), highlight=False)
    print_how(report.summary, console)
    for line in report.warmup_notes:  # an epoch-start stall (issue 30): said where the figures are
        console.print(Text(fmt.clean(line)), style="yellow", highlight=False)
    print_data_parallel(report.scaling, report.per_device, report.per_device_notes, report.wiring, console)
    print_nodes(report.node_views, console)
    print_parity_table(report.parity, console)
    print_why(report.why, console)


def summary_view(report: Report, width: int) -> Group:
    """The sessions screen's view: the session's name, the answer (the verdict per model), the load warnings,
    then the study's table and its notes."""
    parts: list[Any] = [Text.from_markup(report_title(report), style="bold")]
    parts += answer_lines(report.answer)
    parts += [
        Text(f"warning: {fmt.clean(w.text)}", style="yellow") for w in report.warnings if w.kind == "load"
    ]
    parts += summary_tables(report.rows, FIGURES_TITLE, width=width)
    parts += [Text.from_markup(note) for note in summary_notes(report.rows)]
    parts += [Text(fmt.clean(line)) for line in loss_lines(report.rows)]
    parts += [  # a generate session (issue 34): each cell's generation in a line
        Text(fmt.clean(f"{model_label(r.model)} · {framework_label(r.framework)} generate · {line}"))
        for r in report.rows
        if (line := generation_line(r.generation))
    ]
    parts += [  # a --profile session: why one framework is slower, in words
        Text(f"{model_label(view.model)} why · {text}") for view in report.why for text in view.text
    ]
    parts += [  # a scaling session: each framework's curve in words
        Text(f"{model_label(view.model)} scaling · {line}") for view in report.scaling for line in view.lines
    ]
    parts += [  # several machines (issue 33): each cell's straggler, or that there is none
        Text(f"{model_label(view.model)} · {framework_label(view.framework)} nodes · {view.straggler}")
        for view in report.node_views
        if view.straggler
    ]
    return Group(*parts)


def comparison_table(cmp: Comparison) -> Table:
    table = Table(
        title=f"B {_markup(cmp.b.path.name)}  vs  A {_markup(cmp.a.path.name)}",
        title_justify="left",
        header_style="bold",
    )
    points = any(row.point for row in cmp.rows)  # a sweep: cells are matched by point, a column of it
    columns: list[tuple[str, Literal["left", "right"]]] = [("Model", "left"), ("Framework", "left")]
    columns += [("Point", "left")] if points else []
    columns += [("A (ms)", "right"), ("B (ms)", "right"), ("B/A", "right")]
    for col, justify in columns:
        table.add_column(col, justify=justify)
    # The verdict is what a reader came for: it gets the room. The times compared ("epoch times excluding
    # the first") are a column only where rows differ in them, else said once under the table.
    table.add_column("B compared with A", min_width=20)
    bases = list(dict.fromkeys(_basis_text(row.basis) for row in cmp.rows if row.basis))
    per_row = len(bases) > 1
    if per_row:
        table.add_column("Times", max_width=24)
    elif bases:
        table.caption = fmt.clean(f"A (ms), B (ms): {bases[0]}")
        table.caption_justify = "left"
    for row in cmp.rows:
        if row.ratio is not None:
            r = row.ratio
            if row.unreliable is not None:
                style = "yellow"
            elif r.about_same:
                style = "dim"
            else:
                style = "green" if r.faster else "red"
            verdict = Text(fmt.clean(row.text()), style=style)
            ratio_text = f"{r.value:.3f}"
        else:
            verdict, ratio_text = Text(fmt.clean(row.note), style="yellow"), "–"
        # Not the same network on both sides in either session: the mark every other table carries.
        flagged = any(
            (same := side.model.parity(row.model)) is not None and same.flagged for side in (cmp.a, cmp.b)
        )
        table.add_row(
            _plain(marked(model_label(row.model), bool(flagged))),
            _plain(framework_label(row.framework)),
            *([_plain(row.point.label or "–")] if points else []),
            _milliseconds(row.time_a),
            _milliseconds(row.time_b),
            ratio_text,
            verdict,
            *([_plain(_basis_text(row.basis))] if per_row else []),
        )
    return table


def _at(point: Point) -> str:
    """' · batch 8 · channels-last on' after a model's name: a sweep's point ('' for none)."""
    return f" · {point.label}" if point else ""


def _basis_text(basis: str) -> str:
    """What a comparison's times are: per sample on the verdict's basis, else a watch's steady times."""
    label = BASIS_LABELS.get(basis, basis)
    return f"time per sample, from {label}" if basis in ("epoch", "single-epoch") else label


def _milliseconds(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.4g}"


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    """The comparison's table, what differs between the sessions, and how to read B/A."""
    console = console or stdout_console()
    console.print(comparison_table(cmp))
    for side, loaded, verdicts in (("A", cmp.a, cmp.verdicts_a), ("B", cmp.b, cmp.verdicts_b)):
        for r in verdicts:  # each session's own verdict, as show and every export print it
            verdict = report_model.verdict_of(r)  # styled as show styles it: unreliable, a warning
            console.print(
                Text.assemble(
                    fmt.clean(f"{side} {loaded.path.name} · {model_label(r.model)}{_at(r.point)}: "),
                    (verdict.text, COMPARED_VERDICT_STYLES[verdict.mark]),
                ),
                highlight=False,
            )
    if cmp.differences:
        # One a line, A's value then B's: each may change the answer, none may hide in a long sentence.
        console.print("[yellow]The sessions differ in (A vs B):[/]", highlight=False)
        for difference in cmp.differences:
            console.print(Text(f"  · {fmt.clean(difference)}"), highlight=False)
    console.print(COMPARE_NOTE, style="dim", highlight=False)

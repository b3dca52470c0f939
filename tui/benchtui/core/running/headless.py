"""Headless runs: the engine with a Rich progress display on stderr and the study's table on stdout."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from benchtui_runners import catalog
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from benchtui.core import fmt
from benchtui.core.model.status import status_style
from benchtui.core.model.summary import SessionModel
from benchtui.core.plan.plan import Plan
from benchtui.core.running.session_run import exit_code, start_session, stop_on_signals
from benchtui.core.store.session import SessionWriter

STATUS_STYLE = {"ok": "green", "failed": "bold red", "unavailable": "yellow", "incomplete": "magenta"}


#: Below this many columns the table drops spreads, runs and TFLOP/s rather than cut numbers.
WIDE_TABLE = 150


def summary_table(rows: list[dict[str, Any]], title: str = "", width: int | None = None) -> Table:
    """The study's table: one row per (model, framework), each figure with its spread over runs.

    Narrower than WIDE_TABLE columns, the spreads, run counts and TFLOP/s go (they stay in
    the exports), the frame thins, and numbers keep their full width while names wrap: a
    number is never cut. Reasons for failed or unavailable rows are printed under the
    table (``summary_notes``), not squeezed into it.
    """
    wide = width is None or width >= WIDE_TABLE
    peak_known = any(row.get("peak_fraction") is not None for row in rows)
    energy_known = any(row.get("joules_per_image") is not None for row in rows)  # GPU sessions
    # (header, justify); the figures' headers are two lines when narrow.
    columns: list[tuple[str, str]] = [("Model", "left"), ("Framework", "left"), ("Batch", "right")]
    if wide:
        columns.append(("Runs", "right"))
    columns += [
        ("Mean epoch (s)" if wide else "Epoch\nmean", "right"),
        ("First epoch (s)" if wide else "Epoch\nfirst", "right"),
        ("Excl. first (s)" if wide else "Excl.\n1st", "right"),
        ("Build (s)" if wide else "Build", "right"),
        ("Images/s" if wide else "Img/s", "right"),
    ]
    if wide:
        # Achieved TFLOP/s from the runner's counted FLOPs per step; "(45%)" of the GPU's peak when known.
        columns.append(("TFLOP/s (% peak)" if peak_known else "TFLOP/s", "right"))
        if energy_known:
            columns.append(("J/image", "right"))
    columns.append(("Status", "left"))
    value = fmt.with_spread if wide else (lambda v, _stats, f=fmt.seconds: f(v))
    body: list[list[str]] = []
    for row in rows:
        spread = row.get("spread", {})
        status = row["status"]
        cells = [
            catalog.MODELS[row["model"]].label if row["model"] in catalog.MODELS else row["model"],
            catalog.FRAMEWORK_LABELS.get(row["framework"], row["framework"]),
            str(row["batch_size"]),
        ]
        if wide:
            cells.append(f"{row['runs']}/{row.get('runs_planned', row['runs'])}")
        cells += [
            value(row["mean_epoch_s"], spread.get("mean_epoch_s")),
            value(row["first_epoch_s"], spread.get("first_epoch_s")),
            value(row["mean_epoch_excl_first_s"], spread.get("mean_epoch_excl_first_s")),
            value(row["build_s"], spread.get("build_s")),
            value(row["images_per_s"], spread.get("images_per_s"), fmt.rate),
        ]
        if wide:
            cells.append(fmt.tflops_with_peak(row.get("achieved_tflops"), row.get("peak_fraction")))
            if energy_known:
                joules = row.get("joules_per_image")
                cells.append("–" if joules is None else f"{joules:.3g}")
        note = " *" if row.get("reason") or row.get("warnings") else ""
        cells.append(f"[{STATUS_STYLE.get(status, 'default')}]{status}[/]{note}")  # "[]" would be a markup error
        body.append(cells)
    if not wide and title:
        title += " · times in seconds"
    table = Table(
        title=title or None, title_justify="left", header_style="bold",
        **({} if wide else {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False}),
    )
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


def summary_notes(rows: list[dict[str, Any]]) -> list[str]:
    """The rows marked * in the table: why they failed or are unavailable, and their cautions."""
    out = []
    for row in rows:
        label = (
            f"{catalog.MODELS[row['model']].label if row['model'] in catalog.MODELS else row['model']} · "
            f"{catalog.FRAMEWORK_LABELS.get(row['framework'], row['framework'])}"
        )
        if row.get("reason"):
            # Reasons are runner error messages: brackets in them must print, not style.
            out.append(f"* {escape(label)}: {escape(row['status'])}: {escape(row['reason'])}")
        out += [f"* {escape(label)}: caution: {escape(w['message'])}" for w in row.get("warnings") or []]
    return out


def _run_line(model: SessionModel, run_id: str) -> str:
    run = model.runs[run_id]
    figures = run.figures()
    style = status_style(run.status, "magenta")
    detail = escape(run.reason) or (
        f"mean epoch {fmt.seconds(figures['mean_epoch_s'])} s, "
        f"{fmt.rate(figures['images_per_s'])} img/s, build {fmt.seconds(figures['build_s'])} s"
    )
    return f"[{style}]{run.status:>11}[/] {run_id}  {detail}"


def _probe_line(event: dict[str, Any]) -> str:
    style = {"ok": "green", "oom": "yellow"}.get(event["result"], "red")
    detail = f"peak {fmt.bytes_(event['peak_bytes'])}" if event.get("peak_bytes") else escape(event.get("reason", ""))
    return (
        f"[{style}]{'probe ' + event['result']:>11}[/] {event['framework']} {event['model']} "
        f"batch {event['batch_size']}  {detail} ({event['seconds']:.1f} s)"
    )


def run_headless(plan: Plan, writer: SessionWriter, use_nvml: bool = True) -> int:
    """Run a plan with progress on stderr and the table on stdout; return the exit code."""
    err = Console(stderr=True)
    if not err.is_terminal:  # a log file: no wrapping at 80 columns
        err = Console(stderr=True, width=200)
    out = _stdout_console()
    session = start_session(plan, writer=writer, use_nvml=use_nvml)
    engine = session.engine
    err.print(f"[bold]benchtui[/] session [cyan]{writer.path}[/] · {session.sampler.status}")

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    overall = progress.add_task("runs", total=0)
    current = progress.add_task("", total=1, visible=False)

    def listener(event: dict[str, Any]) -> None:
        kind = event.get("type")
        run_id = event.get("run")
        if kind == "probe":
            progress.console.print(_probe_line(event))
            return
        if kind == "batch_choice":
            chosen = ", ".join(f"{catalog.FRAMEWORK_LABELS.get(fw, fw)} {b}" for fw, b in event["chosen"].items())
            progress.console.print(f"[bold]batch for {event['model']}[/] ({event['policy']}): {chosen or 'none fits'}")
            return
        if kind == "gpu" or run_id is None:
            return
        run = engine.model.runs.get(run_id)
        if run is None:
            return
        if kind == "run_start":
            progress.update(current, description=f"{run_id} starting", completed=0, total=1, visible=True)
        elif kind == "hello":
            total = (run.steps_per_epoch or 1) * run.epochs_planned
            progress.update(current, description=f"{run_id} building", total=total, completed=0)
        elif kind == "batch":
            progress.update(
                current,
                description=f"{run_id} epoch {run.current_epoch}/{run.epochs_planned}",
                advance=1,
            )
        elif kind == "run_end":
            progress.update(overall, completed=engine.model.done_runs)
            progress.console.print(_run_line(engine.model, run_id))

    engine.listener = listener
    progress.update(overall, total=len(engine.specs))

    async def main() -> str:
        # Ctrl+C, kill, or the terminal closing: stop the runner's group, keep what was recorded.
        stop_on_signals(asyncio.get_running_loop(), engine.cancel)
        return await engine.run()

    with progress:
        status = asyncio.run(main())

    print_summary(engine.model.rows(), f"benchtui · {writer.path.name}", console=out)
    err.print(f"session {status}: [cyan]{writer.path}[/]")
    if engine.model.malformed:
        err.print(f"[yellow]{engine.model.malformed} malformed event line(s) were skipped (see logs/)[/]")
    return exit_code(status)


def _stdout_console(file: Any = None) -> Console:
    """A console for tables: as wide as needed when stdout is a file or a pipe."""
    console = Console(file=file or sys.stdout)
    if not console.is_terminal:
        console = Console(file=file or sys.stdout, width=200)
    return console


def print_summary(rows: list[dict[str, Any]], title: str, file: Any = None, console: Console | None = None) -> None:
    """The table, fitted to the terminal, then the notes for the rows marked *."""
    console = console or _stdout_console(file)
    console.print(summary_table(rows, title, width=console.width))
    for note in summary_notes(rows):
        console.print(note, highlight=False)

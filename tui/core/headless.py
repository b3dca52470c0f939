"""Headless runs: the engine with a Rich progress display on stderr and the study's table on stdout."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from runners import catalog
from tui.core import fmt
from tui.core.engine import Engine
from tui.core.plan import Plan
from tui.core.sampler import Sampler
from tui.core.session import SessionWriter
from tui.core.summary import SessionModel

STATUS_STYLE = {"ok": "green", "failed": "bold red", "unavailable": "yellow", "incomplete": "magenta"}


def summary_table(rows: list[dict[str, Any]], title: str = "") -> Table:
    """The study's table: one row per (model, framework), each figure with its spread over runs."""
    table = Table(title=title or None, title_justify="left", header_style="bold")
    table.add_column("Model")
    table.add_column("Framework")
    table.add_column("Batch", justify="right")
    table.add_column("Runs", justify="right")
    table.add_column("Mean epoch (s)", justify="right")
    table.add_column("First epoch (s)", justify="right")
    table.add_column("Excl. first (s)", justify="right")
    table.add_column("Build (s)", justify="right")
    table.add_column("Images/s", justify="right")
    # Achieved TFLOP/s from the runner's counted FLOPs per step; "(45%)" of the GPU's dense peak when known.
    peak_known = any(row.get("peak_fraction") is not None for row in rows)
    table.add_column("TFLOP/s (% peak)" if peak_known else "TFLOP/s", justify="right")
    table.add_column("Status")
    for row in rows:
        spread = row.get("spread", {})
        status = row["status"]
        label = f"[{STATUS_STYLE.get(status, 'default')}]{status}[/]"  # "[]" would be a markup error
        if row.get("reason"):
            # Reasons are runner error messages: brackets in them must print, not style.
            label += f" {escape(row['reason'])}"
        table.add_row(
            catalog.MODELS[row["model"]].label if row["model"] in catalog.MODELS else row["model"],
            catalog.FRAMEWORK_LABELS.get(row["framework"], row["framework"]),
            str(row["batch_size"]),
            f"{row['runs']}/{row.get('runs_planned', row['runs'])}",
            fmt.with_spread(row["mean_epoch_s"], spread.get("mean_epoch_s")),
            fmt.with_spread(row["first_epoch_s"], spread.get("first_epoch_s")),
            fmt.with_spread(row["mean_epoch_excl_first_s"], spread.get("mean_epoch_excl_first_s")),
            fmt.with_spread(row["build_s"], spread.get("build_s")),
            fmt.with_spread(row["images_per_s"], spread.get("images_per_s"), fmt.rate),
            fmt.tflops_with_peak(row.get("achieved_tflops"), row.get("peak_fraction")),
            label,
        )
    return table


def _run_line(model: SessionModel, run_id: str) -> str:
    run = model.runs[run_id]
    figures = run.figures()
    style = {"ok": "green", "failed": "red", "unavailable": "yellow"}.get(run.status, "magenta")
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
    out = _stdout_console()
    sampler = Sampler(plan.interval, lambda s: None, use_nvml=use_nvml)
    err.print(f"[bold]benchtui[/] session [cyan]{writer.path}[/] · {sampler.status}")

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    engine: Engine
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

    engine = Engine(plan, writer, listener=listener, sampler=sampler)
    progress.update(overall, total=len(engine.specs))

    async def main() -> str:
        loop = asyncio.get_running_loop()
        # Ctrl+C, kill, or the terminal closing: stop the runner's group, keep what was recorded.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, engine.cancel)
        return await engine.run()

    with progress:
        status = asyncio.run(main())

    out.print(summary_table(engine.model.rows(), title=f"benchtui · {writer.path.name}"))
    err.print(f"session {status}: [cyan]{writer.path}[/]")
    if engine.model.malformed:
        err.print(f"[yellow]{engine.model.malformed} malformed event line(s) were skipped (see logs/)[/]")
    if status == "interrupted":
        return 130
    return 1 if status == "failed" else 0


def _stdout_console(file: Any = None) -> Console:
    """A console for tables: as wide as needed when stdout is a file or a pipe."""
    console = Console(file=file or sys.stdout)
    if not console.is_terminal:
        console = Console(file=file or sys.stdout, width=200)
    return console


def print_summary(rows: list[dict[str, Any]], title: str, file: Any = None) -> None:
    _stdout_console(file).print(summary_table(rows, title))

"""Warm-up and steady state: the warm-up table, and epochs that stall before their first batch."""

from __future__ import annotations

import math

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.model.parity import marked
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting.model.columns import flagged_models, wording
from benchtui.core.reporting.model.figures import point_column, point_text
from benchtui.core.reporting.model.notes import (
    STALL_HEADER,
    STALL_MIN_S,
    STALL_SHARE,
    WARMUP_HEADER,
    WARMUP_NOTE,
)
from benchtui.core.reporting.model.types import Table, Wording
from benchtui.core.store.session import LoadedSession


def _stalls(row: CellSummary) -> list[float | None]:
    """A row's ``to_first_batch_s``: one per epoch (None where unknown); [] when its runners sent none."""
    values = row.to_first_batch_s
    if values is None:
        return []
    return [
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
        for v in values
    ]


def _epoch_time(row: CellSummary, epoch: int, epoch_times: dict[int, float] | None) -> float | None:
    """Epoch ``epoch``'s time for a row: its runs' mean when known, else the first epoch's or the mean of
    the later ones (the summary's figures)."""
    if epoch_times and isinstance(epoch_times.get(epoch), (int, float)):
        return float(epoch_times[epoch])
    value = row.first_epoch_s if epoch == 1 else row.mean_epoch_excl_first_s
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def stall_lines(
    summary: SessionSummary, epoch_times: dict[tuple[str, ...], dict[int, float]] | None = None
) -> list[str]:
    """One sentence per cell with an epoch-start stall: 'ResNet50 · tf.keras: epoch 2: 4.90 s before its
    first batch (47% of its 10.4 s); epoch 4: 4.70 s (49% of its 9.60 s)'. ``epoch_times``: per (model,
    framework), each epoch's mean time over the cell's ok runs."""
    out = []
    for row in summary.rows:
        times_of = (epoch_times or {}).get(_cell_key(row.model, row.framework, row.point))
        said: list[str] = []
        for epoch, wait in enumerate(_stalls(row), start=1):
            whole = _epoch_time(row, epoch, times_of)
            if wait is None or whole is None:
                continue
            whole = whole if wait <= whole else wait + whole  # an epoch's time holds its wait (the runners')
            if wait < STALL_MIN_S or wait < STALL_SHARE * whole:
                continue
            share = f"{wait / whole:.0%} of its {fmt.seconds(whole)} s"
            said.append(
                f"epoch {epoch}: {fmt.seconds(wait)} s before its first batch ({share})"
                if not said
                else f"epoch {epoch}: {fmt.seconds(wait)} s ({share})"
            )
        if said:
            at = f" · {row.point.label}" if row.point else ""
            out.append(f"{model_label(row.model)}{at} · {framework_label(row.framework)}: " + "; ".join(said))
    if out:
        out.append(
            f"An epoch that waits {STALL_SHARE:.0%} or more of its time before its first batch stalls at its "
            "start (the data iterator built anew, a thread pool started or resized), not in its steps."
        )
    return out


def verdict_basis_text(summary: SessionSummary, words: Wording) -> str:
    """Which throughput the verdicts use, said under the warm-up table beside its steady figures."""
    bases = [b for b in dict.fromkeys(r.basis_label for r in summary.ratios) if b]
    steady = f"Steady {words.plural}/s: from the batch times after the warm-up."
    if not bases:
        return steady
    if bases == ["batch times after warm-up"]:
        return f"{steady} The verdict uses these batch times after the warm-up."
    return (
        f"{steady} The verdict uses {' and '.join(bases)} (the throughput table's {words.plural}/s), "
        "not these steady figures."
    )


def warmup_table(
    summary: SessionSummary, epoch_times: dict[tuple[str, ...], dict[int, float]] | None = None
) -> Table:
    """Per cell: the warm-up detected in each run's batch times, the steady state after it, and where the
    runners recorded it each epoch's wait before its first batch. Each column's figures have one number of
    decimals (``fmt.seconds_column``). ``epoch_times`` as ``stall_lines`` takes it."""
    words = wording(summary.rows)
    stalls = any(_stalls(r) for r in summary.rows)
    header = WARMUP_HEADER[:-1] + [f"Steady {words.plural}/s"] + (["Steady tokens/s"] if words.tokens else [])
    if stalls:
        header.insert(5, STALL_HEADER)
    flagged = flagged_models(summary)
    shown = [r for r in summary.rows if r.warmup_batches or _stalls(r)]
    warm = fmt.seconds_column(s for r in shown for s in r.warmup_s or [])
    first = fmt.seconds_column(r.time_to_first_batch_s for r in shown)
    median = fmt.seconds_column(((r.batch.median if r.batch is not None else None) for r in shown), 4)
    wait = fmt.seconds_column(v for r in shown for v in _stalls(r))
    rate = fmt.rate_column(r.steady_images_per_s for r in shown)
    tokens = fmt.rate_column(r.steady_tokens_per_s for r in shown)
    rows = []
    points = point_column(summary)  # a sweep: each row's point after its framework
    if points:
        header.insert(2, "Point")
    for row in shown:
        cuts = row.warmup_batches
        cells = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
            *([point_text(row.point)] if points else []),
            ", ".join(str(c) for c in cuts) or "–",
            ", ".join(warm(s) for s in row.warmup_s or []) or "–",
            first(row.time_to_first_batch_s),
            median(row.batch.median if row.batch is not None else None),
            rate(row.steady_images_per_s),
        ]
        if stalls:
            cells.insert(6 if points else 5, ", ".join(wait(v) for v in _stalls(row)) or "–")
        if words.tokens:
            cells.append(tokens(row.steady_tokens_per_s))
        rows.append(cells)
    note = WARMUP_NOTE + " " + verdict_basis_text(summary, words)
    if stalls:
        note += (
            f" {STALL_HEADER}: each epoch's seconds from its start to its first batch's step (the mean over "
            "the cell's runs), epoch 1 first."
        )
    names = 3 if points else 2
    return Table(
        "Warm-up and steady state", header, rows, ["l"] * names + ["r"] * (len(header) - names), note
    )


def epoch_times(loaded: LoadedSession) -> dict[tuple[str, ...], dict[int, float]]:
    """Per (model, framework): each epoch's mean time over the cell's runs that succeeded."""
    out: dict[tuple[str, ...], dict[int, float]] = {}
    model = loaded.model
    for fw, m, point in model.grid():
        sums: dict[int, list[float]] = {}
        for run in model.cell_runs(fw, m, point=point):
            if run.status != "ok":
                continue
            for epoch, seconds in run.epoch_times.items():
                if isinstance(seconds, (int, float)):
                    sums.setdefault(int(epoch), []).append(float(seconds))
        if sums:
            out[_cell_key(m, fw, point)] = {e: sum(v) / len(v) for e, v in sums.items()}
    return out


def _cell_key(model: str, framework: str, point: Point) -> tuple[str, ...]:
    """A cell's key in ``epoch_times``: (model, framework), and a sweep's point key after them."""
    return (str(model), str(framework), point.key) if point else (str(model), str(framework))

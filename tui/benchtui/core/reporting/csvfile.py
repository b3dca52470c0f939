"""The CSV writers: one flat row per (model, framework) with every summary field, or one row per batch."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

import msgspec

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CELL_FIELDS, HEADLINE, CellSummary, SessionSummary
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting.model import Report, ratio_mark
from benchtui.core.store.session import GpuTail, LoadedSession, iter_events
from benchtui.core.wire.events import RUNNERS_BATCH

STAT_FIELDS = (
    "n",
    "median",
    "q1",
    "q3",
    "iqr",
    "min",
    "max",
    "p5",
    "p95",
    "mad",
    "outliers",
)  # and ci_low/high
BATCH_STATS = ("n", "mean", "median", "iqr", "p5", "p95", "min", "max", "mad", "outliers")
SCALAR_COLUMNS = (
    "model",
    "model_label",
    "framework",
    "framework_label",
    "batch_size",
    "runs",
    "runs_planned",
    "failed_runs",
    "status",
    "reason",
    *HEADLINE,
    "median_batch_s",
    "peak_memory_bytes",
    "memory_source",
    "epochs",
    "device_kind",
    "joules_per_image",
    "other_gpu_processes",
)
#: What ran and the network it built (additive): task, kind, tokens, the runner's counts, latency.
WORKLOAD_COLUMNS = (
    "task",
    "kind",
    "tokens_per_sample",
    "tokens_per_s",
    "tokens_per_s_ci_low",
    "tokens_per_s_ci_high",
    "steady_images_per_s",
    "steady_tokens_per_s",
    "latency_p50_s",
    "latency_p90_s",
    "latency_p99_s",
    "timing",
    "params",
    "trainable_params",
    "flops_per_sample",
    "model_source",
    "architecture",
)
#: Whether the model's frameworks build the same network (the summary's parity, on each of its rows),
#: and the verdict per FLOP (time per FLOP over the base framework's; ``per_flop_faster``: who wins).
PARITY_COLUMNS = (
    "per_flop_ratio",
    "per_flop_faster",
    "parity_flagged",
    "parity_params_diff",
    "parity_flops_diff",
    "parity_text",
)
#: Compute efficiency (FLOPs counted by the runners, achieved TFLOP/s, fraction of the GPU's peak).
EFFICIENCY_COLUMNS = (
    "flops_per_step",
    "flops_per_image",
    "achieved_tflops",
    "achieved_tflops_ci_low",
    "achieved_tflops_ci_high",
    "peak_tflops",
    "peak_fraction",
    "flops_counted",
    "flops_method",
    "flops_reason",
    "peak_source",
)
#: Data parallel (additive): the devices a row's runs trained on, and the samples of one step over all of them.
DEVICE_COLUMNS = ("devices", "global_batch")
#: Where the session ran (additive): the host's CPU model as session.json recorded it ('' before it did).
HOST_COLUMNS = ("cpu_model",)
#: The verdict's mark (additive): who it says is faster ('' where it claims no winner), and why not:
#: ``verdict_mark`` "unreliable" (other processes kept the machine busy; ``unreliable_reason`` says how),
#: "about_same" (the ratio rounds to 1.00× or its CI holds 1), or '' (a verdict as before, or no ratio).
VERDICT_MARK_COLUMNS = ("faster_framework", "verdict_mark", "unreliable_reason")
#: Each epoch's seconds from its start to its first batch, ';'-separated in epoch order (additive).
STALL_COLUMNS = ("to_first_batch_s",)
#: The first and last epoch's loss (a mean over the runs that trained): only when a run sent a loss.
LOSS_COLUMNS = ("loss_first", "loss_last")
#: Several machines (issue 33), only then: the nodes, the straggler among them and node 0's link, then per
#: node k the ``NODE_FIELDS`` as ``node{k}_{field}``. Columns, not rows: a row stays one cell (what every
#: reader of this file pivots on), and the node count is the plan's, the same for every row.
NODE_COLUMNS = ("nodes", "straggler_node", "straggler_host", "straggler_ratio", "straggler_named", "link")
NODE_FIELDS = ("host", "ranks", "step_s", "rank_step_s", "gpu_util", "power_w", "mem_max", "status")
#: A generate session (issue 34), only then: a cell's ``GenerationFigures`` (seconds; ``token_per_token``: the
#: token latencies are each token's own, under --timing step, else each call's mean) by its column name.
#: The peak memory is ``peak_memory_bytes``'s, as for every session.
GENERATION_COLUMNS = {
    "prompt_len": "prompt_len",
    "new_tokens": "new_tokens",
    "generate_batch": "sequences",
    "generate_steps": "steps",
    "first_token_p50_s": "first_token_s",
    "first_token_p90_s": "first_token_p90_s",
    "first_token_p99_s": "first_token_p99_s",
    "token_p50_s": "token_s",
    "token_p90_s": "token_p90_s",
    "token_p99_s": "token_p99_s",
    "token_per_token": "per_token",
    "generate_tokens_per_s": "tokens_per_s",
    "generate_batch_tokens_per_s": "batch_tokens_per_s",
    "compile_s": "compile_s",
    "cache_bytes_per_token": "cache_bytes_per_token",
    "generated_tokens": "tokens",
    "decode_steps": "decode_steps",
}
RATIO_COLUMNS = (
    "vs_framework",
    "time_ratio",
    "time_ratio_ci_low",
    "time_ratio_ci_high",
    "ratio_significant",
    "ratio_basis",
    "verdict",
)
BATCH_COLUMNS = (
    "run_id",
    "framework",
    "model",
    "run_index",
    "epoch",
    "step",
    "seconds",
    "samples",
    "steps",
    "images_per_s",
    "t",
)


def summary_columns() -> list[str]:
    cols = list(SCALAR_COLUMNS)
    for name in HEADLINE:
        cols += [f"{name}_ci_low", f"{name}_ci_high"] + [f"{name}_{s}" for s in STAT_FIELDS]
    cols += [f"batch_{s}" for s in BATCH_STATS]
    cols += [*RATIO_COLUMNS, *EFFICIENCY_COLUMNS, "warnings", "run_ids"]
    # Added with modern workloads: after every older column, so a reader by position still works.
    cols += [*WORKLOAD_COLUMNS, *PARITY_COLUMNS]
    cols += DEVICE_COLUMNS  # added with data parallel, after every older column
    cols += HOST_COLUMNS  # added with the CPU model, after every older column
    cols += [
        *VERDICT_MARK_COLUMNS,
        *STALL_COLUMNS,
    ]  # added with the verdict's marks, after every older column
    return cols


def summary_records(summary: SessionSummary) -> Iterator[dict[str, Any]]:
    """One flat record per (model, framework): every summary field, for pandas."""
    ratios = {(r.model, r.framework, r.point): r for r in summary.ratios}
    parity = {p.model: p for p in summary.parity}
    for row in summary.rows:
        rec: dict[str, Any] = {k: row.figure(k) for k in SCALAR_COLUMNS if k in CELL_FIELDS}
        rec["model_label"] = model_label(row.model)
        rec["framework_label"] = framework_label(row.framework)
        for name in HEADLINE:
            rec[f"{name}_ci_low"], rec[f"{name}_ci_high"] = row.ci_of(name) or (None, None)
            stats = row.spread_of(name)
            for s in STAT_FIELDS:
                rec[f"{name}_{s}"] = getattr(stats, s) if stats is not None else None
        for s in BATCH_STATS:
            rec[f"batch_{s}"] = getattr(row.batch, s) if row.batch is not None else None
        ratio = ratios.get((row.model, row.framework, row.point))
        if ratio:
            rec.update(
                vs_framework=ratio.base,
                time_ratio=ratio.ratio,
                time_ratio_ci_low=ratio.ci_low,
                time_ratio_ci_high=ratio.ci_high,
                ratio_significant=ratio.significant,
                ratio_basis=ratio.basis,
                verdict=ratio.text,
            )
            # Sessions before the marks have neither key: a verdict as before.
            mark = ratio_mark(ratio)
            rec.update(
                faster_framework=None if mark else ratio.faster_framework,
                verdict_mark=mark,
                unreliable_reason=ratio.unreliable or None,
            )
            per_flop = ratio.per_flop
            rec["per_flop_ratio"] = per_flop.ratio if per_flop is not None else None
            rec["per_flop_faster"] = per_flop.faster_framework if per_flop is not None else None
        for key in EFFICIENCY_COLUMNS:
            rec[key] = row.figure(key) if key in CELL_FIELDS else None
        rec["achieved_tflops_ci_low"], rec["achieved_tflops_ci_high"] = row.ci_of("achieved_tflops") or (
            None,
            None,
        )
        for key in WORKLOAD_COLUMNS:
            rec[key] = row.figure(key) if key in CELL_FIELDS else None
        rec["tokens_per_s_ci_low"], rec["tokens_per_s_ci_high"] = row.ci_of("tokens_per_s") or (None, None)
        same = parity.get(row.model)
        if same is not None and row.framework in same.frameworks:
            rec.update(
                parity_flagged=same.flagged,
                parity_params_diff=same.params_diff,
                parity_flops_diff=same.flops_diff,
                parity_text=same.text,
            )
        # Sessions before data parallel ran on one device, their batch the global one.
        rec["devices"] = row.devices
        rec["global_batch"] = row.global_batch
        stalls = row.to_first_batch_s
        if stalls is not None:  # one per epoch, '' where unknown
            rec["to_first_batch_s"] = ";".join(
                repr(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
                for v in stalls
            )
        rec["warnings"] = "; ".join(w["message"] for w in row.warnings)
        rec["run_ids"] = ";".join(row.run_ids)
        rec["loss_first"], rec["loss_last"] = row.loss_first, row.loss_last  # NaN written "nan"
        if row.per_node is not None:
            rec.update(node_record(row))
        if row.generation is not None:  # a generate cell (issue 34): its columns only then
            rec.update({col: getattr(row.generation, key) for col, key in GENERATION_COLUMNS.items()})
        rec.update(row.point.items)  # a sweep: its point, a column per axis (``axis_columns``)
        yield rec


def node_columns(nodes: int) -> list[str]:
    """The columns of a session on ``nodes`` machines ([] on one: its csv as before)."""
    if nodes <= 1:
        return []
    return [*NODE_COLUMNS] + [f"node{k}_{name}" for k in range(nodes) for name in NODE_FIELDS]


def node_record(row: CellSummary) -> dict[str, Any]:
    """A row's figures on several nodes, flat: ranks as 'first-last', its ranks' step times ';'-separated."""
    rec: dict[str, Any] = {"nodes": row.nodes, "link": row.link}
    slow = row.node_straggler
    if slow is not None:
        rec.update(
            straggler_node=slow.node,
            straggler_host=slow.host,
            straggler_ratio=slow.ratio,
            straggler_named=slow.named,
        )
    for f in row.per_node or ():
        ranks = f.ranks
        rec.update(
            {
                f"node{f.node}_host": f.host,
                f"node{f.node}_ranks": (
                    f"{ranks[0]}-{ranks[0] + ranks[1] - 1}" if ranks is not None else None
                ),
                f"node{f.node}_step_s": f.step_s,
                f"node{f.node}_rank_step_s": ";".join(
                    "" if v is None else repr(float(v)) for v in f.rank_step_s
                ),
                f"node{f.node}_gpu_util": f.util,
                f"node{f.node}_power_w": f.power_w,
                f"node{f.node}_mem_max": f.mem_max,
                f"node{f.node}_status": f.status,
            }
        )
    return rec


def axis_columns(points: Iterable[Point]) -> list[str]:
    """A sweep's axes, in the plan's order: a column each, named by the axis, after every other column
    ([] for a session without a sweep: its columns as before)."""
    return list(dict.fromkeys(a for p in points for a, _ in p.items))


#: What a spreadsheet reads as a formula at the start of a cell (OWASP's list; full-width forms too).
FORMULA_START = tuple("=+-@\t\r＝＋－＠")
#: msgspec's JSON writer: the numbers of many batch rows in one call (``_batch_text``).
_ENCODE = msgspec.json.encode
#: The lane's Struct of a runner's batch line, every field given (typed Any: its fields are read by name).
_RUNNERS: Any = RUNNERS_BATCH
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_text(text: str) -> str:
    """A string cell, safe to print and to open in a spreadsheet.

    Control characters go (``fmt.clean``, one line), and a cell that a spreadsheet would run as
    a formula (``=cmd|' /C calc'!A0``, ``@SUM(A1)``, ``-2+3``) gets a leading ``'``, as OWASP
    advises; a cell that is exactly a number (``-1.5``) is left as it is.
    """
    text = fmt.clean(text)
    if text.lstrip().startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_value(value: Any) -> Any:
    """A cell: numbers as numbers (floats at full precision), None empty, strings made safe (``csv_text``)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision, round-trips
    if isinstance(value, str):
        return csv_text(value)
    if isinstance(value, (bool, int)):
        return value
    return csv_text(str(value))


def write(report: Report, fh: IO[str]) -> None:
    """summary.csv: one row per (model, framework)."""
    rows = report.summary.rows
    # Runners since issue 36 send each epoch's loss: its columns only then (an older session's csv as before).
    losses = [*LOSS_COLUMNS] if any(r.loss_first is not None or r.loss_last is not None for r in rows) else []
    generates = [*GENERATION_COLUMNS] if any(r.generation is not None for r in rows) else []
    nodes = max((r.nodes for r in rows if r.per_node is not None), default=1)
    cols = summary_columns() + losses + generates + node_columns(nodes) + axis_columns(r.point for r in rows)
    writer = csv.DictWriter(fh, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    cpu_model = report.source.cpu_model
    for rec in summary_records(report.summary):
        rec["cpu_model"] = cpu_model
        writer.writerow({k: csv_value(rec.get(k)) for k in cols})


def write_batches(loaded: LoadedSession, fh: IO[str]) -> int:
    """batches.csv: one row per recorded batch event, streamed from the session's events; returns the row count.

    A row is a window of ``steps`` steps (benchtui_runners.timing): ``seconds`` is their mean
    time per step and ``samples`` the samples of one step.

    Only the plan is read beside the events (a run's id, framework, model, index and point are the plan's),
    so ``loaded`` need have folded nothing (``commands.report``'s per-batch export folds nothing): one pass,
    in constant memory whatever the session's length (issue 35). GPU samples are held back unparsed (no row
    comes of them); what the pass skipped is said in ``loaded.warnings``.

    The batch lines the wire's lane takes (``iter_events(..., batches=True)``) come as Structs, a list at a
    time, and their rows are made as text and written a list at a time (``_batch_text``); any other batch
    line comes as a dict and is written by ``csv.writer``, as every row was before. Both give the same bytes.
    """
    axes = axis_columns(loaded.plan.points())  # a sweep: the run's point, a column per axis
    # A run's own cells, made once per run rather than once per row.
    heads = {
        rid: [
            csv_value(run.spec.run_id),
            csv_value(run.spec.framework),
            csv_value(run.spec.model),
            csv_value(run.spec.index),
        ]
        for rid, run in loaded.model.runs.items()
    }
    tails = {rid: [csv_value(run.spec.point.get(a)) for a in axes] for rid, run in loaded.model.runs.items()}
    # Several machines (issue 33): every node's windows, each row saying its node (0: the run's own).
    nodes = loaded.plan.nodes > 1
    # A Struct's run cells as csv.writer writes them, before and after its own: the lane takes no node, so
    # its node cell is 0.
    ends = {
        rid: (
            "".join(_csv_cell(c) + "," for c in head),
            "".join("," + _csv_cell(c) for c in [*([0] if nodes else []), *tails[rid]]) + "\n",
        )
        for rid, head in heads.items()
    }
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow([*BATCH_COLUMNS, *(["node"] if nodes else []), *axes])
    count = 0
    for event in iter_events(loaded.folder.path, loaded.warnings, GpuTail(0), None, batches=True):
        if isinstance(event, list):
            text, rows = _batch_text(event, ends)
            fh.write(text)
            count += rows
            continue
        if event.get("type") != "batch":
            continue
        rid = event.get("run")
        head = heads.get(rid) if isinstance(rid, str) else None
        if head is None:
            continue
        seconds, samples = event.get("seconds"), event.get("samples")
        rate = (
            samples / seconds
            if isinstance(seconds, (int, float)) and seconds > 0 and isinstance(samples, int)
            else None
        )
        writer.writerow(
            [
                *head,
                csv_value(event.get("epoch")),
                csv_value(event.get("step")),
                csv_value(seconds),
                csv_value(samples),
                csv_value(event.get("steps") or 1),
                csv_value(rate),
                csv_value(event.get("t")),
                *([csv_value(event.get("node") or 0)] if nodes else []),
                *tails[rid],  # type: ignore[index]
            ]
        )
        count += 1
    return count


def _csv_cell(value: Any) -> str:
    """One cell as ``write_batches``' csv.writer writes it in a row (quoted where it must be; what must be
    quoted depends on the line's end, so it is the same). A second cell is written after it and cut off:
    a row of one empty cell alone is written ``""``."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow([value, ""])
    return text.getvalue()[:-2]


def _batch_rows(batches: list[Any], ends: dict[str, tuple[str, str]]) -> list[str]:
    """The rows of the lane's batch Structs (``batch_of``) whose run the plan has, as ``write_batches``'
    csv.writer writes a dict's: an int's cell is ``str`` of it, a float's its ``repr`` (``csv_value``), and
    ``repr`` of an int is its ``str``; None is empty. No cell here needs quoting: the wire's types leave only
    ints and finite floats (digits, ``.``, ``e``, ``-``, ``+``) and the run's cells are quoted already.
    Its ``seconds`` is always a number above 0 (the Struct's range), so the rate is there where ``samples`` is.
    """
    rows: list[str] = []
    append = rows.append
    for b in batches:
        end = ends.get(b.run)
        if end is None:  # a run the plan does not have (or no run): no row, as for a dict
            continue
        samples, t, steps = b.samples, b.t, b.steps
        if samples is None:
            append(
                f"{end[0]}{b.epoch},{b.step},{b.seconds!r},,{steps or 1},,{'' if t is None else repr(t)}{end[1]}"
            )
        else:
            append(
                f"{end[0]}{b.epoch},{b.step},{b.seconds!r},{samples},{steps or 1},{samples / b.seconds!r},"
                f"{'' if t is None else repr(t)}{end[1]}"
            )
    return rows


def _batch_text(batches: list[Any], ends: dict[str, tuple[str, str]]) -> tuple[str, int]:
    """The rows of a list of the lane's batch Structs, as one text, and their count.

    A run's rows in a row, each given every field (``RUNNERS_BATCH``), have their numbers written by msgspec
    in one call, as a JSON array of arrays: ``[[1,2,0.5,32,1,64.0,1003.7],[...]]``. Its brackets and commas
    are then the rows' commas and ends. msgspec writes an int as ``str`` does, and a float in Python's
    shortest digits that read back the same, as ``repr`` does, but not in the same notation everywhere:
    ``repr`` writes an exponent below 1e-4 (``1e-05``: msgspec ``0.00001``) and from 1e16 (``1e+16``:
    msgspec ``1e16``). So a text with an ``e`` or a ``0.0000`` anywhere is not used, and its rows are made
    one by one (``_batch_rows``), as are the rows of a batch without some field (a None). msgspec writes an
    infinite rate as ``null``, but a rate is infinite only for seconds under 1e-296, which it writes with an
    ``e``. The speed is msgspec's: a third of the time of ``repr``.
    """
    parts: list[str] = []
    rows = 0
    group: list[tuple[Any, ...]] = []  # the numbers of the rows of one run, in a row
    run: str | None = None
    first = 0  # where its rows began in ``batches``
    for k, b in enumerate(batches):
        if b.run != run or type(b) is not _RUNNERS:
            if group:
                parts.append(_run_text(group, batches[first:k], ends))
                rows += len(group)
                group = []
            if type(b) is not _RUNNERS or b.run not in ends:
                one = _batch_rows([b], ends)
                parts += one
                rows += len(one)
                run = None
                continue
            run, first = b.run, k
        n, s = b.samples, b.seconds
        group.append((b.epoch, b.step, s, n, b.steps, n / s, b.t))
    if group:
        parts.append(_run_text(group, batches[first:], ends))
        rows += len(group)
    return "".join(parts), rows


def _run_text(numbers: list[tuple[Any, ...]], batches: list[Any], ends: dict[str, tuple[str, str]]) -> str:
    """The rows of ``batches``, one run's, whose numbers are ``numbers`` (see ``_batch_text``)."""
    text = _ENCODE(numbers)
    if b"e" in text or b"0.0000" in text:  # a notation repr writes otherwise
        return "".join(_batch_rows(batches, ends))
    head, end = ends[batches[0].run]
    return head + text[2:-2].decode("ascii").replace("],[", end + head) + end

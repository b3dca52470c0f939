"""The exports that CI trackers read: Bencher's metric format (BMF) and github-action-benchmark's custom format.

A tracker follows one figure of one benchmark across commits, so each cell that trained (status ok) becomes a
benchmark named ``model/framework/precision[/point]/device`` ("resnet50_v1_5/torch/fp32/NVIDIA H100"), and its
figures its measures: throughput (images/s, tokens/s for a token model) and the median step time, each with
the summary's 95% interval as its bounds where it has one, and the mean epoch time (the study's figure).
A cell that failed, diverged or was cut short has no figure to follow and is left out (``left_out`` says
which, for the command to print); the file never holds a NaN.

github-action-benchmark's ``tool`` (customBiggerIsBetter or customSmallerIsBetter) holds for the whole file,
so its export is two formats: ``gab-throughput`` (bigger is better) and ``gab-step-time`` (smaller is better:
the step and epoch times).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, Interval
from benchtui.core.model.status import CellStatus
from benchtui.core.reporting import jsonfile
from benchtui.core.reporting.model import Report

#: Bencher's measure slugs (a measure that does not exist yet is created by the first upload that names it).
THROUGHPUT = {"image": "images-per-second", "tokens": "tokens-per-second", "samples": "samples-per-second"}
STEP_TIME = "step-time-seconds"
EPOCH_TIME = "epoch-time-seconds"
#: A generate cell's own (issue 34): the batch's tokens/s after the first token (the verdict's figure), the
#: time to the first token and a token's latency after it (medians; the summary has no CI of them).
GENERATE_RATE = "generate-tokens-per-second"
FIRST_TOKEN = "time-to-first-token-seconds"
TOKEN_LATENCY = "token-latency-seconds"


@dataclass(frozen=True)
class Metric:
    """One figure of one cell, as a tracker reads it: where it goes, its value and its 95% interval."""

    benchmark: str  # "resnet50_v1_5/torch/fp32/cpu"
    measure: str  # Bencher's slug: "images-per-second"
    what: str  # in words, for a github-action-benchmark name: "step time"
    unit: str  # "images/s", "s"
    value: float
    interval: Interval | None
    bigger_is_better: bool
    extra: str  # the device, the versions and the runs, in lines (github-action-benchmark's tooltip)


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _interval(interval: Interval | None, value: float) -> Interval | None:
    """The interval when both bounds are finite and hold the value (a figure without a CI: None)."""
    if interval is None:
        return None
    low, high = _finite(interval.low), _finite(interval.high)
    if low is None or high is None or not low <= value <= high:
        return None
    return Interval(low, high)


def _part(text: str) -> str:
    """A part of a benchmark's name: its '/' stays the separator between parts."""
    return " ".join(str(text).replace("/", "-").split()) or "-"


def device_name(row: CellSummary, frameworks: Mapping[str, Any]) -> str:
    """The device a cell ran on, as its name says it: "cpu", "NVIDIA H100 80GB HBM3", "4x NVIDIA H100 ..."."""
    info = frameworks.get(row.framework)
    device = info.get("device") if isinstance(info, Mapping) else None
    device = device if isinstance(device, Mapping) else {}
    kind = row.device_kind or device.get("type") or "device"
    name = "cpu" if kind == "cpu" else str(device.get("name") or kind)
    if row.per_node is not None and row.nodes > 1:  # several machines (issue 33): '2 nodes x 4x NVIDIA ...'
        return f"{row.nodes} nodes x " + (f"{row.devices}x {name}" if row.devices > 1 else name)
    return f"{row.devices}x {name}" if row.devices > 1 else name


def precision_of(row: CellSummary, report: Report) -> str:
    """The cell's precision: its sweep point's, else the plan's, else what its framework recorded."""
    swept = row.point.get("precision")
    if swept:
        return swept
    plan = report.source.meta.get("plan")
    if isinstance(plan, Mapping) and plan.get("precision"):
        return str(plan["precision"])
    info = report.summary.frameworks.get(row.framework)
    settings = info.get("settings") if isinstance(info, Mapping) else None
    return str(settings.get("precision") or "") if isinstance(settings, Mapping) else ""


def benchmark_name(row: CellSummary, report: Report) -> str:
    """ "resnet50_v1_5/torch/fp32/cpu": the model, framework, precision, sweep point (its key, precision apart),
    an inference session's task, and the device."""
    parts = [row.model, row.framework, precision_of(row, report) or "default"]
    point = row.point.without("precision")
    if point:
        parts.append(point.key)
    if row.task in ("inference", "generate"):  # generate (issue 34): apart from training and the forward pass
        parts.append(row.task)
    parts.append(device_name(row, report.summary.frameworks))
    return "/".join(_part(p) for p in parts)


def _versions(frameworks: Mapping[str, Any], framework: str) -> str:
    info = frameworks.get(framework)
    versions = info.get("versions") if isinstance(info, Mapping) else None
    if not isinstance(versions, Mapping):
        return "versions not recorded"
    return ", ".join(f"{k} {v}" for k, v in versions.items() if v not in (None, ""))


def extra_text(row: CellSummary, report: Report) -> str:
    """What a tracker's tooltip shows beside the figure: the device, the versions, the runs and batch."""
    frameworks = report.summary.frameworks
    lines = [
        f"device: {device_name(row, frameworks)}",
        f"versions: {_versions(frameworks, row.framework)}",
        f"runs: {row.runs} of {row.runs_planned}, batch {row.global_batch or row.batch_size or '?'}",
    ]
    if row.reason:  # "1 of 3 runs diverged: ...": the figures are the other runs'
        lines.append(f"note: {row.reason}")
    epoch = _finite(row.mean_epoch_s)
    if epoch is not None:
        lines.append(f"mean epoch: {epoch!r} s")
    lines.append(f"session: {report.source.folder}")
    return "\n".join(lines)


def tracked(row: CellSummary) -> bool:
    """Whether a cell has figures a tracker can follow: it trained (ok), and not only from runs cut short."""
    return row.status == CellStatus.OK and not row.partial_runs


def metrics(report: Report) -> list[Metric]:
    """Every tracked cell's figures, in the summary's order."""
    out: list[Metric] = []
    for row in report.summary.rows:
        if not tracked(row):
            continue
        name, extra = benchmark_name(row, report), extra_text(row, report)
        tokens = row.kind == "tokens" and _finite(row.tokens_per_s) is not None
        throughput, key = (row.tokens_per_s, "tokens_per_s") if tokens else (row.images_per_s, "images_per_s")
        counted = "tokens" if tokens else "images" if row.kind == "image" else "samples"
        unit, slug = f"{counted}/s", THROUGHPUT["image" if counted == "images" else counted]
        figures: tuple[tuple[str, str, str, float | None, Interval | None, bool], ...] = (
            (slug, "throughput", unit, throughput, row.ci_of(key), True),
            (
                STEP_TIME,
                "step time",
                "s",
                row.median_batch_s,
                None,
                False,
            ),  # the summary has no CI of a median
            (EPOCH_TIME, "mean epoch time", "s", row.mean_epoch_s, row.ci_of("mean_epoch_s"), False),
        )
        gen = row.generation
        if gen is not None:  # a generate cell: its tokens/s after the first token and its latencies
            figures += (
                (
                    GENERATE_RATE,
                    "tokens/s after the first token",
                    "tokens/s",
                    gen.batch_tokens_per_s,
                    None,
                    True,
                ),
                (FIRST_TOKEN, "time to first token", "s", gen.first_token_s, None, False),
                (TOKEN_LATENCY, "token latency", "s", gen.token_s, None, False),
            )
        for measure, what, unit_, value, interval, bigger in figures:
            v = _finite(value)
            if v is not None:
                out.append(Metric(name, measure, what, unit_, v, _interval(interval, v), bigger, extra))
    return out


def left_out(rows: Iterable[CellSummary]) -> list[str]:
    """One line per cell a tracker export leaves out, with why: "resnet50 · tensorflow: diverged: ..."."""
    lines = []
    for row in rows:
        if tracked(row):
            continue
        status = str(row.status.value if isinstance(row.status, CellStatus) else row.status)
        why = row.reason or status
        if row.reason and not row.reason.startswith(status) and status not in row.reason:
            why = f"{status}: {row.reason}"  # the status, then what happened: "diverged: loss NaN at epoch 2"
        if row.status == CellStatus.OK and row.partial_runs:
            why = f"only runs cut short: {why}"
        where = " · ".join(
            [model_label(row.model), framework_label(row.framework)] + [row.point.label] * bool(row.point)
        )
        lines.append(f"{where}: {why}")
    return lines


# -- Bencher Metric Format ----------------------------------------------------------------------
def bmf(report: Report) -> dict[str, dict[str, dict[str, float]]]:
    """``{benchmark: {measure: {value, lower_value, upper_value}}}`` (bencher.dev/bmf.json)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for m in metrics(report):
        entry = {"value": m.value}
        if m.interval is not None:
            entry["lower_value"], entry["upper_value"] = m.interval.low, m.interval.high
        out.setdefault(m.benchmark, {})[m.measure] = entry
    return out


# -- github-action-benchmark's custom format ----------------------------------------------------
def gab(report: Report, bigger_is_better: bool) -> list[dict[str, Any]]:
    """``[{name, unit, value, range, extra}]``: the figures of one direction (the file's ``tool``)."""
    chosen = [m for m in metrics(report) if m.bigger_is_better == bigger_is_better]
    # One figure per benchmark needs no more in its name; two (the step and the epoch time) name theirs.
    several = len({m.benchmark for m in chosen}) < len(chosen)
    out = []
    for m in chosen:
        entry: dict[str, Any] = {
            "name": f"{m.benchmark} - {m.what}" if several else m.benchmark,
            "unit": m.unit,
            "value": m.value,
        }
        if m.interval is not None:
            entry["range"] = f"95% CI {m.interval.low:.6g} to {m.interval.high:.6g}"
        entry["extra"] = m.extra
        out.append(entry)
    return out


@dataclass(frozen=True)
class TrackerWriter:
    """A tracker's format as the registry's ``Writer``: its document of a report, written as JSON."""

    document: Callable[[Report], Any]

    def write(self, report: Report, fh: IO[str]) -> None:
        fh.write(jsonfile.dumps(self.document(report)))


#: ``--format bencher``: for ``bencher run --adapter json --file FILE``.
BENCHER = TrackerWriter(bmf)
#: ``--format gab-throughput``: throughput, for github-action-benchmark's ``tool: customBiggerIsBetter``.
GAB_THROUGHPUT = TrackerWriter(lambda report: gab(report, bigger_is_better=True))
#: ``--format gab-step-time``: the step and epoch times, for ``tool: customSmallerIsBetter``.
GAB_STEP_TIME = TrackerWriter(lambda report: gab(report, bigger_is_better=False))

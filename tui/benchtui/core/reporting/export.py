"""Exporting a session: Markdown tables, CSV (per cell or per batch), JSON and a self-contained HTML report."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.summary import HEADLINE
from benchtui.core.store.session import (
    LoadedSession,
    SessionError,
    iter_events,
    load_session,
    resolve_session,
)

FORMATS = ("md", "csv", "json", "html")
DEFAULT_NAMES = {
    "md": "summary.md",
    "csv": "summary.csv",
    "json": "summary-export.json",
    "html": "report.html",
}
PER_BATCH_NAME = "batches.csv"
EXPORT_KIND = "benchtui-summary-export"

#: The study's tables, in its order, with how each figure is written.
TABLES: tuple[tuple[str, str, Any], ...] = (
    ("mean_epoch_s", "Mean epoch time (s)", fmt.seconds),
    ("first_epoch_s", "First epoch (s)", fmt.seconds),
    ("mean_epoch_excl_first_s", "Mean epoch time excluding the first (s)", fmt.seconds),
    ("build_s", "Build time (s): construct, move to device, compile", fmt.seconds),
    ("images_per_s", "Throughput (images/s, excluding the first epoch)", fmt.rate),
)
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


# -- shared pieces ----------------------------------------------------------------------
def cell_text(row: dict[str, Any], name: str, formatter: Any = fmt.seconds) -> str:
    """A figure with its 95% CI in brackets, or why there is none."""
    value = row.get(name)
    if value is None:
        status = row.get("status", "")
        return {"unavailable": "not available", "failed": "failed", "incomplete": "incomplete"}.get(
            status, "–"
        )
    text = formatter(value)
    ci = (row.get("ci") or {}).get(name)
    if ci and ci[0] is not None and ci[1] is not None and row.get("runs", 0) >= 1 and ci[1] > ci[0]:
        text += f" [{formatter(ci[0])}–{formatter(ci[1])}]"
    if row.get("status") == "failed":
        text += " (some runs failed)"
    return text


def _join(items: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in items.items() if v not in (None, ""))


def device_text(device: dict[str, Any]) -> str:
    """'cuda:0 NVIDIA H100 80GB HBM3, 80.0 GiB, compute capability 9.0' from a runner's hello."""
    if not device:
        return "unknown"
    kind = str(device.get("type", "?"))
    head = f"{kind}:{device['index']}" if "index" in device else kind
    parts = [f"{head} {device.get('name', '')}".strip()]
    if device.get("memory_bytes"):
        parts.append(fmt.bytes_(device["memory_bytes"]))
    if device.get("capability"):
        parts.append(f"compute capability {device['capability']}")
    if device.get("threads"):
        parts.append(f"{device['threads']} threads")
    known = {"type", "index", "name", "memory_bytes", "capability", "threads"}
    parts += [f"{k} {v}" for k, v in device.items() if k not in known and v not in (None, "")]
    return ", ".join(parts)


def environment(loaded: LoadedSession, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines describing where and how the session ran: GPU, driver, versions, settings."""
    meta, plan = loaded.meta, loaded.plan
    items: list[tuple[str, str]] = []
    gpus = meta.get("gpus") or []
    for gpu in gpus:
        mem = fmt.bytes_(gpu.get("memory_total")) if gpu.get("memory_total") else None
        cuda = gpu.get("cuda_driver")
        cuda_text = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda
        items.append(
            (
                f"GPU {gpu.get('index', '')}".strip(),
                ", ".join(
                    str(x)
                    for x in (
                        gpu.get("name"),
                        mem,
                        gpu.get("driver") and f"driver {gpu.get('driver')}",
                        cuda_text and f"CUDA driver {cuda_text}",
                        gpu.get("max_sm_clock_mhz") and f"max SM clock {gpu.get('max_sm_clock_mhz')} MHz",
                        gpu.get("power_limit_w") and f"power limit {gpu.get('power_limit_w'):.0f} W",
                    )
                    if x
                ),
            )
        )
    # Clocks, temperature and throttle reasons at the start and the end: did the GPU slow down?
    for when, key in (("start", "gpus"), ("end", "gpus_end")):
        for gpu in meta.get(key) or []:
            throttle = gpu.get("throttle")
            state = ", ".join(
                str(x)
                for x in (
                    gpu.get("sm_clock_mhz") is not None and f"SM clock {gpu['sm_clock_mhz']} MHz",
                    gpu.get("temp_c") is not None and f"{gpu['temp_c']} °C",
                    throttle is not None and ("throttle: " + (", ".join(throttle) or "none")),
                )
                if x
            )
            if state:
                items.append((f"GPU {gpu.get('index', '')} at {when}", state))
    if not gpus:
        items.append(("GPU", "none recorded"))
    items.append(("Telemetry", str(meta.get("telemetry") or "not recorded")))
    host = meta.get("host") or {}
    items.append(
        (
            "Host",
            ", ".join(
                str(x)
                for x in (
                    host.get("hostname"),
                    host.get("platform"),
                    host.get("python") and f"Python {host.get('python')}",
                    host.get("cpu_count") and f"{host.get('cpu_count')} CPUs",
                    host.get("memory_bytes") and f"{fmt.bytes_(host.get('memory_bytes'))} RAM",
                )
                if x
            ),
        )
    )
    for fw, env in (summary.get("frameworks") or {}).items():
        label = framework_label(fw)
        versions = env.get("versions") or {}
        items.append((f"{label} versions", _join(versions) or "unknown"))
        items.append((f"{label} device", device_text(env.get("device") or {})))
        settings = env.get("settings") or {}
        items.append((f"{label} settings", ", ".join(f"{k}={v}" for k, v in settings.items()) or "unknown"))
    sizes = ", ".join(f"{model_label(m)} {plan.batch_size(m)}" for m in plan.models)
    items.append(
        (
            "Plan",
            (
                f"{plan.image_size}×{plan.image_size} px, {plan.samples} samples, {plan.epochs} epochs, "
                f"{plan.runs} runs, order {plan.order}, device {plan.device}, data {plan.data}, "
                f"precision {plan.precision}, compile {'on' if plan.compile else 'off'}, "
                f"cuDNN autotune {'on' if plan.cudnn_autotune else 'off'}, channels_last "
                f"{'on' if plan.channels_last else 'off'}, {plan.num_classes} classes"
                + (f", preset {plan.preset}" if plan.preset else "")
            ),
        )
    )
    items.append(("Batch sizes", sizes))
    return items


def header_facts(loaded: LoadedSession) -> list[tuple[str, str]]:
    meta = loaded.meta
    facts = [
        ("Session", loaded.path.name),
        ("Status", str(meta.get("status", "?"))),
        ("Started", str(meta.get("started") or "?")),
        ("Finished", str(meta.get("finished") or "never (cut off)")),
    ]
    return facts


def all_warnings(loaded: LoadedSession, summary: dict[str, Any]) -> list[str]:
    """Load warnings, then per-cell cautions as 'Model · Framework: ...'."""
    out = list(loaded.warnings)
    for row in summary["rows"]:
        for w in row.get("warnings") or []:
            out.append(f"{model_label(row['model'])} · {framework_label(row['framework'])}: {w['message']}")
    if summary.get("malformed_lines"):
        out.append(f"{summary['malformed_lines']} malformed event line(s) were skipped during the runs")
    return out


def problems(summary: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(model, framework, status, reason) of every cell that did not simply succeed."""
    return [
        (model_label(r["model"]), framework_label(r["framework"]), r["status"], r.get("reason") or "")
        for r in summary["rows"]
        if r["status"] != "ok" or r.get("reason")
    ]


def _rows_by_cell(summary: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["model"], r["framework"]): r for r in summary["rows"]}


EFFICIENCY_HEADER = [
    "Model", "Framework", "FLOPs / step", "FLOPs / image", "TFLOP/s", "% of peak", "Peak (dense)", "J / image",
]
EFFICIENCY_NOTE = (
    "FLOPs of one training step (forward + loss + backward; convolution and matmul multiply-adds "
    "counted as 2 FLOPs; element-wise ops and the optimizer update not counted), counted by each "
    "framework at the run's batch and image size. TFLOP/s: FLOPs per step × the steps of the epochs "
    "after the first, over their time (the same data as images/s). % of peak: of the GPU's dense peak "
    "for the run's precision (NVIDIA datasheets); none on CPU, a MIG slice, a laptop part or an unknown GPU. "
    "J / image: the GPU's energy (NVML's counter) over the epochs after the first, per image; none on CPU."
)


def joules(value: Any) -> str:
    return "–" if value is None else f"{value:.3g} J"


def efficiency_rows(summary: dict[str, Any]) -> list[list[str]]:
    """Compute efficiency per (model, framework), as text; empty when no FLOPs were counted."""
    rows = summary["rows"]
    if not any(
        r.get("flops_per_step") is not None or r.get("flops_reason") or r.get("joules_per_image") is not None
        for r in rows
    ):
        return []
    out = []
    for row in rows:
        if row.get("flops_per_step") is None:
            why = row.get("flops_reason") or {"ok": "not counted"}.get(row.get("status", ""), "–")
            tflops = cell_text(row, "achieved_tflops", fmt.tflops)
            out.append([
                model_label(row["model"]), framework_label(row["framework"]), why, "–", tflops, "–", "–",
                joules(row.get("joules_per_image")),
            ])
            continue
        out.append(
            [
                model_label(row["model"]),
                framework_label(row["framework"]),
                fmt.flops(row.get("flops_per_step")),
                fmt.flops(row.get("flops_per_image")),
                cell_text(row, "achieved_tflops", fmt.tflops),
                fmt.percent(row.get("peak_fraction")),
                "–" if row.get("peak_tflops") is None else f"{fmt.tflops(row['peak_tflops'])} TFLOP/s",
                joules(row.get("joules_per_image")),
            ]
        )
    return out


def efficiency_methods(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(framework label, how its FLOPs were counted), once per framework."""
    seen: dict[str, str] = {}
    for row in summary["rows"]:
        if row.get("flops_method"):
            seen.setdefault(framework_label(row["framework"]), row["flops_method"])
    return list(seen.items())


# -- Markdown ---------------------------------------------------------------------------
def md_escape(text: Any) -> str:
    """Safe inside a Markdown table cell: no pipes, no line breaks, no raw HTML."""
    out = " ".join(str(text).split())
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "\\`")):
        out = out.replace(a, b)
    return out


#: The study's four headline figures, in its order, for the side-by-side table.
STUDY_FOUR = TABLES[:4]
STUDY_SHORT = {
    "mean_epoch_s": "Mean epoch",
    "first_epoch_s": "First epoch",
    "mean_epoch_excl_first_s": "Excl. first",
    "build_s": "Build",
}


def study_side_by_side(plan: Any, summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The study's four tables next to each other: one row per model, figure x framework columns (s)."""
    cells = _rows_by_cell(summary)
    header = ["Model", "Batch"] + [
        f"{STUDY_SHORT[name]} · {framework_label(fw)}" for name, _, _ in STUDY_FOUR for fw in plan.frameworks
    ]
    rows = []
    for m in plan.models:
        sizes = sorted({str(cells.get((m, fw), {}).get("batch_size", "")) for fw in plan.frameworks} - {""})
        row = [model_label(m), "/".join(sizes)]
        for name, _, formatter in STUDY_FOUR:
            for fw in plan.frameworks:
                cell = cells.get((m, fw), {})
                value = cell.get(name)
                row.append(formatter(value) if value is not None else cell_text(cell, name, formatter))
        rows.append(row)
    return header, rows


def warmup_rows(summary: dict[str, Any]) -> list[list[str]]:
    """Per cell: the warm-up detected in each run's batch times, and the steady state after it."""
    out = []
    for row in summary["rows"]:
        cuts = row.get("warmup_batches") or []
        if not cuts:
            continue
        seconds = row.get("warmup_s") or []
        out.append([
            model_label(row["model"]),
            framework_label(row["framework"]),
            ", ".join(str(c) for c in cuts),
            ", ".join(fmt.seconds(s) for s in seconds),
            fmt.seconds(row.get("time_to_first_batch_s")),
            fmt.seconds((row.get("batch") or {}).get("median"), 4),
            fmt.rate(row.get("steady_images_per_s")),
        ])
    return out


WARMUP_HEADER = [
    "Model", "Framework", "Warm-up batches (per run)", "Warm-up time (s)", "First batch (s)",
    "Steady median batch (s)", "Steady images/s",
]
WARMUP_NOTE = (
    "Warm-up is detected from each run's batch times: the first batches until a window of them stays "
    "within 10% (plus 3 robust SDs) of the median of the run's second half."
)


def _md_table(header: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |"]
    lines.append("| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |")
    for row in rows:
        lines.append("| " + " | ".join(md_escape(c) for c in row) + " |")
    return lines


def render_md(loaded: LoadedSession, summary: dict[str, Any] | None = None) -> str:
    summary = summary or loaded.model.summary()
    plan = loaded.plan
    cells = _rows_by_cell(summary)
    title = loaded.meta.get("name") or loaded.path.name
    out = [f"# benchtui · {md_escape(title)}", ""]
    out.append(" · ".join(f"{k}: {md_escape(v)}" for k, v in header_facts(loaded)))
    out.append("")
    header, rows = study_side_by_side(plan, summary)
    out += ["## The study's four figures, side by side (seconds)", ""]
    out += _md_table(header, rows, ["l", "r"] + ["r"] * (len(header) - 2))
    out.append("")
    for name, label, formatter in TABLES:
        out += [f"## {label}", ""]
        rows = [
            [model_label(m)] + [cell_text(cells.get((m, fw), {}), name, formatter) for fw in plan.frameworks]
            for m in plan.models
        ]
        out += _md_table(
            ["Model"] + [framework_label(fw) for fw in plan.frameworks],
            rows,
            ["l"] + ["r"] * len(plan.frameworks),
        )
        out.append("")
    runs = max((r.get("runs", 0) for r in summary["rows"]), default=0)
    out.append(
        f"Mean over up to {runs} run(s) per cell; in brackets the 95% bootstrap confidence interval "
        "(seeded; over runs, then epochs within runs)."
    )
    out.append("")
    warm = warmup_rows(summary)
    if warm:
        out += ["## Warm-up and steady state", ""]
        out += _md_table(WARMUP_HEADER, warm, ["l", "l", "r", "r", "r", "r", "r"])
        out += ["", md_escape(WARMUP_NOTE), ""]
    efficiency = efficiency_rows(summary)
    if efficiency:
        out += ["## Compute efficiency", ""]
        out += _md_table(EFFICIENCY_HEADER, efficiency, ["l", "l", "r", "r", "r", "r", "r", "r"])
        out += ["", md_escape(EFFICIENCY_NOTE), ""]
        out += [f"- {md_escape(fw)}: {md_escape(method)}" for fw, method in efficiency_methods(summary)]
        peaks = sorted({r["peak_source"] for r in summary["rows"] if r.get("peak_source")})
        out += [f"- Peak: {md_escape(p)}" for p in peaks]
        out.append("")
    if summary.get("ratios"):
        out += ["## Frameworks compared", ""]
        rows = [[model_label(r["model"]), r["text"], r["basis_label"]] for r in summary["ratios"]]
        out += _md_table(["Model", "Result", "From"], rows, ["l", "l", "l"])
        out += ["", "A difference is *not significant* when its 95% CI contains 1.", ""]
    bad = problems(summary)
    if bad:
        out += ["## Failures and gaps", ""]
        out += _md_table(
            ["Model", "Framework", "Status", "Reason"], [list(p) for p in bad], ["l", "l", "l", "l"]
        )
        out.append("")
    warnings = all_warnings(loaded, summary)
    if warnings:
        out += ["## Warnings", ""] + [f"- {md_escape(w)}" for w in warnings] + [""]
    out += ["## Environment", ""]
    out += _md_table(["", ""], [[k, v] for k, v in environment(loaded, summary)], ["l", "l"])
    out += ["", "Generated by benchtui from the session's events (`benchtui export --format md`)."]
    return "\n".join(out) + "\n"


# -- CSV --------------------------------------------------------------------------------
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


def summary_columns() -> list[str]:
    cols = list(SCALAR_COLUMNS)
    for name in HEADLINE:
        cols += [f"{name}_ci_low", f"{name}_ci_high"] + [f"{name}_{s}" for s in STAT_FIELDS]
    cols += [
        f"batch_{s}" for s in ("n", "mean", "median", "iqr", "p5", "p95", "min", "max", "mad", "outliers")
    ]
    cols += [
        "vs_framework",
        "time_ratio",
        "time_ratio_ci_low",
        "time_ratio_ci_high",
        "ratio_significant",
        "ratio_basis",
    ]
    cols += list(EFFICIENCY_COLUMNS)
    cols += ["warnings", "run_ids"]
    return cols


def summary_records(summary: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One flat record per (model, framework): every summary field, for pandas."""
    ratios = {(r["model"], r["framework"]): r for r in summary.get("ratios") or []}
    for row in summary["rows"]:
        rec: dict[str, Any] = {k: row.get(k) for k in SCALAR_COLUMNS}
        rec["model_label"] = model_label(row["model"])
        rec["framework_label"] = framework_label(row["framework"])
        for name in HEADLINE:
            ci = (row.get("ci") or {}).get(name) or [None, None]
            rec[f"{name}_ci_low"], rec[f"{name}_ci_high"] = ci
            stats = (row.get("spread") or {}).get(name) or {}
            for s in STAT_FIELDS:
                rec[f"{name}_{s}"] = stats.get(s)
        batch = row.get("batch") or {}
        for s in ("n", "mean", "median", "iqr", "p5", "p95", "min", "max", "mad", "outliers"):
            rec[f"batch_{s}"] = batch.get(s)
        ratio = ratios.get((row["model"], row["framework"]))
        if ratio:
            rec.update(
                vs_framework=ratio["base"],
                time_ratio=ratio["ratio"],
                time_ratio_ci_low=ratio["ci_low"],
                time_ratio_ci_high=ratio["ci_high"],
                ratio_significant=ratio["significant"],
                ratio_basis=ratio["basis"],
            )
        for key in EFFICIENCY_COLUMNS:
            rec[key] = row.get(key)
        ci = (row.get("ci") or {}).get("achieved_tflops") or [None, None]
        rec["achieved_tflops_ci_low"], rec["achieved_tflops_ci_high"] = ci
        rec["warnings"] = "; ".join(w["message"] for w in row.get("warnings") or [])
        rec["run_ids"] = ";".join(row.get("run_ids") or [])
        yield rec


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision, round-trips
    return value


def write_summary_csv(summary: dict[str, Any], fh: IO[str]) -> None:
    cols = summary_columns()
    writer = csv.DictWriter(fh, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for rec in summary_records(summary):
        writer.writerow({k: _csv_value(rec.get(k)) for k in cols})


BATCH_COLUMNS = (
    "run_id",
    "framework",
    "model",
    "run_index",
    "epoch",
    "step",
    "seconds",
    "samples",
    "images_per_s",
    "t",
)


def write_batches_csv(loaded: LoadedSession, fh: IO[str]) -> int:
    """One row per recorded batch, streamed from events.jsonl; returns the number of rows."""
    specs = {rid: run.spec for rid, run in loaded.model.runs.items()}
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(BATCH_COLUMNS)
    count = 0
    for event in iter_events(loaded.path, []):
        if event.get("type") != "batch":
            continue
        spec = specs.get(event.get("run"))  # type: ignore[arg-type]
        if spec is None:
            continue
        seconds, samples = event.get("seconds"), event.get("samples")
        rate = (
            samples / seconds
            if isinstance(seconds, (int, float)) and seconds > 0 and isinstance(samples, int)
            else None
        )
        writer.writerow(
            [
                spec.run_id,
                spec.framework,
                spec.model,
                spec.index,
                event.get("epoch"),
                event.get("step"),
                _csv_value(seconds),
                _csv_value(samples),
                _csv_value(rate),
                _csv_value(event.get("t")),
            ]
        )
        count += 1
    return count


# -- JSON -------------------------------------------------------------------------------
def export_dict(loaded: LoadedSession, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full summary (schema 1 rows, ratios) with the session's facts and environment."""
    summary = summary or loaded.model.summary()
    meta = loaded.meta
    return {
        **summary,
        "kind": EXPORT_KIND,
        "session": {
            "folder": loaded.path.name,
            "name": meta.get("name"),
            "status": meta.get("status"),
            "started": meta.get("started"),
            "finished": meta.get("finished"),
            "schema": meta.get("schema"),
        },
        "environment": {
            "plan": meta.get("plan"),
            "host": meta.get("host"),
            "gpus": meta.get("gpus") or [],
            "telemetry": meta.get("telemetry"),
            "frameworks": summary.get("frameworks") or {},
            "lines": [{"label": k, "text": v} for k, v in environment(loaded, summary)],
        },
        "warnings": all_warnings(loaded, summary),
        "load_warnings": list(loaded.warnings),
    }


def finite(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities (a damaged session can hold them) become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def render_json(loaded: LoadedSession, summary: dict[str, Any] | None = None) -> str:
    return (
        json.dumps(finite(export_dict(loaded, summary)), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    )


# -- entry points -----------------------------------------------------------------------
def render(loaded: LoadedSession, fmt_: str, fh: IO[str], per_batch: bool = False) -> None:
    """Write the export of ``loaded`` in format ``fmt_`` to ``fh``."""
    if fmt_ not in FORMATS:
        raise SessionError(f"unknown export format {fmt_!r}; choose from {', '.join(FORMATS)}")
    if per_batch:
        if fmt_ != "csv":
            raise SessionError("--per-batch goes with --format csv")
        write_batches_csv(loaded, fh)
        return
    summary = loaded.model.summary()
    if fmt_ == "md":
        fh.write(render_md(loaded, summary))
    elif fmt_ == "csv":
        write_summary_csv(summary, fh)
    elif fmt_ == "json":
        fh.write(render_json(loaded, summary))
    else:
        from benchtui.core.reporting.report import render_html

        fh.write(render_html(loaded, summary))


def default_output(session: Path, fmt_: str, per_batch: bool = False) -> Path:
    return session / (PER_BATCH_NAME if per_batch else DEFAULT_NAMES[fmt_])


def _write_file(path: Path, loaded: LoadedSession, fmt_: str, per_batch: bool) -> Path:
    """Write through a temporary file so a failed export leaves no half file behind."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            render(loaded, fmt_, fh, per_batch)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def export_session(
    path: str | os.PathLike[str],
    fmt: str,
    output: str | os.PathLike[str] | None = None,
    per_batch: bool = False,
) -> Path:
    """Export the session at ``path`` to a file and return the file's path.

    Without ``output`` the file goes inside the session folder: summary.md,
    summary.csv, batches.csv (``per_batch``), summary-export.json or report.html.
    Raises SessionError for an unreadable session or a file that cannot be written.
    """
    loaded = load_session(path)
    target = Path(output) if output is not None else default_output(loaded.path, fmt, per_batch)
    try:
        return _write_file(target, loaded, fmt, per_batch)
    except OSError as exc:
        raise SessionError(f"cannot write {target}: {exc.strerror or exc}") from exc


def cmd_export(args: Any) -> int:
    """``benchtui export SESSION --format F [-o FILE] [--per-batch]``: md/csv/json to stdout, html to SESSION/report.html."""
    if args.per_batch and args.format != "csv":
        raise SessionError("--per-batch goes with --format csv")
    loaded = load_session(resolve_session(args.session, args.sessions_dir))
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    output = args.output
    if output is None and args.format == "html":
        output = str(default_output(loaded.path, "html"))
    if output is None or output == "-":
        # Tables are built in memory first: a failure prints nothing half-done.
        if args.per_batch:
            write_batches_csv(loaded, sys.stdout)
        else:
            buf = io.StringIO()
            render(loaded, args.format, buf)
            sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
        return 0
    target = Path(output)
    try:
        _write_file(target, loaded, args.format, args.per_batch)
    except OSError as exc:
        raise SessionError(f"cannot write {target}: {exc.strerror or exc}") from exc
    print(target)
    return 0

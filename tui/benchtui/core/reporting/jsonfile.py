"""The JSON writer: the full summary with the session's facts, environment and warnings, and every run's raw
figures (``runs``: its epochs, each timed step's seconds, its build), from which every figure of the summary
can be computed again without events.jsonl."""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from benchtui.core.model.runs import wire_loss
from benchtui.core.reporting.model import Report
from benchtui.core.reporting.model.types import RunSeries

EXPORT_KIND = "benchtui-summary-export"
#: What json.dumps leaves raw with ensure_ascii=False and a terminal may act on: DEL, C1 controls,
#: bidi overrides and Unicode line breaks. JSON's own \uXXXX escapes keep the data the same.
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: Steps per line of a run's ``step_seconds``: a long run's list is written a chunk at a time.
CHUNK = 4096


def export_dict(report: Report) -> dict[str, Any]:
    """The full summary (rows, ratios) with the session's facts and environment."""
    summary, source = report.summary.to_json(), report.source
    meta = source.meta
    return {
        **summary,
        "kind": EXPORT_KIND,
        "session": {
            "folder": source.folder,
            "name": meta.get("name"),
            "status": meta.get("status"),
            "started": meta.get("started"),
            "finished": meta.get("finished"),
            "schema": meta.get("schema"),
        },
        "environment": {
            "plan": meta.get("plan"),
            "host": meta.get("host"),
            # The host's CPU (also in "host"), said apart: what a reader of CPU timings looks for first.
            "cpu_model": source.cpu_model,
            "gpus": meta.get("gpus") or [],
            "telemetry": meta.get("telemetry"),
            "frameworks": summary.get("frameworks") or {},
            "lines": [{"label": k, "text": v} for k, v in report.environment],
        },
        "warnings": [w.text for w in report.warnings],
        "load_warnings": list(source.load_warnings),
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


def safe(text: str) -> str:
    """JSON text with nothing in it that a terminal would act on (``_UNSAFE`` escaped)."""
    # These characters can only be inside strings (JSON's syntax is ASCII), where an escape means the same.
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(data: Any) -> str:
    """``data`` as JSON text (NaN and infinities as null), indented, safe to show, with a final newline."""
    return safe(json.dumps(finite(data), indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def run_dict(run: RunSeries) -> dict[str, Any]:
    """One run's raw figures as the export has them, its steps apart (``step_seconds``, written in chunks)."""
    epochs = []
    for number, seconds, count in zip(run.epoch_numbers, run.epochs, run.epoch_samples, strict=True):
        epoch: dict[str, Any] = {"epoch": number, "seconds": _number(seconds), "samples": count}
        if number in run.losses:  # where the runner sent one: NaN and infinities as the wire writes them
            epoch["loss"] = wire_loss(run.losses[number])
        epochs.append(epoch)
    return {
        "run_id": run.run_id,
        "framework": run.framework,
        "model": run.model,
        "index": run.index,
        "point": run.point.to_json(),
        "status": str(run.status),
        "reason": run.reason,
        "devices": run.devices,
        **({"nodes": run.nodes} if run.nodes > 1 else {}),  # several machines (issue 33): only then
        "batch_size": run.batch_size,
        "samples_per_epoch": run.samples_per_epoch,
        "build_s": run.figures.get("build_s"),
        "time_to_first_batch_s": run.figures.get("time_to_first_batch_s"),
        "epochs": epochs,
    }


def _seconds(value: float) -> str:
    return repr(float(value)) if math.isfinite(value) else "null"


def _all_finite_floats(values: Sequence[Any]) -> bool:
    """Whether every value is a float and finite, in two passes at C speed (NaN and the infinities carry
    through a sum; one that overflows only means the value-by-value path)."""
    return set(map(type, values)) <= {float} and math.isfinite(sum(values))


def _steps(values: Sequence[Any], text: Callable[[Any], str] = _seconds) -> Iterator[str]:
    """A run's list of steps as JSON, ``CHUNK`` values a line (a non-finite time as null)."""
    if not values:
        yield "[]"
        return
    yield "["
    for start in range(0, len(values), CHUNK):
        chunk = values[start : start + CHUNK]
        if text is _seconds and _all_finite_floats(chunk):  # a run's batches: repr each, no check per value
            line = ", ".join(map(float.__repr__, chunk))
        else:
            line = ", ".join(map(text, chunk))
        yield ("\n        " if start == 0 else ",\n        ") + line
    yield "\n      ]"


def _write_runs(runs: Sequence[RunSeries], fh: IO[str]) -> None:
    """``"runs": [...]``, a run at a time: a long session's steps are never one string in memory."""
    if not runs:
        fh.write('  "runs": []')
        return
    fh.write('  "runs": [')
    for i, run in enumerate(runs):
        head = dumps(run_dict(run)).rstrip()[:-1].rstrip()  # the object without its closing brace
        fh.write(("\n" if i == 0 else ",\n") + "\n".join("    " + line for line in head.splitlines()))
        fh.write(',\n      "step_epochs": ')
        for part in _steps(run.batch_epochs, str):
            fh.write(part)
        fh.write(',\n      "step_seconds": ')
        for part in _steps(run.batch_seconds):
            fh.write(part)
        fh.write("\n    }")
    fh.write("\n  ]")


def render(report: Report) -> str:
    """The export as JSON text: the data as recorded, and nothing in it that a terminal would act on."""
    buf = io.StringIO()
    write(report, buf)
    return buf.getvalue()


def write(report: Report, fh: IO[str]) -> None:
    """The summary's part as one document, then ``runs`` streamed a run at a time."""
    head = dumps(export_dict(report)).rstrip()
    fh.write(head[:-1].rstrip() + ",\n")  # the object without its closing brace
    _write_runs(report.runs, fh)
    fh.write("\n}\n")

"""The JSON writer: the full summary with the session's facts, environment and warnings."""

from __future__ import annotations

import json
import math
import re
from typing import IO, Any

from benchtui.core.reporting.model import Report

EXPORT_KIND = "benchtui-summary-export"
#: What json.dumps leaves raw with ensure_ascii=False and a terminal may act on: DEL, C1 controls,
#: bidi overrides and Unicode line breaks. JSON's own \uXXXX escapes keep the data the same.
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


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


def render(report: Report) -> str:
    """The export as JSON text: the data as recorded, and nothing in it that a terminal would act on."""
    return dumps(export_dict(report))


def write(report: Report, fh: IO[str]) -> None:
    fh.write(render(report))

"""The JSON writer: the full summary with the session's facts, environment and warnings."""

from __future__ import annotations

import json
import math
from typing import IO, Any

from benchtui.core.reporting.model import Report

EXPORT_KIND = "benchtui-summary-export"


def export_dict(report: Report) -> dict[str, Any]:
    """The full summary (rows, ratios) with the session's facts and environment."""
    summary, loaded = report.summary, report.session
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
            "lines": [{"label": k, "text": v} for k, v in report.environment],
        },
        "warnings": [w.text for w in report.warnings],
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


def render(report: Report) -> str:
    return json.dumps(finite(export_dict(report)), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write(report: Report, fh: IO[str]) -> None:
    fh.write(render(report))

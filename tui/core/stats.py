"""Descriptive statistics for timings, in plain Python (no NumPy needed by the parent)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of already sorted values, linear interpolation (NumPy's default)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(sorted_values[lo])
    frac = pos - lo
    return float(sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def describe(values: Sequence[float]) -> dict[str, Any] | None:
    """n, mean, median, quartiles, IQR, min, max, p5/p95 of some values; None if empty."""
    vals = sorted(float(v) for v in values if v is not None)
    if not vals:
        return None
    q1, med, q3 = quantile(vals, 0.25), quantile(vals, 0.5), quantile(vals, 0.75)
    return {
        "n": len(vals),
        "mean": mean(vals),
        "median": med,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "min": vals[0],
        "max": vals[-1],
        "p5": quantile(vals, 0.05),
        "p95": quantile(vals, 0.95),
    }

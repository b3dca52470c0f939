"""Fixed-scale sparklines as text: several strips can share one scale, unlike Textual's Sparkline."""

from __future__ import annotations

import math
from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"
GAP = "·"  # a slot with no value (a metric the GPU did not report)


def _columns(
    values: Sequence[float | None], width: int, ceiling: float | None, capacity: int | None
) -> list[float | None]:
    """Each column's mean as a share of the scale (0 to 1); None: an empty slot; NaN: only None values."""
    n = len(values)
    capacity = max(capacity or n, n, 1)
    top = ceiling if ceiling and ceiling > 0 else max((v for v in values if v is not None), default=0.0)
    top = top or 1.0
    first = capacity - n  # slots before the first value are empty
    out: list[float | None] = []
    for col in range(max(width, 0)):
        lo = col * capacity // width
        hi = max((col + 1) * capacity // width, lo + 1)
        chunk = [values[s - first] for s in range(max(lo, first), hi)]
        if not chunk:
            out.append(None)
            continue
        present = [v for v in chunk if v is not None]
        out.append(min(max(sum(present) / len(present) / top, 0.0), 1.0) if present else math.nan)
    return out


def strip(
    values: Sequence[float | None],
    width: int,
    ceiling: float | None,
    capacity: int | None = None,
) -> str:
    """Render ``values`` (oldest first) as ``width`` bar characters scaled from 0 to ``ceiling``.

    ``capacity`` is how many values a full strip holds: with fewer values the strip fills
    from the right, so the time axis stays fixed while a window is filling. A column
    covering several values shows their mean; a value wider than a column spans several.
    None values are skipped; a column with only None shows ``GAP``. Values above
    ``ceiling`` are drawn full height; without a ceiling the largest value is the top.
    """
    levels = len(BARS) - 1
    return "".join(
        " " if r is None else GAP if math.isnan(r) else BARS[round(r * levels)]
        for r in _columns(values, width, ceiling, capacity)
    )


def tall_strip(values: Sequence[float | None], width: int, ceiling: float | None, rows: int) -> list[str]:
    """``strip`` drawn ``rows`` lines high (top line first): ``rows`` × 8 levels instead of 8."""
    if rows <= 1:
        return [strip(values, width, ceiling)]
    ratios = _columns(values, width, ceiling, None)
    eighths = [0 if r is None or math.isnan(r) else max(1, round(r * rows * 8)) for r in ratios]
    lines = []
    for row in range(rows - 1, -1, -1):  # the top line first; row 0 is the bottom one
        parts = [min(max(n - 8 * row, 0), 8) for n in eighths]
        line = "".join(BARS[p - 1] if p else " " for p in parts)
        if row == 0:  # a column with no value shows the gap mark, as ``strip`` does
            line = "".join(
                GAP if r is not None and math.isnan(r) else c for r, c in zip(ratios, line, strict=True)
            )
        lines.append(line)
    return lines

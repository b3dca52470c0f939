"""Fixed-scale sparklines as text: several strips can share one scale, unlike Textual's Sparkline."""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"
GAP = "·"  # a slot with no value (a metric the GPU did not report)


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
    if width <= 0:
        return ""
    n = len(values)
    capacity = max(capacity or n, n, 1)
    top = ceiling if ceiling and ceiling > 0 else max((v for v in values if v is not None), default=0.0)
    top = top or 1.0
    first = capacity - n  # slots before the first value are empty
    levels = len(BARS) - 1
    out = []
    for col in range(width):
        lo = col * capacity // width
        hi = max((col + 1) * capacity // width, lo + 1)
        chunk = [values[s - first] for s in range(max(lo, first), hi)]
        if not chunk:
            out.append(" ")
            continue
        present = [v for v in chunk if v is not None]
        if not present:
            out.append(GAP)
            continue
        ratio = min(max(sum(present) / len(present) / top, 0.0), 1.0)
        out.append(BARS[round(ratio * levels)])
    return "".join(out)

"""Inline SVG charts (grouped bars, lines over time) drawn as text, for self-contained HTML reports."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape as _html_escape
from itertools import chain
from typing import Any, cast

from benchtui.core import fmt

FRAMEWORK_COLORS = fmt.FRAMEWORK_COLORS
PALETTE = fmt.PALETTE
color_for = fmt.color_for
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"


def escape(text: object) -> str:
    """Text for SVG: escaped, and without control characters (labels can come from session files)."""
    return _html_escape(fmt.clean(text))


def _coord(x: float) -> str:
    """A coordinate with one decimal: enough for a screen, and small files."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


_PAIR = "{:.1f},{:.1f}".format


def _coords(pxs: list[float], pys: list[float]) -> str:
    """'x,y x,y …': each pair as ``_coord`` writes it, formatted in one pass. A number written with one
    decimal ends in '.0' exactly where that decimal is a zero, and only a number's end comes before ',',
    ' ' or the text's end: those '.0' are what ``_coord`` leaves out."""
    text = " ".join(map(_PAIR, pxs, pys)).replace(".0,", ",").replace(".0 ", " ")
    return text[:-2] if text.endswith(".0") else text


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 12))
    return ticks


def tick_label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def value_label(value: float) -> str:
    """Three significant digits, keeping trailing zeros (2.00, 12.5, 1,234)."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".")


def downsample_minmax(
    xs: Sequence[float], ys: Sequence[float], max_points: int
) -> tuple[list[float], list[float]]:
    """At most ``max_points`` points: each bucket keeps its lowest and highest value, in x order.

    Keeping the extremes (not the mean) means a spike in a long series still shows.
    """
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    buckets = max(1, max_points // 2)
    size = n / buckets
    out_x: list[float] = []
    out_y: list[float] = []
    for b in range(buckets):
        lo, hi = int(b * size), min(n, int((b + 1) * size))
        if lo >= hi:
            continue
        seg = ys[lo:hi]  # min/max of the values, then their first index: as min(range, key=...) picks, faster
        i_min = lo + seg.index(min(seg))
        i_max = lo + seg.index(max(seg))
        first, second = (i_min, i_max) if i_min <= i_max else (i_max, i_min)  # in x order, once each
        out_x.append(xs[first])
        out_y.append(ys[first])
        if second != first:
            out_x.append(xs[second])
            out_y.append(ys[second])
    return out_x, out_y


@dataclass
class Bar:
    """One bar of a group: a value with an optional whisker (low–high) and dots (runs)."""

    series: str
    value: float | None
    low: float | None = None
    high: float | None = None
    dots: list[float] = field(default_factory=list)
    note: str = ""  # shown instead of a bar when value is None ("n/a", "failed")


@dataclass
class Series:
    """One line of a line chart."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float | None]  # None: a gap (no reading)
    color: str = ""
    dashed: bool = False
    dash: str = ""  # an SVG dash pattern ("6 3"): lines of one colour told apart (each run of a framework)


#: Dash patterns that tell the runs of one framework apart (its colour is the framework's): run 1 solid.
RUN_DASHES = ("", "7 3", "2 3", "9 3 2 3", "4 4", "12 4")


def run_dash(index: int) -> str:
    """The dash pattern of the ``index``-th run (from 1) of a framework's lines."""
    return RUN_DASHES[(index - 1) % len(RUN_DASHES)]


@dataclass
class Band:
    """A shaded span of the x axis (a run)."""

    x0: float
    x1: float
    color: str
    label: str = ""


#: The types a plotted value may have; anything else is not drawn.
_NUMBERS = frozenset({int, float, bool})


def _all_finite(values: Sequence[Any]) -> bool:
    """Whether every value is a number and finite, in passes at C speed: NaN and the infinities carry through
    a sum (a sum that overflows only sends the caller to its slow path). A run's million batches are
    checked here rather than one by one."""
    if not set(map(type, values)) <= _NUMBERS:
        return False
    try:
        return math.isfinite(sum(values))
    except (TypeError, OverflowError):
        return False


def _finite_points(xs: Sequence[float], ys: Sequence[float | None]) -> tuple[list[float], list[float | None]]:
    """Drop points that cannot be drawn (infinite or NaN x; an infinite or NaN y becomes a gap)."""
    if len(xs) == len(ys) and _all_finite(xs):  # the common case, whole: every point kept
        if _all_finite(ys):
            return list(xs), list(ys)
        return list(xs), [y if isinstance(y, (int, float)) and math.isfinite(y) else None for y in ys]
    out_x: list[float] = []
    out_y: list[float | None] = []
    for x, y in zip(xs, ys, strict=False):
        if isinstance(x, (int, float)) and math.isfinite(x):
            out_x.append(x)
            out_y.append(y if isinstance(y, (int, float)) and math.isfinite(y) else None)
    return out_x, out_y


def _y_extent(
    all_y: list[float], y_min: float | None, y_max: float | None, clip_quantile: float | None
) -> tuple[float, float]:
    """The top and bottom of a chart's values ``all_y`` (every drawn line's, finite, not empty) as sorting
    them gives them: ``y_max``, else the largest, or the ``clip_quantile`` × 1.3 when the largest is above
    it; ``y_min``, else the smallest (``min``: the first of the smallest, as a stable sort puts first).

    Not sorted where it need not be: the largest of floats is the sorted last, except where equal values
    can be told apart (an int and a float, 0.0 and -0.0: sorting puts the last of them last, ``max`` gives
    the first); a quantile near the top sorts only the values above a threshold (``_at_and_last``)."""
    smallest = min(all_y) if y_min is None else y_min
    if y_max is not None:
        return y_max, smallest
    floats = set(map(type, all_y)) == _FLOAT
    if clip_quantile is not None:
        k = min(len(all_y) - 1, int(clip_quantile * (len(all_y) - 1)))
        q, largest = _at_and_last(all_y, k, floats)
        top = q * 1.3 if largest > q * 1.3 else None
        return (top if top is not None else largest), smallest
    largest = max(all_y)
    if not floats or largest == 0:
        largest = sorted(all_y)[-1]
    return largest, smallest


def _at_and_last(values: list[float], k: int, floats: bool) -> tuple[float, float]:
    """``sorted(values)[k]`` and ``sorted(values)[-1]``. For many floats, only those at or above a threshold
    are sorted: every value below it comes before them in the sorted list, and those at or above it keep
    their order (a stable sort), so the k-th is theirs at ``k`` less the count below, when ``k`` is not
    among the values below (else all are sorted). The threshold: a value of a strided sample a little
    under ``k``'s share, so that about 1% more than the top ``len - k`` values are sorted."""
    n = len(values)
    if floats and n >= 8192:
        sample = sorted(values[::64])
        t = sample[max(0, k * len(sample) // n - max(8, len(sample) // 100))]
        above = list(filter(t.__le__, values))  # t <= v, floats only: a float's __le__ of a float is a bool
        below = n - len(above)
        if k >= below:
            above.sort()
            return above[k - below], above[-1]
    ordered = sorted(values)
    return ordered[k], ordered[-1]


_FLOAT = {float}


def _drawn(xs: Sequence[float], ys: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """A line's points that have a value (``_finite_points``'s, whose lists are equally long): all of them
    when it has no gap, as a run's batches have none, without a pass per point."""
    if None not in ys:
        return list(xs), cast("list[float]", list(ys))
    pts = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


class _Frame:
    """Plot area geometry and value-to-pixel mapping."""

    def __init__(
        self, width: int, height: int, left: int = 64, right: int = 16, top: int = 34, bottom: int = 46
    ) -> None:
        self.width, self.height = width, height
        self.x0, self.x1 = left, width - right
        self.y0, self.y1 = top, height - bottom

    def set_ranges(self, xlo: float, xhi: float, ylo: float, yhi: float) -> None:
        self.xlo, self.xhi = xlo, xhi if xhi > xlo else xlo + 1
        self.ylo, self.yhi = ylo, yhi if yhi > ylo else ylo + 1

    def px(self, x: float) -> float:
        return self.x0 + (x - self.xlo) / (self.xhi - self.xlo) * (self.x1 - self.x0)

    def py(self, y: float) -> float:
        return self.y1 - (y - self.ylo) / (self.yhi - self.ylo) * (self.y1 - self.y0)


def _open(width: int, height: int, title: str, desc: str = "") -> list[str]:
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(title)}" style="{FONT};font-size:12px">',
        f"<title>{escape(title)}</title>",
    ]
    if desc:
        parts.append(f"<desc>{escape(desc)}</desc>")
    parts.append(f'<text x="8" y="18" font-size="14" font-weight="600">{escape(title)}</text>')
    return parts


def _y_axis(
    parts: list[str],
    fr: _Frame,
    ticks: list[float],
    label: str,
    tick_text: Callable[[float], str] = tick_label,
) -> None:
    for t in ticks:
        y = fr.py(t)
        parts.append(f'<line x1="{fr.x0}" x2="{fr.x1}" y1="{_coord(y)}" y2="{_coord(y)}" stroke="#e9ecef"/>')
        parts.append(
            f'<text x="{fr.x0 - 6}" y="{_coord(y + 4)}" text-anchor="end" fill="#495057">{tick_text(t)}</text>'
        )
    parts.append(f'<line x1="{fr.x0}" x2="{fr.x0}" y1="{fr.y0}" y2="{fr.y1}" stroke="#868e96"/>')
    parts.append(f'<line x1="{fr.x0}" x2="{fr.x1}" y1="{fr.y1}" y2="{fr.y1}" stroke="#868e96"/>')
    mid = (fr.y0 + fr.y1) / 2
    parts.append(
        f'<text transform="translate(14 {_coord(mid)}) rotate(-90)" text-anchor="middle" fill="#495057">{escape(label)}</text>'
    )


#: A legend's rows, top to bottom, this far apart (px).
LEGEND_ROW = 16


def title_width(title: str) -> float:
    """About how wide a chart's title is drawn (14 px, bold): where a legend beside it may begin."""
    return 8 + 8.6 * len(title)


def _legend_entry_width(label: str) -> float:
    return 7 * len(label) + 4 + 22 + 12


def legend_rows(items: Sequence[tuple[str, str, bool | str]], x: float, left: float) -> list[list[int]]:
    """The legend's entries (their indices) per row, in their order, each row right-aligned at ``x``: the
    first row beside the title (right of ``left``, its end), the rows after it under the title."""
    rows: list[list[int]] = [[]]
    room, used = x - left, 0.0
    for i, (label, _, _) in enumerate(items):
        need = _legend_entry_width(label)
        if used + need > room and rows[-1]:
            rows.append([])
            room, used = x - 8, 0.0
        rows[-1].append(i)
        used += need
    return rows


def _legend(
    parts: list[str], items: Sequence[tuple[str, str, bool | str]], x: float, y: float, left: float = 0.0
) -> int:
    """Legend entries (label, color, dashed: True or a dash pattern) laid out right to left from ``x``,
    right of ``left`` (a title's end), on as many rows as that takes (``legend_rows``); returns the rows."""
    rows = legend_rows(items, x, left)
    for r, indices in enumerate(rows):
        cursor = x
        row_y = y + r * LEGEND_ROW
        for i in reversed(indices):  # right to left: the row ends at ``x``
            label, color, dashed = items[i]
            cursor -= 7 * len(label) + 4
            parts.append(
                f'<text x="{_coord(cursor)}" y="{_coord(row_y + 4)}" fill="#343a40">{escape(label)}</text>'
            )
            cursor -= 22
            pattern = dashed if isinstance(dashed, str) else ("4 3" if dashed else "")
            dash = f' stroke-dasharray="{pattern}"' if pattern else ""
            parts.append(
                f'<line x1="{_coord(cursor)}" x2="{_coord(cursor + 16)}" y1="{_coord(row_y)}" y2="{_coord(row_y)}" '
                f'stroke="{color}" stroke-width="3"{dash}/>'
            )
            cursor -= 12
    return len(rows)


def bar_chart(
    title: str,
    groups: list[tuple[str, list[Bar]]],
    colors: dict[str, str],
    labels: dict[str, str],
    y_label: str,
    width: int = 960,
    height: int = 340,
    desc: str = "",
) -> str:
    """Grouped bars: one group per label (a model), one bar per series (a framework)."""
    series = list(dict.fromkeys(b.series for _, bars in groups for b in bars))
    legend = [(labels.get(s, s), colors.get(s, "#495057"), False) for s in series]
    # A legend that does not fit beside the title goes under it, and the plot down with it.
    extra = LEGEND_ROW * (len(legend_rows(legend, width - 16, title_width(title))) - 1)
    fr = _Frame(width, height, top=34 + extra)
    for _, bars in groups:
        for b in bars:  # a value that is not a finite number cannot be drawn: say so instead
            if b.value is not None and not math.isfinite(b.value):
                b.value, b.note = None, "invalid"
            if not (
                b.low is not None and b.high is not None and math.isfinite(b.low) and math.isfinite(b.high)
            ):
                b.low = b.high = None
            b.dots = [d for d in b.dots if math.isfinite(d)]
    values = [v for _, bars in groups for b in bars for v in (b.value, b.high, *b.dots) if v is not None]
    top = max(values) if values else 1.0
    ticks = nice_ticks(0, top * 1.05)
    fr.set_ranges(0, 1, 0, ticks[-1])
    parts = _open(width, height, title, desc)
    _y_axis(parts, fr, ticks, y_label)
    _legend(parts, legend, fr.x1, 18, title_width(title))
    n = max(1, len(groups))
    slot = (fr.x1 - fr.x0) / n
    for gi, (label, bars) in enumerate(groups):
        gx = fr.x0 + gi * slot
        # Bars no wider than 90 px: a lone bar filling a whole chart reads as a wall.
        bw = min(slot * 0.8 / max(1, len(bars)), 90.0)
        start = gx + (slot - bw * len(bars)) / 2
        for bi, bar in enumerate(bars):
            x = start + bi * bw
            cx = x + bw / 2
            color = colors.get(bar.series, "#495057")
            if bar.value is None:
                parts.append(
                    f'<text x="{_coord(cx)}" y="{_coord(fr.y1 - 6)}" text-anchor="middle" fill="#868e96" font-size="11">'
                    f"{escape(bar.note or 'n/a')}</text>"
                )
                continue
            y = fr.py(bar.value)
            parts.append(
                f'<rect x="{_coord(x + 2)}" y="{_coord(y)}" width="{_coord(max(1.0, bw - 4))}" height="{_coord(fr.y1 - y)}" '
                f'fill="{color}" fill-opacity="0.8"><title>{escape(labels.get(bar.series, bar.series))} '
                f"{escape(label)}: {bar.value:.4g}</title></rect>"
            )
            if bar.low is not None and bar.high is not None and bar.high > bar.low:
                ylo, yhi = fr.py(bar.low), fr.py(bar.high)
                parts.append(
                    f'<path d="M{_coord(cx)} {_coord(ylo)}V{_coord(yhi)}M{_coord(cx - 6)} {_coord(ylo)}h12M{_coord(cx - 6)} {_coord(yhi)}h12" '
                    'stroke="#212529" stroke-width="1.5" fill="none"/>'
                )
            for d in bar.dots:
                parts.append(
                    f'<circle cx="{_coord(cx)}" cy="{_coord(fr.py(d))}" r="2.5" fill="#212529" fill-opacity="0.7"/>'
                )
            parts.append(
                f'<text x="{_coord(cx)}" y="{_coord(min(y, fr.py(bar.high) if bar.high else y) - 5)}" text-anchor="middle" '
                f'font-size="10" fill="#343a40">{value_label(bar.value)}</text>'
            )
        parts.append(
            f'<text x="{_coord(gx + slot / 2)}" y="{_coord(fr.y1 + 18)}" text-anchor="middle" fill="#212529">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    title: str,
    series: list[Series],
    x_label: str,
    y_label: str,
    width: int = 960,
    height: int = 300,
    y_min: float | None = 0.0,
    y_max: float | None = None,
    clip_quantile: float | None = None,
    vlines: Sequence[float] = (),
    bands: Sequence[Band] = (),
    band_legend: dict[str, str] | None = None,
    max_points: int = 800,
    desc: str = "",
    legend_items: Sequence[tuple[str, str, bool | str]] | None = None,
    marks: Sequence[tuple[float, str, str]] = (),
) -> str:
    """Lines over x; values above ``y_max`` (or the ``clip_quantile`` of all values × 1.3) are marked off scale.

    ``marks`` (x, colour, words): a point that has no value to draw (a loss gone NaN), a ✕ at the top of
    the plot at its x, its words as its tooltip.

    ``legend_items`` (label, colour, dashed or a dash pattern) replace the legend of one entry per line:
    many lines (every run of each framework) say their colours and dashes once each. Off-scale peaks are
    said once per colour (the highest).
    """
    series = [
        Series(s.label, *_finite_points(s.xs, s.ys), color=s.color, dashed=s.dashed, dash=s.dash)
        for s in series
    ]
    legend: list[tuple[str, str, bool | str]] = [
        (s.label, s.color or PALETTE[i % len(PALETTE)], s.dash or ("5 4" if s.dashed else "") or s.dashed)
        for i, s in enumerate(series)
        if any(y is not None for y in s.ys)
    ]
    if legend_items is not None:
        legend = list(legend_items)
    if band_legend:
        legend += [(label, color, False) for label, color in band_legend.items()]
    # A legend that does not fit beside the title goes under it, and the plot down with it.
    extra = LEGEND_ROW * (len(legend_rows(legend, width - 16, title_width(title))) - 1)
    fr = _Frame(width, height, top=34 + extra)
    drawn = [_drawn(s.xs, s.ys) for s in series]  # each line's points with a value, once
    all_y = list(chain.from_iterable(ys for _, ys in drawn))
    parts = _open(width, height, title, desc)
    if not all_y or not any(s.xs for s in series):
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#868e96">no data recorded</text></svg>'
        )
        return "".join(parts)
    top, bottom = _y_extent(all_y, y_min, y_max, clip_quantile)
    ticks = nice_ticks(bottom, top if top > bottom else bottom + 1)
    fr.set_ranges(
        min(min(s.xs) for s in series if s.xs), max(max(s.xs) for s in series if s.xs), ticks[0], ticks[-1]
    )
    for band in bands:
        x0, x1 = fr.px(max(band.x0, fr.xlo)), fr.px(min(band.x1, fr.xhi))
        if x1 > x0:
            tip = f"<title>{escape(band.label)}</title>" if band.label else ""
            parts.append(
                f'<rect x="{_coord(x0)}" y="{fr.y0}" width="{_coord(x1 - x0)}" height="{fr.y1 - fr.y0}" '
                f'fill="{band.color}" fill-opacity="0.09">{tip}</rect>'
            )
    _y_axis(parts, fr, ticks, y_label)
    for t in nice_ticks(fr.xlo, fr.xhi, 8):
        if fr.xlo <= t <= fr.xhi:
            x = fr.px(t)
            parts.append(
                f'<line x1="{_coord(x)}" x2="{_coord(x)}" y1="{fr.y1}" y2="{fr.y1 + 4}" stroke="#868e96"/>'
            )
            parts.append(
                f'<text x="{_coord(x)}" y="{fr.y1 + 16}" text-anchor="middle" fill="#495057">{tick_label(t)}</text>'
            )
    parts.append(
        f'<text x="{_coord((fr.x0 + fr.x1) / 2)}" y="{height - 8}" text-anchor="middle" fill="#495057">{escape(x_label)}</text>'
    )
    for v in vlines:
        if fr.xlo < v < fr.xhi:
            x = fr.px(v)
            parts.append(
                f'<line x1="{_coord(x)}" x2="{_coord(x)}" y1="{fr.y0}" y2="{fr.y1}" stroke="#adb5bd" stroke-dasharray="3 3"/>'
            )
    offs: list[tuple[float, float]] = []
    peaks: dict[str, tuple[str, float, float]] = {}  # colour -> the highest off-scale point of its lines
    for i, (s, (line_x, line_y)) in enumerate(zip(series, drawn, strict=True)):
        color = s.color or PALETTE[i % len(PALETTE)]
        if not line_x:
            continue
        xs, ys = downsample_minmax(line_x, line_y, max_points)
        off = [(x, y) for x, y in zip(xs, ys, strict=False) if y > fr.yhi]
        # fr.px and fr.py inline (the same operations in the same order: the same floats), for a line of
        # thousands of points
        x0, xlo, xspan, xwidth = fr.x0, fr.xlo, fr.xhi - fr.xlo, fr.x1 - fr.x0
        y1, ylo, yhi, yspan, yheight = fr.y1, fr.ylo, fr.yhi, fr.yhi - fr.ylo, fr.y1 - fr.y0
        coords = _coords(
            [x0 + (x - xlo) / xspan * xwidth for x in xs],
            [y1 - (min(max(y, ylo), yhi) - ylo) / yspan * yheight for y in ys],
        )
        pattern = s.dash or ("5 4" if s.dashed else "")
        dash = f' stroke-dasharray="{pattern}"' if pattern else ""
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.5" '
            f'stroke-linejoin="round"{dash}><title>{escape(s.label)}</title></polyline>'
        )
        if len(xs) == 1:  # a line of one point draws nothing: a dot (a loss that went NaN after epoch 1)
            parts.append(
                f'<circle cx="{_coord(fr.px(xs[0]))}" cy="{_coord(fr.py(min(max(ys[0], fr.ylo), fr.yhi)))}" '
                f'r="2.5" fill="{color}"><title>{escape(s.label)}</title></circle>'
            )
        for x, y in off[:20]:
            px = fr.px(x)
            parts.append(
                f'<path d="M{_coord(px - 4)} {fr.y0 + 7}l4 -7l4 7z" fill="{color}"><title>{escape(s.label)}: '
                f"{y:.4g} (off scale)</title></path>"
            )
        if off:
            peak = max(off, key=lambda p: p[1])
            if color not in peaks or peak[1] > peaks[color][2]:
                peaks[color] = (s.label, peak[0], peak[1])
    for x, color, words in marks:
        if fr.xlo <= x <= fr.xhi:
            parts.append(
                f'<text x="{_coord(fr.px(x))}" y="{fr.y0 + 12}" text-anchor="middle" font-size="13" '
                f'fill="{color}">✕<title>{escape(words)}</title></text>'
            )
    for color, (label, x, y) in peaks.items():
        # One line per colour, stacked, so two peaks at the same x do not overprint.
        parts.append(
            f'<text x="{fr.x0 + 14}" y="{fr.y0 + 12 + 13 * len(offs)}" font-size="11" fill="{color}">'
            f"▲ {escape(label)}: {y:.3g} at {x:g} (off scale)</text>"
        )
        offs.append((x, y))
    _legend(parts, legend, fr.x1, 18, title_width(title))
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class Curve:
    """One line of a scaling chart: a value at each device count, with its 95% CI when known."""

    label: str
    xs: Sequence[int]  # device counts
    ys: Sequence[float | None]
    lows: Sequence[float | None] = ()
    highs: Sequence[float | None] = ()
    color: str = ""
    dashed: bool = False  # a reference (linear scaling): a dashed line without dots


def shade(color: str, step: int) -> str:
    """``color`` ('#e8590c') lightened ``step`` times towards white (a third each): a framework's other
    series in its own colour, told apart (step 0: the colour itself)."""
    if step <= 0 or len(color) != 7 or not color.startswith("#"):
        return color
    mix = 1 - (2 / 3) ** step
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * mix):02x}" for c in rgb)


def _finite(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def scaling_chart(
    title: str,
    curves: list[Curve],
    y_label: str,
    x_label: str = "devices",
    width: int = 480,
    height: int = 320,
    percent: bool = False,
    desc: str = "",
    x_tip: str = "on {x} device(s)",
    x_names: Mapping[int, str] | None = None,
) -> str:
    """Lines over device counts, the counts evenly spaced (1, 2, 4, 8: a log₂ axis), each point a dot
    with its 95% CI as a whisker; dashed curves are references (linear scaling), drawn without dots.

    ``percent``: the values are percentages (ticks and tips say so). ``x_tip``: a dot's x in its tip ('at
    batch {x}' for a sweep's curve against the batch). ``x_names``: a tick's label by its x where it is not
    the number (several nodes: workers 4 is '2×2', nodes × devices).
    """
    fr = _Frame(width, height, left=58, top=56)
    counts = sorted({x for c in curves for x in c.xs if isinstance(x, int) and x > 0})
    values = [v for c in curves for v in map(_finite, (*c.ys, *c.highs)) if v is not None and v >= 0]
    parts = _open(width, height, title, desc)
    if not counts or not values:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#868e96">no data recorded</text></svg>'
        )
        return "".join(parts)
    ticks = nice_ticks(0, max(values) * 1.05)
    lo, hi = math.log2(counts[0]), math.log2(counts[-1])
    fr.set_ranges(lo - 0.3, hi + 0.3, 0, ticks[-1])
    unit = "%" if percent else ""
    _y_axis(parts, fr, ticks, y_label, lambda t: tick_label(t) + unit)
    for n in counts:
        x = fr.px(math.log2(n))
        parts.append(
            f'<line x1="{_coord(x)}" x2="{_coord(x)}" y1="{fr.y1}" y2="{fr.y1 + 4}" stroke="#868e96"/>'
        )
        name = escape((x_names or {}).get(n, str(n)))
        parts.append(
            f'<text x="{_coord(x)}" y="{fr.y1 + 16}" text-anchor="middle" fill="#495057">{name}</text>'
        )
    parts.append(
        f'<text x="{_coord((fr.x0 + fr.x1) / 2)}" y="{height - 8}" text-anchor="middle" fill="#495057">{escape(x_label)}</text>'
    )
    legend: list[tuple[str, str, bool]] = []
    for i, c in enumerate(curves):
        color = c.color or PALETTE[i % len(PALETTE)]
        lows = list(c.lows) or [None] * len(c.xs)
        highs = list(c.highs) or [None] * len(c.xs)
        pts = [
            (x, y, _finite(low), _finite(high))
            for x, y0, low, high in zip(c.xs, c.ys, lows, highs, strict=False)
            if x in counts and (y := _finite(y0)) is not None
        ]
        if not pts:
            continue
        coords = " ".join(f"{_coord(fr.px(math.log2(x)))},{_coord(fr.py(y))}" for x, y, _, _ in pts)
        dash = ' stroke-dasharray="5 4"' if c.dashed else ""
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="{1.5 if c.dashed else 2.5}" '
            f'stroke-linejoin="round"{dash}><title>{escape(c.label)}</title></polyline>'
        )
        # References share one grey legend entry: their colour already says whose they are.
        item = (c.label, "#868e96" if c.dashed else color, c.dashed)
        if item not in legend:
            legend.append(item)
        if c.dashed:
            continue
        for x, y, low, high in pts:
            px = fr.px(math.log2(x))
            if low is not None and high is not None and high > low:
                y0, y1 = fr.py(low), fr.py(high)
                parts.append(
                    f'<path d="M{_coord(px)} {_coord(y0)}V{_coord(y1)}M{_coord(px - 5)} {_coord(y0)}h10M{_coord(px - 5)} {_coord(y1)}h10" '
                    f'stroke="{color}" stroke-width="1.5" fill="none"/>'
                )
            text = f"{y:.0f}%" if percent else value_label(y)
            parts.append(
                f'<circle cx="{_coord(px)}" cy="{_coord(fr.py(y))}" r="4" fill="{color}"><title>{escape(c.label)} '
                f"{escape(x_tip.format(x=(x_names or {}).get(x, x)))}: {text}</title></circle>"
            )
    legend.sort(key=lambda item: item[2])  # the lines first, the reference after them
    _legend(parts, legend, fr.x1, 38)  # under the title: a chart this narrow has no room beside it
    parts.append("</svg>")
    return "".join(parts)


#: A colour per category of a profiled step (``model.why``): idle light, the others apart at a glance.
CATEGORY_COLORS = {
    "conv": "#1971c2",
    "matmul": "#5f3dc4",
    "norm": "#e8590c",
    "elementwise": "#2f9e44",
    "optimizer": "#c2255c",
    "data": "#0c8599",
    "communication": "#f08c00",
    "other": "#495057",
    "idle": "#ced4da",
}
#: Segments with a dark text on them (the light ones); the rest get white.
_LIGHT = {"#ced4da"}


@dataclass
class Stack:
    """One horizontal bar made of segments, (key, value) in order: a framework's step by category."""

    label: str
    segments: list[tuple[str, float]]
    unit: str = ""  # after the total at the bar's end ("ms")


def _flowing_legend(parts: list[str], items: list[tuple[str, str]], x0: float, x1: float, y: float) -> float:
    """Legend swatches (label, colour) from left to right, wrapped at ``x1``; returns the y below the last line."""
    x = x0
    for label, color in items:
        width = 18 + 7 * len(label) + 14
        if x + width > x1 and x > x0:
            x, y = x0, y + 18
        parts.append(f'<rect x="{_coord(x)}" y="{_coord(y - 9)}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{_coord(x + 17)}" y="{_coord(y + 1)}" fill="#343a40">{escape(label)}</text>')
        x += width
    return y + 18


def stacked_bars(
    title: str,
    stacks: list[Stack],
    colors: dict[str, str],
    labels: dict[str, str],
    x_label: str,
    width: int = 960,
    desc: str = "",
    value_text: Callable[[float], str] = value_label,
) -> str:
    """Horizontal bars on one scale, one per ``stacks`` entry, each split into coloured segments in their
    order, with a legend of every key that has a segment; a segment wide enough says its value, each bar
    its total. Values that are not finite and positive draw nothing."""
    stacks = [
        Stack(
            s.label,
            [(k, v) for k, v in s.segments if isinstance(v, (int, float)) and math.isfinite(v) and v > 0],
            s.unit,
        )
        for s in stacks
    ]
    keys = list(dict.fromkeys(k for s in stacks for k, _ in s.segments))
    parts: list[str] = []
    legend_end = _flowing_legend(
        parts, [(labels.get(k, k), colors.get(k, "#868e96")) for k in keys], 110, width - 16, 44
    )
    bar_h, gap = 30, 16
    top = legend_end + 8
    height = int(top + len(stacks) * (bar_h + gap) + 40)
    fr = _Frame(width, height, left=110, right=70, top=int(top), bottom=40)
    totals = [sum(v for _, v in s.segments) for s in stacks]
    out = _open(width, height, title, desc)
    if not stacks or not any(totals):
        out.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#868e96">no data recorded</text></svg>'
        )
        return "".join(out)
    ticks = nice_ticks(0, max(totals) * 1.02)
    fr.set_ranges(0, ticks[-1], 0, 1)
    for t in ticks:
        x = fr.px(t)
        out.append(
            f'<line x1="{_coord(x)}" x2="{_coord(x)}" y1="{_coord(top - 4)}" y2="{fr.y1}" stroke="#e9ecef"/>'
        )
        out.append(
            f'<text x="{_coord(x)}" y="{fr.y1 + 16}" text-anchor="middle" fill="#495057">{tick_label(t)}</text>'
        )
    out.append(f'<line x1="{fr.x0}" x2="{fr.x0}" y1="{_coord(top - 4)}" y2="{fr.y1}" stroke="#868e96"/>')
    out.append(
        f'<text x="{_coord((fr.x0 + fr.x1) / 2)}" y="{height - 6}" text-anchor="middle" fill="#495057">{escape(x_label)}</text>'
    )
    out += parts
    for i, (stack, total) in enumerate(zip(stacks, totals, strict=True)):
        y = top + i * (bar_h + gap)
        out.append(
            f'<text x="{fr.x0 - 8}" y="{_coord(y + bar_h / 2 + 4)}" text-anchor="end" fill="#212529" font-weight="600">'
            f"{escape(stack.label)}</text>"
        )
        x = float(fr.x0)
        for key, value in stack.segments:
            w = fr.px(value) - fr.x0
            color = colors.get(key, "#868e96")
            share = value / total if total else 0.0
            out.append(
                f'<rect x="{_coord(x)}" y="{_coord(y)}" width="{_coord(w)}" height="{bar_h}" fill="{color}" stroke="#fff" '
                f'stroke-width="0.5"><title>{escape(stack.label)} · {escape(labels.get(key, key))}: '
                f"{value_text(value)} {escape(stack.unit)} ({share:.0%})</title></rect>"
            )
            text = value_text(value)
            if w >= 7 * len(text) + 8:
                ink = "#212529" if color in _LIGHT else "#fff"
                out.append(
                    f'<text x="{_coord(x + w / 2)}" y="{_coord(y + bar_h / 2 + 4)}" text-anchor="middle" fill="{ink}" '
                    f'font-size="11">{text}</text>'
                )
            x += w
        out.append(
            f'<text x="{_coord(x + 6)}" y="{_coord(y + bar_h / 2 + 4)}" fill="#212529">{value_text(total)} {escape(stack.unit)}</text>'
        )
    out.append("</svg>")
    return "".join(out)

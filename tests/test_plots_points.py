"""A line chart's points, drawn faster for the 1M-event session's html (issue 35), are the points they were:
the min/max downsampling as before (the old one verbatim here), and each point's coordinates the very floats
``_Frame.px``/``py`` give (a rounding change hides under one decimal, so they are compared unrounded)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest

from benchtui.core.reporting import plots


def _old_downsample_minmax(xs: Sequence[float], ys: Sequence[float], max_points: int):
    """``downsample_minmax`` before issue 35's render work, verbatim."""
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
        seg = ys[lo:hi]
        i_min = lo + seg.index(min(seg))
        i_max = lo + seg.index(max(seg))
        for i in sorted({i_min, i_max}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def _lines(seed: int) -> list[tuple[list[float], list[float]]]:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 799, 800, 801, 1601, 5000])
    xs = [i * rng.uniform(0.001, 3.0) for i in range(n)]
    return [
        (xs, [rng.uniform(-5, 5) for _ in range(n)]),
        (xs, [1.5] * n),  # flat: each bucket's min and max are one point
        (xs, [float(i % 7) for i in range(n)]),  # ties: the first of each kept
        (xs, sorted(rng.uniform(0, 1e-3) for _ in range(n))),  # rising: the max after the min
        (xs, sorted((rng.uniform(0, 1e6) for _ in range(n)), reverse=True)),  # falling: the max first
    ]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("max_points", [1, 2, 3, 10, 800])
def test_downsampling_keeps_the_points_it_kept(seed: int, max_points: int) -> None:
    for xs, ys in _lines(seed):
        assert plots.downsample_minmax(xs, ys, max_points) == _old_downsample_minmax(xs, ys, max_points)


@pytest.mark.parametrize("seed", range(12))
def test_a_lines_points_are_the_frames_floats(seed: int, monkeypatch) -> None:
    frames: list[plots._Frame] = []
    set_ranges = plots._Frame.set_ranges

    def recorded(self, *ranges):
        frames.append(self)
        return set_ranges(self, *ranges)

    monkeypatch.setattr(plots._Frame, "set_ranges", recorded)
    monkeypatch.setattr(plots, "_coord", repr)  # every digit of each coordinate
    for xs, ys in _lines(seed):
        for y_max in (None, 2.0):  # 2.0: points off the scale, drawn at its top
            frames.clear()
            svg = plots.line_chart("t", [plots.Series("a", xs, ys)], "x", "y", y_min=None, y_max=y_max)
            fr = frames[-1]
            dx, dy = plots.downsample_minmax(*plots._drawn(xs, ys), 800)
            expected = " ".join(
                f"{fr.px(x)!r},{fr.py(min(max(y, fr.ylo), fr.yhi))!r}" for x, y in zip(dx, dy, strict=True)
            )
            drawn = re.search(r'<polyline points="([^"]*)"', svg)
            assert drawn is not None and drawn.group(1) == expected

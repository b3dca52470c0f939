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
    monkeypatch.setattr(  # every digit of each coordinate
        plots, "_coords", lambda pxs, pys: " ".join(f"{x!r},{y!r}" for x, y in zip(pxs, pys, strict=True))
    )
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


@pytest.mark.parametrize("seed", range(6))
def test_the_coordinates_are_written_as_each_was(seed: int) -> None:
    """``_coords`` formats a line's pairs in one pass: each as ``_coord`` writes it (one decimal, none
    where it is a zero), at the ends, around ties of rounding and at zero's two signs."""
    rng = random.Random(seed)
    values = [0.0, -0.0, 0.04, -0.04, 0.05, 0.95, 9.95, 10.0, 99.96, -99.96, 1e6, 123456.7, 5.0, -5.0]
    values += [rng.uniform(-1000, 1000) for _ in range(500)] + [
        float(rng.randint(-50, 50)) for _ in range(200)
    ]
    rng.shuffle(values)
    for n in (1, 2, 3, len(values) // 2):
        pxs, pys = values[:n], values[-n:]
        expected = " ".join(f"{plots._coord(x)},{plots._coord(y)}" for x, y in zip(pxs, pys, strict=True))
        assert plots._coords(pxs, pys) == expected


def _old_extent(all_y, y_min, y_max, clip_quantile):
    """line_chart's top and bottom before ``_y_extent``: from the values sorted, verbatim."""
    all_y = sorted(all_y)
    top = y_max
    if top is None and clip_quantile is not None:
        q = all_y[min(len(all_y) - 1, int(clip_quantile * (len(all_y) - 1)))]
        top = q * 1.3 if all_y[-1] > q * 1.3 else None
    top = top if top is not None else all_y[-1]
    bottom = y_min if y_min is not None else all_y[0]
    return top, bottom


@pytest.mark.parametrize("seed", range(8))
def test_a_charts_extent_is_the_sorted_values_ends(seed: int) -> None:
    """Unsorted where floats' ends are the same numbers; an int beside an equal float, and 0.0 beside -0.0,
    are told apart (``sorted([1, 1.0])[-1]`` is the float, ``max`` the int; ``sorted([-0.0, 0.0])[-1]`` is
    0.0, ``max`` -0.0): sorting decides which is at an end."""
    rng = random.Random(seed)
    lines = [
        [rng.uniform(0, 5) for _ in range(rng.randint(1, 400))],
        [rng.choice([1, 1.0, 2, 2.0, 0.5]) for _ in range(rng.randint(1, 50))],
        [float(rng.randint(0, 3)) for _ in range(rng.randint(1, 50))] + [3],
        [3, 3.0, 0, 0.0],
        [0.0, -0.0, 1e-3],
        [-0.0, 0.0],
        [0.0, -0.0],
        [-1.0, -0.0, 0.0],
        [rng.uniform(0, 1) for _ in range(20000)],  # many: only those above a threshold are sorted
        [rng.choice([0.25, 0.5, 3.0]) for _ in range(9000)],  # many ties at the quantile
        sorted(rng.uniform(-1, 1) for _ in range(10000)),  # rising: the top all at the end
        [rng.uniform(0, 1) for _ in range(9000)] + [5.0] * 200,  # the quantile among the off-scale peaks
        [rng.choice([-0.0, 0.0, 1.0]) for _ in range(9000)],
        [rng.expovariate(1.0) for _ in range(12000)] + [2],  # an int among many: all sorted
        [1.0 if i % 64 == 0 else rng.uniform(0, 0.5) for i in range(9000)],  # a sample all from the top:
    ]  # the threshold above the quantile, so every value is sorted
    for ys in lines:
        for y_min in (None, 0.0):
            for y_max in (None, 2.0):
                for q in (None, 0.5, 0.99):
                    new = plots._y_extent(list(ys), y_min, y_max, q)
                    old = _old_extent(ys, y_min, y_max, q)
                    assert [repr(v) for v in new] == [repr(v) for v in old], (ys, y_min, y_max, q)

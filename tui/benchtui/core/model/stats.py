"""Statistics for timings in plain Python: descriptions, robust outliers, seeded bootstrap intervals."""

from __future__ import annotations

import bisect
import math
import operator
import random
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Any

#: Resamples per bootstrap interval. 2000 keeps the 2.5/97.5 percentiles stable to
#: about a percent of the interval width, and costs milliseconds for run-level data.
RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
#: Modified z-score above which a value is an outlier (Iglewicz and Hoaglin).
OUTLIER_Z = 3.5
#: IQR / median above which a spread is "large" (torch.utils.benchmark's rule).
WIDE_SPREAD = 0.10
#: An outlier must also be this far from the median, relative to it, to be flagged.
OUTLIER_MIN_RELATIVE = 0.05
#: Groups larger than this are resampled through the normal approximation of their
#: mean (see ``_resampled_mean``); smaller ones are resampled value by value.
EXACT_GROUP_MAX = 100


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


def median(values: Sequence[float]) -> float:
    return quantile(sorted(values), 0.5)


def mad(values: Sequence[float], center: float | None = None) -> float:
    """Median absolute deviation from ``center`` (default: the median), unscaled."""
    if center is None:
        center = median(values)
    return median([abs(v - center) for v in values])


def outlier_mask(
    values: Sequence[float], threshold: float = OUTLIER_Z, min_relative: float = 0.0
) -> list[bool]:
    """Which values are outliers by the modified z-score 0.6745·|x − median| / MAD > threshold.

    When more than half the values are equal the MAD is 0; the mean absolute deviation
    (scaled to match the MAD for normal data) stands in, so a lone odd value is still caught.
    ``min_relative`` also asks for a distance of at least that share of the median: on
    very steady timings the MAD is tiny and a 1% wobble would otherwise count.
    """
    if len(values) < 3:
        return [False] * len(values)
    center = median(values)
    deviations = [abs(v - center) for v in values]
    limit = _outlier_limit(center, sorted(deviations), threshold, min_relative)
    if limit is None:
        return [False] * len(values)
    return [d > limit for d in deviations]


class _Deviations(Sequence[float]):
    """|v - center| over sorted values in ascending order, never made nor sorted as a list: left of the
    center they fall, right of it they rise, two sorted runs whose k-th smallest is found by bisection
    (each a subtraction as the list would have made it). A median or a count above a limit is a few
    dozen subtractions instead of a list of every deviation and its sort."""

    def __init__(self, sorted_values: Sequence[float], center: float) -> None:
        self._values = sorted_values
        self._center = center
        self._split = bisect.bisect_left(sorted_values, center)  # values equal to the center: right of it

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[float]:
        return map(abs, map(operator.sub, self._values, repeat(self._center)))  # |v - center|, in C

    def _left(self, j: int) -> float:
        """The j-th smallest deviation left of the center."""
        return abs(self._values[self._split - 1 - j] - self._center)

    def _right(self, j: int) -> float:
        return abs(self._values[self._split + j] - self._center)

    def __getitem__(self, k: int) -> float:  # type: ignore[override]
        n = len(self._values)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        # Take i from the left run and k + 1 - i from the right: the least i whose next left value is
        # not below the last right one taken.
        lo, hi = max(0, k + 1 - (n - self._split)), min(k + 1, self._split)
        while lo < hi:
            i = (lo + hi) // 2
            if self._left(i) < self._right(k - i):
                lo = i + 1
            else:
                hi = i
        taken = k + 1 - lo
        if lo == 0:
            return self._right(taken - 1)
        if taken == 0:
            return self._left(lo - 1)
        return max(self._left(lo - 1), self._right(taken - 1))


def _outlier_limit(
    center: float, sorted_deviations: Sequence[float], threshold: float, min_relative: float
) -> float | None:
    """The distance from the median beyond which a value is an outlier; None: no outliers possible."""
    if len(sorted_deviations) < 3:
        return None
    scale = quantile(sorted_deviations, 0.5)
    if scale == 0:
        # mean |x - median| · sqrt(pi/2) estimates sigma for normal data, and the MAD
        # estimates sigma / 1.4826: rescale so the same threshold applies.
        scale = mean(sorted_deviations) * math.sqrt(math.pi / 2) / 1.4826
    if scale == 0:
        return None
    return max(threshold * scale / 0.6745, abs(center) * min_relative)


def describe(
    values: Sequence[float | None],
    ci: bool = False,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> dict[str, Any] | None:
    """n, mean, median, quartiles, IQR, min, max, p5/p95, MAD, outliers; None if empty.

    ``outliers`` counts values more than 3.5 robust z-scores (MAD rule) and 5% away
    from the median.
    ``iqr_ratio`` is IQR / median and ``wide`` says whether it is above 10%. With
    ``ci`` (and at least two values), ``ci_low``/``ci_high`` bound the mean (seeded
    bootstrap, 95%).
    """
    # Plain sort when there is nothing to drop: describe runs over every batch of a cell.
    if not isinstance(values, (list, tuple, array)):
        values = list(values)  # a generator would be used up by the check below
    vals: list[float] = (
        sorted(values) if None not in values else sorted(v for v in values if v is not None)  # type: ignore[arg-type]
    )
    if not vals:
        return None
    q1, med, q3 = quantile(vals, 0.25), quantile(vals, 0.5), quantile(vals, 0.75)
    iqr = q3 - q1
    ratio = iqr / med if med else None
    deviations = _Deviations(vals, med)
    limit = _outlier_limit(med, deviations, OUTLIER_Z, OUTLIER_MIN_RELATIVE)
    outliers = 0 if limit is None else len(vals) - bisect.bisect_right(deviations, limit)
    out: dict[str, Any] = {
        "n": len(vals),
        "mean": mean(vals),
        "median": med,
        "q1": q1,
        "q3": q3,
        "iqr": iqr,
        "min": float(vals[0]),
        "max": float(vals[-1]),
        "p5": quantile(vals, 0.05),
        "p95": quantile(vals, 0.95),
        "mad": quantile(deviations, 0.5),
        "outliers": outliers,
        "iqr_ratio": ratio,
        "wide": ratio is not None and ratio > WIDE_SPREAD,
    }
    if ci:
        interval = bootstrap_ci(vals, seed=seed, resamples=resamples)
        out["ci_low"], out["ci_high"] = interval if interval else (None, None)
    return out


# -- bootstrap ------------------------------------------------------------------------
def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = mean,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat`` over ``values``; None for fewer than 2 values."""
    vals = [float(v) for v in values]
    if len(vals) < 2:
        return None
    if stat is mean:
        return _mean_ci_cached(tuple(vals), level, resamples, seed)
    rng = random.Random(seed)
    n = len(vals)
    reps = sorted(stat(rng.choices(vals, k=n)) for _ in range(resamples))
    return _percentiles(reps, level)


@lru_cache(maxsize=4096)
def _mean_ci_cached(vals: tuple[float, ...], level: float, resamples: int, seed: int) -> tuple[float, float]:
    # Cached: the same run-level figures are described on every redraw of a live table.
    rng = random.Random(seed)
    n = len(vals)
    flat = rng.choices(vals, k=n * resamples)
    reps = sorted(sum(flat[i : i + n]) / n for i in range(0, n * resamples, n))
    return _percentiles(reps, level)


def _percentiles(sorted_reps: Sequence[float], level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    return quantile(sorted_reps, tail), quantile(sorted_reps, 1 - tail)


@dataclass(frozen=True)
class _Group:
    values: tuple[float, ...]
    mean: float
    se: float  # standard error of the mean


def _groups(groups: Sequence[Sequence[float]]) -> list[_Group]:
    out = []
    for g in groups:
        vals = tuple(map(float, g))  # map, not a generator: a run's batches are tens of thousands
        if not vals:
            continue
        m = math.fsum(vals) / len(vals)
        if len(vals) > 1:
            # (v - m) ** 2 for each v, in C: the same float operations, several times faster.
            var = math.fsum(map(pow, map(operator.sub, vals, repeat(m)), repeat(2))) / (len(vals) - 1)
            se = math.sqrt(var / len(vals))
        else:
            se = 0.0
        out.append(_Group(vals, m, se))
    return out


@dataclass(frozen=True)
class _Draws:
    """What a hierarchical bootstrap draws from its generator, apart from the values it is applied to.

    Which group fills each slot and which values each resample picks depend on the groups' sizes only
    (``random.choices`` picks ``population[floor(random() * n)]``, whatever the population holds), and
    so do the normal deviates of a large group: the same draws serve every cell of the same shape.
    Kept for reuse, a resample of a few values recurs (4 epochs have 256 orders): each distinct one is
    listed once, and summed once per use.
    """

    #: Per slot of every replicate, where its group's resampled total lies among every group's (in the
    #: order of the groups); with one value per group and distinct replicates: which one each replicate is.
    slots: Sequence[int]
    #: Per replicate, the values of the groups that fill its slots (the total's divisor).
    counts: Sequence[int]
    #: One value per group (a plain bootstrap over the groups): the distinct replicates, by group index
    #: (``slots`` says which each replicate is), or every replicate's group indices one after the other.
    plain: list[Sequence[int]] | None = None
    plain_flat: Sequence[int] | None = None
    #: Per group of at most ``EXACT_GROUP_MAX`` values and more than one: its distinct resamples (by index),
    #: or every resample's indices one after the other (``flat``: not listed apart when few would recur).
    resampled: tuple[list[Sequence[int]] | None, ...] = ()
    flat: tuple[Sequence[int] | None, ...] = ()
    #: Per larger group: a normal deviate per resample.
    deviates: tuple[list[float] | None, ...] = ()


def _distinct(indices: list[int], n: int) -> tuple[list[Sequence[int]], list[int]]:
    """The distinct runs of ``n`` among ``indices`` in their first order, and which one each run is. As
    bytes: only resamples of a few values are listed (``n ** n`` at most the resamples), each below n."""
    seen: dict[Sequence[int], int] = {}
    which = [seen.setdefault(bytes(indices[i : i + n]), len(seen)) for i in range(0, len(indices), n)]
    return list(seen), which


def _packed(indices: list[int], population: int) -> Sequence[int]:
    """Indices below ``population`` as bytes where they fit (a byte each, not a pointer's 8)."""
    return bytes(indices) if population <= 256 else indices


def _positions(n: int) -> list[int]:
    """0 .. n - 1, what ``choices`` picks positions from: a list (a range's items are made one by one)."""
    return list(range(n))


def _draw(sizes: tuple[int, ...], resamples: int, rng: random.Random) -> _Draws:
    """The draws of ``hierarchical_replicates`` over groups of ``sizes``: the same calls on ``rng``, in the
    same order, as drawing value by value (``choices`` picks by position, whatever the values).

    Each group's distinct resamples are listed where they recur (at most as many possible resamples as
    resamples drawn); elsewhere listing them would cost more than it saves.
    """
    k = len(sizes)
    if k > 1 and all(n == 1 for n in sizes):
        # One value per run (build time, first epoch): a plain bootstrap over runs, in one draw.
        picked = rng.choices(_positions(k), k=k * resamples)
        if k**k <= resamples:
            replicates, chosen = _distinct(picked, k)
            return _Draws(array("l", chosen), (), plain=replicates)
        return _Draws((), (), plain_flat=_packed(picked, k))
    # Outer level first: which group fills each of the k slots of every replicate.
    picks = rng.choices(_positions(k), k=k * resamples) if k > 1 else [0] * resamples
    resampled: list[list[Sequence[int]] | None] = []
    flat: list[Sequence[int] | None] = []
    deviates: list[list[float] | None] = []
    nexts = []
    offset = 0
    for i, n in enumerate(sizes):
        # Inner level in bulk: exactly as many resampled means per group as it was picked.
        count = picks.count(i)
        listed: list[Sequence[int]] | None = None
        packed: Sequence[int] | None = None
        normal: list[float] | None = None
        which: Sequence[int] = range(count)
        width = count
        if n == 1:
            which, width = [0] * count, 1
        elif n <= EXACT_GROUP_MAX:
            drawn = rng.choices(_positions(n), k=n * count)
            if n**n <= count:
                listed, which = _distinct(drawn, n)
                width = len(listed)
            else:
                packed = _packed(drawn, n)
        else:
            # A bootstrap mean of n > 100 values is close to normal around the group mean with
            # the standard error as spread (central limit theorem); drawing it directly keeps a
            # resample of thousands of batches at one draw instead of thousands.
            gauss = rng.gauss
            normal = [gauss(0.0, 1.0) for _ in range(count)]
        resampled.append(listed)
        flat.append(packed)
        deviates.append(normal)
        nexts.append(iter([offset + w for w in which]).__next__)
        offset += width
    # Arrays: kept in a cache, 8 bytes an entry rather than a list's pointer and int.
    slots = array("l", [nexts[p]() for p in picks])
    counts = array("l", map(sum, zip(*[map(sizes.__getitem__, picks)] * k, strict=True)))
    return _Draws(slots, counts, resampled=tuple(resampled), flat=tuple(flat), deviates=tuple(deviates))


@lru_cache(maxsize=64)
def _seeded_draws(sizes: tuple[int, ...], resamples: int, seed: int) -> _Draws:
    # Cached: a summary bootstraps every cell's figures from the same seed, and cells of the same shape
    # (runs × epochs) draw the same indices; each replicate's arithmetic on the values is all that is left.
    return _draw(sizes, resamples, random.Random(seed))


@lru_cache(maxsize=64)
def _pair_draws(
    sizes_a: tuple[int, ...], sizes_b: tuple[int, ...], resamples: int, seed: int
) -> tuple[_Draws, _Draws]:
    # Both sides of a ratio from one generator, the base's draws first (``ratio_ci``); cached as above.
    rng = random.Random(seed)
    return _draw(sizes_a, resamples, rng), _draw(sizes_b, resamples, rng)


def _means(values: Sequence[float], indices: Iterable[int], n: int) -> Iterator[float]:
    """The mean of each run of ``n`` values that ``indices`` pick: each summed left to right, as
    ``sum(flat[i : i + n]) / n`` of the values picked."""
    return map(
        operator.truediv, map(sum, zip(*[map(values.__getitem__, indices)] * n, strict=True)), repeat(n)
    )


def _replicates(gs: Sequence[_Group], draws: _Draws) -> list[float]:
    """The replicates ``draws`` give over the groups' values: the float operations of resampling value by
    value, in the same order (each sum over the same values, left to right), in C loops."""
    k = len(gs)
    if draws.plain_flat is not None:
        return list(_means([g.mean for g in gs], draws.plain_flat, k))
    if draws.plain is not None:
        values = [g.mean for g in gs]
        replicates = [sum(map(values.__getitem__, r)) / k for r in draws.plain]
        return list(map(replicates.__getitem__, draws.slots))
    # Each group's resampled means (its distinct ones, when listed), as totals: a group weighs as many
    # values as it has.
    totals: list[float] = []
    for g, listed, packed, normal in zip(gs, draws.resampled, draws.flat, draws.deviates, strict=True):
        n = len(g.values)
        if listed is not None:
            get = g.values.__getitem__
            totals += [sum(map(get, r)) / n * n for r in listed]
        elif packed is not None:
            totals += map(operator.mul, _means(g.values, packed, n), repeat(n))
        elif normal is not None:
            totals += [(g.mean + g.se * z) * n for z in normal]
        else:
            totals.append(g.values[0] * 1)
    sums = map(sum, zip(*[map(totals.__getitem__, draws.slots)] * k, strict=True))
    return list(map(operator.truediv, sums, draws.counts))


def hierarchical_replicates(
    groups: Sequence[Sequence[float]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    rng: random.Random | None = None,
) -> list[float]:
    """Bootstrap replicates of the pooled mean (every value's total over their count).

    Groups are runs, values within them epochs or batches. With several groups each
    replicate resamples the groups, then the values within each chosen group; with one
    group only its values are resampled. A group weighs as many values as it has, so a
    replicate is total over total, as the point estimate (``grouped_mean``) is.
    """
    gs = _groups(groups)
    if not gs:
        return []
    if rng is not None:
        # A caller's generator (a sweep resamples its points in turn from one): drawn here, once.
        return _drawn_replicates(gs, resamples, rng)
    return _replicates(gs, _seeded_draws(tuple(len(g.values) for g in gs), resamples, seed))


def _resampled_means(g: _Group, count: int, rng: random.Random) -> list[float]:
    """``count`` bootstrap means of one group's values."""
    n = len(g.values)
    if n == 1:
        return [g.values[0]] * count
    if n <= EXACT_GROUP_MAX:
        flat = rng.choices(g.values, k=n * count)
        return [sum(flat[i : i + n]) / n for i in range(0, n * count, n)]
    gauss = rng.gauss
    return [g.mean + g.se * gauss(0.0, 1.0) for _ in range(count)]


def _drawn_replicates(gs: Sequence[_Group], resamples: int, rng: random.Random) -> list[float]:
    """``hierarchical_replicates`` drawn value by value: for draws used once, listing which values each
    resample picks (``_draw``) would cost more than it saves."""
    k = len(gs)
    sizes = [len(g.values) for g in gs]
    if k > 1 and all(n == 1 for n in sizes):
        values = [g.mean for g in gs]
        flat = rng.choices(values, k=k * resamples)
        return [sum(flat[i : i + k]) / k for i in range(0, k * resamples, k)]
    picks = rng.choices(range(k), k=k * resamples) if k > 1 else [0] * resamples
    pools = [[m * sizes[i] for m in _resampled_means(g, picks.count(i), rng)] for i, g in enumerate(gs)]
    nexts = [iter(pool).__next__ for pool in pools]
    reps: list[float] = []
    for r in range(0, k * resamples, k):
        chosen = picks[r : r + k]
        # Lists, not generators: the same sums in the same order, without a generator per replicate.
        reps.append(sum([nexts[p]() for p in chosen]) / sum([sizes[p] for p in chosen]))
    return reps


def grouped_mean(groups: Sequence[Sequence[float]], numerator: float | None = None) -> float | None:
    """The point estimate matching ``hierarchical_replicates``: the pooled mean, total over count.

    With ``numerator`` (samples per value), a rate: total samples over total time, never a
    mean of rates (runs of 1.25 and 4.84 images/s of equal length train 2.0 images/s, not 3.0).
    """
    gs = _groups(groups)
    if not gs:
        return None
    pooled = math.fsum(math.fsum(g.values) for g in gs) / sum(len(g.values) for g in gs)
    if numerator is None:
        return pooled
    return numerator / pooled if pooled > 0 else None


def hierarchical_ci(
    groups: Sequence[Sequence[float]],
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    numerator: float | None = None,
) -> tuple[float, float] | None:
    """Percentile interval of the pooled mean; None when there is nothing to resample.

    With ``numerator``, of the rate ``numerator / pooled mean``: the time's interval, inverted.
    """
    gs = _groups(groups)
    if sum(len(g.values) for g in gs) < 2:
        return None
    low, high = _hier_ci_cached(tuple(g.values for g in gs), level, resamples, seed)
    if numerator is None:
        return low, high
    if low <= 0:
        return None
    return numerator / high, numerator / low


@lru_cache(maxsize=4096)
def _hier_ci_cached(
    groups: tuple[tuple[float, ...], ...], level: float, resamples: int, seed: int
) -> tuple[float, float]:
    # Cached: a live table redraws the same finished runs' figures many times.
    return _percentiles(sorted(hierarchical_replicates(groups, resamples, seed)), level)


# -- ratios ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ratio:
    """Time of ``other`` over time of ``base``, with a bootstrap interval (below 1: other is faster)."""

    value: float
    low: float | None
    high: float | None
    level: float = LEVEL
    # One run on a side: the interval only covers noise within that run, not between runs,
    # and runs of one process can differ by far more (seen: 3x on a shared CPU).
    single_run: bool = False

    @property
    def significant(self) -> bool | None:
        """Whether the interval excludes 1 (False whenever it contains 1); None without an interval."""
        if self.low is None or self.high is None:
            return None
        return not (self.low <= 1.0 <= self.high)

    @property
    def conclusive(self) -> bool:
        """Significant and measured over several runs a side: what a CI gate may fail on.

        With one run on a side the interval covers only the noise inside that run, not between
        runs, and runs of one process can differ by far more (seen: 3x on a shared CPU).
        """
        return self.significant is True and not self.single_run

    @property
    def about_same(self) -> bool:
        """Neither side is faster: the ratio rounds to 1.00× or its CI holds 1 (issue 30: "PyTorch 1.00×
        faster" said a winner the figures did not show)."""
        return f"{self.factor:.2f}" == "1.00" or self.significant is False

    def same_words(self) -> str:
        """What 'about the same' rests on: '1.04×, 95% CI 0.97–1.12, not significant', and the caveats."""
        text = f"{self.factor:.2f}×"
        interval = self.factor_interval
        if interval is not None:
            text += f", {self.level * 100:.0f}% CI {interval[0]:.2f}–{interval[1]:.2f}"
        if self.significant is False:
            text += ", not significant"
        elif self.significant is None:
            text += ", no CI: one value per side"
        if self.single_run and interval is not None:
            text += "; one run on a side: run-to-run spread unknown"
        return text

    @property
    def faster(self) -> bool:
        return self.value < 1.0

    @property
    def factor(self) -> float:
        """How many times faster (or slower) ``other`` is: always at least 1."""
        return 1 / self.value if self.faster else self.value

    @property
    def factor_interval(self) -> tuple[float, float] | None:
        if self.low is None or self.high is None:
            return None
        if self.faster:
            return 1 / self.high, 1 / self.low
        return self.low, self.high

    @property
    def percent(self) -> float:
        """Change of time in percent: +10 means ``other`` takes 10% longer."""
        return (self.value - 1.0) * 100

    def phrase(self, than: str = "") -> str:
        """'1.23× faster (95% CI 1.18–1.29)'; 'about the same (1.02×, 95% CI 0.98–1.05, not significant)'
        when the ratio rounds to 1.00× or its CI contains 1 (``about_same``).

        ``than`` names what ``other`` is compared with ("1.23× faster than tf.keras (...)").
        """
        if self.about_same:
            return "about the same" + (f" as {than}" if than else "") + f" ({self.same_words()})"
        text = f"{self.factor:.2f}× {'faster' if self.faster else 'slower'}" + (
            f" than {than}" if than else ""
        )
        interval = self.factor_interval
        if interval is not None:
            text += f" ({self.level * 100:.0f}% CI {interval[0]:.2f}–{interval[1]:.2f})"
        if self.significant is None:
            text += " (no CI: one value per side)"
        if self.single_run and interval is not None:
            text += ", one run on a side: run-to-run spread unknown"
        return text

    def inverted(self) -> Ratio:
        """The same comparison seen from the other side (base over other)."""
        low = 1 / self.high if self.high else None
        high = 1 / self.low if self.low else None
        return Ratio(1 / self.value, low, high, self.level, self.single_run)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.value,
            "ci_low": self.low,
            "ci_high": self.high,
            "level": self.level,
            "significant": self.significant,
            "conclusive": self.conclusive,
            "single_run": self.single_run,
            "faster": self.faster,
            "about_same": self.about_same,
            "factor": self.factor,
            "percent": self.percent,
            "phrase": self.phrase(),
        }


def ratio_ci(
    base: Sequence[Sequence[float]],
    other: Sequence[Sequence[float]],
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Ratio | None:
    """Ratio of pooled means other / base, both sides resampled independently (hierarchically).

    Returns None when either side has no values. The interval is None when neither side
    has anything to resample (one value each).
    """
    a, b = _groups(base), _groups(other)
    if not a or not b:
        return None
    ma, mb = grouped_mean(base), grouped_mean(other)
    if ma is None or mb is None or ma <= 0:
        return None
    value = mb / ma
    single = len(a) < 2 or len(b) < 2
    if sum(len(g.values) for g in a) + sum(len(g.values) for g in b) < 3:
        return Ratio(value, None, None, level, single)
    da, db = _pair_draws(tuple(len(g.values) for g in a), tuple(len(g.values) for g in b), resamples, seed)
    ra, rb = _replicates(a, da), _replicates(b, db)
    reps = sorted(y / x for x, y in zip(ra, rb, strict=True) if x > 0)
    if not reps:
        return Ratio(value, None, None, level, single)
    low, high = _percentiles(reps, level)
    return Ratio(value, low, high, level, single)


#: A batch is steady when it is within this fraction (plus 3 robust SDs) of the steady median.
WARMUP_TOLERANCE = 0.10


def warmup_cut(values: Sequence[float], tolerance: float = WARMUP_TOLERANCE) -> int:
    """How many leading values are warm-up, detected from the data.

    The steady state is taken from the last half (median m, MAD); a value is steady when
    it is at most m * (1 + tolerance) + 3 robust standard deviations. The cut-off is the
    first index from which a window of consecutive values (3 to 20, a tenth of the run)
    is all steady, so a single slow batch later on does not move it. A run that never
    settles is cut at half. Runs of one value have no warm-up to cut; the first of two
    or three values is always cut (it includes tracing or autotuning everywhere).
    """
    return warmup_cut_sorted(values, tolerance)[0]


def warmup_cut_sorted(
    values: Sequence[float], tolerance: float = WARMUP_TOLERANCE
) -> tuple[int, list[float]]:
    """``warmup_cut``, and the last half of the values sorted: what it sorts to find the steady state, so
    that a caller sorting every value sorts the first half and merges (``analysis.sorted_batches``)."""
    n = len(values)
    tail = sorted(values[n // 2 :])
    if n <= 1:
        return 0, tail
    if n <= 3:
        return 1, tail
    m = quantile(tail, 0.5)
    mad = quantile(_Deviations(tail, m), 0.5)
    limit = m * (1 + tolerance) + 3 * 1.4826 * mad
    window = max(3, min(20, n // 10))
    streak = 0
    for i, value in enumerate(values):
        streak = streak + 1 if value <= limit else 0
        if streak == window:
            return i + 1 - window, tail
    return n // 2, tail

"""The summary's fast statistics (issue 35) give every digit the slower ones gave: the seeded bootstrap's
draws reused across cells of the same shape, the replicates summed in C loops, the warm-up cut kept on the
run, a run's batches sorted as two halves merged. Each is compared value for value (``float.hex``) with
the code it replaced, kept here as the reference. Behaviour only: no clock is read here."""

from __future__ import annotations

import bisect
import json
import math
import operator
import random
from array import array
from collections.abc import Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model import analysis, stats
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import EXACT_GROUP_MAX, Ratio, _Group, _groups, _percentiles
from benchtui.core.store.session import load_session
from sessionfactory import make_session


# -- the code before issue 35's summary work, verbatim but for names ---------------------------------
def _old_resampled_means(g: _Group, count: int, rng: random.Random) -> list[float]:
    n = len(g.values)
    if n == 1:
        return [g.values[0]] * count
    if n <= EXACT_GROUP_MAX:
        flat = rng.choices(g.values, k=n * count)
        return [sum(flat[i : i + n]) / n for i in range(0, n * count, n)]
    gauss = rng.gauss
    return [g.mean + g.se * gauss(0.0, 1.0) for _ in range(count)]


def old_hierarchical_replicates(
    groups: Sequence[Sequence[float]], resamples: int = 2000, seed: int = 0, rng: random.Random | None = None
) -> list[float]:
    gs = _groups(groups)
    if not gs:
        return []
    rng = rng or random.Random(seed)
    k = len(gs)
    sizes = [len(g.values) for g in gs]
    if k > 1 and all(n == 1 for n in sizes):
        values = [g.mean for g in gs]
        flat = rng.choices(values, k=k * resamples)
        return [sum(flat[i : i + k]) / k for i in range(0, k * resamples, k)]
    picks = rng.choices(range(k), k=k * resamples) if k > 1 else [0] * resamples
    pools = [[m * sizes[i] for m in _old_resampled_means(g, picks.count(i), rng)] for i, g in enumerate(gs)]
    nexts = [iter(pool).__next__ for pool in pools]
    reps: list[float] = []
    for r in range(0, k * resamples, k):
        chosen = picks[r : r + k]
        reps.append(sum([nexts[p]() for p in chosen]) / sum([sizes[p] for p in chosen]))
    return reps


def old_ratio_ci(
    base: Sequence[Sequence[float]], other: Sequence[Sequence[float]], resamples: int = 2000, seed: int = 0
) -> Ratio | None:
    a, b = _groups(base), _groups(other)
    if not a or not b:
        return None
    ma, mb = stats.grouped_mean(base), stats.grouped_mean(other)
    if ma is None or mb is None or ma <= 0:
        return None
    value = mb / ma
    single = len(a) < 2 or len(b) < 2
    if sum(len(g.values) for g in a) + sum(len(g.values) for g in b) < 3:
        return Ratio(value, None, None, 0.95, single)
    rng = random.Random(seed)
    ra = old_hierarchical_replicates([g.values for g in a], resamples, rng=rng)
    rb = old_hierarchical_replicates([g.values for g in b], resamples, rng=rng)
    reps = sorted(y / x for x, y in zip(ra, rb, strict=True) if x > 0)
    if not reps:
        return Ratio(value, None, None, 0.95, single)
    low, high = _percentiles(reps, 0.95)
    return Ratio(value, low, high, 0.95, single)


def old_warmup_cut(values: Sequence[float], tolerance: float = 0.10) -> int:
    n = len(values)
    if n <= 1:
        return 0
    if n <= 3:
        return 1
    tail = sorted(values[n // 2 :])
    m = stats.quantile(tail, 0.5)
    mad = stats.quantile(sorted(map(abs, map(operator.sub, tail, repeat(m)))), 0.5)
    limit = m * (1 + tolerance) + 3 * 1.4826 * mad
    window = max(3, min(20, n // 10))
    streak = 0
    for i, value in enumerate(values):
        streak = streak + 1 if value <= limit else 0
        if streak == window:
            return i + 1 - window
    return n // 2


def old_sorted_batches(run: RunState) -> tuple[array[float], array[float]]:
    ordered = sorted(run.batch_seconds)
    every = array("d", ordered)
    cut = old_warmup_cut(run.batch_seconds)
    if cut <= analysis._FEW_CUT:
        for value in run.batch_seconds[:cut]:
            del ordered[bisect.bisect_left(ordered, value)]
        steady = array("d", ordered)
    else:
        steady = array("d", sorted(run.batch_seconds[cut:]))
    return every, steady


def bits(values: Sequence[float]) -> list[str]:
    """Each float's exact bits: 0.0 and -0.0 differ, as any digit of a summary would."""
    return [float(v).hex() for v in values]


def _groups_of(rng: random.Random, sizes: Sequence[int]) -> list[list[float]]:
    return [[rng.lognormvariate(0.0, 0.5) for _ in range(n)] for n in sizes]


SHAPES = [
    (),
    (0,),
    (1,),
    (2,),
    (4,),
    (EXACT_GROUP_MAX,),
    (EXACT_GROUP_MAX + 1,),
    (1, 1),
    (1, 1, 1),
    (4, 4, 4),
    (5, 4, 3),
    (1, 4),
    (1, 0, 7),
    (3, EXACT_GROUP_MAX, EXACT_GROUP_MAX + 1, 1),
    (600, 450),
    (1,) * 300,  # more than 256 groups of one: their indices as a list, not bytes
    (2,) * 40,
]


@pytest.mark.parametrize("sizes", SHAPES)
@pytest.mark.parametrize("resamples", [0, 1, 7, 2000])
def test_replicates_are_the_old_ones_value_for_value(sizes: tuple[int, ...], resamples: int) -> None:
    stats._seeded_draws.cache_clear()
    for seed in range(3):
        groups = _groups_of(random.Random(hash((sizes, seed))), sizes)
        old = old_hierarchical_replicates(groups, resamples, seed)
        assert bits(stats.hierarchical_replicates(groups, resamples, seed)) == bits(old)
        # Cached draws of the same shape, other values: never the first values' replicates.
        other = [[v * 1.7 + 0.3 for v in g] for g in groups]
        assert bits(stats.hierarchical_replicates(other, resamples, seed)) == bits(
            old_hierarchical_replicates(other, resamples, seed)
        )


@pytest.mark.parametrize("sizes", [(4, 4, 4), (1, 1, 1), (2, 150), (1,), (9,)])
def test_a_shared_generator_is_drawn_as_before(sizes: tuple[int, ...]) -> None:
    """A caller's generator (a sweep's bias resamples points in turn): the same replicates, and the generator
    left where the old code left it, its cached normal deviate included."""
    groups = _groups_of(random.Random(7), sizes)
    mine, theirs = random.Random(11), random.Random(11)
    for _ in range(3):
        assert bits(stats.hierarchical_replicates(groups, 300, rng=mine)) == bits(
            old_hierarchical_replicates(groups, 300, rng=theirs)
        )
        assert mine.getstate() == theirs.getstate()


def test_repeated_values_and_zeros_keep_their_bits() -> None:
    """Distinct resamples are told apart by their indices, never by their values: equal values and signed
    zeros come out as the value-by-value sums gave them."""
    for groups in ([[0.0, -0.0, 0.0]], [[-0.0], [0.0], [-0.0]], [[1.0, 1.0], [1.0, 1.0]], [[-0.0]]):
        stats._seeded_draws.cache_clear()
        assert bits(stats.hierarchical_replicates(groups, 500, 2)) == bits(
            old_hierarchical_replicates(groups, 500, 2)
        )


@pytest.mark.parametrize(
    ("a", "b"),
    [((4, 4, 4), (4, 4, 4)), ((1, 1, 1), (4, 4)), ((1,), (2,)), ((3, 120), (1, 1, 1, 1)), ((1,), (1,))],
)
def test_ratio_intervals_are_the_old_ones(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    stats._pair_draws.cache_clear()
    for seed in range(3):
        rng = random.Random(seed + 100)
        base, other = _groups_of(rng, a), _groups_of(rng, b)
        new, old = stats.ratio_ci(base, other, seed=seed), old_ratio_ci(base, other, seed=seed)
        assert new is not None and old is not None
        assert (new.value, new.low, new.high, new.single_run) == (
            old.value,
            old.low,
            old.high,
            old.single_run,
        )


def test_intervals_are_the_old_ones() -> None:
    stats._hier_ci_cached.cache_clear()
    rng = random.Random(5)
    for sizes in SHAPES[3:]:
        groups = _groups_of(rng, sizes)
        reps = sorted(old_hierarchical_replicates(groups))
        assert stats.hierarchical_ci(groups) == _percentiles(reps, 0.95)


def old_describe(values: Sequence[float]) -> dict[str, Any] | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    q1, med, q3 = stats.quantile(vals, 0.25), stats.quantile(vals, 0.5), stats.quantile(vals, 0.75)
    iqr = q3 - q1
    ratio = iqr / med if med else None
    deviations = sorted(map(abs, map(operator.sub, vals, repeat(med))))
    limit = stats._outlier_limit(med, deviations, stats.OUTLIER_Z, stats.OUTLIER_MIN_RELATIVE)
    outliers = 0 if limit is None else len(vals) - bisect.bisect_right(deviations, limit)
    return {
        "n": len(vals),
        "mean": stats.mean(vals),
        "median": med,
        "q1": q1,
        "q3": q3,
        "iqr": iqr,
        "min": float(vals[0]),
        "max": float(vals[-1]),
        "p5": stats.quantile(vals, 0.05),
        "p95": stats.quantile(vals, 0.95),
        "mad": stats.quantile(deviations, 0.5),
        "outliers": outliers,
        "iqr_ratio": ratio,
        "wide": ratio is not None and ratio > stats.WIDE_SPREAD,
    }


def _samples(rng: random.Random, n: int) -> list[float]:
    kind = rng.randrange(5)
    if kind == 0:
        return [rng.choice([1.0, 2.0, 2.0, 3.0]) for _ in range(n)]  # ties, and ties with the median
    if kind == 1:
        return [float(rng.randrange(-3, 4)) for _ in range(n)]  # zeros and negatives
    if kind == 2:
        return [5.0] * n  # every deviation 0: the mean absolute deviation stands in
    if kind == 3:
        return [rng.lognormvariate(0.0, 1.0) for _ in range(n)]
    return [1.0 + rng.random() * 1e-12 for _ in range(n)] + [rng.uniform(2.0, 9.0) for _ in range(n // 20)]


def test_deviations_read_in_place_are_the_sorted_list() -> None:
    """Every position, every count below a limit, and the whole of them: as sorting every |v - center|."""
    rng = random.Random(12)
    for n in [*range(1, 12), 50, 333]:
        for _ in range(6):
            values = sorted(_samples(rng, n))
            center = rng.choice([values[len(values) // 2], *values, rng.uniform(-4.0, 10.0), values[0] - 1.0])
            listed = sorted(abs(v - center) for v in values)
            view = stats._Deviations(values, center)
            assert len(view) == len(listed)
            assert bits([view[k] for k in range(len(view))]) == bits(listed)
            assert bits([view[-k] for k in range(1, len(view) + 1)]) == bits(listed[::-1])
            assert sorted(bits(view)) == sorted(bits(listed))
            for limit in [*listed, -1.0, 0.0, listed[-1] + 1.0, rng.uniform(0.0, listed[-1] + 1.0)]:
                assert bisect.bisect_right(view, limit) == bisect.bisect_right(listed, limit)
            for q in (0.0, 0.25, 0.5, 0.9, 1.0):
                assert stats.quantile(view, q) == stats.quantile(listed, q)
            with pytest.raises(IndexError):
                view[len(view)]


def test_describe_is_the_old_one() -> None:
    rng = random.Random(13)
    for n in [*range(0, 9), 21, 100, 2500]:
        for _ in range(6):
            values = _samples(rng, n)
            new, old = stats.describe(values), old_describe(values)
            assert json.dumps(new) == json.dumps(old)


def _batch_times(rng: random.Random, n: int) -> list[float]:
    warm = [rng.uniform(1.0, 3.0) for _ in range(rng.choice([0, 1, 3, 70, n // 3]))]
    steady = [rng.choice([0.1, 0.11, 0.5]) + rng.random() * rng.choice([0.0, 1e-3, 0.3]) for _ in range(n)]
    spikes = [rng.uniform(1.0, 3.0) for _ in range(rng.choice([0, 2]))]
    return warm + steady + spikes


def test_the_warmup_cut_and_its_sorted_half_are_the_old_ones() -> None:
    rng = random.Random(3)
    for n in [*range(8), 9, 10, 31, 200, 1000, 5000]:
        for _ in range(5):
            values = _batch_times(rng, n)[:n] if n < 8 else _batch_times(rng, n)
            cut, tail = stats.warmup_cut_sorted(array("d", values))
            assert (cut, bits(tail)) == (old_warmup_cut(values), bits(sorted(values[len(values) // 2 :])))
            assert stats.warmup_cut(values) == cut


def _run(seconds: list[float]) -> RunState:
    run = object.__new__(RunState)  # only its batch times are read here
    run.batch_seconds = array("d", seconds)
    return run


def test_a_run_s_sorted_batches_and_cut_are_the_old_ones_and_follow_new_batches() -> None:
    rng = random.Random(4)
    for n in (0, 1, 2, 5, 40, 3000):
        run = _run(_batch_times(rng, n) if n else [])
        for _ in range(3):
            every, steady = analysis.sorted_batches(run)
            old_every, old_steady = old_sorted_batches(run)
            assert (bits(every), bits(steady)) == (bits(old_every), bits(old_steady))
            assert analysis.run_warmup_cut(run) == old_warmup_cut(run.batch_seconds)
            assert analysis.warmup_of(run)[0] == old_warmup_cut(run.batch_seconds)
            assert (
                analysis.steady_batches(run)
                == run.batch_seconds[old_warmup_cut(run.batch_seconds) :].tolist()
            )
            # A live run gains batches: the cut and the sorted copies are made anew.
            run.batch_seconds.extend(_batch_times(rng, 30))


def test_a_kept_cut_follows_a_live_run_s_new_batches() -> None:
    run = _run([3.0])
    assert (analysis.run_warmup_cut(run), analysis.steady_batches(run)) == (0, [3.0])
    run.batch_seconds.append(0.5)  # the first of two is warm-up
    assert (analysis.run_warmup_cut(run), analysis.steady_batches(run)) == (1, [0.5])
    assert analysis.warmup_of(run) == (1, 3.0)


def test_a_cut_asked_before_the_sorted_batches_is_the_same_cut() -> None:
    run = _run(_batch_times(random.Random(9), 500))
    assert analysis.run_warmup_cut(run) == old_warmup_cut(run.batch_seconds)
    every, steady = analysis.sorted_batches(run)
    assert (bits(every), bits(steady)) == tuple(map(bits, old_sorted_batches(run)))


def _summary(path: Path) -> str:
    for cached in (stats._hier_ci_cached, stats._seeded_draws, stats._pair_draws, analysis._cell_ratio):
        cached.cache_clear()
    return json.dumps(load_session(path).model.summary(), sort_keys=True, default=str)


def test_a_study_s_summary_is_the_old_code_s_byte_for_byte(tmp_path: Path, monkeypatch: Any) -> None:
    """A study-shaped session (3 runs of 5 epochs a cell, a one-epoch cell's batch basis) summarised by this
    code and by the old functions in its place: the same bytes."""
    path = make_session(
        tmp_path, models=("resnet50", "vgg16"), runs=3, epochs=5, steps=150, seed=3, write_summary=False
    )
    single = make_session(
        tmp_path, models=("resnet50",), runs=2, epochs=1, steps=300, seed=4, folder="one", write_summary=False
    )
    new = [_summary(path), _summary(single)]
    monkeypatch.setattr(stats, "hierarchical_replicates", old_hierarchical_replicates)
    monkeypatch.setattr(analysis, "ratio_ci", old_ratio_ci)
    monkeypatch.setattr(analysis, "sorted_batches", old_sorted_batches)
    monkeypatch.setattr(analysis, "run_warmup_cut", lambda run: old_warmup_cut(run.batch_seconds))
    assert [_summary(path), _summary(single)] == new
    assert math.isfinite(json.loads(new[0])["rows"][0]["ci"]["images_per_s"][0])

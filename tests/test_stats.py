"""Statistics against hand-computed values, and seeded bootstrap reproducibility."""

from __future__ import annotations

import math
import random

import pytest

from benchtui.core.model.stats import (
    Ratio,
    bootstrap_ci,
    describe,
    grouped_mean,
    hierarchical_ci,
    hierarchical_replicates,
    mad,
    mean,
    median,
    outlier_mask,
    quantile,
    ratio_ci,
)


def test_quantile_interpolates_like_numpy() -> None:
    vals = [1.0, 2.0, 3.0, 4.0]
    assert quantile(vals, 0.0) == 1.0
    assert quantile(vals, 1.0) == 4.0
    assert quantile(vals, 0.5) == 2.5
    assert quantile(vals, 0.25) == pytest.approx(1.75)  # pos 0.75 between 1 and 2
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_mean_median_mad() -> None:
    assert mean([1, 2, 3, 10]) == 4.0
    assert median([3, 1, 2]) == 2.0
    assert median([4, 1, 2, 3]) == 2.5
    # deviations from 3: 2 1 0 1 2 -> median 1
    assert mad([1, 2, 3, 4, 5]) == 1.0


def test_describe_hand_computed() -> None:
    d = describe([5, 1, 4, 2, 3])
    assert d is not None
    assert (d["n"], d["mean"], d["median"], d["min"], d["max"]) == (5, 3.0, 3.0, 1.0, 5.0)
    assert (d["q1"], d["q3"], d["iqr"]) == (2.0, 4.0, 2.0)
    assert d["p5"] == pytest.approx(1.2)
    assert d["p95"] == pytest.approx(4.8)
    assert d["mad"] == 1.0
    assert d["outliers"] == 0
    assert d["iqr_ratio"] == pytest.approx(2 / 3)
    assert d["wide"] is True
    assert "ci_low" not in d


def test_describe_skips_none_and_empty() -> None:
    assert describe([]) is None
    assert describe([None, None]) is None
    d = describe([None, 2.0, 2.0, 2.0])
    assert d is not None and d["n"] == 3 and d["iqr"] == 0.0 and d["wide"] is False


def test_describe_tight_spread_is_not_wide() -> None:
    d = describe([1.0, 1.01, 1.02, 0.99, 0.98])
    assert d is not None and d["wide"] is False and d["iqr_ratio"] == pytest.approx(0.02)


def test_describe_ci_is_seeded_and_brackets_the_mean() -> None:
    values = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95]
    a = describe(values, ci=True)
    b = describe(values, ci=True)
    assert a is not None and b is not None
    assert (a["ci_low"], a["ci_high"]) == (b["ci_low"], b["ci_high"])
    assert a["ci_low"] < a["mean"] < a["ci_high"]
    assert min(values) <= a["ci_low"] and a["ci_high"] <= max(values)
    c = describe(values, ci=True, seed=7)
    assert c is not None and (c["ci_low"], c["ci_high"]) != (a["ci_low"], a["ci_high"])
    single = describe([3.0], ci=True)
    assert single is not None and single["ci_low"] is None and single["ci_high"] is None


def test_outliers_by_mad() -> None:
    values = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 30.0]
    assert outlier_mask(values) == [False] * 6 + [True]
    d = describe(values)
    assert d is not None and d["outliers"] == 1


def test_outliers_when_mad_is_zero() -> None:
    # More than half the values are equal: the MAD is 0 and the mean deviation stands in.
    assert outlier_mask([5.0, 5.0, 5.0, 5.0, 9.0]) == [False] * 4 + [True]
    assert outlier_mask([5.0, 5.0, 5.0]) == [False] * 3
    assert outlier_mask([1.0, 100.0]) == [False, False]  # too few to say


def test_outlier_relative_floor() -> None:
    # Very steady values: 1% off is many MADs away but not worth flagging with a 5% floor.
    values = [1.0, 1.0001, 0.9999, 1.0, 1.0002, 0.9998, 1.01]
    assert outlier_mask(values)[-1] is True
    assert outlier_mask(values, min_relative=0.05)[-1] is False


def test_bootstrap_ci_constant_and_small() -> None:
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    assert bootstrap_ci([1.0]) is None
    lo, hi = bootstrap_ci([1.0, 2.0])  # type: ignore[misc]
    assert 1.0 <= lo <= hi <= 2.0
    # A non-mean statistic goes through the uncached path and is seeded too.
    assert bootstrap_ci([1, 2, 3, 4, 9], stat=median) == bootstrap_ci([1, 2, 3, 4, 9], stat=median)


def test_hierarchical_two_constant_groups() -> None:
    # Groups are constant, so only the outer level varies: replicate means are 1, 2 or 3
    # with probabilities 1/4, 1/2, 1/4; the 2.5% and 97.5% percentiles are 1 and 3.
    groups = [[1.0, 1.0], [3.0, 3.0]]
    reps = hierarchical_replicates(groups, resamples=4000, seed=3)
    assert set(reps) <= {1.0, 2.0, 3.0}
    assert reps.count(2.0) / len(reps) == pytest.approx(0.5, abs=0.03)
    assert hierarchical_ci(groups) == (1.0, 3.0)
    assert grouped_mean(groups) == 2.0


def test_hierarchical_single_group_resamples_values() -> None:
    reps = hierarchical_replicates([[1.0, 2.0]], resamples=500, seed=1)
    assert set(reps) <= {1.0, 1.5, 2.0} and len(set(reps)) == 3
    assert hierarchical_ci([[4.0]]) is None  # nothing to resample


def test_hierarchical_large_group_uses_standard_error() -> None:
    rng = random.Random(42)
    values = [1.0 + rng.gauss(0, 0.1) for _ in range(1000)]
    lo, hi = hierarchical_ci([values])  # type: ignore[misc]
    m = mean(values)
    se = math.sqrt(sum((v - m) ** 2 for v in values) / 999 / 1000)
    assert lo == pytest.approx(m - 1.96 * se, abs=0.3 * se)
    assert hi == pytest.approx(m + 1.96 * se, abs=0.3 * se)


def test_hierarchical_numerator_gives_total_over_total() -> None:
    # Two runs of two 8-image epochs: 32 images in 12 s are 2.67 images/s, not the mean of the
    # runs' rates (8/2 + 8/4) / 2 = 3.0 that an average of averages would say.
    groups = [[2.0, 2.0], [4.0, 4.0]]
    assert grouped_mean(groups, numerator=8.0) == pytest.approx(32 / 12)
    # The rate's interval is the time's, inverted: times 2..4 s are 4..2 images/s.
    assert hierarchical_ci(groups) == (2.0, 4.0)
    assert hierarchical_ci(groups, numerator=8.0) == (2.0, 4.0)


def test_pooled_mean_weighs_each_value_once() -> None:
    # A run with three values and a run with one: 4 values, total 10.
    assert grouped_mean([[1.0, 2.0, 3.0], [4.0]]) == 2.5
    reps = hierarchical_replicates([[1.0, 1.0, 1.0], [5.0]], resamples=2000, seed=1)
    # Replicates: both picks of the big run (1.0), both of the small one (5.0), or one each (2.0).
    assert set(reps) <= {1.0, 2.0, 5.0} and reps.count(2.0) / len(reps) == pytest.approx(0.5, abs=0.05)


def test_ratio_exact_when_sides_are_constant() -> None:
    r = ratio_ci([[1.0, 1.0], [1.0, 1.0]], [[2.0, 2.0], [2.0, 2.0]])
    assert r is not None
    assert (r.value, r.low, r.high) == (2.0, 2.0, 2.0)
    assert r.significant is True and r.faster is False and r.percent == 100.0
    assert r.phrase() == "2.00× slower (95% CI 2.00–2.00)"


def test_ratio_identical_sides_not_significant() -> None:
    side = [[1.0, 1.1, 0.9], [1.05, 0.95, 1.0]]
    r = ratio_ci(side, side)
    assert r is not None and r.value == 1.0
    assert r.low is not None and r.high is not None and r.low < 1.0 < r.high
    assert r.significant is False
    # Neither side is faster: "about the same", never "1.00× faster" (issue 30).
    assert r.about_same
    assert r.phrase().startswith("about the same (1.00×, 95% CI ")
    assert r.phrase().endswith(", not significant)")


def test_ratio_seeded_reproducible_and_significant() -> None:
    rng = random.Random(5)
    base = [[1.0 + rng.gauss(0, 0.01) for _ in range(4)] for _ in range(3)]
    other = [[0.8 + rng.gauss(0, 0.01) for _ in range(4)] for _ in range(3)]
    a, b = ratio_ci(base, other), ratio_ci(base, other)
    assert a == b
    assert a is not None and a.faster and a.significant is True
    assert a.factor == pytest.approx(1.25, abs=0.02)
    assert a.phrase().startswith("1.2") and "× faster (95% CI " in a.phrase()
    c = ratio_ci(base, other, seed=99)
    assert c is not None and (c.low, c.high) != (a.low, a.high)


def test_ratio_phrases_hand_computed() -> None:
    assert Ratio(0.8, 0.75, 0.85).phrase() == "1.25× faster (95% CI 1.18–1.33)"
    assert Ratio(0.8, 0.75, 0.85).phrase("tf.keras") == "1.25× faster than tf.keras (95% CI 1.18–1.33)"
    assert Ratio(1.10, 1.02, 1.19).phrase() == "1.10× slower (95% CI 1.02–1.19)"
    # A CI that holds 1: about the same, with what it rests on.
    assert Ratio(0.98, 0.95, 1.02).phrase() == "about the same (1.02×, 95% CI 0.98–1.05, not significant)"
    assert Ratio(0.98, 0.95, 1.02).phrase("tf.keras") == (
        "about the same as tf.keras (1.02×, 95% CI 0.98–1.05, not significant)"
    )
    # A ratio that rounds to 1.00×: about the same even when its CI excludes 1, or when there is none.
    tiny = Ratio(0.997, 0.995, 0.999)
    assert tiny.significant is True and tiny.about_same
    assert tiny.phrase() == "about the same (1.00×, 95% CI 1.00–1.01)"
    assert Ratio(1.004, None, None).phrase() == "about the same (1.00×, no CI: one value per side)"
    assert not Ratio(0.994, None, None).about_same  # 1.01×: a ratio, said as measured
    assert Ratio(0.994, None, None).phrase() == "1.01× faster (no CI: one value per side)"
    assert Ratio(1.1, None, None).significant is None
    inv = Ratio(1.25, 1.2, 1.3).inverted()
    assert (
        inv.value == pytest.approx(0.8)
        and inv.low == pytest.approx(1 / 1.3)
        and inv.high == pytest.approx(1 / 1.2)
    )


def test_ratio_without_values() -> None:
    assert ratio_ci([], [[1.0]]) is None
    r = ratio_ci([[1.0]], [[2.0]])
    assert r is not None and r.value == 2.0 and r.low is None
    assert "no CI" in r.phrase()

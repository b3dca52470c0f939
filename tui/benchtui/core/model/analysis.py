"""Figures with confidence intervals, warnings and framework ratios, from the raw times of a session's runs."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import (
    OUTLIER_MIN_RELATIVE,
    WIDE_SPREAD,
    Ratio,
    describe,
    grouped_mean,
    hierarchical_ci,
    median,
    outlier_mask,
    quantile,
    ratio_ci,
    warmup_cut,
    warmup_cut_sorted,
)
from benchtui.core.model.status import Caution, CautionKind, caution
from benchtui_runners import catalog

#: How many of a run's first batches are compared with the rest for the warm-up warning.
WARMUP_BATCHES = 3
#: First batches this many times slower (median) than the rest earn a warning.
WARMUP_FACTOR = 2.0
#: Share of outlier batches above which a row is flagged.
OUTLIER_SHARE = 0.01

BASIS_LABELS = {
    "epoch": "epoch times excluding the first",
    "epoch-all": "epoch times",
    "single-epoch": "the single epoch's time (its warm-up included)",
    "batch": "batch times after warm-up",
    "tokens": "the batch's time per token after the first (--task generate), over the steady generate steps",
}


def epochs_of(run: RunState) -> list[float]:
    return [run.epoch_times[e] for e in sorted(run.epoch_times)]


def first_epoch_of(run: RunState) -> list[float]:
    """Epoch 1's time, or nothing when its line was lost (never the next epoch's)."""
    return [run.epoch_times[1]] if 1 in run.epoch_times else []


def later_epochs_of(run: RunState) -> list[float]:
    """The times of the epochs after the first, by their numbers."""
    return [t for e, t in sorted(run.epoch_times.items()) if e > 1]


_CUT = "_benchtui_warmup_cut"


def run_warmup_cut(run: RunState) -> int:
    """``stats.warmup_cut`` of a run's batch times, kept on the run while its batch count stays the same.

    A summary asks for it three times a run (its steady batches, their sorted copy, its warm-up); each
    is a sort of half the run's batches, and batch times are only ever appended.
    """
    n = len(run.batch_seconds)
    cached = run.__dict__.get(_CUT)
    if cached is not None and cached[0] == n:
        return int(cached[1])
    cut = warmup_cut(run.batch_seconds)
    run.__dict__[_CUT] = (n, cut)
    return cut


def steady_batches(run: RunState) -> list[float]:
    """Batch times after the warm-up that stats.warmup_cut detects in this run's batches."""
    return run.batch_seconds[run_warmup_cut(run) :].tolist()


def warmup_of(run: RunState) -> tuple[int, float]:
    """(batches cut as warm-up, their total seconds) for one run."""
    cut = run_warmup_cut(run)
    return cut, float(sum(run.batch_seconds[:cut]))


_SORTED = "_benchtui_sorted_batches"
#: Up to how many warm-up batches ``sorted_batches`` takes out of the sorted whole rather than sort the rest.
_FEW_CUT = 64


def sorted_batches(run: RunState) -> tuple[array[float], array[float]]:
    """(every batch time, batch times after warm-up) of a run, each sorted.

    Kept on the run while its batch count stays the same: a finished run never changes,
    so redrawing a long session's table merges sorted lists instead of sorting anew.
    """
    n = len(run.batch_seconds)
    cached = run.__dict__.get(_SORTED)
    if cached is not None and cached[0] == n:
        return cached[1], cached[2]
    # The warm-up cut sorts the last half to find the steady state: the first half sorted, then Timsort
    # merges the two sorted runs (stably: the same list as sorting every batch at once).
    values = run.batch_seconds
    cut, tail = warmup_cut_sorted(values)
    run.__dict__[_CUT] = (n, cut)
    ordered = sorted(values[: n // 2])
    ordered += tail
    ordered.sort()
    # Kept as arrays: 8 bytes a value, not a Python float's 32 (a long session has millions).
    every = array("d", ordered)
    if cut <= _FEW_CUT:
        # The steady batches sorted: every batch sorted, less the few warm-up ones (the same values: a
        # sort of a run's tens of thousands of batches saved).
        for value in run.batch_seconds[:cut]:
            del ordered[bisect.bisect_left(ordered, value)]
        steady = array("d", ordered)
    else:
        steady = array("d", sorted(run.batch_seconds[cut:]))
    run.__dict__[_SORTED] = (n, every, steady)
    return every, steady


def cell_batches(runs: Sequence[RunState], steady: bool = False) -> list[float]:
    """Batch times of several runs (all, or after warm-up), as runs of sorted values.

    Sorting the result is a cheap merge (Timsort finds the sorted runs).
    """
    out: list[float] = []
    for run in runs:
        out += sorted_batches(run)[1 if steady else 0]
    return out


def samples_per_epoch(run: RunState) -> int | None:
    return run.hello.get("samples_per_epoch") or next(iter(run.epoch_samples.values()), None)


def config_batch(run: RunState) -> int | None:
    """The per-device batch the runner echoed in its hello (its config), or None when it said none."""
    config = run.hello.get("config")
    size = config.get("batch_size") if isinstance(config, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def batch_size_of(run: RunState) -> int | None:
    """Samples per step over every device: the runner's config, else samples per epoch over steps per epoch."""
    config = run.hello.get("config")
    size = config.get("batch_size") if isinstance(config, dict) else None
    if isinstance(size, int) and size > 0:
        # Data parallel: the config's batch is per device; a step takes it on every replica.
        replicas = config.get("replicas", 1) if isinstance(config, dict) else 1
        nodes = config.get("nodes", 1) if isinstance(config, dict) else 1
        replicas = replicas if isinstance(replicas, int) and 0 < replicas <= 1 << 20 else 1
        nodes = nodes if isinstance(nodes, int) and 0 < nodes <= 1 << 20 else 1
        return size * replicas * nodes
    # benchtui's timing hooks in a user's script (benchtui watch) give their batch size with their settings.
    settings = run.hello.get("settings")
    size = settings.get("batch_size") if isinstance(settings, dict) else None
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    samples, steps = samples_per_epoch(run), run.steps_per_epoch
    return samples // steps if samples and steps else None


def per_sample(values: Sequence[float], samples: int | None) -> list[float]:
    """Seconds per sample: what two cells with different batch sizes can be compared on."""
    return [v / samples for v in values] if samples else []


def figure_groups(runs: Sequence[RunState], name: str) -> tuple[list[list[float]], float | None]:
    """Per-run groups of raw values behind a headline figure, and a numerator for rates.

    Images/s is built from seconds per image of the epochs after the first (numerator 1):
    total images over total time, as everywhere.
    """
    groups: list[list[float]] = []
    numerator: float | None = None
    for run in runs:
        epochs = epochs_of(run)
        if name == "mean_epoch_s":
            # Over runs only: the first epoch is not exchangeable with the others, so
            # resampling epochs within a run would mostly measure the warm-up.
            groups.append([sum(epochs) / len(epochs)] if epochs else [])
        elif name == "first_epoch_s":
            groups.append(first_epoch_of(run))
        elif name == "mean_epoch_excl_first_s":
            groups.append(later_epochs_of(run))
        elif name == "images_per_s":
            samples = samples_per_epoch(run)
            if samples:
                numerator = 1.0
                groups.append(per_sample(later_epochs_of(run) or first_epoch_of(run), samples))
        else:  # build_s, time_to_first_batch_s: one value per run
            phase = {"build_s": "build", "time_to_first_batch_s": "first_batch"}[name]
            value = run.phase_seconds(phase)
            groups.append([] if value is None else [value])
    return [g for g in groups if g], numerator


def figure_ci(runs: Sequence[RunState], name: str) -> list[float] | None:
    """95% bootstrap interval of a headline figure: over runs, then epochs within runs.

    Only the figures built from exchangeable epochs (excluding the first) resample
    within runs; the others have one value per run and resample runs.
    """
    groups, numerator = figure_groups(runs, name)
    if name == "images_per_s" and numerator is None:
        return None
    interval = hierarchical_ci(groups, numerator=numerator)
    return list(interval) if interval else None


def throughput(runs: Sequence[RunState]) -> float | None:
    """A cell's images/s: total images over total time of the epochs after the first (of every
    epoch when a run has only one), over all its runs. Never a mean of the runs' rates."""
    groups, numerator = figure_groups(runs, "images_per_s")
    return grouped_mean(groups, numerator) if numerator is not None else None


def steady_throughput(runs: Sequence[RunState]) -> float | None:
    """Images/s over the batches after each run's warm-up: total images over total time."""
    images = seconds = 0.0
    for run in runs:
        steady, size = steady_batches(run), batch_size_of(run)
        if steady and size:
            images += size * len(steady)
            seconds += sum(steady)
    return images / seconds if seconds > 0 else None


def timing_groups(runs: Sequence[RunState], basis: str | None = None) -> tuple[str, list[list[float]]]:
    """The raw times that best measure steady training speed, per run, and what they are.

    Epoch times excluding the first (the study's figure) when there are at least two
    of them; otherwise batch times after warm-up (a one-epoch plan); otherwise all
    epoch times.
    """
    epochs = [g for g in (later_epochs_of(r) for r in runs) if g]
    batches = [g for g in (steady_batches(r) for r in runs) if g]
    every = [g for g in (epochs_of(r) for r in runs) if g]
    if basis is None:
        if sum(len(g) for g in epochs) >= 2:
            basis = "epoch"
        elif batches:
            basis = "batch"
        else:
            basis = "epoch-all"
    chosen = {"epoch": epochs, "batch": batches, "epoch-all": every}[basis]
    return basis, chosen


def pair_groups(
    base: Sequence[RunState], other: Sequence[RunState]
) -> tuple[str, list[list[float]], list[list[float]]]:
    """Times of two cells on one common basis (epoch if both have enough, else batch)."""
    for basis in ("epoch", "batch", "epoch-all"):
        _, a = timing_groups(base, basis)
        _, b = timing_groups(other, basis)
        enough = sum(len(g) for g in a) + sum(len(g) for g in b) >= 3 or basis == "epoch-all"
        if a and b and enough:
            return basis, a, b
    return "epoch-all", [], []


def compare_cells(base: Sequence[RunState], other: Sequence[RunState]) -> tuple[str, Ratio] | None:
    """Time per image of other / base with its 95% CI, and its basis ("epoch", "single-epoch"; a label in
    ``BASIS_LABELS``), or None when a side has no times.

    From exactly the data of the cells' images/s (seconds per image of the epochs after the
    first, or of the only epoch), so the ratio is the inverse ratio of the images/s every
    table shows, total images over total time, whatever the batch sizes.
    """
    a, _ = figure_groups(base, "images_per_s")
    b, _ = figure_groups(other, "images_per_s")
    ratio = _cell_ratio(tuple(map(tuple, a)), tuple(map(tuple, b)))
    if ratio is None:
        return None
    several = all(len(epochs_of(r)) > 1 for r in (*base, *other))
    basis = "epoch" if several else "single-epoch"
    return basis, ratio


@lru_cache(maxsize=1024)
def _cell_ratio(a: tuple[tuple[float, ...], ...], b: tuple[tuple[float, ...], ...]) -> Ratio | None:
    # Cached (seeded: the same values give the same interval): a sweep compares each cell with several
    # (its frameworks' at its point, its own at other points), and a summary is made more than once.
    return ratio_ci(a, b)


def cell_warnings(
    runs: Sequence[RunState], spread: dict[str, Any], batch: dict[str, Any] | None = None
) -> list[Caution]:
    """Visible cautions about a cell's numbers: wide spread, slow warm-up, outliers.

    ``batch`` is ``describe`` of the steady batch times when the caller has it already.
    """
    out: list[Caution] = []
    for name, what in (("mean_epoch_excl_first_s", "epoch time excl. first"), ("mean_epoch_s", "epoch time")):
        stats = spread.get(name)
        if stats and stats["n"] >= 2:
            if stats.get("iqr_ratio") is not None and stats["iqr_ratio"] > WIDE_SPREAD:
                out.append(
                    caution(
                        CautionKind.RUNS_DIFFER,
                        f"runs differ: IQR of the {what} is {stats['iqr_ratio']:.0%} of its median",
                    )
                )
            break
    if batch is None:
        batch = describe(cell_batches(runs, steady=True))
    if batch and batch["n"] >= 4 and batch["iqr_ratio"] is not None and batch["iqr_ratio"] > WIDE_SPREAD:
        out.append(
            caution(
                CautionKind.BATCHES_VARY, f"batch times vary: IQR is {batch['iqr_ratio']:.0%} of the median"
            )
        )
    factors = []
    for run in runs:
        steady = sorted_batches(run)[1]
        if len(run.batch_seconds) > 2 * WARMUP_BATCHES and steady:
            rest = quantile(steady, 0.5)
            if rest > 0:
                factors.append(median(run.batch_seconds[:WARMUP_BATCHES]) / rest)
    if factors and max(factors) >= WARMUP_FACTOR:
        out.append(
            caution(
                CautionKind.SLOW_WARMUP,
                f"slow warm-up: the first {WARMUP_BATCHES} batches are {max(factors):.1f}× slower "
                "than the rest (median)",
            )
        )
    if len(runs) >= 3:
        means = [sum(g) / len(g) for g in (later_epochs_of(r) or epochs_of(r) for r in runs) if g]
        if len(means) == len(runs):
            flags = outlier_mask(means, min_relative=OUTLIER_MIN_RELATIVE)
            center = median(means)
            for run, value, flag in zip(runs, means, flags, strict=True):
                if flag:
                    out.append(
                        caution(
                            CautionKind.OUTLIER_RUN,
                            f"run {run.spec.index} is an outlier (mean epoch {value:.3g} s, median of runs {center:.3g} s)",
                        )
                    )
    if batch and batch["n"] >= 20 and batch["outliers"] / batch["n"] > OUTLIER_SHARE:
        out.append(
            caution(
                CautionKind.OUTLIER_BATCHES,
                f"{batch['outliers']} outlier batches ({batch['outliers'] / batch['n']:.1%}: "
                "over 3.5 MADs and 5% from the median)",
            )
        )
    return out


def host_threads(run: RunState) -> tuple[int | None, int]:
    """(threads per process, processes on this host) of a run: its framework's intra-op pool as its runner
    reported it (else as its config asked; None: neither said), and its processes: one per rank for
    PyTorch's data parallel (torchrun starts a process per rank), one where replicas share a process
    (tf.distribute, Keras on JAX or torch)."""
    settings = run.hello.get("settings")
    config = run.hello.get("config")
    settings = settings if isinstance(settings, dict) else {}
    config = config if isinstance(config, dict) else {}
    threads = None
    for value in (settings.get("intra_op_threads"), config.get("threads")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            threads = value
            break
    replicas = config.get("replicas", 1)
    replicas = (
        replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0 else 1
    )
    nodes = config.get("nodes", 1)
    nodes = nodes if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0 else 1
    entry = catalog.FRAMEWORKS.get(run.spec.framework)
    per_process = entry is not None and entry[0] == "torch"
    processes = max(1, replicas // nodes) if per_process and replicas > 1 else 1
    return threads, processes


def threads_text(threads: int | None, processes: int) -> str:
    """'2 threads', or '1 thread per rank × 2 ranks (2 in all)'; 'not reported' when unknown."""
    if threads is None:
        return "not reported"
    each = f"{threads} thread{'s' if threads != 1 else ''}"
    if processes == 1:
        return each
    return f"{each} per rank × {processes} ranks ({threads * processes} in all)"


def framework_label(framework: str) -> str:
    return catalog.FRAMEWORK_LABELS.get(framework, framework)


def model_label(model: str) -> str:
    info = catalog.MODELS.get(model)
    return info.label if info else model


def device_kinds(runs: Sequence[RunState]) -> set[str]:
    return {k for r in runs if (k := r.device_kind)}


def mixed_devices(base: Sequence[RunState], other: Sequence[RunState]) -> str | None:
    """Why two cells' times cannot be compared (they ran on different kinds of device), or None."""
    a, b = device_kinds(base), device_kinds(other)
    if a and b and a != b:
        return f"{'/'.join(sorted(a))} vs {'/'.join(sorted(b))}"
    return None

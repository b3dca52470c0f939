"""A sweep's answer beside its per-point rows: best vs best per model, and what each setting buys.

**Best vs best.** Each framework's fastest point of a model (highest throughput: samples per second over
the epochs after the first, the basis of every verdict, ``analysis.compare_cells``) among the points with
finished runs; every framework against the plan's first that has results, as ``model_verdicts`` does, the
verdict between the two chosen cells in its words (``session_model.pair_verdict``). Choosing the fastest of
several noisy points flatters it: the **selection bias** is measured from the runs themselves, by a seeded
bootstrap that resamples each point's runs (then epochs within them, as every interval here) and takes the
best point of each resample: ``mean(max over points of resampled throughput) / observed max - 1``.

**Generate** (``--task generate``, issue 34): "fastest" is the batch's tokens/s after the first token, and
every choice, bias and speed-up rests on each run's steady steps' seconds per batch token after the first
(``decode_s / ((N - 1) x B)``): the basis of the generate verdict (``generation_figures.compare``), never
sequences per second of whole windows (which hold the first token's own call and count no tokens).

**What each setting buys.** Per (model, framework, swept axis, value other than the axis's first), the
speed-up at that value over the first, over every pair of points that differ only on that axis (each pair's
ratio and CI from ``compare_cells``; the factor their geometric mean). An axis that changes nothing for a
framework or model (``sweep.applies``) says so: "no effect", never a ratio of a cell with itself.

The session model is read through ``SweepSource`` (no import of ``session_model``: it calls this module).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache, partial
from typing import Protocol

from benchtui.core.model import analysis, generation_figures
from benchtui.core.model.cell import (
    BestPoint,
    BestVerdict,
    FrameworkRatio,
    RefusedRatio,
    SettingGain,
    SweepAnswer,
)
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import RESAMPLES, SEED, Ratio, grouped_mean, hierarchical_replicates
from benchtui.core.model.status import RunStatus
from benchtui.core.plan import sweep as sweep_mod
from benchtui.core.plan.plan import Plan
from benchtui.core.plan.sweep import Point

#: Resamples of the selection bias (as every bootstrap interval here).
BIAS_RESAMPLES = RESAMPLES


class SweepSource(Protocol):
    """What the answer reads of a session model (``SessionModel`` is one)."""

    plan: Plan

    def cell_runs(
        self, framework: str, model: str, devices: int | None = None, point: Point | None = None
    ) -> list[RunState]: ...

    def pair_verdict(
        self,
        model_id: str,
        base: tuple[str, list[RunState]],
        other: tuple[str, list[RunState]],
        at: Point = ...,
        names: dict[str, str] | None = None,
    ) -> FrameworkRatio | RefusedRatio | None: ...


def answer(model: SweepSource) -> SweepAnswer | None:
    """The sweep's answer: best vs best per model and each setting's speed-up (None: a plan without a
    sweep, or one of ``devices`` only, a scaling session)."""
    plan = model.plan
    axes = {a: tuple(vs) for a, vs in plan.sweep.items() if a != "devices"}
    if not axes:
        return None
    best: list[BestVerdict] = []
    refused: list[RefusedRatio] = []
    gains: list[SettingGain] = []
    for m in plan.models:
        verdicts, refusals = best_verdicts(model, m)
        best += verdicts
        refused += refusals
        for fw in plan.frameworks:
            gains += setting_gains(model, m, fw)
    return SweepAnswer(axes=axes, best=tuple(best), gains=tuple(gains), refused=tuple(refused))


# -- best vs best ---------------------------------------------------------------------------------


def generating(model: SweepSource) -> bool:
    """Whether the sweep is of ``--task generate`` (its speed: the batch's tokens/s after the first token)."""
    return model.plan.task == "generate"


def token_groups(runs: Sequence[RunState]) -> list[list[float]]:
    """Per run, each steady step's seconds per batch token after the first (``decode_s / ((N - 1) x B)``):
    the values of the generate verdict (``generation_figures.compare``); runs with none left out."""
    out = []
    for run in runs:
        steps, _ = generation_figures.steady_steps([run])
        times = [
            s.decode_s / ((s.new_tokens - 1) * s.sequences)
            for s in steps
            if s.new_tokens > 1 and s.decode_s > 0 and s.sequences > 0
        ]
        if times:
            out.append(times)
    return out


def speed(runs: Sequence[RunState], generate: bool = False) -> float | None:
    """What "fastest" means: samples per second (``analysis.throughput``); generating, the batch's tokens per
    second after the first token (total over total, as ``token_groups`` pools them)."""
    if generate:
        return grouped_mean(token_groups(runs), 1.0)
    return analysis.throughput(runs)


def compare(base: Sequence[RunState], other: Sequence[RunState], generate: bool = False) -> Ratio | None:
    """Time per sample of ``other`` over ``base`` (``analysis.compare_cells``); generating, time per batch
    token after the first (``generation_figures.compare``). None: a side has no times."""
    if generate:
        return generation_figures.compare(base, other)
    compared = analysis.compare_cells(base, other)
    return compared[1] if compared is not None else None


def finished(model: SweepSource, framework: str, model_id: str, point: Point) -> list[RunState]:
    """The finished runs of a cell at ``point`` (those of its effective point)."""
    return [r for r in model.cell_runs(framework, model_id, point=point) if r.status is RunStatus.OK]


def workloads(model: SweepSource, model_id: str) -> list[str | None]:
    """The workloads best vs best keeps apart: a token model's swept sequence lengths (tokens per sample
    are the work itself, not a setting: a shorter sequence is not a faster framework); [None]: one."""
    values = model.plan.sweep.get("seq-len") or []
    if len(values) >= 2 and sweep_mod.applies("seq-len", "", model_id) is None:
        return list(values)
    return [None]


def candidates(
    model: SweepSource, framework: str, model_id: str, seq_len: str | None = None
) -> list[tuple[Point, list[RunState]]]:
    """The points a framework's fastest is chosen among: each distinct effective point with finished runs
    (tf.keras's channels-last on is its off: one point, not two), in the plan's order; at ``seq_len``
    only, where given (``workloads``)."""
    out: list[tuple[Point, list[RunState]]] = []
    seen: set[Point] = set()
    for point in model.plan.points():
        if seq_len is not None and point.get("seq-len") != seq_len:
            continue
        at = model.plan.effective(point, framework, model_id)
        if at in seen:
            continue
        seen.add(at)
        runs = finished(model, framework, model_id, at)
        if runs and speed(runs, generating(model)) is not None:
            out.append((at, runs))
    return out


#: Per point, per run, its seconds per sample (epochs after the first), or generating its seconds per batch
#: token after the first (steady steps): what a choice among points rests on.
Values = tuple[tuple[tuple[float, ...], ...], ...]


def values_of(points: Sequence[Sequence[RunState]], generate: bool = False) -> Values:
    """The seconds per sample of each point's runs (``analysis.figure_groups``: what its throughput and every
    verdict rest on); generating, their seconds per batch token after the first (``token_groups``)."""
    if generate:
        return tuple(tuple(tuple(g) for g in token_groups(runs)) for runs in points)
    return tuple(tuple(tuple(g) for g in analysis.figure_groups(runs, "images_per_s")[0]) for runs in points)


def resampled_best(points: Values, rng: random.Random, resamples: int = BIAS_RESAMPLES) -> list[float]:
    """Per resample, the best throughput over ``points`` (each point's runs resampled, then the epochs
    within them; samples per second)."""
    best = [0.0] * resamples
    for groups in points:
        reps = hierarchical_replicates(groups, resamples, rng=rng)
        for i, seconds in enumerate(reps):
            if seconds > 0 and 1.0 / seconds > best[i]:
                best[i] = 1.0 / seconds
    return best


def _resamplable(points: Values) -> bool:
    """Whether a choice among ``points`` has a bias to measure: several points, and a point of several runs."""
    return len(points) >= 2 and any(len(groups) >= 2 for groups in points)


@lru_cache(maxsize=256)
def point_bias(points: Values, observed: float | None) -> float | None:
    """How much choosing the fastest of ``points`` overstates its throughput (a fraction; None: one point,
    or one run a point, or no throughput). Seeded, and cached as the intervals are (a summary is made more
    than once)."""
    if not observed or not _resamplable(points):
        return None
    best = resampled_best(points, random.Random(SEED))
    return math.fsum(best) / len(best) / observed - 1.0


@lru_cache(maxsize=256)
def verdict_bias(base: Values, other: Values, observed: float, other_faster: bool) -> float | None:
    """How much choosing each side's best overstates the winner's lead: the mean over resamples of the
    winner's best over the loser's best, over ``observed`` (that ratio as measured, at least 1), less 1
    (below 0: the loser's choice flattered it more). None where neither side chose (one point each) or no
    point has several runs. Seeded and cached."""
    if not (_resamplable(base) or _resamplable(other)) or observed <= 0:
        return None
    rng = random.Random(SEED)
    a, b = resampled_best(base, rng), resampled_best(other, rng)
    speeds = [y / x for x, y in zip(a, b, strict=True) if x > 0 and y > 0]
    if not speeds:
        return None
    leads = speeds if other_faster else [1.0 / s for s in speeds]  # speeds: other's best over base's
    return math.fsum(leads) / len(leads) / observed - 1.0


def ran_with(runs: Sequence[RunState], framework: str, model_id: str) -> str:
    """What a cell's runs ran with, as their runners echoed it (their config): "amp-bf16, compile on,
    channels-last on, batch 256" (channels-last only where it changes something); '' when none said."""
    for run in runs:
        config = run.hello.get("config")
        if not isinstance(config, dict):
            continue
        words = []
        if isinstance(config.get("precision"), str):
            words.append(config["precision"])
        compiled = config.get("compile")
        if isinstance(compiled, bool):  # before benchtui 0.3 compile was on/off
            compiled = "on" if compiled else "off"
        if isinstance(compiled, str):
            words.append(f"compile {compiled}")
        if (
            isinstance(config.get("channels_last"), bool)
            and sweep_mod.applies("channels-last", framework, model_id) is None
        ):
            words.append(f"channels-last {'on' if config['channels_last'] else 'off'}")
        if (size := analysis.config_batch(run)) is not None:
            words.append(f"batch {size}")
        if words:
            return ", ".join(words)
    return ""


def settings_words(
    model: SweepSource, framework: str, model_id: str, point: Point, runs: Sequence[RunState] = ()
) -> str:
    """How a chosen point's settings read: its label; for ``settings`` best, what best set for this
    framework (what its runs ran with, else the plan's ``sweep.settings_words``). An axis that changes nothing
    for this framework's model is left unsaid (tf.keras 'at batch 8', never 'channels-last off')."""
    point = Point(tuple((a, v) for a, v in point.items if sweep_mod.applies(a, framework, model_id) is None))
    if point.get("settings") != "best":
        return point.label
    said = ran_with(runs, framework, model_id)
    if not said:
        try:
            said = sweep_mod.settings_words(model.plan, point, framework, model_id, None)
        except (TypeError, ValueError, KeyError, AttributeError):
            said = ""
    others = point.without("settings").label
    return ", ".join(w for w in (said or point.label, others) if w)


def best_point(
    model: SweepSource, framework: str, model_id: str, seq_len: str | None = None
) -> tuple[BestPoint, Values] | None:
    """A framework's fastest point of a model (at ``seq_len``, where given), and what it was chosen among
    (the values of every point with finished runs). Generating, the fastest is the one of most tokens/s
    after the first token (the batch's); its ``images_per_s`` stays its sequences/s, its ``bias`` is of the
    tokens/s."""
    found = candidates(model, framework, model_id, seq_len)
    if not found:
        return None
    generate = generating(model)
    speeds = [speed(runs, generate) or 0.0 for _, runs in found]
    i = max(range(len(found)), key=lambda k: (speeds[k], -k))  # ties: the plan's earlier point
    point, chosen = found[i]
    values = values_of([runs for _, runs in found], generate)
    return (
        BestPoint(
            framework=framework,
            point=point,
            settings=settings_words(model, framework, model_id, point, chosen),
            images_per_s=analysis.throughput(chosen) if generate else speeds[i],
            points=len(found),
            bias=point_bias(values, speeds[i]),
        ),
        values,
    )


def percent_words(bias: float) -> str:
    """'about 1%', 'about 0.3%', 'under 0.1%'."""
    pct = abs(bias) * 100
    if pct < 0.05:
        return "under 0.1%"
    return f"about {pct:.1f}%" if pct < 1 else f"about {pct:.0f}%"


def bias_words(base: BestPoint, other: BestPoint, bias: float | None) -> str:
    """What choosing the best did to the verdict, from the runs: never left unsaid."""
    if base.points <= 1 and other.points <= 1:
        return "one point a side: no choice, no selection bias"
    if base.points == other.points:
        chosen = f"the best of {base.points} points a side"
    elif base.points <= 1 or other.points <= 1:
        side = other if other.points > 1 else base
        chosen = f"the best of {side.points} points ({analysis.framework_label(side.framework)})"
    else:
        chosen = (
            f"the best of {other.points} points ({analysis.framework_label(other.framework)}) and of "
            f"{base.points} ({analysis.framework_label(base.framework)})"
        )
    if bias is None:
        return f"choosing {chosen} overstates it by an amount one run a point cannot measure"
    return f"choosing {chosen} {'overstates' if bias >= 0 else 'understates'} it by {percent_words(bias)}"


def side_name(point: BestPoint) -> str:
    """'PyTorch at batch 8 · channels-last on', 'PyTorch at its best (amp-bf16, compile on, ...)' (no
    settings: the framework alone)."""
    label = analysis.framework_label(point.framework)
    if point.point.get("settings") == "best" and point.settings:
        return f"{label} at its best ({point.settings})"
    return f"{label} at {point.settings}" if point.settings else label


def best_verdicts(model: SweepSource, model_id: str) -> tuple[list[BestVerdict], list[RefusedRatio]]:
    """Best vs best for one model: every framework's fastest point against the plan's first framework's
    that has results (a token model's: at each swept sequence length); a pair whose chosen cells ran on
    different kinds of device gets a refusal instead."""
    out: list[BestVerdict] = []
    refused: list[RefusedRatio] = []
    for seq_len in workloads(model, model_id):
        verdicts, refusals = _best_verdicts(model, model_id, seq_len)
        out += verdicts
        refused += refusals
    return out, refused


def _best_verdicts(
    model: SweepSource, model_id: str, seq_len: str | None
) -> tuple[list[BestVerdict], list[RefusedRatio]]:
    sides = [
        (fw, found) for fw in model.plan.frameworks if (found := best_point(model, fw, model_id, seq_len))
    ]
    out: list[BestVerdict] = []
    refused: list[RefusedRatio] = []
    if len(sides) < 2:
        return out, refused
    base_fw, (base, base_groups) = sides[0]
    base_runs = finished(model, base_fw, model_id, base.point)
    for fw, (other, groups) in sides[1:]:
        runs = finished(model, fw, model_id, other.point)
        names = {base_fw: side_name(base), fw: side_name(other)}
        verdict = model.pair_verdict(model_id, (base_fw, base_runs), (fw, runs), Point(), names)
        if isinstance(verdict, RefusedRatio):
            refused.append(replace(verdict, text=f"best vs best: {verdict.text}"))
        if not isinstance(verdict, FrameworkRatio):
            continue
        bias = verdict_bias(base_groups, groups, verdict.factor, verdict.faster)
        text = f"best vs best: {verdict.text}; {bias_words(base, other, bias)}"
        out.append(BestVerdict(model=model_id, base=base, other=other, verdict=verdict, bias=bias, text=text))
    return out, refused


# -- what each setting buys ----------------------------------------------------------------------


def value_words(axis: str, value: str) -> str:
    """'channels-last on', 'batch 8', 'amp-bf16' (a precision names itself)."""
    return value if axis == "precision" else f"{axis} {value}"


def setting_gains(model: SweepSource, model_id: str, framework: str) -> list[SettingGain]:
    """What each swept setting buys ``framework`` on ``model_id``, against each axis's first value."""
    plan = model.plan
    out: list[SettingGain] = []
    for axis, values in plan.sweep.items():
        if axis == "devices" or len(values) < 2:
            continue
        baseline = values[0]
        why = sweep_mod.applies(axis, framework, model_id)
        for value in values[1:]:
            out.append(_gain(model, model_id, framework, axis, value, baseline, why))
    return out


def _gain(
    model: SweepSource, model_id: str, framework: str, axis: str, value: str, baseline: str, why: str | None
) -> SettingGain:
    words = value_words(axis, value)
    if axis == "settings" and value == "best":
        best = next(
            (
                p
                for p in model.plan.points()
                if p.get("settings") == "best" and finished(model, framework, model_id, p)
            ),
            None,
        )
        said = ran_with(finished(model, framework, model_id, best), framework, model_id) if best else ""
        words = f"best ({said})" if said else "best"
    make = partial(
        SettingGain, model=model_id, framework=framework, axis=axis, value=value, baseline=baseline
    )
    if why is not None:
        return make(
            factor=None, ci_low=None, ci_high=None, pairs=0, no_effect=why, text=f"{words}: no effect ({why})"
        )
    plan = model.plan
    speedups: list[tuple[float, float | None, float | None]] = []
    seen: set[tuple[Point, Point]] = set()
    for point in plan.points():
        if point.get(axis) != baseline:
            continue
        low_at = plan.effective(point, framework, model_id)
        high_at = plan.effective(point.with_value(axis, value), framework, model_id)
        if (low_at, high_at) in seen or low_at == high_at:
            continue
        seen.add((low_at, high_at))
        base_runs = finished(model, framework, model_id, low_at)
        runs = finished(model, framework, model_id, high_at)
        if not base_runs or not runs:
            continue
        # Time per sample (generating: per batch token after the first) at value over at baseline: its
        # inverse is the speed-up.
        ratio = compare(base_runs, runs, generating(model))
        if ratio is None or ratio.value <= 0:
            continue
        # A token model's sequence length: its speed in tokens/s (a sample of a longer sequence is more work).
        k = (
            int(value) / int(baseline)
            if axis == "seq-len" and value.isdigit() and baseline.isdigit()
            else 1.0
        )
        speedups.append(
            (
                k / ratio.value,
                k / ratio.high if ratio.high else None,
                k / ratio.low if ratio.low else None,
            )
        )
    if not speedups:
        return make(
            factor=None,
            ci_low=None,
            ci_high=None,
            pairs=0,
            no_effect=None,
            text=f"{words}: not measured (no pair of points with finished runs on both sides)",
        )
    factor = math.exp(math.fsum(math.log(s) for s, _, _ in speedups) / len(speedups))
    lows = [lo for _, lo, _ in speedups]
    highs = [hi for _, _, hi in speedups]
    low = min(lows) if all(v is not None for v in lows) else None  # type: ignore[type-var]
    high = max(highs) if all(v is not None for v in highs) else None  # type: ignore[type-var]
    text = f"{words}: {factor:.2f}×" + (
        " tokens/s after the first token" if generating(model) else (" tokens/s" if axis == "seq-len" else "")
    )
    if low is not None and high is not None:
        text += (
            f" (95% CI {low:.2f}–{high:.2f})"
            if len(speedups) == 1
            else f" (95% CIs {low:.2f}–{high:.2f} over {len(speedups)} pairs of points)"
        )
    else:
        text += " (no CI: one value a side)"
    return make(factor=factor, ci_low=low, ci_high=high, pairs=len(speedups), no_effect=None, text=text)


def gains_by_setting(gains: Sequence[SettingGain]) -> dict[tuple[str, str, str], list[SettingGain]]:
    """Gains grouped by (model, axis, value), each framework side by side (the issue's 'amp-bf16: PyTorch
    2.9×, Keras/JAX 2.4×')."""
    out: dict[tuple[str, str, str], list[SettingGain]] = {}
    for g in gains:
        out.setdefault((g.model, g.axis, g.value), []).append(g)
    return out

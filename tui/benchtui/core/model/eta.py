"""How long a plan has left: a first figure from the plan's estimate, then the runs' own times, counting down.

Every run still to come gets a figure, the first available of:

1. the mean time of the finished runs of its cell (framework, model, device count): measured;
2. the projected time of the cell's run going on, once its steps have a pace (the steps done
   and the pace of its recent steps say how long it will take): measured, so a GPU plan has an
   ETA before its first run ends;
3. the plan's estimate of one run of the cell (``prior_seconds``: ``estimate.cpu_seconds`` of that
   cell alone, on a CPU), scaled by how the finished runs compared with their own estimates
   (``scale``): the first figure shown, before any run has ended;
4. none: a user's model of unknown cost on a GPU, say. Such runs are counted, and the text says
   the figure is a lower bound.

The run going on counts what it has left, not its whole figure: the steps it has to go at its
recent pace once it has steps, else its figure less the time it has run. When it runs past its
figure, ``over_s`` says by how much, so the line still moves while nothing else can be said.

Pure: no clock of its own (``now`` is on the events' clock) and no UI.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import RunStatus
from benchtui.core.plan import estimate
from benchtui.core.plan.plan import Plan

#: A finished run whose time predicts the next of its cell: a failed run takes about as long to fail again.
TIMED = (RunStatus.OK, RunStatus.FAILED, RunStatus.DIVERGED)  # a diverged run ran its whole course
#: The pace of a run going on: the median of its latest steps (as the results table's current rate).
RECENT_STEPS = 32
#: Below this many seconds past its figure, a run is not said to be late (rounding, a last epoch's end).
LATE_S = 1.0

Cell = tuple[str, str, int]  # framework, model, devices


@dataclass(frozen=True)
class Eta:
    """What the plan has left: ``left_s`` over the runs with a figure."""

    left_s: float
    unknown: int = 0  # runs to come with no figure at all: ``left_s`` is then a lower bound
    estimated: int = 0  # runs to come whose figure is the plan's estimate (no run of their cell timed yet)
    scaled: bool = False  # those estimates are scaled by how finished runs compared with theirs
    over_s: float = 0.0  # the run going on has run this long past its figure


def prior_seconds(plan: Plan, cores: float) -> dict[tuple[str, str], float]:
    """The plan's estimate of one run of each (framework, model), on ``cores`` CPU cores (the plan's
    ``threads`` when it has them): ``estimate.cpu_seconds`` of the cell alone, one run, at the plan's
    device count (a scaling plan: its largest). Models of unknown cost (a user's own) and pairs a framework
    lacks get none."""
    out: dict[tuple[str, str], float] = {}
    for model in plan.models:
        if estimate.sample_gflops(plan, model) is None:
            continue
        for framework in plan.frameworks:
            one = dataclasses.replace(plan, frameworks=[framework], models=[model], runs=1, scaling=False)
            seconds = estimate.cpu_seconds(one, cores)
            if seconds > 0:
                out[(framework, model)] = seconds
    return out


def _cell(run: RunState) -> Cell:
    return run.spec.framework, run.spec.model, run.spec.devices


def _took(run: RunState) -> float | None:
    if run.status in TIMED and run.started_t is not None and run.ended_t is not None:
        return max(run.ended_t - run.started_t, 0.0)
    return None


def steps_left(run: RunState) -> tuple[int, float] | None:
    """The steps a run going on has still to make and the pace of its recent steps (seconds a step);
    None before its steps have a pace or when its runner gave no steps per epoch."""
    per_epoch = run.steps_per_epoch
    if (
        not isinstance(per_epoch, int)
        or per_epoch <= 0
        or not run.epochs_planned
        or not len(run.batch_seconds)
    ):
        return None
    done = (max(run.current_epoch, 1) - 1) * per_epoch + run.current_step
    tail = run.batch_seconds[-RECENT_STEPS:]
    return max(per_epoch * run.epochs_planned - done, 0), statistics.median(tail)


def scale(model: SessionModel, prior: Mapping[tuple[str, str], float]) -> float | None:
    """How the finished runs' times compare with the plan's estimate of them (their total over its
    total; None before a successful run with an estimate has ended). The estimate errs short by design
    (a generous FLOP rate), so this is usually above 1."""
    took = estimated = 0.0
    for run in model.runs.values():
        seconds = _took(run) if run.status in (RunStatus.OK, RunStatus.DIVERGED) else None
        guess = prior.get((run.spec.framework, run.spec.model))
        if seconds is not None and guess:
            took += seconds
            estimated += guess
    return took / estimated if estimated > 0 and took > 0 else None


def plan_eta(
    model: SessionModel, now: float | None, prior: Mapping[tuple[str, str], float] | None = None
) -> Eta | None:
    """What the plan has left (see the module's docstring); None when no run to come has a figure.

    ``now``: the time on the events' clock (None: the run going on has just started); ``prior``: the
    plan's estimate of one run per (framework, model), ``prior_seconds``, or None (a GPU plan).
    """
    prior = prior or {}
    took: dict[Cell, list[float]] = {}
    for run in model.runs.values():
        seconds = _took(run)
        if seconds is not None:
            took.setdefault(_cell(run), []).append(seconds)
    factor = scale(model, prior)
    current = model.runs.get(model.current) if model.current else None
    # The run going on: what it has left, and its whole projected time (a figure for the rest of its cell).
    current_left: float | None = None
    projected: dict[Cell, float] = {}
    over = 0.0
    elapsed = 0.0
    if current is not None and not current.finished:
        if current.started_t is not None and now is not None:
            elapsed = max(now - current.started_t, 0.0)
        pace = steps_left(current)
        if pace is not None:
            current_left = pace[0] * pace[1]
            projected[_cell(current)] = elapsed + current_left

    def figure(run: RunState) -> tuple[float | None, bool]:
        """A run's whole time, and whether it is the plan's estimate."""
        cell = _cell(run)
        if cell in took:
            return statistics.fmean(took[cell]), False
        if cell in projected:
            return projected[cell], False
        guess = prior.get((run.spec.framework, run.spec.model))
        if guess is None:
            return None, False
        return guess * (factor or 1.0), True

    left, unknown, estimated = 0.0, 0, 0
    for run in model.runs.values():
        if run.finished:
            continue
        whole, guessed = figure(run)
        if run is current and current_left is not None:
            left += current_left
            continue
        if whole is None:
            unknown += 1
            continue
        estimated += guessed
        if run is current:
            remaining = whole - elapsed
            if remaining < -LATE_S:
                over = -remaining
            left += max(remaining, 0.0)
        else:
            left += whole
    if unknown and not left and not estimated and not took and not projected:
        return None
    return Eta(left, unknown, estimated, bool(estimated and factor), over)


def clock(seconds: float | None) -> str:
    """'4:05', '1:02:03': a duration as a clock reads it."""
    if seconds is None or seconds < 0:
        return "0:00"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def eta_text(eta: Eta | None) -> str:
    """The ETA in words, honest about where its figure comes from:

    'ETA: 4:05 left' (finished runs), 'ETA: about 4:05 left' (partly the plan's estimate, scaled by
    the finished runs), 'ETA: about 4:05 left (the plan's estimate)' (no run timed yet), 'ETA: over
    4:05 left (2 runs not timed yet)'; with ', this run 0:35 past its figure' while the run going on
    is late."""
    if eta is None:
        return "ETA: after the first run"
    late = f", this run {clock(eta.over_s)} past its figure" if eta.over_s else ""
    if eta.unknown:
        runs = f"{eta.unknown} run{'s' if eta.unknown != 1 else ''}"
        return f"ETA: over {clock(eta.left_s)} left ({runs} not timed yet{late})"
    if eta.estimated and not eta.scaled:
        return f"ETA: about {clock(eta.left_s)} left (the plan's estimate{late})"
    if eta.estimated:
        return f"ETA: about {clock(eta.left_s)} left" + (f" ({late[2:]})" if late else "")
    return f"ETA: {clock(eta.left_s)} left" + (f" ({late[2:]})" if late else "")

"""The plan's ETA (core.model.eta) on synthetic sessions: a first figure before any run ends, the runs'
own times once they have them, and a figure that moves while a run goes on."""

from __future__ import annotations

import dataclasses

import pytest

from benchtui.core.model import eta
from benchtui.core.model.session_model import SessionModel
from benchtui.core.plan.estimate import cpu_seconds
from benchtui.core.plan.plan import Plan, from_preset, run_order

STEPS = 4  # steps per epoch of every synthetic run
EPOCHS = 2


def quick(**changes: object) -> Plan:
    plan = from_preset("quick")
    return dataclasses.replace(plan, **{"device": "cpu", "epochs": EPOCHS, **changes})  # type: ignore[arg-type]


class Session:
    """A session model fed by hand: runs start, step at a pace, and end, on a clock of our own."""

    def __init__(self, plan: Plan) -> None:
        self.model = SessionModel(plan)
        self.ids = [spec.run_id for spec in run_order(plan)]
        self.t = 1000.0

    def start(self, n: int) -> str:
        run = self.ids[n]
        spec = self.model.runs[run].spec
        self.model.apply(
            {
                "type": "run_start",
                "t": self.t,
                "run": run,
                "framework": spec.framework,
                "model": spec.model,
                "index": spec.index,
            }
        )
        self.model.apply(
            {
                "v": 1,
                "type": "hello",
                "t": self.t,
                "run": run,
                "pid": 1,
                "framework": spec.framework,
                "steps_per_epoch": STEPS,
                "samples_per_epoch": STEPS * 16,
            }
        )
        return run

    def first_batch(self, run: str) -> None:
        self.model.apply(
            {"v": 1, "type": "phase", "t": self.t, "run": run, "name": "first_batch", "edge": "start"}
        )

    def step(self, run: str, epoch: int, step: int, seconds: float) -> None:
        self.t += seconds
        self.model.apply(
            {
                "v": 1,
                "type": "batch",
                "t": self.t,
                "run": run,
                "epoch": epoch,
                "step": step,
                "seconds": seconds,
                "samples": 16,
            }
        )
        if step == STEPS:
            self.model.apply(
                {
                    "v": 1,
                    "type": "epoch",
                    "t": self.t,
                    "run": run,
                    "epoch": epoch,
                    "seconds": STEPS * seconds,
                    "samples": STEPS * 16,
                }
            )

    def end(self, run: str, status: str = "ok") -> None:
        self.model.apply({"type": "run_end", "t": self.t, "run": run, "status": status})

    def whole_run(self, n: int, build_s: float, step_s: float) -> float:
        """Run ``n`` from start to end; how long it took."""
        begun = self.t
        run = self.start(n)
        self.t += build_s
        self.first_batch(run)
        for epoch in range(1, EPOCHS + 1):
            for step in range(1, STEPS + 1):
                self.step(run, epoch, step, step_s)
        self.end(run)
        return self.t - begun


def test_before_any_run_the_plans_estimate_is_the_figure() -> None:
    plan = quick()
    prior = eta.prior_seconds(plan, 2)
    # Each cell's run is the plan's estimate of that cell alone: together, the estimate of the whole plan.
    assert sum(prior[(s.framework, s.model)] for s in run_order(plan)) == pytest.approx(cpu_seconds(plan, 2))
    session = Session(plan)
    got = eta.plan_eta(session.model, None, prior)
    assert got is not None and got.left_s == pytest.approx(cpu_seconds(plan, 2))
    assert got.estimated == len(session.ids) and not got.scaled and not got.unknown
    assert eta.eta_text(got).startswith("ETA: about ") and eta.eta_text(got).endswith(
        "left (the plan's estimate)"
    )
    # Without an estimate (a GPU plan), nothing can be said before a run has a pace.
    assert eta.plan_eta(session.model, None, None) is None
    assert eta.eta_text(None) == "ETA: after the first run"


def test_the_plans_threads_size_the_estimate() -> None:
    """On a CPU the plan's threads (the idle cores measured before the plan) set the pace, not the host's cores."""
    assert eta.prior_seconds(quick(threads=1), 8) == eta.prior_seconds(quick(), 1)
    assert sum(eta.prior_seconds(quick(threads=1), 8).values()) > sum(eta.prior_seconds(quick(), 8).values())


def test_a_run_building_counts_down_then_says_it_is_late() -> None:
    """Nothing comes from a runner while it imports and builds: the figure still moves with the clock."""
    plan = quick()
    prior = eta.prior_seconds(plan, 2)
    session = Session(plan)
    session.start(0)
    start = session.t
    a = eta.plan_eta(session.model, start + 1, prior)
    b = eta.plan_eta(session.model, start + 6, prior)
    assert a is not None and b is not None and a.left_s - b.left_s == pytest.approx(5)
    figure = prior[("torch", plan.models[0])]
    late = eta.plan_eta(session.model, start + figure + 30, prior)
    later = eta.plan_eta(session.model, start + figure + 90, prior)
    assert late is not None and later is not None
    assert late.over_s == pytest.approx(30) and later.over_s == pytest.approx(90)
    assert late.left_s == pytest.approx(sum(prior.values()) * len(session.ids) / 2 - figure)  # the rest
    assert eta.eta_text(late) != eta.eta_text(later)
    assert "this run 0:30 past its figure" in eta.eta_text(late)


def test_a_run_with_steps_counts_what_it_has_left_at_its_pace() -> None:
    plan = quick(runs=1, frameworks=["torch"])
    session = Session(plan)
    run = session.start(0)
    session.first_batch(run)
    for step in range(1, STEPS + 1):
        session.step(run, 1, step, 0.5)  # epoch 1 done: one epoch of 4 steps left
    got = eta.plan_eta(session.model, session.t, eta.prior_seconds(plan, 2))
    assert got is not None and got.left_s == pytest.approx(STEPS * 0.5) and got.estimated == 0
    assert eta.eta_text(got) == "ETA: 0:02 left"


def test_on_a_gpu_the_run_going_on_gives_its_cell_a_figure_before_it_ends() -> None:
    plan = quick(runs=2, frameworks=["torch"], device="cuda")
    session = Session(plan)
    run = session.start(0)
    session.t += 10.0
    session.first_batch(run)
    for step in range(1, STEPS + 1):
        session.step(run, 1, step, 1.0)
    got = eta.plan_eta(session.model, session.t, None)  # no plan estimate on a GPU
    # This run: 4 steps left at 1 s; the next: as long as this one will have taken (10 + 4 + 4 s).
    assert got is not None and got.left_s == pytest.approx(4 + 18) and not got.unknown


def test_finished_runs_replace_the_estimate_and_scale_it_for_cells_not_timed_yet() -> None:
    plan = quick()  # interleaved: torch 1, tf.keras 1, torch 2, tf.keras 2
    prior = eta.prior_seconds(plan, 2)
    session = Session(plan)
    took = session.whole_run(0, build_s=5.0, step_s=3.0)
    guess = prior[("torch", plan.models[0])]
    got = eta.plan_eta(session.model, session.t, prior)
    factor = took / guess
    assert eta.scale(session.model, prior) == pytest.approx(factor)
    # torch's second run: torch's first run's time; both tf.keras runs: their estimate, scaled.
    keras = prior[("tensorflow", plan.models[0])]
    assert got is not None and got.left_s == pytest.approx(took + 2 * keras * factor)
    assert got.estimated == 2 and got.scaled
    assert eta.eta_text(got).startswith("ETA: about ") and "estimate" not in eta.eta_text(got)
    session.whole_run(1, build_s=5.0, step_s=2.0)
    done = eta.plan_eta(session.model, session.t, prior)
    assert done is not None and done.estimated == 0 and eta.eta_text(done).startswith("ETA: 0:")


def test_a_model_of_unknown_cost_is_counted_not_guessed() -> None:
    plan = quick()
    session = Session(plan)
    prior = {k: v for k, v in eta.prior_seconds(plan, 2).items() if k[0] == "torch"}  # tf.keras: no figure
    got = eta.plan_eta(session.model, None, prior)
    assert got is not None and got.unknown == 2
    assert eta.eta_text(got).startswith("ETA: over ") and "(2 runs not timed yet" in eta.eta_text(got)


def test_clock() -> None:
    assert [eta.clock(s) for s in (None, -1, 0, 59.9, 61, 3600 + 62)] == [
        "0:00",
        "0:00",
        "0:00",
        "0:59",
        "1:01",
        "1:01:02",
    ]

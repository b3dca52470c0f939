"""Summary figures from a fixed event list, checked against values computed by hand."""

from __future__ import annotations

import json

import pytest

from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.stats import describe, quantile
from benchtui.core.model.status import CautionKind
from benchtui.core.plan.plan import run_order
from support import small_plan


def _run_events(
    run: str,
    build: tuple[float, float],
    epochs: list[float],
    batch: float = 0.1,
    first_batch: tuple[float, float] = (10.0, 10.5),
) -> list[dict]:
    ev: list[dict] = [
        {"type": "run_start", "run": run, "t": 0.0},
        {"type": "hello", "run": run, "t": 1.0, "steps_per_epoch": 2, "samples_per_epoch": 16},
        {"type": "phase", "run": run, "t": build[0], "name": "build", "edge": "start"},
        {"type": "phase", "run": run, "t": build[1], "name": "build", "edge": "end"},
        {"type": "phase", "run": run, "t": first_batch[0], "name": "first_batch", "edge": "start"},
        {"type": "phase", "run": run, "t": first_batch[1], "name": "first_batch", "edge": "end"},
    ]
    for e, seconds in enumerate(epochs, 1):
        ev += [
            {"type": "batch", "run": run, "t": 0, "epoch": e, "step": s, "seconds": batch * e, "samples": 8}
            for s in (1, 2)
        ]
        ev.append({"type": "epoch", "run": run, "t": 0, "epoch": e, "seconds": seconds, "samples": 16})
    ev += [
        {"type": "memory", "run": run, "t": 0, "peak_bytes": 1000 + len(epochs), "source": "test"},
        {"type": "done", "run": run, "t": 0, "peak_bytes": 2000},
        {"type": "run_end", "run": run, "t": 0, "status": "ok", "returncode": 0},
    ]
    return ev


def test_headline_figures_match_hand_computation() -> None:
    plan = small_plan()
    ids = {(s.framework, s.index): s.run_id for s in run_order(plan)}
    model = SessionModel(plan)
    for event in _run_events(ids["torch", 1], (2.0, 3.0), [4.0, 2.0, 2.0]) + _run_events(
        ids["torch", 2], (2.0, 4.0), [6.0, 3.0, 1.0]
    ):
        model.apply(event)
    row = model.row("torch", "resnet50")
    # run 1: mean epoch 8/3, first 4, excl. first 2, build 1, img/s 32/4 = 8
    # run 2: mean epoch 10/3, first 6, excl. first 2, build 2, img/s 32/4 = 8
    assert row.status == "ok" and row.runs == 2 and row.batch_size == 8
    assert row.mean_epoch_s == pytest.approx(3.0)
    assert row.first_epoch_s == pytest.approx(5.0)
    assert row.mean_epoch_excl_first_s == pytest.approx(2.0)
    assert row.build_s == pytest.approx(1.5)
    assert row.images_per_s == pytest.approx(8.0)
    assert row.time_to_first_batch_s == pytest.approx(0.5)
    assert row.spread["first_epoch_s"].min == 4.0 and row.spread["first_epoch_s"].max == 6.0
    # batches: 0.1, 0.1, 0.2, 0.2, 0.3, 0.3 per run -> median 0.2
    assert row.median_batch_s == pytest.approx(0.2)
    assert row.peak_memory_bytes == 2000
    # tensorflow never ran: pending, no figures
    other = model.row("tensorflow", "resnet50")
    assert other.status == "pending" and other.mean_epoch_s is None and other.runs == 0


def test_failed_unavailable_and_partial_rows() -> None:
    plan = small_plan(frameworks=["torch", "tensorflow"], runs=2)
    ids = {(s.framework, s.index): s.run_id for s in run_order(plan)}
    model = SessionModel(plan)
    for event in _run_events(ids["torch", 1], (0, 1), [2.0, 1.0, 1.0]):
        model.apply(event)
    model.apply({"type": "run_start", "run": ids["torch", 2], "t": 0})
    model.apply(
        {"type": "error", "run": ids["torch", 2], "t": 0, "kind": "oom", "message": "CUDA out of memory"}
    )
    model.apply(
        {
            "type": "run_end",
            "run": ids["torch", 2],
            "t": 0,
            "status": "failed",
            "reason": "out of memory: CUDA out of memory",
        }
    )
    for i in (1, 2):
        model.apply(
            {
                "type": "run_end",
                "run": ids["tensorflow", i],
                "t": 0,
                "status": "unavailable",
                "reason": "no such model",
            }
        )
    torch_row = model.row("torch", "resnet50")
    assert torch_row.status == "failed" and "out of memory" in torch_row.reason
    assert torch_row.runs == 1 and torch_row.failed_runs == 1
    assert torch_row.mean_epoch_s == pytest.approx(4 / 3)  # figures from the run that finished
    tf_row = model.row("tensorflow", "resnet50")
    assert tf_row.status == "unavailable" and tf_row.reason == "no such model"


def test_single_epoch_throughput_uses_the_only_epoch() -> None:
    plan = small_plan(frameworks=["torch"], runs=1, epochs=1)
    run = run_order(plan)[0].run_id
    model = SessionModel(plan)
    for event in _run_events(run, (0, 1), [4.0]):
        model.apply(event)
    row = model.row("torch", "resnet50")
    assert row.images_per_s == pytest.approx(4.0) and row.mean_epoch_excl_first_s is None


def test_junk_events_are_counted_not_fatal() -> None:
    plan = small_plan(frameworks=["torch"], runs=1)
    run = run_order(plan)[0].run_id
    model = SessionModel(plan)
    model.apply({"type": "batch", "run": run, "epoch": "x", "seconds": None})
    model.apply({"type": "batch", "run": "no-such-run", "epoch": 1, "seconds": 1})
    model.apply({"type": "whatever", "run": run})
    assert model.malformed == 1 and model.unknown_runs == 1


def test_summary_contract() -> None:
    plan = small_plan(frameworks=["torch"], runs=1)
    model = SessionModel(plan)
    for event in _run_events(run_order(plan)[0].run_id, (0, 1), [1.0, 1.0, 1.0]):
        model.apply(event)
    summary = model.summary()
    assert summary["schema"] == 2
    required = {
        "framework",
        "model",
        "batch_size",
        "runs",
        "status",
        "mean_epoch_s",
        "first_epoch_s",
        "mean_epoch_excl_first_s",
        "build_s",
        "images_per_s",
    }
    assert all(required <= set(row) for row in summary["rows"])


def test_summary_contract_is_additive_for_workloads() -> None:
    """Fields added with modern workloads: present on every row, as an old session gets them."""
    plan = small_plan(frameworks=["torch"], runs=1)
    model = SessionModel(plan)
    for event in _run_events(run_order(plan)[0].run_id, (0, 1), [1.0, 1.0, 1.0]):
        model.apply(event)
    summary = model.summary()
    (row,) = summary["rows"]
    assert summary["parity"] == [] and summary["task"] == "train"
    assert row["task"] == "train" and row["kind"] == "image" and row["tokens_per_sample"] == 0
    assert row["tokens_per_s"] is None and row["ci"]["tokens_per_s"] is None
    assert row["params"] is None and row["flops_per_sample"] is None and row["timing"] is None
    # Batch times 0.1 s in epoch 1, 0.2 in 2, 0.3 in 3: all steady (no warm-up to cut), so
    # p50 is 0.2 and p90 and p99 interpolate between the last two.
    assert row["warmup_batches"] == [0]
    assert row["latency_p50_s"] == pytest.approx(0.2) and row["latency_p99_s"] == pytest.approx(0.3)
    assert row["latency_p90_s"] == pytest.approx(quantile([0.1, 0.1, 0.2, 0.2, 0.3, 0.3], 0.9))
    json.dumps(summary)  # still plain JSON


def test_quantiles_match_numpy_linear() -> None:
    vals = [1.0, 2.0, 4.0, 8.0]
    assert quantile(vals, 0.5) == 3.0
    assert quantile(vals, 0.25) == pytest.approx(1.75)
    assert quantile(vals, 0.75) == pytest.approx(5.0)
    stats = describe([3.0, 1.0, 2.0])
    assert stats is not None and (stats["median"], stats["min"], stats["max"], stats["n"]) == (
        2.0,
        1.0,
        3.0,
        3,
    )
    assert describe([]) is None


def test_load_from_other_processes_is_measured_per_run_and_flagged() -> None:
    plan = small_plan(frameworks=["torch"], runs=2)
    first, second = (s.run_id for s in run_order(plan))
    model = SessionModel(plan)
    for run, other in ((first, 1.2), (second, 0.0)):
        for event in _run_events(run, (0, 1), [1.0, 1.0, 1.0]):
            model.apply(event)
            if event["type"] == "phase" and event["name"] == "first_batch" and event["edge"] == "start":
                # the runner uses one core; the machine is busy by 1 + other cores
                for _ in range(4):
                    model.apply(
                        {
                            "type": "gpu",
                            "run": run,
                            "t": 0,
                            "host": {"cpu_percent": 100.0, "rss": 1, "system_busy_cores": 1.0 + other},
                        }
                    )
    runs = list(model.runs.values())
    assert runs[0].other_cpu_sum / runs[0].other_cpu_samples == pytest.approx(1.2)
    assert runs[1].other_cpu_sum == 0.0 and runs[1].other_cpu_samples == 4
    row = model.row("torch", "resnet50")
    assert row.other_cpu_cores == pytest.approx(1.2)
    # The host's core count unrecorded: the load is said, and no verdict loses its winner on a guess.
    assert any("other processes kept 1.2 cores busy" in w["message"] for w in row.warnings)
    # Each caution says its kind, as plain JSON: views pick kinds, never match sentences.
    assert CautionKind.CPU_CONTENTION in [w["kind"] for w in row.warnings]
    assert {"kind": "cpu-contention", "message": row.warnings[-1]["message"]} in json.loads(
        json.dumps(row.warnings)
    )


def test_the_load_figure_is_recomputable_without_the_samples() -> None:
    # The engine writes each run's measured load into its run_end; a loader that folds GPU
    # samples last (as load_session does) or not at all must get the same row as the live fold,
    # which saw the samples while the run trained (and measured another figure from them).
    plan = small_plan(frameworks=["torch"], runs=1)
    run = run_order(plan)[0].run_id
    sample = {
        "type": "gpu",
        "run": run,
        "t": 0,
        "host": {"cpu_percent": 100.0, "rss": 1, "system_busy_cores": 1.4},
    }
    events: list[dict] = []
    for event in _run_events(run, (0, 1), [1.0, 1.0, 1.0]):
        events.append(event)
        if event["type"] == "phase" and event["name"] == "first_batch" and event["edge"] == "start":
            events += [sample] * 4  # 0.4 cores busy elsewhere, as sampled during the run
    events[-1] = {**events[-1], "other_cpu_cores": 0.9}  # the run_end, as the engine records it
    live, samples_last, no_samples = SessionModel(plan), SessionModel(plan), SessionModel(plan)
    for event in events:
        live.apply(event)
    for event in [e for e in events if e["type"] != "gpu"] + [e for e in events if e["type"] == "gpu"]:
        samples_last.apply(event)
    for event in events:
        if event["type"] != "gpu":
            no_samples.apply(event)
    assert live.runs[run].other_cpu_samples == 4 and samples_last.runs[run].other_cpu_samples == 0
    rows = [m.row("torch", "resnet50") for m in (live, samples_last, no_samples)]
    assert [r.other_cpu_cores for r in rows] == [pytest.approx(0.9)] * 3
    assert rows[0].warnings == rows[1].warnings == rows[2].warnings
    reloaded = no_samples
    assert any("kept 0.9 cores busy" in w["message"] for w in reloaded.row("torch", "resnet50").warnings)


def test_a_rows_batch_size_is_what_its_runs_used_else_the_search_s_choice_else_the_plan_s() -> None:
    """``--batch-size auto`` leaves the plan as given: the row says the size the batch search chose before
    any run, then what the runner echoed in its config; a session with neither says the plan's size."""
    plan = small_plan(batch_sizes={}, batch_auto=True)
    ids = {(s.framework, s.index): s.run_id for s in run_order(plan)}
    model = SessionModel(plan)
    assert model.row("torch", "resnet50").batch_size == plan.batch_size("resnet50")  # nothing chosen yet
    model.apply(
        {"type": "batch_choice", "t": 0.0, "model": "resnet50", "chosen": {"torch": 12, "tensorflow": 6}}
    )
    assert [model.row(fw, "resnet50").batch_size for fw in ("torch", "tensorflow")] == [12, 6]
    events = _run_events(ids["torch", 1], (2.0, 3.0), [4.0, 2.0, 2.0])
    events[1] = {**events[1], "config": {"batch_size": 10}}  # the runner says what it ran
    for event in events:
        model.apply(event)
    assert model.row("torch", "resnet50").batch_size == 10
    assert model.summary()["rows"][0]["batch_size"] == 10
    assert plan.batch_sizes == {}  # the plan as given

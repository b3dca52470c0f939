"""Several nodes (issue 33), the model: node k's events fold apart from the run's own, each node's figures,
the straggler among them, and the scaling curve over nodes x devices.

Sessions are written by tests/sessionfactory.py with ``nodes=``: node k's share of each run as node 0
records it (tagged ``node``), ``node_speed`` making a node slower.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model.cell import CellSummary, NodeFigures, ScalingPoint, SessionSummary
from benchtui.core.model.scaling import STRAGGLER_RATIO
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import RunStatus
from benchtui.core.plan.plan import Plan
from benchtui.core.store.session import load_session
from sessionfactory import make_session, read_events

#: What a row says of its nodes: everything else is the run's own figures.
NODE_KEYS = ("nodes", "per_node", "node_straggler", "link")


def fold(plan: Plan, events: list[dict[str, Any]]) -> SessionModel:
    model = SessionModel(plan)
    for event in events:
        model.apply(json.loads(json.dumps(event)))  # a fresh copy: the fold must not share the caller's dicts
    return model


def plan_of(path: Path) -> Plan:
    return Plan.from_dict(json.loads((path / "session.json").read_text())["plan"])


def own(row: CellSummary) -> dict[str, Any]:
    """A row's figures less what it says of its nodes."""
    data = row.to_json()
    for key in NODE_KEYS:
        data.pop(key, None)
    return data


@pytest.mark.parametrize("devices", [1, 2])
def test_node_events_never_change_node_0_s_figures(tmp_path: Path, devices: int) -> None:
    """Node 1 three times slower and differently sampled: node 0's figures are those of its events alone."""
    path = make_session(tmp_path, nodes=2, devices=devices, node_speed={1: 3.0}, runs=2)
    plan, events = plan_of(path), list(read_events(path))
    tagged = [e for e in events if "node" in e]
    assert {e["type"] for e in tagged} >= {"run_start", "hello", "batch", "epoch", "gpu", "run_end"}
    whole, alone = fold(plan, events), fold(plan, [e for e in events if "node" not in e])
    assert whole.malformed == alone.malformed == 0
    assert len(whole.gpu_samples) == len(alone.gpu_samples)  # node 1's samples are not the session's
    for rid, run in whole.runs.items():
        other = alone.runs[rid]
        assert run.figures() == other.figures()
        assert list(run.batch_seconds) == list(other.batch_seconds)
        assert run.epoch_times == other.epoch_times and run.status is other.status is RunStatus.OK
        assert run.per_gpu() == other.per_gpu() and run.rank_step_s() == other.rank_step_s()
        assert list(run.nodes) == [1] and not other.nodes
    for a, b in zip(whole.rows(), alone.rows(), strict=True):
        assert own(a) == own(b)
    # And node 1 is there: its own epochs, slower, and its own host.
    share = next(iter(whole.runs.values())).nodes[1]
    assert share.host == "bench-02" and share.pid is not None and share.status is RunStatus.OK
    assert len(share.epoch_times) == plan.epochs


def test_each_node_s_figures(tmp_path: Path) -> None:
    path = make_session(tmp_path, nodes=2, devices=2, node_speed={1: 1.25}, runs=2, frameworks=("torch",))
    model = load_session(path).model
    (row,) = model.rows()
    assert row.nodes == 2 and row.per_node is not None and row.link == "NCCL (NCCL_NET Socket)"
    node0, node1 = row.per_node
    assert (node0.host, node0.ranks, node1.host, node1.ranks) == ("bench-01", (0, 2), "bench-02", (2, 2))
    runs = model.cell_runs("torch", "resnet50")
    # A node's step time: its steps after the first epoch, a mean over the runs.
    for figures, shares in ((node0, runs), (node1, [r.nodes[1] for r in runs])):
        per_run = []
        for share in shares:
            later = [s for s, e in zip(share.batch_seconds, share.batch_epochs, strict=True) if e > 1]
            per_run.append(sum(later) / len(later))
        assert figures.step_s == pytest.approx(sum(per_run) / len(per_run), rel=1e-12)
    assert node1.step_s / node0.step_s == pytest.approx(1.25, rel=0.05)
    # Each node's ranks' step times: the run's own gather, given to the node by its hello's ranks.
    for k, figures in enumerate((node0, node1)):
        for i, value in enumerate(figures.rank_step_s):
            rank = 2 * k + i
            want = [r.rank_step_s()[rank] for r in runs]
            assert value == pytest.approx(sum(want) / len(want), rel=1e-12)
    # GPUs: node 0's from its run_end, node 1's from its own (relayed) run_end.
    assert (node0.util, node1.util) == (pytest.approx(91.5), pytest.approx(84.5))
    assert node1.mem_max == int(13.5 * 1024**3) and node0.status == node1.status == "ok"
    # summary.json reads back to the same typed figures.
    assert CellSummary.from_json(row.to_json()) == row
    summary = SessionSummary.from_json(model.summary())
    assert summary.nodes == 2 and summary.rows[0].per_node == row.per_node


def test_ranks_go_to_the_node_whose_hello_names_them(tmp_path: Path) -> None:
    """torchrun's c10d need not give node k the ranks k x nproc: node 1's hello says it has ranks 0-1."""
    path = make_session(tmp_path, nodes=2, devices=2, node_speed={1: 1.3}, runs=1, frameworks=("torch",))
    events = list(read_events(path))
    for event in events:
        if event["type"] == "hello":
            event["settings"]["distributed"]["ranks"] = [2, 2] if "node" not in event else [0, 2]
    model = fold(plan_of(path), events)
    (row,) = model.rows()
    assert row.per_node is not None
    (run,) = model.cell_runs("torch", "resnet50")
    paces = run.rank_step_s()
    assert row.per_node[0].ranks == (2, 2) and row.per_node[0].rank_step_s == tuple(paces[2:4])
    assert row.per_node[1].ranks == (0, 2) and row.per_node[1].rank_step_s == tuple(paces[0:2])


def test_a_slow_node_is_named_the_straggler(tmp_path: Path) -> None:
    path = make_session(tmp_path, nodes=2, devices=2, node_speed={1: 1.3}, runs=2, frameworks=("torch",))
    (row,) = load_session(path).model.rows()
    slow = row.node_straggler
    assert row.per_node is not None and slow is not None
    ratio = row.per_node[1].step_s / row.per_node[0].step_s  # type: ignore[operator]
    assert slow.ratio == pytest.approx(ratio) and slow.ratio >= STRAGGLER_RATIO and slow.named
    assert (slow.node, slow.host, slow.rank) == (1, "bench-02", 3)
    assert slow.text.startswith(
        f"straggler: node 1 (bench-02), {ratio:.2f}× the step time of the fastest, node 0"
    )
    assert f"slowest rank 3, {slow.rank_ratio:.2f}× the fastest rank's" in slow.text


def test_nodes_within_the_ratio_name_no_straggler(tmp_path: Path) -> None:
    path = make_session(
        tmp_path, nodes=2, node_speed={1: 1.03}, runs=2, frameworks=("tensorflow",), noise=0.0
    )
    (row,) = load_session(path).model.rows()
    slow = row.node_straggler
    assert slow is not None and not slow.named and slow.ratio < STRAGGLER_RATIO
    assert slow.text == f"no straggler: nodes within {slow.ratio - 1:.0%} of each other's step time"
    assert slow.ratio - 1 >= 0.01  # a whole percent; under one, a tenth ("within 0.1%", never "within 0%")
    assert slow.rank is None  # tf.keras times no rank of its own


def test_nodes_within_a_percent_say_a_tenth_of_one(tmp_path: Path) -> None:
    path = make_session(
        tmp_path, nodes=2, node_speed={1: 1.004}, runs=2, frameworks=("tensorflow",), noise=0.0
    )
    (row,) = load_session(path).model.rows()
    slow = row.node_straggler
    assert slow is not None and slow.ratio - 1 < 0.01
    assert slow.text == f"no straggler: nodes within {slow.ratio - 1:.1%} of each other's step time"
    assert "within 0%" not in slow.text and "within 0.0%" not in slow.text


def test_a_node_that_sent_nothing_is_said_so(tmp_path: Path) -> None:
    path = make_session(tmp_path, nodes=3, runs=1, frameworks=("torch",))
    events = [e for e in read_events(path) if e.get("node") != 2]
    (row,) = fold(plan_of(path), events).rows()
    assert row.per_node is not None
    assert [f.node for f in row.per_node] == [0, 1, 2]
    assert row.per_node[2] == NodeFigures(node=2, runs=0, status="not reported")


def test_efficiency_over_workers_is_throughput_over_workers_times_one(tmp_path: Path) -> None:
    """--scaling on 2 nodes of 2 devices: points 1x1, 1x2, 2x2; efficiency(w) = thr(w) / (w x thr(1))."""
    path = make_session(
        tmp_path, nodes=2, devices=2, scaling=True, runs=2, frameworks=("torch", "tensorflow")
    )
    model = load_session(path).model
    assert [(at.nodes, at.devices) for at in model.plan.scale_points()] == [(1, 1), (1, 2), (2, 2)]
    curves = model.scaling()
    assert len(curves) == 2
    for curve in curves:
        fw = curve.framework

        def thr(nodes: int, devices: int, fw: str = fw) -> float:
            runs = model.cell_runs(fw, "resnet50", devices, nodes=nodes)
            assert runs and all(r.spec.nodes == nodes and r.spec.devices == devices for r in runs)
            samples = sum(s for r in runs for e, s in r.epoch_samples.items() if e > 1)
            seconds = sum(t for r in runs for e, t in r.epoch_times.items() if e > 1)
            return samples / seconds

        one = thr(1, 1)
        assert [(p.nodes, p.devices, p.workers) for p in curve.points] == [(1, 1, 1), (1, 2, 2), (2, 2, 4)]
        for point in curve.points:
            w = point.workers
            assert point.images_per_s == pytest.approx(thr(point.nodes, point.devices), rel=1e-9)
            assert point.efficiency == pytest.approx(thr(point.nodes, point.devices) / (w * one), rel=1e-9)
            assert point.global_batch == point.per_device_batch * w
            assert point.efficiency_ci is not None or w == 1
        assert "2 nodes × 2 devices: " in curve.text and "one worker's throughput" in curve.text
    # Every table's row is the plan's point: 2 nodes of 2 devices.
    for row in model.rows():
        assert all("-n2x2-" in rid for rid in row.run_ids) and row.global_batch == 16 * 4


def test_scaling_over_nodes_of_one_device(tmp_path: Path) -> None:
    path = make_session(tmp_path, nodes=2, devices=1, scaling=True, runs=2, frameworks=("torch",))
    model = load_session(path).model
    (curve,) = model.scaling()
    base, two = curve.points
    assert (base.nodes, base.devices, two.nodes, two.devices) == (1, 1, 2, 1)
    assert two.efficiency == pytest.approx(two.images_per_s / (2 * base.images_per_s), rel=1e-9)  # type: ignore[operator]
    assert two.to_json()["nodes"] == 2 and two.to_json()["workers"] == 2
    assert ScalingPoint.from_json(two.to_json()) == two


def test_one_node_scaling_points_read_as_before(tmp_path: Path) -> None:
    """A scaling session on one machine: its points carry no node key, the summary no nodes."""
    path = make_session(tmp_path, devices=2, scaling=True, runs=2)
    summary = load_session(path).model.summary()
    assert "nodes" not in summary
    for curve in summary["scaling"]:
        assert all("nodes" not in p and "workers" not in p for p in curve["points"])
    assert all(not set(NODE_KEYS) & set(row) for row in summary["rows"])
    assert math.isfinite(summary["scaling"][0]["points"][1]["efficiency"])


def test_a_node_s_gpus_from_its_samples_where_its_run_end_has_none(tmp_path: Path) -> None:
    """Node 1's run_end without its GPUs' figures: they come from its samples while it trained, the same
    folded live (in order) and loaded (samples last, as ``load_session`` folds them)."""
    path = make_session(tmp_path, nodes=2, runs=2, frameworks=("torch",))
    events = list(read_events(path))
    for event in events:
        if event["type"] == "run_end" and event.get("node") == 1:
            del event["per_gpu"]
    # As the engine writes them (compact): loading holds the GPU samples back by that prefix.
    lines = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    (path / "events.jsonl").write_text(lines, encoding="utf-8")
    (path / "summary.json").unlink()
    starts = {
        e["run"]: e["t"]
        for e in events
        if e.get("node") == 1 and e["type"] == "phase" and e["name"] == "first_batch" and e["edge"] == "start"
    }
    ends = {e["run"]: e["t"] for e in events if e.get("node") == 1 and e["type"] == "run_end"}
    per_run = []
    for rid in starts:
        utils = [
            e["gpus"][0]["util"]
            for e in events
            if e["type"] == "gpu"
            and e.get("node") == 1
            and e["run"] == rid
            and starts[rid] < e["t"] <= ends[rid]
        ]
        assert len(utils) > 3 and min(utils) >= 80  # busy: the factory's node samples while it trains
        per_run.append(sum(utils) / len(utils))
    want = sum(per_run) / len(per_run)
    live = fold(plan_of(path), events)
    loaded = load_session(path).model
    for model in (live, loaded):
        (row,) = model.rows()
        assert row.per_node is not None and row.per_node[1].util == pytest.approx(want, rel=1e-12)

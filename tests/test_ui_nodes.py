"""The live screen of a session on several nodes (issue 33): a row per node of the run in progress, in replay.

Sessions are written by tests/sessionfactory.py with ``nodes=2`` (node 1's share of each run tagged
``node``, as node 0 records it) and replayed through the live screen, as ``benchtui replay`` does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from benchtui.app import BenchApp, make_app
from benchtui.core.model.runs import RunState
from benchtui.core.model.status import RunStatus
from benchtui.screens.live import TICK_S, ScalingView
from benchtui.widgets.comparison import BatchComparison
from benchtui.widgets.node_rows import NodeRows
from benchtui.widgets.results_table import ResultsTable
from sessionfactory import make_session
from test_ui_replay import finished

GIB = 1024**3


async def until(pilot, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.01)


def rows(app: BenchApp) -> list[str]:
    return app.screen.query_one(NodeRows).texts()


def step(share: RunState) -> str:
    return f"step {share.batch_seconds[-1] * 1000:.1f} ms"


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return make_session(tmp_path, nodes=2, node_speed={1: 1.5}, runs=2, steps=40, epochs=2)


@pytest.mark.asyncio
async def test_a_row_per_node_while_a_run_trains(session: Path) -> None:
    app = make_app(replay=session, speed=20)
    async with app.run_test(size=(120, 45)) as pilot:

        def training() -> bool:
            model = app.replayer.model if app.replayer else None
            run = model.runs.get(model.current) if model and model.current else None
            share = run.nodes.get(1) if run is not None else None
            return (
                share is not None
                and run is not None
                and run.status is RunStatus.RUNNING
                and share.status is RunStatus.RUNNING
                and len(run.batch_seconds) > 3
                and len(share.batch_seconds) > 3
                and bool(share.last_gpus)
            )

        await until(pilot, training)
        assert app.replayer is not None
        app.replayer.pause()
        await pilot.pause(3 * TICK_S)
        model = app.replayer.model
        assert model.current is not None
        run = model.runs[model.current]
        share = run.nodes[1]
        panel = app.screen.query_one(NodeRows)
        assert panel.display and str(panel.border_title) == f"Nodes · {run.spec.run_id} · 2 machines"
        node0, node1 = rows(app)
        assert node0.startswith("node 0 · bench-01 · running · ") and step(run) in node0
        assert node1.startswith("node 1 · bench-02 · running · ") and step(share) in node1
        # Each node's GPUs now: node 0's from the session's newest sample, node 1's from its own.
        gpus = share.last_gpus
        util = sum(g["util"] for g in gpus) / len(gpus)
        assert node1.endswith(f"GPU {util:.0f}% · {sum(g['mem_used'] for g in gpus) / GIB:.1f} GiB")
        sample = next(s for s in reversed(model.gpu_samples) if s.get("run") == run.spec.run_id)
        gpu0 = sample["gpus"][sample["watched"]]
        assert node0.endswith(f"GPU {gpu0['util']:.0f}% · {gpu0['mem_used'] / GIB:.1f} GiB")
        # The status line and the results table say the nodes.
        status = app.screen.query_one("#status").render().plain
        assert "· 2 nodes × 1 device ·" in status
        key = f"resnet50|{run.spec.framework}"
        assert (
            app.screen.query_one(ResultsTable).cell_text(key, "devices") == "2×1 × 16 = 32"
        )  # nodes × devices × the per-device batch


@pytest.mark.asyncio
async def test_the_last_run_s_nodes_once_replayed(session: Path) -> None:
    app = make_app(replay=session, speed=math.inf)
    async with app.run_test(size=(80, 24)) as pilot:
        await finished(pilot, app)
        await pilot.pause(2 * TICK_S)
        assert app.replayer is not None
        model = app.replayer.model
        last = list(model.runs.values())[-1]
        node0, node1 = rows(app)
        assert node0.startswith("node 0 · bench-01 · ok · ") and step(last) in node0
        assert node1.startswith("node 1 · bench-02 · ok · ") and step(last.nodes[1]) in node1


@pytest.mark.asyncio
async def test_scaling_over_nodes_says_nodes_by_devices(tmp_path: Path) -> None:
    path = make_session(tmp_path, nodes=2, scaling=True, runs=2, frameworks=("torch",))
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(120, 45)) as pilot:
        await finished(pilot, app)
        await pilot.pause(2 * TICK_S)
        view = app.screen.query_one(ScalingView)
        assert str(view.border_title) == "Scaling · ResNet50 · img/s by nodes×devices, efficiency vs 1"
        assert app.replayer is not None
        (curve,) = app.replayer.model.scaling()
        base, two = curve.points
        assert two.efficiency is not None
        (text,) = view.texts()
        assert text.split()[1:3] == ["1×1", f"{base.images_per_s:,.0f}"]
        assert f"· 2×1 {two.images_per_s:,.0f} img/s {two.efficiency:.0%}" in text


@pytest.mark.asyncio
async def test_one_node_sessions_show_no_nodes(tmp_path: Path) -> None:
    app = make_app(replay=make_session(tmp_path, runs=1), speed=math.inf)
    async with app.run_test(size=(120, 45)) as pilot:
        await finished(pilot, app)
        assert not app.screen.query_one(NodeRows).display
        assert rows(app) == []


@pytest.mark.asyncio
async def test_the_strips_follow_a_one_node_point_of_a_scaling_over_nodes(tmp_path: Path) -> None:
    """While 1 node of 2 devices trains (a scaling over nodes goes through it first), the strips are that
    point's runs and their title says 1×2; the 2-node runs are not it."""
    path = make_session(tmp_path, nodes=2, devices=2, scaling=True, runs=1, frameworks=("torch",), steps=40)
    app = make_app(replay=path, speed=20)
    async with app.run_test(size=(120, 45)) as pilot:

        def on_one_by_two() -> bool:
            model = app.replayer.model if app.replayer else None
            run = model.runs.get(model.current) if model and model.current else None
            return (
                run is not None
                and (run.spec.nodes, run.spec.devices) == (1, 2)
                and run.status is RunStatus.RUNNING
                and len(run.batch_seconds) > 2
            )

        await until(pilot, on_one_by_two)
        assert app.replayer is not None
        app.replayer.pause()
        await pilot.pause(3 * TICK_S)
        model = app.replayer.model
        assert model.current is not None
        comparison = app.screen.query_one(BatchComparison)
        assert str(comparison.border_title).startswith("ResNet50 1×2 · time per batch")
        assert [s.run.spec.run_id for s in comparison.strips["torch"]] == [model.current]

"""The engine runs a sweep: each point's runs with that point's settings, an auto batch searched per point
(the fake runner stands in for a framework; the probes are the test's), and a point where no batch fits
fails only its own runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from benchtui.core.plan.plan import Plan
from benchtui.core.plan.sweep import NO_POINT, Point
from benchtui.core.running.engine import Engine
from benchtui.core.store.session import SessionWriter
from support import FakeLauncher


def test_a_point_where_no_batch_fits_fails_alone_and_the_others_run_at_their_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = Plan(
        frameworks=["torch"],
        models=["resnet50_v1_5"],
        image_size=32,
        samples=16,
        epochs=1,
        runs=1,
        device="cpu",
        threads=1,
        sweep={"batch": ["auto", "4"], "precision": ["fp32", "amp-fp16"]},
    ).validate()
    engine = Engine(plan, SessionWriter.create(plan, tmp_path), launcher=FakeLauncher("--batch-s", "0"))

    async def probe(framework: str, model: str, batch: int, point: Point = NO_POINT) -> str:
        if point.get("precision") == "amp-fp16":
            return "oom"  # nothing fits at this point (on this made-up machine)
        return "ok" if batch <= 8 else "oom"

    monkeypatch.setattr(engine, "_probe", probe)
    assert asyncio.run(engine.run()) == "failed"
    events = [json.loads(line) for line in (engine.writer.path / "events.jsonl").read_text().splitlines()]
    echoed = {e["run"]: e["config"]["batch_size"] for e in events if e.get("type") == "hello"}
    assert echoed == {
        "001-torch-resnet50_v1_5-batch-auto_precision-fp32-1": 8,  # the search's choice at its point
        "003-torch-resnet50_v1_5-batch4_precision-fp32-1": 4,
        "004-torch-resnet50_v1_5-batch4_precision-amp-fp16-1": 4,
    }
    ends = {e["run"]: e for e in events if e.get("type") == "run_end"}
    failed = ends["002-torch-resnet50_v1_5-batch-auto_precision-amp-fp16-1"]
    assert failed["status"] == "failed" and failed["reason"].startswith("no batch size trains")
    assert all(e["status"] == "ok" for run, e in ends.items() if run in echoed)
    choices = [(e.get("point"), e["chosen"]) for e in events if e.get("type") == "batch_choice"]
    assert choices == [("batch=auto,precision=fp32", {"torch": 8}), ("batch=auto,precision=amp-fp16", {})]
    configs = {e["run"]: e["config"]["precision"] for e in events if e.get("type") == "hello"}
    assert configs["004-torch-resnet50_v1_5-batch4_precision-amp-fp16-1"] == "amp-fp16"


def test_a_plan_without_a_sweep_searches_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--batch-size auto without a sweep: one search per model, its batch_choice without a point, the size
    in the resolved plan (and so in session.json), as before sweeps."""
    plan = Plan(
        frameworks=["torch", "tensorflow"], models=["resnet50"], device="cpu", samples=64, batch_auto=True
    ).validate()
    engine = Engine(plan, SessionWriter.create(plan, tmp_path))
    sizes = {"torch": 16, "tensorflow": 8}

    async def probe(framework: str, model: str, batch: int) -> str:
        return "ok" if batch <= sizes[framework] else "oom"

    monkeypatch.setattr(engine, "_probe", probe)
    monkeypatch.setattr("benchtui.core.running.engine.catalog.available", lambda fw, m: (True, ""))
    assert [(m, p, fws) for m, p, fws in engine.searches()] == [
        ("resnet50", NO_POINT, ["torch", "tensorflow"])
    ]
    asyncio.run(engine._search_batches())
    assert engine.batch_choices == {"resnet50": 8} and engine.point_batches == {}
    (choice,) = engine.model.batch_choices.values()
    assert "point" not in choice and choice["chosen"] == {"torch": 8, "tensorflow": 8}

"""The typed summary: ``CellSummary``/``SessionSummary`` and their one mapping to summary.json.

summary.json's schema did not change with the types: a row read back by ``from_json`` and written by
``to_json`` is the same JSON, keys in the same order, for every kind of row the model makes; an older
file (schema 1) still loads.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model.cell import (
    NO_TIMINGS,
    NO_TIMINGS_FAILED,
    CellSummary,
    DeviceFigures,
    FrameworkRatio,
    NetworkIdentity,
    ParityEntry,
    PerFlop,
    RefusedRatio,
    ScalingCurve,
    ScalingPoint,
    SessionSummary,
    Spread,
)
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import CautionKind, CellStatus
from benchtui.core.model.why import WhyTable
from benchtui.core.plan.plan import run_order, watch_plan
from benchtui.core.reporting.model import build_report
from benchtui.core.store.session import load_session
from sessionfactory import DENSENET121_NETWORKS, RESNET50_NETWORKS, make_session

DATA = Path(__file__).parent / "data"


def _text(value: Any) -> str:
    """JSON text, keys in their order: what summary.json holds byte for byte."""
    return json.dumps(value, indent=2)


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("cells")
    paths = {
        "study": make_session(root, name="study", models=("resnet50", "densenet121"), runs=2, folder="study"),
        "scaling": make_session(
            root, name="scaling", devices=4, scaling=True, gpu=True, runs=2, folder="scaling"
        ),
        "failed": make_session(
            root,
            name="failed",
            runs=2,
            fail={("tensorflow", "resnet50", 1): {"kind": "oom", "message": "OOM", "epoch": 2}},
            folder="failed",
        ),
    }
    for name in ("tiny-cpu-session", "gpu-session"):
        shutil.copytree(DATA / name, root / name)
        paths[name] = root / name
    return {name: load_session(path).model.summary() for name, path in paths.items()}


def _watch_row(status: str, reason: str = "") -> dict[str, Any]:
    """A watch session's row whose command sent no timing: its reason is set last in the row."""
    plan = watch_plan(["python", "train.py"], "/tmp")
    model = SessionModel(plan)
    (spec,) = run_order(plan)
    model.apply({"type": "run_start", "run": spec.run_id, "t": 1.0})
    model.apply({"type": "run_end", "run": spec.run_id, "t": 2.0, "status": status, "reason": reason})
    (row,) = model.summary()["rows"]
    return row


def test_every_row_reads_back_to_the_same_json(summaries: dict[str, dict[str, Any]]) -> None:
    kinds = set()
    for summary in summaries.values():
        for row in summary["rows"]:
            assert _text(CellSummary.from_json(row).to_json()) == _text(row)
            kinds.add((row["status"], "per_device" in row, row["batch"] is None))
        assert _text(SessionSummary.from_json(summary).to_json()) == _text(summary)
    # The rows above reach the model's kinds: ok, failed and pending cells, data parallel or not.
    assert {"ok", "failed"} <= {k[0] for k in kinds} and {True, False} <= {k[1] for k in kinds}


def test_a_watch_rows_late_reason_stays_where_the_row_put_it() -> None:
    alone = _watch_row("ok")
    assert alone["reason"] == NO_TIMINGS and list(alone)[-2:] == ["reason", "run_ids"]
    assert _text(CellSummary.from_json(alone).to_json()) == _text(alone)
    crashed = _watch_row("failed", "exit code 1")
    assert crashed["reason"] == f"exit code 1; {NO_TIMINGS_FAILED}"
    assert list(crashed).index("reason") == list(crashed).index("status") + 1
    assert _text(CellSummary.from_json(crashed).to_json()) == _text(crashed)


def test_the_rows_are_typed_and_frozen(summaries: dict[str, dict[str, Any]]) -> None:
    summary = SessionSummary.from_json(summaries["scaling"])
    row = summary.rows[0]
    assert isinstance(row.status, CellStatus) and isinstance(row.batch, Spread)
    spread = row.spread_of("mean_epoch_s")
    assert isinstance(spread, Spread) and spread.ci is not None  # the headline spreads carry their CI
    assert row.batch.ci is None  # the batch times' description has none (no keys in the file)
    assert row.per_device is not None and all(isinstance(d, DeviceFigures) for d in row.per_device)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.runs = 0  # type: ignore[misc]


def test_an_older_summary_row_loads() -> None:
    """Schema 1: warnings were sentences, and the later keys are absent: each takes its empty value."""
    old = {
        "framework": "torch",
        "model": "resnet50",
        "batch_size": 16,
        "runs": 1,
        "runs_planned": 1,
        "failed_runs": 0,
        "status": "ok",
        "mean_epoch_s": 1.5,
        "ci": {"mean_epoch_s": [1.4, 1.6]},
        "warnings": ["batch times vary"],
    }
    row = CellSummary.from_json(old)
    assert row.mean_epoch_s == 1.5 and row.ci_of("mean_epoch_s") == (1.4, 1.6)
    assert row.warnings[0]["message"] == "batch times vary" and row.per_device is None
    assert row.task == "train" and row.kind == "image" and row.devices == 1 and row.run_ids == ()


def test_rows_carry_a_refused_ratio_as_summary_json_does(tmp_path: Path) -> None:
    """A pair that ran on different devices: the cells' rows say so, from ``rows()`` as in the file."""
    path = make_session(tmp_path, name="mixed", runs=1, gpu=True, folder="mixed")
    model = load_session(path).model
    for run in model.runs.values():  # tf.keras on the CPU: no ratio against PyTorch on the GPU
        if run.spec.framework == "tensorflow":
            run.hello = {**run.hello, "device": {"type": "cpu"}}
    rows = model.rows()
    said = [w for r in rows for w in r.warnings if w["kind"] == CautionKind.MIXED_DEVICES]
    assert len(said) == 2
    assert [r.to_json() for r in rows] == model.summary()["rows"]


def test_a_report_from_summary_json_is_the_report_from_the_model(
    summaries: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    shutil.copytree(DATA / "tiny-cpu-session", tmp_path / "s")
    loaded = load_session(tmp_path / "s")
    typed, from_dict = build_report(loaded), build_report(loaded, loaded.model.summary())
    assert typed.rows == from_dict.rows and typed.summary == from_dict.summary
    assert typed.answer == from_dict.answer


#: The session-wide entries beside the rows, by their summary.json key, and the type each is read as.
ENTRIES = {
    "ratios": FrameworkRatio,
    "refused_ratios": RefusedRatio,
    "parity": ParityEntry,
    "scaling": ScalingCurve,
    "why": WhyTable,
}


@pytest.fixture(scope="module")
def entry_sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SessionModel]:
    """Sessions that between them have every kind of entry: verdicts with parity and per FLOP, a profile's
    why, a scaling curve and a pair refused (different devices)."""
    root = tmp_path_factory.mktemp("entries")
    shares = {"conv": 0.6, "norm": 0.1, "elementwise": 0.1, "optimizer": 0.1, "idle": 0.1}
    study = make_session(
        root,
        name="study",
        models=("resnet50", "densenet121"),
        runs=2,
        networks={**RESNET50_NETWORKS, **DENSENET121_NETWORKS},
        profile={("torch", "resnet50"): {"shares": shares}, ("tensorflow", "resnet50"): {"shares": shares}},
        folder="study",
    )
    scaling = make_session(root, name="scaling", devices=4, scaling=True, gpu=True, runs=2, folder="scaling")
    mixed = load_session(make_session(root, name="mixed", runs=1, gpu=True, folder="mixed")).model
    for run in mixed.runs.values():  # tf.keras on the CPU: no ratio against PyTorch on the GPU
        if run.spec.framework == "tensorflow":
            run.hello = {**run.hello, "device": {"type": "cpu"}}
    return {"study": load_session(study).model, "scaling": load_session(scaling).model, "mixed": mixed}


def test_every_session_entry_is_typed_and_frozen(entry_sessions: dict[str, SessionModel]) -> None:
    """No JSON object crosses from the model to a writer or a screen: each entry is its type."""
    seen: set[str] = set()
    for model in entry_sessions.values():
        summary = model.session_summary()
        for key, kind in ENTRIES.items():
            entries = getattr(summary, key)
            assert all(isinstance(e, kind) for e in entries), key
            seen |= {key} if entries else set()
            for entry in entries:
                with pytest.raises(dataclasses.FrozenInstanceError):
                    entry.model = "other"
    assert seen == set(ENTRIES)  # the sessions above reach every kind
    study = entry_sessions["study"].session_summary()
    flagged = next(r for r in study.ratios if r.model == "resnet50")
    assert flagged.parity_flagged and isinstance(flagged.per_flop, PerFlop)
    assert flagged.per_flop.faster_framework == "torch" and "per FLOP" in flagged.text
    parity = next(p for p in study.parity if p.model == "resnet50")
    assert parity.flagged and all(isinstance(i, NetworkIdentity) for i in parity.frameworks.values())
    curve = entry_sessions["scaling"].session_summary().scaling[0]
    assert all(isinstance(p, ScalingPoint) for p in curve.points) and curve.points[0].devices == 1
    assert curve.points[-1].efficiency_ci is not None and curve.points[-1].single_run is False


def test_every_session_entry_reads_back_to_the_same_json(entry_sessions: dict[str, SessionModel]) -> None:
    """``from_json`` then ``to_json`` of each entry is summary.json's text, keys in the same order."""
    for name, model in entry_sessions.items():
        data = model.summary()
        again = SessionSummary.from_json(json.loads(json.dumps(data))).to_json()
        for key in ENTRIES:
            assert _text(again[key]) == _text(data[key]), (name, key)
        assert _text(again) == _text(data), name


def test_an_older_summarys_entries_load() -> None:
    """A verdict before the marks (no unreliable, about_same, per_flop, parity_flagged) and a scaling point
    without an interval load with their empty values; an entry that is not an object is left out."""
    old = {
        "schema": 2,
        "rows": [],
        "ratios": [
            {"model": "resnet50", "base": "torch", "framework": "tensorflow", "ratio": 1.2, "text": "faster"},
            "not an entry",
        ],
        "scaling": [{"framework": "torch", "model": "resnet50", "points": [{"devices": 1, "runs": 2}]}],
    }
    summary = SessionSummary.from_json(old)
    (ratio,) = summary.ratios
    assert ratio.ratio == 1.2 and ratio.text == "faster"
    assert ratio.unreliable is None and ratio.per_flop is None and not ratio.parity_flagged
    assert not ratio.about_same and ratio.faster_framework is None
    (point,) = summary.scaling[0].points
    assert point.images_per_s is None and point.efficiency_ci is None and point.single_run is None
    assert summary.parity == () and summary.why == () and summary.refused_ratios == ()

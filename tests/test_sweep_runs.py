"""A real sweep at tiny sizes, per framework: every run goes to its runner with its point's settings, and the
runner's own echo (its hello's config and settings) says so. PyTorch and tf.keras in one headless session,
Keras/JAX and Keras/torch in another; the sweep's size is said before the first run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support import benchtui, only_session

pytestmark = pytest.mark.slow

TINY = [
    "--models",
    "vit_ti_16",
    "--image-size",
    "32",
    "--samples",
    "8",
    "--epochs",
    "1",
    "--runs",
    "1",
]
TINY += ["--device", "cpu", "--threads", "1"]


def _hellos(session: Path) -> dict[str, dict[str, Any]]:
    """Each run's hello, by run id."""
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    return {e["run"]: e for e in events if e.get("type") == "hello"}


def _sweep(root: Path, frameworks: str, *sweeps: str) -> tuple[Path, str]:
    result = benchtui(
        "run",
        "--headless",
        "--frameworks",
        frameworks,
        *TINY,
        *sweeps,
        "--sessions-dir",
        str(root),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return only_session(root), result.stderr


def test_torch_and_tf_keras_run_each_point_with_its_batch_and_layout(sessions_root: Path) -> None:
    session, err = _sweep(
        sessions_root, "torch,tensorflow", "--sweep", "batch=2,4", "--sweep", "channels-last=off,on"
    )
    # tf.keras is channels-last at every setting: its channels-last=on points are its off points' runs.
    assert (
        "sweep · 4 points × 2 frameworks × 1 run = 6 runs (tf.keras shares its channels-last points)" in err
    )
    hellos = _hellos(session)
    echoed = {
        run: (h["config"]["batch_size"], h["config"]["channels_last"], h["settings"].get("channels_last"))
        for run, h in hellos.items()
    }
    assert echoed == {
        "001-torch-vit_ti_16-batch2_channels-last-off-1": (2, False, False),
        "002-tensorflow-vit_ti_16-batch2_channels-last-off-1": (2, False, True),
        "003-torch-vit_ti_16-batch2_channels-last-on-1": (2, True, True),
        "004-torch-vit_ti_16-batch4_channels-last-off-1": (4, False, False),
        "005-tensorflow-vit_ti_16-batch4_channels-last-off-1": (4, False, True),
        "006-torch-vit_ti_16-batch4_channels-last-on-1": (4, True, True),
    }
    summary = json.loads((session / "summary.json").read_text())
    assert {r["status"] for r in summary["rows"]} == {"ok"}


def test_keras_jax_and_keras_torch_run_each_point_with_its_batch(sessions_root: Path) -> None:
    session, err = _sweep(sessions_root, "keras-jax,keras-torch", "--sweep", "batch=2,4")
    assert "sweep · 2 points × 2 frameworks × 1 run = 4 runs" in err
    echoed = {run: h["config"]["batch_size"] for run, h in _hellos(session).items()}
    assert echoed == {
        "001-keras-jax-vit_ti_16-batch2-1": 2,
        "002-keras-torch-vit_ti_16-batch2-1": 2,
        "003-keras-jax-vit_ti_16-batch4-1": 4,
        "004-keras-torch-vit_ti_16-batch4-1": 4,
    }
    rows = json.loads((session / "summary.json").read_text())["rows"]
    assert sorted((r["framework"], r["point"]["batch"], r["batch_size"]) for r in rows) == [
        ("keras-jax", "2", 2),
        ("keras-jax", "4", 4),
        ("keras-torch", "2", 2),
        ("keras-torch", "4", 4),
    ]

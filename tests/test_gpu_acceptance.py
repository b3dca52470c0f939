"""The GPU acceptance script, end to end on the CPU at tiny sizes: every step it will run on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STEPS = [
    "study protocol, study batch",
    "study protocol, largest batch",
    "fp32",
    "tf32",
    "amp-bf16",
    "compile (fp32)",
]  # on a GPU also the modern preset, and with several GPUs the scaling session (not at small sizes)


@pytest.mark.slow
def test_acceptance_script_runs_every_step_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "acceptance"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_acceptance.py", "--device", "cpu", "--small", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "acceptance-cpu.json").read_text())
    assert [s["label"] for s in result["sessions"]] == STEPS
    for i, step in enumerate(result["sessions"]):
        assert step["exit"] == 0, step
        # Small sizes: both frameworks in the batch search and in fp32, PyTorch alone elsewhere.
        both = i in (1, 2)
        frameworks = {"torch", "keras-jax"} if both else {"torch"}
        assert {r["framework"] for r in step["rows"]} == frameworks
        if step["label"].startswith("modern"):
            assert {r["model"] for r in step["rows"]} == {"vit_ti_16", "gpt2_mini"}
            assert {r["task"] for r in step["rows"]} == {
                "inference" if "inference" in step["label"] else "train"
            }
        assert all(r["status"] == "ok" and r["device_kind"] == "cpu" for r in step["rows"]), step["rows"]
        assert step["placement"]["kind"] == "cpu" and not step["refused"]
        assert bool(step["ratios"]) == both  # one framework: nothing to compare
        assert (out / "sessions" / step["session"] / "summary.json").is_file()
    auto = result["sessions"][1]
    assert {r["batch_size"] for r in auto["rows"]} == {16}  # the search found the largest allowed batch
    assert any("doctor" in line for line in result["doctor"])
    assert result["overhead"]["exit"] == 0 and any(
        "harness overhead" in line for line in result["overhead"]["output"]
    )
    md = (out / "acceptance-cpu.md").read_text()
    for heading in ("## Doctor", *(f"## {label}" for label in STEPS), "## Harness overhead", "## Commands"):
        assert heading in md
    assert "benchtui run --headless" in md and "--batch-size auto" in md and "--compile" in md
    assert "--name 'study protocol, study batch'" in md  # commands a person can paste

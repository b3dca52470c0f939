"""Compute efficiency: the ``flops`` event folded into rows, TFLOP/s arithmetic, GPU peaks, exports.

The slow test runs the real PyTorch and tf.keras runners and checks their counts agree.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchtui.core import fmt
from benchtui.core.model import gpu_peaks
from benchtui.core.model.cell import CellSummary
from benchtui.core.model.session_model import SessionModel
from benchtui.core.plan.plan import Plan, run_order
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown
from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.terminal import print_summary
from benchtui.core.store.session import load_session
from benchtui_runners.flops import emit_flops
from benchtui_runners.protocol import EventWriter
from sessionfactory import make_session
from support import ROOT, benchtui, only_session, read_events, small_plan

H100 = {"type": "cuda", "index": 0, "name": "NVIDIA H100 80GB HBM3"}
CPU = {"type": "cpu", "name": "x86_64"}


def _flops_event(run: str, per_step: float | None, reason: str | None = None) -> dict[str, Any]:
    return {
        "type": "flops",
        "run": run,
        "t": 0,
        "per_step": per_step,
        "per_image": None if per_step is None else per_step / 8,
        "batch_size": 8,
        "method": "hand-written",
        "counted": "forward+backward",
        "reason": reason,
    }


def _run(
    run: str,
    epochs: list[float],
    per_step: float | None = 1e12,
    device: dict | None = None,
    precision: str = "fp32",
    reason: str | None = None,
) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [
        {"type": "run_start", "run": run, "t": 0.0},
        {
            "type": "hello",
            "run": run,
            "t": 1.0,
            "steps_per_epoch": 2,
            "samples_per_epoch": 16,
            "device": device or CPU,
            "settings": {"precision": precision},
            "config": {"batch_size": 8},
        },
    ]
    for e, seconds in enumerate(epochs, 1):
        ev += [
            {"type": "batch", "run": run, "t": 0, "epoch": e, "step": s, "seconds": seconds / 2, "samples": 8}
            for s in (1, 2)
        ]
        ev.append({"type": "epoch", "run": run, "t": 0, "epoch": e, "seconds": seconds, "samples": 16})
    if per_step is not None or reason:
        ev.append(_flops_event(run, per_step, reason))
    ev += [{"type": "done", "run": run, "t": 0}, {"type": "run_end", "run": run, "t": 0, "status": "ok"}]
    return ev


def _model(plan: Plan, runs: dict[tuple[str, int], list[dict[str, Any]]]) -> SessionModel:
    ids = {(s.framework, s.index): s.run_id for s in run_order(plan)}
    model = SessionModel(plan)
    for key, make in runs.items():
        for event in make:
            model.apply({**event, "run": ids[key]} if "run" in event else event)
    return model


# -- folding and arithmetic ---------------------------------------------------------
def test_achieved_tflops_from_epochs_after_the_first() -> None:
    # 1e12 FLOPs per step, 2 steps per epoch.
    # run 1: epochs 2..3 take 2 + 2 s for 4 steps -> 4e12 / 4 s = 1.0 TFLOP/s (images/s 8)
    # run 2: epochs 2..3 take 1 + 1 s for 4 steps -> 4e12 / 2 s = 2.0 TFLOP/s (images/s 16)
    # The cell: 8e12 FLOPs (64 images) in 6 s -> 1.33 TFLOP/s and 10.67 images/s, total over
    # total, not the 1.5 and 12 a mean of the runs' rates would say.
    plan = small_plan()
    model = _model(plan, {("torch", 1): _run("r", [4.0, 2.0, 2.0]), ("torch", 2): _run("r", [6.0, 1.0, 1.0])})
    row = model.row("torch", "resnet50")
    assert row.flops_per_step == pytest.approx(1e12)
    assert row.flops_per_image == pytest.approx(1.25e11)
    assert row.flops_method == "hand-written" and row.flops_counted == "forward+backward"
    assert row.achieved_tflops == pytest.approx(8 / 6)
    assert row.spread["achieved_tflops"].min == pytest.approx(1.0)
    assert row.spread["achieved_tflops"].max == pytest.approx(2.0)
    # Same data as images/s: TFLOP/s = images/s x FLOPs per image.
    assert row.images_per_s == pytest.approx(64 / 6)
    assert row.achieved_tflops == pytest.approx(row.images_per_s * 1.25e11 / 1e12)
    low, high = row.ci["achieved_tflops"]
    ci_images = row.ci["images_per_s"]
    assert low == pytest.approx(ci_images[0] * 1.25e11 / 1e12) and high == pytest.approx(
        ci_images[1] * 1.25e11 / 1e12
    )
    # On CPU there is no peak.
    assert row.peak_tflops is None and row.peak_fraction is None and row.peak_source == ""
    # The summary (and so summary.json) is plain JSON.
    json.dumps(model.summary(), allow_nan=False)


def test_one_epoch_uses_that_epoch() -> None:
    plan = small_plan(epochs=1, runs=1)
    model = _model(plan, {("torch", 1): _run("r", [4.0], per_step=3e12)})
    # 2 steps x 3e12 FLOPs in 4 s = 1.5 TFLOP/s
    assert model.row("torch", "resnet50").achieved_tflops == pytest.approx(1.5)


def test_peak_fraction_on_a_known_gpu_by_precision() -> None:
    plan = small_plan(runs=1)
    model = _model(
        plan,
        {
            ("torch", 1): _run("r", [4.0, 2.0, 2.0], per_step=100e12, device=H100, precision="amp-bf16"),
            ("tensorflow", 1): _run("r", [4.0, 2.0, 2.0], per_step=50e12, device=H100, precision="fp32"),
        },
    )
    # 4 steps x 100e12 FLOPs in 4 s = 100 TFLOP/s (50 at FP32); H100 SXM dense peaks: BF16 989.5, FP32 67.
    bf16 = model.row("torch", "resnet50")
    assert bf16.achieved_tflops == pytest.approx(100.0)
    assert bf16.peak_tflops == pytest.approx(989.5)
    assert bf16.peak_fraction == pytest.approx(100.0 / 989.5)
    assert "H100 SXM" in bf16.peak_source and "BF16" in bf16.peak_source
    fp32 = model.row("tensorflow", "resnet50")
    assert fp32.peak_tflops == pytest.approx(67.0)
    assert fp32.peak_fraction == pytest.approx(50.0 / 67.0)


def test_a_rate_above_the_gpus_peak_is_refused() -> None:
    """100 TFLOP/s at FP32 on an H100 (peak 67): the count is wrong, whatever it says."""
    plan = small_plan(runs=1)
    model = _model(
        plan, {("torch", 1): _run("r", [4.0, 2.0, 2.0], per_step=100e12, device=H100, precision="fp32")}
    )
    row = model.row("torch", "resnet50")
    assert row.achieved_tflops is None and row.peak_fraction is None and row.flops_per_step is None
    assert "above its GPU's peak of 67 TFLOP/s" in row.flops_reason
    assert [w["kind"] for w in row.warnings] == ["flops-refused"]


def test_failed_count_is_reported_and_missing_count_is_none() -> None:
    plan = small_plan(runs=1)
    model = _model(
        plan,
        {
            ("torch", 1): _run("r", [4.0, 2.0, 2.0], per_step=None, reason="RuntimeError: no counter"),
            ("tensorflow", 1): _run("r", [4.0, 2.0, 2.0], per_step=None),  # a session from before the event
        },
    )
    failed = model.row("torch", "resnet50")
    assert failed.flops_per_step is None and failed.achieved_tflops is None
    assert failed.flops_reason == "RuntimeError: no counter"
    old = model.row("tensorflow", "resnet50")
    assert old.flops_per_step is None and old.achieved_tflops is None and old.flops_reason == ""
    assert model.row("torch", "resnet50").status == "ok"  # a failed count never fails the run


def test_nonsense_flops_event_is_counted_as_malformed() -> None:
    plan = small_plan(runs=1)
    model = _model(plan, {("torch", 1): _run("r", [4.0, 2.0, 2.0], per_step=None)})
    run_id = next(iter(model.runs))
    model.apply({"type": "flops", "run": run_id, "t": 0, "per_step": "lots"})
    assert model.malformed == 1
    model.apply({"type": "flops", "run": run_id, "t": 0, "per_step": -5})
    assert model.row("torch", "resnet50").flops_per_step is None


def test_live_tflops_uses_the_cells_earlier_count() -> None:
    plan = small_plan(runs=2)
    ids = {(s.framework, s.index): s.run_id for s in run_order(plan)}
    model = SessionModel(plan)
    for event in _run("r", [4.0, 2.0, 2.0], per_step=100e12, device=H100, precision="tf32"):
        model.apply({**event, "run": ids["torch", 1]})
    second = model.runs[ids["torch", 2]]
    model.apply({"type": "run_start", "run": second.spec.run_id, "t": 0})
    model.apply(
        {
            "type": "hello",
            "run": second.spec.run_id,
            "t": 0,
            "device": H100,
            "settings": {"precision": "tf32"},
        }
    )
    assert model.live_figures(second).tflops is None  # no batch yet
    for step, seconds in enumerate((9.0, 0.5, 0.5), 1):  # the first batch (compilation) is left out
        model.apply(
            {
                "type": "batch",
                "run": second.spec.run_id,
                "t": 0,
                "epoch": 1,
                "step": step,
                "seconds": seconds,
                "samples": 8,
            }
        )
    live = model.live_figures(second)
    # 100e12 FLOPs per step in 0.5 s = 200 TFLOP/s; H100 SXM dense TF32 peak 494.5
    assert live.flops_per_step == 100e12 and live.tflops == pytest.approx(200.0)
    assert live.peak_fraction == pytest.approx(200.0 / 494.5) and live.text == "200 (40%)"


def _data_parallel_run(run: str, counted_batch: int, gpus: list[str]) -> list[dict[str, Any]]:
    """A run on ``len(gpus)`` GPUs, 8 images per device a step, 2 steps an epoch, epochs of 4, 2, 2 s;
    FLOPs counted as its runner counts them: one replica's batch (PyTorch) or the global one (Keras)."""
    n = len(gpus)
    events = _run(run, [4.0, 2.0, 2.0], per_step=None, device={**H100, "name": gpus[0]})
    hello = events[1]
    hello["samples_per_epoch"] = 16 * n
    hello["config"] = {
        "batch_size": 8,
        "replicas": n,
        "gpus": [{"index": i, "name": g} for i, g in enumerate(gpus)],
    }
    for event in events:
        if event["type"] == "epoch":
            event["samples"] = 16 * n
        if event["type"] == "batch":
            event["samples"] = 8 * n
    flops = _flops_event(run, 1.25e12 * counted_batch)
    flops.update(per_image=1.25e12, batch_size=counted_batch)
    return [*events[:-2], flops, *events[-2:]]


@pytest.mark.parametrize("counted_batch", [8, 16], ids=["one-replica-count", "global-count"])
def test_percent_of_peak_of_a_data_parallel_run_is_over_every_gpu_it_used(counted_batch: int) -> None:
    plan = small_plan(frameworks=["torch"], runs=1, devices=2, samples=32)  # 2 steps of 2 x 8 an epoch
    model = _model(plan, {("torch", 1): _data_parallel_run("r", counted_batch, [H100["name"]] * 2)})
    row = model.row("torch", "resnet50")
    # 2 GPUs x 8 images a step, 4 steps in epochs 2..3 (4 s): 64 images in 4 s = 16 images/s;
    # x 1.25e12 FLOPs per image = 20 TFLOP/s for the whole job, over 2 x 67 TFLOP/s (H100 SXM FP32).
    assert row.images_per_s == pytest.approx(16.0)
    assert row.achieved_tflops == pytest.approx(20.0)
    assert row.spread["achieved_tflops"].min == pytest.approx(20.0)  # each run's own figure agrees
    assert row.peak_tflops == pytest.approx(134.0) and row.peak_source.startswith("2 × H100 SXM")
    assert row.peak_fraction == pytest.approx(20.0 / 134.0)
    run = next(iter(model.runs.values()))
    live = model.live_figures(run)  # live: the whole job's FLOPs per step over its steps' time
    recent = run.batch_seconds[1:]
    assert live.flops_per_step == pytest.approx(2 * 8 * 1.25e12)
    assert live.tflops == pytest.approx(2 * 8 * 1.25e12 * len(recent) / sum(recent) / 1e12)
    assert live.tflops is not None and live.peak_fraction == pytest.approx(live.tflops / 134.0)


def test_the_peak_of_a_run_over_different_gpus_is_the_sum_of_theirs() -> None:
    plan = small_plan(frameworks=["torch"], runs=1, devices=2, samples=32)  # 2 steps of 2 x 8 an epoch
    a100 = "NVIDIA A100-SXM4-80GB"
    model = _model(plan, {("torch", 1): _data_parallel_run("r", 8, [H100["name"], a100])})
    row = model.row("torch", "resnet50")
    expected = gpu_peaks.peak_tflops(H100["name"], "fp32")[0] + gpu_peaks.peak_tflops(a100, "fp32")[0]  # type: ignore[index]
    assert row.peak_tflops == pytest.approx(expected)
    assert row.peak_fraction == pytest.approx(20.0 / expected)


class _Capture(EventWriter):
    def __init__(self) -> None:
        super().__init__(None)
        self.events: list[dict[str, Any]] = []

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.append({"type": type_, **fields})


def test_emit_flops_reports_counts_and_failures_without_raising() -> None:
    writer = _Capture()
    emit_flops(writer, lambda: {"per_step": 800, "by_op": {"conv": 800}, "method": "m"}, batch_size=4)

    def broken() -> dict[str, Any]:
        raise RuntimeError("CUDA out of memory\nmore")

    emit_flops(writer, broken, batch_size=4)
    emit_flops(writer, lambda: {"per_step": 0, "method": "m"}, batch_size=4)
    flops = [e for e in writer.events if e["type"] == "flops"]
    assert (
        flops[0]["per_step"] == 800
        and flops[0]["per_image"] == 200
        and flops[0]["counted"] == "forward+backward"
    )
    assert flops[0]["by_op"] == {"conv": 800} and flops[0]["reason"] is None
    assert flops[1]["per_step"] is None and flops[1]["reason"] == "RuntimeError: CUDA out of memory"
    assert flops[2]["per_step"] is None and "no convolution" in flops[2]["reason"]
    phases = [(e["name"], e["edge"]) for e in writer.events if e["type"] == "phase"]
    assert phases == [("flops", "start"), ("flops", "end")] * 3


# -- GPU peaks -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce GTX 1080", "GTX 1080"),
        ("GeForce GTX 1080", "GTX 1080"),
    ],
)
def test_gpu_names_map_to_their_entry(name: str, label: str) -> None:
    gpu = gpu_peaks.lookup(name)
    assert gpu is not None and gpu.label == label


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA L40",
        "NVIDIA GeForce GTX 1080 Ti",
        "NVIDIA GeForce RTX 3090 Ti",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA A10G",
        "NVIDIA B200",
        "x86_64",
        "",
        None,
    ],
)
def test_unknown_or_lookalike_names_have_no_peak(name: str | None) -> None:
    assert gpu_peaks.lookup(name) is None
    assert gpu_peaks.peak_tflops(name, "fp32") is None


def test_peaks_per_precision_class() -> None:
    def peak(name: str, precision: str) -> float | None:
        found = gpu_peaks.peak_tflops(name, precision)
        return None if found is None else found[0]

    assert peak("NVIDIA A100-SXM4-80GB", "fp32") == 19.5
    assert peak("NVIDIA A100-SXM4-80GB", "tf32") == 156.0
    assert peak("NVIDIA A100-SXM4-80GB", "amp-fp16") == 312.0
    assert peak("NVIDIA A100-SXM4-80GB", "amp-bf16") == 312.0
    assert peak("NVIDIA H200", "amp-bf16") == 989.5
    assert peak("NVIDIA L4", "tf32") == 60.0
    # No TF32 tensor cores: a tf32 plan computes in FP32. No BF16 on Volta/Turing, no tensor cores on Pascal.
    assert peak("Tesla V100-SXM2-16GB", "tf32") == 15.7
    assert peak("Tesla V100-SXM2-16GB", "amp-bf16") is None
    assert peak("Tesla T4", "amp-fp16") == 65.0
    assert peak("NVIDIA GeForce GTX 1080", "fp32") == 8.87
    assert peak("NVIDIA GeForce GTX 1080", "tf32") == 8.87
    assert peak("NVIDIA GeForce GTX 1080", "amp-fp16") is None
    # Every entry: dense tensor-core figures at least the FP32 one.
    for gpu in gpu_peaks.GPUS:
        for cls in ("tf32", "fp16", "bf16"):
            value = gpu.tflops(cls)
            assert value is None or value >= gpu.fp32 * 0.99, (gpu.label, cls)


def test_formatting() -> None:
    assert fmt.tflops(None) == "–"
    assert [fmt.tflops(v) for v in (0.007, 1.2, 12.345, 99.96, 123.4)] == [
        "0.00700",
        "1.20",
        "12.3",
        "100",
        "123",
    ]
    assert fmt.flops(3.99e9) == "3.99 GFLOP" and fmt.flops(24.3e12) == "24.3 TFLOP"
    assert fmt.percent(0.42) == "42%" and fmt.percent(0.042) == "4.2%"
    assert fmt.tflops_with_peak(300.2, 0.6066) == "300 (61%)" and fmt.tflops_with_peak(1.5, None) == "1.50"


# -- shown and exported -----------------------------------------------------------------
@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished H100 session (fp32) with a ``flops`` event per run; PNASNet is not available in tf.keras."""
    path = make_session(tmp_path_factory.mktemp("sessions"), models=("resnet50", "pnasnet_large"), runs=2)
    model = load_session(path).model
    lines = []
    for rid, run in model.runs.items():
        if run.status != "ok":
            continue
        per_step = 4 * 24.3e9 * (1.06 if run.spec.framework == "torch" else 1.0)
        lines.append(
            json.dumps(
                {**_flops_event(rid, per_step), "per_image": per_step / run.hello["config"]["batch_size"]}
            )
        )
    with open(path / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def test_rows_exports_and_table_show_tflops(session: Path) -> None:
    loaded = load_session(session)
    summary = loaded.model.summary()
    row = next(r for r in summary["rows"] if r["model"] == "resnet50" and r["framework"] == "torch")
    per_image = row["flops_per_step"] / row["batch_size"]
    assert row["achieved_tflops"] == pytest.approx(row["images_per_s"] * per_image / 1e12, rel=1e-9)
    assert row["peak_tflops"] == 67.0  # the factory's sessions ran fp32 on an H100 80GB HBM3
    assert row["peak_fraction"] == pytest.approx(row["achieved_tflops"] / 67.0)

    md = markdown.render(build_report(loaded, summary))
    section = md.split("## Compute efficiency")[1].split("\n## ")[0]
    assert fmt.tflops(row["achieved_tflops"]) in section and fmt.percent(row["peak_fraction"]) in section
    assert "FLOPs / step" in section and "hand-written" in section and "H100 SXM" in section
    assert "not available" in section  # PNASNet in tf.keras

    buf = io.StringIO()
    csvfile.write(build_report(loaded, summary), buf)
    records = list(csv.DictReader(io.StringIO(buf.getvalue())))
    rec = next(r for r in records if r["model"] == "resnet50" and r["framework"] == "torch")
    assert float(rec["achieved_tflops"]) == pytest.approx(row["achieved_tflops"])
    assert float(rec["peak_fraction"]) == pytest.approx(row["peak_fraction"])
    assert float(rec["flops_per_step"]) == pytest.approx(row["flops_per_step"])
    assert rec["achieved_tflops_ci_low"] and rec["flops_method"] == "hand-written"

    exported = json.loads(jsonfile.render(build_report(loaded, summary)))
    jrow = next(r for r in exported["rows"] if r["model"] == "resnet50" and r["framework"] == "torch")
    assert (
        jrow["achieved_tflops"] == pytest.approx(row["achieved_tflops"])
        and jrow["flops_method"] == "hand-written"
    )

    html = htmlreport.render(build_report(loaded, summary))
    assert "<h3>Compute efficiency</h3>" in html and fmt.percent(row["peak_fraction"]) in html

    out = io.StringIO()
    print_summary([CellSummary.from_json(r) for r in summary["rows"]], "t", file=out)
    text = out.getvalue()
    assert "TFLOP/s" in text and "% peak" in text
    assert fmt.tflops_with_peak(row["achieved_tflops"], row["peak_fraction"]) in text


def test_sessions_without_counts_export_no_section(tmp_path: Path) -> None:
    loaded = load_session(make_session(tmp_path, runs=1, epochs=2, steps=3))
    summary = loaded.model.summary()
    assert build_report(loaded, summary).efficiency is None
    assert "## Compute efficiency" not in markdown.render(build_report(loaded, summary))
    assert "Compute efficiency" not in htmlreport.render(build_report(loaded, summary))
    out = io.StringIO()
    print_summary([CellSummary.from_json(r) for r in summary["rows"]], "t", file=out)
    assert "TFLOP/s" in out.getvalue() and "% peak" not in out.getvalue()


# -- real runners -----------------------------------------------------------------------
@pytest.mark.slow
def test_real_runners_count_flops_and_agree(sessions_root: Path) -> None:
    result = benchtui(
        "run",
        "--headless",
        "--frameworks",
        "torch,tensorflow",
        "--models",
        "resnet50",
        "--image-size",
        "32",
        "--samples",
        "4",
        "--batch-size",
        "2",
        "--epochs",
        "2",
        "--runs",
        "1",
        "--device",
        "cpu",
        "--sessions-dir",
        str(sessions_root),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "GFLOP/s" in result.stdout  # a CPU's rate, in the unit that reads
    session = only_session(sessions_root)
    events = read_events(session)
    counts = {}
    for fw in ("torch", "tensorflow"):
        mine = [e for e in events if (e.get("run") or "").split("-")[1:2] == [fw]]
        flops = [e for e in mine if e["type"] == "flops"]
        assert len(flops) == 1, [e["type"] for e in mine]
        event = flops[0]
        assert event["per_step"] > 0 and event["per_image"] == pytest.approx(event["per_step"] / 2)
        assert event["counted"] == "forward+backward" and event["method"]
        # After the timed epochs, before done.
        kinds = [e["type"] for e in mine]
        assert kinds.index("flops") > max(i for i, k in enumerate(kinds) if k == "epoch")
        assert kinds.index("flops") < kinds.index("done")
        counts[fw] = event["per_step"]
    # torchvision's ResNet50 (v1.5: stride in the 3x3 convolution) does ~6% more work than
    # Keras' (v1: stride in the first 1x1); the counters themselves agree to the FLOP.
    assert counts["torch"] == pytest.approx(counts["tensorflow"], rel=0.15)
    summary = load_session(session).model.summary()
    for row in summary["rows"]:
        assert row["flops_per_step"] > 0 and row["achieved_tflops"] > 0 and row["peak_fraction"] is None


# -- the counters themselves, on a small net counted by hand --------------------------------
# Input 2x33x33x8. Separable 3x3 stride 2 "same" to 16 (depthwise 8 -> 17x17x8, pointwise to
# 16), depthwise 5x5 "same" x2 (17x17x32), conv 3x3 stride 2 "valid" to 12 (8x8x12), global
# average pool, dense 12 -> 10. Multiply-adds x 2, forward:
#   depthwise 2*(2*17*17*8)*9 = 83,232      pointwise 2*(2*17*17*16)*8 = 147,968
#   depthwise 2*(2*17*17*32)*25 = 924,800   conv 2*(2*8*8*12)*9*32 = 884,736    dense 2*2*12*10 = 480
# Backward: weight gradients of everything (= forward), input gradients of all but the first
# layer (its input is data): 2*forward - 83,232. Total 3 * 2,041,216 - 83,232 = 6,040,416.
HAND_COUNT = 6_040_416
KERAS_NET = """
import os, sys, json
import keras
from benchtui_runners.flops import count_keras
inp = keras.Input((33, 33, 8))
x = keras.layers.SeparableConv2D(16, 3, strides=2, padding="same")(inp)
x = keras.layers.DepthwiseConv2D(5, padding="same", depth_multiplier=2)(x)
x = keras.layers.Conv2D(12, 3, strides=2, padding="valid")(x)
x = keras.layers.GlobalAveragePooling2D()(x)
model = keras.Model(inp, keras.layers.Dense(10)(x))
import benchtui_runners.flops as F
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
backend = os.environ["KERAS_BACKEND"]
if backend == "torch":
    result = F._count_keras_torch(model, loss, (2, 33, 33, 8), ((2,), "int32"), 10)
elif backend == "jax":
    result = F._count_jax(model, loss, (2, 33, 33, 8), ((2,), "int32"))
else:
    result = F._count_tf(model, loss, (2, 33, 33, 8), ((2,), "int32"))
print("RESULT " + json.dumps(result))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_keras_counters_match_the_hand_count(backend: str) -> None:

    done = subprocess.run(
        [sys.executable, "-c", KERAS_NET],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, done.stderr[-3000:]
    assert json.loads(line[len("RESULT ") :])["per_step"] == HAND_COUNT


@pytest.mark.slow
def test_torch_counter_matches_the_hand_count() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    from benchtui_runners.flops import count_torch

    net = nn.Sequential(
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8),
        nn.Conv2d(8, 16, 1),
        nn.Conv2d(16, 32, 5, padding=2, groups=16),
        nn.Conv2d(32, 12, 3, stride=2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(12, 10),
    )
    result = count_torch(net, torch.randn(2, 8, 33, 33), torch.randint(0, 10, (2,)), nn.CrossEntropyLoss())
    # torch.utils.flop_counter alone counts the depthwise weight gradients 8x and 16x too high.
    assert result["per_step"] == HAND_COUNT
    assert all(p.grad is None for p in net.parameters())

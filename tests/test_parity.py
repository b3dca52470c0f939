"""Modern workloads in the parent: parity between frameworks, FLOP-normalised verdicts, tokens, inference latency.

Sessions are written by tests/sessionfactory.py exactly as the engine writes them, with the runners'
``model`` and ``flops`` events; every view is checked on what it prints.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from html import escape
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tests.reporttext import shown as _show
from tests.reporttext import written as _write

from benchtui.core import fmt
from benchtui.core.model.analysis import steady_batches
from benchtui.core.model.parity import PARITY_MARK, PARITY_TOLERANCE, parity_entries
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.stats import quantile
from benchtui.core.model.status import CautionKind
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, terminal
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.model import Report, build_report
from benchtui.core.store.session import LoadedSession, load_session
from benchtui.widgets.comparison import BatchComparison, ratio_line
from benchtui.widgets.results_table import cell_values, rate_header
from sessionfactory import DENSENET121_NETWORKS, RESNET50_NETWORKS, make_session

DATA = Path(__file__).parent / "data"
# What the ResNet50 sentence must say, with its numbers (the example figures).
RESNET50_FLAG = (
    "FLOPs per image differ by 6.1% (PyTorch 24.3 vs tf.keras 22.9 GFLOP), "
    "trainable parameters by 0.1% (PyTorch 25.56M vs tf.keras 25.58M)"
)


@pytest.fixture(scope="module")
def parity_session(tmp_path_factory: pytest.TempPathFactory) -> LoadedSession:
    path = make_session(
        tmp_path_factory.mktemp("parity"),
        models=("resnet50", "densenet121"),
        networks={**RESNET50_NETWORKS, **DENSENET121_NETWORKS},
    )
    return load_session(path)


@pytest.fixture(scope="module")
def report(parity_session: LoadedSession) -> Report:
    return build_report(parity_session)


def _unwrapped(text: str) -> str:
    """Terminal output with its lines joined: a long sentence wraps at the console's width."""
    return " ".join(" ".join(text.split("\n")).split())


def _row(summary: dict[str, Any], model: str, fw: str) -> dict[str, Any]:
    return next(r for r in summary["rows"] if r["model"] == model and r["framework"] == fw)


# -- parity in the summary ----------------------------------------------------------------
def test_resnet50_v1_against_v1_5_is_flagged_with_its_numbers(parity_session: LoadedSession) -> None:
    summary = parity_session.model.summary()
    entries = {p["model"]: p for p in summary["parity"]}
    resnet = entries["resnet50"]
    torch, keras = RESNET50_NETWORKS[("torch", "resnet50")], RESNET50_NETWORKS[("tensorflow", "resnet50")]
    assert resnet["flagged"] and resnet["tolerance"] == PARITY_TOLERANCE
    assert resnet["flops_diff"] == pytest.approx(torch["flops"] / keras["flops"] - 1)
    assert resnet["params_compared"] == "trainable_params"
    assert resnet["params_diff"] == pytest.approx(keras["trainable_params"] / torch["trainable_params"] - 1)
    assert resnet["frameworks"]["torch"]["flops_per_sample"] == torch["flops"]
    assert resnet["frameworks"]["tensorflow"]["source"] == "keras.applications ResNet50"
    text = resnet["text"]
    assert (
        text.startswith("ResNet50: PyTorch builds ResNet v1.5 (torchvision")
        and ", tf.keras ResNet v1 (" in text
    )
    assert RESNET50_FLAG in text
    assert text.endswith("; resnet50_v1_5 (ResNet50 v1.5) trains the same network on both sides")
    # Every row of the model carries the sentence as a caution, so every view of warnings shows it.
    for fw in ("torch", "tensorflow"):
        row = _row(summary, "resnet50", fw)
        assert [w["message"] for w in row["warnings"] if w["kind"] == CautionKind.ARCHITECTURE] == [text]
        assert row["params"] == RESNET50_NETWORKS[(fw, "resnet50")]["params"]
        assert row["flops_per_sample"] == RESNET50_NETWORKS[(fw, "resnet50")]["flops"]


def test_the_same_network_on_both_sides_is_not_flagged(parity_session: LoadedSession) -> None:
    summary = parity_session.model.summary()
    dense = next(p for p in summary["parity"] if p["model"] == "densenet121")
    # Keras counts BatchNorm statistics as (non-trainable) parameters: all parameters differ by 1%,
    # trainable ones not at all, and only trainable ones are compared.
    assert not dense["flagged"] and dense["params_diff"] == 0 and dense["flops_diff"] == 0
    assert dense["text"].startswith("DenseNet121: the same network on every side")
    for fw in ("torch", "tensorflow"):
        assert not [w for w in _row(summary, "densenet121", fw)["warnings"] if w["kind"] == "architecture"]


def test_a_difference_just_over_the_tolerance_is_flagged_and_one_under_is_not(tmp_path: Path) -> None:
    base = DENSENET121_NETWORKS[("torch", "densenet121")]
    for factor, flagged in ((1 + PARITY_TOLERANCE * 1.2, True), (1 + PARITY_TOLERANCE * 0.8, False)):
        other = {**DENSENET121_NETWORKS[("tensorflow", "densenet121")], "flops": base["flops"] * factor}
        networks = {**DENSENET121_NETWORKS, ("tensorflow", "densenet121"): other}
        path = make_session(tmp_path, folder=f"s{factor}", models=("densenet121",), runs=1, networks=networks)
        (entry,) = load_session(path).model.summary()["parity"]
        assert entry["flagged"] is flagged, factor


def test_one_framework_reporting_makes_no_parity_entry(tmp_path: Path) -> None:
    networks = {("torch", "resnet50"): RESNET50_NETWORKS[("torch", "resnet50")]}
    path = make_session(tmp_path, runs=1, networks=networks)
    summary = load_session(path).model.summary()
    assert summary["parity"] == []
    assert not [w for r in summary["rows"] for w in r["warnings"] if w["kind"] == "architecture"]


def test_a_nonsense_model_event_is_counted_as_malformed() -> None:
    path = DATA / "tiny-cpu-session"
    model = load_session(path).model
    run = next(iter(model.runs))
    before = model.malformed
    model.apply({"type": "model", "run": run, "t": 0.0, "params": -5})
    model.apply({"type": "model", "run": run, "t": 0.0, "params": 2.5})
    assert model.malformed == before + 2 and model.runs[run].model_info == {}


# -- the flag in every view --------------------------------------------------------------------
def test_show_flags_resnet50_with_the_numbers_and_not_densenet(report: Report) -> None:
    out = _show(report)
    flat = _unwrapped(out)
    assert f"ResNet50 {PARITY_MARK}" in out and f"DenseNet121 {PARITY_MARK}" not in out
    # Marked in the study's table itself (its rows end with the status), not only in the parity table.
    headline = [line for line in out.splitlines() if "ok *" in line]
    assert len(headline) == 2 and all(f"ResNet50 {PARITY_MARK}" in line for line in headline)
    assert RESNET50_FLAG in flat
    assert flat.count("ResNet50: PyTorch builds ResNet v1.5") == 1  # once for the model, not per framework
    # The parity table: each side's source, parameters and FLOPs per image.
    assert "Parity: do the frameworks build the same network?" in out
    assert "keras.applications ResNet50" in out and "torchvision 0.20 resnet50" in out
    assert "24.3 GFLOP" in out and "22.9 GFLOP" in out and "FLOPs / image" in out


def test_every_export_flags_resnet50_with_the_numbers(report: Report) -> None:
    md = _write(report, markdown)
    assert f"| ResNet50 {PARITY_MARK} |" in md and f"| DenseNet121 {PARITY_MARK} |" not in md
    section = md.split("## Parity: do the frameworks build the same network?")[1].split("\n## ")[0]
    assert RESNET50_FLAG in section and "| keras.applications ResNet50 |" in section
    assert RESNET50_FLAG in md.split("## Warnings")[1]

    html = _write(report, htmlreport)
    assert escape(RESNET50_FLAG, quote=True) in html and f"ResNet50 {PARITY_MARK}" in html
    assert "Parity: do the frameworks build the same network?</h3>" in html

    data = json.loads(_write(report, jsonfile))
    resnet = next(p for p in data["parity"] if p["model"] == "resnet50")
    assert resnet["flagged"] and RESNET50_FLAG in resnet["text"]
    assert any(RESNET50_FLAG in w for w in data["warnings"])

    records = {(r["model"], r["framework"]): r for r in csv.DictReader(io.StringIO(_write(report, csvfile)))}
    for fw in ("torch", "tensorflow"):
        assert records[("resnet50", fw)]["parity_flagged"] == "True"
        assert RESNET50_FLAG in records[("resnet50", fw)]["parity_text"]
        assert RESNET50_FLAG in records[("resnet50", fw)]["warnings"]
        assert records[("densenet121", fw)]["parity_flagged"] == "False"
    assert float(records[("resnet50", "torch")]["parity_flops_diff"]) == pytest.approx(24.3 / 22.9 - 1)


# -- the verdict per FLOP -----------------------------------------------------------------------
def test_the_verdict_per_flop_scales_the_ratio_by_the_flops_per_sample(parity_session: LoadedSession) -> None:
    summary = parity_session.model.summary()
    verdicts = {r["model"]: r for r in summary["ratios"]}
    for model, networks in (("resnet50", RESNET50_NETWORKS), ("densenet121", DENSENET121_NETWORKS)):
        verdict = verdicts[model]
        torch, keras = _row(summary, model, "torch"), _row(summary, model, "tensorflow")
        # Achieved FLOP/s of each side: images/s times FLOPs per image; the ratio of the two.
        per_flop = (torch["images_per_s"] * networks[("torch", model)]["flops"]) / (
            keras["images_per_s"] * networks[("tensorflow", model)]["flops"]
        )
        assert verdict["per_flop"]["factor"] == pytest.approx(per_flop)
        assert verdict["per_flop"]["faster_framework"] == "torch"
        # Said where the networks differ; where they are the same it would repeat the raw ratio.
        assert (f"per FLOP: PyTorch {per_flop:.2f}× faster" in verdict["text"]) == (model == "resnet50")
    # Where the networks differ the raw ratio says so; where they are the same it does not.
    assert (
        "the raw ratio compares different networks (FLOPs per image differ by 6.1%"
        in verdicts["resnet50"]["text"]
    )
    assert "different networks" not in verdicts["densenet121"]["text"]
    assert verdicts["resnet50"]["parity_flagged"] and not verdicts["densenet121"]["parity_flagged"]


def test_the_verdict_per_flop_is_printed_wherever_the_verdict_is(report: Report) -> None:
    text = next(r.text for r in report.ratios if r.model == "resnet50")
    assert "per FLOP: PyTorch" in text
    assert text in _show(report, 400)  # wide enough for the verdict's column not to wrap
    assert text in _write(report, markdown) and escape(text, quote=True) in _write(report, htmlreport)
    records = list(csv.DictReader(io.StringIO(_write(report, csvfile))))
    assert text in [r["verdict"] for r in records]
    per_flop = next(r for r in records if r["model"] == "resnet50" and r["verdict"])
    # As time_ratio: time (here per FLOP) of the row's framework over the base's; above 1, the base is faster.
    assert per_flop["per_flop_faster"] == "torch" and float(per_flop["per_flop_ratio"]) > 1


def test_no_flop_counts_no_per_flop_verdict(tmp_path: Path) -> None:
    path = make_session(tmp_path, runs=1)  # runners that sent no flops event
    (verdict,) = load_session(path).model.summary()["ratios"]
    assert verdict["per_flop"] is None and "per FLOP" not in verdict["text"]


# -- samples and tokens -------------------------------------------------------------------------
def test_tokens_per_s_is_sequences_per_s_times_the_sequence_length(tmp_path: Path) -> None:
    path = make_session(tmp_path, models=("gpt2_mini",), seq_len=128, runs=2)
    loaded = load_session(path)
    summary = loaded.model.summary()
    for row in summary["rows"]:
        assert row["kind"] == "tokens" and row["tokens_per_sample"] == 128
        assert row["tokens_per_s"] == pytest.approx(row["images_per_s"] * 128)
        low, high = row["ci"]["images_per_s"]
        assert row["ci"]["tokens_per_s"] == pytest.approx([low * 128, high * 128])
        assert row["steady_tokens_per_s"] == pytest.approx(row["steady_images_per_s"] * 128)
    report = build_report(loaded)
    titles = [t.title for t in report.figure_tables]
    assert "Throughput (sequences/s, excluding the first epoch)" in titles
    assert "Throughput (tokens/s, excluding the first epoch)" in titles
    assert not any("images" in t for t in titles)
    out = _show(report)
    torch = _row(summary, "gpt2_mini", "torch")
    assert "Sequences/s" in out and "Tokens/s" in out and "Images/s" not in out
    assert fmt.rate(torch["tokens_per_s"]) in out
    assert "Time per sequence" in out  # the verdict's note
    md = _write(report, markdown)
    assert "Steady sequences/s" in md and "Steady tokens/s" in md and "sequence length 128" in md
    # The app's results table: tokens/s in the throughput column, under a header that says so.
    cell = cell_values(loaded.model, "torch", "gpt2_mini", {})
    assert cell["ips"][0] == fmt.rate(torch["tokens_per_s"])
    assert rate_header(["gpt2_mini"]) == "tok/s\n"


def test_a_session_of_images_and_tokens_speaks_of_samples(tmp_path: Path) -> None:
    path = make_session(tmp_path, models=("resnet50", "gpt2_mini"), seq_len=64, runs=1)
    loaded = load_session(path)
    report = build_report(loaded)
    out = _show(report)
    assert "Samples/s" in out and "Tokens/s" in out and "Images/s" not in out
    assert report.efficiency is None or "FLOPs / sample" in report.efficiency.header
    assert rate_header(["resnet50", "gpt2_mini"]) == "Rate\nper s"
    assert cell_values(loaded.model, "torch", "gpt2_mini", {})["ips"][0].endswith(" tok")
    assert cell_values(loaded.model, "torch", "resnet50", {})["ips"][0].endswith(" img")


# -- inference ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inference(tmp_path_factory: pytest.TempPathFactory) -> LoadedSession:
    path = make_session(
        tmp_path_factory.mktemp("inference"),
        models=("resnet50",),
        task="inference",
        timing="window",
        runs=2,
        epochs=3,
        steps=12,
        networks=RESNET50_NETWORKS,
    )
    return load_session(path)


def test_latency_percentiles_are_the_quantiles_of_the_steady_batch_times(inference: LoadedSession) -> None:
    summary = inference.model.summary()
    assert summary["task"] == "inference"
    for fw in ("torch", "tensorflow"):
        row = _row(summary, "resnet50", fw)
        steady = sorted(t for r in inference.model.cell_runs(fw, "resnet50") for t in steady_batches(r))
        assert row["task"] == "inference" and row["timing"] == "window"
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            assert row[f"latency_{name}_s"] == pytest.approx(quantile(steady, q))
        assert row["latency_p50_s"] <= row["latency_p90_s"] <= row["latency_p99_s"]


def test_latency_percentiles_appear_in_the_tables(inference: LoadedSession) -> None:
    report = build_report(inference)
    summary = report.summary.to_json()
    shown = [
        fmt.seconds(_row(summary, "resnet50", fw)[f"latency_{p}_s"] * 1000)
        for fw in ("torch", "tensorflow")
        for p in ("p50", "p90", "p99")
    ]
    for width in (200, 80):
        out = _show(report, width)
        assert all(value in out for value in shown), width
        assert "p50" in out and "p99" in out
        assert "ok *" in out or " ok" in out  # the status column is not pushed off the edge
    assert "percentiles of window means" in _unwrapped(_show(report))
    md = _write(report, markdown)
    assert "## Latency per batch (inference: forward only)" in md and all(v in md for v in shown)
    assert "FLOPs of one inference step (forward only" in md
    html = _write(report, htmlreport)
    assert all(v in html for v in shown) and "percentiles of window means" in html
    records = list(csv.DictReader(io.StringIO(_write(report, csvfile))))
    assert [float(r["latency_p50_s"]) for r in records] == [
        _row(summary, "resnet50", fw)["latency_p50_s"] for fw in ("torch", "tensorflow")
    ]
    # The app's results table: latency in place of the median batch.
    cell = cell_values(inference.model, "torch", "resnet50", {})
    assert "batch" not in cell and cell["latency"][0] == "/".join(shown[:3])
    assert "epoch" not in cell_values(inference.model, "torch", "resnet50", {}, compact=True)


@pytest.mark.parametrize("width", [120, 155, 170])
def test_the_study_table_never_pushes_its_last_columns_off_the_edge(report: Report, width: int) -> None:
    # Between WIDE_TABLE and what the intervals need, the table goes narrow instead of cropping.
    out = io.StringIO()
    console = Console(file=out, width=width)
    console.print(terminal.summary_table(report.rows, "t", width=width))
    assert out.getvalue().count("ok *") == 2 and out.getvalue().count(" ok") >= 4


def test_a_training_session_shows_no_latency_columns(report: Report) -> None:
    out = _show(report)
    assert "p50" not in out and report.latency is None
    cell = cell_values(load_session(report.source.path).model, "torch", "resnet50", {})
    assert "latency" not in cell and "batch" in cell
    assert cell["model"][0] == f"ResNet50 {PARITY_MARK}"
    assert (
        cell_values(load_session(report.source.path).model, "torch", "densenet121", {})["model"][0]
        == "DenseNet121"
    )


# -- sessions from before -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny-cpu-session", "gpu-session"])
def test_recorded_sessions_load_as_training_of_images_without_parity(name: str) -> None:
    loaded = load_session(DATA / name)
    summary = loaded.model.summary()
    assert summary["parity"] == [] and summary["task"] == "train"
    for row in summary["rows"]:
        assert row["task"] == "train" and row["kind"] == "image" and row["tokens_per_s"] is None
        assert row["params"] is None and row["flops_per_sample"] is None
    report = build_report(loaded)
    assert report.parity is None and report.latency is None
    md = _write(report, markdown)
    assert "Parity" not in md and "Latency" not in md and "Tokens/s" not in md
    assert "Throughput (images/s, excluding the first epoch)" in md
    assert PARITY_MARK not in md and PARITY_MARK not in _show(report)


# -- counts outside a session (benchtui parity) --------------------------------------------------
def test_parity_entries_from_counts_match_a_sessions() -> None:
    class Count:
        def __init__(self, fw: str, model: str, network: dict[str, Any]) -> None:
            self.framework, self.model = fw, model
            self.params, self.trainable_params = network["params"], network["trainable_params"]
            self.flops_per_sample, self.counted = network["flops"], "forward+backward"
            self.source, self.architecture = network["source"], network.get("architecture", "")

    counts = [Count(fw, m, n) for (fw, m), n in {**RESNET50_NETWORKS, **DENSENET121_NETWORKS}.items()]
    entries = {e["model"]: e for e in parity_entries(counts)}
    assert entries["resnet50"]["flagged"] and RESNET50_FLAG in entries["resnet50"]["text"]
    assert not entries["densenet121"]["flagged"]


def test_a_live_model_folds_the_model_event() -> None:
    loaded = load_session(DATA / "tiny-cpu-session")
    model = SessionModel(loaded.plan)
    run = next(iter(model.runs))
    model.apply({"type": "run_start", "run": run, "t": 0.0})
    model.apply(
        {
            "type": "model",
            "run": run,
            "t": 1.0,
            "params": 25_557_032,
            "trainable_params": 25_557_032,
            "kind": "image",
            "tokens_per_sample": 0,
            "source": "torchvision 0.24 resnet50",
            "architecture": "ResNet v1.5",
        }
    )
    assert model.runs[run].model_info["params"] == 25_557_032
    assert model.runs[run].model_info["source"] == "torchvision 0.24 resnet50"


def test_compare_says_when_one_session_trained_and_the_other_ran_inference(
    report: Report, inference: LoadedSession
) -> None:
    cmp = compare_sessions(load_session(report.source.path), inference)
    assert "--task: train vs inference" in cmp.differences


def test_the_comparison_strip_marks_a_model_whose_networks_differ(report: Report) -> None:
    strip = BatchComparison()
    strip.update_from(
        load_session(report.source.path).model
    )  # the last model that ran: DenseNet121, the same network
    assert strip.model_id == "densenet121" and PARITY_MARK not in str(strip.border_title)
    model = load_session(report.source.path).model
    model.current = next(r for r in model.runs if model.runs[r].spec.model == "resnet50")
    try:
        strip.update_from(model)
        assert str(strip.border_title).startswith(f"ResNet50 {PARITY_MARK} · time per batch")
        # The verdict under the strips is the summary's: with its per-FLOP ratio.
        line = ratio_line(strip.series, model, "resnet50").plain
        assert "the raw ratio compares different networks" in line and "per FLOP: PyTorch" in line
    finally:
        model.current = None


@pytest.mark.asyncio
async def test_the_live_screen_shows_latency_tokens_and_the_parity_mark(tmp_path: Path) -> None:
    from benchtui.app import make_app
    from benchtui.widgets.results_table import ResultsTable

    path = make_session(
        tmp_path,
        models=("resnet50", "gpt2_mini"),
        task="inference",
        seq_len=64,
        runs=1,
        networks=RESNET50_NETWORKS,
        gpu=False,
    )
    app = make_app(replay=path, speed=math.inf)
    async with app.run_test(size=(160, 40)) as pilot:
        deadline = time.monotonic() + 30
        while app.replayer is None or app.replayer.status in ("pending", "running"):
            assert time.monotonic() < deadline, "replay did not finish"
            await pilot.pause(0.05)
        await pilot.pause()
        table = app.screen.query_one(ResultsTable)
        assert "latency" in table.columns_shown and "batch" not in table.columns_shown
        headers = [str(c.label) for c in table.columns.values()]
        assert "Rate\nper s" in headers and "Latency ms\np50/p90/p99" in headers
        summary = load_session(path).model.summary()
        gpt = _row(summary, "gpt2_mini", "torch")
        assert table.cell_text("gpt2_mini|torch", "ips") == fmt.rate(gpt["tokens_per_s"]) + " tok"
        p50 = fmt.seconds(gpt["latency_p50_s"] * 1000)
        assert table.cell_text("gpt2_mini|torch", "latency").startswith(p50 + "/")
        assert table.cell_text("resnet50|tensorflow", "model") == f"ResNet50 {PARITY_MARK}"
        assert table.cell_text("gpt2_mini|tensorflow", "model") == "GPT-2 mini"

"""The workloads beyond the study, end to end through real runners: a GPT trains and reports
tokens/s, inference times every batch with no gradients, ResNet50's two architectures are told
apart by their counts, and ``benchtui parity`` counts both sides without training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchtui.core.plan.plan import Plan
from support import benchtui, only_session, read_events, run_runner

pytestmark = pytest.mark.slow

CPU = ["--device", "cpu", "--threads", "1", "--no-nvml", "--runs", "1"]


def _summary(session: Path) -> dict:
    return json.loads((session / "summary.json").read_text())


def _run(root: Path, *args: str) -> tuple[Path, dict, list[dict]]:
    result = benchtui("run", "--headless", *args, *CPU, "--sessions-dir", str(root), timeout=900)
    session = only_session(root)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    return session, _summary(session), read_events(session)


def test_a_tiny_gpt_trains_on_token_ids_and_reports_tokens_per_second(sessions_root: Path) -> None:
    session, summary, events = _run(
        sessions_root,
        *("--frameworks", "torch,tensorflow", "--models", "gpt2_mini", "--seq-len", "16"),
        *("--samples", "8", "--batch-size", "2", "--epochs", "2"),
    )
    rows = {r["framework"]: r for r in summary["rows"]}
    for fw, row in rows.items():
        assert row["status"] == "ok", (fw, row.get("reason"))
        assert row["tokens_per_sample"] == 16
        assert row["tokens_per_s"] == pytest.approx(row["images_per_s"] * 16)
        hello = next(e for e in events if e["type"] == "hello" and e["framework"] == fw)
        assert hello["settings"]["kind"] == "tokens" and hello["settings"]["loss"].startswith("softmax")
        assert hello["config"]["seq_len"] == 16
        model = next(e for e in events if e["type"] == "model" and e["run"] in row["run_ids"])
        assert model["kind"] == "tokens" and model["tokens_per_sample"] == 16
        flops = next(e for e in events if e["type"] == "flops" and e["run"] in row["run_ids"])
        # A 4-layer, 256-wide GPT-2 over 16 tokens: ≈ 6 × 16.1M weights × 16 tokens per sequence.
        assert 1e9 < flops["per_image"] < 3e9, flops
    a, b = (rows[fw]["trainable_params"] for fw in ("torch", "tensorflow"))
    assert abs(a - b) <= 0.001 * a  # the same network: GPT-2's own layers on both sides
    show = benchtui("show", str(session))
    assert show.returncode == 0 and "tokens/s" in show.stdout.lower()


def test_inference_is_forward_only_and_times_every_batch(sessions_root: Path) -> None:
    session, summary, events = _run(
        sessions_root,
        *("--frameworks", "torch,tensorflow", "--models", "vit_ti_16", "--task", "inference"),
        *("--image-size", "32", "--samples", "12", "--batch-size", "3", "--epochs", "2"),
    )
    for row in summary["rows"]:
        assert row["status"] == "ok", row.get("reason")
        assert row["task"] == "inference"
        run_ids = set(row["run_ids"])
        hello = next(e for e in events if e["type"] == "hello" and e["run"] in run_ids)
        settings = hello["settings"]
        assert settings["task"] == "inference" and settings["optimizer"] is None and settings["loss"] is None
        assert ("predict_on_batch" if row["framework"] == "tensorflow" else "inference_mode") in (
            settings["inference_path"]
        )
        # --task inference times every batch: one batch event per step, 4 steps × 2 epochs.
        batches = [e for e in events if e["type"] == "batch" and e["run"] in run_ids]
        assert [e["steps"] for e in batches] == [1] * 8
        flops = next(e for e in events if e["type"] == "flops" and e["run"] in run_ids)
        assert flops["counted"] == "forward"
        assert row["latency_p50_s"] <= row["latency_p90_s"] <= row["latency_p99_s"]
    fw = {r["framework"]: r for r in summary["rows"]}
    torch_flops, tf_flops = (fw[f]["flops_per_sample"] for f in ("torch", "tensorflow"))
    assert abs(torch_flops - tf_flops) <= 0.01 * torch_flops  # one ViT on both sides
    show = benchtui("show", str(session))
    assert "p99" in show.stdout


def test_inference_runner_never_makes_a_gradient_or_an_optimizer() -> None:
    plan = Plan(models=["resnet50"], task="inference", image_size=32, samples=4, epochs=1, timing="step")
    config = plan.run_config("torch", "resnet50", "r").to_dict()
    config.update(batch_size=2, device="cpu", threads=1, window_s=0.05)
    events = run_runner(config)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done" and "error" not in kinds
    assert next(e for e in events if e["type"] == "hello")["settings"]["optimizer"] is None
    # The forward of ResNet50 (v1.5) at 32 px: 4.1 GFLOP at 224 px scaled by (32/224)^2, ~ 0.09 GFLOP.
    flops = next(e for e in events if e["type"] == "flops")
    assert flops["counted"] == "forward" and 0.05e9 < flops["per_image"] < 0.2e9, flops


def test_parity_counts_both_sides_and_flags_resnet_v1_against_v1_5() -> None:
    result = benchtui(
        "parity",
        *("--models", "resnet50,resnet50_v1_5", "--frameworks", "torch,tensorflow", "--image-size", "64"),
        "--format",
        "json",
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    entries = {e["model"]: e for e in json.loads(result.stdout)["parity"]}
    v1, v15 = entries["resnet50"], entries["resnet50_v1_5"]
    assert v1["flagged"] and not v15["flagged"], (v1, v15)
    assert v1["flops_diff"] > 0.03 and "v1.5" in v1["text"]
    sides = v15["frameworks"]
    assert sides["torch"]["trainable_params"] == sides["tensorflow"]["trainable_params"]
    # torchvision's ResNet50 is the same network in both rows: its count is the same.
    assert v1["frameworks"]["torch"]["flops_per_sample"] == sides["torch"]["flops_per_sample"]


def test_parity_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = benchtui("parity", "--models", "gpt2", "--seq-len", "4096")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "benchtui: error: GPT-2 small has a context of 1,024 tokens: --seq-len 4,096 is longer"
    ]


def test_inference_with_an_automatic_batch_searches_with_inference_probes(sessions_root: Path) -> None:
    session, summary, events = _run(
        sessions_root,
        *("--frameworks", "torch", "--models", "gpt2_mini", "--seq-len", "8", "--task", "inference"),
        *("--samples", "8", "--batch-size", "auto", "--max-batch-size", "4", "--epochs", "1"),
    )
    probes = [e for e in events if e["type"] == "probe"]
    assert probes and all(p["result"] == "ok" for p in probes)
    assert next(e for e in events if e["type"] == "batch_choice")["chosen"] == {"torch": 4}
    # Each probe is a fresh runner doing what the run does: forward passes, no optimizer.
    for probe in probes:
        log = (session / "logs" / f"{probe['probe']}.log").read_text()
        assert "Traceback" not in log
    row = summary["rows"][0]
    assert row["status"] == "ok" and row["task"] == "inference" and row["batch_size"] == 4

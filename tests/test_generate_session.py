"""A generate session end to end (issue 34): the real CLI starts real PyTorch and Keras/JAX runners, each
generates exactly N tokens per sequence with a key/value cache, and every figure the session shows comes
from the runners' ``tokens`` events: recomputed here from events.jsonl, not from the code under test."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from support import benchtui, only_session, read_events

P, N, BATCH, SAMPLES, EPOCHS = 8, 5, 2, 4, 2


@pytest.mark.slow
def test_torch_and_keras_jax_generate_one_session_every_view_from_the_tokens_events(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    args = ["run", "--headless", "--task", "generate", "--models", "gpt2_mini"]
    args += ["--frameworks", "torch,keras-jax", "--prompt-len", str(P), "--new-tokens", str(N)]
    args += ["--samples", str(SAMPLES), "--batch-size", str(BATCH), "--epochs", str(EPOCHS), "--runs", "1"]
    args += [
        "--timing",
        "step",
        "--threads",
        "1",
        "--device",
        "cpu",
        "--no-nvml",
        "--sessions-dir",
        str(root),
    ]
    done = benchtui(*args, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tokens/s after the first (batch 2), first token" in done.stderr
    session = only_session(root)
    events = read_events(session)
    summary = json.loads((session / "summary.json").read_text())
    rows = {r["framework"]: r for r in summary["rows"]}
    assert set(rows) == {"torch", "keras-jax"}

    for framework, row in rows.items():
        (run,) = [e["run"] for e in events if e["type"] == "run_start" and framework in e["run"]]
        tokens = [e for e in events if e.get("run") == run and e["type"] == "tokens"]
        # One event per generate call: steps per epoch x epochs; each sequence got exactly N tokens, each
        # token a one-token step, timed one by one (--timing step): N - 1 gaps.
        assert len(tokens) == SAMPLES // BATCH * EPOCHS
        assert {(e["tokens"], e["decode_steps"], len(e["token_s"])) for e in tokens} == {(N, N, N - 1)}
        hello = next(e for e in events if e.get("run") == run and e["type"] == "hello")
        generation = hello["settings"]["generation"]
        assert generation["cache_bytes_per_token"] == 2 * 4 * 256 * 4  # K and V, 4 layers, width 256, fp32

        steady = [e for e in tokens if e["epoch"] > 1]
        figures = row["generation"]
        assert (figures["prompt_len"], figures["new_tokens"], figures["sequences"]) == (P, N, BATCH)
        assert figures["per_token"] is True and figures["steps"] == len(steady)
        assert figures["first_token_s"] == pytest.approx(
            statistics.median(e["first_token_s"] for e in steady)
        )
        gaps = [g for e in steady for g in e["token_s"]]
        assert figures["token_s"] == pytest.approx(statistics.median(gaps))
        decode = sum(e["decode_s"] for e in steady)
        assert figures["batch_tokens_per_s"] == pytest.approx((N - 1) * BATCH * len(steady) / decode)
        assert len(figures["latency_curve"]) == N - 1
        assert (figures["tokens"], figures["decode_steps"]) == (N, N)

    (ratio,) = summary["ratios"]
    assert ratio["basis"] == "tokens" and ratio["parity_flagged"] is True
    speeds = {fw: rows[fw]["generation"]["batch_tokens_per_s"] for fw in rows}
    assert ratio["ratio"] == pytest.approx(speeds[ratio["base"]] / speeds[ratio["framework"]], rel=0.05)

    shown = benchtui("show", str(session))
    assert shown.returncode == 0, shown.stderr
    assert "the batch's time per token after the first (--task generate)" in shown.stdout
    assert "Generation: time to first token and token latency (ms)" in shown.stdout
    html = tmp_path / "report.html"
    assert benchtui("export", "--format", "html", "-o", str(html), str(session)).returncode == 0
    assert "GPT-2 mini: latency per token (median over calls, by token index)" in html.read_text()
    table = tmp_path / "report.csv"
    assert benchtui("export", "--format", "csv", "-o", str(table), str(session)).returncode == 0
    with table.open() as f:
        by_framework = {r["framework"]: r for r in csv.DictReader(f)}
    for framework, row in rows.items():
        written = float(by_framework[framework]["generate_batch_tokens_per_s"])
        assert written == pytest.approx(row["generation"]["batch_tokens_per_s"], rel=1e-3)

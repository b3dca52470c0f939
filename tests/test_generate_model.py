"""--task generate's model (issue 34): the fold of the runner's ``tokens`` events, a cell's GenerationFigures
(hand-computed), the verdict on the batch's tokens/s after the first token with time to first token beside
it, and the parity caution where the sides do not decode the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model.cell import CellSummary, GenerationFigures
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import CautionKind
from benchtui.core.plan.plan import Plan
from sessionfactory import generation_settings, make_session, read_events

RUN = "001-torch-gpt2_mini-1"


def hand_plan(epochs: int = 2) -> Plan:
    return Plan(
        frameworks=["torch"],
        models=["gpt2_mini"],
        runs=1,
        epochs=epochs,
        samples=4,
        batch_sizes={"gpt2_mini": 2},
        task="generate",
        prompt_len=8,
        new_tokens=3,
        device="cpu",
    )


def tokens(epoch: int, step: int, first: float, gaps: list[float] | None, **extra: Any) -> dict[str, Any]:
    """A ``tokens`` event of 2 sequences, prompt 8, 3 new tokens (``gaps``: token_s, or the decode_s alone)."""
    decode = sum(gaps) if gaps is not None else extra.pop("decode_s")
    event = {
        "type": "tokens",
        "run": RUN,
        "t": 1.0,
        "epoch": epoch,
        "step": step,
        "sequences": 2,
        "prompt_len": 8,
        "new_tokens": 3,
        "first_token_s": first,
        "decode_s": decode,
        "tokens": 3,
        "decode_steps": 3,
        **extra,
    }
    if gaps is not None:
        event["token_s"] = gaps
    return event


def fold(steps: list[dict[str, Any]], epochs: dict[int, float], epochs_planned: int = 2) -> SessionModel:
    """A run of hand-made generate steps: its hello (settings.generation), each step's batch and tokens
    events, its epochs and its end, folded."""
    model = SessionModel(hand_plan(epochs_planned))
    settings = {"task": "generate", "generation": generation_settings("torch", 8, 3)}
    model.apply({"type": "run_start", "run": RUN, "t": 0.0})
    model.apply(
        {
            "type": "hello",
            "run": RUN,
            "t": 0.1,
            "pid": 1,
            "framework": "torch",
            "settings": settings,
            "steps_per_epoch": 2,
            "samples_per_epoch": 4,
        }
    )
    for event in steps:
        window = 2 * event["first_token_s"] + event["decode_s"]
        model.apply(
            {
                "type": "batch",
                "run": RUN,
                "t": 1.0,
                "epoch": event["epoch"],
                "step": event["step"],
                "seconds": window,
                "samples": 2,
            }
        )
        model.apply(event)
    for epoch, seconds in epochs.items():
        model.apply({"type": "epoch", "run": RUN, "t": 2.0, "epoch": epoch, "seconds": seconds, "samples": 4})
    model.apply({"type": "done", "run": RUN, "t": 3.0})
    model.apply({"type": "run_end", "run": RUN, "t": 3.0, "status": "ok"})
    return model


COMPILE = [tokens(1, 1, 1.0, [1.5, 0.5]), tokens(1, 2, 0.5, [0.25, 0.25])]
STEADY = [tokens(2, 1, 0.010, [0.004, 0.006]), tokens(2, 2, 0.020, [0.008, 0.010])]


def test_each_tokens_event_is_folded_into_its_run_in_order() -> None:
    model = fold([*COMPILE, *STEADY], {1: 3.5, 2: 0.1})
    run = model.runs[RUN]
    assert run.generation is not None
    steps = run.generation.steps
    assert [(s.epoch, s.step) for s in steps] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert steps[2].token_s == (0.004, 0.006) and steps[2].first_token_s == 0.010
    assert steps[3].decode_s == pytest.approx(0.018) and steps[3].sequences == 2
    assert run.generation.latest() is steps[3]
    assert model.malformed == 0


def test_a_made_session_folds_a_step_per_batch_and_keeps_the_runner_s_numbers(tmp_path: Path) -> None:
    path = make_session(
        tmp_path,
        models=("gpt2_mini",),
        runs=1,
        epochs=2,
        steps=3,
        batch_size=4,
        timing="step",
        generate={"prompt_len": 16, "new_tokens": 6},
    )
    plan = Plan.from_dict(json.loads((path / "session.json").read_text())["plan"])
    model = SessionModel(plan)
    events = list(read_events(path))
    for event in events:
        model.apply(event)
    said = [e for e in events if e.get("type") == "tokens" and e["run"] == "001-torch-gpt2_mini-1"]
    run = model.runs["001-torch-gpt2_mini-1"]
    assert run.generation is not None and len(run.generation.steps) == len(said) == 6
    for step, event in zip(run.generation.steps, said, strict=True):
        assert step.first_token_s == event["first_token_s"] and step.token_s == tuple(event["token_s"])
        assert (step.prompt_len, step.new_tokens, step.sequences) == (16, 6, 4)


def test_a_tokens_event_that_cannot_be_a_step_is_malformed_and_not_folded() -> None:
    bad = tokens(2, 1, 0.010, [0.004, 0.006, 0.001])  # 3 latencies for 3 new tokens: one too many
    model = fold([*COMPILE, bad], {1: 3.5, 2: 0.1})
    steps = model.runs[RUN].generation.steps  # type: ignore[union-attr]
    assert len(steps) == 2 and model.malformed == 1


def test_per_token_figures_are_over_the_steady_epochs_as_computed_by_hand() -> None:
    model = fold([*COMPILE, *STEADY], {1: 3.5, 2: 0.1})
    row = model.row("torch", "gpt2_mini")
    g = row.generation
    assert g is not None
    assert (g.prompt_len, g.new_tokens, g.sequences, g.steps, g.per_token) == (8, 3, 2, 2, True)
    # Time to first token over the steady steps 0.010 and 0.020 (linear quantiles).
    assert g.first_token_s == pytest.approx(0.015)
    assert g.first_token_p90_s == pytest.approx(0.019)
    assert g.first_token_p99_s == pytest.approx(0.0199)
    # Each later token's own latency: 0.004, 0.006, 0.008, 0.010.
    assert g.token_s == pytest.approx(0.007)
    assert g.token_p90_s == pytest.approx(0.0094)
    assert g.token_p99_s == pytest.approx(0.00994)
    # 4 tokens after the first per sequence over 0.028 s of decoding; the batch's: 2 sequences.
    assert g.tokens_per_s == pytest.approx(4 / 0.028)
    assert g.batch_tokens_per_s == pytest.approx(8 / 0.028)
    assert g.compile_s == pytest.approx(3.4)  # the first epoch less the median steady one
    assert g.cache_bytes_per_token == 2 * 4 * 256 * 4
    assert (g.tokens, g.decode_steps) == (3, 3)
    assert g.latency_curve == pytest.approx((0.006, 0.008))  # token 2: median of 0.004, 0.008; token 3


def test_window_timing_figures_are_per_step_and_draw_no_curve() -> None:
    steady = [
        tokens(2, 1, 0.010, None, decode_s=0.010),
        tokens(2, 2, 0.030, None, decode_s=0.018, decode_steps=None),
    ]
    model = fold([*COMPILE, *steady], {1: 3.5, 2: 0.1})
    g = model.row("torch", "gpt2_mini").generation
    assert g is not None and g.per_token is False and g.latency_curve == ()
    assert g.token_s == pytest.approx(0.007)  # the steps' means 0.005 and 0.009
    assert g.token_p90_s == pytest.approx(0.0086)
    assert g.first_token_s == pytest.approx(0.020)
    assert g.batch_tokens_per_s == pytest.approx(8 / 0.028)
    assert g.decode_steps is None  # a step did not count its decode steps


def test_one_epoch_takes_the_steps_after_the_first_and_knows_no_compile_time() -> None:
    steps = [tokens(1, 1, 1.0, [1.5, 0.5]), tokens(1, 2, 0.010, [0.004, 0.006])]
    model = fold(steps, {1: 3.5}, epochs_planned=1)
    g = model.row("torch", "gpt2_mini").generation
    assert g is not None and g.steps == 1 and g.first_token_s == pytest.approx(0.010)
    assert g.compile_s is None


def test_summary_json_carries_the_figures_only_for_a_generate_cell(tmp_path: Path) -> None:
    path = make_session(
        tmp_path / "g",
        models=("gpt2_mini",),
        runs=1,
        epochs=2,
        steps=3,
        batch_size=4,
        generate={"prompt_len": 16, "new_tokens": 6},
    )
    rows = json.loads((path / "summary.json").read_text())["rows"]
    assert all(isinstance(r["generation"], dict) for r in rows)
    again = CellSummary.from_json(rows[0]).generation
    assert isinstance(again, GenerationFigures) and again.new_tokens == 6 and again.per_token is False
    plain = make_session(tmp_path / "t", models=("gpt2_mini",), runs=1, epochs=2, steps=3, batch_size=4)
    assert all("generation" not in r for r in json.loads((plain / "summary.json").read_text())["rows"])


def _verdict(tmp_path: Path, token_s: dict[str, float], **generate: Any) -> dict[str, Any]:
    path = make_session(
        tmp_path,
        models=("gpt2_mini",),
        runs=2,
        epochs=3,
        steps=4,
        batch_size=8,
        generate={
            "prompt_len": 16,
            "new_tokens": 8,
            "token_s": token_s,
            "first_token_s": {"torch": 0.012, "tensorflow": 0.020},
            **generate,
        },
    )
    summary = json.loads((path / "summary.json").read_text())
    (ratio,) = summary["ratios"]
    return {"ratio": ratio, "rows": summary["rows"]}


def test_the_verdict_is_on_tokens_per_s_after_the_first_token_with_time_to_first_token(
    tmp_path: Path,
) -> None:
    faster_torch = _verdict(tmp_path / "a", {"torch": 0.004, "tensorflow": 0.006})["ratio"]
    assert faster_torch["basis"] == "tokens" and faster_torch["faster_framework"] == "torch"
    text = faster_torch["text"]
    assert text.startswith("PyTorch 1.5") and "× more tokens/s after the first token (" in text
    assert ", batch 8; 95% CI " in text and "time to first token " in text
    # The numbers are the cells' own: the batch's tokens/s after the first token, the median first token.
    rows = _verdict(tmp_path / "b", {"torch": 0.004, "tensorflow": 0.006})["rows"]
    torch, tf = (r["generation"] for r in rows)
    assert f"({torch['batch_tokens_per_s']:,.0f} vs {tf['batch_tokens_per_s']:,.0f} tok/s" in text
    assert (
        f"time to first token {torch['first_token_s'] * 1e3:.1f} ms vs {tf['first_token_s'] * 1e3:.1f} ms"
        in text
    )
    assert torch["batch_tokens_per_s"] / tf["batch_tokens_per_s"] == pytest.approx(1.5, rel=0.03)
    # The other way round: tf.keras makes more tokens/s, its time to first token still said first.
    faster_tf = _verdict(tmp_path / "c", {"torch": 0.009, "tensorflow": 0.006})["ratio"]
    assert faster_tf["faster_framework"] == "tensorflow" and faster_tf["text"].startswith("tf.keras 1.")
    assert faster_tf["factor"] == pytest.approx(1.5, rel=0.03)
    assert "time to first token 20." in faster_tf["text"]  # the winner's first: tf.keras's 20 ms


def test_sides_that_decode_differently_are_flagged_naming_what_differs(tmp_path: Path) -> None:
    found = _verdict(tmp_path / "a", {"torch": 0.004, "tensorflow": 0.006})
    assert found["ratio"]["parity_flagged"] is True
    assert found["ratio"]["text"].endswith(
        "; the sides do not generate the same way (prefill differs, decode steps differ)"
    )
    for row in found["rows"]:
        (flag,) = [w for w in row["warnings"] if w["kind"] == CautionKind.ARCHITECTURE]
        assert flag["message"] == (
            "GPT-2 mini: the frameworks do not generate the same way: prefill differs (PyTorch: 16 prompt "
            "positions, giving the first token; tf.keras: the cache seeded over 24 positions (prompt and new "
            "tokens)), decode steps differ (PyTorch: 7 one-token steps; tf.keras: 8 one-token steps (the first "
            "re-reads the prompt's last token))"
        )
    # Only the decode steps differ: only they are named.
    torch_side = generation_settings("torch", 16, 8)
    same_prefill = {"tensorflow": {"prefill": torch_side["prefill"]}}
    found = _verdict(tmp_path / "b", {"torch": 0.004, "tensorflow": 0.006}, settings=same_prefill)
    assert found["ratio"]["text"].endswith("(decode steps differ)")
    # The same work on both sides: no flag, no caution.
    same = {"tensorflow": {k: torch_side[k] for k in ("prefill", "decode_steps")}}
    found = _verdict(tmp_path / "c", {"torch": 0.004, "tensorflow": 0.006}, settings=same)
    assert found["ratio"]["parity_flagged"] is False and "generate the same way" not in found["ratio"]["text"]
    assert all(w["kind"] != CautionKind.ARCHITECTURE for r in found["rows"] for w in r["warnings"])


def test_a_loaded_machine_gives_no_winner_and_says_what_was_timed(tmp_path: Path) -> None:
    path = make_session(
        tmp_path,
        models=("gpt2_mini",),
        runs=2,
        epochs=3,
        steps=4,
        batch_size=8,
        generate={"prompt_len": 16, "new_tokens": 8, "token_s": {"torch": 0.004, "tensorflow": 0.006}},
    )
    plan = Plan.from_dict(json.loads((path / "session.json").read_text())["plan"])
    model = SessionModel(plan, host={"cpu_count": 2})
    for event in read_events(path):
        if event.get("type") == "run_end":  # other processes kept 1.9 of the 2 cores busy
            event["other_cpu_cores"] = 1.9
        model.apply(event)
    (ratio,) = model.session_summary().ratios
    assert ratio.faster_framework is None and ratio.unreliable
    assert "measured, not a verdict: tf.keras took 1." in ratio.text and ratio.factor == pytest.approx(
        1.5, rel=0.03
    )
    assert "× PyTorch's time per token after the first (95% CI " in ratio.text

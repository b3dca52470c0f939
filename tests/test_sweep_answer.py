"""A sweep's answer (core/model/sweeps.py): best vs best, what each setting buys, and its rows' notes.

Made-up sessions (``make_session(sweep=, point_speed=)``): a point's step time scales as batch**0.8 and a
(framework, point) may be made faster or slower, so each answer has a known value to meet.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.model import analysis, sweeps
from benchtui.core.model.cell import SessionSummary
from benchtui.core.model.session_model import SessionModel, model_verdicts
from benchtui.core.model.status import NOTES, CautionKind, RunStatus
from benchtui.core.plan.sweep import Point
from benchtui.core.store.session import json_safe, load_session
from sessionfactory import RESNET50_NETWORKS, make_session

DATA = Path(__file__).parent / "data"
#: summary.json of sessions without a sweep as the code before sweeps wrote it (commit 6773620).
PRESWEEP = DATA / "presweep"
GRID = {"batch": ["4", "8"], "channels-last": ["off", "on"]}
#: PyTorch's channels-last makes its steps take 0.7 of the time: a 1/0.7 speed-up.
CHANNELS_LAST = {("torch", "batch=4,channels-last=on"): 0.7, ("torch", "batch=8,channels-last=on"): 0.7}


def _session(tmp_path: Path, **kwargs: Any) -> SessionModel:
    options: dict[str, Any] = {"sweep": GRID, "batch_size": 4, "runs": 3, **kwargs}
    return load_session(make_session(tmp_path, **options)).model


def _ok(model: SessionModel, fw: str, point: Point) -> list[Any]:
    return [r for r in model.cell_runs(fw, "resnet50", point=point) if r.status is RunStatus.OK]


def test_best_vs_best_is_the_verdict_between_the_chosen_cells(tmp_path: Path) -> None:
    model = _session(tmp_path, point_speed=CHANNELS_LAST)
    answer = model.session_summary().sweep
    assert answer is not None and answer.axes == {"batch": ("4", "8"), "channels-last": ("off", "on")}
    (best,) = answer.best
    # PyTorch at batch 8 with channels-last; tf.keras at batch 8 (its channels-last is its only layout).
    assert best.base.framework == "torch" and best.base.point == Point.from_key("batch=8,channels-last=on")
    assert best.other.framework == "tensorflow"
    assert best.other.point == Point.from_key("batch=8,channels-last=off")
    assert (best.base.points, best.other.points) == (4, 2)
    base, other = _ok(model, "torch", best.base.point), _ok(model, "tensorflow", best.other.point)
    compared = analysis.compare_cells(base, other)
    assert compared is not None
    ratio = compared[1]
    assert (best.verdict.ratio, best.verdict.ci_low, best.verdict.ci_high) == (
        ratio.value,
        ratio.low,
        ratio.high,
    )
    assert best.verdict.ratio == pytest.approx(best.base.images_per_s / best.other.images_per_s, rel=1e-9)
    # Both best cells are those of one point (batch 8, channels-last on): its same-settings verdict agrees.
    (same,), _ = model_verdicts(model, "resnet50", best.base.point)
    assert (same.ratio, same.ci_low, same.ci_high, same.faster_framework) == (
        best.verdict.ratio,
        best.verdict.ci_low,
        best.verdict.ci_high,
        best.verdict.faster_framework,
    )
    assert best.verdict.faster_framework == "torch" and best.verdict.point == Point()
    assert best.text.startswith(
        "best vs best: PyTorch at batch 8 · channels-last on "
        f"{best.verdict.factor:.2f}× faster than tf.keras at batch 8 (95% CI "
    )
    assert "choosing the best of" in best.text and ("overstates" in best.text or "understates" in best.text)


def test_the_best_points_may_differ_per_framework(tmp_path: Path) -> None:
    # tf.keras is slow at batch 8 (its steps 1.6x as long as batch**0.8 says): its best is batch 4.
    slow = {("tensorflow", "batch=8,channels-last=off"): 1.6}
    model = _session(tmp_path, point_speed={**CHANNELS_LAST, **slow})
    answer = model.session_summary().sweep
    assert answer is not None
    (best,) = answer.best
    assert best.base.point == Point.from_key("batch=8,channels-last=on")
    assert best.other.point == Point.from_key("batch=4,channels-last=off")
    # tf.keras's point names no channels-last: it changes nothing there (the point itself keeps it).
    assert best.other.settings == "batch 4"
    assert "tf.keras at batch 4 (95% CI" in best.text
    base, other = _ok(model, "torch", best.base.point), _ok(model, "tensorflow", best.other.point)
    compared = analysis.compare_cells(base, other)
    assert compared is not None and best.verdict.ratio == compared[1].value
    # No same-settings verdict compares these two cells: best vs best is its own.
    same = [r for p in model.plan.points() for r in model_verdicts(model, "resnet50", p)[0]]
    assert all(r.ratio != best.verdict.ratio for r in same)


def test_each_setting_s_speed_up_is_what_the_runs_were_made_with(tmp_path: Path) -> None:
    model = _session(tmp_path, point_speed=CHANNELS_LAST, noise=0.01, run_noise=0.01)
    answer = model.session_summary().sweep
    assert answer is not None
    gains = {(g.framework, g.axis, g.value): g for g in answer.gains}
    assert set(gains) == {
        ("torch", "batch", "8"),
        ("torch", "channels-last", "on"),
        ("tensorflow", "batch", "8"),
        ("tensorflow", "channels-last", "on"),
    }
    layout = gains[("torch", "channels-last", "on")]
    assert layout.baseline == "off" and layout.pairs == 2 and layout.no_effect is None
    assert layout.factor == pytest.approx(1 / 0.7, rel=0.03)
    assert layout.ci_low is not None and layout.ci_high is not None
    assert layout.ci_low < layout.factor < layout.ci_high
    assert layout.text.startswith(f"channels-last on: {layout.factor:.2f}× (95% CIs ")
    # Twice the batch: a step 2**0.8 as long for twice the images, 2**0.2 the throughput.
    for fw in ("torch", "tensorflow"):
        batch = gains[(fw, "batch", "8")]
        assert batch.factor == pytest.approx(2**0.2, rel=0.03)
    # tf.keras reads the same runs at channels-last on: one pair, not two, and no effect said as such.
    assert gains[("tensorflow", "batch", "8")].pairs == 1
    keras = gains[("tensorflow", "channels-last", "on")]
    assert keras.factor is None and keras.pairs == 0
    assert keras.no_effect == "tf.keras is channels-last at every setting"
    assert keras.text == "channels-last on: no effect (tf.keras is channels-last at every setting)"
    # The factor of several pairs is their geometric mean.
    pairs = []
    for batch_size in ("4", "8"):
        off = _ok(model, "torch", Point.from_key(f"batch={batch_size},channels-last=off"))
        on = _ok(model, "torch", Point.from_key(f"batch={batch_size},channels-last=on"))
        compared = analysis.compare_cells(off, on)
        assert compared is not None
        pairs.append(1 / compared[1].value)
    assert layout.factor == pytest.approx(math.sqrt(pairs[0] * pairs[1]), rel=1e-12)


def _bias(tmp_path: Path, values: list[str], seed: int, runs: int = 3) -> tuple[float | None, float | None]:
    """(the best point's bias, best vs best's bias) over a precision sweep whose points are all as fast."""
    path = make_session(
        tmp_path / f"{len(values)}-{seed}-{runs}",
        sweep={"precision": values},
        runs=runs,
        seed=seed,
        noise=0.05,
        run_noise=0.05,
        epochs=3,
    )
    answer = load_session(path).model.session_summary().sweep
    assert answer is not None
    (best,) = answer.best
    return best.base.bias, best.bias


def test_the_selection_bias_is_measured_from_the_runs(tmp_path: Path) -> None:
    # One run a point: nothing to resample between runs, no bias claimed.
    assert _bias(tmp_path, ["fp32", "tf32"], seed=1, runs=1) == (None, None)
    # Noisy runs (5% from run to run) of equally fast points: the best of them is flattered a little, and
    # more among more points (on average over sessions: one session's best may stand clear of the rest).
    two, four = [], []
    for seed in range(1, 7):
        two.append(_bias(tmp_path, ["fp32", "tf32"], seed)[0])
        four.append(_bias(tmp_path, ["fp32", "tf32", "amp-fp16", "amp-bf16"], seed)[0])
    assert all(b is not None and -0.002 < b < 0.05 for b in (*two, *four))
    mean_two, mean_four = (sum(b or 0.0 for b in v) / len(v) for v in (two, four))
    assert 0.001 < mean_two < 0.02 and 0.004 < mean_four < 0.04
    assert mean_four > 2 * mean_two


def test_bias_is_deterministic_and_said_in_the_text(tmp_path: Path) -> None:
    runs = [_session(tmp_path / str(i), point_speed=CHANNELS_LAST, seed=4) for i in (1, 2)]
    first, second = (m.session_summary().sweep for m in runs)
    assert first == second and first is not None
    (best,) = first.best
    assert best.bias is not None and best.base.bias is not None
    assert sweeps.percent_words(best.bias) in best.text


def test_one_point_a_side_has_no_bias(tmp_path: Path) -> None:
    # A sweep whose one axis changes nothing for either framework: both read one point's runs.
    path = make_session(
        tmp_path, sweep={"channels-last": ["off", "on"]}, frameworks=("tensorflow", "keras-jax")
    )
    answer = load_session(path).model.session_summary().sweep
    assert answer is not None
    (best,) = answer.best
    assert (best.base.points, best.other.points) == (1, 1)
    assert best.bias is None and best.base.bias is None
    assert "one point a side: no choice, no selection bias" in best.text


def test_rows_say_when_their_runs_are_another_point_s(tmp_path: Path) -> None:
    model = _session(tmp_path, point_speed=CHANNELS_LAST)
    rows = {(r.framework, r.point.key): r for r in model.rows()}
    keras = rows[("tensorflow", "batch=4,channels-last=on")]
    (note,) = [w for w in keras.warnings if w["kind"] == CautionKind.SAME_RUNS]
    assert note["message"] == (
        "the same runs as batch 4 · channels-last off: tf.keras is channels-last at every setting"
    )
    assert CautionKind.SAME_RUNS in NOTES
    assert keras.run_ids == rows[("tensorflow", "batch=4,channels-last=off")].run_ids
    assert not keras.flagged
    # A note, not a doubt: the verdict at that point has its winner.
    ratios, _ = model_verdicts(model, "resnet50", keras.point)
    assert ratios[0].unreliable is None and ratios[0].faster_framework == "torch"
    # A cell with runs of its own has no such note.
    assert not [
        w for r in rows.values() if r.framework == "torch" for w in r.warnings if w["kind"] == "same-runs"
    ]


def test_summary_json_round_trip(tmp_path: Path) -> None:
    summary = _session(tmp_path, point_speed=CHANNELS_LAST).session_summary()
    data = json.loads(json.dumps(json_safe(summary.to_json())))
    again = SessionSummary.from_json(data)
    assert again.sweep == summary.sweep
    assert again.to_json() == summary.to_json()
    assert list(data)[-2:] == ["sweep", "labels"]


def test_a_point_s_batch_comes_from_its_own_search(tmp_path: Path) -> None:
    loaded = _session(tmp_path, sweep={"batch": ["4", "auto"]}, runs=1)
    model = SessionModel(loaded.plan)  # before any run: the search's choice, not the plan's
    auto = Point.from_key("batch=auto")
    model.apply({"type": "batch_choice", "model": "resnet50", "chosen": {"torch": 6}})
    model.apply({"type": "batch_choice", "model": "resnet50", "point": "batch=auto", "chosen": {"torch": 32}})
    assert model.batch_size("torch", "resnet50", auto) == 32
    assert model.batch_size("tensorflow", "resnet50", auto) != 32
    model.apply(
        {
            "type": "batch_choice",
            "model": "resnet50",
            "point": {"batch": "auto"},
            "chosen": {"tensorflow": 16},
        }
    )
    assert model.batch_size("tensorflow", "resnet50", auto) == 16


@pytest.mark.parametrize("name", ["tiny-cpu-session", "gpu-session", "scaling", "study"])
def test_a_session_without_a_sweep_writes_summary_json_as_before(tmp_path: Path, name: str) -> None:
    if name in ("tiny-cpu-session", "gpu-session"):
        path = tmp_path / name
        shutil.copytree(DATA / name, path)
    elif name == "scaling":
        path = make_session(
            tmp_path, name="scaling", devices=4, scaling=True, gpu=True, runs=2, folder="scaling"
        )
    else:
        path = make_session(tmp_path, name="study", models=("resnet50",), runs=3, folder="study")
    model = load_session(path).model
    assert model.session_summary().sweep is None
    text = json.dumps(json_safe(model.summary()), indent=2, sort_keys=False, allow_nan=False) + "\n"
    assert text == (PRESWEEP / f"{name}.summary.json").read_text(encoding="utf-8")


def test_live_figures_read_the_run_s_own_point(tmp_path: Path) -> None:
    model = _session(tmp_path, runs=2, networks=RESNET50_NETWORKS)
    big = Point.from_key("batch=8,channels-last=off")
    first, second = sorted(model.cell_runs("torch", "resnet50", point=big), key=lambda r: r.spec.index)
    first.flops = {}  # mid-run: its count comes after its timed epochs; the cell's other run has one
    figures = model.live_figures(first)
    # A step of batch 8 holds twice the FLOPs of batch 4 (the first point's): its own cell's count.
    assert figures.flops_per_step == pytest.approx(second.flops["per_step"])
    small = model.cell_runs("torch", "resnet50", point=Point.from_key("batch=4,channels-last=off"))
    assert figures.flops_per_step == pytest.approx(2 * small[0].flops["per_step"], rel=1e-6)


def test_best_vs_best_refuses_cells_on_different_devices(tmp_path: Path) -> None:
    model = _session(
        tmp_path, point_speed=CHANNELS_LAST, cpu_frameworks=("tensorflow",)
    )  # tf.keras on the CPU
    answer = model.session_summary().sweep
    assert answer is not None and answer.best == ()
    (refused,) = answer.refused
    assert refused.text.startswith(
        "best vs best: no ratio between PyTorch at batch 8 · channels-last on and tf.keras at batch 8: "
        "they ran on different devices (PyTorch cuda, tf.keras cpu)"
    )
    data = model.session_summary().to_json()["sweep"]
    assert SessionSummary.from_json({"sweep": data}).sweep == answer


def test_settings_best_names_what_best_set_for_each_framework(tmp_path: Path) -> None:
    faster = {("torch", "settings=best"): 0.35, ("tensorflow", "settings=best"): 0.5}
    path = make_session(tmp_path, sweep={"settings": ["same", "best"]}, batch_size=4, point_speed=faster)
    model = load_session(path).model
    answer = model.session_summary().sweep
    assert answer is not None
    (best,) = answer.best
    # On a CPU plan (no GPU identity): PyTorch's compiler and channels-last; Keras's own compiler default.
    assert best.base.settings == "fp32, compile on, channels-last on, batch 4"
    assert best.other.settings == "fp32, compile default, batch 4"
    assert "PyTorch at its best (fp32, compile on, channels-last on, batch 4)" in best.text
    gains = {g.framework: g for g in answer.gains}
    assert gains["torch"].factor == pytest.approx(1 / 0.35, rel=0.03)
    assert gains["torch"].text.startswith("best (fp32, compile on, channels-last on, batch 4): 2.")
    assert gains["tensorflow"].factor == pytest.approx(2.0, rel=0.03)


def test_a_token_model_s_sequence_lengths_are_workloads_not_settings(tmp_path: Path) -> None:
    # tf.keras is twice as fast at batch 8 with 64 tokens; a step takes as long at 32 tokens as at 64.
    path = make_session(
        tmp_path,
        models=("gpt2_mini",),
        sweep={"batch": ["4", "8"], "seq-len": ["32", "64"]},
        batch_size=4,
        point_speed={("tensorflow", "batch=8,seq-len=64"): 0.5},
    )
    model = load_session(path).model
    answer = model.session_summary().sweep
    assert answer is not None
    # Best vs best at each length: never PyTorch at 32 tokens against tf.keras at 64.
    short, long = answer.best
    assert {short.base.point.get("seq-len"), short.other.point.get("seq-len")} == {"32"}
    assert {long.base.point.get("seq-len"), long.other.point.get("seq-len")} == {"64"}
    assert long.verdict.faster_framework == "tensorflow" and short.verdict.faster_framework == "torch"
    # What a longer sequence buys, in tokens/s: as many samples/s with twice the tokens each.
    (tokens,) = [g for g in answer.gains if g.framework == "torch" and g.axis == "seq-len"]
    assert tokens.factor == pytest.approx(2.0, rel=0.03) and " tokens/s" in tokens.text
    rows = {(r.framework, r.point.key): r for r in model.rows()}
    assert rows[("torch", "batch=4,seq-len=64")].tokens_per_sample == 64
    assert rows[("torch", "batch=4,seq-len=32")].tokens_per_sample == 32


def test_the_search_s_lines_name_their_point(tmp_path: Path) -> None:
    loaded = _session(tmp_path, sweep={"batch": ["4", "auto"], "channels-last": ["off", "on"]}, runs=1)
    model = SessionModel(loaded.plan)
    for point, chosen in (("batch=auto,channels-last=off", 32), ("batch=auto,channels-last=on", 48)):
        for size, result in ((32, "ok"), (64, "oom")):
            probe = {"model": "resnet50", "framework": "torch", "batch_size": size, "point": point}
            model.apply({"type": "probe", **probe, "result": "ok" if size <= chosen else result})
        model.apply(
            {"type": "batch_choice", "model": "resnet50", "point": point, "chosen": {"torch": chosen}}
        )
    name = analysis.model_label("resnet50")
    assert model.search_lines() == [
        f"largest batch, {name} · PyTorch · batch auto · channels-last off: 32 ok, 64 oom → batch 32",
        f"largest batch, {name} · PyTorch · batch auto · channels-last on: 32 ok, 64 oom → batch 48",
    ]
    assert model.batch_size("torch", "resnet50", Point.from_key("batch=auto,channels-last=on")) == 48

"""`benchtui compare`: per-cell ratios with CIs, significance, and the --fail-above gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchtui.cli import main
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.store.session import load_session
from sessionfactory import make_session

BASE_SPEED = {("torch", "resnet50"): 0.040, ("tensorflow", "resnet50"): 0.048}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cmp")
    kw = dict(models=("resnet50",), runs=3, epochs=4, steps=20, seed=1)
    make_session(root, name="base", speed=BASE_SPEED, **kw)  # type: ignore[arg-type]
    # PyTorch 20% slower; tf.keras the same data (same seed, same speed): exactly equal.
    slower = {**BASE_SPEED, ("torch", "resnet50"): 0.048}
    make_session(root, name="slower", speed=slower, **kw)  # type: ignore[arg-type]
    faster = {**BASE_SPEED, ("torch", "resnet50"): 0.032}
    make_session(root, name="faster", speed=faster, **kw)  # type: ignore[arg-type]
    return root


def _folder(root: Path, name: str) -> Path:
    return next(root.glob(f"*_{name}"))


def test_rows_ratios_and_significance(root: Path) -> None:
    cmp = compare_sessions(_folder(root, "base"), _folder(root, "slower"))
    rows = {(r.model, r.framework): r for r in cmp.rows}
    torch, tf = rows[("resnet50", "torch")], rows[("resnet50", "tensorflow")]
    assert torch.basis == "epoch" and torch.time_a is not None and torch.time_b is not None
    assert torch.ratio is not None and torch.ratio.value == pytest.approx(torch.time_b / torch.time_a)
    assert torch.ratio.value == pytest.approx(1.2, abs=0.02)
    assert torch.ratio.significant is True and not torch.ratio.faster
    assert torch.ratio.phrase().startswith("1.2") and "slower (95% CI" in torch.ratio.phrase()
    assert tf.ratio is not None and tf.ratio.value == 1.0 and tf.ratio.significant is False
    assert "not significant" in tf.ratio.phrase()
    assert cmp.differences == []


def test_seeded_numbers_repeat(root: Path) -> None:
    a = compare_sessions(_folder(root, "base"), _folder(root, "slower")).to_dict()
    b = compare_sessions(_folder(root, "base"), _folder(root, "slower")).to_dict()
    assert a == b


def test_cli_table_and_fail_above(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["compare", "base", "slower", "--sessions-dir", str(root)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ResNet50" in out and "PyTorch" in out and "tf.keras" in out
    assert "slower (95% CI" in out and "not significant" in out
    assert main(args + ["--fail-above", "10"]) == 1
    err = capsys.readouterr().err
    assert (
        "FAIL: ResNet50 · PyTorch: +2" in err and "tf.keras" not in err.split("row(s)")[0].split("FAIL")[-1]
    )
    assert main(args + ["--fail-above", "30"]) == 0
    # One sentence: the rule the gate applied (conclusive slowdowns only) and what it found.
    (gate,) = capsys.readouterr().err.splitlines()
    assert gate.startswith("ok: --fail-above 30 fails a row when B is slower than A by more than 30% beyond ")
    assert gate.endswith(": no row does")
    # Faster is never a failure, whatever the threshold.
    assert main(["compare", "base", "faster", "--sessions-dir", str(root), "--fail-above", "0"]) == 0
    out = capsys.readouterr().out
    assert "faster (95% CI" in out


def test_cli_bad_input(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "base", "slower", "--sessions-dir", str(root), "--fail-above", "-5"]) == 2
    assert "--fail-above" in capsys.readouterr().err
    assert main(["compare", "base", "nope", "--sessions-dir", str(root)]) == 2
    assert "no session 'nope'" in capsys.readouterr().err


def test_missing_and_failed_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_session(tmp_path, name="a", models=("resnet50", "densenet121"), runs=2, epochs=3, steps=6)
    b = make_session(
        tmp_path,
        name="b",
        models=("resnet50", "inception_v3"),
        runs=2,
        epochs=3,
        steps=6,
        image_size=128,
        fail={
            ("tensorflow", "resnet50", 1): {"kind": "exception", "message": "RuntimeError: [/] broke"},
            ("tensorflow", "resnet50", 2): {"kind": "exception", "message": "RuntimeError: [/] broke"},
        },
    )
    cmp = compare_sessions(a, b)
    rows = {(r.model, r.framework): r for r in cmp.rows}
    assert rows[("densenet121", "torch")].status_b == "absent"
    assert "B has no such cell" in rows[("densenet121", "torch")].note
    assert not rows[("densenet121", "torch")].slower_than(5)
    assert rows[("inception_v3", "torch")].status_a == "absent"
    lost = rows[("resnet50", "tensorflow")]
    assert lost.ratio is None and lost.status_b == "failed" and lost.slower_than(1000)
    # Differences by the flags that set them, as a user types them.
    assert any(d.startswith("--image-size: 299 vs 128") for d in cmp.differences)
    assert main(["compare", str(a), str(b), "--fail-above", "1000"]) == 1
    captured = capsys.readouterr()
    assert "The sessions differ in (A vs B):" in captured.out and "--image-size" in captured.out
    assert "image_size" not in captured.out
    assert "FAIL: ResNet50 · tf.keras: B has no result (failed)" in captured.err


def test_compare_uses_the_verdicts_rule_and_basis(tmp_path: Path) -> None:
    # One run of one epoch a side: each session's verdict has one value a side and no CI; compare says
    # the same, from the same times (issue 30: it printed "11.29× faster (95% CI 7.61–14.32)" from batches).
    a = make_session(tmp_path, name="a1", runs=1, epochs=1, steps=30, seed=3)
    b = make_session(tmp_path, name="b1", runs=1, epochs=1, steps=30, seed=4)
    (verdict,) = load_session(a).model.summary()["ratios"]
    assert verdict["basis"] == "single-epoch" and verdict["ci_low"] is None
    assert "(no CI: one value per side)" in verdict["text"]
    cmp = compare_sessions(a, b)
    for row in cmp.rows:
        assert row.basis == "single-epoch" and row.ratio is not None
        assert row.ratio.low is None and row.ratio.significant is None and not row.ratio.conclusive
        assert "no CI: one value per side" in row.ratio.phrase()
        # The times are the data of the images/s each session shows: its seconds per sample.
        rows_a = {r["framework"]: r for r in load_session(a).model.summary()["rows"]}
        assert row.time_a == pytest.approx(1 / rows_a[row.framework]["images_per_s"])
    # The verdict's own ratio, when a session is compared with itself cell by cell, is 1 on the same basis.
    torch_vs_tf = compare_sessions(a, a).rows[0]
    assert torch_vs_tf.ratio is not None and torch_vs_tf.ratio.value == 1.0


def test_fail_above_never_fails_on_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # B 30% slower in one run only: a real gate must not fail on something it cannot tell from chance.
    slow = {("torch", "resnet50"): 0.052, ("tensorflow", "resnet50"): 0.048}
    a = make_session(tmp_path, name="a", runs=1, epochs=3, steps=10, seed=5, speed=BASE_SPEED)
    b = make_session(tmp_path, name="b", runs=1, epochs=3, steps=10, seed=6, speed=slow)
    assert main(["compare", str(a), str(b), "--fail-above", "5"]) == 0
    # One sentence, the rule and its result, naming the slowdown it did not count and why (issue 30:
    # "not failing: … +56.2%" then "ok: no row of B is slower … by more than 5%").
    (gate,) = capsys.readouterr().err.splitlines()
    assert gate.startswith("ok: --fail-above 5 fails a row when B is slower than A by more than 5% beyond")
    assert "(its 95% CI above 1, several runs a side, no other work on the cores)" in gate
    assert ": no row does; not counted, inside the noise or on a busy machine: ResNet50 · PyTorch +" in gate
    assert "one run on a side" in gate or "CI holds 1" in gate
    # With three runs a side the same slowdown is significant, and the gate fails.
    a3 = make_session(tmp_path, name="a3", runs=3, epochs=3, steps=10, seed=5, speed=BASE_SPEED)
    b3 = make_session(tmp_path, name="b3", runs=3, epochs=3, steps=10, seed=6, speed=slow)
    assert main(["compare", str(a3), str(b3), "--fail-above", "5"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("FAIL: ResNet50 · PyTorch: +")
    assert (
        err[-1].startswith("FAIL: --fail-above 5 fails a row when")
        and "1 row(s) do (ResNet50 · PyTorch)" in err[-1]
    )

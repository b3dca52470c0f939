"""A run that diverged never wins (issue 36): a run whose loss goes NaN or never changes is "diverged", kept
out of every figure and verdict, and said as such in show, md, csv, json, html and by the engine."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from benchtui.cli import main
from benchtui.core.running.session_run import exit_code
from benchtui.core.store.session import load_session
from sessionfactory import make_session, read_events
from support import stand_in_session

HERE = Path(__file__).parent
NAN = float("nan")
TORCH_DIVERGED = "003-torch-resnet50-2"  # PyTorch's run 2 (the frameworks interleave: 001, 003, 005 are its)


def _losses(nan_run: int = 2) -> dict[tuple[str, str, int], list[float]]:
    out = {}
    for fw in ("torch", "tensorflow"):
        for index in (1, 2, 3):
            out[(fw, "resnet50", index)] = [2.3, 1.9 - 0.1 * index, 1.5 - 0.1 * index]
    out[("torch", "resnet50", nan_run)] = [2.3, NAN, NAN]
    return out


@pytest.fixture
def diverged(tmp_path: Path) -> Path:
    """PyTorch's run 2 diverges at epoch 2 and runs five times as fast as the others: with it PyTorch would
    be the faster; without it, tf.keras is."""
    return make_session(
        tmp_path,
        name="diverged",
        runs=3,
        speed={("torch", "resnet50"): 0.10, ("tensorflow", "resnet50"): 0.09},
        loss=_losses(),
        run_factor={("torch", 2): 0.2},
        folder="diverged",
    )


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def _epochs(path: Path) -> dict[str, dict[int, tuple[float, int]]]:
    """Each run's epochs as events.jsonl has them: run id -> epoch -> (seconds, samples)."""
    out: dict[str, dict[int, tuple[float, int]]] = {}
    for e in read_events(path):
        if e["type"] == "epoch":
            out.setdefault(e["run"], {})[e["epoch"]] = (e["seconds"], e["samples"])
    return out


def _seconds_per_image(epochs: dict[str, dict[int, tuple[float, int]]], runs: list[str]) -> float:
    """Time per image over the epochs after the first of ``runs``: what a verdict compares."""
    seconds = sum(s for r in runs for e, (s, _) in epochs[r].items() if e > 1)
    images = sum(n for r in runs for e, (_, n) in epochs[r].items() if e > 1)
    return seconds / images


def test_the_verdict_is_the_verdict_over_the_runs_that_trained(diverged: Path) -> None:
    ends = {e["run"]: e for e in read_events(diverged) if e["type"] == "run_end"}
    assert ends[TORCH_DIVERGED]["status"] == "diverged"
    epochs = _epochs(diverged)
    torch_runs = [r for r in ends if "-torch-" in r]
    trained = [r for r in torch_runs if ends[r]["status"] == "ok"]
    tf_runs = [r for r in ends if "-tensorflow-" in r]
    assert len(trained) == 2 and len(tf_runs) == 3
    by_hand = _seconds_per_image(epochs, tf_runs) / _seconds_per_image(epochs, trained)
    with_it = _seconds_per_image(epochs, tf_runs) / _seconds_per_image(epochs, torch_runs)
    assert by_hand < 1 < with_it  # the diverged run alone would make PyTorch the faster

    loaded = load_session(diverged)
    run = loaded.model.runs[TORCH_DIVERGED]
    assert run.status == "diverged" and run.reason == "diverged: loss NaN at epoch 2"
    summary = loaded.model.summary()
    (ratio,) = summary["ratios"]
    assert ratio["framework"] == "tensorflow" and ratio["base"] == "torch"
    assert ratio["ratio"] == pytest.approx(by_hand, rel=1e-9)
    assert ratio["faster_framework"] == "tensorflow"
    torch = next(r for r in summary["rows"] if r["framework"] == "torch")
    assert torch["runs"] == 2 and torch["runs_planned"] == 3 and torch["status"] == "ok"
    assert torch["reason"] == "1 of 3 runs diverged: loss NaN at epoch 2"
    assert any(w["kind"] == "diverged" for w in torch["warnings"])
    # The figures are the two runs': images/s over the epochs after the first of exactly those runs.
    assert torch["images_per_s"] == pytest.approx(1 / _seconds_per_image(epochs, trained), rel=1e-9)
    assert torch["loss_first"] == pytest.approx(2.3) and torch["loss_last"] == pytest.approx((1.4 + 1.2) / 2)


def test_every_view_says_it(diverged: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    show = _out(capsys, "show", str(diverged))
    assert "1 of 3 runs diverged: loss NaN at epoch 2" in show
    assert "Training loss, first → last epoch" in show
    assert "ResNet50 · PyTorch: 2.3 → 1.3\n" in show and "ResNet50 · tf.keras: 2.3 → 1.3\n" in show
    assert "tf.keras" in show.split("The verdict")[1].split("\n")[1].split("faster")[0]

    rows = list(csv.DictReader(io.StringIO(_out(capsys, "export", str(diverged), "--format", "csv"))))
    torch = next(r for r in rows if r["framework"] == "torch")
    assert torch["runs"] == "2" and "diverged: loss NaN at epoch 2" in torch["reason"]
    assert float(torch["loss_first"]) == pytest.approx(2.3) and float(torch["loss_last"]) == pytest.approx(
        1.3
    )

    data = json.loads(_out(capsys, "export", str(diverged), "--format", "json"))
    row = next(r for r in data["rows"] if r["framework"] == "torch")
    assert row["reason"] == "1 of 3 runs diverged: loss NaN at epoch 2" and row["runs"] == 2

    md = _out(capsys, "export", str(diverged), "--format", "md")
    assert "1 of 3 runs diverged: loss NaN at epoch 2" in md and "- ResNet50 · PyTorch: 2.3 → 1.3" in md

    html_path = tmp_path / "r.html"
    main(["export", str(diverged), "--format", "html", "-o", str(html_path)])
    html = html_path.read_text()
    assert "Training loss per epoch" in html
    assert "PyTorch run 2, diverged: loss NaN at epoch 2" in html  # its mark, at the epoch it broke
    assert "1 of 3 runs diverged: loss NaN at epoch 2" in html


def test_a_cell_whose_every_run_diverged_has_no_figures(tmp_path: Path) -> None:
    losses = {("torch", "resnet50", i): [2.3, 1.9, math.inf] for i in (1, 2)}
    losses.update({("tensorflow", "resnet50", i): [2.3, 1.9, 1.6] for i in (1, 2)})
    path = make_session(tmp_path, loss=losses, folder="all")
    loaded = load_session(path)
    assert loaded.meta["status"] == "failed"
    row = loaded.model.row("torch", "resnet50")
    assert row.status == "diverged" and row.runs == 0
    assert row.reason == "2 of 2 runs diverged: loss inf at epoch 3"
    assert row.images_per_s is None and row.mean_epoch_s is None
    assert math.isinf(row.loss_last or 0.0)  # what the cell did say, its runs' losses
    assert row.to_json()["loss_last"] == "inf"  # the wire's encoding in summary.json (JSON has no inf)
    summary = loaded.model.summary()
    assert summary["ratios"] == []  # nothing to compare PyTorch by


def test_a_cell_of_one_run_that_diverged_says_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its status says "diverged", its reason what happened: never "diverged: diverged: ..." in a note."""
    losses = {("torch", "resnet50", 1): [2.3, NAN], ("tensorflow", "resnet50", 1): [2.3, 1.9]}
    path = make_session(tmp_path, runs=1, epochs=2, loss=losses, folder="one")
    row = load_session(path).model.row("torch", "resnet50")
    assert row.status == "diverged" and row.reason == "loss NaN at epoch 2"
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "diverged: loss NaN at epoch 2" in out and "diverged: diverged" not in out
    assert main(["export", str(path), "--format", "bencher"]) == 0  # left out of a tracker, and why
    assert "ResNet50 · PyTorch: diverged: loss NaN at epoch 2" in capsys.readouterr().err


def test_a_loss_that_never_changes_is_diverged(tmp_path: Path) -> None:
    losses = {("torch", "resnet50", i): [2.3026, 2.3026, 2.3026] for i in (1, 2)}
    path = make_session(tmp_path, frameworks=("torch",), loss=losses, steps=8, folder="flat")
    for events in (path,):
        ends = [e for e in read_events(events) if e["type"] == "run_end"]
        assert {e["status"] for e in ends} == {"diverged"}
    # Recomputed on loading from the epochs, whatever run_end says: rewrite it "ok" as an older engine would.
    text = (path / "events.jsonl").read_text().replace('"status":"diverged"', '"status":"ok"')
    (path / "events.jsonl").write_text(text)
    run = load_session(path).model.runs["001-torch-resnet50-1"]
    assert run.status == "diverged"
    assert run.reason == "diverged: loss did not change over its 24 steps (2.3026)"


def test_a_loss_that_changes_or_one_step_is_not_diverged(tmp_path: Path) -> None:
    from benchtui.core.model.runs import RunState
    from benchtui.core.plan.plan import RunSpec

    spec = RunSpec(run_id="r", framework="torch", model="resnet50", index=1)
    run = RunState(spec, epochs_planned=1, hello={"steps_per_epoch": 1})
    run.losses = {1: 2.3}
    assert run.divergence() is None  # one step in all: nothing could change
    run.hello = {"steps_per_epoch": 4}
    # One epoch's mean alone says nothing of its steps (Keras sends no min/max): not judged.
    assert run.divergence() is None
    run.loss_mins, run.loss_maxs = {1: 2.3}, {1: 2.3}
    assert run.divergence() == "diverged: loss did not change over its 4 steps (2.3000)"
    run.loss_mins, run.loss_maxs = {1: 2.2}, {1: 2.4}
    assert run.divergence() is None  # its steps' losses did change within the epoch
    run.loss_maxs = {1: NAN}
    assert run.divergence() == "diverged: loss NaN at epoch 1"  # a step went NaN, the mean kept finite


def test_a_session_without_losses_has_no_loss_anywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_session(tmp_path, folder="plain")
    loaded = load_session(path)
    assert all(not r.losses and r.status == "ok" for r in loaded.model.runs.values())
    assert all("loss_first" not in r and "loss_last" not in r for r in loaded.model.summary()["rows"])
    assert "loss" not in _out(capsys, "show", str(path)).lower()
    header = _out(capsys, "export", str(path), "--format", "csv").splitlines()[0]
    assert "loss_first" not in header
    html_path = tmp_path / "r.html"
    main(["export", str(path), "--format", "html", "-o", str(html_path)])
    assert "Training loss" not in html_path.read_text()


def test_the_engine_records_a_diverged_run_and_fails_the_session(tmp_path: Path) -> None:
    status, path, engine = stand_in_session(tmp_path, [2.3, "nan"])
    assert status == "failed" and exit_code(status) == 1
    (end,) = [e for e in read_events(path) if e["type"] == "run_end"]
    assert end["status"] == "diverged" and end["reason"] == "diverged: loss NaN at epoch 2"
    meta = json.loads((path / "session.json").read_text())
    assert meta["status"] == "failed"
    assert meta["failure"] == "run 001-torch-resnet50-1 diverged: loss NaN at epoch 2"
    summary = json.loads((path / "summary.json").read_text())
    (row,) = summary["rows"]
    assert row["status"] == "diverged" and row["loss_last"] == "nan"


def test_the_engine_keeps_a_run_that_trained(tmp_path: Path) -> None:
    status, path, _ = stand_in_session(tmp_path, [2.3, 2.0, 1.7])
    assert status == "complete" and exit_code(status) == 0
    (end,) = [e for e in read_events(path) if e["type"] == "run_end"]
    assert end["status"] == "ok"
    (row,) = json.loads((path / "summary.json").read_text())["rows"]
    assert row["loss_first"] == 2.3 and row["loss_last"] == 1.7


def test_the_results_table_never_says_done_for_a_cell_that_diverged(diverged: Path) -> None:
    from benchtui.core.model.status import status_style
    from benchtui.widgets.results_table import cell_state

    model = load_session(diverged).model
    runs = model.cell_runs("torch", "resnet50")
    assert cell_state(runs) == "diverged 1 of 3" and cell_state(runs, compact=True) == "diverged 1/3"
    assert cell_state(model.cell_runs("tensorflow", "resnet50")) == "done"
    assert cell_state([runs[1]]) == "diverged" and status_style("diverged") == "bold red"

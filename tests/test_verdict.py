"""One verdict everywhere: the same events give the same ratio, in the same words, in every view.

The verdict of a model is ``summary.model_verdicts``: time per image of each framework over the
epochs after the first, so it is exactly the inverse ratio of the cells' images/s (total images
over total time). The live screen, show, the end of a headless run, md, html, csv, json, the
sessions screen and compare all print its ``text``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from benchtui.cli import main
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.stats import Ratio
from benchtui.core.plan.plan import Plan
from benchtui.core.reporting import terminal
from benchtui.core.reporting.files import render
from benchtui.core.reporting.model import build_report
from benchtui.core.store.session import load_session
from benchtui.widgets.comparison import Series, latest_run, ratio_line
from sessionfactory import make_session

SPEED = {("torch", "resnet50"): 0.040, ("tensorflow", "resnet50"): 0.050}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sessions")
    # Runs of different speeds (run 2 is 20% slower): a mean of the runs' rates and total images
    # over total time then differ, so a view that averages rates would show it.
    return make_session(root, name="verdict", runs=2, epochs=3, steps=10, speed=SPEED, run_factor={2: 1.2})


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]


def test_images_per_s_is_total_images_over_total_time(session: Path) -> None:
    summary = load_session(session).model.summary()
    stream = events(session)
    for row in summary["rows"]:
        runs = set(row["run_ids"])
        timed = [e for e in stream if e["type"] == "epoch" and e.get("run") in runs and e["epoch"] > 1]
        total = sum(e["samples"] for e in timed) / sum(e["seconds"] for e in timed)
        assert row["images_per_s"] == pytest.approx(total, rel=1e-12)
        # Not the mean of the runs' rates, which the spread still describes.
        assert row["images_per_s"] != pytest.approx(row["spread"]["images_per_s"]["mean"], rel=1e-4)
        # The interval brackets the figure, and TFLOP/s (when counted) scales the same numbers.
        low, high = row["ci"]["images_per_s"]
        assert low < row["images_per_s"] < high


def test_the_issue_example_two_runs_give_two_images_per_s_not_three() -> None:
    # 10 images per epoch; run 1 trains 1.25 images/s, run 2 4.84: equal epochs, so 20 images in
    # 8 + 2.066 s: 1.99 images/s, which is samples over the mean epoch time the table shows beside it.
    plan = Plan(
        frameworks=["torch"], models=["resnet50"], epochs=2, runs=2, samples=10, batch_sizes={"resnet50": 10}
    )
    model = SessionModel(plan)
    for index, seconds in ((1, 10 / 1.25), (2, 10 / 4.84)):
        run = f"00{index}-torch-resnet50-{index}"
        model.apply({"type": "run_start", "run": run, "t": 0.0})
        model.apply({"type": "hello", "run": run, "t": 0.0, "samples_per_epoch": 10, "steps_per_epoch": 1})
        for epoch in (1, 2):
            model.apply(
                {"type": "epoch", "run": run, "t": 0.0, "epoch": epoch, "seconds": seconds, "samples": 10}
            )
        model.apply({"type": "run_end", "run": run, "t": 0.0, "status": "ok"})
    row = model.row("torch", "resnet50")
    assert row.images_per_s == pytest.approx(20 / (8 + 10 / 4.84))
    assert row.images_per_s == pytest.approx(10 / row.mean_epoch_excl_first_s)
    assert row.spread["images_per_s"].mean == pytest.approx((1.25 + 4.84) / 2)  # the old, wrong figure


def test_one_verdict_in_every_view(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_session(session)
    summary = loaded.model.summary()
    (verdict,) = summary["ratios"]
    text = verdict["text"]
    assert text.startswith("PyTorch 1.2") and "× faster than tf.keras (95% CI " in text
    rows = {r["framework"]: r for r in summary["rows"]}
    # The ratio is the ratio of the images/s the table shows.
    assert verdict["factor"] == pytest.approx(
        rows["torch"]["images_per_s"] / rows["tensorflow"]["images_per_s"]
    )

    # The live screen: a model folded event by event, as the engine does while it runs.
    live = SessionModel(loaded.plan)
    for event in events(session):
        live.apply(event)
    series = [Series(fw, latest_run(live, fw, "resnet50")) for fw in loaded.plan.frameworks]
    assert ratio_line(series, live, "resnet50").plain.startswith(text + " · from epoch times")

    # show, and the end of a headless run.
    assert main(["show", str(session)]) == 0
    assert text in capsys.readouterr().out
    terminal.print_result(build_report(loaded), "headless")
    out = capsys.readouterr().out
    # The answer opens the output (with the note on how to read it), the table follows.
    assert out.index("headless") < out.index("The verdict") < out.index(text) < out.index("Images/s")
    assert out.index("95% CIs by seeded bootstrap.") < out.index("Images/s")

    # Every export.
    for fmt in ("md", "html", "json"):
        buf = io.StringIO()
        render(loaded, fmt, buf)
        assert text in buf.getvalue(), fmt
    assert json.loads(_render(loaded, "json"))["ratios"][0]["text"] == text
    records = list(csv.DictReader(io.StringIO(_render(loaded, "csv"))))
    assert [r["verdict"] for r in records if r["verdict"]] == [text]

    # The sessions screen's summary.
    console = Console(record=True, width=200)
    console.print(terminal.summary_view(build_report(loaded), 200))
    assert text in console.export_text()

    # compare prints each session's own verdict.
    assert main(["compare", str(session), str(session)]) == 0
    out = capsys.readouterr().out
    assert f"A {session.name} · ResNet50: {text}" in out and f"B {session.name} · ResNet50: {text}" in out


def _render(loaded: Any, fmt: str) -> str:
    buf = io.StringIO()
    render(loaded, fmt, buf)
    return buf.getvalue()


def test_brackets_hold_the_95_ci_in_show_as_in_the_exports(
    session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded = load_session(session)
    md = _render(loaded, "md")
    assert main(["show", str(session)]) == 0
    out = capsys.readouterr().out
    row = next(r for r in loaded.model.summary()["rows"] if r["framework"] == "torch")
    low, high = row["ci"]["mean_epoch_excl_first_s"]
    cell = f"[{low:.3f}–{high:.3f}]"
    assert cell in md and cell in out
    assert "[in brackets]: the 95% confidence interval" in out and "[in brackets]: the 95% confidence" in md
    spread = row["spread"]["mean_epoch_excl_first_s"]
    assert f"({spread['min']:.3f}–{spread['max']:.3f})" not in out  # min–max no longer shares the look


def test_a_one_run_ci_that_contains_one_is_not_significant(tmp_path: Path) -> None:
    same = {("torch", "resnet50"): 0.05, ("tensorflow", "resnet50"): 0.05}
    path = make_session(tmp_path, name="tie", runs=1, epochs=4, steps=10, speed=same, seed=3)
    (verdict,) = load_session(path).model.summary()["ratios"]
    assert verdict["single_run"] and verdict["ci_low"] < 1 < verdict["ci_high"]
    assert verdict["significant"] is False and not verdict["conclusive"]
    # Its CI holds 1: "about the same", no winner (issue 30), with what it rests on.
    assert verdict["about_same"] is True and verdict["faster_framework"] is None
    assert " and " in verdict["text"] and " about the same (1.00×, 95% CI " in verdict["text"]
    assert verdict["text"].endswith(", not significant; one run on a side: run-to-run spread unknown)")
    # The words alone: a one-run interval that contains 1 is "not significant", one that does not
    # still says the run-to-run spread is unknown.
    assert Ratio(0.98, 0.95, 1.02, single_run=True).significant is False
    assert Ratio(0.8, 0.75, 0.85, single_run=True).phrase() == (
        "1.25× faster (95% CI 1.18–1.33), one run on a side: run-to-run spread unknown"
    )

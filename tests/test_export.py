"""Exports of a fixed session: Markdown, CSV (cells and batches), JSON and HTML, checked by content."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchtui.cli import main
from benchtui.core import fmt
from benchtui.core.reporting import jsonfile, markdown
from benchtui.core.reporting.files import export_session
from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.plots import downsample_minmax, nice_ticks
from benchtui.core.store.session import load_session
from sessionfactory import cut_off, make_session

HOSTILE = '<script>alert("x")</script> & co'
OOM = "CUDA out of memory <b>tried</b> to allocate | 2 GiB"
LOG = "Traceback\n<img src=x onerror=alert(1)>\nRuntimeError: boom\n"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sessions")
    path = make_session(
        root,
        name=HOSTILE,
        models=("resnet50", "pnasnet_large"),
        runs=3,
        epochs=3,
        steps=12,
        fail={("tensorflow", "resnet50", 3): {"kind": "oom", "message": OOM, "epoch": 2}},
    )
    (path / "logs" / "006-tensorflow-resnet50-3.log").write_text(LOG, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def summary(session: Path) -> dict[str, Any]:
    return load_session(session).model.summary()


def _row(summary: dict[str, Any], model: str, fw: str) -> dict[str, Any]:
    return next(r for r in summary["rows"] if r["model"] == model and r["framework"] == fw)


def _export(session: Path, fmt_: str, tmp_path: Path, **kw: Any) -> str:
    out = export_session(session, fmt_, tmp_path / f"out.{fmt_}", **kw)
    return out.read_text(encoding="utf-8")


# -- Markdown -----------------------------------------------------------------------
def test_md_has_the_study_tables_with_values(session: Path, summary: dict[str, Any], tmp_path: Path) -> None:
    md = _export(session, "md", tmp_path)
    for title in (
        "Mean epoch time (s)",
        "First epoch (s)",
        "Mean epoch time excluding the first (s)",
        "Build time",
    ):
        assert f"## {title}" in md
    assert "| Model | PyTorch | tf.keras |" in md
    torch = _row(summary, "resnet50", "torch")
    lo, hi = torch["ci"]["mean_epoch_s"]
    cell = f"{fmt.seconds(torch['mean_epoch_s'])} [{fmt.seconds(lo)}–{fmt.seconds(hi)}]"
    section = md.split("## Mean epoch time (s)")[1].split("##")[0]
    assert f"| ResNet50 | {cell} |" in section
    assert "| PNASNet |" in section and "not available" in section.split("| PNASNet |")[1].splitlines()[0]
    assert "(some runs failed)" in section  # tf.keras ResNet50 lost a run


def test_md_ratio_environment_and_escaping(session: Path, tmp_path: Path) -> None:
    md = _export(session, "md", tmp_path)
    compared = md.split("## The verdict: frameworks compared")[1].split("##")[0]
    assert re.search(
        r"\| ResNet50 \| \*\*PyTorch \d\.\d\d× faster than tf\.keras \(95% CI \d\.\d\d–\d\.\d\d\)\*\*",
        compared,
    )
    env = md.split("## Environment")[1]
    for text in (
        "NVIDIA H100 80GB HBM3",
        "driver 550.54.15",
        "torch 2.5.1+cu124",
        "tensorflow 2.18.0",
        "precision fp32",
        "cudnn benchmark: on",
        "Batch sizes",
    ):
        assert text in env
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "<b>" not in md and "2 GiB" in md
    # A pipe in an error message must not split the table row.
    failures = md.split("## Failures and gaps")[1].split("##")[0]
    assert "allocate \\| 2 GiB" in failures


# -- CSV ----------------------------------------------------------------------------
def test_csv_one_row_per_cell_with_every_field(
    session: Path, summary: dict[str, Any], tmp_path: Path
) -> None:
    rows = list(csv.DictReader(io.StringIO(_export(session, "csv", tmp_path))))
    assert [(r["model"], r["framework"]) for r in rows] == [
        ("resnet50", "torch"),
        ("resnet50", "tensorflow"),
        ("pnasnet_large", "torch"),
        ("pnasnet_large", "tensorflow"),
    ]
    for rec, row in zip(rows, summary["rows"], strict=True):
        for key in (
            "framework",
            "model",
            "batch_size",
            "runs",
            "status",
            "mean_epoch_s",
            "first_epoch_s",
            "mean_epoch_excl_first_s",
            "build_s",
            "images_per_s",
            "reason",
        ):
            value = row.get(key)
            expected = "" if value is None else (repr(value) if isinstance(value, float) else str(value))
            assert rec[key] == expected, key
    torch = rows[0]
    assert (
        float(torch["mean_epoch_s_ci_low"])
        <= float(torch["mean_epoch_s"])
        <= float(torch["mean_epoch_s_ci_high"])
    )
    # Steady batches: all 3 runs x 3 epochs x 12 batches, less the warm-up detected in each run.
    assert torch["mean_epoch_s_n"] == "3"
    assert torch["batch_n"] == str(3 * 3 * 12 - sum(summary["rows"][0]["warmup_batches"]))
    tf = rows[1]
    assert tf["vs_framework"] == "torch" and float(tf["time_ratio"]) > 1 and tf["ratio_significant"] == "True"
    assert tf["status"] == "failed" and "out of memory" in tf["reason"]
    assert rows[3]["status"] == "unavailable" and rows[3]["mean_epoch_s"] == ""


def test_csv_per_batch(session: Path, tmp_path: Path) -> None:
    out = export_session(session, "csv", tmp_path / "b.csv", per_batch=True)
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    batches = [e for e in events if e.get("type") == "batch"]
    assert len(rows) == len(batches)
    first = rows[0]
    assert (
        first["run_id"] == "001-torch-resnet50-1"
        and first["framework"] == "torch"
        and first["model"] == "resnet50"
    )
    assert (first["run_index"], first["epoch"], first["step"]) == ("1", "1", "1")
    assert float(first["seconds"]) == batches[0]["seconds"]
    assert float(first["images_per_s"]) == pytest.approx(16 / batches[0]["seconds"])
    per_run = sum(float(r["seconds"]) for r in rows if r["run_id"] == "003-torch-resnet50-2")
    assert per_run == pytest.approx(sum(e["seconds"] for e in batches if e["run"] == "003-torch-resnet50-2"))


# -- JSON ---------------------------------------------------------------------------
def test_json_full_summary_with_environment(session: Path, summary: dict[str, Any], tmp_path: Path) -> None:
    data = json.loads(
        _export(session, "json", tmp_path), parse_constant=lambda c: pytest.fail(f"non-JSON {c}")
    )
    assert data["schema"] == 2 and data["kind"] == "benchtui-summary-export"
    assert data["rows"] == json.loads(json.dumps(summary["rows"]))
    required = {
        "framework",
        "model",
        "batch_size",
        "runs",
        "status",
        "mean_epoch_s",
        "first_epoch_s",
        "mean_epoch_excl_first_s",
        "build_s",
        "images_per_s",
    }
    assert all(required <= set(r) for r in data["rows"])
    assert data["session"]["name"] == HOSTILE and data["session"]["status"] == "failed"
    env = data["environment"]
    assert env["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert env["frameworks"]["torch"]["versions"]["torch"] == "2.5.1+cu124"
    assert env["plan"]["runs"] == 3
    assert data["ratios"][0]["model"] == "resnet50" and data["ratios"][0]["significant"] is True


def test_json_replaces_non_finite_numbers(tmp_path: Path) -> None:
    path = make_session(tmp_path, name="nan", runs=1, epochs=2, steps=4)
    events = path / "events.jsonl"
    text = events.read_text().replace('"seconds":', '"seconds":NaN,"x":', 1)
    events.write_text(text.replace('"type":"epoch","t":', '"type":"epoch","seconds":1e999,"z":', 1))
    data = json.loads(export_session(path, "json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert data["rows"]


def test_json_holds_every_runs_raw_figures(session: Path, tmp_path: Path) -> None:
    """``runs``: per run its epochs (number, seconds, samples), every timed step's seconds in order (a window's
    steps each at its mean, as the model counts them), its build, status and reason: what events.jsonl held."""
    data = json.loads(_export(session, "json", tmp_path), parse_constant=lambda c: pytest.fail(c))
    loaded = load_session(session)
    assert [r["run_id"] for r in data["runs"]] == list(loaded.model.runs)
    for record in data["runs"]:
        run = loaded.model.runs[record["run_id"]]
        assert (record["framework"], record["model"], record["index"]) == (
            run.spec.framework,
            run.spec.model,
            run.spec.index,
        )
        assert (record["status"], record["reason"], record["devices"]) == (str(run.status), run.reason, 1)
        assert record["step_seconds"] == list(run.batch_seconds)
        assert record["step_epochs"] == list(run.batch_epochs)
        assert [(e["epoch"], e["seconds"]) for e in record["epochs"]] == sorted(run.epoch_times.items())
        assert [e["samples"] for e in record["epochs"]] == [
            run.epoch_samples[e] for e in sorted(run.epoch_times)
        ]
        assert record["build_s"] == run.phase_seconds("build")
        batch = {"resnet50": 16, "pnasnet_large": 4}[record["model"]]  # the factory's; none without a hello
        assert record["batch_size"] == (batch if run.hello else None)
        assert record["samples_per_epoch"] == run.hello.get("samples_per_epoch")
        assert all("loss" not in e for e in record["epochs"])  # this session's runners sent none
    failed = next(r for r in data["runs"] if r["run_id"] == "006-tensorflow-resnet50-3")
    assert failed["status"] == "failed" and OOM in failed["reason"] and len(failed["epochs"]) == 1


def test_a_cells_figures_recompute_from_the_json_runs(session: Path, tmp_path: Path) -> None:
    """Mean epoch time, images/s and the median step of each cell, from the export's ``runs`` alone."""
    data = json.loads(_export(session, "json", tmp_path))
    checked = 0
    for row in data["rows"]:
        if row["status"] != "ok":
            continue
        runs = [
            r
            for r in data["runs"]
            if (r["framework"], r["model"], r["status"]) == (row["framework"], row["model"], "ok")
        ]
        assert len(runs) == row["runs"]
        epochs = [[e["seconds"] for e in r["epochs"]] for r in runs]
        assert row["mean_epoch_s"] == pytest.approx(
            sum(sum(e) / len(e) for e in epochs) / len(epochs), rel=1e-12
        )
        # Total samples over total time of the epochs after the first: seconds per sample, pooled.
        later = [(e["seconds"], e["samples"]) for r in runs for e in r["epochs"] if e["epoch"] > 1]
        assert row["images_per_s"] == pytest.approx(len(later) / sum(s / n for s, n in later), rel=1e-12)
        # The median step after each run's warm-up (the row says how many steps it cut).
        steady = sorted(
            x for r, cut in zip(runs, row["warmup_batches"], strict=True) for x in r["step_seconds"][cut:]
        )
        mid = len(steady) // 2
        median = steady[mid] if len(steady) % 2 else (steady[mid - 1] + steady[mid]) / 2
        assert row["median_batch_s"] == pytest.approx(median, rel=1e-12)
        checked += 1
    assert checked == 2  # ResNet50 and PNASNet on PyTorch (tf.keras: a run failed; PNASNet unavailable)


def test_json_runs_carry_each_epochs_loss_as_the_wire_writes_it(tmp_path: Path) -> None:
    path = make_session(
        tmp_path,
        frameworks=("torch",),
        runs=2,
        epochs=3,
        loss={
            ("torch", "resnet50", 1): [2.3, 2.0, 1.8],
            ("torch", "resnet50", 2): [2.3, float("nan"), float("inf")],
        },
    )
    data = json.loads(export_session(path, "json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert [[e["loss"] for e in r["epochs"]] for r in data["runs"]] == [[2.3, 2.0, 1.8], [2.3, "nan", "inf"]]
    assert data["runs"][1]["status"] == "diverged" and "epoch 2" in data["runs"][1]["reason"]


def test_json_writes_a_long_runs_steps_a_chunk_at_a_time(session: Path) -> None:
    """A run of 300,000 steps: never one string of them all (memory stays bounded by a chunk), and the
    document reads back whole."""
    report = build_report(load_session(session))
    long = dataclasses.replace(
        report.runs[0],
        batch_seconds=tuple(0.25 + i * 1e-7 for i in range(300_000)),
        batch_epochs=(1,) * 300_000,
    )
    report = dataclasses.replace(report, runs=(long, *report.runs[1:]))

    class Largest(io.StringIO):
        largest = 0

        def write(self, text: str) -> int:
            self.largest = max(self.largest, len(text))
            return super().write(text)

    out = Largest()
    jsonfile.write(report, out)
    data = json.loads(out.getvalue())
    assert data["runs"][0]["step_seconds"] == list(long.batch_seconds)
    assert out.largest < 200_000  # the steps alone are about 6 MB of text


# -- HTML ---------------------------------------------------------------------------
def test_html_is_self_contained_and_escaped(session: Path, tmp_path: Path) -> None:
    html = _export(session, "html", tmp_path)
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") >= 5  # epoch bars, build bars, batches per model (2), GPU util + memory
    assert "<script" not in html.lower()
    assert not re.search(r"<[^>]*\b(src|href)\s*=", html)  # no attribute loads anything
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)  # only the SVG namespace name
    assert "default-src 'none'" in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in html
    assert "&lt;b&gt;tried&lt;/b&gt;" in html and "<b>tried" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # the failed run's log tail
    for text in (
        "The verdict: frameworks compared",
        "GPU utilization over time",
        "GPU memory over time",
        "ResNet50: time per batch over a run",
        "NVIDIA H100 80GB HBM3",
        "Mean epoch time (s)",
    ):
        assert text in html


def test_html_without_gpu_plots_runner_cpu(tmp_path: Path) -> None:
    path = make_session(tmp_path, name="cpu", gpu=False, runs=1, epochs=2, steps=5)
    html = export_session(path, "html").read_text()
    assert path / "report.html" == export_session(path, "html")
    assert "No GPU telemetry" in html and "Runner CPU over time" in html
    assert "GPU utilization over time" not in html


def test_html_stays_small_for_long_runs(tmp_path: Path) -> None:
    path = make_session(
        tmp_path, name="long", frameworks=("torch",), runs=1, epochs=2, steps=6000, interval=0.05
    )
    html = export_session(path, "html").read_text()
    polylines = re.findall(r'<polyline points="([^"]*)"', html)
    assert polylines and max(len(p.split()) for p in polylines) <= 800
    assert len(html) < 200_000


def test_downsample_keeps_extremes() -> None:
    xs = list(range(10_000))
    ys = [1.0] * 10_000
    ys[1234], ys[8765] = 50.0, -3.0
    dx, dy = downsample_minmax(xs, ys, 400)
    assert len(dx) <= 400 and 50.0 in dy and -3.0 in dy and dx == sorted(dx)
    assert downsample_minmax([1, 2], [3, 4], 10) == ([1, 2], [3, 4])


def test_nice_ticks() -> None:
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 100, 4) == [0, 25, 50, 75, 100]
    assert nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]


# -- defaults, CLI, damaged sessions ------------------------------------------------
def test_default_outputs_inside_the_session(tmp_path: Path) -> None:
    path = make_session(tmp_path, name="defaults", runs=1, epochs=2, steps=3)
    names = {
        ("md", False): "summary.md",
        ("csv", False): "summary.csv",
        ("csv", True): "batches.csv",
        ("json", False): "summary-export.json",
        ("html", False): "report.html",
    }
    for (fmt_, per_batch), name in names.items():
        assert export_session(path, fmt_, per_batch=per_batch) == path / name
        assert (path / name).stat().st_size > 0
    assert not list(path.glob(".*tmp*"))


def test_cli_export_to_stdout_and_html_default(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(session), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert out == markdown.render(build_report(load_session(session)))
    assert main(["export", str(session), "--format", "html"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(session / "report.html") and (session / "report.html").is_file()
    assert main(["export", str(session), "--format", "csv", "--per-batch"]) == 0
    assert capsys.readouterr().out.startswith("run_id,framework,model,run_index,epoch,step,seconds")


def test_cli_export_bad_input(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["export", str(session), "--format", "md", "-o", str(tmp_path / "no" / "such" / "dir.md")]) == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("benchtui: error: cannot write") and err.count("\n") == 1
    assert main(["export", str(session), "--format", "md", "--per-batch"]) == 2
    assert "--per-batch goes with --format csv" in capsys.readouterr().err
    assert main(["export", str(session), "--format", "pdf"]) == 2
    assert main(["export", str(tmp_path / "nothing"), "--format", "md"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_export_of_a_cut_off_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_off(make_session(tmp_path, name="cut", runs=2, epochs=3, steps=10), 0.6)
    assert main(["export", str(path), "--format", "md"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert any("cut off mid-write" in w for w in warnings)
    assert any("the session was cut off during run" in w for w in warnings)
    assert "| Status: running |" not in captured.out and "Finished: never (cut off)" in captured.out
    assert "incomplete" in captured.out or "interrupted" in captured.out
    html = export_session(path, "html").read_text()
    assert "cut off" in html


def test_headless_modules_stay_headless() -> None:
    code = (
        "import sys; import benchtui.core.reporting.files, benchtui.core.reporting.compare, benchtui.core.reporting.plots, "
        "benchtui.core.reporting.markdown, benchtui.core.reporting.csvfile, benchtui.core.reporting.jsonfile, "
        "benchtui.core.reporting.htmlreport, benchtui.core.reporting.terminal, "
        "benchtui.core.model.analysis, benchtui.core.model.stats; "
        "bad = [m for m in ('textual', 'torch', 'tensorflow', 'keras', 'jax', 'numpy') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1]
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_warnings_for_spread_warm_up_and_outlier_runs(tmp_path: Path) -> None:
    path = make_session(
        tmp_path,
        name="noisy",
        frameworks=("torch",),
        runs=5,
        epochs=3,
        steps=40,
        noise=0.25,
        warmup=(30.0, 6.0, 6.0, 6.0),
        run_factor={4: 1.6},
    )
    (row,) = load_session(path).model.rows()
    text = " | ".join(w["message"] for w in row.warnings)
    assert "batch times vary: IQR is" in text
    assert "slow warm-up: the first 3 batches are" in text
    assert "run 4 is an outlier" in text
    md = export_session(path, "md").read_text()
    assert "## Warnings" in md and "ResNet50 · PyTorch: slow warm-up" in md


def test_steady_session_has_no_warnings(session: Path, summary: dict[str, Any]) -> None:
    torch = _row(summary, "resnet50", "torch")
    assert torch["warnings"] == []
    assert torch["batch"]["wide"] is False
    assert torch["batch"]["n"] == 3 * 3 * 12 - sum(torch["warmup_batches"])
    assert all(1 <= cut <= 12 for cut in torch["warmup_batches"])  # the slow first batches, detected


def test_md_puts_the_study_four_tables_side_by_side_and_shows_warm_up(
    session: Path, summary: dict[str, Any], tmp_path: Path
) -> None:
    md = _export(session, "md", tmp_path)
    section = md.split("## The study's four figures, side by side (seconds)")[1].split("\n## ")[0]
    header = next(line for line in section.splitlines() if line.startswith("| Model"))
    assert header == (
        "| Model | Batch | Mean epoch · PyTorch | Mean epoch · tf.keras | First epoch · PyTorch | First epoch · tf.keras"
        " | Excl. first · PyTorch | Excl. first · tf.keras | Build · PyTorch | Build · tf.keras |"
    )
    torch, tf = _row(summary, "resnet50", "torch"), _row(summary, "resnet50", "tensorflow")
    expected = [
        fmt.seconds(r[k])
        for k in ("mean_epoch_s", "first_epoch_s", "mean_epoch_excl_first_s", "build_s")
        for r in (torch, tf)
    ]
    resnet = next(line for line in section.splitlines() if line.startswith("| ResNet50 |"))
    assert resnet == f"| ResNet50 | {torch['batch_size']} | " + " | ".join(expected) + " |"
    assert md.index("side by side") < md.index("## Mean epoch time (s)")  # the headline comes first
    warm = md.split("## Warm-up and steady state")[1].split("\n## ")[0]
    cuts = ", ".join(str(c) for c in torch["warmup_batches"])
    assert f"| ResNet50 | PyTorch | {cuts} |" in warm and "detected from each run's batch times" in warm
    html = _export(session, "html", tmp_path)
    assert "side by side (seconds)" in html and "Warm-up and steady state" in html


def test_gpu_clocks_and_throttle_at_start_and_end_are_in_the_exports(tmp_path: Path) -> None:
    import json

    path = make_session(tmp_path, name="clocks", models=("resnet50",), runs=1, epochs=2, steps=4)
    meta = json.loads((path / "session.json").read_text())
    meta["gpus"] = [{"index": 0, "name": "Fake H200", "sm_clock_mhz": 1980, "temp_c": 40, "throttle": []}]
    meta["gpus_end"] = [
        {"index": 0, "name": "Fake H200", "sm_clock_mhz": 1650, "temp_c": 83, "throttle": ["sw_thermal"]}
    ]
    (path / "session.json").write_text(json.dumps(meta))
    md = _export(path, "md", tmp_path)
    assert "| GPU 0 at start | SM clock 1980 MHz, 40 °C, throttle: none |" in md
    assert "| GPU 0 at end | SM clock 1650 MHz, 83 °C, throttle: sw_thermal |" in md
    assert "throttle: sw_thermal" in _export(path, "html", tmp_path)

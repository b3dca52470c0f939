"""A sweep in every report (issue 32): best vs best, the verdict at each point, what each setting buys, the
per-cell tables by point and the curves, in show, md, csv, json and html; compare by (framework, model, point).

Sessions are written by tests/sessionfactory.py as the engine writes them (``sweep``, ``point_speed``); each
view is checked on what it prints against the session's own summary (its rows and its ``sweep`` answer).
Sessions without a sweep, and scaling sessions, read as before: tests/test_golden_outputs.py holds them byte
for byte; here, that their reports carry no sweep section at all.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html import unescape
from pathlib import Path

import pytest
from tests.reporttext import flat, html_table, md_section, shown, written

from benchtui.core.model.cell import (
    BestPoint,
    BestVerdict,
    CellSummary,
    FrameworkRatio,
    SessionSummary,
    SettingGain,
    SweepAnswer,
)
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, terminal
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.model import Mark, Report, build_report
from benchtui.core.reporting.model.answer import answer, best_lines
from benchtui.core.reporting.model.sweep import BEST_TITLE, GAINS_TITLE, SAME_TITLE, curve_tables, gains_table
from benchtui.core.store.session import load_session
from sessionfactory import make_session

SWEEP = {"batch": ["4", "8"], "channels-last": ["off", "on"]}
#: PyTorch fastest at batch 8 with channels-last; tf.keras (channels-last changes nothing for it) at batch 4.
SPEED = {("torch", "batch=8,channels-last=on"): 0.7, ("tensorflow", "batch=8,channels-last=off"): 1.3}
POINTS = [Point.from_key(k) for k in ("batch=4,channels-last=off", "batch=4,channels-last=on")] + [
    Point.from_key(k) for k in ("batch=8,channels-last=off", "batch=8,channels-last=on")
]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sweeps")
    common = {"frameworks": ("torch", "tensorflow"), "models": ("resnet50",), "runs": 3, "batch_size": 8}
    return {
        "sweep": make_session(root, name="sweep", sweep=SWEEP, point_speed=SPEED, folder="sweep", **common),
        # Another grid: batch 8 in common with the first, batch 16 its own.
        "other": make_session(
            root,
            name="other",
            sweep={"batch": ["8", "16"], "channels-last": ["off", "on"]},
            seed=5,
            folder="other",
            **{**common, "batch_size": 16},
        ),
        "plain": make_session(root, name="plain", folder="plain", **common),
        "scaling": make_session(
            root, name="scaling", devices=4, scaling=True, gpu=True, runs=2, folder="scaling"
        ),
    }


@pytest.fixture(scope="module")
def report(sessions: dict[str, Path]) -> Report:
    return build_report(load_session(sessions["sweep"]))


def _sweep(report: Report) -> SweepAnswer:
    """The summary's sweep answer (the model's ``sweeps.answer``)."""
    assert report.summary.sweep is not None
    return report.summary.sweep


def _row(report: Report, framework: str, point: str) -> CellSummary:
    return next(r for r in report.rows if r.framework == framework and r.point == Point.from_key(point))


# -- show -------------------------------------------------------------------------------------------------


def test_show_says_best_vs_best_and_the_verdict_at_each_point(report: Report) -> None:
    text = flat(shown(report))
    sweep = report.summary.sweep
    assert sweep is not None and len(sweep.best) == 1
    best = sweep.best[0]
    assert (best.base.framework, best.base.point.key) == ("torch", "batch=8,channels-last=on")
    assert (best.other.framework, best.other.point.key) == ("tensorflow", "batch=4,channels-last=off")
    # Best vs best first, its sentence (the bias in it) whole, each side's chosen point named with its rate.
    assert text.index(BEST_TITLE) < text.index(SAME_TITLE) < text.index(GAINS_TITLE)
    assert flat(best.text) in text and "choosing the best of" in best.text
    chosen = _row(report, "torch", "batch=8,channels-last=on")
    assert (
        f"PyTorch: batch 8 · channels-last on (fastest of 4 points, {chosen.images_per_s:,.0f} images/s)"
        in text
    )
    # The verdict at each point, labelled by it, in the summary's words.
    for ratio in report.summary.ratios:
        assert f"ResNet50 · {ratio.point.label}: {flat(ratio.text)}" in text
    assert len(report.summary.ratios) == 4


def test_show_says_what_each_setting_buys(report: Report) -> None:
    text = shown(report)
    gains = {(g.framework, g.axis): g for g in _sweep(report).gains}
    batch = gains[("torch", "batch")]
    cells = [
        c.strip() for c in next(line for line in text.splitlines() if "batch 8 (vs 4)" in line).split("│")
    ]
    assert cells[2].startswith(f"{batch.factor:.2f}× [{batch.ci_low:.2f}×–{batch.ci_high:.2f}×]")
    row = next(line for line in text.splitlines() if "channels-last on (vs off)" in line)
    assert row.rstrip(" │").endswith("no effect")  # tf.keras: always channels-last
    assert "tf.keras · channels-last: no effect (tf.keras is channels-last at every setting)" in text


@pytest.mark.parametrize("width", [80, 120])
def test_show_reads_at_80_and_120_columns(report: Report, width: int) -> None:
    text = shown(report, width)
    assert max(len(line) for line in text.splitlines()) <= width
    # A table per point, its title naming it, every figure whole: the fastest cell's images/s is there.
    for point in POINTS:
        assert f"Per model and framework · {point.label}" in text
    best = _row(report, "torch", "batch=8,channels-last=on")
    block = text.split("Per model and framework · batch 8 · channels-last on")[1].split("\n*")[0]
    assert re.search(rf"ResNet50\s+PyTorch\s+8\s.*\b{best.images_per_s:,.0f}\b", block)
    # The curve against the batch: a row per batch, a column per framework and other setting.
    curve = text.split("images/s against batch")[1]
    eight = next(line for line in curve.splitlines() if line.startswith("│     8 │"))
    assert len(eight.split("│")) == 6  # batch, and three series: tf.keras at channels-last on is off's runs
    assert re.match(rf"\s*{best.images_per_s:.0f}\b", eight.split("│")[3])
    if width >= 120:  # the headers whole on one line
        assert (
            "│ Batch │ PyTorch, channels-last off │ PyTorch, channels-last on │ tf.keras, channels-last off │"
            in (curve.replace("┃", "│"))
        )


# -- md, html -------------------------------------------------------------------------------------------


def test_md_has_every_section(report: Report) -> None:
    md = written(report, markdown)
    assert f"### {BEST_TITLE}" in md and f"### {SAME_TITLE}" in md
    best = _sweep(report).best[0]
    assert markdown.md_escape(best.text) in md
    for ratio in report.summary.ratios:
        assert f"| ResNet50 · {ratio.point.label} | **{markdown.md_escape(ratio.text)}** |" in md
    gains = md_section(md, f"{GAINS_TITLE}: ResNet50")
    assert "| channels-last on (vs off) |" in gains and "| no effect |" in gains
    assert "| Model | Point | PyTorch | tf.keras |" in md  # the figure tables: a row per (model, point)
    curve = md_section(md, "ResNet50: images/s against batch")
    assert (
        "| Batch | PyTorch, channels-last off | PyTorch, channels-last on | tf.keras, channels-last off |"
        in curve
    )


def test_html_has_every_section_and_the_curve_chart(report: Report) -> None:
    html = written(report, htmlreport)
    body = html.split("</head>")[1]  # self-contained as ever: nothing loaded from anywhere
    assert "src=" not in body and "<script" not in body
    assert body.count("http") == body.count('xmlns="http://www.w3.org/2000/svg"')
    best = html_table(html, BEST_TITLE)
    assert best[1][0] == "ResNet50" and best[1][1] == _sweep(report).best[0].text
    same = html_table(html, SAME_TITLE)
    assert [r[0] for r in same[1:]] == [f"ResNet50 · {p.label}" for p in POINTS]
    gains = html_table(html, f"{GAINS_TITLE}: ResNet50")
    assert gains[2] == ["channels-last on (vs off)", gains[2][1], "no effect"]
    # The chart: a line per framework and other setting, a dot per batch with its rate in its tip.
    chart = html.split("<h2>Curves</h2>")[1].split("</figure>")[0]
    assert "ResNet50: images/s against batch" in unescape(chart)
    assert chart.count("<polyline") == 3
    rate = _row(report, "torch", "batch=8,channels-last=on").images_per_s
    assert f"PyTorch, channels-last on at batch 8: {rate:.0f}" in unescape(chart)
    detail = html.split("<h2>Details per cell</h2>")[1]
    assert "<th>Point</th>" in detail


# -- csv, json --------------------------------------------------------------------------------------------


def test_csv_has_a_column_per_axis(report: Report, sessions: dict[str, Path]) -> None:
    rows = list(csv.DictReader(io.StringIO(written(report, csvfile))))
    assert list(rows[0])[-2:] == ["batch", "channels-last"]
    assert [(r["batch"], r["channels-last"]) for r in rows] == [
        (p.get("batch"), p.get("channels-last")) for p in POINTS for _ in ("torch", "tensorflow")
    ]
    for rec in rows:  # each row's batch is its point's, and its verdict is its point's
        assert rec["batch_size"] == rec["batch"]
        if rec["framework"] == "tensorflow":
            ratio = next(
                r
                for r in report.summary.ratios
                if r.point.key == f"batch={rec['batch']},channels-last={rec['channels-last']}"
            )
            assert rec["verdict"] == ratio.text
    batches = list(csv.DictReader(io.StringIO(_batches(sessions["sweep"]))))
    assert batches and all(b["batch"] == b["samples"] for b in batches)  # the run's own point, per batch
    assert {b["channels-last"] for b in batches} == {"off", "on"}


def _batches(path: Path) -> str:
    buf = io.StringIO()
    csvfile.write_batches(load_session(path), buf)
    return buf.getvalue()


def test_json_carries_the_sweep(report: Report) -> None:
    data = json.loads(written(report, jsonfile))
    assert data["sweep"] == _sweep(report).to_json()
    assert data["sweep"]["axes"] == SWEEP
    assert [r["point"] for r in data["rows"]] == [
        p.to_json() for p in POINTS for _ in ("torch", "tensorflow")
    ]


# -- compare ----------------------------------------------------------------------------------------------


def test_compare_matches_cells_by_point(sessions: dict[str, Path]) -> None:
    cmp = compare_sessions(sessions["sweep"], sessions["other"])
    by = {(r.framework, r.point.key): r for r in cmp.rows}
    shared = [k for k, r in by.items() if r.ratio is not None]
    assert sorted(shared) == sorted(
        (fw, f"batch=8,channels-last={v}") for fw in ("torch", "tensorflow") for v in ("off", "on")
    )
    assert by[("torch", "batch=4,channels-last=off")].note == "B has no such cell"
    assert by[("torch", "batch=16,channels-last=off")].note == "A has no such cell"
    # B/A at a shared point is of that point's cells: PyTorch's step at batch 8 with channels-last took 0.7×
    # its time without in A, the same in B: its B/A is 1/0.7 of the other's.
    on, off = (by[("torch", f"batch=8,channels-last={v}")].ratio for v in ("on", "off"))
    assert on is not None and off is not None
    assert on.value / off.value == pytest.approx(1 / 0.7, rel=0.05)
    assert any(
        d.startswith("--sweep: batch 4, 8 × channels-last off, on vs batch 8, 16 ×") for d in cmp.differences
    )
    out = io.StringIO()
    from rich.console import Console

    terminal.print_comparison(cmp, Console(file=out, width=200))
    text = out.getvalue()
    assert re.search(r"│ ResNet50 +│ PyTorch +│ batch 8 · channels-last on +│", text)
    assert "A sweep · ResNet50 · batch 4 · channels-last off: " in text  # each session's verdicts, per point


def test_a_sweep_against_a_session_without_one_matches_no_cell_and_says_why(
    sessions: dict[str, Path],
) -> None:
    cmp = compare_sessions(sessions["plain"], sessions["sweep"])
    assert cmp.common == []
    assert any("only the cells without a point are compared" in d for d in cmp.differences)
    same = compare_sessions(sessions["plain"], sessions["plain"])  # a session without a sweep as before
    assert [r.point for r in same.rows] == [Point(), Point()] and all(r.ratio is not None for r in same.rows)
    assert not any(d.startswith("--sweep") for d in same.differences)


# -- sessions without a sweep -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["plain", "scaling"])
def test_a_session_without_a_sweep_has_no_sweep_section(sessions: dict[str, Path], name: str) -> None:
    rep = build_report(load_session(sessions[name]))
    assert rep.sweep is None and rep.answer.best == [] and rep.answer.sweep == ""
    assert all(v.point == "" and " · batch" not in v.label for v in rep.answer.verdicts)
    for text in (shown(rep), written(rep, markdown), written(rep, htmlreport)):
        assert BEST_TITLE not in text and SAME_TITLE not in text and GAINS_TITLE not in text
    header = next(csv.reader(io.StringIO(written(rep, csvfile))))
    assert header == csvfile.summary_columns()


# -- the report model, from made-up answers ---------------------------------------------------------------


def _gain(
    model: str, fw: str, axis: str, value: str, factor: float | None, no_effect: str | None = None
) -> SettingGain:
    return SettingGain(
        model,
        fw,
        axis,
        value,
        "fp32",
        factor,
        2.7 if factor else None,
        3.1 if factor else None,
        1,
        no_effect,
        "",
    )


def test_gains_table_of_several_models_names_them() -> None:
    gains = [
        _gain("resnet50", "torch", "precision", "amp-bf16", 2.9),
        _gain("resnet50", "keras-jax", "precision", "amp-bf16", None, "not on this device"),
        _gain("vgg16", "torch", "precision", "amp-bf16", 2.4),
    ]
    table, notes = gains_table(gains, ["keras-jax", "torch"])
    assert table is not None and table.title == GAINS_TITLE
    assert table.header == ["Model", "Setting", "Keras/JAX", "PyTorch"]
    assert table.rows == [
        ["ResNet50", "precision amp-bf16 (vs fp32)", "no effect", "2.90× [2.70×–3.10×]"],
        ["VGG16", "precision amp-bf16 (vs fp32)", "–", "2.40× [2.70×–3.10×]"],
    ]
    assert notes == ["ResNet50 · Keras/JAX · precision: no effect (not on this device)"]
    assert gains_table([], ["torch"]) == (None, [])


def test_best_lines_name_each_side_and_keep_the_summarys_sentence() -> None:
    ratio = FrameworkRatio.from_json(
        {
            "model": "resnet50",
            "base": "torch",
            "framework": "tensorflow",
            "ratio": 1.6,
            "ci_low": 1.5,
            "ci_high": 1.7,
            "significant": True,
            "basis": "epoch",
            "text": "PyTorch 1.60× faster than tf.keras",
        }
    )
    best = BestVerdict(
        "resnet50",
        BestPoint("torch", Point.from_key("batch=8"), "batch 8", 226.0, 2, 0.01),
        BestPoint("tensorflow", Point.from_key("batch=4"), "", 114.2, 2, 0.0),
        ratio,
        0.01,
        "best vs best: PyTorch at batch 8 1.60× faster; choosing the best of 2 overstates it by 1.0%",
    )
    (line,) = best_lines([best], {"resnet50"}, "images")
    assert line.label.startswith("ResNet50") and line.label != "ResNet50"  # marked: not the same network
    assert line.sides == (
        "PyTorch: batch 8 (fastest of 2 points, 226 images/s)",
        "tf.keras: batch 4 (fastest of 2 points, 114 images/s)",  # no settings said: the point's label
    )
    assert line.verdict.text == best.text and line.verdict.mark is Mark.WINNER


def test_the_answer_of_a_sweep_without_ratios_says_why_at_each_point(report: Report) -> None:
    one = SessionSummary.from_json(
        {
            **report.summary.to_json(),
            "rows": [r.to_json() for r in report.summary.rows if r.framework == "torch"],
            "ratios": [],
        }
    )
    verdicts = answer(one).verdicts
    assert [v.label for v in verdicts] == [f"ResNet50 · {p.label}" for p in POINTS]
    assert all(v.kind == "alone" and v.text.startswith("PyTorch only: ") for v in verdicts)


def test_curves_of_an_inference_sweep_have_latency_and_leave_out_words(report: Report) -> None:
    rows = [r for r in report.rows]
    infer = [
        type(r).from_json({**r.to_json(), "task": "inference", "latency_p50_s": 0.01, "latency_p99_s": 0.02})
        for r in rows
    ]
    axes = [("batch", ("auto", "4", "8")), ("channels-last", ("off", "on"))]
    effective = {(r.framework, r.model, r.point): r.point for r in rows}
    tables, charts = curve_tables(infer, axes, ["torch", "tensorflow"], effective)
    (table,) = tables
    assert [row[0] for row in table.rows] == ["4", "8"]  # 'auto' has no place on the axis
    assert table.header[1:4] == [
        "p50 (ms) · PyTorch, channels-last off",
        "p99 (ms) · PyTorch, channels-last off",
        "Images/s · PyTorch, channels-last off",
    ]
    assert len(charts[0].series) == 4  # every setting measured here (no effective point elsewhere)
    assert charts[0].series[0].figures["latency_p99_s"][0][0] == 0.02


def test_best_vs_best_refused_is_said_as_a_warning(report: Report) -> None:
    data = _sweep(report).to_json()
    refusal = {
        "model": "resnet50",
        "base": "torch",
        "framework": "tensorflow",
        "devices": {"torch": ["cuda"], "tensorflow": ["cpu"]},
        "text": "no best vs best between PyTorch at batch 8 and tf.keras at batch 4: they ran on different devices",
    }
    summary = SessionSummary.from_json(
        {**report.summary.to_json(), "sweep": {**data, "best": [], "refused": [refusal]}}
    )
    (line,) = answer(summary).best
    assert line.sides == () and line.verdict.mark is Mark.REFUSED and line.verdict.text == refusal["text"]
    out = shown(build_report(load_session(report.source.path), summary))
    assert f"ResNet50: {refusal['text']}" in flat(out)


def test_a_token_models_best_vs_best_at_each_length_and_its_tokens_curve(tmp_path: Path) -> None:
    path = make_session(
        tmp_path,
        name="tokens",
        frameworks=("torch", "tensorflow"),
        models=("gpt2_mini",),
        sweep={"seq-len": ["32", "64"], "batch": ["4", "8"]},
        batch_size=8,
        runs=2,
        folder="tokens",
    )
    rep = build_report(load_session(path))
    labels = [b.verdict.label for b in rep.answer.best]
    assert labels == ["GPT-2 mini · seq-len 32", "GPT-2 mini · seq-len 64"]  # one best vs best per length
    assert rep.sweep is not None
    curve = next(t for t in rep.sweep.curves if t.title.endswith("against seq-len"))
    assert curve.title == "GPT-2 mini: sequences/s and tokens/s against seq-len"
    assert "Tokens/s · PyTorch, batch 8" in curve.header

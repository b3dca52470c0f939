"""What a new user meets first in a report: the answer (the verdict per model, its caveats with it, and
one chart), then the warnings, then the tables; FLOP rates in the unit their size reads in; a reason
shared by many cells said once; every run in the HTML's time-per-batch chart and the other processes'
CPU in its telemetry; the CPU model and the plan's settings in every export (issue #15)."""

from __future__ import annotations

import csv
import io
import json
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tests.reporttext import flat, shown, written
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from benchtui.core import fmt
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, terminal
from benchtui.core.reporting.model import ANSWER_TITLE, Report, build_report
from benchtui.core.store.session import load_session
from benchtui.widgets.results_table import ResultsTable, cell_values, row_key
from sessionfactory import RESNET50_NETWORKS, make_session

CPU_MODEL = "AMD EPYC 7B13 64-Core Processor"
INTERRUPTED = "session interrupted before this run"
#: What each side of ResNet50 and DenseNet121 counts per image: the same network, 2 GFLOP a sample.
SAME = {"params": 1_000_000, "flops": 2e9, "source": "fixture"}
SAME_NETWORKS = {(fw, m): SAME for fw in ("torch", "tensorflow") for m in ("resnet50", "densenet121")}
OTHERS_CORES = 1.5  # what other processes keep busy in the CPU session's samples


def _edit_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _edit_events(path: Path, change: Any) -> None:
    lines = [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in change(lines)))


def _busy(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Samples that say how busy the machine was: the runner's CPU and 1.5 cores of other processes."""
    for event in events:
        if event.get("type") == "hello":  # the pool the engine gave every framework (the plan's --threads 4)
            event["settings"]["intra_op_threads"] = 4
        host = event.get("host") if event.get("type") == "gpu" else None
        if isinstance(host, dict) and isinstance(host.get("cpu_percent"), (int, float)):
            host["system_busy_cores"] = host["cpu_percent"] / 100 + OTHERS_CORES
    return events


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """A CPU session of two models, three runs a cell, FLOPs counted (GFLOP/s, not TFLOP/s), a busy machine."""
    path = make_session(
        tmp_path_factory.mktemp("cpu"),
        gpu=False,
        models=("resnet50", "densenet121"),
        runs=3,
        epochs=2,
        steps=5,
        networks=SAME_NETWORKS,
    )
    _edit_events(path, _busy)

    def host(meta: dict[str, Any]) -> None:
        meta["host"]["cpu_model"] = CPU_MODEL
        meta["plan"]["threads"] = 4

    _edit_json(path / "session.json", host)
    return build_report(load_session(path))


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """Three models, one run a cell: the session was interrupted after ResNet50's two runs."""
    path = make_session(
        tmp_path_factory.mktemp("interrupted"),
        gpu=False,
        models=("resnet50", "densenet121", "inception_v3"),
        runs=1,
        epochs=2,
        steps=3,
        status="interrupted",
    )

    def cut(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ran = [e["run"] for e in events if e.get("type") == "run_start"]
        skipped = set(ran[2:])
        kept = [e for e in events if e.get("run") not in skipped]
        t = kept[-1]["t"]
        ends = [
            {"type": "run_end", "t": t + 0.01 * i, "run": rid, "status": "skipped", "reason": INTERRUPTED}
            for i, rid in enumerate(ran[2:], 1)
        ]
        return kept + ends

    _edit_events(path, cut)
    return build_report(load_session(path))


def _report(root: Path, **options: Any) -> Report:
    return build_report(load_session(make_session(root, **{"runs": 2, "epochs": 2, "steps": 4, **options})))


def _html(report: Report) -> str:
    return written(report, htmlreport)


def _view(report: Report, width: int = 200) -> str:
    out = io.StringIO()
    Console(file=out, width=width).print(terminal.summary_view(report, width))
    return out.getvalue()


# -- 1. the answer first ---------------------------------------------------------------------------
def test_every_view_opens_with_the_answer_then_the_warnings_then_the_tables(cpu: Report) -> None:
    verdicts = [v.text for v in cpu.answer.verdicts]
    assert [v.model for v in cpu.answer.verdicts] == ["resnet50", "densenet121"]
    assert all(" faster than " in text for text in verdicts)
    caution = "other processes kept"  # the CPU contention of the busy machine: a warning
    assert any(caution in w.text for w in cpu.warnings)

    show = shown(cpu)
    first_table = show.index("Images/s")
    assert show.index(ANSWER_TITLE) < min(show.index(v) for v in verdicts)
    assert max(show.index(v) for v in verdicts) < first_table
    assert all(show.count(v) == 1 for v in verdicts)  # not said again at the end

    md = written(cpu, markdown)
    sections = re.findall(r"^## (.+)$", md, flags=re.MULTILINE)
    assert sections[:3] == [ANSWER_TITLE, "Warnings", cpu.side_by_side.title]
    assert all(md.count(v) == 1 for v in verdicts) and "Frameworks compared\n" not in md

    html = _html(cpu)
    h2 = re.findall(r"<h2>(.*?)</h2>", html)
    assert h2[:2] == ["The answer", "Results"]
    assert html.index("The answer") < html.index('<div class="warn">') < html.index("<h2>Results</h2>")
    assert all(html.count(escape(v)) == 1 for v in verdicts)

    view = _view(cpu)
    assert view.index(verdicts[0]) < view.index("Images/s")  # the sessions screen: the answer first


def test_a_headless_run_prints_the_answer_before_the_table(
    cpu: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal.print_result(cpu, "benchtui · cpu")
    out = capsys.readouterr().out
    text = cpu.answer.verdicts[0].text
    assert out.index("benchtui · cpu") < out.index(ANSWER_TITLE) < out.index(text) < out.index("Images/s")
    assert out.count(text) == 1


def test_the_html_answer_has_one_chart_of_the_ratios_in_the_framework_colours(cpu: Report) -> None:
    html = _html(cpu)
    answer = html.split("<h2>The answer</h2>")[1].split("<h2>")[0]
    (chart,) = re.findall(r"<svg.*?</svg>", answer)
    assert "Time per image relative to PyTorch (lower is faster)" in chart
    for fw in ("torch", "tensorflow"):
        assert f'fill="{fmt.FRAMEWORK_COLORS[fw]}"' in chart
    # PyTorch is the reference (1.00); tf.keras's bar is its time ratio, with its CI as a whisker.
    verdict = next(v for v in cpu.answer.verdicts if v.model == "resnet50")
    assert verdict.ci is not None and verdict.ratio is not None
    assert f"tf.keras ResNet50: {verdict.ratio:.4g}" in chart
    assert chart.count("<path d=") >= 2  # a whisker per compared bar


@pytest.mark.parametrize(
    ("options", "caveat"),
    [
        ({"speed": {("torch", "resnet50"): 0.05, ("tensorflow", "resnet50"): 0.05}}, "not significant"),
        ({"runs": 1}, "(no CI: one value per side)"),
        ({"networks": RESNET50_NETWORKS}, "the raw ratio compares different networks"),
        ({"cpu_frameworks": ("tensorflow",)}, "they ran on different devices"),
        ({"frameworks": ("torch",)}, "PyTorch only: "),
        (
            {"fail": {("tensorflow", "resnet50", i): {"kind": "oom", "message": "CUDA OOM"} for i in (1, 2)}},
            "no verdict: tf.keras failed",
        ),
    ],
)
def test_caveats_stay_with_the_verdict(tmp_path: Path, options: dict[str, Any], caveat: str) -> None:
    report = _report(tmp_path, **options)
    (verdict,) = report.answer.verdicts
    assert caveat in verdict.text
    assert caveat in flat(shown(report)).split("Per model and framework")[0]
    assert caveat in flat(_view(report)).split("Per model and framework")[0]
    assert caveat in written(report, markdown).split(f"## {ANSWER_TITLE}")[1].split("\n## ")[0]
    answer = _html(report).split("<h2>The answer</h2>")[1].split("<h2>")[0].split('<div class="warn">')[0]
    assert escape(caveat) in answer


# -- 2. HTML: every run, the other processes' CPU, one colour per framework ---------------------------
def test_html_time_per_batch_draws_every_run_in_its_framework_colour(cpu: Report) -> None:
    html = _html(cpu)
    figure = html.partition("ResNet50: time per batch over a run")[2].split("</svg>")[0]
    lines = re.findall(
        r'<polyline [^>]*stroke="([^"]+)"[^>]*?(?: stroke-dasharray="([^"]+)")?><title>([^<]+)', figure
    )
    titles = [title for _, _, title in lines]
    assert titles == [f"{fw} run {i}" for fw in ("PyTorch", "tf.keras") for i in (1, 2, 3)]
    for color, dash, title in lines:
        fw = "torch" if title.startswith("PyTorch") else "tensorflow"
        assert color == fmt.FRAMEWORK_COLORS[fw]
        assert (dash == "") == title.endswith("run 1")  # the runs told apart by their dashes
    assert len({dash for _, dash, _ in lines}) == 3
    assert ">run 2</text>" in figure and ">run 3</text>" in figure  # the dashes' legend


def test_html_shows_the_cpu_other_processes_used(cpu: Report) -> None:
    html = _html(cpu)
    chart = html.partition("CPU over time: the runner and the other processes")[2].split("</svg>")[0]
    assert "other processes&#x27; CPU (cores)" in chart and "runner CPU (cores)" in chart
    rows = {r.framework: r.other_cpu_cores for r in cpu.summary.rows if r.model == "resnet50"}
    assert rows["torch"] == pytest.approx(OTHERS_CORES, abs=0.01)
    details = html.split("<h2>Details per cell</h2>")[1].split("</table>")[0]
    assert "<th>Other processes' CPU</th>" in details and f"{rows['torch']:.2f} cores" in details


def test_every_html_chart_of_frameworks_takes_their_colours(cpu: Report) -> None:
    html = _html(cpu)
    colours = set(re.findall(r'(?:fill|stroke)="(#[0-9a-f]{6})"', html))
    assert {fmt.FRAMEWORK_COLORS["torch"], fmt.FRAMEWORK_COLORS["tensorflow"]} <= colours
    # No other palette colour stands for a framework: the first two of the fallback palette are unused here.
    framework_like = {c for c in fmt.PALETTE if c not in fmt.FRAMEWORK_COLORS.values()}
    assert not colours & framework_like


# -- 3. FLOP rates in the unit their size reads in ------------------------------------------------------
def test_flop_unit_by_magnitude_one_per_column() -> None:
    assert fmt.flop_unit([0.00607]).name == "GFLOP/s" and fmt.flop_unit([0.00607]).text(0.00607) == "6.07"
    assert fmt.flop_unit([25.3, 0.5]).name == "TFLOP/s"
    mixed = fmt.flop_unit([0.5, 0.004])  # one unit for the column: the rows stay comparable
    assert mixed.name == "GFLOP/s" and [mixed.text(v) for v in (0.5, 0.004)] == ["500", "4.00"]
    assert fmt.flop_unit([3e-7]).name == "MFLOP/s" and fmt.flop_unit([3e-7]).text(3e-7) == "0.300"
    assert fmt.flop_unit([None]).name == "TFLOP/s" and fmt.flop_unit([]).text(None) == "–"
    assert (
        fmt.FLOP_UNITS[1].text(1.5) == "1,500" and fmt.FLOP_UNITS[0].with_peak(300.2, 0.6066) == "300 (61%)"
    )


def test_every_view_says_a_cpus_flop_rate_in_gflops(cpu: Report) -> None:
    row = next(r for r in cpu.summary.rows if r.model == "resnet50" and r.framework == "torch")
    tflops = row.achieved_tflops
    assert 0.1 < tflops < 1  # what a CPU does: 'TFLOP/s 0.785' would read badly
    gflops = fmt.FlopUnit("GFLOP/s", 1e3).text(tflops)
    show = shown(cpu, 220)
    header = next(line for line in show.splitlines() if "Images/s" in line)
    assert "GFLOP/s" in header and "TFLOP/s" not in header
    assert gflops in show and fmt.tflops(tflops) not in show

    assert cpu.efficiency is not None and "GFLOP/s" in cpu.efficiency.header
    md = written(cpu, markdown)
    section = md.split("## Compute efficiency")[1].split("\n## ")[0]
    assert "| GFLOP/s |" in section and f"| {gflops} [" in section
    html = _html(cpu)
    assert "<th>GFLOP/s</th>" in html and f"{gflops} [" in html

    # The data keep the raw number, its unit in its name.
    (rec,) = [
        r
        for r in csv.DictReader(io.StringIO(written(cpu, csvfile)))
        if (r["model"], r["framework"]) == ("resnet50", "torch")
    ]
    assert float(rec["achieved_tflops"]) == pytest.approx(tflops)
    data = json.loads(written(cpu, jsonfile))
    assert next(r for r in data["rows"] if r["framework"] == "torch")["achieved_tflops"] == pytest.approx(
        tflops
    )


class _Table(App[None]):
    def compose(self) -> ComposeResult:
        yield ResultsTable()


@pytest.mark.asyncio
async def test_the_apps_results_table_says_gflops_on_a_cpu(cpu: Report) -> None:
    model = load_session(cpu.source.path).model
    cache: dict[str, Any] = {}
    rows = {row_key(fw, m): cell_values(model, fw, m, cache) for fw, m in model.cells()}
    app = _Table()
    async with app.run_test(size=(200, 20)):
        table = app.query_one(ResultsTable)
        table.show(rows)
        headers = [str(c.label) for c in table.columns.values()]
        assert "GFLOP/s\n" in headers and not any("TFLOP" in h for h in headers)
        row = next(r for r in cpu.summary.rows if r.model == "resnet50" and r.framework == "torch")
        assert table.cell_text("resnet50|torch", "tflops") == fmt.FlopUnit("GFLOP/s", 1e3).text(
            row.achieved_tflops
        )


# -- 4. a reason of many cells, said once ----------------------------------------------------------------
def test_an_interrupted_session_says_why_once(interrupted: Report) -> None:
    skipped = [p for p in interrupted.problems if p.reason == INTERRUPTED]
    assert len(skipped) == 4  # DenseNet121 and InceptionV3 in both frameworks
    grouped = "4 cells: DenseNet121, InceptionV3 (every framework)"
    show = flat(shown(interrupted))
    assert show.count(INTERRUPTED) == 1 and f"* {grouped}: incomplete: {INTERRUPTED}" in show
    assert flat(_view(interrupted)).count(INTERRUPTED) == 1
    md = written(interrupted, markdown)
    assert md.count(INTERRUPTED) == 1 and f"| {grouped} | incomplete | {INTERRUPTED} |" in md
    assert _html(interrupted).count(INTERRUPTED) == 1
    # The cells that ran still have their verdict; the others say why they have none.
    verdicts = {v.model: v for v in interrupted.answer.verdicts}
    assert verdicts["resnet50"].compared and not verdicts["densenet121"].compared
    assert verdicts["densenet121"].text == "no verdict: every framework incomplete"


def test_a_caution_of_every_cell_is_said_once(cpu: Report) -> None:
    busy = "other processes kept 1.5 "  # of 32 cores, during runs of 4 threads: the verdict stands
    cells = "4 cells: ResNet50, DenseNet121 (every framework)"
    show = flat(shown(cpu))
    assert show.count(busy) == 1 and f"* {cells}: caution: {busy}" in show
    (warning,) = [w.text for w in cpu.warnings if busy in w.text]
    assert warning.startswith(f"{cells}: {busy}")
    md = written(cpu, markdown)
    assert md.count(busy) == 1 and f"- {cells}: {busy}" in md
    assert _html(cpu).count(busy) == 1


# -- 5. where it ran and how, in every export ---------------------------------------------------------
def test_every_export_names_the_cpu_and_the_settings_that_change_the_answer(
    cpu: Report, interrupted: Report
) -> None:
    md, html = written(cpu, markdown), _html(cpu)
    assert CPU_MODEL in md.split("## Environment")[1] and CPU_MODEL in html
    data = json.loads(written(cpu, jsonfile))
    assert (
        data["environment"]["cpu_model"] == CPU_MODEL
        and data["environment"]["host"]["cpu_model"] == CPU_MODEL
    )
    records = list(csv.DictReader(io.StringIO(written(cpu, csvfile))))
    assert {r["cpu_model"] for r in records} == {CPU_MODEL}

    plan = dict(cpu.environment)["Plan"]
    for words in ("3 runs per framework and model", "order interleaved", "precision fp32", "4 threads"):
        assert words in plan, words
    assert "compile each framework's default" in plan  # not 'on': the plan's 'default' is no bool
    one = dict(interrupted.environment)["Plan"]
    assert "1 run per framework and model" in one and "1 runs" not in one
    assert "threads: each framework's default" in one
    assert "Mean over up to 1 run per cell" in written(interrupted, markdown)


# -- snapshots: the app's results -------------------------------------------------------------------
class _SessionView(App[None]):
    """The sessions screen's summary of a session (``terminal.summary_view``), at the app's width."""

    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="summary")

    def on_mount(self) -> None:
        self.query_one("#summary", Static).update(terminal.summary_view(self.report, self.size.width))


class _Results(App[None]):
    """The live screen's results table of a finished session: compact under 100 columns, as the app has it."""

    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        yield ResultsTable()

    def on_mount(self) -> None:
        model = load_session(self.report.source.path).model
        table = self.query_one(ResultsTable)
        table.set_compact(self.size.width < 100)
        cache: dict[str, Any] = {}
        table.show(
            {row_key(fw, m): cell_values(model, fw, m, cache, table.compact) for fw, m in model.cells()}
        )


@pytest.mark.parametrize("size", [(80, 24), (120, 35)])
def test_snapshot_the_sessions_view_opens_with_the_answer(
    snap_compare: Any, interrupted: Report, size: tuple[int, int]
) -> None:
    assert snap_compare(_SessionView(interrupted), terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 35)])
def test_snapshot_the_results_table_of_a_cpu_session(
    snap_compare: Any, cpu: Report, size: tuple[int, int]
) -> None:
    assert snap_compare(_Results(cpu), terminal_size=size)


def test_the_end_of_a_headless_run_is_the_report_show_prints(
    cpu: Report, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A headless run ends with the report ``show`` prints (``build_report``), under the run's own title;
    the engine hands over the session as ``show`` loads it: session.json and the plan it records."""
    from benchtui.core.model.session_model import SessionModel
    from benchtui.core.plan.plan import Plan
    from benchtui.core.running import headless
    from benchtui.core.store.session import SessionWriter

    terminal.print_result(cpu, "benchtui · cpu")
    result = capsys.readouterr().out.splitlines()
    terminal.print_report(cpu)
    show = capsys.readouterr().out.splitlines()
    assert result[0] == "benchtui · cpu" and result[1:] == show[1:]

    plan = Plan(frameworks=["torch"], models=["resnet50"], batch_auto=True, batch_sizes={})
    writer = SessionWriter.create(plan, tmp_path)
    writer.update_meta(plan={**plan.to_dict(), "batch_sizes": {"resnet50": 24}})  # what the search chose
    model = SessionModel(plan)
    loaded = headless._finished(writer, model)
    assert loaded.path == writer.path and loaded.model is model and loaded.meta == writer.meta
    assert loaded.plan.batch_size("resnet50") == 24 and plan.batch_sizes == {}
    writer.finish("complete", {})

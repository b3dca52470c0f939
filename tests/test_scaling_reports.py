"""Data parallel in every report: the scaling table and plot, each device's figures, the wiring, the batch.

Sessions are written by tests/sessionfactory.py as the engine writes them (``devices``, ``scaling``);
``show`` and ``export`` run through the real CLI, and every view is checked on what it prints,
against the figures of the session's summary.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tests.reporttext import shown as _show
from tests.reporttext import written as _write

from benchtui.core import fmt
from benchtui.core.model.cell import SessionSummary
from benchtui.core.model.scaling import POOR_EFFICIENCY, STRAGGLER_RATIO
from benchtui.core.model.session_model import SessionModel
from benchtui.core.reporting import csvfile, htmlreport, markdown, terminal
from benchtui.core.reporting.model import Report, build_report, milliseconds, scaling_views
from benchtui.core.reporting.plots import FRAMEWORK_COLORS, value_label
from benchtui.core.store.session import load_session
from sessionfactory import make_session, read_events
from support import benchtui

FRAMEWORKS = ("torch", "tensorflow")
LABELS = {"torch": "PyTorch", "tensorflow": "tf.keras"}
#: What each runner records of its data-parallel wiring (settings.distributed of its hello), in the
#: order it sends it: the report puts engine, all-reduce, buckets and overlap first, the rest sorted.
WIRING = {
    "torch": {
        "backend": "nccl",
        "engine": "torch DistributedDataParallel via torchrun",
        "replicas": 4,
        "all_reduce": "NCCL ring all-reduce of gradient buckets",
        "overlap": "yes: buckets reduced during the backward pass",
        "bucket": "25 MiB buckets",
        "devices": [0, 1, 2, 3],
    },
    "tensorflow": {
        "engine": "tf.distribute.MirroredStrategy",
        "all_reduce": "NcclAllReduce",
        "replicas": 4,
        "devices": ["/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"],
    },
}
WIRING_ORDER = ["Engine", "All-reduce", "Buckets", "Overlap", "Backend", "Devices", "Replicas"]


def with_wiring(path: Path, records: dict[str, dict[str, Any]], devices: int) -> Path:
    """The session with each framework's wiring in its hellos at ``devices`` devices, as its runner
    records it (sessionfactory writes none); summary.json written again from the events."""
    events = list(read_events(path))
    starts = {e["run"]: e.get("devices", 1) for e in events if e.get("type") == "run_start"}
    for event in events:
        if event.get("type") == "hello" and starts.get(event["run"]) == devices:
            record = records.get(event["framework"])
            if record is not None:
                event["settings"]["distributed"] = record
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    plan = load_session(path).plan
    model = SessionModel(plan)
    for event in events:
        model.apply(event)
    (path / "summary.json").write_text(json.dumps(model.summary(), indent=2) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def scaling_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = make_session(
        tmp_path_factory.mktemp("scaling"),
        frameworks=FRAMEWORKS,
        devices=4,
        scaling=True,
        runs=2,
        epochs=3,
        steps=8,
        batch_size=16,
    )
    return with_wiring(path, WIRING, 4)


@pytest.fixture(scope="module")
def scaling(scaling_path: Path) -> Report:
    return build_report(load_session(scaling_path))


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Report:
    path = make_session(
        tmp_path_factory.mktemp("single"), frameworks=FRAMEWORKS, runs=2, steps=8, batch_size=16
    )
    return build_report(load_session(path))


@pytest.fixture(scope="module")
def cli(scaling_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the real CLI prints and writes for the scaling session: show, and md, html and csv exports."""
    out = tmp_path_factory.mktemp("exports")
    shown = benchtui("show", str(scaling_path))
    assert shown.returncode == 0, shown.stderr
    texts = {"show": shown.stdout}
    for name in ("md", "html", "csv"):
        target = out / f"report.{name}"
        done = benchtui("export", str(scaling_path), "--format", name, "-o", str(target))
        assert done.returncode == 0, done.stderr
        texts[name] = target.read_text(encoding="utf-8")
    return texts


def _flat(text: str) -> str:
    """Text with its lines joined: a long sentence wraps at the console's width."""
    return " ".join(text.split())


def _curve(report: Report, framework: str, model: str = "resnet50") -> dict[str, Any]:
    return next(
        c for c in report.summary.to_json()["scaling"] if c["framework"] == framework and c["model"] == model
    )


def _ci(value: float, ci: list[float], formatter: Any) -> str:
    return f"{formatter(value)} [{formatter(ci[0])}–{formatter(ci[1])}]"


def expected_scaling_cells(report: Report, devices: int) -> list[str]:
    """The scaling table's row at ``devices``, from the summary's curves: the count, the global batch,
    then per framework images/s, speedup and efficiency with their 95% CIs (the 1-device row the reference)."""
    points = {
        fw: next(p for p in _curve(report, fw)["points"] if p["devices"] == devices) for fw in FRAMEWORKS
    }
    cells = [str(devices), str(points["torch"]["global_batch"])]
    for fw in FRAMEWORKS:
        p = points[fw]
        cells.append(_ci(p["images_per_s"], p["images_per_s_ci"], fmt.rate))
        if devices == 1:
            cells += ["1.00×", "100%"]
        else:
            cells.append(_ci(p["speedup"], p["speedup_ci"], lambda v: f"{v:.2f}×"))
            cells.append(_ci(p["efficiency"], p["efficiency_ci"], fmt.percent))
    return cells


def _md_section(md: str, title: str) -> str:
    return md.split(f"## {title}")[1].split("\n## ")[0]


def _html_table(html: str, title: str) -> list[list[str]]:
    """The cells of the html table under ``title``, row by row (header first), unescaped of tags."""
    body = html.split(f"<h3>{escape(title, quote=True)}</h3>")[1].split("</table>")[0]
    return [
        [re.sub("<[^>]+>", "", cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in body.split("<tr>")[1:]
    ]


def _terminal_rows(text: str, first: str) -> list[list[str]]:
    """The cells of the framed table rows whose first cell is ``first``."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if line.startswith("│") and cells[0] == first:
            rows.append(cells)
    return rows


# -- the scaling table -----------------------------------------------------------------------
def test_the_report_model_holds_one_scaling_table_per_model_from_the_summary(scaling: Report) -> None:
    assert scaling.devices == 4 and [v.model for v in scaling.scaling] == ["resnet50"]
    table = scaling.scaling[0].table
    assert table.title == "Scaling: ResNet50 on 1 to 4 devices"
    assert table.header == [
        "Devices",
        "Global batch",
        "Images/s · PyTorch",
        "Speedup · PyTorch",
        "Efficiency · PyTorch",
        "Images/s · tf.keras",
        "Speedup · tf.keras",
        "Efficiency · tf.keras",
    ]
    assert table.rows == [expected_scaling_cells(scaling, n) for n in (1, 2, 4)]
    # The made-up efficiencies (PyTorch 90%, tf.keras 80%) are what the table says at 4 devices.
    assert table.rows[2][4].startswith("91% [") and table.rows[2][7].startswith("81% [")
    assert scaling.scaling[0].lines == [f"{LABELS[fw]}: {_curve(scaling, fw)['text']}" for fw in FRAMEWORKS]


def test_show_prints_the_scaling_table_and_its_curves_in_words(scaling: Report, cli: dict[str, str]) -> None:
    out = cli["show"]
    assert "Scaling: ResNet50 on 1 to 4 devices" in out
    for n in (1, 2, 4):
        assert _terminal_rows(out, str(n)) == [expected_scaling_cells(scaling, n)]
    flat = _flat(out)
    for fw in FRAMEWORKS:
        text = _curve(scaling, fw)["text"]
        assert f"{LABELS[fw]}: {text}" in flat
        for p in _curve(scaling, fw)["points"][1:]:  # the efficiency in words, as the summary has it
            assert f"{p['efficiency']:.0%} efficient" in text
    assert "100%: linear scaling" in flat


def test_markdown_has_the_scaling_table_its_curves_and_its_note(scaling: Report, cli: dict[str, str]) -> None:
    section = _md_section(cli["md"], "Scaling: ResNet50 on 1 to 4 devices")
    for n in (1, 2, 4):
        assert "| " + " | ".join(expected_scaling_cells(scaling, n)) + " |" in section
    for fw in FRAMEWORKS:
        assert f"- {LABELS[fw]}: {_curve(scaling, fw)['text']}" in section
    assert "the 1-device row is the reference" in section


def test_html_has_the_scaling_table_and_its_curves(scaling: Report, cli: dict[str, str]) -> None:
    html = cli["html"]
    rows = _html_table(html, "Scaling: ResNet50 on 1 to 4 devices")
    assert rows[0] == scaling.scaling[0].table.header
    assert rows[1:] == [expected_scaling_cells(scaling, n) for n in (1, 2, 4)]
    for fw in FRAMEWORKS:
        assert f"<li>{escape(LABELS[fw] + ': ' + _curve(scaling, fw)['text'], quote=True)}</li>" in html


def test_frameworks_with_their_own_global_batch_get_a_column_each_and_a_missing_count_a_dash(
    scaling: Report,
) -> None:
    summary = copy.deepcopy(scaling.summary.to_json())
    tf = next(c for c in summary["scaling"] if c["framework"] == "tensorflow")
    for point in tf["points"]:
        point["global_batch"] *= 2  # --batch-policy per-framework: tf.keras took a batch twice as large
    del tf["points"][1]  # and nothing finished on 2 devices
    tf["text"] = ""
    (view,) = scaling_views(SessionSummary.from_json(summary))
    assert view.table.header[:3] == ["Devices", "Global batch · PyTorch", "Images/s · PyTorch"]
    assert view.table.header[5] == "Global batch · tf.keras"
    assert [row[5] for row in view.table.rows] == ["32", "–", "128"]
    assert view.table.rows[1][5:] == ["–"] * 4 and view.table.rows[1][1] == "32"
    assert view.lines[1].startswith("tf.keras: no speedup measured")


def test_the_wiring_is_text_made_safe_in_every_format(tmp_path: Path) -> None:
    hostile = {"engine": "<script>alert(1)</script> | DDP", "bucket": "\x1b]0;pwned\x07 25 MiB"}
    path = make_session(tmp_path, frameworks=["torch"], devices=2, runs=1, steps=8, batch_size=16)
    report = build_report(load_session(with_wiring(path, {"torch": hostile}, 2)))
    assert report.wiring is not None and report.wiring.rows[1] == ["Buckets", " 25 MiB"]
    html = _write(report, htmlreport)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; | DDP" in html
    assert "| Engine | &lt;script&gt;alert(1)&lt;/script&gt; \\| DDP |" in _write(report, markdown)
    assert "\x1b" not in _show(report) and "pwned" not in _show(report)


@pytest.mark.parametrize("width", [70, 80, 85, 120])
def test_a_narrow_terminal_gets_a_scaling_table_per_framework_with_no_number_cut(
    scaling: Report, width: int
) -> None:
    out = io.StringIO()
    view = scaling.scaling
    terminal.print_data_parallel(view, None, [], None, Console(file=out, width=width))
    text = out.getvalue()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    for fw in FRAMEWORKS:
        assert f"Scaling: ResNet50 on 1 to 4 devices · {LABELS[fw]}" in text
    for n in (2, 4):
        for cell in expected_scaling_cells(scaling, n):
            for part in re.split(r" (?=\[)", cell):  # a figure may wrap before its interval, never inside
                assert part in text, (width, part)


@pytest.mark.parametrize("width", [80, 85, 120])
def test_each_devices_figures_stay_whole_on_a_terminal_of_80_columns_or_more(
    scaling: Report, width: int
) -> None:
    assert scaling.per_device is not None
    out = _show(scaling, width)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    for row in scaling.per_device.rows:
        assert all(cell in out for cell in row), (width, row)


# -- the scaling plot -------------------------------------------------------------------------
def _svg(html: str, title: str) -> str:
    start = html.index(f'aria-label="{escape(title, quote=True)}"')
    return html[html.rindex("<svg", 0, start) : html.index("</svg>", start)]


def test_html_plots_efficiency_and_throughput_a_line_per_framework_in_its_colour(
    scaling: Report, cli: dict[str, str]
) -> None:
    html = cli["html"]
    efficiency = _svg(html, "ResNet50: scaling efficiency")
    throughput = _svg(html, "ResNet50: throughput")
    for svg in (efficiency, throughput):
        lines = re.findall(r'<polyline points="([^"]+)" fill="none" stroke="([^"]+)" stroke-width="2.5"', svg)
        assert [color for _, color in lines] == [FRAMEWORK_COLORS[fw] for fw in FRAMEWORKS]
        assert all(len(points.split()) == 3 for points, _ in lines)  # 1, 2 and 4 devices
        # Linear scaling dashed; the device counts as the x axis's ticks.
        assert 'stroke-dasharray="5 4"' in svg
        assert all(f'text-anchor="middle" fill="#495057">{n}</text>' in svg for n in (1, 2, 4))
    # Each point is a dot whose tip says the summary's figure.
    for fw in FRAMEWORKS:
        for p in _curve(scaling, fw)["points"]:
            assert (
                f"{LABELS[fw]} on {p['devices']} device(s): {p['efficiency'] * 100:.0f}%</title>"
                in efficiency
            )
            assert (
                f"{LABELS[fw]} on {p['devices']} device(s): {value_label(p['images_per_s'])}</title>"
                in throughput
            )
    # The lower efficiency (tf.keras, 80%) sits lower in the chart at 4 devices: larger y.
    ys = [
        float(points.split()[-1].split(",")[1])
        for points, _ in re.findall(
            r'<polyline points="([^"]+)" fill="none" stroke="([^"]+)" stroke-width="2.5"', efficiency
        )
    ]
    assert ys[1] > ys[0]


def test_html_linear_reference_is_each_frameworks_one_device_rate_times_the_devices(scaling: Report) -> None:
    throughput = _svg(_write(scaling, htmlreport), "ResNet50: throughput")
    dashed = re.findall(
        r'<polyline points="([^"]+)" fill="none" stroke="([^"]+)" stroke-width="1.5"[^>]*5 4', throughput
    )
    assert [color for _, color in dashed] == [FRAMEWORK_COLORS[fw] for fw in FRAMEWORKS]
    bottom = float(
        re.search(r'<line x1="58" x2="58" y1="56" y2="([\d.]+)"', throughput).group(1)
    )  # the x axis
    for (points, _), fw in zip(dashed, FRAMEWORKS, strict=True):
        ys = [float(xy.split(",")[1]) for xy in points.split()]
        # It starts at the framework's dot at one device, and rises 1 : 2 : 4 above the axis.
        dot = re.search(
            rf'<circle cx="[\d.]+" cy="([\d.]+)" r="4" fill="[^"]+"><title>{LABELS[fw]} on 1 device',
            throughput,
        )
        assert ys[0] == float(dot.group(1))
        heights = [bottom - y for y in ys]
        assert heights[1] == pytest.approx(2 * heights[0], abs=0.2)
        assert heights[2] == pytest.approx(4 * heights[0], abs=0.2)


def test_html_keeps_a_scaling_table_of_three_frameworks_on_the_page(
    tmp_path: Path, cli: dict[str, str]
) -> None:
    path = make_session(
        tmp_path,
        frameworks=[*FRAMEWORKS, "keras-jax"],
        devices=2,
        scaling=True,
        runs=2,
        steps=8,
        batch_size=16,
    )
    report = build_report(load_session(path))
    html = _write(report, htmlreport)
    table = html.split("<h3>Scaling: ResNet50 on 1 to 2 devices</h3>")[1].split("</table>")[0]
    assert table.startswith('<table class="fit">')
    point = _curve(report, "tensorflow")["points"][1]
    speedup, (low, high) = point["speedup"], point["speedup_ci"]
    # The value and its interval each kept whole: the line may break between them only.
    assert f'<td class="num"><span>{speedup:.2f}×</span> <span>[{low:.2f}×–{high:.2f}×]</span></td>' in table
    assert "table.fit td.num span{white-space:nowrap}" in html
    # Two frameworks fit as they are, a figure on one line.
    assert '<table class="fit">' not in cli["html"] and "<span>" not in cli["html"]


# -- each device's figures ----------------------------------------------------------------------
def _per_device(report: Report, framework: str) -> list[dict[str, Any]]:
    return next(r for r in report.summary.to_json()["rows"] if r["framework"] == framework)["per_device"]


def expected_device_cells(report: Report, framework: str) -> list[list[str]]:
    per = _per_device(report, framework)
    steps = [e.get("step_s") for e in per]
    fastest = min((s for s in steps if s is not None), default=None)
    return [
        [
            "ResNet50",
            LABELS[framework],
            str(e["device"]),
            str(e["gpu_index"]),
            milliseconds(e.get("step_s")),
            "–" if e.get("step_s") is None else f"{e['step_s'] / fastest:.2f}×",
            f"{e['util']:.0f}%",
            f"{e['power_w']:.0f} W",
            fmt.bytes_(e["mem_max"]),
        ]
        for e in per
    ]


def test_each_device_has_its_rank_step_time_and_gpu_in_every_view(
    scaling: Report, cli: dict[str, str]
) -> None:
    header = [
        "Model",
        "Framework",
        "Rank",
        "GPU",
        "Step time (ms)",
        "vs fastest",
        "GPU util",
        "Power",
        "Peak memory",
    ]
    expected = expected_device_cells(scaling, "torch") + expected_device_cells(scaling, "tensorflow")
    assert scaling.per_device is not None and scaling.per_device.header == header
    assert scaling.per_device.rows == expected
    # PyTorch ranks step at their own pace (the factory: rank r 2% x r slower); tf.keras has no ranks.
    assert [row[5] for row in expected[:4]] == ["1.00×", "1.02×", "1.04×", "1.06×"]
    assert {row[4] for row in expected[4:]} == {"–"}
    straggler = next(r for r in scaling.summary.rows if r.framework == "torch").straggler
    line = f"ResNet50 · PyTorch: straggler ratio {straggler:.2f}× (the slowest rank's step time over the fastest's)"
    assert scaling.per_device_notes == [line]

    assert [r for r in _terminal_rows(cli["show"], "ResNet50") if len(r) == len(header)] == expected
    assert line in _flat(cli["show"])
    section = _md_section(cli["md"], "Per device: each rank's step time and its GPU")
    assert all("| " + " | ".join(row) + " |" in section for row in expected) and f"- {line}" in section
    assert _html_table(cli["html"], "Per device: each rank's step time and its GPU") == [header, *expected]
    assert f"<li>{escape(line, quote=True)}</li>" in cli["html"]


def test_a_straggler_and_a_poor_efficiency_are_called_out(tmp_path: Path) -> None:
    path = make_session(
        tmp_path, frameworks=FRAMEWORKS, devices=2, scaling=True, runs=2, steps=8, batch_size=16,
        efficiency={"torch": 0.5}, straggler=0.2,
    )  # fmt: skip
    report = build_report(load_session(path))
    torch = next(r for r in report.summary.rows if r.framework == "torch")
    assert torch.straggler >= STRAGGLER_RATIO
    assert (
        f"straggler ratio {torch.straggler:.2f}× (the slowest rank's step time over the fastest's): above "
        in (report.per_device_notes[0])
    )
    efficiency = _curve(report, "torch")["points"][1]["efficiency"]
    assert efficiency < POOR_EFFICIENCY
    poor = f"PyTorch: below 70% efficient at 2 devices ({fmt.percent(efficiency)}): look for a straggler"
    assert any(line.startswith(poor) for line in report.scaling[0].lines)
    assert not any(line.startswith("tf.keras: below") for line in report.scaling[0].lines)  # 80%
    assert poor in _flat(_show(report)) and poor in _write(report, markdown)


def test_devices_without_scaling_have_the_device_table_and_no_scaling_table(tmp_path: Path) -> None:
    path = make_session(tmp_path, frameworks=FRAMEWORKS, devices=2, runs=2, steps=8, batch_size=16)
    report = build_report(load_session(path))
    assert report.summary.to_json()["scaling"] == [] and report.scaling == []
    assert report.per_device is not None and len(report.per_device.rows) == 4
    out = _show(report)
    assert "Scaling:" not in out and "Per device: each rank's step time and its GPU" in out
    assert "16 ×2 = 32" in out
    assert "scaling efficiency" not in _write(report, htmlreport)


def test_a_cpu_session_leaves_out_the_gpu_columns(tmp_path: Path) -> None:
    path = make_session(tmp_path, frameworks=["torch"], devices=2, gpu=False, runs=2, steps=8, batch_size=16)
    table = build_report(load_session(path)).per_device
    assert table is not None
    assert table.header == ["Model", "Framework", "Rank", "Step time (ms)", "vs fastest"]


# -- the main table, the wiring, the exports of data ------------------------------------------
def test_the_main_table_says_the_per_device_batch_the_devices_and_the_global_batch(
    scaling: Report, cli: dict[str, str]
) -> None:
    headline = _terminal_rows(cli["show"], "ResNet50")
    headline = [r for r in headline if r[-1] == "ok"]
    assert [r[:3] for r in headline] == [
        ["ResNet50", "PyTorch", "16 ×4 = 64"],
        ["ResNet50", "tf.keras", "16 ×4 = 64"],
    ]
    assert "per-device batch × devices = the global batch" in _flat(cli["show"])
    assert "| ResNet50 | 16 ×4 = 64 |" in cli["md"]
    assert _html_table(cli["html"], scaling.side_by_side.title)[1][:2] == ["ResNet50", "16 ×4 = 64"]
    plan = dict(scaling.environment)["Plan"]
    assert "data parallel on 4 devices, scaling over 1, 2, 4, batch sizes per device" in plan


def test_the_wiring_side_by_side_in_every_view(scaling: Report, cli: dict[str, str]) -> None:
    table = scaling.wiring
    assert table is not None and table.header == ["Setting", "PyTorch", "tf.keras"]
    assert [row[0] for row in table.rows] == WIRING_ORDER
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["Engine"] == ["torch DistributedDataParallel via torchrun", "tf.distribute.MirroredStrategy"]
    assert rows["Buckets"] == ["25 MiB buckets", "–"]  # tf.keras recorded none
    assert rows["Devices"] == ["0, 1, 2, 3", "/gpu:0, /gpu:1, /gpu:2, /gpu:3"]
    title = "Data parallel: how each framework wires it"
    show = [r for r in _terminal_rows(cli["show"], "Engine")]
    assert show == [["Engine", *rows["Engine"]]] and title in cli["show"]
    section = _md_section(cli["md"], title)
    positions = [section.index(f"| {name} |") for name in WIRING_ORDER]
    assert (
        positions == sorted(positions)
        and "| Overlap | yes: buckets reduced during the backward pass | – |" in section
    )
    assert _html_table(cli["html"], title) == [table.header, *table.rows]


def test_csv_adds_devices_and_the_global_batch_after_every_older_column(
    scaling: Report, single: Report, cli: dict[str, str]
) -> None:
    header = next(csv.reader(io.StringIO(cli["csv"])))
    later = len(csvfile.VERDICT_MARK_COLUMNS) + len(csvfile.STALL_COLUMNS)  # added after them
    assert header[-3 - later : len(header) - later] == ["devices", "global_batch", "cpu_model"]
    assert header.count("devices") == 1
    assert header == next(csv.reader(io.StringIO(_write(single, csvfile))))
    for rec in csv.DictReader(io.StringIO(cli["csv"])):
        assert (rec["batch_size"], rec["devices"], rec["global_batch"]) == ("16", "4", "64")
    for rec in csv.DictReader(io.StringIO(_write(single, csvfile))):
        assert (rec["devices"], rec["global_batch"]) == ("1", rec["batch_size"])


def test_json_export_carries_the_curves_and_the_wiring(scaling_path: Path) -> None:
    done = benchtui("export", str(scaling_path), "--format", "json")
    data = json.loads(done.stdout)
    assert data["devices"] == 4 and data["distributed"] == WIRING
    assert [c["framework"] for c in data["scaling"]] == list(FRAMEWORKS)
    assert [p["devices"] for p in data["scaling"][0]["points"]] == [1, 2, 4]


def test_a_headless_run_ends_with_the_scaling_table(
    scaling: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal.print_result(scaling, "fixture")
    out = capsys.readouterr().out
    assert _terminal_rows(out, "4") == [expected_scaling_cells(scaling, 4)]
    assert "Per device: each rank's step time and its GPU" in out and "Data parallel: how each" in out


def test_the_sessions_screen_view_says_the_curves(scaling: Report) -> None:
    out = io.StringIO()
    Console(file=out, width=300).print(terminal.summary_view(scaling, 300))
    for fw in FRAMEWORKS:
        assert f"ResNet50 scaling · {LABELS[fw]}: {_curve(scaling, fw)['text']}" in out.getvalue()


# -- one device: as before ---------------------------------------------------------------------
def test_a_single_device_session_has_none_of_the_new_sections(single: Report) -> None:
    assert (
        single.devices == 1 and single.scaling == [] and single.per_device is None and single.wiring is None
    )
    assert single.summary.to_json()["scaling"] == [] and single.summary.to_json()["distributed"] == {}
    views = {
        "show": _show(single),
        "md": _write(single, markdown),
        "html": _write(single, htmlreport),
    }
    for name, text in views.items():
        for words in ("Scaling", "Per device", "Data parallel", "16 ×", "global batch", "straggler"):
            assert words not in text, (name, words)
    assert "| ResNet50 | 16 |" in views["md"]
    assert [r[:3] for r in _terminal_rows(views["show"], "ResNet50")][:2] == [
        ["ResNet50", "PyTorch", "16"],
        ["ResNet50", "tf.keras", "16"],
    ]
    assert "data parallel" not in dict(single.environment)["Plan"]

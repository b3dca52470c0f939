"""Several nodes (issue 33) in every view: show (80 and 120 columns), md, html, csv and json say each node's
figures, the straggler and the inter-node link, and the scaling over nodes x devices.

Sessions are written by tests/sessionfactory.py with ``nodes=`` (node 1 slower by ``node_speed``); each view
is checked against the figures of the session's summary. One-node sessions are the goldens' (unchanged).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from tests.reporttext import flat, html_table, md_section, terminal_rows
from tests.reporttext import shown as _show
from tests.reporttext import written as _write

from benchtui.core.fmt import milliseconds
from benchtui.core.model.cell import CellSummary, NodeFigures
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, trackers
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.model import Report, build_report
from benchtui.core.reporting.model.telemetry import telemetry_lines
from benchtui.core.reporting.terminal import summary_view
from benchtui.core.store.session import load_session
from sessionfactory import make_session

LABELS = {"torch": "PyTorch", "tensorflow": "tf.keras"}
TITLE = "Nodes: ResNet50 · {} on 2 machines"


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_session(
        tmp_path_factory.mktemp("nodes"),
        frameworks=("torch", "tensorflow"),
        nodes=2,
        devices=2,
        scaling=True,
        node_speed={1: 1.3},
        runs=2,
        batch_size=16,
    )


@pytest.fixture(scope="module")
def report(path: Path) -> Report:
    return build_report(load_session(path))


def row_of(report: Report, fw: str) -> CellSummary:
    return next(r for r in report.summary.rows if r.framework == fw)


def nodes_of(report: Report, fw: str) -> tuple[NodeFigures, ...]:
    per = row_of(report, fw).per_node
    assert per is not None and len(per) == 2
    return per


def expected_rows(report: Report, fw: str) -> list[list[str]]:
    """A cell's Nodes table as the figures say it: node, host, ranks, step time, vs fastest, then (PyTorch)
    its slowest rank, then GPU util and peak memory."""
    per = nodes_of(report, fw)
    fastest = min(f.step_s for f in per if f.step_s)
    out = []
    for f in per:
        assert f.ranks is not None and f.step_s is not None and f.util is not None and f.power_w is not None
        first, count = f.ranks
        cells = [str(f.node), f.host, f"{first}–{first + count - 1}" if count > 1 else str(first)]
        cells += [milliseconds(f.step_s), f"{f.step_s / fastest:.2f}×"]
        if fw == "torch":
            i, slowest = max(enumerate(f.rank_step_s), key=lambda t: t[1] or 0.0)
            cells.append(f"{first + i}: {milliseconds(slowest)}")
        cells += [f"{f.util:.0f}%", f"{(f.mem_max or 0) / 1024**3:.1f} GiB"]
        out.append(cells)
    return out


def test_the_report_holds_a_nodes_table_per_cell(report: Report) -> None:
    assert report.nodes == 2 and [(v.model, v.framework) for v in report.node_views] == [
        ("resnet50", "torch"),
        ("resnet50", "tensorflow"),
    ]
    for view in report.node_views:
        fw = view.framework
        row = row_of(report, fw)
        assert view.table.title == TITLE.format(LABELS[fw])
        assert view.table.rows == expected_rows(report, fw)
        assert row.node_straggler is not None and row.node_straggler.named
        assert view.lines == [row.node_straggler.text, f"Inter-node link: {row.link}"]
    assert report.node_views[0].lines[0].startswith("straggler: node 1 (bench-02), ")


@pytest.mark.parametrize("width", [80, 120])
def test_show_says_each_node_the_straggler_and_the_link(report: Report, width: int) -> None:
    text = _show(report, width)
    assert all(len(line) <= width for line in text.splitlines())
    for fw in ("torch", "tensorflow"):
        row = row_of(report, fw)
        assert row.node_straggler is not None
        assert row.node_straggler.text in flat(text) and f"Inter-node link: {row.link}" in flat(text)
        if width >= 120:  # the whole table on one line per node
            for cells in expected_rows(report, fw):
                assert cells in terminal_rows(text, cells[0]), cells
        else:  # 80 columns: the table split in parts, each node's host and step time still on its line
            for f in nodes_of(report, fw):
                assert any(
                    line.startswith("│") and f.host in line and milliseconds(f.step_s) in line
                    for line in text.splitlines()
                )
    assert "on 1 to 4 workers (nodes × devices)" in flat(text)
    if width >= 120:  # at 80 columns these wrap inside their cells
        assert "Nodes × devices" in text
        assert "16 ×2 ×2 nodes = 64" in text  # the batch: per device × devices × nodes = the global batch


def test_markdown_has_the_nodes_sections(report: Report) -> None:
    md = _write(report, markdown)
    for fw in ("torch", "tensorflow"):
        section = md_section(md, TITLE.format(LABELS[fw]))
        for cells in expected_rows(report, fw):
            assert "| " + " | ".join(cells) + " |" in section
        row = row_of(report, fw)
        assert row.node_straggler is not None
        assert f"- {row.node_straggler.text}" in section and f"- Inter-node link: {row.link}" in section
    assert "| 2 × 2 | 64 |" in md_section(md, "Scaling: ResNet50 on 1 to 4 workers (nodes × devices)")


def test_html_has_the_nodes_tables_and_the_chart_says_nodes_by_devices(report: Report) -> None:
    html = _write(report, htmlreport)
    for fw in ("torch", "tensorflow"):
        table = html_table(html, TITLE.format(LABELS[fw]))
        assert table[1:] == expected_rows(report, fw)
        row = row_of(report, fw)
        assert row.node_straggler is not None and f"<li>{row.node_straggler.text}</li>" in html.replace(
            "&#x27;", "'"
        )
    assert "workers (nodes × devices)" in html
    for tick in ("1×1", "1×2", "2×2"):
        assert f">{tick}</text>" in html


def test_csv_has_the_node_columns(report: Report) -> None:
    rows = list(csv.DictReader(io.StringIO(_write(report, csvfile))))
    assert len(rows) == 2  # a row per cell, as ever: the nodes are columns
    for rec in rows:
        fw = rec["framework"]
        row = row_of(report, fw)
        slow = row.node_straggler
        assert slow is not None
        assert (rec["nodes"], rec["link"], rec["straggler_node"], rec["straggler_host"]) == (
            "2",
            row.link,
            "1",
            "bench-02",
        )
        assert float(rec["straggler_ratio"]) == slow.ratio and rec["straggler_named"] == "True"
        for f in nodes_of(report, fw):
            k = f.node
            assert rec[f"node{k}_host"] == f.host and float(rec[f"node{k}_step_s"]) == f.step_s
            assert (
                f.ranks is not None and rec[f"node{k}_ranks"] == f"{f.ranks[0]}-{f.ranks[0] + f.ranks[1] - 1}"
            )
            assert float(rec[f"node{k}_gpu_util"]) == f.util and rec[f"node{k}_status"] == "ok"
            ranks = [float(v) for v in rec[f"node{k}_rank_step_s"].split(";") if v]
            assert ranks == list(f.rank_step_s) if fw == "torch" else ranks == []


def test_json_carries_the_typed_figures(report: Report) -> None:
    data = json.loads(_write(report, jsonfile))
    assert data["nodes"] == 2
    for rec in data["rows"]:
        row = CellSummary.from_json(rec)
        assert row == row_of(report, rec["framework"])
        assert [n["host"] for n in rec["per_node"]] == ["bench-01", "bench-02"]
        assert rec["node_straggler"]["named"] is True and rec["link"]
    points = [(p.get("nodes", 1), p["devices"]) for p in data["scaling"][0]["points"]]
    assert points == [(1, 1), (1, 2), (2, 2)]
    assert {r["nodes"] for r in data["runs"] if "-n2x2-" in r["run_id"]} == {2}
    assert all("nodes" not in r for r in data["runs"] if "-n1x" in r["run_id"])


def test_batches_csv_says_each_window_s_node(path: Path) -> None:
    out = io.StringIO()
    count = csvfile.write_batches(load_session(path), out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == count and {r["node"] for r in rows} == {"0", "1"}
    assert all(r["node"] == "0" for r in rows if "-n1x" in r["run_id"])


def test_one_node_sessions_have_no_node_columns(tmp_path: Path) -> None:
    report = build_report(load_session(make_session(tmp_path, devices=2, scaling=True, runs=2)))
    assert report.nodes == 1 and report.node_views == []
    header = next(csv.reader(io.StringIO(_write(report, csvfile))))
    assert not {"nodes", "link", "node0_host"} & set(header)
    out = io.StringIO()
    csvfile.write_batches(load_session(report.source.path), out)
    assert "node" not in out.getvalue().splitlines()[0].split(",")
    for text in (_show(report), _write(report, markdown), _write(report, htmlreport)):
        assert "Nodes:" not in text and "nodes × devices" not in text and "Inter-node" not in text


def test_trackers_name_the_nodes(report: Report) -> None:
    names = {trackers.device_name(row, report.summary.frameworks) for row in report.summary.rows}
    assert names == {"2 nodes x 2x NVIDIA H100 80GB HBM3"}


def test_the_telemetry_plots_are_node_0_s(path: Path, report: Report) -> None:
    samples = load_session(path).folder.gpu_samples()
    assert any("node" in s for s in samples)
    assert report.telemetry == telemetry_lines([s for s in samples if "node" not in s])
    assert report.telemetry is not None and report.telemetry.xs and report.telemetry.gpus


def test_compare_says_the_nodes_differ(tmp_path: Path) -> None:
    one = make_session(tmp_path / "a", runs=2, frameworks=("torch",))
    two = make_session(tmp_path / "b", nodes=2, runs=2, frameworks=("torch",))
    cmp = compare_sessions(one, two)
    assert "--nodes: 1 vs 2" in cmp.differences
    assert "--nodes: 1 vs 2" not in compare_sessions(one, one).differences


def test_the_sessions_screen_says_each_cell_s_straggler(report: Report) -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(summary_view(report, 200))
    for fw in ("torch", "tensorflow"):
        slow = row_of(report, fw).node_straggler
        assert slow is not None
        assert f"ResNet50 · {LABELS[fw]} nodes · {slow.text}" in out.getvalue()

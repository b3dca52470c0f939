"""The report model and its writers: built once from a session, rendered by every registered format alike."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from html import escape
from pathlib import Path
from typing import IO

import pytest
from rich.console import Console

from benchtui.cli import build_parser, main
from benchtui.core import fmt
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, registry, terminal
from benchtui.core.reporting.files import export_session
from benchtui.core.reporting.model import STUDY_COLUMNS, Report, build_report, cell_text
from benchtui.core.reporting.registry import WRITERS, Format
from benchtui.core.store.session import LoadedSession, load_session
from sessionfactory import make_session
from support import UNAVAILABLE_RUN, benchtui

OOM = "CUDA out of memory"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> LoadedSession:
    path = make_session(
        tmp_path_factory.mktemp("sessions"),
        models=("resnet50", "densenet121"),
        runs=2,
        epochs=3,
        steps=6,
        fail={("tensorflow", "densenet121", 2): {"kind": "oom", "message": OOM, "epoch": 2}},
    )
    return load_session(path)


@pytest.fixture(scope="module")
def report(loaded: LoadedSession) -> Report:
    return build_report(loaded)


def _row(report: Report, model: str, framework: str) -> dict:
    return next(r for r in report.rows if r.model == model and r.framework == framework)


def _terminal(report: Report, width: int = 200) -> str:
    out = io.StringIO()
    terminal.print_report(report, Console(file=out, width=width))
    return out.getvalue()


# -- the model ------------------------------------------------------------------------------
def test_report_holds_the_study_tables_once(report: Report) -> None:
    assert [t.title for t in report.figure_tables] == [c.title for c in STUDY_COLUMNS]
    frameworks = ["PyTorch", "tf.keras"]
    for table in report.figure_tables:
        assert table.header == ["Model", *frameworks] and len(table.rows) == 2
    # Model, batch, then the four timings for each framework; throughput is not a timing.
    assert len(report.side_by_side.header) == 2 + 4 * 2
    assert "Images/s · PyTorch" not in report.side_by_side.header
    row = _row(report, "resnet50", "torch")
    mean = report.figure_tables[0].rows[0][1]
    assert mean == cell_text(row, "mean_epoch_s") and mean.startswith(fmt.seconds(row.mean_epoch_s))


def test_report_problems_and_warnings(report: Report) -> None:
    failed = [p for p in report.problems if p.framework == "tf.keras" and p.model == "DenseNet121"]
    assert failed and failed[0].status == "failed" and OOM in failed[0].reason
    assert all(p.status != "ok" or p.reason for p in report.problems)
    assert all(w.kind and w.text for w in report.warnings)


# -- every format from the one model ---------------------------------------------------------
def test_a_report_is_sealed_every_writer_reads_only_the_report(tmp_path: Path) -> None:
    """Once built, a report holds what every writer shows (its runs' series, telemetry and logs too): the
    session's folder gone, each format writes the same bytes."""
    path = make_session(
        tmp_path,
        runs=2,
        epochs=2,
        steps=4,
        fail={("tensorflow", "resnet50", 1): {"kind": "oom", "message": "OOM", "epoch": 2}},
    )
    (path / "logs").mkdir(exist_ok=True)
    (path / "logs" / "002-tensorflow-resnet50-1.log").write_text("Traceback: OOM when allocating\n")
    report = build_report(load_session(path))
    writers = {**{name: w.writer() for name, w in WRITERS.items()}, "terminal": terminal}
    before = {}
    for name, writer in writers.items():
        out = io.StringIO()
        writer.write(report, out)
        before[name] = out.getvalue()
    assert "OOM when allocating" in before["html"] and "<svg" in before["html"]
    shutil.rmtree(path)
    for name, writer in writers.items():
        out = io.StringIO()
        writer.write(report, out)
        assert out.getvalue() == before[name], name


def test_the_terminal_is_a_writer_like_the_others(
    loaded: LoadedSession, capsys: pytest.CaptureFixture[str]
) -> None:
    """``terminal.write(report, fh)`` (the Writer protocol's) writes what ``benchtui show`` prints."""
    out = io.StringIO()
    terminal.write(build_report(loaded), out)
    capsys.readouterr()
    assert main(["show", str(loaded.path)]) == 0
    assert out.getvalue() == capsys.readouterr().out and "Per model and framework" in out.getvalue()


@pytest.mark.parametrize("name", list(WRITERS))
def test_every_registered_writer_writes_a_session(loaded: LoadedSession, name: str) -> None:
    writer = WRITERS[name]
    written = export_session(loaded.path, name)
    assert written == loaded.path / writer.filename
    text = written.read_text(encoding="utf-8")
    row = _row(build_report(loaded), "resnet50", "torch")
    assert repr(row.mean_epoch_s) in text or fmt.seconds(row.mean_epoch_s) in text
    if writer.per_batch:
        batches = export_session(loaded.path, name, per_batch=True)
        assert batches.name == writer.batches_filename
        assert len(batches.read_text().splitlines()) == 1 + sum(
            len(run.batch_seconds) for run in loaded.model.runs.values()
        )


def test_the_same_figures_in_every_format(report: Report) -> None:
    md = markdown.render(report)
    html = htmlreport.render(report)
    records = list(csv.DictReader(io.StringIO(_csv(report))))
    exported = json.loads(jsonfile.render(report))
    shown = _terminal(report)
    for row in report.rows:
        for col in STUDY_COLUMNS:
            value = row.figure(col.key)
            if value is None:
                continue
            text = cell_text(row, col.key, col.formatter)
            assert text in md and text in html, (col.key, text)
            assert col.formatter(value) in shown
            rec = next(r for r in records if r["model"] == row.model and r["framework"] == row.framework)
            assert float(rec[col.key]) == value
            jrow = next(
                r for r in exported["rows"] if r["model"] == row.model and r["framework"] == row.framework
            )
            assert jrow[col.key] == value


def _csv(report: Report) -> str:
    buf = io.StringIO()
    csvfile.write(report, buf)
    return buf.getvalue()


def test_every_view_titles_the_figures_from_the_one_column_list(report: Report) -> None:
    md, html = markdown.render(report), htmlreport.render(report)
    wide, narrow = _terminal(report, 200), _terminal(report, 100)
    for col in STUDY_COLUMNS:
        assert f"## {col.title}" in md and f"<h3>{col.title}</h3>" in html.replace("&#x27;", "'")
        assert col.header in wide
        assert col.narrow.split("\n")[0] in narrow
    for col in STUDY_COLUMNS[:4]:
        assert f"{col.short} · PyTorch" in md


def test_warnings_reach_every_writer(report: Report) -> None:
    texts = [w.text for w in report.warnings]
    assert texts  # the failed run's cell at least
    md, html = markdown.render(report), htmlreport.render(report)
    exported = json.loads(jsonfile.render(report))
    assert exported["warnings"] == texts
    for text in texts:
        assert markdown.md_escape(text) in md and escape(text, quote=True) in html


def test_html_plots_every_gpu_sample_from_the_session_events(loaded: LoadedSession) -> None:
    lines = loaded.folder.events_path.read_text().splitlines()
    expected = sum(1 for line in lines if json.loads(line).get("type") == "gpu")
    samples = loaded.folder.gpu_samples()
    assert expected > 0 and len(samples) == expected
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)


# -- the registry -----------------------------------------------------------------------------
def write(report: Report, fh: IO[str]) -> None:
    """A test format: the session's title and its row count."""
    fh.write(f"{report.title}: {len(report.rows)} rows\n")


def test_a_format_added_to_the_registry_is_offered_everywhere(
    loaded: LoadedSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = list(WRITERS)
    monkeypatch.setitem(
        WRITERS, "txt", Format("txt", "summary.txt", "Text: one line", lambda: sys.modules[__name__])
    )
    assert before[:4] == ["md", "csv", "json", "html"]
    assert "txt: Text: one line" in " ".join(_export_help().split())  # --format's help names each one
    assert registry.spoken() == ", ".join(before) + " or txt"  # the app's help texts
    assert main(["export", str(loaded.path), "--format", "txt"]) == 0
    assert capsys.readouterr().out == f"{loaded.meta['name']}: 4 rows\n"
    assert export_session(loaded.path, "txt") == loaded.path / "summary.txt"
    assert main(["export", str(loaded.path), "--format", "txt", "--per-batch"]) == 2
    assert "--per-batch goes with --format csv" in capsys.readouterr().err


def _export_help() -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["export"].format_help()  # type: ignore[index, union-attr]


def test_unknown_formats_are_refused(loaded: LoadedSession, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(loaded.path), "--format", "txt"]) == 2
    assert "invalid choice: 'txt'" in capsys.readouterr().err


# -- the commands ------------------------------------------------------------------------------
def test_a_headless_run_ends_with_the_study_table_on_stdout(tmp_path: Path) -> None:
    """A real headless run (an unavailable cell, so no framework starts): progress on stderr, table on stdout."""
    result = benchtui(*UNAVAILABLE_RUN, "--sessions-dir", str(tmp_path), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    (folder,) = tmp_path.iterdir()
    assert f"benchtui · {folder.name}" in result.stdout and "unavailable" in result.stdout
    assert all(col.header in result.stdout for col in STUDY_COLUMNS)
    assert "* PNASNet · tf.keras: unavailable:" in result.stdout
    assert "Mean epoch" not in result.stderr and "session" in result.stderr

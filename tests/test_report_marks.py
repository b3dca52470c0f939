"""Issue 30 in the reports: a verdict the machine decided (unreliable) or that names no winner (about the
same) reads as what it is in md, html, csv and the report model; each epoch's wait before its first batch;
notes that say only what the table has; one number of decimals per column; settings in words; a chart's
legend beside or under its title; ``parity`` through a pipe never cutting a word.

Sessions are written by tests/sessionfactory.py as the engine writes them; the summaries' new keys
(``unreliable``, ``about_same``, ``to_first_batch_s``) are put in by hand, as the summary will hold them.
"""

from __future__ import annotations

import copy
import csv
import io
import re
import sys
from html import unescape
from typing import Any

import pytest
from tests.reporttext import html_table, md_section, written

from benchtui.core import fmt
from benchtui.core.model.cell import FrameworkRatio, RefusedRatio, SessionSummary
from benchtui.core.model.parity import parity_entries
from benchtui.core.reporting import csvfile, htmlreport, markdown, plots, terminal
from benchtui.core.reporting.model import (
    ANSWER_TITLE,
    STALL_HEADER,
    UNRELIABLE_NOTE,
    Answer,
    Mark,
    Report,
    build_report,
    per_device_table,
    refusal_of,
    verdict_of,
    warmup_table,
)
from benchtui.core.running.parity import Count
from benchtui.core.store.session import LoadedSession, load_session
from benchtui.widgets import comparison
from sessionfactory import make_session

REASON = "other processes kept 1.6 of 2 cores busy during PyTorch's runs"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> LoadedSession:
    path = make_session(tmp_path_factory.mktemp("marks"), runs=2, epochs=3, steps=6, gpu=False)
    return load_session(path)


@pytest.fixture(scope="module")
def summary(loaded: LoadedSession) -> dict[str, Any]:
    return loaded.model.summary()


def _with_ratio(summary: dict[str, Any], **keys: Any) -> dict[str, Any]:
    """The summary with its one verdict's keys set as the new summary sets them."""
    out = copy.deepcopy(summary)
    out["ratios"][0].update(keys)
    return out


def _unreliable(summary: dict[str, Any]) -> dict[str, Any]:
    ratio = summary["ratios"][0]
    return _with_ratio(
        summary,
        unreliable=REASON,
        faster_framework=None,
        text=f"unreliable: {REASON} (measured {ratio['ratio']:.2f}×, not a verdict)",
    )


def _about_same(summary: dict[str, Any]) -> dict[str, Any]:
    return _with_ratio(
        summary,
        about_same=True,
        significant=True,  # a tight CI that still rounds to 1.00×: no winner either
        faster_framework=None,
        text="PyTorch and tf.keras about the same (1.00×, 95% CI 0.99–1.01)",
    )


def _md_answer(report: Report) -> str:
    return md_section(written(report, markdown), ANSWER_TITLE)


def _html_answer_cell(report: Report) -> str:
    html = written(report, htmlreport)
    body = html.split(f"<h3>{ANSWER_TITLE}</h3>")[1].split("</table>")[0]
    return re.findall(r"<tr>(.*?)</tr>", body)[1]


def _csv_rows(report: Report) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(written(report, csvfile))))


# -- the verdict's marks --------------------------------------------------------------------
def test_an_unreliable_verdict_claims_no_winner_in_the_model(loaded: LoadedSession, summary: dict) -> None:
    verdict = build_report(loaded, _unreliable(summary)).answer.verdicts[0]
    assert verdict.kind == "unreliable" and verdict.unreliable == REASON
    assert verdict.faster == "" and not verdict.highlighted and verdict.warning and not verdict.compared
    assert verdict.text.startswith("unreliable: ")
    assert UNRELIABLE_NOTE in build_report(loaded, _unreliable(summary)).answer.note


def test_an_unreliable_verdict_is_a_warning_in_md_html_and_csv(loaded: LoadedSession, summary: dict) -> None:
    report = build_report(loaded, _unreliable(summary))
    md = _md_answer(report)
    assert f"| **unreliable:** {REASON} (measured" in md  # the mark in bold, the rest plain
    assert "**PyTorch" not in md and "**tf.keras" not in md
    cell = _html_answer_cell(report)
    assert '<td class="unreliable">unreliable: ' in cell and 'class="sig"' not in cell
    # The chart draws verdicts: a ratio that is not one is not drawn as one.
    answer = written(report, htmlreport).split("<h2>Results</h2>")[0]
    assert "relative to" not in answer and "Not drawn: ResNet50 (unreliable: no verdict)." in answer
    row = next(r for r in _csv_rows(report) if r["time_ratio"])
    assert (row["verdict_mark"], row["unreliable_reason"], row["faster_framework"]) == (
        "unreliable",
        REASON,
        "",
    )
    assert row["verdict"].startswith("unreliable: ")


def test_about_the_same_is_not_set_apart_as_a_winner(loaded: LoadedSession, summary: dict) -> None:
    report = build_report(loaded, _about_same(summary))
    verdict = report.answer.verdicts[0]
    assert verdict.about_same and verdict.kind == "ratio" and verdict.faster == "" and not verdict.highlighted
    assert "| PyTorch and tf.keras about the same (1.00×, 95% CI 0.99–1.01) |" in _md_answer(report)
    cell = _html_answer_cell(report)
    assert "<td>PyTorch and tf.keras about the same" in cell and 'class="sig"' not in cell
    row = next(r for r in _csv_rows(report) if r["time_ratio"])
    assert (row["verdict_mark"], row["faster_framework"]) == ("about_same", "")
    assert "'about the same'" in report.answer.note


def _old(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as a session before issue 30 has it: no marks, no waits."""
    out = copy.deepcopy(summary)
    for ratio in out["ratios"]:
        ratio.pop("unreliable", None)
        ratio.pop("about_same", None)
    for row in out["rows"]:
        row.pop("to_first_batch_s", None)
    return out


def test_an_old_summary_without_the_marks_renders_as_before(loaded: LoadedSession, summary: dict) -> None:
    summary = _old(summary)
    report = build_report(loaded, summary)
    verdict = report.answer.verdicts[0]
    assert verdict.kind == "ratio" and verdict.faster == summary["ratios"][0]["faster_framework"]
    text = summary["ratios"][0]["text"]
    assert verdict.highlighted == bool(summary["ratios"][0]["significant"])
    md = _md_answer(report)
    assert (f"| **{text}** |" if verdict.highlighted else f"| {text} |") in md
    row = next(r for r in _csv_rows(report) if r["time_ratio"])
    assert row["verdict_mark"] == "" and row["faster_framework"] == summary["ratios"][0]["faster_framework"]
    assert "'unreliable'" not in report.answer.note and "'about the same'" not in report.answer.note


# -- each epoch's wait before its first batch -------------------------------------------------
def _stalled(summary: dict[str, Any], waits: list[float | None] | None) -> dict[str, Any]:
    out = copy.deepcopy(summary)
    for row in out["rows"]:
        row["to_first_batch_s"] = None
    keras = next(r for r in out["rows"] if r["framework"] == "tensorflow")
    keras["to_first_batch_s"] = waits
    keras["first_epoch_s"], keras["mean_epoch_excl_first_s"] = 17.9, 8.5
    return out


def test_an_epoch_start_stall_is_shown_and_said(loaded: LoadedSession, summary: dict) -> None:
    # The tf.keras on a busy CPU: 4.9 s and 4.7 s before the first batch of epochs 2 and 4.
    stalled = _stalled(summary, [0.05, 4.9, 0.04, 4.7])
    epoch_times = {("resnet50", "tensorflow"): {1: 17.9, 2: 10.4, 3: 5.6, 4: 9.6}}
    table = warmup_table(SessionSummary.from_json(stalled), epoch_times)
    assert STALL_HEADER in table.header
    keras = next(r for r in table.rows if r[1] == "tf.keras")
    assert keras[table.header.index(STALL_HEADER)] == "0.050, 4.900, 0.040, 4.700"
    torch = next(r for r in table.rows if r[1] == "PyTorch")
    assert torch[table.header.index(STALL_HEADER)] == "–"
    report = build_report(loaded, stalled)
    assert report.warmup_notes[0].startswith(
        "ResNet50 · tf.keras: epoch 2: 4.900 s before its first batch ("
    )  # of the session's own epoch times here (the factory's), as a share
    md = written(report, markdown)
    assert "- ResNet50 · tf.keras: epoch 2: 4.900 s before its first batch" in md
    # show prints no warm-up table: the stall is said there in the same words
    console = terminal.stdout_console(io.StringIO())
    terminal.print_report(report, console)
    assert "ResNet50 · tf.keras: epoch 2: 4.900 s before its first batch" in console.file.getvalue()
    html = unescape(written(report, htmlreport))
    assert "<li>ResNet50 · tf.keras: epoch 2: 4.900 s before its first batch" in html
    from benchtui.core.reporting.model import stall_lines

    lines = stall_lines(SessionSummary.from_json(stalled), epoch_times)
    assert lines[0] == (
        "ResNet50 · tf.keras: epoch 2: 4.900 s before its first batch (47% of its 10.40 s); "
        "epoch 4: 4.700 s (49% of its 9.600 s)"
    )
    assert "epoch 1" not in lines[0] and "epoch 3" not in lines[0]  # 0.05 s of 17.9 s is no stall
    row = next(r for r in _csv_rows(report) if r["framework"] == "tensorflow")
    assert row["to_first_batch_s"] == "0.05;4.9;0.04;4.7"


def test_no_wait_recorded_shows_nothing(loaded: LoadedSession, summary: dict) -> None:
    for waits in (None, []):
        report = build_report(loaded, _stalled(summary, waits))
        assert STALL_HEADER not in report.warmup.header and report.warmup_notes == []
        assert "before its first batch" not in written(report, markdown)
    report = build_report(loaded, _old(summary))  # a summary from before the key
    assert STALL_HEADER not in report.warmup.header and report.warmup_notes == []


# -- notes that say only what the table has ----------------------------------------------------
def test_the_ci_note_is_under_tables_that_have_brackets_only(loaded: LoadedSession, summary: dict) -> None:
    with_ci = build_report(loaded, summary)
    assert any(" [" in c for t in with_ci.figure_tables for r in t.rows for c in r[1:])
    assert "[in brackets]" in written(with_ci, markdown) and "[in brackets]" in written(with_ci, htmlreport)
    bare = copy.deepcopy(summary)
    for row in bare["rows"]:
        row["ci"] = {}
    without = build_report(loaded, bare)
    for text in (written(without, markdown), written(without, htmlreport)):
        assert "[in brackets]" not in text and "Mean over up to 2 runs per cell." in text


def _devices_summary(gpu: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"device": 0, "step_s": 0.10}
    other: dict[str, Any] = {"device": 1, "step_s": 0.11}
    if gpu:
        entry.update(gpu_index=0, util=91.0, power_w=300.0, mem_max=2**30)
        other.update(gpu_index=1, util=90.0, power_w=298.0, mem_max=2**30)
    row = {"model": "resnet50", "framework": "torch", "devices": 2, "per_device": [entry, other]}
    return {"rows": [row]}


def test_the_per_device_note_on_a_cpu_says_nothing_of_gpus() -> None:
    table, _ = per_device_table(SessionSummary.from_json(_devices_summary(gpu=False)))
    assert table is not None
    assert "GPU" not in table.note and "power" not in table.note and "GPU" not in table.title
    assert "Step time" in table.note and "GPU" not in " ".join(table.header)
    table, _ = per_device_table(SessionSummary.from_json(_devices_summary(gpu=True)))
    assert table is not None and "GPU util, power" in table.note and "GPU" in table.title


# -- numbers and words -------------------------------------------------------------------------
def test_a_column_has_one_number_of_decimals() -> None:
    text = fmt.seconds_column([12.64, 1.1856], 4)
    assert (text(12.64), text(1.1856)) == ("12.640", "1.186")
    text = fmt.seconds_column([0.704, 2.764, 0.159])  # every value under 10: as fmt.seconds writes them
    assert [text(v) for v in (0.704, 2.764, 0.159)] == [fmt.seconds(v) for v in (0.704, 2.764, 0.159)]
    text = fmt.seconds_column([12.6, 45.3])
    assert (text(12.6), text(45.3)) == ("12.60", "45.30")
    rate = fmt.rate_column([1234.0, 47.7])
    assert (rate(1234.0), rate(47.7), rate(None)) == ("1,234.0", "47.7", "–")
    rate = fmt.rate_column([1234.0, 980.2])
    assert (rate(1234.0), rate(980.2)) == ("1,234", "980")


def test_the_warmup_and_study_tables_keep_one_number_of_decimals_per_column(
    loaded: LoadedSession, summary: dict
) -> None:
    varied = copy.deepcopy(summary)
    torch, keras = (next(r for r in varied["rows"] if r["framework"] == fw) for fw in ("torch", "tensorflow"))
    torch["batch"]["median"], keras["batch"]["median"] = 12.64, 1.1856  # the two figures
    report = build_report(loaded, varied)
    median = report.warmup.header.index("Steady median batch (s)")
    assert sorted(r[median] for r in report.warmup.rows) == ["1.186", "12.640"]
    for table in (report.warmup, *report.figure_tables):
        for i in range(2, len(table.header)):
            figures = [re.match(r"[\d,]+\.?(\d*)", r[i]) for r in table.rows]
            places = {len(m.group(1)) for m in figures if m}
            assert len(places) <= 1, (table.title, table.header[i], [r[i] for r in table.rows])
    cells = html_table(written(report, htmlreport), "Warm-up and steady state")
    assert sorted(r[median] for r in cells[1:]) == ["1.186", "12.640"]


def test_the_warmup_note_says_which_throughput_the_verdict_uses(loaded: LoadedSession, summary: dict) -> None:
    note = build_report(loaded, summary).warmup.note
    basis = summary["ratios"][0]["basis_label"]
    assert f"The verdict uses {basis} (the throughput table's images/s), not these steady figures." in note


def test_settings_are_said_in_words_not_as_a_dict(loaded: LoadedSession, summary: dict) -> None:
    worded = copy.deepcopy(summary)
    worded["frameworks"]["torch"]["settings"] = {
        "precision": "fp32",
        "tf32_matmul": False,
        "cudnn_benchmark": True,
        "memory_policy": {"counter": "process peak RSS (host memory)", "env": {"CUDA_VISIBLE_DEVICES": ""}},
        "shuffle": None,
    }
    report = build_report(loaded, worded)
    settings = dict(report.environment)["PyTorch settings"]
    assert settings == (
        "precision: fp32 · tf32 matmul: off · cudnn benchmark: on · memory policy: counter process peak RSS "
        "(host memory), environment CUDA_VISIBLE_DEVICES empty · shuffle: none"
    )
    for text in (written(report, markdown), written(report, htmlreport)):
        assert "{'" not in text and "=True" not in text and "=False" not in text


# -- a chart's legend and its title --------------------------------------------------------------
def test_a_legend_too_wide_for_the_title_row_goes_under_it() -> None:
    title = "CPU over time: the runner and the other processes"
    series = [
        plots.Series("runner CPU (cores)", [0, 1, 2], [1.0, 1.2, 0.9], "#343a40"),
        plots.Series("other processes' CPU (cores)", [0, 1, 2], [0.1, 0.2, 0.1], "#2b8a3e", dashed=True),
    ]
    legend = {"PyTorch runs": "#e8590c", "Keras/JAX runs": "#2f9e44"}
    svg = plots.line_chart(title, series, "seconds", "cores busy", band_legend=legend)
    end = 8 + 8 * len(title)  # at least what a title of 14 px in bold takes
    texts = re.findall(r'<text x="([\d.]+)" y="([\d.]+)" fill="#343a40">([^<]+)</text>', svg)
    labels = {label for _, _, label in texts}
    assert {"runner CPU (cores)", "other processes&#x27; CPU (cores)", "PyTorch runs"} <= labels
    beside = [(float(x), label) for x, y, label in texts if float(y) == 22]
    assert beside and all(x >= end for x, _ in beside)  # nothing on the title's row overlaps it
    assert any(float(y) > 22 for _, y, _ in texts)  # the rest on a row under it
    # The plot starts below the legend's last row.
    top = min(float(y) for y in re.findall(r'<line x1="64" x2="64" y1="([\d.]+)"', svg))
    assert top >= 22 + 16  # a row of the legend further down
    short = plots.line_chart("CPU", series, "seconds", "cores busy", band_legend=legend)
    assert all(  # a short title leaves the legend its one row beside it, as before
        float(y) == 22 for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" fill="#343a40">', short)
    )


# -- parity through a pipe ---------------------------------------------------------------------
COUNTS = [
    Count("torch", "resnet50", 224, 0, 25557032, 25557032, 8.2e9, source="torchvision 0.29.2 resnet50"),
    Count(
        "tensorflow",
        "resnet50",
        224,
        0,
        25636712,
        25583592,
        7.7e9,
        source="keras.applications ResNet50 (keras 3.15.1)",
    ),
    Count(
        "tensorflow",
        "resnet50_v1_5",
        224,
        0,
        25557032,
        25557032,
        8.2e9,
        source="benchtui ResNet50 v1.5 from keras.layers (keras 3.15.1)",
    ),
]


def _parity_out(monkeypatch: pytest.MonkeyPatch, columns: str | None) -> str:
    from benchtui.commands.parity import print_table

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()  # not a terminal: what `benchtui parity | cat` writes to
    monkeypatch.setattr(sys, "stdout", out)
    print_table(COUNTS, parity_entries(COUNTS))
    return out.getvalue()


@pytest.mark.parametrize("columns", [None, "80", "100", "60", "30"])
def test_parity_through_a_pipe_never_cuts_a_word(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    text = _parity_out(monkeypatch, columns)
    assert "…" not in text
    words = {w.strip(",;:()") for w in text.replace("│", " ").replace("┃", " ").split()}
    for word in ("Trainable", "params", "keras.applications", "torchvision", "GFLOP", "25.58M"):
        assert word in words or word.lower() in words, (columns, word)


def test_parity_through_a_pipe_is_one_table_row_per_count(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _parity_out(monkeypatch, None)
    assert "┃ Trainable params ┃" in text  # the header whole, on one line
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == len(COUNTS)


def _ratio(**fields: Any) -> FrameworkRatio:
    base = {"model": "resnet50", "base": "torch", "framework": "tensorflow", "basis_label": "epoch times"}
    return FrameworkRatio.from_json({**base, **fields})


#: A summary's verdicts of every kind a ratio has, and the mark each reads as.
MARKED = [
    (_ratio(text="PyTorch 1.30× faster", significant=True, faster_framework="torch"), Mark.WINNER),
    (_ratio(text="PyTorch 1.30× faster, not significant", significant=False), Mark.NOT_SIGNIFICANT),
    (_ratio(text="PyTorch 1.30× faster (no CI)", significant=None, faster_framework="torch"), Mark.NO_CI),
    (_ratio(text="about the same", significant=False, about_same=True), Mark.ABOUT_SAME),
    (_ratio(text="unreliable: busy; measured", significant=True, unreliable="busy"), Mark.UNRELIABLE),
]


def test_every_medium_styles_every_mark_in_one_table() -> None:
    for table in (terminal.VERDICT_STYLES, terminal.COMPARED_VERDICT_STYLES, htmlreport.VERDICT_CLASSES):
        assert set(table) == set(Mark)
    assert set(comparison.APP_VERDICT_STYLES) == {m.value for m in Mark}


def test_a_verdict_reads_by_its_one_mark_in_every_view() -> None:
    """The report's answer, the end of a headless run, the live screen's answer and its comparison make a
    verdict's line from ``verdict_of``: the same words, and each styles the same mark by its own table."""
    for ratio, mark in MARKED:
        verdict = verdict_of(ratio, "ResNet50")
        assert verdict.mark is mark and verdict.text == ratio.text
        app = comparison.APP_VERDICT_STYLES[mark]
        assert comparison.verdict_style(ratio) == app
        assert comparison.verdict_lines([ratio], [], "ResNet50") == [(ratio.text, app)]
        (line,) = terminal.answer_lines(Answer([verdict]))
        assert line.plain == f"ResNet50: {ratio.text} · from epoch times"
        styles = {
            s.style for s in line.spans if s.start >= len("ResNet50: ") and s.end < len(line.plain) - 17
        }
        want = terminal.VERDICT_STYLES[mark] or "bold"
        assert styles == ({"bold yellow", want} if mark is Mark.UNRELIABLE else {want})
        assert htmlreport.verdict_class(verdict) == htmlreport.VERDICT_CLASSES[mark]
        assert markdown.verdict_md(verdict).startswith("**") == (mark in (Mark.WINNER, Mark.UNRELIABLE))
        assert csvfile.ratio_mark(ratio) == {"unreliable": "unreliable", "about_same": "about_same"}.get(
            mark.value, ""
        )
    refused = RefusedRatio("resnet50", "torch", "tensorflow", {}, "no ratio between PyTorch and tf.keras")
    assert refusal_of(refused).mark is Mark.REFUSED
    assert comparison.verdict_lines([], [refused]) == [(refused.text, "bold red")]

"""Every view of a generate session (issue 34): show, md, html (its latency-per-token chart), csv, json,
trackers and the sessions screen's line, from a cell's ``GenerationFigures`` and the runs' generate steps;
nothing of it for a session that does not generate."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchtui.core.model.cell import GenerationFigures
from benchtui.core.model.generation import GenerationRun, TokenStep
from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, terminal, trackers
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.model import Report, build_report, how_it_ran
from benchtui.core.reporting.model.generation import (
    GENERATION_LATENCY_TITLE,
    GENERATION_SPEED_TITLE,
    PER_STEP_NOTE,
    PER_TOKEN_NOTE,
    generation_curves,
    generation_line,
    step_latencies,
)
from benchtui.core.reporting.model.notes import GENERATE_VERDICT_NOTE
from benchtui.core.store.session import LoadedSession, load_session
from reporttext import flat, html_table, md_section, shown, terminal_rows, written
from sessionfactory import make_session
from test_golden_outputs import _check as check_golden
from test_golden_outputs import _outputs as golden_outputs

FRAMEWORKS = ("torch", "keras-jax")


def figures(framework: str, *, per_token: bool = False, **changes: object) -> GenerationFigures:
    """A cell's figures by hand: Keras/JAX 1.25 x PyTorch's latencies."""
    k = 1.0 if framework == "torch" else 1.25
    out = GenerationFigures(
        prompt_len=128,
        new_tokens=16,
        sequences=8,
        steps=12,
        first_token_s=0.0123 * k,
        first_token_p90_s=0.0131 * k,
        first_token_p99_s=0.0142 * k,
        token_s=0.004 * k,
        token_p90_s=0.0049 * k,
        token_p99_s=0.0051 * k,
        per_token=per_token,
        tokens_per_s=250 / k,
        batch_tokens_per_s=2000 / k,
        compile_s=3.2 * k,
        cache_bytes_per_token=8192,
        tokens=16,
        decode_steps=15 if framework == "torch" else 16,
        latency_curve=tuple(0.004 * k * (1 + 0.01 * i) for i in range(15)) if per_token else (),
    )
    return replace(out, **changes)  # type: ignore[arg-type]


def folded(path: Path) -> LoadedSession:
    """The session loaded, each run's generate steps as the parent folds them (read from its tokens events
    where the fold has not)."""
    loaded = load_session(path)
    events = [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]
    for rid, run in loaded.model.runs.items():
        if run.generation is None:
            run.generation = GenerationRun(
                [
                    TokenStep(
                        e["epoch"],
                        e["step"],
                        e["sequences"],
                        e["prompt_len"],
                        e["new_tokens"],
                        e["first_token_s"],
                        e["decode_s"],
                        tuple(e.get("token_s") or ()),
                        e.get("tokens"),
                        e.get("decode_steps"),
                    )
                    for e in events
                    if e.get("type") == "tokens" and e.get("run") == rid
                ]
            )
    return loaded


def generate_report(tmp_path: Path, *, timing: str | None = None, **changes: object) -> Report:
    """A made generate session's report, its cells' figures the hand-made ones (``figures``)."""
    path = make_session(
        tmp_path,
        frameworks=FRAMEWORKS,
        models=("gpt2_mini",),
        epochs=3,
        steps=4,
        batch_size=8,
        timing=timing,
        generate={"prompt_len": 128, "new_tokens": 16},
    )
    loaded = folded(path)
    summary = loaded.model.session_summary()
    rows = [
        replace(r, generation=figures(r.framework, per_token=timing == "step", **changes))
        for r in summary.rows
    ]
    return build_report(loaded, replace(summary, rows=rows))


@pytest.fixture(scope="module")
def window(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return generate_report(tmp_path_factory.mktemp("window"))


@pytest.fixture(scope="module")
def step(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return generate_report(tmp_path_factory.mktemp("step"), timing="step")


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory) -> Report:
    path = make_session(tmp_path_factory.mktemp("train"), models=("gpt2_mini",), epochs=2, steps=3)
    return build_report(load_session(path))


def test_the_tables_say_each_figure_in_ms_and_tokens_per_s(window: Report) -> None:
    latency, speed = window.generation
    assert latency.title == GENERATION_LATENCY_TITLE and speed.title == GENERATION_SPEED_TITLE
    assert latency.header[:4] == ["Model", "Framework", "Batch", "Prompt + new"]
    assert latency.rows == [
        ["GPT-2 mini", "PyTorch", "8", "128 + 16", "12.30", "13.10", "14.20", "4.000", "4.900", "5.100"],
        ["GPT-2 mini", "Keras/JAX", "8", "128 + 16", "15.38", "16.38", "17.75", "5.000", "6.125", "6.375"],
    ]
    assert [row[3:6] for row in speed.rows] == [["250", "2,000", "3.200"], ["200", "1,600", "4.000"]]
    assert speed.header[:3] == ["Model", "Framework", "Batch"] and speed.rows[0][6] == "8.0 KiB"
    assert [row[-2:] for row in speed.rows] == [
        ["16", "15"],
        ["16", "16"],
    ]  # tokens and decode steps as counted
    assert PER_STEP_NOTE in latency.note and PER_TOKEN_NOTE not in latency.note


def test_a_figure_not_measured_is_a_dash(tmp_path: Path) -> None:
    report = generate_report(
        tmp_path,
        first_token_p99_s=None,
        token_s=None,
        batch_tokens_per_s=None,
        compile_s=None,
        cache_bytes_per_token=None,
        decode_steps=None,
    )
    latency, speed = report.generation
    assert latency.rows[0][6] == "–" and latency.rows[0][7] == "–"
    assert speed.rows[0][4] == "–" and speed.rows[0][5] == "–" and speed.rows[0][6] == "–"
    assert speed.rows[0][-1] == "–"
    assert "–" in shown(report) and "| – |" in written(report, markdown)


def test_show_md_and_html_carry_both_tables(step: Report) -> None:
    text = shown(step, width=200)
    assert GENERATION_LATENCY_TITLE in text and GENERATION_SPEED_TITLE in text
    rows = terminal_rows(text, "GPT-2 mini")
    assert [
        "GPT-2 mini",
        "PyTorch",
        "8",
        "128 + 16",
        "12.30",
        "13.10",
        "14.20",
        "4.000",
        "4.900",
        "5.100",
    ] in rows
    assert PER_TOKEN_NOTE in flat(text)
    md = written(step, markdown)
    section = md_section(md, GENERATION_SPEED_TITLE)
    assert "| GPT-2 mini | Keras/JAX | 8 | 200 | 1,600 | 4.000 | 8.0 KiB |" in section
    html = written(step, htmlreport)
    cells = html_table(html, GENERATION_LATENCY_TITLE)
    assert cells[1][:5] == ["GPT-2 mini", "PyTorch", "8", "128 + 16", "12.30"]
    assert "<h2>Generation</h2>" in html and "latency per token (median over calls, by token index)" in html


def test_the_chart_draws_the_latency_curve_per_token(step: Report) -> None:
    curves = step.generation_curves
    assert [(c.framework, c.per_token) for c in curves] == [("torch", True), ("keras-jax", True)]
    torch = curves[0]
    assert torch.xs == tuple(range(2, 17)) and torch.ys == figures("torch", per_token=True).latency_curve


def test_the_chart_draws_each_runs_calls_under_window_timing(window: Report) -> None:
    curves = window.generation_curves
    assert [c.label for c in curves] == [
        "PyTorch · run 1",
        "PyTorch · run 2",
        "Keras/JAX · run 1",
        "Keras/JAX · run 2",
    ]
    run = next(r for r in window.runs if r.framework == "torch" and r.index == 1)
    assert len(run.generation) == 12  # 3 epochs of 4 calls
    first = curves[0]
    assert first.xs == tuple(range(1, 13)) and first.first == 4  # the first epoch's calls, drawn apart
    assert first.ys == tuple(s.decode_s / 15 for s in run.generation)
    html = written(window, htmlreport)
    assert "latency per token (each generate call&#x27;s mean)" in html
    assert "generate call in the run (dashed line: the first epoch&#x27;s end)" in html


def test_step_latencies_skip_a_call_without_later_tokens() -> None:
    steps = [
        TokenStep(1, 1, 8, 128, 16, 0.5, 1.5),
        TokenStep(2, 1, 8, 128, 16, 0.01, 0.0),  # no decode time: no token latency
        TokenStep(2, 2, 8, 128, 16, 0.01, 0.06),
    ]
    assert step_latencies(steps) == ((1, 3), (0.1, 0.004), 1)
    assert generation_curves([], []) == []


def test_csv_has_the_generation_columns_only_when_generating(window: Report, training: Report) -> None:
    rows = list(csv.DictReader(io.StringIO(written(window, csvfile))))
    torch = rows[0]
    assert torch["first_token_p50_s"] == "0.0123" and torch["token_p99_s"] == "0.0051"
    assert torch["generate_batch_tokens_per_s"] == "2000.0" and torch["generate_tokens_per_s"] == "250.0"
    assert torch["compile_s"] == "3.2" and torch["cache_bytes_per_token"] == "8192"
    assert torch["decode_steps"] == "15" and rows[1]["decode_steps"] == "16"
    assert torch["generated_tokens"] == "16" and torch["token_per_token"] == "False"
    assert torch["peak_memory_bytes"] != ""
    header = written(training, csvfile).splitlines()[0].split(",")
    assert not set(csvfile.GENERATION_COLUMNS) & set(header)


def test_json_carries_the_figures(window: Report, training: Report) -> None:
    data = json.loads(written(window, jsonfile))
    assert data["rows"][0]["generation"]["batch_tokens_per_s"] == 2000.0
    assert all("generation" not in row for row in json.loads(written(training, jsonfile))["rows"])


def test_trackers_follow_tokens_per_s_and_the_latencies(window: Report, training: Report) -> None:
    got = {(m.benchmark, m.measure): m for m in trackers.metrics(window)}
    rate = next(m for (b, measure), m in got.items() if measure == trackers.GENERATE_RATE and "torch" in b)
    assert rate.value == 2000.0 and rate.bigger_is_better
    first = next(m for (b, measure), m in got.items() if measure == trackers.FIRST_TOKEN and "torch" in b)
    assert first.value == 0.0123 and not first.bigger_is_better
    assert any(measure == trackers.TOKEN_LATENCY for _, measure in got)
    assert not any(m.measure == trackers.GENERATE_RATE for m in trackers.metrics(training))


def test_the_sessions_screen_says_each_cells_generation(window: Report) -> None:
    out = io.StringIO()
    from rich.console import Console

    Console(file=out, width=200).print(terminal.summary_view(window, 200))
    text = out.getvalue()
    assert (
        "GPT-2 mini · PyTorch generate · 128 + 16 tokens, batch 8: first token 12.30 ms, 4.000 ms a token"
        in text
    )
    assert "2,000 tok/s" in text
    assert generation_line(None) == ""


def test_the_plan_line_says_the_prompt_and_new_tokens(window: Report) -> None:
    plan = dict(window.environment)["Plan"]
    assert "task generate (greedy, key/value cache), prompt 128 tokens, 16 new tokens" in plan
    assert "sequence length" not in plan


def test_a_session_that_does_not_generate_shows_none_of_it(training: Report) -> None:
    assert training.generation == [] and training.generation_curves == []
    assert all(not r.generation for r in training.runs)
    assert "Generation" not in shown(training) and "Generation" not in written(training, markdown)
    assert "<h2>Generation</h2>" not in written(training, htmlreport)


def made_generate(root: Path, name: str, new_tokens: int = 16, token_s: float = 0.004) -> Path:
    return make_session(
        root,
        name=name,
        folder=name,
        frameworks=FRAMEWORKS,
        models=("gpt2_mini",),
        runs=2,
        epochs=2,
        steps=3,
        batch_size=8,
        generate={
            "prompt_len": 32,
            "new_tokens": new_tokens,
            "token_s": {"torch": token_s, "keras-jax": token_s},
        },
    )


def test_compare_names_a_different_prompt_or_new_tokens(tmp_path: Path) -> None:
    cmp = compare_sessions(made_generate(tmp_path, "a", 16), made_generate(tmp_path, "b", 8))
    assert "--new-tokens: 16 vs 8" in cmp.differences
    assert not any(d.startswith("--prompt-len") for d in cmp.differences)


def test_compare_of_generate_sessions_is_on_time_per_token_after_the_first(tmp_path: Path) -> None:
    cmp = compare_sessions(
        made_generate(tmp_path, "a", token_s=0.004), made_generate(tmp_path, "b", token_s=0.005)
    )
    torch = next(r for r in cmp.rows if r.framework == "torch")
    assert torch.basis == "tokens" and torch.ratio is not None
    assert torch.ratio.value == pytest.approx(1.25, rel=0.03)  # B's tokens take a quarter longer
    assert torch.time_a == pytest.approx(0.004 / 8, rel=0.03)  # the batch's: 8 sequences a call
    text = io.StringIO()
    from rich.console import Console

    terminal.print_comparison(cmp, Console(file=text, width=200))
    assert "A (ms), B (ms): the batch's time per token after the first (--task generate)" in flat(
        text.getvalue()
    )


def test_the_verdict_note_and_the_study_tables_speak_of_tokens_after_the_first(window: Report) -> None:
    assert window.answer.note == GENERATE_VERDICT_NOTE
    # No tokens/s of whole windows (the prompt's tokens counted as made): the generation tables have them.
    assert not window.wording.tokens
    assert not any("tokens/s" in t.title for t in window.figure_tables)
    assert "Tok/s" not in shown(window).split(GENERATION_LATENCY_TITLE)[0]


def test_a_narrow_terminal_cuts_each_table_in_two_with_its_row_names(window: Report) -> None:
    text = shown(window, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert f"{GENERATION_SPEED_TITLE} (1 of 2)" in text and f"{GENERATION_SPEED_TITLE} (2 of 2)" in text
    first, second = (
        terminal_rows(text.split(f"{GENERATION_SPEED_TITLE} ({k} of 2)")[1], "GPT-2 mini") for k in (1, 2)
    )
    assert first[0][:5] == ["GPT-2 mini", "PyTorch", "8", "250", "2,000"]
    assert second[0][:3] == ["GPT-2 mini", "PyTorch", "8"] and second[0][-1] == "15"
    assert f"{GENERATION_SPEED_TITLE} (1 of 2)" not in shown(window, width=200)


@pytest.mark.parametrize("timing", ["window", "step"])
def test_every_output_of_a_generate_session_as_before(
    timing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show, md, csv (both), json and html of made generate sessions, byte for byte (tests/golden/generate-*;
    ``BENCHTUI_GOLDEN_UPDATE=1`` rewrites them, as for the others)."""
    name = f"generate-{timing}"
    path = make_session(
        tmp_path,
        name=name,
        folder=name,
        frameworks=FRAMEWORKS,
        models=("gpt2_mini",),
        runs=2,
        epochs=3,
        steps=4,
        batch_size=8,
        timing=timing,
        generate={"prompt_len": 128, "new_tokens": 16, "token_s": {"torch": 0.004, "keras-jax": 0.005}},
    )
    check_golden(name, golden_outputs(name, path, capsys, tmp_path))


def test_how_each_side_ran_names_its_generate_engine_and_no_optimizer() -> None:
    settings = {"compile": "eager", "task": "generate", "optimizer": "sgd (lr 0.01)", "loss": "softmax"}
    engine = {"engine": "transformers GPT2LMHeadModel.generate, greedy, static cache"}
    (line,) = how_it_ran({"torch": {"settings": {**settings, "generation": engine}}})
    assert (
        line.endswith("eager; transformers GPT2LMHeadModel.generate, greedy, static cache")
        and "sgd" not in line
    )
    (trained,) = how_it_ran({"torch": {"settings": {**settings, "task": "train"}}})
    assert trained == "PyTorch: eager; sgd (lr 0.01), softmax"


def test_a_generate_sweep_draws_each_points_runs_apart(tmp_path: Path) -> None:
    path = make_session(
        tmp_path,
        frameworks=FRAMEWORKS,
        models=("gpt2_mini",),
        sweep={"batch": ["1", "8"]},
        batch_size=8,
        runs=2,
        epochs=2,
        steps=3,
        generate={"prompt_len": 32, "new_tokens": 8},
    )
    report = build_report(folded(path))
    latency, _ = report.generation
    assert (
        latency.header[2] == "Point" and [row[2] for row in latency.rows] == ["batch 1"] * 2 + ["batch 8"] * 2
    )
    curves = report.generation_curves
    assert [(c.point, c.label) for c in curves if c.framework == "torch"] == [
        ("batch 1", "PyTorch · run 1"),
        ("batch 1", "PyTorch · run 2"),
        ("batch 8", "PyTorch · run 1"),
        ("batch 8", "PyTorch · run 2"),
    ]
    assert all(len(c.xs) == 6 for c in curves)  # each run's own 2 epochs of 3 calls, not every point's
    html = written(report, htmlreport)
    assert (
        "GPT-2 mini · batch 1: latency per token" in html
        and "GPT-2 mini · batch 8: latency per token" in html
    )

"""A generate sweep (issue 34; ``--task generate --sweep batch=1,8``): its fastest point, the selection bias and
what each setting buys rest on the batch's tokens/s after the first token (the generate verdict's basis,
``generation_figures.compare``), never on sequences/s of whole windows; its curve tables show time to first
token, token latency and tokens/s after the first."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchtui.core.model import analysis, generation_figures, sweeps
from benchtui.core.model.cell import CellSummary
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.stats import grouped_mean
from benchtui.core.model.status import RunStatus
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting import htmlreport, markdown
from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.model.sweep import (
    BEST_NOTE,
    GENERATE_BEST_NOTE,
    GENERATE_CURVE_NOTE,
    GENERATE_GAINS_NOTE,
    best_note,
    curve_tables,
    gains_table,
    generate_chart,
    generate_side_rate,
)
from benchtui.core.store.session import load_session
from reporttext import flat, shown, written
from sessionfactory import make_session

FRAMEWORKS = ("torch", "keras-jax")
ONE, EIGHT = Point.from_key("batch=1"), Point.from_key("batch=8")
#: Batch 8 three times slower a step than its batch**0.8 (its decode: fewer tokens/s after the first than at
#: batch 1), and a first token of 0.2 s at every point (a whole window is mostly the first token's calls, so
#: batch 8 makes more sequences per second): the two bases choose different points.
SLOW_EIGHT = {(fw, "batch=8"): 3.0 for fw in FRAMEWORKS}
LONG_FIRST = {fw: 0.2 for fw in FRAMEWORKS}


def _session(tmp_path: Path, **kwargs: Any) -> SessionModel:
    options: dict[str, Any] = {
        "frameworks": FRAMEWORKS,
        "models": ("gpt2_mini",),
        "sweep": {"batch": ["1", "8"]},
        "batch_size": 8,
        "runs": 3,
        "epochs": 3,
        "steps": 4,
        "generate": {"prompt_len": 32, "new_tokens": 8},
        **kwargs,
    }
    return load_session(make_session(tmp_path, **options)).model


def _ok(model: SessionModel, fw: str, point: Point) -> list[Any]:
    return [r for r in model.cell_runs(fw, "gpt2_mini", point=point) if r.status is RunStatus.OK]


def _row(model: SessionModel, fw: str, point: Point) -> CellSummary:
    return next(
        r for r in model.session_summary().rows if (r.framework, r.model, r.point) == (fw, "gpt2_mini", point)
    )


def test_the_fastest_point_of_a_generate_sweep_is_the_one_of_most_tokens_per_s(tmp_path: Path) -> None:
    model = _session(
        tmp_path,
        point_speed=SLOW_EIGHT,
        generate={"prompt_len": 32, "new_tokens": 8, "first_token_s": LONG_FIRST},
    )
    for fw in FRAMEWORKS:
        one, eight = _ok(model, fw, ONE), _ok(model, fw, EIGHT)
        # The two bases disagree here: sequences/s favours batch 8, tokens/s after the first batch 1.
        assert (analysis.throughput(eight) or 0) > (analysis.throughput(one) or 0)
        rates = [_row(model, fw, p).figure("generation.batch_tokens_per_s") for p in (ONE, EIGHT)]
        assert rates[0] > rates[1]
        found = sweeps.best_point(model, fw, "gpt2_mini")
        assert found is not None
        best, values = found
        assert best.point == ONE and best.points == 2
        assert best.images_per_s == analysis.throughput(one)  # its sequences/s, as the key says
        # The choice's values: each run's steady steps' seconds per batch token after the first.
        assert values == sweeps.values_of([one, eight], generate=True)
        assert [len(point) for point in values] == [3, 3]
        assert math.isclose(1 / grouped_mean([list(g) for g in values[0]]), rates[0], rel_tol=1e-9)
        assert best.bias is not None  # 3 runs a point: the choice's bias is measured, on tokens/s
    answer = model.session_summary().sweep
    assert answer is not None
    (verdict,) = answer.best
    assert (verdict.base.point, verdict.other.point) == (ONE, ONE)
    assert verdict.verdict.basis == "tokens" and "more tokens/s after the first token" in verdict.text
    assert "PyTorch at batch 1" in verdict.text or "Keras/JAX at batch 1" in verdict.text


def test_best_vs_best_bias_and_ratio_are_on_the_verdict_s_basis(tmp_path: Path) -> None:
    model = _session(tmp_path, generate={"prompt_len": 32, "new_tokens": 8, "token_s": {"torch": 0.004}})
    answer = model.session_summary().sweep
    assert answer is not None
    (verdict,) = answer.best
    base = _ok(model, verdict.base.framework, verdict.base.point)
    other = _ok(model, verdict.other.framework, verdict.other.point)
    ratio = generation_figures.compare(base, other)
    assert ratio is not None and verdict.verdict.ratio == ratio.value
    # The per-run per-step values behind the choice are those the verdict resamples.
    for runs in (base, other):
        values = sweeps.values_of([runs], generate=True)[0]
        assert sorted(sum(values, ())) == sorted(
            s.decode_s / ((s.new_tokens - 1) * s.sequences)
            for r in runs
            for s in generation_figures.steady_steps([r])[0]
        )
    assert verdict.bias is not None and "choosing the best of 2 points a side" in verdict.text


def test_what_a_batch_buys_a_generate_sweep_is_its_tokens_per_s_after_the_first(tmp_path: Path) -> None:
    model = _session(
        tmp_path,
        point_speed=SLOW_EIGHT,
        generate={"prompt_len": 32, "new_tokens": 8, "first_token_s": LONG_FIRST},
    )
    answer = model.session_summary().sweep
    assert answer is not None
    for gain in answer.gains:
        rates = [_row(model, gain.framework, p).figure("generation.batch_tokens_per_s") for p in (ONE, EIGHT)]
        ratio = generation_figures.compare(_ok(model, gain.framework, ONE), _ok(model, gain.framework, EIGHT))
        assert ratio is not None and gain.factor is not None
        assert math.isclose(gain.factor, 1 / ratio.value, rel_tol=1e-9)
        assert math.isclose(gain.factor, rates[1] / rates[0], rel_tol=1e-6)
        # Not the sequences/s ratio (the whole windows hold the first token's own call).
        seqs = analysis.throughput(_ok(model, gain.framework, EIGHT)) or 0
        seqs /= analysis.throughput(_ok(model, gain.framework, ONE)) or 1
        assert gain.factor < 1 < seqs  # batch 8: fewer tokens/s after the first, more sequences/s
        assert gain.text.startswith("batch 8: ") and "tokens/s after the first token" in gain.text
    table, _ = gains_table(answer.gains, FRAMEWORKS, generate=True)
    assert table is not None and table.note == GENERATE_GAINS_NOTE


def test_a_generate_sweep_s_curves_show_first_token_token_latency_and_tokens_per_s(tmp_path: Path) -> None:
    model = _session(tmp_path, timing="step")
    summary = model.session_summary()
    rows = summary.rows
    tables, charts = curve_tables(rows, [("batch", ("1", "8"))], FRAMEWORKS, {})
    (table,) = tables
    assert table.title == (
        "GPT-2 mini: time to first token, token latency and the batch's tokens/s after the first token "
        "against batch"
    )
    assert table.header == [
        "Batch",
        "First token p50 (ms) · PyTorch",
        "Token p50 (ms) · PyTorch",
        "Tok/s after 1st · PyTorch",
        "First token p50 (ms) · Keras/JAX",
        "Token p50 (ms) · Keras/JAX",
        "Tok/s after 1st · Keras/JAX",
    ]
    assert table.note == GENERATE_CURVE_NOTE
    assert not any("Sequences" in h or "Seq" in h for h in table.header)
    for line, point in zip(table.rows, (ONE, EIGHT), strict=True):
        for i, fw in enumerate(FRAMEWORKS):
            gen = _row(model, fw, point).generation
            assert gen is not None and gen.first_token_s and gen.token_s and gen.batch_tokens_per_s
            first, token, rate = line[1 + 3 * i : 4 + 3 * i]
            assert math.isclose(float(first), gen.first_token_s * 1e3, rel_tol=1e-2)
            assert math.isclose(float(token), gen.token_s * 1e3, rel_tol=1e-2)
            assert math.isclose(float(rate.replace(",", "")), gen.batch_tokens_per_s, rel_tol=1e-2)
    (chart,) = charts
    assert generate_chart(chart)
    for s in chart.series:
        assert set(s.figures) == {
            "generation.first_token_s",
            "generation.token_s",
            "generation.batch_tokens_per_s",
        }
        gens = [_row(model, s.framework, p).generation for p in (ONE, EIGHT)]
        assert [v for v, _, _ in s.figures["generation.batch_tokens_per_s"]] == [
            g.batch_tokens_per_s if g is not None else None for g in gens
        ]


def test_the_views_of_a_generate_sweep(tmp_path: Path) -> None:
    loaded = load_session(
        make_session(
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
    )
    report = build_report(loaded)
    text = flat(shown(report))
    assert (
        "GPT-2 mini: time to first token, token latency and the batch's tokens/s after the first token against batch"
        in text
    )
    assert "sequences/s against batch" not in text
    assert "What each setting buys" in text and GENERATE_GAINS_NOTE in text
    md = written(report, markdown)
    assert (
        "## GPT-2 mini: time to first token, token latency and the batch's tokens/s after the first token"
        in md
    )
    assert "| Batch | First token p50 (ms) · PyTorch |" in md
    html = written(report, htmlreport)
    assert "time to first token, token latency and the batch&#x27;s tokens/s after the first token" in html
    rows = report.summary.rows
    assert best_note(rows) == GENERATE_BEST_NOTE
    sweep = report.summary.sweep
    assert sweep is not None
    for b in sweep.best:
        for side in (b.base, b.other):
            said = generate_side_rate(rows, b.model, side)
            row = next(r for r in rows if (r.framework, r.point) == (side.framework, side.point))
            assert row.generation is not None and row.generation.batch_tokens_per_s is not None
            assert said == f"{row.generation.batch_tokens_per_s:,.0f} tok/s after the first token"
            # ... and every view says it beside the chosen settings, never sequences/s
            assert f"(fastest of 2 points, {said})" in text and f"(fastest of 2 points, {said})" in md
    assert "fastest of 2 points" in text and "sequences/s)" not in text
    assert GENERATE_BEST_NOTE in text and markdown.md_escape(GENERATE_BEST_NOTE) in md
    # the html charts a generate sweep's own figures (not an empty sequences/s chart)
    assert "GPT-2 mini: the batch&#x27;s tokens/s after the first token against batch" in html
    assert "GPT-2 mini: time to first token p50 against batch" in html
    assert "sequences/s against batch" not in html


def test_a_training_sweep_is_as_before(tmp_path: Path) -> None:
    model = load_session(
        make_session(tmp_path, models=("gpt2_mini",), sweep={"batch": ["4", "8"]}, batch_size=4, runs=2)
    ).model
    rows = model.session_summary().rows
    assert best_note(rows) == BEST_NOTE and not sweeps.generating(model)
    (table,), (chart,) = curve_tables(rows, [("batch", ("4", "8"))], ("torch", "tensorflow"), {})
    assert not generate_chart(chart) and "Sequences/s" in " ".join(table.header)
    assert all(r.figure("generation.batch_tokens_per_s") is None for r in rows)
    for fw in ("torch", "tensorflow"):
        found = sweeps.best_point(model, fw, "gpt2_mini")
        assert found is not None
        speeds = [analysis.throughput(_ok(model, fw, Point.from_key(f"batch={b}"))) for b in (4, 8)]
        assert found[0].images_per_s == max(s for s in speeds if s is not None)
        assert generate_side_rate(rows, "gpt2_mini", found[0]) is None

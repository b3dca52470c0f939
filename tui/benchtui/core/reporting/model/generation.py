"""A generate session (issue 34): its figures as tables (time to first token and token latency; tokens/s,
compile, cache and memory) and its latency-per-token curves for the html chart; nothing for other sessions."""

from __future__ import annotations

from collections.abc import Sequence

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, GenerationFigures, SessionSummary
from benchtui.core.model.generation import TokenStep
from benchtui.core.model.parity import marked
from benchtui.core.plan.sweep import Point
from benchtui.core.reporting.model.columns import flagged_models
from benchtui.core.reporting.model.figures import point_column, point_text
from benchtui.core.reporting.model.types import GenerationCurve, Table

GENERATION_LATENCY_TITLE = "Generation: time to first token and token latency (ms)"
GENERATION_SPEED_TITLE = "Generation: tokens/s after the first token, compile and memory"

#: Under the latency table: what its percentiles are of.
GENERATION_LATENCY_NOTE = (
    "After the first epoch (each side's trace or compile of its decode loop), over every run that ended "
    "well: the first token is the prefill and the first decode step; a token is each one after it."
)
#: How the token latencies were timed: each token's own (--timing step), or each step's mean.
PER_TOKEN_NOTE = "Token latency: each token's own, stamped after waiting for the device (--timing step)."
PER_STEP_NOTE = (
    "Token latency: each generate call's mean over its tokens after the first (--timing window), so the "
    "percentiles are over calls, not tokens; --timing step times every token."
)
GENERATION_SPEED_NOTE = (
    "Tokens/s: the tokens after the first per second of decoding, of one sequence and of the batch (the "
    "verdict's figure). Compile: the first epoch's time less a steady one's. Cache: one sequence's "
    "key/value cache per token. Tokens and decode steps: per sequence and per generate call as counted."
)


def ms(value: float | None) -> str:
    """Seconds as milliseconds, '–' for none."""
    return fmt.milliseconds(value)


def count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def cache_text(value: int | None) -> str:
    return "–" if value is None else fmt.bytes_(value)


def generation_rows(summary: SessionSummary) -> list[CellSummary]:
    """The rows of a generate session that carry generation figures, in the summary's order."""
    return [r for r in summary.rows if r.generation is not None]


def _names(row: CellSummary, flagged: set[str], points: bool) -> list[str]:
    gen = row.generation
    assert gen is not None
    return [
        marked(model_label(row.model), row.model in flagged),
        framework_label(row.framework),
        *([point_text(row.point)] if points else []),
        str(gen.sequences),
        f"{gen.prompt_len} + {gen.new_tokens}",
    ]


def generation_tables(summary: SessionSummary) -> list[Table]:
    """A generate session's two tables (latency; throughput, compile and memory); [] for any other."""
    rows = generation_rows(summary)
    if not rows:
        return []
    flagged = flagged_models(summary)
    points = point_column(summary)
    names = ["Model", "Framework", *(["Point"] if points else []), "Batch", "Prompt + new"]
    latency_header = [
        *names,
        "First token p50",
        "First token p90",
        "First token p99",
        "Token p50",
        "Token p90",
        "Token p99",
    ]
    speed_header = [
        *names[:-1],  # the prompt and new tokens are the latency table's
        "Tok/s per seq",
        "Tok/s batch",
        "Compile (s)",
        "Cache per token",
        "Peak memory",
        "Tokens",
        "Decode steps",
    ]
    per_sequence = fmt.rate_column(r.generation.tokens_per_s for r in rows if r.generation)
    batch = fmt.rate_column(r.generation.batch_tokens_per_s for r in rows if r.generation)
    compile_s = fmt.seconds_column(r.generation.compile_s for r in rows if r.generation)
    latency_rows, speed_rows = [], []
    for row in rows:
        gen = row.generation
        assert gen is not None
        head = _names(row, flagged, points)
        latency_rows.append(
            head
            + [
                ms(gen.first_token_s),
                ms(gen.first_token_p90_s),
                ms(gen.first_token_p99_s),
                ms(gen.token_s),
                ms(gen.token_p90_s),
                ms(gen.token_p99_s),
            ]
        )
        speed_rows.append(
            head[:-1]
            + [
                per_sequence(gen.tokens_per_s),
                batch(gen.batch_tokens_per_s),
                compile_s(gen.compile_s),
                cache_text(gen.cache_bytes_per_token),
                "–" if row.peak_memory_bytes is None else fmt.bytes_(row.peak_memory_bytes),
                count(gen.tokens),
                count(gen.decode_steps),
            ]
        )
    align = ["l"] * (len(names) - 2) + ["r", "r"]
    timed = {r.generation.per_token for r in rows if r.generation}
    note = GENERATION_LATENCY_NOTE + "".join(
        " " + text for flag, text in ((True, PER_TOKEN_NOTE), (False, PER_STEP_NOTE)) if flag in timed
    )
    return [
        Table(GENERATION_LATENCY_TITLE, latency_header, latency_rows, align + ["r"] * 6, note),
        Table(
            GENERATION_SPEED_TITLE, speed_header, speed_rows, align[:-1] + ["r"] * 7, GENERATION_SPEED_NOTE
        ),
    ]


def step_latencies(steps: Sequence[TokenStep]) -> tuple[tuple[int, ...], tuple[float, ...], int]:
    """A run's generate calls as (call numbers, mean token latency, calls of its first epoch): calls
    without a token after the first are left out."""
    xs, ys = [], []
    first_epoch = min((s.epoch for s in steps), default=0)
    first = 0
    for i, step in enumerate(steps, start=1):
        latency = step.token_latency_s
        if latency is None:
            continue
        xs.append(i)
        ys.append(latency)
        first += step.epoch == first_epoch
    return tuple(xs), tuple(ys), first


def generation_curves(
    rows: Sequence[CellSummary], runs: Sequence[tuple[str, str, Point, int, Sequence[TokenStep]]]
) -> list[GenerationCurve]:
    """The chart's lines: per cell with per-token figures its ``latency_curve``; else each of its runs'
    calls (``runs``: framework, model, sweep point, run number, its steps)."""
    out: list[GenerationCurve] = []
    for row in rows:
        gen: GenerationFigures | None = row.generation
        if gen is None:
            continue
        label, at = framework_label(row.framework), row.point.label
        if gen.per_token and gen.latency_curve:
            xs = tuple(range(2, 2 + len(gen.latency_curve)))
            curve = GenerationCurve(
                row.model, row.framework, label, True, xs, tuple(gen.latency_curve), point=at
            )
            out.append(curve)
            continue
        for framework, model, point, index, steps in runs:
            if (framework, model, point) == (row.framework, row.model, row.point):
                xs, ys, first = step_latencies(steps)
                if xs:
                    name = f"{label} · run {index}"
                    out.append(GenerationCurve(model, framework, name, False, xs, ys, first, index, at))
    return out


def generation_line(gen: GenerationFigures | None) -> str:
    """A cell's generation in one line (the sessions screen, the headless end): '128 + 128 tokens, batch 8:
    first token 12.3 ms, 4.56 ms a token, 1,754 tok/s'; '' where the cell did not generate."""
    if gen is None:
        return ""
    parts = [f"first token {ms(gen.first_token_s)} ms", f"{ms(gen.token_s)} ms a token"]
    if gen.batch_tokens_per_s is not None:
        parts.append(f"{fmt.rate(gen.batch_tokens_per_s)} tok/s")
    return f"{gen.prompt_len} + {gen.new_tokens} tokens, batch {gen.sequences}: " + ", ".join(parts)

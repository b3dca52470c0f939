"""The study's figures as columns, and the words of a session's samples (images, sequences, samples)."""

from __future__ import annotations

from collections.abc import Sequence

from benchtui.core import fmt
from benchtui.core.fmt import milliseconds
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.model.status import CautionKind
from benchtui.core.reporting.model.types import Column, Wording

#: The study's figures, in its order: the one list every view takes its columns from.
STUDY_COLUMNS: tuple[Column, ...] = (
    Column("mean_epoch_s", "Mean epoch time (s)", "Mean epoch", "Epoch\nmean", "s"),
    Column("first_epoch_s", "First epoch (s)", "First epoch", "Epoch\nfirst", "s"),
    Column(
        "mean_epoch_excl_first_s", "Mean epoch time excluding the first (s)", "Excl. first", "Excl.\n1st", "s"
    ),
    Column("build_s", "Build time (s): construct, move to device, compile", "Build", "Build", "s"),
    Column(
        "images_per_s",
        "Throughput (images/s, excluding the first epoch)",
        "Images/s",
        "Img/s",
        "images/s",
        fmt.rate,
    ),
)


#: The study's four timings (seconds), side by side.
TIMING_COLUMNS = tuple(c for c in STUDY_COLUMNS if c.unit == "s")


#: Token models: throughput in tokens (samples/s times tokens per sample).
TOKENS_COLUMN = Column(
    "tokens_per_s",
    "Throughput (tokens/s, excluding the first epoch)",
    "Tokens/s",
    "Tok/s",
    "tokens/s",
    fmt.rate,
)


#: Inference: latency per batch after warm-up, as percentiles.
LATENCY_COLUMNS: tuple[Column, ...] = tuple(
    Column(f"latency_{p}_s", f"Latency per batch, {p} (ms)", p, f"{p}\nms", "ms", milliseconds)
    for p in ("p50", "p90", "p99")
)


def wording(rows: Sequence[CellSummary]) -> Wording:
    """The words for a session's rows (summary rows: each has ``kind`` and ``task``)."""
    kinds = {str(r.kind or "image") for r in rows} or {"image"}
    inference = any(r.task == "inference" for r in rows)
    if kinds == {"image"}:
        return Wording(inference=inference)
    if kinds == {"tokens"}:
        # Generate (issue 34): no tokens/s of whole windows (the prompt's tokens counted as made, the first
        # token's own call in the time); its tokens/s after the first token are the generation table's.
        generate = any(r.task == "generate" for r in rows)
        return Wording("sequences", "sequence", not generate, inference)
    # Float tensors (a user's own model, a watched command): samples; tokens/s only beside a token model.
    return Wording("samples", "sample", "tokens" in kinds, inference)


def study_columns(words: Wording) -> tuple[Column, ...]:
    """The study's figures in a session's words: images/s becomes sequences/s or samples/s, tokens/s added."""
    if words.plural == "images" and not words.tokens:
        return STUDY_COLUMNS
    throughput = Column(
        "images_per_s",
        f"Throughput ({words.plural}/s, excluding the first epoch)",
        f"{words.plural.capitalize()}/s",
        words.narrow,
        f"{words.plural}/s",
        fmt.rate,
    )
    return (*TIMING_COLUMNS, throughput) + ((TOKENS_COLUMN,) if words.tokens else ())


def flagged_models(summary: SessionSummary) -> set[str]:
    """The models whose frameworks do not build the same network (the summary's parity)."""
    return {p.model for p in summary.parity if p.flagged}


def row_flagged(row: CellSummary) -> bool:
    """Whether a summary row carries the parity caution (its model's frameworks build different networks)."""
    return any(str(w.get("kind")) == CautionKind.ARCHITECTURE for w in row.warnings or [])


#: A generate sweep's curves (issue 34): the first token's latency and each later token's (medians, ms), and
#: the batch's tokens/s after the first token (the verdict's figure), read from each cell's
#: ``GenerationFigures`` (``CellSummary.figure('generation.<field>')``).
GENERATE_CURVE_COLUMNS: tuple[Column, ...] = (
    Column(
        "generation.first_token_s",
        "Time to first token, p50 (ms)",
        "First token p50",
        "1st tok\np50 ms",
        "ms",
        milliseconds,
    ),
    Column(
        "generation.token_s",
        "Token latency after the first, p50 (ms)",
        "Token p50",
        "Token\np50 ms",
        "ms",
        milliseconds,
    ),
    Column(
        "generation.batch_tokens_per_s",
        "The batch's tokens/s after the first token",
        "Tok/s after 1st",
        "Tok/s\n>1st",
        "tokens/s",
        fmt.rate,
    ),
)

"""Each cell's training loss in words, first epoch to last: the proof that what was timed trained."""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary
from benchtui.core.model.runs import loss_word

LOSS_TITLE = "Training loss, first → last epoch (mean over the runs that trained)"


def loss_text(value: float | None) -> str:
    """A loss as the views show it: 4 significant figures, or "NaN" / "inf" / "-inf"; "–" for none."""
    if value is None:
        return "–"
    return f"{value:.4g}" if math.isfinite(value) else loss_word(value)


def loss_lines(rows: Sequence[CellSummary]) -> list[str]:
    """A line per cell whose runs sent a loss ('ResNet50 · PyTorch: 2.303 → 1.45'), a diverged cell's
    with its status; none at all when no run sent one (a session before issue 36 reads as before)."""
    out = []
    for row in rows:
        if row.loss_first is None and row.loss_last is None:
            continue
        where = model_label(row.model) + (f" · {row.point.label}" if row.point else "")
        line = f"{where} · {framework_label(row.framework)}: {loss_text(row.loss_first)} → {loss_text(row.loss_last)}"
        if row.status == "diverged":
            line += " (diverged)"
        out.append(line)
    return [LOSS_TITLE + ":", *(f"  {line}" for line in out)] if out else []

"""Rich renderables for the command line: framework ratios and cautions under a session's summary table."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from benchtui.core.model.analysis import framework_label, model_label


def ratio_table(ratios: list[dict[str, Any]]) -> Table | None:
    """'PyTorch 1.23× faster than tf.keras (95% CI 1.18–1.29)' per model; None when nothing to compare."""
    if not ratios:
        return None
    table = Table(title="Frameworks compared", title_justify="left", header_style="bold")
    table.add_column("Model")
    table.add_column("Result")
    table.add_column("From")
    for r in ratios:
        style = "dim" if r.get("significant") is False else "bold"
        table.add_row(model_label(r["model"]), Text(r["text"], style=style), r["basis_label"])
    return table


def cell_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """'Model · Framework: caution' for every caution in the summary rows."""
    return [
        f"{model_label(row['model'])} · {framework_label(row['framework'])}: {w['message']}"
        for row in rows
        for w in row.get("warnings") or []
    ]

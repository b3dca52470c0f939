"""Why one framework is slower: the profile's breakdown per model (``--profile``)."""

from __future__ import annotations

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import SessionSummary
from benchtui.core.model.parity import marked
from benchtui.core.model.why import WhyTable, breakdown, top_ops
from benchtui.core.reporting.model.columns import flagged_models
from benchtui.core.reporting.model.notes import WHY_NOTE, WHY_TOP_NOTE
from benchtui.core.reporting.model.types import Table, Why


def why_views(summary: SessionSummary) -> list[Why]:
    """A ``--profile`` session, per model: each framework's step time by category with the differences,
    the sentences, each framework's profile in words, the counters, its longest ops and traces; [] otherwise."""
    flagged = flagged_models(summary)
    out = []
    for entry in summary.why:
        data = WhyTable.from_dict(fmt.clean_tree(entry.to_dict()))  # its text cleaned: the charts show it too
        if not data.sides:
            continue
        name = marked(model_label(data.model), data.model in flagged)
        header, rows = breakdown(data)
        table = Table(
            f"Why: {name}, where a step goes (ms per step)",
            header,
            rows,
            ["l"] + ["r"] * (len(header) - 1),
            WHY_NOTE,
        )
        top_header, top_rows = top_ops(data)
        top = (
            Table(
                f"Why: {name}, the longest ops",
                top_header,
                top_rows,
                ["l", "l", "l", "r", "r", "r"],
                WHY_TOP_NOTE,
            )
            if top_rows
            else None
        )
        traces = [
            (
                framework_label(side.framework),
                trace.run,
                trace.path,
                "–" if trace.bytes is None else fmt.bytes_(trace.bytes),
            )
            for side in data.sides
            for trace in side.traces
        ]
        lines = [*data.lines, data.counters, *data.notes]
        out.append(
            Why(data.model, table, [p.text for p in data.pairs], [x for x in lines if x], top, traces, data)
        )
    return out

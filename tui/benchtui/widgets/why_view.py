"""The live "why" of a profiled session (``--profile``): where each framework's step time goes for
the model being run, side by side, with the difference that explains the ratio.

The figures are ``SessionModel.why_table``'s, the same ``show`` and every export print; the table is
computed again only when a profiled run of the model ends.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from benchtui.core.fmt import clean
from benchtui.core.model import why
from benchtui.core.model.analysis import model_label
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.status import RunStatus
from benchtui.widgets.comparison import focus_model


def profiled_runs(model: SessionModel, model_id: str) -> tuple[str, ...]:
    """The runs of ``model_id`` that ended well with a profile: what the table depends on."""
    return tuple(
        run.spec.run_id
        for framework in model.plan.frameworks
        for run in model.cell_runs(framework, model_id)
        if run.status is RunStatus.OK and run.profile
    )


def why_focus(model: SessionModel) -> tuple[str | None, tuple[str, ...]]:
    """The model the view explains, and its profiled runs: the one being run if it has a profile yet,
    else the last one that has."""
    focus = focus_model(model)
    runs = profiled_runs(model, focus) if focus is not None else ()
    if runs:
        return focus, runs
    for model_id in reversed(model.plan.models):
        runs = profiled_runs(model, model_id)
        if runs:
            return model_id, runs
    return focus, ()


class WhyView(Widget):
    """Each framework's milliseconds per step by category, the difference, and the sentence.

    ``update_from(model)`` is cheap when nothing it depends on changed (the model's profiled runs
    and the counters event); the categories nobody spends time in are left out to save lines.
    """

    DEFAULT_CSS = """
    WhyView {
        height: auto;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.table: why.WhyTable | None = None
        self._key: tuple[Any, ...] | None = None
        self.waiting = ""  # what the view says before the first profile
        self.border_title = "Why"

    def update_from(self, model: SessionModel) -> None:
        model_id, runs = why_focus(model)
        if model_id is None:
            return
        key = (model_id, runs, bool(model.counters))
        if key == self._key:
            return
        self._key = key
        self.table = model.why_table(model_id) if key[1] else None
        self.waiting = (
            ""
            if self.table is not None
            else "each run's profile comes after its timed epochs: the breakdown appears when one ends"
        )
        self.border_title = f"Why · {escape(model_label(model_id))} · where a step goes, ms per step (share)"
        self.refresh(layout=True)

    def rows(self) -> tuple[list[str], list[list[str]]]:
        """The breakdown as shown: categories with time on some side, then the timed step."""
        if self.table is None:
            return [], []
        header, rows = why.breakdown(self.table)
        spent = {
            why.CATEGORY_LABELS[c]
            for c in why.CATEGORY_LABELS
            if any(side.shares.get(c, 0.0) > 0 for side in self.table.sides)
        }
        return header, [r for r in rows[:-1] if r[0] in spent] + rows[-1:]

    def texts(self) -> list[str]:
        """The sentence and notes as shown (plain text, for tests)."""
        if self.table is None:
            return [self.waiting] if self.waiting else []
        lines = [self.table.text] if self.table.text else []
        lines += list(self.table.notes) + ([self.table.counters] if self.table.counters else [])
        return [clean(line) for line in lines]

    def get_content_height(self, container, viewport, width: int) -> int:
        header, rows = self.rows()
        return (len(rows) + 2 if rows else 0) + len(self.texts())

    def render(self) -> Group:
        parts: list[Any] = []
        header, rows = self.rows()
        if rows:
            grid = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), show_edge=False, expand=False)
            for i, title in enumerate(header):
                grid.add_column(clean(title), justify="left" if i == 0 else "right", no_wrap=True)
            for k, row in enumerate(rows):
                grid.add_row(*(clean(cell) for cell in row), style="bold" if k == len(rows) - 1 else "")
            parts.append(grid)
        for k, line in enumerate(self.texts()):
            parts.append(Text(line, style="bold" if k == 0 and self.table else "dim", overflow="fold"))
        return Group(*parts)

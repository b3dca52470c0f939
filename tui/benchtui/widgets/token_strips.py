"""A generate session's live strips (issue 34): per framework, the latency of each token window of its latest
run of the model on screen, on one scale, from ``RunState.generation`` as the parent folds the ``tokens``
events (a run going on, and a replay, alike)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual.widget import Widget

from benchtui.core import fmt
from benchtui.core.model.generation import TokenStep
from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel
from benchtui.widgets.comparison import focus_model, focus_point, latest_run
from benchtui.widgets.spark import strip
from benchtui_runners import catalog

SHOW_TOKENS = 512  # the latest values kept per strip: wider than any terminal's strip


@dataclass(frozen=True)
class TokenStrip:
    """One run's token windows as drawn: under window timing each generate call's mean token latency, under
    step timing each token's own (its calls' ``token_s`` one after the other). Seconds."""

    framework: str
    run: RunState | None
    values: tuple[float, ...] = ()  # the last SHOW_TOKENS, oldest first
    per_token: bool = False
    first: int = 0  # how many of ``values`` are the first epoch's (its compile): left out of the scale
    first_token_s: float | None = None  # the latest call's time to first token
    calls: int = 0

    @property
    def median(self) -> float | None:
        steady = self.values[self.first :] or self.values
        return statistics.median(steady) if steady else None

    @property
    def value(self) -> str:
        """What the line says: the run, its median token latency and its latest time to first token."""
        if self.run is None:
            return "no run yet"
        index = f"r{self.run.spec.index}"
        if not self.values:
            return (
                f"{index} {'no token yet' if self.run.status.value == 'running' else self.run.status.value}"
            )
        first = f", first {fmt.milliseconds(self.first_token_s)} ms" if self.first_token_s is not None else ""
        return f"{index} {fmt.milliseconds(self.median)} ms/token{first}"


def token_values(steps: list[TokenStep]) -> tuple[tuple[float, ...], bool, int]:
    """A run's steps as a strip's values: (values, per token, how many of them are the first epoch's).
    Per token where every call carries its tokens' own latencies (--timing step), else a call's mean."""
    if not steps:
        return (), False, 0
    first_epoch = steps[0].epoch
    per_token = all(s.token_s for s in steps)
    # Only the latest calls that hold the SHOW_TOKENS values drawn: a long run's earlier calls are never
    # flattened at each redraw. The first epoch's values lead the run, so those left in the tail are the
    # ones drawn.
    tail: list[TokenStep] = []
    held = 0
    for s in reversed(steps):
        if held >= SHOW_TOKENS:
            break
        tail.append(s)
        held += len(s.token_s) if per_token else int(s.token_latency_s is not None)
    values: list[float] = []
    first = 0
    for s in reversed(tail):
        these = list(s.token_s) if per_token else [v for v in (s.token_latency_s,) if v is not None]
        values += these
        if s.epoch == first_epoch:
            first += len(these)
    cut = max(len(values) - SHOW_TOKENS, 0)
    return tuple(values[cut:]), per_token, max(first - cut, 0)


def token_strip(framework: str, run: RunState | None) -> TokenStrip:
    generation = run.generation if run is not None else None
    if generation is None:
        return TokenStrip(framework, run)
    values, per_token, first = token_values(generation.steps)
    latest = generation.latest()
    return TokenStrip(
        framework,
        run,
        values,
        per_token,
        first,
        latest.first_token_s if latest is not None else None,
        len(generation.steps),
    )


def _label(framework: str) -> str:
    return catalog.FRAMEWORK_LABELS.get(framework, framework)


class TokenStrips(Widget):
    """Per framework, the token latency of its latest run of the model on screen, one scale for all."""

    DEFAULT_CSS = """
    TokenStrips {
        height: auto;
        min-height: 3;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.strips: list[TokenStrip] = []
        self.ceiling: float | None = None

    def update_from(self, model: SessionModel) -> None:
        """Take the latest runs' steps from the model (copies, never its lists) and redraw."""
        model_id = focus_model(model)
        strips: list[TokenStrip] = []
        if model_id is not None:
            point = focus_point(model, model_id)
            for framework in model.plan.frameworks:
                strips.append(token_strip(framework, latest_run(model, framework, model_id, point)))
        self.strips = strips
        steady = [v for s in strips for v in (s.values[s.first :] or s.values)]
        self.ceiling = max(steady) if steady else None
        clipped = (
            any(v > self.ceiling for s in strips for v in s.values[: s.first]) if self.ceiling else False
        )
        per_token = any(s.per_token for s in strips)
        what = "each token" if per_token else "each generate call's mean"
        scale = (
            f" (0–{fmt.milliseconds(self.ceiling)} ms{', compile clipped' if clipped else ''})"
            if self.ceiling
            else ""
        )
        label = catalog.MODELS[model_id].label if model_id in catalog.MODELS else (model_id or "")
        self.border_title = f"{label} · latency per token, {what}{scale}" if label else "Latency per token"
        self.refresh(layout=True)

    def texts(self, width: int | None = None) -> list[str]:
        """The lines as plain text (tests, and a screen that is not drawn)."""
        return [t.plain for t in self._render_lines(width)]

    def _render_lines(self, width: int | None = None) -> list[Text]:
        width = max(width or self.size.width or 80, 20)
        if not self.strips:
            return [Text("No tokens yet.", style="dim")]
        label_w = max(len(_label(s.framework)) for s in self.strips) + 1
        value_w = max(len(s.value) for s in self.strips) + 1
        cols = max(width - label_w - value_w, 4)
        most = max((len(s.values) for s in self.strips), default=0)
        lines = []
        for i, s in enumerate(self.strips):
            color = fmt.color_for(s.framework, i)
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{_label(s.framework):<{label_w}}", style=f"bold {color}")
            text.append(f"{s.value:<{value_w}}", style="" if s.values else "dim")
            if s.values:
                drawn = min(cols, max(round(len(s.values) * cols / most), 1))
                text.append(strip(list(s.values), drawn, self.ceiling), style=color)
            lines.append(text)
        return lines

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self._render_lines(width))

    def render(self) -> Group:
        return Group(*self._render_lines())

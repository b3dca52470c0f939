"""A sweep session's view: throughput against the swept axis per framework, best vs best, and what each
setting buys each framework side by side (shown only for a sweep, as the scaling view is for --scaling)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import BestVerdict, SettingGain
from benchtui.core.model.sweeps import value_words
from benchtui.core.plan import sweep as sweep_mod
from benchtui.core.plan.sweep import Point

BAR_W = 8  # a bar's cells at its longest (the fastest point of the view)
EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float | None, top: float | None, width: int = BAR_W) -> str:
    """A horizontal bar of ``value`` against ``top`` (``width`` cells at ``top``), in eighths of a cell."""
    if value is None or not top or top <= 0:
        return " " * width
    eighths = round(max(min(value / top, 1.0), 0.0) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part else "")
    return f"{text:<{width}}"


def curve_axis(sweep: dict[str, list[str]]) -> str | None:
    """The axis a curve is drawn against: the first numeric one swept (batch, seq-len), else the first;
    None without a point axis (no sweep, or devices only: a scaling session)."""
    axes = [a for a, vs in sweep.items() if a != "devices" and vs]
    numeric = [a for a in axes if sweep_mod.AXES[a].numeric and len(sweep[a]) > 1]
    chosen = numeric or axes
    return chosen[0] if chosen else None


@dataclass(frozen=True)
class CurvePoint:
    """One value of the curve's axis on one line: its rate (None: no finished run yet) and what it says."""

    value: str
    rate: float | None
    text: str  # the rate as said ('41.2', or '–', or what its runs are doing)
    best: bool = False  # the framework's fastest point (best vs best's choice)
    latency: str = ""  # inference: the batch's latency, p50/p99 ms ('12.1/15.3 ms'); shown where it fits


@dataclass(frozen=True)
class CurveLine:
    """A framework's throughput against the axis, the other axes at ``rest`` (those that change something
    for it: tf.keras has one line for channels-last off and on)."""

    framework: str
    rest: Point
    points: tuple[CurvePoint, ...]
    color: str = ""

    @property
    def label(self) -> str:
        return (
            f"{framework_label(self.framework)} · {self.rest.label}"
            if self.rest
            else framework_label(self.framework)
        )


def gain_text(gain: SettingGain, short: bool = False) -> tuple[str, str]:
    """A speed-up in a cell: ('1.41× (1.35–1.47)', style); 'no effect' dim; '–' before a pair has runs."""
    if gain.no_effect:
        return "no effect", "dim"
    if gain.factor is None:
        return "–", "dim"
    text = f"{gain.factor:.2f}×"
    if gain.ci_low is not None and gain.ci_high is not None and not short:
        text += f" ({gain.ci_low:.2f}–{gain.ci_high:.2f})"
    low, high = gain.ci_low, gain.ci_high
    significant = low is not None and high is not None and (low > 1 or high < 1)
    return text, "bold" if significant else ""


def gain_rows(gains: Sequence[SettingGain], model_id: str) -> list[tuple[str, dict[str, SettingGain]]]:
    """A model's gains as rows: (the setting in words, per framework its gain), in the sweep's order."""
    rows: dict[tuple[str, str], dict[str, SettingGain]] = {}
    for g in gains:
        if g.model == model_id:
            rows.setdefault((g.axis, g.value), {})[g.framework] = g
    return [(setting_words(axis, value), by_fw) for (axis, value), by_fw in rows.items()]


def setting_words(axis: str, value: str) -> str:
    """'channels-last on', 'batch 8', 'amp-bf16' (a precision names itself), 'best settings' (--best)."""
    return "best settings" if (axis, value) == ("settings", "best") else value_words(axis, value)


class SweepView(Widget):
    """The sweep of the model on screen: a line per framework (and setting of the other axes) with its
    throughput at each value of the swept axis, a bar each on one scale, the framework's fastest in bold
    and marked ◆;
    then best vs best, and a table of what each setting buys each framework.

    ``show`` takes plain data; the drawing picks the most detailed form that fits the width (the axis's
    name, bars, rates and, for inference, latencies; shorter bars; no latency; the rates alone).
    """

    DEFAULT_CSS = """
    SweepView {
        height: auto;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Sweep"
        self.model_id = ""
        self.axis = ""
        self.unit = "img/s"
        self.frameworks: tuple[str, ...] = ()
        self.lines: tuple[CurveLine, ...] = ()
        self.best: tuple[tuple[str, str], ...] = ()  # (text, style) per verdict
        self.gains: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # setting, per framework

    def show(
        self,
        model_id: str,
        axis: str,
        unit: str,
        frameworks: Sequence[str],
        lines: Sequence[CurveLine],
        best: Sequence[tuple[BestVerdict, str]],
        gains: Sequence[SettingGain],
    ) -> None:
        """Draw ``model_id``'s curves against ``axis``; ``best``: its best-vs-best verdicts with their style;
        ``gains``: the sweep's (this model's are shown)."""
        title = f"Sweep · {escape(model_label(model_id))} · {unit} by {axis}"
        if title != self.border_title:
            self.border_title = title
        state = (
            model_id,
            axis,
            unit,
            tuple(frameworks),
            tuple(lines),
            tuple((b.text, style) for b, style in best),
            tuple(
                (setting, tuple(gain_text(by_fw[fw]) if fw in by_fw else ("–", "dim") for fw in frameworks))
                for setting, by_fw in gain_rows(gains, model_id)
            ),
        )
        if state != self._state():
            (
                self.model_id,
                self.axis,
                self.unit,
                self.frameworks,
                self.lines,
                self.best,
                self.gains,
            ) = state
            self.refresh(layout=True)

    def _state(self) -> tuple[object, ...]:
        """What the view draws (``show`` redraws only when it changes)."""
        return (self.model_id, self.axis, self.unit, self.frameworks, self.lines, self.best, self.gains)

    # -- drawing ------------------------------------------------------------------------------
    def curve_texts(self, width: int | None = None) -> list[str]:
        """The curve's lines as drawn at ``width`` (plain text, for tests)."""
        return [line.plain for line in self._curve(width or self.size.width or 80)]

    def texts(self, width: int | None = None) -> list[str]:
        """Every line as drawn at ``width`` (plain text, for tests)."""
        width = width or self.size.width or 80
        console = self.app.console
        out: list[str] = []
        for part in self._parts(width):
            for line in console.render_lines(part, console.options.update(width=width), pad=False):
                out.append("".join(segment.text for segment in line).rstrip())
        return out

    def _curve(self, width: int) -> list[Text]:
        if not self.lines:
            return []
        label_w = max(len(line.label) for line in self.lines) + 2
        top = max((p.rate for line in self.lines for p in line.points if p.rate is not None), default=None)
        count = max(len(line.points) for line in self.lines)
        value_w = max(len(p.value) for line in self.lines for p in line.points)
        rate_w = max(len(p.text) for line in self.lines for p in line.points)
        latency_w = max(len(p.latency) for line in self.lines for p in line.points)

        def segment(p: CurvePoint, form: int) -> str:
            """Form 0: the axis's name, a bar, the rate, the latency; 1: the value, a short bar, the rate,
            the latency; 2: as 1 without the latency; 3: the value and the rate."""
            figure = f"{p.text:>{rate_w}}"
            latency = f" {p.latency:<{latency_w}}" if latency_w and form < 2 else ""
            if form == 0:
                return f"{self.axis} {p.value:<{value_w}} {bar(p.rate, top)} {figure}{latency}"
            if form < 3:
                return f"{p.value:<{value_w}} {bar(p.rate, top, BAR_W // 2)} {figure}{latency}"
            return f"{p.value:<{value_w}} {figure}"

        # The most detailed form whose lines fit; the same form on every line, so they line up.
        forms = (0, 1, 2, 3) if latency_w else (0, 2, 3)
        for form in forms:
            seg_w = len(segment(self.lines[0].points[0], form))
            if label_w + count * (seg_w + 3) - 3 + 2 <= width:  # and the best's mark
                break
        out = []
        for line in self.lines:
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{line.label:<{label_w}}", style="bold")
            for k, p in enumerate(line.points):
                if k:
                    text.append(" · ", style="dim")
                style = "bold" if p.best else ("dim" if p.rate is None else "")
                words = segment(p, form)
                drawn = bar(p.rate, top, BAR_W if form == 0 else BAR_W // 2) if form < 3 else ""
                if drawn and drawn in words:  # the bar in its framework's colour, the words around it plain
                    before, after = words.split(drawn, 1)
                    text.append(before, style=style)
                    text.append(drawn, style=line.color or style)
                    text.append(after, style=style)
                else:
                    text.append(words, style=style)
                if p.best:
                    text.append(" ◆", style="bold")
            out.append(text)
        return out

    def _parts(self, width: int) -> list[RenderableType]:
        parts: list[RenderableType] = list(self._curve(width))
        if self.best:
            parts.append(Text(""))
        for text, style in self.best:
            parts.append(Text(fmt.clean(text), style=style))
        if self.gains:
            short = width < 100  # the CIs need room: on 80 columns, the factors alone
            table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, pad_edge=False, expand=False)
            table.add_column(Text("What each setting buys", style="bold"), no_wrap=True)
            for fw in self.frameworks:
                table.add_column(Text(framework_label(fw), style="bold"), no_wrap=True)
            for setting, cells in self.gains:
                row = [Text(setting)]
                for text, style in cells:
                    if short and " (" in text:
                        text = text.split(" (")[0]
                    row.append(Text(text, style=style))
                table.add_row(*row)
            parts += [Text(""), table]
        return parts

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.texts(width)) if self.lines or self.best or self.gains else 0

    def render(self) -> Group:
        return Group(*self._parts(self.size.width or 80))

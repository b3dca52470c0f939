"""The comparison area: per-batch time of every run of the model being run, on one scale, and the verdict."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rich.console import Group
from rich.text import Text
from textual.widget import Widget

from benchtui.core import fmt
from benchtui.core.model.cell import FrameworkRatio, RefusedRatio
from benchtui.core.model.parity import marked
from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import SessionModel, model_verdicts
from benchtui.core.model.stats import warmup_cut
from benchtui.core.model.status import RunStatus, status_style
from benchtui.core.plan.sweep import Point
from benchtui.widgets.spark import tall_strip
from benchtui_runners import catalog

RATIO_WINDOW = 256  # latest steady batches each framework's median uses
SHOW_WINDOW = 512  # latest batches kept for the strips: wider than any terminal's strip
LINE_PER_RUN = 4  # up to this many runs per framework, a line each; more, a framework's runs side by side
MAX_STRIP_ROWS = 6  # a strip grows up to this many lines high where the screen has room


@dataclass
class Series:
    """The batch times shown for one framework: the tail of its latest run of the model."""

    framework: str
    run: RunState | None
    seconds: list[float] = field(default_factory=list)  # the last SHOW_WINDOW batch times
    median: float | None = None
    from_first: bool = True  # seconds[0] is the run's first batch


def steady_tail(run: RunState, n: int = RATIO_WINDOW) -> list[float]:
    """The last ``n`` batch times after the warm-up detected in the run (the same cut-off as
    the summary's); the detection reads the whole run, the copy is only the tail."""
    seconds = run.batch_seconds
    start = max(warmup_cut(seconds), len(seconds) - n)
    return seconds[start:].tolist()


def latest_run(
    model: SessionModel, framework: str, model_id: str, point: Point | None = None
) -> RunState | None:
    """The run of (framework, model) at sweep ``point`` that started last and has a batch, or the one running."""
    runs = [r for r in model.cell_runs(framework, model_id, point=point) if r.started_t is not None]
    with_batches = [r for r in runs if r.batch_seconds or r.status in ("starting", "building", "running")]
    if not with_batches:
        return None
    return max(with_batches, key=lambda r: r.started_t or 0.0)


def focus_model(model: SessionModel) -> str | None:
    """The model being run, or the last one that ran."""
    if model.current is not None:
        return model.runs[model.current].spec.model
    started = [r for r in model.runs.values() if r.started_t is not None]
    if started:
        return max(started, key=lambda r: r.started_t or 0.0).spec.model
    return model.plan.models[0] if model.plan.models else None


#: A verdict's style in the app, by its mark (``Mark``'s values; the terminal has its own table): a warning
#: when the machine, not the frameworks, may have decided it ("unreliable: …": no winner is claimed, so none
#: is made to stand out); plain when the frameworks are about the same; dim when not significant; bold
#: otherwise (without a CI too); a pair refused (different devices) in red.
APP_VERDICT_STYLES: dict[str, str] = {
    "winner": "bold",
    "not_significant": "dim",
    "no_ci": "bold",
    "about_same": "",
    "unreliable": "bold yellow",
    "refused": "bold red",
    "none": "dim",
    "alone": "",
}


def verdict_lines(
    verdicts: list[FrameworkRatio], refused: list[RefusedRatio], label: str = ""
) -> list[tuple[str, str]]:
    """A model's verdicts (``model_verdicts``) as the app shows them: (text, style) each, the verdicts then
    the pairs refused. The words and the mark are the reports' (``verdict_of``), the style the app's."""
    # Once a verdict is shown, not at start-up.
    from benchtui.core.reporting.model import refusal_of, verdict_of

    shown = [verdict_of(v, label) for v in verdicts] + [refusal_of(r, label) for r in refused]
    return [(v.text, APP_VERDICT_STYLES[v.mark]) for v in shown]


def verdict_style(verdict: FrameworkRatio) -> str:
    """How a verdict (``model_verdicts``) reads in the app (``APP_VERDICT_STYLES``)."""
    ((_, style),) = verdict_lines([verdict], [])
    return style


def ratio_line(
    series: list[Series],
    model: SessionModel | None = None,
    model_id: str | None = None,
    point: Point | None = None,
) -> Text:
    """The verdict for the model on screen: the one every view prints (``model_verdicts``).

    It comes from the finished runs, as the results table's figures do, so the two never
    disagree; until each framework has finished a run of the model, it says what it waits for.
    A GPU against a CPU is refused at once, from the runs' own devices.
    """
    known = [s for s in series if s.run is not None]
    kinds = {s.run.device_kind for s in known if s.run is not None and s.run.device_kind}
    if len(kinds) > 1:  # a GPU against a CPU says nothing about the frameworks
        return Text(
            "ratio: none, the frameworks ran on different devices ("
            + ", ".join(
                fmt.clean(f"{_label(s.framework)} {s.run.device_kind}") for s in known if s.run is not None
            )
            + ")",
            style="bold red",
        )
    verdicts, refused = model_verdicts(model, model_id, point) if model is not None and model_id else ([], [])
    if refused:
        return Text(*verdict_lines([], refused[:1])[0])
    if verdicts:
        text = Text()
        for i, (words, style) in enumerate(verdict_lines(verdicts, [])):
            if i:
                text.append("; ")
            text.append(words, style=style)
        text.append(fmt.clean(f" · from {verdicts[0].basis_label}, finished runs"), style="dim")
        return text
    if len(series) < 2:
        return Text("ratio: one framework only", style="dim")
    missing, waiting = [], []
    for s in series:
        runs = model.cell_runs(s.framework, model_id or "", point=point) if model is not None else []
        if any(r.status == "ok" for r in runs):
            continue
        if runs and all(r.finished for r in runs):  # nothing will come: failed, unavailable, stopped
            missing.append(f"{_label(s.framework)} has no successful run ({runs[0].status})")
        else:
            waiting.append(_label(s.framework))
    if missing:
        return Text("no verdict: " + "; ".join(missing), style="yellow")
    return Text(
        "verdict: after a finished run of "
        + " and of ".join(waiting or [_label(s.framework) for s in series]),
        style="dim",
    )


def settings_line(series: list[Series]) -> Text:
    """What each framework compiled with (as resolved), on the CPU its threads, and whether its step
    waits for the device every step (the how line of the reports says what waits): what the numbers
    above mean. It wraps where the pane is narrow (beside the telemetry on a wide screen), never cut."""
    parts = []
    for s in series:
        settings = (s.run.hello.get("settings") or {}) if s.run is not None else {}
        compile_ = str(settings.get("compile") or "").split(" (")[0]
        if not compile_:
            continue
        on_cpu = (s.run.hello.get("device") or {}).get("type") == "cpu" if s.run is not None else False
        threads = settings.get("intra_op_threads") if on_cpu else None  # what a CPU run's speed rests on
        parts.append(
            f"{_label(s.framework)} {compile_}"
            + (f", {fmt.plural(threads, 'thread')}" if threads else "")
            + (", waits every step" if settings.get("host_sync_per_step") else "")
        )
    return Text(" · ".join(parts), style="dim")  # wrapped, never cut: it says how the figures were made


def _label(framework: str) -> str:
    return catalog.FRAMEWORK_LABELS.get(framework, framework)


@dataclass
class RunStrip:
    """One run's batch times as drawn: a line of its own, or a segment of its framework's line."""

    run: RunState
    seconds: list[float]  # the last SHOW_WINDOW batch times
    median: float | None  # of its steady tail (``steady_tail``)
    from_first: bool  # seconds[0] is the run's first batch
    batches: int  # how many the run had when this was taken

    @property
    def value(self) -> str:
        """What the line says of the run: its median, or what it is doing without one."""
        index = f"r{self.run.spec.index}"
        if self.median:
            return f"{index} median {fmt.seconds(self.median)} s"
        return f"{index} {self.run.status.value}"


def run_strip(run: RunState) -> RunStrip:
    seconds = run.batch_seconds
    calm = steady_tail(run)
    return RunStrip(
        run,
        seconds[-SHOW_WINDOW:].tolist(),
        statistics.median(calm) if calm else None,
        from_first=len(seconds) <= SHOW_WINDOW,
        batches=len(seconds),
    )


def focus_devices(model: SessionModel, model_id: str) -> int:
    """The device count of the run on screen: a scaling session goes through several."""
    return focus_scale(model, model_id)[1]


def focus_scale(model: SessionModel, model_id: str) -> tuple[int, int]:
    """(nodes, devices) of the run on screen: a scaling session goes through several (on several nodes,
    1 node at 1, 2 ... devices, then 2 ... nodes)."""
    if model.current is not None:
        spec = model.runs[model.current].spec
        return spec.nodes, spec.devices
    started = [r for r in model.runs.values() if r.spec.model == model_id and r.started_t is not None]
    if not started:
        return model.plan.nodes, model.plan.devices
    spec = max(started, key=lambda r: r.started_t or 0.0).spec
    return spec.nodes, spec.devices


def focus_point(model: SessionModel, model_id: str) -> Point | None:
    """The sweep point of the run on screen (None: a plan without a sweep, or its first point before any
    run of the model): the strips and the verdict under them are that point's."""
    if not model.plan.sweep:
        return None
    if model.current is not None and model.runs[model.current].spec.model == model_id:
        return model.runs[model.current].spec.point
    started = [r for r in model.runs.values() if r.spec.model == model_id and r.started_t is not None]
    if not started:
        return None
    return max(started, key=lambda r: r.started_t or 0.0).spec.point


def _value_style(runs: list[RunStrip]) -> str:
    """A line of one run: its words in the colour of how it ended when that was not well; dim while queued."""
    if len(runs) != 1 or runs[0].run.status in (RunStatus.OK, RunStatus.RUNNING):
        return ""
    status = runs[0].run.status
    return "dim" if status in (RunStatus.QUEUED, RunStatus.SKIPPED) else status_style(status.value, "")


class BatchComparison(Widget):
    """Per-batch time of every run of the model on screen, one scale for all, batches left to right.

    A line per run while each framework has a few (``LINE_PER_RUN``); with more, a line per
    framework whose runs stand side by side. Every strip shares one batches-per-column scale, on
    which the longest run spans the line and a run going on reaches as far as it got. Where the
    screen gives room (``room``, set by the screen) the strips grow several lines high.
    """

    DEFAULT_CSS = """
    BatchComparison {
        height: auto;
        min-height: 3;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.model_id: str | None = None
        self._model: SessionModel | None = None
        self.point: Point | None = None  # a sweep's point on screen (``focus_point``)
        self.series: list[Series] = []  # per framework, its latest run: the verdict and settings lines
        self.strips: dict[str, list[RunStrip]] = {}  # per framework, every run of the model, in order
        self.ceiling: float | None = None
        self.clipped = False
        self._taken: dict[str, RunStrip] = {}  # a finished run's strip is taken once
        # Lines the screen can give this widget's content (None: as few as it needs); set by the screen.
        self.room: int | None = None

    def _strip(self, run: RunState) -> RunStrip:
        taken = self._taken.get(run.spec.run_id)
        if taken is not None and taken.batches == len(run.batch_seconds) and taken.run.status == run.status:
            return taken
        taken = run_strip(run)
        if run.finished:
            self._taken[run.spec.run_id] = taken
        return taken

    def update_from(self, model: SessionModel) -> None:
        """Take fresh lists from the model (never a reference to its arrays) and redraw."""
        if model is not self._model:
            self._taken.clear()
        self.model_id = focus_model(model)
        self._model = model
        series: list[Series] = []
        strips: dict[str, list[RunStrip]] = {}
        self.point = focus_point(model, self.model_id) if self.model_id is not None else None
        if self.model_id is not None:
            nodes, devices = focus_scale(model, self.model_id)
            for framework in model.plan.frameworks:
                strips[framework] = [
                    self._strip(r)
                    for r in model.cell_runs(framework, self.model_id, devices, self.point, nodes=nodes)
                ]
                run = latest_run(model, framework, self.model_id, self.point)
                if run is None:
                    series.append(Series(framework, None))
                    continue
                # The run going on is taken once a tick: from the strips when they show it.
                s = next((s for s in strips[framework] if s.run is run), None) or self._strip(run)
                series.append(Series(framework, run, s.seconds, s.median, from_first=s.from_first))
        self.series, self.strips = series, strips
        shown = [s for runs in strips.values() for s in runs]
        # The scale ignores each run's first batch (tracing, autotuning): it would flatten the rest.
        rest = [
            v for s in shown for v in (s.seconds[1:] if s.from_first and len(s.seconds) > 1 else s.seconds)
        ]
        self.ceiling = max(rest) if rest else None
        self.clipped = any(
            s.from_first and s.seconds and self.ceiling and s.seconds[0] > self.ceiling for s in shown
        )
        label = (
            catalog.MODELS[self.model_id].label if self.model_id in catalog.MODELS else (self.model_id or "")
        )
        if self.model_id is not None:  # the frameworks build different networks: the parity mark
            same = model.parity(self.model_id)
            label = marked(label, bool(same and same.flagged))
            if model.plan.multi_device:
                nodes, devices = focus_scale(model, self.model_id)
                label += f" {nodes}×{devices}" if model.plan.nodes > 1 else f" ×{devices}"
            if self.point:
                label += f" · {self.point.label}"
        clipped = ", 1st clipped" if self.clipped else ""
        scale = f" (0–{fmt.seconds(self.ceiling)} s{clipped})" if self.ceiling else ""
        self.border_title = f"{label} · time per batch{scale}" if label else "Time per batch"
        self.refresh(layout=True)

    @property
    def side_by_side(self) -> bool:
        """Too many runs for a line each: a line per framework, its runs side by side."""
        return any(len(runs) > LINE_PER_RUN for runs in self.strips.values())

    def _rows(self) -> list[tuple[int, str, bool, list[RunStrip], str]]:
        """What each line shows: (framework's colour index, framework, its first line, runs, value)."""
        rows: list[tuple[int, str, bool, list[RunStrip], str]] = []
        side = self.side_by_side
        for i, framework in enumerate(self.strips):
            runs = self.strips[framework]
            if not runs:
                rows.append((i, framework, True, [], "no run yet"))
            elif side:
                medians = [s.median for s in runs if s.median]
                value = f"r1–r{len(runs)} " + (
                    f"median {fmt.seconds(statistics.median(medians))} s" if medians else "no batch yet"
                )
                rows.append((i, framework, True, runs, value))
            else:
                rows += [(i, framework, k == 0, [s], s.value) for k, s in enumerate(runs)]
        return rows

    def get_content_height(self, container, viewport, width: int) -> int:
        console = self.app.console
        return sum(len(line.wrap(console, max(width, 1))) for line in self._render_lines(width))

    def _render_lines(self, width: int | None = None) -> list[Text]:
        width = max(width or self.size.width, 20)
        rows = self._rows()
        if not rows:
            return [Text("No batches yet.", style="dim")]
        after = [ratio_line(self.series, self._model, self.model_id, self.point)]
        how = settings_line(self.series)
        if how.plain:
            after.append(how)
        label_w = max(len(_label(fw)) for _, fw, _, _, _ in rows) + 1
        value_w = max(len(value) for *_, value in rows) + 1
        spark_w = max(width - label_w - value_w, 4)
        # Segments of one width per line: the most runs any framework has.
        per_line = max(len(runs) for _, _, _, runs, _ in rows) if self.side_by_side else 1
        cols = max((spark_w - (per_line - 1)) // per_line, 1)
        # One x scale for every strip: the longest run shown spans its columns (a column is a
        # batch, several columns, or the mean of several batches), the others as far as they went.
        most = max((len(s.seconds) for _, _, _, runs, _ in rows for s in runs), default=0)
        per_batch = cols / most if most else 1.0
        # Lines with batches grow taller where the screen has room; a queued or skipped run keeps one.
        drawn_rows = sum(1 for *_, runs, _ in rows if any(s.seconds for s in runs))
        others = sum(len(t.wrap(self.app.console, width)) for t in after) + len(rows) - drawn_rows
        height = self.strip_rows(drawn_rows, others) if self.room else 1
        lines: list[Text] = []
        for i, framework, first, runs, value in rows:
            color = fmt.color_for(framework, i)
            tall = height if any(s.seconds for s in runs) else 1
            texts = [Text(no_wrap=True, overflow="ellipsis") for _ in range(tall)]
            for text in texts[:-1]:
                text.append(" " * (label_w + value_w))
            # The words on the strip's bottom line, beside its solid part.
            texts[-1].append(f"{_label(framework) if first else '':<{label_w}}", style=f"bold {color}")
            texts[-1].append(f"{value:<{value_w}}", style=_value_style(runs))
            for k, s in enumerate(runs):
                drawn = min(cols, max(round(len(s.seconds) * per_batch), 1)) if s.seconds else 0
                bars = tall_strip(s.seconds, drawn, self.ceiling, tall) if drawn else [""] * tall
                for text, bar in zip(texts, bars, strict=True):
                    if k:
                        text.append("│", style="dim")
                    text.append(bar, style=color)
                    if len(runs) > 1 and drawn < cols:  # side by side: each run starts at its own column
                        filler = "·" if s.run.status is RunStatus.QUEUED and text is texts[-1] else " "
                        text.append(filler * (cols - drawn), style="dim")
            lines += texts
        return lines + after

    def strip_rows(self, strips: int, other_lines: int) -> int:
        """Lines per strip: one, or more while ``room`` (the screen's spare lines) holds them."""
        if not self.room or not strips:
            return 1
        return max(1, min(MAX_STRIP_ROWS, (self.room - other_lines) // strips))

    def render(self) -> Group:
        return Group(*self._render_lines())

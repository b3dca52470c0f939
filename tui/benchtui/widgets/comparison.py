"""The comparison area: per-batch time of each framework on the model being run, on one scale, and the verdict."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rich.console import Group
from rich.text import Text
from textual.widget import Widget

from benchtui.core import fmt
from benchtui.core.model.parity import marked
from benchtui.core.model.stats import warmup_cut
from benchtui.core.model.summary import RunState, SessionModel, model_verdicts
from benchtui.widgets.spark import strip
from benchtui_runners import catalog

RATIO_WINDOW = 256  # latest steady batches each framework's median uses
SHOW_WINDOW = 512  # latest batches kept for the strips: wider than any terminal's strip
LABEL_W = 12
VALUE_W = 22


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


def latest_run(model: SessionModel, framework: str, model_id: str) -> RunState | None:
    """The run of (framework, model) that started last and has a batch, or the one running."""
    runs = [r for r in model.cell_runs(framework, model_id) if r.started_t is not None]
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


def ratio_line(series: list[Series], model: SessionModel | None = None, model_id: str | None = None) -> Text:
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
    verdicts, refused = model_verdicts(model, model_id) if model is not None and model_id else ([], [])
    if refused:
        return Text(fmt.clean(refused[0]["text"]), style="bold red")
    if verdicts:
        text = Text()
        for i, verdict in enumerate(verdicts):
            if i:
                text.append("; ")
            text.append(
                fmt.clean(verdict["text"]), style="dim" if verdict.get("significant") is False else "bold"
            )
        text.append(fmt.clean(f" · from {verdicts[0]['basis_label']}, finished runs"), style="dim")
        return text
    if len(series) < 2:
        return Text("ratio: one framework only", style="dim")
    missing, waiting = [], []
    for s in series:
        runs = model.cell_runs(s.framework, model_id or "") if model is not None else []
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
    """What each framework compiled with (as resolved) and, on the CPU, its threads: what the numbers above mean."""
    parts = []
    for s in series:
        settings = (s.run.hello.get("settings") or {}) if s.run is not None else {}
        compile_ = str(settings.get("compile") or "").split(" (")[0]
        if not compile_:
            continue
        on_cpu = (s.run.hello.get("device") or {}).get("type") == "cpu" if s.run is not None else False
        threads = settings.get("intra_op_threads") if on_cpu else None  # what a CPU run's speed rests on
        parts.append(f"{_label(s.framework)} {compile_}" + (f", {threads} threads" if threads else ""))
    return Text(" · ".join(parts), style="dim", overflow="ellipsis", no_wrap=True)


def _label(framework: str) -> str:
    return catalog.FRAMEWORK_LABELS.get(framework, framework)


class BatchComparison(Widget):
    """One strip of per-batch time per framework, same vertical scale, newest batch at the right."""

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
        self.series: list[Series] = []
        self.ceiling: float | None = None
        self.clipped = False

    def update_from(self, model: SessionModel) -> None:
        """Take fresh lists from the model (never a reference to its arrays) and redraw."""
        self.model_id = focus_model(model)
        self._model = model
        series: list[Series] = []
        if self.model_id is not None:
            for framework in model.plan.frameworks:
                run = latest_run(model, framework, self.model_id)
                if run is None:
                    series.append(Series(framework, None))
                    continue
                total = len(run.batch_seconds)
                seconds = run.batch_seconds[-SHOW_WINDOW:].tolist()
                calm = steady_tail(run)
                median = statistics.median(calm) if calm else None
                series.append(Series(framework, run, seconds, median, from_first=total <= SHOW_WINDOW))
        self.series = series
        # The scale ignores each run's first batch (tracing, autotuning): it would flatten the rest.
        rest = [
            v for s in series for v in (s.seconds[1:] if s.from_first and len(s.seconds) > 1 else s.seconds)
        ]
        self.ceiling = max(rest) if rest else None
        self.clipped = any(
            s.from_first and s.seconds and self.ceiling and s.seconds[0] > self.ceiling for s in series
        )
        label = (
            catalog.MODELS[self.model_id].label if self.model_id in catalog.MODELS else (self.model_id or "")
        )
        if self.model_id is not None:  # the frameworks build different networks: the parity mark
            same = model.parity(self.model_id)
            label = marked(label, bool(same and same["flagged"]))
        clipped = ", 1st clipped" if self.clipped else ""
        scale = f" (0–{fmt.seconds(self.ceiling)} s{clipped})" if self.ceiling else ""
        self.border_title = f"{label} · time per batch{scale}" if label else "Time per batch"
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:  # noqa: ANN001
        console = self.app.console
        return sum(len(line.wrap(console, max(width, 1))) for line in self._render_lines(width))

    def _render_lines(self, width: int | None = None) -> list[Text]:
        width = max(width or self.size.width, 20)
        spark_w = max(width - LABEL_W - VALUE_W - 1, 4)
        if not self.series:
            return [Text("No batches yet.", style="dim")]
        lines: list[Text] = []
        # One column per batch, wider while there are few: the same x scale for every framework.
        most = max((len(s.seconds) for s in self.series), default=0)
        per_batch = max(1, min(4, spark_w // most)) if most else 1
        fits = spark_w // per_batch
        for i, s in enumerate(self.series):
            color = fmt.color_for(s.framework, i)
            line = Text(no_wrap=True, overflow="ellipsis")
            name = catalog.FRAMEWORK_LABELS.get(s.framework, s.framework)
            line.append(f"{name:<{LABEL_W}}"[:LABEL_W], style=f"bold {color}")
            if s.run is None:
                value = "no run yet"
            else:
                median = f"median {fmt.seconds(s.median)} s" if s.median else "no batch yet"
                value = f"r{s.run.spec.index} {median}"
            line.append(f"{value:<{VALUE_W}}"[:VALUE_W])
            shown = s.seconds[-fits:]
            line.append(strip(shown, len(shown) * per_batch, self.ceiling), style=color)
            lines.append(line)
        lines.append(ratio_line(self.series, self._model, self.model_id))
        how = settings_line(self.series)
        if how.plain:
            lines.append(how)
        return lines

    def render(self) -> Group:
        return Group(*self._render_lines())

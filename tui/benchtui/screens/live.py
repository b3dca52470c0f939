"""The live screen: results table, batch-time comparison, telemetry and log of a plan being run or replayed.

Events only mark the screen dirty (``note_event``); a steady tick redraws from the
session model, so the cost of drawing does not grow with the event rate. Once nothing can
change without an event or a key (the session finished, a replay paused), the tick sleeps:
an idle screen costs no CPU, and the next event, key or resize wakes it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Static

from benchtui.core import fmt
from benchtui.core.fmt import clean
from benchtui.core.model import eta, scaling, sweeps
from benchtui.core.model.analysis import model_label
from benchtui.core.model.cell import ScalingCurve, SweepAnswer
from benchtui.core.model.eta import clock
from benchtui.core.model.parity import differences_text, marked
from benchtui.core.model.session_model import model_verdicts
from benchtui.core.model.status import CautionKind, RunStatus, status_style
from benchtui.core.plan.plan import Scale
from benchtui.core.plan.sweep import Point, applies
from benchtui.core.reporting import registry
from benchtui.widgets.comparison import BatchComparison, focus_model, verdict_lines, verdict_style
from benchtui.widgets.log_pane import RunLog
from benchtui.widgets.node_rows import NodeRows, node_lines
from benchtui.widgets.results_table import LIVE, CellCache, ResultsTable, cell_values, rate_text, row_key
from benchtui.widgets.sweep_view import CurveLine, CurvePoint, SweepView, curve_axis, setting_words
from benchtui.widgets.telemetry import MAX_STRIPS, GpuStrips, TelemetryPanel
from benchtui.widgets.token_strips import TokenStrips
from benchtui.widgets.why_view import WhyView
from benchtui_runners import catalog
from benchtui_runners.config import usable_cores

if TYPE_CHECKING:
    from benchtui.core.model.runs import RunState
    from benchtui.core.model.session_model import SessionModel
    from benchtui.core.plan.plan import Plan
    from benchtui.core.running.source import SessionSource


def tokens_of(plan: Plan, model_id: str) -> int:
    """Tokens per sample of a token model under ``plan`` (0: a model that takes no tokens)."""
    info = catalog.MODELS.get(model_id)
    if info is None or info.kind != "tokens":
        return 0
    return catalog.tokens_per_sample(model_id, plan.seq_len or info.context)


TICK_S = 0.25  # redraw period: 4 Hz is smooth for people and cheap at any event rate
COMPACT_BELOW = 100  # terminal columns under which the table drops three columns
SHORT_BELOW = 30  # terminal rows under which a data-parallel session's GPU strips are capped lower
SHORT_STRIPS = 4  # GPU strips on such a terminal (one line is then the "+N more")
#: How a device count's runs ended when none succeeded, the first present said (scaling line).
ENDED_WORDS = (
    RunStatus.FAILED,
    RunStatus.DIVERGED,
    RunStatus.INTERRUPTED,
    RunStatus.STOPPED,
    RunStatus.UNAVAILABLE,
    RunStatus.SKIPPED,
)
FINISHED = frozenset({"complete", "failed", "interrupted", "incomplete"})
#: A sweep's answer (best vs best, what each setting buys) bootstraps over every point's runs (about 0.7 s
#: for a 12-point sweep of 54 runs on a CPU, on the screen's thread): while runs go on, it is computed again
#: at most this often, and never more than a tenth of the time (``SWEEP_SHARE``); once more when it ends.
SWEEP_EVERY_S = 2.0
SWEEP_SHARE = 0.1


def eta_text(
    model: SessionModel, now: float | None, prior: dict[tuple[str, str], float] | None = None
) -> str:
    """The plan's ETA in words (``eta.plan_eta``): honest about what it cannot know yet."""
    return eta.eta_text(eta.plan_eta(model, now, prior))


def _label(framework: str, model: str, point: Point | None = None) -> str:
    info = catalog.MODELS.get(model)
    at = f" · {point.label}" if point else ""
    # The point last: a narrow status line cuts it, not the framework.
    return f"{info.label if info else model} · {catalog.FRAMEWORK_LABELS.get(framework, framework)}{at}"


def _watched(run: RunState, plan: Plan) -> str:
    """A watch's run in words: 'python train.py · PyTorch', or 'telemetry only'."""
    if not plan.watch.get("command"):
        return "telemetry only"
    return _label(run.spec.framework, run.spec.model)


class ScalingView(Widget):
    """A scaling session's curve as it forms, for the model being run: one line per framework with
    its throughput at each device count done so far and its efficiency against one device.

    ``show`` takes the curves (``scaling.curve``, the model's own) and what each framework is
    doing at the counts without a figure; the drawing picks the most detailed of three forms
    that fits the width (with units and 95% intervals, with units, bare numbers).
    """

    DEFAULT_CSS = """
    ScalingView {
        height: auto;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: list[tuple[str, list[tuple[str, str, str, str]]]] = []  # per framework: segments
        self.border_title = "Scaling"

    def show(
        self,
        model_id: str,
        unit: str,
        lines: list[tuple[str, list[tuple[str, str, str, str]]]],
        by: str = "devices",
    ) -> None:
        """``lines``: (framework label, per device count (long, medium, short, style)); ``by``: what the points
        are ("devices", or "nodes×devices" on several machines)."""
        title = f"Scaling · {escape(model_label(model_id))} · {unit} by {by}, efficiency vs 1"
        if title != self.border_title:
            self.border_title = title
        if lines != self.lines:
            self.lines = lines
            self.refresh(layout=True)

    def texts(self, width: int | None = None) -> list[str]:
        """The lines as drawn at ``width`` (plain text, for tests)."""
        return [line.plain for line in self._render_lines(width)]

    def _render_lines(self, width: int | None = None) -> list[Text]:
        width = width or self.size.width or 80
        if not self.lines:
            return []
        label_w = max(len(label) for label, _ in self.lines) + 2
        # The most detailed form whose every line fits; segments padded to line up across frameworks.
        for form in range(3):
            widths = [
                max(len(segments[k][form]) for _, segments in self.lines if k < len(segments))
                for k in range(max(len(segments) for _, segments in self.lines))
            ]
            if label_w + sum(widths) + 3 * (len(widths) - 1) <= width:
                break
        out = []
        for label, segments in self.lines:
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{label:<{label_w}}", style="bold")
            for k, segment in enumerate(segments):
                if k:
                    text.append(" · ", style="dim")
                body = segment[form]
                text.append(f"{body:<{widths[k]}}" if k < len(segments) - 1 else body, style=segment[3])
            out.append(text)
        return out

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines)

    def render(self) -> Group:
        return Group(*self._render_lines())


def scaling_segments(
    curve: ScalingCurve,
    levels: list[int] | list[Scale],
    doing: dict[int, str] | dict[Scale, str],
    unit: str,
    tokens: int,
) -> list[tuple[str, str, str, str]]:
    """One framework's curve as (long, medium, short, style) per device count ('×4'), or per (nodes,
    devices) on several nodes ('2×4').

    ``doing``: a word for a point without a figure ("running", or how its runs ended: "failed",
    "interrupted" ...); a point with neither is still to come. The rate is per sample, or per
    token for a token model (``tokens`` per sample).
    """
    points = {Scale(p.nodes, p.devices): p for p in curve.points}
    ats = [at if isinstance(at, Scale) else Scale(1, at) for at in levels]
    words = {(at if isinstance(at, Scale) else Scale(1, at)): w for at, w in doing.items()}
    several = any(at.nodes > 1 for at in ats)
    out = []
    for at in ats:
        n = f"{at.nodes}×{at.devices}" if several else f"×{at.devices}"
        point = points.get(at)
        rate = point.images_per_s if point is not None else None
        if point is None or rate is None:
            word = words.get(at)
            if word == "running":
                out.append((f"{n} running", f"{n} running", f"{n} …", "cyan"))
            elif word:
                out.append((f"{n} {word}", f"{n} {word}", f"{n} {word}", status_style(word, "dim")))
            else:
                out.append((f"{n} –", f"{n} –", f"{n} –", "dim"))
            continue
        figure = rate_text(rate, tokens, False)
        eff, ci = point.efficiency, point.efficiency_ci
        if at.workers == 1 or eff is None:
            medium = f"{n} {figure} {unit}"
            out.append((medium, medium, medium if at.workers == 1 else f"{n} {figure}", ""))
            continue
        short = f"{n} {figure} {eff:.0%}"
        medium = f"{n} {figure} {unit} {eff:.0%}"
        long = medium + (f" ({ci[0] * 100:.0f}–{ci[1]:.0%})" if ci else "")
        out.append((long, medium, short, "yellow" if eff < scaling.POOR_EFFICIENCY else ""))
    return out


class LiveScreen(Screen):
    """Shows a session from its source's model: an Engine running a plan, or a Replayer playing one back."""

    class NewPlanRequested(Message):
        """The user asked for the plan screen again, filled in with this session's plan."""

        def __init__(self, plan: Plan) -> None:
            super().__init__()
            self.plan = plan

    class BackRequested(Message):
        """The user asked to leave this replay for the screen it was opened from."""

    BINDINGS = [
        Binding(
            "s",
            "stop_run",
            "Stop run",
            id="stop-run",
            tooltip="Stop the run in progress (recorded as stopped); the queue goes on",
        ),
        Binding(
            "k",
            "skip_model",
            "Skip model",
            id="skip-model",
            tooltip="Stop the current run and skip the remaining runs of its model",
        ),
        Binding(
            "p",
            "pause",
            "Pause",
            id="pause-queue",
            tooltip="Hold the queue: the current run finishes, the next one waits",
        ),
        Binding("p", "resume", "Resume", id="resume-queue", tooltip="Let the queue go on"),
        Binding(
            "l",
            "toggle_log",
            "Log",
            id="toggle-log",
            tooltip="Show or hide the current runner's stdout/stderr",
        ),
        Binding(
            "e",
            "export",
            "Export",
            id="export-md",
            tooltip=f"Write the session's summary ({registry.spoken()}) into its folder",
        ),
        Binding(
            "w",
            "toggle_why",
            "Why",
            id="toggle-why",
            tooltip="Show or hide where each framework's step time goes (--profile)",
        ),
        Binding("n", "new_plan", "New plan", id="new-plan", tooltip="Back to the plan screen"),
        Binding(
            "escape",
            "back",
            "Back",
            id="replay-back",
            tooltip="Stop the replay and go back to the saved sessions",
        ),
    ]

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    def __init__(self, source: SessionSource, *, speed: float = 1.0, back: bool = False) -> None:
        """``back``: a screen to go back to lies under this one (a replay opened from the saved sessions)."""
        super().__init__()
        self.source = source
        self.live = not source.is_replay
        self.speed = speed  # a replay's pace, shown in the status line
        self.back = back
        self._dirty = True
        self._gpu_dirty = True
        self._last_t: float | None = None
        self._last_wall = time.monotonic()  # when ``_last_t`` came: a replay's clock goes on from it
        self._prior: tuple[tuple[Any, ...], dict[tuple[str, str], float]] | None = None
        self._cache: dict[str, CellCache] = {}
        self._panels_key: tuple[Any, ...] | None = None
        self._controls: tuple[Any, ...] | None = None
        self._seen_finished = False
        self._answer_key: tuple[Any, ...] | None = None
        self._status_text = ""
        self._ticker: Timer | None = None
        self._asleep = False  # the ticker is paused until something may have changed
        # Scaling curves per (framework, model) and the successful runs they were computed from:
        # each bootstraps its intervals, so only a run that finishes well computes one again.
        self._curves: dict[tuple[str, str], tuple[tuple[str, ...], ScalingCurve]] = {}
        # A sweep's answer and the finished runs it was computed from, and when (``SWEEP_EVERY_S``).
        self._sweep: tuple[tuple[Any, ...], SweepAnswer | None] | None = None
        self._sweep_at = 0.0
        self._sweep_cost = 0.0  # seconds the last computation took

    @property
    def model(self) -> SessionModel:
        return self.source.model

    @property
    def session_path(self) -> Path:
        return self.source.path

    @property
    def meta(self) -> dict[str, Any]:
        return self.source.meta  # while live, the writer's dict: gpus/telemetry appear once the engine starts

    @property
    def finished(self) -> bool:
        return self.source.status in FINISHED or (
            not self.live and self.source.status not in ("pending", "running")
        )

    # -- events (called for every event: keep it to a few assignments) -------------------
    def note_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "gpu":
            self._gpu_dirty = True
        else:
            self._dirty = True
        t = event.get("t")
        if isinstance(t, (int, float)):
            self._last_t = t
            self._last_wall = time.monotonic()
        if self._asleep:
            self.wake()

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with VerticalScroll(id="body"):
            yield Static(id="answer")
            yield ResultsTable(id="results")
            yield Static(id="notes")
            yield ScalingView(id="scaling", classes="panel")
            yield NodeRows(id="nodes", classes="panel")
            yield SweepView(id="sweep", classes="panel")
            yield WhyView(id="why", classes="panel")
            yield TokenStrips(id="tokens", classes="panel")
            with Horizontal(id="panels"):
                yield BatchComparison(id="comparison")
                yield Vertical(id="telemetry")
        yield RunLog(id="log")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(ResultsTable)
        table.border_title = "Results · times in seconds"
        self.query_one("#log", RunLog).display = False
        self.query_one(ScalingView).display = bool(self.model.plan.scaling)
        self.query_one(NodeRows).display = self.model.plan.nodes > 1
        self.query_one(SweepView).display = curve_axis(self.model.plan.sweep) is not None
        self.query_one(WhyView).display = bool(self.model.plan.profile)
        self.query_one(TokenStrips).display = self.model.plan.task == "generate"  # issue 34
        self._fit_table(self.app.size.width)
        self._ticker = self.set_interval(TICK_S, self.tick, name="live-tick")
        self.tick()

    def on_resize(self) -> None:
        self._fit_table(self.size.width)
        self.call_after_refresh(self._fit_strips)
        for strips in self.query(GpuStrips):
            strips.max_strips = self._max_strips()
            strips.refresh(layout=True)
        self._dirty = True
        self.wake()

    def _fit_strips(self) -> None:
        """Give the per-batch strips the body's spare lines: taller strips where the screen has room."""
        if not self.query("#body"):  # closed (Esc from a replay) before this ran
            return
        body = self.query_one("#body")
        comparison = self.query_one(BatchComparison)
        above = (
            self.query_one("#answer"),
            self.query_one(ResultsTable),
            self.query_one("#notes"),
            self.query_one(ScalingView),
            self.query_one(NodeRows),
            self.query_one(SweepView),
        )
        room = body.size.height - sum(
            w.outer_size.height
            for w in (*above, self.query_one(WhyView), self.query_one(TokenStrips))
            if w.display
        )
        if not self.has_class("-wide"):  # the telemetry is below the strips, not beside them
            room -= self.query_one("#telemetry").outer_size.height
        room -= comparison.outer_size.height - comparison.size.height  # its title rule
        fitted = room if room > 0 else None
        if fitted != comparison.room:
            comparison.room = fitted
            comparison.refresh(layout=True)

    def _max_strips(self) -> int:
        return SHORT_STRIPS if self.app.size.height < SHORT_BELOW else MAX_STRIPS

    def _fit_table(self, width: int) -> None:
        self.query_one(ResultsTable).set_compact(width < COMPACT_BELOW)

    def _session_gpus(self, seen: int) -> list[int]:
        """The NVML indices of a data-parallel session's GPUs (empty for one GPU, or none).

        The engine's placement says which; a session without one trained on the plan's
        ``device_ids``, else its first ``devices`` GPUs (the placement's own rule).
        """
        plan = self.model.plan
        if plan.devices < 2 or plan.device == "cpu" or not seen:
            return []
        placement = self.meta.get("placement")
        placed = placement.get("gpus") if isinstance(placement, dict) else None
        ids = [g.get("index") for g in placed or [] if isinstance(g, dict)]
        indices = [i for i in ids if isinstance(i, int)] or list(plan.device_ids) or list(range(plan.devices))
        return indices if len(indices) > 1 else []

    def _build_panels(self) -> None:
        """One panel per GPU the session knows of; one line per GPU for a data-parallel session's
        GPUs; the runner-process panel without NVML."""
        gpus = list(self.meta.get("gpus") or [])
        samples = self.model.gpu_samples
        if not gpus and samples:
            seen = samples[-1].get("gpus")
            if isinstance(seen, list):
                gpus = [{"index": i} for i in range(len(seen))]
        several = self._session_gpus(len(gpus))
        key = (len(gpus), self.meta.get("telemetry"), tuple(several))
        if key == self._panels_key:
            return
        self._panels_key = key
        box = self.query_one("#telemetry", Vertical)
        box.remove_children()
        interval = float(self.model.plan.interval or 0.5)
        capacity = self.model.gpu_samples.maxlen or 600
        cpu_count = (self.meta.get("host") or {}).get("cpu_count")
        status = str(self.meta.get("telemetry") or "")
        if several:
            infos = [dict(info, index=i) for i, info in enumerate(gpus) if isinstance(info, dict)]
            panels: list[TelemetryPanel] = [
                GpuStrips(
                    several,
                    infos,
                    status,
                    capacity,
                    interval,
                    cpu_count,
                    max_strips=self._max_strips(),
                    classes="panel",
                )
            ]
        elif gpus:
            panels = [
                TelemetryPanel(i, info, status, capacity, interval, cpu_count, classes="panel")
                for i, info in enumerate(gpus)
            ]
        else:
            panels = [TelemetryPanel(None, None, status, capacity, interval, cpu_count, classes="panel")]
        box.mount_all(panels)
        self._gpu_dirty = True

    # -- the tick -------------------------------------------------------------------------
    def tick(self) -> None:
        """Redraw what changed since the last tick, from the model."""
        model = self.model
        if self.finished != self._seen_finished:
            # A replay's status turns after its last event (the end's answer needs no event to come), and
            # the tick that drew that event may have run before it: draw the finished session once more.
            self._seen_finished = self.finished
            self._dirty = True
        if self._dirty:
            self._dirty = False
            table = self.query_one(ResultsTable)
            with self.app.batch_update():
                compact = table.compact
                # A sweep's point only in a sweep's rows: a plan without one keeps its keys and columns.
                rows = {
                    row_key(fw, m, p): cell_values(model, fw, m, self._cache, compact, p or None)
                    for fw, m, p in model.grid()
                }
                table.show(rows)
                self.query_one(BatchComparison).update_from(model)
                answer = self._sweep_answer()
                self._update_answer(answer)
                self._update_notes()
                self._update_scaling()
                self._update_nodes()
                self._update_sweep(answer)
                if self.model.plan.profile:
                    self.query_one(WhyView).update_from(model)
                if self.model.plan.task == "generate":  # each token window's latency (issue 34)
                    self.query_one(TokenStrips).update_from(model)
            self.call_after_refresh(self._fit_strips)  # measured once the new rows are laid out
        if self._gpu_dirty:
            self._gpu_dirty = False
            self._update_nodes()  # node k's GPUs come in its samples
            self._build_panels()
            samples = list(model.gpu_samples)  # a fresh list: panels never hold the model's deque
            for panel in self.query(TelemetryPanel):
                panel.update_samples(samples)
        self._update_status()
        log = self.query_one("#log", RunLog)
        if log.display:
            self._follow_log(log)
            log.poll()
        controls = (self.source.status, self.source.paused, model.current, self.source.cancelled)
        if controls != self._controls:
            self._controls = controls
            self.refresh_bindings()
        if self._still(log):
            self._sleep()
        else:
            self.wake()

    # -- sleeping while nothing can change -----------------------------------------------
    def _still(self, log: RunLog) -> bool:
        """Whether nothing on screen can change before the next event, key or resize.

        While a run goes on, things change without an event (its log grows), so the tick
        keeps its rate. A finished session, a paused replay, or a paused live queue with no
        runner going only change when an event comes (``note_event`` wakes the tick) or the
        user acts (the actions and ``on_resize`` do).
        """
        if self._dirty or self._gpu_dirty:
            return False
        source = self.source
        if not (self.finished or (source.paused and not source.runner_active)):
            return False
        return not log.display or log.caught_up

    def _sleep(self) -> None:
        if not self._asleep and self._ticker is not None:
            self._asleep = True
            self._ticker.pause()

    def wake(self) -> None:
        """Run the tick again at its rate; it goes back to sleep once nothing can change."""
        if self._asleep and self._ticker is not None:
            self._asleep = False
            self._ticker.resume()

    @property
    def asleep(self) -> bool:
        """True while the tick is paused because nothing on screen can change."""
        return self._asleep

    def _sweep_answer(self) -> SweepAnswer | None:
        """A sweep's answer (``sweeps.answer``: best vs best, what each setting buys), computed again when a
        run has finished since, at most every ``SWEEP_EVERY_S`` while runs go on (it bootstraps); None
        without a sweep."""
        if curve_axis(self.model.plan.sweep) is None:
            return None
        key = (self.finished, self._finished_runs())
        if self._sweep is not None and self._sweep[0] == key:
            return self._sweep[1]
        now = time.monotonic()
        wait = max(SWEEP_EVERY_S, self._sweep_cost / SWEEP_SHARE)
        if self._sweep is not None and not self.finished and now - self._sweep_at < wait:
            self._dirty = True  # the next tick comes back for it
            return self._sweep[1]
        self._sweep = (key, sweeps.answer(self.model))
        self._sweep_at = time.monotonic()
        self._sweep_cost = self._sweep_at - now
        return self._sweep[1]

    def _finished_runs(self) -> tuple[tuple[str, RunStatus], ...]:
        return tuple((run_id, r.status) for run_id, r in self.model.runs.items() if r.finished)

    def _update_answer(self, sweep: SweepAnswer | None = None) -> None:
        """The answer first: each model's verdict (the words of every view) above the table, once both
        frameworks have finished a run of it; recomputed only when a run has finished since. A sweep's: the
        verdict at each point (same settings), best vs best, and what each setting buys each framework."""
        key = (self.finished, self._finished_runs(), id(sweep))
        if key == self._answer_key:
            return
        self._answer_key = key
        lines: list[Text] = []
        points = self.model.plan.points() if sweep is not None else [None]
        for m in self.model.plan.models:
            entry = self.model.parity(m)
            name = marked(model_label(m), bool(entry and entry.flagged))
            for point in points:
                verdicts, refused = model_verdicts(self.model, m, point)
                label = f"{name} · {point.label}" if point else name
                for i, (text, style) in enumerate(verdict_lines(verdicts, refused, label)):
                    if i < len(verdicts):
                        line = Text(clean(f"{label}: "), style="bold")
                        line.append(text, style=style)
                        lines.append(line)
                    else:  # a pair refused: the whole line its colour
                        lines.append(Text(clean(f"{label}: ") + text, style=style))
            if sweep is not None:
                lines += self._sweep_lines(sweep, m, name)
        answer = self.query_one("#answer", Static)
        answer.display = bool(lines)
        if lines:
            head = Text(
                "The answer" if self.finished else "The answer so far (finished runs)", style="bold underline"
            )
            answer.update(Group(head, *lines))

    def _sweep_lines(self, sweep: SweepAnswer, model_id: str, name: str) -> list[Text]:
        """A model's best vs best, and a line per setting with its speed-up in each framework side by side
        ('channels-last on buys: PyTorch 1.41×, tf.keras no effect'; the sweep view has their CIs)."""
        lines = []
        for best in sweep.best:
            if best.model == model_id:
                line = Text(clean(f"{name}: "), style="bold")
                line.append(clean(best.text), style=verdict_style(best.verdict))
                lines.append(line)
        for refused in sweep.refused:  # the chosen cells ran on different kinds of device
            if refused.model == model_id:
                ((text, style),) = verdict_lines([], [refused], name)
                lines.append(Text(clean(f"{name}: best vs best: ") + text, style=style))
        settings: dict[tuple[str, str], list[str]] = {}
        for gain in sweep.gains:
            if gain.model != model_id:
                continue
            label = catalog.FRAMEWORK_LABELS.get(gain.framework, gain.framework)
            said = (
                "no effect"
                if gain.no_effect
                else ("not measured yet" if gain.factor is None else f"{gain.factor:.2f}×")
            )
            settings.setdefault((gain.axis, gain.value), []).append(f"{label} {said}")
        for (axis, value), each in settings.items():
            line = Text(clean(f"{name} · {setting_words(axis, value)} buys: "), style="bold")
            line.append(clean(", ".join(each)))
            lines.append(line)
        return lines

    def _update_notes(self) -> None:
        lines = self.model.search_lines() + self._watch_notes()
        for m in self.model.plan.models:
            # Not the same network on both sides: said once per model, short (the exports say it all).
            entry = self.model.parity(m)
            if entry is not None and entry.flagged:
                twin = f"; {entry.twin} is the same on both" if entry.twin else ""
                lines.append(f"≠ {model_label(m)}: not the same network: {differences_text(entry)}{twin}")
        for fw, m, p in self.model.grid():
            cached = self._cache.get(row_key(fw, m, p))
            if cached is None:
                continue
            row = cached.row
            said = (
                row.status in ("failed", "unavailable", "incomplete", "diverged")
                or any(
                    w["kind"] == CautionKind.DIVERGED for w in row.warnings
                )  # some of its runs did not train
                or self.model.plan.watch
            )
            if said and row.reason:
                lines.append(f"{_label(fw, m, p)}: {row.status}: {row.reason}")
            lines += [
                f"{_label(fw, m, p)}: caution: {w['message']}"
                for w in row.warnings
                if w["kind"] in (CautionKind.CPU_CONTENTION, CautionKind.GPU_SHARING)
            ]

        notes = self.query_one("#notes", Static)
        shown = lines[:4] + (
            [f"… and {len(lines) - 4} more (see the exported summary)"] if len(lines) > 4 else []
        )
        notes.update(Text("\n".join(map(clean, shown)), style="yellow", overflow="ellipsis", no_wrap=True))
        notes.display = bool(lines)

    def _watch_notes(self) -> list[str]:
        """A watched command that has sent no timing yet: how a script sends them."""
        watch = self.model.plan.watch
        if not watch or not watch.get("command") or self.finished:
            return []
        run = next(iter(self.model.runs.values()))
        if run.hello or run.batch_seconds or run.status is RunStatus.QUEUED:
            return []
        return [
            "no timings yet, telemetry only: a script sends its batches with benchtui's hooks "
            "(from benchtui_runners.hooks import StepTimer, or KerasTimer for Keras model.fit)"
        ]

    def _update_nodes(self) -> None:
        """A session on several machines: a row per node of the run on several nodes in progress."""
        if self.model.plan.nodes <= 1:
            return
        host = str((self.meta.get("host") or {}).get("hostname") or "")
        self.query_one(NodeRows).show(*node_lines(self.model, host))

    def _update_scaling(self) -> None:
        """A scaling session: the curve of the model being run (or the last run), per framework."""
        model = self.model
        plan = model.plan
        if not plan.scaling:
            return
        model_id = focus_model(model) or plan.models[0]
        tokens = tokens_of(plan, model_id)
        unit = "tok/s" if tokens else "img/s"
        levels = plan.scale_points()
        lines = []
        for framework in plan.frameworks:
            runs = {at: model.cell_runs(framework, model_id, at.devices, nodes=at.nodes) for at in levels}
            done = tuple(r.spec.run_id for n in levels for r in runs[n] if r.status is RunStatus.OK)
            cached = self._curves.get((framework, model_id))
            if cached is None or cached[0] != done:
                # The model's own curve (``SessionModel.scaling``), for this one cell only.
                cached = (done, scaling.curve(plan, framework, model_id, runs))
                self._curves[(framework, model_id)] = cached
            doing: dict[Scale, str] = {}
            for n in levels:
                statuses = {r.status for r in runs[n]}
                if statuses & LIVE:
                    doing[n] = "running"
                elif RunStatus.OK not in statuses:
                    ended = [s for s in ENDED_WORDS if s in statuses]
                    if ended:
                        doing[n] = str(ended[0].value)
            label = catalog.FRAMEWORK_LABELS.get(framework, framework)
            lines.append((label, scaling_segments(cached[1], levels, doing, unit, tokens)))
        by = "nodes×devices" if plan.nodes > 1 else "devices"
        self.query_one(ScalingView).show(model_id, unit, lines, by)

    def _update_sweep(self, answer: SweepAnswer | None) -> None:
        """A sweep session: the curve of the model being run (or the last run) against the swept axis, per
        framework and setting of the other axes; its best vs best and what each setting buys."""
        model = self.model
        plan = model.plan
        axis = curve_axis(plan.sweep)
        if axis is None:
            return
        model_id = focus_model(model) or plan.models[0]
        tokens = tokens_of(plan, model_id)
        # Each framework's chosen points (one per sequence length where seq-len is swept: a workload, not a
        # setting).
        best = {
            (b.framework, b.point)
            for v in (answer.best if answer else ())
            if v.model == model_id
            for b in (v.base, v.other)
        }
        inference = plan.task == "inference"  # latency p50/p99 beside the throughput
        generate = plan.task == "generate"
        lines: list[CurveLine] = []
        grid = plan.points()
        for i, framework in enumerate(plan.frameworks):
            seen: set[tuple[Point, ...]] = set()
            rests: dict[Point, list[Point]] = {}
            for point in grid:
                rests.setdefault(point.without(axis), []).append(point)
            for rest, points in rests.items():
                effective = tuple(plan.effective(p, framework, model_id) for p in points)
                if effective in seen:  # an axis that changes nothing here: the same runs, said once
                    continue
                seen.add(effective)
                curve = []
                for point, at in zip(points, effective, strict=True):
                    cached = self._cache.get(row_key(framework, model_id, point))
                    if generate:  # issue 34: the batch's tokens/s after the first, what the best is chosen by
                        rate = (
                            cached.row.figure("generation.batch_tokens_per_s") if cached is not None else None
                        )
                    else:
                        rate = cached.row.images_per_s if cached is not None else None
                    p50, p99 = (
                        (cached.row.latency_p50_s, cached.row.latency_p99_s) if cached else (None, None)
                    )
                    latency = (
                        f"{fmt.seconds(p50 * 1000)}/{fmt.seconds(p99 * 1000)} ms"
                        if inference and p50 is not None and p99 is not None
                        else ""
                    )
                    runs = model.cell_runs(framework, model_id, point=point)
                    if rate is not None:
                        text = f"{fmt.rate(rate)} tok/s" if generate else rate_text(rate, tokens, False)
                    elif any(r.status in LIVE for r in runs):
                        text = "running"
                    else:
                        text = "–"
                    curve.append(
                        CurvePoint(str(point.get(axis)), rate, text, (framework, at) in best, latency)
                    )
                said = Point(tuple((a, v) for a, v in rest.items if applies(a, framework, model_id) is None))
                lines.append(CurveLine(framework, said, tuple(curve), fmt.color_for(framework, i)))
        verdicts = [
            (b, verdict_style(b.verdict)) for b in (answer.best if answer else ()) if b.model == model_id
        ]
        unit = "tok/s after the 1st" if generate else "tok/s" if tokens else "img/s"
        self.query_one(SweepView).show(
            model_id,
            axis,
            f"{unit} (latency p50/p99)" if inference else unit,
            plan.frameworks,
            lines,
            verdicts,
            answer.gains if answer else (),
        )

    def _status_line(self) -> Text:
        model, source = self.model, self.source
        started = self.meta.get("started_monotonic")
        now = self._last_t if self.finished else self.now()
        elapsed = clock(now - started) if now is not None and isinstance(started, (int, float)) else "0:00"
        total = len(model.runs)
        done = model.done_runs
        ok = sum(1 for r in model.runs.values() if r.status == "ok")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("benchtui ", style="bold")
        if not self.live:
            speed = f"×{self.speed:g}" if self.speed != float("inf") else "at once"
            text.append(f"replay {speed} · ", style="bold cyan")
        status = source.status
        if self.finished:
            recorded = str(self.meta.get("status") or status)
            shown = recorded if not self.live else status
            if not self.live and status == "interrupted":
                text.append("replay stopped · ", style="magenta")
            text.append(clean(shown.capitalize()), style=status_style(shown, "bold"))
            if model.plan.watch:  # one run: how the command ended
                run = next(iter(model.runs.values()))
                ended = f"{run.status}: {run.reason}" if run.reason else str(run.status)
                text.append(clean(f" · {_watched(run, model.plan)}: {ended} · {elapsed}"))
                return text
            text.append(f" · {ok} of {total} runs ok · {elapsed}")
            return text
        current = model.runs.get(model.current) if model.current else None
        if model.plan.watch and current is not None:
            text.append("Watching ", style="bold")
            text.append(clean(_watched(current, model.plan)))
            if current.current_epoch:
                text.append(f" · epoch {current.current_epoch}")
            stop = "s stops the command" if model.plan.watch.get("command") else "q ends the session"
            text.append(f" · {elapsed} · {stop}")
            return text
        if current is not None:
            text.append(f"Run {done + 1} of {total}: ", style="bold")
            text.append(_label(current.spec.framework, current.spec.model, current.spec.point))
            if model.plan.multi_device:  # a scaling session goes through several counts
                n = current.spec.devices
                on = f"{current.spec.nodes} nodes × " if current.spec.nodes > 1 else ""
                text.append(f" · {on}{n} device{'s' if n > 1 else ''}")
            if model.plan.runs > 1:
                text.append(f" · run {current.spec.index} of {model.plan.runs}")
            if current.phase == "profile":  # --profile: steps captured after the timed epochs
                text.append(" · profiling", style="bold cyan")
        elif model.probing is not None:
            probe = model.probing
            text.append("Finding the largest batch: ", style="bold")
            text.append(f"{_label(probe['framework'], probe['model'])} · batch {probe['batch_size']}")
        elif status == "pending":
            text.append("Starting", style="bold")
        else:
            text.append(f"{done} of {total} runs finished", style="bold")
        text.append(f" · {elapsed}")
        if source.paused:
            what = "playback paused" if not self.live else "paused: the queue waits after this run"
            text.append(f" · {what} (p resumes)", style="bold yellow")
        return text

    def _update_status(self) -> None:
        line = self._status_line()
        where = Text(no_wrap=True, overflow="ellipsis")
        if not self.finished and not self.model.plan.watch:  # a watch runs as long as its command
            where.append(eta_text(self.model, self.now(), self.prior()), style="bold")
            where.append(" · ", style="dim")
        where.append("Session folder ", style="dim")
        where.append(clean(str(self.session_path)))
        combined = Text("\n").join([line, where])
        plain = combined.plain
        if plain != self._status_text:
            self._status_text = plain
            self.query_one("#status", Static).update(combined)

    def now(self) -> float | None:
        """The time on the events' clock: a live session's is this machine's monotonic clock (the engine's
        and its runners'); a replay's goes on from its last event at the replay's pace, and stands still
        while it is paused. So the elapsed time and the ETA move between events, never frozen."""
        if self.live:
            return time.monotonic()
        if self._last_t is None or self.source.paused or self.finished or self.speed == float("inf"):
            return self._last_t
        return self._last_t + (time.monotonic() - self._last_wall) * self.speed

    def on_cpu(self) -> bool:
        """Whether the session trains on the CPU: the runners' word, else the plan's device and the GPUs
        the session found (none known yet: not said)."""
        plan = self.model.plan
        kinds = {r.device_kind for r in self.model.runs.values() if r.device_kind}
        if kinds:
            return kinds == {"cpu"}
        if plan.device == "cpu":
            return True
        gpus = self.meta.get("gpus")
        return plan.device == "auto" and isinstance(gpus, list) and not gpus

    def prior(self) -> dict[tuple[str, str], float] | None:
        """The plan's estimate of one run per cell on a CPU (``eta.prior_seconds``), on the cores the plan
        has: its --threads, else the idle cores measured before the plan, else the machine's (this one's
        usable cores; a replay's recorded host's)."""
        if not self.on_cpu():
            return None
        # The idle cores measured before the plan (the engine's ``cpu_threads``; absent in old sessions, with
        # --threads, before the engine measured): what the plan screen's estimate was made on, too.
        record = self.meta.get("cpu_threads")
        idle = record.get("idle_cores") if isinstance(record, dict) else None
        host = self.meta.get("host") or {}
        count = host.get("cpu_count") if isinstance(host, dict) and not self.live else None
        cores: float = count if isinstance(count, int) and count > 0 else usable_cores()
        if isinstance(idle, (int, float)) and not isinstance(idle, bool) and idle >= 0:
            cores = float(idle)
        key = (self.model.plan.threads, cores)
        if self._prior is None or self._prior[0] != key:
            self._prior = (key, eta.prior_seconds(self.model.plan, cores))
        return self._prior[1]

    def _follow_log(self, log: RunLog) -> None:
        run_id = self.model.current
        if run_id is None:
            started = [r for r in self.model.runs.values() if r.started_t is not None]
            if not started:
                return
            run_id = max(started, key=lambda r: r.started_t or 0.0).spec.run_id
        log.follow(self.source.log_path(run_id), run_id)

    # -- actions ------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        source = self.source
        if self.model.plan.watch and action in ("skip_model", "pause", "resume", "new_plan"):
            return False  # a watch has one run, no queue, and no plan to go back to
        if action in ("stop_run", "skip_model"):
            if self.finished or not self.live:
                return False  # hidden: a replay has no runner; a finished session's footer makes room for "New plan"
            return True if source.runner_active else None
        if action == "back":
            return self.back
        if action == "pause":
            return not self.finished and not source.paused
        if action == "resume":
            return source.paused and not self.finished
        if action == "new_plan":
            return self.live and self.finished
        if action == "toggle_why":
            return bool(self.model.plan.profile)
        return True

    def action_stop_run(self) -> None:
        if not self.live:
            self.notify("This is a replay: there is no runner to stop.")
            return
        run = self.model.current
        self.source.stop_current()
        if run and self.model.plan.watch:
            self.notify("Stopping the command (its whole process group): the run is recorded as stopped.")
        elif run:
            self.notify(f"Stopping {run}: it is recorded as stopped and the queue goes on.", markup=False)

    def action_skip_model(self) -> None:
        if not self.live:
            self.notify("This is a replay: there is nothing to skip.")
            return
        run = self.model.current
        self.source.skip_model()
        if run:
            model = self.model.runs[run].spec.model
            self.notify(f"Skipping {catalog.MODELS[model].label}: its remaining runs will not start.")

    def action_pause(self) -> None:
        self.source.pause()
        self.notify(
            "Playback paused." if not self.live else "Paused: the current run finishes, then the queue waits."
        )
        self.tick()

    def action_resume(self) -> None:
        self.source.resume()
        self.notify("Playback resumed." if not self.live else "Resumed.")
        self.tick()

    def action_toggle_log(self) -> None:
        log = self.query_one("#log", RunLog)
        log.display = not log.display
        self.call_after_refresh(self._fit_strips)  # the log takes or gives back the strips' room
        if log.display:
            self._follow_log(log)
            log.poll()
            self.wake()  # the tick reads the rest of the file, then sleeps again

    def action_toggle_why(self) -> None:
        view = self.query_one(WhyView)
        view.display = not view.display
        if view.display:
            view.update_from(self.model)

    def action_new_plan(self) -> None:
        self.post_message(self.NewPlanRequested(self.model.plan))

    def action_back(self) -> None:
        self.post_message(self.BackRequested())

    def action_export(self) -> None:
        """Ask which format, then write it into the session folder (even mid-run: what is recorded so far)."""
        from benchtui.screens.sessions import ExportChoice, export_in_background

        def chosen(fmt: str | None) -> None:
            if fmt:
                export_in_background(self, self.session_path, fmt)

        self.app.push_screen(ExportChoice(), chosen)

"""The report's types: a table of text, a column of the study, the verdict, the answer and the ``Report``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from benchtui.core import fmt
from benchtui.core.fmt import plural
from benchtui.core.model.cell import CellSummary, FrameworkRatio, SessionSummary
from benchtui.core.model.generation import TokenStep
from benchtui.core.model.status import RunStatus
from benchtui.core.model.why import WhyTable
from benchtui.core.plan.sweep import NO_POINT, Point
from benchtui.core.reporting.model.notes import CI_NOTE
from benchtui.core.reporting.model.telemetry import TelemetryLines

Formatter = Callable[[Any], str]


@dataclass(frozen=True)
class Column:
    """One of the study's figures: its summary key, how each view titles it, and how it is written."""

    key: str
    title: str  # a table of its own: "Mean epoch time (s)"
    short: str  # next to the others: "Mean epoch"
    narrow: str  # a narrow terminal, two lines: "Epoch\nmean"
    unit: str  # "s" or "images/s"
    formatter: Formatter = fmt.seconds

    @property
    def header(self) -> str:
        """The column's header in a table of several figures: "Mean epoch (s)", "Images/s", "p50 (ms)"."""
        return f"{self.short} ({self.unit})" if self.unit in ("s", "ms") else self.short


@dataclass(frozen=True)
class Wording:
    """How a session's samples are named: images, sequences (token models) or samples (both kinds)."""

    plural: str = "images"
    singular: str = "image"
    tokens: bool = False  # a token model ran: tokens/s is shown
    inference: bool = False  # forward only: latency percentiles are shown

    @property
    def narrow(self) -> str:
        """The throughput column's header on a narrow terminal."""
        return {"images": "Img/s", "sequences": "Seq/s"}.get(self.plural, "Smp/s")


@dataclass
class Table:
    """A table of text: a header, rows, each column's alignment ("l" or "r") and a note under it."""

    title: str
    header: list[str]
    rows: list[list[str]]
    align: list[str]
    note: str = ""


@dataclass
class Scaling:
    """One model of a ``--scaling`` session: its table (a row per device count) and each framework's curve in words."""

    model: str  # the model's key (the table's title has its label)
    table: Table
    #: One per framework, "PyTorch: 2 devices: 1.86× one device's throughput, 93% efficient (95% CI 91%–95%)",
    #: and one more for a framework below POOR_EFFICIENCY somewhere.
    lines: list[str]


@dataclass
class Nodes:
    """One cell on several machines (issue 33): a row per node (host, ranks, step time, GPUs) and the lines
    under it (the straggler, or that there is none; the inter-node link)."""

    model: str
    framework: str
    table: Table
    lines: list[str]
    straggler: str = ""  # its straggler line alone ('' when fewer than two nodes were timed)


@dataclass
class Why:
    """One model of a ``--profile`` session: where each framework's step goes, and why one is slower."""

    model: str  # the model's key (the tables' titles have its label)
    table: Table  # a row per category (largest difference first), then the timed step
    #: The sentences: each framework against the first ("tf.keras spends 4.1 ms more per step ...").
    text: list[str]
    #: Each framework's profile in words (profiler, steps, the profiled step and its overhead), the GPU
    #: counters, and the frameworks without a profile.
    lines: list[str]
    top: Table | None  # each framework's longest ops
    #: Each run's trace: (framework label, run id, its path relative to the session folder, its size).
    traces: list[tuple[str, str, str, str]]
    data: WhyTable  # the figures, for the charts (its text cleaned too)


@dataclass(frozen=True)
class Notice:
    """A warning about the session: its kind (for code: "load", "malformed" or a caution's kind) and its text."""

    kind: str
    text: str


@dataclass(frozen=True)
class Problem:
    """A cell that did not simply succeed."""

    model: str
    framework: str
    status: str
    reason: str


class Mark(str, Enum):
    """How a verdict reads, what every medium styles it by (each maps a mark to its own style, in one table)."""

    #: A significant ratio (it names the faster framework): set apart (bold).
    WINNER = "winner"
    #: A ratio whose CI holds 1 (a verdict before "about the same" was said): dim.
    NOT_SIGNIFICANT = "not_significant"
    #: A ratio without a CI (one value per side).
    NO_CI = "no_ci"
    #: The ratio rounds to 1.00× or its CI holds 1: no winner.
    ABOUT_SAME = "about_same"
    #: Other processes kept the machine busy: measured, no winner (a warning).
    UNRELIABLE = "unreliable"
    #: A pair on different devices: no ratio (a warning).
    REFUSED = "refused"
    #: A model without a ratio: a framework has no result (a warning).
    NONE = "none"
    #: One framework ran: its throughput is the answer.
    ALONE = "alone"


#: How an unreliable verdict's text begins (the contract of the summary's ratios).
UNRELIABLE_PREFIX = "unreliable: "


@dataclass(frozen=True)
class Verdict:
    """One line of the answer: a model's verdict (a framework against the first that has results), a pair
    that got no ratio (different devices), or why the model has none.

    ``text`` is the verdict every view prints, its caveats in it: not significant, one run on a side, no
    CI, different networks (parity), different devices.
    """

    model: str  # the model's key
    label: str  # its label, marked when its frameworks build different networks
    text: str
    #: "ratio": two frameworks compared; "unreliable": compared, but other processes kept the machine busy
    #: (no winner: ``unreliable`` says why); "refused": a pair on different devices; "alone": one framework
    #: ran (its throughput is the answer); "none": a framework has no result.
    kind: str = "ratio"
    basis: str = ""  # what the ratio is computed from ("epoch times excluding the first"); "" without one
    significant: bool | None = None  # False: the CI contains 1; None: no CI, or no ratio
    base: str = ""  # the frameworks compared (keys): the ratio is ``framework``'s time over ``base``'s
    framework: str = ""
    ratio: float | None = None  # time per sample of ``framework`` over ``base``'s
    ci: tuple[float, float] | None = None  # its 95% CI
    #: The framework the verdict says is faster (its key); "" where it claims none: about the same, unreliable.
    faster: str = ""
    #: The ratio rounds to 1.00× or its CI holds 1: the text says "about the same", no winner.
    about_same: bool = False
    #: Kind "unreliable": why the machine, not the frameworks, may have decided the ratio (no winner).
    unreliable: str = ""
    #: A sweep's point, in words ('batch 8 · channels-last on'; '' without a sweep): ``label`` ends with it.
    point: str = ""

    @property
    def compared(self) -> bool:
        """Whether this line is a ratio between two frameworks (not a pair refused, nor a model without one,
        nor one measured on a machine too busy to say)."""
        return self.kind == "ratio"

    @property
    def mark(self) -> Mark:
        """How it reads (``Mark``): what each medium styles it by."""
        if self.kind in ("refused", "none", "alone"):
            return Mark(self.kind)
        if self.kind == "unreliable" or self.text.startswith(UNRELIABLE_PREFIX):
            return Mark.UNRELIABLE
        if self.about_same:
            return Mark.ABOUT_SAME
        if self.significant is None:
            return Mark.NO_CI
        return Mark.WINNER if self.significant else Mark.NOT_SIGNIFICANT

    @property
    def highlighted(self) -> bool:
        """Whether a view sets this verdict apart as a winner (bold): a significant ratio that names one."""
        return self.mark is Mark.WINNER and bool(self.faster)

    @property
    def warning(self) -> bool:
        """Whether a view shows this verdict as a warning: no ratio, or one the machine may have decided."""
        return self.kind in ("refused", "none", "unreliable")


@dataclass(frozen=True)
class BestLine:
    """Best vs best for one model (and pair of frameworks), as every view prints it."""

    model: str  # the model's key
    label: str  # its label, marked when its frameworks build different networks
    #: Each side's chosen point in words: 'PyTorch: batch 8 · channels-last on (fastest of 4 points, 162 images/s)'.
    sides: tuple[str, ...]
    #: The verdict between the chosen cells: its text is the summary's (the bias sentence in it).
    verdict: Verdict


@dataclass(frozen=True)
class SweepSeries:
    """One line of a sweep's chart: a framework at one setting of the other axes, a figure at each value of a
    numeric axis: (value, 95% CI low, high) per figure key ("images_per_s", "latency_p50_s", ...)."""

    framework: str
    label: str  # 'PyTorch, channels-last on'
    xs: tuple[int, ...]
    figures: Mapping[str, tuple[tuple[float | None, float | None, float | None], ...]]


@dataclass(frozen=True)
class SweepChart:
    """A model's figures against a numeric axis (batch, seq-len): a series per framework and other setting."""

    model: str
    axis: str
    series: tuple[SweepSeries, ...]


@dataclass
class SweepView:
    """A sweep's sections: the axes, best vs best, each setting's speed-up, and the curves."""

    #: (axis, its values) in the plan's order.
    axes: list[tuple[str, tuple[str, ...]]]
    best: list[BestLine] = field(default_factory=list)
    #: Setting x framework: the speed-up with its CI, or 'no effect'; None when the summary has no gains.
    gains: Table | None = None
    #: Why a setting changes nothing for a framework (under the gains table), once each.
    gains_notes: list[str] = field(default_factory=list)
    #: Per model and numeric axis: the throughput (and latency, for inference) against it.
    curves: list[Table] = field(default_factory=list)
    #: The same curves as data, for the html's charts.
    charts: list[SweepChart] = field(default_factory=list)

    @property
    def axes_text(self) -> str:
        """'batch 4, 8 × channels-last off, on': the grid in words."""
        return " × ".join(f"{a} {', '.join(vs)}" for a, vs in self.axes)


@dataclass(frozen=True)
class Answer:
    """What a report opens with: the verdict of each model, with its CI and caveats, and how to read them."""

    verdicts: list[Verdict] = field(default_factory=list)
    note: str = ""  # how to read the ratios ('' when no model has one)
    unit: str = "image"  # what a ratio is per ("image", "sequence", "sample")
    #: A sweep: best vs best per model (``BestLine``), before the verdicts at each point; [] otherwise.
    best: list[BestLine] = field(default_factory=list)
    #: A sweep's grid in words ('batch 4, 8 × channels-last off, on'); '' without a sweep.
    sweep: str = ""
    #: How to read best vs best (``sweep.best_note``: by throughput, or by tokens/s when generating).
    best_note: str = ""


@dataclass(frozen=True)
class GenerationCurve:
    """One line of the latency-per-token chart: a cell's median latency by token index (``per_token``), or
    a run's mean token latency per generate call over its calls (window timing). Seconds."""

    model: str
    framework: str
    label: str  # 'PyTorch' or 'PyTorch · run 2'
    per_token: bool
    xs: tuple[int, ...]  # token index 2..N, or the generate call's number in the run from 1
    ys: tuple[float, ...]
    first: int = 0  # window timing: the calls of the first epoch (its compile), drawn apart
    run: int = 0  # window timing: the run's number in its cell (0: a cell's curve)
    point: str = ""  # a sweep's point in words ('batch 8'; '' without a sweep): a chart per model and point


@dataclass(frozen=True)
class RunSeries:
    """One run as the html report plots it: its batch times, its epochs and figures, when it ran, and for a
    run that failed or was cut short the end of its log."""

    run_id: str
    framework: str
    model: str
    index: int  # its number in its cell, from 1
    devices: int
    status: RunStatus
    reason: str
    batch_seconds: tuple[float, ...]  # a step each, in order
    batch_epochs: tuple[int, ...]  # each step's epoch
    epochs: tuple[float, ...]  # its epochs' times, in order
    figures: Mapping[str, float | None]  # ``RunState.figures``: the study's figures of this run alone
    started_t: float | None
    ended_t: float | None
    log_tail: str = ""  # the end of its log (failed, stopped or interrupted runs; '' without one)
    point: Point = NO_POINT  # its sweep point (``Point()`` without a sweep)
    #: Each epoch's mean training loss by epoch number (NaN and infinities kept); {} when its runner sent none.
    losses: Mapping[int, float] = field(default_factory=dict)
    #: Each entry of ``epochs``'s epoch number, and its samples as the runner said (None where it did not).
    epoch_numbers: tuple[int, ...] = ()
    epoch_samples: tuple[int | None, ...] = ()
    batch_size: int | None = None  # samples per step over every device (``analysis.batch_size_of``)
    samples_per_epoch: int | None = None  # what its images/s divides by (``analysis.samples_per_epoch``)
    nodes: int = 1  # the machines it trained on (issue 33)
    #: A generate run (issue 34): its generate calls in order, as the parent folded them; () otherwise.
    generation: tuple[TokenStep, ...] = ()


@dataclass(frozen=True)
class Source:
    """What a report's data writers say of the session itself, raw as its files have it (json, csv): its
    folder, session.json's facts, the plan's frameworks and models, and what loading it warned of."""

    path: Path  # the session's folder: a link (a trace, a log) only ever to a file inside it
    meta: Mapping[str, Any]  # session.json
    frameworks: tuple[str, ...]
    models: tuple[str, ...]
    load_warnings: tuple[str, ...] = ()
    devices: int = 1  # the plan's device count: the runs every table's figures come from
    epochs: int = 0  # the plan's epochs per run (a watch: 0, its command's own)
    watch: bool = False  # a ``benchtui watch`` session
    nodes: int = 1  # the plan's nodes (issue 33): with ``devices``, the runs every table's figures come from

    @property
    def folder(self) -> str:
        return self.path.name

    @property
    def cpu_model(self) -> Any:
        """The host's CPU model as session.json recorded it (None before it did)."""
        host = self.meta.get("host")
        return host.get("cpu_model") if isinstance(host, dict) else None


@dataclass
class Report:
    """Everything a writer shows about a session, computed once.

    Its text is safe to show: every string that came from the session's files or its runners
    (names, error messages, versions, labels) has been through ``fmt.clean``, so no control
    character or escape sequence reaches a terminal or a file through it. ``summary`` alone is
    the raw data, for the writers of data (json, csv), which make it safe in their own format.
    Markup (Rich, HTML, Markdown) is still each writer's to escape.
    """

    summary: SessionSummary  # raw: as the session's events say
    source: Source  # raw: the folder and session.json's facts
    title: str
    facts: list[tuple[str, str]]
    environment: list[tuple[str, str]]
    side_by_side: Table
    figure_tables: list[Table]
    max_runs: int
    warmup: Table
    efficiency: Table | None
    efficiency_methods: list[tuple[str, str]]
    peak_sources: list[str]
    #: The summary's verdicts (``ratios``), cleaned.
    ratios: list[FrameworkRatio]
    problems: list[Problem]
    #: The summary's rows, cleaned: one per (model, framework), every figure with its CI and spread.
    rows: list[CellSummary] = field(default_factory=list)
    warnings: list[Notice] = field(default_factory=list)
    #: How the session's samples are named (images, sequences, samples), tokens and inference.
    wording: Wording = field(default_factory=Wording)
    #: Inference sessions: latency percentiles per (model, framework); None for training.
    latency: Table | None = None
    #: Parameters and FLOPs per sample of each framework's network, per model; None when none reported.
    parity: Table | None = None
    #: One sentence per model of the parity table, with the numbers (flagged ones first).
    parity_notes: list[str] = field(default_factory=list)
    #: Data parallel: the plan's device count (1: every table as before, none of the sections below).
    devices: int = 1
    #: A ``--scaling`` session: one per model (throughput, speedup and efficiency at each device count).
    scaling: list[Scaling] = field(default_factory=list)
    #: Rows on several devices: each rank's step time and its GPU's figures; None on one device.
    per_device: Table | None = None
    #: One line per such row: its straggler ratio (the slowest rank's step time over the fastest's).
    per_device_notes: list[str] = field(default_factory=list)
    #: Each framework's data-parallel wiring (engine, all-reduce, buckets, overlap, ...); None when none recorded.
    wiring: Table | None = None
    #: Several machines (issue 33): the plan's nodes, and per cell a row per node with its straggler line.
    nodes: int = 1
    node_views: list[Nodes] = field(default_factory=list)
    #: A ``--profile`` session: one per model with a profile (where a step goes, and why one is slower).
    why: list[Why] = field(default_factory=list)
    #: A ``benchtui watch`` session: the command, its folder and its telemetry in (label, text) lines.
    watch: list[tuple[str, str]] = field(default_factory=list)
    #: What every view opens with: the verdict per model, its caveats with it (``answer``).
    answer: Answer = field(default_factory=Answer)
    #: Under the warm-up table: each cell whose epochs stalled before their first batch (``stall_lines``).
    warmup_notes: list[str] = field(default_factory=list)
    #: A sweep: best vs best, each setting's speed-up and the curves (``SweepView``); None otherwise.
    sweep: SweepView | None = None
    #: Every run of the session, in its order, as the html report plots it (raw: its values as recorded).
    runs: tuple[RunSeries, ...] = ()
    #: Node 0's GPU and host samples as the html's telemetry charts draw them; None: none, or not asked for.
    telemetry: TelemetryLines | None = None
    #: A generate session (issue 34): time to first token and token latency; tokens/s, compile and memory.
    generation: list[Table] = field(default_factory=list)
    #: Its latency-per-token chart's lines (the html's); [] otherwise.
    generation_curves: list[GenerationCurve] = field(default_factory=list)

    def cell_runs(self, framework: str, model: str, point: Point | None = None) -> list[RunSeries]:
        """The runs of a cell at the plan's device count (``SessionModel.cell_runs``); at ``point``, the runs
        that ran there (None: every point's)."""
        return [
            r
            for r in self.runs
            if r.framework == framework
            and r.model == model
            and r.devices == self.source.devices
            and r.nodes == self.source.nodes
            and (point is None or r.point == point)
        ]

    @property
    def study_note(self) -> str:
        """Under the study's tables: what their figures are, and what brackets mean where one holds some."""
        runs = plural(self.max_runs, "run")
        brackets = any(has_brackets(t.rows, 1) for t in [self.side_by_side, *self.figure_tables])
        return f"Mean over up to {runs} per cell" + (f"; {CI_NOTE}" if brackets else ".")

    @property
    def folder(self) -> str:
        """The session folder's name, cleaned (a folder can be renamed by hand to anything)."""
        return fmt.clean(self.source.folder)

    @property
    def status(self) -> str:
        return fmt.clean(self.source.meta.get("status"))


def has_brackets(rows: list[list[str]], skip: int = 1) -> bool:
    """Whether a table's figures (its cells after the first ``skip``, the names) hold an interval in
    brackets: what a note about brackets is written under, and only then."""
    return any(" [" in cell for row in rows for cell in row[skip:])

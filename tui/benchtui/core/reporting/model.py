"""The report of a session, built once and format-neutral: every writer (terminal, md, csv, json, html) renders it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import CellSummary, SessionSummary
from benchtui.core.model.parity import PARITY_MARK, PARITY_TOLERANCE, count_text, marked
from benchtui.core.model.scaling import POOR_EFFICIENCY, STRAGGLER_RATIO
from benchtui.core.model.status import CautionKind
from benchtui.core.model.why import OVERHEAD_WARN, WhyTable, breakdown, top_ops
from benchtui.core.plan.plan import command_text
from benchtui.core.store.session import LoadedSession
from benchtui_runners import catalog

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


#: The study's figures, in its order: the one list every view takes its columns from.
STUDY_COLUMNS: tuple[Column, ...] = (
    Column("mean_epoch_s", "Mean epoch time (s)", "Mean epoch", "Epoch\nmean", "s"),
    Column("first_epoch_s", "First epoch (s)", "First epoch", "Epoch\nfirst", "s"),
    Column(
        "mean_epoch_excl_first_s", "Mean epoch time excluding the first (s)", "Excl. first", "Excl.\n1st", "s"
    ),
    Column("build_s", "Build time (s): construct, move to device, compile", "Build", "Build", "s"),
    Column(
        "images_per_s",
        "Throughput (images/s, excluding the first epoch)",
        "Images/s",
        "Img/s",
        "images/s",
        fmt.rate,
    ),
)
#: The study's four timings (seconds), side by side.
TIMING_COLUMNS = tuple(c for c in STUDY_COLUMNS if c.unit == "s")


def milliseconds(value: float | None) -> str:
    """Seconds shown in milliseconds: '12.34', '1.234', '123.4'."""
    return "–" if value is None else fmt.seconds(value * 1000)


#: Token models: throughput in tokens (samples/s times tokens per sample).
TOKENS_COLUMN = Column(
    "tokens_per_s",
    "Throughput (tokens/s, excluding the first epoch)",
    "Tokens/s",
    "Tok/s",
    "tokens/s",
    fmt.rate,
)
#: Inference: latency per batch after warm-up, as percentiles.
LATENCY_COLUMNS: tuple[Column, ...] = tuple(
    Column(f"latency_{p}_s", f"Latency per batch, {p} (ms)", p, f"{p}\nms", "ms", milliseconds)
    for p in ("p50", "p90", "p99")
)


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


def wording(rows: Sequence[CellSummary]) -> Wording:
    """The words for a session's rows (summary rows: each has ``kind`` and ``task``)."""
    kinds = {str(r.kind or "image") for r in rows} or {"image"}
    inference = any(r.task == "inference" for r in rows)
    if kinds == {"image"}:
        return Wording(inference=inference)
    if kinds == {"tokens"}:
        return Wording("sequences", "sequence", True, inference)
    # Float tensors (a user's own model, a watched command): samples; tokens/s only beside a token model.
    return Wording("samples", "sample", "tokens" in kinds, inference)


def study_columns(words: Wording) -> tuple[Column, ...]:
    """The study's figures in a session's words: images/s becomes sequences/s or samples/s, tokens/s added."""
    if words.plural == "images" and not words.tokens:
        return STUDY_COLUMNS
    throughput = Column(
        "images_per_s",
        f"Throughput ({words.plural}/s, excluding the first epoch)",
        f"{words.plural.capitalize()}/s",
        words.narrow,
        f"{words.plural}/s",
        fmt.rate,
    )
    return (*TIMING_COLUMNS, throughput) + ((TOKENS_COLUMN,) if words.tokens else ())


def flagged_models(summary: SessionSummary) -> set[str]:
    """The models whose frameworks do not build the same network (the summary's parity)."""
    return {str(p["model"]) for p in summary.parity or [] if p.get("flagged")}


def row_flagged(row: CellSummary) -> bool:
    """Whether a summary row carries the parity caution (its model's frameworks build different networks)."""
    return any(str(w.get("kind")) == CautionKind.ARCHITECTURE for w in row.warnings or [])


EFFICIENCY_HEADER = [
    "Model",
    "Framework",
    "FLOPs / step",
    "FLOPs / image",
    "TFLOP/s",
    "% of peak",
    "Peak (dense)",
    "J / image",
]
EFFICIENCY_NOTE = (  # a training session of images; ``efficiency_note`` words any other
    "FLOPs of one training step (forward + loss + backward; convolution and matmul multiply-adds "
    "counted as 2 FLOPs; element-wise ops and the optimizer update not counted), counted by each "
    "framework at the run's batch and image size. FLOP/s (in the unit its size reads in: TFLOP/s, "
    "GFLOP/s): FLOPs per step × the steps of the epochs after the first, over their time (the same data "
    "as images/s). % of peak: of the GPU's dense peak "
    "for the run's precision (NVIDIA datasheets); none on CPU, a MIG slice, a laptop part or an unknown GPU. "
    "J / image: the GPU's energy (NVML's counter) over the epochs after the first, per image; none on CPU."
)
WARMUP_HEADER = [
    "Model",
    "Framework",
    "Warm-up batches (per run)",
    "Warm-up time (s)",
    "First batch (s)",
    "Steady median batch (s)",
    "Steady images/s",
]
LATENCY_TITLE = "Latency per batch (inference: forward only)"
LATENCY_NOTE = (
    "Per batch, after the warm-up detected in each run: the 50th, 90th and 99th percentiles of the "
    "batch times of every run of the cell (ms); throughput is total samples over total time, excluding "
    "the first epoch."
)
WINDOW_NOTE = (
    "Timed by windows of steps (--timing window): a batch's time is its window's mean, so these are "
    "percentiles of window means, narrower than those of single batches; --timing step times every batch."
)
PARITY_TITLE = "Parity: do the frameworks build the same network?"
PARITY_NOTE = (
    "Parameters: all, and trainable (what is compared; BatchNorm statistics are not trainable). "
    "FLOPs per sample as each runner counted them (a training step: forward and backward; inference: "
    f"forward). '{PARITY_MARK}' after a model's name, in any table: its "
    f"frameworks differ by more than {PARITY_TOLERANCE:.0%} in trainable parameters or FLOPs per sample, "
    "so its raw ratio compares different networks (the verdict's 'per FLOP' ratio sets the sizes apart)."
)
WARMUP_NOTE = (
    "Warm-up is detected from each run's batch times: the first batches until a window of them stays "
    "within 10% (plus 3 robust SDs) of the median of the run's second half."
)
SIDE_BY_SIDE_TITLE = "The study's four figures, side by side (seconds)"
#: What brackets mean, in every view that prints them (show, headless, md, html): always the 95% CI.
CI_NOTE = "[in brackets]: the 95% confidence interval (seeded bootstrap over runs, then epochs within runs)."
#: Under the study's tables of a session on several devices: what its batch column says.
DEVICES_NOTE = (
    "Batch on several devices: the per-device batch × devices = the global batch; every figure is the "
    "whole data-parallel job's (throughput over every device)."
)
SCALING_NOTE = (
    "Speedup: throughput at N devices over one device's (the 1-device row is the reference); efficiency: "
    "the speedup over N (100%: linear scaling). Global batch: the per-device batch × N."
)
#: After SCALING_NOTE where the table has an interval to read.
SCALING_CI_NOTE = (
    "[in brackets]: the 95% CI (seeded bootstrap over runs, then epochs, of the seconds per sample at N "
    "devices and at one)."
)
PER_DEVICE_TITLE = "Per device: each rank's step time and its GPU"
#: The per-device note, a sentence per kind of column, each said only where the table has those columns.
PER_DEVICE_RANK_NOTE = "Device i is rank i."
PER_DEVICE_STEP_NOTE = (
    "Step time: the rank's mean time per step, where the framework runs one process "
    "per device (PyTorch); '–' where one process drives every device. vs fastest: its step time over the "
    "fastest rank's; the largest is the straggler ratio (above "
    f"{STRAGGLER_RATIO:.2f}×, one rank holds the others back at every all-reduce)."
)
PER_DEVICE_GPU_NOTE = "GPU util, power: means over the runs' samples; peak memory: the most used on that GPU."
PER_DEVICE_NOTE = " ".join((PER_DEVICE_RANK_NOTE, PER_DEVICE_STEP_NOTE, PER_DEVICE_GPU_NOTE))
WIRING_TITLE = "Data parallel: how each framework wires it"
WIRING_NOTE = "As each framework's runner recorded it, at the plan's device count."
#: The wiring's first rows, in this order; any other key follows, sorted.
WIRING_KEYS = {
    "engine": "Engine",
    "all_reduce": "All-reduce",
    "bucket": "Buckets",
    "overlap": "Overlap",
}
WHY_NOTE = (
    "ms/step: each framework's share of a profiled step (its own profiler, a few steps after the timed "
    "epochs) times its timed step (the same data as its throughput), so a column adds up to the step behind "
    "the verdict's ratio; (%): the share. Difference: the second framework's milliseconds less the first's, "
    "largest first. The profiler's overhead is its profiled step against the timed one: above "
    f"{OVERHEAD_WARN:+.0%}, the profile may not divide the step as it runs untraced."
)
WHY_TOP_NOTE = (
    "The longest ops of each framework's profile: ms/step is the op's share of the profiled step times the "
    "timed step; share: of the profiled step (the mean over the runs that list it); calls per step."
)


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

    @property
    def compared(self) -> bool:
        """Whether this line is a ratio between two frameworks (not a pair refused, nor a model without one,
        nor one measured on a machine too busy to say)."""
        return self.kind == "ratio"

    @property
    def highlighted(self) -> bool:
        """Whether a view sets this verdict apart as a winner (bold): a significant ratio that names one."""
        return self.kind == "ratio" and bool(self.significant) and not self.about_same and bool(self.faster)

    @property
    def warning(self) -> bool:
        """Whether a view shows this verdict as a warning: no ratio, or one the machine may have decided."""
        return self.kind in ("refused", "none", "unreliable")


#: The answer's title in every view (the verdict per model).
ANSWER_TITLE = "The verdict: frameworks compared"
VERDICT_NOTE = (
    "Time per {one}, one framework's over the other's (so the inverse ratio of {plural}/s), from the times "
    "each verdict names; 95% CIs by seeded bootstrap."
)
#: Added to the note when a verdict says so.
ABOUT_SAME_NOTE = (
    "'about the same': the ratio rounds to 1.00× or its CI holds 1, so neither framework is faster."
)
UNRELIABLE_NOTE = (
    "'unreliable': other processes kept the machine's cores busy while a side ran, so the machine, not the "
    "framework, may have decided the ratio; no winner is claimed (the ratio measured follows it, not a "
    "verdict). Run again on an idle machine, or with --threads set to the cores left idle."
)


def ratio_mark(ratio: dict[str, Any]) -> str:
    """A summary's verdict (a ``ratios`` entry) by its mark: "unreliable" (other processes kept the machine
    busy: a warning, no winner), "about_same" (no winner), or "" (a verdict as before issue 30, whose
    summaries lack both keys). What csv writes, and what a view styles by (the app's answer lines)."""
    if ratio.get("unreliable"):
        return "unreliable"
    return "about_same" if ratio.get("about_same") is True else ""


@dataclass(frozen=True)
class Answer:
    """What a report opens with: the verdict of each model, with its CI and caveats, and how to read them."""

    verdicts: list[Verdict] = field(default_factory=list)
    note: str = ""  # how to read the ratios ('' when no model has one)
    unit: str = "image"  # what a ratio is per ("image", "sequence", "sample")


@dataclass
class Report:
    """Everything a writer shows about a session, computed once.

    Its text is safe to show: every string that came from the session's files or its runners
    (names, error messages, versions, labels) has been through ``fmt.clean``, so no control
    character or escape sequence reaches a terminal or a file through it. ``summary`` alone is
    the raw data, for the writers of data (json, csv), which make it safe in their own format.
    Markup (Rich, HTML, Markdown) is still each writer's to escape.
    """

    session: LoadedSession  # for what only some writers need: plots, per-batch rows
    summary: SessionSummary  # raw: as the session's events say
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
    ratios: list[dict[str, Any]]
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
    #: A ``--profile`` session: one per model with a profile (where a step goes, and why one is slower).
    why: list[Why] = field(default_factory=list)
    #: A ``benchtui watch`` session: the command, its folder and its telemetry in (label, text) lines.
    watch: list[tuple[str, str]] = field(default_factory=list)
    #: What every view opens with: the verdict per model, its caveats with it (``answer``).
    answer: Answer = field(default_factory=Answer)
    #: Under the warm-up table: each cell whose epochs stalled before their first batch (``stall_lines``).
    warmup_notes: list[str] = field(default_factory=list)

    @property
    def study_note(self) -> str:
        """Under the study's tables: what their figures are, and what brackets mean where one holds some."""
        runs = plural(self.max_runs, "run")
        brackets = any(has_brackets(t.rows, 1) for t in [self.side_by_side, *self.figure_tables])
        return f"Mean over up to {runs} per cell" + (f"; {CI_NOTE}" if brackets else ".")

    @property
    def folder(self) -> str:
        """The session folder's name, cleaned (a folder can be renamed by hand to anything)."""
        return fmt.clean(self.session.path.name)

    @property
    def status(self) -> str:
        return fmt.clean(self.session.meta.get("status"))


# -- figures as text -----------------------------------------------------------------------
def has_brackets(rows: list[list[str]], skip: int = 1) -> bool:
    """Whether a table's figures (its cells after the first ``skip``, the names) hold an interval in
    brackets: what a note about brackets is written under, and only then."""
    return any(" [" in cell for row in rows for cell in row[skip:])


def with_ci(row: CellSummary, name: str, formatter: Formatter = fmt.seconds) -> str:
    """A figure and its 95% CI in brackets, '3.21 [3.10–3.40]'; brackets hold nothing else anywhere."""
    text = formatter(row.figure(name))
    ci = row.ci_of(name)
    if ci and ci[0] is not None and ci[1] is not None and row.runs >= 1 and ci[1] > ci[0]:
        text += f" [{formatter(ci[0])}–{formatter(ci[1])}]"
    return text


def cell_text(row: CellSummary | None, name: str, formatter: Formatter = fmt.seconds) -> str:
    """A figure with its 95% CI in brackets, or why there is none (``row`` None: a cell not in the summary)."""
    if row is None:
        return "–"
    if row.figure(name) is None:
        status = row.status
        return {"unavailable": "not available", "failed": "failed", "incomplete": "incomplete"}.get(
            status, "–"
        )
    text = with_ci(row, name, formatter)
    if row.status == "failed":
        text += " (some runs failed)"
    return text


def interval_text(value: Any, ci: Any, formatter: Formatter) -> str:
    """A figure and its 95% CI in brackets, as ``with_ci`` writes it, from a value and a [low, high] pair."""
    text = formatter(value)
    if (
        value is not None
        and isinstance(ci, (list, tuple))
        and len(ci) == 2
        and all(isinstance(x, (int, float)) for x in ci)
        and ci[1] > ci[0]
    ):
        text += f" [{formatter(ci[0])}–{formatter(ci[1])}]"
    return text


def times(value: float | None) -> str:
    """A speedup, '1.86×'."""
    return "–" if value is None else f"{value:.2f}×"


def batch_text(row: CellSummary | None) -> str:
    """A row's batch: '16', or on several devices the per-device batch × devices = the global batch, '16 ×4 = 64'
    ('' for a cell not in the summary)."""
    if row is None:
        return ""
    devices = row.devices
    if devices <= 1:
        size = row.batch_size
        return "–" if size is None else str(size)  # None: a watched command that did not say its batch
    return f"{row.batch_size} ×{devices} = {row.global_batch}"


def joules(value: Any) -> str:
    return "–" if value is None else f"{value:.3g} J"


def device_text(device: dict[str, Any]) -> str:
    """'cuda:0 NVIDIA H100 80GB HBM3, 80.0 GiB, compute capability 9.0' from a runner's hello."""
    if not device:
        return "unknown"
    kind = str(device.get("type", "?"))
    head = f"{kind}:{device['index']}" if "index" in device else kind
    parts = [f"{head} {device.get('name', '')}".strip()]
    if device.get("memory_bytes"):
        parts.append(fmt.bytes_(device["memory_bytes"]))
    if device.get("capability"):
        parts.append(f"compute capability {device['capability']}")
    if device.get("threads"):
        parts.append(fmt.plural(device["threads"], "thread"))
    known = {"type", "index", "name", "memory_bytes", "capability", "threads"}
    parts += [f"{k} {v}" for k, v in device.items() if k not in known and v not in (None, "")]
    return ", ".join(parts)


def _join(items: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in items.items() if v not in (None, ""))


def _listed(*parts: Any) -> str:
    return ", ".join(str(x) for x in parts if x)


# -- the pieces ----------------------------------------------------------------------------
def environment(loaded: LoadedSession, summary: SessionSummary) -> list[tuple[str, str]]:
    """(label, text) lines describing where and how the session ran: GPU, driver, versions, settings."""
    meta, plan = loaded.meta, loaded.plan
    items: list[tuple[str, str]] = []
    gpus = meta.get("gpus") or []
    for gpu in gpus:
        mem = fmt.bytes_(gpu.get("memory_total")) if gpu.get("memory_total") else None
        cuda = gpu.get("cuda_driver")
        cuda_text = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda
        items.append(
            (
                f"GPU {gpu.get('index', '')}".strip(),
                _listed(
                    gpu.get("name"),
                    mem,
                    gpu.get("driver") and f"driver {gpu.get('driver')}",
                    cuda_text and f"CUDA driver {cuda_text}",
                    gpu.get("max_sm_clock_mhz") and f"max SM clock {gpu.get('max_sm_clock_mhz')} MHz",
                    gpu.get("power_limit_w") and f"power limit {gpu.get('power_limit_w'):.0f} W",
                ),
            )
        )
    # Clocks, temperature and throttle reasons at the start and the end: did the GPU slow down?
    for when, key in (("start", "gpus"), ("end", "gpus_end")):
        for gpu in meta.get(key) or []:
            throttle = gpu.get("throttle")
            state = _listed(
                gpu.get("sm_clock_mhz") is not None and f"SM clock {gpu['sm_clock_mhz']} MHz",
                gpu.get("temp_c") is not None and f"{gpu['temp_c']} °C",
                throttle is not None and ("throttle: " + (", ".join(throttle) or "none")),
            )
            if state:
                items.append((f"GPU {gpu.get('index', '')} at {when}", state))
    if not gpus:
        items.append(("GPU", "none recorded"))
    items.append(("Telemetry", str(meta.get("telemetry") or "not recorded")))
    host = meta.get("host") or {}
    items.append(
        (
            "Host",
            _listed(
                host.get("hostname"),
                host.get("platform"),
                host.get("python") and f"Python {host.get('python')}",
                host.get("cpu_model"),
                host.get("cpu_count") and f"{host.get('cpu_count')} CPUs",
                host.get("memory_bytes") and f"{fmt.bytes_(host.get('memory_bytes'))} RAM",
            ),
        )
    )
    for fw, env in (summary.frameworks or {}).items():
        label = framework_label(fw)
        versions = env.get("versions") or {}
        items.append((f"{label} versions", _join(versions) or "unknown"))
        items.append((f"{label} device", device_text(env.get("device") or {})))
        settings = env.get("settings") or {}
        items.append((f"{label} settings", settings_text(settings) or "unknown"))
    if plan.watch:  # benchtui watch: no plan, a command (or none), where it ran, what was sampled
        return items + watch_facts(loaded)
    sizes = ", ".join(f"{model_label(m)} {plan.batch_size(m)}" for m in plan.models)
    recorded = (meta.get("plan") or {}).get("timing")  # sessions before --timing recorded none
    timing = f", timing {recorded}" if isinstance(recorded, str) and recorded else ""
    # Token models have no image size: a session of only token models says none.
    tokens_only = bool(plan.models) and all(
        m in catalog.MODELS and catalog.MODELS[m].kind == "tokens" for m in plan.models
    )
    items.append(
        (
            "Plan",
            (
                ("" if tokens_only else f"{plan.image_size}×{plan.image_size} px, ")
                + f"{plural(plan.samples, 'sample')}, {plural(plan.epochs, 'epoch')}, "
                f"{plural(plan.runs, 'run')} per framework and model, order {plan.order}, device {plan.device}, "
                f"data {plan.data}, precision {plan.precision}, compile {compile_text(plan.compile)}, "
                f"{threads_text(plan)}{timing}, cuDNN autotune {'on' if plan.cudnn_autotune else 'off'}, channels_last "
                f"{'on' if plan.channels_last else 'off'}, {plan.num_classes} classes"
                + (f", preset {plan.preset}" if plan.preset else "")
                + workload_text(plan)
                + devices_text(plan)
            ),
        )
    )
    items.append(("Batch sizes", sizes))
    return items


def setting_value(value: Any, key: str = "") -> str:
    """A runner's setting in words: 'on' and 'off' for booleans, 'none', a list joined, a mapping as 'name
    value' pairs (names as words), environment variables (``key`` "env") as NAME=value ('NAME empty')."""
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_value(v) for v in value) or "none"
    if isinstance(value, dict) and key == "env":
        return (
            ", ".join(f"{k}={v}" if v not in ("", None) else f"{k} empty" for k, v in value.items()) or "none"
        )
    if isinstance(value, dict):
        return ", ".join(f"{setting_name(k)} {setting_value(v, str(k))}" for k, v in value.items()) or "none"
    return str(value)


def setting_name(key: Any) -> str:
    """A setting's key as words: 'intra_op_threads' is 'intra op threads'; 'env' is 'environment'."""
    return "environment" if key == "env" else str(key).replace("_", " ")


def settings_text(settings: Any) -> str:
    """A runner's settings in words, 'name: value' each, separated by ' · ' (a value may hold commas and
    semicolons): 'precision: fp32 · tf32 matmul: off · memory policy: counter process peak RSS (host memory),
    environment CUDA_VISIBLE_DEVICES empty'. Not Python's repr of a dict, in any view."""
    if not isinstance(settings, dict):
        return setting_value(settings)
    return " · ".join(f"{setting_name(k)}: {setting_value(v, str(k))}" for k, v in settings.items())


def plural(count: int, noun: str) -> str:
    """'1 run', '3 runs'."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def compile_text(value: Any) -> str:
    """The plan's compile setting in words: 'on', 'off', or "each framework's default" (a session before the
    setting had three values recorded true or false)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "each framework's default" if value in ("default", "", None) else str(value)


def threads_text(plan: Any) -> str:
    """'4 threads' for every framework's ops, or "threads: each framework's default"."""
    threads = getattr(plan, "threads", 0)
    return (
        plural(threads, "thread")
        if isinstance(threads, int) and threads > 0
        else "threads: each framework's default"
    )


#: The environment's lines that ``watch_facts`` makes (``show`` prints them under the table).
WATCH_LABELS = ("Watched", "Folder", "Batch size", "Over the run")


def watch_facts(loaded: LoadedSession) -> list[tuple[str, str]]:
    """A watch session in (label, text) lines: the command, its folder, the hooks' batch, and its telemetry
    over the run (every sample of the file, not only the model's window); [] for a plan's session."""
    plan = loaded.plan
    if not plan.watch:
        return []
    command = plan.watch.get("command") or []
    items = [("Watched", command_text(command) if command else "no command: telemetry only")]
    if command:
        items.append(("Folder", str(plan.watch.get("cwd") or "?")))
        size = plan.batch_sizes.get(catalog.WATCH_MODEL)
        items.append(("Batch size", f"{size} (as the hooks said)" if size else "not known (no timing hooks)"))
    samples = [s for s in loaded.folder.gpu_samples() if s.get("run") is not None]
    return items + telemetry_facts(samples, bool(command))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _numbers(samples: list[dict[str, Any]], pick: Callable[[dict[str, Any]], Any]) -> list[float]:
    out = []
    for sample in samples:
        try:
            value = pick(sample)
        except (KeyError, TypeError, IndexError, AttributeError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value))
    return out


def telemetry_facts(samples: list[dict[str, Any]], command: bool) -> list[tuple[str, str]]:
    """What the sampler saw over a watch's run: the command's CPU and memory (its children's included),
    the machine's CPU, and each GPU's utilization, memory and power: means and peaks."""
    if not samples:
        return [("Over the run", "no sample was recorded")]
    span = float(samples[-1]["t"]) - float(samples[0]["t"])
    parts = [f"{len(samples)} samples over {span:.1f} s"]
    cpu = _numbers(samples, lambda s: s["host"]["cpu_percent"])
    rss = _numbers(samples, lambda s: s["host"]["rss"])
    busy = _numbers(samples, lambda s: s["host"]["system_busy_cores"])
    if command and cpu:
        parts.append(f"the command's CPU {(_mean(cpu) or 0) / 100:.2f} cores mean, {max(cpu) / 100:.2f} peak")
    if command and rss:
        parts.append(f"its memory (RSS) {fmt.bytes_(max(rss))} peak")
    if busy:
        parts.append(f"the machine's CPU {(_mean(busy) or 0):.2f} cores busy mean")
    items = [("Over the run", ", ".join(parts))]
    indices = sorted(
        {g["index"] for s in samples for g in s.get("gpus") or [] if isinstance(g.get("index"), int)}
    )
    for index in indices:
        readings = [g for s in samples for g in s.get("gpus") or [] if g.get("index") == index]
        util = _numbers(readings, lambda g: g["util"])
        mem = _numbers(readings, lambda g: g["mem_used"])
        power = _numbers(readings, lambda g: g["power_w"])
        own = _numbers(readings, lambda g: g["proc_mem"])
        gpu = [
            util and f"utilization {_mean(util):.0f}% mean",
            mem and f"memory {fmt.bytes_(max(mem))} peak",
            own and command and f"the command's {fmt.bytes_(max(own))} peak",
            power and f"power {_mean(power):.0f} W mean",
        ]
        items.append((f"GPU {index} over the run", ", ".join(str(x) for x in gpu if x) or "no reading"))
    return items


def workload_text(plan: Any) -> str:
    """', task inference (forward only), sequence length 128' for the plan line; '' for image training."""
    text = ""
    if getattr(plan, "task", "train") == "inference":
        text += ", task inference (forward only)"
    tokens = [m for m in plan.models if m in catalog.MODELS and catalog.MODELS[m].kind == "tokens"]
    if tokens:
        seq_len = getattr(plan, "seq_len", 0)
        text += f", sequence length {seq_len}" if seq_len else ", sequence length: each model's context"
    return text


def devices_text(plan: Any) -> str:
    """', data parallel on 4 devices (scaling over 1, 2, 4), batch sizes per device' for the plan line; '' on one."""
    if not getattr(plan, "multi_device", False):
        return ""
    ids = getattr(plan, "device_ids", None)
    text = f", data parallel on {plan.devices} devices" + (
        f" (GPUs {', '.join(map(str, ids))})" if ids else ""
    )
    if plan.scaling:
        text += f", scaling over {', '.join(map(str, plan.device_counts()))}"
    if plan.global_batch:
        return text + f", global batch {plan.global_batch} divided among the devices"
    return text + ", batch sizes per device"


def how_it_ran(frameworks: Mapping[str, Any]) -> list[str]:
    """One line per framework: what it compiled with (as resolved), its threads and timing, and
    what in its step waits for the device every step (the runner's ``host_sync_per_step``).

    ``frameworks`` is a summary's ``frameworks`` (versions, device and settings per framework).
    """
    out = []
    for fw, env in frameworks.items():
        settings = env.get("settings") or {}
        parts = [str(settings.get("compile") or "compile not recorded")]
        threads = env.get("threads") if isinstance(env.get("threads"), dict) else {}
        if isinstance(threads.get("text"), str) and threads["text"]:
            # '1 thread per rank × 2 ranks (2 in all)'; said equal when another framework's total is the same
            said = threads["text"]
            same = [
                framework_label(other)
                for other, o in frameworks.items()
                if other != fw
                and isinstance(o, dict)
                and isinstance(o.get("threads"), dict)
                and o["threads"].get("total") == threads.get("total")
                and o["threads"].get("per_process") != threads.get("per_process")
            ]
            if same and isinstance(threads.get("total"), int):
                said += f", the same {threads['total']} in all as {', '.join(same)}"
            parts.append(said)
        elif settings.get("intra_op_threads"):
            parts.append(fmt.plural(settings["intra_op_threads"], "thread"))
        if isinstance(settings.get("timing"), str):
            parts.append(settings["timing"].split(":")[0] + " timing")
        if settings.get("optimizer"):
            parts.append(f"{settings['optimizer']}, {settings.get('loss', '')}".rstrip(", "))
        if settings.get("host_sync_per_step"):
            parts.append(f"waits for the device every step: {settings['host_sync_per_step']}")
        if isinstance(settings.get("unlike_default"), str) and settings["unlike_default"]:
            parts.append(
                settings["unlike_default"]
            )  # what a default script of the framework would do instead
        out.append(f"{framework_label(fw)}: {'; '.join(parts)}")
    return out


def header_facts(loaded: LoadedSession) -> list[tuple[str, str]]:
    meta = loaded.meta
    return [
        ("Session", loaded.path.name),
        ("Status", str(meta.get("status", "?"))),
        ("Started", str(meta.get("started") or "?")),
        ("Finished", str(meta.get("finished") or "never (cut off)")),
    ]


def notices(loaded: LoadedSession, summary: SessionSummary) -> list[Notice]:
    """Load warnings, then per-cell cautions as 'Model · Framework: ...' (parity once per model; a caution
    of several cells once, with its cells: ``cells_text``), then skipped lines."""
    out = [Notice("load", w) for w in loaded.warnings]
    plan = loaded.model.plan
    if plan.epochs == 1 and plan.task == "train" and not plan.watch:
        out.append(
            Notice(
                "one-epoch",
                "one epoch per run: every figure includes the first epoch's warm-up (tracing, compiling, "
                "autotuning), which the study's 'epochs after the first' leaves out; --epochs 2 or more "
                "gives steady-state figures",
            )
        )
    said: set[str] = set()
    rows = summary.rows
    frameworks = list(dict.fromkeys(framework_label(r.framework) for r in rows))
    # A caution of several cells, word for word (a busy machine, every cell): said once, with its cells.
    shared: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row in rows:
        for w in row.warnings or []:
            if str(w.get("kind")) != CautionKind.ARCHITECTURE:
                key = (str(w.get("kind", "caution")), str(w["message"]))
                shared.setdefault(key, []).append((model_label(row.model), framework_label(row.framework)))
    for row in rows:
        for w in row.warnings or []:
            if str(w.get("kind")) == CautionKind.ARCHITECTURE:
                # Once for the model: the sentence names every framework and begins with the model.
                if w["message"] not in said:
                    said.add(w["message"])
                    out.append(Notice(str(w["kind"]), w["message"]))
                continue
            key = (str(w.get("kind", "caution")), str(w["message"]))
            if key in shared:
                out.append(Notice(key[0], f"{cells_text(shared.pop(key), frameworks)}: {key[1]}"))
    if summary.malformed_lines:
        out.append(
            Notice(
                "malformed",
                f"{summary.malformed_lines} malformed event line(s) were skipped during the runs",
            )
        )
    return out


def problems(summary: SessionSummary) -> list[Problem]:
    """Every cell that did not simply succeed, with why."""
    return [
        Problem(model_label(r.model), framework_label(r.framework), r.status, r.reason or "")
        for r in summary.rows
        if r.status != "ok" or r.reason
    ]


def cells_text(cells: list[tuple[str, str]], frameworks: list[str]) -> str:
    """Cells (model label, framework label) in few words: 'ResNet50 · PyTorch' for one; for several, by
    model, a model whose every framework is there by its name alone: '14 cells: ResNet50, DenseNet121
    (every framework); NASNet · tf.keras'."""
    if len(cells) == 1:
        return f"{cells[0][0]} · {cells[0][1]}"
    by_model: dict[str, list[str]] = {}
    for model, framework in cells:
        by_model.setdefault(model, []).append(framework)
    whole = [m for m, fws in by_model.items() if len(frameworks) > 1 and set(frameworks) <= set(fws)]
    parts = [", ".join(whole) + " (every framework)"] if whole else []
    parts += [f"{m} · {', '.join(fws)}" for m, fws in by_model.items() if m not in whole]
    return f"{len(cells)} cells: " + "; ".join(parts)


def grouped_problems(problems: list[Problem], frameworks: list[str]) -> list[tuple[str, str, str]]:
    """(cells, status, reason): the cells that did not simply succeed, those with the same status and reason
    said once ('session interrupted before this run' once, not once a cell); ``frameworks``: the labels of
    the session's frameworks, in order."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for p in problems:
        groups.setdefault((p.status, p.reason), []).append((p.model, p.framework))
    return [(cells_text(cells, frameworks), status, reason) for (status, reason), cells in groups.items()]


def _verdict_none(cells: list[CellSummary], words: Wording) -> str:
    """Why a model has no verdict: one framework only (its throughput, then), or which has no result."""
    measured = [r for r in cells if r.runs and r.images_per_s is not None]
    label = framework_label
    if len(cells) == 1:
        row = cells[0]
        if measured:
            rate = with_ci(row, "images_per_s", fmt.rate)
            return f"{label(row.framework)} only: {rate} {words.plural}/s; no other framework to compare with"
        return f"no result: {label(row.framework)} {row.status}"
    missing = [r for r in cells if r not in measured]
    if not missing:
        return "no verdict: no times to compare"
    statuses = {str(r.status or "no result") for r in missing}
    if not measured and len(statuses) == 1:
        return f"no verdict: every framework {statuses.pop()}"
    said = ", ".join(f"{label(r.framework)} {r.status or 'no result'}" for r in missing)
    alone = [label(r.framework) for r in measured]
    if len(alone) == 1:
        return f"no verdict: {said}; {alone[0]} has no framework with results to compare with"
    return f"no verdict: {said}"


def answer(given: SessionSummary | Mapping[str, Any]) -> Answer:
    """The verdict of each model of a summary (in the plan's order), the text every view prints, its
    caveats in it; a pair that ran on different devices says so; a model without a verdict says why
    (one framework only: its throughput). Its text is cleaned (``fmt.clean``): the end of a headless run
    gives the engine's summary, not a report."""
    summary = SessionSummary.of(given)
    rows = summary.rows
    words = wording(rows)
    flagged = flagged_models(summary)
    ratios = [r for r in summary.ratios or [] if isinstance(r, dict)]
    refused = [r for r in summary.refused_ratios or [] if isinstance(r, dict)]
    out: list[Verdict] = []
    for model in dict.fromkeys(str(r.model) for r in rows):
        label = fmt.clean(marked(model_label(model), model in flagged))
        mine = [r for r in ratios if r["model"] == model]
        for r in mine:
            low, high = r.get("ci_low"), r.get("ci_high")
            # Sessions before the marks have neither key: a ratio as it always was.
            reason = r.get("unreliable")
            reason = fmt.clean(reason) if isinstance(reason, str) and reason else ""
            about_same = r.get("about_same") is True and not reason
            faster = r.get("faster_framework")
            out.append(
                Verdict(
                    model=fmt.clean(model),
                    label=label,
                    text=fmt.clean(r.get("text", "")),
                    kind="unreliable" if reason else "ratio",
                    basis=fmt.clean(r.get("basis_label", "")),
                    significant=r.get("significant"),
                    base=fmt.clean(r.get("base", "")),
                    framework=fmt.clean(r["framework"]),
                    ratio=r.get("ratio") if isinstance(r.get("ratio"), (int, float)) else None,
                    ci=(low, high)
                    if isinstance(low, (int, float)) and isinstance(high, (int, float))
                    else None,
                    faster="" if reason or about_same or not isinstance(faster, str) else fmt.clean(faster),
                    about_same=about_same,
                    unreliable=reason,
                )
            )
        no_ratio = [r for r in refused if r["model"] == model]
        out += [Verdict(fmt.clean(model), label, fmt.clean(r.get("text", "")), "refused") for r in no_ratio]
        if not mine and not no_ratio:
            cells = [r for r in rows if r.model == model]
            text = _verdict_none(cells, words)
            kind = "alone" if len(cells) == 1 and not text.startswith("no ") else "none"
            out.append(Verdict(fmt.clean(model), label, fmt.clean(text), kind))
    ratios_shown = any(v.kind in ("ratio", "unreliable") for v in out)
    note = VERDICT_NOTE.format(one=words.singular, plural=words.plural) if ratios_shown else ""
    if any(v.about_same for v in out):
        note += " " + ABOUT_SAME_NOTE
    if any(v.kind == "unreliable" for v in out):
        note += " " + UNRELIABLE_NOTE
    return Answer(out, note, words.singular)


def _cells(summary: SessionSummary) -> dict[tuple[str, str], CellSummary]:
    return {(r.model, r.framework): r for r in summary.rows}


def _figure(row: CellSummary | None, key: str) -> Any:
    """A cell's figure by its summary key (None: no such cell)."""
    return None if row is None else row.figure(key)


def _figure_values(row: CellSummary | None, key: str) -> list[Any]:
    """A cell's figure and its CI bounds: what its column's decimals are chosen from."""
    if row is None:
        return [None]
    return [row.figure(key), *(row.ci_of(key) or [])]


def column_formatter(column: Column, values: Any) -> Formatter:
    """``column``'s formatter with one number of decimals for the column of ``values`` (its figures and
    their bounds): '12.640' above '0.704', not '12.64'; a formatter of another kind as it is."""
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if column.formatter is fmt.rate:
        return fmt.rate_column(values)
    if column.formatter is fmt.seconds:
        return fmt.seconds_column(values)
    if column.formatter is milliseconds:
        inner = fmt.seconds_column(v * 1000 for v in values)
        return lambda value: "–" if value is None else inner(value * 1000)
    return column.formatter


def side_by_side(plan: Any, summary: SessionSummary) -> Table:
    """The study's four timings next to each other: one row per model, figure x framework columns (s)."""
    cells = _cells(summary)
    header = ["Model", "Batch"] + [
        f"{col.short} · {framework_label(fw)}" for col in TIMING_COLUMNS for fw in plan.frameworks
    ]
    rows = []
    flagged = flagged_models(summary)
    formats = {  # one number of decimals per column
        (col.key, fw): column_formatter(col, [_figure(cells.get((m, fw)), col.key) for m in plan.models])
        for col in TIMING_COLUMNS
        for fw in plan.frameworks
    }
    for m in plan.models:
        sizes = sorted({batch_text(cells.get((m, fw))) for fw in plan.frameworks} - {""})
        row = [marked(model_label(m), m in flagged), "/".join(sizes)]
        for col in TIMING_COLUMNS:
            for fw in plan.frameworks:
                cell = cells.get((m, fw))
                value = _figure(cell, col.key)
                text = formats[(col.key, fw)]
                row.append(text(value) if value is not None else cell_text(cell, col.key, text))
        rows.append(row)
    return Table(SIDE_BY_SIDE_TITLE, header, rows, ["l", "r"] + ["r"] * (len(header) - 2))


def figure_tables(plan: Any, summary: SessionSummary) -> list[Table]:
    """One table per study figure: a row per model, a column per framework, each figure with its CI.

    Throughput is in the session's words (images, sequences or samples per second), and token
    models add a table of tokens/s.
    """
    cells = _cells(summary)
    header = ["Model"] + [framework_label(fw) for fw in plan.frameworks]
    align = ["l"] + ["r"] * len(plan.frameworks)
    flagged = flagged_models(summary)
    tables = []
    for col in study_columns(wording(summary.rows)):
        formats = {  # one number of decimals per column: its figures' and their intervals'
            fw: column_formatter(
                col, [v for m in plan.models for v in _figure_values(cells.get((m, fw)), col.key)]
            )
            for fw in plan.frameworks
        }
        rows = [
            [marked(model_label(m), m in flagged)]
            + [cell_text(cells.get((m, fw)), col.key, formats[fw]) for fw in plan.frameworks]
            for m in plan.models
        ]
        tables.append(Table(col.title, header, rows, align))
    return tables


def latency_table(summary: SessionSummary) -> Table | None:
    """Inference: latency per batch (p50, p90, p99, ms) and throughput per (model, framework); None for training."""
    words = wording(summary.rows)
    if not words.inference:
        return None
    flagged = flagged_models(summary)
    header = ["Model", "Framework", "Batch"] + [c.header for c in LATENCY_COLUMNS]
    header += [f"{words.plural.capitalize()}/s"] + (["Tokens/s"] if words.tokens else [])
    rows = []
    every = summary.rows
    formats = {  # one number of decimals per column
        c.key: column_formatter(c, [v for r in every for v in _figure_values(r, c.key)])
        for c in (*LATENCY_COLUMNS, STUDY_COLUMNS[-1], TOKENS_COLUMN)
    }
    for row in every:
        cells = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
            str(row.batch_size),
        ]
        cells += [cell_text(row, c.key, formats[c.key]) for c in LATENCY_COLUMNS]
        cells.append(cell_text(row, "images_per_s", formats["images_per_s"]))
        if words.tokens:
            cells.append(cell_text(row, "tokens_per_s", formats["tokens_per_s"]))
        rows.append(cells)
    windows = any(r.timing == "window" for r in summary.rows)
    note = LATENCY_NOTE + (" " + WINDOW_NOTE if windows else "")
    return Table(LATENCY_TITLE, header, rows, ["l", "l"] + ["r"] * (len(header) - 2), note)


def parity_table(summary: SessionSummary) -> tuple[Table | None, list[str]]:
    """Each framework's network per model (source, parameters, FLOPs per sample) and how far apart they are.

    Returns the table (None when no model has two frameworks that reported) and one sentence per
    model, flagged models first: the sentence every view prints with the numbers.
    """
    entries = list(summary.parity or [])
    if not entries:
        return None, []
    words = wording(summary.rows)
    header = [
        "Model",
        "Framework",
        "Source",
        "Parameters",
        "Trainable",
        f"FLOPs / {words.singular}",
        "Differs by",
    ]
    rows = []
    for entry in entries:
        parts = []
        if entry.get("params_diff") is not None:
            what = "trainable" if entry.get("params_compared") == "trainable_params" else "parameters"
            parts.append(f"{what} {entry['params_diff']:.1%}")
        if entry.get("flops_diff") is not None:
            parts.append(f"FLOPs {entry['flops_diff']:.1%}")
        differs = ", ".join(parts) or "–"
        label = marked(model_label(entry["model"]), bool(entry.get("flagged")))
        for fw, ident in (entry.get("frameworks") or {}).items():
            rows.append(
                [
                    label,
                    framework_label(fw),
                    str(ident.get("source") or "–"),
                    count_text(ident.get("params")),
                    count_text(ident.get("trainable_params")),
                    fmt.flops(ident.get("flops_per_sample")),
                    differs,
                ]
            )
    notes = [e["text"] for e in entries if e.get("flagged")] + [
        e["text"] for e in entries if not e.get("flagged")
    ]
    return Table(PARITY_TITLE, header, rows, ["l", "l", "l", "r", "r", "r", "l"], PARITY_NOTE), notes


def scaling_views(summary: SessionSummary) -> list[Scaling]:
    """A ``--scaling`` session, per model: a row per device count with each framework's global batch,
    throughput, speedup and efficiency (95% CIs), and each framework's curve in words; [] otherwise.

    The global batch is one column when every framework has the same at every count, else one per framework.
    """
    curves = [c for c in summary.scaling or [] if isinstance(c, dict) and c.get("points")]
    if not curves:
        return []
    words = wording(summary.rows)
    flagged = flagged_models(summary)
    out = []
    for model in dict.fromkeys(str(c["model"]) for c in curves):
        mine = [c for c in curves if c["model"] == model]
        points = {str(c["framework"]): {p["devices"]: p for p in c["points"]} for c in mine}
        counts = sorted({n for by_count in points.values() for n in by_count})
        batches = {
            n: {by_count[n].get("global_batch") for by_count in points.values() if n in by_count}
            for n in counts
        }
        shared = all(len(b) == 1 for b in batches.values())
        header = ["Devices"] + (["Global batch"] if shared else [])
        for fw in points:
            label = framework_label(fw)
            header += [] if shared else [f"Global batch · {label}"]
            header += [
                f"{words.plural.capitalize()}/s · {label}",
                f"Speedup · {label}",
                f"Efficiency · {label}",
            ]
        rows = []
        for n in counts:
            row = [str(n)] + ([str(next(iter(batches[n])))] if shared else [])
            for by_count in points.values():
                point = by_count.get(n)
                if point is None:
                    row += ([] if shared else ["–"]) + ["–"] * 3
                    continue
                row += [] if shared else [str(point.get("global_batch", "–"))]
                row.append(interval_text(point.get("images_per_s"), point.get("images_per_s_ci"), fmt.rate))
                if n == 1:  # the reference: its ratio to itself is 1 by definition, not a measurement
                    reference = point.get("speedup") is not None
                    row += ["1.00×", "100%"] if reference else ["–", "–"]
                    continue
                row.append(interval_text(point.get("speedup"), point.get("speedup_ci"), times))
                row.append(interval_text(point.get("efficiency"), point.get("efficiency_ci"), fmt.percent))
            rows.append(row)
        lines = []
        for curve in mine:
            label = framework_label(str(curve["framework"]))
            text = (
                str(curve.get("text") or "")
                or "no speedup measured (no successful run at one device, or at more)"
            )
            lines.append(f"{label}: {text}")
            poor = [
                p
                for p in curve["points"]
                if p["devices"] > 1
                and isinstance(p.get("efficiency"), (int, float))
                and p["efficiency"] < POOR_EFFICIENCY
            ]
            if poor:
                at = ", ".join(f"{p['devices']} devices ({fmt.percent(p['efficiency'])})" for p in poor)
                lines.append(
                    f"{label}: below {POOR_EFFICIENCY:.0%} efficient at {at}: look for a straggler (the per-device "
                    "table), an input pipeline that cannot feed every device, or communication that does not overlap."
                )
        title = (
            f"Scaling: {marked(model_label(model), model in flagged)} on {counts[0]} to {counts[-1]} devices"
        )
        align = ["r"] * len(header)
        note = SCALING_NOTE + (f" {SCALING_CI_NOTE}" if has_brackets(rows, 1) else "")
        out.append(Scaling(model, Table(title, header, rows, align, note), lines))
    return out


def per_device_table(summary: SessionSummary) -> tuple[Table | None, list[str]]:
    """Rows on several devices: a row per device (rank, GPU, step time, vs the fastest, GPU util, power,
    peak memory), and one line per cell with its straggler ratio. (None, []) when no row has several.

    Columns nobody has are left out: step times on a framework that drives every device from one
    process, GPU figures on a CPU.
    """
    several = [
        r
        for r in summary.rows
        if r.devices > 1 and any(e.step_s is not None or e.gpu is not None for e in r.per_device or ())
    ]
    if not several:
        return None, []
    entries = [e for r in several for e in r.per_device or ()]
    steps = any(e.step_s is not None for e in entries)
    gpus = any(
        x is not None
        for e in entries
        if e.gpu is not None
        for x in (e.gpu.index, e.gpu.util, e.gpu.power_w, e.gpu.mem_max)
    )
    header = ["Model", "Framework", "Rank"] + (["GPU"] if gpus else [])
    header += ["Step time (ms)", "vs fastest"] if steps else []
    header += ["GPU util", "Power", "Peak memory"] if gpus else []
    flagged = flagged_models(summary)
    rows, lines = [], []
    for row in several:
        names = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
        ]
        per = row.per_device or ()
        fastest = min((e.step_s for e in per if e.step_s is not None), default=None)
        for entry in per:
            gpu = entry.gpu
            cells = [*names, str(entry.device)]
            if gpus:
                cells.append("–" if gpu is None or gpu.index is None else str(gpu.index))
            if steps:
                step = entry.step_s
                cells.append(milliseconds(step))
                cells.append(times(step / fastest) if step is not None and fastest else "–")
            if gpus:
                util, power = (gpu.util, gpu.power_w) if gpu is not None else (None, None)
                cells.append("–" if util is None else f"{util:.0f}%")
                cells.append("–" if power is None else f"{power:.0f} W")
                cells.append(fmt.bytes_(gpu.mem_max if gpu is not None else None))
            rows.append(cells)
        ratio = row.straggler
        if isinstance(ratio, (int, float)):
            slow = ratio >= STRAGGLER_RATIO
            lines.append(
                f"{model_label(row.model)} · {framework_label(row.framework)}: straggler ratio {ratio:.2f}× "
                "(the slowest rank's step time over the fastest's)"
                + (f": above {STRAGGLER_RATIO:.2f}×, a straggler holds every step back" if slow else "")
            )
    align = ["l", "l"] + ["r"] * (len(header) - 2)
    note = " ".join(
        [PER_DEVICE_RANK_NOTE]
        + ([PER_DEVICE_STEP_NOTE] if steps else [])
        + ([PER_DEVICE_GPU_NOTE] if gpus else [])
    )
    title = PER_DEVICE_TITLE if gpus else "Per device: each rank's step time"
    return Table(title, header, rows, align, note), lines


def _wiring_value(value: Any) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "–"
    if isinstance(value, dict):
        return _join(value) or "–"
    return str(value)


def wiring_table(summary: SessionSummary, frameworks: list[str]) -> Table | None:
    """Each framework's data-parallel wiring side by side: a row per setting (engine, all-reduce, buckets,
    overlap, then the rest, sorted), a column per framework; None when no runner recorded one."""
    records = summary.distributed or {}
    if not isinstance(records, dict):
        return None
    order = [fw for fw in frameworks if fw in records] + [fw for fw in records if fw not in frameworks]
    order = [fw for fw in order if isinstance(records[fw], dict)]
    if not order:
        return None
    keys = [str(k) for fw in order for k in records[fw]]
    rest = sorted(set(keys) - set(WIRING_KEYS))
    rows = []
    for key in [k for k in WIRING_KEYS if k in keys] + rest:
        label = WIRING_KEYS.get(key) or key.replace("_", " ").capitalize()
        rows.append([label] + [_wiring_value(records[fw].get(key)) for fw in order])
    header = ["Setting"] + [framework_label(fw) for fw in order]
    return Table(WIRING_TITLE, header, rows, ["l"] * len(header), WIRING_NOTE)


def why_views(summary: SessionSummary) -> list[Why]:
    """A ``--profile`` session, per model: each framework's step time by category with the differences,
    the sentences, each framework's profile in words, the counters, its longest ops and traces; [] otherwise."""
    flagged = flagged_models(summary)
    out = []
    for entry in summary.why or []:
        data = WhyTable.from_dict(fmt.clean_tree(entry))  # its text cleaned: the charts show it too
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


#: An epoch whose wait before its first batch is at least this share of the epoch's time, and at least
#: STALL_MIN_S, is said under the warm-up table: an epoch-start stall (a data iterator rebuilt, a thread
#: pool started anew), not a slow step.
STALL_SHARE = 0.2
STALL_MIN_S = 0.1
#: The warm-up table's column of each epoch's wait before its first batch (rows that recorded it).
STALL_HEADER = "Before first batch, per epoch (s)"


def _stalls(row: CellSummary) -> list[float | None]:
    """A row's ``to_first_batch_s``: one per epoch (None where unknown); [] when its runners sent none."""
    values = row.to_first_batch_s
    if values is None:
        return []
    return [
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
        for v in values
    ]


def _epoch_time(row: CellSummary, epoch: int, epoch_times: dict[int, float] | None) -> float | None:
    """Epoch ``epoch``'s time for a row: its runs' mean when known, else the first epoch's or the mean of
    the later ones (the summary's figures)."""
    if epoch_times and isinstance(epoch_times.get(epoch), (int, float)):
        return float(epoch_times[epoch])
    value = row.first_epoch_s if epoch == 1 else row.mean_epoch_excl_first_s
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def stall_lines(
    summary: SessionSummary, epoch_times: dict[tuple[str, str], dict[int, float]] | None = None
) -> list[str]:
    """One sentence per cell with an epoch-start stall: 'ResNet50 · tf.keras: epoch 2: 4.90 s before its
    first batch (47% of its 10.4 s); epoch 4: 4.70 s (49% of its 9.60 s)'. ``epoch_times``: per (model,
    framework), each epoch's mean time over the cell's ok runs."""
    out = []
    for row in summary.rows:
        times_of = (epoch_times or {}).get((str(row.model), str(row.framework)))
        said: list[str] = []
        for epoch, wait in enumerate(_stalls(row), start=1):
            whole = _epoch_time(row, epoch, times_of)
            if wait is None or whole is None:
                continue
            whole = whole if wait <= whole else wait + whole  # an epoch's time holds its wait (the runners')
            if wait < STALL_MIN_S or wait < STALL_SHARE * whole:
                continue
            share = f"{wait / whole:.0%} of its {fmt.seconds(whole)} s"
            said.append(
                f"epoch {epoch}: {fmt.seconds(wait)} s before its first batch ({share})"
                if not said
                else f"epoch {epoch}: {fmt.seconds(wait)} s ({share})"
            )
        if said:
            out.append(f"{model_label(row.model)} · {framework_label(row.framework)}: " + "; ".join(said))
    if out:
        out.append(
            f"An epoch that waits {STALL_SHARE:.0%} or more of its time before its first batch stalls at its "
            "start (the data iterator built anew, a thread pool started or resized), not in its steps."
        )
    return out


def verdict_basis_text(summary: SessionSummary, words: Wording) -> str:
    """Which throughput the verdicts use, said under the warm-up table beside its steady figures."""
    ratios = [r for r in summary.ratios or [] if isinstance(r, dict)]
    bases = [b for b in dict.fromkeys(str(r.get("basis_label") or "") for r in ratios) if b]
    steady = f"Steady {words.plural}/s: from the batch times after the warm-up."
    if not bases:
        return steady
    if bases == ["batch times after warm-up"]:
        return f"{steady} The verdict uses these batch times after the warm-up."
    return (
        f"{steady} The verdict uses {' and '.join(bases)} (the throughput table's {words.plural}/s), "
        "not these steady figures."
    )


def warmup_table(
    summary: SessionSummary, epoch_times: dict[tuple[str, str], dict[int, float]] | None = None
) -> Table:
    """Per cell: the warm-up detected in each run's batch times, the steady state after it, and where the
    runners recorded it each epoch's wait before its first batch. Each column's figures have one number of
    decimals (``fmt.seconds_column``). ``epoch_times`` as ``stall_lines`` takes it."""
    words = wording(summary.rows)
    stalls = any(_stalls(r) for r in summary.rows)
    header = WARMUP_HEADER[:-1] + [f"Steady {words.plural}/s"] + (["Steady tokens/s"] if words.tokens else [])
    if stalls:
        header.insert(5, STALL_HEADER)
    flagged = flagged_models(summary)
    shown = [r for r in summary.rows if r.warmup_batches or _stalls(r)]
    warm = fmt.seconds_column(s for r in shown for s in r.warmup_s or [])
    first = fmt.seconds_column(r.time_to_first_batch_s for r in shown)
    median = fmt.seconds_column(((r.batch.median if r.batch is not None else None) for r in shown), 4)
    wait = fmt.seconds_column(v for r in shown for v in _stalls(r))
    rate = fmt.rate_column(r.steady_images_per_s for r in shown)
    tokens = fmt.rate_column(r.steady_tokens_per_s for r in shown)
    rows = []
    for row in shown:
        cuts = row.warmup_batches
        cells = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
            ", ".join(str(c) for c in cuts) or "–",
            ", ".join(warm(s) for s in row.warmup_s or []) or "–",
            first(row.time_to_first_batch_s),
            median(row.batch.median if row.batch is not None else None),
            rate(row.steady_images_per_s),
        ]
        if stalls:
            cells.insert(5, ", ".join(wait(v) for v in _stalls(row)) or "–")
        if words.tokens:
            cells.append(tokens(row.steady_tokens_per_s))
        rows.append(cells)
    note = WARMUP_NOTE + " " + verdict_basis_text(summary, words)
    if stalls:
        note += (
            f" {STALL_HEADER}: each epoch's seconds from its start to its first batch's step (the mean over "
            "the cell's runs), epoch 1 first."
        )
    return Table("Warm-up and steady state", header, rows, ["l", "l"] + ["r"] * (len(header) - 2), note)


def efficiency_table(summary: SessionSummary) -> Table | None:
    """FLOPs, achieved TFLOP/s, % of peak and energy per (model, framework); None when nothing was counted."""
    rows = summary.rows
    if not any(
        r.flops_per_step is not None or r.flops_reason or r.joules_per_image is not None for r in rows
    ):
        return None
    out = []
    words = wording(rows)
    flagged = flagged_models(summary)
    unit = flop_unit(rows)
    for row in rows:
        names = [
            marked(model_label(row.model), row.model in flagged),
            framework_label(row.framework),
        ]
        tflops = cell_text(row, "achieved_tflops", unit.text)
        if row.flops_per_step is None:
            why = row.flops_reason or {"ok": "not counted"}.get(row.status, "–")
            out.append([*names, why, "–", tflops, "–", "–", joules(row.joules_per_image)])
            continue
        out.append(
            [
                *names,
                fmt.flops(row.flops_per_step),
                fmt.flops(row.flops_per_image),
                tflops,
                fmt.percent(row.peak_fraction),
                "–" if row.peak_tflops is None else f"{fmt.tflops(row.peak_tflops)} TFLOP/s",
                joules(row.joules_per_image),
            ]
        )
    header = [h.replace("image", words.singular).replace("TFLOP/s", unit.name) for h in EFFICIENCY_HEADER]
    return Table("Compute efficiency", header, out, ["l", "l"] + ["r"] * 6, efficiency_note(words))


def flop_unit(rows: Sequence[CellSummary]) -> fmt.FlopUnit:
    """The one unit of a table's achieved FLOP rates (its rows' ``achieved_tflops``, CIs included): the
    one their size reads in ('6.07 GFLOP/s' on a CPU, not '0.00607 TFLOP/s'); with none, the device's."""
    values = [row.achieved_tflops for row in rows]
    values += [v for row in rows for v in row.ci_of("achieved_tflops") or ()]
    if not any(isinstance(v, (int, float)) for v in values):  # none counted: the device's unit, as the app's
        kinds = {row.device_kind for row in rows} - {None}
        return fmt.device_flop_unit(cpu=kinds == {"cpu"})
    return fmt.flop_unit(values)


def efficiency_note(words: Wording) -> str:
    """The efficiency table's note in the session's words: a training or an inference step, per image or sample."""
    if words == Wording():
        return EFFICIENCY_NOTE
    step = (
        "FLOPs of one inference step (forward only; convolution and matmul multiply-adds counted as 2 FLOPs; "
        "element-wise ops not counted)"
        if words.inference
        else "FLOPs of one training step (forward + loss + backward; convolution and matmul multiply-adds "
        "counted as 2 FLOPs; element-wise ops and the optimizer update not counted)"
    )
    size = {"images": "image size", "sequences": "sequence length"}.get(
        words.plural, "image size or sequence length"
    )
    one = words.singular
    return (
        f"{step}, counted by each framework at the run's batch and {size}. FLOP/s (in the unit its size reads "
        f"in: TFLOP/s, GFLOP/s): FLOPs per step × the steps of the epochs after the first, over their time (the "
        f"same data as {words.plural}/s). % of peak: of the "
        "GPU's dense peak for the run's precision (NVIDIA datasheets); none on CPU, a MIG slice, a laptop part "
        f"or an unknown GPU. J / {one}: the GPU's energy (NVML's counter) over the epochs after the first, per "
        f"{one}; none on CPU."
    )


def efficiency_methods(summary: SessionSummary) -> list[tuple[str, str]]:
    """(framework label, how its FLOPs were counted), once per framework."""
    seen: dict[str, str] = {}
    for row in summary.rows:
        if row.flops_method:
            seen.setdefault(framework_label(row.framework), row.flops_method)
    return list(seen.items())


# -- text made safe ----------------------------------------------------------------------------
def clean_table(table: Table) -> Table:
    """``table`` with every title, header, cell and note through ``fmt.clean``."""
    return Table(
        fmt.clean(table.title),
        [fmt.clean(h) for h in table.header],
        [[fmt.clean(c) for c in row] for row in table.rows],
        list(table.align),
        fmt.clean(table.note),
    )


def _clean_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(fmt.clean(k), fmt.clean(v)) for k, v in pairs]


def epoch_times(loaded: LoadedSession) -> dict[tuple[str, str], dict[int, float]]:
    """Per (model, framework): each epoch's mean time over the cell's runs that succeeded."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    model = loaded.model
    for m in loaded.plan.models:
        for fw in loaded.plan.frameworks:
            sums: dict[int, list[float]] = {}
            for run in model.cell_runs(fw, m):
                if run.status != "ok":
                    continue
                for epoch, seconds in run.epoch_times.items():
                    if isinstance(seconds, (int, float)):
                        sums.setdefault(int(epoch), []).append(float(seconds))
            if sums:
                out[(m, fw)] = {e: sum(v) / len(v) for e, v in sums.items()}
    return out


def build_report(loaded: LoadedSession, given: SessionSummary | dict[str, Any] | None = None) -> Report:
    """The report of ``loaded``, from its summary (computed here when not given; summary.json's dict is
    read by ``SessionSummary.from_json``).

    The one place where the session's text is made safe to show (``fmt.clean``): every writer
    and view reads the report, none of them the session's strings directly.
    """
    summary = SessionSummary.of(given) if given else loaded.model.session_summary()
    plan = loaded.plan
    efficiency = efficiency_table(summary)
    latency = latency_table(summary)
    parity, parity_notes = parity_table(summary)
    per_device, per_device_notes = per_device_table(summary)
    wiring = wiring_table(summary, list(plan.frameworks))
    devices = summary.devices
    env = _clean_pairs(environment(loaded, summary))
    times_by_epoch = epoch_times(loaded)
    return Report(
        session=loaded,
        summary=summary,
        title=fmt.clean(loaded.meta.get("name") or loaded.path.name),
        facts=_clean_pairs(header_facts(loaded)),
        environment=env,
        side_by_side=clean_table(side_by_side(plan, summary)),
        figure_tables=[clean_table(t) for t in figure_tables(plan, summary)],
        max_runs=max((r.runs for r in summary.rows), default=0),
        warmup=clean_table(warmup_table(summary, times_by_epoch)),
        efficiency=None if efficiency is None else clean_table(efficiency),
        efficiency_methods=_clean_pairs(efficiency_methods(summary)),
        peak_sources=sorted({fmt.clean(r.peak_source) for r in summary.rows if r.peak_source}),
        ratios=fmt.clean_tree(list(summary.ratios or [])),
        problems=[
            Problem(fmt.clean(p.model), fmt.clean(p.framework), fmt.clean(p.status), fmt.clean(p.reason))
            for p in problems(summary)
        ],
        rows=[CellSummary.from_json(fmt.clean_tree(r.to_json())) for r in summary.rows],
        warnings=[Notice(fmt.clean(n.kind), fmt.clean(n.text)) for n in notices(loaded, summary)],
        wording=wording(summary.rows),
        latency=None if latency is None else clean_table(latency),
        parity=None if parity is None else clean_table(parity),
        parity_notes=[fmt.clean(n) for n in parity_notes],
        devices=devices if devices > 1 else 1,
        scaling=[
            Scaling(fmt.clean(v.model), clean_table(v.table), [fmt.clean(line) for line in v.lines])
            for v in scaling_views(summary)
        ],
        per_device=None if per_device is None else clean_table(per_device),
        per_device_notes=[fmt.clean(n) for n in per_device_notes],
        wiring=None if wiring is None else clean_table(wiring),
        why=[
            Why(
                fmt.clean(v.model),
                clean_table(v.table),
                [fmt.clean(t) for t in v.text],
                [fmt.clean(line) for line in v.lines],
                None if v.top is None else clean_table(v.top),
                [(fmt.clean(a), fmt.clean(b), fmt.clean(c), fmt.clean(d)) for a, b, c, d in v.traces],
                v.data,
            )
            for v in why_views(summary)
        ],
        watch=[
            (k, v) for k, v in env if k in WATCH_LABELS or k.startswith("GPU ") and k.endswith("over the run")
        ],
        answer=answer(summary),
        warmup_notes=[fmt.clean(line) for line in stall_lines(summary, times_by_epoch)],
    )

"""A cell's summary, typed: what ``SessionModel.row`` returns, and its one mapping to summary.json.

``CellSummary`` is the (framework, model) row every view reads by attribute. ``to_json`` writes the
row of summary.json (schema 2, keys in the order the file has always had them) and ``from_json`` reads
one back, older files included (a key they lack takes its empty value): the one place a row is a dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, TypeVar, cast

from benchtui.core.model.runs import parse_loss, wire_loss
from benchtui.core.model.status import Caution, CautionKind, CellStatus
from benchtui.core.model.why import WhyTable
from benchtui.core.plan.sweep import Point

T = TypeVar("T")

#: The headline figures of a row, in the order summary.json lists them (``spread`` and ``ci`` too).
HEADLINE = (
    "mean_epoch_s",
    "first_epoch_s",
    "mean_epoch_excl_first_s",
    "build_s",
    "images_per_s",
    "time_to_first_batch_s",
)
#: A watch session's row when its run sent no timing: the reason every view prints for it.
NO_TIMINGS = (
    "no timings: the command sent no batch or epoch (it does not use benchtui's timing hooks, StepTimer "
    "or KerasTimer); the session holds its telemetry only"
)
NO_COMMAND = "no timings: no command was watched; the session holds telemetry only"
#: ... and when the command failed before it could reach a hook: its own error (the reason) says why.
NO_TIMINGS_FAILED = (
    "no timings: the command ended before it sent a batch or an epoch; the session holds its telemetry only"
)
#: The reasons the model sets at the end of a row (a watch that sent no timing), when they are its
#: whole reason: summary.json has them after ``epochs``, where the row got them.
LATE_REASONS = frozenset({NO_TIMINGS, NO_COMMAND, NO_TIMINGS_FAILED})


class Interval(NamedTuple):
    """A 95% interval (low, high): a list of two numbers in summary.json."""

    low: float
    high: float


@dataclass(frozen=True)
class Spread:
    """``stats.describe`` of a figure's values; ``ci``: the interval of its mean when one was attached
    (``(None, None)``: attached but none could be computed; None: not attached, no keys in the file)."""

    n: int
    mean: float
    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    p5: float
    p95: float
    mad: float
    outliers: int
    iqr_ratio: float | None
    wide: bool
    ci: tuple[float | None, float | None] | None = None

    @property
    def ci_low(self) -> float | None:
        return self.ci[0] if self.ci is not None else None

    @property
    def ci_high(self) -> float | None:
        return self.ci[1] if self.ci is not None else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "iqr": self.iqr,
            "min": self.min,
            "max": self.max,
            "p5": self.p5,
            "p95": self.p95,
            "mad": self.mad,
            "outliers": self.outliers,
            "iqr_ratio": self.iqr_ratio,
            "wide": self.wide,
        }
        if self.ci is not None:
            out["ci_low"], out["ci_high"] = self.ci
        return out

    @classmethod
    def from_json(cls, data: Any) -> Spread | None:
        if not isinstance(data, Mapping):
            return None
        ci = (data.get("ci_low"), data.get("ci_high")) if "ci_low" in data or "ci_high" in data else None
        return cls(
            n=data.get("n", 0),
            mean=data.get("mean", 0.0),
            median=data.get("median", 0.0),
            q1=data.get("q1", 0.0),
            q3=data.get("q3", 0.0),
            iqr=data.get("iqr", 0.0),
            min=data.get("min", 0.0),
            max=data.get("max", 0.0),
            p5=data.get("p5", 0.0),
            p95=data.get("p95", 0.0),
            mad=data.get("mad", 0.0),
            outliers=data.get("outliers", 0),
            iqr_ratio=data.get("iqr_ratio"),
            wide=bool(data.get("wide", False)),
            ci=ci,
        )


@dataclass(frozen=True)
class GpuFigures:
    """One device's GPU as NVML sampled it during a data-parallel cell's runs."""

    index: int | None
    util: float | None
    power_w: float | None
    mem_max: float | None


@dataclass(frozen=True)
class DeviceFigures:
    """One device (rank) of a data-parallel cell: its mean step time where its framework timed each
    rank (None: not timed), its GPU's readings (None: none sampled)."""

    device: int
    step_s: float | None = None
    gpu: GpuFigures | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": self.device}
        if self.step_s is not None:
            out["step_s"] = self.step_s
        if self.gpu is not None:
            out.update(
                gpu_index=self.gpu.index,
                util=self.gpu.util,
                power_w=self.gpu.power_w,
                mem_max=self.gpu.mem_max,
            )
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeviceFigures:
        gpu = (
            GpuFigures(data.get("gpu_index"), data.get("util"), data.get("power_w"), data.get("mem_max"))
            if "gpu_index" in data
            else None
        )
        return cls(int(data.get("device", 0)), data.get("step_s"), gpu)


@dataclass(frozen=True)
class NodeFigures:
    """One machine of a cell on several nodes (issue 33): its host, its processes' global ranks, its mean step
    time over the timed epochs (a mean over the cell's runs), each of its ranks' step times where the
    framework timed each rank (torch's ``ranks``), its GPUs' readings (means over its GPUs; None: none
    sampled), the inter-node link its runner named, and how its share of the runs ended."""

    node: int
    host: str = ""
    #: Its processes' global ranks: (first, count), as its runner's hello said them (None: not said).
    ranks: tuple[int, int] | None = None
    step_s: float | None = None
    #: Its ranks' step times in rank order from ``ranks[0]`` (empty: not timed per rank).
    rank_step_s: tuple[float | None, ...] = ()
    util: float | None = None
    power_w: float | None = None
    mem_max: float | None = None
    link: str = ""
    #: Runs of the cell this node took part in, and those it did not finish ("ok" when all did).
    runs: int = 0
    status: str = "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "host": self.host,
            "ranks": list(self.ranks) if self.ranks is not None else None,
            "step_s": self.step_s,
            "rank_step_s": list(self.rank_step_s),
            "util": self.util,
            "power_w": self.power_w,
            "mem_max": self.mem_max,
            "link": self.link,
            "runs": self.runs,
            "status": self.status,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeFigures:
        ranks = data.get("ranks")
        steps = data.get("rank_step_s")
        return cls(
            node=int(data.get("node") or 0),
            host=str(data.get("host") or ""),
            ranks=(int(ranks[0]), int(ranks[1]))
            if isinstance(ranks, Sequence) and not isinstance(ranks, str) and len(ranks) == 2
            else None,
            step_s=data.get("step_s"),
            rank_step_s=tuple(steps) if isinstance(steps, list) else (),
            util=data.get("util"),
            power_w=data.get("power_w"),
            mem_max=data.get("mem_max"),
            link=str(data.get("link") or ""),
            runs=int(data.get("runs") or 0),
            status=str(data.get("status") or "ok"),
        )


@dataclass(frozen=True)
class NodeStraggler:
    """A cell's straggler among its nodes: the slowest node by step time over the fastest (``ratio``), named
    (``named``) when at least ``scaling.STRAGGLER_RATIO``; the slowest rank over the fastest rank where each
    rank was timed; and the sentence every view prints."""

    node: int
    host: str
    ratio: float
    named: bool
    rank: int | None = None
    rank_ratio: float | None = None
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "host": self.host,
            "ratio": self.ratio,
            "named": self.named,
            "rank": self.rank,
            "rank_ratio": self.rank_ratio,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Any) -> NodeStraggler | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("ratio"), (int, float)):
            return None
        return cls(
            node=int(data.get("node") or 0),
            host=str(data.get("host") or ""),
            ratio=float(data["ratio"]),
            named=bool(data.get("named")),
            rank=data.get("rank"),
            rank_ratio=data.get("rank_ratio"),
            text=str(data.get("text") or ""),
        )


def _interval(value: Any) -> Interval | None:
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        return Interval(value[0], value[1])
    return None


def _intervals(data: Any) -> dict[str, Interval | None]:
    return {str(k): _interval(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


def _spreads(data: Any) -> dict[str, Spread | None]:
    return {str(k): Spread.from_json(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


def _caution(value: Any) -> Caution:
    """A row's warning: {kind, message}; a schema-1 sentence becomes a caution of no particular kind."""
    if isinstance(value, Mapping):
        return cast(Caution, dict(value))
    return {"kind": cast(CautionKind, ""), "message": str(value)}


def _wire_loss(value: float | None) -> float | str | None:
    return None if value is None else wire_loss(value)


def _status(value: Any) -> CellStatus:
    try:
        return CellStatus(value)
    except ValueError:
        return CellStatus.PENDING


@dataclass(frozen=True)
class GenerationFigures:
    """A generate cell's figures (issue 34), over the steady epochs (after the first, which holds each
    side's trace or compile of its decode loop) of every run that ended well.

    Latencies are seconds. ``per_token``: the later tokens' latencies are each token's own (``--timing
    step``: ``token_s``); else each step's mean over its tokens 2..N (``decode_s / (N - 1)``), and the
    percentiles are over steps, not tokens. ``tokens_per_s``: one sequence's tokens after the first per
    second of decoding ((N - 1) x steps / sum of ``decode_s``); ``batch_tokens_per_s``: the batch's, that
    times ``sequences``: the verdict's figure. ``compile_s``: the first epoch's time less a steady one's.
    ``cache_bytes_per_token``: one sequence's key/value cache per token (keys and values of every layer at
    the compute dtype, as the runner states it). ``tokens`` / ``decode_steps``: per sequence and per
    generate call as the runner counted them (None: not counted). ``latency_curve``: by token index 2..N,
    the median latency over steps (``per_token`` only; else empty), for the html chart."""

    prompt_len: int
    new_tokens: int
    sequences: int
    steps: int = 0
    first_token_s: float | None = None
    first_token_p90_s: float | None = None
    first_token_p99_s: float | None = None
    token_s: float | None = None
    token_p90_s: float | None = None
    token_p99_s: float | None = None
    per_token: bool = False
    tokens_per_s: float | None = None
    batch_tokens_per_s: float | None = None
    compile_s: float | None = None
    cache_bytes_per_token: int | None = None
    tokens: int | None = None
    decode_steps: int | None = None
    latency_curve: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["latency_curve"] = list(self.latency_curve)
        return out

    @classmethod
    def from_json(cls, data: Any) -> GenerationFigures | None:
        """summary.json's ``generation`` (None: not a generate cell, or not an object)."""
        if not isinstance(data, Mapping):
            return None
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["latency_curve"] = tuple(data.get("latency_curve") or ())
        try:
            return cls(**kwargs)
        except TypeError:  # a required field missing: not this schema
            return None


@dataclass(frozen=True)
class CellSummary:
    """The summary of one (framework, model) cell: every figure a table, a writer or a screen shows.

    ``spread`` and ``ci`` are by figure name (the ``HEADLINE`` ones, ``achieved_tflops``, and for ``ci``
    also ``tokens_per_s``); ``batch`` describes the batch times after warm-up.
    """

    framework: str
    model: str
    batch_size: int | None
    runs: int
    runs_planned: int
    failed_runs: int
    status: CellStatus
    reason: str | None = None
    partial_runs: int = 0
    spread: Mapping[str, Spread | None] | None = None
    mean_epoch_s: float | None = None
    first_epoch_s: float | None = None
    mean_epoch_excl_first_s: float | None = None
    build_s: float | None = None
    images_per_s: float | None = None
    time_to_first_batch_s: float | None = None
    ci: Mapping[str, Interval | None] | None = None
    batch: Spread | None = None
    median_batch_s: float | None = None
    warmup_batches: tuple[int, ...] = ()
    warmup_s: tuple[float, ...] = ()
    steady_images_per_s: float | None = None
    warnings: tuple[Caution, ...] = ()
    other_cpu_cores: float | None = None
    to_first_batch_s: tuple[float | None, ...] | None = None
    other_gpu_processes: int | None = None
    device_kind: str | None = None
    joules_per_image: float | None = None
    peak_memory_bytes: int | None = None
    memory_source: str = ""
    flops_per_step: float | None = None
    flops_per_image: float | None = None
    flops_method: str = ""
    flops_counted: str = ""
    flops_reason: str = ""
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    peak_fraction: float | None = None
    peak_source: str = ""
    flops_per_sample: float | None = None
    task: str = "train"
    kind: str = "image"
    tokens_per_sample: int = 0
    params: int | None = None
    trainable_params: int | None = None
    model_source: str = ""
    architecture: str = ""
    tokens_per_s: float | None = None
    steady_tokens_per_s: float | None = None
    latency_p50_s: float | None = None
    latency_p90_s: float | None = None
    latency_p99_s: float | None = None
    timing: str | None = None
    devices: int = 1
    global_batch: int | None = None
    #: By device, at a data-parallel cell's device count (None: one device; the file has no key).
    per_device: tuple[DeviceFigures, ...] | None = None
    straggler: float | None = None  # the slowest rank's step time over the fastest's
    #: Several machines (issue 33): the nodes each run trained on; by node, its figures (None: one node; the
    #: file then has none of these keys); the straggler among them; the inter-node link node 0's runner named.
    nodes: int = 1
    per_node: tuple[NodeFigures, ...] | None = None
    node_straggler: NodeStraggler | None = None
    link: str = ""
    epochs: int = 0
    run_ids: tuple[str, ...] = ()
    #: The first and last epoch's mean training loss (a mean over the runs that trained; NaN or an
    #: infinity kept): None when no run sent a loss (older runners, inference), and the file has no key.
    loss_first: float | None = None
    loss_last: float | None = None
    #: Its sweep point (``Point()``: a plan without a sweep; the file then has no key).
    point: Point = Point()
    #: A generate cell's figures (issue 34; None: another task, and the file has no key).
    generation: GenerationFigures | None = None

    # -- reading -----------------------------------------------------------------------
    def figure(self, name: str) -> Any:
        """A figure by its summary.json name (a table's column, a CSV field): the row's attribute; a generate
        cell's ``GenerationFigures`` field as 'generation.<field>' ('generation.batch_tokens_per_s'; None where
        the cell has none)."""
        if name.startswith("generation."):
            return getattr(self.generation, name.removeprefix("generation."), None)
        return getattr(self, name)

    def spread_of(self, name: str) -> Spread | None:
        return (self.spread or {}).get(name)

    def ci_of(self, name: str) -> Interval | None:
        return (self.ci or {}).get(name)

    @property
    def flagged(self) -> bool:
        """Its frameworks build different networks (an ``architecture`` caution)."""
        return any(w["kind"] == CautionKind.ARCHITECTURE for w in self.warnings)

    # -- summary.json ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The row of summary.json, keys in the file's order."""
        late = self.reason is not None and self.reason in LATE_REASONS
        out: dict[str, Any] = {
            "framework": self.framework,
            "model": self.model,
            **({"point": self.point.to_json()} if self.point else {}),
            "batch_size": self.batch_size,
            "runs": self.runs,
            "runs_planned": self.runs_planned,
            "failed_runs": self.failed_runs,
            "status": self.status,
        }
        if self.reason is not None and not late:
            out["reason"] = self.reason
        out["partial_runs"] = self.partial_runs
        out["spread"] = (
            {k: s.to_json() if s is not None else None for k, s in self.spread.items()}
            if self.spread is not None
            else None
        )
        for name in HEADLINE:
            out[name] = getattr(self, name)
        out["ci"] = (
            {k: list(v) if v is not None else None for k, v in self.ci.items()}
            if self.ci is not None
            else None
        )
        out.update(
            batch=self.batch.to_json() if self.batch is not None else None,
            median_batch_s=self.median_batch_s,
            warmup_batches=list(self.warmup_batches),
            warmup_s=list(self.warmup_s),
            steady_images_per_s=self.steady_images_per_s,
            warnings=[dict(w) for w in self.warnings],
            other_cpu_cores=self.other_cpu_cores,
            to_first_batch_s=list(self.to_first_batch_s) if self.to_first_batch_s is not None else None,
            other_gpu_processes=self.other_gpu_processes,
            device_kind=self.device_kind,
            joules_per_image=self.joules_per_image,
            peak_memory_bytes=self.peak_memory_bytes,
            memory_source=self.memory_source,
            flops_per_step=self.flops_per_step,
            flops_per_image=self.flops_per_image,
            flops_method=self.flops_method,
            flops_counted=self.flops_counted,
            flops_reason=self.flops_reason,
            achieved_tflops=self.achieved_tflops,
            peak_tflops=self.peak_tflops,
            peak_fraction=self.peak_fraction,
            peak_source=self.peak_source,
            flops_per_sample=self.flops_per_sample,
            task=self.task,
            kind=self.kind,
            tokens_per_sample=self.tokens_per_sample,
            params=self.params,
            trainable_params=self.trainable_params,
            model_source=self.model_source,
            architecture=self.architecture,
            tokens_per_s=self.tokens_per_s,
            steady_tokens_per_s=self.steady_tokens_per_s,
            latency_p50_s=self.latency_p50_s,
            latency_p90_s=self.latency_p90_s,
            latency_p99_s=self.latency_p99_s,
            timing=self.timing,
            devices=self.devices,
            global_batch=self.global_batch,
        )
        if self.per_device is not None:
            out["per_device"] = [d.to_json() for d in self.per_device]
            out["straggler"] = self.straggler
        if self.per_node is not None:
            out["nodes"] = self.nodes
            out["per_node"] = [n.to_json() for n in self.per_node]
            out["node_straggler"] = self.node_straggler.to_json() if self.node_straggler is not None else None
            out["link"] = self.link
        if self.loss_first is not None or self.loss_last is not None:
            out["loss_first"] = _wire_loss(self.loss_first)
            out["loss_last"] = _wire_loss(self.loss_last)
        if self.generation is not None:
            out["generation"] = self.generation.to_json()
        out["epochs"] = self.epochs
        if late:
            out["reason"] = self.reason
        out["run_ids"] = list(self.run_ids)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellSummary:
        """A row of summary.json (any schema: a key an older file lacks takes its empty value)."""
        get = data.get
        per_device = get("per_device")
        per_node = get("per_node")
        to_first = get("to_first_batch_s")
        return cls(
            framework=str(get("framework", "")),
            model=str(get("model", "")),
            batch_size=get("batch_size"),
            runs=get("runs", 0),
            runs_planned=get("runs_planned", 0),
            failed_runs=get("failed_runs", 0),
            status=_status(get("status")),
            reason=get("reason"),
            partial_runs=get("partial_runs", 0),
            spread=_spreads(get("spread")) if get("spread") is not None else None,
            mean_epoch_s=get("mean_epoch_s"),
            first_epoch_s=get("first_epoch_s"),
            mean_epoch_excl_first_s=get("mean_epoch_excl_first_s"),
            build_s=get("build_s"),
            images_per_s=get("images_per_s"),
            time_to_first_batch_s=get("time_to_first_batch_s"),
            ci=_intervals(get("ci")) if get("ci") is not None else None,
            batch=Spread.from_json(get("batch")),
            median_batch_s=get("median_batch_s"),
            warmup_batches=tuple(get("warmup_batches") or ()),
            warmup_s=tuple(get("warmup_s") or ()),
            steady_images_per_s=get("steady_images_per_s"),
            warnings=tuple(_caution(w) for w in get("warnings") or ()),
            other_cpu_cores=get("other_cpu_cores"),
            to_first_batch_s=tuple(to_first) if isinstance(to_first, list) else None,
            other_gpu_processes=get("other_gpu_processes"),
            device_kind=get("device_kind"),
            joules_per_image=get("joules_per_image"),
            peak_memory_bytes=get("peak_memory_bytes"),
            memory_source=get("memory_source", ""),
            flops_per_step=get("flops_per_step"),
            flops_per_image=get("flops_per_image"),
            flops_method=get("flops_method", ""),
            flops_counted=get("flops_counted", ""),
            flops_reason=get("flops_reason", ""),
            achieved_tflops=get("achieved_tflops"),
            peak_tflops=get("peak_tflops"),
            peak_fraction=get("peak_fraction"),
            peak_source=get("peak_source", ""),
            flops_per_sample=get("flops_per_sample"),
            task=get("task", "train"),
            kind=get("kind", "image"),
            tokens_per_sample=get("tokens_per_sample", 0),
            params=get("params"),
            trainable_params=get("trainable_params"),
            model_source=get("model_source", ""),
            architecture=get("architecture", ""),
            tokens_per_s=get("tokens_per_s"),
            steady_tokens_per_s=get("steady_tokens_per_s"),
            latency_p50_s=get("latency_p50_s"),
            latency_p90_s=get("latency_p90_s"),
            latency_p99_s=get("latency_p99_s"),
            timing=get("timing"),
            devices=get("devices", 1),
            global_batch=get("global_batch"),
            per_device=(
                tuple(DeviceFigures.from_json(d) for d in per_device if isinstance(d, Mapping))
                if isinstance(per_device, list)
                else None
            ),
            straggler=get("straggler"),
            nodes=get("nodes") or 1,
            per_node=(
                tuple(NodeFigures.from_json(n) for n in per_node if isinstance(n, Mapping))
                if isinstance(per_node, list)
                else None
            ),
            node_straggler=NodeStraggler.from_json(get("node_straggler")),
            link=str(get("link") or ""),
            epochs=get("epochs", 0),
            run_ids=tuple(get("run_ids") or ()),
            point=Point.of(get("point")),
            loss_first=parse_loss(get("loss_first")),
            loss_last=parse_loss(get("loss_last")),
            generation=GenerationFigures.from_json(get("generation")),
        )


# -- The session-wide entries beside the rows: a verdict (``ratios``), a refused one, parity, scaling. --


def _floats(value: Any) -> Interval | None:
    """A [low, high] list of summary.json (None: no interval)."""
    return _interval(value)


@dataclass(frozen=True)
class PerFlop:
    """A verdict per FLOP: the ratio of achieved FLOP/s, when both sides counted their FLOPs."""

    ratio: float
    ci_low: float | None
    ci_high: float | None
    factor: float
    significant: bool | None
    faster_framework: str | None
    about_same: bool
    flops_per_sample: Mapping[str, float]
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "factor": self.factor,
            "significant": self.significant,
            "faster_framework": self.faster_framework,
            "about_same": self.about_same,
            "flops_per_sample": dict(self.flops_per_sample),
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Any) -> PerFlop | None:
        if not isinstance(data, Mapping):
            return None
        flops = data.get("flops_per_sample")
        return cls(
            ratio=data.get("ratio", 1.0),
            ci_low=data.get("ci_low"),
            ci_high=data.get("ci_high"),
            factor=data.get("factor", 1.0),
            significant=data.get("significant"),
            faster_framework=data.get("faster_framework"),
            about_same=bool(data.get("about_same", False)),
            flops_per_sample=dict(flops) if isinstance(flops, Mapping) else {},
            text=str(data.get("text") or ""),
        )


@dataclass(frozen=True)
class FrameworkRatio:
    """The verdict of one model between two frameworks (``session_model.model_verdicts``): ``framework``'s time
    per sample over ``base``'s with its interval, who is faster, and the sentence every view prints."""

    model: str
    base: str
    framework: str
    basis: str
    basis_label: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    level: float
    significant: bool | None
    conclusive: bool
    single_run: bool
    faster: bool
    about_same: bool
    factor: float
    percent: float
    phrase: str
    #: None: no winner (about the same, or unreliable).
    faster_framework: str | None
    #: Why the machine, not the frameworks, may have decided it (None: the verdict stands).
    unreliable: str | None
    per_flop: PerFlop | None
    #: The frameworks do not build the same network (``ParityEntry.flagged``).
    parity_flagged: bool
    text: str
    #: The sweep point both cells ran at (``Point()``: no sweep; the file then has no key).
    point: Point = Point()

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            **({"point": self.point.to_json()} if self.point else {}),
            "base": self.base,
            "framework": self.framework,
            "basis": self.basis,
            "basis_label": self.basis_label,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "level": self.level,
            "significant": self.significant,
            "conclusive": self.conclusive,
            "single_run": self.single_run,
            "faster": self.faster,
            "about_same": self.about_same,
            "factor": self.factor,
            "percent": self.percent,
            "phrase": self.phrase,
            "faster_framework": self.faster_framework,
            "unreliable": self.unreliable,
            "per_flop": self.per_flop.to_json() if self.per_flop is not None else None,
            "parity_flagged": self.parity_flagged,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrameworkRatio:
        get = data.get
        return cls(
            model=str(get("model") or ""),
            base=str(get("base") or ""),
            framework=str(get("framework") or ""),
            basis=str(get("basis") or ""),
            basis_label=str(get("basis_label") or ""),
            ratio=get("ratio", 1.0),
            ci_low=get("ci_low"),
            ci_high=get("ci_high"),
            level=get("level", 0.95),
            significant=get("significant"),
            conclusive=bool(get("conclusive", False)),
            single_run=bool(get("single_run", False)),
            faster=bool(get("faster", False)),
            about_same=bool(get("about_same", False)),
            factor=get("factor", 1.0),
            percent=get("percent", 0.0),
            phrase=str(get("phrase") or ""),
            faster_framework=get("faster_framework"),
            unreliable=get("unreliable") or None,
            per_flop=PerFlop.from_json(get("per_flop")),
            parity_flagged=bool(get("parity_flagged", False)),
            text=str(get("text") or ""),
            point=Point.of(get("point")),
        )


@dataclass(frozen=True)
class RefusedRatio:
    """A pair of frameworks that ran on different kinds of device: never a ratio, this sentence instead."""

    model: str
    base: str
    framework: str
    #: Per framework, the kinds of device its runs used ("cpu", "cuda").
    devices: Mapping[str, tuple[str, ...]]
    text: str
    point: Point = Point()

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            **({"point": self.point.to_json()} if self.point else {}),
            "base": self.base,
            "framework": self.framework,
            "devices": {k: list(v) for k, v in self.devices.items()},
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RefusedRatio:
        devices = data.get("devices")
        return cls(
            model=str(data.get("model") or ""),
            base=str(data.get("base") or ""),
            framework=str(data.get("framework") or ""),
            devices={str(k): tuple(v) for k, v in devices.items() if isinstance(v, list)}
            if isinstance(devices, Mapping)
            else {},
            text=str(data.get("text") or ""),
            point=Point.of(data.get("point")),
        )


@dataclass(frozen=True)
class NetworkIdentity:
    """What a cell's runs say its network is (``parity.identity``): its size, FLOPs and where they came from."""

    params: float | None = None
    trainable_params: float | None = None
    flops_per_sample: float | None = None
    flops_counted: str = ""
    source: str = ""
    architecture: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "trainable_params": self.trainable_params,
            "flops_per_sample": self.flops_per_sample,
            "flops_counted": self.flops_counted,
            "source": self.source,
            "architecture": self.architecture,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NetworkIdentity:
        return cls(
            params=data.get("params"),
            trainable_params=data.get("trainable_params"),
            flops_per_sample=data.get("flops_per_sample"),
            flops_counted=str(data.get("flops_counted") or ""),
            source=str(data.get("source") or ""),
            architecture=str(data.get("architecture") or ""),
        )


@dataclass(frozen=True)
class ParityEntry:
    """Whether one model's frameworks build the same network (``parity.model_parity``)."""

    model: str
    kind: str  # "image" or "tokens"
    per: str  # "image" or "sequence"
    frameworks: Mapping[str, NetworkIdentity]
    params_compared: str  # "trainable_params" or "params"
    params_diff: float | None
    flops_diff: float | None
    tolerance: float
    flagged: bool
    twin: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "kind": self.kind,
            "per": self.per,
            "frameworks": {fw: ident.to_json() for fw, ident in self.frameworks.items()},
            "params_compared": self.params_compared,
            "params_diff": self.params_diff,
            "flops_diff": self.flops_diff,
            "tolerance": self.tolerance,
            "flagged": self.flagged,
            "twin": self.twin,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ParityEntry:
        frameworks = data.get("frameworks")
        return cls(
            model=str(data.get("model") or ""),
            kind=str(data.get("kind") or "image"),
            per=str(data.get("per") or "image"),
            frameworks={
                str(fw): NetworkIdentity.from_json(ident)
                for fw, ident in frameworks.items()
                if isinstance(ident, Mapping)
            }
            if isinstance(frameworks, Mapping)
            else {},
            params_compared=str(data.get("params_compared") or "params"),
            params_diff=data.get("params_diff"),
            flops_diff=data.get("flops_diff"),
            tolerance=data.get("tolerance", 0.0),
            flagged=bool(data.get("flagged", False)),
            twin=str(data.get("twin") or ""),
            text=str(data.get("text") or ""),
        )


@dataclass(frozen=True)
class ScalingPoint:
    """One point of a scaling curve, ``nodes`` machines of ``devices`` devices each (``workers`` in all):
    throughput, and speedup and efficiency against one worker."""

    devices: int
    per_device_batch: int
    global_batch: int
    runs: int
    images_per_s: float | None
    images_per_s_ci: Interval | None
    speedup: float | None = None
    speedup_ci: Interval | None = None
    efficiency: float | None = None
    efficiency_ci: Interval | None = None
    #: Whether the speedup rests on one run per count (None: no speedup, no key in the file).
    single_run: bool | None = None
    #: Machines at this point (several nodes, issue 33; 1: the file has no key, as before).
    nodes: int = 1

    @property
    def workers(self) -> int:
        """Replicas over every node: the point's place on the curve."""
        return self.nodes * self.devices

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **({"nodes": self.nodes, "workers": self.workers} if self.nodes > 1 else {}),
            "devices": self.devices,
            "per_device_batch": self.per_device_batch,
            "global_batch": self.global_batch,
            "runs": self.runs,
            "images_per_s": self.images_per_s,
            "images_per_s_ci": _listed(self.images_per_s_ci),
            "speedup": self.speedup,
            "speedup_ci": _listed(self.speedup_ci),
            "efficiency": self.efficiency,
            "efficiency_ci": _listed(self.efficiency_ci),
        }
        if self.single_run is not None:
            out["single_run"] = self.single_run
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScalingPoint:
        single = data.get("single_run")
        return cls(
            devices=int(data.get("devices") or 1),
            per_device_batch=int(data.get("per_device_batch") or 0),
            global_batch=int(data.get("global_batch") or 0),
            runs=int(data.get("runs") or 0),
            images_per_s=data.get("images_per_s"),
            images_per_s_ci=_floats(data.get("images_per_s_ci")),
            speedup=data.get("speedup"),
            speedup_ci=_floats(data.get("speedup_ci")),
            efficiency=data.get("efficiency"),
            efficiency_ci=_floats(data.get("efficiency_ci")),
            single_run=bool(single) if single is not None else None,
            nodes=int(data.get("nodes") or 1),
        )


def _listed(value: Interval | None) -> list[float] | None:
    return [value.low, value.high] if value is not None else None


@dataclass(frozen=True)
class ScalingCurve:
    """A scaling session's curve of one (framework, model): a point per device count, and the curve in words."""

    framework: str
    model: str
    points: tuple[ScalingPoint, ...]
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "model": self.model,
            "points": [p.to_json() for p in self.points],
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScalingCurve:
        points = data.get("points")
        return cls(
            framework=str(data.get("framework") or ""),
            model=str(data.get("model") or ""),
            points=tuple(ScalingPoint.from_json(p) for p in points if isinstance(p, Mapping))
            if isinstance(points, list)
            else (),
            text=str(data.get("text") or ""),
        )


#: Every figure a row has, by its summary.json name (``CellSummary.figure``).
CELL_FIELDS = frozenset(f.name for f in fields(CellSummary))


# -- A sweep's answer (``sweeps.answer``): best vs best, and what each setting buys each framework. --


@dataclass(frozen=True)
class BestPoint:
    """One framework's fastest point of a model (best vs best), and how much choosing it flatters it."""

    framework: str
    point: Point
    #: The settings it ran with, in words ('batch 8 · channels-last on'; for ``settings`` best, what best was:
    #: 'amp-bf16, compile on, channels-last on, batch 256').
    settings: str
    images_per_s: float | None
    #: The points it was chosen among (those with finished runs).
    points: int
    #: Selection bias: how much choosing the fastest of ``points`` overstates its throughput, as a fraction
    #: (0.012: 1.2%), by the bootstrap over each point's runs; None: one point, or one run a point.
    bias: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "point": self.point.to_json(),
            "settings": self.settings,
            "images_per_s": self.images_per_s,
            "points": self.points,
            "bias": self.bias,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BestPoint:
        get = data.get
        return cls(
            framework=str(get("framework") or ""),
            point=Point.of(get("point")),
            settings=str(get("settings") or ""),
            images_per_s=get("images_per_s"),
            points=get("points") or 0,
            bias=get("bias"),
        )


@dataclass(frozen=True)
class BestVerdict:
    """Best vs best for one model: each framework at its fastest point, and the verdict between them (the
    bootstrap over the runs of each chosen point), with how much choosing the best biases the ratio."""

    model: str
    base: BestPoint
    other: BestPoint
    #: The verdict between the chosen cells, as ``model_verdicts`` words it (its ``point``: ``Point()``).
    verdict: FrameworkRatio
    #: How much choosing each side's best overstates the winner's lead, as a fraction of the ratio (None: not
    #: known, see ``BestPoint.bias``).
    bias: float | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base": self.base.to_json(),
            "other": self.other.to_json(),
            "verdict": self.verdict.to_json(),
            "bias": self.bias,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BestVerdict:
        get = data.get

        def side(key: str) -> BestPoint:
            value = get(key)
            return BestPoint.from_json(value if isinstance(value, Mapping) else {})

        verdict = get("verdict")
        return cls(
            model=str(get("model") or ""),
            base=side("base"),
            other=side("other"),
            verdict=FrameworkRatio.from_json(verdict if isinstance(verdict, Mapping) else {}),
            bias=get("bias"),
            text=str(get("text") or ""),
        )


@dataclass(frozen=True)
class SettingGain:
    """What one setting buys one framework on one model: its throughput at ``value`` over at ``baseline`` (the
    axis's first value), the other axes held equal, over every pair of points that differ only there."""

    model: str
    framework: str
    axis: str
    value: str
    baseline: str
    #: Speed-up (throughput at ``value`` / at ``baseline``): the geometric mean of the pairs' (None: no pair
    #: with finished runs on both sides, or ``no_effect``).
    factor: float | None
    #: The 95% interval of the speed-up (one pair: its bootstrap CI; several: the lowest low and highest high).
    ci_low: float | None
    ci_high: float | None
    pairs: int
    #: Why the setting changes nothing for this framework or model (``sweep.applies``); None: it applies.
    no_effect: str | None
    text: str  # 'amp-bf16: 2.90× (95% CI 2.71–3.08)', or 'channels-last on: no effect (...)'

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "framework": self.framework,
            "axis": self.axis,
            "value": self.value,
            "baseline": self.baseline,
            "factor": self.factor,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "pairs": self.pairs,
            "no_effect": self.no_effect,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SettingGain:
        get = data.get
        return cls(
            model=str(get("model") or ""),
            framework=str(get("framework") or ""),
            axis=str(get("axis") or ""),
            value=str(get("value") or ""),
            baseline=str(get("baseline") or ""),
            factor=get("factor"),
            ci_low=get("ci_low"),
            ci_high=get("ci_high"),
            pairs=get("pairs") or 0,
            no_effect=get("no_effect") or None,
            text=str(get("text") or ""),
        )


@dataclass(frozen=True)
class SweepAnswer:
    """A sweep's answer beside its per-point rows and verdicts: the axes swept, best vs best per model (and
    pair of frameworks), and each setting's speed-up per framework. Curves are the rows themselves (each
    row has its point)."""

    axes: Mapping[str, tuple[str, ...]]
    best: tuple[BestVerdict, ...] = ()
    gains: tuple[SettingGain, ...] = ()
    #: Best vs best refused: the chosen cells ran on different kinds of device (the file has the key only
    #: when there is one; its ``point`` is ``Point()``, its text names each side's settings).
    refused: tuple[RefusedRatio, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "axes": {a: list(v) for a, v in self.axes.items()},
            "best": [b.to_json() for b in self.best],
            "gains": [g.to_json() for g in self.gains],
        }
        if self.refused:
            out["refused"] = [r.to_json() for r in self.refused]
        return out

    @classmethod
    def from_json(cls, data: Any) -> SweepAnswer | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("axes"), Mapping):
            return None
        axes = {str(a): tuple(str(v) for v in vs) for a, vs in data["axes"].items() if isinstance(vs, list)}

        def listed(key: str, read: Callable[[Mapping[str, Any]], T]) -> tuple[T, ...]:
            value = data.get(key)
            return tuple(read(v) for v in value if isinstance(v, Mapping)) if isinstance(value, list) else ()

        return cls(
            axes=axes,
            best=listed("best", BestVerdict.from_json),
            gains=listed("gains", SettingGain.from_json),
            refused=listed("refused", RefusedRatio.from_json),
        )


@dataclass(frozen=True)
class SessionSummary:
    """A session's summary: its cells' rows, and the session-wide figures beside them (summary.json).

    Every entry is typed (``FrameworkRatio``, ``RefusedRatio``, ``ParityEntry``, ``ScalingCurve``, ``WhyTable``);
    ``to_json``/``from_json`` here are the one mapping to the file.
    """

    rows: tuple[CellSummary, ...]
    frameworks: Mapping[str, Any]  # per framework: versions, device, settings, threads
    malformed_lines: int = 0
    ratios: tuple[FrameworkRatio, ...] = ()
    refused_ratios: tuple[RefusedRatio, ...] = ()
    parity: tuple[ParityEntry, ...] = ()
    task: str = "train"
    devices: int = 1
    #: The machines the plan's runs train on (issue 33; 1: the file has no key).
    nodes: int = 1
    scaling: tuple[ScalingCurve, ...] = ()
    distributed: Mapping[str, Any] | None = None
    why: tuple[WhyTable, ...] = ()
    counters: Mapping[str, Any] | None = None
    watch: Mapping[str, Any] | None = None  # benchtui watch: the command and its folder
    labels: Mapping[str, Any] | None = None
    schema: int = 2
    #: A sweep's answer (None: a plan without a sweep; the file then has no key).
    sweep: SweepAnswer | None = None

    def to_json(self) -> dict[str, Any]:
        """summary.json, keys in the file's order."""
        out: dict[str, Any] = {
            "schema": self.schema,
            "rows": [row.to_json() for row in self.rows],
            "frameworks": self.frameworks,
            "malformed_lines": self.malformed_lines,
            "ratios": [r.to_json() for r in self.ratios],
            "refused_ratios": [r.to_json() for r in self.refused_ratios],
            "parity": [p.to_json() for p in self.parity],
            "task": self.task,
            "devices": self.devices,
            **({"nodes": self.nodes} if self.nodes > 1 else {}),
            "scaling": [c.to_json() for c in self.scaling],
            "distributed": self.distributed,
            "why": [t.to_dict() for t in self.why],
            "counters": self.counters,
        }
        if self.watch is not None:
            out["watch"] = self.watch
        if self.sweep is not None:
            out["sweep"] = self.sweep.to_json()
        out["labels"] = self.labels
        return out

    @classmethod
    def of(cls, summary: SessionSummary | Mapping[str, Any]) -> SessionSummary:
        """``summary`` typed: itself, or summary.json's dict read by ``from_json``."""
        return summary if isinstance(summary, SessionSummary) else cls.from_json(summary)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionSummary:
        """summary.json as written by any schema (what an older file lacks takes its empty value)."""
        get = data.get

        def listed(key: str, read: Callable[[Mapping[str, Any]], T]) -> tuple[T, ...]:
            value = get(key)
            if not isinstance(value, (list, tuple)):
                return ()
            return tuple(read(v) for v in value if isinstance(v, Mapping))

        rows = get("rows")
        return cls(
            rows=tuple(
                r if isinstance(r, CellSummary) else CellSummary.from_json(r)
                for r in (rows if isinstance(rows, (list, tuple)) else ())
                if isinstance(r, (Mapping, CellSummary))
            ),
            frameworks=get("frameworks") or {},
            malformed_lines=get("malformed_lines") or 0,
            ratios=listed("ratios", FrameworkRatio.from_json),
            refused_ratios=listed("refused_ratios", RefusedRatio.from_json),
            parity=listed("parity", ParityEntry.from_json),
            task=get("task") or "train",
            devices=get("devices") or 1,
            nodes=get("nodes") or 1,
            scaling=listed("scaling", ScalingCurve.from_json),
            distributed=get("distributed"),
            why=listed("why", lambda d: WhyTable.from_dict(dict(d))),
            counters=get("counters"),
            watch=get("watch"),
            labels=get("labels"),
            schema=get("schema") or 1,
            sweep=SweepAnswer.from_json(get("sweep")),
        )

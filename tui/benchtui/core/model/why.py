"""The "why" of a verdict: where each framework's step time goes, from its own profiler (``--profile``).

A run's profile divides a few profiled steps into categories (convolution, matmul, normalization,
...). Its SHARES are applied to the framework's TIMED step time (the same data as its images/s:
the epochs after the first), so a framework's rows add up to the step time that defines the
verdict's ratio, and the differences between two frameworks add up to the difference between
their steps. The profiled step and the profiler's overhead against the timed step are stated, and
an overhead above ``OVERHEAD_WARN`` is flagged: a profiler that slows a step that much may not
divide it as it is divided when timed. Pure functions of the runs: the live screen, ``show`` and
every export say the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchtui.core import fmt
from benchtui.core.model import analysis
from benchtui.core.model.runs import RunState
from benchtui.core.model.stats import mean
from benchtui.core.model.status import RunStatus
from benchtui.core.wire.events import PROFILE_CATEGORIES

#: A share of a step under this is written with one decimal ('0.4%'), as its whole percent would read 0%.
SHARE_FINE_UNDER = 0.01

#: Each category's words, in the order every view lists them.
CATEGORY_LABELS: dict[str, str] = {
    "conv": "convolution",
    "matmul": "matmul/GEMM",
    "norm": "normalization",
    "elementwise": "elementwise & reductions",
    "optimizer": "optimizer update",
    "data": "input & host-to-device",
    "communication": "communication",
    "other": "other ops",
    "idle": "idle",
}
assert tuple(CATEGORY_LABELS) == PROFILE_CATEGORIES
#: A profiled step this much longer than the timed one (+50%) is flagged: the profile may distort.
OVERHEAD_WARN = 0.5
#: The folder of the session that holds the traces (``<session>/traces/<run id>.<the profiler's extension>``).
TRACES_DIR = "traces"
#: Most ops a framework's merged top list keeps.
TOP_OPS = 12
#: A second category is named in the sentence when its difference is at least this part of the first's.
SECOND_REASON = 0.25
#: The counters the sentence of the counters names, with their words (NVML's utilization apart).
COUNTER_WORDS = (
    ("sm_active", "SM active"),
    ("tensor_active", "tensor cores active"),
    ("dram_active", "DRAM active"),
)


@dataclass(frozen=True)
class TopOp:
    """One of a framework's longest ops, merged over its profiled runs."""

    name: str
    category: str
    share: float  # of the profiled step: the mean over the runs whose top list has it
    seconds: float  # per step: its share of the timed step
    calls: float | None  # per step
    runs: int  # runs whose top list has it


@dataclass(frozen=True)
class TraceFile:
    """A run's trace, kept in the session's traces folder."""

    run: str
    file: str  # a plain file name (``wire.events.plain_file_name``)
    bytes: int | None

    @property
    def path(self) -> str:
        """Its path relative to the session folder: ``traces/<file>``."""
        return f"{TRACES_DIR}/{self.file}"


@dataclass(frozen=True)
class WhySide:
    """One framework's breakdown: its profiled shares applied to its timed step."""

    framework: str
    runs: int  # successful runs of the cell
    profiled: int  # of them, those with a usable profile (their shares are averaged)
    batch: int | None  # samples a step, over every device
    timed_step_s: float  # seconds per step, from the data of the cell's images/s
    timed_basis: str  # "epoch": the epochs after the first; "batch": the batches after warm-up (one epoch)
    shares: dict[str, float]  # category -> share of the profiled step (they sum to 1)
    profiled_step_s: float | None = None  # the profiler's step, its overhead included
    traced_step_s: float | None = None  # the trace's own span per step
    steps: int = 0  # steps profiled, over every profiled run
    device: str = ""  # "gpu" or "cpu", as the profiler saw it
    profiler: str = ""
    idle_means: str = ""
    method: str = ""
    top: tuple[TopOp, ...] = ()
    traces: tuple[TraceFile, ...] = ()

    def seconds(self, category: str) -> float:
        """Seconds per step in ``category``: its share of the timed step."""
        return self.shares.get(category, 0.0) * self.timed_step_s

    @property
    def overhead(self) -> float | None:
        """The profiled step over the timed one, less 1 (+0.06: the profiler made a step 6% longer)."""
        if self.profiled_step_s is None or self.timed_step_s <= 0:
            return None
        return self.profiled_step_s / self.timed_step_s - 1

    @property
    def overhead_flagged(self) -> bool:
        overhead = self.overhead
        return overhead is not None and overhead > OVERHEAD_WARN

    @property
    def idle_share(self) -> float:
        return self.shares.get("idle", 0.0)

    @property
    def per_sample_s(self) -> float | None:
        return self.timed_step_s / self.batch if self.batch else None


@dataclass(frozen=True)
class Difference:
    """One category's difference between two frameworks, in seconds per step (the other's less the base's)."""

    category: str
    seconds: float


@dataclass(frozen=True)
class WhyPair:
    """A framework against the base (the plan's first that has a profile): the differences, largest first."""

    base: str
    other: str
    differences: tuple[Difference, ...]  # sorted by size, largest first; empty when not comparable
    slower: str | None  # the framework with the longer time per sample; None: the same, or not comparable
    text: str  # the sentence: "tf.keras spends 4.1 ms more per step than PyTorch in normalization ..."


@dataclass(frozen=True)
class WhyTable:
    """The why of one model: each profiled framework's breakdown, the differences, the sentence, the counters."""

    model: str
    sides: tuple[WhySide, ...]
    pairs: tuple[WhyPair, ...] = ()
    counters: str = ""  # the GPU counters in words, or why there are none
    notes: tuple[str, ...] = ()  # frameworks of the cell without a usable profile, and why
    lines: tuple[str, ...] = ()  # each side in words (``side_line``)

    @property
    def text(self) -> str:
        """The first pair's sentence ('' with one framework)."""
        return self.pairs[0].text if self.pairs else ""

    def side(self, framework: str) -> WhySide | None:
        return next((s for s in self.sides if s.framework == framework), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, as summary.json and the json export hold it (times in seconds per step)."""
        return {
            "model": self.model,
            "text": self.text,
            "frameworks": [s.framework for s in self.sides],
            "sides": [
                {
                    "framework": s.framework,
                    "runs": s.runs,
                    "profiled_runs": s.profiled,
                    "batch": s.batch,
                    "timed_step_s": s.timed_step_s,
                    "timed_basis": s.timed_basis,
                    "profiled_step_s": s.profiled_step_s,
                    "traced_step_s": s.traced_step_s,
                    "overhead": s.overhead,
                    "overhead_flagged": s.overhead_flagged,
                    "steps": s.steps,
                    "device": s.device,
                    "profiler": s.profiler,
                    "idle_means": s.idle_means,
                    "method": s.method,
                    "categories": {
                        c: {"share": s.shares.get(c, 0.0), "seconds": s.seconds(c)}
                        for c in PROFILE_CATEGORIES
                    },
                    "top": [
                        {
                            "name": op.name,
                            "category": op.category,
                            "share": op.share,
                            "seconds": op.seconds,
                            "calls": op.calls,
                            "runs": op.runs,
                        }
                        for op in s.top
                    ],
                    "traces": [
                        {"run": t.run, "file": t.file, "path": t.path, "bytes": t.bytes} for t in s.traces
                    ],
                }
                for s in self.sides
            ],
            "pairs": [
                {
                    "base": p.base,
                    "framework": p.other,
                    "slower": p.slower,
                    "differences": [{"category": d.category, "seconds": d.seconds} for d in p.differences],
                    "text": p.text,
                }
                for p in self.pairs
            ],
            "counters": self.counters,
            "lines": list(self.lines),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WhyTable:
        """The table that ``to_dict`` wrote (a summary this version computed): what the reports render."""
        sides = []
        for s in data["sides"]:
            categories = s.get("categories") or {}
            sides.append(
                WhySide(
                    framework=str(s["framework"]),
                    runs=int(s.get("runs") or 0),
                    profiled=int(s.get("profiled_runs") or 0),
                    batch=s.get("batch"),
                    timed_step_s=float(s["timed_step_s"]),
                    timed_basis=str(s.get("timed_basis") or "epoch"),
                    shares={
                        c: float((categories.get(c) or {}).get("share") or 0.0) for c in PROFILE_CATEGORIES
                    },
                    profiled_step_s=s.get("profiled_step_s"),
                    traced_step_s=s.get("traced_step_s"),
                    steps=int(s.get("steps") or 0),
                    device=str(s.get("device") or ""),
                    profiler=str(s.get("profiler") or ""),
                    idle_means=str(s.get("idle_means") or ""),
                    method=str(s.get("method") or ""),
                    top=tuple(
                        TopOp(
                            str(op["name"]),
                            str(op["category"]),
                            float(op["share"]),
                            float(op["seconds"]),
                            op.get("calls"),
                            int(op.get("runs") or 1),
                        )
                        for op in s.get("top") or []
                    ),
                    traces=tuple(
                        TraceFile(str(t["run"]), str(t["file"]), t.get("bytes"))
                        for t in s.get("traces") or []
                    ),
                )
            )
        pairs = tuple(
            WhyPair(
                str(p["base"]),
                str(p["framework"]),
                tuple(
                    Difference(str(d["category"]), float(d["seconds"])) for d in p.get("differences") or []
                ),
                p.get("slower"),
                str(p.get("text") or ""),
            )
            for p in data.get("pairs") or []
        )
        return cls(
            str(data["model"]),
            tuple(sides),
            pairs,
            str(data.get("counters") or ""),
            tuple(str(n) for n in data.get("notes") or []),
            tuple(str(n) for n in data.get("lines") or []),
        )


# -- one run's profile ---------------------------------------------------------------------------
def profile_shares(profile: dict[str, Any]) -> dict[str, float] | None:
    """A usable profile's share of its step per category (they sum to 1); None for a failed or empty one."""
    categories = profile.get("categories") if profile.get("ok") is True else None
    if not isinstance(categories, dict):
        return None
    seconds = {c: categories.get(c) for c in PROFILE_CATEGORIES}
    if not all(isinstance(v, (int, float)) and v >= 0 for v in seconds.values()):
        return None
    total = sum(float(v) for v in seconds.values() if v is not None)
    if not total > 0:
        return None
    return {c: float(v) / total for c, v in seconds.items() if v is not None}


def unavailable_text(reason: Any) -> str:
    """A failed profile's note: 'profile unavailable: <why>', whatever the runner put first."""
    text = " ".join(str(reason or "").split())
    if not text:
        return "profile unavailable (the runner gave no reason)"
    return text if text.lower().startswith("profile unavailable") else f"profile unavailable: {text}"


def profile_notes(runs: Sequence[RunState], expected: bool = False) -> list[str]:
    """What a cell's runs say about their profiles, each note once with its runs: a profile that failed
    ('profile unavailable: …'), a trace dropped or not linked; with ``expected`` (a ``--profile`` plan),
    a run that sent no profile at all. Nothing for a run whose profile is whole.
    """
    by_note: dict[str, list[int]] = {}
    for run in runs:
        profile = run.profile
        if not profile:
            note = "profile unavailable: the runner sent no profile" if expected else ""
        elif profile.get("ok") is not True:
            note = unavailable_text(profile.get("reason"))
        elif profile_shares(profile) is None:
            note = "profile unavailable: it divides no time into categories"
        else:
            note = " ".join(str(profile.get("trace_note") or "").split())
        if note:
            by_note.setdefault(note, []).append(run.spec.index)
    return [
        f"{note} ({'run' if len(indices) == 1 else 'runs'} {', '.join(map(str, indices))})"
        for note, indices in by_note.items()
    ]


# -- one framework ------------------------------------------------------------------------------------
def timed_step(runs: Sequence[RunState]) -> tuple[float | None, int | None, str]:
    """(seconds per step, samples per step, basis) of a cell's successful runs, from the data of its images/s:
    the epochs after the first; with one epoch a run, the batches after warm-up (its first epoch compiles)."""
    if not runs:
        return None, None, "epoch"
    several = all(len(r.epoch_times) > 1 for r in runs)
    rate = analysis.throughput(runs) if several else analysis.steady_throughput(runs)
    batch = analysis.batch_size_of(runs[0])
    if not rate or not batch:
        return None, batch, "epoch" if several else "batch"
    return batch / rate, batch, "epoch" if several else "batch"


def _merged_top(profiles: list[dict[str, Any]], timed_step_s: float) -> tuple[TopOp, ...]:
    """The longest ops over a framework's profiles: by (name, category), the mean share where listed."""
    merged: dict[tuple[str, str], list[Any]] = {}
    for profile in profiles:
        traced = profile.get("traced_step_s")
        for op in profile.get("top") or []:
            share = op.get("share")
            if share is None and isinstance(traced, (int, float)) and traced > 0:
                share = op["seconds"] / traced
            if not isinstance(share, (int, float)):
                continue
            entry = merged.setdefault((op["name"], op["category"]), [0.0, [], 0])
            entry[0] += float(share)
            if isinstance(op.get("calls"), (int, float)):
                entry[1].append(float(op["calls"]))
            entry[2] += 1
    ops = [
        TopOp(name, category, total / n, total / n * timed_step_s, mean(calls) if calls else None, n)
        for (name, category), (total, calls, n) in merged.items()
    ]
    ops.sort(key=lambda op: (-op.share, op.name))
    return tuple(ops[:TOP_OPS])


def profile_side(framework: str, runs: Sequence[RunState]) -> WhySide | None:
    """A framework's breakdown over its successful runs that have a usable profile; None when none has."""
    ok = [r for r in runs if r.status is RunStatus.OK]
    profiled = [(r, shares) for r in ok if (shares := profile_shares(r.profile)) is not None]
    if not profiled:
        return None
    step, batch, basis = timed_step(ok)
    if step is None:
        return None
    shares = {c: mean([s[c] for _, s in profiled]) for c in PROFILE_CATEGORIES}
    profiles = [r.profile for r, _ in profiled]

    def average(name: str) -> float | None:
        values = [float(p[name]) for p in profiles if isinstance(p.get(name), (int, float))]
        return mean(values) if values else None

    def first(name: str) -> str:
        return next((str(p[name]) for p in profiles if isinstance(p.get(name), str) and p[name]), "")

    traces = tuple(
        TraceFile(r.spec.run_id, str(r.profile["trace"]["file"]), r.profile["trace"].get("bytes"))
        for r, _ in profiled
        if isinstance(r.profile.get("trace"), dict) and r.profile["trace"].get("file")
    )
    return WhySide(
        framework=framework,
        runs=len(ok),
        profiled=len(profiled),
        batch=batch,
        timed_step_s=step,
        timed_basis=basis,
        shares=shares,
        profiled_step_s=average("step_s"),
        traced_step_s=average("traced_step_s"),
        steps=sum(int(p["steps"]) for p in profiles if isinstance(p.get("steps"), int)),
        device=first("device"),
        profiler=first("profiler"),
        idle_means=first("idle_means"),
        method=first("method"),
        top=_merged_top(profiles, step),
        traces=traces,
    )


# -- words -------------------------------------------------------------------------------------------
def ms(seconds: float | None) -> str:
    """Seconds as milliseconds in a sentence: '4.1', '0.05', '123'."""
    if seconds is None:
        return "–"
    value = abs(seconds) * 1000
    text = f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 0.1 else f"{value:.2f}"
    return ("−" if seconds < 0 and text.strip("0.") else "") + text


def signed_ms(seconds: float) -> str:
    """A difference in milliseconds with its sign: '+4.1', '−2.0', '0.0'."""
    text = ms(seconds)
    return text if text.startswith("−") or not text.strip("0.") else "+" + text


def share_text(share: float) -> str:
    """A share of a step: '18%', '3%', '0.4%' (``fmt.percent`` with one decimal only under 1%)."""
    return fmt.percent(share, SHARE_FINE_UNDER)


def idle_word(sides: Sequence[WhySide]) -> str:
    """What idle is called where the sides ran: 'GPU idle', 'no op running', or plain 'idle'."""
    devices = {s.device for s in sides}
    return (
        {"gpu": "GPU idle", "cpu": "no op running"}.get(devices.pop(), "idle")
        if len(devices) == 1
        else "idle"
    )


def _label(framework: str) -> str:
    return analysis.framework_label(framework)


def side_line(side: WhySide) -> str:
    """A framework's profile in words: the profiler, what was profiled, the profiled step against the timed one."""
    runs = f"{side.profiled} of {side.runs} runs" if side.profiled != side.runs else _count(side.runs, "run")
    text = f"{_label(side.framework)}: {side.profiler or 'its profiler'}, {_count(side.steps, 'step')} profiled in {runs}"
    basis = "the epochs after the first" if side.timed_basis == "epoch" else "the batches after warm-up"
    text += f"; timed step {ms(side.timed_step_s)} ms ({basis})"
    overhead = side.overhead
    if side.profiled_step_s is not None and overhead is not None:
        text += f", profiled step {ms(side.profiled_step_s)} ms (profiler overhead {overhead:+.0%})"
        if side.overhead_flagged:
            text += f": above {OVERHEAD_WARN:+.0%}, the profile may not divide the step as it runs untraced"
    if side.idle_means:
        text += f"; idle means {side.idle_means}"
    return text


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _where(category: str) -> str:
    return "idle" if category == "idle" else f"in {CATEGORY_LABELS.get(category, category)}"


def explain(base: WhySide, other: WhySide, differences: Sequence[Difference]) -> tuple[str | None, str]:
    """(the slower framework, the sentence) for two sides: what the slower one spends more time on, per step.

    Slower by time per sample (the verdict's measure, whatever the batch sizes); the categories it
    spends the most more time in (a second when it is at least ``SECOND_REASON`` of the first), then
    each side's idle share, the slower's first.
    """
    a, b = base.per_sample_s or base.timed_step_s, other.per_sample_s or other.timed_step_s
    idle = idle_word((base, other))
    if a == b:
        return None, (
            f"{_label(base.framework)} and {_label(other.framework)} take the same time per step "
            f"({ms(base.timed_step_s)} ms); {idle} {share_text(base.idle_share)} vs {share_text(other.idle_share)}"
        )
    slow, fast, sign = (other, base, 1.0) if b > a else (base, other, -1.0)
    more = sorted(((sign * d.seconds, d.category) for d in differences if sign * d.seconds > 0), reverse=True)
    parts = []
    if more:
        seconds, category = more[0]
        parts.append(f"{ms(seconds)} ms more per step {_where(category)}")
        if len(more) > 1 and more[1][0] >= SECOND_REASON * seconds:
            parts.append(f"{ms(more[1][0])} ms more {_where(more[1][1])}")
    text = f"{_label(slow.framework)} spends " + " and ".join(parts) + f" than {_label(fast.framework)}"
    if slow.batch != fast.batch and slow.batch and fast.batch:
        text += f" (a step of {slow.batch} samples against {fast.batch})"
    return slow.framework, text + f"; {idle} {share_text(slow.idle_share)} vs {share_text(fast.idle_share)}"


def compare(
    base: WhySide, other: WhySide, base_runs: Sequence[RunState], runs: Sequence[RunState]
) -> WhyPair:
    """``other`` against ``base``: each category's difference in seconds per step (largest first) and the sentence."""
    mixed = analysis.mixed_devices(base_runs, runs)
    if mixed is not None:
        text = f"no comparison between {_label(base.framework)} and {_label(other.framework)}: they ran on different devices ({mixed})"
        return WhyPair(base.framework, other.framework, (), None, text)
    order = {c: i for i, c in enumerate(PROFILE_CATEGORIES)}
    differences = sorted(
        (Difference(c, other.seconds(c) - base.seconds(c)) for c in PROFILE_CATEGORIES),
        key=lambda d: (-abs(d.seconds), order[d.category]),
    )
    slower, text = explain(base, other, differences)
    return WhyPair(base.framework, other.framework, tuple(differences), slower, text)


def counters_text(cells: Sequence[tuple[str, Sequence[RunState]]], counters: dict[str, Any] | None) -> str:
    """The GPU counters of the frameworks' runs in words, or plainly why there are none.

    NVML's utilization only says a kernel was running; SM, tensor-core and DRAM activity (the
    profiling counters) say how busy the GPU was, where the sampler could read them (``counters``:
    the session's ``counters`` event).
    """
    runs = [r for _, rs in cells for r in rs]
    kinds = analysis.device_kinds(runs)
    if kinds and "cuda" not in kinds:
        return "GPU counters: none (the runs trained on the CPU)"
    values: dict[str, dict[str, float]] = {}
    for framework, rs in cells:
        readings = [r.counters() for r in rs]
        values[framework] = {
            name: mean(found)
            for name in ("gpu_util", *(n for n, _ in COUNTER_WORDS))
            if (found := [c[name] for c in readings if name in c])
        }

    def figures(name: str) -> str | None:
        found = [values[fw].get(name) for fw, _ in cells]
        if all(v is None for v in found):
            return None
        return " vs ".join("–" if v is None else f"{v:.0f}%" for v in found)

    who = " vs ".join(_label(fw) for fw, _ in cells)
    parts = []
    counted = [f"{words} {text}" for name, words in COUNTER_WORDS if (text := figures(name)) is not None]
    if counted:
        source = str((counters or {}).get("source") or "the GPU's profiling counters")
        parts.append(", ".join(counted) + f" ({source}, means while training)")
    util = figures("gpu_util")
    if util is not None:
        parts.append(f"NVML utilization {util} (a kernel was running, not how busy the SMs were)")
    if not counted:
        if counters is None:
            why = "the session recorded no profiling counters"
        elif counters.get("available") is not True:
            why = " ".join(str(counters.get("reason") or "").split())
            # The sampler's reason may begin by saying what this sentence says ("... unavailable: ").
            why = re.sub(r"^[^:]{0,60}\bunavailable:\s*", "", why) or "the sampler could not read them"
        else:
            why = "no sample of these runs had them"
        parts.append(f"SM, tensor-core and DRAM activity not measured: {why}")
    return f"GPU counters, {who}: " + "; ".join(parts)


# -- a cell -----------------------------------------------------------------------------------------
def why_for_cell(
    model: str,
    cells: Sequence[tuple[str, Sequence[RunState]]],
    counters: dict[str, Any] | None = None,
    expected: bool = False,
) -> WhyTable | None:
    """The why of one model: ``cells`` are its (framework, runs) in the plan's order; ``counters`` the
    session's counters event; ``expected``: the plan asked for profiles. None when no framework has a
    usable profile (a session without ``--profile``: no why at all; failed profiles are run notes).

    Each later framework is compared with the first that has a profile, as the verdicts are.
    """
    sides: list[WhySide] = []
    notes: list[str] = []
    ok_runs = {fw: [r for r in runs if r.status is RunStatus.OK] for fw, runs in cells}
    for framework, _ in cells:
        side = profile_side(framework, ok_runs[framework])
        if side is not None:
            sides.append(side)
        elif ok_runs[framework]:
            said = profile_notes(ok_runs[framework], expected) or ["no profile"]
            notes += [f"{_label(framework)}: {note}" for note in said]
    if not sides:
        return None
    base = sides[0]
    pairs = tuple(compare(base, s, ok_runs[base.framework], ok_runs[s.framework]) for s in sides[1:])
    profiled = [(s.framework, ok_runs[s.framework]) for s in sides]
    return WhyTable(
        model,
        tuple(sides),
        pairs,
        counters_text(profiled, counters),
        tuple(notes),
        tuple(side_line(s) for s in sides),
    )


def breakdown(table: WhyTable) -> tuple[list[str], list[list[str]]]:
    """The table of a why: a row per category, largest difference first (the plan's order with one
    framework), each framework's milliseconds per step and share, then each difference from the base;
    and a last row, the timed step, whose cells the rows above add up to."""
    sides = table.sides
    header = ["Category"] + [f"{_label(s.framework)} (ms/step)" for s in sides]
    header += [f"{_label(p.other)} − {_label(p.base)} (ms)" for p in table.pairs]
    order = (
        [d.category for d in table.pairs[0].differences] if table.pairs and table.pairs[0].differences else []
    )
    order = order or list(PROFILE_CATEGORIES)
    diffs = [{d.category: d.seconds for d in p.differences} for p in table.pairs]
    rows = []
    for category in order:
        row = [CATEGORY_LABELS.get(category, category)]
        row += [f"{ms(s.seconds(category))} ({share_text(s.shares.get(category, 0.0))})" for s in sides]
        row += [signed_ms(d[category]) if category in d else "–" for d in diffs]
        rows.append(row)
    total = ["Step (timed)"] + [ms(s.timed_step_s) for s in sides]
    total += [signed_ms(sum(d.values())) if d else "–" for d in diffs]
    return header, rows + [total]


def top_ops(table: WhyTable, most: int = TOP_OPS) -> tuple[list[str], list[list[str]]]:
    """Each framework's longest ops (at most ``most`` each): its name, category, ms per step (its share of
    the timed step), its share of the profiled step and calls per step."""
    header = ["Framework", "Op", "Category", "ms/step", "Share", "Calls/step"]
    rows = [
        [
            _label(side.framework),
            op.name,
            CATEGORY_LABELS.get(op.category, op.category),
            ms(op.seconds),
            share_text(op.share),
            "–" if op.calls is None else f"{op.calls:.3g}",
        ]
        for side in table.sides
        for op in side.top[:most]
    ]
    return header, rows

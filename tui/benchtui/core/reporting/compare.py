"""Two sessions side by side: per (model, framework), both times and B/A with a 95% CI; a CI gate.

B/A is the verdict's ratio (``analysis.compare_cells``): time per sample over the epochs after the first
(of the only epoch when a run has one), from the same data as the cells' images/s, with the same rule
for its interval, so one run a side says "no CI: one value per side" here as in each session's verdict.
A cell that other processes kept the machine busy for (the verdict's contention rule) is "unreliable"
here too, and never fails the gate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from benchtui.core import fmt
from benchtui.core.model import generation_figures
from benchtui.core.model.analysis import (
    compare_cells,
    epochs_of,
    figure_groups,
    framework_label,
    host_threads,
    mixed_devices,
    model_label,
    pair_groups,
    threads_text,
    timing_groups,
)
from benchtui.core.model.cell import FrameworkRatio, SessionSummary
from benchtui.core.model.runs import RunState
from benchtui.core.model.session_model import OTHER_LOAD_WARN_CORES, contention_part
from benchtui.core.model.stats import Ratio, grouped_mean, ratio_ci
from benchtui.core.plan.plan import command_text
from benchtui.core.plan.sweep import NO_POINT, Point
from benchtui.core.reporting.model.build import summary_of
from benchtui.core.store.session import LoadedSession, load_session

#: Plan fields that change what an epoch is or how fast it runs: differences are pointed out, each by the
#: flag that sets it (what a user types to make the sessions agree).
PLAN_FIELDS = {
    "task": "--task",  # training steps against forward passes: not the same work at all
    "seq_len": "--seq-len",
    "prompt_len": "--prompt-len",  # --task generate (issue 34): a plan records them only then
    "new_tokens": "--new-tokens",
    "image_size": "--image-size",
    "samples": "--samples",
    "epochs": "--epochs",
    "batch_sizes": "--batch-size",
    "device": "--device",
    "devices": "--devices",
    "data": "--data",
    "precision": "--precision",
    "compile": "--compile",
    "cudnn_autotune": "--no-cudnn-autotune",
    "channels_last": "--channels-last",
    "num_classes": "--num-classes",
    "order": "--order",  # interleaved or grouped: how drift in clocks and temperature falls on the frameworks
}
#: Other processes' CPU use (cores) that sets two sessions apart: as much as the summary warns of.
LOAD_DIFFERENCE_CORES = OTHER_LOAD_WARN_CORES


@dataclass
class CompareRow:
    """One (model, framework): A's and B's steady time and B/A."""

    model: str
    framework: str
    status_a: str
    status_b: str
    time_a: float | None = None
    time_b: float | None = None
    basis: str = ""
    ratio: Ratio | None = None
    note: str = ""
    #: Why the machine, not the sessions, may have decided B/A (the verdict's contention rule); None: it did not.
    unreliable: str | None = None
    #: Its sweep point (``Point()``: a cell of a plan without a sweep); cells are matched by it too.
    point: Point = NO_POINT

    @property
    def cell(self) -> str:
        """The row in words: 'ResNet50 · PyTorch', a sweep's point after the model ('ResNet50 · batch 8 · PyTorch')."""
        at = f" · {self.point.label}" if self.point else ""
        return f"{model_label(self.model)}{at} · {framework_label(self.framework)}"

    @property
    def both(self) -> bool:
        return self.ratio is not None

    def conclusive_slowdown(self, pct: float) -> bool:
        """B slower than A by more than ``pct`` percent, beyond the noise (its CI above 1, several runs a
        side) and on machines that did not decide it (no ``unreliable``)."""
        return (
            self.ratio is not None
            and self.unreliable is None
            and self.ratio.percent > pct
            and self.ratio.conclusive
        )

    def slower_than(self, pct: float) -> bool:
        """B conclusively slower than A, by more than ``pct`` percent, or B failed where A did not.

        A slowdown inside the noise (its CI contains 1, or one run on a side cannot tell), or measured
        while other processes kept the cores busy, is not a regression: a CI gate must not fail on chance.
        A cell that B's plan does not have is not a regression either; a crash is.
        """
        if self.status_b == "failed" and self.status_a != "failed":
            return True
        if self.ratio is not None:
            return self.conclusive_slowdown(pct)
        return self.status_a in ("ok", "incomplete") and self.status_b not in ("ok", "absent", "incomplete")

    def text(self) -> str:
        """What B compared with A says: the ratio's phrase, 'unreliable: …' with what was measured, or why
        there is no ratio."""
        if self.ratio is None:
            return self.note
        r = self.ratio
        if self.unreliable is not None:
            interval = "" if r.low is None or r.high is None else f" (95% CI {r.low:.2f}–{r.high:.2f})"
            if not interval:
                interval = " (no CI: one value per side)"
            return f"unreliable: {self.unreliable}; measured, not a verdict: B took {r.value:.2f}× A's time{interval}"
        return r.phrase()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "framework": self.framework,
            **({"point": self.point.to_json()} if self.point else {}),
            "status_a": self.status_a,
            "status_b": self.status_b,
            "time_a": self.time_a,
            "time_b": self.time_b,
            "basis": self.basis,
            "note": self.note,
            "unreliable": self.unreliable,
            "text": self.text(),
            **({"ratio": self.ratio.to_dict()} if self.ratio else {"ratio": None}),
        }


@dataclass
class Comparison:
    """B against A, row by row; its text (notes, differences, verdicts) is cleaned (``fmt.clean``)."""

    a: LoadedSession
    b: LoadedSession
    rows: list[CompareRow] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    # Each session's own verdicts (framework against framework, per model): the summary's, as every view prints them.
    verdicts_a: list[FrameworkRatio] = field(default_factory=list)
    verdicts_b: list[FrameworkRatio] = field(default_factory=list)

    def failing(self, pct: float) -> list[CompareRow]:
        return [r for r in self.rows if r.slower_than(pct)]

    @property
    def common(self) -> list[tuple[str, str]]:
        """The (model, framework) cells both sessions' plans have (at the same sweep point): what a comparison
        compares."""
        return [(r.model, r.framework) for r in self.rows if "absent" not in (r.status_a, r.status_b)]

    def gate(self, pct: float) -> str:
        """``--fail-above PCT`` in one sentence: the rule it applies and what it found.

        The rule: a row fails when B is slower than A by more than PCT percent beyond the noise (the
        95% CI of B/A above 1, with several runs a side, on machines other processes did not keep busy),
        or when B failed where A did not. A slowdown the rule does not count is named with why.
        """
        rule = (
            f"--fail-above {pct:g} fails a row when B is slower than A by more than {pct:g}% beyond the noise "
            "(its 95% CI above 1, several runs a side, no other work on the cores) or when B failed where A "
            "did not"
        )
        failing = self.failing(pct)
        if failing:
            names = ", ".join(r.cell for r in failing)
            return f"FAIL: {rule}: {len(failing)} row(s) do ({names})"
        uncounted = [
            r
            for r in self.rows
            if r.ratio is not None and r.ratio.percent > pct and not r.conclusive_slowdown(pct)
        ]
        result = f"ok: {rule}: no row does"
        if uncounted:
            result += "; not counted, inside the noise or on a busy machine: " + ", ".join(
                f"{r.cell} {r.ratio.percent:+.1f}% ({_why_not(r)})" for r in uncounted if r.ratio is not None
            )
        return fmt.clean(result)

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": str(self.a.path),
            "b": str(self.b.path),
            "rows": [r.to_dict() for r in self.rows],
            "differences": self.differences,
            "verdicts": {
                "a": [v.to_json() for v in self.verdicts_a],
                "b": [v.to_json() for v in self.verdicts_b],
            },
        }


def _cleaned(ratios: tuple[FrameworkRatio, ...]) -> list[FrameworkRatio]:
    """A session's verdicts with their text made safe to show (``fmt.clean``): their sentences come from files."""
    return [FrameworkRatio.from_json(fmt.clean_tree(r.to_json())) for r in ratios]


def _why_not(row: CompareRow) -> str:
    """Why a slowdown above the threshold does not fail the gate."""
    r = row.ratio
    if row.unreliable is not None:
        return "unreliable: " + row.unreliable
    if r is None:
        return row.note
    if r.significant is None:
        return "no CI: one value per side"
    if r.significant is False:
        return "its 95% CI holds 1"
    return "one run on a side: run-to-run spread unknown"


def _load(spec: str | os.PathLike[str] | LoadedSession) -> LoadedSession:
    return spec if isinstance(spec, LoadedSession) else load_session(spec)


def _cell_status(
    loaded: LoadedSession, summary: SessionSummary, fw: str, m: str, point: Point = NO_POINT
) -> str:
    """A cell's status: its summary row's (the same as its model row's, without folding its batches again),
    or "absent" where the plan has no such cell."""
    if fw not in loaded.plan.frameworks or m not in loaded.plan.models or point not in loaded.plan.points():
        return "absent"
    for row in summary.rows:
        if row.framework == fw and row.model == m and row.point == point:
            return row.status
    return loaded.model.row(fw, m, point).status


def watch_text(watch: dict[str, Any]) -> str:
    """A watch plan's command as it was typed, with its folder; 'no watch' for a plan's session."""
    if not watch:
        return "no watch (a benchmark plan)"
    command = watch.get("command") or []
    return (command_text(command) if command else "telemetry only") + f" in {watch.get('cwd') or '?'}"


def _differences(
    a: LoadedSession, b: LoadedSession, summary_a: SessionSummary, summary_b: SessionSummary
) -> list[str]:
    """Settings, hardware and library versions that differ between the sessions (cleaned: GPU names
    and versions come from the session files); ``summary_a``, ``summary_b``: their summaries."""
    out = []
    if a.plan.watch or b.plan.watch:  # benchtui watch: what each session watched, and where
        wa, wb = (watch_text(p.watch) for p in (a.plan, b.plan))
        if wa != wb:
            out.append(f"watched: {wa} vs {wb}")
    pa, pb = a.plan.to_dict(), b.plan.to_dict()
    for key, flag in PLAN_FIELDS.items():
        va, vb = pa.get(key), pb.get(key)
        if key == "batch_sizes":
            shared = [m for m in a.plan.models if m in b.plan.models]
            va = {m: a.plan.batch_size(m) for m in shared}
            vb = {m: b.plan.batch_size(m) for m in shared}
            if va != vb:
                out.append(f"{flag}: {_sizes(va)} vs {_sizes(vb)}")
            continue
        if va != vb:
            out.append(f"{flag}: {_value(key, va)} vs {_value(key, vb)}")
    if (
        a.plan.nodes != b.plan.nodes
    ):  # several machines (issue 33): a plan records them only when more than one
        out.append(f"--nodes: {a.plan.nodes} vs {b.plan.nodes}")
    sa, sb = (_sweep_text(p.sweep) for p in (a.plan, b.plan))
    if sa != sb:  # cells are matched by point: a sweep against another grid compares only the points shared
        out.append(
            f"--sweep: {sa} vs {sb} (cells are matched by framework, model and point: "
            + (
                "only the cells without a point are compared, and a sweep's cells each have one)"
                if "none" in (sa, sb)
                else "only the cells at a point both sessions ran are compared)"
            )
        )
    pa_, pb_ = a.meta.get("placement") or {}, b.meta.get("placement") or {}
    if pa_.get("kind") != pb_.get("kind") and pa_ and pb_:
        out.append(f"device: {pa_.get('kind')} vs {pb_.get('kind')}")
    ga = [g.get("name") for g in a.meta.get("gpus") or []]
    gb = [g.get("name") for g in b.meta.get("gpus") or []]
    if ga != gb:
        out.append(f"GPUs: {', '.join(map(str, ga)) or 'none'} vs {', '.join(map(str, gb)) or 'none'}")
    da = {g.get("driver") for g in a.meta.get("gpus") or []}
    db = {g.get("driver") for g in b.meta.get("gpus") or []}
    if ga == gb and da != db:
        out.append(f"driver: {', '.join(map(str, da))} vs {', '.join(map(str, db))}")
    ca, cb = _cpu(a.meta), _cpu(b.meta)
    if ca != cb:
        out.append(f"CPU: {ca} vs {cb}")
    la, lb = _other_load(a), _other_load(b)
    if la is not None and lb is not None and abs(la - lb) >= LOAD_DIFFERENCE_CORES:
        out.append(f"other processes' CPU use: {la:.1f} vs {lb:.1f} cores (the busiest run of each)")
    ma, mb = a.plan.memory_limit_mb, b.plan.memory_limit_mb
    if ma != mb:
        out.append(f"memory limit: {_megabytes(ma)} vs {_megabytes(mb)}")
    for fw in [fw for fw in a.plan.frameworks if fw in b.plan.frameworks]:
        ta, tb = _threads(a, fw), _threads(b, fw)
        # A side whose runs never started has no thread setting to compare.
        if ta is not None and tb is not None and ta != tb:
            line = f"{framework_label(fw)} threads (--threads): {threads_text(*ta)} vs {threads_text(*tb)}"
            if ta[0] is not None and tb[0] is not None and ta[0] * ta[1] == tb[0] * tb[1]:
                line += f": the same {ta[0] * ta[1]} in all"
            out.append(line)
        ia, ib = (
            (p.python.get(fw) if isinstance(p.python, dict) else None) or "its default environment"
            for p in (a.plan, b.plan)
        )
        if ia != ib:
            out.append(f"{framework_label(fw)} interpreter: {ia} vs {ib}")
    ea = summary_a.frameworks or {}
    eb = summary_b.frameworks or {}
    for fw in sorted(set(ea) & set(eb)):
        va, vb = ea[fw].get("versions") or {}, eb[fw].get("versions") or {}
        for lib in sorted(set(va) | set(vb)):
            if va.get(lib) != vb.get(lib):
                out.append(f"{framework_label(fw)} {lib}: {va.get(lib)} vs {vb.get(lib)}")
    return [fmt.clean(d) for d in out]


def _sweep_text(sweep: dict[str, list[str]]) -> str:
    """A plan's sweep in words, 'batch 4, 8 × channels-last off, on'; 'none' without one (a devices sweep is a
    scaling session: no point)."""
    axes = [f"{a} {', '.join(vs)}" for a, vs in sweep.items() if a != "devices"]
    return " × ".join(axes) or "none"


def _cpu(meta: dict[str, Any]) -> str:
    """The host's CPU as session.json records it: its model and the cores the system has."""
    host = meta.get("host")
    if not isinstance(host, dict):
        host = {}
    model, count = host.get("cpu_model"), host.get("cpu_count")
    cores = f"{count} core{'s' if count != 1 else ''}" if isinstance(count, int) else "cores not recorded"
    return f"{model or 'model not recorded'} ({cores})"


def _other_load(loaded: LoadedSession) -> float | None:
    """What other processes kept busy on the CPU (cores) during the session's busiest run (None: not sampled)."""
    loads = [r.other_cpu for r in loaded.model.runs.values() if r.other_cpu is not None]
    return max(loads) if loads else None


def _megabytes(mb: object) -> str:
    if isinstance(mb, int) and not isinstance(mb, bool):
        return f"{mb:,} MB" if mb else "none"
    return str(mb)  # a hand-edited file: said as it is


def _sizes(sizes: dict[str, int]) -> str:
    """Batch sizes by model: '32', or 'ResNet50 32, DenseNet-121 16' when the models differ in them."""
    values = set(sizes.values())
    if len(values) == 1:
        return str(values.pop())
    return ", ".join(f"{model_label(m)} {v}" for m, v in sizes.items()) or "none"


def _value(key: str, value: object) -> str:
    """A plan field's value as a user sets it: 'on'/'off' for a switch."""
    if isinstance(value, bool):
        if key == "cudnn_autotune":
            return "autotune on" if value else "autotune off"
        return "on" if value else "off"
    return "not set" if value is None else str(value)


def _threads(loaded: LoadedSession, fw: str) -> tuple[int | None, int] | None:
    """The CPU threads a framework's ops ran on, per process, and its processes on the host (a rank each
    for PyTorch's data parallel): what its runner reported, else what the plan asked. None when none of its
    runs started: a run that never started has no thread setting to compare."""
    for run in loaded.model.runs.values():
        if run.spec.framework == fw and run.hello:
            threads, processes = host_threads(run)
            if threads is None and loaded.plan.threads:
                threads = loaded.plan.threads
            return threads, processes
    return None


def _seconds_per_sample(runs: list[RunState]) -> tuple[str, float | None]:
    """A side's time per sample on the verdict's basis (``analysis.compare_cells``), and that basis; for a
    watched command whose hooks gave no samples per epoch, its steady times (``timing_groups``) instead."""
    groups, numerator = figure_groups(runs, "images_per_s")
    if numerator is None:
        basis, groups = timing_groups(runs)
        return basis, grouped_mean(groups) if groups else None
    basis = "epoch" if all(len(epochs_of(r)) > 1 for r in runs) else "single-epoch"
    return basis, grouped_mean(groups) if groups else None


def _seconds_per_token(runs: list[RunState]) -> float | None:
    """A generate side's time per token after the first, its batch's (the inverse of the verdict's tokens/s)."""
    figures = generation_figures.figures(runs) if runs else None
    rate = figures.batch_tokens_per_s if figures is not None else None
    return 1.0 / rate if rate else None


def _contention(
    runs_a: list[RunState], runs_b: list[RunState], la: LoadedSession, lb: LoadedSession
) -> str | None:
    """Why the machine, not the sessions, may have decided B/A (the verdict's contention rule); None: it did not."""
    parts = [
        p
        for label, runs, loaded in (("A", runs_a, la), ("B", runs_b, lb))
        if (p := contention_part(label, runs, loaded.model.host_cores, loaded.plan.threads)) is not None
    ]
    return fmt.clean("other processes kept " + " and ".join(parts)) if parts else None


def compare_sessions(
    a: str | os.PathLike[str] | LoadedSession, b: str | os.PathLike[str] | LoadedSession
) -> Comparison:
    """Compare session B against baseline A, cell by cell, by the verdict's rule.

    Each side's time is its seconds per sample over the epochs after the first (of the only epoch
    when a run has one), total time over total samples, the data of its images/s; B/A comes with a
    95% CI from the same hierarchical bootstrap as the verdict (``analysis.compare_cells``), and with
    one value a side it has none.
    """
    la, lb = _load(a), _load(b)
    sa, sb = summary_of(la), summary_of(lb)  # once each: a million events' intervals are seconds of work
    cells: list[tuple[str, str, Point]] = []  # (model, framework, sweep point): a cell of either plan
    for loaded in (la, lb):
        for fw, m, point in loaded.model.grid():
            if (m, fw, point) not in cells:
                cells.append((m, fw, point))
    out = Comparison(
        la,
        lb,
        differences=_differences(la, lb, sa, sb),
        verdicts_a=_cleaned(sa.ratios),
        verdicts_b=_cleaned(sb.ratios),
    )
    for m, fw, at in cells:
        row = CompareRow(m, fw, _cell_status(la, sa, fw, m, at), _cell_status(lb, sb, fw, m, at), point=at)
        runs_a = la.model.measured_runs(fw, m, at) if row.status_a != "absent" else []
        runs_b = lb.model.measured_runs(fw, m, at) if row.status_b != "absent" else []
        mixed = mixed_devices(runs_a, runs_b) if runs_a and runs_b else None
        if runs_a:
            row.basis, row.time_a = _seconds_per_sample(runs_a)
        if runs_b:
            row.basis, row.time_b = _seconds_per_sample(runs_b)
        generating = any(r.generation is not None and r.generation.steps for r in (*runs_a, *runs_b))
        if generating:  # issue 34: the batch's time per token after the first, as the generate verdict
            row.basis = "tokens"
            row.time_a, row.time_b = _seconds_per_token(runs_a), _seconds_per_token(runs_b)
        if mixed is not None:
            row.note = f"no ratio: A and B ran on different devices ({mixed})"
        elif runs_a and runs_b and generating:
            ratio = generation_figures.compare(runs_a, runs_b)
            if ratio is None:
                row.note = "no comparable times (no generate step after the first token on a side)"
            else:
                row.ratio = ratio
                row.unreliable = _contention(runs_a, runs_b, la, lb)
        elif runs_a and runs_b:
            result = compare_cells(runs_a, runs_b)  # the verdict's ratio, basis and interval
            if result is None:
                # No samples per epoch (a watched command's hooks may not say): its steady times instead.
                basis, ga, gb = pair_groups(runs_a, runs_b)
                ratio = ratio_ci(ga, gb)
                if ratio is None:
                    row.note = "no comparable times"
                else:
                    row.ratio, row.basis = ratio, basis
                    row.time_a, row.time_b = grouped_mean(ga), grouped_mean(gb)
            else:
                row.basis, row.ratio = result
                row.unreliable = _contention(runs_a, runs_b, la, lb)
        else:
            missing = []
            if not runs_a:
                missing.append(
                    "A "
                    + ("has no such cell" if row.status_a == "absent" else f"has no result ({row.status_a})")
                )
            if not runs_b:
                missing.append(
                    "B "
                    + ("has no such cell" if row.status_b == "absent" else f"has no result ({row.status_b})")
                )
            row.note = "; ".join(missing)
        row.note = fmt.clean(row.note)  # device names and statuses come from the session files
        out.rows.append(row)
    return out

"""Two sessions side by side: per (model, framework), both times and B/A with a 95% CI; a CI gate."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, mixed_devices, pair_groups, timing_groups
from benchtui.core.model.stats import Ratio, grouped_mean, ratio_ci
from benchtui.core.model.summary import OTHER_LOAD_WARN_CORES
from benchtui.core.plan.plan import command_text
from benchtui.core.store.session import LoadedSession, load_session

#: Plan fields that change what an epoch is or how fast it runs: differences are pointed out.
PLAN_FIELDS = (
    "task",  # training steps against forward passes: not the same work at all
    "seq_len",
    "image_size",
    "samples",
    "epochs",
    "batch_sizes",
    "device",
    "data",
    "precision",
    "compile",
    "cudnn_autotune",
    "channels_last",
    "num_classes",
    "order",  # interleaved or grouped: how drift in clocks and temperature falls on the frameworks
)
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

    @property
    def both(self) -> bool:
        return self.ratio is not None

    def slower_than(self, pct: float) -> bool:
        """B significantly slower than A, by more than ``pct`` percent, or B failed where A did not.

        A slowdown inside the noise (its CI contains 1, or one run on a side cannot tell)
        is not a regression: a CI gate must not fail on chance. A cell that B's plan does
        not have is not a regression either; a crash is.
        """
        if self.status_b == "failed" and self.status_a != "failed":
            return True
        if self.ratio is not None:
            return self.ratio.percent > pct and self.ratio.conclusive
        return self.status_a == "ok" and self.status_b not in ("ok", "absent")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "framework": self.framework,
            "status_a": self.status_a,
            "status_b": self.status_b,
            "time_a": self.time_a,
            "time_b": self.time_b,
            "basis": self.basis,
            "note": self.note,
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
    verdicts_a: list[dict[str, Any]] = field(default_factory=list)
    verdicts_b: list[dict[str, Any]] = field(default_factory=list)

    def failing(self, pct: float) -> list[CompareRow]:
        return [r for r in self.rows if r.slower_than(pct)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": str(self.a.path),
            "b": str(self.b.path),
            "rows": [r.to_dict() for r in self.rows],
            "differences": self.differences,
            "verdicts": {"a": self.verdicts_a, "b": self.verdicts_b},
        }


def _load(spec: str | os.PathLike[str] | LoadedSession) -> LoadedSession:
    return spec if isinstance(spec, LoadedSession) else load_session(spec)


def _cell_status(loaded: LoadedSession, fw: str, m: str) -> str:
    if fw not in loaded.plan.frameworks or m not in loaded.plan.models:
        return "absent"
    return loaded.model.row(fw, m)["status"]


def watch_text(watch: dict[str, Any]) -> str:
    """A watch plan's command as it was typed, with its folder; 'no watch' for a plan's session."""
    if not watch:
        return "no watch (a benchmark plan)"
    command = watch.get("command") or []
    return (command_text(command) if command else "telemetry only") + f" in {watch.get('cwd') or '?'}"


def _differences(a: LoadedSession, b: LoadedSession) -> list[str]:
    """Settings, hardware and library versions that differ between the sessions (cleaned: GPU names
    and versions come from the session files)."""
    out = []
    if a.plan.watch or b.plan.watch:  # benchtui watch: what each session watched, and where
        wa, wb = (watch_text(p.watch) for p in (a.plan, b.plan))
        if wa != wb:
            out.append(f"watched: {wa} vs {wb}")
    pa, pb = a.plan.to_dict(), b.plan.to_dict()
    for key in PLAN_FIELDS:
        va, vb = pa.get(key), pb.get(key)
        if key == "batch_sizes":
            shared = set(a.plan.models) & set(b.plan.models)
            va = {m: a.plan.batch_size(m) for m in sorted(shared)}
            vb = {m: b.plan.batch_size(m) for m in sorted(shared)}
        if va != vb:
            out.append(f"{key}: {va} vs {vb}")
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
        if ta != tb:
            out.append(f"{framework_label(fw)} threads: {ta} vs {tb}")
        ia, ib = (
            (p.python.get(fw) if isinstance(p.python, dict) else None) or "its default environment"
            for p in (a.plan, b.plan)
        )
        if ia != ib:
            out.append(f"{framework_label(fw)} interpreter: {ia} vs {ib}")
    ea = a.model.summary().get("frameworks") or {}
    eb = b.model.summary().get("frameworks") or {}
    for fw in sorted(set(ea) & set(eb)):
        va, vb = ea[fw].get("versions") or {}, eb[fw].get("versions") or {}
        for lib in sorted(set(va) | set(vb)):
            if va.get(lib) != vb.get(lib):
                out.append(f"{framework_label(fw)} {lib}: {va.get(lib)} vs {vb.get(lib)}")
    return [fmt.clean(d) for d in out]


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


def _threads(loaded: LoadedSession, fw: str) -> str:
    """The CPU threads a framework's ops ran on: what its runner reported, else what the plan asked."""
    for run in loaded.model.runs.values():
        if run.spec.framework == fw and run.hello:
            settings = run.hello.get("settings") or {}
            config = run.hello.get("config") or {}
            for value in (settings.get("intra_op_threads"), config.get("threads")):
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return str(value)
            break
    return str(loaded.plan.threads) if loaded.plan.threads else "the framework's default"


def compare_sessions(
    a: str | os.PathLike[str] | LoadedSession, b: str | os.PathLike[str] | LoadedSession
) -> Comparison:
    """Compare session B against baseline A, cell by cell, on steady training time.

    The time is the mean over runs of the mean epoch time excluding the first (the
    study's figure), or of batch times after warm-up when there are too few epochs;
    B/A comes with a 95% CI from a hierarchical bootstrap of the raw times of both.
    """
    la, lb = _load(a), _load(b)
    cells: list[tuple[str, str]] = []
    for loaded in (la, lb):
        for m in loaded.plan.models:
            for fw in loaded.plan.frameworks:
                if (m, fw) not in cells:
                    cells.append((m, fw))
    out = Comparison(
        la,
        lb,
        differences=_differences(la, lb),
        verdicts_a=fmt.clean_tree(list(la.model.summary().get("ratios") or [])),
        verdicts_b=fmt.clean_tree(list(lb.model.summary().get("ratios") or [])),
    )
    for m, fw in cells:
        row = CompareRow(m, fw, _cell_status(la, fw, m), _cell_status(lb, fw, m))
        runs_a = la.model.measured_runs(fw, m) if row.status_a != "absent" else []
        runs_b = lb.model.measured_runs(fw, m) if row.status_b != "absent" else []
        mixed = mixed_devices(runs_a, runs_b) if runs_a and runs_b else None
        if mixed is not None:
            row.note = f"no ratio: A and B ran on different devices ({mixed})"
            row.basis, ga = timing_groups(runs_a)
            row.time_a = grouped_mean(ga)
            row.basis, gb = timing_groups(runs_b)
            row.time_b = grouped_mean(gb)
        elif runs_a and runs_b:
            basis, ga, gb = pair_groups(runs_a, runs_b)
            row.basis = basis
            row.time_a, row.time_b = grouped_mean(ga), grouped_mean(gb)
            row.ratio = ratio_ci(ga, gb)
            if row.ratio is None:
                row.note = "no comparable times"
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
            if runs_a:
                row.basis, ga = timing_groups(runs_a)
                row.time_a = grouped_mean(ga)
            if runs_b:
                row.basis, gb = timing_groups(runs_b)
                row.time_b = grouped_mean(gb)
        row.note = fmt.clean(row.note)  # device names and statuses come from the session files
        out.rows.append(row)
    return out

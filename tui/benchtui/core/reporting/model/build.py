"""The report of a session, built once from its summary: the one place its text is made safe to show."""

from __future__ import annotations

from typing import Any

from benchtui.core import fmt
from benchtui.core.model.analysis import batch_size_of, epochs_of, samples_per_epoch
from benchtui.core.model.cell import CellSummary, FrameworkRatio, SessionSummary
from benchtui.core.reporting.folder import log_text
from benchtui.core.reporting.model.answer import answer, notices, problems
from benchtui.core.reporting.model.columns import wording
from benchtui.core.reporting.model.devices import node_views, per_device_table, scaling_views, wiring_table
from benchtui.core.reporting.model.environment import WATCH_LABELS, environment, header_facts
from benchtui.core.reporting.model.figures import _clean_pairs, clean_table
from benchtui.core.reporting.model.generation import generation_curves, generation_tables
from benchtui.core.reporting.model.sweep import sweep_view
from benchtui.core.reporting.model.tables import (
    efficiency_methods,
    efficiency_table,
    figure_tables,
    latency_table,
    parity_table,
    side_by_side,
)
from benchtui.core.reporting.model.telemetry import SamplesDigest, read_digest
from benchtui.core.reporting.model.types import (
    Nodes,
    Notice,
    Problem,
    Report,
    RunSeries,
    Scaling,
    Source,
    Why,
)
from benchtui.core.reporting.model.warmup import epoch_times, stall_lines, warmup_table
from benchtui.core.reporting.model.why import why_views
from benchtui.core.store.session import LoadedSession, no_gc_passes

#: Whether views take a finished session's summary from summary.json when its cache says the events are those
#: it was computed from (``SessionFolder.cached_summary``, issue 35): the statistics and bootstrap intervals of
#: a million events are seconds of work that reopening a session need not redo.
USE_CACHED_SUMMARY = True


def summary_of(loaded: LoadedSession) -> SessionSummary:
    """``loaded``'s summary: summary.json's when its cache holds for the events file and this code, else
    computed from the folded model. Every view takes its summary here, once (show, export, compare). A view
    reads the cache and never writes it: ``show`` leaves a session's files as they were."""
    cached = loaded.folder.cached_summary() if USE_CACHED_SUMMARY else None
    return SessionSummary.of(cached) if cached is not None else loaded.model.session_summary()


def build_report(
    loaded: LoadedSession,
    given: SessionSummary | dict[str, Any] | None = None,
    *,
    telemetry: bool = True,
    batches: bool = True,
    samples: SamplesDigest | None = None,
) -> Report:
    """The report of ``loaded``, from its summary (computed here when not given; summary.json's dict is
    read by ``SessionSummary.from_json``). ``telemetry``: with the GPU/host samples, a second pass over
    events.jsonl (a third of a big session's load time) that only the html plots read. ``batches``: each
    run's batch times in ``Report.runs`` (only the json and the html write them; without, they are empty
    there, and a light load's runs are never asked for them: ``reporting.light``). ``samples``: what the GPU
    samples give the report, read already (``reporting.ahead``, beside the load); read here when None.

    The one place where the session's text is made safe to show (``fmt.clean``): every writer
    and view reads the report, none of them the session's strings directly.
    """
    with no_gc_passes():  # the samples' hundred thousand dicts, made with it paused, are not walked here
        return _build(loaded, given, telemetry, batches, samples)


def _build(
    loaded: LoadedSession,
    given: SessionSummary | dict[str, Any] | None,
    telemetry: bool,
    batches: bool,
    samples: SamplesDigest | None,
) -> Report:
    """``build_report``'s work, with the cyclic collector paused."""
    summary = SessionSummary.of(given) if given else summary_of(loaded)
    plan = loaded.plan
    efficiency = efficiency_table(summary)
    latency = latency_table(summary)
    parity, parity_notes = parity_table(summary)
    per_device, per_device_notes = per_device_table(summary)
    wiring = wiring_table(summary, list(plan.frameworks))
    devices = summary.devices
    # Every GPU sample of the file, read once (here, or beside the load: ``samples``): for the html's plots
    # and a watch session's telemetry lines.
    if samples is None and (telemetry or plan.watch):
        samples = read_digest(loaded.folder, plan)
    env = _clean_pairs(environment(loaded, summary, None if samples is None else samples.over_run))
    times_by_epoch = epoch_times(loaded)
    series = run_series(loaded, batches)
    rows = [CellSummary.from_json(fmt.clean_tree(r.to_json())) for r in summary.rows]
    return Report(
        source=Source(
            loaded.path,
            loaded.meta,
            tuple(plan.frameworks),
            tuple(plan.models),
            tuple(loaded.warnings),
            plan.devices,
            plan.epochs,
            bool(plan.watch),
            plan.nodes,
        ),
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
        ratios=[FrameworkRatio.from_json(fmt.clean_tree(r.to_json())) for r in summary.ratios],
        problems=[
            Problem(fmt.clean(p.model), fmt.clean(p.framework), fmt.clean(p.status), fmt.clean(p.reason))
            for p in problems(summary)
        ],
        rows=rows,
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
        nodes=summary.nodes,
        node_views=[
            Nodes(
                v.model,
                v.framework,
                clean_table(v.table),
                [fmt.clean(line) for line in v.lines],
                fmt.clean(v.straggler),
            )
            for v in node_views(summary)
        ],
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
        sweep=sweep_view(
            summary,
            [(a, tuple(vs)) for a, vs in plan.sweep.items() if a != "devices"],
            list(plan.frameworks),
            {(fw, m, p): plan.effective(p, fw, m) for fw, m, p in loaded.model.grid()},
        ),
        warmup_notes=[fmt.clean(line) for line in stall_lines(summary, times_by_epoch)],
        runs=series,
        telemetry=samples.lines if telemetry and samples is not None else None,
        generation=[clean_table(t) for t in generation_tables(summary)],
        generation_curves=generation_curves(
            rows, [(r.framework, r.model, r.point, r.index, r.generation) for r in series if r.generation]
        ),
    )


#: Runs whose log the html report shows the end of.
LOGGED = ("failed", "stopped", "interrupted", "diverged")


def run_series(loaded: LoadedSession, batches: bool = True) -> tuple[RunSeries, ...]:
    """Every run of ``loaded`` as the html report plots it, with the end of its log where it failed or was cut
    short (only a regular file inside the session folder is read: ``folder.log_text``); ``batches``: with its
    batch times and their epochs (else empty)."""
    return tuple(
        RunSeries(
            run_id,
            run.spec.framework,
            run.spec.model,
            run.spec.index,
            run.spec.devices,
            run.status,
            run.reason,
            tuple(run.batch_seconds) if batches else (),
            tuple(run.batch_epochs) if batches else (),
            tuple(epochs_of(run)),
            run.figures(),
            run.started_t,
            run.ended_t,
            log_text(loaded.path, loaded.folder.log_path(run_id)) if run.status in LOGGED else "",
            run.spec.point,
            dict(sorted(run.losses.items())),
            tuple(sorted(run.epoch_times)),
            tuple(run.epoch_samples.get(e) for e in sorted(run.epoch_times)),
            batch_size_of(run),
            samples_per_epoch(run),
            run.spec.nodes,
            tuple(run.generation.steps) if run.generation is not None else (),
        )
        for run_id, run in loaded.model.runs.items()
    )

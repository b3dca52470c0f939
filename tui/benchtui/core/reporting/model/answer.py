"""What a report opens with: the verdict per model, the notices and the cells that did not simply succeed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.model.cell import (
    BestPoint,
    BestVerdict,
    CellSummary,
    FrameworkRatio,
    RefusedRatio,
    SessionSummary,
)
from benchtui.core.model.parity import marked
from benchtui.core.model.status import CautionKind
from benchtui.core.reporting.model.columns import flagged_models, wording
from benchtui.core.reporting.model.figures import with_ci
from benchtui.core.reporting.model.notes import (
    ABOUT_SAME_NOTE,
    GENERATE_VERDICT_NOTE,
    UNRELIABLE_NOTE,
    VERDICT_NOTE,
)
from benchtui.core.reporting.model.sweep import best_note, generate_side_rate
from benchtui.core.reporting.model.types import Answer, BestLine, Mark, Notice, Problem, Verdict, Wording
from benchtui.core.store.session import LoadedSession


def verdict_of(ratio: FrameworkRatio, label: str = "") -> Verdict:
    """A summary's verdict (a ``ratios`` entry) as every view shows it, its text cleaned: ``label`` names its
    model (marked when its frameworks build different networks). The answer of a report, the end of a headless
    run, the live screen's answer and its comparison all make their lines from it; each styles its ``mark``."""
    low, high = ratio.ci_low, ratio.ci_high
    # Sessions before the marks have neither key: a ratio as it always was.
    reason = fmt.clean(ratio.unreliable) if ratio.unreliable else ""
    about_same = ratio.about_same and not reason
    faster = ratio.faster_framework
    return Verdict(
        model=fmt.clean(ratio.model),
        label=label,
        text=fmt.clean(ratio.text),
        kind="unreliable" if reason else "ratio",
        basis=fmt.clean(ratio.basis_label),
        significant=ratio.significant,
        base=fmt.clean(ratio.base),
        framework=fmt.clean(ratio.framework),
        ratio=ratio.ratio,
        ci=(low, high) if low is not None and high is not None else None,
        faster="" if reason or about_same or not faster else fmt.clean(faster),
        about_same=about_same,
        unreliable=reason,
    )


def refusal_of(refused: RefusedRatio, label: str = "") -> Verdict:
    """A pair that ran on different devices as a line of the answer: its sentence, no ratio."""
    return Verdict(fmt.clean(refused.model), label, fmt.clean(refused.text), "refused")


def side_text(side: BestPoint, unit: str, rate_text: str | None = None) -> str:
    """One framework's chosen point in words (``rate_text``: its speed as a generate sweep says it)."""
    settings = side.settings or side.point.label or "the plan's settings"
    among = f"fastest of {fmt.plural(side.points, 'point')}" if side.points else "its fastest point"
    rate = f", {fmt.rate(side.images_per_s)} {unit}/s" if side.images_per_s is not None else ""
    if rate_text is not None:  # generate (issue 34): the batch's tokens/s after the first token
        rate = f", {rate_text}"
    return f"{framework_label(side.framework)}: {settings} ({among}{rate})"


def best_lines(
    best: Sequence[BestVerdict], flagged: set[str], unit: str, rows: Sequence[CellSummary] = ()
) -> list[BestLine]:
    """Best vs best per model, in the summary's order (its text cleaned)."""
    out = []
    for b in best:
        label = fmt.clean(marked(model_label(b.model), b.model in flagged))
        length = b.base.point.get("seq-len")
        if length is not None and length == b.other.point.get("seq-len"):  # best vs best at each length
            label += fmt.clean(f" · seq-len {length}")
        verdict = verdict_of(b.verdict, label)
        text = fmt.clean(b.text) or verdict.text
        out.append(
            BestLine(
                fmt.clean(b.model),
                label,
                tuple(
                    fmt.clean(side_text(s, unit, generate_side_rate(rows, b.model, s)))
                    for s in (b.base, b.other)
                ),
                replace(verdict, text=text),
            )
        )
    return out


def ratio_mark(ratio: FrameworkRatio) -> str:
    """A summary's verdict by its mark, as csv writes it: "unreliable" (other processes kept the machine
    busy: a warning, no winner), "about_same" (no winner), or "" (a verdict as before issue 30, whose
    summaries lack both keys)."""
    mark = verdict_of(ratio).mark
    return mark.value if mark in (Mark.UNRELIABLE, Mark.ABOUT_SAME) else ""


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
                at = f" · {row.point.label}" if row.point else ""  # a sweep: the cell's point
                shared.setdefault(key, []).append(
                    (model_label(row.model) + at, framework_label(row.framework))
                )
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
    ratios, refused = summary.ratios, summary.refused_ratios
    out: list[Verdict] = []
    # A sweep: the verdict at each point, labelled by it (a plan without one: every point is ``Point()``).
    for model, point in dict.fromkeys((str(r.model), r.point) for r in rows):
        label = fmt.clean(marked(model_label(model), model in flagged))
        at = fmt.clean(point.label)
        if at:
            label += f" · {at}"
        mine = [r for r in ratios if r.model == model and r.point == point]
        out += [replace(verdict_of(r, label), point=at) for r in mine]
        no_ratio = [r for r in refused if r.model == model and r.point == point]
        out += [replace(refusal_of(r, label), point=at) for r in no_ratio]
        if not mine and not no_ratio:
            cells = [r for r in rows if r.model == model and r.point == point]
            text = _verdict_none(cells, words)
            kind = "alone" if len(cells) == 1 and not text.startswith("no ") else "none"
            out.append(Verdict(fmt.clean(model), label, fmt.clean(text), kind, point=at))
    ratios_shown = any(v.kind in ("ratio", "unreliable") for v in out)
    note = VERDICT_NOTE.format(one=words.singular, plural=words.plural) if ratios_shown else ""
    if ratios_shown and any(r.generation is not None for r in rows):  # generate (issue 34): tokens/s
        note = GENERATE_VERDICT_NOTE
    if any(v.about_same for v in out):
        note += " " + ABOUT_SAME_NOTE
    if any(v.kind == "unreliable" for v in out):
        note += " " + UNRELIABLE_NOTE
    sweep = summary.sweep
    if sweep is None:
        return Answer(out, note, words.singular)
    grid = " × ".join(f"{fmt.clean(a)} {', '.join(fmt.clean(v) for v in vs)}" for a, vs in sweep.axes.items())
    best = best_lines(sweep.best, flagged, words.plural, rows)
    for r in sweep.refused:  # best vs best refused: the chosen cells ran on different kinds of device
        label = fmt.clean(marked(model_label(r.model), r.model in flagged))
        best.append(BestLine(fmt.clean(r.model), label, (), refusal_of(r, label)))
    return Answer(out, note, words.singular, best, grid, best_note(rows))

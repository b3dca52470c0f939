"""The Markdown writer: the report's tables as GitHub-flavoured Markdown."""

from __future__ import annotations

from typing import IO, Any
from urllib.parse import quote

from benchtui.core import fmt
from benchtui.core.model.analysis import framework_label
from benchtui.core.reporting.folder import holds_file
from benchtui.core.reporting.model import (
    ANSWER_TITLE,
    DEVICES_NOTE,
    UNRELIABLE_PREFIX,
    Mark,
    Report,
    Table,
    Verdict,
    grouped_problems,
)
from benchtui.core.reporting.model.losses import loss_lines
from benchtui.core.reporting.model.sweep import BEST_NOTE, BEST_TITLE, SAME_TITLE


def md_escape(text: Any) -> str:
    """Safe inside a Markdown table cell: no pipes, no line breaks, no raw HTML, no control characters.

    A backslash is escaped before the pipes are: ``a\\|b`` would otherwise end the cell at its pipe.
    """
    out = " ".join(fmt.clean(text).split())
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("\\", "\\\\"), ("|", "\\|"), ("`", "\\`")):
        out = out.replace(a, b)
    return out


def table_lines(table: Table) -> list[str]:
    lines = ["| " + " | ".join(md_escape(h) for h in table.header) + " |"]
    lines.append("| " + " | ".join("---:" if a == "r" else "---" for a in table.align) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(md_escape(c) for c in row) + " |")
    return lines


def _section(table: Table) -> list[str]:
    return [f"## {table.title}", "", *table_lines(table), ""]


def _noted(table: Table, lines: list[str]) -> list[str]:
    """A section: its table, its lines as a list, then its note."""
    out = _section(table)
    if lines:
        out += [f"- {md_escape(line)}" for line in lines] + [""]
    return out + [md_escape(table.note), ""]


def data_parallel_lines(report: Report) -> list[str]:
    """A session on several devices: each framework's wiring, the scaling per model, each device's figures."""
    out: list[str] = []
    if report.wiring is not None:
        out += _noted(report.wiring, [])
    for view in report.scaling:
        out += _noted(view.table, view.lines)
    if report.per_device is not None:
        out += _noted(report.per_device, report.per_device_notes)
    for nodes in report.node_views:  # several machines (issue 33): a table per cell, then the note once
        out += _section(nodes.table) + [f"- {md_escape(line)}" for line in nodes.lines]
        out += [""] if nodes.lines else []
    if report.node_views:
        out += [md_escape(report.node_views[0].table.note), ""]
    return out


def md_link(text: str, target: str) -> str:
    """A link whose text is escaped (brackets too) and whose target is a percent-encoded relative path."""
    label = md_escape(text).replace("[", "\\[").replace("]", "\\]")
    return f"[{label}]({quote(target, safe='/')})"


def why_lines(report: Report) -> list[str]:
    """A ``--profile`` session, per model: where each framework's step goes, the sentence, each profile and
    the counters in words, its traces (linked when they are in the session folder), the longest ops."""
    out: list[str] = []
    for view in report.why:
        out += _section(view.table)
        out += [f"**{md_escape(text)}**" for text in view.text] + ([""] if view.text else [])
        out += [f"- {md_escape(line)}" for line in view.lines]
        for framework, run, path, size in view.traces:
            where = (
                md_link(path, path)
                if holds_file(report.source.path, path)
                else f"{md_escape(path)} (not in the session folder)"
            )
            out.append(f"- Trace, {md_escape(framework)}, {md_escape(run)}: {where} ({md_escape(size)})")
        out += ["", md_escape(view.table.note), ""]
        if view.top is not None:
            out += _section(view.top)[:-1] + ["", md_escape(view.top.note), ""]
    return out


def verdict_md(verdict: Verdict) -> str:
    """A verdict's text as Markdown: bold when it names a significant winner; an unreliable one begins with
    its mark in bold, as a warning ('**unreliable:** other processes kept ...'), and claims no winner."""
    text = md_escape(verdict.text)
    if verdict.mark is Mark.UNRELIABLE:
        if verdict.text.startswith(UNRELIABLE_PREFIX):
            text = md_escape(verdict.text[len(UNRELIABLE_PREFIX) :])
        return f"**{UNRELIABLE_PREFIX.strip()}** {text}"
    return f"**{text}**" if verdict.highlighted else text


def answer_lines(report: Report) -> list[str]:
    """The answer: per model its verdict (caveats in it), bold when it names a significant winner, marked
    when the machine may have decided it, with what it is computed from, and how to read it."""
    answer = report.answer
    if not answer.verdicts:
        return []
    rows = []
    for v in answer.verdicts:
        rows.append([md_escape(v.label), verdict_md(v), md_escape(v.basis or "–")])
    out = [f"## {ANSWER_TITLE}", ""]
    if answer.sweep:  # a sweep: best vs best, then the verdict at each point
        out += [f"Sweep: {md_escape(answer.sweep)}", ""]
        if answer.best:
            out += [
                f"### {BEST_TITLE}",
                "",
                "| Model | Result | Chosen points | From |",
                "| --- | --- | --- | --- |",
            ]
            for best in answer.best:
                v = best.verdict
                sides = "<br>".join(md_escape(side) for side in best.sides) or "–"
                out.append(
                    f"| {md_escape(v.label)} | {verdict_md(v)} | {sides} | {md_escape(v.basis or '–')} |"
                )
            out += ["", md_escape(answer.best_note or BEST_NOTE), ""]
        out += [f"### {SAME_TITLE}", ""]
    out += ["| Model | Result | From |", "| --- | --- | --- |"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out + ([""] + [md_escape(answer.note)] if answer.note else []) + [""]


def sweep_lines(report: Report) -> list[str]:
    """A sweep: what each setting buys each framework (why a setting has no effect under it)."""
    sweep = report.sweep
    if sweep is None or sweep.gains is None:
        return []
    return _noted(sweep.gains, sweep.gains_notes)


def curve_lines(report: Report) -> list[str]:
    """A sweep over a numeric axis: each model's curve against it, a table each."""
    sweep = report.sweep
    if sweep is None or not sweep.curves:
        return []
    out: list[str] = []
    for table in sweep.curves:
        out += _section(table)
    return out + [md_escape(sweep.curves[0].note), ""]


def render(report: Report) -> str:
    """The whole report as Markdown: the answer first, then the warnings, the study's tables, the rest."""
    out = [f"# benchtui · {md_escape(report.title)}", ""]
    out.append(" · ".join(f"{k}: {md_escape(v)}" for k, v in report.facts))
    out.append("")
    out += answer_lines(report)
    out += sweep_lines(report)
    if report.warnings:
        out += ["## Warnings", ""] + [f"- {md_escape(w.text)}" for w in report.warnings] + [""]
    out += _section(report.side_by_side)
    for table in report.figure_tables:
        out += _section(table)
    out.append(md_escape(report.study_note))
    out.append("")
    if losses := loss_lines(report.rows):  # runners since issue 36
        out += [md_escape(losses[0]), ""] + [f"- {md_escape(line.strip())}" for line in losses[1:]] + [""]
    out += curve_lines(report)
    if report.devices > 1 or report.nodes > 1:
        out += [DEVICES_NOTE, ""]
    out += data_parallel_lines(report)
    if report.latency is not None:
        out += _section(report.latency)[:-1] + ["", md_escape(report.latency.note), ""]
    for table in report.generation:  # a generate session (issue 34)
        out += _section(table)[:-1] + ["", md_escape(table.note), ""]
    if report.warmup.rows:
        out += _noted(report.warmup, report.warmup_notes)
    if report.efficiency is not None:
        out += _section(report.efficiency)[:-1] + ["", md_escape(report.efficiency.note), ""]
        out += [f"- {md_escape(fw)}: {md_escape(method)}" for fw, method in report.efficiency_methods]
        out += [f"- Peak: {md_escape(p)}" for p in report.peak_sources]
        out.append("")
    if report.parity is not None:
        out += _section(report.parity)[:-1] + ["", md_escape(report.parity.note), ""]
        out += [f"- {md_escape(n)}" for n in report.parity_notes] + [""]
    out += why_lines(report)
    if report.problems:
        frameworks = [framework_label(fw) for fw in report.source.frameworks]
        rows = [list(group) for group in grouped_problems(report.problems, frameworks)]
        out += _section(Table("Failures and gaps", ["Cells", "Status", "Reason"], rows, ["l"] * 3))
    out += ["## Environment", ""]
    out += table_lines(Table("Environment", ["", ""], [[k, v] for k, v in report.environment], ["l", "l"]))
    out += ["", "Generated by benchtui from the session's events (`benchtui export --format md`)."]
    return "\n".join(out) + "\n"


def write(report: Report, fh: IO[str]) -> None:
    fh.write(render(report))

"""``benchtui show``, ``export`` and ``compare``: a session's report on the terminal or in a file, two sessions compared."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from benchtui.commands import EXIT_FAILED, EXIT_OK, BadInput, load, say
from benchtui.core import fmt
from benchtui.core.fmt import clean
from benchtui.core.model.analysis import framework_label, model_label
from benchtui.core.reporting import files
from benchtui.core.reporting.compare import compare_sessions
from benchtui.core.reporting.light import NeedsBatches, full
from benchtui.core.reporting.model import Report, build_report, summary_of
from benchtui.core.reporting.registry import writer_for

if TYPE_CHECKING:
    from benchtui.core.model.cell import SessionSummary
    from benchtui.core.store.session import LoadedSession


def cmd_show(args: argparse.Namespace) -> int:
    """``benchtui show SESSION``: the study's table, its notes and the framework ratios."""
    loaded = load(args.session, args.sessions_dir, light=True)
    try:
        report = build_report(loaded, telemetry=False, batches=False)
    except NeedsBatches:  # a light load's run met where its batches were needed: the full load's work
        report = build_report(full(loaded), telemetry=False, batches=False)
    from benchtui.core.reporting import terminal  # rich: only what prints to the terminal needs it

    terminal.write(report, sys.stdout)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """``benchtui export SESSION --format F [-o FILE] [--per-batch]``: md/csv/json to stdout, html to SESSION/report.html."""
    writer_for(args.format, args.per_batch)  # wrong combinations fail before the session is read
    if args.per_batch:  # its rows stream from the events, with the plan's runs: nothing to fold first
        from benchtui.core.store.session import resolve_session

        loaded = files.unfolded(resolve_session(args.session, args.sessions_dir))
        try:
            return _export(args, loaded)
        finally:  # what session.json and the one pass over the events had to say, once it is done
            for warning in loaded.warnings:
                say(f"warning: {warning}")
    writer = writer_for(args.format)
    ahead = None
    if writer.telemetry:  # the samples' pass beside the load, on a big session (``reporting.ahead``)
        from benchtui.core.reporting.ahead import Ahead
        from benchtui.core.store.session import resolve_session

        ahead = Ahead.start(resolve_session(args.session, args.sessions_dir))
    try:
        loaded = load(args.session, args.sessions_dir, light=not writer.batches)
        samples = ahead.result() if ahead is not None else None
        try:  # built before anything is said or written: a light load's report, or the full load's
            report = build_report(loaded, telemetry=writer.telemetry, batches=writer.batches, samples=samples)
        except NeedsBatches:
            loaded = full(loaded)
            report = build_report(loaded, telemetry=writer.telemetry, batches=writer.batches, samples=samples)
    finally:
        if ahead is not None:
            ahead.close()
    return _export(args, loaded, report)


def _export(args: argparse.Namespace, loaded: LoadedSession, report: Report | None = None) -> int:
    """Write the export of ``loaded`` where ``args`` says (stdout, -o FILE, or the html beside the session);
    ``report``: its report, built already."""
    writer = writer_for(args.format, args.per_batch)
    summary = None if report is None else report.summary
    if writer.tracker:  # the cells a tracker cannot follow, said before the file (a CI log shows them)
        summary = summary or summary_of(loaded)  # once: the export is built from the same
        _say_left_out(summary, args.format)
    output = args.output
    if output is None and args.format == "html":
        output = str(files.default_output(loaded.path, "html"))
    if output is None or output == "-":
        with _document_errors(args.format):
            if args.per_batch:  # streamed: a long session's batches need not fit in memory
                files.render(loaded, args.format, sys.stdout, per_batch=True)
            else:  # written aside first: a failure prints nothing half-done
                with tempfile.SpooledTemporaryFile(
                    SPOOL_BYTES, "w+", encoding="utf-8", errors="surrogatepass", newline=""
                ) as buf:  # in memory up to SPOOL_BYTES, then on disk: a long session's json need not fit
                    files.render(loaded, args.format, buf, summary=summary, report=report)
                    buf.seek(0)
                    shutil.copyfileobj(buf, sys.stdout)
            sys.stdout.flush()
        return EXIT_OK
    print(clean(files.write_file(Path(output), loaded, args.format, args.per_batch, summary, report)))
    return EXIT_OK


#: How much of an export on stdout is kept in memory before the rest waits on disk.
SPOOL_BYTES = 8 << 20


def _say_left_out(summary: SessionSummary, format_: str) -> None:
    """One line on stderr per cell a tracker's export leaves out (it failed, diverged or did not finish)."""
    from benchtui.core.reporting.trackers import left_out

    for line in left_out(summary.rows):
        say(f"note: not in the {format_} export: {line}")


#: How an export on stdout writes a character stdout's encoding lacks: in the format's own escape where it
#: has one (the same text, read back: JSON's \u00b7, HTML's &#183;), else a stand-in (fmt.FALLBACK: '-' for
#: '·' in ASCII, an escape for a lone surrogate). Never a surrogate's raw byte: the document stays valid.
DOCUMENT_ERRORS = {"json": fmt.JSON_ESCAPE, "html": "xmlcharrefreplace"}


@contextlib.contextmanager
def _document_errors(format_: str) -> Iterator[None]:
    """stdout with the export's own error handler (``DOCUMENT_ERRORS``) while the export is written."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is None:  # not a text file of its own (a test's StringIO): written as it takes it
        yield
        return
    errors = sys.stdout.errors
    reconfigure(errors=DOCUMENT_ERRORS.get(format_, fmt.FALLBACK))
    try:
        yield
    finally:
        reconfigure(errors=errors)


def cmd_compare(args: argparse.Namespace) -> int:
    """``benchtui compare A B [--fail-above PCT]``: exit 1 when B is conclusively slower than A by more than
    PCT on any row (``Comparison.gate`` says the rule and its result in one sentence); exit 2 when the
    sessions have no cell in common."""
    pct = args.fail_above
    if pct is not None and not pct >= 0:
        raise BadInput(f"--fail-above takes a percentage of at least 0, got {pct}")
    la = load(args.a, args.sessions_dir, "A", light=True)
    lb = load(
        args.b, args.sessions_dir, "B", light=True, again=la
    )  # A again: one read (compare reads, never changes)
    try:
        cmp = compare_sessions(la, lb)
    except NeedsBatches:  # a light load's run met where its batches were needed: the full loads' work
        same = lb is la
        la = full(la)
        lb = la if same else full(lb)
        cmp = compare_sessions(la, lb)
    if not cmp.common:
        raise BadInput(
            clean(f"no cell in common: A {la.path.name} ran {_cells(la)}; B {lb.path.name} ran {_cells(lb)}")
        )
    from benchtui.core.reporting import terminal

    terminal.print_comparison(cmp)
    if la.path.resolve() == lb.path.resolve():  # a slip of the finger: it can only say "about the same"
        say(f"note: A and B are the same session ({clean(la.path.name)}): every ratio is 1 by construction")
    if pct is None:
        return EXIT_OK
    failing = cmp.failing(pct)
    for row in failing:  # one line per failing row, for a CI log; then the rule and its result
        if row.ratio is not None and row.conclusive_slowdown(pct):
            what = f"{row.ratio.percent:+.1f}% ({row.ratio.phrase()})"
        else:
            what = row.note or f"B {row.status_b} where A {row.status_a}"
        say(f"FAIL: {model_label(row.model)} · {framework_label(row.framework)}: {what}")
    say(cmp.gate(pct))
    return EXIT_FAILED if failing else EXIT_OK


def _cells(loaded: LoadedSession) -> str:
    """A session's plan in a few words: its models and frameworks."""
    models = ", ".join(model_label(m) for m in loaded.plan.models) or "no model"
    frameworks = ", ".join(framework_label(f) for f in loaded.plan.frameworks) or "no framework"
    grid = loaded.plan.points()
    if not grid[0]:
        return f"{models} with {frameworks}"
    axes = " × ".join(f"{a} {', '.join(vs)}" for a, vs in loaded.plan.sweep.items() if a != "devices")
    return f"{models} with {frameworks} at {len(grid)} points ({axes})"

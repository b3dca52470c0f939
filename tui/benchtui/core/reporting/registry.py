"""The export formats: one registry that the CLI's choices, the default file names and every export read.

Only the standard library is imported here, so ``benchtui --help`` can list the formats at
once; a writer's module is imported when it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from benchtui.core.reporting.model import Report
    from benchtui.core.store.session import LoadedSession


class Writer(Protocol):
    """What writes a report in one format: every export format, and the terminal (``benchtui show``).

    Each format's module is one: its ``write(report, fh)`` is the protocol's (mypy checks the modules
    against it, below)."""

    def write(self, report: Report, fh: IO[str]) -> None: ...


class BatchWriter(Protocol):
    """A format that also writes one row per recorded batch, streamed from the session's events."""

    def write_batches(self, loaded: LoadedSession, fh: IO[str]) -> int: ...


if TYPE_CHECKING:  # every writer, the terminal's too, is checked against the protocol (not run)
    from benchtui.core.reporting import csvfile, htmlreport, jsonfile, markdown, terminal, trackers

    _WRITERS: tuple[Writer, ...] = (
        markdown,
        csvfile,
        jsonfile,
        htmlreport,
        terminal,
        trackers.BENCHER,
        trackers.GAB_THROUGHPUT,
        trackers.GAB_STEP_TIME,
    )
    _BATCH_WRITERS: tuple[BatchWriter, ...] = (csvfile,)


# Each format's writer, imported when it writes: ``benchtui --help`` lists the formats without them.
def _markdown() -> Writer:
    from benchtui.core.reporting import markdown

    return markdown


def _csv() -> Writer:
    from benchtui.core.reporting import csvfile

    return csvfile


def _csv_batches() -> BatchWriter:
    from benchtui.core.reporting import csvfile

    return csvfile


def _json() -> Writer:
    from benchtui.core.reporting import jsonfile

    return jsonfile


def _html() -> Writer:
    from benchtui.core.reporting import htmlreport

    return htmlreport


def _bencher() -> Writer:
    from benchtui.core.reporting import trackers

    return trackers.BENCHER


def _gab_throughput() -> Writer:
    from benchtui.core.reporting import trackers

    return trackers.GAB_THROUGHPUT


def _gab_step_time() -> Writer:
    from benchtui.core.reporting import trackers

    return trackers.GAB_STEP_TIME


@dataclass(frozen=True)
class Format:
    """An export format: its name, its default file in the session folder, and its writer (and, with
    ``batches_filename``, its writer of one row per batch)."""

    name: str
    filename: str
    description: str
    writer: Callable[[], Writer]
    batches_filename: str | None = None
    batch_writer: Callable[[], BatchWriter] | None = None
    #: Its writer draws the GPU/host samples (``Report.telemetry``, read only for such a format).
    telemetry: bool = False
    #: A CI tracker's format: only the cells that trained are in it (the command says which are left out).
    tracker: bool = False
    #: Its writer draws each run's batch times (``Report.runs``): a light load cannot give them
    #: (``reporting.light``), so it is built from the full load.
    batches: bool = False

    @property
    def per_batch(self) -> bool:
        return self.batch_writer is not None

    def write(self, report: Report, fh: IO[str]) -> None:
        self.writer().write(report, fh)

    def write_batches(self, loaded: LoadedSession, fh: IO[str]) -> None:
        if self.batch_writer is None:
            raise ValueError(f"{self.name} writes no row per batch")
        self.batch_writer().write_batches(loaded, fh)

    def default_name(self, per_batch: bool = False) -> str:
        return (self.batches_filename or self.filename) if per_batch else self.filename


#: Every export format, in the order menus list them.
WRITERS: dict[str, Format] = {
    w.name: w
    for w in (
        Format("md", "summary.md", "Markdown: the study's tables with the environment", _markdown),
        Format(
            "csv", "summary.csv", "CSV: one row per model and framework", _csv, "batches.csv", _csv_batches
        ),
        Format(
            "json", "summary-export.json", "JSON: the full summary with the environment", _json, batches=True
        ),
        Format(
            "html",
            "report.html",
            "HTML: one self-contained report with plots",
            _html,
            telemetry=True,
            batches=True,
        ),
        Format(
            "bencher",
            "bencher.json",
            "Bencher Metric Format: throughput, step and epoch time per cell (bencher run --adapter json)",
            _bencher,
            tracker=True,
        ),
        Format(
            "gab-throughput",
            "benchmark-throughput.json",
            "github-action-benchmark, tool customBiggerIsBetter: throughput per cell",
            _gab_throughput,
            tracker=True,
        ),
        Format(
            "gab-step-time",
            "benchmark-step-time.json",
            "github-action-benchmark, tool customSmallerIsBetter: step and epoch time per cell",
            _gab_step_time,
            tracker=True,
        ),
    )
}


def names() -> list[str]:
    return list(WRITERS)


def spoken() -> str:
    """The formats as a phrase for help texts: "md, csv, json or html"."""
    *rest, last = WRITERS
    return f"{', '.join(rest)} or {last}" if rest else last


def writer_for(name: str, per_batch: bool = False) -> Format:
    """The writer of format ``name`` (SessionError for an unknown one, or per-batch where it has none)."""
    from benchtui.core.store.session import SessionError

    writer = WRITERS.get(name)
    if writer is None:
        raise SessionError(f"unknown export format {name!r}; choose from {', '.join(WRITERS)}")
    if per_batch and not writer.per_batch:
        with_batches = ", ".join(w.name for w in WRITERS.values() if w.per_batch)
        raise SessionError(f"--per-batch goes with --format {with_batches}")
    return writer

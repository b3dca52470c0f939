"""The export formats: one registry that the CLI's choices, the default file names and every export read.

Only the standard library is imported here, so ``benchtui --help`` can list the formats at
once; a writer's module is imported when it writes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchtui.core.reporting.model import Report
    from benchtui.core.store.session import LoadedSession


@dataclass(frozen=True)
class Writer:
    """A format: its name, its default file in the session folder, and the module that writes it.

    The module has ``write(report, fh)``; with ``batches_filename`` it also has
    ``write_batches(loaded, fh)`` for one row per batch.
    """

    name: str
    filename: str
    description: str
    module: str
    batches_filename: str | None = None

    @property
    def per_batch(self) -> bool:
        return self.batches_filename is not None

    def _module(self) -> Any:
        return importlib.import_module(self.module)

    def write(self, report: Report, fh: IO[str]) -> None:
        self._module().write(report, fh)

    def write_batches(self, loaded: LoadedSession, fh: IO[str]) -> None:
        self._module().write_batches(loaded, fh)

    def default_name(self, per_batch: bool = False) -> str:
        return (self.batches_filename or self.filename) if per_batch else self.filename


_PACKAGE = "benchtui.core.reporting"

#: Every export format, in the order menus list them.
WRITERS: dict[str, Writer] = {
    w.name: w
    for w in (
        Writer(
            "md", "summary.md", "Markdown: the study's tables with the environment", f"{_PACKAGE}.markdown"
        ),
        Writer(
            "csv", "summary.csv", "CSV: one row per model and framework", f"{_PACKAGE}.csvfile", "batches.csv"
        ),
        Writer(
            "json",
            "summary-export.json",
            "JSON: the full summary with the environment",
            f"{_PACKAGE}.jsonfile",
        ),
        Writer("html", "report.html", "HTML: one self-contained report with plots", f"{_PACKAGE}.htmlreport"),
    )
}


def names() -> list[str]:
    return list(WRITERS)


def spoken() -> str:
    """The formats as a phrase for help texts: "md, csv, json or html"."""
    *rest, last = WRITERS
    return f"{', '.join(rest)} or {last}" if rest else last


def writer_for(name: str, per_batch: bool = False) -> Writer:
    """The writer of format ``name`` (SessionError for an unknown one, or per-batch where it has none)."""
    from benchtui.core.store.session import SessionError

    writer = WRITERS.get(name)
    if writer is None:
        raise SessionError(f"unknown export format {name!r}; choose from {', '.join(WRITERS)}")
    if per_batch and not writer.per_batch:
        with_batches = ", ".join(w.name for w in WRITERS.values() if w.per_batch)
        raise SessionError(f"--per-batch goes with --format {with_batches}")
    return writer

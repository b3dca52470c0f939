"""Exporting a session to a file: the report built once, written by its format's writer, all or nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.registry import writer_for
from benchtui.core.store.session import LoadedSession, SessionError, load_session


def render(loaded: LoadedSession, fmt: str, fh: IO[str], per_batch: bool = False) -> None:
    """Write the export of ``loaded`` in format ``fmt`` to ``fh``."""
    writer = writer_for(fmt, per_batch)
    if per_batch:
        writer.write_batches(loaded, fh)
    else:
        writer.write(build_report(loaded), fh)


def default_output(session: Path, fmt: str, per_batch: bool = False) -> Path:
    """Where an export goes without -o: inside the session folder."""
    return session / writer_for(fmt, per_batch).default_name(per_batch)


def write_file(path: Path, loaded: LoadedSession, fmt: str, per_batch: bool = False) -> Path:
    """Write through a temporary file so a failed export leaves no half file behind (SessionError if unwritable)."""
    writer_for(fmt, per_batch)  # an unknown format fails before any file is made
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            render(loaded, fmt, fh, per_batch)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SessionError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def export_session(
    path: str | os.PathLike[str],
    fmt: str,
    output: str | os.PathLike[str] | None = None,
    per_batch: bool = False,
) -> Path:
    """Export the session at ``path`` to a file and return the file's path.

    Without ``output`` the file goes inside the session folder, named by the format's
    writer (summary.md, summary.csv, batches.csv, summary-export.json, report.html).
    Raises SessionError for an unreadable session or a file that cannot be written.
    """
    loaded = load_session(path)
    target = Path(output) if output is not None else default_output(loaded.path, fmt, per_batch)
    return write_file(target, loaded, fmt, per_batch)

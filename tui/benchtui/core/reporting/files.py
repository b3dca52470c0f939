"""Exporting a session to a file: the report built once, written by its format's writer, all or nothing.
(Reading a file of the session folder for a report, safely, is ``folder``'s; its names are here too.)"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import IO

from benchtui.core.model.cell import SessionSummary
from benchtui.core.model.session_model import SessionModel
from benchtui.core.provenance import recorded_by_other
from benchtui.core.reporting.folder import Tail as Tail
from benchtui.core.reporting.folder import holds_file as holds_file
from benchtui.core.reporting.folder import log_text as log_text
from benchtui.core.reporting.folder import read_tail as read_tail
from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.model.types import Report
from benchtui.core.reporting.registry import writer_for
from benchtui.core.store.session import LoadedSession, SessionError, SessionFolder, load_session


def render(
    loaded: LoadedSession,
    fmt: str,
    fh: IO[str],
    per_batch: bool = False,
    summary: SessionSummary | None = None,
    report: Report | None = None,
) -> None:
    """Write the export of ``loaded`` in format ``fmt`` to ``fh`` (``summary``: its summary, when the caller
    has it already: ``summary_of`` otherwise; ``report``: its report, built already)."""
    writer = writer_for(fmt, per_batch)
    if per_batch:
        writer.write_batches(loaded, fh)
    else:
        if report is None:
            report = build_report(loaded, summary, telemetry=writer.telemetry, batches=writer.batches)
        writer.write(report, fh)


def unfolded(path: str | os.PathLike[str]) -> LoadedSession:
    """The session at ``path`` with its meta and plan read and no event folded (a fresh model knows the plan's
    runs): what the per-batch CSV needs beside its one pass over the events, in constant memory whatever the
    session's length (issue 35). A folder without a usable session.json or plan fails (SessionError) as
    loading it would; ``warnings`` holds what session.json had to say, and the pass adds its own."""
    folder = SessionFolder.open(path)
    warnings: list[str] = []
    meta = folder.read_meta(warnings)
    plan = folder.read_plan(meta)
    other = recorded_by_other(meta.get("benchtui"))
    if other:
        warnings.append(other)
    host = meta.get("host")
    model = SessionModel(plan, host=host if isinstance(host, dict) else None)
    return LoadedSession(folder.path, meta, plan, model, [], warnings)


def default_output(session: Path, fmt: str, per_batch: bool = False) -> Path:
    """Where an export goes without -o: inside the session folder."""
    return session / writer_for(fmt, per_batch).default_name(per_batch)


def write_file(
    path: Path,
    loaded: LoadedSession,
    fmt: str,
    per_batch: bool = False,
    summary: SessionSummary | None = None,
    report: Report | None = None,
) -> Path:
    """Write through a temporary file so a failed export leaves no half file behind (SessionError if unwritable).

    The temporary file is made new (O_EXCL, O_NOFOLLOW) under a name no one can guess: an html export
    goes into the session folder by default, and a session folder can come from anyone, with a link
    where a predictable name would be. The file is UTF-8; a lone surrogate (a folder name that is not
    UTF-8) is written as its escape (``\\udce9``), which keeps the file valid and, in JSON, reads back
    as the same string.
    """
    writer_for(fmt, per_batch)  # an unknown format fails before any file is made
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except OSError as exc:  # nothing made, nothing to remove
        raise SessionError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:
            render(loaded, fmt, fh, per_batch, summary, report)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise SessionError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _discard(tmp)
        raise
    return path


def _discard(tmp: Path) -> None:
    """Remove a failed export's temporary file, if the folder lets us: one that refused the write can
    refuse the removal too (EROFS, EACCES), and the error to say is the write's."""
    with contextlib.suppress(OSError):
        tmp.unlink()


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
    loaded = unfolded(path) if per_batch else load_session(path)
    target = Path(output) if output is not None else default_output(loaded.path, fmt, per_batch)
    return write_file(target, loaded, fmt, per_batch)

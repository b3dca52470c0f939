"""Exporting a session to a file: the report built once, written by its format's writer, all or nothing;
and reading a file of the session folder for a report, safely."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from benchtui.core import fmt
from benchtui.core.reporting.model import build_report
from benchtui.core.reporting.registry import writer_for
from benchtui.core.store.session import LoadedSession, SessionError, load_session, open_regular


@dataclass(frozen=True)
class Tail:
    """The end of a file: its last bytes, and the file's whole size."""

    data: bytes
    size: int

    @property
    def cut(self) -> bool:
        """Whether the file has more than ``data``: its beginning was left out."""
        return self.size > len(self.data)


def read_tail(folder: Path, path: Path, limit: int) -> Tail | None:
    """The last ``limit`` bytes of ``path``, a regular file inside the session ``folder``; None for any other.

    A session folder is not trusted: a log can be a link to /etc/shadow, a run id can hold
    ``../``, ``logs/`` can be a link, a "log" can be a FIFO that blocks a reader forever or a
    file of gigabytes. So the path must resolve inside the folder, the file is opened without
    following a link (O_NOFOLLOW), without waiting (O_NONBLOCK) and must be a regular file,
    and only its end is read.
    """
    try:
        if path.is_symlink() or not path.resolve(strict=True).is_relative_to(folder.resolve(strict=True)):
            return None
        fh = open_regular(path)
    except (OSError, RuntimeError):  # missing, a link (ELOOP), a loop of links, unreadable
        return None
    if fh is None:
        return None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            fh.seek(size - limit)
        data = fh.read(limit)
    return Tail(data, max(size, len(data)))


#: The most of a run's log a report shows (its end).
LOG_TAIL_BYTES = 4000


def log_text(folder: Path, path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The end of a run's log as text, saying so when its beginning is left out; '' without a log.

    Only a regular file inside the session folder is read (``read_tail``): never a link.
    """
    tail = read_tail(folder, path, limit)
    if tail is None or not tail.size:
        return ""
    text = tail.data.decode("utf-8", errors="replace")
    if tail.cut:
        text = text.partition("\n")[2] or text  # from the first whole line
        shown = fmt.bytes_(len(text.encode("utf-8", errors="replace")))
        text = f"[… cut: the log is {fmt.bytes_(tail.size)}; its last {shown} follow]\n" + text
    return text


def holds_file(folder: Path, relative: str) -> bool:
    """Whether ``relative`` names a regular file inside the session ``folder``, reached through no link.

    What a report may link to (a run's trace): a session folder is not trusted, so a name that
    leaves the folder, a link anywhere on the way, a FIFO or a folder does not count.
    """
    try:
        root = folder.resolve(strict=True)
        path = folder / relative
        if any(p.is_symlink() for p in (path, *path.parents) if p.is_relative_to(folder) and p != folder):
            return False
        if not path.resolve(strict=True).is_relative_to(root):
            return False
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, RuntimeError, ValueError):
        return False


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
            render(loaded, fmt, fh, per_batch)
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
    loaded = load_session(path)
    target = Path(output) if output is not None else default_output(loaded.path, fmt, per_batch)
    return write_file(target, loaded, fmt, per_batch)

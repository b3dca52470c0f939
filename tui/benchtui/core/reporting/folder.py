"""Reading a file of a session folder for a report, safely: a session folder is not trusted."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from benchtui.core import fmt
from benchtui.core.store.session import open_regular


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

"""The log pane: the tail of the current runner's stdout/stderr file, read on the UI tick."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from rich.markup import escape
from textual.widgets import Log

from benchtui.core.fmt import clean

FIRST_READ = 16 * 1024  # on switching to a log, show about this many bytes of its end
MAX_READ = 256 * 1024  # per tick: a runner printing megabytes cannot stall the UI


def shown_lines(lines: list[str]) -> list[str]:
    """Log lines as the pane shows them: without control characters or escape sequences.

    Textual's Log drops only some C0 controls: an ESC from a runner (a colour, a clear-screen,
    a window title) would reach the terminal. Whole lines are cleaned, so a sequence split
    across two reads is removed whole; tabs stay (the Log expands them).
    """
    return [part for line in lines for part in clean(line, one_line=False).split("\n")]


def open_log(path: Path) -> BinaryIO | None:
    """``path`` opened for reading if it is a regular file and neither it nor its folder is a link.

    A replayed session is not trusted: its log can be a link to /etc/shadow, or a FIFO whose
    open would block the UI for good. Raises OSError when it cannot be opened at all.
    """
    from benchtui.core.store.session import open_regular  # not at start-up: it loads the session model

    if path.parent.is_symlink():
        return None
    return open_regular(path)


class RunLog(Log):
    """Follows one log file at a time; ``poll()`` appends what was written since the last call."""

    DEFAULT_CSS = """
    RunLog {
        height: 12;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(max_lines=5000, id=id, classes=classes)
        self.path: Path | None = None
        self._pos = 0
        self._partial = ""

    def follow(self, path: Path | None, title: str = "") -> None:
        """Switch to another file (or to none); its end is shown on the next poll."""
        if path == self.path:
            return
        self.path = path
        self._pos = -1  # read the end of the file on the next poll
        self._partial = ""
        self.clear()
        self.border_title = f"Log · {escape(clean(title))}" if title else "Log"  # a border title is markup

    @property
    def caught_up(self) -> bool:
        """Whether the pane shows its whole file: read to the end, no unfinished line held back."""
        if self.path is None:
            return True
        try:
            size = self.path.stat().st_size
        except OSError:
            return True  # nothing to read: poll() does nothing either
        return self._pos == size and not self._partial

    def poll(self) -> None:
        if self.path is None:
            return
        try:
            log = open_log(self.path)
            if log is None:
                return
            with log as fh:
                size = fh.seek(0, 2)
                if self._pos < 0:
                    self._pos = max(0, size - FIRST_READ)
                if size < self._pos:  # truncated or replaced: start over
                    self._pos = 0
                if size == self._pos:
                    if self._partial:  # no newline for a whole tick: show the line as it is
                        self.write_lines(shown_lines([self._partial]))
                        self._partial = ""
                    return
                fh.seek(self._pos)
                data = fh.read(min(size - self._pos, MAX_READ))
        except OSError:
            return
        self._pos += len(data)
        text = self._partial + data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace(
            "\r", "\n"
        )
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        if lines:
            self.write_lines(shown_lines(lines))

"""The log pane: the tail of the current runner's stdout/stderr file, read on the UI tick, wrapped to its width."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import BinaryIO

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from textual.widgets import Log

from benchtui.core.fmt import clean

FIRST_READ = 16 * 1024  # on switching to a log, show about this many bytes of its end
MAX_READ = 256 * 1024  # per tick: a runner printing megabytes cannot stall the UI
MAX_LINES = 5000  # the log's lines kept (and so re-wrapped when the pane's width changes)
INDENT = "  "  # a wrapped line's continuation starts with this, so it reads as one line
TAB = 8
_CONSOLE = Console(width=1000, color_system=None)  # only measures: wrapping plain text needs no terminal


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


def wrap(lines: list[str], width: int) -> list[str]:
    """Lines cut at word boundaries to ``width`` cells (a word longer than that is cut), each continuation
    indented; a line that fits is left as it is (its tabs too: the Log expands them)."""
    if width <= len(INDENT) + 1:
        return lines
    out = []
    for line in lines:
        if cell_len(line.expandtabs(TAB)) <= width:
            out.append(line)
            continue
        whole = line.expandtabs(TAB)
        first = Text(whole).wrap(_CONSOLE, width)[0].plain  # the wrap divides the text: no character lost
        out.append(first.rstrip())
        tail = whole[len(first) :].lstrip()
        if tail:
            out += [INDENT + part.plain.rstrip() for part in Text(tail).wrap(_CONSOLE, width - len(INDENT))]
    return out


class RunLog(Log):
    """Follows one log file at a time; ``poll()`` appends what was written since the last call.

    Lines are wrapped to the pane's width (a traceback's long lines stay readable without a sideways
    scroll) and wrapped again from the lines kept when the width changes.
    """

    DEFAULT_CSS = """
    RunLog {
        height: 12;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(max_lines=MAX_LINES, id=id, classes=classes)
        self.path: Path | None = None
        self._pos = 0
        self._partial = ""
        self._kept: deque[str] = deque(maxlen=MAX_LINES)  # the lines as read, before wrapping
        self._wrapped_at = 0  # the width the lines on screen are wrapped to (0: not yet laid out)

    def follow(self, path: Path | None, title: str = "") -> None:
        """Switch to another file (or to none); its end is shown on the next poll."""
        if path == self.path:
            return
        self.path = path
        self._pos = -1  # read the end of the file on the next poll
        self._partial = ""
        self._kept.clear()
        self.clear()
        self.border_title = f"Log · {escape(clean(title))}" if title else "Log"  # a border title is markup

    def _wrap_width(self) -> int:
        """The cells a line may take: the pane's content less the scroll bar it has or will have."""
        bar = 0 if self.show_vertical_scrollbar else self.styles.scrollbar_size_vertical
        return max(self.scrollable_content_region.width - bar, 0)

    def add_lines(self, lines: list[str]) -> None:
        """Show ``lines`` (already cleaned), wrapped to the pane's width."""
        self._kept.extend(lines)
        if not self._wrapped_at and self._rewrap():  # laid out since: the kept lines, these too, are wrapped
            return
        self.write_lines(wrap(lines, self._wrapped_at))

    def _rewrap(self) -> bool:
        """Wrap the kept lines again when the pane's width is known and differs from theirs; whether it did.

        A Resize can come before the layout gives the pane its width (a pane shown with ``l`` in a
        finished replay): the lines written then are wrapped here, on the next lines or once refreshed."""
        width = self._wrap_width()
        if not width or width == self._wrapped_at:
            return False
        # At the end before (or never laid out): at the end after. clear() leaves the old offset, which the
        # Log's own follow would read as "scrolled up"; the end is known only after the next layout.
        at_end = not self._wrapped_at or self.is_vertical_scroll_end
        self._wrapped_at = width
        self.clear()
        self.write_lines(wrap(list(self._kept), width), scroll_end=False)
        if at_end and self.auto_scroll:
            self.scroll_end(animate=False, x_axis=False)
        return True

    def on_resize(self) -> None:
        self._rewrap()
        self.call_after_refresh(self._rewrap)  # and once the layout has settled

    def on_show(self) -> None:
        self.call_after_refresh(self._rewrap)

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
                        self.add_lines(shown_lines([self._partial]))
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
            self.add_lines(shown_lines(lines))

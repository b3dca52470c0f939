"""Saved sessions: the list, the selected one's summary, and replay, export or compare from there.

The list follows the folder: a cheap poll (``POLL_S``) stats the sessions folder and each session's
two small files, and only a change reads the sessions again (in a thread).
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, OptionList, Static

from benchtui.core.fmt import clean
from benchtui.core.model.status import status_style
from benchtui.core.reporting import registry
from benchtui.core.reporting.registry import WRITERS
from benchtui.core.store.session import list_sessions, own_name, sessions_dir

if TYPE_CHECKING:
    from benchtui.core.reporting.compare import Comparison

NAME_W = 24  # a session's name is cut to this: the columns after it stay on screen
#: Seconds between two looks at the sessions folder: a new session, or one whose status changed, shows
#: within this. A look is a stat of the folder and of each session's session.json and summary.json
#: (microseconds each); the timer is armed again only once a look (and any reload) is done.
POLL_S = 2.0
#: Replay speeds offered (multiples of the recorded pace; inf: at once, the final state), the first the default.
REPLAY_SPEEDS: tuple[tuple[float, str], ...] = (
    (math.inf, "at once: the final state, as recorded"),
    (1.0, "×1: at the recorded pace"),
    (2.0, "×2"),
    (10.0, "×10"),
    (60.0, "×60: a minute a second"),
)


class ExportChoice(ModalScreen[str | None]):
    """Which format to export; dismisses with a format name from the registry, or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export-cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static("Export the summary into the session folder as…", id="export-title")
            width = max(len(name) for name in WRITERS)  # the names in a column, the longest included
            yield OptionList(
                *(f"{w.name:<{width}} {w.description}" for w in WRITERS.values()), id="export-formats"
            )

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(list(WRITERS)[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReplaySpeed(ModalScreen[float | None]):
    """At what pace to replay; dismisses with a speed from ``REPLAY_SPEEDS``, or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="replay-speed-cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static("Replay the session…", id="export-title")
            yield OptionList(*(words for _, words in REPLAY_SPEEDS), id="replay-speeds")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(REPLAY_SPEEDS[event.option_index][0])

    def action_cancel(self) -> None:
        self.dismiss(None)


def export_in_background(screen: Screen, path: Path, fmt: str) -> None:
    """Export a session in a thread (a long session takes a moment) and say where it went."""

    def job() -> None:
        from benchtui.core.reporting.files import export_session

        try:
            written = export_session(path, fmt)
        except Exception as exc:  # any failure is reported, never a crash
            screen.app.call_from_thread(
                screen.notify, clean(f"Export failed: {exc}"), severity="error", markup=False
            )
            return
        screen.app.call_from_thread(screen.notify, clean(f"Written: {written}"), markup=False, timeout=8)

    screen.run_worker(job, thread=True, group="export", exclusive=True)


class SessionsScreen(Screen):
    """The saved sessions, newest first, with the selected one's summary below."""

    class ReplayRequested(Message):
        """The user asked to play this session through the live screen, at ``speed`` × its recorded pace
        (inf: at once)."""

        def __init__(self, path: Path, speed: float = math.inf) -> None:
            super().__init__()
            self.path = path
            self.speed = speed

    BINDINGS = [
        Binding(
            "r",
            "replay",
            "Replay",
            id="replay-session",
            tooltip="Play the selected session through the live screen, at a speed you choose",
        ),
        Binding(
            "e", "export", "Export", id="export-session", tooltip=f"Write {registry.spoken()} into its folder"
        ),
        Binding(
            "m",
            "mark",
            "Mark",
            id="mark-session",
            tooltip="Mark the selected session (or unmark it) to compare it with another",
        ),
        Binding(
            "c",
            "compare",
            "Compare",
            id="compare-sessions",
            tooltip="Compare the two marked sessions (or the marked one and the selected one): the newer against the older",
        ),
        Binding("escape", "back", "Back", id="sessions-back", tooltip="Back to where you came from"),
    ]

    def __init__(self, root: str | None = None) -> None:
        super().__init__()
        self.root = root
        self.infos: list[dict[str, str]] = []
        self.shown: Path | None = None  # the session whose summary is on screen
        self.marked: list[Path] = []  # at most two, in the order marked
        self._stamp: tuple[object, ...] | None = None  # what the last look at the folder saw

    def compose(self) -> ComposeResult:
        yield Static(id="sessions-title")
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="sessions-detail"):
            yield Static(id="sessions-summary")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column(" ", key="mark")
        for column in ("Status", "Session", "Device", "Frameworks", "Models", "Name"):
            table.add_column(column, key=column.lower())
        self._fill(list_sessions(self.root))
        self._stamp = self.stamp()
        table.focus()
        self.call_after_refresh(self._summarise)  # once laid out: the summary is drawn at its width
        self.set_timer(POLL_S, self._look, name="sessions-poll")

    # -- following the folder -----------------------------------------------------------------
    def stamp(self) -> tuple[object, ...]:
        """What changes when a session is added, removed or rewritten: the folder's own mtime (an entry
        added or removed) and each listed session's session.json and summary.json (mtime and size)."""
        base = sessions_dir(self.root)
        seen: list[object] = []
        for path in [str(base)] + [
            os.path.join(info["path"], name)
            for info in self.infos
            for name in ("session.json", "summary.json")
        ]:
            try:
                st = os.stat(path)
            except OSError:
                seen.append(None)
                continue
            seen.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(seen)

    def _look(self) -> None:
        """The poll: read the sessions again when the folder changed, else look again later."""
        if not self.is_mounted:
            return
        stamp = self.stamp()
        if stamp == self._stamp:
            self.set_timer(POLL_S, self._look, name="sessions-poll")
            return
        self._stamp = stamp
        self.reload()

    @work(thread=True, exclusive=True, group="sessions-list")
    def reload(self) -> None:
        """Read the sessions in a thread (each one's session.json), then show them; the poll goes on."""
        try:
            infos = list_sessions(self.root)
        except OSError:
            infos = None
        self.app.call_from_thread(self._reloaded, infos)

    def _reloaded(self, infos: list[dict[str, str]] | None) -> None:
        if not self.is_mounted:
            return
        if infos is not None and infos != self.infos:
            selected = self.selected
            self._fill(infos)
            self._stamp = self.stamp()  # the new list's files
            table = self.query_one(DataTable)
            paths = [Path(i["path"]) for i in self.infos]
            if selected in paths:
                table.move_cursor(row=paths.index(selected), animate=False)
            self.shown = None  # the selected session may be the one that changed
            self.refresh_bindings()
            self.call_after_refresh(self._summarise)
        self.set_timer(POLL_S, self._look, name="sessions-poll")

    def _fill(self, infos: list[dict[str, str]]) -> None:
        """The title and one row per session (marks kept for the sessions still there)."""
        self.infos = infos
        present = {Path(i["path"]) for i in infos}
        self.marked = [p for p in self.marked if p in present]
        table = self.query_one(DataTable)
        table.clear()
        folder = sessions_dir(self.root).resolve()
        title = Text(f"Sessions in {clean(folder)}", style="bold")
        if not self.infos:
            title.append("\nNo sessions yet: run a plan and it is saved here.", style="dim")
        self.query_one("#sessions-title", Static).update(title)
        for info in self.infos:
            # Text, not markup (a str cell is markup to a DataTable), and cleaned: it all comes from session
            # files. The status first, the session's id (its folder: what the command line takes) whole, and
            # the name last and cut short: its folder already begins with it.
            cells = (
                info["name"],
                info["device"],
                info["frameworks"],
                info["models"],
                shorten(clean(own_name(info)), NAME_W),  # cut what shows, not escape codes
            )
            table.add_row(
                Text("✓" if Path(info["path"]) in self.marked else "", style="bold"),
                Text(clean(info["status"]), style=status_style(info["status"], "yellow")),
                *(Text(clean(c)) for c in cells),
                key=info["path"],
            )

    def on_resize(self) -> None:
        self.shown = None
        self.call_after_refresh(self._summarise)

    def _summarise(self) -> None:
        """Load the selected session's summary (unless it is on screen), at the width below the list."""
        if not self.query(DataTable):  # left, or being taken down, before it was laid out
            return
        path = self.selected
        if path is None or path == self.shown:
            return
        width = self.query_one("#sessions-detail").scrollable_content_region.width
        self.load_summary(path, width if width > 0 else max(self.size.width - 3, 20))

    @property
    def selected(self) -> Path | None:
        table = self.query_one(DataTable)
        if not self.infos or table.cursor_row is None or table.cursor_row >= len(self.infos):
            return None
        return Path(self.infos[table.cursor_row]["path"])

    @on(DataTable.RowHighlighted)
    def highlighted(self, event: DataTable.RowHighlighted) -> None:
        if not self.query("#sessions-summary"):  # the screen is being taken down
            return
        self.refresh_bindings()  # "Compare" depends on the row selected when one session is marked
        if self.selected is not None and self.selected != self.shown:
            self.query_one("#sessions-summary", Static).update(Text("Loading…", style="dim"))
            self._summarise()

    @work(thread=True, exclusive=True, group="summary")
    def load_summary(self, path: Path, width: int) -> None:
        """Summarise in a thread: a long session takes a moment to fold."""
        view: RenderableType
        try:
            view = summary_view(path, width)
        except Exception as exc:  # a broken folder is shown as such
            view = Text(clean(f"Cannot read {path.name}: {exc}"), style="red")
        self.app.call_from_thread(self._show_summary, path, view)

    def _show_summary(self, path: Path, view: RenderableType) -> None:
        if self.is_mounted and path == self.selected:  # the screen may be gone, the cursor moved on
            self.query_one("#sessions-summary", Static).update(view)
            self.shown = path

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("replay", "export", "mark"):
            return self.selected is not None
        if action == "compare":  # dimmed, not hidden, while fewer than two are chosen: it can be found
            return True if self.pair() is not None else (None if len(self.infos) > 1 else False)
        return True

    def pair(self) -> tuple[Path, Path] | None:
        """The two sessions to compare, the older first (A, the baseline): the two marked, or the
        one marked and the one selected; None without two."""
        chosen = list(self.marked)
        if len(chosen) == 1 and self.selected is not None and self.selected not in chosen:
            chosen.append(self.selected)
        if len(chosen) != 2:
            return None
        older, newer = sorted(chosen, key=lambda p: p.name)
        return older, newer

    def action_mark(self) -> None:
        """Mark or unmark the selected session; a third mark replaces the first."""
        path = self.selected
        if path is None:
            return
        if path in self.marked:
            self.marked.remove(path)
        else:
            self.marked = [*self.marked, path][-2:]
        table = self.query_one(DataTable)
        for info in self.infos:
            mark = "✓" if Path(info["path"]) in self.marked else ""
            table.update_cell(info["path"], "mark", Text(mark, style="bold"))
        self.refresh_bindings()

    def action_compare(self) -> None:
        pair = self.pair()
        if pair is not None:
            self.app.push_screen(CompareScreen(*pair))

    def action_replay(self) -> None:
        """Ask at what speed, then ask the app to replay the selected session."""
        path = self.selected
        if path is None:
            return

        def chosen(speed: float | None) -> None:
            if speed is not None:
                self.post_message(self.ReplayRequested(path, speed))

        self.app.push_screen(ReplaySpeed(), chosen)

    def action_export(self) -> None:
        path = self.selected
        if path is None:
            return

        def chosen(fmt: str | None) -> None:
            if fmt:
                export_in_background(self, path, fmt)

        self.app.push_screen(ExportChoice(), chosen)

    def action_back(self) -> None:
        self.app.pop_screen()


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut said with an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "…"


class PrintedComparison:
    """The terminal writer's comparison (table, differences, verdicts, how to read B/A), drawn at
    the width it is given: the same text ``benchtui compare`` prints."""

    def __init__(self, cmp: Comparison) -> None:
        self.cmp = cmp

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from benchtui.core.reporting import terminal

        out = Console(
            file=io.StringIO(),
            width=options.max_width,
            force_terminal=True,
            color_system="truecolor",
            highlight=False,
        )
        terminal.print_comparison(self.cmp, out)
        assert isinstance(out.file, io.StringIO)
        yield Text.from_ansi(out.file.getvalue().rstrip("\n"))


class CompareScreen(Screen):
    """Two saved sessions compared, B (the newer) against A (the older), as ``benchtui compare`` does."""

    BINDINGS = [Binding("escape", "back", "Back", id="compare-back", tooltip="Back to the saved sessions")]

    def __init__(self, a: Path, b: Path) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.comparison: Comparison | None = None

    def compose(self) -> ComposeResult:
        title = Text("Two sessions compared: B, the newer, against A, the older", style="bold")
        title.append("\n" + clean(f"the same as: benchtui compare {self.a.name} {self.b.name}"), style="dim")
        yield Static(title, id="compare-title")
        with VerticalScroll(id="compare-body"):
            yield Static(Text("Comparing…", style="dim"), id="compare-view")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#compare-body").focus()
        self.load()

    @work(thread=True, exclusive=True, group="compare")
    def load(self) -> None:
        """Compare in a thread: two long sessions take a moment to load."""
        from benchtui.core.reporting.compare import compare_sessions

        view: RenderableType
        try:
            self.comparison = compare_sessions(self.a, self.b)
            view = PrintedComparison(self.comparison)
        except Exception as exc:  # a session that cannot be read is said, never a crash
            view = Text(clean(f"Cannot compare: {exc}"), style="red")
        self.app.call_from_thread(self._show, view)

    def _show(self, view: RenderableType) -> None:
        if self.is_mounted:  # Esc may have closed the screen meanwhile
            self.query_one("#compare-view", Static).update(view)

    def action_back(self) -> None:
        self.app.pop_screen()


def summary_view(path: Path, width: int) -> Group:
    """The session's study table, its framework ratios and its warnings, as Rich renderables."""
    from benchtui.core.reporting import terminal
    from benchtui.core.reporting.light import NeedsBatches, full, light_load
    from benchtui.core.reporting.model import build_report
    from benchtui.core.store.session import load_session

    # Where its summary cache holds, without its batch lines (a million in a long session: as ``show`` reads
    # it); else the full load, whose summary is computed and cached in the folder (where it is writable), so
    # the next look at a long session is the light one (issue 35).
    loaded = light_load(path) or load_session(path)
    summary = loaded.summary()
    try:
        report = build_report(loaded, summary, telemetry=False, batches=False)
    except NeedsBatches:  # a light load's run met where its batches were needed: the full load's work
        report = build_report(full(loaded), summary, telemetry=False, batches=False)
    return terminal.summary_view(report, width)

"""Saved sessions: the list, the selected one's summary, and replay or export from there."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
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
from benchtui.core.store.session import list_sessions, sessions_dir


class ExportChoice(ModalScreen[str | None]):
    """Which format to export; dismisses with a format name from the registry, or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export-cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static("Export the summary into the session folder as…", id="export-title")
            yield OptionList(*(f"{w.name:<5} {w.description}" for w in WRITERS.values()), id="export-formats")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(list(WRITERS)[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)


def export_in_background(screen: Screen, path: Path, fmt: str) -> None:
    """Export a session in a thread (a long session takes a moment) and say where it went."""

    def job() -> None:
        from benchtui.core.reporting.files import export_session

        try:
            written = export_session(path, fmt)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, never a crash
            screen.app.call_from_thread(
                screen.notify, clean(f"Export failed: {exc}"), severity="error", markup=False
            )
            return
        screen.app.call_from_thread(screen.notify, clean(f"Written: {written}"), markup=False, timeout=8)

    screen.run_worker(job, thread=True, group="export", exclusive=True)


class SessionsScreen(Screen):
    """The saved sessions, newest first, with the selected one's summary below."""

    class ReplayRequested(Message):
        """The user asked to play this session through the live screen."""

        def __init__(self, path: Path) -> None:
            super().__init__()
            self.path = path

    BINDINGS = [
        Binding(
            "r",
            "replay",
            "Replay",
            id="replay-session",
            tooltip="Play the selected session through the live screen",
        ),
        Binding(
            "e", "export", "Export", id="export-session", tooltip=f"Write {registry.spoken()} into its folder"
        ),
        Binding("escape", "back", "Back", id="sessions-back", tooltip="Back to where you came from"),
    ]

    def __init__(self, root: str | None = None) -> None:
        super().__init__()
        self.root = root
        self.infos: list[dict[str, str]] = []
        self.shown: Path | None = None  # the session whose summary is on screen

    def compose(self) -> ComposeResult:
        yield Static(id="sessions-title")
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="sessions-detail"):
            yield Static(id="sessions-summary")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in ("Started (UTC)", "Name", "Device", "Frameworks", "Models", "Status"):
            table.add_column(column)
        self.infos = list_sessions(self.root)
        folder = sessions_dir(self.root).resolve()
        title = Text(f"Sessions in {clean(folder)}", style="bold")
        if not self.infos:
            title.append("\nNo sessions yet: run a plan and it is saved here.", style="dim")
        self.query_one("#sessions-title", Static).update(title)
        for info in self.infos:
            name = info.get("label") or info["name"].partition("_")[2] or info["name"]
            # Text, not markup (a str cell is markup to a DataTable), and cleaned: it all comes from session files.
            table.add_row(
                *(
                    Text(clean(c))
                    for c in (info["started"], name, info["device"], info["frameworks"], info["models"])
                ),
                Text(clean(info["status"]), style=status_style(info["status"], "yellow")),
                key=info["path"],
            )
        table.focus()
        if self.selected is not None:
            self.load_summary(self.selected)

    @property
    def selected(self) -> Path | None:
        table = self.query_one(DataTable)
        if not self.infos or table.cursor_row is None or table.cursor_row >= len(self.infos):
            return None
        return Path(self.infos[table.cursor_row]["path"])

    @on(DataTable.RowHighlighted)
    def highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.selected is not None and self.selected != self.shown:
            self.query_one("#sessions-summary", Static).update(Text("Loading…", style="dim"))
            self.load_summary(self.selected)

    @work(thread=True, exclusive=True, group="summary")
    def load_summary(self, path: Path) -> None:
        """Summarise in a thread: a long session takes a moment to fold."""
        view: RenderableType
        try:
            view = summary_view(path, self.size.width)
        except Exception as exc:  # noqa: BLE001 - a broken folder is shown as such
            view = Text(clean(f"Cannot read {path.name}: {exc}"), style="red")
        self.app.call_from_thread(self._show_summary, path, view)

    def _show_summary(self, path: Path, view: RenderableType) -> None:
        if path == self.selected:  # the cursor may have moved on meanwhile
            self.query_one("#sessions-summary", Static).update(view)
            self.shown = path

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("replay", "export"):
            return self.selected is not None
        return True

    def action_replay(self) -> None:
        if self.selected is not None:
            self.post_message(self.ReplayRequested(self.selected))

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


def summary_view(path: Path, width: int) -> Group:
    """The session's study table, its framework ratios and its warnings, as Rich renderables."""
    from benchtui.core.reporting import terminal
    from benchtui.core.reporting.model import build_report
    from benchtui.core.store.session import load_session

    return terminal.summary_view(build_report(load_session(path)), width)

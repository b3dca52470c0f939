"""The app's sessions screen: the list, the selected session's summary, replay and export from there."""

from __future__ import annotations

import io
import math
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from benchtui.screens.live import LiveScreen
from benchtui.screens.plan import PlanScreen
from benchtui.screens.sessions import CompareScreen, SessionsScreen
from support import QuietApp

DATA = Path(__file__).resolve().parent / "data"


async def wait_for(pilot, predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.1)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name in ("tiny-cpu-session", "gpu-session"):
        shutil.copytree(DATA / name, tmp_path / f"20261121T1000{len(name)}Z_{name}")
    (tmp_path / "not-a-session").mkdir()
    return tmp_path


@pytest.mark.asyncio
async def test_sessions_screen_lists_summarises_exports_and_replays(root: Path, quiet_app: QuietApp) -> None:
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+o")  # from the plan screen
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        assert len(screen.infos) == 2  # the folder that is not a session is left out
        await wait_for(pilot, lambda: screen.shown is not None and screen.shown == screen.selected)
        # export: the format modal, then the file in the session's folder
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("down", "down", "down", "enter")  # html
        target = screen.selected / "report.html"  # type: ignore[operator]
        await wait_for(pilot, target.exists)
        assert "<svg" in target.read_text()
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")  # the speed: at once, the first offered
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        assert app.replayer is not None


@pytest.mark.asyncio
async def test_sessions_screen_from_the_palette_with_no_sessions(tmp_path: Path, quiet_app: QuietApp) -> None:
    app = quiet_app(sessions_dir=tmp_path / "none")
    async with app.run_test(size=(80, 24)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Saved sessions" in titles
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await pilot.pause()
        assert not app.screen.infos and app.screen.selected is None
        assert app.screen.check_action("replay", ()) is False
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SessionsScreen))


@pytest.mark.asyncio
async def test_a_replay_request_the_app_cannot_read_is_said_and_the_app_stays(
    root: Path, quiet_app: QuietApp
) -> None:
    """r posts ReplayRequested with the selected folder; one that is no longer a session is an error notice."""
    from textual.message import Message

    posted: list[Message] = []
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(120, 40), message_hook=posted.append) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.shown is not None and screen.shown == screen.selected)
        selected = screen.selected
        assert selected is not None
        shutil.rmtree(selected)  # gone since the list was read
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause(0.2)
        requests = {
            id(m): m for m in posted if isinstance(m, SessionsScreen.ReplayRequested)
        }  # the hook sees each hop
        assert [m.path for m in requests.values()] == [selected]
        assert isinstance(app.screen, SessionsScreen) and app.is_running and app.replayer is None
        assert any("Cannot replay" in n.message for n in app._notifications)


@pytest.mark.asyncio
async def test_the_export_menu_offers_every_registered_format(
    root: Path, monkeypatch: pytest.MonkeyPatch, quiet_app: QuietApp
) -> None:
    """The menu reads the registry: a format added there is offered, and choosing it writes its file."""
    import importlib

    from benchtui.core.reporting.registry import WRITERS, Format

    monkeypatch.setitem(
        WRITERS,
        "txt",
        Format("txt", "summary.txt", "Text: one line", lambda: importlib.import_module("test_reporting")),
    )
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.shown is not None and screen.shown == screen.selected)
        await pilot.press("e")
        await pilot.pause()
        options = app.screen.query_one("#export-formats")
        assert [
            str(options.get_option_at_index(i).prompt).split()[0] for i in range(options.option_count)
        ] == ["md", "csv", "json", "html", "bencher", "gab-throughput", "gab-step-time", "txt"]
        await pilot.press("end", "enter")
        target = screen.selected / "summary.txt"  # type: ignore[operator]
        await wait_for(pilot, target.exists)


@pytest.mark.asyncio
async def test_esc_leaves_a_replay_for_the_sessions_screen_it_came_from(
    root: Path, quiet_app: QuietApp
) -> None:
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+o")  # from the plan screen
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        sessions = app.screen
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        replay = app.screen
        assert "replay-back" in {b.binding.id for b in app.active_bindings.values()}  # Back, in the footer
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is sessions)
        assert app.replayer is not None and app.replayer.cancelled and replay not in app.screen_stack
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        assert app.is_running


@pytest.mark.asyncio
async def test_the_list_says_each_status_keeps_the_id_whole_and_cuts_a_long_name(
    tmp_path: Path, quiet_app: QuietApp
) -> None:
    from benchtui.screens.sessions import NAME_W
    from sessionfactory import make_session

    long_name = "a name as long as a sentence, which says everything that this session measured"
    path = make_session(tmp_path, name=long_name, status="incomplete", runs=1, epochs=2, steps=2)
    # Started without --name (as from the plan screen): labelled with its id, which the Name leaves out.
    unnamed = "20200101T000000Z_torch-tensorflow"
    make_session(tmp_path, name=unnamed, folder=unnamed, runs=1, epochs=2, steps=2)
    app = quiet_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await wait_for(pilot, lambda: app.screen.shown is not None)
        table = app.screen.query_one(DataTable)
        assert [str(c.label) for c in table.columns.values()][:3] == [" ", "Status", "Session"]
        row = [str(cell) for cell in table.get_row(str(path))]
        assert row[1:3] == ["incomplete", path.name]  # the status first; the id whole, as the CLI takes it
        assert row[-1] == long_name[: NAME_W - 1] + "…"
        assert [str(cell) for cell in table.get_row(str(tmp_path / unnamed))][-1] == ""  # as the CLI says


@pytest.mark.asyncio
async def test_two_marked_sessions_are_compared_on_a_screen_with_a_way_back(
    root: Path, quiet_app: QuietApp
) -> None:
    shutil.copytree(root / "20261121T100016Z_tiny-cpu-session", root / "20200101T000000Z_oldest")
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.shown is not None)
        newer, older, oldest = (Path(info["path"]) for info in screen.infos)  # the list is newest first
        assert screen.check_action("compare", ()) is None  # dimmed: nothing marked yet
        await pilot.press("m")
        assert (
            screen.marked == [newer] and screen.check_action("compare", ()) is None
        )  # the same row: one session
        await pilot.press("down")
        assert screen.pair() == (older, newer)  # one marked, the other selected: the older is A
        await pilot.press("m")
        assert screen.marked == [newer, older] and screen.pair() == (older, newer)
        table = screen.query_one(DataTable)
        assert [str(table.get_row(str(p))[0]) for p in (newer, older)] == ["✓", "✓"]
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        await wait_for(pilot, lambda: compare.comparison is not None)
        await pilot.pause()
        printed = Console(width=110, file=io.StringIO(), color_system=None)
        printed.print(compare.query_one("#compare-view", Static).content)
        text = printed.file.getvalue()  # type: ignore[attr-defined]
        # What benchtui compare prints: its table (newer B against older A), and how to read B/A.
        assert f"B {newer.name}  vs  A {older.name}" in text and "B/A is the ratio of times" in text
        assert "compare-back" in {b.binding.id for b in app.active_bindings.values()}
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("down", "m")  # a third mark replaces the first
        assert screen.marked == [older, oldest]
        assert [str(table.get_row(str(p))[0]) for p in (newer, older, oldest)] == ["", "✓", "✓"]
        await pilot.press("m")  # and a marked one is unmarked
        assert screen.marked == [older]


@pytest.mark.asyncio
async def test_the_summary_is_drawn_at_the_width_below_the_list(
    root: Path, monkeypatch: pytest.MonkeyPatch, quiet_app: QuietApp
) -> None:
    """Not the screen's width: the summary's padding and scroll bar take columns, and a table drawn
    wider than its room loses its right edge."""
    from benchtui.screens import sessions

    widths: list[int] = []
    real = sessions.summary_view

    def recording(path: Path, width: int):
        widths.append(width)
        return real(path, width)

    monkeypatch.setattr(sessions, "summary_view", recording)
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(80, 24)) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.shown is not None)
        detail = screen.query_one("#sessions-detail")
        assert widths and set(widths) == {detail.scrollable_content_region.width}
        # At that width nothing is cut: the study's table (77 columns at the least) fits an 80-column screen.
        printed = Console(width=200, file=io.StringIO(), color_system=None)
        printed.print(real(screen.selected, widths[0]), width=widths[0])  # type: ignore[arg-type]
        assert max(map(len, printed.file.getvalue().splitlines())) <= widths[0]  # type: ignore[attr-defined]


# -- the list follows the folder; replay at a speed (issue 30) -------------------------------------------
@pytest.mark.asyncio
async def test_replay_from_the_sessions_screen_offers_a_speed(root: Path, quiet_app: QuietApp) -> None:
    from benchtui.screens.sessions import REPLAY_SPEEDS, ReplaySpeed

    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(100, 30)) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.infos)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplaySpeed))
        options = app.screen.query_one("#replay-speeds")
        assert options.option_count == len(REPLAY_SPEEDS) > 2
        assert [s for s, _ in REPLAY_SPEEDS][:2] == [math.inf, 1.0]
        await pilot.press("escape")  # no replay
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        assert app.replayer is None
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplaySpeed))
        ten = [s for s, _ in REPLAY_SPEEDS].index(10.0)
        await pilot.press(*["down"] * ten, "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        assert app.replayer is not None and app.replayer.speed == 10.0 and app.screen.speed == 10.0
        assert "replay ×10" in app.screen.query_one("#status").render().plain


@pytest.mark.asyncio
async def test_the_list_follows_the_folder_a_session_added_or_changed(
    root: Path, monkeypatch: pytest.MonkeyPatch, quiet_app: QuietApp
) -> None:
    """A cheap poll (a stat of the folder and of each session's two files, re-armed once done) shows a new
    session and a changed status without a key; idle, it is the only timer, at its period."""
    import json

    from benchtui.screens import sessions
    from sessionfactory import make_session
    from test_ui_replay import Wakeups

    monkeypatch.setattr(sessions, "POLL_S", 0.3)
    wakeups = Wakeups(monkeypatch)
    app = quiet_app(sessions_dir=root)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.shown is not None)
        screen = app.screen
        before = [i["name"] for i in screen.infos]
        screen.action_mark()  # a mark stays on its session through a reload
        marked = list(screen.marked)
        made = make_session(root, folder="29990101T000000Z_newer", runs=1, epochs=1, steps=2)
        await wait_for(pilot, lambda: len(screen.infos) == len(before) + 1, timeout=10)
        assert screen.infos[0]["name"] == "29990101T000000Z_newer" and screen.marked == marked
        table = screen.query_one("DataTable")
        assert table.get_row_at(0)[2].plain == "29990101T000000Z_newer"
        meta_path = made / "session.json"
        meta = json.loads(meta_path.read_text())
        meta["status"] = "interrupted"
        meta_path.write_text(json.dumps(meta))
        await wait_for(pilot, lambda: screen.infos[0]["status"] == "interrupted", timeout=10)
        assert table.get_row_at(0)[1].plain == "interrupted"
        await pilot.pause(1.0)  # the reload's redraw done
        timers, _ = await wakeups.over(1.0)
        assert set(timers) <= {"sessions-poll"} and 1 <= len(timers) <= 5, timers

"""The app's sessions screen: the list, the selected session's summary, replay and export from there."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from benchtui.app import make_app
from benchtui.screens.live import LiveScreen
from benchtui.screens.plan import GpuProbe
from benchtui.screens.sessions import SessionsScreen

DATA = Path(__file__).resolve().parent / "data"
NO_GPU = GpuProbe((), "NVML unavailable: test")


async def wait_for(pilot, predicate, timeout: float = 30.0) -> None:  # noqa: ANN001
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
async def test_sessions_screen_lists_summarises_exports_and_replays(root: Path) -> None:
    app = make_app(None, sessions_dir=str(root), use_nvml=False, probe=NO_GPU)
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
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        assert app.replayer is not None


@pytest.mark.asyncio
async def test_sessions_screen_from_the_palette_with_no_sessions(tmp_path: Path) -> None:
    app = make_app(None, sessions_dir=str(tmp_path / "none"), use_nvml=False, probe=NO_GPU)
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
async def test_a_replay_request_the_app_cannot_read_is_said_and_the_app_stays(root: Path) -> None:
    """r posts ReplayRequested with the selected folder; one that is no longer a session is an error notice."""
    from textual.message import Message

    posted: list[Message] = []
    app = make_app(None, sessions_dir=str(root), use_nvml=False, probe=NO_GPU)
    async with app.run_test(size=(120, 40), message_hook=posted.append) as pilot:
        app.show_sessions()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.shown is not None and screen.shown == screen.selected)
        selected = screen.selected
        assert selected is not None
        shutil.rmtree(selected)  # gone since the list was read
        await pilot.press("r")
        await pilot.pause(0.2)
        requests = {
            id(m): m for m in posted if isinstance(m, SessionsScreen.ReplayRequested)
        }  # the hook sees each hop
        assert [m.path for m in requests.values()] == [selected]
        assert isinstance(app.screen, SessionsScreen) and app.is_running and app.replayer is None
        assert any("Cannot replay" in n.message for n in app._notifications)


@pytest.mark.asyncio
async def test_the_export_menu_offers_every_registered_format(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The menu reads the registry: a format added there is offered, and choosing it writes its file."""
    from benchtui.core.reporting.registry import WRITERS, Writer

    monkeypatch.setitem(WRITERS, "txt", Writer("txt", "summary.txt", "Text: one line", "test_reporting"))
    app = make_app(None, sessions_dir=str(root), use_nvml=False, probe=NO_GPU)
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
        ] == [
            "md",
            "csv",
            "json",
            "html",
            "txt",
        ]
        await pilot.press("end", "enter")
        target = screen.selected / "summary.txt"  # type: ignore[operator]
        await wait_for(pilot, target.exists)

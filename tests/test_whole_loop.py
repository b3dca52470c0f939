"""A stop signal while a headless run's event loop is being made waits until the loop is whole
(``session_run.run_whole`` under ``EarlySignals.held``): no half-made loop whose finaliser prints a
traceback, no coroutine left un-awaited. CI once saw both on stderr (test_early_signals, SIGTERM during the
CPU measurement's ``asyncio.run``); here the signal is sent from inside the loop's making, every time.
"""

from __future__ import annotations

import asyncio
import gc
import os
import selectors
import signal
import sys
from typing import Any

import pytest

from benchtui.commands.run import EarlySignals, Interrupted
from benchtui.core.running.session_run import run_whole


def _signalled_selector() -> Any:
    """The loop's selector, made after a SIGTERM to this process: its handler runs inside the loop's making."""
    os.kill(os.getpid(), signal.SIGTERM)
    return _REAL_SELECTOR()


_REAL_SELECTOR = selectors.DefaultSelector


@pytest.mark.parametrize("held", [True, False], ids=["held", "unheld"])
def test_a_signal_while_the_loop_is_made_is_raised_once_it_is_whole(
    monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(
        sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}")
    )
    called: list[bool] = []

    async def main() -> None:
        called.append(True)

    with EarlySignals() as signals:
        hold = signals.held if held else None
        monkeypatch.setattr(selectors, "DefaultSelector", _signalled_selector)
        try:
            with pytest.raises(Interrupted):
                run_whole(main, hold) if hold else run_whole(main)
        finally:
            monkeypatch.setattr(selectors, "DefaultSelector", _REAL_SELECTOR)
    gc.collect()
    if held:
        assert unraisable == [] and called == [], unraisable
    else:  # what the code did before: the signal inside the loop's making leaves a broken loop behind
        assert any("_ssock" in u for u in unraisable), unraisable


def test_a_signal_while_main_runs_closes_the_loop_and_its_threads() -> None:
    """Interrupted inside the running loop (the CPU measurement waits on a thread): raised, the loop closed."""
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        await asyncio.to_thread(lambda: os.kill(os.getpid(), signal.SIGTERM))
        await asyncio.sleep(5)

    with EarlySignals() as signals:
        with pytest.raises(Interrupted):
            run_whole(main, signals.held)
    assert loops and loops[0].is_closed()

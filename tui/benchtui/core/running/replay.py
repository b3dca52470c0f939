"""Replaying a recorded session: its events fed into a fresh SessionModel at the recorded pace.

A ``Replayer`` is a ``SessionSource`` like the engine, so the live screen can show a
session recorded elsewhere, for example on a GPU machine. It never starts a process.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchtui.core.model.session_model import SessionModel
from benchtui.core.running.control import Pausable
from benchtui.core.running.source import Listener, SessionSource
from benchtui.core.store.session import EventCheck, SessionFolder

# Recorded gaps longer than this (seconds) are shortened to it: a framework import or a
# pause between runs would otherwise leave the screen still for half a minute.
MAX_GAP_S = 2.0
# Events applied in one go before yielding to the loop, so a burst never freezes a UI.
BURST = 512


def schedule(
    events: Iterable[dict[str, Any]], max_gap: float = MAX_GAP_S
) -> Iterator[tuple[float, dict[str, Any]]]:
    """Pair each event with its offset in recorded seconds from the first timed event.

    The ``t`` fields are seconds on the recording machine's monotonic clock, shared by
    runner and parent events. A gap is clamped to ``[0, max_gap]``: events written a
    little out of order (a GPU sample that raced a runner line) never step back in
    time, and long idle stretches are shortened. Events without a usable ``t`` keep
    the offset of the event before them.
    """
    offset = 0.0
    previous: float | None = None
    for event in events:
        t = event.get("t")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
            if previous is not None:
                offset += min(max(t - previous, 0.0), max_gap)
            previous = float(t)
        yield offset, event


class Replayer(Pausable):
    """Plays a session folder's ``events.jsonl`` into ``self.model`` at ``speed`` × recorded pace."""

    def __init__(
        self,
        path: str | Path,
        speed: float = 1.0,
        listener: Listener | None = None,
        max_gap: float = MAX_GAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not speed > 0:
            raise ValueError(f"replay speed must be positive, got {speed}")
        self.folder = SessionFolder.open(path)
        self.path = self.folder.path
        self.warnings: list[str] = []
        self.meta = self.folder.read_meta(self.warnings)
        self.plan = self.folder.read_plan(self.meta)  # the same checks as loading
        host = self.meta.get("host")
        self.model = SessionModel(self.plan, host=host if isinstance(host, dict) else None)
        self.speed = speed
        self.listener = listener
        self.max_gap = max_gap
        self.status = "pending"  # pending, running, then the recorded session's status
        self.recorded_s = 0.0  # recorded seconds played so far (after gap capping)
        self._clock = clock
        super().__init__()  # pause, resume, cancel: what is played stays in the model

    # -- what a view reads (SessionSource) ---------------------------------------------
    is_replay = True
    runner_active = False  # a recording has no process to stop

    def log_path(self, run_id: str) -> Path:
        return self.folder.log_path(run_id)

    def stop_current(self) -> None:
        """Nothing to stop: the recorded run goes on as it went."""

    def skip_model(self) -> None:
        """Nothing to skip: a replay shows the whole recording."""

    # -- playback -------------------------------------------------------------------------
    def _apply(self, event: dict[str, Any]) -> None:
        self.model.apply(event)
        if self.listener is not None:
            self.listener(event)

    async def run(self) -> str:
        """Play every event; return the recorded session's status ("interrupted" if cancelled)."""
        self.status = "running"
        started = self._clock()
        paused_for = 0.0  # wall seconds spent paused, added to every later deadline
        burst = 0
        check = EventCheck()
        for offset, event in schedule(self.folder.events(self.warnings, check=check), self.max_gap):
            # Wait for the event's time, in short sleeps so pause and cancel act at once.
            while not self._cancelled:
                if self.paused:
                    pause_start = self._clock()
                    await self._resume.wait()
                    paused_for += self._clock() - pause_start
                    continue
                if not math.isfinite(self.speed):
                    break
                delay = started + paused_for + offset / self.speed - self._clock()
                if delay <= 0.001:
                    break
                await asyncio.sleep(min(delay, 0.25))
                burst = 0
            if self._cancelled:
                break
            self.recorded_s = offset
            self._apply(event)
            burst += 1
            if burst >= BURST:
                burst = 0
                await asyncio.sleep(0)
        if not self._cancelled:
            self.warnings += self.folder.settle(self.meta, self.model, check)
        self.status = "interrupted" if self._cancelled else str(self.meta.get("status") or "complete")
        return self.status


def replay_all(path: str | Path) -> Replayer:
    """A replayer with every event already applied (no waiting): the session's final state."""
    replayer = Replayer(path)
    check = EventCheck()
    for _, event in schedule(replayer.folder.events(replayer.warnings, check=check), replayer.max_gap):
        replayer._apply(event)
    replayer.warnings += replayer.folder.settle(replayer.meta, replayer.model, check)
    replayer.status = str(replayer.meta.get("status") or "complete")
    return replayer


if TYPE_CHECKING:
    _source: type[SessionSource] = Replayer  # mypy checks that the live screen can drive a replay

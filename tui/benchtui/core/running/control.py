"""Pause, resume and cancel, shared by the engine and the replayer so screens drive either alike."""

from __future__ import annotations

import asyncio


class Pausable:
    """A queue that can be held between items and cancelled for good."""

    def __init__(self) -> None:
        self._resume = asyncio.Event()
        self._resume.set()
        self._cancelled = False

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def pause(self) -> None:
        """Hold the queue: what is in progress finishes, the next item waits."""
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()

    def cancel(self) -> None:
        """Stop for good; a paused queue is released so it can see it."""
        self._cancelled = True
        self._resume.set()

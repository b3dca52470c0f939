"""``SessionSource``: what a view may ask of a session being run (the Engine) or played back (the Replayer).

The live screen is written against this protocol only, so it drives either the same way
and never asks which one it has; ``is_replay`` and ``runner_active`` say what differs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from benchtui.core.model.session_model import SessionModel

Listener = Callable[[dict[str, Any]], None]


@runtime_checkable
class SessionSource(Protocol):
    """A session's events folded into ``model`` as they come, with the controls a view offers."""

    #: Called with every event after the model has applied it (the live screen marks itself dirty).
    listener: Listener | None

    @property
    def model(self) -> SessionModel: ...

    @property
    def status(self) -> str:
        """pending, running, then the session's status (complete, failed, incomplete, interrupted)."""
        ...

    @property
    def meta(self) -> dict[str, Any]:
        """session.json's contents; while a session is written, the dict being filled in."""
        ...

    @property
    def path(self) -> Path:
        """The session folder."""
        ...

    @property
    def is_replay(self) -> bool:
        """True when the events are a recording played back: no runner, nothing to stop."""
        ...

    @property
    def runner_active(self) -> bool:
        """A runner process is going on now and can be stopped (never during a replay)."""
        ...

    @property
    def paused(self) -> bool: ...

    @property
    def cancelled(self) -> bool: ...

    def log_path(self, run_id: str) -> Path:
        """Where a run's stdout and stderr are (or were) written."""
        ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def cancel(self) -> None: ...

    def stop_current(self) -> None:
        """Stop the run in progress; it is recorded as stopped and the queue goes on."""
        ...

    def skip_model(self) -> None:
        """Stop the current run and skip its model's remaining runs."""
        ...

    async def run(self) -> str:
        """Go through the whole session; return its final status."""
        ...
